"""What a push consumer reports of its offsets (GET_CONSUMER_STATUS_FROM_CLIENT, which ``Admin.consumer_status``
gathers through the broker) holds only the queues it owns, as 4.9.8's
client/src/main/java/org/apache/rocketmq/client/consumer/store/RemoteBrokerOffsetStore.java ``persistAll`` drops the
offsets of queues it is not given (every 5 s, with the owned queues) and ``cloneOffsetTable`` answers from that table.
In virtual time (autojump clock, the embedded cluster in the same loop)."""

from __future__ import annotations

import trio

from broker.embedded import EmbeddedCluster
from client.admin import Admin
from client.consumer.listener import ConsumeConcurrentlyStatus
from client.consumer.push import PushConsumer
from client.message import MessageExt
from remoting.codec.bodies import MessageQueue


def _consumer(cluster: EmbeddedCluster) -> PushConsumer:
    consumer = PushConsumer("cg-unused-offsets", cluster.namesrv_addr)
    consumer.subscribe("UnusedOffsets")

    async def listener(msgs: list[MessageExt]) -> ConsumeConcurrentlyStatus:
        return ConsumeConcurrentlyStatus.CONSUME_SUCCESS

    consumer.register_message_listener(listener)
    return consumer


async def test_a_restarted_consumer_reports_only_the_queues_it_owns_now(
    embedded_cluster: EmbeddedCluster, autojump_clock: trio.testing.MockClock
) -> None:
    """``a`` owned both queues in its first run; restarted beside ``b`` it owns one. Its offset of the other queue,
    left from the first run, is not reported as if it still consumed it."""
    async with Admin(embedded_cluster.namesrv_addr) as admin:
        await admin.create_topic("UnusedOffsets", read_queue_nums=2, write_queue_nums=2)
    a, b = _consumer(embedded_cluster), _consumer(embedded_cluster)
    async with a:
        await trio.sleep(10)
        assert len([mq for mq in a.rebalance.process_queues if mq.topic == "UnusedOffsets"]) == 2
    async with b:
        await trio.sleep(10)
        async with a:
            await trio.sleep(30)  # rebalanced, one queue each, and offsets persisted since
            owned = {mq for mq in a.rebalance.process_queues if mq.topic == "UnusedOffsets"}
            async with Admin(embedded_cluster.namesrv_addr) as admin:
                status = await admin.consumer_status("UnusedOffsets", "cg-unused-offsets")
    assert len(owned) == 1
    reported = status[a.instance.client_id]
    assert set(reported) == owned, f"a owns {sorted(owned)} but reports {sorted(reported)}"
    assert all(isinstance(mq, MessageQueue) for mq in reported)
