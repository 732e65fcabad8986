"""A live dashboard for the tests: an embedded cluster and ``mqdashboard``'s app served by Hypercorn's Trio worker,
both on 127.0.0.1 port 0, in one Trio loop (:func:`serve_dashboard`) or in a thread of their own for the blocking
browser tests (:class:`ThreadedDashboard`)."""

from __future__ import annotations

import contextlib
import functools
import threading
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import trio
from hypercorn.config import Config
from hypercorn.trio import serve
from starlette.applications import Starlette

from broker.embedded import EmbeddedCluster
from dashboard.app import create_app
from dashboard.settings import DashboardSettings
from tests.conftest import SMALL_STORE


@contextlib.asynccontextmanager
async def serve_dashboard(app: Starlette, nursery: trio.Nursery) -> AsyncIterator[str]:
    """Serve ``app`` on 127.0.0.1 port 0 until the block ends; yields its base URL."""
    config = Config()
    config.bind = ["127.0.0.1:0"]
    config.accesslog = None
    config.graceful_timeout = 1.0
    stop = trio.Event()
    done = trio.Event()

    async def run(task_status: trio.TaskStatus[list[str]] = trio.TASK_STATUS_IGNORED) -> None:
        try:
            await serve(app, config, shutdown_trigger=stop.wait, task_status=task_status)
        finally:
            done.set()

    binds = await nursery.start(run)
    try:
        yield binds[0]
    finally:
        stop.set()
        with trio.move_on_after(10):
            await done.wait()


class ThreadedDashboard:
    """See the module docstring. ``settings`` are DashboardSettings fields; ``call`` runs a coroutine function on the
    dashboard's loop (``app`` is there)."""

    def __init__(self, data_dir: Path, **settings: Any) -> None:
        self._data_dir = data_dir
        self._settings = settings
        self._ready = threading.Event()
        self._error: BaseException | None = None
        self._token: trio.lowlevel.TrioToken | None = None
        self._stop: trio.Event | None = None
        self.url = ""
        self.namesrv_addr = ""
        self.app: Starlette | None = None
        self._thread = threading.Thread(target=self._main, name="dashboard", daemon=True)

    def _main(self) -> None:
        try:
            trio.run(self._serve)
        except BaseException as exc:  # reported to the test thread
            self._error = exc
            self._ready.set()

    async def _serve(self) -> None:
        self._token = trio.lowlevel.current_trio_token()
        self._stop = trio.Event()
        async with EmbeddedCluster(self._data_dir, **SMALL_STORE) as cluster, trio.open_nursery() as nursery:
            self.namesrv_addr = cluster.namesrv_addr
            settings = DashboardSettings(namesrv_addr=cluster.namesrv_addr, port=0, **self._settings)
            self.app = create_app(settings)
            async with serve_dashboard(self.app, nursery) as url:
                self.url = url
                self._ready.set()
                await self._stop.wait()

    def __enter__(self) -> ThreadedDashboard:
        self._thread.start()
        self._ready.wait(120)
        if self._error is not None or not self.url:
            raise RuntimeError("the dashboard failed to start") from self._error
        return self

    def __exit__(self, *exc: object) -> None:
        if self._token is not None and self._stop is not None:
            with contextlib.suppress(trio.RunFinishedError):
                trio.from_thread.run_sync(self._stop.set, trio_token=self._token)
        self._thread.join(60)

    def call(self, fn: Any, *args: Any) -> Any:
        assert self._token is not None
        return trio.from_thread.run(functools.partial(fn, *args), trio_token=self._token)
