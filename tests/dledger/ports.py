"""Peer strings for DLedger groups in tests (the ports come from :func:`broker.embedded_dledger.free_ports`)."""

from __future__ import annotations

from broker.embedded_dledger import free_ports

__all__ = ["free_ports", "peers_string"]


def peers_string(ports: list[int]) -> str:
    return ";".join(f"n{i}-127.0.0.1:{port}" for i, port in enumerate(ports))
