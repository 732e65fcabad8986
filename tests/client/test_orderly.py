"""Orderly consumption: per queue in offset order, under broker queue locks, across a rebalance; suspension retries."""

from __future__ import annotations

from collections import defaultdict

import pytest

from client.consumer.listener import ConsumeOrderlyStatus
from client.consumer.push import PushConsumer
from client.message import Message, MessageExt
from client.producer import Producer
from client.selector import select_by_hash
from tests.client.helpers import create_topic, wait_until
from tests.threaded_cluster import ThreadedCluster

pytestmark = pytest.mark.anyio

ORDERS = 8
STEPS = 12


def _orderly(cluster: ThreadedCluster, seen: list[MessageExt]) -> PushConsumer:
    async def listener(msgs: list[MessageExt]) -> ConsumeOrderlyStatus:
        seen.extend(msgs)
        return ConsumeOrderlyStatus.SUCCESS

    consumer = PushConsumer("cg-orderly", cluster.namesrv_addr, consume_message_batch_max_size=3)
    consumer.subscribe("Orderly")
    consumer.register_message_listener_orderly(listener)
    return consumer


def _owned(consumer: PushConsumer) -> int:
    return sum(1 for mq in consumer.rebalance.process_queues if mq.topic == "Orderly")


async def _send_steps(producer: Producer, steps: range) -> None:
    for step in steps:
        for order in range(ORDERS):
            body = f"{order}:{step}".encode()
            await producer.send(Message("Orderly", body, keys=str(order)), selector=select_by_hash, arg=order)


def _assert_in_order(seen: list[MessageExt]) -> None:
    """Per queue, offsets only grow; per order id, steps only grow (duplicates after a takeover may repeat a tail)."""
    by_queue: dict[int, list[int]] = defaultdict(list)
    steps: dict[str, list[int]] = defaultdict(list)
    for m in seen:
        by_queue[m.queue_id].append(m.queue_offset)
        order, step = m.body.decode().split(":")
        steps[order].append(int(step))
    for offsets in by_queue.values():
        assert offsets == sorted(offsets)
    for sequence in steps.values():
        assert sequence == sorted(sequence)


async def test_orderly_consumer_sees_each_queue_in_order_across_a_rebalance(cluster: ThreadedCluster) -> None:
    await create_topic(cluster.namesrv_addr, "Orderly", queues=4)
    seen_a: list[MessageExt] = []
    seen_b: list[MessageExt] = []
    async with Producer("pg", cluster.namesrv_addr) as producer, _orderly(cluster, seen_a) as a:
        await _send_steps(producer, range(STEPS // 2))
        async with _orderly(cluster, seen_b) as b:
            await wait_until(lambda: _owned(a) == 2 and _owned(b) == 2)
            await _send_steps(producer, range(STEPS // 2, STEPS))
            await wait_until(
                lambda: (
                    {m.body for m in seen_a + seen_b}
                    >= {f"{o}:{s}".encode() for o in range(ORDERS) for s in range(STEPS)}
                )
            )
    _assert_in_order(seen_a)
    _assert_in_order(seen_b)


async def test_suspended_orderly_batches_are_retried_before_later_messages(cluster: ThreadedCluster) -> None:
    await create_topic(cluster.namesrv_addr, "Orderly", queues=1)
    seen: list[bytes] = []
    suspended: set[bytes] = set()

    async def listener(msgs: list[MessageExt]) -> ConsumeOrderlyStatus:
        body = msgs[0].body
        if body == b"0:2" and body not in suspended:
            suspended.add(body)
            return ConsumeOrderlyStatus.SUSPEND_CURRENT_QUEUE_A_MOMENT
        seen.append(body)
        return ConsumeOrderlyStatus.SUCCESS

    consumer = PushConsumer("cg-suspend", cluster.namesrv_addr, suspend_current_queue_time=0.01)
    consumer.subscribe("Orderly")
    consumer.register_message_listener_orderly(listener)
    async with Producer("pg", cluster.namesrv_addr) as producer, consumer:
        for step in range(5):
            await producer.send(Message("Orderly", f"0:{step}".encode()))
        await wait_until(lambda: len(seen) >= 5)
    assert seen == [f"0:{s}".encode() for s in range(5)]
