"""``ProxyConfig``: the settings of the 5.x gRPC front door, with the property names of RocketMQ's
``ProxyConfig`` (proxy/src/main/java/org/apache/rocketmq/proxy/config/ProxyConfig.java) and ``TlsSystemConfig``.

Read from the same ``-c`` file and ``--name value`` arguments as the broker's settings (``mqbroker --enable-proxy
--grpcServerPort 8081``); :func:`proxy_config_from` applies them.
"""

from __future__ import annotations

from collections.abc import Mapping

import attrs

from remoting.codec.java_properties import apply_properties

__all__ = ["ProxyConfig", "proxy_config_from"]


@attrs.frozen
class ProxyConfig:
    #: Serve gRPC at all (``mqbroker --enable-proxy`` sets it; RocketMQ's local proxy mode).
    enable_proxy: bool = False
    #: The plaintext (h2c) gRPC port; 0 binds a free port.
    grpc_server_port: int = 8081
    #: Ours: a second port serving the same service over TLS (grpcio binds a port either plaintext or TLS; RocketMQ's
    #: permissive mode sniffs both on one port). 0 = off unless a certificate is set, then ``grpcServerPort + 1``.
    grpc_tls_server_port: int = -1
    tls_server_cert_path: str = attrs.field(default="", metadata={"key": "tls.server.certPath"})
    tls_server_key_path: str = attrs.field(default="", metadata={"key": "tls.server.keyPath"})
    #: Receive limits: invisible time bounds (ms) and the long-polling window (ms).
    min_invisible_time_mills_for_recv: int = 10_000
    max_invisible_time_mills: int = 12 * 3600 * 1000
    default_invisible_time_mills: int = 60_000
    grpc_client_consumer_min_long_polling_timeout_millis: int = 5_000
    grpc_client_consumer_max_long_polling_timeout_millis: int = 20_000
    #: Largest accepted delivery time ahead of now (ms).
    max_delay_time_mills: int = 24 * 3600 * 1000
    max_message_size: int = 4 * 1024 * 1024
    #: Refuse a send whose message type differs from its topic's ``message.type`` attribute (RocketMQ's default).
    enable_topic_message_type_check: bool = True
    #: Settings answered to consumers: receive batch size.
    grpc_client_consumer_receive_batch_size: int = 32
    #: Auto-renew of push consumers' handles (proxy/renew.py): scan period, how far ahead of expiry a handle is
    #: renewed, how long renewing goes on, and the invisible time of a gone client's handles (ms).
    renew_schedule_period_millis: int = 5_000
    renew_ahead_time_millis: int = 10_000
    renew_max_time_millis: int = 3 * 3600 * 1000
    invisible_time_millis_when_clear: int = 1_000

    @property
    def tls_port(self) -> int:
        if self.grpc_tls_server_port >= 0:
            return self.grpc_tls_server_port
        return self.grpc_server_port + 1 if self.tls_server_cert_path and self.grpc_server_port else 0


def proxy_config_from(props: Mapping[str, str], enable: bool = False) -> tuple[ProxyConfig, list[str]]:
    """The proxy settings among ``props``; returns the keys that are not proxy settings."""
    config, unknown = apply_properties(ProxyConfig(), dict(props))
    if enable:
        config = attrs.evolve(config, enable_proxy=True)
    return config, unknown
