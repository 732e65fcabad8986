"""Lite pull consumer around changes of a queue's ownership, as Java's DefaultLitePullConsumerImpl: a batch buffered
before its queue was taken away is not delivered once the queue comes back, a seek overlapping a rebalance does not
take the queue back, two overlapping seeks leave one pull task, a queue taken away right after a seek keeps no pull
task, and a poll stays a cancellation point."""

from __future__ import annotations

import asyncio
from collections import Counter
from collections.abc import Iterator
from typing import Any

import anyio
import pytest
import sniffio
import trio

from client.consumer.lite_pull import LitePullConsumer
from client.message import Message, MessageExt
from client.producer import Producer
from remoting.codec.bodies import ConsumeFromWhere, MessageQueue
from tests.client.helpers import HANG_GUARD, create_topic, fill_queues, wait_until
from tests.threaded_cluster import ThreadedCluster

pytestmark = pytest.mark.anyio

FIRST = ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET


async def _poll_rounds(consumer: LitePullConsumer, rounds: int, timeout: float = 0.3) -> list[MessageExt]:
    got: list[MessageExt] = []
    for _ in range(rounds):
        got.extend(await consumer.poll(timeout=timeout))
    return got


async def test_a_batch_buffered_before_a_queue_was_taken_away_is_not_delivered_after_it_comes_back(
    cluster: ThreadedCluster,
) -> None:
    """Java's poll skips a ConsumeRequest whose ProcessQueue is dropped: a batch pulled under the queue's earlier
    ownership must not be handed out beside the new pull from the committed offset."""
    await create_topic(cluster.namesrv_addr, "LiteBackAgain", queues=2)
    mq0, mq1 = await fill_queues(cluster.namesrv_addr, "LiteBackAgain", per_queue=5)
    async with LitePullConsumer("lite-back", cluster.namesrv_addr, consume_from_where=FIRST) as consumer:
        await consumer.assign([mq0, mq1])
        await wait_until(lambda: all(s.pq.msg_count == 5 for s in consumer._queues.values()))  # buffered, not polled
        await consumer.assign([mq1])  # mq0 taken away (a rebalance does the same)
        await consumer.assign([mq0, mq1])  # and given back: pulled again from its committed offset (none: 0)
        got = await _poll_rounds(consumer, 12)
    twice = sorted(k for k, n in Counter((m.queue_id, m.queue_offset) for m in got).items() if n > 1)
    assert twice == [], f"(queue id, offset) delivered twice: {twice}"
    assert len(got) == 10


@pytest.mark.parametrize("anyio_backend", ["trio"])  # trio's wait_all_tasks_blocked stops inside the seek
async def test_a_seek_that_overlaps_a_rebalance_does_not_take_the_queue_back(cluster: ThreadedCluster) -> None:
    """A rebalance that drops the queue while ``seek`` waits for its min/max offsets wins: the seek does nothing
    (Java's pull task for a queue that is no longer assigned finds no process queue and ends)."""
    await create_topic(cluster.namesrv_addr, "LiteSeekRace", queues=2)
    mq0, mq1 = await fill_queues(cluster.namesrv_addr, "LiteSeekRace", per_queue=3)
    async with LitePullConsumer("lite-seek-race", cluster.namesrv_addr, consume_from_where=FIRST) as consumer:
        await consumer.assign([mq0, mq1])
        async with anyio.create_task_group() as tg:
            tg.start_soon(consumer.seek, mq0, 0)
            await anyio.wait_all_tasks_blocked()  # the seek waits for GET_MIN_OFFSET's answer
            await consumer.assign([mq1])  # mq0 goes, as in a rebalance
        assert consumer.assignment() == {mq1}
        got = await _poll_rounds(consumer, 8)
    assert {m.queue_id for m in got} == {mq1.queue_id}


async def test_two_overlapping_seeks_leave_one_pull_task(cluster: ThreadedCluster) -> None:
    """Two seeks of one queue that overlap (the application's and a broker's reset, which seeks) end as Java's
    synchronized seeks: one after the other, one pull task, nothing delivered twice, also for what is sent later."""
    await create_topic(cluster.namesrv_addr, "LiteTwoSeeks", queues=1)
    [mq] = await fill_queues(cluster.namesrv_addr, "LiteTwoSeeks", per_queue=6)
    async with LitePullConsumer("lite-two-seeks", cluster.namesrv_addr, consume_from_where=FIRST) as consumer:
        await consumer.assign([mq])
        with anyio.fail_after(HANG_GUARD):
            while len(await _poll_rounds(consumer, 1)) == 0:
                pass
        async with anyio.create_task_group() as tg:
            tg.start_soon(consumer.seek, mq, 0)
            tg.start_soon(consumer.seek, mq, 3)
        got = await _poll_rounds(consumer, 10)
        async with Producer("pg", cluster.namesrv_addr) as producer:
            for i in range(3):
                await producer.send(Message("LiteTwoSeeks", f"later-{i}".encode()), queue=mq)
        got += await _poll_rounds(consumer, 10)
    twice = sorted(k for k, n in Counter(m.queue_offset for m in got).items() if n > 1)
    assert twice == [], f"offsets delivered twice after two seeks: {twice}"


def _coroutines() -> Iterator[Any]:
    """The coroutine of every live task of the running event loop (Trio or asyncio)."""
    if sniffio.current_async_library() == "trio":
        todo = [trio.lowlevel.current_root_task()]
        while todo:
            task = todo.pop()
            yield task.coro
            for nursery in task.child_nurseries:
                todo.extend(nursery.child_tasks)
    else:
        for task in asyncio.all_tasks():
            yield task.get_coro()


def _pull_loops_of(mq: MessageQueue) -> int:
    """How many lite pull tasks are running for ``mq``."""
    count = 0
    for coro in _coroutines():
        while coro is not None:  # down the await chain (anyio wraps each task's coroutine)
            frame = getattr(coro, "cr_frame", None)
            if frame is None:
                break
            if coro.cr_code.co_name == "_pull_loop" and frame.f_locals.get("mq") == mq:
                count += 1
                break
            coro = coro.cr_await
    return count


async def test_a_seeked_queue_taken_away_at_once_leaves_no_pull_task(cluster: ThreadedCluster) -> None:
    """``seek`` starts the queue's new pull task and returns; an ``assign`` (or a rebalance) that drops the queue
    before that task first ran stops it (else it would pull the unassigned queue for good, its batches discarded by
    poll, its process queue filling up to the flow-control threshold)."""
    await create_topic(cluster.namesrv_addr, "LiteSeekDrop", queues=2)
    mq0, mq1 = await fill_queues(cluster.namesrv_addr, "LiteSeekDrop", per_queue=3)
    async with LitePullConsumer("lite-seek-drop", cluster.namesrv_addr, consume_from_where=FIRST) as consumer:
        await consumer.assign([mq0, mq1])
        await wait_until(lambda: all(s.pq.msg_count == 3 for s in consumer._queues.values()))
        await consumer.seek(mq0, 0)
        seeked = consumer._queues[mq0]
        await consumer.assign([mq1])  # mq0 taken away right after the seek, as a user's code may do
        assert consumer.assignment() == {mq1}
        # Either the seek's pull task ends (correct) or it pulls mq0's 3 messages into its orphaned state.
        with anyio.fail_after(HANG_GUARD):
            while _pull_loops_of(mq0) and seeked.pq.msg_count == 0:
                await anyio.sleep(0.02)
        assert _pull_loops_of(mq0) == 0, (
            f"a pull task still runs for unassigned {mq0} (it pulled {seeked.pq.msg_count} messages after the queue "
            "was taken away)"
        )


async def test_poll_is_a_cancellation_point_while_batches_are_buffered(cluster: ThreadedCluster) -> None:
    """``poll`` takes a buffered batch without waiting, yet stays a cancellation point: a poll loop that the pull
    tasks keep fed (a backlog, a steady stream) still ends with its cancel scope."""
    await create_topic(cluster.namesrv_addr, "LitePollCancel", queues=1)
    [mq] = await fill_queues(cluster.namesrv_addr, "LitePollCancel", per_queue=30)
    async with LitePullConsumer("lite-poll-cancel", cluster.namesrv_addr, consume_from_where=FIRST) as consumer:
        await consumer.assign([mq])
        await wait_until(lambda: consumer._queues[mq].pq.msg_count == 30)  # three batches buffered
        handed_out = 0
        with anyio.CancelScope() as scope:
            scope.cancel()
            for _ in range(3):
                handed_out += len(await consumer.poll(timeout=5.0))
        assert handed_out == 0, f"poll handed out {handed_out} messages inside a cancelled scope"
