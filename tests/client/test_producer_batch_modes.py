"""Batch sends in Java's other modes (client/src/main/java/org/apache/rocketmq/client/producer/DefaultMQProducer.java,
4.9.8): ``send(Collection, MessageQueue)`` to one chosen queue, and ``send(Collection, SendCallback)`` /
``send(Collection, MessageQueue, SendCallback)`` in the background, each one request stored as a whole."""

from __future__ import annotations

import anyio
import pytest

from client.errors import MessageValidationError, MQClientError
from client.message import Message, SendResult, SendStatus
from client.producer import Producer
from remoting.codec.bodies import MessageQueue
from tests.client.helpers import create_topic
from tests.threaded_cluster import ThreadedCluster

pytestmark = pytest.mark.anyio


def _batch(topic: str, n: int = 3) -> list[Message]:
    return [Message(topic, f"b{i}".encode(), keys=f"k{i}") for i in range(n)]


async def test_a_batch_sent_to_a_chosen_queue_is_stored_there_as_one_request(cluster: ThreadedCluster) -> None:
    await create_topic(cluster.namesrv_addr, "BatchToQueue", queues=4)
    async with Producer("pg", cluster.namesrv_addr) as producer:
        info = await producer.publish_info("BatchToQueue")
        mq = next(q for q in info.message_queues if q.queue_id == 2)
        first = await producer.send_batch(_batch("BatchToQueue"), queue=mq)
        second = await producer.send_batch(_batch("BatchToQueue"), queue=mq)
    assert [(r.queue_id, r.queue_offset, len(r.msg_id.split(","))) for r in first + second] == [(2, 0, 3), (2, 3, 3)]


async def test_a_batch_to_a_queue_of_another_topic_is_refused_before_anything_is_sent(
    cluster: ThreadedCluster,
) -> None:
    await create_topic(cluster.namesrv_addr, "BatchMine", queues=1)
    async with Producer("pg", cluster.namesrv_addr) as producer:
        other = MessageQueue("SomeOtherTopic", "broker-a", 0)
        with pytest.raises(MQClientError, match="message's topic not equal mq's topic"):
            await producer.send_batch(_batch("BatchMine"), queue=other)
        result = await producer.send_batch(_batch("BatchMine", 1))
    assert result[0].queue_offset == 0  # nothing of the refused batch was stored


async def test_an_async_batch_calls_back_once_with_its_one_result(cluster: ThreadedCluster) -> None:
    await create_topic(cluster.namesrv_addr, "BatchAsync", queues=4)
    outcomes: list[SendResult | Exception] = []
    done = anyio.Event()

    def callback(outcome: SendResult | Exception) -> None:
        outcomes.append(outcome)
        if len(outcomes) == 2:
            done.set()

    async with Producer("pg", cluster.namesrv_addr) as producer:
        info = await producer.publish_info("BatchAsync")
        mq = next(q for q in info.message_queues if q.queue_id == 1)
        producer.send_batch_async(_batch("BatchAsync"), callback)
        producer.send_batch_async(_batch("BatchAsync", 2), callback, queue=mq)
        with anyio.fail_after(10):
            await done.wait()
    assert all(isinstance(o, SendResult) and o.send_status is SendStatus.SEND_OK for o in outcomes)
    results = sorted((o for o in outcomes if isinstance(o, SendResult)), key=lambda r: len(r.msg_id))
    assert [len(r.msg_id.split(",")) for r in results] == [2, 3]
    assert results[0].queue_id == 1


async def test_an_async_batch_that_breaks_a_rule_raises_at_the_call(cluster: ThreadedCluster) -> None:
    await create_topic(cluster.namesrv_addr, "BatchAsyncBad", queues=1)
    called: list[object] = []
    async with Producer("pg", cluster.namesrv_addr) as producer:
        delayed = [Message("BatchAsyncBad", b"x", delay_level=3)]
        with pytest.raises(MessageValidationError):
            producer.send_batch_async(delayed, called.append)
    assert called == []
