"""A lite pull consumer's assignment while it is stopped, as 4.9.8's DefaultLitePullConsumerImpl
(client/src/main/java/org/apache/rocketmq/client/impl/consumer/DefaultLitePullConsumerImpl.java): ``assignment()``
reads ``assignedMessageQueue`` whatever the state, which ``assign`` fills before the start and which ``shutdown``
leaves as it was, and ``assign``, synchronized with ``shutdown``, keeps its queues for the next start whenever it
runs. Embedded broker, real sockets, virtual time."""

from __future__ import annotations

import trio
import trio.testing

from broker.embedded import EmbeddedCluster
from client.admin import Admin
from client.consumer.lite_pull import LitePullConsumer
from remoting.codec.bodies import ConsumeFromWhere, MessageQueue
from tests.client.helpers import poll_until, send_bodies

TOPIC = "LiteStoppedAssign"
FIRST = ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET


async def _topic(cluster: EmbeddedCluster) -> tuple[MessageQueue, MessageQueue]:
    async with Admin(cluster.namesrv_addr) as admin:
        await admin.create_topic(TOPIC, read_queue_nums=2, write_queue_nums=2)
    return MessageQueue(TOPIC, "broker-a", 0), MessageQueue(TOPIC, "broker-a", 1)


async def test_assignment_answers_the_assigned_queues_while_stopped(
    embedded_cluster: EmbeddedCluster, autojump_clock: trio.testing.MockClock
) -> None:
    """assignment() is assignedMessageQueue's set before the start, while running and after the shutdown. Ours
    answered an empty set whenever the consumer was not running."""
    mq0, _ = await _topic(embedded_cluster)
    consumer = LitePullConsumer("lite-stopped-assignment", embedded_cluster.namesrv_addr, consume_from_where=FIRST)
    await consumer.assign([mq0])
    before = consumer.assignment()
    async with consumer:
        running = consumer.assignment()
    assert (before, running, consumer.assignment()) == ({mq0}, {mq0}, {mq0})


async def test_an_assign_while_the_consumer_stops_is_kept_for_the_next_start(
    embedded_cluster: EmbeddedCluster, autojump_clock: trio.testing.MockClock
) -> None:
    """An assign made while the stop is under way takes effect as one made after it: the next start pulls its
    queues. Ours lost it: the stop's end put back the queues it had owned."""
    mq0, mq1 = await _topic(embedded_cluster)
    consumer = LitePullConsumer("lite-assign-stopping", embedded_cluster.namesrv_addr, consume_from_where=FIRST)
    stop_ended: list[bool] = []

    async def assign_while_stopping() -> None:
        while consumer._tasks is not None:
            await trio.sleep(0)
        await consumer.assign([mq1])
        stop_ended.append(stopped)

    stopped = False
    async with trio.open_nursery() as nursery:
        await consumer.__aenter__()
        await consumer.assign([mq0])
        nursery.start_soon(assign_while_stopping)
        await consumer.__aexit__(None, None, None)
        stopped = True
    assert stop_ended == [False]
    assert consumer.assignment() == {mq1}
    await send_bodies(embedded_cluster.namesrv_addr, TOPIC, [f"m{i}".encode() for i in range(4)])
    async with consumer:
        got = await poll_until(consumer, 2)
    assert {m.queue_id for m in got} == {1}, got


async def test_an_unsubscribe_while_stopped_takes_the_topic_out_of_the_assignment(
    embedded_cluster: EmbeddedCluster, autojump_clock: trio.testing.MockClock
) -> None:
    """unsubscribe runs assignedMessageQueue.removeAssignedMessageQueue(topic) whatever the state: a stopped
    consumer's assignment() no longer shows the topic's queues."""
    mq0, _ = await _topic(embedded_cluster)
    consumer = LitePullConsumer("lite-stopped-unsubscribe", embedded_cluster.namesrv_addr, consume_from_where=FIRST)
    async with consumer:
        await consumer.assign([mq0])
    await consumer.unsubscribe(TOPIC)
    assert consumer.assignment() == set()
