"""The Trio remoting server: accept, one reader per connection, pools for the work
(docs/architecture.md#the-reactor-split-and-its-pools).

Usage::

    dispatcher = Dispatcher()
    dispatcher.register(RequestCode.SEND_MESSAGE, send_processor, pools["send"])
    server = RemotingServer(dispatcher, ServerConfig(idle_timeout=120.0))
    async with trio.open_nursery() as nursery:
        host, port = await nursery.start(server.serve, "127.0.0.1", 0)
        ...
        nursery.cancel_scope.cancel()   # graceful shutdown: every connection closes, pools stop

Accepting is :func:`trio.serve_listeners` (one accept task per listener; EMFILE and friends are logged and waited
out). Accepted sockets have ``TCP_NODELAY`` (Trio's ``SocketStream`` sets it). Each connection gets a reader task
(:meth:`~remoting.connection.Connection.run`) that decodes frames and hands requests to the
:class:`~remoting.dispatch.Dispatcher`; a malformed frame closes that connection only. Close listeners are called
once per connection, after it closed, in the order added; a listener that raises is logged and skipped.
"""

from __future__ import annotations

import logging
import socket
from collections.abc import Callable

import attrs
import trio

from remoting.codec.frame import MAX_FRAME
from remoting.connection import Address, Connection
from remoting.dispatch import Dispatcher
from remoting.rpc_metrics import RpcLatency

log = logging.getLogger(__name__)

CloseListener = Callable[[Connection], None]


@attrs.frozen
class ServerConfig:
    """Server settings with RocketMQ's Netty defaults (docs/protocol.md#714-processor-pools-and-flow-control)."""

    #: Seconds without a read or a write before a connection is closed (``serverChannelMaxIdleTimeSeconds``).
    idle_timeout: float | None = 120.0
    #: Largest frame accepted, length prefix included; a larger one closes the connection.
    max_frame: int = MAX_FRAME
    #: Listen backlog.
    backlog: int = 1024


class RemotingServer:
    """Serves one listening address with a dispatcher. ``connections`` is the live set (read-only by convention)."""

    def __init__(
        self, dispatcher: Dispatcher, config: ServerConfig | None = None, rpc_latency: RpcLatency | None = None
    ) -> None:
        self.dispatcher = dispatcher
        self.config = config or ServerConfig()
        #: Given to every connection: times each request (:mod:`remoting.rpc_metrics`); ``None`` times nothing.
        self.rpc_latency = rpc_latency
        self.connections: set[Connection] = set()
        self._close_listeners: list[CloseListener] = []

    def add_close_listener(self, listener: CloseListener) -> None:
        """Call ``listener(connection)`` whenever a connection closes (for any reason, shutdown included)."""
        self._close_listeners.append(listener)

    async def serve(
        self,
        host: str = "127.0.0.1",
        port: int = 0,
        *,
        task_status: trio.TaskStatus[Address] = trio.TASK_STATUS_IGNORED,
    ) -> None:
        """Listen on ``host:port`` (0 picks a free port) and serve until cancelled.

        Reports the bound ``(host, port)`` through ``task_status.started``. Starts the dispatcher's pools unless the
        dispatcher already runs. Raises ``OSError`` if the address cannot be bound.
        """
        listeners = await trio.open_tcp_listeners(port, host=host, backlog=self.config.backlog)
        async with trio.open_nursery() as nursery:
            if not self.dispatcher.running:
                await nursery.start(self.dispatcher.run)
            await nursery.start(trio.serve_listeners, self._serve_connection, listeners)
            sockname = listeners[0].socket.getsockname()
            task_status.started((sockname[0], sockname[1]))

    async def _serve_connection(self, stream: trio.SocketStream) -> None:
        try:
            remote = stream.socket.getpeername()
            local = stream.socket.getsockname()
        except OSError:  # the peer already reset the connection
            await stream.aclose()
            return
        try:
            # A duplicate descriptor for the connection's direct writes (see Connection); closed with it.
            raw: socket.socket | None = socket.fromfd(stream.socket.fileno(), stream.socket.family, stream.socket.type)
        except OSError:  # out of descriptors: serve the connection anyway, every write through the writer task
            raw = None
        conn = Connection(
            stream,
            (remote[0], remote[1]),
            (local[0], local[1]),
            max_frame=self.config.max_frame,
            idle_timeout=self.config.idle_timeout,
            raw_socket=raw,
        )
        conn.rpc_latency = self.rpc_latency
        self.connections.add(conn)
        log.debug("accepted %r", conn)
        try:
            await conn.run(self.dispatcher.dispatch)
        finally:
            self.connections.discard(conn)
            for listener in self._close_listeners:
                try:
                    listener(conn)
                except Exception:
                    log.exception("close listener %r failed for %r", listener, conn)
