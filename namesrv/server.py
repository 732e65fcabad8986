"""The name server assembled: route table, KV config, processor, liveness scan and a :class:`RemotingServer`.

Usage::

    async with trio.open_nursery() as nursery:
        host, port = await nursery.start(serve_namesrv, NamesrvConfig(listen_port=0, listen_host="127.0.0.1"))
        ...
        nursery.cancel_scope.cancel()    # shutdown: connections close, the scan stops

:class:`NamesrvServer` is the same with its parts reachable (``route_table``, ``kv_config``, ``processor``,
``remoting_server``) for an embedded cluster or a test. Every request code goes to one unbounded pool of
``serverWorkerThreads`` workers, as Java's name server does. A broker's routes vanish as soon as its connection
closes (close listener) or after ``brokerChannelExpiredTime`` without registering (the scan).

Errors: ``OSError`` if the port cannot be bound; :class:`~store.metadata_files.ConfigFileError` if ``kvConfig.json`` and
its backup are both corrupt. Both are raised before ``task_status.started``.
"""

from __future__ import annotations

import functools
import math

import trio

from namesrv.config import NamesrvConfig
from namesrv.kv_config import KVConfigManager
from namesrv.liveness import run_liveness_scan
from namesrv.processor import NamesrvProcessor
from namesrv.route_table import RouteTable
from remoting.connection import Address, Connection
from remoting.dispatch import Dispatcher, ProcessorPool
from remoting.server import RemotingServer, ServerConfig
from remoting.tls import server_context, tls_mode


class NamesrvServer:
    """One name server; build it, then ``await nursery.start(server.serve)``. Owns its route table and KV file."""

    def __init__(self, config: NamesrvConfig) -> None:
        self.config = config
        self.route_table = RouteTable(config.broker_channel_expired_time)
        self.kv_config = KVConfigManager(config.kv_config_file)
        self.processor = NamesrvProcessor(
            self.route_table, self.kv_config, order_message_enable=config.order_message_enable
        )
        self.pool = ProcessorPool("namesrv", config.server_worker_threads, math.inf)
        dispatcher = Dispatcher()
        dispatcher.register(NamesrvProcessor.request_codes(), self.processor, self.pool)
        # Unknown codes still reach the processor, which answers REQUEST_CODE_NOT_SUPPORTED (see processor.py).
        dispatcher.set_default(self.processor, self.pool)
        server_config = ServerConfig(
            idle_timeout=config.server_channel_max_idle_time_seconds,
            tls_mode=tls_mode(config.tls_server_mode),
            ssl_context=functools.partial(server_context, config),
        )
        self.remoting_server = RemotingServer(dispatcher, server_config)
        self.remoting_server.add_close_listener(self._on_connection_closed)

    def _on_connection_closed(self, connection: Connection) -> None:
        self.route_table.on_connection_closed(connection)

    async def serve(self, *, task_status: trio.TaskStatus[Address] = trio.TASK_STATUS_IGNORED) -> None:
        """Load the KV config, listen on ``listenHost:listenPort``, scan liveness; report the bound address."""
        await trio.to_thread.run_sync(self.kv_config.load)
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
            task_status.started(address)


async def serve_namesrv(
    config: NamesrvConfig, *, task_status: trio.TaskStatus[Address] = trio.TASK_STATUS_IGNORED
) -> None:
    """Run a name server until cancelled; ``task_status.started`` gets the bound ``(host, port)``."""
    await NamesrvServer(config).serve(task_status=task_status)
