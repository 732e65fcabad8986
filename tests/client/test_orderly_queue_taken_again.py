"""An orderly queue dropped and taken again (a reset offset, a rebalance away and back) while a listener call of its
old process queue runs gets its own consume task once that call ends: keyed by queue, the new process queue's messages
used to wait for a message that might never come."""

from __future__ import annotations

import anyio
import pytest

from client.consumer.listener import ConsumeOrderlyStatus
from client.consumer.push import PushConsumer
from client.message import Message, MessageExt
from client.producer import Producer
from remoting.codec.bodies import ConsumeFromWhere
from tests.client.helpers import create_topic, wait_until
from tests.threaded_cluster import ThreadedCluster

pytestmark = pytest.mark.anyio


async def test_orderly_queue_taken_again_during_a_listener_call_is_consumed(cluster: ThreadedCluster) -> None:
    await create_topic(cluster.namesrv_addr, "OrdAgain", queues=1)
    release = anyio.Event()
    seen: list[bytes] = []

    async def listener(msgs: list[MessageExt]) -> ConsumeOrderlyStatus:
        if not release.is_set():
            await release.wait()
        seen.extend(m.body for m in msgs)
        return ConsumeOrderlyStatus.SUCCESS

    consumer = PushConsumer(
        "cg-ordagain", cluster.namesrv_addr, consume_from_where=ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET
    )
    consumer.subscribe("OrdAgain")
    consumer.register_message_listener_orderly(listener)
    async with Producer("pg", cluster.namesrv_addr) as producer, consumer:
        for i in range(3):
            await producer.send(Message("OrdAgain", f"m{i}".encode()))
        await wait_until(
            lambda: any(
                mq.topic == "OrdAgain" and pq.msg_count == 3 for mq, pq in consumer.rebalance.process_queues.items()
            )
        )
        (mq,) = [mq for mq in consumer.rebalance.process_queues if mq.topic == "OrdAgain"]
        old_pq = consumer.rebalance.process_queues[mq]
        await consumer.reset_offset("OrdAgain", {mq: 0})  # as a RESET_CONSUMER_CLIENT_OFFSET from the broker
        # the queue is taken again and its 3 messages pulled into the new process queue
        await wait_until(
            lambda: (
                (pq := consumer.rebalance.process_queues.get(mq)) is not None and pq is not old_pq and pq.msg_count == 3
            )
        )
        release.set()  # the old listener call returns
        with anyio.move_on_after(10):
            await wait_until(lambda: len(seen) >= 4)
        assert len(seen) >= 4, (
            f"only {seen} consumed; new process queue holds "
            f"{consumer.rebalance.process_queues[mq].msg_count} message(s) with no consume task"
        )
