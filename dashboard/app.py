"""The dashboard's ASGI application (Starlette on anyio, so it runs under Hypercorn's Trio worker).

:func:`create_app` builds it from :class:`~dashboard.settings.DashboardSettings`. Its lifespan owns the admin client
(:class:`client.admin.Admin`, the dashboard's only way to the cluster, held by :class:`~dashboard.ops.AdminSwitch` so
the Ops page can point it at other name servers) and the chart :class:`~dashboard.sampler.Sampler`
running beside it; both stop when the server shuts down. The pages are HTML shells (``templates/``) whose scripts
(``static/``) fetch the JSON endpoints of :mod:`dashboard.api`; the chart library is served from ``static/vendor``.
"""

from __future__ import annotations

import secrets
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import anyio
from starlette.applications import Starlette
from starlette.middleware import Middleware
from starlette.middleware.sessions import SessionMiddleware
from starlette.requests import Request
from starlette.responses import RedirectResponse, Response
from starlette.routing import Mount, Route
from starlette.staticfiles import StaticFiles
from starlette.templating import Jinja2Templates

from client.admin import Admin
from dashboard.api import DASHBOARD_URLS, ROUTES
from dashboard.auth import LoginMiddleware, Sessions, session_user
from dashboard.history import DayFiles
from dashboard.ops import AdminSwitch
from dashboard.permissions import RolePermissions
from dashboard.proxy import ProxyAddrs
from dashboard.sampler import Sampler
from dashboard.settings import DashboardSettings, client_config
from dashboard.trace import TraceFinder, default_finder

HERE = Path(__file__).parent
TEMPLATES = Jinja2Templates(directory=HERE / "templates")

#: The navigation bar: (path, title); every page is reachable from it.
NAV = [
    ("/cluster", "Cluster"),
    ("/topics", "Topics"),
    ("/groups", "Consumer groups"),
    ("/producers", "Producers"),
    ("/messages", "Messages"),
    ("/dlq", "Dead letters"),
    ("/charts", "Charts"),
    ("/acl", "ACL"),
    ("/ops", "Ops"),
    ("/proxy", "Proxy"),
]
#: Pages: path -> (template, title). Detail pages (topic, group, message) are reached from the lists.
PAGES = {
    "/cluster": ("cluster.html", "Cluster"),
    "/topics": ("topics.html", "Topics"),
    "/topic": ("topic.html", "Topic"),
    "/groups": ("groups.html", "Consumer groups"),
    "/group": ("group.html", "Consumer group"),
    "/producers": ("producers.html", "Producers"),
    "/messages": ("messages.html", "Messages"),
    "/message": ("message.html", "Message"),
    "/dlq": ("dlq.html", "Dead letters"),
    "/charts": ("charts.html", "Charts"),
    "/acl": ("acl.html", "ACL"),
    "/ops": ("ops.html", "Ops"),
    "/proxy": ("proxy.html", "Proxy"),
    "/login": ("login.html", "Login"),
}


async def page(request: Request) -> Response:
    template, title = PAGES[request.url.path]
    settings: DashboardSettings = request.app.state.settings
    context = {
        "title": title,
        "nav": NAV,
        "path": request.url.path,
        "user": user.name if settings.login_required and (user := session_user(request)) else None,
        "namesrv": request.app.state.ops.current if hasattr(request.app.state, "ops") else settings.namesrv_addr,
    }
    return TEMPLATES.TemplateResponse(request, template, context)


async def home(request: Request) -> Response:
    return RedirectResponse("/cluster", status_code=303)


async def no_icon(request: Request) -> Response:
    """No favicon: an empty answer rather than a 404 in every page's console."""
    return Response(status_code=204)


def create_app(
    settings: DashboardSettings, *, trace_finder: TraceFinder | None = None, sample: bool = True
) -> Starlette:
    """The app; ``trace_finder`` defaults to the client's (:func:`dashboard.trace.default_finder`), ``sample=False``
    (or ``rocketmq.config.enableDashBoardCollect=false``) leaves the sampler stopped (it can still be driven with
    ``app.state.sampler.sample_once()``)."""
    config = client_config(settings)  # raises SettingsError before anything starts
    # a permission file that does not load fails here too (PermissionFileError), as rocketmq-dashboard does not start
    permissions = RolePermissions(Path(settings.data_path), DASHBOARD_URLS) if settings.login_required else None

    @asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        switch = AdminSwitch(config, list(settings.namesrv_addrs))
        async with anyio.create_task_group() as tg:
            await tg.start(switch.run)
            assert switch.admin is not None
            app.state.ops = switch
            app.state.admin = switch.admin
            files = DayFiles(Path(settings.data_path))
            sampler = Sampler(switch.admin, files, settings.sample_interval, settings.sample_concurrency)
            app.state.sampler = sampler

            def follow(admin: Admin) -> None:  # every endpoint and the sampler read through the admin in use
                app.state.admin = sampler.admin = admin

            switch.on_change = follow
            if app.state.collecting:
                tg.start_soon(sampler.run)
            yield
            tg.cancel_scope.cancel()

    routes = [
        Route("/", home),
        Route("/favicon.ico", no_icon),
        *(Route(path, page) for path in PAGES),
        *ROUTES,
        Mount("/static", StaticFiles(directory=HERE / "static"), name="static"),
    ]
    secret = settings.session_secret or secrets.token_hex(32)
    # max_age=None: a browser-session cookie (as a servlet's JSESSIONID) whose signature never expires; Starlette
    # re-sends the cookie only when the session changes, so an age limit would end a busy login. Sessions ends it.
    middleware = [
        Middleware(SessionMiddleware, secret_key=secret, max_age=None, same_site="strict"),
        Middleware(LoginMiddleware, required=settings.login_required, permissions=permissions),
    ]
    app = Starlette(routes=routes, middleware=middleware, lifespan=lifespan)
    app.state.settings = settings
    app.state.sessions = Sessions(settings.session_timeout)
    app.state.collecting = sample and settings.enable_collect
    app.state.proxies = ProxyAddrs.of(settings.proxy_addrs, settings.proxy_addr)
    app.state.trace_finder = trace_finder if trace_finder is not None else default_finder(settings.msg_track_topic_name)
    return app
