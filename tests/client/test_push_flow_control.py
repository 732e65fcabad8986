"""The push consumer's flow-control settings in virtual time against the embedded cluster, as RocketMQ 4.9.8's
DefaultMQPushConsumerImpl and RebalancePushImpl: ``pull_threshold_for_topic`` and
``pull_threshold_size_for_topic_mib`` split over the owned queues whenever the allocation changes."""

from __future__ import annotations

import trio
import trio.testing

from broker.embedded import EmbeddedCluster
from client.admin import Admin
from client.consumer.listener import ConsumeConcurrentlyStatus
from client.consumer.push import PushConsumer
from client.message import Message, MessageExt
from client.producer import Producer
from remoting.codec.bodies import ConsumeFromWhere, MessageQueue

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

    consumer = PushConsumer(
        group,
        cluster.namesrv_addr,
        consume_from_where=ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET,
        await_termination=1.0,
        **options,  # type: ignore[arg-type]
    )
    consumer.subscribe(topic)
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
    rebalance that changed the queues."""
    body = b"x" * (MIB // 4)
    mq = await _create(embedded_cluster, "FlowSize")
    consumer = _hanging(
        "cg-flow-size", embedded_cluster, "FlowSize", pull_batch_size=1, pull_threshold_size_for_topic_mib=5
    )
    async with consumer:
        await _fill(embedded_cluster, mq, [body] * 24)
        assert len(consumer.rebalance.process_queues) == 5  # FlowSize's 4 and the retry topic's 1
        held = consumer.rebalance.process_queues[mq].msg_size
    assert held <= MIB + len(body), f"queue 0 holds {held / MIB:.2f} MiB, over its 1 MiB share of the topic's 5"
