"""Retention and disk safety: expired segments go at deleteWhen or at once on a full disk, queue minimums follow,
writes are refused above the critical ratio with a clear reason, earlier data stays readable, and no segment goes
before the checkpoint covers it."""

from __future__ import annotations

import datetime
import itertools
import os
import threading
from pathlib import Path

import pytest
import trio
import trio.testing

from remoting.codec.message import decode_record
from store.errors import ServiceNotAvailableError, StoreCorruptError
from store.maintenance import clean_expired_consume_queues
from store.mapped_file import MappedFile
from store.message_store import MessageStore
from store.results import GetStatus
from store.store_config import FlushDiskType
from tests.store.store_helpers import FakeClock, message, open_store


class Disk:
    def __init__(self, ratio: float) -> None:
        self.ratio = ratio

    def __call__(self, _path: Path) -> float:
        return self.ratio


async def test_disk_above_critical_ratio_refuses_writes_and_keeps_data_readable(
    tmp_path: Path, autojump_clock: trio.testing.MockClock
) -> None:
    disk = Disk(0.5)
    # No flush timer inside the window: a flush thread would let the virtual clock run ahead of it.
    store = open_store(
        tmp_path,
        disk_usage_ratio=disk,
        clean_resource_interval=10_000,
        flush_interval_commit_log=60_000,
        flush_interval_consume_queue=60_000,
    )
    async with trio.open_nursery() as nursery:
        await nursery.start(store.run)
        first = await store.put(message(body=b"before"))
        disk.ratio = 0.95
        await trio.sleep(10.5)
        with pytest.raises(ServiceNotAvailableError, match="disk full") as info:
            store.append(message())
        assert info.value.put_status == "SERVICE_NOT_AVAILABLE"
        record = store.look_message_by_offset(first.append.phy_offset)
        assert record is not None and decode_record(record).body == b"before"
        assert store.get("TopicTest", 0, 0, 32).status is GetStatus.FOUND
        disk.ratio = 0.5
        await trio.sleep(10)
        await store.put(message())
        nursery.cancel_scope.cancel()


async def test_expired_segments_are_deleted_at_delete_when_and_queue_minimums_follow(tmp_path: Path) -> None:
    clock = FakeClock()
    disk = Disk(0.1)
    store = open_store(tmp_path, now_ms=clock, disk_usage_ratio=disk, file_reserved_time=72)
    phys = [store.append(message(body=bytes(300), queue_id=i % 2)).phy_offset for i in range(40)]
    store.flush_all_blocking()
    files_before = len(store.commitlog.queue.files)
    assert files_before >= 4
    # Not yet at the deletion hour and disk fine: nothing goes.
    clock.now = _local_ms(hour=3)
    assert await store.retention.check_once() == 0
    # At 04:xx, segments older than 72 h go (all but the newest); ages come from the files' mtimes.
    old = (clock.now - 73 * 3_600_000) / 1000
    for mf in store.commitlog.queue.files:
        os.utime(mf.path, (old, old))
    clock.now = _local_ms(hour=4)
    deleted = await store.retention.check_once()
    assert deleted == files_before - 1
    min_phy = store.min_phy_offset
    for queue_id in (0, 1):
        lo = store.min_offset_in_queue("TopicTest", queue_id)
        entry = store.consume_queue("TopicTest", queue_id).entry(lo)
        assert entry is not None and entry[0] >= min_phy
        r = store.get("TopicTest", queue_id, 0, 32)
        assert (r.status, r.next_begin_offset) == (GetStatus.OFFSET_TOO_SMALL, lo)
        assert store.get("TopicTest", queue_id, lo, 32).status is GetStatus.FOUND
    assert store.look_message_by_offset(phys[0]) is None
    store.close()


async def test_full_disk_deletes_expired_segments_without_waiting_for_delete_when(tmp_path: Path) -> None:
    clock = FakeClock(_local_ms(hour=12))
    disk = Disk(0.8)  # above diskMaxUsedSpaceRatio (75 %), below the forcible and critical ratios
    store = open_store(tmp_path, now_ms=clock, disk_usage_ratio=disk)
    for _ in range(30):
        store.append(message(body=bytes(300)))
    store.flush_all_blocking()
    assert await store.retention.check_once() == 0  # nothing expired yet
    old = (clock.now - 73 * 3_600_000) / 1000
    for mf in store.commitlog.queue.files:
        os.utime(mf.path, (old, old))
    assert await store.retention.check_once() >= 1
    store.close()


async def test_disk_above_forcible_ratio_deletes_even_unexpired_segments(tmp_path: Path) -> None:
    clock = FakeClock(_local_ms(hour=12))
    store = open_store(tmp_path, now_ms=clock, disk_usage_ratio=Disk(0.87))
    for _ in range(30):
        store.append(message(body=bytes(300)))
    store.flush_all_blocking()
    assert await store.retention.check_once() >= 1
    assert store.disk_full_reason is None
    store.append(message())
    store.close()


async def test_the_first_pass_runs_a_minute_after_the_start_and_the_disk_check_after_a_second(
    tmp_path: Path, autojump_clock: trio.testing.MockClock
) -> None:
    """4.9.8 schedules cleanFilesPeriodically 60 s after the start and CleanCommitLogService.isSpaceFull 1 s after
    it, then every 10 s (store/.../DefaultMessageStore.java addScheduleTask): a broker restarted on a full disk
    refuses writes within a second but deletes no segment in its first minute. Ours deleted at once."""
    store, files = _segments_at_noon(tmp_path, Disk(0.95))
    async with trio.open_nursery() as nursery:
        await nursery.start(store.run)
        await trio.sleep(1.5)
        assert store.disk_full_reason is not None
        await trio.sleep(58)
        assert store.commitlog.queue.files == files
        await trio.sleep(1)
        assert len(store.commitlog.queue.files) < len(files)
        nursery.cancel_scope.cancel()


def _segments_at_noon(tmp_path: Path, disk: Disk) -> tuple[MessageStore, list[MappedFile]]:
    """A store at 12:30 on ``disk`` with three or more flushed CommitLog segments, and their files. No flush timer
    inside a test's window (a flush thread would let the virtual clock run ahead of it)."""
    store = open_store(tmp_path, now_ms=FakeClock(_local_ms(hour=12)), disk_usage_ratio=disk,
                       flush_interval_commit_log=60_000, flush_interval_consume_queue=60_000)  # fmt: skip
    for _ in range(30):
        store.append(message(body=bytes(300)))
    store.flush_all_blocking()
    files = list(store.commitlog.queue.files)
    assert len(files) >= 3
    return store, files


def _local_ms(hour: int) -> int:
    return int(datetime.datetime(2026, 1, 15, hour, 30).timestamp() * 1000)


async def test_consume_queues_destroyed_as_expired_or_with_their_topic_are_reported(tmp_path: Path) -> None:
    """The store's queue-drop listeners hear of every ConsumeQueue it destroys, by cleanExpiredCQ (all its messages
    deleted) or with its topic: a queue of that name starts again at offset 0, so what was kept about its old
    offsets (the pop service's orderly state) must go."""
    store = open_store(tmp_path, now_ms=FakeClock(_local_ms(hour=12)), disk_usage_ratio=Disk(0.87))
    dropped: list[tuple[str, int]] = []
    store.queue_drop_listeners.append(lambda topic, queue_id: dropped.append((topic, queue_id)))
    store.append(message(topic="Old", body=bytes(300)))
    for _ in range(30):
        store.append(message(body=bytes(300)))
    store.flush_all_blocking()
    assert await store.retention.check_once() >= 1
    assert await clean_expired_consume_queues(store) == [("Old", 0)]
    assert await store.delete_topic("TopicTest") == 1
    assert dropped == [("Old", 0), ("TopicTest", 0)]
    store.close()


def _synced_consume_queue_bytes(store: MessageStore) -> dict[Path, int]:
    """How many leading bytes of each ConsumeQueue file were synced (its flushed position)."""
    return {mf.path: mf.flushed_position for cq in store.consume_queues.values() for mf in cq.queue.files}


def _lose_unsynced(synced: dict[Path, int]) -> None:
    """A power cut: what was never synced of the ConsumeQueue files did not reach the disk (the files were
    preallocated, so it reads back as zeros)."""
    for path, flushed in synced.items():
        if path.exists():
            path.write_bytes(path.read_bytes()[:flushed].ljust(path.stat().st_size, b"\0"))


async def test_acknowledged_sync_flush_messages_keep_their_queue_after_retention_and_a_power_cut(
    tmp_path: Path,
) -> None:
    """SYNC_FLUSH acknowledges a put once its CommitLog bytes are synced; the ConsumeQueues and the checkpoint follow
    at the next periodic flush. Retention used to delete any flushed segment (on a nearly full disk young ones too),
    so the oldest kept one could lie past the checkpoint: after a power cut recovery re-dispatched the kept records
    from there, but the entries of the deleted ones had never been synced and read back as zeros, where
    ConsumeQueue.recover ended the queue. The acknowledged messages were in no queue and their offsets were handed
    out again. Retention now deletes only what the checkpoint covers, flushing first when it does not yet."""
    store = open_store(tmp_path, flush_disk_type=FlushDiskType.SYNC_FLUSH, disk_usage_ratio=Disk(0.87))
    acked = []
    for i in range(40):
        put = await store.put(message(body=b"%03d" % i * 40))  # no services running: the put syncs the CommitLog
        assert put.ok
        acked.append(put.append)
    assert await store.retention.check_once() >= 1  # above diskSpaceCleanForciblyRatio: young segments go too
    assert store.checkpoint is not None and store.checkpoint.safe_offset >= store.min_phy_offset
    kept = [a for a in acked if a.phy_offset >= store.min_phy_offset]
    synced = _synced_consume_queue_bytes(store)
    store.abandon()
    _lose_unsynced(synced)
    store = open_store(tmp_path, flush_disk_type=FlushDiskType.SYNC_FLUSH)
    try:
        # The acknowledged messages still in the CommitLog are found at their queue offsets ...
        assert store.max_offset_in_queue("TopicTest", 0) == kept[-1].queue_offset + 1
        got = store.get("TopicTest", 0, kept[0].queue_offset, 32)
        assert got.status is GetStatus.FOUND and len(got.messages) == len(kept)
        # ... and a new message does not take the queue offset of one of them.
        assert store.append(message(body=b"new")).queue_offset == kept[-1].queue_offset + 1
    finally:
        store.close()


async def test_a_commitlog_segment_removed_by_hand_is_dropped_and_the_store_keeps_running(
    tmp_path: Path, autojump_clock: trio.testing.MockClock
) -> None:
    """An operator short of disk space removes the oldest CommitLog file by hand. Java's retention reads its age as
    `File.lastModified()`, 0 for a missing file, so it counts as expired and is dropped from the queue at the next
    pass (store/.../MappedFileQueue.java deleteExpiredFileByTime). Ours read the age with os.stat: the
    FileNotFoundError ended the retention task and with it the store (and the broker) at the next pass."""
    # Above diskMaxUsedSpaceRatio, below the forcible ratio: only expired segments go.
    store, files = _segments_at_noon(tmp_path, Disk(0.8))
    async with trio.open_nursery() as nursery:
        await nursery.start(store.run)
        files[0].path.unlink()
        await trio.sleep(60.5)  # the first pass, a minute after the start
        assert store.commitlog.queue.files == files[1:]
        assert store.min_phy_offset == files[1].file_from_offset
        assert store.append(message(body=b"after")).phy_offset >= files[-1].file_from_offset
        nursery.cancel_scope.cancel()


async def test_commitlog_segments_are_deleted_delete_commit_log_files_interval_apart(
    tmp_path: Path, autojump_clock: trio.testing.MockClock
) -> None:
    """Java's CleanCommitLogService sleeps `deleteCommitLogFilesInterval` (100 ms) between two segment deletions of a
    pass (store/.../MappedFileQueue.java deleteExpiredFileByTime), spreading the unmaps and unlinks of up to ten
    1 GiB files. Ours ignored the setting and deleted them all at once, holding the store's disk lock (no flush, no
    group commit) for the whole pass."""
    store = open_store(tmp_path, now_ms=FakeClock(_local_ms(hour=12)), disk_usage_ratio=Disk(0.87))
    for _ in range(60):
        store.append(message(body=bytes(300)))
    store.flush_all_blocking()  # the checkpoint covers every segment: no flush thread in the pass
    count = len(store.commitlog.queue.files)
    assert count >= 5
    async with trio.open_nursery() as nursery:
        start = trio.current_time()
        nursery.start_soon(store.retention.check_once)
        await trio.sleep(0.05)
        assert len(store.commitlog.queue.files) == count - 1
        assert not store.disk_lock.locked()  # flushes and group commits go on between two deletions
        # Each unlink runs in a worker thread, which the suite's clock waits for (tests/virtual_clock.py) unless it
        # outlasts its patience: the second deletion comes no sooner than the interval.
        while len(store.commitlog.queue.files) > count - 2:
            await trio.sleep(0.01)
        assert trio.current_time() - start >= 0.1
    assert len(store.commitlog.queue.files) == 1
    assert store.retention.deleted_files == count - 1
    store.close()


async def test_delete_commit_log_files_interval_is_a_pause_after_each_deletion_however_long_it_took(
    tmp_path: Path, autojump_clock: trio.testing.MockClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Java sleeps `deleteCommitLogFilesInterval` after each segment's destroy returns (store/.../MappedFileQueue.java
    deleteExpiredFileByTime), so a slow disk still gets that pause between two unlinks. Ours counted the interval
    from the moment a segment was taken out of the log: an unlink longer than the interval used it all up and the
    next one started at once, back to back, just when the disk was slowest."""
    store = open_store(tmp_path, now_ms=FakeClock(_local_ms(hour=12)), disk_usage_ratio=Disk(0.87))
    for _ in range(60):
        store.append(message(body=bytes(300)))
    store.flush_all_blocking()  # the checkpoint covers every segment: no flush thread in the pass
    assert len(store.commitlog.queue.files) >= 4
    spans: list[tuple[float, float]] = []
    real_unlink = os.unlink
    commitlog = str(tmp_path / "commitlog")

    def slow_unlink(path: os.PathLike[str] | str, *args: object, **kwargs: object) -> None:
        if not os.fspath(path).startswith(commitlog):
            real_unlink(path, *args, **kwargs)  # type: ignore[arg-type]
            return
        began = trio.from_thread.run_sync(trio.current_time)
        trio.from_thread.run(trio.sleep, 1.0)  # a 1 GiB segment on a slow disk, in virtual time
        real_unlink(path, *args, **kwargs)  # type: ignore[arg-type]
        spans.append((began, trio.from_thread.run_sync(trio.current_time)))

    monkeypatch.setattr(os, "unlink", slow_unlink)
    deleted = await store.retention.check_once()
    monkeypatch.undo()
    assert deleted >= 3 and len(spans) == deleted
    pauses = [nxt[0] - prev[1] for prev, nxt in itertools.pairwise(spans)]
    assert min(pauses) >= 0.1 - 1e-9, pauses
    store.close()


async def test_queue_files_below_the_commitlog_are_deleted_at_the_first_pass_after_a_restart(tmp_path: Path) -> None:
    """Java's CleanConsumeQueueService runs at every cleanResourceInterval, whatever the hour, and deletes the
    ConsumeQueue and index files wholly below the CommitLog's minimum once it has risen past the last one it saw (0
    after a start: store/.../DefaultMessageStore.java deleteExpiredFiles). Ours cleaned them only in a pass that
    deleted CommitLog segments (at deleteWhen or on a full disk), so after a restart with old segments gone (removed
    by hand while the broker was down, or a kill -9 right after retention deleted them) the queue files below stayed
    until the next 4 a.m."""
    clock = FakeClock(_local_ms(hour=12))
    store = open_store(tmp_path, now_ms=clock, disk_usage_ratio=Disk(0.1))
    for _ in range(40):
        store.append(message(body=bytes(300)))
    store.close()
    (tmp_path / "commitlog" / f"{0:020d}").unlink()
    cq_dir = tmp_path / "consumequeue" / "TopicTest" / "0"
    assert (cq_dir / f"{0:020d}").exists()
    store = open_store(tmp_path, now_ms=clock, disk_usage_ratio=Disk(0.1))
    try:
        assert await store.retention.check_once() == 0  # not deleteWhen, the disk is fine: no CommitLog segment goes
        assert not (cq_dir / f"{0:020d}").exists()
        assert store.get("TopicTest", 0, store.min_offset_in_queue("TopicTest", 0), 32).status is GetStatus.FOUND
    finally:
        store.close()


class _SlowUnlink:
    """``os.unlink`` whose first call on a file under ``directory`` blocks until :attr:`go` is set (a 1 GiB segment
    on a slow disk), at most ``limit`` seconds: a deadlock breaker when the unlink blocks the Trio thread that would
    set it. :attr:`waited_for_go` tells which happened."""

    def __init__(self, directory: Path, limit: float = 5.0) -> None:
        self.directory = str(directory)
        self.limit = limit
        self.entered = threading.Event()
        self.go = threading.Event()
        self.waited_for_go: bool | None = None
        self.unlinked: list[str] = []
        self._real = os.unlink

    def __call__(self, path: os.PathLike[str] | str, *args: object, **kwargs: object) -> None:
        name = os.fspath(path)
        if name.startswith(self.directory) and not self.entered.is_set():
            self.entered.set()
            self.waited_for_go = self.go.wait(self.limit)
        self._real(path, *args, **kwargs)  # type: ignore[arg-type]
        self.unlinked.append(name)


@pytest.mark.parametrize("kind", ["commitlog", "consumequeue", "index"])
async def test_retention_unlinks_files_off_the_trio_thread_and_outside_the_disk_lock(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, kind: str
) -> None:
    """Java's CleanCommitLogService / CleanConsumeQueueService unmap and delete files on their own thread
    (store/.../DefaultMessageStore.java, MappedFileQueue.deleteExpiredFileByTime / deleteExpiredFileByOffset);
    ours unlinked CommitLog, ConsumeQueue and index files on the Trio thread under the store's disk lock, so a slow
    unlink (a 1 GiB segment) stalled every connection of the broker and every flush. While one unlink is blocked,
    the loop must run other tasks and a flush must take the disk lock; the file is gone once the pass returns."""
    store = open_store(
        tmp_path,
        now_ms=FakeClock(_local_ms(hour=12)),
        disk_usage_ratio=Disk(0.87),  # above the forcible ratio: every segment but the newest goes
        delete_commit_log_files_interval=0,
    )
    i = 0
    while len(store.index.files) < 2 or len(store.commitlog.queue.files) < 3:  # type: ignore[union-attr]
        store.append(message(body=bytes(8), keys=f"k{i}"))
        i += 1
    for _ in range(40):  # the first index file's messages all lie in segments that go
        store.append(message(body=bytes(300)))
    store.flush_all_blocking()
    slow = _SlowUnlink(tmp_path / kind)
    monkeypatch.setattr(os, "unlink", slow)
    ticks = 0
    async with trio.open_nursery() as nursery:
        nursery.start_soon(store.retention.check_once)
        while not slow.entered.is_set():
            await trio.sleep(0.001)
        for _ in range(5):  # other tasks run while the unlink is blocked
            await trio.sleep(0)
            ticks += 1
        await store.flush_service.flush_once()  # and the disk lock is free
        slow.go.set()
    assert ticks == 5 and slow.waited_for_go is True
    assert slow.unlinked and not any(os.path.exists(name) for name in slow.unlinked)
    assert store.min_offset_in_queue("TopicTest", 0) > 0
    assert store.get("TopicTest", 0, store.min_offset_in_queue("TopicTest", 0), 32).status is GetStatus.FOUND
    store.close()


async def test_a_commitlog_segment_that_cannot_be_unlinked_is_logged_and_retention_goes_on(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """store/src/main/java/org/apache/rocketmq/store/MappedFile.java destroy logs a file it cannot delete and the
    clean service goes on. Ours let the OSError of an unlink (EACCES, EROFS, EIO) out of the retention pass, which
    ended the store and the broker; the segment is now left behind, out of the log, and the next ones still go."""
    store = open_store(tmp_path, now_ms=FakeClock(_local_ms(hour=12)), disk_usage_ratio=Disk(0.87))
    for _ in range(60):
        store.append(message(body=bytes(300)))
    store.flush_all_blocking()
    count = len(store.commitlog.queue.files)
    real, refused = os.unlink, []
    first = str(store.commitlog.queue.files[0].path)

    def unlink(path: os.PathLike[str] | str, *args: object, **kwargs: object) -> None:
        if os.fspath(path) == first:
            refused.append(first)
            raise PermissionError(13, "Permission denied", first)
        real(path, *args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(os, "unlink", unlink)
    await store.retention.check_once()
    assert refused == [first] and os.path.exists(first) and first in caplog.text
    assert len(store.commitlog.queue.files) == 1 and store.retention.deleted_files == count - 1
    offset = store.min_offset_in_queue("TopicTest", 0)
    assert store.get("TopicTest", 0, offset, 32).status is GetStatus.FOUND
    store.close()


async def test_a_segment_left_behind_by_a_failed_unlink_is_named_at_the_next_start(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """Retention goes on past a file it cannot unlink (left behind, out of the log) and deletes the next ones, so the
    directory then holds that old file, a hole, and the live segments. The next start refuses the hole, as a multi-path
    store with a disk not mounted must be refused, but names the file left behind and what to do (it said only "gap
    before segment"); the retention pass says at once that the file must be deleted by hand."""
    store = open_store(tmp_path, now_ms=FakeClock(_local_ms(hour=12)), disk_usage_ratio=Disk(0.87))
    for _ in range(60):
        store.append(message(body=bytes(300)))
    store.flush_all_blocking()
    first = str(store.commitlog.queue.files[0].path)
    real = os.unlink

    def unlink(path: os.PathLike[str] | str, *args: object, **kwargs: object) -> None:
        if os.fspath(path) == first:
            raise PermissionError(13, "Permission denied", first)
        real(path, *args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(os, "unlink", unlink)
    await store.retention.check_once()
    monkeypatch.undo()
    store.close()
    assert first in caplog.text and "by hand" in caplog.text
    with pytest.raises(StoreCorruptError) as refused:
        open_store(tmp_path)
    assert first in str(refused.value) and "delete them by hand" in str(refused.value)
    os.unlink(first)
    reopened = open_store(tmp_path)
    offset = reopened.min_offset_in_queue("TopicTest", 0)
    assert reopened.get("TopicTest", 0, offset, 32).status is GetStatus.FOUND
    reopened.close()
