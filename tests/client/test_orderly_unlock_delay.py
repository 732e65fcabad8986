"""An orderly queue a rebalance takes away while its process queue still holds messages keeps its broker lock for
20 s more, as 4.9.8's RebalancePushImpl.removeUnnecessaryMessageQueue calls ``unlockDelay``: with
``pq.hasTempMessage()`` the UNLOCK_BATCH_MQ is scheduled ``UNLOCK_DELAY_TIME_MILLS`` (20000) later, so the new owner
cannot lock and consume the queue before the old owner's one-way offset persist reached the broker (client/src/main/
java/org/apache/rocketmq/client/impl/consumer/RebalancePushImpl.java); an offset reset unlocks at once. Virtual
time, the cluster in the test's loop."""

from __future__ import annotations

import pytest
import trio
import trio.testing

from broker.embedded import EmbeddedCluster
from client.admin import Admin
from client.consumer.listener import ConsumeOrderlyStatus
from client.consumer.push import PushConsumer
from client.message import Message, MessageExt
from client.producer import Producer
from remoting.codec.bodies import ConsumeFromWhere, MessageQueue
from remoting.codec.codes import RequestCode
from remoting.codec.command import RemotingCommand
from remoting.processor import RequestContext

TOPIC = "UnlockLater"


def _orderly(cluster: EmbeddedCluster, status: ConsumeOrderlyStatus, seen: list[MessageExt]) -> PushConsumer:
    """A member of ``cg-unlock-later`` whose listener records each batch and answers ``status``."""

    async def listener(msgs: list[MessageExt]) -> ConsumeOrderlyStatus:
        seen.extend(msgs)
        return status

    consumer = PushConsumer(
        "cg-unlock-later",
        cluster.namesrv_addr,
        consume_from_where=ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET,
        suspend_current_queue_time=30.0,
    )
    consumer.subscribe(TOPIC)
    consumer.register_message_listener_orderly(listener)
    return consumer


def _owned(consumer: PushConsumer) -> list[MessageQueue]:
    return [mq for mq in consumer.rebalance.process_queues if mq.topic == TOPIC]


async def _until(condition: object) -> None:
    with trio.fail_after(120):
        while not condition():  # type: ignore[operator]
            await trio.sleep(0.1)


async def test_a_queue_dropped_with_messages_cached_is_unlocked_20_s_later(
    embedded_cluster: EmbeddedCluster, autojump_clock: trio.testing.MockClock
) -> None:
    """A's listener suspends every batch, so its two queues keep their messages; B joins and is given one of them,
    which A drops at once but unlocks only 20 s later: B takes it no sooner. Ours unlocked it at once."""
    async with Admin(embedded_cluster.namesrv_addr) as admin:
        await admin.create_topic(TOPIC, read_queue_nums=2, write_queue_nums=2)
    async with Producer("pg-unlock-later", embedded_cluster.namesrv_addr) as producer:
        for mq in (await producer.publish_info(TOPIC)).message_queues:
            await producer.send(Message(TOPIC, b"m"), queue=mq)
    seen_a: list[MessageExt] = []
    seen_b: list[MessageExt] = []
    async with _orderly(embedded_cluster, ConsumeOrderlyStatus.SUSPEND_CURRENT_QUEUE_A_MOMENT, seen_a) as a:
        await _until(lambda: {m.queue_id for m in seen_a} == {0, 1})
        joined = trio.current_time()
        async with _orderly(embedded_cluster, ConsumeOrderlyStatus.SUCCESS, seen_b) as b:
            await _until(lambda: len(_owned(a)) == 1)
            dropped = trio.current_time()
            await _until(lambda: bool(_owned(b)))
            taken = trio.current_time()
            await _until(lambda: bool(seen_b))
    assert dropped - joined < 5, f"A dropped the queue {dropped - joined:.1f} s after B joined"
    assert taken - dropped >= 19.9, f"B took the queue {taken - dropped:.1f} s after A dropped it"


async def test_the_unlock_delay_is_read_from_the_environment_as_javas_system_property(
    embedded_cluster: EmbeddedCluster, autojump_clock: trio.testing.MockClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    """RebalancePushImpl reads ``UNLOCK_DELAY_TIME_MILLS`` from ``rocketmq.client.unlockDelayTimeMills``, as this
    client reads Java's system properties from the environment (``ROCKETMQ_CLIENT_UNLOCK_DELAY_TIME_MILLS``): 5000
    lets the new owner take the queue 5 s after A dropped it. Ours was a constant 20 s."""
    monkeypatch.setenv("ROCKETMQ_CLIENT_UNLOCK_DELAY_TIME_MILLS", "5000")
    async with Admin(embedded_cluster.namesrv_addr) as admin:
        await admin.create_topic(TOPIC, read_queue_nums=2, write_queue_nums=2)
    async with Producer("pg-unlock-later", embedded_cluster.namesrv_addr) as producer:
        for mq in (await producer.publish_info(TOPIC)).message_queues:
            await producer.send(Message(TOPIC, b"m"), queue=mq)
    seen_a: list[MessageExt] = []
    seen_b: list[MessageExt] = []
    async with _orderly(embedded_cluster, ConsumeOrderlyStatus.SUSPEND_CURRENT_QUEUE_A_MOMENT, seen_a) as a:
        await _until(lambda: {m.queue_id for m in seen_a} == {0, 1})
        async with _orderly(embedded_cluster, ConsumeOrderlyStatus.SUCCESS, seen_b) as b:
            await _until(lambda: len(_owned(a)) == 1)
            dropped = trio.current_time()
            await _until(lambda: bool(_owned(b)))
            taken = trio.current_time()
    assert 4.9 <= taken - dropped < 10, f"B took the queue {taken - dropped:.1f} s after A dropped it"


class _Unlocks:
    """The broker's UNLOCK_BATCH_MQ as registered, the virtual time of each request recorded."""

    def __init__(self, cluster: EmbeddedCluster) -> None:
        dispatcher = cluster.controller.dispatcher
        self.served, pool = dispatcher._table[int(RequestCode.UNLOCK_BATCH_MQ)]
        self.at: list[float] = []
        dispatcher.register(RequestCode.UNLOCK_BATCH_MQ, self, pool)

    async def process(self, ctx: RequestContext, request: RemotingCommand) -> RemotingCommand | None:
        self.at.append(trio.current_time())
        return await self.served.process(ctx, request)


async def test_a_queue_reset_with_messages_cached_is_unlocked_at_once(
    embedded_cluster: EmbeddedCluster, autojump_clock: trio.testing.MockClock
) -> None:
    """4.9.8's MQClientInstance.resetOffset drops and clears each process queue (``pq.clear()``) before
    ``removeUnnecessaryMessageQueue``, so ``unlockDelay`` finds no message left and unlocks at once. Ours kept the
    messages counted and delayed the unlock 20 s (dropped altogether when the next pass took the queue again)."""
    async with Admin(embedded_cluster.namesrv_addr) as admin:
        await admin.create_topic(TOPIC, read_queue_nums=1, write_queue_nums=1)
    async with Producer("pg-unlock-later", embedded_cluster.namesrv_addr) as producer:
        await producer.send(Message(TOPIC, b"m"))
    seen: list[MessageExt] = []
    unlocks = _Unlocks(embedded_cluster)
    async with _orderly(embedded_cluster, ConsumeOrderlyStatus.SUSPEND_CURRENT_QUEUE_A_MOMENT, seen) as a:
        await _until(lambda: bool(seen))
        [mq] = _owned(a)
        reset_at = trio.current_time()
        await a.reset_offset(TOPIC, {mq: 0})  # as a RESET_CONSUMER_CLIENT_OFFSET from the broker
        await trio.sleep(5)
        early = [t - reset_at for t in unlocks.at]
    assert early and early[0] < 1, early
