"""Orderly queue locks against a master that accepts and never answers (a paused broker), in virtual time: each
LOCK_BATCH_MQ and UNLOCK_BATCH_MQ gives up after 1 s, as RocketMQ 4.9.8's RebalanceImpl ``lock``, ``lockAll``,
``unlock`` and ``unlockAll`` pass 1000 ms (client/src/main/java/org/apache/rocketmq/client/impl/consumer/
RebalanceImpl.java), not the client's ``rpc_timeout``: a rebalance taking queues one after the other, a renewal and a
stop each wait 1 s per request on such a broker."""

from __future__ import annotations

import pytest
import trio
import trio.testing

from broker.embedded import EmbeddedCluster
from client.consumer.listener import ConsumeOrderlyStatus
from client.consumer.push import PushConsumer
from client.message import MessageExt
from remoting.client import RemotingClient
from remoting.codec.bodies import MessageQueue
from tests.client.test_master_watch import register_as_master, silent_master

TOPIC = "LockSilent"


async def test_lock_and_unlock_give_a_silent_broker_one_second(
    embedded_cluster: EmbeddedCluster, autojump_clock: trio.testing.MockClock
) -> None:
    async def listener(msgs: list[MessageExt]) -> ConsumeOrderlyStatus:
        return ConsumeOrderlyStatus.SUCCESS

    consumer = PushConsumer("cg-lock-silent", embedded_cluster.namesrv_addr)
    consumer.register_message_listener_orderly(listener)
    mq = MessageQueue(TOPIC, "broker-s", 0)
    async with RemotingClient() as client, trio.open_nursery() as nursery:
        silent = await silent_master(nursery)
        await register_as_master(client, embedded_cluster.namesrv_addr, silent, TOPIC, "broker-s")
        async with consumer.instance:
            await consumer.instance.fetch_route(TOPIC)
            consumer.rebalance.own(mq)  # held, so lock_all renews it
            for step in (lambda: consumer.rebalance.lock(mq), consumer.rebalance.lock_all,
                         lambda: consumer.rebalance.unlock([mq])):  # fmt: skip
                began = trio.current_time()
                await step()
                assert trio.current_time() - began == pytest.approx(1.0, abs=0.05)
        nursery.cancel_scope.cancel()


async def test_a_dropped_queue_is_unlocked_without_waiting_for_the_broker(
    embedded_cluster: EmbeddedCluster, autojump_clock: trio.testing.MockClock
) -> None:
    """4.9.8's RebalancePushImpl.removeUnnecessaryMessageQueue gives a dropped queue's lock up one way
    (``unlock(mq, true)``: UNLOCK_BATCH_MQ sent with ``invokeOneway``), so a rebalance dropping queues of a silent
    broker does not wait for it; ours waited 1 s for its answer."""

    async def listener(msgs: list[MessageExt]) -> ConsumeOrderlyStatus:
        return ConsumeOrderlyStatus.SUCCESS

    consumer = PushConsumer("cg-unlock-oneway", embedded_cluster.namesrv_addr)
    consumer.register_message_listener_orderly(listener)
    mq = MessageQueue(TOPIC, "broker-s", 0)
    async with RemotingClient() as client, trio.open_nursery() as nursery:
        silent = await silent_master(nursery)
        await register_as_master(client, embedded_cluster.namesrv_addr, silent, TOPIC, "broker-s")
        async with consumer.instance:
            await consumer.instance.fetch_route(TOPIC)
            pq = consumer.rebalance.own(mq)
            await consumer.rebalance.lock(mq)  # connected (the silent broker never answers it)
            began = trio.current_time()
            await consumer.rebalance.remove_process_queue(mq, pq)
            assert trio.current_time() - began < 0.05
            assert mq not in consumer.rebalance.process_queues
        nursery.cancel_scope.cancel()
