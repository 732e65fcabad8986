"""Orderly queue locks against a master that accepts and never answers (a paused broker), in virtual time: each
LOCK_BATCH_MQ and UNLOCK_BATCH_MQ gives up after 1 s, as RocketMQ 4.9.8's RebalanceImpl ``lock``, ``lockAll``,
``unlock`` and ``unlockAll`` pass 1000 ms (client/src/main/java/org/apache/rocketmq/client/impl/consumer/
RebalanceImpl.java), not the client's ``rpc_timeout``: a rebalance taking queues one after the other, a renewal and a
stop each wait 1 s per request on such a broker."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

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


@asynccontextmanager
async def _consumer_of_silent_broker(cluster: EmbeddedCluster, group: str) -> AsyncIterator[PushConsumer]:
    """An orderly consumer of ``group`` (its client instance started, not the consumer) that knows the route of
    :data:`TOPIC`, whose only broker, ``broker-s``, never answers."""

    async def listener(msgs: list[MessageExt]) -> ConsumeOrderlyStatus:
        return ConsumeOrderlyStatus.SUCCESS

    consumer = PushConsumer(group, cluster.namesrv_addr)
    consumer.register_message_listener_orderly(listener)
    async with RemotingClient() as client, trio.open_nursery() as nursery:
        silent = await silent_master(nursery)
        await register_as_master(client, cluster.namesrv_addr, silent, TOPIC, "broker-s")
        async with consumer.instance:
            await consumer.instance.fetch_route(TOPIC)
            yield consumer
        nursery.cancel_scope.cancel()


async def test_lock_and_unlock_give_a_silent_broker_one_second(
    embedded_cluster: EmbeddedCluster, autojump_clock: trio.testing.MockClock
) -> None:
    mq = MessageQueue(TOPIC, "broker-s", 0)
    async with _consumer_of_silent_broker(embedded_cluster, "cg-lock-silent") as consumer:
        consumer.rebalance.own(mq)  # held, so lock_all renews it
        for step in (lambda: consumer.rebalance.lock(mq), consumer.rebalance.lock_all,
                     lambda: consumer.rebalance.unlock([mq])):  # fmt: skip
            began = trio.current_time()
            await step()
            assert trio.current_time() - began == pytest.approx(1.0, abs=0.05)


async def test_a_dropped_queue_is_unlocked_without_waiting_for_the_broker(
    embedded_cluster: EmbeddedCluster, autojump_clock: trio.testing.MockClock
) -> None:
    """4.9.8's RebalancePushImpl.removeUnnecessaryMessageQueue gives a dropped queue's lock up one way
    (``unlock(mq, true)``: UNLOCK_BATCH_MQ sent with ``invokeOneway``), so a rebalance dropping queues of a silent
    broker does not wait for it; ours waited 1 s for its answer."""
    mq = MessageQueue(TOPIC, "broker-s", 0)
    async with _consumer_of_silent_broker(embedded_cluster, "cg-unlock-oneway") as consumer:
        pq = consumer.rebalance.own(mq)
        await consumer.rebalance.lock(mq)  # connected (the silent broker never answers it)
        began = trio.current_time()
        await consumer.rebalance.remove_process_queue(mq, pq)
        assert trio.current_time() - began < 0.05
        assert mq not in consumer.rebalance.process_queues
