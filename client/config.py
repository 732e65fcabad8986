"""Client configuration shared by producers and consumers (Java's ``ClientConfig``), with 4.9.8's defaults.

Times are in seconds (floats) on the Python side; they are converted to milliseconds only on the wire.
"""

from __future__ import annotations

import itertools
import os
import socket

import attrs

_instance_counter = itertools.count(1)


def local_ip() -> str:
    """The IPv4 address this host would use towards the outside, else 127.0.0.1. No packet is sent."""
    try:
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as probe:
            probe.connect(("10.255.255.255", 1))
            ip = str(probe.getsockname()[0])
    except OSError:
        return "127.0.0.1"
    return ip if not ip.startswith("0.") else "127.0.0.1"


def default_instance_name() -> str:
    """The PID for the first instance of the process, ``PID#n`` after that, so that two consumers of one group in
    one process get distinct client ids (Java shares one instance per process instead)."""
    n = next(_instance_counter)
    return str(os.getpid()) if n == 1 else f"{os.getpid()}#{n}"


def _split_addrs(value: str | list[str] | tuple[str, ...]) -> tuple[str, ...]:
    if isinstance(value, str):
        return tuple(a.strip() for a in value.split(";") if a.strip())
    return tuple(value)


@attrs.frozen(slots=True)
class ClientConfig:
    """``namesrv_addr`` accepts ``"h1:9876;h2:9876"`` or a list. ``client_id`` is ``ip@instanceName[@unitName]``."""

    namesrv_addr: tuple[str, ...] = attrs.field(converter=_split_addrs, default=("127.0.0.1:9876",))
    client_ip: str = attrs.field(factory=local_ip)
    instance_name: str = attrs.field(factory=default_instance_name)
    unit_name: str | None = None
    poll_name_server_interval: float = 30.0
    heartbeat_broker_interval: float = 30.0
    persist_consumer_offset_interval: float = 5.0
    rpc_timeout: float = 3.0

    @property
    def client_id(self) -> str:
        cid = f"{self.client_ip}@{self.instance_name}"
        return f"{cid}@{self.unit_name}" if self.unit_name else cid
