"""What a lite pull consumer's ``seek`` commits: nothing, as RocketMQ 4.9.8's
``client/src/main/java/org/apache/rocketmq/client/impl/consumer/DefaultLitePullConsumerImpl.java`` ``seek`` only sets
the queue's seek offset; its pull task makes it the queue's consume offset (``nextPullOffset``) and the next
``commitAll`` (an auto-commit poll, ``commitSync``) commits it. Virtual time against the embedded name server and
broker, real sockets on 127.0.0.1."""

from __future__ import annotations

import trio
import trio.testing

from broker.embedded import EmbeddedCluster
from client import api
from client.admin import Admin
from client.consumer.lite_pull import LitePullConsumer
from client.message import Message
from client.producer import Producer
from remoting.codec.bodies import ConsumeFromWhere, MessageQueue

FIRST = ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET


async def _topic(cluster: EmbeddedCluster, topic: str, messages: int) -> MessageQueue:
    async with Admin(cluster.namesrv_addr) as admin:
        await admin.create_topic(topic, read_queue_nums=1, write_queue_nums=1)
    async with Producer("pg-seek-commit", cluster.namesrv_addr) as producer:
        for i in range(messages):
            await producer.send(Message(topic, f"m{i}".encode()))
    return MessageQueue(topic, "broker-a", 0)


async def test_a_seek_commits_nothing_until_a_later_poll_commits_it(
    embedded_cluster: EmbeddedCluster, autojump_clock: trio.testing.MockClock
) -> None:
    """An auto-commit consumer that seeks to the end and stops before polling again leaves the group's offset where
    its polls committed it: Java's shutdown persists the offsets in memory, which seek does not touch (ours committed
    the seek offset at once, so the messages skipped were never delivered to the group again)."""
    mq = await _topic(embedded_cluster, "SeekCommitsNothing", 8)
    async with LitePullConsumer(
        "lite-seek-commit", embedded_cluster.namesrv_addr, consume_from_where=FIRST, pull_batch_size=4
    ) as c:
        await c.assign([mq])
        assert [m.queue_offset for m in await c.poll(30)] == [0, 1, 2, 3]
        await trio.sleep(6)
        assert [m.queue_offset for m in await c.poll(30)] == [4, 5, 6, 7]  # this poll committed 4
        await c.seek(mq, 1)
        assert await c.committed(mq) == 4, "the seek offset was committed before any poll"
        await trio.sleep(6)  # a persist runs meanwhile
        remoting = c.instance.remoting
        assert await api.query_consumer_offset(remoting, embedded_cluster.broker_addr, c.group, mq, 3.0) == 4
    async with LitePullConsumer("lite-seek-commit", embedded_cluster.namesrv_addr, pull_batch_size=4) as again:
        await again.assign([mq])
        assert [m.queue_offset for m in await again.poll(30)] == [4, 5, 6, 7]


async def test_the_poll_after_a_seek_commits_the_seek_offset(
    embedded_cluster: EmbeddedCluster, autojump_clock: trio.testing.MockClock
) -> None:
    """Java's pull task makes the seek offset the queue's consume offset; the next auto-commit commits it."""
    mq = await _topic(embedded_cluster, "SeekThenPoll", 8)
    async with LitePullConsumer(
        "lite-seek-poll", embedded_cluster.namesrv_addr, consume_from_where=FIRST, pull_batch_size=4
    ) as c:
        await c.assign([mq])
        assert [m.queue_offset for m in await c.poll(30)] == [0, 1, 2, 3]
        await c.seek(mq, 6)
        await trio.sleep(6)
        assert [m.queue_offset for m in await c.poll(30)] == [6, 7]
        assert await c.committed(mq) == 6
