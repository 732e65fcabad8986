"""The push consumer's retries in virtual time (autojump clock, the embedded cluster in the same loop), as RocketMQ
4.9.8's ConsumeMessageOrderlyService and ConsumeMessageConcurrentlyService: an orderly suspension counts in
``reconsume_times`` and, by default, never gives a message up; a concurrent listener call that overruns
``consume_timeout`` has its message sent back and the committed offset moves on, one still waiting for a consume slot
does not."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import trio

from broker.embedded import EmbeddedCluster
from client.admin import Admin
from client.consumer.listener import ConsumeConcurrentlyStatus, ConsumeOrderlyStatus, ConsumeStatus
from client.consumer.push import PushConsumer
from client.message import Message, MessageExt
from client.producer import Producer
from processors.send_back import ConsumerSendMsgBackProcessor
from remoting.codec.bodies import ConsumeFromWhere, MessageModel, MessageQueue
from remoting.codec.codes import RequestCode
from remoting.codec.command import RemotingCommand
from remoting.codec.message import decode_record
from remoting.processor import RequestContext
from tests.semantics.helpers import use_virtual_store_clock


async def _create_and_send(cluster: EmbeddedCluster, topic: str, bodies: list[bytes]) -> None:
    async with Admin(cluster.namesrv_addr) as admin:
        await admin.create_topic(topic, read_queue_nums=1, write_queue_nums=1)
    async with Producer("pg-retries", cluster.namesrv_addr) as producer:
        for body in bodies:
            await producer.send(Message(topic, body))


def _consumer(cluster: EmbeddedCluster, group: str, topic: str, **options: Any) -> PushConsumer:
    consumer = PushConsumer(
        group, cluster.namesrv_addr, consume_from_where=ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET, **options
    )
    consumer.subscribe(topic)
    return consumer


def _failing_first(
    seen: list[tuple[bytes, int]], failures: int, failed: ConsumeStatus, done: ConsumeStatus
) -> Callable[[list[MessageExt]], Awaitable[ConsumeStatus]]:
    """A listener recording each call's first body and reconsume times; its first ``failures`` calls return ``failed``,
    the others ``done``."""

    async def listener(msgs: list[MessageExt]) -> ConsumeStatus:
        seen.append((msgs[0].body, msgs[0].reconsume_times))
        return failed if len(seen) <= failures else done

    return listener


async def _consume_orderly(
    cluster: EmbeddedCluster, topic: str, listener: Callable[[list[MessageExt]], Awaitable[ConsumeStatus]]
) -> int | None:
    """Run an orderly consumer of ``topic`` (group ``cg-<topic>``) with ``listener`` for 20 s; its committed offset of
    the topic's queue 0 then."""
    consumer = _consumer(cluster, f"cg-{topic}", topic)
    consumer.register_message_listener_orderly(listener)
    async with consumer:
        await trio.sleep(20)
        return consumer.offset_store.read_memory(MessageQueue(topic, "broker-a", 0))


def _hanging_on_stuck(
    deliveries: list[bytes], release: trio.Event
) -> Callable[[list[MessageExt]], Awaitable[ConsumeConcurrentlyStatus]]:
    """A listener recording each body; its first call with ``b"stuck"`` hangs until ``release``."""

    async def listener(msgs: list[MessageExt]) -> ConsumeConcurrentlyStatus:
        body = msgs[0].body
        deliveries.append(body)
        if body == b"stuck" and deliveries.count(b"stuck") == 1:
            await release.wait()
        return ConsumeConcurrentlyStatus.CONSUME_SUCCESS

    return listener


async def test_orderly_default_max_reconsume_times_is_unlimited_so_a_suspended_message_is_never_skipped(
    embedded_cluster: EmbeddedCluster, autojump_clock: trio.testing.MockClock
) -> None:
    """Java: maxReconsumeTimes defaults to -1, which ConsumeMessageOrderlyService reads as Integer.MAX_VALUE: an
    orderly queue keeps retrying its head message (every suspendCurrentQueueTimeMillis), never sends it to the DLQ
    and never commits past it."""
    await _create_and_send(embedded_cluster, "OrdPoison", [b"poison"])
    calls = 0

    async def listener(msgs: list[MessageExt]) -> ConsumeOrderlyStatus:
        nonlocal calls
        calls += 1
        return ConsumeOrderlyStatus.SUSPEND_CURRENT_QUEUE_A_MOMENT

    consumer = _consumer(embedded_cluster, "cg-ord-poison", "OrdPoison")
    consumer.register_message_listener_orderly(listener)
    async with consumer:
        await trio.sleep(60)  # 1 s suspensions: about 60 attempts
        committed = consumer.offset_store.read_memory(MessageQueue("OrdPoison", "broker-a", 0))
    assert calls > 30, f"the orderly listener was called only {calls} times: the message was given up"
    assert committed == 0, f"the committed offset moved past the failing head message to {committed}"


async def test_orderly_suspension_increments_the_reconsume_times_the_listener_sees(
    embedded_cluster: EmbeddedCluster, autojump_clock: trio.testing.MockClock
) -> None:
    """Java's checkReconsumeTimes raises reconsumeTimes on every SUSPEND_CURRENT_QUEUE_A_MOMENT, so the listener sees
    0, 1, 2, ... (what an orderly listener's own 'give up after N tries' check relies on)."""
    await _create_and_send(embedded_cluster, "OrdTimes", [b"m"])
    seen: list[tuple[bytes, int]] = []
    listener = _failing_first(
        seen, 3, ConsumeOrderlyStatus.SUSPEND_CURRENT_QUEUE_A_MOMENT, ConsumeOrderlyStatus.SUCCESS
    )
    await _consume_orderly(embedded_cluster, "OrdTimes", listener)
    assert [times for _, times in seen] == [0, 1, 2, 3]


async def test_an_orderly_listener_returning_reconsume_later_gets_its_message_again_not_committed(
    embedded_cluster: EmbeddedCluster, autojump_clock: trio.testing.MockClock
) -> None:
    """Java's type system keeps an orderly listener to ConsumeOrderlyStatus; a Python one may return the concurrent
    statuses. RECONSUME_LATER from an orderly listener must not commit the message, as if it succeeded (ours committed
    it: the message was lost), and CONSUME_SUCCESS must not suspend the queue for ever: each counts as its orderly
    counterpart, SUSPEND_CURRENT_QUEUE_A_MOMENT and SUCCESS."""
    await _create_and_send(embedded_cluster, "OrdMixed", [b"m", b"n"])
    seen: list[tuple[bytes, int]] = []
    listener = _failing_first(
        seen, 1, ConsumeConcurrentlyStatus.RECONSUME_LATER, ConsumeConcurrentlyStatus.CONSUME_SUCCESS
    )
    committed = await _consume_orderly(embedded_cluster, "OrdMixed", listener)
    assert seen == [(b"m", 0), (b"m", 1), (b"n", 0)]
    assert committed == 2


async def test_a_concurrent_listener_returning_the_orderly_success_is_not_sent_back(
    embedded_cluster: EmbeddedCluster, autojump_clock: trio.testing.MockClock
) -> None:
    """The concurrent twin: ConsumeOrderlyStatus.SUCCESS from a concurrent listener counts as CONSUME_SUCCESS (ours
    sent the message back as failed, so it came again through the retry topic)."""
    use_virtual_store_clock(embedded_cluster)  # a retry's 10 s delay runs on the broker's store clock
    await _create_and_send(embedded_cluster, "ConcMixed", [b"m"])
    seen: list[bytes] = []

    async def listener(msgs: list[MessageExt]) -> ConsumeOrderlyStatus:
        seen.append(msgs[0].body)
        return ConsumeOrderlyStatus.SUCCESS

    consumer = _consumer(embedded_cluster, "cg-conc-mixed", "ConcMixed")
    consumer.register_message_listener(listener)
    async with consumer:
        await trio.sleep(60)  # a send-back would come again at delay level 3, 10 s later
        committed = consumer.offset_store.read_memory(MessageQueue("ConcMixed", "broker-a", 0))
    assert seen == [b"m"]
    assert committed == 1


async def test_a_message_whose_listener_call_overruns_consume_timeout_is_sent_back_and_the_offset_moves_on(
    quiet_timer_cluster: EmbeddedCluster, autojump_clock: trio.testing.MockClock
) -> None:
    """Java's ConsumeMessageConcurrentlyService runs ProcessQueue.cleanExpiredMsg every consumeTimeout (15 min): a
    message whose consumption started more than 15 min ago is sent back (delay level 3) and removed from the process
    queue, so the committed offset moves on and the message comes back through %RETRY%."""
    use_virtual_store_clock(quiet_timer_cluster)  # the retry's 10 s delay runs on the broker's store clock
    await _create_and_send(quiet_timer_cluster, "Hang", [b"stuck", b"a", b"b"])
    deliveries: list[bytes] = []
    consumer = _consumer(quiet_timer_cluster, "cg-hang", "Hang", await_termination=1.0)
    consumer.register_message_listener(_hanging_on_stuck(deliveries, trio.Event()))
    async with consumer:
        await trio.sleep(31 * 60)  # two consume_timeout periods: the first comes just short of 15 min
        committed = consumer.offset_store.read_memory(MessageQueue("Hang", "broker-a", 0))
    assert {b"a", b"b"} <= set(deliveries)
    assert committed == 3, f"committed offset {committed}: the hung message holds it back"
    assert deliveries.count(b"stuck") == 2, "the timed-out message did not come back through the retry topic"


async def test_a_message_still_waiting_for_a_consume_slot_is_not_sent_back_as_timed_out(
    quiet_timer_cluster: EmbeddedCluster, autojump_clock: trio.testing.MockClock
) -> None:
    """Java sets CONSUME_START_TIME when a consume thread runs the ConsumeRequest: a request still queued in the
    consume executor has none, and cleanExpiredMsg stops at it. With the one slot of ``consume_thread_min`` held by a
    hung call, the messages queued behind it are not sent back as timed out (then consumed a second time when the
    slot frees): only the hung one is."""
    use_virtual_store_clock(quiet_timer_cluster)
    await _create_and_send(quiet_timer_cluster, "HangQueue", [b"stuck"])
    deliveries: list[bytes] = []
    release = trio.Event()
    consumer = _consumer(
        quiet_timer_cluster,
        "cg-hang-queue",
        "HangQueue",
        consume_thread_min=1,
        consume_thread_max=1,
        await_termination=1.0,
    )
    consumer.register_message_listener(_hanging_on_stuck(deliveries, release))
    async with consumer:
        await trio.sleep(5)
        assert deliveries == [b"stuck"]  # its call holds the only slot
        async with Producer("pg-retries", quiet_timer_cluster.namesrv_addr) as producer:
            for body in (b"a", b"b"):  # their consume tasks wait for the slot
                await producer.send(Message("HangQueue", body))
        await trio.sleep(31 * 60)  # the 30 min clean-up sent the hung head back
        release.set()
        await trio.sleep(5 * 60)  # its retry (delay level 3) and the rest are consumed
    assert deliveries.count(b"stuck") == 2, deliveries
    assert deliveries.count(b"a") == 1 and deliveries.count(b"b") == 1, (
        f"deliveries {deliveries}: messages whose listener call never started were sent back as timed out"
    )


class _SendBackRecorder:
    """The broker's CONSUMER_SEND_MSG_BACK as registered, each request's header fields recorded before the broker's
    own processor serves it."""

    def __init__(self, cluster: EmbeddedCluster) -> None:
        controller = cluster.controller
        self.served = ConsumerSendMsgBackProcessor(controller.context, controller.schedule.rewrite)
        self.headers: list[dict[str, str]] = []
        controller.dispatcher.register(RequestCode.CONSUMER_SEND_MSG_BACK, self, controller.pools["send"])

    async def process(self, ctx: RequestContext, request: RemotingCommand) -> RemotingCommand | None:
        self.headers.append(dict(request.ext_fields))
        return await self.served.process(ctx, request)


async def test_a_send_back_names_the_original_topic_the_client_msg_id_and_the_broker_as_java_s_client(
    embedded_cluster: EmbeddedCluster, autojump_clock: trio.testing.MockClock
) -> None:
    """4.9.8's MQClientAPIImpl.consumerSendMessageBack sends ``originTopic`` = ``msg.getTopic()`` (the original
    topic: the consume service reset a retry message's topic before the listener saw it), ``originMsgId`` =
    ``msg.getMsgId()`` (a MessageClientExt's UNIQ_KEY) and ``bname`` = the queue's broker. A RocketMQ 5 broker
    labels its DLQ metric and its consume hooks with that topic; a retried message's send-back named
    ``%RETRY%<group>`` and the first delivery's offset msgId."""
    use_virtual_store_clock(embedded_cluster)
    recorder = _SendBackRecorder(embedded_cluster)
    async with Admin(embedded_cluster.namesrv_addr) as admin:
        await admin.create_topic("BackHeader", read_queue_nums=1, write_queue_nums=1)
    seen: list[MessageExt] = []

    async def listener(msgs: list[MessageExt]) -> ConsumeConcurrentlyStatus:
        seen.extend(msgs)
        failed = len(seen) <= 2
        return ConsumeConcurrentlyStatus.RECONSUME_LATER if failed else ConsumeConcurrentlyStatus.CONSUME_SUCCESS

    consumer = _consumer(embedded_cluster, "cg-back-header", "BackHeader")
    consumer.register_message_listener(listener)
    async with Producer("pg-back-header", embedded_cluster.namesrv_addr) as producer, consumer:
        sent = await producer.send(Message("BackHeader", b"m"))
        with trio.fail_after(600):
            while len(seen) < 3:
                await trio.sleep(1)
    assert [m.reconsume_times for m in seen] == [0, 1, 2]
    assert [(h["originTopic"], h["originMsgId"], h.get("bname")) for h in recorder.headers] == [
        ("BackHeader", sent.msg_id, "broker-a")
    ] * 2


async def test_an_orderly_message_given_up_reaches_the_dlq_with_the_reconsume_times_it_was_given_up_at(
    embedded_cluster: EmbeddedCluster, autojump_clock: trio.testing.MockClock
) -> None:
    """4.9.8's ConsumeMessageOrderlyService.checkReconsumeTimes gives a message up once its reconsumeTimes reached
    ``maxReconsumeTimes``: ``sendMessageBack`` sends a copy to ``%RETRY%<group>`` with that reconsumeTimes (and the
    limit), which the broker's send path moves to ``%DLQ%<group>``; the queue goes on with the next message. The
    dead letter used to be a broker send-back of the stored message, counting 1 whatever the tries."""
    await _create_and_send(embedded_cluster, "OrdDead", [b"bad", b"good"])
    seen: list[tuple[bytes, int]] = []

    async def listener(msgs: list[MessageExt]) -> ConsumeOrderlyStatus:
        seen.append((msgs[0].body, msgs[0].reconsume_times))
        if msgs[0].body == b"bad":
            return ConsumeOrderlyStatus.SUSPEND_CURRENT_QUEUE_A_MOMENT
        return ConsumeOrderlyStatus.SUCCESS

    consumer = _consumer(embedded_cluster, "cg-ord-dead", "OrdDead", max_reconsume_times=2)
    consumer.register_message_listener_orderly(listener)
    async with consumer:
        await trio.sleep(60)
        committed = consumer.offset_store.read_memory(MessageQueue("OrdDead", "broker-a", 0))
    assert seen == [(b"bad", 0), (b"bad", 1), (b"bad", 2), (b"good", 0)]
    assert committed == 2
    store = embedded_cluster.controller.context.store
    [dead] = [decode_record(view) for view in store.get("%DLQ%cg-ord-dead", 0, 0, 32).messages]
    assert (dead.body, dead.reconsume_times, dead.properties["RETRY_TOPIC"]) == (b"bad", 2, "OrdDead")


async def test_a_broadcasting_orderly_message_given_up_reaches_the_dlq_too(
    embedded_cluster: EmbeddedCluster, autojump_clock: trio.testing.MockClock, tmp_path: Path
) -> None:
    """4.9.8's checkReconsumeTimes and sendMessageBack do not look at the message model: a BROADCASTING orderly
    consumer gives a message up to ``%RETRY%<group>`` too (the broker makes that topic at the group's heartbeat,
    whatever its model), and the broker moves it to ``%DLQ%<group>``. Ours dropped it with a warning, so nothing
    kept it."""
    await _create_and_send(embedded_cluster, "OrdDeadBc", [b"bad", b"good"])
    seen: list[bytes] = []

    async def listener(msgs: list[MessageExt]) -> ConsumeOrderlyStatus:
        seen.append(msgs[0].body)
        return (
            ConsumeOrderlyStatus.SUSPEND_CURRENT_QUEUE_A_MOMENT
            if msgs[0].body == b"bad"
            else ConsumeOrderlyStatus.SUCCESS
        )

    consumer = _consumer(
        embedded_cluster,
        "cg-ord-dead-bc",
        "OrdDeadBc",
        max_reconsume_times=1,
        message_model=MessageModel.BROADCASTING,
        offset_store_dir=tmp_path,
    )
    consumer.register_message_listener_orderly(listener)
    async with consumer:
        await trio.sleep(60)
    assert seen == [b"bad", b"bad", b"good"]
    store = embedded_cluster.controller.context.store
    [dead] = [decode_record(view) for view in store.get("%DLQ%cg-ord-dead-bc", 0, 0, 32).messages]
    assert (dead.body, dead.reconsume_times, dead.properties["RETRY_TOPIC"]) == (b"bad", 1, "OrdDeadBc")


class _SlowSendBack(_SendBackRecorder):
    """The broker's CONSUMER_SEND_MSG_BACK answering ``delay`` seconds late (a busy broker)."""

    def __init__(self, cluster: EmbeddedCluster, delay: float) -> None:
        super().__init__(cluster)
        self.delay = delay

    async def process(self, ctx: RequestContext, request: RemotingCommand) -> RemotingCommand | None:
        await trio.sleep(self.delay)
        return await super().process(ctx, request)


async def test_a_send_back_answered_within_5_s_is_not_sent_again_as_a_retry_copy(
    embedded_cluster: EmbeddedCluster, autojump_clock: trio.testing.MockClock
) -> None:
    """4.9.8's DefaultMQPushConsumerImpl.sendMessageBack gives CONSUMER_SEND_MSG_BACK 5 s (``consumerSendMessageBack(
    ..., 5000, ...)``) before it sends a copy to ``%RETRY%`` itself. Ours gave it the 3 s of ``rpc_timeout``: a broker
    answering after 4 s stored the message for retry, and so did the copy: the listener got the retry twice."""
    use_virtual_store_clock(embedded_cluster)
    _SlowSendBack(embedded_cluster, 4.0)
    await _create_and_send(embedded_cluster, "SlowBack", [b"m"])
    seen: list[int] = []

    async def listener(msgs: list[MessageExt]) -> ConsumeConcurrentlyStatus:
        seen.append(msgs[0].reconsume_times)
        failed = len(seen) == 1
        return ConsumeConcurrentlyStatus.RECONSUME_LATER if failed else ConsumeConcurrentlyStatus.CONSUME_SUCCESS

    consumer = _consumer(embedded_cluster, "cg-slow-back", "SlowBack")
    consumer.register_message_listener(listener)
    async with consumer:
        await trio.sleep(120)  # the retry comes after delay level 3 (10 s)
    assert seen == [0, 1]
