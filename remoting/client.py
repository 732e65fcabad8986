"""The remoting client (anyio: runs under Trio and asyncio alike).

Usage::

    async with RemotingClient(request_handler=my_handler) as client:
        response = await client.invoke("127.0.0.1:9876", request(RequestCode.GET_ROUTEINFO_BY_TOPIC, {...}), 3.0)
        await client.invoke_oneway(addr, request(RequestCode.UPDATE_CONSUMER_OFFSET, {...}), 5.0)
        client.invoke_callback(addr, cmd, 3.0, on_done)   # on_done(response_or_error), may be async

Contract:

- one :class:`~remoting.connection.Connection` per address (``"host:port"``, IPv6 as ``"[::1]:port"``), opened on
  first use; concurrent invocations pipeline on it and are matched by opaque;
- ``timeout`` covers connecting and waiting; expiry raises :class:`~remoting.errors.RemotingTimeoutError` and leaves
  the connection open (a late response is dropped), unless ``close_on_timeout``: then a timed-out :meth:`invoke` (or
  :meth:`invoke_frame`) closes the connection, failing its other calls, and the next call reconnects, as
  ``remoting/src/main/java/org/apache/rocketmq/remoting/netty/NettyRemotingClient.java``'s ``invokeSync`` does with
  ``clientCloseSocketIfTimeout`` (true by default, ``NettySystemConfig``): a path gone silent (a peer host lost
  without a reset, a NAT entry dropped) is not used for ever. Callback invocations leave it open, as ``invokeAsync``,
  also those that wait for the connection in a task;
- a refused, reset or timed-out connect raises :class:`~remoting.errors.RemotingConnectError`; a connection that
  fails is dropped, its outstanding invocations fail at once with ``RemotingConnectError`` and the next call
  reconnects;
- requests the server pushes (NOTIFY_CONSUMER_IDS_CHANGED, CHECK_TRANSACTION_STATE) run ``request_handler`` in a task
  of their own and its response is written back (unless oneway); without a handler they get
  REQUEST_CODE_NOT_SUPPORTED;
- ``serialize_type`` is stamped on every request (JSON by default; CBOR only towards rocketrio servers); the server's
  responses mirror it;
- with ``credentials`` every request is signed for ACL 1.0 (``AccessKey`` and ``Signature``, see
  :mod:`remoting.codec.acl_signing`), name servers included (they ignore it, as RocketMQ's do);
- at most ``async_permits`` callback invocations (:meth:`invoke_callback` and the frame variants) are outstanding
  and ``oneway_permits`` oneways being written, client-wide (Java's ``clientAsyncSemaphoreValue`` and
  ``clientOnewaySemaphoreValue``, 65535 each; :mod:`remoting.permits`): past that a call waits up to its timeout
  for a permit (a callback invocation in a task), then fails with ``RemotingTimeoutError`` ("tryAcquire semaphore
  timeout"), or ``RemotingTooMuchRequestError`` when its timeout is not positive;
- with ``ssl_context`` every connection is TLS (anyio's ``TLSStream``; the host name is checked when the context
  says so). A server that refuses TLS (``tls.server.mode=disabled``) closes the connection: the call raises
  ``RemotingConnectError``;
- with ``address_for`` every request goes to ``address_for(address, code)`` instead of ``address`` (a client's VIP
  channel, :mod:`client.vip`); :meth:`invoke_frame_future` then declines, its frame carrying no code.

Leaving the ``async with`` block closes every connection and cancels callbacks still running.
"""

from __future__ import annotations

import errno
import inspect
import logging
import socket
import ssl
from collections.abc import Awaitable, Callable
from types import TracebackType
from typing import Any, Self

import anyio
import anyio.abc
import attrs
import sniffio
from anyio.streams.tls import TLSStream

from remoting.codec.acl_signing import SessionCredentials, sign, signed_fields
from remoting.codec.codes import ResponseCode, SerializeType
from remoting.codec.command import RemotingCommand, next_opaque
from remoting.codec.frame import MAX_FRAME, encode_json_request
from remoting.connection import Address, Connection
from remoting.dispatch import not_supported_remark
from remoting.errors import RemotingConnectError, RemotingError, RemotingTimeoutError
from remoting.future import Invocation, JsonDecoder
from remoting.permits import DEFAULT_PERMITS, Permits
from remoting.processor import Processor, RequestContext, run_processor
from remoting.streams import AnyioByteStream

log = logging.getLogger(__name__)

InvokeCallback = Callable[[RemotingCommand | RemotingError], object]


def parse_address(address: str) -> Address:
    """``"host:port"`` or ``"[v6]:port"`` to ``(host, port)``. Raises ``RemotingConnectError`` when malformed or
    when the port is past 65535."""
    host, sep, port = address.rpartition(":")
    if not sep or not host or not (port.isascii() and port.isdigit()) or int(port) > 65535:
        raise RemotingConnectError(f"bad remoting address {address!r}, expected host:port (port 0-65535)")
    return host.strip("[]"), int(port)


class RemotingClient:
    """Connections to any number of servers, one per address. Use as ``async with``; see the module docstring."""

    def __init__(
        self,
        request_handler: Processor | None = None,
        connect_timeout: float = 3.0,
        *,
        serialize_type: SerializeType = SerializeType.JSON,
        idle_timeout: float | None = 120.0,
        max_frame: int = MAX_FRAME,
        credentials: SessionCredentials | None = None,
        ssl_context: ssl.SSLContext | None = None,
        close_on_timeout: bool = False,
        async_permits: int = DEFAULT_PERMITS,
        oneway_permits: int = DEFAULT_PERMITS,
        address_for: Callable[[str, int], str] | None = None,
    ) -> None:
        self.request_handler = request_handler
        self.address_for = address_for
        self.async_permits = Permits("invokeAsyncImpl", async_permits)
        self.oneway_permits = Permits("invokeOnewayImpl", oneway_permits)
        self.close_on_timeout = close_on_timeout
        self.credentials = credentials
        self.ssl_context = ssl_context
        self.connect_timeout = connect_timeout
        self.serialize_type = serialize_type
        self.idle_timeout = idle_timeout
        self.max_frame = max_frame
        self._connections: dict[str, Connection] = {}
        self._connect_locks: dict[str, anyio.Lock] = {}
        self._tasks: anyio.abc.TaskGroup | None = None

    async def __aenter__(self) -> Self:
        tasks = anyio.create_task_group()
        await tasks.__aenter__()
        self._tasks = tasks
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> bool | None:
        tasks, self._tasks = self._tasks, None
        assert tasks is not None
        for conn in list(self._connections.values()):
            conn.close()
        tasks.cancel_scope.cancel()
        return await tasks.__aexit__(exc_type, exc, tb)

    @property
    def connections(self) -> dict[str, Connection]:
        """Live connections by address (a copy)."""
        return {addr: c for addr, c in self._connections.items() if not c.closed}

    def set_close_on_timeout(self, close: bool) -> None:
        """``close_on_timeout`` for the connections opened from now on and those open, as Java's ``invokeSync`` reads
        ``clientCloseSocketIfTimeout`` at each timeout."""
        self.close_on_timeout = close
        for conn in self._connections.values():
            conn.close_on_timeout = close

    def close_connection(self, address: str) -> None:
        """Drop the connection to ``address`` (outstanding invocations fail); the next call reconnects."""
        conn = self._connections.pop(address, None)
        if conn is not None:
            conn.close()

    async def connection(self, address: str) -> Connection:
        """The live connection to ``address``, connecting first if needed (within ``connect_timeout``)."""
        conn = self._connections.get(address)
        if conn is not None and not conn.closed:
            return conn
        lock = self._connect_locks.setdefault(address, anyio.Lock())
        async with lock:
            conn = self._connections.get(address)
            if conn is not None and not conn.closed:
                return conn
            return await self._connect(address)

    async def _connect(self, address: str) -> Connection:
        if self._tasks is None:
            raise RuntimeError("RemotingClient used outside its `async with` block")
        host, port = parse_address(address)
        stream: anyio.abc.ByteStream
        try:
            with anyio.fail_after(self.connect_timeout):
                tcp = stream = await anyio.connect_tcp(host, port)
                if self.ssl_context is not None:
                    stream = await self._handshake(tcp, host)
        except TimeoutError as exc:
            raise RemotingConnectError(f"connect to {address} timed out after {self.connect_timeout}s") from exc
        except (OSError, anyio.BrokenResourceError, anyio.EndOfStream) as exc:
            raise RemotingConnectError(f"connect to {address} failed: {exc!r}") from exc
        try:
            conn = self._wrap(tcp, stream)
        except OSError as exc:  # no descriptor left for the duplicate, or the peer reset already
            await stream.aclose()
            raise RemotingConnectError(f"connect to {address} failed: {exc}") from exc
        self._connections[address] = conn
        self._tasks.start_soon(self._run_connection, address, conn)
        return conn

    async def _handshake(self, tcp: anyio.abc.SocketStream, host: str) -> TLSStream:
        assert self.ssl_context is not None
        try:
            return await TLSStream.wrap(
                tcp, hostname=host, ssl_context=self.ssl_context, server_side=False, standard_compatible=False
            )
        except BaseException:
            await anyio.aclose_forcefully(tcp)
            raise

    def _wrap(self, tcp: anyio.abc.SocketStream, stream: anyio.abc.ByteStream) -> Connection:
        sock = tcp.extra(anyio.abc.SocketAttribute.raw_socket)
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        remote = tcp.extra(anyio.abc.SocketAttribute.remote_address, None)
        if remote is None:  # anyio found no peer address: the reset came right after the handshake
            raise ConnectionResetError(errno.ENOTCONN, "the peer reset the connection")
        local = tcp.extra(anyio.abc.SocketAttribute.local_address)
        assert isinstance(remote, tuple) and isinstance(local, tuple)
        # Under Trio, anyio writes straight to the socket, so the connection may too; asyncio transports buffer, and
        # TLS records must go through the TLS stream.
        trio_native = sniffio.current_async_library() == "trio" and stream is tcp
        raw = socket.fromfd(sock.fileno(), sock.family, sock.type) if trio_native else None
        conn = Connection(
            AnyioByteStream(stream),
            (str(remote[0]), int(remote[1])),
            (str(local[0]), int(local[1])),
            max_frame=self.max_frame,
            idle_timeout=self.idle_timeout,
            raw_socket=raw,
        )
        conn.close_on_timeout = self.close_on_timeout
        conn.async_permits = self.async_permits
        return conn

    async def _run_connection(self, address: str, conn: Connection) -> None:
        try:
            await conn.run(self._on_request)
        finally:
            if self._connections.get(address) is conn:
                del self._connections[address]

    async def _on_request(self, ctx: RequestContext, cmd: RemotingCommand) -> None:
        if self.request_handler is not None and self._tasks is not None:
            self._tasks.start_soon(run_processor, self.request_handler, ctx, cmd)
        elif cmd.is_oneway:
            ctx.connection.oneway_done(cmd, None)
        else:
            answer = cmd.response(ResponseCode.REQUEST_CODE_NOT_SUPPORTED, not_supported_remark(cmd.code))
            await ctx.connection.send(answer)

    def _stamp(self, cmd: RemotingCommand) -> RemotingCommand:
        if cmd.serialize_type != self.serialize_type:
            cmd = attrs.evolve(cmd, serialize_type=self.serialize_type)
        if self.credentials is not None:
            cmd = sign(cmd, self.credentials)
        return cmd

    async def invoke(self, address: str, cmd: RemotingCommand, timeout: float) -> RemotingCommand:
        """Send ``cmd`` to ``address`` and return its response. Raises ``RemotingTimeoutError`` or
        ``RemotingConnectError`` (see the module docstring)."""
        if self.address_for is not None:
            address = self.address_for(address, cmd.code)
        conn = self._connections.get(address)
        if conn is not None and not conn.closed:
            return await conn.invoke(self._stamp(cmd), timeout)
        conn, left = await self._connect_within(address, timeout)
        return await conn.invoke(self._stamp(cmd), left)

    async def _connect_within(self, address: str, timeout: float) -> tuple[Connection, float]:
        """The connection to ``address`` (connecting if needed) and what is left of ``timeout`` after connecting.
        Raises ``RemotingTimeoutError`` when connecting took all of it."""
        deadline = anyio.current_time() + timeout
        try:
            with anyio.fail_after(timeout):
                conn = await self.connection(address)
        except TimeoutError as exc:
            raise RemotingTimeoutError(f"connecting to {address} took longer than the {timeout}s timeout") from exc
        return conn, max(0.0, deadline - anyio.current_time())

    async def invoke_oneway(self, address: str, cmd: RemotingCommand, timeout: float) -> None:
        """Send ``cmd`` flagged oneway; returns once written or queued. ``timeout`` bounds connecting and the wait
        behind a backlog the broker does not read (:meth:`Connection.invoke_oneway`: the frame then stays queued), as
        Java's invokeOneway never waits longer than its ``timeoutMillis``. Raises ``RemotingConnectError``, or
        ``RemotingTimeoutError`` when connecting (or the wait for a oneway permit) took all of ``timeout``."""
        if self.address_for is not None:
            address = self.address_for(address, cmd.code)
        permits = self.oneway_permits
        if not permits.try_acquire():
            start = anyio.current_time()
            await permits.acquire(timeout)
            timeout = max(0.0, timeout - (anyio.current_time() - start))
        try:
            conn = self._connections.get(address)
            if conn is None or conn.closed:
                conn, timeout = await self._connect_within(address, timeout)
            await conn.invoke_oneway(self._stamp(cmd), timeout)
        finally:
            permits.release()

    def invoke_callback(
        self, address: str, cmd: RemotingCommand, timeout: float, callback: InvokeCallback, *, plain: bool = False
    ) -> None:
        """Send ``cmd`` in the background; ``callback`` gets the response or the ``RemotingError``, once.

        On a live, uncongested connection this costs no task: the frame is written now and the connection's reader
        calls ``callback`` (see :meth:`Connection.invoke_callback`); otherwise (connecting, or more than the high
        water mark queued) a task runs :meth:`invoke` first. A callback that returns an awaitable has it awaited in
        a task. A callback that raises is logged, never propagated. A request that cannot be signed or encoded raises
        here when it goes out at once, and reaches ``callback`` as a ``RemotingError`` when it went through that task.
        ``plain=True`` promises a callback that returns nothing to await: it is then handed to the connection as it is
        (no wrapper call per response).
        """
        if self._tasks is None:
            raise RuntimeError("RemotingClient used outside its `async with` block")
        if self.address_for is not None:
            address = self.address_for(address, cmd.code)
        conn = self._connections.get(address)
        if conn is None or not conn.writable:
            self._tasks.start_soon(self._invoke_then_call, address, cmd, timeout, callback)
            return
        # Signed before the permit is taken, so a request that cannot be signed raises holding none: Java's
        # NettyRemotingClient.invokeAsync runs its RPC hooks before NettyRemotingAbstract.invokeAsyncImpl acquires.
        stamped = self._stamp(cmd)
        if not self.async_permits.try_acquire():
            self._tasks.start_soon(self._invoke_then_call, address, cmd, timeout, callback)
            return
        if plain:
            conn.invoke_callback(stamped, timeout, callback)
        else:
            conn.invoke_callback(stamped, timeout, lambda outcome: self._call_back(callback, outcome))

    def invoke_fields_callback(
        self,
        address: str,
        code: int,
        ext_fields: dict[str, str],
        body: bytes,
        timeout: float,
        callback: Callable[[RemotingCommand | RemotingError], None],
    ) -> bool:
        """``invoke_callback(address, request(code, ext_fields, body), timeout, callback, plain=True)`` without the
        command: the JSON frame is written straight from the fields. Returns False, having done nothing, unless the
        request would go out as it is on a live connection (JSON headers, connection open and not congested): the
        caller then takes :meth:`invoke_callback`. With credentials the fields are signed first, as
        :meth:`invoke_callback` would sign the command."""
        if self._tasks is None:
            raise RuntimeError("RemotingClient used outside its `async with` block")
        if self.serialize_type != SerializeType.JSON:
            return False
        if self.address_for is not None:
            address = self.address_for(address, code)
        conn = self._connections.get(address)
        if conn is None or not conn.writable:
            return False
        if self.credentials is not None:
            ext_fields = signed_fields(ext_fields, body, self.credentials)
        opaque = next_opaque()
        frame = encode_json_request(code, opaque, ext_fields, body)  # what fails to sign or encode takes no permit
        if not self.async_permits.try_acquire():
            return False
        conn.invoke_frame_callback(opaque, code, frame, timeout, callback)
        return True

    @property
    def writes_plain_json(self) -> bool:
        """Requests go out as their callers encode them: JSON headers, unsigned (see :meth:`invoke_frame_future`)."""
        return self.credentials is None and self.serialize_type is SerializeType.JSON

    def invoke_frame_future(self, address: str, opaque: int, frame: bytes, future: Invocation, timeout: float) -> bool:
        """Send a JSON request the caller encoded (``frame``, with ``opaque``) for its own ``future``
        (:meth:`Connection.invoke_frame_future`: completed once, its deadline ``timeout`` from now). Only when
        :attr:`writes_plain_json`. Returns False, having done nothing, unless the connection is live and not
        congested, or when requests are routed by ``address_for`` (the frame names no code): the caller then takes
        :meth:`invoke_callback`."""
        if self._tasks is None:
            raise RuntimeError("RemotingClient used outside its `async with` block")
        if self.address_for is not None:
            return False
        conn = self._connections.get(address)
        if conn is None or not conn.writable or not self.async_permits.try_acquire():
            return False
        conn.invoke_frame_future(opaque, frame, future, timeout)
        return True

    def invoke_frame(
        self, address: str, opaque: int, code: int, frame: bytes, timeout: float, decode: JsonDecoder
    ) -> Awaitable[object]:
        """:meth:`invoke` of a JSON request the caller encoded (``frame``, with ``opaque`` and ``code``; only when
        :attr:`writes_plain_json`): awaits what ``decode`` made of the response's JSON header, or the response
        command when it declined. Same errors as :meth:`invoke`. On a live connection this is the connection's
        own coroutine (one frame less per switch of the waiting task)."""
        if self.address_for is not None:
            address = self.address_for(address, code)
        conn = self._connections.get(address)
        if conn is not None and not conn.closed:
            return conn.invoke_frame(opaque, code, frame, timeout, decode)
        return self._connect_then_invoke_frame(address, opaque, code, frame, timeout, decode)

    async def _connect_then_invoke_frame(
        self, address: str, opaque: int, code: int, frame: bytes, timeout: float, decode: JsonDecoder
    ) -> object:
        conn, left = await self._connect_within(address, timeout)
        return await conn.invoke_frame(opaque, code, frame, left, decode)

    def _call_back(self, callback: InvokeCallback, outcome: RemotingCommand | RemotingError) -> None:
        try:
            result = callback(outcome)
        except Exception:
            log.exception("invoke callback %r failed", callback)
            return
        if inspect.isawaitable(result):
            if self._tasks is None:  # leaving the client: nobody left to await it
                if inspect.iscoroutine(result):
                    result.close()
                return
            self._tasks.start_soon(self._await_callback, callback, result)

    async def _await_callback(self, callback: InvokeCallback, result: Awaitable[object]) -> None:
        try:
            await result
        except Exception:
            log.exception("invoke callback %r failed", callback)

    async def _invoke_then_call(
        self, address: str, cmd: RemotingCommand, timeout: float, callback: InvokeCallback
    ) -> None:
        outcome: RemotingCommand | RemotingError
        permits, start = self.async_permits, anyio.current_time()
        try:
            await permits.acquire(timeout)  # held until the outcome, as the direct path's
        except RemotingError as exc:
            await run_callback(callback, exc, "invoke")
            return
        try:
            timeout = max(0.0, timeout - (anyio.current_time() - start))
            # A callback invocation's timeout leaves the connection open, also when it waited for the connection
            # here: NettyRemotingClient.invokeAsync never closes the channel on a timeout, only invokeSync does.
            conn = self._connections.get(address)
            if conn is None or conn.closed:
                conn, timeout = await self._connect_within(address, timeout)
            outcome = await conn.invoke(self._stamp(cmd), timeout, keep_open=True)
        except RemotingError as exc:
            outcome = exc
        except Exception as exc:
            # Not signed or not encoded, so never written: the callback hears it (NettyRemotingAbstract's
            # invokeAsyncImpl fails the callback of a request whose write failed) instead of it ending the client's
            # task group, which its caller, gone on, would never see.
            outcome = RemotingError(f"request code {cmd.code} to {address} not sent: {exc!r}")
            outcome.__cause__ = exc
        finally:
            permits.release()
        await run_callback(callback, outcome, "invoke")


async def run_callback(callback: Callable[[Any], object], outcome: object, what: str) -> None:
    """Hand ``outcome`` to a user callback, awaiting what it returns if that is awaitable; what it raises is logged
    (as ``<what> callback ... failed``), never propagated: callbacks run in tasks nobody awaits."""
    try:
        result = callback(outcome)
        if inspect.isawaitable(result):
            await result
    except Exception:
        log.exception("%s callback %r failed", what, callback)
