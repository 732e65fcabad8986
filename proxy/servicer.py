"""``MessagingServicer``: the asyncio half of ``apache.rocketmq.v2.MessagingService`` on grpcio's thread.

Each method only reads the request headers, hands the request to :class:`proxy.messaging.MessagingActivity` on the
Trio thread through the :class:`~proxy.bridge.TrioBridge`, and writes what comes back. Telemetry is the one duplex
call: a reader task forwards the client's commands; the writer sends the replies and whatever the broker pushes
(transaction recovery) through the stream's outbox. The RPCs not served here (PullMessage and the offset RPCs, which
RocketMQ 5.3's proxy does not serve either, SyncLiteSubscription) answer gRPC UNIMPLEMENTED. A stopping
broker answers UNAVAILABLE. A Telemetry command the ACL refuses is answered with a command carrying its status,
then the stream completes. A ReceiveMessage stream that breaks before it wrote its messages nacks them (visible again
in 1 s).
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
from collections.abc import AsyncIterator, Callable
from typing import Any, Final, TypeAlias

import grpc

from processors.filter.cache import INLINE_LIMIT, precompile
from proxy.bridge import BridgeClosed, TrioBridge
from proxy.common import PEER_KEY, TLS_ONLY_KEY, Code, RpcError, status
from proxy.messaging import MessagingActivity
from proxy.pb import definition, service, service_grpc

__all__ = ["MessagingServicer"]

log = logging.getLogger(__name__)

_END: Final = object()
#: A receive answers this long before the caller's deadline, so the answer is not cut off by it.
_DEADLINE_MARGIN: Final = 0.5
#: grpc.aio.ServicerContext (grpcio ships no type information).
Context: TypeAlias = Any
_SERVICE: Final = "apache.rocketmq.v2.MessagingService"
#: grpc-java's ServerCalls.asyncUnimplementedUnaryCall description.
_NOT_OVERRIDDEN: Final = "Method {} is unimplemented"


def _unimplemented(method: str, words: str) -> Callable[..., Any]:
    """An RPC not served, answered UNIMPLEMENTED as grpc-java words it: ``Method <name> is unimplemented`` for the
    methods of rocketmq-proto 2.0.4's service that RocketMQ 5.3.3's GrpcMessagingApplication leaves to its base
    class, ``Method not found: <name>`` for one newer than that."""
    description = words.format(f"{_SERVICE}/{method}")

    async def unimplemented(self: Any, request: Any, context: Context) -> Any:
        await context.abort(grpc.StatusCode.UNIMPLEMENTED, description)

    return unimplemented


def _metadata(context: Context, real_peer: Callable[[str], str], tls_only: bool = False) -> dict[str, str]:
    md = {k: v for k, v in (context.invocation_metadata() or ()) if isinstance(v, str)}
    md[PEER_KEY] = real_peer(context.peer() or "")
    md[TLS_ONLY_KEY] = "true" if tls_only else ""
    return md


class MessagingServicer(service_grpc.MessagingServiceServicer):  # type: ignore[misc]
    """See the module docstring. ``real_peer`` maps grpcio's ``context.peer()`` to the client's (the server's
    :meth:`proxy.server.GrpcServer.real_peer`); ``tls_only``: this servicer serves the TLS-only port."""

    def __init__(
        self,
        bridge: TrioBridge,
        activity: MessagingActivity,
        real_peer: Callable[[str], str],
        tls_only: bool = False,
    ) -> None:
        self.bridge = bridge
        self.activity = activity
        self.real_peer = real_peer
        self.tls_only = tls_only
        self._outboxes: set[asyncio.Queue[Any]] = set()

    def close_streams(self) -> None:
        """End every Telemetry stream (the server is stopping); called on the gRPC thread."""
        for outbox in self._outboxes:
            outbox.put_nowait(_END)

    async def _unary(self, fn: Any, make: Any, request: Any, context: Context, *, waits: bool = False) -> Any:
        """One unary request on the Trio thread: synchronously (no Trio task, see TrioBridge.call_sync) unless the
        handler ``waits`` (a coroutine)."""
        md = _metadata(context, self.real_peer, self.tls_only)
        try:
            if waits:
                return await self.bridge.call(self.activity.guarded, fn, make, request, md)
            return await self.bridge.call_sync(self.activity.guarded_sync, fn, make, request, md)
        except BridgeClosed:
            await context.abort(grpc.StatusCode.UNAVAILABLE, "broker is shutting down")

    async def _unary_put(self, fn: Any, make: Any, request: Any, context: Context) -> Any:
        """One unary request whose answer waits for its puts (an ack, a change of invisibility): synchronously when
        the store answers puts at once (:meth:`MessagingActivity.now_unless_waiting`), else as a Trio task, in the
        same hand-off."""
        md = _metadata(context, self.real_peer, self.tls_only)
        now = functools.partial(self.activity.now_unless_waiting, fn, make)
        later = functools.partial(self.activity.guarded, fn, make)
        try:
            return await self.bridge.call_now_or_later(now, later, request, md)
        except BridgeClosed:
            await context.abort(grpc.StatusCode.UNAVAILABLE, "broker is shutting down")

    async def QueryRoute(self, request: Any, context: Context) -> Any:
        return await self._unary(self.activity.query_route, service.QueryRouteResponse, request, context, waits=True)

    async def Heartbeat(self, request: Any, context: Context) -> Any:
        return await self._unary(self.activity.heartbeat, service.HeartbeatResponse, request, context)

    async def SendMessage(self, request: Any, context: Context) -> Any:
        md = _metadata(context, self.real_peer, self.tls_only)
        try:
            # ASYNC_FLUSH: the whole send runs synchronously; else, in the same hand-off, a Trio task that may wait.
            return await self.bridge.call_now_or_later(self.activity.send_now, self.activity.send, request, md)
        except BridgeClosed:
            await context.abort(grpc.StatusCode.UNAVAILABLE, "broker is shutting down")

    async def QueryAssignment(self, request: Any, context: Context) -> Any:
        fn, make = self.activity.query_assignment, service.QueryAssignmentResponse
        return await self._unary(fn, make, request, context, waits=True)

    async def AckMessage(self, request: Any, context: Context) -> Any:
        return await self._unary_put(self.activity.consuming.ack, service.AckMessageResponse, request, context)

    async def ForwardMessageToDeadLetterQueue(self, request: Any, context: Context) -> Any:
        fn, make = self.activity.consuming.forward_to_dlq, service.ForwardMessageToDeadLetterQueueResponse
        return await self._unary(fn, make, request, context, waits=True)

    async def EndTransaction(self, request: Any, context: Context) -> Any:
        fn, make = self.activity.producing.end_transaction, service.EndTransactionResponse
        return await self._unary(fn, make, request, context, waits=True)

    async def RecallMessage(self, request: Any, context: Context) -> Any:
        fn, make = self.activity.producing.recall, service.RecallMessageResponse
        return await self._unary(fn, make, request, context, waits=True)

    async def NotifyClientTermination(self, request: Any, context: Context) -> Any:
        fn, make = self.activity.notify_termination, service.NotifyClientTerminationResponse
        return await self._unary(fn, make, request, context)

    async def ChangeInvisibleDuration(self, request: Any, context: Context) -> Any:
        fn, make = self.activity.consuming.change_invisible, service.ChangeInvisibleDurationResponse
        return await self._unary_put(fn, make, request, context)

    async def ReceiveMessage(self, request: Any, context: Context) -> AsyncIterator[Any]:
        md = _metadata(context, self.real_peer, self.tls_only)
        expression = request.filter_expression
        if expression.type == definition.FilterType.SQL and len(expression.expression) >= INLINE_LIMIT:
            # A long SQL92 filter is compiled on an executor thread, as RocketMQ 5 compiles it on a pop thread
            # (ConsumerFilterManager.build in broker/src/main/java/org/apache/rocketmq/broker/processor/
            # PopMessageProcessor.java), not on the Trio thread every client shares: the receive finds it memoised.
            await asyncio.to_thread(precompile, expression.expression, string_operators=True)
        # Read after the compile, which may take seconds: the polling window is cut to what the client still waits.
        remaining = context.time_remaining()
        deadline = None if remaining is None else max(0.0, remaining - _DEADLINE_MARGIN)
        try:
            # Nothing visible yet: long-poll in a Trio task, started in the same hand-off.
            now, later = self.activity.receive_now, self.activity.receive
            # An answer its client no longer waits for is nacked too (the write to a cancelled stream fails there).
            unclaimed = functools.partial(self.activity.consuming.nack_unwritten, req=request, metadata=md)
            responses = await self.bridge.call_now_or_later(now, later, request, md, deadline, unclaimed=unclaimed)
        except BridgeClosed:
            await context.abort(grpc.StatusCode.UNAVAILABLE, "broker is shutting down")
        for i, response in enumerate(responses):
            try:
                yield response
            except BaseException:  # the stream broke: what it did not write is nacked, as RocketMQ's proxy does
                self.bridge.call_soon(self.activity.consuming.nack_unwritten, responses[i:], request, md)
                raise

    async def Telemetry(self, request_iterator: AsyncIterator[Any], context: Context) -> AsyncIterator[Any]:
        md = _metadata(context, self.real_peer, self.tls_only)
        loop = asyncio.get_running_loop()
        outbox: asyncio.Queue[Any] = asyncio.Queue()

        def push(command: Any) -> None:  # called on the Trio thread
            with contextlib.suppress(RuntimeError):  # the gRPC loop is closing
                loop.call_soon_threadsafe(outbox.put_nowait, command)

        try:
            await self.bridge.call_sync(self.activity.telemetry_opened, md, push)
        except (RpcError, BridgeClosed) as exc:
            await context.abort(grpc.StatusCode.INVALID_ARGUMENT, str(exc))
        reader = asyncio.create_task(self._read_commands(request_iterator, md, outbox))
        self._outboxes.add(outbox)
        try:
            while (item := await outbox.get()) is not _END:
                if isinstance(item, RpcError):
                    await context.abort(_telemetry_status(item.code), item.message)
                yield item
        finally:
            self._outboxes.discard(outbox)
            reader.cancel()
            with contextlib.suppress(BaseException):
                await self.bridge.call_sync(self.activity.telemetry_closed, md, push)

    async def _read_commands(
        self, requests: AsyncIterator[Any], md: dict[str, str], outbox: asyncio.Queue[Any]
    ) -> None:
        try:
            async for command in requests:
                reply = await self.bridge.call_sync(self.activity.telemetry, command, md)
                if reply is not None:
                    outbox.put_nowait(reply)
        except RpcError as err:
            # GrpcMessagingApplication.telemetry: a command the request pipeline (the ACL) or validateContext refuses
            # is written as a command with its status and the stream completed (writeResponse, ResponseWriter.write);
            # others end it with an error (ClientActivity.processTelemetryException).
            refused = err.code in (Code.UNAUTHORIZED, Code.CLIENT_ID_REQUIRED)
            outbox.put_nowait(service.TelemetryCommand(status=status(err.code, err.message)) if refused else err)
        except (BridgeClosed, grpc.RpcError, asyncio.CancelledError):
            pass
        except Exception:
            log.exception("telemetry stream of %s failed", md.get("x-mq-client-id"))
        finally:
            outbox.put_nowait(_END)

    PullMessage = _unimplemented("PullMessage", _NOT_OVERRIDDEN)
    UpdateOffset = _unimplemented("UpdateOffset", _NOT_OVERRIDDEN)
    GetOffset = _unimplemented("GetOffset", _NOT_OVERRIDDEN)
    QueryOffset = _unimplemented("QueryOffset", _NOT_OVERRIDDEN)
    SyncLiteSubscription = _unimplemented("SyncLiteSubscription", "Method not found: {}")


def _telemetry_status(code: int) -> grpc.StatusCode:
    """ClientActivity.processTelemetryException (proxy/src/main/java/org/apache/rocketmq/proxy/grpc/v2/client/
    ClientActivity.java): a refusal with a 4xxxx code ends the stream INVALID_ARGUMENT, any other INTERNAL."""
    return (
        grpc.StatusCode.INVALID_ARGUMENT if Code.BAD_REQUEST <= code < Code.INTERNAL_ERROR else grpc.StatusCode.INTERNAL
    )
