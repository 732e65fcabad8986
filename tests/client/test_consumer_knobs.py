"""Consumer settings honoured as RocketMQ 4.9.8's client honours them, in virtual time (Trio's autojump clock, cluster
in the same loop): the lite pull consumer's argument checks and ``consumeMaxSpan``
(client/src/main/java/org/apache/rocketmq/client/impl/consumer/DefaultLitePullConsumerImpl.java), the push consumer's
``pullInterval`` (client/src/main/java/org/apache/rocketmq/client/impl/consumer/DefaultMQPushConsumerImpl.java)."""

from __future__ import annotations

import pytest
import trio

from broker.embedded import EmbeddedCluster
from client.admin import Admin
from client.consumer.listener import ConsumeConcurrentlyStatus
from client.consumer.lite_pull import LitePullConsumer
from client.consumer.push import PushConsumer
from client.errors import MQClientError
from client.message import Message, MessageExt
from client.producer import Producer
from remoting.codec.bodies import ConsumeFromWhere

FIRST = ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET


async def _topic_with(cluster: EmbeddedCluster, topic: str, bodies: list[bytes]) -> None:
    """``topic`` with one queue holding ``bodies``."""
    async with Admin(cluster.namesrv_addr) as admin:
        await admin.create_topic(topic, read_queue_nums=1, write_queue_nums=1)
    async with Producer("pg-knobs", cluster.namesrv_addr) as producer:
        for body in bodies:
            await producer.send(Message(topic, body))


async def test_lite_pull_poll_refuses_a_negative_timeout(
    embedded_cluster: EmbeddedCluster, autojump_clock: trio.testing.MockClock
) -> None:
    """Java's ``poll(long timeout)`` throws "Timeout must not be negative"."""
    await _topic_with(embedded_cluster, "KnobPollTimeout", [b"m"])
    async with LitePullConsumer("cg-knob-poll", embedded_cluster.namesrv_addr, consume_from_where=FIRST) as consumer:
        await consumer.assign(await consumer.fetch_message_queues("KnobPollTimeout"))
        with pytest.raises(ValueError, match="Timeout must not be negative"):
            await consumer.poll(timeout=-1.0)


async def test_lite_pull_assign_refuses_no_queues_and_keeps_the_assignment(
    embedded_cluster: EmbeddedCluster, autojump_clock: trio.testing.MockClock
) -> None:
    """Java's ``assign`` throws "Message queues can not be null or empty." for an empty collection; the queues
    assigned before stay assigned."""
    await _topic_with(embedded_cluster, "KnobAssignEmpty", [b"m"])
    async with LitePullConsumer("cg-knob-assign", embedded_cluster.namesrv_addr, consume_from_where=FIRST) as consumer:
        mqs = await consumer.fetch_message_queues("KnobAssignEmpty")
        await consumer.assign(mqs)
        with pytest.raises(ValueError, match="can not be null or empty"):
            await consumer.assign([])
        assert consumer.assignment() == set(mqs)
        got: list[MessageExt] = []
        with trio.fail_after(60):
            while not got:
                got = await consumer.poll(timeout=1.0)
    assert [m.body for m in got] == [b"m"]


async def test_lite_pull_stops_pulling_a_queue_whose_cached_offsets_span_more_than_consume_max_span(
    embedded_cluster: EmbeddedCluster, autojump_clock: trio.testing.MockClock
) -> None:
    """Java's ``consumeMaxSpan`` (2000 by default): a queue whose buffered messages span more offsets than it is not
    pulled (``PullTaskImpl.run``) until polls take them; here one pull of 10 messages spans 9 > 5."""
    await _topic_with(embedded_cluster, "KnobMaxSpan", [f"m{i}".encode() for i in range(30)])
    async with LitePullConsumer(
        "cg-knob-span",
        embedded_cluster.namesrv_addr,
        consume_from_where=FIRST,
        pull_batch_size=10,
        consume_max_span=5,
    ) as consumer:
        [mq] = await consumer.fetch_message_queues("KnobMaxSpan")
        await consumer.assign([mq])
        await trio.sleep(30)
        cached = consumer.running_info()["mqTable"][mq]["cachedMsgCount"]
        assert consumer.running_info()["properties"]["consumeMaxSpan"] == "5"
        polled = await consumer.poll(timeout=0)
    assert cached == 10
    assert [m.body for m in polled] == [f"m{i}".encode() for i in range(10)]


async def test_push_pull_interval_pauses_between_the_pulls_of_a_queue(
    embedded_cluster: EmbeddedCluster, autojump_clock: trio.testing.MockClock
) -> None:
    """Java's ``pullInterval`` (0 by default, in ms; ours in seconds): after a pull that found messages the queue's
    next pull waits that long (``DefaultMQPushConsumerImpl.pullMessage``'s FOUND case). One message per pull here, so
    consecutive deliveries are at least the interval apart."""
    await _topic_with(embedded_cluster, "KnobPullInterval", [b"a", b"b", b"c"])
    seen: list[float] = []

    async def listener(msgs: list[MessageExt]) -> ConsumeConcurrentlyStatus:
        seen.extend(trio.current_time() for _ in msgs)
        return ConsumeConcurrentlyStatus.CONSUME_SUCCESS

    consumer = PushConsumer(
        "cg-knob-interval",
        embedded_cluster.namesrv_addr,
        consume_from_where=FIRST,
        pull_batch_size=1,
        pull_interval=10.0,
    )
    consumer.subscribe("KnobPullInterval")
    consumer.register_message_listener(listener)
    async with consumer:
        with trio.fail_after(120):
            while len(seen) < 3:
                await trio.sleep(0.1)
        assert consumer.running_info()["properties"]["pullInterval"] == "10000"
    assert seen[1] - seen[0] >= 10.0
    assert seen[2] - seen[1] >= 10.0


async def test_push_pull_interval_out_of_range_fails_the_start(
    embedded_cluster: EmbeddedCluster, autojump_clock: trio.testing.MockClock
) -> None:
    """``checkConfig``: "pullInterval Out of range [0, 65535]" (ms)."""
    consumer = PushConsumer("cg-knob-interval-range", embedded_cluster.namesrv_addr, pull_interval=65.536)
    consumer.subscribe("KnobPullIntervalRange")
    consumer.register_message_listener(lambda msgs: ConsumeConcurrentlyStatus.CONSUME_SUCCESS)
    with pytest.raises(MQClientError, match=r"pullInterval Out of range \[0, 65535\]"):
        async with consumer:
            pass


async def _big_topic(cluster: EmbeddedCluster, topic: str) -> None:
    """``topic`` with one queue of 8 bodies of 200 KiB: 1.56 MiB, 1 whole MiB."""
    async with Admin(cluster.namesrv_addr) as admin:
        await admin.create_topic(topic, read_queue_nums=1, write_queue_nums=1)
    async with Producer("pg-knobs", cluster.namesrv_addr, compress_msg_body_over_howmuch=1 << 30) as producer:
        for i in range(8):
            await producer.send(Message(topic, bytes([i]) * (200 * 1024)))


async def test_push_size_threshold_counts_whole_mib_as_java(
    embedded_cluster: EmbeddedCluster, autojump_clock: trio.testing.MockClock
) -> None:
    """Java compares ``msgSize / (1024 * 1024)`` (whole MiB) with ``pullThresholdSizeForQueue``: 1.56 MiB cached is
    1 MiB, not over a threshold of 1, so every message is pulled while the listener holds the first."""
    await _big_topic(embedded_cluster, "KnobPushMiB")
    release = trio.Event()

    async def listener(msgs: list[MessageExt]) -> ConsumeConcurrentlyStatus:
        await release.wait()
        return ConsumeConcurrentlyStatus.CONSUME_SUCCESS

    consumer = PushConsumer(
        "cg-knob-push-mib",
        embedded_cluster.namesrv_addr,
        consume_from_where=FIRST,
        pull_batch_size=1,
        consume_thread_min=1,
        consume_thread_max=1,
        pull_threshold_size_for_queue_mib=1,
    )
    consumer.subscribe("KnobPushMiB")
    consumer.register_message_listener(listener)
    async with consumer:
        await trio.sleep(30)
        [cached] = [pq.msg_count for mq, pq in consumer.rebalance.process_queues.items() if mq.topic == "KnobPushMiB"]
        release.set()
    assert cached == 8


async def test_lite_pull_size_threshold_counts_whole_mib_as_java(
    embedded_cluster: EmbeddedCluster, autojump_clock: trio.testing.MockClock
) -> None:
    """As the push consumer's: DefaultLitePullConsumerImpl's pull task compares whole MiB."""
    await _big_topic(embedded_cluster, "KnobLiteMiB")
    async with LitePullConsumer(
        "cg-knob-lite-mib",
        embedded_cluster.namesrv_addr,
        consume_from_where=FIRST,
        pull_batch_size=1,
        pull_threshold_size_for_queue_mib=1,
    ) as consumer:
        [mq] = await consumer.fetch_message_queues("KnobLiteMiB")
        await consumer.assign([mq])
        await trio.sleep(30)
        cached = consumer.running_info()["mqTable"][mq]["cachedMsgCount"]
    assert cached == 8


async def test_push_pull_interval_does_not_delay_the_pull_after_a_found_whose_messages_were_all_filtered_out(
    embedded_cluster: EmbeddedCluster, autojump_clock: trio.testing.MockClock
) -> None:
    """A FOUND pull whose messages the client's tag filter drops (the broker filters on the tags' hash code: Java's
    "Aa" and "BB" share 2112) has nothing to consume: ``DefaultMQPushConsumerImpl.pullMessage`` pulls the queue again
    at once then, and waits ``pullInterval`` only after a FOUND with messages."""
    async with Admin(embedded_cluster.namesrv_addr) as admin:
        await admin.create_topic("KnobPullIntervalFiltered", read_queue_nums=1, write_queue_nums=1)
    async with Producer("pg-knobs", embedded_cluster.namesrv_addr) as producer:
        await producer.send(Message("KnobPullIntervalFiltered", b"other", tags="BB"))
        await producer.send(Message("KnobPullIntervalFiltered", b"wanted", tags="Aa"))
    seen: list[float] = []

    async def listener(msgs: list[MessageExt]) -> ConsumeConcurrentlyStatus:
        seen.extend(trio.current_time() for _ in msgs)
        return ConsumeConcurrentlyStatus.CONSUME_SUCCESS

    consumer = PushConsumer(
        "cg-knob-interval-filtered",
        embedded_cluster.namesrv_addr,
        consume_from_where=FIRST,
        pull_batch_size=1,
        pull_interval=60.0,
    )
    consumer.subscribe("KnobPullIntervalFiltered", "Aa")
    consumer.register_message_listener(listener)
    async with consumer:
        started = trio.current_time()
        with trio.fail_after(300):
            while not seen:
                await trio.sleep(0.1)
    assert seen[0] - started < 60.0


@pytest.mark.parametrize("minutes", [0, -1])
async def test_push_consume_timeout_not_positive_fails_a_concurrent_start(
    embedded_cluster: EmbeddedCluster, autojump_clock: trio.testing.MockClock, minutes: float
) -> None:
    """ConsumeMessageConcurrentlyService.start schedules cleanExpireMsg every ``consumeTimeout`` minutes with
    ``scheduleAtFixedRate``, which refuses a period not above 0: Java's start fails. Ours started, then spun its
    clean-up loop without pause and sent back every message the moment its listener call began."""
    consumer = PushConsumer("cg-knob-timeout", embedded_cluster.namesrv_addr, consume_timeout=minutes)
    consumer.subscribe("KnobConsumeTimeout")
    consumer.register_message_listener(lambda msgs: ConsumeConcurrentlyStatus.CONSUME_SUCCESS)
    with pytest.raises(ValueError, match=r"consumeTimeout"):
        async with consumer:
            pass
    consumer.consume_timeout = 15.0  # the failed start left nothing behind: it starts once the setting is fixed
    async with consumer:
        assert consumer.running_info()["properties"]["consumeTimeout"] == "15"


async def test_lite_pull_threshold_for_all_counts_buffered_pulls_times_the_batch_size(
    embedded_cluster: EmbeddedCluster, autojump_clock: trio.testing.MockClock
) -> None:
    """PullTaskImpl.run holds every queue back while ``consumeRequestCache.size() * pullBatchSize >
    pullThresholdForAll``: buffered pulls count as full batches, however few messages each brought. Messages coming
    one at a time (a long poll answered by each), batch 10, threshold 20: three pulls are buffered, then pulling waits
    for a poll. Ours counted the messages, so it took twenty-one of them."""
    topic = "KnobThresholdAll"
    await _topic_with(embedded_cluster, topic, [])
    async with (
        LitePullConsumer(
            "cg-knob-all", embedded_cluster.namesrv_addr, consume_from_where=FIRST, pull_batch_size=10,
            pull_threshold_for_all=20,
        ) as consumer,
        Producer("pg-knob-all", embedded_cluster.namesrv_addr) as producer,
    ):  # fmt: skip
        await consumer.assign(await consumer.fetch_message_queues(topic))
        await trio.sleep(1)
        for i in range(6):
            await producer.send(Message(topic, f"m{i}".encode()))
            await trio.sleep(1)  # the held pull answers with this one message
        [state] = consumer._queues.values()
        assert state.pq.msg_count == 3
        got: list[MessageExt] = []
        while len(got) < 6:
            got.extend(await consumer.poll(timeout=5))
    assert [m.body for m in got] == [f"m{i}".encode() for i in range(6)]
