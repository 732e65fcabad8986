"""``PushConsumer.suspend`` / ``resume`` as RocketMQ 4.9.8's DefaultMQPushConsumer.suspend() / resume()
(client/src/main/java/org/apache/rocketmq/client/impl/consumer/DefaultMQPushConsumerImpl.java: ``pause``). Virtual
time against the embedded cluster."""

from __future__ import annotations

import trio
import trio.testing

from broker.embedded import EmbeddedCluster
from client.admin import Admin
from client.consumer.listener import ConsumeConcurrentlyStatus
from client.message import Message, MessageExt
from client.producer import Producer
from tests.client.helpers import first_offset_consumer

TOPIC = "PushSuspend"


async def test_a_suspended_push_consumer_pulls_nothing_until_it_is_resumed(
    embedded_cluster: EmbeddedCluster, autojump_clock: trio.testing.MockClock
) -> None:
    """While paused, pullMessage puts every pull off by PULL_TIME_DELAY_MILLS_WHEN_SUSPEND (1 s) and doRebalance does
    nothing; resume() lifts it (and rebalances): the queue's next pull, within a second, gets what came meanwhile."""
    async with Admin(embedded_cluster.namesrv_addr) as admin:
        await admin.create_topic(TOPIC, read_queue_nums=1, write_queue_nums=1)
    got: list[tuple[float, bytes]] = []

    async def listener(msgs: list[MessageExt]) -> ConsumeConcurrentlyStatus:
        got.extend((trio.current_time(), m.body) for m in msgs)
        return ConsumeConcurrentlyStatus.CONSUME_SUCCESS

    consumer = first_offset_consumer(embedded_cluster.namesrv_addr, "cg-suspend", TOPIC)
    consumer.register_message_listener(listener)
    async with consumer, Producer("pg-suspend", embedded_cluster.namesrv_addr) as producer:
        await producer.send(Message(TOPIC, b"before"))
        await trio.sleep(2)
        assert [body for _, body in got] == [b"before"]
        consumer.suspend()
        await trio.sleep(20)  # the long poll parked before the suspension has come back empty
        await producer.send(Message(TOPIC, b"while suspended"))
        await trio.sleep(60)
        assert [body for _, body in got] == [b"before"], got
        resumed = trio.current_time()
        consumer.resume()
        await trio.sleep(2)
    assert [body for _, body in got] == [b"before", b"while suspended"], got
    assert got[-1][0] - resumed <= 1.1, (resumed, got)
