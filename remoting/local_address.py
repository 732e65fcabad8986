"""The address a server advertises when it is not told one: RocketMQ's ``RemotingUtil.getLocalAddress``
(remoting/src/main/java/org/apache/rocketmq/remoting/common/RemotingUtil.java), brokerIP1's and brokerIP2's default.

:func:`local_address` picks, among the IPv4 addresses of the host's interfaces other than bridges
(``/sys/class/net/<name>/bridge``) and loopback, the first outside 127.0/192.168, else the last one; with none, the
host name's address (Java's ``InetAddress.getLocalHost()``), else 127.0.0.1. Interfaces are taken in index order and
each by its primary address (Linux ``SIOCGIFADDR``); Java's own order may differ. Ours leaves out Java's IPv6 step (a
host without IPv4 addresses gets the host name's address): a broker address here is IPv4.

:func:`advertised_host` is the default for a server that binds ``listen_host``: that address when it names one
interface, else :func:`local_address`.

:func:`local_host_name` is Java's ``InetAddress.getLocalHost().getHostName()``: brokerName's and proxyName's default.
"""

from __future__ import annotations

import contextlib
import fcntl
import functools
import socket
import struct
from pathlib import Path
from typing import Final

#: Hosts that bind every interface.
WILDCARD_HOSTS: Final = frozenset({"0.0.0.0", "::", ""})
_SIOCGIFADDR: Final = 0x8915


def advertised_host(listen_host: str) -> str:
    """``listen_host`` unless it binds every interface, else :func:`local_address`."""
    return local_address() if listen_host in WILDCARD_HOSTS else listen_host


@functools.cache
def local_address() -> str:
    """The host's address as ``RemotingUtil.getLocalAddress`` chooses it (see the module docstring); computed once
    per process."""
    found = [ip for ip in interface_ipv4_addresses() if not ip.startswith("127.")]
    for ip in found:
        if not ip.startswith(("127.0", "192.168")):
            return ip
    if found:
        return found[-1]
    try:
        return socket.gethostbyname(socket.gethostname())
    except OSError:
        return "127.0.0.1"


@functools.cache
def local_host_name(fallback: str) -> str:
    """The host's name when it resolves, as ``InetAddress.getLocalHost().getHostName()`` gives it, else ``fallback``
    (Java's getLocalHost throws UnknownHostException for a name that does not resolve); computed once per process."""
    try:
        name = socket.gethostname()
        socket.getaddrinfo(name, None)
    except (OSError, UnicodeError):
        return fallback
    return name or fallback


def interface_ipv4_addresses() -> list[str]:
    """The primary IPv4 address of each interface that is not a bridge, in index order (empty where the system
    offers no ``SIOCGIFADDR``)."""
    try:
        interfaces = socket.if_nameindex()
    except OSError:
        return []
    found = []
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sock:
        for _, name in interfaces:
            if Path("/sys/class/net", name, "bridge").exists():
                continue
            with contextlib.suppress(OSError):  # no IPv4 address on this interface
                request = struct.pack("256s", name.encode()[:15])
                found.append(socket.inet_ntoa(fcntl.ioctl(sock.fileno(), _SIOCGIFADDR, request)[20:24]))
    return found
