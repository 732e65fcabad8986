"""Retention of DLedger's entry files (dledger/retention.py, FileLedger.delete_expired) and what it asks of a follower:
a log rebuilt at the leader's first entry when the entries it would continue from are gone (FileLedger.truncate), on
real files, and in a group of three brokers on real sockets under virtual time."""

from __future__ import annotations

import errno
import os
import shutil
import time
from collections.abc import Callable
from pathlib import Path

import attrs
import pytest
import trio
import trio.testing

from broker.embedded_dledger import EmbeddedDLedgerGroup
from dledger.codes import PushType
from dledger.codes import ResponseCode as DLedgerCode
from dledger.commitlog_store import DLedgerMessageStore, _filler
from dledger.config import DLedgerConfig
from dledger.effects import Reply
from dledger.entry import Entry
from dledger.file_store import FileLedger
from dledger.ledger import MemoryLedger
from dledger.messages import PushEntryRequest
from dledger.node import RECENT_BODY_MAX
from dledger.retention import HOUR_MS
from remoting.client import RemotingClient
from remoting.codec.codes import ResponseCode
from remoting.codec.message import decode_record, prepare_message, write_record
from store.consume_queue import ENTRY, FILLER_SIZE
from store.errors import ServiceNotAvailableError
from store.maintenance import clean_expired_consume_queues
from store.results import GetStatus
from tests.broker.helpers import create_topic_request
from tests.conftest import SMALL_STORE
from tests.dledger.cluster import MemCluster
from tests.dledger.test_file_store import DATA_SIZE, append, body
from tests.dledger.test_store_append import _writable_leader
from tests.processors.conftest import send_request
from tests.store.store_helpers import message, small_config
from tests.store.test_multi_path import PathDisk
from tests.store.test_retention import Disk, _SlowUnlink
from tests.store.test_retention_java_parity import cleared_at_88_percent, full_until_the_forcible_ratio

INDEX_SIZE = 32 * 8  # 8 index records a segment
TOPIC = "RetainedTopic"


def ledger_at(path: Path, data_size: int = DATA_SIZE) -> FileLedger:
    config = DLedgerConfig(
        group="g", self_id="n0", peers="n0-a:1", store_base_dir=str(path),
        mapped_file_size_for_entry_data=data_size, mapped_file_size_for_entry_index=INDEX_SIZE,
    )  # fmt: skip
    ledger = FileLedger(config)
    ledger.load()
    return ledger


def age(path: Path, hours: float, now_ms: int | None = None) -> None:
    """Make ``path`` ``hours`` old: before ``now_ms`` (a store's fake clock), or before the real time."""
    then = (time.time() if now_ms is None else now_ms / 1000) - hours * 3600
    os.utime(path, (then, then))


def full_ledger(tmp_path: Path) -> tuple[FileLedger, list[Entry]]:
    """40 entries of 148 bytes: six a 1 KiB segment, seven segments, all committed and flushed."""
    ledger = ledger_at(tmp_path)
    entries = append(ledger, 1, *[body(i) for i in range(40)])
    ledger.set_committed(39)
    ledger.flush_all()
    assert len(ledger.data.files) == 7
    return ledger, entries


def names(directory: Path) -> list[int]:
    return sorted(int(p.name) for p in directory.iterdir() if p.name.isdigit())


def test_expired_segments_go_oldest_first_and_the_log_then_begins_after_them(tmp_path: Path) -> None:
    ledger, entries = full_ledger(tmp_path)
    files = ledger.data.files
    for mf in files[:3] + files[4:6]:  # the fourth is young: deletion stops there, as DLedger's does
        age(mf.path, 80)
    expire_before = int(time.time() * 1000) - 73 * HOUR_MS
    assert ledger.delete_expired(expire_before, entries[-1].end_pos) == 3
    assert ledger.begin_index == 18 and ledger.get(17) is None and ledger.get(18) == entries[18]
    store = tmp_path / "dledger-n0"
    assert names(store / "data")[0] == 3 * DATA_SIZE
    assert names(store / "index")[0] == 2 * INDEX_SIZE  # records 16..23: the segment holding the new first one
    # Any age once forced, but never past what the caller has settled, and never the newest segment.
    assert ledger.delete_expired(0, entries[29].end_pos, force=True) == 1
    assert ledger.begin_index == 24
    assert ledger.delete_expired(0, entries[-1].end_pos, force=True) == 2
    assert ledger.begin_index == 36 and len(ledger.data.files) == 1
    ledger.flush_all()
    ledger.persist_checkpoint()
    ledger.close()
    again = ledger_at(tmp_path)
    assert (again.begin_index, again.end_index, again.committed_index) == (36, 39, 39)
    assert [again.get(i) for i in range(36, 40)] == entries[36:]
    assert append(again, 1, b"next")[0].index == 40


def test_index_segments_below_the_first_entry_go_at_the_load(tmp_path: Path) -> None:
    """A member killed after retention unlinked its oldest data segments but before the index segments below the new
    first entry: the load removes those, as DLedger 0.3.1.2's ``recover`` does (``reviseLedgerBeginIndex``:
    ``indexFileList.resetOffset(ledgerBeginIndex * INDEX_UNIT_SIZE)``), not the next deletion, which may be days
    later."""
    ledger, entries = full_ledger(tmp_path)
    ledger.persist_checkpoint()
    ledger.close()
    store = tmp_path / "dledger-n0"
    for start in names(store / "data")[:3]:  # entries 0..17 gone; 18's record lies in index segment 2 (16..23)
        (store / "data" / f"{start:020d}").unlink()
    again = ledger_at(tmp_path)
    assert (again.begin_index, again.end_index, again.committed_index) == (18, 39, 39)
    assert names(store / "index") == [i * INDEX_SIZE for i in range(2, 5)]
    assert [again.get(i) for i in range(18, 40)] == entries[18:]
    assert append(again, 1, b"next")[0].index == 40


@pytest.mark.parametrize("at", [36, 38], ids=["segment_start", "mid_segment"])
@pytest.mark.parametrize("old", [0, 5], ids=["empty", "behind"])
def test_a_truncate_to_an_entry_past_the_log_starts_it_afresh_there(tmp_path: Path, at: int, old: int) -> None:
    leader, entries = full_ledger(tmp_path / "leader")
    follower = ledger_at(tmp_path / "follower")
    for entry in entries[:old]:
        follower.append_as_follower(entry)
    assert follower.truncate(entries[at]) == at
    assert (follower.begin_index, follower.end_index) == (at, at)
    assert follower.get(at) == entries[at] and follower.get(at - 1) is None
    for entry in entries[at + 1 :]:
        follower.append_as_follower(entry)
    assert follower.write_pos == leader.write_pos  # the leader's positions: the CommitLog offsets agree
    follower.flush_all()
    follower.close()
    again = ledger_at(tmp_path / "follower")
    assert (again.begin_index, again.end_index) == (at, 39)
    assert [again.get(i) for i in range(at, 40)] == entries[at:]
    again.append_as_follower(Entry(40, 1, leader.write_pos, b"more"))


def test_a_log_rebuilt_just_before_a_crash_comes_back_as_rebuilt(tmp_path: Path) -> None:
    """A process killed right after the rebuild (no flush, no close): a restart finds the leading blank, the entry
    after it and nothing of the log before."""
    _, entries = full_ledger(tmp_path / "leader")
    follower = ledger_at(tmp_path / "follower")
    for entry in entries[:5]:
        follower.append_as_follower(entry)
    follower.flush_all()
    follower.truncate(entries[38])
    after_crash = ledger_at(tmp_path / "follower")  # the files as the dead process left them
    assert (after_crash.begin_index, after_crash.end_index) == (38, 38)
    assert after_crash.get(38) == entries[38] and after_crash.get(4) is None
    assert after_crash.write_pos == entries[38].end_pos


# ---- a group of three -----------------------------------------------------------------------------------------------


async def send_all(client: RemotingClient, addr: str, count: int, start: int = 0) -> None:
    for i in range(start, start + count):
        # Bodies above what a leader keeps in memory to push (dledger/node.py's RECENT_BODY_MAX): a deleted entry is
        # then gone from the leader, as it is from DLedger's, and a member behind must be rebuilt.
        answer = await client.invoke(addr, send_request(TOPIC, b"%06d" % i + bytes(RECENT_BODY_MAX)), 10)
        assert answer.code == ResponseCode.SUCCESS, answer.ext_fields


async def caught_up(store: DLedgerMessageStore, leader: DLedgerMessageStore) -> None:
    while (store.ledger.end_index, store.dispatched_index) != (leader.ledger.end_index, leader.dispatched_index):
        await trio.sleep(0.1)


def bodies_from(store: DLedgerMessageStore, queue_id: int = 0) -> list[bytes]:
    cq = store.consume_queue(TOPIC, queue_id)
    out = []
    for offset in range(cq.min_offset, cq.max_offset):
        entry = cq.entry(offset)
        assert entry is not None, offset
        record = store.commitlog.read(entry[0], entry[1])
        assert record is not None, offset
        msg = decode_record(record)
        assert msg.queue_offset == offset
        out.append(msg.body[:6])
    return out


@pytest.mark.parametrize("wiped", [True, False], ids=["new_disk", "old_disk"])
async def test_a_member_away_while_the_group_deleted_old_segments_rejoins_from_the_leaders_first_entry(
    tmp_path: Path, autojump_clock: trio.testing.MockClock, wiped: bool
) -> None:
    every_hour = ";".join(f"{h:02d}" for h in range(24))
    overrides = {**SMALL_STORE, "mapped_file_size_commit_log": 256 * 1024, "delete_when": every_hour}
    async with EmbeddedDLedgerGroup(tmp_path, **overrides) as group, RemotingClient() as client:
        leader = await group.leader()
        answer = await client.invoke(group.addr(leader), create_topic_request(TOPIC, queues=1), 5)
        assert answer.code == ResponseCode.SUCCESS
        await send_all(client, group.addr(leader), 50)
        away = next(m for m in group.ids if m != leader)
        await caught_up(group.store(away), group.store(leader))
        await group.stop(away)
        await send_all(client, group.addr(leader), 400, start=50)
        stores = {m: group.store(m) for m in group.controllers}
        for store in stores.values():
            await caught_up(store, stores[leader])
            while store.ledger.flushed_index < store.ledger.end_index:  # only flushed segments go
                await trio.sleep(0.01)
            for mf in store.ledger.data.files[:-2]:
                age(mf.path, 100)
        # The retention pass runs every 100 ms (deleteWhen is every hour here) until only the two young segments
        # are left and, in its second half, the queue below them went; a wait for that, not for virtual time, as a
        # pass waits for the disk lock a flush holds for real.
        await until(
            lambda: all(len(s.ledger.data.files) == 2 and queue_starts_at_live_data(s) for s in stores.values())
        )
        for store in stores.values():
            assert store.retention.deleted_files > 0
            assert store.ledger.begin_index > 0
            cq = store.consume_queue(TOPIC, 0)
            assert cq.min_offset > 50 and cq.entry(0) is None  # the queue no longer points at deleted data
        begin = stores[leader].ledger.begin_index
        kept = bodies_from(stores[leader])
        assert kept == [b"%06d" % i for i in range(450 - len(kept), 450)]
        # The member comes back (on an empty disk, or with its log ending before the leader's first entry): the
        # leader's first entry is all it can start from.
        if wiped:
            shutil.rmtree(tmp_path / away)
        await group.start(away)
        await send_all(client, group.addr(leader), 20, start=450)
        back = group.store(away)
        with trio.fail_after(60):
            await caught_up(back, stores[leader])
        assert back.ledger.begin_index == begin
        assert [back.ledger.get(i) for i in range(begin, back.ledger.end_index + 1)] == [
            stores[leader].ledger.get(i) for i in range(begin, back.ledger.end_index + 1)
        ]
        assert back.consume_queue(TOPIC, 0).max_offset == 470
        assert bodies_from(back) == bodies_from(stores[leader])
        await group.stop(away)  # and it recovers what it rebuilt
        await group.start(away)
        with trio.fail_after(60):
            await caught_up(group.store(away), stores[leader])
        assert group.store(away).ledger.begin_index == begin
        assert bodies_from(group.store(away)) == bodies_from(stores[leader])


def test_a_checkpoint_older_than_the_deletion_still_gives_a_committed_first_entry(tmp_path: Path) -> None:
    """The checkpoint is written every 3 s: a restart after a deletion may read a committed index below the new
    first entry, which is committed all the same (only committed entries are deleted)."""
    ledger, entries = full_ledger(tmp_path)
    ledger.set_committed(10)
    ledger.persist_checkpoint()
    ledger.set_committed(39)
    assert ledger.delete_expired(0, entries[-1].end_pos, force=True) == 6
    ledger.flush_all()
    after_crash = ledger_at(tmp_path)
    assert (after_crash.begin_index, after_crash.committed_index) == (36, 36)
    assert after_crash.committed_pos == entries[36].end_pos


async def test_disk_usage_forces_deletion_above_85_percent_and_refuses_sends_above_90(
    tmp_path: Path, autojump_clock: trio.testing.MockClock
) -> None:
    overrides = {**SMALL_STORE, "mapped_file_size_commit_log": 256 * 1024}  # deleteWhen stays 04
    async with EmbeddedDLedgerGroup(tmp_path, **overrides) as group, RemotingClient() as client:
        leader = await group.leader()
        addr = group.addr(leader)
        answer = await client.invoke(addr, create_topic_request(TOPIC, queues=1), 5)
        assert answer.code == ResponseCode.SUCCESS
        await send_all(client, addr, 150)
        stores = [group.store(m) for m in group.ids]
        disk = Disk(0.80)  # above diskMaxUsedSpaceRatio (75): expired segments may go, and none is expired
        for store in stores:
            await caught_up(store, group.store(leader))
            while store.ledger.flushed_index < store.ledger.end_index:
                await trio.sleep(0.01)
            store.config = attrs.evolve(store.config, disk_usage_ratio=disk)
        await trio.sleep(1)
        assert all(s.retention.deleted_files == 0 and s.ledger.begin_index == 0 for s in stores)
        # Deletion only behind what is committed, flushed and dispatched: a follower that has dispatched only up to
        # entry 40 keeps the segment holding entry 41, whatever the disk says.
        follower = next(s for s in stores if s is not group.store(leader))
        async with follower.disk_lock:
            dispatched, follower.dispatched_index = follower.dispatched_index, 40
            follower.delete_expired_entries(0, force=True)
            assert 0 < follower.ledger.begin_index <= 41
            follower.dispatched_index = dispatched
        # The passes below wait for conditions, not for a span of virtual time: a pass that deletes waits for the
        # disk lock, which a flush holds across its worker thread for real time while the virtual clock jumps on.
        disk.ratio = 0.87  # any age
        await until(lambda: all(len(s.ledger.data.files) == 1 for s in stores))
        for store in stores:
            assert store.ledger.begin_index > 41
        await send_all(client, addr, 1, start=150)
        disk.ratio = 0.95
        await until(lambda: all(s.disk_full_reason is not None for s in stores))
        refused = await client.invoke(addr, send_request(TOPIC, b"full"), 10)
        assert refused.code == ResponseCode.SERVICE_NOT_AVAILABLE and "disk full" in (refused.remark or "")
        disk.ratio = 0.50
        await until(lambda: all(s.disk_full_reason is None for s in stores))
        await send_all(client, addr, 1, start=151)


async def test_a_follower_whose_disk_is_full_takes_no_entries_until_it_is_not(
    tmp_path: Path, autojump_clock: trio.testing.MockClock
) -> None:
    """A follower whose disk is above DLedger's full ratio (0.90) refuses the leader's entries, as DLedger 0.3.1.2's
    ``DLedgerMmapFileStore.appendAsFollower`` checks ``isDiskFull`` (``handleDoAppend`` then answers 406), so its
    disk does not fill up while the leader, on another disk, goes on with the other follower; back under the ratio it
    takes them again and catches up. The quorum wait is long: virtual time jumps while the push to the healthy
    follower is on the loopback, and a jump past DLedger's 2.5 s wait answered a send OS_PAGECACHE_BUSY."""
    async with (
        EmbeddedDLedgerGroup(tmp_path, **SMALL_STORE, max_wait_ack_time_ms=60_000) as group,
        RemotingClient() as client,
    ):
        leader = await group.leader()
        addr = group.addr(leader)
        answer = await client.invoke(addr, create_topic_request(TOPIC, queues=1), 5)
        assert answer.code == ResponseCode.SUCCESS
        await send_all(client, addr, 3)
        full = group.store(next(m for m in group.ids if m != leader))
        await caught_up(full, group.store(leader))
        disk = Disk(0.95)
        full.config = attrs.evolve(full.config, disk_usage_ratio=disk)
        await until(lambda: full.disk_full_reason is not None)
        end = full.ledger.end_index
        await send_all(client, addr, 5, start=3)  # committed by the leader and the other follower
        await trio.sleep(5)
        assert full.ledger.end_index == end
        disk.ratio = 0.50
        await until(lambda: full.disk_full_reason is None)
        await caught_up(full, group.store(leader))
        assert bodies_from(full) == bodies_from(group.store(leader))


async def test_a_store_root_above_the_full_ratio_refuses_sends_whatever_the_data_disk_says(
    tmp_path: Path, autojump_clock: trio.testing.MockClock
) -> None:
    """DLedger's own disk-full flag reads the store root as well as the data directory (0.3.1.2's CleanSpaceService:
    ``storeBaseRatio`` or ``dataRatio`` above ``diskFullRatio``) and ``appendAsLeader`` refuses every entry while it
    is set. RocketMQ's 10 s disk check reads the data directory alone (4.9.8's ``isSpaceFull`` over
    ``getStorePathPhysic``): on a data disk half used it clears the store's flag, and a send then got in until the
    next pass set it again; a root at 95 % must keep refusing them all."""

    def disk(path: Path) -> float:
        return 0.95 if Path(path) == tmp_path else 0.50

    async with _writable_leader(tmp_path, disk_usage_ratio=disk) as store:
        await trio.sleep(0.5)
        accepted = 0
        for _ in range(1200):  # 12 s: the 10 s disk check comes in between
            try:
                store.check_writable()
                accepted += 1
            except ServiceNotAvailableError:
                pass
            await trio.sleep(0.01)
        assert accepted == 0


def queue_starts_at_live_data(store: DLedgerMessageStore) -> bool:
    """Whether the queue's first entry points at or past the log's first entry (its files below went)."""
    cq = store.consume_queue(TOPIC, 0)
    first = cq.entry(cq.min_offset) if cq is not None else None
    return first is not None and first[0] >= store.commitlog.min_offset


def all_logged(names: list[str], caplog: pytest.LogCaptureFixture) -> bool:
    return bool(names) and all(name in caplog.text for name in names)


async def until(condition: Callable[[], bool], timeout: float = 60) -> None:
    with trio.fail_after(timeout):
        while not condition():
            await trio.sleep(0.1)


def test_a_truncate_starts_a_log_afresh_only_at_a_committed_entry_and_never_below_its_first(tmp_path: Path) -> None:
    """A follower rebuilds only to the leader's word that the entry is committed, and a TRUNCATE below its own
    first entry (late, after its retention moved it) is refused: the log stays as it was."""
    cluster = MemCluster(3)
    leader = cluster.leader()
    follower = next(i for i in cluster.ids if i != leader)
    cluster.crash(follower)
    cluster.ledgers[follower] = ledger_at(tmp_path, MemoryLedger().segment_size)  # type: ignore[assignment]
    cluster.start(follower)
    cluster.append_and_wait(leader, *[body(i) for i in range(12)])
    cluster.run_until(lambda: cluster.ledgers[follower].committed_index == cluster.ledgers[leader].end_index)
    node, ledger = cluster.node(follower), cluster.ledgers[follower]
    term, end = node.member.curr_term, ledger.end_index
    far = Entry(end + 10, term, 100 * MemoryLedger().segment_size, b"far")

    def truncate(entry: Entry, commit_index: int) -> int:
        request = PushEntryRequest(group="g", remote_id=follower, local_id=leader, leader_id=leader, term=term,
                                   type=PushType.TRUNCATE, entry=entry, commit_index=commit_index)  # fmt: skip
        node.handle_request(cluster.now, request, ("test", 0))
        answers = [e.response for e in node.drain() if isinstance(e, Reply)]
        assert len(answers) == 1
        return answers[0].code

    assert truncate(far, commit_index=end) == DLedgerCode.INCONSISTENT_STATE
    assert (ledger.begin_index, ledger.end_index) == (0, end)
    assert truncate(far, commit_index=far.index) == DLedgerCode.SUCCESS
    assert (ledger.begin_index, ledger.end_index) == (far.index, far.index)
    assert truncate(cluster.ledgers[leader].entries[3], commit_index=far.index) == DLedgerCode.INCONSISTENT_STATE
    assert (ledger.begin_index, ledger.end_index) == (far.index, far.index)


# ---- a rebuilt member's store on restart ----------------------------------------------------------------------------


def member_store(root: Path) -> DLedgerMessageStore:
    dledger = DLedgerConfig(group="g", self_id="n1", peers="n0-127.0.0.1:1;n1-127.0.0.1:2;n2-127.0.0.1:3",
                            store_base_dir=str(root), mapped_file_size_for_entry_data=4096)  # fmt: skip
    store = DLedgerMessageStore(small_config(root, mapped_file_size_consume_queue=64 * 20), dledger)
    store.load()
    return store


def record_entry(index: int, pos: int, queue_offset: int) -> Entry:
    """Entry ``index`` at ``pos`` holding a record of TopicTest queue 0 at ``queue_offset``."""
    prepared = prepare_message(message(body=b"kept"))
    data = bytearray(prepared.size)
    write_record(data, 0, prepared, queue_offset, pos + 48, 1_700_000_000_000)
    return Entry(index, 1, pos, bytes(data))


@pytest.mark.parametrize("lead", [0, 1000], ids=["segment_start", "mid_segment"])
def test_a_member_rebuilt_before_a_restart_restarts_its_queues_at_the_first_entry(tmp_path: Path, lead: int) -> None:
    """The member was rebuilt at the leader's first entry and stopped before it dispatched anything: on restart its
    queue, whose entries all point below that entry (some into the segment's leading blank), restarts at the entry's
    queue offset, with nothing before it counted as live."""
    store = member_store(tmp_path)
    cq = store.consume_queue("TopicTest", 0)
    first = record_entry(40, 5 * 4096 + lead, queue_offset=70)
    for offset in range(3):  # the member's old entries: below the segment, or into its leading blank
        cq.put(offset, first.pos - 300 + 100 * offset, 90, 0)
    store.ledger.truncate(first)
    store.close()
    again = member_store(tmp_path)
    assert (again.ledger.begin_index, again.ledger.committed_index, again.dispatched_index) == (40, 40, 40)
    assert again.min_phy_offset == first.pos  # commitLogMinOffset: the first entry, past the leading blank
    cq = again.consume_queue("TopicTest", 0)
    assert (cq.min_offset, cq.max_offset) == (70, 71)
    assert cq.entry(70) == (first.pos + 48, len(first.body), cq.entry(70)[2])
    assert all(cq.entry(offset) is None for offset in range(70))
    again.close()


def test_a_queue_left_ending_in_fillers_by_a_crash_mid_restart_is_dispatched_again(tmp_path: Path) -> None:
    """Killed between a queue restart's fillers and its entry: on restart the queue has no live entry and covers
    nothing of the log, so the entry is dispatched again."""
    store = member_store(tmp_path)
    first = record_entry(40, 5 * 4096, queue_offset=70)
    store.ledger.truncate(first)
    store.close()
    segment = tmp_path / "consumequeue" / "TopicTest" / "0" / f"{64 * 20:020d}"
    segment.parent.mkdir(parents=True)
    segment.write_bytes(ENTRY.pack(0, FILLER_SIZE, 0) * 6 + bytes(58 * 20))  # offsets 64..69, then nothing
    again = member_store(tmp_path)
    cq = again.consume_queue("TopicTest", 0)
    assert again.dispatched_index == 40 and cq.max_offset == 71
    assert cq.entry(70) is not None and cq.entry(70)[0] == first.pos + 48
    again.close()


# ---- settings DLedgerCommitLog passes on ----------------------------------------------------------------------------


@pytest.mark.parametrize(("forcibly", "ratio_setting", "expected"), [(True, 75, [True]), (False, 75, [False]),
                                                                     (True, 99, [True])])  # fmt: skip
async def test_force_clean_follows_clean_file_forcibly_enable_and_the_clamped_ratio(
    tmp_path: Path, forcibly: bool, ratio_setting: int, expected: list[bool]
) -> None:
    """DLedgerCommitLog.java feeds DLedger's enableDiskForceClean from cleanFileForciblyEnable, and its
    diskSpaceRatioToCheckExpired from getDiskMaxUsedSpaceRatio (clamped to 10..95): a disk 97 % used is past it even
    with diskMaxUsedSpaceRatio=99. Found by a review; failed before."""
    store = member_store(tmp_path)
    store.config = attrs.evolve(store.config, disk_usage_ratio=Disk(0.97), clean_file_forcibly_enable=forcibly,
                                disk_max_used_space_ratio=ratio_setting, delete_when="99")  # fmt: skip
    forced: list[bool] = []

    def delete_expired_entries(_expire_before: int, *, force: bool, limit: int) -> int:
        forced.append(force)
        return 0

    store.delete_expired_entries = delete_expired_entries  # type: ignore[method-assign]
    await store.retention.check_once()
    assert forced == expected
    store.close()


def settled_store_on_a_full_disk(root: Path) -> DLedgerMessageStore:
    """A member store of 20 entries (four a 4 KiB segment, five segments at least) committed, flushed and dispatched,
    on a disk 87 % used: a pass deletes every segment but the newest, whatever its age."""
    store = member_store(root)
    ledger = store.ledger
    append(ledger, 1, *[body(i, 1000) for i in range(20)])
    ledger.set_committed(19)
    ledger.flush_all()
    store.dispatched_index = 19
    store.config = attrs.evolve(store.config, disk_usage_ratio=Disk(0.87))
    assert len(ledger.data.files) >= 5
    return store


async def test_a_pass_deletes_entry_segments_100_ms_apart_letting_the_disk_lock_go_between(
    tmp_path: Path, autojump_clock: trio.testing.MockClock
) -> None:
    """DLedger's CleanSpaceService deletes the expired data segments of a pass 100 ms apart
    (dledger/.../store/file/DLedgerMmapFileStore.java passes ``deleteFilesInterval`` 100 to MmapFileList
    .deleteExpiredFileByTime, which sleeps it between two deletions), as the classic store's
    ``deleteCommitLogFilesInterval``, spreading the unlinks of up to ten 1 GiB files. Ours deleted them all at once,
    holding the store's disk lock (no flush) for the whole pass."""
    store = settled_store_on_a_full_disk(tmp_path)
    files = store.ledger.data.files
    count = len(files)
    async with trio.open_nursery() as nursery:
        nursery.start_soon(store.retention.check_once)
        await trio.sleep(0.05)
        assert len(files) == count - 1
        assert not store.disk_lock.locked()  # flushes go on between two deletions
        await trio.sleep(0.1)
        assert len(files) == count - 2
    assert len(files) == 1
    assert store.retention.deleted_files == count - 1
    store.close()


async def test_a_pass_pauses_after_a_deletion_only_while_an_older_segment_than_the_newest_is_left(
    tmp_path: Path, autojump_clock: trio.testing.MockClock
) -> None:
    """DLedger 0.3.1.2's MmapFileList.deleteExpiredFileByTime (dledger/.../store/file/MmapFileList.java) sleeps its
    100 ms after a deletion only when ``(i + 1) < mfsLength``: not after the segment just before the newest. A pass
    deleting n segments takes n - 1 pauses; ours paused once more after the last, holding the next pass back."""
    store = settled_store_on_a_full_disk(tmp_path)
    count = len(store.ledger.data.files)
    start = trio.current_time()
    assert await store.retention.check_once() == count - 1
    assert trio.current_time() - start == pytest.approx((count - 2) * 0.1)
    store.close()


# ---- unlinks off the Trio thread, outside the disk lock --------------------------------------------------------------


def keyed_store(root: Path, **overrides: object) -> DLedgerMessageStore:
    """A single-member store whose index files hold 16 keys each (4 KiB entry segments, 8 entries a queue file)."""
    dledger = DLedgerConfig(group="g", self_id="n0", peers="n0-127.0.0.1:1", store_base_dir=str(root),
                            mapped_file_size_for_entry_data=4096)  # fmt: skip
    store = DLedgerMessageStore(small_config(root, max_hash_slot_num=8, max_index_num=16, **overrides), dledger)
    store.load()
    return store


def keyed_entry(index: int, pos: int, queue_offset: int, size: int = 8) -> Entry:
    """Entry ``index`` at ``pos`` as a leader would push it: a record of TopicTest queue 0 with a key."""
    prepared = prepare_message(message(body=bytes(size), keys=f"k{index}"))
    return Entry(index, 1, pos, _filler(prepared, queue_offset, 1_700_000_000_000)(pos))


def keyed_records(store: DLedgerMessageStore, count: int, size: int = 8) -> None:
    """``count`` entries, each a keyed record of TopicTest queue 0, committed, flushed and dispatched."""
    ledger = store.ledger
    first = store.max_offset_in_queue("TopicTest", 0)
    for i in range(count):
        prepared = prepare_message(message(body=bytes(size), keys=f"k{first + i}"))
        ledger.append_as_leader(1, [(prepared.size, _filler(prepared, first + i, 1_700_000_000_000))])
    ledger.set_committed(ledger.end_index)
    ledger.flush_all()
    ledger.persist_checkpoint()
    store._dispatch_committed()


async def blocked_unlink_lets_the_loop_and_a_flush_run(store: DLedgerMessageStore, slow: _SlowUnlink) -> int:
    """Once an unlink ``slow`` blocks has started: the scheduler passes other tasks got, after a flush of the store
    took its disk lock; then the unlink goes on."""
    while not slow.entered.is_set():
        await trio.sleep(0.001)
    ticks = 0
    for _ in range(5):  # other tasks run while the unlink is blocked
        await trio.sleep(0)
        ticks += 1
    await store.flush_service.flush_once()  # and the disk lock is free
    slow.go.set()
    return ticks


async def retention_with_a_slow_unlink(
    store: DLedgerMessageStore, under: Path, monkeypatch: pytest.MonkeyPatch
) -> tuple[_SlowUnlink, int]:
    """One retention round whose unlinks ``under`` block until the loop and a flush ran: the unlink and the ticks."""
    slow = _SlowUnlink(under)
    monkeypatch.setattr(os, "unlink", slow)
    async with trio.open_nursery() as nursery:
        nursery.start_soon(store.retention.check_once)
        ticks = await blocked_unlink_lets_the_loop_and_a_flush_run(store, slow)
    return slow, ticks


@pytest.mark.parametrize("kind", ["consumequeue", "index"])
async def test_retention_unlinks_queue_and_index_files_off_the_trio_thread_and_outside_the_disk_lock(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, kind: str
) -> None:
    """RocketMQ deletes the ConsumeQueue and index files below a DLedger CommitLog's new minimum on its
    CleanConsumeQueueService thread (store/.../DefaultMessageStore.java deleteExpiredFiles, DLedgerCommitLog's
    getMinOffset), as the classic store now does in a worker thread after letting go of the disk lock
    (store/services.py). Ours unlinked them on the Trio thread under the disk lock right after the entry segment
    went (an index file is 420 MB): every connection and every flush stalled meanwhile."""
    store = keyed_store(tmp_path, disk_usage_ratio=Disk(0.87))  # any age: every entry segment but the newest goes
    while len(store.index.files) < 3 or len(store.ledger.data.files) < 3:  # type: ignore[union-attr]
        keyed_records(store, 8)
    keyed_records(store, 40, size=300)
    slow, ticks = await retention_with_a_slow_unlink(store, tmp_path / kind, monkeypatch)
    assert ticks == 5 and slow.waited_for_go is True
    assert slow.unlinked and not any(os.path.exists(name) for name in slow.unlinked)
    assert store.ledger.begin_index > 0
    offset = store.min_offset_in_queue("TopicTest", 0)
    assert offset > 0 and store.get("TopicTest", 0, offset, 32).status is GetStatus.FOUND
    store.close()


@pytest.mark.parametrize("kind", ["consumequeue", "index"])
async def test_a_rebuilt_follower_unlinks_the_files_below_its_first_entry_outside_the_disk_lock(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, kind: str
) -> None:
    """A follower rebuilt at the leader's first entry drops every ConsumeQueue and index file below it before it
    dispatches on (:meth:`DLedgerMessageStore._dispatch_soon`): ours unlinked them on the Trio thread under the disk
    lock."""
    store = keyed_store(tmp_path)
    while len(store.index.files) < 3:  # type: ignore[union-attr]
        keyed_records(store, 8)
    ledger = store.ledger
    far = keyed_entry(ledger.end_index + 10, (len(ledger.data.files) + 2) * 4096, queue_offset=500)
    ledger.truncate(far)
    ledger.set_committed(far.index)
    ledger.persist_checkpoint()
    assert store._log_skipped()
    slow = _SlowUnlink(tmp_path / kind)
    monkeypatch.setattr(os, "unlink", slow)
    store._dispatch_wanted = wanted = trio.Event()
    async with trio.open_nursery() as nursery:
        nursery.start_soon(store._dispatch_soon)
        wanted.set()
        ticks = await blocked_unlink_lets_the_loop_and_a_flush_run(store, slow)
        while store.dispatched_index != far.index:
            await trio.sleep(0.001)
        nursery.cancel_scope.cancel()
    assert ticks == 5 and slow.waited_for_go is True
    assert slow.unlinked and not any(os.path.exists(name) for name in slow.unlinked)
    assert store.min_offset_in_queue("TopicTest", 0) == 500 and store.max_offset_in_queue("TopicTest", 0) == 501
    store.close()


@pytest.mark.parametrize("kind", ["consumequeue", "index"])
async def test_a_file_that_cannot_be_unlinked_is_logged_and_retention_goes_on(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
    kind: str,
    autojump_clock: trio.testing.MockClock,
) -> None:
    """RocketMQ's MappedFile.destroy (store/src/main/java/org/apache/rocketmq/store/MappedFile.java) logs a file it
    cannot delete (``File.delete`` returns false) and the clean service goes on. Ours let the OSError of an unlink
    (EACCES, EROFS, EIO) out of the retention task, which ended the DLedger store and its broker."""
    store = keyed_store(tmp_path, disk_usage_ratio=Disk(0.87))  # any age: every entry segment but the newest goes
    while len(store.index.files) < 3 or len(store.ledger.data.files) < 3:  # type: ignore[union-attr]
        keyed_records(store, 8)
    keyed_records(store, 40, size=300)
    real, refused = os.unlink, []
    directory = str(tmp_path / kind)

    def unlink(path: os.PathLike[str] | str, *args: object, **kwargs: object) -> None:
        if os.fspath(path).startswith(directory):
            refused.append(os.fspath(path))
            raise PermissionError(errno.EACCES, "Permission denied", os.fspath(path))
        real(path, *args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(os, "unlink", unlink)
    async with trio.open_nursery() as nursery:
        nursery.start_soon(store.retention.run)
        # The queue and index files go in cleanFilesPeriodically, a minute after the start, after the entry segments.
        await until(lambda: len(store.ledger.data.files) == 1 and all_logged(refused, caplog), timeout=180)
        nursery.cancel_scope.cancel()
    assert refused and all(os.path.exists(name) for name in refused)  # left behind, out of the store
    assert all(name in caplog.text for name in refused)
    offset = store.min_offset_in_queue("TopicTest", 0)
    assert offset > 0 and store.get("TopicTest", 0, offset, 32).status is GetStatus.FOUND
    store.close()


async def test_queue_and_index_files_below_the_log_go_at_the_first_pass_after_a_restart(tmp_path: Path) -> None:
    """RocketMQ's CleanConsumeQueueService runs every ``cleanResourceInterval`` whatever the hour and deletes the
    ConsumeQueue and index files wholly below the CommitLog's minimum once it rose past the last one seen (0 after a
    start: store/src/main/java/org/apache/rocketmq/store/DefaultMessageStore.java deleteExpiredFiles, with
    DLedgerCommitLog.getMinOffset), as the classic store's retention does. Ours dropped them only in a pass that
    deleted entry segments: a member killed after its entry segments went but before the queue and index files were
    unlinked (or whose old segments were removed by hand) kept them until the next entry segment went, at
    ``deleteWhen`` or on a full disk."""
    store = keyed_store(tmp_path)
    while len(store.index.files) < 3 or len(store.ledger.data.files) < 3:  # type: ignore[union-attr]
        keyed_records(store, 8)
    keyed_records(store, 40, size=300)
    ledger = store.ledger
    assert ledger.delete_expired(0, ledger.committed_pos, force=True) > 0  # the kill comes before the queue files go
    store.close()
    cq_first = tmp_path / "consumequeue" / "TopicTest" / "0" / f"{0:020d}"
    index_first = min((tmp_path / "index").iterdir())
    again = keyed_store(tmp_path, disk_usage_ratio=Disk(0.1), delete_when="99")  # nothing else due
    try:
        assert await again.retention.check_once() == 0  # no entry segment goes
        assert not cq_first.exists() and not index_first.exists()
        offset = again.min_offset_in_queue("TopicTest", 0)
        assert offset > 0 and again.get("TopicTest", 0, offset, 32).status is GetStatus.FOUND
    finally:
        again.close()


def topic_records(store: DLedgerMessageStore, topic: str, count: int, first: int = 0) -> None:
    """``count`` entries of ``topic`` queue 0 from queue offset ``first``, committed, flushed and dispatched."""
    ledger = store.ledger
    for offset in range(first, first + count):
        prepared = prepare_message(message(topic=topic, body=bytes(8)))
        ledger.append_as_leader(1, [(prepared.size, _filler(prepared, offset, 1_700_000_000_000))])
    ledger.set_committed(ledger.end_index)
    ledger.flush_all()
    ledger.persist_checkpoint()
    store._dispatch_committed()


async def test_a_queue_file_made_again_at_a_taken_files_path_outlives_its_destruction(tmp_path: Path) -> None:
    """Retention takes the ConsumeQueue files below the log's first entry out under the disk lock and destroys them
    after it, once a disk thread is free. A queue destroyed meanwhile (cleanExpiredConsumerQueue) and sent to again
    starts at offset 0, its first file made at the path of the one taken out: the late destruction unlinked the new
    file by its name, and the messages it indexes were gone from the queue after a restart. RocketMQ's
    MappedFile.destroy deletes the file it maps, before the queue lets it go (store/src/main/java/org/apache/
    rocketmq/store/MappedFileQueue.java deleteExpiredFileByOffset)."""
    store = keyed_store(tmp_path, disk_usage_ratio=Disk(0.87))  # any age: every entry segment but the newest goes
    topic_records(store, "OldTopic", 9)  # two queue files, the first wholly in the first entry segment
    while len(store.ledger.data.files) < 3:
        keyed_records(store, 8)
    old_first = tmp_path / "consumequeue" / "OldTopic" / "0" / f"{0:020d}"
    assert old_first.exists()
    busy = [object() for _ in range(int(store.disk_limiter.total_tokens))]
    for borrower in busy:  # every disk thread busy (flushes, other destructions): the taken files wait
        await store.disk_limiter.acquire_on_behalf_of(borrower)
    async with trio.open_nursery() as nursery:
        nursery.start_soon(store.retention.check_once)
        while store.disk_limiter.statistics().tasks_waiting == 0:
            await trio.sleep(0.001)
        assert store.ledger.begin_index > 0 and store.min_offset_in_queue("OldTopic", 0) > 0
        assert await clean_expired_consume_queues(store) == [("OldTopic", 0)]
        topic_records(store, "OldTopic", 1)  # sent to again: offset 0, a new first file
        assert old_first.exists() and store.max_offset_in_queue("OldTopic", 0) == 1
        for borrower in busy:
            store.disk_limiter.release_on_behalf_of(borrower)
    assert old_first.exists()
    store.close()
    again = keyed_store(tmp_path, delete_when="99")
    try:
        assert again.get("OldTopic", 0, 0, 32).status is GetStatus.FOUND
    finally:
        again.close()


async def test_the_disk_check_every_10_s_lets_writes_in_again_at_90_percent(
    tmp_path: Path, autojump_clock: trio.testing.MockClock
) -> None:
    """In DLedger mode 4.9.8 still runs CleanCommitLogService.isSpaceFull every 10 s, over the DLedger data path
    (store/src/main/java/org/apache/rocketmq/store/DefaultMessageStore.java addScheduleTask, getStorePathPhysic): it
    clears the disk-full flag at or below diskSpaceWarningLevelRatio, and DLedger's own DISK_FULL ends there too. A
    disk back at 88 % takes sends within 10 s; ours refused them until it was at 85 %."""
    store = member_store(tmp_path)
    disk = Disk(0.95)
    store.config = attrs.evolve(store.config, disk_usage_ratio=disk, delete_when="99")
    store.delete_expired_entries = lambda _expire_before, *, force, limit: 0  # type: ignore[method-assign]
    for directory in store.ledger.data.dirs.writable:  # isSpaceFull reads a data directory that exists (else -1)
        directory.mkdir(parents=True, exist_ok=True)
    async with trio.open_nursery() as nursery:
        nursery.start_soon(store.retention.run)
        await trio.sleep(1.5)
        await cleared_at_88_percent(store, disk, passes_for=5)
        nursery.cancel_scope.cancel()
    store.close()


async def test_the_store_s_pass_reads_the_consume_queue_disk_and_dledger_s_the_store_root(tmp_path: Path) -> None:
    """In DLedger mode 4.9.8's CleanCommitLogService.isSpaceToDelete reads ``getStorePathPhysic`` (the DLedger data
    path) and ``getStorePathLogic`` (``<storePathRootDir>/consumequeue``), never the store root
    (store/src/main/java/org/apache/rocketmq/store/DefaultMessageStore.java); DLedger 0.3.1.2's CleanSpaceService
    reads ``storeBaseDir`` (the store root, DLedgerCommitLog's setStoreBaseDir) and ``getDataStorePath``. A
    ConsumeQueue disk 95 % used marks the store full, a root 95 % used only DLedger's flag. Ours read the root and
    the data path for both (found by a review)."""
    store = member_store(tmp_path)
    cq_dir = store.config.consume_queue_dir
    cq_dir.mkdir(parents=True, exist_ok=True)  # DefaultMessageStore's constructor makes it
    data_dirs = store.ledger.data.dirs.writable
    for directory in data_dirs:
        directory.mkdir(parents=True, exist_ok=True)
    disk = PathDisk({cq_dir: 0.95, **dict.fromkeys(data_dirs, 0.5)})
    store.config = attrs.evolve(store.config, disk_usage_ratio=disk, delete_when="99")
    await store.retention.check_once()
    assert store.disk_full_reason is not None
    assert not store.ledger.disk_full
    disk.ratios = {cq_dir: 0.5, **dict.fromkeys(data_dirs, 0.5), tmp_path: 0.95}
    await store.retention.check_once()
    assert store.disk_full_reason is None
    assert store.ledger.disk_full
    store.close()


async def test_a_full_disk_keeps_refusing_writes_until_it_is_back_at_85_percent(tmp_path: Path) -> None:
    """In DLedger mode RocketMQ 4.9.8 still runs CleanCommitLogService over the DLedger data path, whose
    isSpaceToDelete marks the store full above 0.90 and OK only at or below 0.85 (diskSpaceCleanForciblyRatio),
    leaving the flag in between (store/src/main/java/org/apache/rocketmq/store/DefaultMessageStore.java): a pass at
    0.88 keeps refusing sends (the 10 s isSpaceFull check clears the flag there: the test above)."""
    store = member_store(tmp_path)
    disk = Disk(0.95)
    store.config = attrs.evolve(store.config, disk_usage_ratio=disk, delete_when="99")
    store.delete_expired_entries = lambda _expire_before, *, force, limit: 0  # type: ignore[method-assign]
    await full_until_the_forcible_ratio(store, disk)
    store.close()
