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

Before a connection is served the server peeks at its first byte, as RocketMQ's ``HandshakeHandler`` does
(``remoting/src/main/java/org/apache/rocketmq/remoting/netty/NettyRemotingServer.java``): ``0x16`` starts a TLS
handshake (:class:`trio.SSLStream`) unless ``tls_mode`` is ``disabled``, which closes it, as it does when no context
can be built; any other byte is plaintext unless the mode is ``enforcing``, which closes the connection without a
frame. The context is built when the server starts (a certificate or key file that cannot be opened is logged
then; one that does not load stops the start, :func:`remoting.tls.fatal_at_start`) and rebuilt when its files change
(:meth:`RemotingServer._watch_tls_files`, RocketMQ's ``FileWatchService``). A handshake that fails or stalls past
:data:`TLS_HANDSHAKE_TIMEOUT` (10 s, or ``idle_timeout`` when shorter) closes that connection only. Beyond
``max_connections`` live connections a new one is closed at once.
Each of these refusals is logged, rate-limited.
"""

from __future__ import annotations

import functools
import hashlib
import logging
import socket
import ssl
import sys
from collections.abc import Callable
from typing import Final

import attrs
import trio

from remoting.codec.frame import MAX_FRAME
from remoting.connection import MAX_BUFFERED_BYTES, MAX_REQUESTS_IN_FLIGHT, Address, Connection
from remoting.dispatch import Dispatcher
from remoting.ratelog import RateLimitedLog
from remoting.rpc_metrics import RpcLatency
from remoting.streams import STREAM_ERRORS
from remoting.tls import (
    DISABLED,
    TlsContextError,
    TlsSettings,
    fatal_at_start,
    server_context,
    sniff,
    tls_mode,
    tls_settings_of,
)

log = logging.getLogger(__name__)

CloseListener = Callable[[Connection], None]
#: Builds the server's SSL context on the first TLS connection; it may raise (then TLS connections are closed).
SSLContextFactory = Callable[[], ssl.SSLContext]
#: Seconds a TLS handshake may take before its connection is closed (Netty's ``SslHandler`` default
#: ``handshakeTimeoutMillis``, 10 000, which RocketMQ's ``TlsModeHandler`` keeps); the idle timeout bounds it too.
TLS_HANDSHAKE_TIMEOUT = 10.0
#: Seconds between two looks at the TLS files (``WATCH_INTERVAL``, 500 ms, of
#: srvutil/src/main/java/org/apache/rocketmq/srvutil/FileWatchService.java).
TLS_WATCH_INTERVAL = 0.5


@attrs.frozen
class ServerConfig:
    """Server settings with RocketMQ's Netty defaults (docs/protocol.md#714-processor-pools-and-flow-control)."""

    #: Seconds without a read or a write before a connection is closed (``serverChannelMaxIdleTimeSeconds``).
    idle_timeout: float | None = 120.0
    #: Largest frame accepted, length prefix included; a larger one closes the connection.
    max_frame: int = MAX_FRAME
    #: Listen backlog (None: the kernel's largest, ``somaxconn``).
    backlog: int | None = 1024
    #: ``tls.server.mode``: disabled, permissive or enforcing (see the module docstring).
    tls_mode: str = DISABLED
    #: Where the SSL context comes from (None: TLS connections are closed).
    ssl_context: SSLContextFactory | None = None
    #: The certificate, key and trust files the context is built from (``""``: none), watched for changes unless the
    #: mode is disabled: the trust file, or the certificate and the key both, changing rebuild the context.
    tls_watched_files: tuple[str, str, str] = ("", "", "")
    #: Test mode's generated certificate: with no file to read there is nothing to report at start, so the context
    #: is made at the first TLS handshake (making it imports ``cryptography``: about 12 MB of RSS per process that
    #: RocketMQ's defaults, permissive and test mode, would otherwise pay for connections that rarely come).
    tls_generated: bool = False
    #: Live connections beyond which new ones are closed at once (None: no cap).
    max_connections: int | None = None
    #: Per connection: requests read and not yet answered, and bytes held for it (those requests' bodies plus
    #: unwritten responses), beyond which its reader stops reading until answers go out.
    max_requests_in_flight: int = MAX_REQUESTS_IN_FLIGHT
    max_buffered_bytes: int = MAX_BUFFERED_BYTES
    #: Each accepted connection's SO_SNDBUF and SO_RCVBUF in bytes (0 or less: the OS's), NettyServerConfig's
    #: ``serverSocketSndBufSize``/``serverSocketRcvBufSize``.
    socket_snd_buf_size: int = 0
    socket_rcv_buf_size: int = 0


#: NettyServerConfig's fields in their declaration order (remoting/src/main/java/org/apache/rocketmq/remoting/netty/
#: NettyServerConfig.java, RocketMQ 4.9.8), the order a Java broker's or name server's ``-p`` prints them in.
NETTY_SERVER_CONFIG_ORDER: Final = (
    "listenPort", "serverWorkerThreads", "serverCallbackExecutorThreads", "serverSelectorThreads",
    "serverOnewaySemaphoreValue", "serverAsyncSemaphoreValue", "serverChannelMaxIdleTimeSeconds",
    "serverSocketSndBufSize", "serverSocketRcvBufSize", "writeBufferHighWaterMark", "writeBufferLowWaterMark",
    "serverSocketBacklog", "serverPooledByteBufAllocatorEnable", "useEpollNativeSelector",
)  # fmt: skip


@attrs.frozen
class NettyServerSettings(TlsSettings):
    """RocketMQ 4.9.8's NettyServerConfig keys that size Netty's threads, buffers and semaphores
    (remoting/src/main/java/org/apache/rocketmq/remoting/netty/NettyServerConfig.java, with NettySystemConfig's
    defaults): without effect here (one Trio event loop, the OS's socket options), but accepted, shown and kept as a
    Java broker or name server does, which prints, answers and persists every field of its config objects
    (common/src/main/java/org/apache/rocketmq/common/Configuration.java). ``listenPort``, ``serverWorkerThreads``
    and ``serverChannelMaxIdleTimeSeconds`` are the servers' own settings; ``serverSocketBacklog`` (the listeners'
    backlog) and ``serverSocketSndBufSize``/``serverSocketRcvBufSize`` (each connection's buffers, when above 0) are
    applied (:meth:`ListenerSettings.listener_config`)."""

    server_callback_executor_threads: int = 0
    server_selector_threads: int = 3
    server_oneway_semaphore_value: int = 256
    server_async_semaphore_value: int = 64
    server_socket_snd_buf_size: int = 0
    server_socket_rcv_buf_size: int = 0
    write_buffer_high_water_mark: int = 0
    write_buffer_low_water_mark: int = 0
    server_socket_backlog: int = 1024
    server_pooled_byte_buf_allocator_enable: bool = True
    use_epoll_native_selector: bool = False


@attrs.frozen
class ListenerSettings(NettyServerSettings):
    """What a server process (broker, name server) exposes as settings for its listeners: RocketMQ's ``tls.*`` ones,
    NettyServerConfig's inert ones (:class:`NettyServerSettings`) and our limits, which RocketMQ does not have (hence
    no RocketMQ names to keep)."""

    #: Live connections per listening port beyond which a new one is closed at once (0 or less: no cap).
    server_max_connections: int = 10_000
    #: Per connection, requests awaiting their response (oneway: their processor) and bytes held for it (request
    #: bodies plus unwritten responses) beyond which the server stops reading from it until it has answered (0 or
    #: less: no cap, as for ``server_max_connections``; a budget of 0 was always spent and stalled every reader).
    server_max_requests_in_flight: int = MAX_REQUESTS_IN_FLIGHT
    server_max_buffered_bytes: int = MAX_BUFFERED_BYTES

    def listener_config(self, idle_timeout: float) -> ServerConfig:
        """The :class:`ServerConfig` these settings describe (``tls.config.file`` is read now, for the files to
        watch, and again whenever the context is built, by :func:`remoting.tls.server_context`; never when the mode is
        disabled). An ``idle_timeout`` (``serverChannelMaxIdleTimeSeconds``) of 0 or less closes no idle connection,
        as remoting/src/main/java/org/apache/rocketmq/remoting/netty/NettyRemotingServer.java's
        ``IdleStateHandler(0, 0, seconds)`` checks nothing then."""
        mode = tls_mode(self.tls_server_mode)
        watched = ("", "", "")
        files = TlsSettings()
        if mode != DISABLED:
            # Disabled: NettyRemotingServer.loadSslContext builds nothing and broker/.../BrokerController.java and
            # namesrv/.../NamesrvController.java start no FileWatchService, so Java never reads tls.config.file then.
            files = tls_settings_of(self)
            watched = (files.tls_server_cert_path, files.tls_server_key_path, files.tls_server_trust_cert_path)
        return ServerConfig(
            idle_timeout=idle_timeout_of(idle_timeout),
            tls_mode=mode,
            ssl_context=functools.partial(server_context, self),
            tls_watched_files=watched,
            tls_generated=mode != DISABLED and files.tls_test_mode_enable,
            max_connections=self.server_max_connections if self.server_max_connections > 0 else None,
            max_requests_in_flight=_cap(self.server_max_requests_in_flight),
            max_buffered_bytes=_cap(self.server_max_buffered_bytes),
            backlog=java_listen_backlog(self.server_socket_backlog),
            socket_snd_buf_size=self.server_socket_snd_buf_size,
            socket_rcv_buf_size=self.server_socket_rcv_buf_size,
        )


def idle_timeout_of(seconds: float) -> float | None:
    """``serverChannelMaxIdleTimeSeconds`` as :attr:`ServerConfig.idle_timeout`: 0 or less closes nothing."""
    return seconds if seconds > 0 else None


def _cap(limit: int) -> int:
    """A per-connection budget setting as the connection takes it: 0 or less is no cap (a count never reached)."""
    return limit if limit > 0 else sys.maxsize


#: The backlog the JDK's ServerSocketChannel listens with when given one below 1 (``bind(address, backlog)``).
JDK_DEFAULT_BACKLOG = 50


def java_listen_backlog(server_socket_backlog: int) -> int | None:
    """The listen backlog a Java server gets for NettyServerConfig's ``serverSocketBacklog``, its ``SO_BACKLOG``
    (remoting/src/main/java/org/apache/rocketmq/remoting/netty/NettyRemotingServer.java): the listener is Netty's
    NIO channel (``useEpollNativeSelector`` false), which binds through the JDK's ServerSocketChannel, and that
    listens with 50 for a backlog of 0; Netty refuses a negative one (a warning) and keeps its default, the kernel's
    ``somaxconn`` (None here). Given as is, either listened with 0: one pending connection."""
    if server_socket_backlog < 0:
        return None
    return server_socket_backlog or JDK_DEFAULT_BACKLOG


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
        self._refusals = RateLimitedLog(log)
        self._ssl_context: ssl.SSLContext | None = None
        self._generate_context = trio.Lock() if self.config.tls_generated else None  # held while test mode makes it
        self._generation_tried = False
        self._open = 0  # accepted sockets not yet closed, whatever their stage (peek, handshake, serving)
        #: Connections closed by the cap, by the TLS mode, or by a failed handshake (tests and stats).
        self.refused_connections = 0

    def add_close_listener(self, listener: CloseListener) -> None:
        """Call ``listener(connection)`` whenever a connection closes (for any reason, shutdown included)."""
        self._close_listeners.append(listener)

    async def serve(
        self,
        host: str | None = "127.0.0.1",
        port: int = 0,
        *,
        task_status: trio.TaskStatus[Address] = trio.TASK_STATUS_IGNORED,
    ) -> None:
        """Listen on ``host:port`` (0 picks a free port; host None: every interface) and serve until cancelled.

        Reports the bound ``(host, port)`` through ``task_status.started``. Starts the dispatcher's pools unless the
        dispatcher already runs. Raises ``OSError`` if the address cannot be bound, and
        :class:`~remoting.tls.TlsContextError` if the TLS files do not load (:meth:`_load_ssl_context`).
        """
        tls = self.config.ssl_context is not None and self.config.tls_mode != DISABLED
        watched = self._tls_file_hashes() if tls else {}
        if tls and not self.config.tls_generated:
            # NettyRemotingServer builds its context in its constructor (loadSslContext), before binding
            self._load_ssl_context(at_start=True)
        listeners = await trio.open_tcp_listeners(port, host=host, backlog=self.config.backlog)
        for listener in listeners:
            # NettyRemotingServer sets SO_SNDBUF/SO_RCVBUF on each accepted channel when the size is above 0
            # (remoting/src/main/java/org/apache/rocketmq/remoting/netty/NettyRemotingServer.java); an accepted
            # socket inherits the listener's sizes.
            for option, size in ((socket.SO_SNDBUF, self.config.socket_snd_buf_size),
                                 (socket.SO_RCVBUF, self.config.socket_rcv_buf_size)):  # fmt: skip
                if size > 0:
                    listener.socket.setsockopt(socket.SOL_SOCKET, option, size)
        async with trio.open_nursery() as nursery:
            if watched:
                nursery.start_soon(self._watch_tls_files, watched)
            if not self.dispatcher.running:
                await nursery.start(self.dispatcher.run)
            await nursery.start(trio.serve_listeners, self._serve_connection, listeners)
            sockname = listeners[0].socket.getsockname()
            task_status.started((sockname[0], sockname[1]))

    def _refuse(self, remote: tuple[str, int], why: str) -> None:
        self.refused_connections += 1
        self._refusals.warning("closing connection from %s:%s: %s", remote[0], remote[1], why)

    def _load_ssl_context(self, *, at_start: bool = False) -> None:
        """(Re)build the context; one that cannot be built is logged and the one in use kept, as
        ``NettyRemotingServer.loadSslContext`` (remoting/src/main/java/org/apache/rocketmq/remoting/netty/), except
        at start for what stops a Java server's start too (:func:`remoting.tls.fatal_at_start`): then
        :class:`~remoting.tls.TlsContextError`. A reload never stops the server (FileWatchService logs it)."""
        factory = self.config.ssl_context
        if factory is None:
            return
        try:
            self._ssl_context = factory()
        except (OSError, ssl.SSLError, ValueError) as exc:
            if at_start and fatal_at_start(exc):
                raise TlsContextError(f"cannot build the TLS context: {exc}") from exc
            log.error(
                "cannot build the TLS context, %s: %s",
                "keeping the one in use" if self._ssl_context else "TLS connections will be closed",
                exc,
            )

    async def _generated_context(self) -> ssl.SSLContext | None:
        """Test mode's context, made once, at the first TLS handshake, in a worker thread (``tls_generated``);
        handshakes arriving meanwhile wait for it. ``None`` when it is not test mode or making it failed: whatever it
        raised is logged once and TLS connections are closed, as ``NettyRemotingServer.loadSslContext`` logs any
        failure, the server going on."""
        factory, lock = self.config.ssl_context, self._generate_context
        if factory is None or lock is None:
            return None
        async with lock:
            if not self._generation_tried:
                self._generation_tried = True
                try:
                    self._ssl_context = await trio.to_thread.run_sync(factory)
                except Exception:
                    log.exception("cannot build the TLS context, TLS connections will be closed")
        return self._ssl_context

    def _tls_file_hashes(self) -> dict[str, bytes]:
        """The digest of each watched file that exists now (FileWatchService watches only those)."""
        hashes = {}
        for path in dict.fromkeys(self.config.tls_watched_files):
            try:
                if path:
                    hashes[path] = _digest(path)
            except OSError:
                continue
        return hashes

    async def _watch_tls_files(self, hashes: dict[str, bytes]) -> None:
        """Rebuild the context when the trust file changes, or once the certificate and the key both changed (in the
        same round or not), as the listener 4.9.8's ``BrokerController`` and ``NamesrvController`` give
        srvutil/src/main/java/org/apache/rocketmq/srvutil/FileWatchService.java; a file that cannot be read is skipped
        for the round."""
        cert, key, trust = self.config.tls_watched_files
        cert_changed = key_changed = False
        while True:
            await trio.sleep(TLS_WATCH_INTERVAL)
            for path, old in hashes.items():
                try:
                    new = _digest(path)
                except OSError as exc:
                    log.warning("cannot read the TLS file %s: %s", path, exc)
                    continue
                if new == old:
                    continue
                hashes[path] = new
                if path == trust:
                    log.info("the trust certificate %s changed, reloading the TLS context", path)
                    self._load_ssl_context()
                cert_changed |= path == cert
                key_changed |= path == key
                if cert_changed and key_changed:
                    log.info("the certificate and the private key changed, reloading the TLS context")
                    cert_changed = key_changed = False
                    self._load_ssl_context()

    async def _first_byte(self, stream: trio.SocketStream) -> int | None:
        """The connection's first byte, left unread; None at end of stream or after ``idle_timeout`` of silence."""
        with trio.move_on_after(self.config.idle_timeout if self.config.idle_timeout is not None else float("inf")):
            try:
                data = await stream.socket.recv(1, socket.MSG_PEEK)
            except OSError:
                return None
            return data[0] if data else None
        return None

    async def _secure(
        self, stream: trio.SocketStream, remote: tuple[str, int]
    ) -> trio.SSLStream[trio.SocketStream] | None:
        """The TLS stream after a completed handshake, or None (refused and logged)."""
        ctx = self._ssl_context or await self._generated_context()
        if ctx is None:
            self._refuse(remote, "a TLS handshake and no TLS context")
            return None
        secure = trio.SSLStream(stream, ctx, server_side=True)
        idle = self.config.idle_timeout if self.config.idle_timeout is not None else float("inf")
        with trio.move_on_after(min(TLS_HANDSHAKE_TIMEOUT, idle)):
            try:
                await secure.do_handshake()
            except STREAM_ERRORS as exc:
                self._refuse(remote, f"TLS handshake failed: {exc!r}")
                return None
            return secure
        self._refuse(remote, "TLS handshake timed out")
        return None

    async def _serve_connection(self, stream: trio.SocketStream) -> None:
        try:
            remote = stream.socket.getpeername()
            local = stream.socket.getsockname()
        except OSError:  # the peer already reset the connection
            await stream.aclose()
            return
        cap = self.config.max_connections
        if cap is not None and self._open >= cap:
            self._refuse(remote, f"{cap} connections already open (max connections)")
            await stream.aclose()
            return
        self._open += 1
        try:
            await self._sniff_and_serve(stream, remote, local)
        finally:
            self._open -= 1

    async def _sniff_and_serve(
        self, stream: trio.SocketStream, remote: tuple[str, int], local: tuple[str, int]
    ) -> None:
        first = await self._first_byte(stream)
        if first is None:
            await stream.aclose()
            return
        over_tls, refusal = sniff(first, self.config.tls_mode)
        if refusal is not None:
            self._refuse(remote, refusal)
            await stream.aclose()
            return
        if over_tls:
            secure = await self._secure(stream, remote)
            if secure is None:
                await stream.aclose()
                return
            await self._run_connection(secure, remote, local, None)
            return
        try:
            # A duplicate descriptor for the connection's direct writes (see Connection); closed with it.
            raw: socket.socket | None = socket.fromfd(stream.socket.fileno(), stream.socket.family, stream.socket.type)
        except OSError:  # out of descriptors: serve the connection anyway, every write through the writer task
            raw = None
        await self._run_connection(stream, remote, local, raw)

    async def _run_connection(
        self,
        stream: trio.abc.Stream,
        remote: tuple[str, int],
        local: tuple[str, int],
        raw: socket.socket | None,
    ) -> None:
        conn = Connection(
            stream,
            (remote[0], remote[1]),
            (local[0], local[1]),
            max_frame=self.config.max_frame,
            idle_timeout=self.config.idle_timeout,
            raw_socket=raw,
            max_requests_in_flight=self.config.max_requests_in_flight,
            max_buffered_bytes=self.config.max_buffered_bytes,
        )
        conn.rpc_latency = self.rpc_latency
        if self.dispatcher.has_fast_paths:
            conn.fast_request = self.dispatcher.fast_request
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


def _digest(path: str) -> bytes:
    with open(path, "rb") as file:
        return hashlib.md5(file.read(), usedforsecurity=False).digest()
