"""The dashboard's settings, with rocketmq-dashboard's property names (its ``application.properties``:
``rocketmq.config.namesrvAddr``, ``server.port``, ``rocketmq.config.loginRequired``...), read from ``-c file``, the
``NAMESRV_ADDR`` environment variable and the command line (in that order, the later winning).

:func:`client_config` turns them into the admin client's :class:`~client.config.ClientConfig`. The ACL credentials
(``rocketmq.config.accessKey`` / ``secretKey``) need a client that signs requests, ``rocketmq.config.useTLS`` one that
connects with TLS: on a client without those fields it raises :class:`SettingsError` rather than run unsigned or in
plain text against a cluster that would refuse every call.
"""

from __future__ import annotations

import logging
import math
import os
import re
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import attrs

from client.config import ClientConfig
from client.vip import VIP_CHANNEL_ENV
from remoting.codec.java_properties import decode_properties_file, parse_properties

log = logging.getLogger(__name__)


class SettingsError(ValueError):
    """A setting that cannot be used: the message names it."""


def _bool(value: object) -> bool:
    """``true`` (any case) or True; anything else is false, as Spring reads a boolean property."""
    return str(value).strip().lower() == "true"


#: Spring Boot's ``DurationStyle``: the simple form (an integer and an optional unit, in any case) and ISO-8601
#: (``PT30M``, ``P1DT2H``; ``java.time.Duration.parse``).
_SIMPLE = re.compile(r"([+-]?\d+)([a-z]{0,2})", re.IGNORECASE)
_SECONDS_PER = {"ns": 1e-9, "us": 1e-6, "ms": 1e-3, "s": 1.0, "m": 60.0, "h": 3600.0, "d": 86400.0, "": 1.0}
_ISO_8601 = re.compile(
    r"([-+]?)P(?:([-+]?\d+)D)?(T(?:([-+]?\d+)H)?(?:([-+]?\d+)M)?(?:([-+]?\d+)(?:[.,](\d{0,9}))?S)?)?", re.IGNORECASE
)


def spring_duration(value: object) -> float:
    """Seconds of a Spring duration (``30m``, ``45S``, ``1800``: seconds without a unit; ``PT30M``); a number is
    taken as seconds. ValueError for anything else."""
    if isinstance(value, int | float):
        return float(value)
    text = str(value).strip()
    if (simple := _SIMPLE.fullmatch(text)) and simple[2].lower() in _SECONDS_PER:
        return int(simple[1]) * _SECONDS_PER[simple[2].lower()]
    if (iso := _ISO_8601.fullmatch(text)) and iso[3] != "T" and any(iso[i] for i in (2, 4, 5, 6)):
        return _iso_seconds(iso)
    raise ValueError(f"not a duration (such as 30m, 1800 or PT30M): {value!r}")


def _iso_seconds(match: re.Match[str]) -> float:
    """The seconds of a matched ISO-8601 duration (Java's ``Duration.parse``: each part and the whole signed)."""
    days, hours, minutes, seconds, fraction = (match[i] or "0" for i in (2, 4, 5, 6, 7))
    whole = int(seconds) + (-1 if seconds.startswith("-") else 1) * int(fraction.ljust(9, "0")) / 1e9
    total = int(days) * 86400 + int(hours) * 3600 + int(minutes) * 60 + whole
    return -total if match[1] == "-" else total


def servlet_session_timeout(value: object) -> float:
    """Seconds a servlet session lasts idle for ``server.servlet.session.timeout`` (a Spring duration), as Spring
    Boot hands it to Tomcat (``TomcatServletWebServerFactory.getSessionTimeoutInMinutes``): whole minutes, at least
    one; zero or less never ends (``math.inf``)."""
    seconds = spring_duration(value)
    return math.inf if seconds <= 0 else max(seconds // 60, 1) * 60.0


def default_vip_channel() -> bool:
    """rocketmq-dashboard's ``isVIPChannel`` default: the ``com.rocketmq.sendMessageWithVIPChannel`` property
    (``COM_ROCKETMQ_SEND_MESSAGE_WITH_VIP_CHANNEL`` here), else ``true`` (its RMQConfigure), read as
    ``Boolean.parseBoolean``."""
    return _bool(os.environ.get(VIP_CHANNEL_ENV, "true"))


def _addr_list(value: str | Iterable[str]) -> tuple[str, ...]:
    """A list of name server entries: a comma-separated text or a sequence; blank entries dropped."""
    items = value.split(",") if isinstance(value, str) else [str(v) for v in value]
    return tuple(v.strip() for v in items if v.strip())


def _prop(name: str) -> dict[str, str]:
    return {"property": name}


@attrs.frozen
class DashboardSettings:
    """Every setting of ``mqdashboard``; the metadata ``property`` is its name in a ``-c`` properties file."""

    namesrv_addr: str = attrs.field(default="127.0.0.1:9876", metadata=_prop("rocketmq.config.namesrvAddr"))
    host: str = attrs.field(default="127.0.0.1", metadata=_prop("server.address"))
    port: int = attrs.field(default=8080, converter=int, metadata=_prop("server.port"))
    #: Seconds between two samples of the charts (rocketmq-dashboard collects every minute).
    sample_interval: float = attrs.field(
        default=60.0, converter=float, validator=attrs.validators.gt(0), metadata=_prop("rocketmq.config.sampleSeconds")
    )
    #: Whether the dashboard samples the charts at all (each sample asks every broker and every topic's queues).
    enable_collect: bool = attrs.field(
        default=True, converter=_bool, metadata=_prop("rocketmq.config.enableDashBoardCollect")
    )
    #: Topics whose put rate one sample asks the brokers for at once.
    sample_concurrency: int = attrs.field(
        default=16, converter=int, validator=attrs.validators.gt(0), metadata=_prop("rocketmq.config.sampleConcurrency")
    )
    #: Seconds an admin call waits: 5, the ``timeoutMillis`` of the ``DefaultMQAdminExt`` rocketmq-dashboard's
    #: ``MQAdminFactory`` builds when ``rocketmq.config.timeoutMillis`` is unset
    #: (tools/src/main/java/org/apache/rocketmq/tools/admin/DefaultMQAdminExt.java).
    rpc_timeout: float = attrs.field(default=5.0, converter=float, metadata=_prop("rocketmq.config.rpcTimeoutSeconds"))
    login_required: bool = attrs.field(default=False, converter=_bool, metadata=_prop("rocketmq.config.loginRequired"))
    #: The users file (``name=password[,1]`` lines, ``,1`` for an administrator); default
    #: ``<dataPath>/users.properties``.
    users_file: str | None = attrs.field(default=None, metadata=_prop("rocketmq.config.usersFile"))
    data_path: str = attrs.field(default="/tmp/rocketmq-console/data", metadata=_prop("rocketmq.config.dataPath"))
    #: Signs the session cookie; a random one per start when unset. The sessions themselves end with the process.
    session_secret: str | None = attrs.field(default=None, repr=False, metadata=_prop("rocketmq.config.sessionSecret"))
    #: Seconds a login lasts without a request (Spring's servlet session timeout: 30 minutes; ``30m``, ``1800``,
    #: ``PT30M``...; whole minutes, ``math.inf`` for zero or less: see :func:`servlet_session_timeout`).
    session_timeout: float = attrs.field(
        default=1800.0, converter=servlet_session_timeout, metadata=_prop("server.servlet.session.timeout")
    )
    access_key: str | None = attrs.field(default=None, metadata=_prop("rocketmq.config.accessKey"))
    secret_key: str | None = attrs.field(default=None, repr=False, metadata=_prop("rocketmq.config.secretKey"))
    #: The trace topic a message's trace is read from; unset: RMQ_SYS_TRACE_TOPIC and the C++ client's trace topics.
    msg_track_topic_name: str | None = attrs.field(default=None, metadata=_prop("rocketmq.config.msgTrackTopicName"))
    #: Connect to the name servers and brokers over TLS (RocketMQ's ``useTLS``), without checking their certificate.
    use_tls: bool = attrs.field(default=False, converter=_bool, metadata=_prop("rocketmq.config.useTLS"))
    #: Send what RocketMQ's clients send there to the brokers' VIP port, ``port - 2`` (``vipChannelEnabled``); by
    #: default :func:`default_vip_channel`, on. An empty value keeps the default, as RMQConfigure's setter ignores it.
    is_vip_channel: bool = attrs.field(
        factory=default_vip_channel, converter=_bool, metadata=_prop("rocketmq.config.isVIPChannel")
    )
    #: The name servers the Ops page offers (rocketmq-dashboard's list, comma-separated in a file: each entry one
    #: ``namesrvAddr`` value, ``h1:9876;h2:9876`` for a cluster of several); in a ``-c`` file the first is used, even
    #: over ``namesrvAddr`` (as Spring binds RMQConfigure: :func:`_first_of_lists`).
    namesrv_addrs: tuple[str, ...] = attrs.field(
        default=(), converter=_addr_list, metadata=_prop("rocketmq.config.namesrvAddrs")
    )

    #: The proxy addresses the Proxy page offers (rocketmq-dashboard's ``rocketmq.config.proxyAddrs``, here
    #: comma-separated); in a ``-c`` file the first is the current one, even over ``proxyAddr``.
    proxy_addrs: tuple[str, ...] = attrs.field(
        default=(), converter=_addr_list, metadata=_prop("rocketmq.config.proxyAddrs")
    )
    #: The current proxy address (``rocketmq.config.proxyAddr``).
    proxy_addr: str | None = attrs.field(default=None, metadata=_prop("rocketmq.config.proxyAddr"))

    @property
    def users_path(self) -> Path:
        return Path(self.users_file) if self.users_file else Path(self.data_path) / "users.properties"


_BY_PROPERTY = {f.metadata["property"]: f.name for f in attrs.fields(DashboardSettings)}
#: The on/off settings: an empty value is off, as rocketmq-dashboard's ``Boolean.valueOf("")``, except
#: ``isVIPChannel``, whose setter ignores a blank value.
_SWITCHES = frozenset(f.metadata["property"] for f in attrs.fields(DashboardSettings) if f.type in (bool, "bool")) - {
    "rocketmq.config.isVIPChannel"
}
#: rocketmq-dashboard's own settings that have no use here, and the prefixes of Spring Boot's: read and ignored, so
#: its shipped ``application.properties`` works as it is (``server.ssl.*`` only when disabled: :func:`_refuse_https`).
_IGNORED = frozenset({"rocketmq.config.ticketKey"})
#: The lists whose first entry is the one in use (``RMQConfigure.setNamesrvAddrs``, ``setProxyAddrs``): the
#: single setting's field and the list's.
_LISTS = {
    "rocketmq.config.namesrvAddrs": ("namesrv_addr", "namesrv_addrs"),
    "rocketmq.config.proxyAddrs": ("proxy_addr", "proxy_addrs"),
}
_IGNORED_PREFIXES = ("spring.", "logging.", "server.ssl.", "management.")
#: Our settings that are gone, with why: an old settings file still starts, with a warning.
_REMOVED = {"rocketmq.config.historySeconds": "a day's chart samples are kept in the day files of dataPath"}


def _from_file(file: str | Path) -> dict[str, Any]:
    """The field values a ``-c`` file sets. Empty values are unset (rocketmq-dashboard falls back on its defaults
    for them), but an empty switch is off (its ``Boolean.valueOf("")``); ``rocketmq.config.namesrvAddrs`` (its list
    of name server addresses, the first one current) and ``timeoutMillis`` are read too; any other unknown property
    raises SettingsError (a typo would go unnoticed)."""
    values: dict[str, Any] = {}
    props = parse_properties(decode_properties_file(Path(file).read_bytes()))
    _refuse_https(props, file)
    for key, value in props.items():
        if key in _SWITCHES and not value.strip():
            value = "false"
        if key in _IGNORED or key.startswith(_IGNORED_PREFIXES) or not value.strip():
            continue
        if key in _REMOVED:
            log.warning("%s in %s is no longer used (%s): ignored", key, file, _REMOVED[key])
            continue
        if key == "rocketmq.config.timeoutMillis":
            if not value.strip().isdigit():
                raise SettingsError(f"{key} must be a number of milliseconds in {file}, not {value!r}")
            values["rpc_timeout"] = int(value) / 1000
        elif key in _BY_PROPERTY:
            values[_BY_PROPERTY[key]] = value
        else:
            raise SettingsError(f"unknown property {key!r} in {file}")
    return _first_of_lists(values)


def _first_of_lists(values: dict[str, Any]) -> dict[str, Any]:
    """A list's first entry as the one in use, over the single setting: Spring Boot's ``JavaBeanBinder`` binds
    RMQConfigure's properties in the order of its sorted getters (``namesrvAddr`` before ``namesrvAddrs``), and
    ``setNamesrvAddrs``/``setProxyAddrs`` then make the list's first current."""
    for single, listed in _LISTS.values():
        if first := next(iter(_addr_list(values.get(listed, ""))), None):
            values[single] = first
    return values


def _refuse_https(props: dict[str, str], file: str | Path) -> None:
    """SettingsError for ``server.ssl.*`` settings that would make rocketmq-dashboard (Spring Boot: any of them binds
    ``ServerProperties.ssl``, whose ``enabled`` defaults to true) serve HTTPS: this one serves HTTP only, so it
    refuses to start rather than send logins in the clear."""
    ssl = {key: value for key, value in props.items() if key.startswith("server.ssl.") and value.strip()}
    if ssl and ssl.get("server.ssl.enabled", "true").strip().lower() != "false":
        raise SettingsError(
            f"{', '.join(sorted(ssl))} in {file} ask for HTTPS, which this dashboard does not serve: "
            "put a TLS-terminating proxy in front, and set server.ssl.enabled=false"
        )


def load_settings(
    file: str | Path | None = None, env: dict[str, str] | None = None, **overrides: Any
) -> DashboardSettings:
    """Settings from the ``-c`` ``file`` (:func:`_from_file`), then ``NAMESRV_ADDR`` in ``env``, then the
    ``overrides`` that are not ``None`` (field names)."""
    values = _from_file(file) if file is not None else {}
    if env and env.get("NAMESRV_ADDR"):
        values["namesrv_addr"] = env["NAMESRV_ADDR"]
    values.update({k: v for k, v in overrides.items() if v is not None})
    try:
        return DashboardSettings(**values)
    except (TypeError, ValueError) as exc:
        raise SettingsError(str(exc)) from None


def client_config(settings: DashboardSettings) -> ClientConfig:
    """The admin client's config: the name servers, the timeout, the VIP channel and, when set, the ACL credentials
    and TLS (see the module docstring for a client that cannot sign or connect with TLS)."""
    return ClientConfig(
        namesrv_addr=settings.namesrv_addr,
        instance_name="mqdashboard",
        rpc_timeout=settings.rpc_timeout,
        vip_channel_enabled=settings.is_vip_channel,
        **_security(settings),
    )


def _security(settings: DashboardSettings) -> dict[str, Any]:
    """The ClientConfig fields of the ACL and TLS settings that are on; SettingsError for one the client lacks."""
    fields = attrs.fields_dict(ClientConfig)
    extra: dict[str, Any] = {}
    if settings.access_key or settings.secret_key:
        if "access_key" not in fields:
            raise SettingsError(
                "rocketmq.config.accessKey is set but this rocketrio client cannot sign requests (no ACL support)"
            )
        extra.update(access_key=settings.access_key, secret_key=settings.secret_key)
    if settings.use_tls:
        if "tls" not in fields:
            raise SettingsError("rocketmq.config.useTLS is set but this rocketrio client cannot connect with TLS")
        extra["tls"] = True
    return extra
