"""RocketMQ 4.9.8's flush and clean-up settings, under virtual time with real files: ``flushCommitLogLeastPages`` and
``flushCommitLogThoroughInterval`` (CommitLog.FlushRealTimeService), ``flushConsumeQueueLeastPages`` and
``flushConsumeQueueThoroughInterval`` (DefaultMessageStore.FlushConsumeQueueService, the only round that writes the
checkpoint), a clean stop that syncs everything, SYNC_FLUSH sends that ignore the least pages,
``deleteConsumeQueueFilesInterval`` (CleanConsumeQueueService) and ``checkCRCOnRecover``."""

from __future__ import annotations

import datetime
import math
from pathlib import Path

import attrs
import trio
import trio.testing

from store.mapped_file import PAGE_SIZE
from store.message_store import MessageStore
from store.results import PutStatus
from store.store_config import BrokerRole, FlushDiskType
from tests.store.store_helpers import FakeClock, message, open_store

#: No round of the other loop inside a test's window.
NEVER = 600_000


def _unsynced(store: MessageStore) -> int:
    return store.max_phy_offset - store.flush_watermark


async def _first_rounds_done(store: MessageStore) -> None:
    """Past the CommitLog loop's first round, which is thorough (Java's ``lastFlushTimestamp`` starts at 0)."""
    await trio.sleep(0.6)


async def test_a_commit_log_write_under_least_pages_waits_and_one_of_four_pages_is_flushed(
    tmp_path: Path, autojump_clock: trio.testing.MockClock
) -> None:
    """MappedFile.isAbleToFlush counts whole 4 KiB pages between the flushed and the written position: three
    pages stay in the page cache round after round, the write that makes it four is synced at the next round."""
    store = open_store(tmp_path, mapped_file_size_commit_log=1 << 20, flush_commit_log_thorough_interval=NEVER,
                       flush_interval_consume_queue=NEVER)  # fmt: skip
    async with trio.open_nursery() as nursery:
        await nursery.start(store.run)
        await _first_rounds_done(store)
        while store.max_phy_offset < 3 * PAGE_SIZE:
            store.append(message(body=bytes(1000)))
        assert store.max_phy_offset // PAGE_SIZE == 3
        await trio.sleep(5)  # ten rounds
        assert store.flush_watermark == 0
        while store.max_phy_offset < 4 * PAGE_SIZE:
            store.append(message(body=bytes(1000)))
        while _unsynced(store):
            await trio.sleep(0.1)
        assert trio.current_time() < NEVER / 1000
        nursery.cancel_scope.cancel()


async def test_a_small_commit_log_write_is_flushed_once_the_thorough_interval_passed(
    tmp_path: Path, autojump_clock: trio.testing.MockClock
) -> None:
    """flushCommitLogThoroughInterval (10 s): a round at least that long after the last thorough one flushes every
    unsynced byte, so a quiet broker's last messages reach the disk within about 10 s."""
    store = open_store(tmp_path, mapped_file_size_commit_log=1 << 20, flush_interval_consume_queue=NEVER)
    async with trio.open_nursery() as nursery:
        await nursery.start(store.run)
        await _first_rounds_done(store)
        put = await store.put(message(body=b"small"))
        assert put.status is PutStatus.PUT_OK
        await trio.sleep(9.3)  # the last round before the 10 s mark
        assert store.flush_watermark == 0
        while _unsynced(store):
            await trio.sleep(0.1)
        assert trio.current_time() >= 9.9
        nursery.cancel_scope.cancel()


async def test_flush_settings_are_read_at_every_round(tmp_path: Path, autojump_clock: trio.testing.MockClock) -> None:
    """FlushRealTimeService reads its settings from MessageStoreConfig at every loop: a store config with
    ``flushCommitLogLeastPages=0`` (what UPDATE_BROKER_CONFIG sets) flushes the small write at the next round."""
    store = open_store(tmp_path, mapped_file_size_commit_log=1 << 20, flush_commit_log_thorough_interval=NEVER,
                       flush_interval_consume_queue=NEVER)  # fmt: skip
    async with trio.open_nursery() as nursery:
        await nursery.start(store.run)
        await _first_rounds_done(store)
        store.append(message(body=b"small"))
        await trio.sleep(3)
        assert store.flush_watermark == 0
        store.config = attrs.evolve(store.config, flush_commit_log_least_pages=0)
        while _unsynced(store):
            await trio.sleep(0.1)
        nursery.cancel_scope.cancel()


async def test_a_clean_stop_flushes_everything_whatever_the_least_pages(
    tmp_path: Path, autojump_clock: trio.testing.MockClock
) -> None:
    """The flush services' shutdown flushes with least pages 0 (CommitLog.FlushRealTimeService after its loop,
    FlushConsumeQueueService.doFlush(RETRY_TIMES_OVER)): nothing a clean stop leaves is unsynced, and the
    checkpoint covers it, so the next start scans nothing again."""
    store = open_store(tmp_path, mapped_file_size_commit_log=1 << 20, flush_commit_log_thorough_interval=NEVER,
                       flush_interval_consume_queue=NEVER)  # fmt: skip
    async with trio.open_nursery() as nursery:
        await nursery.start(store.run)
        await _first_rounds_done(store)
        store.append(message(body=b"small"))
        end = store.max_phy_offset
        await trio.sleep(2)
        assert store.flush_watermark == 0
        nursery.cancel_scope.cancel()
    assert store.commitlog.queue.flushed_offset == end
    assert all(mf.flushed_position == mf.wrote_position for cq in store.consume_queues.values()
               for mf in cq.queue.files)  # fmt: skip
    reopened = open_store(tmp_path, mapped_file_size_commit_log=1 << 20)
    try:
        assert not reopened.abnormal_recovery
        assert reopened.checkpoint is not None and reopened.checkpoint.safe_offset == end
        assert reopened.recovery_start == end
    finally:
        reopened.close()


async def test_sync_flush_sends_ignore_the_least_pages(tmp_path: Path, autojump_clock: trio.testing.MockClock) -> None:
    """GroupCommitService flushes with least pages 0: a 5-byte SYNC_FLUSH send is durable when answered."""
    store = open_store(tmp_path, flush_disk_type=FlushDiskType.SYNC_FLUSH, mapped_file_size_commit_log=1 << 20,
                       flush_commit_log_thorough_interval=NEVER, flush_interval_consume_queue=NEVER)  # fmt: skip
    async with trio.open_nursery() as nursery:
        await nursery.start(store.run)
        await _first_rounds_done(store)
        autojump_clock.autojump_threshold = math.inf  # a real sync takes real time: no jumping past its deadline
        put = await store.put(message(body=b"small"))
        assert put.status is PutStatus.PUT_OK
        assert store.flush_watermark >= put.append.end_offset
        nursery.cancel_scope.cancel()


async def test_consume_queue_flush_keeps_least_pages_and_moves_the_checkpoint_only_when_thorough(
    tmp_path: Path, autojump_clock: trio.testing.MockClock
) -> None:
    """FlushConsumeQueueService: every flushIntervalConsumeQueue (1 s) a queue with 2 unsynced pages is synced,
    fewer wait; the checkpoint is written only by the thorough round, flushConsumeQueueThoroughInterval (60 s) after
    the last one (ours syncs the CommitLog and the index in that round too, so the checkpoint's offset is durable)."""
    store = open_store(tmp_path, mapped_file_size_commit_log=1 << 20, mapped_file_size_consume_queue=300_000 * 20,
                       flush_commit_log_thorough_interval=NEVER)  # fmt: skip
    async with trio.open_nursery() as nursery:
        await nursery.start(store.run)
        await trio.sleep(1.5)  # past the first ConsumeQueue round, thorough: nothing to sync, no checkpoint
        assert store.flush_service.checkpoints == 0
        cp = store.checkpoint
        assert cp is not None
        store.append(message(body=b"one"))
        cq = store.consume_queues[("TopicTest", 0)]
        await trio.sleep(5)
        assert cq.queue.flushed_offset == 0 and cq.queue.max_offset == 20
        for _ in range(2 * PAGE_SIZE // 20):  # two pages of entries
            store.append(message(body=b"x"))
        while cq.queue.flushed_offset < 2 * PAGE_SIZE:
            await trio.sleep(0.1)
        assert store.flush_service.checkpoints == 0 and cp.safe_offset == 0
        while store.flush_service.checkpoints == 0:
            await trio.sleep(1)
        assert trio.current_time() >= 60.9  # the thorough round 60 s after the first
        assert cp.safe_offset == store.max_phy_offset
        assert cq.queue.flushed_offset == cq.queue.max_offset
        nursery.cancel_scope.cancel()


def _local_ms(hour: int) -> int:
    return int(datetime.datetime(2024, 3, 1, hour, 30).timestamp() * 1000)


async def test_consume_queue_files_are_deleted_delete_consume_queue_files_interval_apart(
    tmp_path: Path, autojump_clock: trio.testing.MockClock
) -> None:
    """CleanConsumeQueueService sleeps deleteConsumeQueueFilesInterval (100 ms) after each queue that lost expired
    files: three queues below the CommitLog's new minimum take at least two pauses, 0 takes none."""
    store = open_store(tmp_path, now_ms=FakeClock(_local_ms(hour=12)), disk_usage_ratio=lambda _path: 0.1)
    for i in range(60):
        store.append(message(body=bytes(300), queue_id=i % 3))
    store.flush_all_blocking()
    gone = store.commitlog.queue.files[len(store.commitlog.queue.files) // 2 - 1].end_offset
    async with store.disk_lock:
        taken = store.commitlog.queue.take_first(len(store.commitlog.queue.files) // 2)
    for mf in taken:
        mf.destroy()
    assert store.min_phy_offset == gone
    counts = {key: len(cq.queue.files) for key, cq in store.consume_queues.items()}
    start = trio.current_time()
    assert await store.retention.check_once() == 0
    assert trio.current_time() - start >= 0.2 - 1e-9
    assert all(len(cq.queue.files) < counts[key] for key, cq in store.consume_queues.items())
    store.close()


def test_check_crc_on_recover_off_keeps_a_record_whose_body_was_corrupted(tmp_path: Path) -> None:
    """checkCRCOnRecover (default true, tests/store/test_recovery.py::
    test_flipped_byte_in_the_tail_cuts_the_log_at_the_last_good_record) ends the log at a body whose CRC fails;
    false skips the check, as Java's checkMessageAndReturnSize does, and the record stays."""
    for check, kept in ((True, 1), (False, 3)):
        root = tmp_path / str(check)
        store = open_store(root, mapped_file_size_commit_log=1 << 20)
        phys = [store.append(message(body=b"body-%d" % i * 20)).phy_offset for i in range(3)]
        store.abandon()  # a crash before any flush: recovery scans from the start
        segment = root / "commitlog" / f"{0:020d}"
        data = bytearray(segment.read_bytes())
        data[phys[1] + 100] ^= 0x5A  # inside the second body
        segment.write_bytes(bytes(data))
        store = open_store(root, mapped_file_size_commit_log=1 << 20, check_crc_on_recover=check)
        try:
            assert store.abnormal_recovery
            assert store.max_offset_in_queue("TopicTest", 0) == kept
        finally:
            store.close()


async def test_sync_flush_syncs_bytes_no_send_waits_for_within_the_10_ms_idle_round(
    tmp_path: Path, autojump_clock: trio.testing.MockClock
) -> None:
    """GroupCommitService waits at most 10 ms for a request and, with none to serve, still flushes whatever is
    unsynced (CommitLog.java ``waitForRunning(10)`` then ``doCommit``'s ``flush(0)``; a ``WAIT=false`` send only
    wakes it): under SYNC_FLUSH a WAIT=false send, an internal append (a delay re-put, a transaction op, a pop
    checkpoint) and a batch are on disk within about 10 ms, not at a periodic flush round. An idle store syncs
    nothing."""
    store = open_store(tmp_path, flush_disk_type=FlushDiskType.SYNC_FLUSH, mapped_file_size_commit_log=1 << 20,
                       flush_interval_commit_log=NEVER, flush_interval_consume_queue=NEVER)  # fmt: skip
    async with trio.open_nursery() as nursery:
        await nursery.start(store.run)
        writes = (
            lambda: store.put(message(body=b"no wait"), wait_flush=False),
            lambda: store.put_batch([message(body=b"batch-1"), message(body=b"batch-2")], wait_flush=False),
        )
        for write in writes:
            result = await write()
            assert result.status is PutStatus.PUT_OK
            end = result.append.end_offset
            await trio.sleep(0.011)
            async with store.disk_lock:  # a sync under way ends first
                assert store.flush_watermark >= end
        store.append(message(body=b"re-put"))  # no put wait at all, as the broker's own writes
        end = store.max_phy_offset
        await trio.sleep(0.011)
        async with store.disk_lock:
            assert store.flush_watermark == end
        rounds = store.group_commit.rounds
        await trio.sleep(1)
        assert store.group_commit.rounds == rounds  # nothing unsynced: no fdatasync every 10 ms
        nursery.cancel_scope.cancel()


async def test_a_sync_flush_slave_syncs_replicated_bytes_within_the_10_ms_idle_round(
    tmp_path: Path, autojump_clock: trio.testing.MockClock
) -> None:
    """A slave's GroupCommitService runs the same idle ``flush(0)`` (CommitLog.java): the master's bytes it appends
    (``HAService.HAClient`` through ``CommitLog.appendData``, which registers no request) are on its disk within
    about 10 ms under SYNC_FLUSH."""
    master = open_store(tmp_path / "master", mapped_file_size_commit_log=1 << 20)
    for i in range(3):
        master.append(message(body=b"m%d" % i))
    data = bytes(master.commitlog.read_from(0, master.max_phy_offset) or b"")
    master.close()
    slave = open_store(tmp_path / "slave", broker_role=BrokerRole.SLAVE, flush_disk_type=FlushDiskType.SYNC_FLUSH,
                       mapped_file_size_commit_log=1 << 20, flush_interval_commit_log=NEVER,
                       flush_interval_consume_queue=NEVER)  # fmt: skip
    async with trio.open_nursery() as nursery:
        await nursery.start(slave.run)
        assert slave.replica is not None
        slave.replica.append(0, data)
        await trio.sleep(0.011)
        async with slave.disk_lock:
            assert slave.flush_watermark == len(data)
        nursery.cancel_scope.cancel()


async def test_a_sync_flush_batch_sent_without_wait_is_synced_within_the_10_ms_idle_round(
    tmp_path: Path, autojump_clock: trio.testing.MockClock
) -> None:
    """A ``WAIT=false`` SEND_BATCH_MESSAGE reaches the store through ``append_entries`` (processors/send.py), not
    ``append_batch``: GroupCommitService's idle ``flush(0)`` after ``waitForRunning(10)`` (CommitLog.java) syncs it
    within about 10 ms all the same, in the C build and the pure-Python one."""
    store = open_store(tmp_path, flush_disk_type=FlushDiskType.SYNC_FLUSH, mapped_file_size_commit_log=1 << 20,
                       flush_interval_commit_log=NEVER, flush_interval_consume_queue=NEVER)  # fmt: skip
    async with trio.open_nursery() as nursery:
        await nursery.start(store.run)
        template = message(body=b"")
        appended = store.append_entries(template, [(b"entry-1", "WAIT\x01false", 0), (b"entry-2", "", 0)])
        await trio.sleep(0.011)
        async with store.disk_lock:  # a sync under way ends first
            assert store.flush_watermark >= appended.end_offset
        nursery.cancel_scope.cancel()
