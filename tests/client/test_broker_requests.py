"""Requests brokers push to our client: offsets reset by time, running info and direct consumption relayed from an
admin, consumer-ids-changed notifications (covered by the takeover tests)."""

from __future__ import annotations

import pytest

from client.admin import Admin
from client.consumer.listener import ConsumeConcurrentlyStatus
from client.consumer.push import PushConsumer
from client.message import Message, MessageExt
from client.producer import Producer
from remoting.codec.bodies import MessageQueue
from tests.client.helpers import create_topic, wait_until
from tests.threaded_cluster import ThreadedCluster

pytestmark = pytest.mark.anyio


def _consumer(cluster: ThreadedCluster, group: str, topic: str, seen: list[MessageExt]) -> PushConsumer:
    async def listener(msgs: list[MessageExt]) -> ConsumeConcurrentlyStatus:
        seen.extend(msgs)
        return ConsumeConcurrentlyStatus.CONSUME_SUCCESS

    consumer = PushConsumer(group, cluster.namesrv_addr)
    consumer.subscribe(topic, "TagA")
    consumer.register_message_listener(listener)
    return consumer


async def test_reset_offset_by_time_makes_an_online_consumer_replay(cluster: ThreadedCluster) -> None:
    await create_topic(cluster.namesrv_addr, "Reset", queues=2)
    seen: list[MessageExt] = []
    async with Producer("pg", cluster.namesrv_addr) as producer, _consumer(cluster, "cg-reset", "Reset", seen):
        for i in range(10):
            await producer.send(Message("Reset", f"r{i}".encode(), tags="TagA"))
        await wait_until(lambda: len(seen) >= 10)
        async with Admin(cluster.namesrv_addr) as admin:
            table = await admin.reset_offset_by_time("cg-reset", "Reset", 0)
        assert sorted(table.values()) == [0, 0]
        await wait_until(lambda: len(seen) >= 20)
    assert sorted(m.body for m in seen) == sorted([f"r{i}".encode() for i in range(10)] * 2)


async def test_admins_get_running_info_and_consume_directly_through_the_broker(cluster: ThreadedCluster) -> None:
    await create_topic(cluster.namesrv_addr, "Direct", queues=2)
    seen: list[MessageExt] = []
    async with Producer("pg", cluster.namesrv_addr) as producer, _consumer(cluster, "cg-direct", "Direct", seen) as c:
        sent = await producer.send(Message("Direct", b"direct", tags="TagA"))
        await wait_until(lambda: len(seen) == 1)
        async with Admin(cluster.namesrv_addr) as admin:
            info = await admin.consumer_running_info("cg-direct", c.instance.client_id)
            result = await admin.consume_message_directly("cg-direct", c.instance.client_id, sent.offset_msg_id)
    assert {MessageQueue("Direct", "broker-a", 0), MessageQueue("Direct", "broker-a", 1)} <= set(info["mqTable"])
    assert {s["topic"]: s["subString"] for s in info["subscriptionSet"]}["Direct"] == "TagA"
    assert result["consumeResult"] == "CR_SUCCESS"
    assert [m.body for m in seen] == [b"direct", b"direct"]
