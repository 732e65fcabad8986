"""A push consumer's shutdown in virtual time against the embedded cluster (DefaultMQPushConsumerImpl.shutdown): the
consume service gets ``await_termination`` to finish its listener calls (Java's ``consumeExecutor.shutdown()`` and
``awaitTermination``), then the offsets are persisted and the client unregisters, whether or not a call still runs. An
orderly queue whose call a stop abandoned stays that call's (one call at a time on a queue) until its thread
returns."""

from __future__ import annotations

import asyncio
import threading

import trio
import trio.testing

from broker.embedded import EmbeddedCluster
from client.admin import Admin
from client.consumer.listener import ConsumeConcurrentlyStatus, ConsumeOrderlyStatus, ListenerThread
from client.consumer.push import PushConsumer
from client.message import Message, MessageExt
from client.producer import Producer
from remoting.codec.bodies import ConsumeFromWhere, MessageQueue
from tests.client.helpers import HANG_GUARD, create_topic, lock_for_another_member, send_bodies, wait_until


def _stopping_after_1_s(cluster: EmbeddedCluster, group: str, topic: str) -> PushConsumer:
    """A consumer of ``topic`` from its first offset whose stop waits 1 s (``await_termination``) for listener
    calls; register its listener."""
    first = ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET
    consumer = PushConsumer(group, cluster.namesrv_addr, consume_from_where=first, await_termination=1)
    consumer.subscribe(topic)
    return consumer


async def test_shutdown_does_not_wait_past_await_termination_for_a_blocking_plain_listener(
    embedded_cluster: EmbeddedCluster, autojump_clock: trio.testing.MockClock
) -> None:
    """A plain (blocking) listener runs in a worker thread; one that blocks must not hold the shutdown past
    ``await_termination`` (1 s): the shutdown used to wait for the thread (10 min here). The abandoned call's message
    is not committed, not even once its thread returns: the committed offset stays before it."""
    async with Admin(embedded_cluster.namesrv_addr) as admin:
        await admin.create_topic("BlockingStop", read_queue_nums=1, write_queue_nums=1)
    async with Producer("pg-blocking-stop", embedded_cluster.namesrv_addr) as producer:
        await producer.send(Message("BlockingStop", b"stuck"))
    entered, release, returned = threading.Event(), threading.Event(), threading.Event()

    def listener(msgs: list[MessageExt]) -> ConsumeConcurrentlyStatus:
        entered.set()
        release.wait()
        returned.set()
        return ConsumeConcurrentlyStatus.CONSUME_SUCCESS

    consumer = _stopping_after_1_s(embedded_cluster, "cg-blocking-stop", "BlockingStop")
    consumer.register_message_listener(listener)

    async def release_later() -> None:
        await trio.sleep(600)
        release.set()

    async with trio.open_nursery() as nursery:
        async with consumer:
            with trio.fail_after(60):
                while not entered.is_set():
                    await trio.sleep(0.1)
            nursery.start_soon(release_later)
            stop_began = trio.current_time()
        stop_took = trio.current_time() - stop_began
        release.set()
        nursery.cancel_scope.cancel()
    await trio.to_thread.run_sync(returned.wait)
    await trio.sleep(1)
    async with Admin(embedded_cluster.namesrv_addr) as admin:
        progress = await admin.consumer_progress("cg-blocking-stop", "BlockingStop")
    assert stop_took < 30, f"the shutdown waited {stop_took:.0f} s for a listener call past await_termination (1 s)"
    assert progress[MessageQueue("BlockingStop", "broker-a", 0)].consumer_offset == 0


async def test_a_restarted_orderly_consumer_waits_for_the_listener_thread_its_stop_abandoned(
    embedded_cluster: EmbeddedCluster, autojump_clock: trio.testing.MockClock
) -> None:
    """A stop past ``await_termination`` abandons a blocked plain orderly listener's thread. The cancelled task used
    to release the queue's consume lock and the stop to unlock the queue at the broker while that thread still ran:
    restarted at once, the consumer took the queue again and called the listener on the abandoned call's message
    (uncommitted) beside it, two calls on one queue. Now the queue's turn and its broker lock stay with the thread
    until it returns; then the message comes again."""
    await create_topic(embedded_cluster.namesrv_addr, "AbandonRestart", queues=1)
    await send_bodies(embedded_cluster.namesrv_addr, "AbandonRestart", [b"slow"])
    mq = MessageQueue("AbandonRestart", "broker-a", 0)
    guard, release, second = threading.Lock(), threading.Event(), threading.Event()
    running: list[int] = []
    at_once: list[int] = []  # per call, how many calls ran on the queue when it began

    def listener(msgs: list[MessageExt]) -> ConsumeOrderlyStatus:
        with guard:
            running.append(msgs[0].queue_id)
            at_once.append(len(running))
            first = len(at_once) == 1
        try:
            if first:
                release.wait(600)
        finally:
            with guard:
                running.pop()
        if not first:
            second.set()
        return ConsumeOrderlyStatus.SUCCESS

    consumer = _stopping_after_1_s(embedded_cluster, "cg-abandon-restart", "AbandonRestart")
    consumer.register_message_listener_orderly(listener)
    try:
        async with consumer:
            await wait_until(lambda: len(at_once) == 1)
        assert not await lock_for_another_member(embedded_cluster.broker_addr, "cg-abandon-restart", mq), (
            "the stop gave up the broker lock of a queue its abandoned listener thread still consumes"
        )
        async with consumer:  # started again at once: the abandoned call still runs
            await trio.sleep(30)
            assert at_once == [1], "the restarted consumer called the listener on the queue beside the abandoned call"
            release.set()
            await trio.to_thread.run_sync(second.wait)
    finally:
        release.set()
    assert at_once == [1, 1]


def test_an_abandoned_listener_thread_returns_though_a_waiting_loop_stopped_without_closing() -> None:
    """An abandoned listener's thread wakes the tasks waiting for it (a restarted orderly consumer) when it returns. It
    used to wait for each waiter's event loop to run the wake-up: one stopped but not closed (an asyncio loop between
    two ``run_until_complete``) held the thread for ever. The wake-up is now only scheduled, and runs when that loop
    runs again."""
    entered, go = threading.Event(), threading.Event()

    def listener(msgs: list[MessageExt]) -> None:
        entered.set()
        go.wait(HANG_GUARD)

    call = ListenerThread(listener, [])
    worker = threading.Thread(target=call.run, name="abandoned-listener")
    loop = asyncio.new_event_loop()

    async def leave_a_waiter() -> asyncio.Future[None]:
        waiter = asyncio.ensure_future(call.wait())
        await asyncio.sleep(0)  # it waits now; the loop stops with it pending
        return waiter

    worker.start()
    try:
        assert entered.wait(HANG_GUARD)
        waiter = loop.run_until_complete(leave_a_waiter())
        go.set()
        worker.join(HANG_GUARD)
        held = worker.is_alive()
        loop.run_until_complete(waiter)  # the loop runs again: the waiter wakes up
    finally:
        go.set()
        loop.close()
        worker.join(HANG_GUARD)
    assert not held, "the listener's thread waited for the stopped loop of a task waiting for it"


async def test_a_stop_does_not_wait_out_an_orderly_queues_suspension(
    embedded_cluster: EmbeddedCluster, autojump_clock: trio.testing.MockClock
) -> None:
    """A suspended orderly queue waits ``suspend_current_queue_time`` (up to 30 s) before its batch is consumed again;
    Java's ``ConsumeMessageOrderlyService.shutdown`` shuts the scheduler that would resubmit it and waits only for
    running consume requests. Ours waited the suspension out (up to ``await_termination``) before the stop went on."""
    async with Admin(embedded_cluster.namesrv_addr) as admin:
        await admin.create_topic("SuspendStop", read_queue_nums=1, write_queue_nums=1)
    async with Producer("pg-suspend-stop", embedded_cluster.namesrv_addr) as producer:
        await producer.send(Message("SuspendStop", b"later"))
    suspended = trio.Event()

    async def listener(msgs: list[MessageExt]) -> ConsumeOrderlyStatus:
        suspended.set()
        return ConsumeOrderlyStatus.SUSPEND_CURRENT_QUEUE_A_MOMENT

    first = ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET
    consumer = PushConsumer(
        "cg-suspend-stop",
        embedded_cluster.namesrv_addr,
        consume_from_where=first,
        suspend_current_queue_time=30,
        await_termination=60,
    )
    consumer.subscribe("SuspendStop")
    consumer.register_message_listener_orderly(listener)
    async with consumer:
        await suspended.wait()
        await trio.sleep(0.1)  # the queue waits out its suspension
        stopping = trio.current_time()
    took = trio.current_time() - stopping
    assert took < 5, f"the stop took {took:.0f} s: it waited for the suspended queue"
