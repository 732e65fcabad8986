"""Where rebalance asks for the group's consumer ids (MQClientInstance.findConsumerIdList): one of the topic's broker
groups, its master or, without one, a slave (BrokerData.selectBrokerAddr), in random order and the next one when it
fails (Java picks one at random). It used to ask the first master by name every pass, so one master that accepts and
never answers (a paused broker) stalled the whole topic's rebalance, and to ask masters only, so a topic whose only
master was down got no queues. Virtual time, a real name server and broker."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from pathlib import Path

import trio
import trio.testing

from broker.embedded import EmbeddedCluster
from client.admin import Admin
from client.consumer.listener import ConsumeConcurrentlyStatus
from client.consumer.push import PushConsumer
from client.message import Message, MessageExt
from client.producer import Producer
from remoting.client import RemotingClient
from remoting.codec.bodies import ConsumeFromWhere
from tests.client.test_master_watch import register_as_master, silent_master
from tests.conftest import SMALL_STORE
from tests.replication.ha_helpers import slave_learns_topic

TOPIC = "TwoMasters"
FIRST = ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET


def _collecting(seen: list[MessageExt]) -> Callable[[list[MessageExt]], Awaitable[ConsumeConcurrentlyStatus]]:
    async def listener(msgs: list[MessageExt]) -> ConsumeConcurrentlyStatus:
        seen.extend(msgs)
        return ConsumeConcurrentlyStatus.CONSUME_SUCCESS

    return listener


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
        consumer.register_message_listener(_collecting([]))
        async with consumer:
            for _ in range(3):
                await consumer.rebalance.do_rebalance()
            owned = {mq.broker_name for mq in consumer.rebalance.process_queues if mq.topic == TOPIC}
            assert "broker-a" in owned
        nursery.cancel_scope.cancel()


async def test_a_consumer_started_while_its_topics_only_master_is_down_rebalances_through_the_slave(
    tmp_path: Path, autojump_clock: trio.testing.MockClock
) -> None:
    """Consumers heartbeat to slaves too, so the slave of the topic's only broker group names the group's members:
    a push consumer started while that group's master is down gets its queues and reads them from the slave."""
    async with EmbeddedCluster(tmp_path / "a", slaves=1, **SMALL_STORE) as cluster:
        async with Admin(cluster.namesrv_addr) as admin:
            await admin.create_topic("SlaveOnly", read_queue_nums=2, write_queue_nums=2)
        await trio.sleep(1)
        async with Producer("pg-slave-only", cluster.namesrv_addr) as producer:
            for i in range(6):
                await producer.send(Message("SlaveOnly", f"m{i}".encode()))
        await cluster.wait_replicated()
        await slave_learns_topic(cluster.slave_controllers[0], "SlaveOnly")
        await cluster.stop_broker()  # broker-a, the topic's only group, has no master now

        seen: list[MessageExt] = []
        consumer = PushConsumer("cg-slave-only", cluster.namesrv_addr, consume_from_where=FIRST)
        consumer.subscribe("SlaveOnly")
        consumer.register_message_listener(_collecting(seen))
        async with consumer:
            with trio.move_on_after(60):
                while len(seen) < 6:
                    await trio.sleep(0.5)
            owned = sorted(mq.queue_id for mq in consumer.rebalance.process_queues if mq.topic == "SlaveOnly")
    assert owned == [0, 1], f"queues owned while the master is down: {owned}"
    assert sorted(m.body for m in seen) == [f"m{i}".encode() for i in range(6)]
