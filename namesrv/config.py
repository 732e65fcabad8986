"""Name server configuration with RocketMQ's property names (``mqnamesrv -c namesrv.properties``).

Each field's property name is its camelCase form; defaults are RocketMQ 4.9.8's (``NamesrvConfig`` and
``NettyServerConfig``): ``kvConfigPath`` is ``$HOME/namesrv/kvConfig.json``, ``rocketmqHome`` comes from the
``ROCKETMQ_HOME`` environment variable (informational here). Timer fields are in seconds (not Java milliseconds) and
are ours, so tests and embedded clusters can shorten them.
"""

from __future__ import annotations

import os
from pathlib import Path

import attrs

from remoting.codec.java_properties import PORT, decode_properties_file, load_config, parse_properties, property_name
from remoting.server import ListenerSettings


@attrs.frozen
class NamesrvConfig(ListenerSettings):
    """The name server's settings; the ``tls.*`` ones (RocketMQ's name server sniffs TLS like the broker) and the
    listener's limits, as the broker's, come from :class:`remoting.server.ListenerSettings`."""

    listen_port: int = attrs.field(default=9876, metadata=PORT)
    #: The address the server binds; Java binds every interface, so does ``0.0.0.0`` here.
    listen_host: str = "0.0.0.0"
    rocketmq_home: str = attrs.field(factory=lambda: os.environ.get("ROCKETMQ_HOME", ""))
    kv_config_path: str = attrs.field(factory=lambda: str(Path.home() / "namesrv" / "kvConfig.json"))
    #: Where UPDATE_NAMESRV_CONFIG writes every setting (namesrv/config_admin.py), and the keys it may not change.
    config_store_path: str = attrs.field(factory=lambda: str(Path.home() / "namesrv" / "namesrv.properties"))
    config_black_list: str = "configBlackList;configStorePath;kvConfigPath"
    order_message_enable: bool = False
    #: NamesrvConfig's ``productEnvName`` and ``clusterTest``: with ``clusterTest=true`` a topic this name server does
    #: not route is asked of the product environment's name servers (namesrv/product_env.py), read at start.
    product_env_name: str = "center"
    cluster_test: bool = False
    #: Seconds between liveness scans, and before the first one (Java: 10 s and 5 s).
    scan_interval: float = 10.0
    scan_initial_delay: float = 5.0
    #: A broker that has not registered for this long is dropped (Java: 120 s).
    broker_channel_expired_time: float = 120.0
    #: Seconds a connection with no traffic stays open (NettyServerConfig's ``int``, so ``1.5`` is ignored as Java's
    #: ``Integer.parseInt`` refuses it, and it prints as ``120``).
    server_channel_max_idle_time_seconds: int = 120
    #: Workers of the one request pool (Java's namesrv runs everything on ``serverWorkerThreads``).
    server_worker_threads: int = 8
    #: Ours, with the broker's RocketMQ 5 names (docs/metrics.md; Java's name server has no metrics): ``PROM`` serves
    #: ``rocketmq_rpc_latency_milliseconds`` at ``http://<metricsPromExporterHost, default listenHost>:<port>/metrics``.
    metrics_exporter_type: str = "DISABLE"
    metrics_prom_exporter_host: str = ""
    metrics_prom_exporter_port: int = attrs.field(default=5557, metadata=PORT)
    metrics_label: str = ""
    metrics_otel_cardinality_limit: int = 50_000

    @property
    def kv_config_file(self) -> Path:
        return Path(self.kv_config_path).expanduser()


def load_namesrv_config(path: str | Path | None = None, **overrides: object) -> tuple[NamesrvConfig, list[str]]:
    """:func:`remoting.codec.java_properties.load_config` over the name server's defaults."""
    text = None if path is None else decode_properties_file(Path(path).read_bytes())
    return load_config(NamesrvConfig(), text, **overrides)


def properties_without_setting(path: Path) -> dict[str, str]:
    """The keys of the properties file at ``path`` that no setting has, with their text (none when it is missing):
    Java's Configuration holds them all (``registerConfig``, common/src/main/java/org/apache/rocketmq/common/
    Configuration.java)."""
    try:
        raw = path.read_bytes()
    except FileNotFoundError:
        return {}
    settings = {property_name(field) for field in attrs.fields(NamesrvConfig)}
    return {key: text for key, text in parse_properties(decode_properties_file(raw)).items() if key not in settings}
