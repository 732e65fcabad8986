"""A live dashboard for the tests: an embedded cluster and ``mqdashboard``'s app served by Hypercorn's Trio worker,
both on 127.0.0.1 port 0, in one Trio loop (:func:`serve_dashboard`) or in a thread of their own for the blocking
browser tests (:class:`ThreadedDashboard`)."""

from __future__ import annotations

import contextlib
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
from tests.threaded_cluster import ThreadedCluster


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


class ThreadedDashboard(ThreadedCluster):
    """See the module docstring. ``settings`` are DashboardSettings fields, ``cluster`` the embedded cluster's
    overrides (``acl_enable``...); ``call`` runs a coroutine function on the dashboard's loop (``app`` is there)."""

    def __init__(self, data_dir: Path, *, cluster: dict[str, Any] | None = None, **settings: Any) -> None:
        super().__init__(data_dir, **(cluster or {}))
        self._settings = settings
        self.url = ""
        self.app: Starlette | None = None

    async def serve_beside(self, cluster: EmbeddedCluster, nursery: trio.Nursery) -> None:
        extra = {"data_path": str(self._data_dir / "dashboard-data"), **self._settings}  # the charts' day files there
        settings = DashboardSettings(namesrv_addr=cluster.namesrv_addr, port=0, **extra)
        self.app = create_app(settings)
        async with serve_dashboard(self.app, nursery) as url:
            self.url = url
            await super().serve_beside(cluster, nursery)
