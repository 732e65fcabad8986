"""A lite pull consumer told its topics or queues before its start, as Java's examples do
(client/src/main/java/org/apache/rocketmq/client/impl/consumer/DefaultLitePullConsumerImpl.java: ``subscribe`` and
``assign`` keep what they are given while the consumer is not running, and ``start`` takes it up in
``operateAfterRunning``)."""

from __future__ import annotations

import anyio
import pytest

from client.consumer.lite_pull import LitePullConsumer
from client.errors import ClientStateError
from client.sync import LitePullConsumer as BlockingLitePullConsumer
from remoting.codec.bodies import ConsumeFromWhere, MessageQueue
from tests.client.helpers import create_topic, poll_until, send_bodies
from tests.threaded_cluster import ThreadedCluster

pytestmark = pytest.mark.anyio

FIRST = ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET


async def test_a_subscribe_before_the_start_is_consumed_once_started(cluster: ThreadedCluster) -> None:
    bodies = [f"b{i}".encode() for i in range(6)]
    await create_topic(cluster.namesrv_addr, "LiteSubFirst", queues=2)
    await send_bodies(cluster.namesrv_addr, "LiteSubFirst", bodies)
    consumer = LitePullConsumer("lite-sub-first", cluster.namesrv_addr, consume_from_where=FIRST)
    await consumer.subscribe("LiteSubFirst")
    with pytest.raises(ClientStateError):
        await consumer.assign([MessageQueue("LiteSubFirst", "broker-a", 0)])
    async with consumer:
        got = await poll_until(consumer, len(bodies))
    assert sorted(m.body for m in got) == sorted(bodies)


async def test_an_assign_before_the_start_is_pulled_once_started(cluster: ThreadedCluster) -> None:
    await create_topic(cluster.namesrv_addr, "LiteAssignFirst", queues=2)
    await send_bodies(cluster.namesrv_addr, "LiteAssignFirst", [f"a{i}".encode() for i in range(8)])
    consumer = LitePullConsumer("lite-assign-first", cluster.namesrv_addr, consume_from_where=FIRST)
    mq = MessageQueue("LiteAssignFirst", "broker-a", 1)
    await consumer.assign([mq])
    with pytest.raises(ClientStateError):
        await consumer.subscribe("LiteAssignFirst")
    async with consumer:
        got = await poll_until(consumer, 4)
        assert consumer.assignment() == {mq}
    assert {m.queue_id for m in got} == {1}


def test_the_blocking_facade_subscribes_before_start(cluster: ThreadedCluster) -> None:
    anyio.run(create_topic, cluster.namesrv_addr, "SyncLiteSubFirst", 1)
    anyio.run(send_bodies, cluster.namesrv_addr, "SyncLiteSubFirst", [b"x", b"y"])
    consumer = BlockingLitePullConsumer("sync-lite-sub-first", cluster.namesrv_addr, consume_from_where=FIRST)
    consumer.subscribe("SyncLiteSubFirst")
    with consumer:
        got: list[bytes] = []
        for _ in range(50):
            got.extend(m.body for m in consumer.poll(timeout=1.0))
            if len(got) >= 2:
                break
    assert got == [b"x", b"y"]
