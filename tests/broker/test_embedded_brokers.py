"""N master brokers in one embedded cluster: they register with the one name server under ``broker-a``, ``broker-b``
..., and a producer's sends land on every one of them (the client spreads by queue over every broker in the route),
in this process and, as ``make run`` starts them, each in a process of its own."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
from collections import Counter
from pathlib import Path

import attrs
import pytest
import trio

from bench.load.procstat import children_of
from bench.scale import brokers_in_route
from broker.broker_config import BrokerConfig
from broker.broker_process import properties_text
from broker.embedded import EmbeddedCluster, broker_names, default_brokers
from broker.embedded_dledger import EmbeddedDLedgerGroup
from broker.ports import ephemeral_range, free_ports
from client import Admin, Message, Producer
from remoting.codec.java_properties import apply_properties, parse_properties
from remoting.local_address import local_address
from tests.conftest import SMALL_STORE

TOPIC = "SpreadTopic"
QUEUES = 4
BROKER_BOOT = re.compile(rb"The broker\[([^,\]]+), (\S+?):(\d+)\] boot success")
NAMESRV_BOOT = re.compile(rb"The Name Server boot success\. serializeType=JSON, address (\S+):(\d+)\n")


def test_names_follow_the_first_letter_and_the_default_is_one_per_core_above_two() -> None:
    assert broker_names(3) == ["broker-a", "broker-b", "broker-c"]
    assert broker_names(2, "shard-x") == ["shard-x", "shard-y"]
    assert broker_names(3, "shard-y") == ["shard-y", "shard-y-1", "shard-y-2"]  # no letter after z
    assert broker_names(2, "node7") == ["node7", "node7-1"]
    with pytest.raises(ValueError):
        broker_names(0)
    assert [default_brokers(cores) for cores in (1, 2, 3, 8)] == [1, 1, 3, 8]


def test_make_run_counts_only_the_cores_it_may_run_on(monkeypatch: pytest.MonkeyPatch) -> None:
    """`make run` starts one broker process per core above two, each preallocating a 1 GiB CommitLog segment: the
    cores this process may run on (its affinity mask: `taskset -c 0,1 make run`, a container with
    --cpuset-cpus=0,1), as Java's Runtime.availableProcessors() counts them. Found by a review: it counted
    os.cpu_count(), so a 2-core slice of a 16-core host started 16 brokers."""
    monkeypatch.setattr(os, "cpu_count", lambda: 16)
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: {0, 1})
    assert default_brokers() == 1
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: {0, 2, 5, 7})
    assert default_brokers() == 4


def test_a_broker_process_gets_its_settings_through_a_properties_file() -> None:
    config = attrs.evolve(BrokerConfig(), broker_name="broker-b", listen_port=0, **SMALL_STORE)
    text = properties_text(config)
    assert "brokerName=broker-b" in text and "listenPort=0" in text
    assert apply_properties(BrokerConfig(), parse_properties(text))[0] == config


@pytest.mark.parametrize("layout", [{"brokers": 2}, {"slaves": 1}], ids=["two-masters", "master-and-slave"])
async def test_each_embedded_broker_serves_prometheus_metrics_on_a_port_of_its_own(
    tmp_path: Path, layout: dict[str, int]
) -> None:
    """`python -m broker.embedded --metricsExporterType PROM` (`make run` with it) runs one master per core above two
    cores, and `slaves=N` a master and its slaves: broker ``i`` serves /metrics on metricsPromExporterPort + i, as
    it has a listen and HA port of its own. Found by a review: every broker copied broker-a's port, so the second
    could not bind it and the whole cluster failed to start (OSError 98)."""
    (port,) = free_ports(1, span=2)
    settings = {**SMALL_STORE, "metrics_exporter_type": "PROM", "metrics_prom_exporter_port": port}
    async with EmbeddedCluster(tmp_path / "cluster", **layout, **settings) as cluster:
        controllers = [*cluster.controllers, *cluster.slave_controllers]
        served = [controller.metrics.address for controller in controllers if controller.metrics]
        assert served == [("127.0.0.1", port), ("127.0.0.1", port + 1)]


async def spread_over(namesrv: str, brokers: int) -> Counter[str]:
    """Create the topic on every master, wait for the route to name them all, send, count the sends by broker."""
    async with Admin(namesrv) as admin:
        created = await admin.create_topic(TOPIC, read_queue_nums=QUEUES, write_queue_nums=QUEUES)
        assert len(created) == brokers
        with trio.fail_after(30):
            while len((await admin.cluster_info()).broker_addr_table) < brokers:
                await trio.sleep(0.1)
            while await brokers_in_route(admin, TOPIC) < brokers:
                await trio.sleep(0.1)
        async with Producer("spread_pg", namesrv) as producer:
            landed = Counter([(await producer.send(Message(TOPIC, b"m%d" % i))).broker_name for i in range(40)])
        status = await admin.topic_status(TOPIC)
    stored = Counter[str]()
    for mq, offsets in status.items():
        stored[mq.broker_name] += offsets.max_offset
    assert stored == landed  # what the broker acknowledged, each broker holds
    return landed


async def test_the_embedded_cluster_runs_n_masters_and_sends_land_on_all(tmp_path: Path) -> None:
    async with EmbeddedCluster(tmp_path, brokers=3, **SMALL_STORE) as cluster:
        assert [c.context.config.broker_name for c in cluster.controllers] == ["broker-a", "broker-b", "broker-c"]
        assert len(set(cluster.broker_addrs)) == 3
        async with Admin(cluster.namesrv_addr) as admin:
            info = await admin.cluster_info()
        assert {k: sorted(v) for k, v in info.cluster_addr_table.items()} == {
            "DefaultCluster": ["broker-a", "broker-b", "broker-c"]
        }
        landed = await spread_over(cluster.namesrv_addr, 3)
    # round robin over the 12 queues: each queue takes 3 or 4 of the 40 sends, each broker 4 queues
    assert sum(landed.values()) == 40 and all(12 <= n <= 16 for n in landed.values()) and len(landed) == 3
    assert (tmp_path / "broker-b" / "config" / "topics.json").exists()  # shut down cleanly, each in its directory


async def test_an_embedded_cluster_on_every_interface_advertises_the_hosts_address(tmp_path: Path) -> None:
    """`python -m broker.embedded --host 0.0.0.0` binds every interface; its broker (and a DLedger group's members)
    must register an address a client can reach, as a broker with no brokerIP1 does (RemotingUtil.getLocalAddress),
    not 0.0.0.0, and the name server's address the brokers are given is the host's too. Found by reviews."""
    host = local_address()
    async with EmbeddedCluster(tmp_path, host="0.0.0.0", **SMALL_STORE) as cluster:
        assert cluster.broker_addr == f"{host}:{cluster.controller.context.config.listen_port}"
        assert cluster.namesrv_address is not None and cluster.namesrv_address[0] == "0.0.0.0"  # what it binds
        assert cluster.namesrv_addr == f"{host}:{cluster.namesrv_address[1]}"
        assert cluster.controller.context.config.namesrv_addr == cluster.namesrv_addr
        async with Admin(cluster.namesrv_addr) as admin:
            info = await admin.cluster_info()
        assert [entry.broker_addrs for entry in info.broker_addr_table.values()] == [{0: cluster.broker_addr}]
        landed = await spread_over(cluster.namesrv_addr, 1)
    assert sum(landed.values()) == 40
    group = EmbeddedDLedgerGroup(tmp_path / "dledger", host="0.0.0.0")
    assert group.config("n0").broker_ip1 == host and group.addr("n1").startswith(f"{host}:")
    assert "0.0.0.0" not in group.peers


async def test_every_master_has_slaves_of_its_own_in_the_routes(tmp_path: Path) -> None:
    """`brokers=2, slaves=1` is RocketMQ's 2m-2s layout: broker-a and broker-b each a master (brokerId 0) and a slave
    (brokerId 1) of its name, every one on ports of its own (listen, HA and Prometheus: the cluster would not start on
    a clash), the routes naming both of each name, and each broker its own data, shut down cleanly."""
    (metrics,) = free_ports(1, span=4)
    settings = {**SMALL_STORE, "metrics_exporter_type": "PROM", "metrics_prom_exporter_port": metrics}
    async with EmbeddedCluster(tmp_path, brokers=2, slaves=1, **settings) as cluster:
        table = cluster.slave_addr_table
        assert list(table) == ["broker-a", "broker-b"] and [len(slaves) for slaves in table.values()] == [1, 1]
        masters = dict(zip(["broker-a", "broker-b"], cluster.broker_addrs, strict=True))
        expected = {name: {0: masters[name], 1: table[name][0]} for name in masters}
        assert len({addr for ids in expected.values() for addr in ids.values()}) == 4
        async with Admin(cluster.namesrv_addr) as admin:
            with trio.fail_after(30):
                while {
                    n: e.broker_addrs for n, e in (await admin.cluster_info()).broker_addr_table.items()
                } != expected:
                    await trio.sleep(0.1)
            await admin.create_topic(TOPIC, read_queue_nums=QUEUES, write_queue_nums=QUEUES)
            route = await admin.topic_route(TOPIC)
        assert {data.broker_name: data.broker_addrs for data in route.broker_datas} == expected
        for port in range(metrics, metrics + 4):  # masters on +0 and +1, their slaves on +2 and +3
            await (await trio.open_tcp_stream("127.0.0.1", port)).aclose()
    for root in ("broker", "broker-slave1", "broker-b", "broker-b-s1"):
        assert (tmp_path / root / "checkpoint").exists() and not (tmp_path / root / "abort").exists(), root


async def test_make_run_starts_broker_processes_that_take_the_sends(tmp_path: Path) -> None:
    """``python -m broker.embedded`` as ``make run`` runs it, with ``ROCKETRIO_BROKERS=2``: broker-b is a process of
    its own, both register, sends land on both, SIGTERM stops both cleanly."""
    env = {**os.environ, "ROCKETRIO_BROKERS": "2"}
    proc = await trio.lowlevel.open_process(
        [sys.executable, "-m", "broker.embedded", "--data", str(tmp_path / "data"), "--namesrv-port", "0",
         "--listenPort", "0", "--mappedFileSizeCommitLog", str(1 << 20), "--maxHashSlotNum", "1024",
         "--maxIndexNum", "4096"],
        stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, env=env,
    )  # fmt: skip
    try:
        assert proc.stdout is not None
        out = b""
        with trio.fail_after(60):
            while len(BROKER_BOOT.findall(out)) < 2 or not NAMESRV_BOOT.search(out):
                chunk = await proc.stdout.receive_some()
                assert chunk, f"exited before booting: {out!r}"
                out += chunk
        ns = NAMESRV_BOOT.search(out)
        assert ns is not None
        boots = BROKER_BOOT.findall(out)
        assert [name for name, _, _ in boots] == [b"broker-a", b"broker-b"]
        assert len({port for _, _, port in boots}) == 2
        children = children_of(proc.pid)
        assert len(children) == 1  # broker-b runs in a process of its own
        landed = await spread_over(f"{ns.group(1).decode()}:{int(ns.group(2))}", 2)
        assert landed == {"broker-a": 20, "broker-b": 20}  # round robin over 8 queues, 4 on each
        proc.send_signal(signal.SIGTERM)
        with trio.fail_after(60):
            assert await proc.wait() == 0
        assert not (tmp_path / "data" / "broker-b" / "abort").exists()  # broker-b shut down cleanly too
        assert (tmp_path / "data" / "broker-b" / "config" / "topics.json").exists()
        with pytest.raises(ProcessLookupError):
            os.kill(children[0], 0)
    finally:
        if proc.returncode is None:
            proc.kill()
            await proc.wait()


async def test_make_run_starts_two_masters_with_a_slave_each_on_every_interface(tmp_path: Path) -> None:
    """``python -m broker.embedded --brokers 2 --slaves 1 --host 0.0.0.0``: broker-a and its slave in the cluster's
    process, broker-b and broker-b's slave each in one of its own, four boot lines, every address (the name server's
    too, which the brokers are given) the host's and not 0.0.0.0; SIGTERM stops all of them cleanly."""
    host = local_address()
    proc = await trio.lowlevel.open_process(
        [sys.executable, "-m", "broker.embedded", "--data", str(tmp_path / "data"), "--host", "0.0.0.0",
         "--namesrv-port", "0", "--listenPort", "0", "--brokers", "2", "--slaves", "1",
         "--mappedFileSizeCommitLog", str(1 << 20), "--maxHashSlotNum", "1024", "--maxIndexNum", "4096"],
        stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
    )  # fmt: skip
    try:
        assert proc.stdout is not None
        out = b""
        with trio.fail_after(60):
            while len(BROKER_BOOT.findall(out)) < 4 or not NAMESRV_BOOT.search(out):
                chunk = await proc.stdout.receive_some()
                assert chunk, f"exited before booting: {out!r}"
                out += chunk
        ns = NAMESRV_BOOT.search(out)
        assert ns is not None and ns.group(1).decode() == host
        namesrv = f"{host}:{int(ns.group(2))}"
        boots = [(name.decode(), f"{addr.decode()}:{int(port)}") for name, addr, port in BROKER_BOOT.findall(out)]
        assert sorted(name for name, _ in boots) == ["broker-a", "broker-a", "broker-b", "broker-b"]
        assert len({addr for _, addr in boots}) == 4 and all(addr.startswith(f"{host}:") for _, addr in boots)
        assert len(children_of(proc.pid)) == 2  # broker-b and its slave
        async with Admin(namesrv) as admin:
            with trio.fail_after(30):
                while sorted(len(e.broker_addrs) for e in (await admin.cluster_info()).broker_addr_table.values()) != [
                    2,
                    2,
                ]:
                    await trio.sleep(0.1)
            for _, addr in boots:
                assert (await admin.broker_config(addr))["namesrvAddr"] == namesrv
        proc.send_signal(signal.SIGTERM)
        with trio.fail_after(60):
            assert await proc.wait() == 0
        for root in ("broker-b", "broker-b-s1", "broker-slave1"):
            assert not (tmp_path / "data" / root / "abort").exists(), root
        assert (tmp_path / "data" / "logs" / "broker-b-s1.log").exists()
    finally:
        if proc.returncode is None:
            proc.kill()
            await proc.wait()


async def test_brokers_asked_for_port_0_listen_below_the_ephemeral_range(tmp_path: Path) -> None:
    """Every broker of a port-0 cluster (masters and slaves) gets its main, fast (port - 2) and HA (port + 1) ports
    below the kernel's ephemeral range, and keeps them across a restart. Before, a master listened on a port from
    that range, and a restart on it failed with EADDRINUSE once some client connection of the machine had taken it
    as its local port (seen in CI, both suites running side by side)."""
    low, _ = ephemeral_range()
    async with EmbeddedCluster(tmp_path, brokers=2, slaves=1, **SMALL_STORE) as cluster:
        addrs = [*cluster.broker_addrs, *(a for slaves in cluster.slave_addr_table.values() for a in slaves)]
        ports = [int(addr.rsplit(":", 1)[1]) for addr in addrs]
        assert len(set(ports)) == 4
        assert all(port + 1 < low for port in ports), ports
        assert cluster.controller.fast_address is not None and cluster.controller.fast_address[1] == ports[0] - 2
        assert cluster.controller.context.store.ha.port == ports[0] + 1
        await cluster.restart_broker()
        assert cluster.broker_addr == addrs[0]
