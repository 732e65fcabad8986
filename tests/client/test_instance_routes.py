"""The client instance's route cache and broker address table in virtual time, against a real name server and broker:
the route stored last names a broker's addresses (Java's ``brokerAddrTable``, which every changed route overwrites),
so neither the TBW102 stand-in nor a deleted topic's stale route hides a master that moved; and a route lookup does
not wait on heartbeats to the brokers it newly names (a producer's not at all, a consumer's at most ``rpc_timeout``).
The unresponsive broker is a listener that accepts and never answers, as a paused one does."""

from __future__ import annotations

import attrs
import trio
import trio.testing

from broker.controller import BrokerController
from broker.embedded import EmbeddedCluster
from client.admin import Admin
from client.consumer.listener import ConsumeConcurrentlyStatus
from client.consumer.push import PushConsumer
from client.message import Message, MessageExt
from client.producer import Producer
from remoting.client import RemotingClient
from tests.client.test_master_watch import register_as_master, silent_master


async def _move_broker(cluster: EmbeddedCluster, nursery: trio.Nursery) -> str:
    """Stop broker-a and start it again, same name and data, on another port (a pod rescheduled, a new host).
    Returns the new address once serving."""
    await cluster.stop_broker()
    config = attrs.evolve(cluster.broker_config(), listen_port=0)
    controller = BrokerController(config)
    await nursery.start(controller.serve)
    return controller.broker_addr


async def test_a_moved_master_is_found_although_the_tbw102_route_was_cached_first(
    embedded_cluster: EmbeddedCluster, autojump_clock: trio.testing.MockClock
) -> None:
    """The TBW102 stand-in is cached under the sent topic only (as Java's auto-create path), never under TBW102,
    whose route no refresh would renew: after the 30 s poll the sends follow the moved master."""
    async with trio.open_nursery() as nursery:
        async with Producer("pg-move", embedded_cluster.namesrv_addr) as producer:
            await producer.send(Message("AutoMoved", b"first"))  # auto-created through TBW102's route
            old = embedded_cluster.broker_addr
            new = await _move_broker(embedded_cluster, nursery)
            assert new != old
            assert "TBW102" not in producer.instance.routes
            await trio.sleep(35)  # the route poll: AutoMoved's route now names the new master
            assert producer.instance.routes["AutoMoved"].broker_datas[0].master_addr == new
            result = await producer.send(Message("AutoMoved", b"second"))
            assert result.broker_name == "broker-a"
            assert producer.instance.find_broker_address("broker-a") == new
            assert producer.instance.broker_addresses(masters_only=False) == [new]  # heartbeats go there only
        nursery.cancel_scope.cancel()


async def test_a_moved_master_is_found_although_a_deleted_topic_cached_first_keeps_its_old_route(
    embedded_cluster: EmbeddedCluster, autojump_clock: trio.testing.MockClock
) -> None:
    """A topic deleted meanwhile keeps its cached route (TOPIC_NOT_EXIST changes nothing, as in Java); cached first,
    it must not decide the master of every other topic of the broker."""
    async with Admin(embedded_cluster.namesrv_addr) as admin:
        for topic in ("Gone", "Stay"):
            await admin.create_topic(topic, read_queue_nums=1, write_queue_nums=1)
    async with trio.open_nursery() as nursery:
        async with Producer("pg-gone", embedded_cluster.namesrv_addr) as producer:
            await producer.send(Message("Gone", b"a"))
            await producer.send(Message("Stay", b"b"))
            autojump_clock.autojump_threshold = float("inf")  # the broker deletes the files in a worker thread
            async with Admin(embedded_cluster.namesrv_addr) as admin:
                await admin.delete_topic("Gone")
            autojump_clock.autojump_threshold = 0
            new = await _move_broker(embedded_cluster, nursery)
            await trio.sleep(35)
            assert producer.instance.routes["Stay"].broker_datas[0].master_addr == new
            result = await producer.send(Message("Stay", b"c"))
            assert result.broker_name == "broker-a"
        nursery.cancel_scope.cancel()


async def test_a_producers_route_lookup_does_not_wait_for_a_heartbeat_to_an_unresponsive_broker(
    embedded_cluster: EmbeddedCluster, autojump_clock: trio.testing.MockClock
) -> None:
    """The heartbeat to a broker the route newly names runs in the instance's task group: the lookup (and the send
    waiting on it) does not wait rpc_timeout (3 s) for a broker that never answers. Java's
    tryToFindTopicPublishInfo only asks the name server."""
    cluster = embedded_cluster
    async with RemotingClient() as client, trio.open_nursery() as nursery:
        silent = await silent_master(nursery)
        await register_as_master(client, cluster.namesrv_addr, silent, topic="Elsewhere", broker_name="broker-b")
        async with Producer("pg-greet", cluster.namesrv_addr) as producer:
            started = trio.current_time()
            info = await producer.publish_info("Elsewhere")
            took = trio.current_time() - started
            assert {mq.broker_name for mq in info.message_queues} == {"broker-b"}
            assert took < 1.0, took
        nursery.cancel_scope.cancel()


async def _listener(msgs: list[MessageExt]) -> ConsumeConcurrentlyStatus:
    return ConsumeConcurrentlyStatus.CONSUME_SUCCESS


async def test_a_consumers_route_lookup_waits_for_new_brokers_heartbeats_at_most_rpc_timeout_in_all(
    embedded_cluster: EmbeddedCluster, autojump_clock: trio.testing.MockClock
) -> None:
    """A broker serves a group's pulls only once a heartbeat registered it, so a consumer's lookup waits for the
    heartbeats to the brokers it newly names: all at once, at most rpc_timeout, however many never answer."""
    cluster = embedded_cluster
    async with Admin(cluster.namesrv_addr) as admin:
        await admin.create_topic("Here", read_queue_nums=1, write_queue_nums=1)
    async with RemotingClient() as client, trio.open_nursery() as nursery:
        consumer = PushConsumer("cg-greet", cluster.namesrv_addr)
        consumer.subscribe("Here")
        consumer.register_message_listener(_listener)
        async with consumer:
            for name in ("broker-b", "broker-c"):
                silent = await silent_master(nursery)
                await register_as_master(client, cluster.namesrv_addr, silent, topic="Elsewhere", broker_name=name)
            started = trio.current_time()
            route = await consumer.instance.fetch_route("Elsewhere")
            took = trio.current_time() - started
            assert {bd.broker_name for bd in route.broker_datas} == {"broker-b", "broker-c"}
            assert 0 < took <= consumer.instance.config.rpc_timeout, took
        nursery.cancel_scope.cancel()
