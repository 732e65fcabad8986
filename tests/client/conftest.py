"""Client test fixtures.

The client runs under Trio and asyncio, the broker only under Trio. So the integration tests opt into anyio's pytest
plugin (``@pytest.mark.anyio``, parametrised over both backends by the ``anyio_backend`` fixture) and the embedded
cluster runs on a Trio loop in a background thread (:class:`ThreadedCluster`), reachable over real sockets on
127.0.0.1 port 0. Tests that need virtual time (``autojump_clock``) stay plain pytest-trio tests and use the
in-loop ``embedded_cluster`` fixture instead.

pytest-trio's ``trio_mode`` marks every ``async def`` test as a Trio test; the hook below takes that mark off the tests
that asked for anyio, so anyio's runner (not Trio's) runs them.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.threaded_cluster import ThreadedCluster


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "broker(**overrides): BrokerConfig overrides for the client tests' cluster")


@pytest.hookimpl(trylast=True)
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    for item in items:
        if item.get_closest_marker("anyio") is not None:
            item.own_markers[:] = [m for m in item.own_markers if m.name != "trio"]


@pytest.fixture(params=["trio", "asyncio"])
def anyio_backend(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@pytest.fixture
def cluster(tmp_path: Path, request: pytest.FixtureRequest) -> Iterator[ThreadedCluster]:
    """A name server and a broker on a Trio loop in another thread, usable from either backend.

    ``@pytest.mark.broker(**overrides)`` on a test changes the broker's config (e.g. a larger CommitLog segment)."""
    marker = request.node.get_closest_marker("broker")
    overrides = dict(marker.kwargs) if marker is not None else {}
    threaded = ThreadedCluster(tmp_path / "cluster", **overrides).start()
    try:
        yield threaded
    finally:
        threaded.stop()
