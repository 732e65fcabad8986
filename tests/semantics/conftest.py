"""Fixtures for the semantics tests."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from broker.embedded import EmbeddedCluster
from tests.conftest import QUIET_FILES, SMALL_STORE


@pytest.fixture
async def long_haul_cluster(tmp_path: Path) -> AsyncIterator[EmbeddedCluster]:
    """The embedded cluster for hours of virtual time: the store flushes, and the timer saves its checkpoint, once a
    minute instead of every 500 ms and every second, so the test does not spend its time in those services' file
    work (each timer save is a worker thread with two fsyncs, and the suite's clock holds while it runs)."""
    async with EmbeddedCluster(tmp_path / "cluster", **SMALL_STORE, **QUIET_FILES) as cluster:
        yield cluster
