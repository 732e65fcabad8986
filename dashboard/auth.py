"""The dashboard's own login (rocketmq-dashboard's ``rocketmq.config.loginRequired`` and its users file), separate
from the ACL credentials the dashboard signs its calls to the brokers with (:mod:`dashboard.settings`).

The users file has one ``name=password[,1]`` line per user, ``,1`` marking an administrator; it is read at every
login, so edits apply without a restart. With ``login_required`` on, :class:`LoginMiddleware` sends a browser with
no session to ``/login`` and answers 401 to the JSON endpoints; a user who is not an administrator may look but any
change (POST, PUT, DELETE under ``/api/``) answers 403. The session is Starlette's signed cookie.
"""

from __future__ import annotations

import hmac
from pathlib import Path
from urllib.parse import quote

import attrs
from starlette.middleware.base import BaseHTTPMiddleware, RequestResponseEndpoint
from starlette.requests import Request
from starlette.responses import JSONResponse, RedirectResponse, Response
from starlette.types import ASGIApp

from remoting.codec.java_properties import parse_properties

#: Paths open without a session: the login page, logging in and out, the static files the login page needs, the icon.
OPEN_PATHS = ("/login", "/api/login", "/api/logout", "/static/", "/favicon.ico")


@attrs.frozen
class User:
    name: str
    password: str = attrs.field(repr=False)
    admin: bool = False


def read_users(path: Path) -> dict[str, User]:
    """The users of the file; an absent file has none (so nobody can log in)."""
    try:
        text = path.read_text("utf-8")
    except FileNotFoundError:
        return {}
    users = {}
    for name, value in parse_properties(text).items():
        password, _, role = value.partition(",")
        users[name] = User(name, password.strip(), role.strip() == "1")
    return users


def check_login(path: Path, name: str, password: str) -> User | None:
    """The user when ``password`` is theirs, else ``None`` (compared in constant time)."""
    user = read_users(path).get(name)
    if user is None or not hmac.compare_digest(user.password.encode(), password.encode()):
        return None
    return user


class LoginMiddleware(BaseHTTPMiddleware):
    """See the module docstring. Needs Starlette's SessionMiddleware outside it."""

    def __init__(self, app: ASGIApp, *, required: bool) -> None:
        super().__init__(app)
        self.required = required

    async def dispatch(self, request: Request, call_next: RequestResponseEndpoint) -> Response:
        path = request.url.path
        if not self.required or path.startswith(OPEN_PATHS):
            return await call_next(request)
        user = request.session.get("user")
        if not user:
            if path.startswith("/api/"):
                return JSONResponse({"error": {"message": "login required"}}, status_code=401)
            asked = path + (f"?{request.url.query}" if request.url.query else "")
            return RedirectResponse(f"/login?next={quote(asked)}", status_code=303)
        if path.startswith("/api/") and request.method not in ("GET", "HEAD") and not request.session.get("admin"):
            return JSONResponse({"error": {"message": f"user {user} may not change the cluster"}}, status_code=403)
        return await call_next(request)
