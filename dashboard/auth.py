"""The dashboard's own login (rocketmq-dashboard's ``rocketmq.config.loginRequired`` and its users file), separate
from the ACL credentials the dashboard signs its calls to the brokers with (:mod:`dashboard.settings`).

The users file has one ``name=password[,1]`` line per user, ``,1`` marking an administrator; it is read at every
login, so edits apply without a restart. With ``login_required`` on, :class:`LoginMiddleware` sends a browser with
no session to ``/login`` and answers 401 to the JSON endpoints; a user who is not an administrator may call the
endpoints the role permission file allows (:mod:`dashboard.permissions`: by default every read, a test message,
resending and exporting dead letters) and gets 403 for the others.

A login is kept on the server, as rocketmq-dashboard's servlet session: :class:`Sessions` maps a random id, the only
thing Starlette's signed session cookie carries, to the user. Logging out forgets the id, and so does
``idle_timeout`` seconds without a request (Spring's ``server.servlet.session.timeout``, 30 minutes; ``math.inf``:
never); a copy of the cookie is worthless afterwards. Only :class:`Sessions` ends a login: the cookie lasts as long as
the browser (no max-age, as a servlet's JSESSIONID). Every session ends with the process.
"""

from __future__ import annotations

import hmac
import secrets
import time
from collections.abc import Callable
from pathlib import Path
from urllib.parse import quote

import attrs
from starlette.middleware.base import BaseHTTPMiddleware, RequestResponseEndpoint
from starlette.requests import Request
from starlette.responses import JSONResponse, RedirectResponse, Response
from starlette.types import ASGIApp

from dashboard.permissions import RolePermissions
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


@attrs.define
class Sessions:
    """The logged-in users by session id (see the module docstring); ``clock`` gives monotonic seconds."""

    idle_timeout: float
    clock: Callable[[], float] = time.monotonic
    _live: dict[str, tuple[User, float]] = attrs.field(factory=dict)

    def open(self, user: User) -> str:
        """A new session of ``user``; its id (unguessable) goes into the cookie. Ended sessions are dropped here."""
        now = self.clock()
        for sid in [sid for sid, (_, seen) in self._live.items() if now - seen > self.idle_timeout]:
            del self._live[sid]
        sid = secrets.token_urlsafe(32)
        self._live[sid] = (user, now)
        return sid

    def user(self, sid: object) -> User | None:
        """The user of session ``sid``, whose idle time starts again; ``None`` when it ended or never was."""
        if not isinstance(sid, str) or (entry := self._live.get(sid)) is None:
            return None
        user, seen = entry
        now = self.clock()
        if now - seen > self.idle_timeout:
            del self._live[sid]
            return None
        self._live[sid] = (user, now)
        return user

    def close(self, sid: object) -> None:
        """End session ``sid`` (nothing when it is not one)."""
        if isinstance(sid, str):
            self._live.pop(sid, None)


def login(request: Request, user: User) -> None:
    """Start a session of ``user`` for this browser, ending the one it had (a new id at every login)."""
    sessions: Sessions = request.app.state.sessions
    sessions.close(request.session.get("sid"))
    request.session.clear()
    request.session["sid"] = sessions.open(user)


def logout(request: Request) -> None:
    """End this browser's session on the server and clear its cookie."""
    sessions: Sessions = request.app.state.sessions
    sessions.close(request.session.get("sid"))
    request.session.clear()


def session_user(request: Request) -> User | None:
    """The user logged in on this request's session, ``None`` when there is none."""
    sessions: Sessions = request.app.state.sessions
    return sessions.user(request.session.get("sid"))


class LoginMiddleware(BaseHTTPMiddleware):
    """See the module docstring. Needs Starlette's SessionMiddleware outside it and the app's ``state.sessions``."""

    def __init__(self, app: ASGIApp, *, required: bool, permissions: RolePermissions | None = None) -> None:
        super().__init__(app)
        self.required = required
        self.permissions = permissions

    async def dispatch(self, request: Request, call_next: RequestResponseEndpoint) -> Response:
        path = request.url.path
        if not self.required or path.startswith(OPEN_PATHS):
            return await call_next(request)
        user = session_user(request)
        if user is None:
            if path.startswith("/api/"):
                return JSONResponse({"error": {"message": "login required"}}, status_code=401)
            asked = path + (f"?{request.url.query}" if request.url.query else "")
            return RedirectResponse(f"/login?next={quote(asked)}", status_code=303)
        if path.startswith("/api/") and not user.admin and not self._normal_may(request.method, path):
            message = f"user {user.name} has no permission for {request.method} {path}"
            return JSONResponse({"error": {"message": message}}, status_code=403)
        return await call_next(request)

    def _normal_may(self, method: str, path: str) -> bool:
        """Without permission rules (an app built without them), reads only."""
        if self.permissions is None:
            return method in ("GET", "HEAD")
        return self.permissions.allows(method, path)
