"""A name server and a broker with the 5.x gRPC endpoint, as real child processes (``mqnamesrv`` and
``mqbroker --enable-proxy``), for the tests that drive the official ``rocketmq-python-client`` against them.

Times are shortened so that scenarios take seconds: invisible times down to 1 s, transaction checks every second,
consumer offsets saved every 200 ms. :meth:`GrpcCluster.kill_broker` sends SIGKILL; :meth:`start_broker` binds the
same ports every time, so clients keep their endpoints.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

import attrs
import trio

from broker.ports import BROKER, free_ports
from tests.e2e.harness import SMALL_COMMITLOG, Process, ScenarioError

_NAMESRV_BOOT = re.compile(r"The Name Server boot success\. serializeType=\w+, address (\S+)")
_BROKER_BOOT = re.compile(r"The broker\[([^,\]]+), (\S+?)\] boot success")
_PROXY_BOOT = re.compile(r"The proxy\[grpcServerPort=(\d+), tlsPort=(\d+)\] boot success")

FAST = [
    "--minInvisibleTimeMillsForRecv", "1000",
    "--transactionCheckInterval", "1000",
    "--transactionTimeOut", "1000",
    "--flushConsumerOffsetInterval", "200",
]  # fmt: skip


@attrs.define
class OtherBroker:
    """A further master of the cluster (:meth:`GrpcCluster.start_other_broker`), with its own gRPC endpoint."""

    name: str
    process: Process
    broker_addr: str
    grpc_port: int

    @property
    def endpoint(self) -> str:
        return f"127.0.0.1:{self.grpc_port}"


class GrpcCluster:
    """See the module docstring. ``extra`` are further ``--name value`` broker arguments."""

    def __init__(self, data_dir: Path, extra: list[str] | None = None) -> None:
        self.data_dir = data_dir
        self.extra = extra or []
        self.namesrv_addr = ""
        self.broker_addr = ""
        # Below the ephemeral range, so no client connection takes one during a restart (broker.ports), picked in one
        # call so that no two overlap: the listen port (- 2: the fast channel, + 1: the HA listener) and the gRPC
        # port (+ 1: the TLS-only one, with certificate files).
        self.listen_port, self.grpc_port = free_ports(2, **BROKER)
        self.tls_port = 0
        self.broker: Process | None = None
        self._starts = 0

    @property
    def endpoint(self) -> str:
        return f"127.0.0.1:{self.grpc_port}"

    async def start(self, nursery: trio.Nursery) -> None:
        argv = [sys.executable, "-m", "namesrv.cli", "--listenPort", "0"]
        namesrv = Process("namesrv", argv, self.data_dir / "namesrv.log")
        self.data_dir.mkdir(parents=True, exist_ok=True)
        await namesrv.start(nursery)
        await namesrv.wait_until(lambda: bool(_NAMESRV_BOOT.search("\n".join(namesrv.lines))), 60, "boot line")
        found = _NAMESRV_BOOT.search("\n".join(namesrv.lines))
        assert found is not None
        self.namesrv_addr = found.group(1)
        for attempt in range(3):
            try:
                await self.start_broker(nursery)
                return
            except ScenarioError as exc:
                # Another process (the other pytest run of `make test`, a client's connection) bound a port picked
                # for the first start before the broker did: pick again. A restart keeps its ports.
                if "address already in use" not in str(exc).lower() or attempt == 2:
                    raise
                self.listen_port, self.grpc_port = free_ports(2, **BROKER)

    async def start_broker(self, nursery: trio.Nursery) -> None:
        self._starts += 1
        name = f"broker#{self._starts}"
        proc = await self._start(nursery, name, self.listen_port, self.grpc_port, "store", ["--brokerName", "broker-a"])
        self.broker = proc
        text = "\n".join(proc.lines)
        broker, grpc = _BROKER_BOOT.search(text), _PROXY_BOOT.search(text)
        assert broker is not None and grpc is not None
        self.broker_addr = broker.group(2)
        self.grpc_port, self.tls_port = int(grpc.group(1)), int(grpc.group(2))

    async def start_other_broker(self, nursery: trio.Nursery, name: str, extra: list[str] | None = None) -> OtherBroker:
        """One more ``mqbroker --enable-proxy`` master of the cluster, named ``name``, on ports and data of its own."""
        listen_port, grpc_port = free_ports(2, **BROKER)
        proc = await self._start(nursery, name, listen_port, grpc_port, name, ["--brokerName", name, *(extra or [])])
        text = "\n".join(proc.lines)
        broker, grpc = _BROKER_BOOT.search(text), _PROXY_BOOT.search(text)
        assert broker is not None and grpc is not None
        return OtherBroker(name, proc, broker.group(2), int(grpc.group(1)))

    async def _start(
        self, nursery: trio.Nursery, name: str, listen_port: int, grpc_port: int, store: str, extra: list[str]
    ) -> Process:
        argv = [sys.executable, "-m", "broker.cli", "--enable-proxy", "-n", self.namesrv_addr]
        argv += ["--listenPort", str(listen_port), "--grpcServerPort", str(grpc_port)]
        argv += ["--storePathRootDir", str(self.data_dir / store), "--brokerIP1", "127.0.0.1"]
        argv += [*FAST, *SMALL_COMMITLOG, *self.extra, *extra]
        proc = Process(name, argv, self.data_dir / f"{name}.log")
        await proc.start(nursery)

        def booted() -> bool:
            text = "\n".join(proc.lines)
            return bool(_BROKER_BOOT.search(text) and _PROXY_BOOT.search(text))

        await proc.wait_until(booted, 60, "boot lines")
        return proc

    async def kill_broker(self) -> None:
        """SIGKILL the broker: no flush, no checkpoint, no clean shutdown of anything."""
        assert self.broker is not None
        self.broker.kill()
        await self.broker.wait_exit(30)
