"""The client instance's route cache and broker address table in virtual time, against a real name server and broker:
the route stored last names a broker's addresses (Java's ``brokerAddrTable``, which every changed route overwrites),
so neither the TBW102 stand-in nor a deleted topic's stale route hides a master that moved; and a route lookup does
not wait on heartbeats to the brokers it newly names (a producer's not at all, a consumer's at most ``rpc_timeout``),
and greets again a broker that left the table and came back.
The unresponsive broker is a listener that accepts and never answers, as a paused one does."""

from __future__ import annotations

from pathlib import Path

import attrs
import trio
import trio.testing

from broker.controller import BrokerController
from broker.embedded import EmbeddedCluster
from client.admin import Admin
from client.config import ClientConfig
from client.consumer.listener import ConsumeConcurrentlyStatus
from client.consumer.push import PushConsumer
from client.instance import MQClientInstance
from client.message import Message, MessageExt
from client.producer import Producer
from remoting.client import RemotingClient
from remoting.codec.codes import RequestCode, ResponseCode
from remoting.codec.command import request
from remoting.codec.headers.namesrv import DeleteTopicFromNamesrvRequestHeader
from tests.client.test_master_watch import register_as_master, silent_master
from tests.conftest import SMALL_STORE


async def _move_broker(cluster: EmbeddedCluster, nursery: trio.Nursery) -> str:
    """Stop broker-a and start it again, same name and data, on another port (a pod rescheduled, a new host).
    Returns the new address once serving."""
    await cluster.stop_broker()
    config = attrs.evolve(cluster.broker_config(), listen_port=0)
    controller = BrokerController(config)
    await nursery.start(controller.serve)
    return controller.broker_addr


async def _delete_in_namesrv(client: RemotingClient, namesrv: str, topic: str) -> None:
    fields = DeleteTopicFromNamesrvRequestHeader(topic=topic).to_ext_fields()
    answer = await client.invoke(namesrv, request(RequestCode.DELETE_TOPIC_IN_NAMESRV, fields), 3)
    assert answer.code == ResponseCode.SUCCESS


async def test_a_moved_master_is_found_although_the_tbw102_route_was_cached_first(
    embedded_cluster: EmbeddedCluster, autojump_clock: trio.testing.MockClock
) -> None:
    """The TBW102 stand-in is cached under the sent topic only (as Java's auto-create path), never under TBW102,
    whose own route the refresh keeps (every instance's, as Java's inner producer's publish table holds it): after
    the 30 s poll the sends follow the moved master."""
    async with trio.open_nursery() as nursery:
        async with Producer("pg-move", embedded_cluster.namesrv_addr) as producer:
            await producer.send(Message("AutoMoved", b"first"))  # auto-created through TBW102's route
            old = embedded_cluster.broker_addr
            new = await _move_broker(embedded_cluster, nursery)
            assert new != old
            assert producer.instance.routes.get("TBW102") is not producer.instance.routes["AutoMoved"]
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


async def _publish_info_took(producer: Producer, topic: str, broker_name: str) -> float:
    """How long ``producer``'s lookup of ``topic`` took (virtual time); its queues are all ``broker_name``'s."""
    started = trio.current_time()
    info = await producer.publish_info(topic)
    assert {mq.broker_name for mq in info.message_queues} == {broker_name}
    return trio.current_time() - started


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
            assert await _publish_info_took(producer, "Elsewhere", "broker-b") < 1.0
        nursery.cancel_scope.cancel()


async def test_a_deleted_topics_route_cached_last_does_not_hide_the_master_that_came_back(
    embedded_cluster: EmbeddedCluster, autojump_clock: trio.testing.MockClock
) -> None:
    """broker-a's master moves away (a silent listener registers as master, as a new DLedger leader) and back (the
    real broker registers again). Meanwhile the producer cached a topic's route naming the interim master, and that
    topic is deleted. A route re-read from the name server is stored again even when equal to its cached copy, so
    the routes still in use stay newer than the deleted topic's: the sends follow the master that came back."""
    cluster = embedded_cluster
    async with Admin(cluster.namesrv_addr) as admin:
        await admin.create_topic("Stay", read_queue_nums=1, write_queue_nums=1)
    async with RemotingClient() as client, trio.open_nursery() as nursery:
        async with Producer("pg-back", cluster.namesrv_addr, send_msg_timeout=3.0) as producer:
            await producer.send(Message("Stay", b"a"))  # Stay's route cached: the real master
            interim = await silent_master(nursery)
            await register_as_master(client, cluster.namesrv_addr, interim, topic="Gone")
            await producer.publish_info("Gone")  # Gone's route cached last: the interim master
            cluster.controller.registration.trigger()  # the real broker is broker-a's master again
            await trio.sleep(1)
            await _delete_in_namesrv(client, cluster.namesrv_addr, "Gone")
            await trio.sleep(35)  # the route poll: Stay as cached, Gone TOPIC_NOT_EXIST
            assert producer.instance.routes["Stay"].broker_datas[0].master_addr == cluster.broker_addr
            result = await producer.send(Message("Stay", b"b"))
            assert result.broker_name == "broker-a"
            assert producer.instance.find_broker_address("broker-a") == cluster.broker_addr
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
            route = await consumer.instance.fetch_route("Elsewhere", wait_greeting=True)
            took = trio.current_time() - started
            assert {bd.broker_name for bd in route.broker_datas} == {"broker-b", "broker-c"}
            assert 0 < took <= consumer.instance.config.rpc_timeout, took
        nursery.cancel_scope.cancel()


async def test_a_producers_route_lookup_does_not_wait_for_heartbeats_in_an_instance_shared_with_a_consumer(
    embedded_cluster: EmbeddedCluster, autojump_clock: trio.testing.MockClock
) -> None:
    """Only a consumer's own lookups wait for the heartbeats to new brokers: a producer sharing its instance with a
    consumer (Java's default: one MQClientInstance per process) is not held rpc_timeout (3 s) by a broker that
    never answers the heartbeat."""
    cluster = embedded_cluster
    async with Admin(cluster.namesrv_addr) as admin:
        await admin.create_topic("Here", read_queue_nums=1, write_queue_nums=1)
    async with RemotingClient() as client, trio.open_nursery() as nursery:
        silent = await silent_master(nursery)
        await register_as_master(client, cluster.namesrv_addr, silent, topic="Elsewhere", broker_name="broker-b")
        instance = MQClientInstance(ClientConfig(namesrv_addr=cluster.namesrv_addr))
        consumer = PushConsumer("cg-shared", instance=instance)
        consumer.subscribe("Here")
        consumer.register_message_listener(_listener)
        async with instance, consumer, Producer("pg-shared", instance=instance) as producer:
            assert await _publish_info_took(producer, "Elsewhere", "broker-b") < 1.0
        nursery.cancel_scope.cancel()


async def _route_brokers(consumer: PushConsumer, topic: str) -> set[str]:
    await consumer.instance.refresh_routes()
    return {bd.broker_name for bd in consumer.instance.routes[topic].broker_datas}


async def test_a_broker_that_left_the_route_and_came_back_is_greeted_again(
    tmp_path: Path, autojump_clock: trio.testing.MockClock
) -> None:
    """broker-a stops (the name server drops it, the route refresh drops its address from the broker table) and
    comes back on the same address with an empty client registry: the route naming it again registers the consumer
    there at once, not at the next 30 s heartbeat (until which broker-a refuses its pulls with
    SUBSCRIPTION_NOT_EXIST and leaves it out of the group's members). Java's RebalancePushImpl.messageQueueChanged
    heartbeats every broker as soon as the rebalance takes broker-a's queues."""
    async with EmbeddedCluster(tmp_path, brokers=2, **SMALL_STORE) as cluster:
        async with Admin(cluster.namesrv_addr) as admin:
            await admin.create_topic("Back", read_queue_nums=2, write_queue_nums=2)
        consumer = PushConsumer("cg-back", cluster.namesrv_addr)
        consumer.subscribe("Back")
        consumer.register_message_listener(_listener)
        async with consumer:
            client_id = consumer.instance.client_id
            with trio.fail_after(30):
                while await _route_brokers(consumer, "Back") != {"broker-a", "broker-b"}:
                    await trio.sleep(0.5)
            assert client_id in cluster.controller.context.clients.consumer_ids("cg-back")
            await cluster.stop_broker()
            with trio.fail_after(30):
                while await _route_brokers(consumer, "Back") != {"broker-b"}:
                    await trio.sleep(0.5)
            assert "broker-a" not in consumer.instance.broker_table()
            await cluster.start_broker()  # same port, a fresh client registry
            with trio.fail_after(30):
                while await _route_brokers(consumer, "Back") != {"broker-a", "broker-b"}:
                    await trio.sleep(0.5)
            await trio.sleep(1)  # the greeting runs in the instance's task group
            assert client_id in cluster.controller.context.clients.consumer_ids("cg-back")


async def test_a_rebalance_that_takes_back_a_restarted_brokers_queues_greets_it_though_a_route_kept_it(
    tmp_path: Path, autojump_clock: trio.testing.MockClock
) -> None:
    """As above, with a second topic on broker-a alone: while broker-a is down that topic's lookup is TOPIC_NOT_EXIST
    and its cached route (kept, as Java keeps it) still names broker-a, so the broker table never lets go of the
    address. The rebalance that takes broker-a's queues of "Back" again heartbeats every broker, as
    RebalancePushImpl.messageQueueChanged, so the restarted broker-a knows the group at once."""
    async with EmbeddedCluster(tmp_path, brokers=2, **SMALL_STORE) as cluster:
        async with Admin(cluster.namesrv_addr) as admin:
            await admin.create_topic("Back", read_queue_nums=2, write_queue_nums=2)
            await admin.create_topic("OnlyA", read_queue_nums=1, write_queue_nums=1, broker_addr=cluster.broker_addr)
        consumer = PushConsumer("cg-back2", cluster.namesrv_addr)
        consumer.subscribe("Back")
        consumer.subscribe("OnlyA")
        consumer.register_message_listener(_listener)
        async with consumer:
            for brokers, action in (({"broker-a", "broker-b"}, cluster.stop_broker), ({"broker-b"}, None)):
                with trio.fail_after(30):
                    while await _route_brokers(consumer, "Back") != brokers:
                        await trio.sleep(0.5)
                if action is not None:
                    await action()
            await consumer.do_rebalance()  # broker-a's queues of Back are dropped
            assert "broker-a" in consumer.instance.broker_table()  # OnlyA's cached route
            await cluster.start_broker()  # same port, a fresh client registry
            with trio.fail_after(30):
                while await _route_brokers(consumer, "Back") != {"broker-a", "broker-b"}:
                    await trio.sleep(0.5)
            await consumer.do_rebalance()
            assert consumer.instance.client_id in cluster.controller.context.clients.consumer_ids("cg-back2")
