"""One broker of an :class:`~broker.embedded.EmbeddedCluster` in a child process of its own (``python -m
broker.cli -c <conf>``), so that it gets a core of its own: brokers in one process share one interpreter lock.

The broker's settings are written as a RocketMQ ``broker.conf`` (``<data>/<name>.properties``, only what differs
from the defaults, as RocketMQ's ``distribution/conf/2m-noslave/broker-b.properties`` is; ``name`` is the brokerName,
or a label such as ``broker-b-s1`` for a slave, which shares its master's brokerName), its stderr goes to
``<data>/logs/<name>.log``, and :meth:`BrokerProcess.run` is started in a nursery: it returns (through
``task_status``) the address of the child's boot line. :meth:`BrokerProcess.stop` sends SIGTERM (the broker
unregisters, flushes and saves its files) and waits; a child still running after ``STOP_TIMEOUT`` seconds is killed.
Given a :class:`~proxy.config.ProxyConfig`, the child is ``mqbroker --enable-proxy`` with the proxy's settings in the
same file (as RocketMQ's local mode reads them), and ``grpc_ports`` holds the ports of its proxy boot line.
The child's stdin is a pipe from this process (``mqbroker --exit-with-stdin``): when this process dies, even by
SIGKILL, the child reads end of file and shuts down as on SIGTERM, freeing its port and store lock.

Errors: settings that do not survive the trip through a properties file raise ``ValueError``; a child that exits
before its boot line raises :class:`BrokerProcessError` with the tail of its log.
"""

from __future__ import annotations

import contextlib
import os
import re
import signal
import subprocess
import sys
from pathlib import Path

import attrs
import trio

from broker.broker_config import BrokerConfig
from proxy.config import ProxyConfig
from remoting.codec.java_properties import (
    config_from_properties,
    format_properties,
    parse_properties,
    property_texts,
)
from remoting.connection import Address

#: Seconds a broker process has to shut down after SIGTERM before it is killed.
STOP_TIMEOUT = 30.0
BOOT_LINE = re.compile(r"The broker\[[^,\]]+, (\S+):(\d+)\] boot success")
PROXY_BOOT_LINE = re.compile(r"The proxy\[grpcServerPort=(\d+), tlsPort=(\d+)\] boot success")


class BrokerProcessError(RuntimeError):
    """The broker process exited before it printed its boot line; ``summary`` says so in one line."""

    def __init__(self, message: str, summary: str) -> None:
        super().__init__(message)
        self.summary = summary


def properties_text(config: BrokerConfig) -> str:
    """``config`` as a broker.conf text holding the properties that differ from the defaults, and those a default
    computed from another setting (brokerIP1 from listenHost) would get wrong. Raises ``ValueError`` when a value does
    not read back to itself (a type a properties file cannot carry)."""
    ours, default = property_texts(config), property_texts(BrokerConfig())
    texts = {key: text for key, text in ours.items() if default.get(key) != text}
    derived = property_texts(_read_back(texts))
    texts.update({key: text for key, text in ours.items() if derived.get(key) != text})
    back = _read_back(texts)
    secrets = {f.name for f in attrs.fields(BrokerConfig) if f.metadata.get("secret")}
    if attrs.evolve(back, **{name: getattr(config, name) for name in secrets}) != config:
        raise ValueError(f"the settings of {config.broker_name} do not survive a properties file")
    return format_properties(texts)


def _read_back(texts: dict[str, str]) -> BrokerConfig:
    """What ``mqbroker -c`` makes of a file holding ``texts``."""
    return config_from_properties(BrokerConfig, parse_properties(format_properties(texts)))[0]


class BrokerProcess:
    """A broker in a child process: its settings, its pid and address while it runs."""

    def __init__(
        self, config: BrokerConfig, data_dir: Path, proxy: ProxyConfig | None = None, *, label: str = ""
    ) -> None:
        """``label`` names its files (default: the brokerName)."""
        self.config = config
        self.label = label
        self.data_dir = data_dir
        self.proxy = proxy
        self.address: Address | None = None
        #: (grpcServerPort, TLS-only port or 0) from the child's proxy boot line while it runs, else None.
        self.grpc_ports: tuple[int, int] | None = None
        self._proc: trio.Process | None = None

    @property
    def name(self) -> str:
        return self.label or self.config.broker_name

    @property
    def pid(self) -> int | None:
        return None if self._proc is None else self._proc.pid

    @property
    def broker_addr(self) -> str:
        if self.address is None:
            raise RuntimeError(f"{self.name} is not running")
        return f"{self.address[0]}:{self.address[1]}"

    @property
    def log_path(self) -> Path:
        return self.data_dir / "logs" / f"{self.name}.log"

    async def run(self, *, task_status: trio.TaskStatus[Address] = trio.TASK_STATUS_IGNORED) -> None:
        """Start the child, report its address once it has booted, then drain its output until it exits. Cancelled,
        it stops the child (SIGTERM, then SIGKILL after ``STOP_TIMEOUT``)."""
        conf = self.data_dir / f"{self.name}.properties"
        conf.parent.mkdir(parents=True, exist_ok=True)
        conf.write_text(properties_text(self.config) + self._proxy_text(), encoding="utf-8")
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        with self.log_path.open("ab") as log:
            # Same process group: Ctrl-C in a terminal reaches every broker, and each shuts down cleanly.
            proc = await trio.lowlevel.open_process(
                [sys.executable, "-m", "broker.cli", "-c", str(conf), "--exit-with-stdin", *self._proxy_flag()],
                stdin=subprocess.PIPE,  # never written: its end of file tells the child this process has gone
                stdout=subprocess.PIPE,
                stderr=log,
            )
        self._proc = proc
        assert proc.stdout is not None
        try:
            buffered = b""
            async for chunk in proc.stdout:
                buffered += chunk
                *lines, buffered = buffered.split(b"\n")
                for line in lines:
                    text = line.decode("utf-8", "replace")
                    proxy_match = PROXY_BOOT_LINE.search(text)
                    if proxy_match is not None:
                        self.grpc_ports = (int(proxy_match.group(1)), int(proxy_match.group(2)))
                    match = BOOT_LINE.search(text)
                    if match is not None and self.address is None:
                        self.address = (match.group(1), int(match.group(2)))
                        task_status.started(self.address)
            await proc.wait()
            if self.address is None:
                raise self._error(proc.returncode)
        finally:
            with trio.CancelScope(shield=True):
                await self._terminate(proc)
                if proc.stdin is not None:
                    await proc.stdin.aclose()
            self.address = None
            self.grpc_ports = None

    def _proxy_text(self) -> str:
        """The proxy's settings that differ from the defaults, as more lines of the broker's file."""
        if self.proxy is None:
            return ""
        ours, default = property_texts(self.proxy), property_texts(ProxyConfig())
        return format_properties({key: text for key, text in ours.items() if default.get(key) != text})

    def _proxy_flag(self) -> list[str]:
        return [] if self.proxy is None else ["--enable-proxy"]

    async def _terminate(self, proc: trio.Process) -> None:
        if proc.returncode is None:
            with contextlib.suppress(ProcessLookupError):
                os.kill(proc.pid, signal.SIGTERM)
            with trio.move_on_after(STOP_TIMEOUT):
                await proc.wait()
            if proc.returncode is None:
                proc.kill()
                await proc.wait()

    def _error(self, status: int | None) -> BrokerProcessError:
        tail = self._tail()
        last = next((line for line in reversed(tail.splitlines()) if line.strip()), "(empty log)")
        return BrokerProcessError(
            f"{self.name} exited with {status} before booting: {tail}",
            f"{self.name} exited with {status} before booting ({self.log_path}): {last}",
        )

    def _tail(self) -> str:
        try:
            return self.log_path.read_text(encoding="utf-8", errors="replace")[-2000:]
        except OSError:
            return "(no log)"
