"""Fixtures of the dashboard tests: ``dash``, the app served over a real socket beside the embedded cluster, with an
httpx client on it (the JSON endpoints' tests); the browser fixtures live in :mod:`tests.dashboard.browser`."""

from __future__ import annotations

import contextlib
import tempfile
from collections.abc import AsyncIterator
from typing import Any

import attrs
import httpx
import pytest
import trio
from starlette.applications import Starlette

from broker.embedded import EmbeddedCluster
from client.admin import Admin
from dashboard.app import create_app
from dashboard.settings import DashboardSettings
from tests.dashboard.live import serve_dashboard


@attrs.frozen
class Dash:
    cluster: EmbeddedCluster
    app: Starlette
    http: httpx.AsyncClient

    @property
    def admin(self) -> Admin:
        admin: Admin = self.app.state.admin
        return admin

    async def get(self, url: str, status: int = 200) -> Any:
        response = await self.http.get(url)
        assert response.status_code == status, response.text
        return response.json()

    async def post(self, url: str, body: Any, status: int = 200) -> Any:
        response = await self.http.post(url, json=body)
        assert response.status_code == status, response.text
        return response.json()

    async def delete(self, url: str, status: int = 200) -> Any:
        response = await self.http.delete(url)
        assert response.status_code == status, response.text
        return response.json()


async def open_dash(cluster: EmbeddedCluster, nursery: trio.Nursery, **settings: Any) -> AsyncIterator[Dash]:
    """The dashboard with ``settings``; the charts' day files go to a directory of its own, removed afterwards,
    unless ``data_path`` says where."""
    with contextlib.ExitStack() as stack:
        if "data_path" not in settings:
            settings["data_path"] = stack.enter_context(tempfile.TemporaryDirectory(prefix="dashboard-data-"))
        app = create_app(DashboardSettings(namesrv_addr=cluster.namesrv_addr, port=0, **settings), sample=False)
        async with serve_dashboard(app, nursery) as url, httpx.AsyncClient(base_url=url, timeout=30) as http:
            yield Dash(cluster, app, http)


@pytest.fixture
async def dash(embedded_cluster: EmbeddedCluster, nursery: trio.Nursery) -> AsyncIterator[Dash]:
    """The dashboard (sampler stopped: tests drive ``app.state.sampler.sample_once()``) on the embedded cluster."""
    async for d in open_dash(embedded_cluster, nursery):
        yield d


from tests.dashboard.browser import browser  # noqa: E402, F401  (the module-scoped Chromium fixture)
