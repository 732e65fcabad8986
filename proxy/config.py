"""``ProxyConfig``: the settings of the 5.x gRPC front door, with the property names of RocketMQ's
``ProxyConfig`` (proxy/src/main/java/org/apache/rocketmq/proxy/config/ProxyConfig.java) and ``TlsSystemConfig``.

Read from the same ``-c`` file and ``--name value`` arguments as the broker's settings (``mqbroker --enable-proxy
--grpcServerPort 8081``); :func:`proxy_config_from` applies them, refusing a value its setting's type does not take
(``grpcServerPort=8O81``, ``enableProxyAutoRenew=yes``), as RocketMQ's proxy refuses its JSON settings file.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Final

import attrs

from broker.broker_config import BrokerConfig
from remoting.codec.java_properties import JAVA_LONG, apply_properties, property_name
from remoting.local_address import local_host_name

__all__ = ["PROXY_KEYS", "ProxyConfig", "proxy_config_from"]


@attrs.frozen
class ProxyConfig:
    #: Serve gRPC at all (``mqbroker --enable-proxy`` sets it; RocketMQ's local proxy mode).
    enable_proxy: bool = False
    #: The proxy's cluster and name: the ``cluster`` and ``node_id`` labels of ``rocketmq_proxy_up`` on the broker's
    #: ``/metrics`` (proxy/src/main/java/org/apache/rocketmq/proxy/metrics/ProxyMetricsManager.java).
    proxy_cluster_name: str = "DefaultCluster"
    #: Default: the host's name, ``DEFAULT_PROXY`` without one that resolves (5.3.3's ``localHostName``).
    proxy_name: str = attrs.field(factory=lambda: local_host_name("DEFAULT_PROXY"))
    #: The gRPC port; 0 binds a free port. Plaintext (h2c) without a certificate; with one, ``tls.server.mode``
    #: says what it serves: TLS and plaintext (permissive), TLS only (enforcing), plaintext only (disabled).
    grpc_server_port: int = 8081
    #: Ours: a second port serving the same service over TLS only. -1 = ``grpcServerPort + 1`` when certificate files
    #: are configured, else none; 0 = a free port.
    grpc_tls_server_port: int = -1
    #: ``TlsSystemConfig``'s mode (RocketMQ's proxy reads the same JVM-wide property as the broker).
    tls_server_mode: str = attrs.field(default="permissive", metadata={"key": "tls.server.mode"})
    #: A self-signed certificate generated at start (RocketMQ's ``tlsTestModeEnable``, true by default as there, so a
    #: 5.x client with TLS on, the Java client's default, connects to grpcServerPort unchanged). It wins over the
    #: paths, as there.
    tls_test_mode_enable: bool = True
    #: The PEM certificate chain and key: RocketMQ's proxy names (``tlsCertPath``) or ``TlsSystemConfig``'s.
    tls_cert_path: str = ""
    tls_key_path: str = ""
    tls_server_cert_path: str = attrs.field(default="", metadata={"key": "tls.server.certPath"})
    tls_server_key_path: str = attrs.field(default="", metadata={"key": "tls.server.keyPath"})
    #: Receive limits: invisible time bounds (ms) and the long-polling window (ms). JAVA_LONG: ``long`` in RocketMQ 5's
    #: ProxyConfig (proxy/src/main/java/org/apache/rocketmq/proxy/config/ProxyConfig.java).
    min_invisible_time_mills_for_recv: int = attrs.field(default=10_000, metadata=JAVA_LONG)
    max_invisible_time_mills: int = attrs.field(default=12 * 3600 * 1000, metadata=JAVA_LONG)
    default_invisible_time_mills: int = attrs.field(default=60_000, metadata=JAVA_LONG)
    grpc_client_consumer_min_long_polling_timeout_millis: int = attrs.field(default=5_000, metadata=JAVA_LONG)
    grpc_client_consumer_max_long_polling_timeout_millis: int = attrs.field(default=20_000, metadata=JAVA_LONG)
    #: Largest accepted delivery time ahead of now (ms), and largest body (bytes); 0 or less: unchecked.
    max_delay_time_mills: int = attrs.field(default=24 * 3600 * 1000, metadata=JAVA_LONG)
    #: ``useDelayLevel``: a delivery time also sets ``DELAY``, the level of ``messageDelayLevel`` whose delay first
    #: exceeds the time left, else the longest (ProxyConfig.computeDelayLevel); the broker's delay level then wins
    #: over the timer. ``messageDelayLevel`` is the broker's setting too, read as it reads it.
    use_delay_level: bool = False
    message_delay_level: str = "1s 5s 10s 30s 1m 2m 3m 4m 5m 6m 7m 8m 9m 10m 20m 30m 1h 2h"
    max_message_size: int = 4 * 1024 * 1024
    #: Refuse an empty body (MESSAGE_BODY_EMPTY), as SendMessageActivity.validateMessageBodySize does by default.
    enable_message_body_empty_check: bool = True
    #: Send limits: a message group's UTF-8 bytes (must stay below), the user properties' count and their UTF-8
    #: bytes with the tag and keys, and a transaction's recovery duration (s). 0 or less: the group and the recovery
    #: duration unchecked, but no user property (count) or no property, tag or key (bytes) allowed, as
    #: SendMessageActivity.buildMessageProperty compares with those two as they are.
    max_message_group_size: int = 64
    user_property_max_num: int = 128
    max_user_property_size: int = 16 * 1024
    max_transaction_recovery_second: int = attrs.field(default=3600, metadata=JAVA_LONG)
    #: How long a half message's transaction data serves its EndTransaction after the send, or after the broker's
    #: check named it again (ms; TransactionDataManager's expiry): a later end finds none, the check asks again.
    transaction_data_expire_millis: int = attrs.field(default=30_000, metadata=JAVA_LONG)
    #: How many such data one producer group and transaction id keeps (the halves of a resent message; the oldest
    #: goes beyond it), TransactionDataManager's ``transactionDataMaxNum``.
    transaction_data_max_num: int = 15
    #: The largest request the gRPC server takes (bytes); a batch of several maximum-size bodies fits.
    grpc_max_inbound_message_size: int = 130 * 1024 * 1024
    #: How long a client connection with no call in flight stays open (ms) before the server sends it GOAWAY and
    #: closes it, the client reconnecting at its next call: GrpcServerBuilder's ``maxConnectionIdle``
    #: (proxy/src/main/java/org/apache/rocketmq/proxy/grpc/GrpcServerBuilder.java), grpcio's
    #: ``grpc.max_connection_idle_ms``. It must be positive: 0 or less stops the start, as Netty's builder refuses it.
    grpc_client_idle_time_mills: int = attrs.field(default=120_000, metadata=JAVA_LONG)
    #: Refuse a send whose message type differs from its topic's ``message.type`` attribute (RocketMQ's default); also
    #: the ``validate_message_type`` producers' Settings are answered with.
    enable_topic_message_type_check: bool = True
    #: Settings answered to consumers: receive batch size (RocketMQ's name, though it is no long-polling setting).
    grpc_client_consumer_long_polling_batch_size: int = 32
    #: Settings answered to producers: the send attempts and their exponential backoff (ms; the multiplier is an
    #: ``int`` in RocketMQ's ProxyConfig), as GrpcClientSettingsManager.mergeProducerData answers them.
    grpc_client_producer_max_attempts: int = 3
    grpc_client_producer_backoff_initial_millis: int = attrs.field(default=10, metadata=JAVA_LONG)
    grpc_client_producer_backoff_max_millis: int = attrs.field(default=1000, metadata=JAVA_LONG)
    grpc_client_producer_backoff_multiplier: int = 2
    #: How long a request relayed to a 5.x client over Telemetry (jstack, message verification) waits for its answer
    #: before SYSTEM_BUSY "call remote timeout" (s; GrpcChannelManager.scanExpireResultFuture).
    grpc_proxy_relay_request_timeout_in_seconds: int = attrs.field(default=5, metadata=JAVA_LONG)
    #: Whether an ``auto_renew`` receive (a push consumer's) gets ``defaultInvisibleTimeMills`` and has its handles
    #: renewed; off, its ``invisible_duration`` is checked and used as any other's (ReceiveMessageActivity).
    enable_proxy_auto_renew: bool = True
    #: Auto-renew of push consumers' handles (proxy/renew.py): scan period, how far ahead of expiry a handle is
    #: renewed, how long renewing goes on, and the invisible time of a gone client's handles (ms).
    renew_schedule_period_millis: int = attrs.field(default=5_000, metadata=JAVA_LONG)
    renew_ahead_time_millis: int = attrs.field(default=10_000, metadata=JAVA_LONG)
    renew_max_time_millis: int = attrs.field(default=3 * 3600 * 1000, metadata=JAVA_LONG)
    #: Renewals refused in a row before a handle is no longer renewed (it becomes visible when it says).
    max_renew_retry_times: int = 3
    invisible_time_millis_when_clear: int = attrs.field(default=1_000, metadata=JAVA_LONG)
    #: The route cache of proxy/route.py (TopicRouteService's): a topic's route is asked of the name server again once
    #: this old (s), a cached one serves while no name server answers up to the expiry (s), and at most this many
    #: topics are kept.
    topic_route_service_cache_refresh_seconds: int = 20
    topic_route_service_cache_expired_seconds: int = 300
    topic_route_service_cache_max_num: int = 20_000
    #: What the Settings answered tell clients about their metrics (GrpcClientSettingsManager.mergeMetric):
    #: ``off`` (any unknown value too) none, ``on`` export to ``metricCollectorAddress`` (``host:port``), ``proxy``
    #: export to the client's own access point; the mode is read in any case (MetricCollectorMode.getEnumByString).
    metric_collector_mode: str = "off"
    metric_collector_address: str = ""

    @property
    def cert_paths(self) -> tuple[str, str] | None:
        """The certificate and key files configured, or None (test mode generates one; see :attr:`has_certificate`)."""
        cert = self.tls_cert_path or self.tls_server_cert_path
        key = self.tls_key_path or self.tls_server_key_path
        return (cert, key) if cert else None

    @property
    def has_certificate(self) -> bool:
        return self.tls_test_mode_enable or self.cert_paths is not None

    @property
    def tls_port(self) -> int | None:
        """The TLS-only port to open (0: a free one), or None: see :attr:`grpc_tls_server_port`."""
        if self.grpc_tls_server_port >= 0:
            return self.grpc_tls_server_port
        if self.cert_paths is None:
            return None
        return self.grpc_server_port + 1 if self.grpc_server_port else 0


#: Every proxy setting's property name: what a broker that runs no proxy does not call an unknown property, without
#: reading its value (RocketMQ's BrokerStartup never reads them, and only the proxy refuses a bad one).
PROXY_KEYS: Final = frozenset(property_name(field) for field in attrs.fields(ProxyConfig))

#: The keys the broker's settings have too (``maxMessageSize``, ``tls.server.mode``...).
_BROKER_KEYS: Final = frozenset(property_name(field) for field in attrs.fields(BrokerConfig))


def proxy_config_from(props: Mapping[str, str], enable: bool = False) -> tuple[ProxyConfig, list[str]]:
    """The proxy settings among ``props``; returns the keys that are not proxy settings. Raises
    :class:`~remoting.codec.java_properties.PropertiesError` for a boolean other than true/false or a number that does
    not parse: RocketMQ 5 reads ProxyConfig from its JSON file with fastjson's ``JSON.parseObject``
    (proxy/src/main/java/org/apache/rocketmq/proxy/config/Configuration.java), which fails on such a value and the
    proxy does not start; not MixAll.properties2Object, which would skip the key (``grpcServerPort=8O81`` serving on
    8081). A key the broker's settings have too (``maxMessageSize``) is read as the broker reads it, as broker.conf
    starts a Java broker so."""
    own = {key: value for key, value in props.items() if key not in _BROKER_KEYS}
    config, unknown = apply_properties(ProxyConfig(), own, strict=True)
    config, shared_unknown = apply_properties(config, {key: props[key] for key in props.keys() & _BROKER_KEYS})
    unknown = [key for key in props if key in {*unknown, *shared_unknown}]
    if enable:
        config = attrs.evolve(config, enable_proxy=True)
    return config, unknown
