"""The name server assembled: route table, KV config, processor, liveness scan and a :class:`RemotingServer`.

Usage::

    async with trio.open_nursery() as nursery:
        host, port = await nursery.start(serve_namesrv, NamesrvConfig(listen_port=0, listen_host="127.0.0.1"))
        ...
        nursery.cancel_scope.cancel()    # shutdown: connections close, the scan stops

:class:`NamesrvServer` is the same with its parts reachable (``route_table``, ``kv_config``, ``processor``,
``remoting_server``) for an embedded cluster or a test. Every request code goes to one unbounded pool of
``serverWorkerThreads`` workers, as Java's name server does. A broker's routes vanish as soon as its connection
closes (close listener) or after ``brokerChannelExpiredTime`` without registering (the scan). With
``metricsExporterType=PROM`` it also serves ``/metrics`` (:mod:`remoting.prometheus`): every request's latency.
With ``clusterTest=true`` it keeps a client to the product environment's name servers (:mod:`namesrv.product_env`).

Errors: ``OSError`` if the port cannot be bound; :class:`~store.metadata_files.ConfigFileError` if ``kvConfig.json`` and
its backup are both corrupt. Both are raised before ``task_status.started``.
"""

from __future__ import annotations

import math
from contextlib import AsyncExitStack
from pathlib import Path
from typing import TYPE_CHECKING

import attrs
import trio

from namesrv.config import NamesrvConfig
from namesrv.config_admin import NamesrvConfigAdmin
from namesrv.kv_config import KVConfigManager
from namesrv.liveness import run_liveness_scan
from namesrv.processor import NamesrvProcessor
from namesrv.product_env import open_product_env_routes
from namesrv.route_table import RouteTable
from remoting.connection import Address, Connection
from remoting.dispatch import Dispatcher, ProcessorPool
from remoting.rpc_metrics import RpcLatency, prometheus_wanted
from remoting.server import RemotingServer, idle_timeout_of
from remoting.tls import settings_client_context

if TYPE_CHECKING:
    from remoting.prometheus import PrometheusExporter


class NamesrvServer:
    """One name server; build it, then ``await nursery.start(server.serve)``. Owns its route table and KV file."""

    def __init__(self, config: NamesrvConfig, config_file: Path | None = None) -> None:
        """``config_file``: the ``mqnamesrv -c`` file, if any (:class:`NamesrvConfigAdmin` holds its properties)."""
        self.config = config
        self.route_table = RouteTable(config.broker_channel_expired_time)
        self.kv_config = KVConfigManager(config.kv_config_file)
        self.config_admin = NamesrvConfigAdmin(config, self._config_changed, config_file)
        self.processor = NamesrvProcessor(
            self.route_table,
            self.kv_config,
            order_message_enable=config.order_message_enable,
            config_admin=self.config_admin,
            cluster_test=config.cluster_test,
        )
        self.pool = ProcessorPool("namesrv", config.server_worker_threads, math.inf)
        dispatcher = Dispatcher()
        dispatcher.register(NamesrvProcessor.request_codes(), self.processor, self.pool)
        # Unknown codes still reach the processor, which answers REQUEST_CODE_NOT_SUPPORTED (see processor.py).
        dispatcher.set_default(self.processor, self.pool)
        server_config = config.listener_config(config.server_channel_max_idle_time_seconds)
        wanted = prometheus_wanted(config.metrics_exporter_type)
        self.rpc_latency = RpcLatency(config.metrics_otel_cardinality_limit) if wanted else None
        self.remoting_server = RemotingServer(dispatcher, server_config, self.rpc_latency)
        self.remoting_server.add_close_listener(self._on_connection_closed)
        self.metrics: PrometheusExporter | None = None

    def _config_changed(self, config: NamesrvConfig) -> None:
        """UPDATE_NAMESRV_CONFIG: the settings read per request take effect at once, and the idle time for the
        connections accepted from now on, as NettyRemotingServer's ``initChannel`` reads it for each new channel."""
        self.config = config
        self.processor.order_message_enable = config.order_message_enable
        idle = idle_timeout_of(config.server_channel_max_idle_time_seconds)
        self.remoting_server.config = attrs.evolve(self.remoting_server.config, idle_timeout=idle)

    def _on_connection_closed(self, connection: Connection) -> None:
        self.route_table.on_connection_closed(connection)

    async def serve(self, *, task_status: trio.TaskStatus[Address] = trio.TASK_STATUS_IGNORED) -> None:
        """Load the KV config, listen on ``listenHost:listenPort``, scan liveness; report the bound address."""
        await trio.to_thread.run_sync(self.kv_config.load)
        async with AsyncExitStack() as stack:
            if self.config.cluster_test:
                # NamesrvController.registerProcessor: ClusterTestRequestProcessor's admin client, made at start.
                tls = settings_client_context(self.config, use_tls=self.config.tls_enable is True)
                product = open_product_env_routes(self.config.product_env_name, tls)
                self.processor.product_env = await stack.enter_async_context(product)
            async with trio.open_nursery() as nursery:
                address: Address = await nursery.start(
                    self.remoting_server.serve, self.config.listen_host, self.config.listen_port
                )
                await nursery.start(
                    lambda task_status: run_liveness_scan(
                        self.route_table,
                        interval=self.config.scan_interval,
                        initial_delay=self.config.scan_initial_delay,
                        task_status=task_status,
                    )
                )
                if self.rpc_latency is not None:
                    self.metrics = self._exporter(self.rpc_latency, address)
                    await nursery.start(self.metrics.run)
                task_status.started(address)

    def _exporter(self, recorder: RpcLatency, address: Address) -> PrometheusExporter:
        """``/metrics`` with the requests' latency, labelled ``node_type=nameserver``, ``node_id=host:port``. The
        exporter's module is imported here, only when the settings ask for it (prometheus-client's weight)."""
        from remoting.prometheus import NAMESRV_SCOPE, PrometheusExporter, metrics_labels, rpc_latency_source

        config = self.config
        labels = metrics_labels("nameserver", f"{address[0]}:{address[1]}", None, config.metrics_label)
        host = config.metrics_prom_exporter_host or config.listen_host
        sources = [rpc_latency_source(recorder, labels)]
        return PrometheusExporter(host, config.metrics_prom_exporter_port, sources, NAMESRV_SCOPE)


async def serve_namesrv(
    config: NamesrvConfig, *, task_status: trio.TaskStatus[Address] = trio.TASK_STATUS_IGNORED
) -> None:
    """Run a name server until cancelled; ``task_status.started`` gets the bound ``(host, port)``."""
    await NamesrvServer(config).serve(task_status=task_status)
