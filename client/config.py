"""Client configuration shared by producers and consumers (Java's ``ClientConfig``), with 4.9.8's defaults.

Times are in seconds (floats) on the Python side; they are converted to milliseconds only on the wire.

Security (docs/architecture.md#acl-and-tls-at-the-edge): ``access_key`` and ``secret_key`` sign every request for a
broker with ACL on (Java's ``AclClientRPCHook`` with ``SessionCredentials``); ``tls=True`` connects with TLS (Java's
``useTLS``; by default ``TLS_ENABLE``, Java's ``tls.enable`` system property), without checking the server unless
``tls_ca_file`` names the CA to check its chain against (not its host name, as Java's client); ``tls_cert_file`` /
``tls_key_file`` present a client certificate, ``tls_key_password`` decrypting its key (one that cannot be opened is
logged and the client goes on in plaintext, as Java's). The files alone turn nothing on: without ``tls`` the client
talks plaintext, as Java's. With ``tls`` and none of those files, the client takes Java's ``tls.client.*`` and
``tls.test.mode.enable`` system properties as environment variables (``TLS_CLIENT_CERT_PATH``,
``TLS_CLIENT_AUTH_SERVER``, ...) and ``tls.config.file`` (``TLS_CONFIG_FILE``, by default
``/etc/rocketmq/tls.properties``) over them, as ``TlsHelper.buildSslContext(true)``: in test mode (the default) it
checks no server and presents no certificate.
"""

from __future__ import annotations

import itertools
import os
import socket
import ssl
from typing import Final

import attrs

from client.namespace import instance_id_from_endpoint
from client.vip import default_vip_channel_enabled
from remoting.codec.acl_signing import SessionCredentials
from remoting.cpus import available_cpus
from remoting.tls import (
    client_context,
    client_key_files_open,
    load_key_pair,
    settings_client_context,
    settings_from_environment,
)

_instance_counter = itertools.count(1)


def local_ip() -> str:
    """The IPv4 address this host would use towards the outside, else 127.0.0.1. No packet is sent."""
    try:
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as probe:
            probe.connect(("10.255.255.255", 1))
            ip = str(probe.getsockname()[0])
    except OSError:
        return "127.0.0.1"
    return ip if not ip.startswith("0.") else "127.0.0.1"


def default_instance_name() -> str:
    """The PID for the first instance of the process, ``PID#n`` after that, so that two consumers of one group in
    one process get distinct client ids, as Java's clients turn the default name ``DEFAULT`` into ``PID#nanoTime``
    each (client/src/main/java/org/apache/rocketmq/client/ClientConfig.java ``changeInstanceNameToPID``)."""
    n = next(_instance_counter)
    return str(os.getpid()) if n == 1 else f"{os.getpid()}#{n}"


def _split_addrs(value: str | list[str] | tuple[str, ...]) -> tuple[str, ...]:
    if isinstance(value, str):
        return tuple(a.strip() for a in value.split(";") if a.strip())
    return tuple(value)


def _timer_interval(_config: object, attribute: attrs.Attribute[float], value: float) -> None:
    """A timer's period must be above 0, as ``client/src/main/java/org/apache/rocketmq/client/impl/factory/
    MQClientInstance.java``'s ``startScheduledTask`` passes it to ``scheduleAtFixedRate``, which throws for any other
    (the Java client fails to start; here the timer would loop without pause)."""
    if not value > 0:
        raise ValueError(f"{attribute.name} must be above 0 seconds: {value}")


#: The name server a client looks for when told none and ``NAMESRV_ADDR`` names none.
DEFAULT_NAMESRV: Final = ("127.0.0.1:9876",)


def default_namesrv_addr() -> tuple[str, ...]:
    """The name servers of a client told none: those of the ``NAMESRV_ADDR`` environment variable, as Java's
    ``ClientConfig`` takes them (common/src/main/java/org/apache/rocketmq/common/utils/NameServerAddressUtils.java,
    which looks at the ``rocketmq.namesrv.addr`` system property first, a JVM thing), else :data:`DEFAULT_NAMESRV`."""
    return _split_addrs(os.environ.get("NAMESRV_ADDR", "")) or DEFAULT_NAMESRV


def default_use_tls() -> bool:
    """Whether a client told nothing connects with TLS: ``TLS_ENABLE`` reads ``true`` (in any case), as Java's
    ``ClientConfig.useTLS`` defaults to ``TlsSystemConfig.tlsEnable``, ``Boolean.parseBoolean`` of the system property
    ``tls.enable`` (remoting/src/main/java/org/apache/rocketmq/remoting/netty/TlsSystemConfig.java; the client's system
    properties are environment variables here, see :func:`client.body_codecs.default_compress_level`)."""
    return os.environ.get("TLS_ENABLE", "").lower() == "true"


@attrs.frozen(slots=True)
class ClientConfig:
    """``namesrv_addr`` accepts ``"h1:9876;h2:9876"`` or a list; by default :func:`default_namesrv_addr`
    (``NAMESRV_ADDR``). ``client_id`` is ``ip@instanceName[@unitName]``."""

    namesrv_addr: tuple[str, ...] = attrs.field(converter=_split_addrs, factory=default_namesrv_addr)
    client_ip: str = attrs.field(factory=local_ip)
    instance_name: str = attrs.field(factory=default_instance_name)
    unit_name: str | None = None
    #: The client timers' periods (route refresh, heartbeat, offset persist): above 0, else ValueError.
    poll_name_server_interval: float = attrs.field(default=30.0, validator=_timer_interval)
    heartbeat_broker_interval: float = attrs.field(default=30.0, validator=_timer_interval)
    persist_consumer_offset_interval: float = attrs.field(default=5.0, validator=_timer_interval)
    rpc_timeout: float = 3.0
    access_key: str | None = None
    secret_key: str | None = attrs.field(default=None, repr=False)
    security_token: str | None = attrs.field(default=None, repr=False)
    tls: bool = attrs.field(factory=default_use_tls)
    tls_ca_file: str | None = None
    tls_cert_file: str | None = None
    tls_key_file: str | None = None
    #: The password of an encrypted ``tls_key_file`` (Java's ``tls.client.keyPassword``).
    tls_key_password: str | None = attrs.field(default=None, repr=False)
    #: Threads for the listener calls CONSUME_MESSAGE_DIRECTLY asks for, per push consumer (Java's
    #: ``clientCallbackExecutorThreads``, the size of NettyRemotingClient's public executor: the processors, 4 if not
    #: positive).
    client_callback_executor_threads: int = attrs.field(factory=available_cpus)
    #: Most async requests (callbacks awaiting their answer: ``send_async``, pulls, ...) and oneway requests being
    #: written at once, client-wide (Java's ``clientAsyncSemaphoreValue`` and ``clientOnewaySemaphoreValue``,
    #: NettyClientConfig, 65535 each): past that a request waits for a permit up to its timeout (remoting/permits.py).
    client_async_semaphore_value: int = 65535
    client_oneway_semaphore_value: int = 65535
    #: The namespace topics and groups are wrapped in on the wire (``ns%Topic``, :mod:`client.namespace`), Java's
    #: ``namespace``; None: the instance id of an ``MQ_INST_xxx_yyy.host`` name server endpoint, else none.
    namespace: str | None = None
    #: Java's ``accessChannel``: ``LOCAL``, or ``CLOUD`` to write message traces as 4.9.8 writes them for a cloud
    #: service (:mod:`client.trace.dispatcher`). Anything else: ValueError.
    access_channel: str = attrs.field(default="LOCAL", validator=attrs.validators.in_(("LOCAL", "CLOUD")))
    #: Java's ``vipChannelEnabled`` (``sendMessageWithVIPChannel`` on a producer): send what 4.9.8 sends there to
    #: the brokers' VIP port, ``port - 2`` (:mod:`client.vip`); by default
    #: :func:`~client.vip.default_vip_channel_enabled` (``COM_ROCKETMQ_SEND_MESSAGE_WITH_VIP_CHANNEL``), off.
    vip_channel_enabled: bool = attrs.field(factory=default_vip_channel_enabled)

    @property
    def resolved_namespace(self) -> str | None:
        """``namespace``, else the one the name server endpoint names (Java's ``getNamespace``), else None."""
        if self.namespace:
            return self.namespace
        return instance_id_from_endpoint(";".join(self.namesrv_addr)) if self.namesrv_addr else None

    @property
    def credentials(self) -> SessionCredentials | None:
        """The signing credentials, or None when no access key is set. Raises ``ValueError`` for a key without a
        secret."""
        if not self.access_key:
            return None
        if not self.secret_key:
            raise ValueError(f"access key {self.access_key!r} is set without a secret key")
        return SessionCredentials(self.access_key, self.secret_key, self.security_token)

    def ssl_context(self) -> ssl.SSLContext | None:
        """The TLS context for ``tls=True``, else None (whatever files are given: ``NettyRemotingClient`` builds its
        SSL context only when ``useTLS`` is true, remoting/src/main/java/org/apache/rocketmq/remoting/netty/
        NettyRemotingClient.java, and the ``tls.client.*`` files alone change nothing). With ``tls_ca_file`` the
        server's chain is checked against it but not its host name, as Java's client with ``tls.client.authServer``
        (``remoting/src/main/java/org/apache/rocketmq/remoting/netty/NettyRemotingClient.java`` makes its handler with
        ``sslContext.newHandler(alloc)``, no peer host): brokers and name servers are addressed by IP, which
        certificates made as RocketMQ's TLS guide makes them do not name. A client certificate or key file that cannot
        be opened is logged and gives None (plaintext connections), as Java's ``NettyRemotingClient`` goes on without
        an SSL context when ``TlsHelper.buildSslContext`` fails with an IOException; raises ``OSError`` /
        ``ssl.SSLError`` for an unreadable CA file (Java fails too) and for files that do not hold a certificate or
        key. Without any of the three files: :func:`remoting.tls.settings_client_context` of the environment's
        settings (see the module docstring)."""
        if not self.tls:
            return None
        if not (self.tls_ca_file or self.tls_cert_file or self.tls_key_file):
            # No file named: TlsHelper.buildSslContext(true)'s settings, the tls.client.* and tls.test.mode.enable
            # system properties (environment variables here) with tls.config.file over them.
            return settings_client_context(settings_from_environment(os.environ), use_tls=True)
        # The CA file first: TlsHelper.buildSslContext(true) loads the trust file (an IllegalArgumentException, not
        # caught) before it opens the certificate and key (remoting/.../netty/TlsHelper.java), so a client told to
        # check its servers never falls back to plaintext over a CA file it cannot read.
        ctx = client_context(self.tls_ca_file, check_hostname=False)
        if not client_key_files_open(self.tls_cert_file, self.tls_key_file):
            return None
        if self.tls_cert_file:
            load_key_pair(ctx, self.tls_cert_file, self.tls_key_file, self.tls_key_password)
        return ctx

    @property
    def client_id(self) -> str:
        return self._client_id(self.instance_name)

    @property
    def offset_file_client_id(self) -> str:
        """The client id a BROADCASTING consumer's offset file is kept under, the same after a restart. Java's
        broadcasting consumers keep the instance name ``DEFAULT`` (only clustering ones take the PID), so their file
        outlives the process, one per group; our default names carry the PID (:func:`default_instance_name`), read
        here as ``DEFAULT``. A name the application chose is kept. A second consumer of the group running in the same
        process takes another file (:class:`~client.consumer.offset_store.LocalFileOffsetStore`)."""
        return self._client_id("DEFAULT" if self.instance_name_defaulted else self.instance_name)

    @property
    def instance_name_defaulted(self) -> bool:
        """The instance name is one :func:`default_instance_name` gives, not one the application chose."""
        pid, name = str(os.getpid()), self.instance_name
        return name == pid or name.startswith(f"{pid}#")

    def _client_id(self, instance_name: str) -> str:
        """``ip@instanceName``, then ``@unitName`` unless it is blank (``UtilAll.isBlank`` in ClientConfig.java's
        ``buildMQClientId``)."""
        cid = f"{self.client_ip}@{instance_name}"
        return f"{cid}@{self.unit_name}" if self.unit_name and not self.unit_name.isspace() else cid
