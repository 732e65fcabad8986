"""``GrpcServer``: grpcio's asyncio server on a thread of its own, serving ``apache.rocketmq.v2.MessagingService``.

Why grpcio (docs/grpc.md has the measurements): its C core does HTTP/2, flow control, keep-alive, TLS and deadlines,
and it is the same library the official 5.x clients use. It needs an asyncio loop, so it gets a thread; every RPC's
work runs on the broker's Trio thread through :class:`proxy.bridge.TrioBridge`, whose tasks live in a nursery owned
here.

Life cycle: ``await nursery.start(server.serve)`` binds the port (``task_status.started`` gets the bound port; a
port that cannot be bound raises :class:`~proxy.errors.ProxyStartError`, an ``OSError``) and serves until cancelled.
Cancellation refuses new calls, cancels the bridge's tasks (a parked long poll answers UNAVAILABLE), asks the servicer
to end its streams (``close_streams``, if it has one), stops the gRPC server with a one-second grace and joins the
thread.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import queue
import threading
from collections.abc import Callable
from typing import Final

import grpc
import trio

from proxy.bridge import TrioBridge
from proxy.errors import ProxyStartError
from proxy.front import SniffingFront
from proxy.pb import service_grpc
from remoting.tls import PERMISSIVE

__all__ = ["GrpcServer"]

log = logging.getLogger(__name__)

_STOP_GRACE: Final = 1.0
#: RocketMQ's ProxyConfig.grpcMaxInboundMessageSize default (used by
#: proxy/src/main/java/org/apache/rocketmq/proxy/grpc/GrpcServerBuilder.java).
MAX_INBOUND_MESSAGE_SIZE: Final = 130 * 1024 * 1024
#: RocketMQ's ProxyConfig.grpcClientIdleTimeMills default (GrpcServerBuilder's ``maxConnectionIdle``).
MAX_CONNECTION_IDLE_MS: Final = 120_000
#: grpcio takes channel arguments as C ints: a longer idle time is as good as never.
_INT_MAX: Final = 2**31 - 1
_OPTIONS: Final = [
    ("grpc.max_send_message_length", -1),
    ("grpc.keepalive_permit_without_calls", 1),
    ("grpc.http2.min_ping_interval_without_data_ms", 10_000),
]


class GrpcServer:
    """One listening port. ``servicer_factory(bridge, real_peer)`` builds the servicer whose coroutines serve the RPCs
    (see :class:`proxy.servicer.MessagingServicer`), ``real_peer`` being :meth:`real_peer`; ``tls`` is ``(certificate
    chain PEM, private key PEM)``: the port serves TLS only, or, with ``permissive``, TLS and plaintext alike through a
    :class:`proxy.front.SniffingFront`; ``max_inbound`` is the largest request taken (bytes); a connection without a
    call in flight for ``max_idle_ms`` is sent GOAWAY and closed (``grpcClientIdleTimeMills``)."""

    def __init__(
        self,
        servicer_factory: Callable[[TrioBridge, Callable[[str], str]], object],
        host: str,
        port: int,
        tls: tuple[bytes, bytes] | None = None,
        *,
        permissive: bool = False,
        max_inbound: int = MAX_INBOUND_MESSAGE_SIZE,
        max_idle_ms: int = MAX_CONNECTION_IDLE_MS,
    ) -> None:
        self._factory = servicer_factory
        self._host = host
        self._port = port
        self._tls = tls
        self._permissive = permissive and tls is not None
        if max_idle_ms <= 0:  # NettyServerBuilder.maxConnectionIdle's check
            raise ProxyStartError(f"max connection idle must be positive: {max_idle_ms}")
        self._options = [
            ("grpc.max_receive_message_length", max_inbound),
            ("grpc.max_connection_idle_ms", min(max_idle_ms, _INT_MAX)),
            *_OPTIONS,
        ]
        #: The sniffing front of a permissive port (None otherwise); set once serving.
        self.front: SniffingFront | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._stop: asyncio.Event | None = None
        self._thread: threading.Thread | None = None

    async def serve(self, *, task_status: trio.TaskStatus[int] = trio.TASK_STATUS_IGNORED) -> None:
        # The bridge's tasks run shielded: a broker shutdown refuses new calls, ends the calls in flight (a long poll
        # answers UNAVAILABLE), ends the Telemetry streams, and only then stops the gRPC server, so grpcio has no
        # handler left to cancel.
        bridge_scope = trio.CancelScope(shield=True)
        bridge_done = trio.Event()
        async with trio.open_nursery() as nursery:
            bridge_nursery: trio.Nursery = await nursery.start(_shielded_nursery, bridge_scope, bridge_done)
            bridge = TrioBridge(bridge_nursery)
            servicer = self._factory(bridge, self.real_peer)
            ready: queue.Queue[int | BaseException] = queue.Queue()
            self._thread = threading.Thread(target=self._thread_main, args=(servicer, ready), name="grpc", daemon=True)
            self._thread.start()
            bound = await trio.to_thread.run_sync(ready.get)
            if isinstance(bound, BaseException):
                bridge_scope.cancel()
                raise ProxyStartError(f"cannot serve gRPC on {self._host}:{self._port}: {bound}") from bound
            task_status.started(bound)
            try:
                await trio.sleep_forever()
            finally:
                bridge.closed = True
                bridge_scope.cancel()
                with trio.CancelScope(shield=True):
                    await bridge_done.wait()
                    await trio.to_thread.run_sync(self._stop_thread)

    def real_peer(self, peer: str) -> str:
        """The client of a call whose ``context.peer()`` is ``peer``: ``peer`` itself when grpcio serves the port, the
        front's client when a :class:`~proxy.front.SniffingFront` does (``""``, unknown, when it has none)."""
        return peer if self.front is None else self.front.real_peer(peer)

    def _stop_thread(self) -> None:
        loop, stop = self._loop, self._stop
        if loop is not None and stop is not None:
            with contextlib.suppress(RuntimeError):  # the loop already ended
                loop.call_soon_threadsafe(stop.set)
        if self._thread is not None:
            self._thread.join()

    def _thread_main(self, servicer: object, ready: queue.Queue[int | BaseException]) -> None:
        # asyncio.Runner cancels the handler tasks still pending when the server has stopped, then closes the loop.
        with asyncio.Runner() as runner:
            self._loop = runner.get_loop()
            try:
                runner.run(self._main(servicer, ready))
            except BaseException as exc:  # reported to serve(); nothing else can see this thread's errors
                ready.put(exc)

    async def _main(self, servicer: object, ready: queue.Queue[int | BaseException]) -> None:
        server = grpc.aio.server(options=self._options)
        service_grpc.add_MessagingServiceServicer_to_server(servicer, server)
        address = f"{self._host}:{self._port}"
        front_server: asyncio.Server | None = None
        if self._tls is None:
            port = server.add_insecure_port(address)
        else:
            cert, key = self._tls
            credentials = grpc.ssl_server_credentials([(key, cert)])
            if self._permissive:
                plain = server.add_insecure_port("127.0.0.1:0")
                secure = server.add_secure_port("127.0.0.1:0", credentials)
                self.front = SniffingFront(PERMISSIVE, plain, secure)
                front_server = await self.front.start(self._host, self._port)
                port = front_server.sockets[0].getsockname()[1]
            else:
                port = server.add_secure_port(address, credentials)
        self._stop = asyncio.Event()
        await server.start()
        ready.put(port)
        await self._stop.wait()
        if front_server is not None:
            front_server.close()  # no new connection; the piped ones end with grpcio's side
        close_streams = getattr(servicer, "close_streams", None)
        if close_streams is not None:
            close_streams()
        await server.stop(_STOP_GRACE)


async def _shielded_nursery(
    scope: trio.CancelScope, done: trio.Event, *, task_status: trio.TaskStatus[trio.Nursery] = trio.TASK_STATUS_IGNORED
) -> None:
    """A nursery inside ``scope`` (shielded until ``scope`` is cancelled), handed out through ``task_status``;
    ``done`` is set once every task in it has ended."""
    try:
        with scope:
            async with trio.open_nursery() as nursery:
                task_status.started(nursery)
                await trio.sleep_forever()
    finally:
        done.set()
