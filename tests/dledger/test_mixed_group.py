"""A classic broker's store taken over by a DLedger group, as RocketMQ's guide to upgrading a cluster to DLedger has it
(each new member starts from a copy of the old store): on real sockets under virtual time, with our producer and
push consumers. The old messages stay readable on every member at their queue offsets, a consumer group goes on from
the offset it had committed, sends continue the queue offsets, and a failover keeps all of it."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
import trio
import trio.testing

from broker.embedded import EmbeddedCluster
from broker.embedded_dledger import EmbeddedDLedgerGroup
from client.consumer.listener import ConsumeConcurrentlyStatus
from client.consumer.push import PushConsumer
from client.message import Message, MessageExt
from client.producer import Producer
from dledger.commitlog_store import DLedgerMessageStore, MixedCommitLog
from dledger.elector import Elector
from remoting.client import RemotingClient
from remoting.codec.bodies import ConsumeFromWhere
from remoting.codec.codes import ResponseCode
from remoting.codec.message import decode_record
from tests.broker.helpers import create_topic_request
from tests.conftest import SMALL_STORE
from tests.dledger.test_retention import TOPIC as RETAINED
from tests.dledger.test_retention import age, bodies_from, caught_up, queue_starts_at_live_data, send_all, until

TOPIC = "UpgradedTopic"
STORE = {**SMALL_STORE, "mapped_file_size_commit_log": 64 * 1024}  # a few classic segments; entry files as large


class Consumed:
    """What one push consumer group received."""

    def __init__(self, group: str, namesrv: str, first: bool) -> None:
        where = ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET if first else ConsumeFromWhere.CONSUME_FROM_LAST_OFFSET
        self.consumer = PushConsumer(group, namesrv, consume_from_where=where)
        self.consumer.subscribe(TOPIC)
        self.consumer.register_message_listener(self._listener)
        self.bodies: list[bytes] = []

    async def _listener(self, msgs: list[MessageExt]) -> ConsumeConcurrentlyStatus:
        self.bodies.extend(m.body for m in msgs)
        return ConsumeConcurrentlyStatus.CONSUME_SUCCESS

    async def until(self, expected: set[bytes]) -> None:
        with trio.fail_after(300):
            while set(self.bodies) != expected:
                await trio.sleep(1)
        await trio.sleep(10)  # nothing more comes


async def produce(namesrv: str, bodies: list[bytes]) -> list[int]:
    """Send ``bodies`` through our producer; returns the queue offsets they got."""
    async with Producer("pg-upgrade", namesrv) as producer:
        return [(await producer.send(Message(TOPIC, body, keys=body[:8].decode()))).queue_offset for body in bodies]


def queue_bodies(store: DLedgerMessageStore) -> dict[int, list[tuple[int, bytes]]]:
    """Every queue of the topic as ``(queue offset, body)``, read through the member's CommitLog."""
    out: dict[int, list[tuple[int, bytes]]] = {}
    for queue_id in range(2):
        cq = store.consume_queue(TOPIC, queue_id)
        rows = []
        for offset in range(cq.min_offset, cq.max_offset):
            entry = cq.entry(offset)
            assert entry is not None
            record = store.commitlog.read(entry[0], entry[1])
            assert record is not None, (queue_id, offset)
            msg = decode_record(record)
            rows.append((msg.queue_offset, msg.body))
        out[queue_id] = rows
    return out


async def test_a_classic_store_copied_to_a_dledger_group_keeps_messages_offsets_and_consumer_progress(
    tmp_path: Path, autojump_clock: trio.testing.MockClock
) -> None:
    old = [b"old-%04d" % i + bytes(1000) for i in range(200)]
    async with EmbeddedCluster(tmp_path / "classic", **STORE) as classic, RemotingClient() as client:
        answer = await client.invoke(classic.broker_addr, create_topic_request(TOPIC, queues=2), 5)
        assert answer.code == ResponseCode.SUCCESS
        await produce(classic.namesrv_addr, old)
        before = Consumed("cg-before", classic.namesrv_addr, first=True)
        async with before.consumer:  # its offsets are committed to the broker when it stops
            await before.until(set(old))
    for member in ("n0", "n1", "n2"):
        shutil.copytree(tmp_path / "classic" / "broker", tmp_path / "group" / member)

    async with EmbeddedDLedgerGroup(tmp_path / "group", **STORE) as group:
        leader = await group.leader()
        stores = {m: group.store(m) for m in group.ids}
        for store in stores.values():
            assert isinstance(store.commitlog, MixedCommitLog) and store.commitlog.classic.queue.files
        divided = stores[leader].divided_offset
        assert len({s.divided_offset for s in stores.values()}) == 1 and divided >= 3 * 64 * 1024
        new = [b"new-%04d" % i for i in range(50)]
        offsets = await produce(group.namesrv_addr, new)
        assert min(offsets) == 100  # each queue goes on after its 100 classic messages
        with trio.fail_after(60):
            while {s.dispatched_index for s in stores.values()} != {stores[leader].ledger.end_index}:
                await trio.sleep(0.1)
        expected = queue_bodies(stores[leader])
        assert sorted(body for rows in expected.values() for _, body in rows[:100]) == sorted(old)
        assert all([offset for offset, _ in rows] == list(range(len(rows))) for rows in expected.values())
        assert all(queue_bodies(s) == expected for s in stores.values())

        after = Consumed("cg-before", group.namesrv_addr, first=True)  # the group of before: from its offsets
        async with after.consumer:
            await after.until(set(new))
        assert sorted(after.bodies) == sorted(new)  # nothing of before again

        await group.stop(leader)  # a failover: the new leader serves the classic part as well
        second = await group.leader()
        more = [b"more-%04d" % i for i in range(20)]
        await produce(group.namesrv_addr, more)
        everything = Consumed("cg-everything", group.namesrv_addr, first=True)
        async with everything.consumer:
            await everything.until(set(old) | set(new) | set(more))
        assert len(everything.bodies) == len(old) + len(new) + len(more)

        await group.start(leader)  # back from its own files: a mixed store's later load
        back = group.store(leader)
        with trio.fail_after(60):
            while back.dispatched_index != group.store(second).dispatched_index:
                await trio.sleep(0.1)
        assert back.divided_offset == divided
        assert queue_bodies(back) == queue_bodies(group.store(second))


async def test_a_member_away_while_the_group_deleted_the_classic_part_and_old_entries_rejoins_without_them(
    tmp_path: Path, autojump_clock: trio.testing.MockClock
) -> None:
    """Retention deletes the classic segments first, then old entry files; a member stopped meanwhile comes back with
    its classic part, is rebuilt at the leader's first entry, and drops that part as the others did (its segments
    destroyed in a worker thread), its queue equal to the leader's."""
    every_hour = ";".join(f"{h:02d}" for h in range(24))
    overrides = {**SMALL_STORE, "mapped_file_size_commit_log": 256 * 1024, "delete_when": every_hour}
    async with EmbeddedCluster(tmp_path / "classic", **overrides) as classic, RemotingClient() as client:
        answer = await client.invoke(classic.broker_addr, create_topic_request(RETAINED, queues=1), 5)
        assert answer.code == ResponseCode.SUCCESS
        await send_all(client, classic.broker_addr, 100)
    for member in ("n0", "n1", "n2"):
        shutil.copytree(tmp_path / "classic" / "broker", tmp_path / "group" / member)
    async with EmbeddedDLedgerGroup(tmp_path / "group", **overrides) as group, RemotingClient() as client:
        leader = await group.leader()
        await send_all(client, group.addr(leader), 10, start=100)
        away = next(m for m in group.ids if m != leader)
        await caught_up(group.store(away), group.store(leader))
        assert group.store(away).classic_segments() > 1
        await group.stop(away)
        await send_all(client, group.addr(leader), 300, start=110)
        stores = {m: group.store(m) for m in group.controllers}
        for store in stores.values():
            await caught_up(store, stores[leader])
            while store.ledger.flushed_index < store.ledger.end_index:
                await trio.sleep(0.01)
            for mf in store.commitlog.classic.queue.files + store.ledger.data.files[:-2]:  # type: ignore[attr-defined]
                age(mf.path, 100)
        # The classic segments go in CleanCommitLogService's passes (a minute after the start, then every 10 s), the
        # entry files once a later pass found none left; the queue files below the log in DLedger's pass's second
        # half, deleteConsumeQueueFilesInterval after the log's.
        await until(
            lambda: all(
                s.classic_segments() == 0 and len(s.ledger.data.files) == 2 and queue_starts_at_live_data(s)
                for s in stores.values()
            ),
            timeout=180,
        )
        begin = stores[leader].ledger.begin_index
        assert begin > 0 and bodies_from(stores[leader])[0] > b"%06d" % 110
        await group.start(away)
        await send_all(client, group.addr(leader), 20, start=410)
        back = group.store(away)
        with trio.fail_after(60):
            await caught_up(back, stores[leader])
        assert not isinstance(back.commitlog, MixedCommitLog) and back.ledger.begin_index == begin
        assert not list((tmp_path / "group" / away / "commitlog").iterdir())
        assert back.consume_queue(RETAINED, 0).max_offset == 430
        assert bodies_from(back) == bodies_from(stores[leader])


async def test_a_member_started_empty_beside_two_copies_cannot_lead_and_joins_with_the_dledger_part(
    tmp_path: Path, autojump_clock: trio.testing.MockClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    """n2 starts with no store and campaigns first: the copies' logs open with the mixed store's marker entry, so
    they are ahead of its empty log and refuse it their votes (a log of its own starting at 0 is one they could not
    follow, and no leader would ever commit). A copy leads; n2 is rebuilt at the marker and gets the DLedger part."""
    async with EmbeddedCluster(tmp_path / "classic", **STORE) as classic, RemotingClient() as client:
        answer = await client.invoke(classic.broker_addr, create_topic_request(TOPIC, queues=2), 5)
        assert answer.code == ResponseCode.SUCCESS
        await produce(classic.namesrv_addr, [b"old-%04d" % i for i in range(40)])
    for member in ("n0", "n1"):
        shutil.copytree(tmp_path / "classic" / "broker", tmp_path / "group" / member)
    first_vote = Elector._next_vote_time

    def n2_first(elector: Elector) -> int:  # n2 asks for votes at once, the others only 20 s later
        later = 10 if elector.member.self_id == "n2" else 20_000
        return first_vote(elector) - elector.config.min_vote_interval_ms + later

    monkeypatch.setattr(Elector, "_next_vote_time", n2_first)
    async with EmbeddedDLedgerGroup(tmp_path / "group", **STORE) as group:
        with trio.fail_after(120):
            leader = await group.leader()
        assert leader in ("n0", "n1")
        offsets = await produce(group.namesrv_addr, [b"new-%04d" % i for i in range(10)])
        assert min(offsets) == 20
        stores = {m: group.store(m) for m in group.ids}
        with trio.fail_after(60):
            while {s.dispatched_index for s in stores.values()} != {stores[leader].ledger.end_index}:
                await trio.sleep(0.1)
        empty = stores["n2"]
        assert empty.divided_offset == 0 and empty.ledger.data_start == stores[leader].divided_offset
        assert [empty.consume_queue(TOPIC, q).min_offset for q in (0, 1)] == [20, 20]
        assert queue_bodies(empty) == {q: rows[20:] for q, rows in queue_bodies(stores[leader]).items()}
