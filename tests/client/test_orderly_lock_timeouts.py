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
