"""Fixtures of the 5.x gRPC tests: a real ``mqnamesrv`` + ``mqbroker --enable-proxy`` pair (tests/proxy/cluster.py)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest
import trio

from tests.e2e.harness import kill_all
from tests.proxy.cluster import GrpcCluster


@pytest.fixture
async def grpc_cluster(tmp_path: Path, nursery: trio.Nursery) -> AsyncIterator[GrpcCluster]:
    cluster = GrpcCluster(tmp_path / "cluster")
    try:
        await cluster.start(nursery)
        yield cluster
    finally:
        await kill_all()
