"""A push listener's consume context in virtual time against the embedded cluster, as RocketMQ 4.9.8's
ConsumeConcurrentlyContext and ConsumeOrderlyContext: a listener taking a second argument gets the context, and what
it sets there decides what happens to the batch (ConsumeMessageConcurrentlyService.processConsumeResult,
ConsumeMessageOrderlyService.processConsumeResult)."""

from __future__ import annotations

import itertools

import trio
import trio.testing

from broker.embedded import EmbeddedCluster
from client.admin import Admin
from client.consumer.listener import (
    ConsumeConcurrentlyContext,
    ConsumeConcurrentlyStatus,
    ConsumeOrderlyContext,
    ConsumeOrderlyStatus,
    takes_context,
)
from client.consumer.push import PushConsumer
from client.message import Message, MessageExt
from client.producer import Producer
from remoting.codec.bodies import MessageQueue
from tests.client.helpers import first_offset_consumer
from tests.semantics.helpers import use_virtual_store_clock


async def _create_and_send(cluster: EmbeddedCluster, topic: str, bodies: list[bytes]) -> None:
    async with Admin(cluster.namesrv_addr) as admin:
        await admin.create_topic(topic, read_queue_nums=1, write_queue_nums=1)
    async with Producer("pg-context", cluster.namesrv_addr) as producer:
        for body in bodies:
            await producer.send(Message(topic, body))


def _consumer(cluster: EmbeddedCluster, group: str, topic: str, **options: int) -> PushConsumer:
    return first_offset_consumer(cluster.namesrv_addr, group, topic, **options)


async def _dlq_depth(cluster: EmbeddedCluster, group: str) -> int:
    async with Admin(cluster.namesrv_addr) as admin:
        try:
            status = await admin.topic_status(f"%DLQ%{group}")
        except Exception:
            return 0
    return sum(offsets.max_offset for offsets in status.values())


async def test_delay_level_when_next_consume_minus_one_sends_a_failed_message_to_the_dlq_at_once(
    embedded_cluster: EmbeddedCluster, autojump_clock: trio.testing.MockClock
) -> None:
    """ConsumeConcurrentlyContext.delayLevelWhenNextConsume is the delay level of the send-back of a
    RECONSUME_LATER: -1 moves the message to the group's DLQ without any retry."""
    use_virtual_store_clock(embedded_cluster)
    await _create_and_send(embedded_cluster, "CtxDlq", [b"poison"])
    calls: list[tuple[bytes, MessageQueue]] = []

    async def listener(msgs: list[MessageExt], context: ConsumeConcurrentlyContext) -> ConsumeConcurrentlyStatus:
        calls.append((msgs[0].body, context.message_queue))
        context.delay_level_when_next_consume = -1
        return ConsumeConcurrentlyStatus.RECONSUME_LATER

    consumer = _consumer(embedded_cluster, "cg-ctx-dlq", "CtxDlq")
    consumer.register_message_listener(listener)
    async with consumer:
        await trio.sleep(120)  # a retry (delay level 3: 10 s) would have come back by now
    assert calls == [(b"poison", MessageQueue("CtxDlq", "broker-a", 0))], calls
    assert await _dlq_depth(embedded_cluster, "cg-ctx-dlq") == 1


async def test_ack_index_acknowledges_the_head_of_a_batch_and_retries_the_rest(
    embedded_cluster: EmbeddedCluster, autojump_clock: trio.testing.MockClock
) -> None:
    """ConsumeConcurrentlyContext.ackIndex: with CONSUME_SUCCESS, the messages after it are sent back and come again
    through the retry topic; the ones up to it are done."""
    use_virtual_store_clock(embedded_cluster)
    await _create_and_send(embedded_cluster, "CtxAck", [b"a", b"b", b"c"])
    calls: list[list[tuple[bytes, int]]] = []

    # On the loop, not in a worker thread: a thread's run is not virtual time, and the autojump clock could pass the
    # 60 s below while one ran on a loaded machine (the retries then not back yet).
    async def listener(msgs: list[MessageExt], context: ConsumeConcurrentlyContext) -> ConsumeConcurrentlyStatus:
        calls.append([(m.body, m.reconsume_times) for m in msgs])
        context.ack_index = 0
        return ConsumeConcurrentlyStatus.CONSUME_SUCCESS

    consumer = _consumer(embedded_cluster, "cg-ctx-ack", "CtxAck", consume_message_batch_max_size=3)
    consumer.register_message_listener(listener)
    async with consumer:
        await trio.sleep(60)
        committed = consumer.offset_store.read_memory(MessageQueue("CtxAck", "broker-a", 0))
    first, *retries = calls
    assert first == [(b"a", 0), (b"b", 0), (b"c", 0)]
    assert sorted(m for batch in retries for m in batch)[:2] == [(b"b", 1), (b"c", 1)], calls
    assert committed == 3


async def test_an_orderly_context_sets_the_suspension_of_its_queue(
    embedded_cluster: EmbeddedCluster, autojump_clock: trio.testing.MockClock
) -> None:
    """ConsumeOrderlyContext.suspendCurrentQueueTimeMillis: the wait before a suspended batch is consumed again,
    instead of the consumer's suspend_current_queue_time."""
    await _create_and_send(embedded_cluster, "CtxOrd", [b"x"])
    times: list[float] = []

    async def listener(msgs: list[MessageExt], context: ConsumeOrderlyContext) -> ConsumeOrderlyStatus:
        times.append(trio.current_time())
        if len(times) < 3:
            context.suspend_current_queue_time_ms = 5000
            return ConsumeOrderlyStatus.SUSPEND_CURRENT_QUEUE_A_MOMENT
        return ConsumeOrderlyStatus.SUCCESS

    consumer = _consumer(embedded_cluster, "cg-ctx-ord", "CtxOrd")
    consumer.register_message_listener_orderly(listener)
    async with consumer:
        await trio.sleep(30)
    assert len(times) == 3
    assert [round(b - a, 1) for a, b in itertools.pairwise(times)] == [5.0, 5.0]


def test_only_a_listener_with_two_positional_parameters_gets_the_context() -> None:
    """A one-parameter listener, bound method or callable object, and one a decorator hides behind ``*args``, keep
    being called with the messages alone."""

    class Listener:
        def __call__(self, msgs: list[MessageExt]) -> None:
            return None

        def on(self, msgs: list[MessageExt]) -> None:
            return None

        def on_with_context(self, msgs: list[MessageExt], context: ConsumeConcurrentlyContext) -> None:
            return None

    def wrapped(*args: object, **kwargs: object) -> None:
        return None

    assert not takes_context(Listener())
    assert not takes_context(Listener().on)
    assert not takes_context(wrapped)
    assert not takes_context(lambda msgs: None)
    assert takes_context(Listener().on_with_context)
    assert takes_context(lambda msgs, context: None)


async def test_an_orderly_context_without_auto_commit_commits_on_commit_and_rolls_back_on_rollback(
    embedded_cluster: EmbeddedCluster, autojump_clock: trio.testing.MockClock
) -> None:
    """ConsumeOrderlyContext.setAutoCommit(false), as ConsumeMessageOrderlyService.processConsumeResult serves it: a
    SUCCESS commits nothing, COMMIT commits every message taken since the last commit, ROLLBACK hands them all out
    again after the suspension. Ours had no ``auto_commit`` (setting it raised, so the batch was suspended for ever)
    nor the COMMIT and ROLLBACK statuses."""
    await _create_and_send(embedded_cluster, "CtxManual", [b"m0", b"m1", b"m2", b"m3"])
    answers = iter(["SUCCESS", "ROLLBACK", "SUCCESS", "SUCCESS", "COMMIT", "SUCCESS"])
    calls: list[tuple[bytes, int | None]] = []
    consumer = _consumer(embedded_cluster, "cg-ctx-manual", "CtxManual")

    async def listener(msgs: list[MessageExt], context: ConsumeOrderlyContext) -> ConsumeOrderlyStatus:
        context.auto_commit = False
        calls.append((msgs[0].body, consumer.offset_store.read_memory(context.message_queue)))
        return ConsumeOrderlyStatus[next(answers, "SUCCESS")]

    consumer.register_message_listener_orderly(listener)
    async with consumer:
        await trio.sleep(10)
        [mq] = [mq for mq in consumer.rebalance.process_queues if mq.topic == "CtxManual"]
        committed = consumer.offset_store.read_memory(mq)
    assert calls == [(b"m0", 0), (b"m1", 0), (b"m0", 0), (b"m1", 0), (b"m2", 0), (b"m3", 3)]
    assert committed == 3


async def test_consume_directly_answers_an_orderly_commit_and_the_contexts_auto_commit(
    embedded_cluster: EmbeddedCluster, autojump_clock: trio.testing.MockClock
) -> None:
    """ConsumeMessageOrderlyService.consumeMessageDirectly: COMMIT is CR_COMMIT, ROLLBACK CR_ROLLBACK, and the result's
    autoCommit is the context's."""
    await _create_and_send(embedded_cluster, "CtxDirect", [b"d"])
    answers = iter(["SUCCESS", "COMMIT", "ROLLBACK"])
    seen: list[MessageExt] = []

    def listener(msgs: list[MessageExt], context: ConsumeOrderlyContext) -> ConsumeOrderlyStatus:
        seen.extend(msgs)
        context.auto_commit = len(seen) == 1
        return ConsumeOrderlyStatus[next(answers)]

    consumer = _consumer(embedded_cluster, "cg-ctx-direct", "CtxDirect")
    consumer.register_message_listener_orderly(listener)
    async with consumer:
        while not seen:
            await trio.sleep(0.5)
        first = await consumer.consume_directly(seen[0], "broker-a")
        second = await consumer.consume_directly(seen[0], "broker-a")
    assert (first["consumeResult"], first["autoCommit"]) == ("CR_COMMIT", False)
    assert (second["consumeResult"], second["autoCommit"]) == ("CR_ROLLBACK", False)
