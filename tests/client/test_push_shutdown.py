"""A push consumer's shutdown in virtual time against the embedded cluster (DefaultMQPushConsumerImpl.shutdown): the
consume service gets ``await_termination`` to finish its listener calls (Java's ``consumeExecutor.shutdown()`` and
``awaitTermination``), then the offsets are persisted and the client unregisters, whether or not a call still runs."""

from __future__ import annotations

import threading

import trio
import trio.testing

from broker.embedded import EmbeddedCluster
from client.admin import Admin
from client.consumer.listener import ConsumeConcurrentlyStatus
from client.consumer.push import PushConsumer
from client.message import Message, MessageExt
from client.producer import Producer
from remoting.codec.bodies import ConsumeFromWhere, MessageQueue


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

    first = ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET
    consumer = PushConsumer(
        "cg-blocking-stop", embedded_cluster.namesrv_addr, consume_from_where=first, await_termination=1
    )
    consumer.subscribe("BlockingStop")
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
