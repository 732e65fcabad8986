"""Recovery: clean restarts trust the checkpoint; after a crash the tail is re-validated with magic, lengths and CRC,
torn or corrupted records are cut off, queues are rebuilt and new writes continue after the last good record."""

from __future__ import annotations

import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import attrs
import pytest

from remoting.codec.message import decode_record
from store.checkpoint import StoreLockedError
from store.errors import StoreCorruptError
from store.index import IndexService, index_file_epoch_ms, index_file_name
from store.message_store import MessageStore
from store.results import GetStatus
from store.store_config import BrokerRole
from tests.store.store_helpers import FakeClock, dirty_kib, message, open_store, small_config


def _fill(store: MessageStore, count: int, start: int = 0) -> list[int]:
    return [store.append(message(body=f"m{start + i}".encode() * 20, queue_id=i % 2)).phy_offset for i in range(count)]


def _bodies(store: MessageStore, queue_id: int) -> list[bytes]:
    out = []
    offset = store.min_offset_in_queue("TopicTest", queue_id)
    while True:
        r = store.get("TopicTest", queue_id, offset, 32)
        if r.status is not GetStatus.FOUND:
            return out
        out.extend(decode_record(m, check_crc=True).body for m in r.messages)
        offset = r.next_begin_offset


def test_clean_restart_keeps_everything_and_continues_offsets(tmp_path: Path) -> None:
    store = open_store(tmp_path)
    _fill(store, 30)
    end = store.max_phy_offset
    store.close()
    assert not (tmp_path / "abort").exists()
    store = open_store(tmp_path)
    assert not store.abnormal_recovery
    assert store.max_phy_offset == end
    assert store.checkpoint is not None and store.checkpoint.safe_offset == end
    assert store.recovery_start == end  # the checkpoint is trusted: nothing before it is scanned again
    r = store.append(message(queue_id=1))
    assert (r.phy_offset, r.queue_offset) == (end, 15)
    store.close()


def test_crash_without_checkpoint_rebuilds_queues_from_the_log(tmp_path: Path) -> None:
    store = open_store(tmp_path)
    _fill(store, 10)
    store.flush_all_blocking()
    _fill(store, 25, start=10)
    end = store.max_phy_offset
    store.abandon()
    # Lose the unflushed ConsumeQueue tail entirely: recovery must rebuild it from the CommitLog.
    for path in (p for p in (tmp_path / "consumequeue").rglob("0*") if p.is_file()):
        data = bytearray(path.read_bytes())
        path.write_bytes(bytes(data[:100]) + bytes(len(data) - 100))
    store = open_store(tmp_path)
    assert store.abnormal_recovery
    assert store.max_phy_offset == end
    assert len(_bodies(store, 0)) + len(_bodies(store, 1)) == 35
    assert _bodies(store, 0)[-1] == b"m34" * 20
    store.close()


def test_flipped_byte_in_the_tail_cuts_the_log_at_the_last_good_record(tmp_path: Path) -> None:
    store = open_store(tmp_path)
    phys = _fill(store, 10)
    store.flush_all_blocking()
    phys += _fill(store, 20, start=10)
    store.abandon()
    bad = phys[22]
    segment = tmp_path / "commitlog" / f"{bad - bad % 4096:020d}"
    data = bytearray(segment.read_bytes())
    data[bad % 4096 + 100] ^= 0x5A  # inside the body: only the CRC notices
    segment.write_bytes(bytes(data))
    store = open_store(tmp_path)
    assert store.max_phy_offset == bad
    assert store.look_message_by_offset(phys[21]) is not None
    assert store.look_message_by_offset(bad) is None
    assert store.max_offset_in_queue("TopicTest", 0) == 11 and store.max_offset_in_queue("TopicTest", 1) == 11
    again = store.append(message(queue_id=0, body=b"after"))
    assert (again.phy_offset, again.queue_offset) == (bad, 11)
    assert _bodies(store, 0)[-1] == b"after"
    store.close()
    store = open_store(tmp_path)
    assert _bodies(store, 0)[-1] == b"after"
    store.close()


def test_torn_tail_is_truncated_and_stale_bytes_never_resurface(tmp_path: Path) -> None:
    store = open_store(tmp_path)
    phys = _fill(store, 12)
    store.flush_all_blocking()
    phys += _fill(store, 6, start=12)
    end = store.max_phy_offset
    store.abandon()
    last = phys[-1]
    segment = tmp_path / "commitlog" / f"{last - last % 4096:020d}"
    data = bytearray(segment.read_bytes())
    torn_from = last % 4096 + 40  # the last record lost its second half
    data[torn_from : end - (last - last % 4096)] = bytes(end - last - 40)
    segment.write_bytes(bytes(data))
    store = open_store(tmp_path)
    assert store.max_phy_offset == last
    assert len(_bodies(store, 0)) + len(_bodies(store, 1)) == 17
    # A shorter record now ends earlier than the old one did: the old record's remains must be gone.
    store.append(message(body=b"x", queue_id=1))
    store.abandon()
    store = open_store(tmp_path)
    assert len(_bodies(store, 0)) + len(_bodies(store, 1)) == 18
    store.close()


def test_consume_queue_entries_past_the_recovered_end_are_dropped(tmp_path: Path) -> None:
    store = open_store(tmp_path)
    phys = _fill(store, 2)
    store.flush_all_blocking()
    phys += _fill(store, 6, start=2)
    store.abandon()
    # As after a power cut: the ConsumeQueue pages reached the disk but the CommitLog tail after record 4 did not.
    segment = tmp_path / "commitlog" / f"{0:020d}"
    data = bytearray(segment.read_bytes())
    data[phys[4] :] = bytes(len(data) - phys[4])
    segment.write_bytes(bytes(data))
    store = open_store(tmp_path)
    assert store.max_phy_offset == phys[4]
    assert store.max_offset_in_queue("TopicTest", 0) == 2
    assert store.max_offset_in_queue("TopicTest", 1) == 2
    assert store.get("TopicTest", 0, 2, 32).status is GetStatus.OFFSET_OVERFLOW_ONE
    store.close()


def test_checkpoint_that_is_not_a_record_boundary_does_not_cut_the_log(tmp_path: Path) -> None:
    store = open_store(tmp_path)
    _fill(store, 12)
    end = store.max_phy_offset
    store.flush_all_blocking()
    assert store.checkpoint is not None
    store.checkpoint.safe_offset = end - 50  # inside the last record
    store.checkpoint.flush()
    store.abandon()
    store = open_store(tmp_path)
    assert store.max_phy_offset == end
    assert len(_bodies(store, 0)) + len(_bodies(store, 1)) == 12
    store.close()


def test_a_store_cannot_be_opened_twice(tmp_path: Path) -> None:
    store = open_store(tmp_path)
    with pytest.raises(StoreLockedError):
        open_store(tmp_path)
    store.close()
    open_store(tmp_path).close()


def test_a_load_that_fails_lets_go_of_the_lock_and_the_mapped_files(tmp_path: Path) -> None:
    """A load that fails (here: CommitLog segments of another size than configured, StoreCorruptError) unlocks the
    store and unmaps what it mapped, so loading it again in this process with the right settings works. Found by a
    review: the failed store kept its lock, and every later start said the store was in use by another process."""
    store = open_store(tmp_path)
    _fill(store, 10)
    store.close()
    wrong = MessageStore(
        small_config(tmp_path, mapped_file_size_commit_log=2 * store.config.mapped_file_size_commit_log)
    )
    with pytest.raises(StoreCorruptError):
        wrong.load()
    again = open_store(tmp_path)
    assert len(_bodies(again, 0)) == 5
    again.close()


def test_the_store_lock_is_rocketmqs_posix_lock_too_and_a_refused_open_keeps_it(tmp_path: Path) -> None:
    """Besides flock, the store holds DefaultMessageStore's `tryLock(0, 1, false)` (an fcntl lock on byte 0 of
    `lock`), so a Java broker is refused; a refused second open in this process does not drop it (closing any fd of
    a file drops this process's POSIX locks on it). Found by a review; the fcntl lock was missing before."""
    probe = "import fcntl, os, sys; fcntl.lockf(os.open(sys.argv[1], os.O_RDWR), fcntl.LOCK_EX | fcntl.LOCK_NB, 1, 0)"
    store = open_store(tmp_path)
    with pytest.raises(StoreLockedError):
        open_store(tmp_path)
    held = subprocess.run([sys.executable, "-c", probe, str(tmp_path / "lock")], capture_output=True)
    assert held.returncode != 0 and (b"BlockingIOError" in held.stderr or b"PermissionError" in held.stderr)
    store.close()
    assert subprocess.run([sys.executable, "-c", probe, str(tmp_path / "lock")]).returncode == 0


def test_delayed_message_tags_code_is_rebuilt_as_its_delivery_time(tmp_path: Path) -> None:
    store = open_store(tmp_path)
    appended = store.append(attrs.evolve(message(topic="SCHEDULE_TOPIC_XXXX", queue_id=1), properties="DELAY\x012"))
    store.abandon()
    (tmp_path / "consumequeue" / "SCHEDULE_TOPIC_XXXX" / "1" / f"{0:020d}").write_bytes(bytes(8 * 20))
    store = open_store(tmp_path)
    entry = store.consume_queue("SCHEDULE_TOPIC_XXXX", 1).entry(0)
    assert entry is not None and entry[2] == appended.store_timestamp + 5000
    store.close()


def test_a_killed_slave_drops_a_last_record_whose_properties_never_arrived(tmp_path: Path) -> None:
    master = open_store(tmp_path / "master")
    phys = [master.append(message(body=b"b" * 50, queue_id=0, keys=f"key-{i}")).phy_offset for i in range(4)]
    log = bytes(master.commitlog.queue.files[0].view[: master.max_phy_offset])
    master.close()
    slave = open_store(tmp_path / "slave", broker_role=BrokerRole.SLAVE)
    assert slave.replica is not None
    slave.replica.append(0, log[:-6])  # the last frame ended 6 bytes before the record did
    assert slave.replica.dispatched == phys[3]  # the partial record is not dispatched
    slave.abandon()  # as kill -9: the bytes stay, zeros where the record's tail should be
    slave = open_store(tmp_path / "slave", broker_role=BrokerRole.SLAVE)
    # The body CRC passes (the tail is in the properties); the zeros there give the torn record away.
    assert slave.max_phy_offset == phys[3]
    assert slave.max_offset_in_queue("TopicTest", 0) == 3
    assert slave.replica is not None
    slave.replica.append(phys[3], log[phys[3] :])  # the master resends from the slave's end
    assert slave.max_offset_in_queue("TopicTest", 0) == 4
    assert bytes(slave.commitlog.queue.files[0].view[: len(log)]) == log
    slave.close()


def test_the_checkpoint_after_a_crash_recovery_covers_only_synced_pages(tmp_path: Path) -> None:
    """Recovery marks the segments it kept or wrote again as flushed, so the next flush synced nothing and moved the
    checkpoint past pages only in the page cache: a power loss then lost acknowledged messages from their queues,
    and the next recovery started past them. The recovery syncs them now."""
    store = open_store(tmp_path)
    for i in range(20):
        store.append(message(body=b"x" * 50, queue_id=i % 2))
    store.flush_all_blocking()
    for i in range(20):
        store.append(message(body=b"y" * 50, queue_id=i % 2))
    store.abandon()  # kill -9: the tail is only in the page cache

    store = open_store(tmp_path)
    assert store.abnormal_recovery
    store.flush_all_blocking()  # the first periodic flush after the restart
    assert store.checkpoint is not None and store.checkpoint.safe_offset == store.max_phy_offset
    segments = list(store.commitlog.queue.files)
    for cq in store.consume_queues.values():
        segments.extend(cq.queue.files)
    # Everything below the (durable) checkpoint must be durable too: a power loss now must not lose it.
    assert {mf.path.name: dirty_kib(mf.path) for mf in segments if dirty_kib(mf.path)} == {}
    store.close()


def _found(store: MessageStore, key: str) -> int:
    return len(store.query_by_key("TopicTest", key, 32, 0, 2**62))


def test_index_survives_a_restart_after_the_wall_clock_stepped_back(tmp_path: Path) -> None:
    """A message stored with an earlier store time than its index file's first one (the wall clock stepped back, e.g.
    NTP right after boot) leaves the file with endTimestamp < beginTimestamp, as Java's IndexFile.putKey writes it.
    That header is valid (IndexHeader.load checks nothing): the restart keeps the file and both keys are found."""
    clock = FakeClock()
    store = open_store(tmp_path, now_ms=clock)
    store.append(message(keys="first"))
    clock.now -= 5_000  # the clock steps back five seconds
    store.append(message(keys="second"))
    assert _found(store, "first") == 1
    store.close()

    store = open_store(tmp_path, now_ms=clock)
    try:
        assert _found(store, "first") == 1
        assert _found(store, "second") == 1
    finally:
        store.close()


def _store_with_two_index_files(tmp_path: Path) -> list[Path]:
    """300 keyed messages in a closed store: index files of 255 entries, so k0..k254 and k255..k299."""
    store = open_store(tmp_path)
    for i in range(300):
        store.append(message(keys=f"k{i}"))
    files = [f.path for f in store.index.files]
    assert len(files) == 2
    store.close()
    return files


def test_one_damaged_index_file_does_not_cost_the_keys_of_the_healthy_ones(tmp_path: Path) -> None:
    """A damaged index file (here: cut short) is deleted on its own, as Java's IndexService.load loads each file on
    its own: the healthy newer file is kept as it was, and recovery indexes the keys of the records the damaged one
    covered again, from the CommitLog, in its place. The refill also takes the first message indexed in the healthy
    file (its first keys may have been in the damaged one), less the keys the healthy file holds: the refilled file
    takes what the damaged one held, and a query finds each message once."""
    files = _store_with_two_index_files(tmp_path)
    newer = files[1].with_name(index_file_name(index_file_epoch_ms(files[1].name) + 50))
    files[1].rename(newer)
    healthy = newer.read_bytes()
    with open(files[0], "r+b") as damaged:
        damaged.truncate(100)

    store = open_store(tmp_path)
    try:
        paths = [f.path for f in store.index.files]
        assert len(paths) == 2 and paths[0] == files[0] and paths[1] == newer
        assert newer.read_bytes() == healthy
        assert all(_found(store, f"k{i}") == 1 for i in (0, 254, 255, 299))
    finally:
        store.close()


def test_a_damaged_newest_index_file_is_refilled_and_new_keys_follow_it(tmp_path: Path) -> None:
    """The newest file damaged: its range runs to the checkpoint, re-indexed from the CommitLog; keys stored after the
    restart go on in the refilled file."""
    files = _store_with_two_index_files(tmp_path)
    with open(files[1], "r+b") as damaged:
        damaged.truncate(100)

    store = open_store(tmp_path)
    try:
        store.append(message(keys="after"))
        assert [f.path for f in store.index.files] == files
        assert all(_found(store, key) == 1 for key in ("k0", "k254", "k255", "k299", "after"))
    finally:
        store.close()


def test_index_files_of_another_geometry_are_rebuilt_from_the_whole_commitlog(tmp_path: Path) -> None:
    """``maxIndexNum`` changed: no file has the configured size, so every one is deleted and recovery indexes the
    whole CommitLog again in files of the new size."""
    _store_with_two_index_files(tmp_path)
    store = open_store(tmp_path, max_index_num=512)
    try:
        assert len(store.index.files) == 1
        assert all(_found(store, f"k{i}") == 1 for i in (0, 299))
    finally:
        store.close()


def test_a_crash_between_the_index_load_and_the_refill_leaves_the_gap_for_the_next_start(tmp_path: Path) -> None:
    """The index's load records a damaged file's name (``index/dropped``) before deleting it: a kill right after the
    load (the refill not begun) leaves the gap on disk, and the next start refills it."""
    files = _store_with_two_index_files(tmp_path)
    with open(files[0], "r+b") as damaged:
        damaged.truncate(100)

    first_start = IndexService(tmp_path, 64, 256)
    first_start.load()  # what MessageStore.open_files does first; the process dies before recovery's refill
    assert [g.name for g in first_start.gaps()] == [files[0].name]
    del first_start  # kill -9: nothing else runs

    store = open_store(tmp_path)
    try:
        assert _found(store, "k299") == 1
        assert _found(store, "k0") == 1
        assert not (tmp_path / "index" / "dropped").exists()
    finally:
        store.close()


def test_a_crash_during_the_refill_leads_to_a_whole_refill_on_the_next_start(tmp_path: Path) -> None:
    """A changed geometry drops every index file; a kill in the middle of the refill leaves ``.refill`` files the
    gap's record disowns: the next start deletes them (the entry written before the kill, ``ghost`` at offset 0, is
    gone) and indexes the whole CommitLog again."""
    _store_with_two_index_files(tmp_path)

    def killed_midway() -> Iterator[tuple[str, list[str], int, int]]:
        yield "TopicTest", ["ghost"], 0, 1
        raise KeyboardInterrupt  # stands for the kill: nothing after it runs

    first_start = IndexService(tmp_path, 64, 512)
    first_start.load()
    (gap,) = first_start.gaps()
    with pytest.raises(KeyboardInterrupt):
        first_start.refill(gap, killed_midway())
    assert [p.name for p in (tmp_path / "index").glob("*.refill")] == [gap.name + ".refill"]
    del first_start

    store = open_store(tmp_path, max_index_num=512)
    try:
        assert all(_found(store, f"k{i}") == 1 for i in (0, 254, 255, 299))
        assert _found(store, "ghost") == 0
        assert sorted(p.name for p in (tmp_path / "index").iterdir()) == [f.path.name for f in store.index.files]
    finally:
        store.close()


def _store_with_a_message_split_over_two_index_files(tmp_path: Path) -> list[Path]:
    """254 one-key messages, then one with two keys (``x`` the 255th entry, filling the first file; ``y`` the first
    of the second file), then 10 more: a message whose entries straddle two index files."""
    store = open_store(tmp_path)
    for i in range(254):
        store.append(message(keys=f"k{i}"))
    store.append(message(keys="x y"))
    for i in range(10):
        store.append(message(keys=f"after{i}"))
    files = [f.path for f in store.index.files]
    assert len(files) == 2
    assert _found(store, "x") == 1 and _found(store, "y") == 1
    store.close()
    return files


@pytest.mark.parametrize(("damaged", "lost"), [(0, "x"), (1, "y")])
def test_the_refill_indexes_again_the_keys_of_a_message_straddling_the_damaged_files_edge(
    tmp_path: Path, damaged: int, lost: str
) -> None:
    """``put`` rolls to a new file between two keys of one message, so a damaged file may hold some keys of the
    message that ends the older kept file or starts the newer one: the refill takes both bounding messages too (their
    other keys, now in two files, are found once: the store returns each offset once)."""
    files = _store_with_a_message_split_over_two_index_files(tmp_path)
    with open(files[damaged], "r+b") as f:
        f.truncate(100)

    store = open_store(tmp_path)
    try:
        assert _found(store, "k0") == 1 and _found(store, "after9") == 1
        assert _found(store, "x") == 1 and _found(store, "y") == 1
    finally:
        store.close()


@pytest.mark.parametrize("garbage", [bytes(9), b"../../etc"], ids=["zeros", "a-path"])
def test_a_record_whose_topic_is_damaged_ends_the_log_instead_of_failing_the_start(
    tmp_path: Path, garbage: bytes
) -> None:
    """The body CRC does not cover the topic: a power cut (or a bad disk) can leave a record whose topic bytes are
    zeros, or anything, with its body intact. Its ConsumeQueue directory is named after the topic, so dispatching it
    made the start fail ("embedded null byte") or wrote outside the queue directory. No send stores such a topic
    (TopicValidator refuses it), so the record is damaged: the log ends before it, as at a CRC failure."""
    store = open_store(tmp_path / "store")
    phys = _fill(store, 6)
    store.flush_all_blocking()
    phys += _fill(store, 3, start=6)
    store.abandon()
    last = phys[-1]
    segment = tmp_path / "store" / "commitlog" / f"{last - last % 4096:020d}"
    data = bytearray(segment.read_bytes())
    at = data.index(b"TopicTest", last % 4096)
    data[at : at + 9] = garbage
    segment.write_bytes(bytes(data))
    store = open_store(tmp_path / "store")
    assert store.max_phy_offset == last
    assert len(_bodies(store, 0)) + len(_bodies(store, 1)) == 8
    assert not (tmp_path / "etc").exists() and not (tmp_path / "store" / "etc").exists()
    store.close()


def test_removed_consume_queue_files_are_rebuilt_from_the_commitlog(tmp_path: Path) -> None:
    """An operator who deletes `consumequeue/` (damaged disk, or a CommitLog copied in from another broker) and
    restarts gets the queues rebuilt from the CommitLog, as DefaultMessageStore.start dispatches again from the
    highest physical offset the ConsumeQueues reach, the CommitLog's minimum when there is none. The recovery
    started at the checkpoint instead: the queues came back empty and new messages took offsets 0, 1, ... again."""
    store = open_store(tmp_path)
    _fill(store, 20)
    store.close()
    shutil.rmtree(tmp_path / "consumequeue")
    store = open_store(tmp_path)
    assert store.max_offset_in_queue("TopicTest", 0) == 10 and store.max_offset_in_queue("TopicTest", 1) == 10
    assert _bodies(store, 0) == [f"m{i}".encode() * 20 for i in range(0, 20, 2)]
    assert store.append(message(queue_id=1)).queue_offset == 10
    store.close()


def _as_java_wrote_it(root: Path) -> None:
    """Zero the checkpoint's safe offset (@24): a 4.9.8 broker's StoreCheckpoint writes only the three timestamps."""
    with (root / "checkpoint").open("r+b") as f:
        f.seek(24)
        f.write(bytes(8))


def _segment_starts(root: Path) -> list[int]:
    return sorted(int(p.name) for p in (root / "commitlog").iterdir() if p.name.isdigit())


def test_a_java_checkpoint_after_a_clean_stop_is_recovered_from_the_third_newest_segment(tmp_path: Path) -> None:
    # CommitLog.recoverNormally (store/src/main/java/org/apache/rocketmq/store/CommitLog.java) re-validates the last
    # three segments; a store a Java broker stopped cleanly must not be scanned and re-indexed from its first byte.
    store = open_store(tmp_path)
    _fill(store, 150)
    end = store.max_phy_offset
    store.close()
    _as_java_wrote_it(tmp_path)
    starts = _segment_starts(tmp_path)
    assert len(starts) >= 5
    store = open_store(tmp_path)
    assert not store.abnormal_recovery
    assert store.recovery_start == starts[-3]
    assert store.max_phy_offset == end
    assert len(_bodies(store, 0)) + len(_bodies(store, 1)) == 150
    assert store.append(message(queue_id=1)).queue_offset == 75
    store.close()


def test_a_java_checkpoint_after_a_crash_is_recovered_from_the_segment_its_timestamps_name(tmp_path: Path) -> None:
    # CommitLog.recoverAbnormally starts at the newest segment whose first record was stored no later than 3 s before
    # the checkpoint's older timestamp (isMappedFileMatchedRecover, StoreCheckpoint.getMinTimestamp).
    clock = FakeClock()
    store = open_store(tmp_path, now_ms=clock)
    phys = []
    for i in range(60):
        clock.now += 10_000
        phys.append(store.append(message(body=f"m{i}".encode() * 20, queue_id=i % 2)).phy_offset)
        if i == 39:
            store.flush_all_blocking()
    stamps = {}
    for phy in phys:
        view = store.look_message_by_offset(phy)
        assert view is not None
        stamps[phy] = decode_record(view).store_timestamp
    assert store.checkpoint is not None
    bound = min(store.checkpoint.physic_msg_timestamp, store.checkpoint.logics_msg_timestamp) - 3000
    expected = max(phy for phy, ts in stamps.items() if phy % 4096 == 0 and ts <= bound)
    end = store.max_phy_offset
    store.abandon()
    _as_java_wrote_it(tmp_path)
    store = open_store(tmp_path)
    assert store.abnormal_recovery
    assert 0 < expected < phys[40]
    assert store.recovery_start == expected
    assert store.max_phy_offset == end
    assert len(_bodies(store, 0)) + len(_bodies(store, 1)) == 60
    store.close()


def test_a_store_stopped_while_its_disk_is_full_keeps_the_abort_file(tmp_path: Path) -> None:
    """DefaultMessageStore.shutdown (4.9.8) deletes ``abort`` only while the store is writable (RunningFlags.isWriteable
    counts DISK_FULL_BIT): a store stopped while its disk was full recovers as after a crash at the next start."""
    store = open_store(tmp_path)
    _fill(store, 10)
    store.disk_full_reason = "disk full (test)"
    store.close()
    assert (tmp_path / "abort").exists()
    store = open_store(tmp_path)
    assert store.abnormal_recovery
    assert len(_bodies(store, 0)) == 5
    store.close()
    assert not (tmp_path / "abort").exists()


def test_an_emptied_segment_before_the_last_refuses_the_start_and_keeps_the_later_ones(tmp_path: Path) -> None:
    """A CommitLog segment before the newest one that is 0 bytes long (emptied by hand or by a damaged file system)
    refuses the start, as MappedFileQueue.load (4.9.8, store/src/main/java/org/apache/rocketmq/store/
    MappedFileQueue.java) returns false for a file whose length is not mappedFileSize, and 5.3.3's only forgives an
    empty newest file. It was filled with zeros instead: after a crash the recovery scan ended at its start and the
    segments after it, acknowledged messages, were deleted."""
    store = open_store(tmp_path)
    _fill(store, 10)
    store.flush_all_blocking()
    _fill(store, 140, start=10)
    store.abandon()
    starts = _segment_starts(tmp_path)
    assert len(starts) >= 5
    emptied = tmp_path / "commitlog" / f"{starts[2]:020d}"
    emptied.write_bytes(b"")
    later = {start: (tmp_path / "commitlog" / f"{start:020d}").read_bytes() for start in starts[3:]}
    with pytest.raises(StoreCorruptError, match=emptied.name):
        open_store(tmp_path)
    assert emptied.stat().st_size == 0
    assert {start: (tmp_path / "commitlog" / f"{start:020d}").read_bytes() for start in starts[3:]} == later


def test_an_empty_newest_segment_left_by_a_crash_is_taken_as_unwritten(tmp_path: Path) -> None:
    """A kill between creating the newest segment and sizing it leaves it empty: the store starts, as 5.3.3's
    MappedFileQueue.doLoad deletes an empty newest file, and appends go on into it."""
    store = open_store(tmp_path)
    _fill(store, 30)
    store.abandon()
    starts = _segment_starts(tmp_path)
    end = starts[-1] + 4096
    (tmp_path / "commitlog" / f"{end:020d}").write_bytes(b"")
    store = open_store(tmp_path)
    assert len(_bodies(store, 0)) + len(_bodies(store, 1)) == 30
    store.close()


def test_an_emptied_consume_queue_segment_before_the_last_refuses_the_start(tmp_path: Path) -> None:
    """The same for a ConsumeQueue segment (its MappedFileQueue.load alike): taken as unwritten, its entries read as
    holes and the queue's messages in it could not be pulled."""
    store = open_store(tmp_path)
    _fill(store, 40)
    store.close()
    queue_dir = tmp_path / "consumequeue" / "TopicTest" / "0"
    segments = sorted(p for p in queue_dir.iterdir() if p.name.isdigit())
    assert len(segments) >= 3
    segments[1].write_bytes(b"")
    with pytest.raises(StoreCorruptError, match=segments[1].name):
        open_store(tmp_path)
