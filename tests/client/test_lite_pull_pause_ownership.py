"""A lite pull queue's pause belongs to its assignment, as Java's ``AssignedMessageQueue`` keeps ``paused`` in the
queue's ``MessageQueueState`` and a queue assigned again gets a new one
(client/src/main/java/org/apache/rocketmq/client/impl/consumer/AssignedMessageQueue.java, 4.9.8)."""

from __future__ import annotations

import pytest

from client.consumer.lite_pull import LitePullConsumer
from client.message import Message
from client.producer import Producer
from remoting.codec.bodies import ConsumeFromWhere
from tests.client.helpers import create_topic, poll_until
from tests.threaded_cluster import ThreadedCluster

pytestmark = pytest.mark.anyio


async def test_a_paused_queue_given_up_and_assigned_again_is_pulled(cluster: ThreadedCluster) -> None:
    """The application pauses its queues, gives one up, resumes what it has, then takes the queue back: Java pulls it
    (its new state is not paused); ours kept it paused for ever, never pulled and never told."""
    await create_topic(cluster.namesrv_addr, "LitePauseBack", queues=2)
    async with LitePullConsumer(
        "lite-pause-back", cluster.namesrv_addr, consume_from_where=ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET
    ) as consumer:
        q0, q1 = sorted(await consumer.fetch_message_queues("LitePauseBack"), key=lambda mq: mq.queue_id)
        await consumer.assign([q0, q1])
        consumer.pause(consumer.assignment())
        await consumer.assign([q1])
        consumer.resume(consumer.assignment())
        async with Producer("pg-pause-back", cluster.namesrv_addr) as producer:
            for mq in (q0, q0, q1):
                await producer.send(Message("LitePauseBack", b"x"), queue=mq)
        await consumer.assign([q0, q1])
        got = await poll_until(consumer, 3, rounds=40)
    assert sorted(m.queue_id for m in got) == [0, 0, 1]
