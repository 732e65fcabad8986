"""QueryRoute and QueryAssignment over a cluster of several masters, as RocketMQ 5.3.3's local proxy answers them
(proxy/src/main/java/org/apache/rocketmq/proxy/service/route/LocalTopicRouteService.java getTopicRouteForProxy: the
topic's route from the name server, every broker in it at its own gRPC endpoint; grpc/v2/route/RouteActivity.java).
A 5.x client given one broker's endpoint must reach the queues of every broker: its producer spreads its sends, its
consumers receive what every master holds, and a broker that left the cluster leaves the route.

The in-process tests run an embedded cluster of two masters, each with its gRPC front door on a port of its own; the
end-to-end ones run ``mqbroker --enable-proxy`` processes and the official 5.x Python client."""

from __future__ import annotations

import contextlib
import threading
import time
from collections import Counter
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import grpc
import pytest
import trio
from rocketmq import ClientConfiguration, ConsumeResult, Credentials, FilterExpression, MessageListener, PushConsumer

from broker.embedded import EmbeddedCluster
from client import Admin, MQClientError
from proxy.config import ProxyConfig
from proxy.pb import definition, service
from proxy.route import GRPC_PORT_NAMESPACE
from proxy.startup import serve_proxy
from remoting.codec.bodies.broker_metadata import SubscriptionGroupConfig
from tests.e2e.harness import kill_all
from tests.proxy.cluster import GrpcCluster
from tests.proxy.grpc_front import Front
from tests.proxy.official import drain, make_message, start_consumer, start_producer
from tests.proxy.test_tls import self_signed

pytestmark = pytest.mark.timeout(180)

CONFIG = ProxyConfig(enable_proxy=True, grpc_server_port=0, tls_test_mode_enable=False)


@asynccontextmanager
async def two_masters(
    tmp_path: Path, config: ProxyConfig = CONFIG
) -> AsyncIterator[tuple[EmbeddedCluster, list[Front]]]:
    """``broker-a`` and ``broker-b`` of one cluster, each serving gRPC on a free port of its own."""
    async with EmbeddedCluster(tmp_path / "cluster", brokers=2) as cluster, trio.open_nursery() as nursery:
        fronts = []
        for controller in cluster.controllers:
            port, _ = await nursery.start(serve_proxy, controller, config)
            fronts.append(Front(cluster, port))
        yield cluster, fronts
        nursery.cancel_scope.cancel()


async def routed_on(admin: Admin, topic: str, brokers: int) -> None:
    """Wait until the name server's route of ``topic`` names ``brokers`` brokers (registration is asynchronous; under
    an autojump clock a registration whose real I/O was slow may time out in virtual time and is made again at the
    next 30 s period, so the bound covers a few periods)."""
    with trio.fail_after(120):
        while True:
            with contextlib.suppress(MQClientError):
                if len((await admin.topic_route(topic)).queue_datas) >= brokers:
                    return
            await trio.sleep(0.05)


async def create_on_both(cluster: EmbeddedCluster, topic: str, queues: int = 4) -> None:
    """The topic on every master, and the name server's route naming both."""
    async with Admin(cluster.namesrv_addr) as admin:
        await admin.create_topic(topic, read_queue_nums=queues, write_queue_nums=queues)
        await routed_on(admin, topic, 2)


def _endpoints(front: Front) -> Any:
    host, port = front.endpoint.rsplit(":", 1)
    return definition.Endpoints(
        scheme=definition.AddressScheme.IPv4, addresses=[definition.Address(host=host, port=int(port))]
    )


def _route(front: Front, topic: str) -> Any:
    return service.QueryRouteRequest(topic=definition.Resource(name=topic), endpoints=_endpoints(front))


def _assignment(front: Front, topic: str, group: str) -> Any:
    return service.QueryAssignmentRequest(
        topic=definition.Resource(name=topic), group=definition.Resource(name=group), endpoints=_endpoints(front)
    )


def _where(queue: Any) -> tuple[str, int, str]:
    """A route entry's broker name, broker id and gRPC endpoint."""
    [address] = queue.broker.endpoints.addresses
    return queue.broker.name, queue.broker.id, f"{address.host}:{address.port}"


async def test_query_route_names_every_broker_of_the_topic_at_its_own_grpc_endpoint(tmp_path: Path) -> None:
    async with two_masters(tmp_path) as (cluster, (a, b)):
        await create_on_both(cluster, "TC")
        for front in (a, b):
            answer = await front.call("QueryRoute", _route(front, "TC"), service.QueryRouteResponse)
            assert answer.status.code == definition.Code.OK
            found = Counter(_where(q) for q in answer.message_queues)
            assert found == {("broker-a", 0, a.endpoint): 4, ("broker-b", 0, b.endpoint): 4}
            perms = {definition.Permission.Name(q.permission) for q in answer.message_queues}
            assert perms == {"READ_WRITE"}


async def test_query_route_names_a_broker_holding_a_topic_the_serving_broker_lacks(tmp_path: Path) -> None:
    """The route is the name server's: a topic only ``broker-b`` holds is routed there, from either endpoint, and
    querying it at ``broker-a`` creates nothing there (RocketMQ 5's QueryRoute creates no topic)."""
    async with two_masters(tmp_path) as (cluster, (a, b)):
        async with Admin(cluster.namesrv_addr) as admin:
            await admin.create_topic("TB", read_queue_nums=2, write_queue_nums=2, broker_addr=cluster.broker_addrs[1])
            await routed_on(admin, "TB", 1)
        answer = await a.call("QueryRoute", _route(a, "TB"), service.QueryRouteResponse)
        assert answer.status.code == definition.Code.OK
        assert Counter(_where(q) for q in answer.message_queues) == {("broker-b", 0, b.endpoint): 2}
        assert a.ctx.topics.get("TB") is None


async def test_query_assignment_names_every_readable_broker_at_its_own_grpc_endpoint(tmp_path: Path) -> None:
    async with two_masters(tmp_path) as (cluster, (a, b)):
        await create_on_both(cluster, "TA", queues=2)
        async with Admin(cluster.namesrv_addr) as admin:
            await admin.create_subscription_group(SubscriptionGroupConfig("G-orderly", consume_message_orderly=True))
        for front in (a, b):
            answer = await front.call(
                "QueryAssignment", _assignment(front, "TA", "G-any"), service.QueryAssignmentResponse
            )
            assert answer.status.code == definition.Code.OK
            found = sorted((*_where(x.message_queue), x.message_queue.id) for x in answer.assignments)
            assert found == [("broker-a", 0, a.endpoint, -1), ("broker-b", 0, b.endpoint, -1)]
            orderly = await front.call(
                "QueryAssignment", _assignment(front, "TA", "G-orderly"), service.QueryAssignmentResponse
            )
            found = sorted((*_where(x.message_queue), x.message_queue.id) for x in orderly.assignments)
            assert found == [
                ("broker-a", 0, a.endpoint, 0), ("broker-a", 0, a.endpoint, 1),
                ("broker-b", 0, b.endpoint, 0), ("broker-b", 0, b.endpoint, 1),
            ]  # fmt: skip


async def test_every_proxy_names_each_broker_at_the_same_endpoint_whatever_the_client_dialled(tmp_path: Path) -> None:
    """A client that reached the brokers as ``localhost`` must still see each broker at one endpoint, whichever proxy
    answers: RocketMQ names every broker, the serving one too, at its address's host with the gRPC port
    (ProxyTopicRouteData(topicRouteData, grpcPort)). The official clients compare queues with their endpoints, so a
    push consumer whose assignments (asked of a random broker) named one broker two ways would drop and rebuild its
    queues at every scan."""
    async with two_masters(tmp_path) as (cluster, (a, b)):
        await create_on_both(cluster, "TE", queues=2)
        seen: dict[str, set[tuple[str, int, str]]] = {"route": set(), "assignment": set()}
        for front in (a, b):
            dialled = definition.Endpoints(
                scheme=definition.AddressScheme.DOMAIN_NAME,
                addresses=[definition.Address(host="localhost", port=int(front.endpoint.rsplit(":", 1)[1]))],
            )
            route = service.QueryRouteRequest(topic=definition.Resource(name="TE"), endpoints=dialled)
            answer = await front.call("QueryRoute", route, service.QueryRouteResponse)
            seen["route"] |= {_where(q) for q in answer.message_queues}
            assign = service.QueryAssignmentRequest(
                topic=definition.Resource(name="TE"), group=definition.Resource(name="G"), endpoints=dialled
            )
            assigned = await front.call("QueryAssignment", assign, service.QueryAssignmentResponse)
            seen["assignment"] |= {_where(x.message_queue) for x in assigned.assignments}
        expected = {("broker-a", 0, a.endpoint), ("broker-b", 0, b.endpoint)}
        assert seen == {"route": expected, "assignment": expected}


async def test_a_client_on_the_tls_only_port_is_routed_to_each_brokers_tls_only_port(tmp_path: Path) -> None:
    """``grpcTlsServerPort`` serves TLS whatever ``tls.server.mode`` says; with ``disabled`` the main port speaks
    plaintext only, so a TLS client that came in on the TLS-only port must be routed to every broker's TLS-only port,
    the same whichever proxy answers (else its sends and receives go to a port it cannot speak to)."""
    cert, key = self_signed(tmp_path)
    config = ProxyConfig(
        enable_proxy=True, grpc_server_port=0, grpc_tls_server_port=0, tls_test_mode_enable=False,
        tls_server_mode="disabled", tls_server_cert_path=str(cert), tls_server_key_path=str(key),
    )  # fmt: skip
    roots = cert.read_bytes()

    def call(port: int, method: str, req: Any, resp: Any) -> Any:
        with grpc.secure_channel(f"127.0.0.1:{port}", grpc.ssl_channel_credentials(root_certificates=roots)) as ch:
            fn = ch.unary_unary(
                f"/apache.rocketmq.v2.MessagingService/{method}",
                request_serializer=type(req).SerializeToString,
                response_deserializer=resp.FromString,
            )
            return fn(req, timeout=10, metadata=[("x-mq-client-id", "tls@1@0@x")])

    async with EmbeddedCluster(tmp_path / "cluster", brokers=2) as cluster, trio.open_nursery() as nursery:
        tls_ports = [(await nursery.start(serve_proxy, c, config))[1] for c in cluster.controllers]
        await create_on_both(cluster, "TT", queues=2)
        expected = {("broker-a", 0, f"127.0.0.1:{tls_ports[0]}"), ("broker-b", 0, f"127.0.0.1:{tls_ports[1]}")}
        for port in tls_ports:
            dialled = definition.Endpoints(
                scheme=definition.AddressScheme.IPv4, addresses=[definition.Address(host="127.0.0.1", port=port)]
            )
            route = service.QueryRouteRequest(topic=definition.Resource(name="TT"), endpoints=dialled)
            answer = await trio.to_thread.run_sync(call, port, "QueryRoute", route, service.QueryRouteResponse)
            assert {_where(q) for q in answer.message_queues} == expected
            assign = service.QueryAssignmentRequest(
                topic=definition.Resource(name="TT"), group=definition.Resource(name="G"), endpoints=dialled
            )
            assigned = await trio.to_thread.run_sync(
                call, port, "QueryAssignment", assign, service.QueryAssignmentResponse
            )
            assert {_where(x.message_queue) for x in assigned.assignments} == expected
        nursery.cancel_scope.cancel()


# ---- end to end: the official 5.x client and two broker processes -------------------------------------------------


def _spread_and_receive(endpoint: str, count: int) -> dict[str, Any]:
    producer = start_producer(endpoint, ["TS"])
    receipts = [producer.send(make_message("TS", f"m-{i}".encode())) for i in range(count)]
    consumer = start_consumer(endpoint, "G-spread", "TS", await_duration=5)
    got = drain(consumer, count, within=60)
    consumer.shutdown()
    producer.shutdown()
    return {"receipts": receipts, "got": got}


def _send(endpoint: str, count: int) -> list[Any]:
    producer = start_producer(endpoint, ["TS"])
    try:
        return [producer.send(make_message("TS", f"late-{i}".encode())) for i in range(count)]
    finally:
        producer.shutdown()


async def _stored_by_broker(cluster: GrpcCluster, topic: str) -> dict[str, int]:
    async with Admin(cluster.namesrv_addr) as admin:
        stored: Counter[str] = Counter()
        for queue, offsets in (await admin.topic_status(topic)).items():
            stored[queue.broker_name] += offsets.max_offset - offsets.min_offset
        return dict(stored)


async def test_official_client_sends_to_and_receives_from_both_masters(tmp_path: Path, nursery: trio.Nursery) -> None:
    """Given ``broker-a``'s endpoint only, the official producer spreads its sends over both masters and a simple
    consumer receives every message, also those ``broker-b`` holds; once ``broker-b`` has left (a clean shutdown
    unregisters it and withdraws its gRPC port), the route names ``broker-a`` alone and sends go on there."""
    cluster = GrpcCluster(tmp_path / "cluster", extra=["--topicRouteServiceCacheRefreshSeconds", "1"])
    try:
        await cluster.start(nursery)
        other = await cluster.start_other_broker(nursery, "broker-b")
        async with Admin(cluster.namesrv_addr) as admin:
            await admin.create_topic("TS", read_queue_nums=4, write_queue_nums=4)
            await admin.create_subscription_group(SubscriptionGroupConfig("G-spread"))
            await routed_on(admin, "TS", 2)
        out = await trio.to_thread.run_sync(_spread_and_receive, cluster.endpoint, 40)
        stored = await _stored_by_broker(cluster, "TS")
        assert set(stored) == {"broker-a", "broker-b"} and sum(stored.values()) == 40
        assert min(stored.values()) > 0, stored
        assert sorted(m.body for m in out["got"]) == sorted(f"m-{i}".encode() for i in range(40))

        async with Admin(cluster.namesrv_addr) as admin:  # broker-b's proxy published its port, then withdraws it
            assert await admin.get_kv_config(GRPC_PORT_NAMESPACE, other.broker_addr) == str(other.grpc_port)
            other.process.terminate()
            assert await other.process.wait_exit(60) is not None
            assert await admin.get_kv_config(GRPC_PORT_NAMESPACE, other.broker_addr) is None
        front = Front(None, cluster.grpc_port)  # type: ignore[arg-type]
        with trio.fail_after(60):
            while True:
                answer = await front.call("QueryRoute", _route(front, "TS"), service.QueryRouteResponse)
                if {q.broker.name for q in answer.message_queues} == {"broker-a"}:
                    break
                await trio.sleep(0.2)
        late = await trio.to_thread.run_sync(_send, cluster.endpoint, 8)
        assert len(late) == 8
        assert (await _stored_by_broker(cluster, "TS")) == {"broker-a": stored["broker-a"] + 8}
    finally:
        await kill_all()


class _Collect(MessageListener):  # type: ignore[misc]
    def __init__(self) -> None:
        self.bodies: list[bytes] = []
        self.lock = threading.Lock()

    def consume(self, message: Any) -> ConsumeResult:
        with self.lock:
            self.bodies.append(message.body)
        return ConsumeResult.SUCCESS


def _push_from_both(endpoint: str, count: int) -> list[bytes]:
    listener = _Collect()
    subscription = {"TP": FilterExpression()}
    consumer = PushConsumer(ClientConfiguration(endpoint, Credentials()), "G-push-both", listener, subscription)
    consumer.startup()
    producer = start_producer(endpoint, ["TP"])
    for i in range(count):
        producer.send(make_message("TP", f"p-{i}".encode()))
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and len(set(listener.bodies)) < count:
        time.sleep(0.2)
    consumer.shutdown()
    producer.shutdown()
    return sorted(set(listener.bodies))


async def test_official_push_consumer_consumes_from_both_masters(tmp_path: Path, nursery: trio.Nursery) -> None:
    """Given ``broker-a``'s endpoint only, a push consumer is assigned both masters' queues (QueryAssignment) and
    consumes what each holds."""
    cluster = GrpcCluster(tmp_path / "cluster")
    try:
        await cluster.start(nursery)
        await cluster.start_other_broker(nursery, "broker-b")
        async with Admin(cluster.namesrv_addr) as admin:
            await admin.create_topic("TP", read_queue_nums=2, write_queue_nums=2)
            await admin.create_subscription_group(SubscriptionGroupConfig("G-push-both"))
            await routed_on(admin, "TP", 2)
        got = await trio.to_thread.run_sync(_push_from_both, cluster.endpoint, 20)
        stored = await _stored_by_broker(cluster, "TP")
        assert min(stored.values()) > 0 and set(stored) == {"broker-a", "broker-b"}, stored
        assert got == sorted(f"p-{i}".encode() for i in range(20))
    finally:
        await kill_all()
