"""A classic store taken over by DLedger mode: RocketMQ's mixed CommitLog (dledger/commitlog_store.py's
``MixedCommitLog``, DLedgerCommitLog's ``dividedCommitlogOffset``). The classic log is recovered once, sealed with its
end-of-file blank and stays readable below its end; the DLedger log starts there, queue offsets go on, and retention
deletes the classic segments before any entry file. On real files here, and in a group of three brokers on real
sockets under virtual time in tests/dledger/test_mixed_group.py."""

from __future__ import annotations

import os
import shutil
import struct
from pathlib import Path

import pytest
import trio

from dledger.commitlog_store import ClassicCommitLogError, DLedgerMessageStore, MixedCommitLog, _filler
from dledger.config import DLedgerConfig
from dledger.entry import HEADER_SIZE, Entry
from dledger.file_store import MARKER, FileLedger
from dledger.ledger import LedgerError
from remoting.codec.message import BLANK_MAGIC, decode_record, prepare_message
from store.checkpoint import Checkpoint
from store.mapped_file import destroy_segments
from store.message_store import MessageStore
from tests.dledger.test_retention import age, retention_with_a_slow_unlink
from tests.store.store_helpers import message, open_store, small_config
from tests.store.test_retention import Disk

SEGMENT = 4096
EVERY_HOUR = ";".join(f"{h:02d}" for h in range(24))


def unloaded_dledger_store(root: Path, **overrides: object) -> DLedgerMessageStore:
    dledger = DLedgerConfig(group="g", self_id="n0", peers="n0-127.0.0.1:1", store_base_dir=str(root),
                            mapped_file_size_for_entry_data=SEGMENT)  # fmt: skip
    return DLedgerMessageStore(small_config(root, mapped_file_size_commit_log=SEGMENT, **overrides), dledger)


def dledger_store(root: Path, **overrides: object) -> DLedgerMessageStore:
    store = unloaded_dledger_store(root, **overrides)
    store.load()
    return store


def classic_store(root: Path, count: int) -> tuple[MessageStore, list[tuple[int, int, int]]]:
    """A classic store holding ``count`` messages over queues 0 and 1 of TopicTest (several segments, the last
    partly written); returns it open and each message's ``(queue id, queue offset, physical offset)``."""
    store = open_store(root, mapped_file_size_commit_log=SEGMENT)
    placed = []
    for i in range(count):
        result = store.append(message(body=b"classic-%03d" % i, queue_id=i % 2, keys=f"key{i}"))
        placed.append((i % 2, result.queue_offset, result.phy_offset))
    return store, placed


def bodies(store: MessageStore, queue_id: int) -> list[bytes]:
    """Every message of the queue, pulled as a consumer would (a pull stops at a ConsumeQueue segment's end)."""
    out: list[bytes] = []
    offset = store.min_offset_in_queue("TopicTest", queue_id)
    while offset < store.max_offset_in_queue("TopicTest", queue_id):
        found = store.get("TopicTest", queue_id, offset, 32)
        out.extend(decode_record(record).body for record in found.messages)
        assert found.next_begin_offset > offset, found.status
        offset = found.next_begin_offset
    return out


def follower_append(store: DLedgerMessageStore, bodies_: list[bytes], queue_id: int = 0) -> None:
    """Entries as a leader's pushes would bring them, each a record of TopicTest ``queue_id`` at the queue's next
    offset, each committed, flushed and dispatched."""
    ledger = store.ledger
    for body in bodies_:
        prepared = prepare_message(message(body=body, queue_id=queue_id))
        queue_offset = store.max_offset_in_queue("TopicTest", queue_id)
        ledger.append_as_leader(1, [(prepared.size, _filler(prepared, queue_offset, 1_700_000_000_000))])
        ledger.set_committed(ledger.end_index)
        ledger.flush_all()
        ledger.persist_checkpoint()  # the DLedger server's checkpoint task, in a running broker
        store._dispatch_committed()


def test_a_classic_store_becomes_a_mixed_one_read_below_its_end_and_written_after(tmp_path: Path) -> None:
    classic, placed = classic_store(tmp_path, 60)
    old_end = classic.max_phy_offset
    first_time = classic.earliest_store_time()
    before = {q: bodies(classic, q) for q in (0, 1)}
    classic.close()
    assert old_end % SEGMENT  # the last segment is partly written: sealing writes its blank

    store = dledger_store(tmp_path)
    assert isinstance(store.commitlog, MixedCommitLog)
    divided = old_end - old_end % SEGMENT + SEGMENT
    assert store.divided_offset == store.commitlog.divided == divided
    last = store.commitlog.classic.queue.files[-1]
    assert struct.unpack_from(">iI", last.view, old_end % SEGMENT) == (SEGMENT - old_end % SEGMENT, BLANK_MAGIC)
    # The DLedger log opens with its marker: entry 0, term 0, at the classic end, holding where the records end.
    marker = store.ledger.get(0)
    assert store.ledger.data_start == divided and store.ledger.end_index == 0 and marker is not None
    assert (marker.term, marker.pos, marker.body) == (0, divided, MARKER.pack(old_end))
    assert (store.min_phy_offset, store.confirmed_offset) == (0, divided)
    assert store.earliest_store_time() == first_time
    assert {q: bodies(store, q) for q in (0, 1)} == before  # the pull path reads the classic segments
    phy = placed[17][2]
    assert decode_record(store.look_message_by_offset(phy)).body == b"classic-017"  # an offset msgId
    assert [decode_record(r).body for r in store.query_by_key("TopicTest", "key42", 8, 0, 2**62)] == [b"classic-042"]

    follower_append(store, [b"dledger-0", b"dledger-1"])
    entry = store.ledger.get(1)
    assert entry is not None and entry.pos == divided + HEADER_SIZE + MARKER.size
    assert bodies(store, 0) == before[0] + [b"dledger-0", b"dledger-1"]
    assert store.max_offset_in_queue("TopicTest", 0) == 32
    store.close()

    again = dledger_store(tmp_path)  # a later load maps the classic log, no recovery of it
    assert isinstance(again.commitlog, MixedCommitLog) and again.divided_offset == divided
    assert bodies(again, 0) == before[0] + [b"dledger-0", b"dledger-1"] and bodies(again, 1) == before[1]
    again.close()


def test_the_first_load_recovers_the_classic_log_as_a_classic_broker_would(tmp_path: Path) -> None:
    """Killed as a classic broker (no checkpoint since), with a ConsumeQueue lost: the first mixed load scans the
    classic log and dispatches it again, as a classic broker's recovery does; the DLedger dispatch never would."""
    classic, _ = classic_store(tmp_path, 40)
    expected = bodies(classic, 1)
    classic.abandon()  # as kill -9: the checkpoint predates every message, the abort file stays
    shutil.rmtree(tmp_path / "consumequeue" / "TopicTest" / "1")
    store = dledger_store(tmp_path)
    assert bodies(store, 1) == expected
    store.close()


def test_a_dledger_log_that_does_not_start_at_the_classic_end_is_refused(tmp_path: Path) -> None:
    dledger_only = dledger_store(tmp_path / "dledger")  # a DLedger log of its own, from position 0
    follower_append(dledger_only, [b"own"])
    dledger_only.close()
    classic, _ = classic_store(tmp_path / "classic", 10)
    classic.close()
    shutil.copytree(tmp_path / "classic" / "commitlog", tmp_path / "dledger" / "commitlog")
    with pytest.raises(ClassicCommitLogError, match="not one mixed CommitLog"):
        dledger_store(tmp_path / "dledger")


def test_a_refused_load_lets_go_of_the_lock_and_the_ledgers_files(tmp_path: Path) -> None:
    """A load that fails unlocks the store and unmaps the DLedger files it mapped, so a second attempt in this
    process is refused for the same reason, not as a store in use by another process (found by a review)."""
    dledger_only = dledger_store(tmp_path / "dledger")
    follower_append(dledger_only, [b"own"])
    dledger_only.close()
    dledger_only.ledger.close()
    classic, _ = classic_store(tmp_path / "classic", 10)
    classic.close()
    shutil.copytree(tmp_path / "classic" / "commitlog", tmp_path / "dledger" / "commitlog")
    refused = unloaded_dledger_store(tmp_path / "dledger")
    with pytest.raises(ClassicCommitLogError):
        refused.load()
    assert refused.ledger.data.files and all(mf.fd < 0 for mf in refused.ledger.data.files)
    with pytest.raises(ClassicCommitLogError, match="not one mixed CommitLog"):
        dledger_store(tmp_path / "dledger")


async def test_retention_deletes_the_classic_segments_first_the_last_one_included(tmp_path: Path) -> None:
    classic, _ = classic_store(tmp_path, 120)
    classic.close()
    store = dledger_store(tmp_path, delete_when=EVERY_HOUR, file_reserved_time=72)
    divided = store.divided_offset
    try:
        follower_append(store, [b"d%03d" % i + bytes(600) for i in range(16)])  # a few entry segments
        entry_files = [mf.path for mf in store.ledger.data.files]
        assert len(entry_files) > 2
        for path in entry_files:  # old enough for DLedger's retention, which waits for the classic log to go
            age(path, 100)
        classic_files = list(store.commitlog.classic.queue.files)
        assert len(classic_files) > 3
        for mf in classic_files[:-1]:
            age(mf.path, 80)
        assert await store.retention.check_once() == len(classic_files) - 1
        assert store.classic_segments() == 1  # the young last one stays
        assert [mf.path for mf in store.ledger.data.files] == entry_files
        assert store.min_phy_offset == store.commitlog.classic.queue.files[0].file_from_offset
        assert store.min_offset_in_queue("TopicTest", 0) > 0

        age(store.commitlog.classic.queue.files[0].path, 80)
        assert await store.retention.check_once() == 1
        assert store.classic_segments() == 0 and not list((tmp_path / "commitlog").iterdir())
        assert not isinstance(store.commitlog, MixedCommitLog) and store.divided_offset == 0  # a plain store now
        # Every classic message is gone from the queues; the first left is the DLedger log's first.
        assert bodies(store, 0)[0] == b"d000" + bytes(600)
        assert store.min_phy_offset == divided
        assert store.earliest_store_time() == 1_700_000_000_000  # the first record's, past the marker
        assert await store.retention.check_once() > 0  # now DLedger's own retention runs
        assert store.ledger.begin_index > 0
    finally:
        store.close()
    again = dledger_store(tmp_path)  # no classic segment left: a plain DLedger store
    assert not isinstance(again.commitlog, MixedCommitLog) and again.divided_offset == 0
    assert bodies(again, 0)[-1] == b"d015" + bytes(600)
    again.close()


async def test_a_manual_delete_reaches_the_classic_segments(tmp_path: Path) -> None:
    """DELETE_EXPIRED_COMMITLOG deletes expired classic segments outside ``deleteWhen`` (the classic rule), the last
    one in the next pass (DLedgerCommitLog.deleteExpiredFile); the entry files it never touches."""
    classic, _ = classic_store(tmp_path, 60)
    classic.close()
    store = dledger_store(tmp_path, delete_when="25", file_reserved_time=72)
    try:
        for mf in store.commitlog.classic.queue.files:
            age(mf.path, 80)
        assert await store.retention.check_once() == 0
        store.retention.manual_delete_times = 2
        with trio.fail_after(1):
            deleted = await store.retention.check_once()
        assert deleted > 0 and store.classic_segments() == 1
        with trio.fail_after(1):
            assert await store.retention.check_once() == 1
        assert store.classic_segments() == 0
    finally:
        store.close()


def test_the_first_message_of_the_dledger_part_lies_past_the_marker_and_its_own_header(tmp_path: Path) -> None:
    """The record's own physical-offset field names where it lies: its entry (after the marker at the divided offset)
    plus the entry's header, so an offset msgId of a message sent after the upgrade reads it back."""
    classic, _ = classic_store(tmp_path, 5)
    classic.close()
    store = dledger_store(tmp_path)
    follower_append(store, [b"after"])
    record = store.look_message_by_offset(store.divided_offset + 2 * HEADER_SIZE + MARKER.size)
    assert record is not None and decode_record(record).body == b"after"
    store.close()


def pushed_entry(index: int, pos: int, queue_offset: int, body: bytes = b"far") -> Entry:
    """Entry ``index`` at ``pos`` as a leader would push it: a record of TopicTest queue 0 at ``queue_offset``."""
    prepared = prepare_message(message(body=body))
    return Entry(index, 1, pos, _filler(prepared, queue_offset, 1_700_000_000_000)(pos))


async def test_a_member_rebuilt_past_the_classic_end_drops_the_classic_part_and_restarts(tmp_path: Path) -> None:
    """The leader deleted entries (it had no classic segment left, or it would not have) and this member, behind,
    is rebuilt at the leader's first entry: the classic part is gone from the group, so the member drops its own
    and its queues restart at the entry's offset, at once and after a restart."""
    classic, _ = classic_store(tmp_path, 30)
    classic.close()
    store = dledger_store(tmp_path)
    follower_append(store, [b"d0", b"d1"])
    far = pushed_entry(10, store.divided_offset + 3 * SEGMENT + 100, queue_offset=40)
    store.ledger.truncate(far)
    store.ledger.set_committed(10)
    store.ledger.persist_checkpoint()
    assert store._log_skipped()
    gone = store._skip_to_begin()  # _dispatch_soon's step, which destroys them in a worker thread
    assert len(gone) == 1 and not isinstance(store.commitlog, MixedCommitLog)
    destroy_segments(gone)
    store._dispatch_committed()
    assert not isinstance(store.commitlog, MixedCommitLog) and store.ledger.rebuild_floor == 0
    assert not list((tmp_path / "commitlog").iterdir())
    assert (store.min_offset_in_queue("TopicTest", 0), store.max_offset_in_queue("TopicTest", 0)) == (40, 41)
    assert bodies(store, 0) == [b"far"]
    store.close()
    again = dledger_store(tmp_path)
    assert bodies(again, 0) == [b"far"] and again.min_phy_offset == far.pos
    again.close()


def test_a_member_rebuilt_and_stopped_before_it_dispatched_drops_the_classic_part_at_load(tmp_path: Path) -> None:
    classic, _ = classic_store(tmp_path, 30)
    classic.close()
    store = dledger_store(tmp_path)
    far = pushed_entry(10, store.divided_offset + 2 * SEGMENT, queue_offset=40)
    store.ledger.truncate(far)
    store.ledger.persist_checkpoint()
    store.close()
    again = dledger_store(tmp_path)  # no longer mixed: the log starts past the classic end
    assert not isinstance(again.commitlog, MixedCommitLog) and not list((tmp_path / "commitlog").iterdir())
    assert bodies(again, 0) == [b"far"] and again.max_offset_in_queue("TopicTest", 0) == 41
    again.close()


@pytest.mark.parametrize("shift", [-SEGMENT, SEGMENT], ids=["below", "above"])
def test_a_rebuild_at_the_first_entry_elsewhere_than_the_classic_end_is_refused(tmp_path: Path, shift: int) -> None:
    """A leader whose first entry lies elsewhere started from another classic copy (nothing was deleted: it is entry
    0): below this member's classic end offsets are its classic records, above it its classic part would be thrown
    away for nothing. Refused, nothing changed."""
    classic, _ = classic_store(tmp_path, 30)
    classic.close()
    store = dledger_store(tmp_path)
    before = bodies(store, 0)
    with pytest.raises(LedgerError):
        store.ledger.truncate(pushed_entry(0, store.divided_offset + shift, queue_offset=15))
    assert isinstance(store.commitlog, MixedCommitLog) and store.ledger.data_start == store.divided_offset
    assert bodies(store, 0) == before and store.ledger.end_index == 0 and store.classic_segments() > 0
    store.close()


def test_a_dledger_log_starting_past_the_classic_end_at_its_first_entry_is_refused_at_load(tmp_path: Path) -> None:
    """No rebuild made it (a rebuild past the end is at a later entry): the data file at the classic end was lost.
    The classic segments stay; the broker does not start."""
    classic, _ = classic_store(tmp_path, 30)
    classic.close()
    store = dledger_store(tmp_path)
    divided = store.divided_offset
    store.close()
    shutil.rmtree(store.ledger.config.data_path)
    ledger = FileLedger(store.ledger.config)
    ledger.load()
    ledger.start_at(divided + SEGMENT)
    ledger.close()
    with pytest.raises(ClassicCommitLogError, match="not one mixed CommitLog"):
        dledger_store(tmp_path)
    assert (tmp_path / "commitlog").is_dir() and list((tmp_path / "commitlog").iterdir())


async def test_queue_offsets_survive_a_restart_after_the_classic_part_went_with_nothing_committed(
    tmp_path: Path,
) -> None:
    """Every classic segment deleted before the DLedger log has a committed entry: the queues keep their offsets
    across a restart (their entries point below the log's start, which nothing can have left uncommitted)."""
    classic, _ = classic_store(tmp_path, 60)
    classic.close()
    store = dledger_store(tmp_path, file_reserved_time=72)
    for mf in store.commitlog.classic.queue.files:
        age(mf.path, 80)
    store.retention.manual_delete_times = 3
    while store.classic_segments():
        await store.retention.check_once()
    assert store.ledger.committed_index == -1 and store.max_offset_in_queue("TopicTest", 0) == 30
    store.close()
    again = dledger_store(tmp_path)
    assert again.max_offset_in_queue("TopicTest", 0) == again.max_offset_in_queue("TopicTest", 1) == 30
    again.close()


def test_what_the_take_over_dispatched_is_durable_before_the_dledger_log_exists(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The DLedger data file marks the take-over done (no later load recovers the classic log again), so by the time
    it is made the queue entries the classic recovery wrote are synced and the checkpoint is at the classic end."""
    classic, _ = classic_store(tmp_path, 40)
    classic.abandon()  # killed: the checkpoint predates every message
    seen: list[tuple[int, bool]] = []
    start_at = FileLedger.start_at

    def watched(ledger: FileLedger, pos: int) -> None:
        store = stores[0]
        synced = all(mf.flushed_position >= mf.wrote_position for cq in store.consume_queues.values()
                     for mf in cq.queue.files)  # fmt: skip
        seen.append((Checkpoint(tmp_path / "checkpoint").safe_offset, synced))
        start_at(ledger, pos)

    monkeypatch.setattr(FileLedger, "start_at", watched)
    stores: list[DLedgerMessageStore] = []
    monkeypatch.setattr(DLedgerMessageStore, "open_files", lambda s: (stores.append(s), MessageStore.open_files(s))[1])
    store = dledger_store(tmp_path)
    assert seen == [(store.divided_offset, True)]
    assert store.consume_queues and all(cq.max_offset == 20 for cq in store.consume_queues.values())
    store.close()


def test_a_copy_whose_records_end_elsewhere_in_the_last_segment_is_named_when_the_leaders_marker_replaces_its_own(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """A slave's store a few messages behind its master's: same last segment, so the same divide; the markers differ
    (where the records end), and the leader's replacing this member's is logged as an error."""
    leaders, _ = classic_store(tmp_path / "master", 40)
    leaders.close()
    lagging, _ = classic_store(tmp_path / "slave", 37)
    lagging.close()
    leader, member = dledger_store(tmp_path / "master"), dledger_store(tmp_path / "slave")
    assert leader.divided_offset == member.divided_offset
    theirs, own = leader.ledger.get(0), member.ledger.get(0)
    assert theirs is not None and own is not None and theirs != own
    member.ledger.truncate(theirs)
    assert member.ledger.get(0) == theirs
    assert "not the leader's copy" in caplog.text
    ends = MARKER.unpack(own.body)[0], MARKER.unpack(theirs.body)[0]
    assert ends[0] < ends[1] and f"records end at {ends[0]}, the leader's at {ends[1]}" in caplog.text
    leader.close()
    member.close()


@pytest.mark.parametrize("full", [False, True], ids=["mid_segment", "full_last_segment"])
def test_a_marker_lost_to_a_crash_is_written_again_from_the_sealed_classic_log(tmp_path: Path, full: bool) -> None:
    """Killed between the first data file and the marker: the next load writes the same marker, the records' end
    read back from the last classic segment; also when that segment was already full, ended by the classic broker's
    own blank (its next segment never made: here deleted)."""
    classic, _ = classic_store(tmp_path, 60)  # three segments
    classic.close()
    if full:
        newest = sorted((tmp_path / "commitlog").iterdir())[-1]
        newest.unlink()
    store = dledger_store(tmp_path)
    marker = store.ledger.get(0)
    assert marker is not None and MARKER.unpack(marker.body)[0] % SEGMENT != 0
    store.close()
    data = store.ledger.config.data_path
    shutil.rmtree(data)
    ledger = FileLedger(store.ledger.config)
    ledger.load()
    ledger.start_at(store.divided_offset)  # the data file, no marker yet
    ledger.close()
    again = dledger_store(tmp_path)
    assert again.ledger.get(0) == marker and again.ledger.end_index == 0
    again.close()


@pytest.mark.parametrize("kind", ["commitlog", "consumequeue", "index"])
async def test_retention_destroys_classic_queue_and_index_files_outside_the_disk_lock(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, kind: str
) -> None:
    """A mixed store's retention deletes its classic segments by the classic rules (DLedgerCommitLog.deleteExpiredFile
    calls MappedFileQueue.deleteExpiredFileByTime on the CleanCommitLogService thread), then the ConsumeQueue and
    index files below them (CleanConsumeQueueService): ours unlinked the queue and index files on the Trio thread and
    waited for the classic segments' destruction while holding the disk lock, so no flush ran meanwhile."""
    small_index = {"max_index_num": 16, "max_hash_slot_num": 8}
    classic = open_store(tmp_path, mapped_file_size_commit_log=SEGMENT, **small_index)
    for i in range(120):
        classic.append(message(body=b"classic-%03d" % i, keys=f"key{i}"))
    classic.close()
    store = dledger_store(tmp_path, disk_usage_ratio=Disk(0.87), delete_commit_log_files_interval=0, **small_index)
    follower_append(store, [b"after"])
    assert store.classic_segments() > 3 and len(store.index.files) > 3  # type: ignore[union-attr]
    slow, ticks = await retention_with_a_slow_unlink(store, tmp_path / kind, monkeypatch)
    assert ticks == 5 and slow.waited_for_go is True
    assert slow.unlinked and not any(os.path.exists(name) for name in slow.unlinked)
    assert store.classic_segments() == 1  # the last one in the next pass (any age on a disk this full)
    assert await store.retention.check_once() == 1 and store.classic_segments() == 0
    assert bodies(store, 0) == [b"after"]
    store.close()
