"""Free ports for servers that must bind the same port again after a restart (DLedger peers, brokers and name
servers that tests and benches kill and start again).

Port 0 would give a port from the kernel's ephemeral range (``/proc/sys/net/ipv4/ip_local_port_range``), the range
outgoing connections take their local ports from: while its owner restarts, any client connection on the machine may
take it, and the restart then fails with "address already in use". :func:`free_ports` picks below that range instead.
Another process binding a picked port before its owner does still makes that start fail, loudly.
"""

from __future__ import annotations

import random
import socket
from pathlib import Path

_RANGE_FILE = Path("/proc/sys/net/ipv4/ip_local_port_range")
_LOWEST = 10000  # below: the well-known service ports of the machine's other servers
#: ``free_ports`` arguments for a broker's listen port: p - 2 (the fast channel) to p + 1 (the HA listener) free
BROKER = {"span": 2, "before": 2}


def ephemeral_range() -> tuple[int, int]:
    """The kernel's range for outgoing connections' local ports (Linux's default where it cannot be read)."""
    try:
        low, high = (int(part) for part in _RANGE_FILE.read_text().split())
    except (OSError, ValueError):
        return 32768, 60999
    return low, high


def free_ports(count: int, host: str = "127.0.0.1", *, span: int = 1, before: int = 0) -> list[int]:
    """``count`` distinct ports free on ``host`` right now, each with the ``before`` ports below it and the
    ``span - 1`` above it free too, no two such groups overlapping, none in :func:`ephemeral_range`. A broker binds
    its listen port p, its fast channel p - 2 and its HA listener p + 1: :data:`BROKER`. Raises OSError when none
    are left."""
    held: list[socket.socket] = []
    chosen: list[int] = []
    try:
        for port in _candidates(span, before):
            group = _bind_all(host, range(port - before, port + span))
            if group is not None:
                held += group
                chosen.append(port)
                if len(chosen) == count:
                    return chosen
    finally:
        for sock in held:
            sock.close()
    raise OSError(f"fewer than {count} free ports of span {span} on {host} below the ephemeral range")


def _candidates(span: int, before: int) -> list[int]:
    """Up to 2,000 ports in random order: below the ephemeral range, or above it on a machine with no room below."""
    low, high = ephemeral_range()
    below, above = range(_LOWEST + before, low - span + 1), range(high + 1 + before, 65536 - span + 1)
    pool = below if len(below) > 0 else above
    return random.sample(pool, k=min(2000, len(pool)))


def _bind_all(host: str, ports: range) -> list[socket.socket] | None:
    """Sockets bound to every port of ``ports``, or None (and nothing held) if one is taken."""
    bound: list[socket.socket] = []
    for port in ports:
        sock = socket.socket()
        try:
            sock.bind((host, port))
        except OSError:
            sock.close()
            for other in bound:
                other.close()
            return None
        bound.append(sock)
    return bound
