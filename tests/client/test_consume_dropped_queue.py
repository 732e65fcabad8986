"""A consume task of a queue rebalanced away does not call the listener (Java's ConsumeRequest.run): those waiting on
the capacity limiter when the queue went used to, so the buffered backlog of that queue (up to pullThresholdForQueue)
was consumed twice, by the old owner and by the new one starting from the committed offset."""

from __future__ import annotations

import anyio
import pytest

from client.consumer.listener import ConsumeConcurrentlyStatus
from client.consumer.process_queue import ProcessQueue
from client.consumer.push import PushConsumer
from client.message import Message, MessageExt
from client.producer import Producer
from remoting.codec.bodies import ConsumeFromWhere, MessageQueue
from tests.client.helpers import create_topic, wait_until
from tests.threaded_cluster import ThreadedCluster

pytestmark = pytest.mark.anyio

PER_QUEUE = 10


async def test_tasks_of_a_dropped_queue_do_not_call_the_listener(cluster: ThreadedCluster) -> None:
    await create_topic(cluster.namesrv_addr, "DropPending", queues=2)
    release = anyio.Event()
    got_a: list[MessageExt] = []
    got_b: list[MessageExt] = []

    async def slow(msgs: list[MessageExt]) -> ConsumeConcurrentlyStatus:
        await release.wait()
        got_a.extend(msgs)
        return ConsumeConcurrentlyStatus.CONSUME_SUCCESS

    async def record(msgs: list[MessageExt]) -> ConsumeConcurrentlyStatus:
        got_b.extend(msgs)
        return ConsumeConcurrentlyStatus.CONSUME_SUCCESS

    def consumer(listener, **kw) -> PushConsumer:  # type: ignore[no-untyped-def]
        c = PushConsumer(
            "cg-droppend", cluster.namesrv_addr, consume_from_where=ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET, **kw
        )
        c.subscribe("DropPending")
        c.register_message_listener(listener)
        return c

    async with Producer("pg", cluster.namesrv_addr) as producer:
        info = await producer.publish_info("DropPending")
        for mq in info.message_queues:
            for i in range(PER_QUEUE):
                await producer.send(Message("DropPending", f"q{mq.queue_id}-{i}".encode()), queue=mq)
    async with consumer(slow, consume_thread_min=1, consume_thread_max=1) as a:

        def owned() -> dict[MessageQueue, ProcessQueue]:
            return {mq: pq for mq, pq in a.rebalance.process_queues.items() if mq.topic == "DropPending"}

        await wait_until(lambda: len(owned()) == 2 and all(pq.msg_count == PER_QUEUE for pq in owned().values()))
        async with consumer(record) as b:
            await wait_until(lambda: len(got_b) == PER_QUEUE)  # B consumed the queue it took over
            given_away = {m.queue_id for m in got_b}
            release.set()
            await wait_until(lambda: sum(1 for m in got_a if m.queue_id not in given_away) == PER_QUEUE)
            await anyio.sleep(0.5)
            twice = [m.body for m in got_a if m.queue_id in given_away]
            # Java: at most the consume_thread_min (1) call in flight when the queue was dropped.
            assert len(twice) <= 1, f"A consumed {len(twice)} messages of the queue B owns: {twice}"
            del b
