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

import contextlib
import threading
from collections.abc import Awaitable, Callable, Iterator
from pathlib import Path
from typing import Any, TypeVar

import attrs
import pytest
import trio

from broker.controller import BrokerController
from broker.embedded import EmbeddedCluster
from tests.conftest import SMALL_STORE

T = TypeVar("T")


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


class ThreadedCluster:
    """An :class:`EmbeddedCluster` on a Trio loop in a daemon thread. ``call`` runs a coroutine function there."""

    def __init__(self, data_dir: Path, **overrides: Any) -> None:
        self._data_dir = data_dir
        self._overrides = {**SMALL_STORE, **overrides}
        self._ready = threading.Event()
        self._error: BaseException | None = None
        self._token: trio.lowlevel.TrioToken | None = None
        self._stop: trio.Event | None = None
        self.cluster: EmbeddedCluster | None = None
        self._thread = threading.Thread(target=self._main, name="embedded-cluster", daemon=True)

    def _main(self) -> None:
        try:
            trio.run(self._serve)
        except BaseException as exc:  # reported to the test thread
            self._error = exc
            self._ready.set()

    async def _serve(self) -> None:
        self._token = trio.lowlevel.current_trio_token()
        self._stop = trio.Event()
        async with EmbeddedCluster(self._data_dir, **self._overrides) as cluster, trio.open_nursery() as extra:
            self.cluster = cluster
            self._extra = extra
            self._ready.set()
            await self._stop.wait()
            extra.cancel_scope.cancel()

    def start_extra_broker(self, name: str) -> tuple[str, Callable[[], None]]:
        """A second master ``name`` in the same cluster and name server. Returns its address and a stopper."""

        async def start() -> tuple[str, trio.CancelScope]:
            assert self.cluster is not None
            config = attrs.evolve(
                self.cluster.broker_config(),
                broker_name=name,
                listen_port=0,
                store_path_root_dir=str(self._data_dir / name),
            )
            controller = BrokerController(config)
            scope = trio.CancelScope()

            async def run(task_status: trio.TaskStatus[Any] = trio.TASK_STATUS_IGNORED) -> None:
                with scope:
                    await controller.serve(task_status=task_status)

            await self._extra.start(run)
            return controller.broker_addr, scope

        addr, scope = self.call(start)

        def stop() -> None:
            async def cancel() -> None:
                scope.cancel()

            self.call(cancel)

        return addr, stop

    def start(self) -> ThreadedCluster:
        self._thread.start()
        self._ready.wait(60)
        if self._error is not None:
            raise RuntimeError("embedded cluster failed to start") from self._error
        return self

    def stop(self) -> None:
        if self._token is not None and self._stop is not None:
            with contextlib.suppress(trio.RunFinishedError):
                trio.from_thread.run_sync(self._stop.set, trio_token=self._token)
        self._thread.join(60)

    def call(self, fn: Callable[..., Awaitable[T]], *args: Any) -> T:
        assert self._token is not None
        return trio.from_thread.run(fn, *args, trio_token=self._token)

    @property
    def namesrv_addr(self) -> str:
        assert self.cluster is not None
        return self.cluster.namesrv_addr

    @property
    def broker_addr(self) -> str:
        assert self.cluster is not None
        return self.cluster.broker_addr

    def stop_broker(self) -> None:
        assert self.cluster is not None
        self.call(self.cluster.stop_broker)

    def restart_broker(self) -> None:
        assert self.cluster is not None
        self.call(self.cluster.restart_broker)


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
