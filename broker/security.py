"""The broker's security wiring, kept out of the controller: the ACL rules (None unless ``aclEnable``), the
listeners' settings (idle timeout, ``tls.*`` mode and context, connection cap, per-connection budget) and the TLS
context the broker uses towards its name servers (docs/architecture.md#acl-and-tls-at-the-edge). The ACL modules (and
the YAML parser) are imported only with ``aclEnable``: an idle broker without ACL does not carry them.
"""

from __future__ import annotations

import ssl
from pathlib import Path
from typing import TYPE_CHECKING

from broker.broker_config import BrokerConfig
from remoting.server import ServerConfig
from remoting.tls import ENFORCING, settings_client_context, tls_mode

if TYPE_CHECKING:
    from broker.acl.admission import AclAdmission
    from broker.acl.manager import AclManager


def acl_manager_of(config: BrokerConfig) -> AclManager | None:
    """The (not yet loaded) ACL rules when ``aclEnable``; without ``rocketmqHome`` no file loads (as in RocketMQ),
    which refuses every request, and the manager logs it."""
    if not config.acl_enable:
        return None
    from broker.acl.manager import AclFiles, AclManager

    home = Path(config.rocketmq_home).expanduser() if config.rocketmq_home else None
    return AclManager(AclFiles(home, config.acl_plain_file))


def acl_admission_of(manager: AclManager | None) -> AclAdmission | None:
    """The dispatcher's admission check over ``manager``'s rules; None (every request admitted) without ACL."""
    if manager is None:
        return None
    from broker.acl.admission import AclAdmission

    return AclAdmission(manager)


def server_config_of(config: BrokerConfig) -> ServerConfig:
    """The listeners' settings from the broker's."""
    return config.listener_config(float(config.server_channel_max_idle_time_seconds))


def client_use_tls(config: BrokerConfig) -> bool:
    """Whether the broker's own client talks TLS (the one place this is decided): ``useTLS`` when broker.conf sets
    it, else ``tls.enable`` (an explicit false is plaintext even under enforcing), else whether the broker's own mode
    is enforcing. broker/src/main/java/org/apache/rocketmq/broker/BrokerStartup.java sets NettyClientConfig's
    ``useTLS`` from the last two (JVM system properties; ours, settings), then applies broker.conf to it
    (``properties2Object``), so the file's value wins either way; ``tls.config.file`` never decides it, as
    remoting/src/main/java/org/apache/rocketmq/remoting/netty/TlsHelper.java reads neither ``tls.enable`` nor
    ``tls.server.mode`` from it."""
    if config.use_tls is not None:
        return config.use_tls
    if config.tls_enable is not None:
        return config.tls_enable
    return tls_mode(config.tls_server_mode) == ENFORCING


def namesrv_client_context(config: BrokerConfig) -> ssl.SSLContext | None:
    """TLS towards the name servers (and a slave's master) when :func:`client_use_tls`."""
    return settings_client_context(config, client_use_tls(config))


def client_idle_timeout(config: BrokerConfig) -> float | None:
    """Seconds the broker's own client leaves a connection idle before closing it (``clientChannelMaxIdleTimeSeconds``;
    0 or less: never, as Netty's IdleStateHandler)."""
    idle = config.client_channel_max_idle_time_seconds
    return float(idle) if idle > 0 else None
