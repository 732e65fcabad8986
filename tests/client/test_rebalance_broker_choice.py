"""Rebalance asks one of the topic's masters for the group's consumer ids, in random order and the next one when it
fails (Java picks one at random): it used to ask the first by name every pass, so one master that accepts and never
answers (a paused broker) stalled the whole topic's rebalance. Virtual time, a real name server and broker."""

from __future__ import annotations

import trio
import trio.testing

from broker.embedded import EmbeddedCluster
from client.admin import Admin
from client.consumer.listener import ConsumeConcurrentlyStatus
from client.consumer.push import PushConsumer
from client.message import MessageExt
from remoting.client import RemotingClient
from tests.client.test_master_watch import register_as_master, silent_master

TOPIC = "TwoMasters"


async def _listener(msgs: list[MessageExt]) -> ConsumeConcurrentlyStatus:
    return ConsumeConcurrentlyStatus.CONSUME_SUCCESS


async def test_a_master_that_never_answers_does_not_stall_rebalance(
    embedded_cluster: EmbeddedCluster, autojump_clock: trio.testing.MockClock
) -> None:
    async with Admin(embedded_cluster.namesrv_addr) as admin:
        await admin.create_topic(TOPIC, read_queue_nums=2, write_queue_nums=2)
    async with RemotingClient() as client, trio.open_nursery() as nursery:
        silent = await silent_master(nursery)
        await register_as_master(client, embedded_cluster.namesrv_addr, silent, TOPIC, "broker-0")  # first by name
        consumer = PushConsumer("cg-two-masters", embedded_cluster.namesrv_addr)
        consumer.subscribe(TOPIC)
        consumer.register_message_listener(_listener)
        async with consumer:
            for _ in range(3):
                await consumer.rebalance.do_rebalance()
            owned = {mq.broker_name for mq in consumer.rebalance.process_queues if mq.topic == TOPIC}
            assert "broker-a" in owned
        nursery.cancel_scope.cancel()
