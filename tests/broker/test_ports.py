"""broker.ports: free ports that a restart can bind again, outside the range client connections take theirs from."""

from __future__ import annotations

import socket

import pytest

from broker import ports
from broker.ports import BROKER, ephemeral_range, free_ports


def test_the_ports_are_free_distinct_and_below_the_ephemeral_range() -> None:
    low, _ = ephemeral_range()
    chosen = free_ports(5, **BROKER)
    groups = [range(port - 2, port + 2) for port in chosen]
    assert len({p for group in groups for p in group}) == 5 * 4  # no two groups overlap
    for group in groups:
        assert group[-1] < low
        for taken in group:
            with socket.socket() as sock:
                sock.bind(("127.0.0.1", taken))


def test_a_taken_port_is_never_chosen(monkeypatch: pytest.MonkeyPatch) -> None:
    # Both below the ephemeral range, where no client connection of the machine takes a port meanwhile.
    free, held = free_ports(2, span=2)
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", held + 1))
        monkeypatch.setattr(ports, "_candidates", lambda span, before: [held, held + 1, free])
        assert free_ports(1, span=2) == [free]
        with pytest.raises(OSError, match="fewer than 2 free ports"):
            free_ports(2, span=2)
