"""A queue rebalanced away from an orderly consumer keeps its broker lock while a listener call on it runs (Java's
RebalancePushImpl.removeUnnecessaryMessageQueue tries the queue's consume lock for 1 s and keeps the queue otherwise):
giving it up at once let the new owner consume the same queue at the same time."""

from __future__ import annotations

import anyio
import pytest

from client.admin import Admin
from client.consumer.listener import ConsumeOrderlyStatus
from client.consumer.push import PushConsumer
from client.message import Message, MessageExt
from client.producer import Producer
from remoting.codec.bodies import ConsumeFromWhere
from tests.client.helpers import create_topic, wait_until
from tests.threaded_cluster import ThreadedCluster

pytestmark = pytest.mark.anyio


async def test_orderly_queue_is_not_handed_over_while_its_listener_runs(cluster: ThreadedCluster) -> None:
    await create_topic(cluster.namesrv_addr, "OrdLock", queues=2)
    release = anyio.Event()
    in_flight_a: set[int] = set()
    seen_b: list[MessageExt] = []

    async def slow(msgs: list[MessageExt]) -> ConsumeOrderlyStatus:
        in_flight_a.add(msgs[0].queue_id)
        await release.wait()
        in_flight_a.discard(msgs[0].queue_id)
        return ConsumeOrderlyStatus.SUCCESS

    async def record(msgs: list[MessageExt]) -> ConsumeOrderlyStatus:
        seen_b.extend(msgs)
        return ConsumeOrderlyStatus.SUCCESS

    def consumer(listener) -> PushConsumer:  # type: ignore[no-untyped-def]
        c = PushConsumer(
            "cg-ordlock", cluster.namesrv_addr, consume_from_where=ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET
        )
        c.subscribe("OrdLock")
        c.register_message_listener_orderly(listener)
        return c

    async with Producer("pg", cluster.namesrv_addr) as producer, consumer(slow):
        info = await producer.publish_info("OrdLock")
        for mq in info.message_queues:
            await producer.send(Message("OrdLock", f"q{mq.queue_id}".encode()), queue=mq)
        await wait_until(lambda: len(in_flight_a) == 2)  # A is inside its listener on both queues
        async with consumer(record) as b:
            with anyio.move_on_after(8):
                await wait_until(lambda: bool(seen_b))
            overlap = [m.queue_id for m in seen_b if m.queue_id in in_flight_a]
            release.set()
            assert overlap == [], f"B consumed queue(s) {overlap} while A's listener was still running on them"
            del b


async def test_a_kept_queue_counts_its_failed_unlocks_in_the_running_info(cluster: ThreadedCluster) -> None:
    """Each removal that found the queue's listener call still running counts in its ProcessQueueInfo's
    ``tryUnlockTimes`` (``RebalancePushImpl.removeUnnecessaryMessageQueue``'s ``pq.incTryUnlockTimes()``), which Java's
    ``mqadmin consumerStatus`` reports as "unlock N times, still failed" (``ConsumerRunningInfo.analyzeProcessQueue``);
    ours always answered 0."""
    await create_topic(cluster.namesrv_addr, "OrdUnlockTimes", queues=2)
    release = anyio.Event()
    in_flight: set[int] = set()

    async def slow(msgs: list[MessageExt]) -> ConsumeOrderlyStatus:
        in_flight.add(msgs[0].queue_id)
        await release.wait()
        return ConsumeOrderlyStatus.SUCCESS

    async def idle(msgs: list[MessageExt]) -> ConsumeOrderlyStatus:
        return ConsumeOrderlyStatus.SUCCESS

    def consumer(listener) -> PushConsumer:  # type: ignore[no-untyped-def]
        c = PushConsumer(
            "cg-ordunlock", cluster.namesrv_addr, consume_from_where=ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET
        )
        c.subscribe("OrdUnlockTimes")
        c.register_message_listener_orderly(listener)
        return c

    async with Producer("pg", cluster.namesrv_addr) as producer, consumer(slow) as a:
        info = await producer.publish_info("OrdUnlockTimes")
        for mq in info.message_queues:
            await producer.send(Message("OrdUnlockTimes", f"q{mq.queue_id}".encode()), queue=mq)
        await wait_until(lambda: len(in_flight) == 2)
        async with consumer(idle), Admin(cluster.namesrv_addr) as admin:
            await wait_until(lambda: bool(a.rebalance._kept))  # a removal found the call running: queue kept
            running = await admin.consumer_running_info("cg-ordunlock", a.instance.client_id)
            release.set()
        kept = [pq for pq in running["mqTable"].values() if pq["droped"]]
        assert kept and all(pq["locked"] for pq in kept)
        assert all(pq["tryUnlockTimes"] >= 1 for pq in kept), kept
