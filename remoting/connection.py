"""One RocketMQ remoting connection, shared by the server and the client
(docs/architecture.md#the-reactor-split-and-its-pools).

A :class:`Connection` owns a byte stream and gives it the protocol's shape:

- a reader (:meth:`Connection.run`) feeding the sans-IO :class:`~remoting.codec.frame.FrameDecoder`; responses are
  matched by opaque to outstanding :meth:`Connection.invoke` calls, requests go to the ``on_request`` callback;
- writes never interleave and never make the caller wait (unless ``SEND_HIGH_WATER`` bytes are queued: then
  :meth:`send` waits for the writer, while an invocation's wait is bounded by its timeout): :meth:`send`
  encodes the frame and either writes it straight to the socket (the first frame after a read, when nothing is
  queued: the serial request/response path then costs what a bare echo costs), or queues it for the connection's
  one writer task, which sends everything queued meanwhile in one ``send_all``; the first ``FLUSH_FRAMES`` frames queued
  in one pass are written at once, so the peer starts on them while the rest are produced, then batches twice as
  large each time up to ``MAX_FLUSH_FRAMES`` (fewer send() calls on a deep pipeline). The writer task and the
  "nothing in flight" rule are the per-connection write lock;
- requests in both directions: the server uses :meth:`invoke` / :meth:`invoke_oneway` to call a client over the
  client's own connection (CHECK_TRANSACTION_STATE, NOTIFY_CONSUMER_IDS_CHANGED), the client to call the server;
- per-invocation timeouts kept by one sweeper task per connection (no cancel scope per call) while :meth:`run`
  runs: it wakes at the earliest deadline, so an invocation times out at its deadline (RocketMQ's remoting client
  and server run ``NettyRemotingAbstract.scanResponseTable`` once a second, which expires an invocation 1 s past its
  deadline). As that scan does, it removes every expired invocation before completing any, so their callbacks may
  close the connection or invoke again. A connection that never runs (a stand-in such as the proxy's channel for a
  5.x client) has no sweeper, so :meth:`invoke` and :meth:`invoke_frame` then bound their own wait (callback
  invocations need the sweeper);
- every invocation is completed once, by whoever takes it out of the pending table (the reader, the sweeper or
  close), and what its completion raises is logged: it ends neither the connection nor the telling of the others;
- idle tracking: no read and no write for ``idle_timeout`` seconds closes the connection (Java's 120 s default);
- a budget per connection: while ``max_requests_in_flight`` requests read from the peer wait for their response, or
  while their bodies and the responses not yet written hold more than ``max_buffered_bytes``, the reader stops
  reading, so TCP pushes back on a peer that sends faster than it is answered (or never reads its answers) instead
  of the process buffering for it. Every request counts, also one whose opaque is already in flight. A oneway
  request counts until its processor returns (:meth:`oneway_done`), so a flood of oneway frames cannot grow an
  unbounded pool queue either. Answers a :data:`FastRequest` writes count in the
  bytes too: past the budget the reader stops after one, as after any request. (The budget is ours: RocketMQ's
  ``remoting/src/main/java/org/apache/rocketmq/remoting/netty/NettyRemotingServer.java`` only marks the channel
  unwritable past ``writeBufferHighWaterMark`` and reads on.)
- RPC latency, when the server set :attr:`Connection.rpc_latency` (:mod:`remoting.rpc_metrics`): a request's code
  and read time are kept by opaque until its response is written (or, oneway, until its processor returns).

Ownership and errors: the connection owns its stream from construction and closes it when :meth:`run` returns,
whatever the reason (EOF, a :class:`~remoting.codec.errors.CodecError`, a socket error, idle timeout, :meth:`close`,
cancellation): gracefully if that takes at most ``CLOSE_TIMEOUT`` (a TLS close_notify the peer takes), else at
once. On close every outstanding invocation fails at once with :class:`~remoting.errors.RemotingConnectError`,
frames still queued are dropped, and later sends raise :class:`~remoting.errors.RemotingClosedError`. A write that
fails or is interrupted closes the connection, because the peer's framing is then lost.

Backends: the same class runs under Trio (the server) and asyncio (the client), see :mod:`remoting.primitives`.
Any object with Trio's ``send_all`` / ``receive_some`` / ``aclose`` works as the stream (all Trio streams do;
:class:`~remoting.streams.AnyioByteStream` adapts an anyio stream).
"""

from __future__ import annotations

import contextlib
import logging
import math
import socket
import time
from collections.abc import Awaitable, Callable
from typing import Any, Final, NoReturn

import anyio
import attrs
import orjson

from remoting import primitives
from remoting.codec.codes import SerializeType
from remoting.codec.command import FLAG_ONEWAY, FLAG_RESPONSE, RemotingCommand
from remoting.codec.errors import CodecError
from remoting.codec.frame import MAX_FRAME, FrameDecoder, encode_command
from remoting.codec.serializers import command_from_json, decode_header
from remoting.errors import RemotingClosedError, RemotingConnectError, RemotingError, RemotingTimeoutError
from remoting.future import CallbackFuture, Invocation, JsonDecoder, OutcomeCallback, ResponseFuture
from remoting.permits import Permits
from remoting.processor import RequestContext
from remoting.rpc_metrics import RESULT_ONEWAY, RESULT_SUCCESS, RpcLatency
from remoting.streams import RECEIVE_SIZE, STREAM_ERRORS, ByteStream, RawSocketIO

log = logging.getLogger(__name__)

#: How many times its request budget a connection may hold in requests parked for long polling outside that budget
#: (:meth:`Connection.mark_suspended`); past it they count again (RocketMQ parks any number, bounded by nothing).
_PARKED_FREE: Final = 3

#: Queued-but-unwritten bytes above which :meth:`Connection.send` waits for the writer (backpressure).
SEND_HIGH_WATER: Final = 4 * 1024 * 1024
#: Frames queued in one scheduler pass after which :meth:`Connection.send` writes them at once instead of leaving them
#: to the writer's next pass: the peer starts on the first ones while later ones are still being produced. 8 lifted
#: the 1 connection x 32 in flight RPC rate by ~1.5x over "whole pass" batches; 4 and 16 measured no better.
FLUSH_FRAMES: Final = 8
#: Each further direct flush before the writer runs (or the next read) doubles the threshold up to this many frames:
#: a deep pipeline (1,024 async sends in flight) then pays one send() per ~64 responses instead of per 8, while the
#: first 8 still go out early. Measured: the broker's ``Connection._send_direct`` self time fell from 8.6 % to ~2 %.
MAX_FLUSH_FRAMES: Final = 64
#: Default per-connection budget (see the module docstring): requests awaiting their response...
MAX_REQUESTS_IN_FLIGHT: Final = 8192
#: ...and bytes of those requests' bodies plus unwritten responses.
MAX_BUFFERED_BYTES: Final = 64 * 1024 * 1024
#: What a request counts for besides its body (header and bookkeeping).
REQUEST_OVERHEAD: Final = 128
#: Requests whose latency one connection tracks at most (more are not timed: a peer that never reads its answers,
#: or oneway requests dropped before a processor, must not grow the table without bound).
MAX_TIMED_REQUESTS: Final = 65_536
#: Seconds a closing connection's stream has to close gracefully (TLS sends close_notify, which a peer that stopped
#: reading never takes); then it is closed at once. Netty's ``SslHandler`` default ``closeNotifyFlushTimeout``.
CLOSE_TIMEOUT: Final = 3.0

JSON_SERIALIZE: Final = int(SerializeType.JSON)

Address = tuple[str, int]
RequestCallback = Callable[[RequestContext, RemotingCommand], Awaitable[None]]
#: ``(ctx, header fields, body) -> handled``: a request's JSON header, parsed but not made a command, offered before
#: the general path. True means the callee answered it (or will) and owns it entirely; False leaves it untouched.
FastRequest = Callable[[RequestContext, dict[str, Any], bytes], bool]


class Connection:
    """A framed, multiplexed RocketMQ connection. See the module docstring for the contract.

    ``attributes`` is free for the layers above (client id, ACL identity, the broker's channel info).
    ``context`` is the one :class:`~remoting.processor.RequestContext` handed to processors for this connection.
    Construct it inside the event loop that will run it.

    ``raw_socket``, if given, is a duplicate of the stream's socket, owned by the connection and closed with it.
    :meth:`send` then writes a frame straight to it (non-blocking) when the writer is idle, saving the writer's
    scheduler pass on the latency path (serial request/response). Pass it only for streams that write straight to
    that socket without buffering of their own (Trio's ``SocketStream``; anyio's streams under Trio), never under
    asyncio, whose transports buffer.
    """

    def __init__(
        self,
        stream: ByteStream,
        remote_address: Address,
        local_address: Address,
        *,
        max_frame: int = MAX_FRAME,
        idle_timeout: float | None = None,
        raw_socket: socket.socket | None = None,
        max_requests_in_flight: int = MAX_REQUESTS_IN_FLIGHT,
        max_buffered_bytes: int = MAX_BUFFERED_BYTES,
    ) -> None:
        self.remote_address = remote_address
        self.local_address = local_address
        self.attributes: dict[str, Any] = {}
        self.context = RequestContext(self)
        self.idle_timeout = idle_timeout
        self._stream = stream
        self._raw = raw_socket
        self._max_frame = max_frame
        #: opaque -> invocation awaiting its answer: one table for the connection's life (the reader holds it too),
        #: emptied in place on close, never replaced.
        self._pending: dict[int, Invocation] = {}
        #: The client's async permits (:mod:`remoting.permits`): its caller took one for every invocation it
        #: registers with a callback or its own future; completing such an invocation gives it back. None: no limit.
        self.async_permits: Permits | None = None
        self._outbox: list[bytes] = []
        self._outbox_bytes = 0
        self._writing = False
        self._direct_recent = False
        self._flush_frames = FLUSH_FRAMES
        self._holding = False
        self._writer_wakeup: primitives.Event | None = None
        self._drained: primitives.Event | None = None
        self._expiry_at = math.inf
        self._expiry_wakeup: primitives.Event | None = None
        self._sweeping = False  # the sweeper (:meth:`_expire_invocations`) runs: it enforces every deadline
        self._closed = False
        self._max_in_flight = max_requests_in_flight
        self._max_buffered = max_buffered_bytes
        self._inbound: dict[int, int] = {}  # opaque -> bytes of each request read and not yet answered
        #: opaque -> bytes of the further requests read with an opaque already in :attr:`_inbound` (a peer reusing
        #: one), each taking its place there as an answer to that opaque goes out; :attr:`_inbound_extra` counts them
        self._inbound_more: dict[int, list[int]] = {}
        self._inbound_extra = 0
        self._inbound_bytes = 0
        #: opaques in :attr:`_inbound` parked for long polling (:meth:`mark_suspended`): out of the request count
        self._suspended: set[int] = set()
        self._oneway_held = 0  # oneway requests read and not yet through their processor (or refused)
        self._capacity: primitives.Event | None = None
        self._scope: anyio.CancelScope | None = None
        self._loop = primitives.current()
        self.last_activity = self._loop.now()
        #: Set by the server to time requests (see :mod:`remoting.rpc_metrics`); ``None`` times nothing.
        self.rpc_latency: RpcLatency | None = None
        #: Close the connection when an :meth:`invoke` or :meth:`invoke_frame` times out (callback invocations never
        #: do), as RocketMQ's client does (see :class:`~remoting.client.RemotingClient`).
        self.close_on_timeout = False
        #: opaque -> [request code, read time ns, suspended]
        self._timed: dict[int, list[Any]] = {}
        #: Set by the server (:meth:`remoting.dispatch.Dispatcher.fast_request`): JSON requests are offered to it
        #: before becoming commands (see :data:`FastRequest`). Not used while :attr:`rpc_latency` times requests.
        self.fast_request: FastRequest | None = None

    def __repr__(self) -> str:
        host, port = self.remote_address[:2]
        return f"<Connection {host}:{port}{' closed' if self._closed else ''}>"

    @property
    def closed(self) -> bool:
        return self._closed

    @property
    def requests_in_flight(self) -> int:
        """Requests read from the peer whose response has not been written yet, or, oneway, whose processor has not
        returned yet."""
        return len(self._inbound) + self._inbound_extra + self._oneway_held

    @property
    def buffered_bytes(self) -> int:
        """Bytes held for this connection: bodies of requests in flight plus responses queued for the writer."""
        return self._inbound_bytes + self._outbox_bytes

    def _over_budget(self) -> bool:
        return (
            len(self._inbound)
            - min(len(self._suspended), _PARKED_FREE * self._max_in_flight)
            + self._inbound_extra
            + self._oneway_held
            >= self._max_in_flight
            or self._inbound_bytes + self._outbox_bytes > self._max_buffered
        )

    async def _wait_for_budget(self) -> None:
        """Park the reader until answers have gone out (or the connection closes)."""
        log.debug("%r: pausing reads (%d requests, %d bytes held)", self, self.requests_in_flight, self.buffered_bytes)
        while self._over_budget() and not self._closed:
            event = self._capacity = self._loop.new_event()
            await event.wait()

    def _wake_reader(self) -> None:
        if self._capacity is not None and not self._over_budget():
            self._capacity.set()
            self._capacity = None

    @property
    def pending_invocations(self) -> int:
        """Invocations waiting for their response."""
        return len(self._pending)

    def close(self) -> None:
        """Close now: stop the reader and writer (the stream closes as :meth:`run` exits), drop queued frames and
        fail outstanding invocations. Idempotent."""
        if self._closed:
            return
        self._closed = True
        if self._scope is not None:
            self._scope.cancel()
        self._release_waiters()

    async def run(self, on_request: RequestCallback) -> None:
        """Read, dispatch and write until the connection ends; then close the stream. Never raises a stream or codec
        error (they end the connection and are logged); cancellation propagates after cleanup.

        ``on_request(ctx, cmd)`` is awaited in the reader for every request frame, so it must hand real work off
        (a pool queue, a task) and return quickly: anything it awaits delays every later frame on this connection.
        """
        try:
            with anyio.CancelScope() as scope:
                self._scope = scope
                if self._closed:
                    scope.cancel()
                async with anyio.create_task_group() as tasks:
                    tasks.start_soon(self._write_frames)
                    tasks.start_soon(self._expire_invocations)
                    if self.idle_timeout is not None:
                        tasks.start_soon(self._watch_idle, self.idle_timeout)
                    await self._read_frames(on_request)
                    tasks.cancel_scope.cancel()
        finally:
            self._closed = True
            self._release_waiters()
            if self._raw is not None:
                self._raw.close()
            with anyio.move_on_after(CLOSE_TIMEOUT, shield=True), contextlib.suppress(*STREAM_ERRORS):
                await self._stream.aclose()  # past the timeout, the stream closes its transport at once

    def _raw_io(self) -> ByteStream:
        """What the reader and the writer use: the raw socket directly under Trio when there is one, which skips
        the stream layers (:class:`~remoting.streams.RawSocketIO`), else the stream."""
        if self._raw is not None and self._loop.is_trio:
            return RawSocketIO(self._raw)
        return self._stream

    async def _read_frames(self, on_request: RequestCallback) -> None:
        decoder = FrameDecoder(self._max_frame)
        ctx, pending, now, inbound = self.context, self._pending, self._loop.now, self._inbound
        receive_some = self._raw_io().receive_some
        fast = self.fast_request
        try:
            while True:
                data = await receive_some(RECEIVE_SIZE)
                if not data:
                    log.debug("%r: end of stream", self)
                    return
                self.last_activity = now()
                self._direct_recent = False  # frames answering this read may start with a direct write
                self._flush_frames = FLUSH_FRAMES
                decoder.receive_data(data)
                while True:
                    frame = decoder.next_frame()
                    if frame is None:
                        break
                    cmd = self._command_unless_fast(decoder, frame, fast)
                    if cmd is None:
                        # A fast handler's answers are queued like any other: past the byte budget (a peer that
                        # does not read them), stop reading as for the general path's requests.
                        if self._outbox_bytes > self._max_buffered:
                            await self._wait_for_budget()
                        continue
                    if cmd.flag & FLAG_RESPONSE:
                        future = pending.pop(cmd.opaque, None)
                        if future is None:
                            log.debug("%r: dropped a response nobody waits for (opaque %d)", self, cmd.opaque)
                        else:
                            self._complete(future, cmd)
                    else:
                        size = len(cmd.body) + REQUEST_OVERHEAD
                        if cmd.flag & FLAG_ONEWAY:
                            self._oneway_held += 1
                            self._inbound_bytes += size
                        else:
                            self._inbound_bytes += size
                            if cmd.opaque in inbound:
                                self._hold_duplicate(cmd.opaque, size)
                            else:
                                inbound[cmd.opaque] = size
                        if self.rpc_latency is not None and len(self._timed) < MAX_TIMED_REQUESTS:
                            self._timed[cmd.opaque] = [cmd.code, time.perf_counter_ns(), False]
                        await on_request(ctx, cmd)
                        if self._over_budget():
                            await self._wait_for_budget()
        except CodecError as exc:
            log.warning("%r: closing on a malformed frame: %s", self, exc)
        except STREAM_ERRORS as exc:
            log.debug("%r: read failed: %r", self, exc)
        except RemotingConnectError:
            pass

    def _command_unless_fast(
        self, decoder: FrameDecoder, frame: tuple[int, bytes, bytes], fast: FastRequest | None
    ) -> RemotingCommand | None:
        """``None`` when ``fast`` took the request, or the pending invocation took its response from the JSON header
        (:meth:`~remoting.future.Invocation.complete_json`); else the command :meth:`FrameDecoder.next_command` would
        have given (raising, and poisoning the decoder, as it would)."""
        serialize_type, header, body = frame
        try:
            if serialize_type == JSON_SERIALIZE:
                try:
                    fields = orjson.loads(header)
                except orjson.JSONDecodeError:
                    return decode_header(serialize_type, header, body)  # raises the general path's error
                if type(fields) is dict:
                    flag = fields.get("flag")
                    if flag == 0:
                        if fast is not None and fast(self.context, fields, body):
                            return None
                    elif flag == 1 and type(flag) is int:
                        opaque = fields.get("opaque")
                        future = self._pending.pop(opaque, None) if type(opaque) is int else None
                        if future is not None:
                            try:
                                if future.complete_json(fields, body):
                                    self._taken(future)
                                    return None
                            except Exception:  # taken, badly: it is out of the table, so it is not told again
                                log.exception("%r: an invocation failed taking its answer", self)
                                self._taken(future)
                                return None
                            self._pending[fields["opaque"]] = future  # declined: completed with the command below
                return command_from_json(fields, body)
            return decode_header(serialize_type, header, body)
        except CodecError as exc:
            decoder.poison(exc)
            raise

    async def _write_frames(self) -> None:
        outbox, now = self._outbox, self._loop.now
        send_all = self._raw_io().send_all
        try:
            while True:
                if not outbox:
                    self._direct_recent = False
                    self._flush_frames = FLUSH_FRAMES
                    wakeup = self._writer_wakeup = self._loop.new_event()
                    await wakeup.wait()
                    continue
                data = outbox[0] if len(outbox) == 1 else b"".join(outbox)
                outbox.clear()
                self._outbox_bytes = 0
                self._writing = True
                await send_all(data)
                self._writing = False
                self.last_activity = now()
                self._wake_reader()
                if self._drained is not None:
                    self._drained.set()
                    self._drained = None
        except STREAM_ERRORS as exc:
            log.debug("%r: write failed: %r", self, exc)
        finally:
            self.close()  # a failed or interrupted write leaves the peer's framing unknown

    async def _expire_invocations(self) -> None:
        """Fail invocations whose deadline passed. One task per connection instead of a cancel scope per
        invocation: it sleeps until the earliest deadline it knows of, and :meth:`invoke` wakes it only for a
        deadline earlier than that, so with uniform timeouts it wakes about once per timeout period."""
        loop = self._loop
        self._sweeping = True
        try:
            while True:
                wakeup = self._expiry_wakeup = loop.new_event()
                self._time_out(self._take_expired(loop.now()))
                with loop.move_on_at(self._expiry_at):
                    await wakeup.wait()
        finally:
            self._sweeping = False

    def _take_expired(self, now: float) -> list[Invocation]:
        """Remove the invocations whose deadline is ``now`` or earlier and return them; the earliest deadline left
        becomes the sweeper's next (:attr:`_expiry_at`). Nothing is completed here, so no callback can change the
        pending table while it is scanned (RocketMQ's ``NettyRemotingAbstract.scanResponseTable`` likewise removes
        first and calls back after)."""
        pending = self._pending
        expired = [opaque for opaque, future in pending.items() if future.deadline <= now]
        taken = [pending.pop(opaque) for opaque in expired]
        self._expiry_at = min((future.deadline for future in pending.values()), default=math.inf)
        return taken

    def _time_out(self, expired: list[Invocation]) -> None:
        """Complete each of ``expired`` as timed out. Their callbacks may close the connection or invoke again (an
        earlier deadline then sets the sweeper's wake-up event, so it scans again at once)."""
        for future in expired:
            self._complete(future)  # neither response nor error: a timeout

    def _complete(
        self, future: Invocation, response: RemotingCommand | None = None, error: RemotingError | None = None
    ) -> None:
        """Complete ``future``, which the caller has just taken out of the pending table (or never put in it): the
        reader, the sweeper, close and a failed write all complete through here. What the completion raises (a bug
        of the invocation's owner) is logged, so it neither ends the connection nor keeps other invocations from
        being told (RocketMQ's ``NettyRemotingAbstract`` likewise catches around every ``executeInvokeCallback``)."""
        if self.async_permits is not None and type(future) is not ResponseFuture:
            self.async_permits.release()  # Java's ResponseFuture.release, once per invocation
        try:
            future.complete(response, error)
        except Exception:
            log.exception("%r: an invocation's completion failed", self)

    def _taken(self, future: Invocation) -> None:
        """``future`` took its answer from the JSON header (or its request did not encode), so :meth:`_complete` never
        sees it: give its permit back here (Java's processResponseCommand releases the ResponseFuture however its
        answer is used)."""
        if self.async_permits is not None and type(future) is not ResponseFuture:
            self.async_permits.release()

    async def _watch_idle(self, idle_timeout: float) -> None:
        while True:
            deadline = self.last_activity + idle_timeout
            if self._loop.now() >= deadline:
                log.info("%r: closing after %.0f s without a read or a write", self, idle_timeout)
                self.close()
                return
            await self._loop.sleep_until(deadline)

    def _release_waiters(self) -> None:
        """Fail every outstanding invocation, wake the writer's and the reader's waiters and drop queued frames. The
        invocations are all taken out of the pending table before any is told (it is the connection's one table,
        which the reader holds too), so an answer read after a callback closed the connection finds none of them
        (RocketMQ's ``NettyRemotingAbstract.failFast`` removes each before calling it back)."""
        pending = self._pending
        released = list(pending.values())
        pending.clear()
        for future in released:
            self._complete(future, error=RemotingConnectError(f"connection to {self.remote_address} closed"))
        self._outbox.clear()
        if self._drained is not None:
            self._drained.set()
        if self._capacity is not None:
            self._capacity.set()

    @property
    def writable(self) -> bool:
        """Open and not :attr:`congested`: what is written now reaches the peer without waiting (Netty's
        ``isActive() && isWritable()``), so a caller choosing among a group's channels prefers this one. A channel
        standing in for another transport says what it means there."""
        return not self._closed and not self.congested

    @property
    def congested(self) -> bool:
        """More than ``SEND_HIGH_WATER`` bytes wait for the writer: :meth:`send` would wait, so callers that cannot
        wait (:meth:`invoke_callback`'s users) should take a path that can."""
        return self._outbox_bytes > SEND_HIGH_WATER

    async def send(self, cmd: RemotingCommand) -> None:
        """Write one command, or queue it for the writer (see the module docstring). Frames go out in call order.

        Returns at once unless more than ``SEND_HIGH_WATER`` bytes are waiting, then waits until the writer has
        drained them. Raises :class:`RemotingClosedError` if the connection is (or, while waiting, becomes) closed,
        and :class:`RemotingConnectError` (closing the connection) if a direct write fails. A frame queued before a
        failure may be lost with the connection: the caller learns it from the invocation that fails, or not at all
        for a response or oneway request, as with any socket.
        """
        self.send_nowait(cmd)
        if self._outbox_bytes > SEND_HIGH_WATER:
            await self._drain()

    async def _drain(self) -> None:
        """Wait until the writer drained the queue (the caller saw more than ``SEND_HIGH_WATER`` bytes in it)."""
        if self._drained is None:
            self._drained = self._loop.new_event()
        await self._drained.wait()
        if self._closed:
            raise RemotingClosedError(f"{self!r}: connection closed before the frame was written")

    def send_nowait(self, cmd: RemotingCommand) -> None:
        """:meth:`send` without the wait: the frame is written or queued whatever the backlog (see
        :attr:`congested`). Same errors; a response that does not encode closes the connection and raises
        :class:`RemotingConnectError` (a request that does not encode raises what the encoder raised)."""
        if self._closed:
            raise RemotingClosedError(f"{self!r}: cannot write, connection closed")
        try:
            frame = encode_command(cmd)
        except Exception as exc:
            if not cmd.flag & FLAG_RESPONSE:
                raise
            self._unencodable(cmd, exc)
        if cmd.flag & FLAG_RESPONSE and self._inbound:
            size = self._inbound.pop(cmd.opaque, None)
            if size is not None:
                self._inbound_bytes -= size
                if self._suspended:
                    self._suspended.discard(cmd.opaque)
                if self._inbound_more:
                    self._next_duplicate(cmd.opaque)
                if self._capacity is not None:
                    self._wake_reader()
        if self._timed and cmd.flag & FLAG_RESPONSE:
            self._time_response(cmd.opaque, cmd.code, RESULT_SUCCESS)
        self._write_frame(frame)

    def _unencodable(self, cmd: RemotingCommand, exc: Exception) -> NoReturn:
        """An answer that does not encode (a processor's bug): log it and close this connection, as
        remoting/src/main/java/org/apache/rocketmq/remoting/netty/NettyEncoder.java closes the channel, instead of
        the error ending the pool worker that wrote it, and the server with it."""
        log.error("%r: closing, the answer to opaque %d (code %d) does not encode: %r", self, cmd.opaque, cmd.code, exc)
        self.close()
        raise RemotingConnectError(f"{self!r}: answer to opaque {cmd.opaque} does not encode") from exc

    def _hold_duplicate(self, opaque: int, size: int) -> None:
        """A request whose opaque is already in flight: counted on its own, so a peer reusing an opaque cannot
        slip past the budget (RocketMQ's clients never do: ``requestId`` in
        ``remoting/src/main/java/org/apache/rocketmq/remoting/protocol/RemotingCommand.java`` numbers every request)."""
        self._inbound_more.setdefault(opaque, []).append(size)
        self._inbound_extra += 1

    def _next_duplicate(self, opaque: int) -> None:
        """An answer to ``opaque`` went out: the next request held with that opaque, if any, becomes its entry."""
        more = self._inbound_more.get(opaque)
        if more:
            self._inbound[opaque] = more.pop(0)
            self._inbound_extra -= 1
            if not more:
                del self._inbound_more[opaque]

    def send_frame_nowait(self, frame: bytes) -> None:
        """:meth:`send_nowait` of a frame already encoded: a request, or the answer to a request that never became a
        command (a :data:`FastRequest`'s), so no budget or latency bookkeeping, which only answers to commands read
        here need. Same errors."""
        if self._closed:
            raise RemotingClosedError(f"{self!r}: cannot write, connection closed")
        self._write_frame(frame)

    def hold_frame(self, frame: bytes) -> bool:
        """Queue ``frame`` (encoded, as for :meth:`send_frame_nowait`) without writing anything yet: for a caller
        answering many requests in one pass, who must call :meth:`release_held` when the pass ends, so the answers
        leave in one write (one wake-up of the peer) instead of a few. Frames written meanwhile queue behind it.
        Returns True when nothing was held before (the caller then remembers the connection). Raises
        :class:`RemotingClosedError` on a closed connection."""
        if self._closed:
            raise RemotingClosedError(f"{self!r}: cannot write, connection closed")
        self._outbox.append(frame)
        self._outbox_bytes += len(frame)
        first, self._holding = not self._holding, True
        return first

    def hold(self) -> None:
        """Hold every frame written from now on until :meth:`release_held`, as :meth:`hold_frame` holds its own: for
        a caller that writes many frames to this connection in one pass (they leave in one write). Nothing on a
        closed connection."""
        if not self._closed:
            self._holding = True

    def release_held(self) -> None:
        """Write what :meth:`hold_frame` queued: straight to the socket when the writer is idle (the writer gets
        what the socket does not take), else the running writer takes it. Raises :class:`RemotingConnectError`
        (closing the connection) if the direct write fails."""
        self._holding = False
        wakeup = self._writer_wakeup
        if wakeup is None or not self._outbox or self._closed:
            return  # the writer is running (it takes the outbox next) or there is nothing left to write
        if self._raw is not None:
            self._direct_recent = True
            if self._flush_direct():
                return
        self._writer_wakeup = None
        wakeup.set()

    def _write_frame(self, frame: bytes) -> None:
        if self._holding:  # behind the held frames, written with them
            self._outbox.append(frame)
            self._outbox_bytes += len(frame)
            return
        wakeup = self._writer_wakeup
        if wakeup is not None:
            # The writer is idle, so nothing is queued. The first frame since the last read (or the writer's last
            # run) goes straight to the socket without waking the writer, which saves a scheduler pass on the
            # serial request/response path; any further frame wakes the writer, which coalesces everything queued
            # until it runs.
            if self._raw is not None and not self._direct_recent:
                self._direct_recent = True
                frame = self._send_direct(frame)
                if not frame:
                    return
            self._writer_wakeup = None
            wakeup.set()
        outbox = self._outbox
        outbox.append(frame)
        self._outbox_bytes += len(frame)
        if len(outbox) >= self._flush_frames and self._raw is not None and not self._writing:
            self._flush_frames = min(self._flush_frames * 2, MAX_FLUSH_FRAMES)
            self._flush_direct()

    def _flush_direct(self) -> bool:
        """Write the queued frames straight to the socket (the writer is not writing), keeping what the socket does
        not take queued; True when all of it went out. As the writer does after a write, wake a reader paused on the
        byte budget and, once nothing is left, :meth:`send` callers waiting for the drain (with bytes left, the
        caller has the writer woken, and it tells them after writing the rest). Same errors as :meth:`_send_direct`."""
        outbox = self._outbox
        data = self._send_direct(outbox[0] if len(outbox) == 1 else b"".join(outbox))
        outbox.clear()
        self._outbox_bytes = len(data)
        if data:
            outbox.append(data)
        elif self._drained is not None:
            self._drained.set()
            self._drained = None
        if self._capacity is not None:
            self._wake_reader()
        return not data

    def time_request(self, code: int, opaque: object) -> bool:
        """Time the request ``opaque`` a fast handler is offered from now; False (nothing timed) when it cannot be:
        no int opaque, one already in flight with it, or the table full."""
        if type(opaque) is not int or opaque in self._timed or len(self._timed) >= MAX_TIMED_REQUESTS:
            return False
        self._timed[opaque] = [code, time.perf_counter_ns(), False]
        return True

    def untime(self, opaque: object) -> None:
        """Forget the timing :meth:`time_request` started (the fast handler declined the request)."""
        self._timed.pop(opaque, None)  # type: ignore[call-overload]

    def fast_answered(self, opaque: int, response_code: int = 0) -> None:
        """A fast handler wrote the answer to ``opaque`` as a frame (:meth:`send_frame_nowait`, :meth:`hold_frame`):
        its latency is recorded now, as an answer written as a command is."""
        if self._timed:
            self._time_response(opaque, response_code, RESULT_SUCCESS)

    def _time_response(self, opaque: int, response_code: int, result: str) -> None:
        timed = self._timed.pop(opaque, None)
        if timed is not None and self.rpc_latency is not None:
            code, started, suspended = timed
            self.rpc_latency.observe(code, response_code, suspended, result, time.perf_counter_ns() - started)

    def oneway_done(self, request: RemotingCommand, response: RemotingCommand | None) -> None:
        """A oneway request's processor returned (or it was refused before one): it leaves the connection's budget
        and its latency is recorded now, with the code it would have answered; not at all when it returned nothing,
        as RocketMQ 5.3.3's ``NettyRemotingAbstract.writeResponse`` returns before recording without a response.
        Whoever takes a oneway request from :meth:`run`'s callback must call this once for it."""
        if self._oneway_held > 0:
            self._oneway_held -= 1
            self._inbound_bytes -= len(request.body) + REQUEST_OVERHEAD
            if self._capacity is not None:
                self._wake_reader()
        if not self._timed:
            return
        if response is None:
            self._timed.pop(request.opaque, None)
        else:
            self._time_response(request.opaque, response.code, RESULT_ONEWAY)

    def mark_suspended(self, opaque: int) -> None:
        """The request is parked for long polling: its latency is labelled ``is_long_polling``, and it leaves the
        request count of the connection's budget (its bytes stay) until it is answered, up to :data:`_PARKED_FREE`
        times the budget (past that they count again: one client's parked pulls stay bounded by more than bytes).
        A parked pull holds no worker, and RocketMQ parks any number of them (broker/src/main/java/org/apache/
        rocketmq/broker/longpolling/PullRequestHoldService.java): counted, a client instance holding more pulls than
        the budget on one broker had its sends and heartbeats on that connection left unread until a pull expired."""
        if opaque in self._inbound and opaque not in self._suspended:
            self._suspended.add(opaque)
            if self._capacity is not None:
                self._wake_reader()
        timed = self._timed.get(opaque)
        if timed is not None:
            timed[2] = True

    def _send_direct(self, frame: bytes) -> bytes:
        """Write what the socket takes now; return the rest (empty when all of it went out)."""
        assert self._raw is not None
        try:
            sent = self._raw.send(frame)
        except BlockingIOError:
            return frame
        except OSError as exc:
            self.close()
            raise RemotingConnectError(f"{self!r}: write failed: {exc!r}") from exc
        self.last_activity = self._loop.now()
        return frame[sent:]

    async def invoke(self, cmd: RemotingCommand, timeout: float, *, keep_open: bool = False) -> RemotingCommand:
        """Send a request and wait up to ``timeout`` seconds for the response with the same opaque.

        The timeout covers the whole call: a request queued behind a backlog the peer does not read (see
        :attr:`congested`) times out like one the peer does not answer, since no answer comes before it is written;
        it stays queued, as :meth:`send_nowait` leaves it. The deadline holds whether or not :meth:`run` runs (a
        connection whose :meth:`send_nowait` drops the request times out too). Raises :class:`RemotingTimeoutError`
        (the connection stays open, unless :attr:`close_on_timeout` and not ``keep_open``, which a callback
        invocation run as a task passes; a late response is dropped) or :class:`RemotingConnectError` if the
        connection closes first. ``cmd`` must not be oneway.
        """
        if self._closed:
            raise RemotingClosedError(f"{self!r}: cannot invoke, connection closed")
        deadline = self._loop.now() + timeout
        future = ResponseFuture(deadline, self._loop.new_event())
        opaque = cmd.opaque
        self._add_pending(opaque, future, deadline)
        try:
            self.send_nowait(cmd)
            await self._answer(future, deadline)
        finally:
            if self._pending.get(opaque) is future:
                del self._pending[opaque]
        if future.response is not None:
            return future.response
        if future.error is not None:
            raise future.error
        if not keep_open:
            self._timed_out()
        raise RemotingTimeoutError(f"no response to request code {cmd.code} from {self.remote_address} in {timeout}s")

    def _timed_out(self) -> None:
        if self.close_on_timeout and not self._closed:
            log.info("%r: closing after a request timed out", self)
            self.close()

    def _answer(self, future: ResponseFuture, deadline: float) -> Awaitable[None]:
        """Wait for ``future``'s outcome: its own wait when the sweeper times it out, else a wait bounded by
        ``deadline`` (returning with the future incomplete, which the caller reads as a timeout)."""
        if self._sweeping:
            return future.wait()  # no coroutine around it: the hot path
        return self._answer_by(future, deadline)

    async def _answer_by(self, future: ResponseFuture, deadline: float) -> None:
        with self._loop.move_on_at(deadline):
            await future.wait()

    def invoke_callback(self, cmd: RemotingCommand, timeout: float, callback: OutcomeCallback) -> None:
        """Send a request and have ``callback`` called, once, with its response or a ``RemotingError``: a
        ``RemotingTimeoutError`` after ``timeout`` seconds (from the sweeper, so only once :meth:`run` runs),
        ``RemotingConnectError`` / ``RemotingClosedError`` when the connection is or becomes closed. No task and no
        wait: the reader (or the sweeper, or close) calls it, so it must return quickly; what it raises is logged. It
        may run before this method returns (a failed write). Never raises, but for a ``cmd`` that does not encode: that
        is raised and ``callback`` never called. Ignores :attr:`congested` (the caller decides). ``cmd`` must not be
        oneway.
        """
        self._invoke_callback(cmd.opaque, cmd.code, cmd, timeout, callback)

    def invoke_frame_callback(
        self, opaque: int, code: int, frame: bytes, timeout: float, callback: OutcomeCallback
    ) -> None:
        """:meth:`invoke_callback` of a request already encoded (``frame``, whose opaque and code are given), for a
        caller that never built the command. Same contract."""
        self._invoke_callback(opaque, code, frame, timeout, callback)

    def _invoke_callback(
        self, opaque: int, code: int, request: RemotingCommand | bytes, timeout: float, callback: OutcomeCallback
    ) -> None:
        future = CallbackFuture(self._loop.now() + timeout, callback, code, self.remote_address, timeout)
        self._register(opaque, request, future)

    def invoke_frame_future(self, opaque: int, frame: bytes, future: Invocation, timeout: float) -> None:
        """Send a request already encoded (``frame``, whose opaque is given) for an :class:`Invocation` the caller
        made: its ``deadline`` is set to ``timeout`` seconds from now, and it is completed once, with the response
        (offered to its ``complete_json`` first), the error, or a timeout at its deadline, by the reader, close or
        the sweeper; maybe before this returns (a failed write). Never raises; ignores :attr:`congested`."""
        future.deadline = self._loop.now() + timeout
        self._register(opaque, frame, future)

    def _add_pending(self, opaque: int, future: Invocation, deadline: float) -> None:
        """Await the answer to ``opaque`` with ``future``; wake the sweeper if ``deadline`` comes before its next."""
        self._pending[opaque] = future
        if deadline < self._expiry_at and self._expiry_wakeup is not None:
            self._expiry_at = deadline
            self._expiry_wakeup.set()

    def _register(self, opaque: int, request: RemotingCommand | bytes, future: Invocation) -> None:
        if self._closed:
            self._complete(future, error=RemotingClosedError(f"{self!r}: cannot invoke, connection closed"))
            return
        self._add_pending(opaque, future, future.deadline)
        try:
            if type(request) is bytes:
                self.send_frame_nowait(request)
            else:
                self.send_nowait(request)  # type: ignore[arg-type]
        except RemotingError as exc:  # the connection closed: close() failed the future already, unless still here
            if self._pending.get(opaque) is future:
                del self._pending[opaque]
                self._complete(future, error=exc)
        except Exception:  # the command did not encode: never written, so the caller hears it, not the future
            if self._pending.get(opaque) is future:
                del self._pending[opaque]
                self._taken(future)  # its permit back now (NettyRemotingAbstract.invokeAsyncImpl's release)
            raise

    async def invoke_frame(self, opaque: int, code: int, frame: bytes, timeout: float, decode: JsonDecoder) -> object:
        """:meth:`invoke` of a request already encoded (``frame``, whose opaque and code are given): the response's
        JSON header goes to ``decode`` first, and its value is returned; when it declines, the response command.
        Same timeout and errors as :meth:`invoke`."""
        if self._closed:
            raise RemotingClosedError(f"{self!r}: cannot invoke, connection closed")
        deadline = self._loop.now() + timeout
        future = ResponseFuture(deadline, self._loop.new_event(), decode)
        self._add_pending(opaque, future, deadline)
        try:
            self.send_frame_nowait(frame)
            await self._answer(future, deadline)
        finally:
            if self._pending.get(opaque) is future:
                del self._pending[opaque]
        if future.value is not None:
            return future.value
        if future.response is not None:
            return future.response
        if future.error is not None:
            raise future.error
        self._timed_out()
        raise RemotingTimeoutError(f"no response to request code {code} from {self.remote_address} in {timeout}s")

    async def invoke_oneway(self, cmd: RemotingCommand, timeout: float | None = None) -> None:
        """Send a request flagged oneway (the flag is set if missing): the peer must not answer.

        Waits as :meth:`send` does while the backlog is above ``SEND_HIGH_WATER``, but, given a ``timeout``, at most
        that many seconds: the frame then stays queued (it goes out when the peer reads, or is dropped with the
        connection) and nothing is raised, a oneway having no outcome to report. Same errors as :meth:`send`.
        """
        if not cmd.flag & FLAG_ONEWAY:
            cmd = attrs.evolve(cmd, flag=cmd.flag | FLAG_ONEWAY)
        if timeout is None:
            await self.send(cmd)
            return
        self.send_nowait(cmd)
        if self._outbox_bytes > SEND_HIGH_WATER:
            with self._loop.move_on_at(self._loop.now() + timeout):
                await self._drain()
