"""The push consumer's flow-control settings in virtual time against the embedded cluster, as RocketMQ 4.9.8's
DefaultMQPushConsumerImpl and RebalancePushImpl: ``pull_threshold_for_topic`` and
``pull_threshold_size_for_topic_mib`` split over the owned queues whenever the allocation changes; settings out of
Java's ranges refused at start (DefaultMQPushConsumerImpl.checkConfig)."""

from __future__ import annotations

import re

import pytest
import trio
import trio.testing

from broker.embedded import EmbeddedCluster
from client.admin import Admin
from client.consumer.listener import ConsumeConcurrentlyStatus
from client.consumer.push import PushConsumer
from client.errors import MQClientError
from client.message import Message, MessageExt
from client.producer import Producer
from remoting.codec.bodies import MessageQueue
from tests.client.helpers import first_offset_consumer

MIB = 1024 * 1024


async def _create(cluster: EmbeddedCluster, topic: str) -> MessageQueue:
    """``topic`` with 4 queues; its queue 0."""
    async with Admin(cluster.namesrv_addr) as admin:
        await admin.create_topic(topic, read_queue_nums=4, write_queue_nums=4)
    return MessageQueue(topic, "broker-a", 0)


async def _fill(cluster: EmbeddedCluster, mq: MessageQueue, bodies: list[bytes]) -> None:
    """Send ``bodies`` to ``mq``, then give the consumer time to pull."""
    async with Producer("pg-flow", cluster.namesrv_addr) as producer:
        for body in bodies:
            await producer.send(Message(mq.topic, body), queue=mq)
    await trio.sleep(30)


def _hanging(group: str, cluster: EmbeddedCluster, topic: str, **options: int) -> PushConsumer:
    """A consumer of ``topic`` whose listener never returns, so what it pulls stays in its process queues."""

    async def listener(msgs: list[MessageExt]) -> ConsumeConcurrentlyStatus:
        await trio.sleep_forever()
        return ConsumeConcurrentlyStatus.CONSUME_SUCCESS

    consumer = first_offset_consumer(cluster.namesrv_addr, group, topic, **options)
    consumer.register_message_listener(listener)
    return consumer


async def test_pull_threshold_for_topic_caps_each_owned_queue_at_its_share(
    embedded_cluster: EmbeddedCluster, autojump_clock: trio.testing.MockClock
) -> None:
    """Java's pullThresholdForTopic: after each rebalance that changed the queues, pullThresholdForQueue becomes
    max(1, pullThresholdForTopic / owned queues) (RebalancePushImpl.messageQueueChanged), so a queue holds at most
    its share plus one pull."""
    mq = await _create(embedded_cluster, "FlowTopic")
    consumer = _hanging("cg-flow-topic", embedded_cluster, "FlowTopic", pull_batch_size=2, pull_threshold_for_topic=20)
    async with consumer:
        await _fill(embedded_cluster, mq, [f"{i}".encode() for i in range(100)])
        owned = len(consumer.rebalance.process_queues)  # FlowTopic's 4 and the retry topic's 1
        held = consumer.rebalance.process_queues[mq].msg_count
    share = 20 // owned
    assert consumer.pull_threshold_for_queue == share
    assert held <= share + 2, f"queue 0 holds {held} messages, over its share {share} of the topic's 20"


async def test_pull_threshold_size_for_topic_caps_each_owned_queue_at_its_share(
    embedded_cluster: EmbeddedCluster, autojump_clock: trio.testing.MockClock
) -> None:
    """Java's pullThresholdSizeForTopic (MiB): pullThresholdSizeForQueue becomes max(1, it / owned queues) after each
    rebalance that changed the queues. Java compares whole MiB (``msgSize / (1024 * 1024) > threshold``), so a 1 MiB
    share holds less than 2 MiB before the last pull's body."""
    body = b"x" * (MIB // 4)
    mq = await _create(embedded_cluster, "FlowSize")
    consumer = _hanging(
        "cg-flow-size", embedded_cluster, "FlowSize", pull_batch_size=1, pull_threshold_size_for_topic_mib=5
    )
    async with consumer:
        await _fill(embedded_cluster, mq, [body] * 24)
        assert len(consumer.rebalance.process_queues) == 5  # FlowSize's 4 and the retry topic's 1
        held = consumer.rebalance.process_queues[mq].msg_size
    assert held <= 2 * MIB + len(body), f"queue 0 holds {held / MIB:.2f} MiB, over its 1 MiB share of the topic's 5"


async def test_a_changed_allocation_announces_a_newer_subscription_version(
    embedded_cluster: EmbeddedCluster, autojump_clock: trio.testing.MockClock
) -> None:
    """RebalancePushImpl.messageQueueChanged stamps the topic's subscription with a new subVersion before the heartbeat
    it sends ("When rebalance result changed, should update subscription's version to notify broker"), so the broker
    keeps the subscription of the member whose queues changed last. Ours kept the version of the subscribe call."""
    await _create(embedded_cluster, "FlowVersion")
    a = _hanging("cg-flow-version", embedded_cluster, "FlowVersion")
    b = _hanging("cg-flow-version", embedded_cluster, "FlowVersion")
    clients = embedded_cluster.controller.context.clients
    async with a:
        before = a.rebalance.subscriptions["FlowVersion"].sub_version
        async with b:
            await trio.sleep(30)  # both rebalanced: each now owns 2 of the 4 queues
            assert len([mq for mq in a.rebalance.process_queues if mq.topic == "FlowVersion"]) == 2
            after = a.rebalance.subscriptions["FlowVersion"].sub_version
            assert after > before
            registered = clients.find_subscription("cg-flow-version", "FlowVersion")
            assert registered is not None and registered.sub_version >= after


@pytest.mark.parametrize(
    ("option", "value", "said"),
    [
        ("consume_thread_min", 0, "consumeThreadMin Out of range [1, 1000]"),
        ("consume_thread_min", 1001, "consumeThreadMin Out of range [1, 1000]"),
        ("consume_thread_max", 0, "consumeThreadMax Out of range [1, 1000]"),
        ("consume_thread_max", 1001, "consumeThreadMax Out of range [1, 1000]"),
        ("consume_concurrently_max_span", 0, "consumeConcurrentlyMaxSpan Out of range [1, 65535]"),
        ("pull_threshold_for_queue", 0, "pullThresholdForQueue Out of range [1, 65535]"),
        ("pull_threshold_for_queue", 65536, "pullThresholdForQueue Out of range [1, 65535]"),
        ("pull_threshold_for_topic", 0, "pullThresholdForTopic Out of range [1, 6553500]"),
        ("pull_threshold_size_for_queue_mib", 0, "pullThresholdSizeForQueue Out of range [1, 1024]"),
        ("pull_threshold_size_for_queue_mib", 1025, "pullThresholdSizeForQueue Out of range [1, 1024]"),
        ("pull_threshold_size_for_topic_mib", 102401, "pullThresholdSizeForTopic Out of range [1, 102400]"),
        ("consume_message_batch_max_size", 0, "consumeMessageBatchMaxSize Out of range [1, 1024]"),
        ("consume_message_batch_max_size", 1025, "consumeMessageBatchMaxSize Out of range [1, 1024]"),
        ("pull_batch_size", 0, "pullBatchSize Out of range [1, 1024]"),
        ("pull_batch_size", -1, "pullBatchSize Out of range [1, 1024]"),
        ("pull_batch_size", 1025, "pullBatchSize Out of range [1, 1024]"),
    ],
)
async def test_a_setting_out_of_javas_range_fails_the_start(
    embedded_cluster: EmbeddedCluster, autojump_clock: trio.testing.MockClock, option: str, value: int, said: str
) -> None:
    """DefaultMQPushConsumerImpl.checkConfig refuses these settings out of range with an MQClientException from
    start(); ours started with them."""
    async with Admin(embedded_cluster.namesrv_addr) as admin:
        await admin.create_topic("Checked", read_queue_nums=1, write_queue_nums=1)
    with pytest.raises(MQClientError, match=re.escape(said)):
        async with _hanging("cg-checked", embedded_cluster, "Checked", **{option: value}):
            pass


async def test_consume_thread_min_above_max_fails_the_start(
    embedded_cluster: EmbeddedCluster, autojump_clock: trio.testing.MockClock
) -> None:
    """DefaultMQPushConsumerImpl.checkConfig refuses consumeThreadMin (20 by default) above consumeThreadMax, so
    lowering the max alone fails the start; ours had no consumeThreadMin."""
    await _create(embedded_cluster, "ThreadsChecked")
    with pytest.raises(MQClientError, match=re.escape("consumeThreadMin (20) is larger than consumeThreadMax (10)")):
        async with _hanging("cg-threads", embedded_cluster, "ThreadsChecked", consume_thread_max=10):
            pass


async def test_consume_thread_min_bounds_the_listener_calls_in_flight(
    embedded_cluster: EmbeddedCluster, autojump_clock: trio.testing.MockClock
) -> None:
    """Java's consume executor is a ThreadPoolExecutor of consumeThreadMin core threads, up to consumeThreadMax, over
    an unbounded queue, so it never starts more than consumeThreadMin threads
    (ConsumeMessageConcurrentlyService's constructor); the running info's PROP_THREADPOOL_CORE_SIZE and
    consumeThreadMin say so. Ours ran consume_thread_max calls at once."""
    mq = await _create(embedded_cluster, "ThreadsCore")
    in_flight = 0

    async def listener(msgs: list[MessageExt]) -> ConsumeConcurrentlyStatus:
        nonlocal in_flight
        in_flight += 1
        await trio.sleep_forever()
        return ConsumeConcurrentlyStatus.CONSUME_SUCCESS

    options = {"consume_thread_min": 2, "consume_thread_max": 6}
    consumer = first_offset_consumer(embedded_cluster.namesrv_addr, "cg-threads-core", "ThreadsCore", **options)
    consumer.register_message_listener(listener)
    async with consumer:
        await _fill(embedded_cluster, mq, [b"m%d" % i for i in range(8)])
        await trio.sleep(10)
        props = consumer.running_info()["properties"]
    assert in_flight == 2
    assert (props["consumeThreadMin"], props["consumeThreadMax"], props["PROP_THREADPOOL_CORE_SIZE"]) == ("2", "6", "2")


async def test_a_consumer_whose_topic_thresholds_were_split_starts_again(
    embedded_cluster: EmbeddedCluster, autojump_clock: trio.testing.MockClock
) -> None:
    """Settings within Java's ranges (pullThresholdForTopic up to 6553500, pullThresholdSizeForTopic up to 102400 MiB)
    split over a few queues give per-queue thresholds above the per-queue ranges (65535, 1024 MiB). Those are this
    consumer's derived values, not settings: a consumer stopped and started again must not be refused over them."""
    await _create(embedded_cluster, "FlowAgain")
    consumer = _hanging(
        "cg-flow-again",
        embedded_cluster,
        "FlowAgain",
        pull_threshold_for_topic=6_553_500,
        pull_threshold_size_for_topic_mib=102_400,
    )
    async with consumer:
        assert consumer.pull_threshold_for_queue > 65_535  # the split: 6553500 / 5 owned queues
    async with consumer:
        assert len(consumer.rebalance.process_queues) == 5
        assert consumer.pull_threshold_for_queue == 6_553_500 // 5
        assert consumer.pull_threshold_size_for_queue == 102_400 // 5 * MIB


async def test_flow_control_is_logged_as_java_logs_it_once_per_thousand_times(
    embedded_cluster: EmbeddedCluster, autojump_clock: trio.testing.MockClock, caplog: pytest.LogCaptureFixture
) -> None:
    """DefaultMQPushConsumerImpl.pullMessage logs a pull put off by the cached message count with a warning the first
    time and every 1000th time after (``queueFlowControlTimes++ % 1000 == 0``), naming the threshold, the cached
    offsets, count, size and pull request: what an operator greps a consumer's log for when it stops pulling."""
    mq = await _create(embedded_cluster, "FlowLog")
    consumer = _hanging("cg-flow-log", embedded_cluster, "FlowLog", pull_batch_size=1, pull_threshold_for_queue=3)
    with caplog.at_level("WARNING", logger="client.consumer.pull_service"):
        async with consumer:
            await _fill(embedded_cluster, mq, [b"m%d" % i for i in range(10)])  # 30 s: some 600 flow controls
    lines = [r.getMessage() for r in caplog.records if "so do flow control" in r.getMessage()]
    assert len(lines) == 1, lines
    assert re.fullmatch(
        r"the cached message count exceeds the threshold 3, so do flow control, minOffset=0, maxOffset=3, count=4, "
        r"size=0 MiB, pullRequest=PullRequest \[consumerGroup=cg-flow-log, messageQueue=MessageQueue \[topic=FlowLog, "
        r"brokerName=broker-a, queueId=0\], nextOffset=\d+\], flowControlTimes=1",
        lines[0],
    ), lines[0]
