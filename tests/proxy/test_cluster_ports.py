"""The test harness's broker process (tests/proxy/cluster.py): a port picked for its first start that another
process binds first (the other pytest run of `make test` picks from the same range) makes it pick again instead of
failing the test that started it."""

from __future__ import annotations

import socket
from pathlib import Path

import trio

from tests.e2e.harness import kill_all
from tests.proxy.cluster import GrpcCluster


async def test_a_first_start_whose_port_was_taken_meanwhile_picks_new_ports(
    tmp_path: Path, nursery: trio.Nursery
) -> None:
    cluster = GrpcCluster(tmp_path / "cluster")
    taken = cluster.grpc_port
    with socket.socket() as squatter:
        squatter.bind(("127.0.0.1", taken))
        squatter.listen()
        try:
            await cluster.start(nursery)
            assert cluster.grpc_port != taken and cluster.broker_addr
        finally:
            await kill_all()
