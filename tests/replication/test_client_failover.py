"""The Python client across a master's absence (virtual time, one process, real sockets): broker group ``broker-a``
(a master and a slave) and a second master ``broker-b``. With ``broker-a``'s master stopped, a push consumer reads
``broker-a``'s queues from the slave and commits their offsets there, and a producer sends only to ``broker-b``;
once the master is back, both go to it again."""

from __future__ import annotations

from pathlib import Path

import attrs
import trio
import trio.testing

from broker.controller import BrokerController
from broker.embedded import EmbeddedCluster
from client import (
    Admin,
    ClientConfig,
    ConsumeConcurrentlyStatus,
    Message,
    MessageExt,
    Producer,
    SendStatus,
)
from client.instance import MQClientInstance
from remoting.codec.bodies import BrokerData, QueueData, TopicRouteData
from tests.conftest import SMALL_STORE
from tests.replication.ha_helpers import consumer_from_first, slave_learns_topic

TOPIC = "FailoverTopic"
GROUP = "failover-group"


async def _received_all(received: dict[bytes, str], bodies: set[bytes], timeout: float = 120) -> None:
    with trio.fail_after(timeout):
        while not bodies <= received.keys():
            await trio.sleep(0.1)


async def test_consumers_read_from_the_slave_and_producers_avoid_the_masterless_group(
    tmp_path: Path, autojump_clock: trio.testing.MockClock
) -> None:
    async with EmbeddedCluster(tmp_path / "a", slaves=1, **SMALL_STORE) as cluster, trio.open_nursery() as nursery:
        config_b = attrs.evolve(
            cluster.broker_config(), broker_name="broker-b", store_path_root_dir=str(tmp_path / "b"), listen_port=0
        )
        broker_b = BrokerController(config_b)
        await nursery.start(broker_b.serve)
        slave = cluster.slave_controllers[0]
        async with Admin(cluster.namesrv_addr) as admin:
            for addr in (cluster.broker_addr, broker_b.broker_addr):
                await admin.create_topic(TOPIC, read_queue_nums=2, write_queue_nums=2, broker_addr=addr)
        await trio.sleep(1)
        async with Producer("failover-producer", cluster.namesrv_addr) as producer:
            first = [await producer.send(Message(TOPIC, f"first-{i}".encode())) for i in range(20)]
            assert {r.broker_name for r in first} == {"broker-a", "broker-b"}
            await cluster.wait_replicated()
            await slave_learns_topic(slave, TOPIC)
            await cluster.stop_broker()  # broker-a has no master now

            received: dict[bytes, str] = {}

            async def on_messages(msgs: list[MessageExt]) -> ConsumeConcurrentlyStatus:
                for msg in msgs:
                    received[msg.body] = f"{msg.store_host[0]}:{msg.store_host[1]}"
                return ConsumeConcurrentlyStatus.CONSUME_SUCCESS

            consumer = consumer_from_first(cluster.namesrv_addr, GROUP, TOPIC, on_messages)
            async with consumer:
                await _received_all(received, {f"first-{i}".encode() for i in range(20)})
                # Sends go to the group that still has a master.
                second = [await producer.send(Message(TOPIC, f"second-{i}".encode())) for i in range(10)]
                assert {r.broker_name for r in second} == {"broker-b"}
                assert {r.send_status for r in second} == {SendStatus.SEND_OK}
                await _received_all(received, {f"second-{i}".encode() for i in range(10)})
                await trio.sleep(6)  # offsets are persisted every 5 s: broker-a's went to its slave
                on_slave = [slave.context.offsets.query(GROUP, TOPIC, q) for q in range(2)]
                assert sum(on_slave) == sum(1 for r in first if r.broker_name == "broker-a")

                await cluster.start_broker()  # the master comes back: after the next route poll both use it
                await trio.sleep(35)
                third = [await producer.send(Message(TOPIC, f"third-{i}".encode())) for i in range(20)]
                assert "broker-a" in {r.broker_name for r in third}
                await _received_all(received, {f"third-{i}".encode() for i in range(20)})
                await trio.sleep(6)
                master = cluster.controller.context.offsets
                assert sum(master.query(GROUP, TOPIC, q) for q in range(2)) >= sum(on_slave)
        nursery.cancel_scope.cancel()


def test_find_broker_address_in_subscribe_follows_java_s_rules() -> None:
    instance = MQClientInstance(ClientConfig(namesrv_addr=["127.0.0.1:9876"]))

    def route(addrs: dict[int, str]) -> TopicRouteData:
        return TopicRouteData([QueueData("broker-a", 4, 4, 6, 0)], [BrokerData("c", "broker-a", addrs)])

    instance.store_route(TOPIC, route({0: "m:1", 1: "s1:1", 3: "s3:1"}))
    find = instance.find_broker_address_in_subscribe
    assert find("broker-a", 0, only_this_broker=False) == ("m:1", False)
    assert find("broker-a", 1, only_this_broker=True) == ("s1:1", True)
    assert find("broker-a", 2, only_this_broker=True) == ("s3:1", True)  # a missing slave id: the next one
    assert find("broker-a", 5, only_this_broker=True) is None
    assert find("broker-a", 5, only_this_broker=False) == ("m:1", False)  # else the group's first address
    assert find("broker-b", 0, only_this_broker=False) is None
    instance.store_route("Other", route({0: "m:1", 1: "s1:1"}))
    instance.store_route(TOPIC, route({1: "s1:1"}))  # the master is gone from this topic's fresher route
    assert find("broker-a", 0, only_this_broker=False, topic=TOPIC) == ("s1:1", True)
    assert find("broker-a", 0, only_this_broker=True, topic=TOPIC) is None
