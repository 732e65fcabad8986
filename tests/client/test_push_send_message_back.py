"""``PushConsumer.send_message_back``: an application sends a message back itself, as Java's public
``DefaultMQPushConsumer.sendMessageBack(msg, delayLevel[, brokerName])`` (4.9.8's
client/src/main/java/org/apache/rocketmq/client/consumer/DefaultMQPushConsumer.java): CONSUMER_SEND_MSG_BACK to the
named broker's master, or without a broker name to the host that stored the message; the message then comes back
through the group's retry topic after the delay level's time. And ``fetch_subscribe_message_queues``, Java's
``fetchSubscribeMessageQueues``."""

from __future__ import annotations

import anyio
import pytest

from client.admin import Admin
from client.consumer.listener import ConsumeConcurrentlyStatus
from client.consumer.push import PushConsumer
from client.errors import FAQ_HINT, MQClientError, TopicRouteNotFoundError
from client.message import Message, MessageExt
from client.producer import Producer
from remoting.codec.bodies import PERM_WRITE, MessageQueue
from tests.client.helpers import HANG_GUARD, create_topic, wait_until
from tests.threaded_cluster import ThreadedCluster

pytestmark = pytest.mark.anyio


async def test_a_message_the_listener_sends_back_itself_comes_back_through_the_retry_topic(
    cluster: ThreadedCluster,
) -> None:
    await create_topic(cluster.namesrv_addr, "SendBackApi", queues=1)
    again: dict[bytes, MessageExt] = {}
    sent: list[bytes] = []
    consumer = PushConsumer("cg-send-back-api", cluster.namesrv_addr)

    async def listener(msgs: list[MessageExt]) -> ConsumeConcurrentlyStatus:
        for msg in msgs:
            if msg.reconsume_times:
                again[msg.body] = msg
            elif msg.body == b"by-store-host":
                await consumer.send_message_back(msg, 1)  # level 1: 1 s
                sent.append(msg.body)
            else:
                await consumer.send_message_back(msg, 1, "broker-a")
                sent.append(msg.body)
        return ConsumeConcurrentlyStatus.CONSUME_SUCCESS

    consumer.subscribe("SendBackApi")
    consumer.register_message_listener(listener)
    async with Producer("pg", cluster.namesrv_addr) as producer, consumer:
        await producer.send(Message("SendBackApi", b"by-store-host"))
        await producer.send(Message("SendBackApi", b"by-broker-name"))
        with anyio.fail_after(60):
            await wait_until(lambda: len(again) == 2)
    assert sorted(sent) == [b"by-broker-name", b"by-store-host"], "send_message_back did not return"
    assert {body: (m.topic, m.reconsume_times) for body, m in again.items()} == {
        b"by-store-host": ("SendBackApi", 1),
        b"by-broker-name": ("SendBackApi", 1),
    }


async def test_fetch_subscribe_message_queues_lists_a_topic_s_readable_queues(cluster: ThreadedCluster) -> None:
    """Java's public ``DefaultMQPushConsumer.fetchSubscribeMessageQueues(topic)``: the topic's readable queues from
    the name server's route (``MQAdminImpl.fetchSubscribeMessageQueues``), whether subscribed or not."""
    await create_topic(cluster.namesrv_addr, "FetchQueues", queues=3)
    consumer = PushConsumer("cg-fetch-queues", cluster.namesrv_addr)
    consumer.subscribe("Other")
    consumer.register_message_listener(lambda msgs: ConsumeConcurrentlyStatus.CONSUME_SUCCESS)
    async with consumer:
        queues = await consumer.fetch_subscribe_message_queues("FetchQueues")
    assert sorted(queues) == [MessageQueue("FetchQueues", "broker-a", i) for i in range(3)]


async def test_fetch_subscribe_message_queues_fails_in_javas_words_whatever_the_cause(
    cluster: ThreadedCluster,
) -> None:
    """``MQAdminImpl.fetchSubscribeMessageQueues`` wraps every failure, its own "Namesrv return empty" too, in
    "Can not find Message Queue for this topic, <topic>" with the FAQ hint, the cause kept, as the lite pull
    consumer's ``fetch_message_queues``. The push consumer raised the inner text for a write-only topic and a
    ``TopicRouteNotFoundError`` for a topic the name server does not know."""
    async with Admin(cluster.namesrv_addr) as admin:
        await admin.create_topic("PushWriteOnlyWords", read_queue_nums=1, write_queue_nums=1, perm=PERM_WRITE)
        with anyio.fail_after(HANG_GUARD):
            await wait_until_routed(admin, "PushWriteOnlyWords")
    consumer = PushConsumer("cg-fetch-words", cluster.namesrv_addr)
    consumer.subscribe("Other")
    consumer.register_message_listener(lambda msgs: ConsumeConcurrentlyStatus.CONSUME_SUCCESS)
    async with consumer:
        for topic in ("PushWriteOnlyWords", "PushNoSuchTopicWords"):
            with pytest.raises(MQClientError) as refused:
                await consumer.fetch_subscribe_message_queues(topic)
            assert str(refused.value) == f"Can not find Message Queue for this topic, {topic}{FAQ_HINT}"
            assert refused.value.__cause__ is not None


async def wait_until_routed(admin: Admin, topic: str) -> None:
    while True:
        try:
            if (await admin.topic_route(topic)).queue_datas:
                return
        except TopicRouteNotFoundError:
            await anyio.sleep(0.02)
