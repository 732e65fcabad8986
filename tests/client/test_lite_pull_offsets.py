"""The lite pull consumer's committed offsets as RocketMQ 4.9.8's DefaultLitePullConsumerImpl keeps them:
``committed`` reads ``MEMORY_FIRST_THEN_STORE``, ``persistConsumerOffset`` persists the in-memory offset of every
assigned queue, and a broker answer never undoes a commit made while it was awaited. Virtual time against the
embedded name server and broker, real sockets on 127.0.0.1. Found by a second review."""

from __future__ import annotations

import pytest
import trio
import trio.testing

from broker.embedded import EmbeddedCluster
from client import sync
from client.admin import Admin
from client.consumer.lite_pull import LitePullConsumer
from client.errors import ClientStateError
from client.message import Message
from client.producer import Producer
from remoting.codec.bodies import MessageQueue


async def _topic(cluster: EmbeddedCluster, topic: str, messages: int) -> MessageQueue:
    async with Admin(cluster.namesrv_addr) as admin:
        await admin.create_topic(topic, read_queue_nums=1, write_queue_nums=1)
    async with Producer("pg-recheck", cluster.namesrv_addr) as producer:
        for i in range(messages):
            await producer.send(Message(topic, f"m{i}".encode()))
    async with LitePullConsumer("probe-recheck", cluster.namesrv_addr) as probe:
        [mq] = await probe.fetch_message_queues(topic)
    return mq


def _in_flight(consumer: LitePullConsumer) -> bool:
    return any(conn._pending for conn in consumer.instance.remoting._connections.values())


async def test_committed_reads_the_pending_offset_first_as_java(
    embedded_cluster: EmbeddedCluster, autojump_clock: trio.testing.MockClock
) -> None:
    """Java's committed(mq) is ``offsetStore.readOffset(mq, MEMORY_FIRST_THEN_STORE)``: an offset committed with
    ``commitSync(map, false)`` is what it returns, not the broker's older one."""
    mq = await _topic(embedded_cluster, "RecheckCommitted", 8)
    async with LitePullConsumer("lite-recheck-committed", embedded_cluster.namesrv_addr, auto_commit=False) as c:
        c.pause([mq])
        await c.assign([mq])
        await c.commit({mq: 3})
        await c.commit({mq: 6}, persist=False)
        assert await c.committed(mq) == 6


async def test_committed_does_not_undo_a_commit_made_while_it_waited(
    embedded_cluster: EmbeddedCluster, autojump_clock: trio.testing.MockClock
) -> None:
    """A ``commit({mq: 7}, persist=False)`` made by another task while committed() awaits the broker (nothing in
    memory yet: the paused queue's pull task has not read its offset) stays: the broker's answer does not replace
    it (it used to, and the next persist wrote the broker's older offset)."""
    mq = await _topic(embedded_cluster, "RecheckRace", 8)
    async with LitePullConsumer("lite-recheck-race", embedded_cluster.namesrv_addr, auto_commit=False) as c:
        c.pause([mq])  # no pull requests in flight, no offset read into memory
        await c.assign([mq])
        while _in_flight(c):
            await trio.sleep(0.01)
        assert c.offset_store.read_memory(mq) is None
        async with trio.open_nursery() as nursery:
            nursery.start_soon(c.committed, mq)
            while not _in_flight(c):  # committed() is waiting for QUERY_CONSUMER_OFFSET's answer
                await trio.sleep(0)
            await c.commit({mq: 7}, persist=False)  # does not yield: done before committed() resumes
        assert c.offset_store.read_memory(mq) == 7


async def test_an_offset_map_committed_without_persist_reaches_the_broker_with_auto_commit(
    embedded_cluster: EmbeddedCluster, autojump_clock: trio.testing.MockClock
) -> None:
    """With auto-commit (the default), ``commit({mq: 2}, persist=False)`` on a queue not polled yet reaches the
    broker: Java's persistConsumerOffset persists the in-memory offset of every assigned queue (ours used to write
    polled offsets only)."""
    mq = await _topic(embedded_cluster, "RecheckAutoMap", 5)
    async with LitePullConsumer("lite-recheck-auto-map", embedded_cluster.namesrv_addr) as c:
        c.pause([mq])
        await c.assign([mq])
        await c.commit({mq: 2}, persist=False)
        await trio.sleep(12)  # two 5 s persists
    async with LitePullConsumer("lite-recheck-auto-map", embedded_cluster.namesrv_addr) as reader:
        assert await reader.committed(mq) == 2


def test_the_blocking_facade_registers_a_queue_listener_before_start() -> None:
    """Java (and the async consumer) accept registerTopicMessageQueueChangeListener before start, and so does the
    blocking facade (its call used to go through the portal, which exists only once started)."""
    consumer = sync.LitePullConsumer("lite-recheck-facade", "127.0.0.1:1")
    try:
        consumer.register_topic_message_queue_change_listener("T", lambda topic, queues: None)
    except ClientStateError as exc:
        pytest.fail(f"registering before start raised {exc!r}")
    assert "T" in consumer.consumer._queue_listeners


async def test_a_queue_assigned_then_committed_before_its_first_pull_starts_at_that_commit(
    embedded_cluster: EmbeddedCluster, autojump_clock: trio.testing.MockClock
) -> None:
    """Java's pull task computes a queue's first offset with RebalanceLitePullImpl.computePullFromWhereWithException,
    which reads ``offsetStore.readOffset(mq, MEMORY_FIRST_THEN_STORE)``: an offset committed with
    ``commitSync({mq: 6}, false)`` before that first pull (the queue paused) is where consumption starts (the pull
    task read the broker's offset, and delivered 0..5 although 6 was committed)."""
    mq = await _topic(embedded_cluster, "RecheckStartAtCommit", 8)
    async with LitePullConsumer("lite-recheck-start", embedded_cluster.namesrv_addr, auto_commit=False) as c:
        c.pause([mq])
        await c.assign([mq])
        await c.commit({mq: 6}, persist=False)
        assert await c.committed(mq) == 6
        c.resume([mq])
        got = await c.poll(30)
    assert got, "nothing polled"
    assert got[0].queue_offset == 6, [m.queue_offset for m in got]
