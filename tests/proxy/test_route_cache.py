"""The 5.x routes' cache as RocketMQ 5.3.3's TopicRouteService keeps it (proxy/src/main/java/org/apache/rocketmq/proxy/
service/route/TopicRouteService.java: Caffeine's ``refreshAfterWrite`` and ``expireAfterAccess``): a stale route is
answered at once while it is fetched again in the background, and a route nobody asked for during the expiry is
fetched again while the request waits.

The routes' first name server is a black hole (a listener that takes connections and never answers), as a name
server host that died is: a fetch waits out its timeout there before the live one answers; the brokers themselves
register with the live one only. The clock is virtual, jumping after 10 ms of real quiet (the cluster's worker
threads and loopback I/O finish first), so a fetch takes virtual seconds and a route answered from the cache none;
the exact expiry instant is not tested (float sums of virtual times)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import attrs
import trio
import trio.testing

from broker.context import BrokerState
from broker.embedded import EmbeddedCluster
from client import Admin
from proxy.config import ProxyConfig
from proxy.route import ClusterRoutes
from tests.conftest import QUIET_FILES
from tests.proxy.test_cluster_routes import create_on_both

CONFIG = ProxyConfig(enable_proxy=True, grpc_server_port=0, tls_test_mode_enable=False)


@asynccontextmanager
async def black_hole() -> AsyncIterator[str]:
    """``host:port`` of a listener that takes every connection and never reads or answers. It accepts them (its
    backlog never fills, however often the broker's clients reconnect after a timeout, which would make a connect
    hang or fail instead of the call timing out) and holds them open until the test ends."""
    listeners = await trio.open_tcp_listeners(0, host="127.0.0.1")
    held: list[trio.SocketStream] = []

    async def take() -> None:
        while True:
            held.append(await listeners[0].accept())

    async with trio.open_nursery() as nursery:
        nursery.start_soon(take)
        yield f"127.0.0.1:{listeners[0].socket.getsockname()[1]}"
        nursery.cancel_scope.cancel()
    for stream in held:
        await stream.aclose()
    await listeners[0].aclose()


class _BehindAHole:
    """The broker's state as the routes read it, with the black hole as its first name server: the brokers themselves
    register with the live one only, so only the routes' fetches meet the hole."""

    def __init__(self, broker: BrokerState, hole: str) -> None:
        self._broker = broker
        self.config = attrs.evolve(broker.config, namesrv_addr=f"{hole};{broker.config.namesrv_addr}")

    def __getattr__(self, name: str) -> Any:
        return getattr(self._broker, name)


@asynccontextmanager
async def routes_behind_a_dead_name_server(
    tmp_path: Path, clock: trio.testing.MockClock
) -> AsyncIterator[tuple[EmbeddedCluster, ClusterRoutes]]:
    """Two masters, and routes of broker-a's whose name servers are a black hole then the live one (announcing a
    gRPC port, so their background refreshes run; broker-b's routes announce one for it)."""
    clock.autojump_threshold = 0.01  # real quiet first: the cluster's own I/O and worker threads finish
    # The store's flushes and the timer's saves once a minute: at that threshold each wake-up costs real time, and
    # the tests run for virtual minutes and test neither.
    async with black_hole() as hole, EmbeddedCluster(tmp_path, brokers=2, **QUIET_FILES) as cluster:
        a, b = cluster.controllers
        assert a.registration is not None and b.registration is not None
        routes = ClusterRoutes(_BehindAHole(a.context, hole), CONFIG, a.registration.client)  # type: ignore[arg-type]
        b_routes = ClusterRoutes(b.context, CONFIG, b.registration.client)
        async with trio.open_nursery() as nursery:
            # Both publish a gRPC port (no gRPC server runs: the routes read only the published ports).
            await nursery.start(routes.announce, 18081)
            await nursery.start(b_routes.announce, 18091)
            yield cluster, routes
            nursery.cancel_scope.cancel()


async def _queues_of_b(routes: ClusterRoutes, topic: str) -> tuple[int, float]:
    """broker-b's write queue count in ``topic``'s route, and the virtual seconds the lookup took."""
    start = trio.current_time()
    entries = await routes.queues(topic)
    assert entries is not None
    [b] = [entry for entry in entries if entry.name == "broker-b"]
    return b.write_queue_nums, trio.current_time() - start


async def test_a_stale_route_is_answered_at_once_and_refreshed_in_the_background(
    tmp_path: Path, autojump_clock: trio.testing.MockClock
) -> None:
    async with routes_behind_a_dead_name_server(tmp_path, autojump_clock) as (cluster, routes):
        await create_on_both(cluster, "TR", queues=4)
        queues, waited = await _queues_of_b(routes, "TR")
        assert queues == 4 and waited > 0  # the first fetch waits for the dead name server

        async with Admin(cluster.namesrv_addr) as admin:  # broker-b's share grows; it registers that at once
            await admin.create_topic("TR", read_queue_nums=8, write_queue_nums=8, broker_addr=cluster.broker_addrs[1])
        await trio.sleep(CONFIG.topic_route_service_cache_refresh_seconds)
        queues, waited = await _queues_of_b(routes, "TR")
        assert (queues, waited) == (4, 0)  # stale, answered from the cache; its refresh goes on meanwhile
        with trio.fail_after(600):  # the refresh waits out the dead name server first
            while queues != 8:
                await trio.sleep(1)
                queues, waited = await _queues_of_b(routes, "TR")
                assert waited == 0  # every answer from the cache meanwhile


async def test_a_route_not_asked_for_during_the_expiry_is_fetched_while_the_request_waits(
    tmp_path: Path, autojump_clock: trio.testing.MockClock
) -> None:
    async with routes_behind_a_dead_name_server(tmp_path, autojump_clock) as (cluster, routes):
        await create_on_both(cluster, "TX", queues=4)
        assert (await _queues_of_b(routes, "TX"))[1] > 0
        for _ in range(3):  # asked for often enough: never expires, each stale answer refreshes it
            await trio.sleep(CONFIG.topic_route_service_cache_expired_seconds - 10)
            assert (await _queues_of_b(routes, "TX"))[1] == 0
        # A second past the expiry: exactly 300 s after the last use can read as 299.99999999999994 in floats.
        await trio.sleep(CONFIG.topic_route_service_cache_expired_seconds + 1)
        assert (await _queues_of_b(routes, "TX"))[1] > 0  # fetched: the dead name server first
