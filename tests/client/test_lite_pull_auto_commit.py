"""The lite pull consumer's auto-commit as RocketMQ 4.9.8's DefaultLitePullConsumerImpl does it: ``poll`` records what
it returns as consumed, and a later ``poll`` commits it (``maybeAutoCommit`` runs ``commitAll`` at most every
``autoCommitIntervalMillis``, 5 s), so the batch the application is processing is never committed by the 5 s persist
nor the shutdown (``persistConsumerOffset`` writes the offsets in memory only): a crash while processing it, or an
error that ends the consumer, gets it delivered again instead of lost. Virtual time against the embedded name server
and broker, real sockets on 127.0.0.1."""

from __future__ import annotations

import pytest
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
    async with Producer("pg-auto-commit", cluster.namesrv_addr) as producer:
        for i in range(messages):
            await producer.send(Message(topic, f"m{i}".encode()))
    async with LitePullConsumer("probe-auto-commit", cluster.namesrv_addr) as probe:
        [mq] = await probe.fetch_message_queues(topic)
    return mq


async def _brokers_offset(consumer: LitePullConsumer, cluster: EmbeddedCluster, mq: MessageQueue) -> int | None:
    """The group's offset of ``mq`` the broker holds (what a member started after a crash goes on from)."""
    remoting = consumer.instance.remoting
    return await api.query_consumer_offset(remoting, cluster.broker_addr, consumer.group, mq, 3.0)


async def test_a_later_poll_commits_what_earlier_polls_returned_once_the_interval_passed(
    embedded_cluster: EmbeddedCluster, autojump_clock: trio.testing.MockClock
) -> None:
    """Java's poll runs ``maybeAutoCommit`` before taking the next batch: the offsets of the batches returned so far
    are committed when ``autoCommitIntervalMillis`` (5 s) passed since the last auto commit; the batch a poll returns
    is not committed by that poll (ours committed each batch as poll returned it)."""
    mq = await _topic(embedded_cluster, "AutoCommitLater", 8)
    async with LitePullConsumer(
        "lite-auto-later", embedded_cluster.namesrv_addr, consume_from_where=FIRST, pull_batch_size=4
    ) as c:
        await c.assign([mq])
        first = await c.poll(30)
        assert [m.queue_offset for m in first] == [0, 1, 2, 3]
        # Nothing committed: the broker answers 0 for a group without an offset whose queue starts at 0 in memory.
        assert await c.committed(mq) == 0, "the batch poll just returned is committed already"
        second = await c.poll(30)
        assert [m.queue_offset for m in second] == [4, 5, 6, 7]
        assert await c.committed(mq) == 0, "committed again before the auto-commit interval passed"
        await trio.sleep(6)
        assert await c.poll(0) == []
        assert await c.committed(mq) == 8


async def test_the_batch_being_processed_is_committed_neither_by_the_persist_nor_by_the_shutdown(
    embedded_cluster: EmbeddedCluster, autojump_clock: trio.testing.MockClock
) -> None:
    """While the application processes a batch, the 5 s persist writes only what earlier polls returned (Java's
    persistConsumerOffset persists the offsets in memory, which only ``commitAll`` moves), and so does the shutdown
    when processing failed: the failed batch is delivered again to the group's next member, not skipped."""
    mq = await _topic(embedded_cluster, "AutoCommitInFlight", 8)
    with pytest.raises(RuntimeError, match="processing failed"):
        async with LitePullConsumer(
            "lite-auto-in-flight", embedded_cluster.namesrv_addr, consume_from_where=FIRST, pull_batch_size=4
        ) as c:
            await c.assign([mq])
            assert [m.queue_offset for m in await c.poll(30)] == [0, 1, 2, 3]
            await trio.sleep(6)  # processed; the next poll commits it
            assert [m.queue_offset for m in await c.poll(30)] == [4, 5, 6, 7]
            await trio.sleep(12)  # processing the second batch: two 5 s persists run meanwhile
            assert await _brokers_offset(c, embedded_cluster, mq) == 4, "the batch being processed was persisted"
            raise RuntimeError("processing failed")
    async with LitePullConsumer("lite-auto-in-flight", embedded_cluster.namesrv_addr, pull_batch_size=4) as again:
        await again.assign([mq])
        redelivered = await again.poll(30)
    assert [m.queue_offset for m in redelivered] == [4, 5, 6, 7]
