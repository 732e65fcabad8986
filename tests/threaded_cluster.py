"""An embedded cluster on a Trio loop in a daemon thread, for tests whose own code blocks (the sync facade, Spark,
Selenium) or runs under asyncio: reachable over real sockets on 127.0.0.1 port 0. Subclasses serve more beside the
cluster on the same loop (:meth:`ThreadedCluster.serve_beside`)."""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any, TypeVar

import attrs
import trio

from broker.controller import BrokerController
from broker.embedded import EmbeddedCluster
from broker.ports import BROKER, free_ports
from tests.conftest import SMALL_STORE

T = TypeVar("T")
C = TypeVar("C", bound="ThreadedCluster")
#: A hang guard for the loop to start or stop, not a performance threshold.
START_GUARD = 120
#: A hang guard for an extra broker to shut down, not a performance threshold.
STOP_GUARD = 60


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
            await self.serve_beside(cluster, extra)
            extra.cancel_scope.cancel()

    async def serve_beside(self, cluster: EmbeddedCluster, nursery: trio.Nursery) -> None:
        """Runs until :meth:`stop`, the cluster up; signals ready. A subclass starts its servers, then calls this."""
        self._ready.set()
        assert self._stop is not None
        await self._stop.wait()

    def start_extra_broker(self, name: str, **overrides: Any) -> tuple[str, Callable[[], None]]:
        """A second master ``name`` in the same cluster and name server, its broker config changed by ``overrides``.
        Returns its address and a stopper."""

        async def start() -> tuple[str, trio.CancelScope, trio.Event]:
            assert self.cluster is not None
            config = attrs.evolve(
                self.cluster.broker_config(),
                broker_name=name,
                # a fixed free port, as the cluster's own brokers: port 0 would open no fast channel (port - 2)
                listen_port=free_ports(1, self.cluster.host, **BROKER)[0],
                store_path_root_dir=str(self._data_dir / name),
                **overrides,
            )
            controller = BrokerController(config)
            scope, stopped = trio.CancelScope(), trio.Event()

            async def run(task_status: trio.TaskStatus[Any] = trio.TASK_STATUS_IGNORED) -> None:
                try:
                    with scope:
                        await controller.serve(task_status=task_status)
                finally:
                    stopped.set()

            await self._extra.start(run)
            return controller.broker_addr, scope, stopped

        addr, scope, stopped = self.call(start)

        def stop() -> None:
            async def cancel() -> None:  # returns once the broker is down: its ports closed, unregistered
                scope.cancel()
                with trio.fail_after(STOP_GUARD):
                    await stopped.wait()

            self.call(cancel)

        return addr, stop

    def start(self: C) -> C:
        self._thread.start()
        self._ready.wait(START_GUARD)
        if self._error is not None:
            raise RuntimeError("embedded cluster failed to start") from self._error
        return self

    def stop(self) -> None:
        if self._token is not None and self._stop is not None:
            with contextlib.suppress(trio.RunFinishedError):
                trio.from_thread.run_sync(self._stop.set, trio_token=self._token)
        self._thread.join(START_GUARD)

    def __enter__(self: C) -> C:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

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
