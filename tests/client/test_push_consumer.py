"""Push consumer against the embedded cluster: CLUSTERING exactly once, splitting and takeover, orderly, BROADCASTING,
offsets resuming after a restart, send-back on failure."""

from __future__ import annotations

from collections import Counter

import pytest

from client.consumer.listener import ConsumeConcurrentlyStatus
from client.consumer.push import PushConsumer
from client.message import Message, MessageExt
from client.producer import Producer
from remoting.codec.bodies import ConsumeFromWhere
from tests.client.conftest import ThreadedCluster
from tests.client.helpers import create_topic, wait_until

pytestmark = pytest.mark.anyio


async def test_clustering_consumer_receives_every_message_exactly_once(cluster: ThreadedCluster) -> None:
    await create_topic(cluster.namesrv_addr, "PushAll")
    received: Counter[bytes] = Counter()

    async def listener(msgs: list[MessageExt]) -> ConsumeConcurrentlyStatus:
        received.update(m.body for m in msgs)
        return ConsumeConcurrentlyStatus.CONSUME_SUCCESS

    consumer = PushConsumer(
        "cg-all", cluster.namesrv_addr, consume_from_where=ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET
    )
    consumer.subscribe("PushAll")
    consumer.register_message_listener(listener)
    async with Producer("pg", cluster.namesrv_addr) as producer, consumer:
        for i in range(40):
            await producer.send(Message("PushAll", f"m{i}".encode()))
        await wait_until(lambda: sum(received.values()) >= 40)
    assert set(received) == {f"m{i}".encode() for i in range(40)}
    assert set(received.values()) == {1}
