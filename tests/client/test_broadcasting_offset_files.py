"""BROADCASTING consumers' offset files, in virtual time against the embedded cluster: two consumers of one group
running in one process keep their own progress, each in its own file, and find it again when started in the same
order after a restart; without an offset in its file, a queue starts where consume-from-where says."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from pathlib import Path

import trio
import trio.testing

from broker.embedded import EmbeddedCluster
from client.admin import Admin
from client.consumer.listener import ConsumeConcurrentlyStatus
from client.consumer.push import PushConsumer
from client.message import Message, MessageExt
from client.producer import Producer
from remoting.codec.bodies import ConsumeFromWhere, MessageModel


def _recording(seen: list[bytes], hang_on: bytes | None = None) -> Callable[[list[MessageExt]], Awaitable[object]]:
    """A listener recording each body; with ``hang_on``, the call for that body never returns."""

    async def listener(msgs: list[MessageExt]) -> ConsumeConcurrentlyStatus:
        seen.extend(m.body for m in msgs)
        if hang_on is not None and msgs[0].body == hang_on:
            await trio.sleep_forever()
        return ConsumeConcurrentlyStatus.CONSUME_SUCCESS

    return listener


def _broadcasting(
    cluster: EmbeddedCluster,
    offsets: Path,
    listener: Callable[..., Awaitable[object]],
    topic: str = "BShare",
    where: ConsumeFromWhere = ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET,
) -> PushConsumer:
    """A broadcasting consumer of ``topic`` (group ``cg-<topic>``), its offsets under ``offsets``."""
    consumer = PushConsumer(
        f"cg-{topic}",
        cluster.namesrv_addr,
        message_model=MessageModel.BROADCASTING,
        consume_from_where=where,
        offset_store_dir=offsets,
        await_termination=1.0,
    )
    consumer.subscribe(topic)
    consumer.register_message_listener(listener)
    return consumer


async def test_two_broadcasting_consumers_of_a_group_in_one_process_keep_their_own_offsets(
    embedded_cluster: EmbeddedCluster, autojump_clock: trio.testing.MockClock, tmp_path: Path
) -> None:
    """A consumes all ten messages; B stops with m5's call unfinished (its offset is 5). Started again in the same
    order, A gets nothing more and B goes on from m5: had they shared one file, B would resume at A's 10 (Java refuses
    the second consumer of a group in one client instance instead)."""
    offsets = tmp_path / "offsets"
    async with Admin(embedded_cluster.namesrv_addr) as admin:
        await admin.create_topic("BShare", read_queue_nums=1, write_queue_nums=1)
    async with Producer("pg-bshare", embedded_cluster.namesrv_addr) as producer:
        for i in range(10):
            await producer.send(Message("BShare", f"m{i}".encode()))
    seen_a: list[bytes] = []
    seen_b: list[bytes] = []
    async with _broadcasting(embedded_cluster, offsets, _recording(seen_a)):
        async with _broadcasting(embedded_cluster, offsets, _recording(seen_b, hang_on=b"m5")):
            await trio.sleep(30)
        assert len(seen_a) == 10 and b"m5" in seen_b
        await trio.sleep(10)  # A goes on persisting its own offset, 10
    again_a: list[bytes] = []
    again_b: list[bytes] = []
    first, second = (_broadcasting(embedded_cluster, offsets, _recording(seen)) for seen in (again_a, again_b))
    async with first, second:  # entered in order: A, then B
        await trio.sleep(30)
    assert again_a == []
    assert set(again_b) == {f"m{i}".encode() for i in range(5, 10)}


async def test_consume_from_min_offset_starts_at_the_last_offset_as_java(
    embedded_cluster: EmbeddedCluster, autojump_clock: trio.testing.MockClock, tmp_path: Path
) -> None:
    """RebalancePushImpl.computePullFromWhereWithException (4.9.8 and 5.3.3) handles the deprecated
    CONSUME_FROM_MIN_OFFSET (and CONSUME_FROM_MAX_OFFSET, CONSUME_FROM_LAST_OFFSET_AND_FROM_MIN_WHEN_BOOT_FIRST) in the
    same case as CONSUME_FROM_LAST_OFFSET: without a stored offset a queue starts at its max offset. A broadcasting
    consumer configured so, with no offset file yet, must not replay the queue's history (it used to start at 0)."""
    async with Admin(embedded_cluster.namesrv_addr) as admin:
        await admin.create_topic("MinOffset", read_queue_nums=1, write_queue_nums=1)
    async with Producer("pg-min-offset", embedded_cluster.namesrv_addr) as producer:
        for body in (b"old-1", b"old-2", b"old-3"):
            await producer.send(Message("MinOffset", body))
    seen: list[bytes] = []
    where = ConsumeFromWhere.CONSUME_FROM_MIN_OFFSET
    async with _broadcasting(embedded_cluster, tmp_path / "offsets", _recording(seen), "MinOffset", where):
        await trio.sleep(5)
        async with Producer("pg-min-offset", embedded_cluster.namesrv_addr) as producer:
            await producer.send(Message("MinOffset", b"new"))
        await trio.sleep(5)
    assert seen == [b"new"], f"CONSUME_FROM_MIN_OFFSET replayed the queue's history: {seen}"
