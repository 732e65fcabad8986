"""Consumer settings honoured as RocketMQ 4.9.8's client honours them, in virtual time (Trio's autojump clock, cluster
in the same loop): the lite pull consumer's argument checks and ``consumeMaxSpan``
(client/src/main/java/org/apache/rocketmq/client/impl/consumer/DefaultLitePullConsumerImpl.java), the push consumer's
``pullInterval`` (client/src/main/java/org/apache/rocketmq/client/impl/consumer/DefaultMQPushConsumerImpl.java)."""

from __future__ import annotations

import pytest
import trio

from broker.embedded import EmbeddedCluster
from client.admin import Admin
from client.consumer.lite_pull import LitePullConsumer
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
