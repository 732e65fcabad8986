"""The push consumer after PULL_OFFSET_MOVED (a queue whose offsets restarted: the topic deleted and created again), in
virtual time (autojump clock, the embedded cluster in the same loop). As Java's DefaultMQPushConsumerImpl (the
OFFSET_ILLEGAL case), 10 s later the broker's suggestion is stored and persisted, whoever owns the queue by then, and
the queue is taken again from it."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from pathlib import Path

import trio

from broker.embedded import EmbeddedCluster
from client.admin import Admin
from client.consumer.listener import ConsumeConcurrentlyStatus
from client.consumer.push import PushConsumer
from client.message import Message, MessageExt
from client.producer import Producer
from remoting.codec.bodies import ConsumeFromWhere, MessageModel, MessageQueue
from tests.semantics.helpers import use_virtual_store_clock


async def _create(cluster: EmbeddedCluster, topic: str) -> None:
    async with Admin(cluster.namesrv_addr) as admin:
        await admin.create_topic(topic, read_queue_nums=1, write_queue_nums=1)


async def _send(cluster: EmbeddedCluster, topic: str, bodies: list[bytes]) -> None:
    async with Producer("pg-offset-moved", cluster.namesrv_addr) as producer:
        for body in bodies:
            await producer.send(Message(topic, body))


async def _recreate(cluster: EmbeddedCluster, clock: trio.testing.MockClock, topic: str) -> None:
    """Delete ``topic`` and create it again: its queue's offsets restart at 0."""
    clock.autojump_threshold = float("inf")  # the broker deletes the files in a worker thread
    async with Admin(cluster.namesrv_addr) as admin:
        await admin.delete_topic(topic)
    clock.autojump_threshold = 0
    await _create(cluster, topic)


def _collecting(seen: list[bytes]) -> Callable[[list[MessageExt]], Awaitable[ConsumeConcurrentlyStatus]]:
    """A listener recording each body."""

    async def listener(msgs: list[MessageExt]) -> ConsumeConcurrentlyStatus:
        seen.extend(m.body for m in msgs)
        return ConsumeConcurrentlyStatus.CONSUME_SUCCESS

    return listener


async def _until_dropped(consumer: PushConsumer, mq: MessageQueue) -> None:
    """Until the held pull at the old offset is answered PULL_OFFSET_MOVED (the broker holds it up to 15 s: the new
    offsets are below the one it waits for)."""
    with trio.move_on_after(30):
        while not consumer.rebalance.process_queues[mq].dropped:
            await trio.sleep(0.5)


async def test_broadcasting_after_an_offset_moved_backwards_the_queue_is_taken_again_from_the_fixed_offset(
    embedded_cluster: EmbeddedCluster, autojump_clock: trio.testing.MockClock, tmp_path: Path
) -> None:
    """Java's LocalFileOffsetStore.readOffset(READ_FROM_STORE) reads the offset file, where persist(mq) wrote the
    fixed offset, and persistAll merges into that file: dropping the queue (which removes its offset from memory) does
    not lose it. With CONSUME_FROM_LAST_OFFSET, falling back to consume-from-where would skip what was sent between
    the suggestion and the fix."""
    use_virtual_store_clock(embedded_cluster)
    await _create(embedded_cluster, "BMoved")
    await _send(embedded_cluster, "BMoved", [f"old{i}".encode() for i in range(10)])
    seen: list[bytes] = []
    mq = MessageQueue("BMoved", "broker-a", 0)
    consumer = PushConsumer(
        "cg-bmoved",
        embedded_cluster.namesrv_addr,
        message_model=MessageModel.BROADCASTING,
        consume_from_where=ConsumeFromWhere.CONSUME_FROM_LAST_OFFSET,
        offset_store_dir=tmp_path / "offsets",
    )
    consumer.subscribe("BMoved")
    consumer.register_message_listener(_collecting(seen))
    async with consumer:
        await trio.sleep(5)  # the queue is taken at its max offset, 10
        await _recreate(embedded_cluster, autojump_clock, "BMoved")
        await _send(embedded_cluster, "BMoved", [f"new{i}".encode() for i in range(3)])  # offsets 0..2
        await _until_dropped(consumer, mq)  # suggesting 3 (the max offset, as Java's store)
        await _send(embedded_cluster, "BMoved", [b"new3", b"new4"])  # offsets 3, 4: before the 10 s fix
        # The fix stores 3 and the rebalance takes the queue again. Virtual time runs on while the offset file is
        # saved in a worker thread (autojump sees the loop idle), so wait for the messages, not for a fixed time.
        with trio.move_on_after(600):
            while len(seen) < 2:
                await trio.sleep(0.5)
    assert sorted(seen) == [b"new3", b"new4"], f"from the fixed offset 3 a broadcasting consumer saw {seen}"


async def test_an_offset_fixed_after_the_queue_was_rebalanced_away_is_stored_for_its_next_owner(
    embedded_cluster: EmbeddedCluster, autojump_clock: trio.testing.MockClock
) -> None:
    """Java's fix task stores and persists the suggestion even when a rebalance removed the queue during the 10 s:
    the next owner starts from it. Otherwise the broker keeps the old offset the removal persisted, the next owner's
    first pull is answered PULL_OFFSET_MOVED too, and 10 s later it moves to the max offset, skipping what was sent
    meanwhile."""
    use_virtual_store_clock(embedded_cluster)
    await _create(embedded_cluster, "CMoved")
    await _send(embedded_cluster, "CMoved", [f"old{i}".encode() for i in range(10)])
    seen: list[bytes] = []
    mq = MessageQueue("CMoved", "broker-a", 0)
    first = ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET
    a = PushConsumer("cg-cmoved", embedded_cluster.namesrv_addr, consume_from_where=first)
    a.subscribe("CMoved")
    a.register_message_listener(_collecting([]))
    async with a:
        await trio.sleep(5)  # old0..9 consumed, offset 10
        await _recreate(embedded_cluster, autojump_clock, "CMoved")
        await _send(embedded_cluster, "CMoved", [f"new{i}".encode() for i in range(3)])  # offsets 0..2
        await _until_dropped(a, mq)  # suggesting 3
        a.unsubscribe("CMoved")
        await a.do_rebalance()  # the queue is removed, its old offset 10 persisted
        assert mq not in a.rebalance.process_queues
        await _send(embedded_cluster, "CMoved", [b"new3", b"new4"])  # offsets 3, 4
        await trio.sleep(15)  # the fix stores and persists 3
    b = PushConsumer("cg-cmoved", embedded_cluster.namesrv_addr, consume_from_where=first)
    b.subscribe("CMoved")
    b.register_message_listener(_collecting(seen))
    async with b:
        await trio.sleep(60)
    assert sorted(seen) == [b"new3", b"new4"], f"the queue's next owner saw {seen}"
