"""Free ports on 127.0.0.1 for DLedger groups: a member's peer address must be known to the others before it binds
(DLedger's ``peers`` list), so port 0 cannot be used. The ports are bound and released; another process taking one
meanwhile makes the member fail to start, loudly."""

from __future__ import annotations

import socket


def free_ports(count: int) -> list[int]:
    sockets = []
    try:
        for _ in range(count):
            s = socket.socket()
            s.bind(("127.0.0.1", 0))
            sockets.append(s)
        return [s.getsockname()[1] for s in sockets]
    finally:
        for s in sockets:
            s.close()


def peers_string(ports: list[int]) -> str:
    return ";".join(f"n{i}-127.0.0.1:{port}" for i, port in enumerate(ports))
