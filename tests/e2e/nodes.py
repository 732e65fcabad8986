"""Name server and brokers as separate processes (``python -m namesrv.cli``, ``python -m broker.cli``), for tests
where the process boundary matters: SIGKILL of a master or a slave, restarts on the same ports and data.

Each node is a :class:`~tests.e2e.harness.Process` (killed by :func:`~tests.e2e.harness.kill_all` at the end of
the run that started it); its address comes from the boot line it prints. Waits are bounded and raise
:class:`~tests.e2e.harness.ScenarioError`.
"""

from __future__ import annotations

import re
import signal
import sys
from pathlib import Path

import trio

from broker.ports import BROKER, free_ports
from tests.e2e.harness import SMALL_COMMITLOG, Process, ScenarioError

NAMESRV_BOOT = re.compile(r"The Name Server boot success\. serializeType=\w+, address (\S+)")
BROKER_BOOT = re.compile(r"The broker\[([^,\]]+), (\S+?)\] boot success")


class Node:
    """One server process; :meth:`start` again after a kill or stop binds the same port. Subclasses
    give the command line and read their address from the boot lines (:meth:`booted`)."""

    boot: re.Pattern[str]
    span, before = 1, 0  # ports the server binds from its port on, and below it

    def __init__(self, name: str, log_dir: Path) -> None:
        self.name = name
        self.log_dir = log_dir
        self.addr = ""
        self._port = 0
        self.process: Process | None = None
        self.starts = 0

    def argv(self) -> list[str]:
        raise NotImplementedError

    async def start(self, nursery: trio.Nursery, timeout: float = 60) -> str:
        self.starts += 1
        proc = Process(f"{self.name}#{self.starts}", self.argv(), self.log_dir / f"{self.name}-{self.starts}.log")
        await proc.start(nursery)
        self.process = proc
        await proc.wait_until(lambda: self.booted("\n".join(proc.lines)), timeout, "boot line")
        return self.addr

    def booted(self, text: str) -> bool:
        """Whether ``text`` (the output so far) holds the boot line; sets :attr:`addr` from it."""
        match = self.boot.search(text)
        if match:
            self.addr = match.group(match.lastindex or 1)
        return match is not None

    @property
    def port(self) -> str:
        """Picked before the first start, below the ephemeral range, so no client connection takes it during a
        restart (:mod:`broker.ports`)."""
        if not self._port:
            self._port = free_ports(1, span=self.span, before=self.before)[0]
        return str(self._port)

    async def kill(self) -> None:
        """SIGKILL: no flush, no checkpoint, no unregistration."""
        assert self.process is not None
        self.process.kill()
        if await self.process.wait_exit(30) is None:
            raise ScenarioError(f"{self.name} survived SIGKILL")

    async def stop(self, timeout: float = 60) -> None:
        """SIGTERM and wait for the clean shutdown (flush, checkpoint, unregistration)."""
        assert self.process is not None and self.process._proc is not None
        self.process._proc.send_signal(signal.SIGTERM)
        if await self.process.wait_exit(timeout) is None:
            raise ScenarioError(f"{self.name} did not stop within {timeout:.0f}s{self.process.context()}")


class NamesrvNode(Node):
    boot = NAMESRV_BOOT

    def argv(self) -> list[str]:
        return [sys.executable, "-m", "namesrv.cli", "--listenPort", self.port]


class BrokerNode(Node):
    """``mqbroker`` with ``storePathRootDir`` = ``data_dir`` and the given RocketMQ properties."""

    boot = BROKER_BOOT
    span, before = BROKER["span"], BROKER["before"]  # the fast channel p - 2 to the HA listener p + 1

    def __init__(
        self, name: str, log_dir: Path, data_dir: Path, namesrv: str, *, port: int = 0, **properties: str | int
    ) -> None:
        """``port``: the listen port, when the caller picked it with others (0: :attr:`port` picks one)."""
        super().__init__(name, log_dir)
        self._port = port
        self.data_dir = data_dir
        self.namesrv = namesrv
        self.properties = {key: str(value) for key, value in properties.items()}

    def argv(self) -> list[str]:
        argv = [sys.executable, "-m", "broker.cli", "-n", self.namesrv]
        settings = {"storePathRootDir": str(self.data_dir), "listenPort": self.port, "listenHost": "127.0.0.1"}
        settings |= {SMALL_COMMITLOG[0].lstrip("-"): SMALL_COMMITLOG[1], **self.properties}
        for key, value in settings.items():
            argv += [f"--{key}", value]
        return argv
