"""What a logged-in user who is not an administrator may do, as rocketmq-dashboard's ``role-permission.yml`` and its
``PermissionAspect``: every JSON endpoint has the rocketmq-dashboard URL of the same action (``DASHBOARD_URLS`` in
:mod:`dashboard.api`), and a Normal user may call it when a pattern of the file's ``rolePerms.Normal`` matches that
URL; an administrator may call everything. :class:`~dashboard.auth.LoginMiddleware` answers 403 otherwise.

The file is ``<rocketmq.config.dataPath>/role-permission.yml`` when it exists, else the one shipped beside this module
(rocketmq-dashboard's default: every ``*.query``, a test message, resending and exporting dead letters). A file that
cannot be read or does not have that shape is a :class:`PermissionFileError` at start (the dashboard does not start,
as rocketmq-dashboard); changed later, it is read again at the next request, and a change that does not load is
logged and the rules read before are kept.

Patterns are rocketmq-dashboard's ``MatcherUtil`` (src/main/java/org/apache/rocketmq/dashboard/util/MatcherUtil.java):
``**`` any characters, ``*`` any characters but ``/``, ``?`` one character, the whole URL matched; every other
character goes into the regular expression as it is, so ``.`` matches any character and a file may use groups,
alternatives and classes (``/cluster/(list|brokerConfig).query``). A pattern that is not a regular expression is a
:class:`PermissionFileError`.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Mapping
from pathlib import Path

import attrs
import yaml

from dashboard.settings import SettingsError

log = logging.getLogger(__name__)

FILE_NAME = "role-permission.yml"
DEFAULT_FILE = Path(__file__).parent / FILE_NAME
NORMAL_ROLE = "Normal"
_TOKEN = re.compile(r"\*\*|\*|\?|[^*?]+")


class PermissionFileError(SettingsError):
    """The permission file cannot be read or is not ``rolePerms: {Normal: [pattern...]}``; the message names it."""


def url_pattern(access_url: str) -> re.Pattern[str]:
    """The regular expression of one ``role-permission.yml`` pattern (see the module docstring); ``re.error`` when
    it is not one."""
    parts = []
    for token in _TOKEN.findall(access_url):
        parts.append({"**": ".*", "*": "[^/]*", "?": "."}.get(token) or token)
    return re.compile("".join(parts))


def read_patterns(path: Path) -> list[re.Pattern[str]]:
    """The Normal role's patterns in the file at ``path`` (none when the file names no such role)."""
    try:
        data = yaml.safe_load(path.read_text("utf-8"))
    except (OSError, UnicodeDecodeError, yaml.YAMLError) as exc:
        raise PermissionFileError(f"cannot read {path}: {exc}") from None
    roles = data.get("rolePerms") if isinstance(data, dict) else None
    if not isinstance(roles, dict):
        raise PermissionFileError(f"{path} has no rolePerms mapping")
    urls = roles.get(NORMAL_ROLE) or []
    if not isinstance(urls, list) or not all(isinstance(u, str) for u in urls):
        raise PermissionFileError(f"rolePerms.{NORMAL_ROLE} in {path} must be a list of URL patterns")
    patterns = []
    for url in urls:
        try:
            patterns.append(url_pattern(url.strip()))
        except re.error as exc:
            raise PermissionFileError(f"{url!r} of rolePerms.{NORMAL_ROLE} in {path} is not valid: {exc}") from None
    return patterns


@attrs.define
class RolePermissions:
    """The rules of ``<data_path>/role-permission.yml`` (or the shipped file) for ``urls``: (method, path) of an
    endpoint -> its rocketmq-dashboard URL. Built at start, so a bad file fails then."""

    data_path: Path
    urls: Mapping[tuple[str, str], str]
    _source: tuple[Path, int, int] | None = attrs.field(default=None, init=False)
    _patterns: list[re.Pattern[str]] = attrs.field(factory=list, init=False)

    def __attrs_post_init__(self) -> None:
        self._refresh(first=True)

    def file(self) -> Path:
        own = self.data_path / FILE_NAME
        return own if own.exists() else DEFAULT_FILE

    def _refresh(self, *, first: bool = False) -> None:
        path = self.file()
        try:
            stat = path.stat()
            source = (path, stat.st_mtime_ns, stat.st_size)
        except OSError as exc:
            if first:
                raise PermissionFileError(f"cannot read {path}: {exc}") from None
            return
        if source == self._source:
            return
        try:
            self._patterns = read_patterns(path)
        except PermissionFileError:
            if first:
                raise
            log.exception("keeping the permissions read before")
        self._source = source

    def dashboard_url(self, method: str, path: str) -> str | None:
        return self.urls.get(("GET" if method == "HEAD" else method, path))

    def allows(self, method: str, path: str) -> bool:
        """Whether a Normal user may call ``method path`` (an endpoint without a rocketmq-dashboard URL: no)."""
        url = self.dashboard_url(method, path)
        if url is None:
            return False
        self._refresh()
        return any(p.fullmatch(url) for p in self._patterns)
