"""The embedded cluster with ``--enable-proxy`` (``python -m broker.embedded --enable-proxy``, ``scripts/run
--enable-proxy``): every master serves RocketMQ 5 gRPC clients as ``mqbroker --enable-proxy`` does, ``broker-a`` in
the cluster's process and the others in processes of their own, each on a port of its own, and the official 5.x
Python client given any one of them reaches the queues of all."""

from __future__ import annotations

import re
import sys
from pathlib import Path
from typing import Any

import pytest
import trio

from broker.embedded import PORT_STEP, EmbeddedCluster
from client import Admin
from proxy.config import ProxyConfig
from remoting.codec.bodies.broker_metadata import SubscriptionGroupConfig
from tests.e2e.harness import Process, kill_all
from tests.proxy.official import drain, make_message, start_consumer, start_producer
from tests.proxy.test_cluster_routes import create_on_both, routed_on

pytestmark = pytest.mark.timeout(180)

_NAMESRV_BOOT = re.compile(r"The Name Server boot success\. serializeType=\w+, address (\S+)")
_PROXY_BOOT = re.compile(r"The proxy\[grpcServerPort=(\d+), tlsPort=(\d+)\] boot success")


def _send_and_receive(endpoint: str, topic: str, group: str, count: int) -> list[bytes]:
    producer = start_producer(endpoint, [topic])
    for i in range(count):
        producer.send(make_message(topic, f"m-{i}".encode()))
    consumer = start_consumer(endpoint, group, topic, await_duration=5)
    got = drain(consumer, count, within=60)
    consumer.shutdown()
    producer.shutdown()
    return sorted(m.body for m in got)


async def _stored_by_broker(namesrv_addr: str, topic: str) -> dict[str, int]:
    async with Admin(namesrv_addr) as admin:
        stored: dict[str, int] = {}
        for queue, offsets in (await admin.topic_status(topic)).items():
            stored[queue.broker_name] = stored.get(queue.broker_name, 0) + offsets.max_offset - offsets.min_offset
        return stored


def test_each_masters_grpc_ports_sit_port_step_above_broker_as(tmp_path: Path) -> None:
    proxy = ProxyConfig(enable_proxy=True, grpc_server_port=8081, grpc_tls_server_port=8181)
    cluster = EmbeddedCluster(tmp_path, brokers=3, proxy=proxy)
    ports = [(c.grpc_server_port, c.grpc_tls_server_port) for c in map(cluster.proxy_config, range(3)) if c]
    assert ports == [(8081, 8181), (8081 + PORT_STEP, 8181 + PORT_STEP), (8081 + 2 * PORT_STEP, 8181 + 2 * PORT_STEP)]
    free = EmbeddedCluster(tmp_path, brokers=2, proxy=ProxyConfig(enable_proxy=True, grpc_server_port=0))
    assert [(c.grpc_server_port, c.grpc_tls_server_port) for c in map(free.proxy_config, range(2)) if c] == [
        (0, -1),
        (0, -1),
    ]
    assert EmbeddedCluster(tmp_path, brokers=2).proxy_config(1) is None


async def test_every_master_of_an_embedded_cluster_serves_the_official_5x_client(tmp_path: Path) -> None:
    """In one process (the tests' fixture): both masters answer gRPC on ports of their own; a client given
    ``broker-b``'s endpoint sends to and receives from both. Without ``proxy`` no master serves gRPC."""
    proxy = ProxyConfig(enable_proxy=True, grpc_server_port=0)
    async with EmbeddedCluster(tmp_path / "grpc", brokers=2, proxy=proxy) as cluster:
        endpoints = cluster.grpc_endpoints
        assert len(endpoints) == 2 and len(set(endpoints)) == 2
        await create_on_both(cluster, "TE")
        async with Admin(cluster.namesrv_addr) as admin:
            await admin.create_subscription_group(SubscriptionGroupConfig("G-embedded"))
        got = await trio.to_thread.run_sync(_send_and_receive, endpoints[1], "TE", "G-embedded", 24)
        assert got == sorted(f"m-{i}".encode() for i in range(24))
        stored = await _stored_by_broker(cluster.namesrv_addr, "TE")
        assert set(stored) == {"broker-a", "broker-b"} and min(stored.values()) > 0, stored
    async with EmbeddedCluster(tmp_path / "plain", brokers=2) as cluster:
        assert cluster.grpc_endpoints == []


async def test_the_embedded_command_with_enable_proxy_serves_5x_clients_on_every_master(
    tmp_path: Path, nursery: trio.Nursery
) -> None:
    """``python -m broker.embedded --brokers 2 --enable-proxy``: a proxy boot line per master (``broker-b`` in its own
    process), and the official client given ``broker-b``'s endpoint reaches both; SIGTERM stops it all cleanly."""
    argv = [sys.executable, "-m", "broker.embedded", "--data", str(tmp_path / "data"), "--namesrv-port", "0"]
    argv += ["--broker-port", "0", "--brokers", "2", "--enable-proxy", "--grpcServerPort", "0"]
    cluster = Process("embedded", argv, tmp_path / "embedded.log")
    try:
        await cluster.start(nursery)
        await cluster.wait_until(lambda: len(_PROXY_BOOT.findall("\n".join(cluster.lines))) == 2, 90, "proxy lines")
        text = "\n".join(cluster.lines)
        namesrv = _NAMESRV_BOOT.search(text)
        assert namesrv is not None
        ports: list[Any] = [int(port) for port, _ in _PROXY_BOOT.findall(text)]
        assert len(set(ports)) == 2 and 0 not in ports
        async with Admin(namesrv.group(1)) as admin:
            await admin.create_subscription_group(SubscriptionGroupConfig("G-embedded-cli"))
            assert len(await admin.create_topic("TC", read_queue_nums=4, write_queue_nums=4)) == 2
            await routed_on(admin, "TC", 2)
        got = await trio.to_thread.run_sync(_send_and_receive, f"127.0.0.1:{ports[1]}", "TC", "G-embedded-cli", 24)
        assert got == sorted(f"m-{i}".encode() for i in range(24))
        assert set(await _stored_by_broker(namesrv.group(1), "TC")) == {"broker-a", "broker-b"}
        cluster.terminate()
        assert await cluster.wait_exit(60) == 0
    finally:
        await kill_all()
