"""Peer strings for DLedger groups in tests (the ports come from :func:`broker.ports.free_ports`), and the
short DLedger timings real-process tests run with."""

from __future__ import annotations

from broker.ports import free_ports

__all__ = ["FAST", "free_ports", "peers_string"]

#: Heartbeats every 500 ms, a follower votes after 3 missed ones, votes 100-300 ms apart: an election within about
#: two seconds of a leader's death instead of DLedger's default of several seconds.
FAST = {"heartBeatTimeIntervalMs": 500, "maxHeartBeatLeak": 3, "minVoteIntervalMs": 100, "maxVoteIntervalMs": 300}


def peers_string(ports: list[int]) -> str:
    return ";".join(f"n{i}-127.0.0.1:{port}" for i, port in enumerate(ports))
