"""RESET_CONSUMER_CLIENT_OFFSET on a lite pull consumer (ours: 4.9.8's ``MQClientInstance.resetOffset``,
client/src/main/java/org/apache/rocketmq/client/impl/factory/MQClientInstance.java, resets push consumers only):
each owned queue restarts at its new offset, committed at once, unlike a seek, so the next persist does not undo
it; and, as Java's loop over the queues updates each one's offset whatever the others', a queue whose reset fails
leaves the others reset. Virtual time against the embedded name server and broker, real sockets on 127.0.0.1."""

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


async def _topic(cluster: EmbeddedCluster, topic: str, queues: int, per_queue: int) -> list[MessageQueue]:
    mqs = [MessageQueue(topic, "broker-a", i) for i in range(queues)]
    async with Admin(cluster.namesrv_addr) as admin:
        await admin.create_topic(topic, read_queue_nums=queues, write_queue_nums=queues)
    async with Producer("pg-lite-reset", cluster.namesrv_addr) as producer:
        for mq in mqs:
            for i in range(per_queue):
                await producer.send(Message(topic, f"m{i}".encode()), queue=mq)
    return mqs


async def test_a_reset_commits_the_new_offset_at_once(
    embedded_cluster: EmbeddedCluster, autojump_clock: trio.testing.MockClock
) -> None:
    """Regression guard for the reset path once a seek stopped committing: the reset commits the new offset itself,
    the broker has it after the next persist, and the next poll starts there."""
    [mq] = await _topic(embedded_cluster, "LiteResetCommits", 1, 8)
    async with LitePullConsumer(
        "lite-reset-commit", embedded_cluster.namesrv_addr, consume_from_where=FIRST, pull_batch_size=8
    ) as c:
        await c.assign([mq])
        assert [m.queue_offset for m in await c.poll(30)] == list(range(8))
        await trio.sleep(6)
        await c.poll(1)  # the auto-commit commits 8
        assert await c.committed(mq) == 8
        await c.reset_offset(mq.topic, {mq: 2})
        assert await c.committed(mq) == 2
        await trio.sleep(6)  # a persist runs meanwhile
        remoting = c.instance.remoting
        assert await api.query_consumer_offset(remoting, embedded_cluster.broker_addr, c.group, mq, 3.0) == 2
        assert [m.queue_offset for m in await c.poll(30)][:1] == [2]


async def test_a_queue_whose_reset_fails_leaves_the_others_reset(
    embedded_cluster: EmbeddedCluster, autojump_clock: trio.testing.MockClock
) -> None:
    """An offset beyond the queue's max makes that queue's seek raise; the reset goes on with the next queue (ours
    stopped at the first failure and the broker's request failed with the remaining queues not reset)."""
    bad, good = await _topic(embedded_cluster, "LiteResetEach", 2, 4)
    async with LitePullConsumer(
        "lite-reset-each", embedded_cluster.namesrv_addr, consume_from_where=FIRST, pull_batch_size=8
    ) as c:
        await c.assign([bad, good])
        polled: list[int] = []
        while len(polled) < 8:
            polled += [m.queue_offset for m in await c.poll(30)]
        await c.reset_offset(bad.topic, {bad: 100, good: 1})
        assert await c.committed(good) == 1
        assert [(m.queue_id, m.queue_offset) for m in await c.poll(30)] == [(1, 1), (1, 2), (1, 3)]
