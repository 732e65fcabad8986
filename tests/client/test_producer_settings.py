"""A producer's settings changed after it was made, as a Java application calls ``setMaxMessageSize``,
``setCompressMsgBodyOverHowmuch``, ``setDefaultTopicQueueNums`` or ``setCreateTopicKey`` on its DefaultMQProducer
before (or after) ``start``: DefaultMQProducerImpl reads them from the producer at every send (Validators.checkMessage,
tryToCompressMessage, sendKernelImpl's request header; client/src/main/java/org/apache/rocketmq/client/impl/producer/
DefaultMQProducerImpl.java, 4.9.8). Threaded cluster, real sockets."""

from __future__ import annotations

import anyio
import pytest

from client.admin import Admin
from client.errors import MessageValidationError, TopicRouteNotFoundError
from client.message import Message
from client.producer import Producer
from remoting.codec.codes import ResponseCode
from remoting.codec.message import SYSFLAG_COMPRESSED
from tests.client.helpers import create_topic
from tests.client.test_producer import _raw
from tests.threaded_cluster import ThreadedCluster

pytestmark = pytest.mark.anyio


async def test_max_message_size_and_the_compression_threshold_set_later_rule_the_next_send(
    cluster: ThreadedCluster,
) -> None:
    """Before, both were read once, when the producer was made: set afterwards, they changed nothing."""
    await create_topic(cluster.namesrv_addr, "LaterSettings", queues=1)
    producer = Producer("pg-later-settings", cluster.namesrv_addr)
    producer.compress_msg_body_over_howmuch = 64
    async with producer:
        await producer.send(Message("LaterSettings", b"z" * 100))
        producer.max_message_size = 1024
        with pytest.raises(MessageValidationError) as refused:
            await producer.send(Message("LaterSettings", b"x" * 2000))
    assert (refused.value.response_code, str(refused.value)) == (
        ResponseCode.MESSAGE_ILLEGAL,
        "the message body size over max value, MAX: 1024",
    )
    [stored] = await _raw(cluster.broker_addr, "LaterSettings")
    assert stored.sys_flag & SYSFLAG_COMPRESSED


async def test_default_topic_queue_nums_set_later_is_what_the_broker_creates_a_new_topic_with(
    cluster: ThreadedCluster,
) -> None:
    """The request header's ``defaultTopicQueueNums`` is the count the broker creates an unknown topic with
    (AbstractSendMessageProcessor.msgCheck). Before, the header kept the count given to the constructor (4) while the
    producer's route for the new topic had the one set later (2)."""
    producer = Producer("pg-later-queue-nums", cluster.namesrv_addr)
    producer.default_topic_queue_nums = 2
    async with producer:
        for i in range(4):
            await producer.send(Message("LaterQueueNums", f"m{i}".encode()))
    async with Admin(cluster.namesrv_addr) as admin:
        with anyio.fail_after(30):
            while True:
                try:
                    route = await admin.topic_route("LaterQueueNums")
                    break
                except TopicRouteNotFoundError:
                    await anyio.sleep(0.05)
    assert [q.write_queue_nums for q in route.queue_datas] == [2]
