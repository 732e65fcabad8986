"""Request dispatch: a table from request code to (processor, pool), and the processor pools
(docs/architecture.md#the-reactor-split-and-its-pools).

A :class:`ProcessorPool` is RocketMQ's business thread pool in Trio clothes: a bounded memory channel is its queue,
``workers`` long-lived worker tasks are its threads (a worker loop per pool, not a task per request: spawning a task
per request cost more than the whole dispatch), each holding one token of the pool's ``trio.CapacityLimiter`` for its
lifetime (``limiter.borrowed_tokens`` = live workers; ``busy`` = workers inside a processor; per-request limiter
accounting showed up at ~5 % of the server's profile, hence per-worker). A pool runs in its own nursery
(:meth:`ProcessorPool.run`).

:meth:`Dispatcher.dispatch` runs in a connection's reader task and never waits for a processor:

- unknown code (and no default) -> ``REQUEST_CODE_NOT_SUPPORTED`` (3), remark ``" request type <code> not supported"``,
  once ``admission`` admitted it;
- a registration's ``reject`` (the processor's ``rejectRequest``: the send processor's while the store is page-cache
  busy) answering True -> ``SYSTEM_BUSY``, remark ``"[REJECTREQUEST]system busy, start flow control for a while"``;
- queue full -> ``SYSTEM_BUSY`` (2), remark ``"[OVERLOAD]system busy, start flow control for a while"``;
- oneway requests never get either answer (nor any other);
- ``admission`` (optional, the broker's ACL check) runs in the pool's worker, after the fast-failure checks and
  before the processor, as RocketMQ 4.9.8 runs its RPC hooks inside the executor's task
  (``NettyRemotingAbstract.processRequestCommand``): a request the broker is too busy for is answered SYSTEM_BUSY
  whoever sent it, and a command admission returns is the answer instead of the processor's;
- a fast handler that raises gets its request answered ``SYSTEM_ERROR``, as a processor that raises does.

:meth:`Dispatcher.fast_request` is the reader's shortcut (:data:`~remoting.connection.FastRequest`): a handler
registered with :meth:`Dispatcher.register_fast` may take a request straight from its parsed JSON header, in the
reader, without a command, a pool hop or a coroutine. It is offered only what the pool path would treat the same way:
the code's pool is idle (nothing queued or running), so a connection's requests keep their order, its ``reject`` (if
any) answers False, and, when an
admission (ACL) is configured, its ``fast_admission`` admits the header's fields as they are (anything it does not
admit, refusals included, takes the general path, which answers it). A handler that returns False has touched
nothing; the request then takes the general path.

What a processor's outcome becomes on the wire is :func:`remoting.processor.run_processor`'s contract.
"""

from __future__ import annotations

import collections
import logging
import math
from collections.abc import Callable, Iterable, Mapping
from typing import Any, Final

import attrs
import trio

from remoting.codec.codes import ResponseCode
from remoting.codec.command import RemotingCommand
from remoting.codec.errors import CodecError
from remoting.codec.serializers import command_from_json
from remoting.cpus import available_cpus
from remoting.errors import RemotingConnectError
from remoting.processor import Processor, RequestContext, run_processor

__all__ = [
    "OVERLOAD_REMARK",
    "REJECT_REMARK",
    "Admission",
    "Dispatcher",
    "Processor",
    "ProcessorPool",
    "RequestContext",
    "broker_pools",
    "not_supported_remark",
    "page_cache_busy_remark",
    "queue_timeout_remark",
]

log = logging.getLogger(__name__)

OVERLOAD_REMARK: Final = "[OVERLOAD]system busy, start flow control for a while"
#: NettyRemotingAbstract.processRequestCommand's answer when the processor's ``rejectRequest()`` is true.
REJECT_REMARK: Final = "[REJECTREQUEST]system busy, start flow control for a while"

#: A processor's ``rejectRequest``: True refuses the request before it is queued (see the module docstring).
Reject = Callable[[], bool]

#: Called for every request by the worker about to process it (or by the reader for a code with no processor):
#: ``None`` admits it; a command is the answer instead. It must not block and should not raise.
Admission = Callable[[RequestContext, RemotingCommand], RemotingCommand | None]

#: ``(ctx, header fields, body) -> handled``, see :meth:`Dispatcher.register_fast`.
FastHandler = Callable[[RequestContext, dict[str, Any], bytes], bool]

#: ``(ctx, header fields, body) -> admitted`` for the fast path; False sends the request the general way (see the
#: module docstring). It must not block or raise.
FastAdmission = Callable[[RequestContext, dict[str, Any], bytes], bool]

#: Seconds between two looks of a pool's sweeper at a queue head it may not refuse yet: BrokerFastFailure's period.
SWEEP_INTERVAL: Final = 0.01

#: (processor, context, request, time queued, queued behind busy workers): the last two only matter to pools with
#: ``max_wait``.
_Job = tuple[Processor, RequestContext, RemotingCommand, float, bool]


def queue_timeout_remark(waited: float, queued: int) -> str:
    """RocketMQ's fast-failure remark for a request that waited too long in its pool's queue."""
    return (
        "[TIMEOUT_CLEAN_QUEUE]broker busy, start flow control for a while, "
        f"period in queue: {round(waited * 1000)}ms, size of queue: {queued}"
    )


def page_cache_busy_remark(waited: float, queued: int) -> str:
    """BrokerFastFailure's remark for a send drained from its queue while the store is page-cache busy."""
    return (
        "[PCBUSY_CLEAN_QUEUE]broker busy, start flow control for a while, "
        f"period in queue: {round(waited * 1000)}ms, size of queue: {queued}"
    )


def not_supported_remark(code: int) -> str:
    """RocketMQ's remark for an unknown request code (the leading space is the Java server's)."""
    return f" request type {code} not supported"


@attrs.define(eq=False)
class ProcessorPool:
    """A named pool: ``workers`` concurrent processors fed from a queue of ``queue_capacity`` requests.

    ``queue_capacity`` may be ``math.inf`` (RocketMQ's unbounded admin queue) or 0 (a request is accepted only if a
    worker is idle). Requests submitted before :meth:`run` starts wait in the queue.

    ``max_wait`` (seconds) is RocketMQ's broker fast failure: a request that waited longer than that in the queue is
    answered ``SYSTEM_BUSY`` with a ``[TIMEOUT_CLEAN_QUEUE]`` remark instead of being processed (oneway: dropped).
    Java sweeps its queues every 10 ms whether or not a thread is free
    (broker/src/main/java/org/apache/rocketmq/broker/latency/BrokerFastFailure.java), so a request queued behind
    stuck threads is refused once it waited that long: here a worker checks each request it takes, and the pool's
    sweeper (:meth:`_sweep`) wakes at the queue head's deadline and refuses what no worker took by then, without a
    periodic tick. Only a request submitted while every worker was busy or spoken for is checked: Java's idle thread
    takes a new request at once, so its sweep never finds one; here an idle worker still waits for the loop to
    schedule it, and a machine too busy to run the broker for a moment must not turn that into a refusal. Its owner
    may change it at any time (UPDATE_BROKER_CONFIG): workers read it for every request they take, and a change
    wakes the sweeper.

    ``page_cache_busy`` (the send pool's, with fast failure on) is BrokerFastFailure's first sweep: while it answers
    True, every request a worker takes is answered ``SYSTEM_BUSY`` ``[PCBUSY_CLEAN_QUEUE]`` instead of processed.

    :attr:`head_wait_ms` is how long the oldest queued request has waited (Java's ``headSlowTimeMills``, in the
    broker's runtime info): each submit notes the Trio clock's time (the same stamp ``max_wait`` is checked against;
    virtual under a test clock) in a deque that workers pop as they take requests.
    """

    name: str
    workers: int
    queue_capacity: int | float
    #: ``max_wait`` (its init argument and property): a plain slot, as an attrs ``on_setattr`` hook would give the
    #: class a Python ``__setattr__`` that every ``busy`` write of the workers runs.
    _max_wait: float | None = attrs.field(default=None, alias="max_wait")
    page_cache_busy: Reject | None = None
    #: The dispatcher's :data:`Admission`, run by a worker before the processor (set by :class:`Dispatcher`).
    admission: Admission | None = attrs.field(init=False, default=None)
    limiter: trio.CapacityLimiter = attrs.field(init=False)
    _send: trio.MemorySendChannel[_Job] = attrs.field(init=False, repr=False)
    _receive: trio.MemoryReceiveChannel[_Job] = attrs.field(init=False, repr=False)
    running: bool = attrs.field(init=False, default=False)
    busy: int = attrs.field(init=False, default=0)
    #: (submit time in monotonic seconds, queued behind busy workers) of the requests no worker took yet, oldest first.
    _queued_since: collections.deque[tuple[float, bool]] = attrs.field(
        init=False, factory=collections.deque, repr=False
    )
    #: Set to wake the sweeper when it waits for a request that can go stale (see :meth:`_sweep`).
    _sweep_wakeup: trio.Event | None = attrs.field(init=False, default=None, repr=False)
    #: Set to wake the sweeper from its sleep until a deadline when ``max_wait`` changes.
    _sweep_nap: trio.Event | None = attrs.field(init=False, default=None, repr=False)
    #: The Trio clock's ``current_time``, bound once the pool runs (a third of ``trio.current_time()``'s cost).
    _now: Callable[[], float] = attrs.field(init=False, default=trio.current_time, repr=False)

    def __attrs_post_init__(self) -> None:
        if self.workers < 1:
            raise ValueError(f"pool {self.name!r} needs at least one worker, got {self.workers}")
        self.limiter = trio.CapacityLimiter(self.workers)
        self._send, self._receive = trio.open_memory_channel[_Job](self.queue_capacity)

    @property
    def max_wait(self) -> float | None:
        """Set at any time; a change wakes the sweeper, which then sleeps to the head's deadline under the new value."""
        return self._max_wait

    @max_wait.setter
    def max_wait(self, max_wait: float | None) -> None:
        """UPDATE_BROKER_CONFIG: wake the sweeper, as Java's sweep reads BrokerConfig at every 10 ms tick
        (broker/src/main/java/org/apache/rocketmq/broker/latency/BrokerFastFailure.java)."""
        self._max_wait = max_wait
        for wakeup in (self._sweep_nap, self._sweep_wakeup):
            if wakeup is not None:
                wakeup.set()
        self._sweep_nap = self._sweep_wakeup = None

    async def _nap_until(self, deadline: float) -> None:
        """Sleep until ``deadline`` or a change of ``max_wait``."""
        nap = self._sweep_nap = trio.Event()
        with trio.move_on_at(deadline):
            await nap.wait()
        self._sweep_nap = None

    @property
    def queued(self) -> int:
        """Requests waiting for a worker."""
        return self._send.statistics().current_buffer_used

    @property
    def idle(self) -> bool:
        """No request queued and none inside a processor."""
        return not self.busy and not self._queued_since

    @property
    def head_wait_ms(self) -> int:
        """Milliseconds the oldest request not taken by a worker has waited; 0 when none waits."""
        queued = self._queued_since
        return int((self._now() - queued[0][0]) * 1000) if queued else 0

    def submit(self, processor: Processor, ctx: RequestContext, request: RemotingCommand) -> bool:
        """Queue a request without waiting. False when the queue is full (the caller answers SYSTEM_BUSY)."""
        now = self._now()
        behind_busy = not self.running or self.busy + len(self._queued_since) >= self.workers
        try:
            self._send.send_nowait((processor, ctx, request, now, behind_busy))
        except trio.WouldBlock:
            return False
        self._queued_since.append((now, behind_busy))
        if behind_busy and (wakeup := self._sweep_wakeup) is not None and self._max_wait is not None:
            self._sweep_wakeup = None
            wakeup.set()
        return True

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        """Run the workers until cancelled; queued requests are dropped on cancellation."""
        if self.running:
            raise RuntimeError(f"pool {self.name!r} is already running")
        self.running = True
        self._now = trio.lowlevel.current_clock().current_time
        try:
            async with trio.open_nursery() as nursery:
                for _ in range(self.workers):
                    nursery.start_soon(self._work)
                nursery.start_soon(self._sweep)
                task_status.started()
        finally:
            self.running = False

    async def _work(self) -> None:
        receive, queued_since, now = self._receive, self._queued_since, self._now
        await self.limiter.acquire()
        try:
            while True:
                # Drain without a checkpoint per request while there is work; block only when the queue is empty.
                try:
                    processor, ctx, request, queued_at, behind_busy = receive.receive_nowait()
                except trio.WouldBlock:
                    processor, ctx, request, queued_at, behind_busy = await receive.receive()
                queued_since.popleft()
                busy = self.page_cache_busy
                if busy is not None and busy():
                    self._refuse(ctx, request, page_cache_busy_remark(now() - queued_at, self.queued))
                    continue
                max_wait = self._max_wait
                if max_wait is not None and behind_busy and (waited := now() - queued_at) >= max_wait:
                    self._refuse(ctx, request, queue_timeout_remark(waited, self.queued))
                    continue
                admission = self.admission
                if admission is not None and (refusal := admission(ctx, request)) is not None:
                    self._answer(ctx, request, refusal)
                    continue
                self.busy += 1
                try:
                    await run_processor(processor, ctx, request)
                finally:
                    self.busy -= 1
        finally:
            self.limiter.release()

    async def _sweep(self) -> None:
        """BrokerFastFailure's ``cleanExpiredRequestInQueue`` for this pool: refuse queued requests that waited
        ``max_wait`` behind busy workers, oldest first, even while no worker comes free. Sleeps until the queue head's
        deadline; with nothing that can go stale queued (or no ``max_wait``), until :meth:`submit` queues one.

        The head is the channel's, not the wait list's: the list also holds requests handed to idle workers the loop
        has not run yet (after a stall, those are past their deadline too). Takers pop the list from the left, so it
        holds the latest submits, and the channel's buffer is always its last ``queued`` entries."""
        queued, receive = self._queued_since, self._receive
        while True:
            max_wait, buffered = self.max_wait, self.queued
            if not buffered or max_wait is None:
                wakeup = self._sweep_wakeup = trio.Event()
                await wakeup.wait()
                continue
            queued_at, behind_busy = queued[len(queued) - buffered]
            now = self._now()
            if now < queued_at + max_wait:
                await self._nap_until(queued_at + max_wait)
                continue
            if not behind_busy:
                # A worker spoke for it when it came (one the loop had not started yet): not a refusal. Only such
                # requests precede it, so the ones behind busy workers wait for their turn to be looked at.
                await self._nap_until(now + max(max_wait, SWEEP_INTERVAL))
                continue
            _, ctx, request, _, _ = receive.receive_nowait()  # buffered: never blocks
            queued.popleft()
            self._refuse(ctx, request, queue_timeout_remark(self._now() - queued_at, self.queued))

    @classmethod
    def _refuse(cls, ctx: RequestContext, request: RemotingCommand, remark: str) -> None:
        """Answer SYSTEM_BUSY with ``remark`` instead of processing (a oneway request is dropped)."""
        cls._answer(ctx, request, request.response(ResponseCode.SYSTEM_BUSY, remark))

    @staticmethod
    def _answer(ctx: RequestContext, request: RemotingCommand, answer: RemotingCommand) -> None:
        """Write ``answer`` instead of processing ``request`` (a oneway request gets none); never waits."""
        if request.is_oneway:
            ctx.connection.oneway_done(request, answer)
            return
        try:
            ctx.connection.send_nowait(answer)  # a pool worker: no wait
        except RemotingConnectError:
            log.debug("answer to opaque %d dropped: connection closed", request.opaque)


class Dispatcher:
    """Request code -> (processor, pool). Register everything, then run it: ``await nursery.start(dispatcher.run)``.

    :class:`~remoting.server.RemotingServer` starts its dispatcher itself unless it is already running (a
    dispatcher shared by several listeners should be started once by its owner).
    """

    def __init__(self, admission: Admission | None = None, fast_admission: FastAdmission | None = None) -> None:
        self._admission = admission
        self.fast_admission = fast_admission
        self._table: dict[int, tuple[Processor, ProcessorPool]] = {}
        self._default: tuple[Processor, ProcessorPool] | None = None
        self._fast: dict[int, tuple[FastHandler, ProcessorPool, Reject | None, bool]] = {}
        self._rejects: dict[int, Reject] = {}
        self._pools: dict[int, ProcessorPool] = {}
        self._nursery: trio.Nursery | None = None

    @property
    def admission(self) -> Admission | None:
        """The ACL check every pool's workers run (see the module docstring); a change reaches every pool."""
        return self._admission

    @admission.setter
    def admission(self, admission: Admission | None) -> None:
        self._admission = admission
        for pool in self._pools.values():
            pool.admission = admission

    @property
    def running(self) -> bool:
        return self._nursery is not None

    @property
    def pools(self) -> list[ProcessorPool]:
        return list(self._pools.values())

    def register(
        self, codes: int | Iterable[int], processor: Processor, pool: ProcessorPool, *, reject: Reject | None = None
    ) -> None:
        """Route ``codes`` to ``processor`` on ``pool`` (replacing an earlier registration of the same code), refused
        while ``reject`` answers True (see the module docstring)."""
        for code in [codes] if isinstance(codes, int) else codes:
            self._table[int(code)] = (processor, pool)
            if reject is None:
                self._rejects.pop(int(code), None)
            else:
                self._rejects[int(code)] = reject
        self._add_pool(pool)

    def register_fast(self, code: int, handler: FastHandler, *, timed: bool = False) -> None:
        """Offer requests of ``code`` (already registered) to ``handler`` first (see the module docstring). On a
        connection that times requests (``rpc_latency``) only a ``timed`` handler is offered them: it promises to call
        :meth:`~remoting.connection.Connection.fast_answered` for each answer it writes as a frame (answers written
        as commands are timed by the connection)."""
        self._fast[int(code)] = (handler, self._table[int(code)][1], self._rejects.get(int(code)), timed)

    @property
    def has_fast_paths(self) -> bool:
        return bool(self._fast)

    def fast_request(self, ctx: RequestContext, fields: dict[str, Any], body: bytes) -> bool:
        """Whether a fast handler took this request (see the module docstring); called by readers."""
        code = fields.get("code")
        if type(code) is not int:
            return False
        entry = self._fast.get(code)
        if entry is None or not entry[1].idle or (entry[2] is not None and entry[2]()):
            return False
        if self._admission is not None and (self.fast_admission is None or not self.fast_admission(ctx, fields, body)):
            return False
        connection = ctx.connection
        if connection.rpc_latency is not None:
            return entry[3] and self._timed_fast(entry[0], ctx, fields, body)
        try:
            return entry[0](ctx, fields, body)
        except Exception as exc:
            return self._fast_failed(ctx, fields, body, exc)

    def _timed_fast(self, handler: FastHandler, ctx: RequestContext, fields: dict[str, Any], body: bytes) -> bool:
        """A timed handler offered a request on a connection timing requests: timed from now, as the reader times a
        command it reads; not timed (the general path times it) when the handler declines it."""
        opaque = fields.get("opaque")
        connection = ctx.connection
        if not connection.time_request(fields["code"], opaque):
            return False  # the general path times (or counts as a duplicate) what cannot be timed here
        try:
            taken = handler(ctx, fields, body)
        except Exception as exc:
            taken = self._fast_failed(ctx, fields, body, exc)
        if not taken:
            connection.untime(opaque)
        return taken

    @staticmethod
    def _fast_failed(ctx: RequestContext, fields: dict[str, Any], body: bytes, exc: Exception) -> bool:
        """A fast handler raised: answer SYSTEM_ERROR as :func:`~remoting.processor.run_processor` answers a
        processor's exception (``processRequestCommand`` catches around the processor in
        ``remoting/src/main/java/org/apache/rocketmq/remoting/netty/NettyRemotingAbstract.java``), instead of letting
        it out of the connection's reader, which ended the server. The request is not handed on: the
        handler may have acted on it (a stored message) before raising; only a header that does not decode is, so
        the general path refuses it as it refuses any such header (False)."""
        log.warning("fast handler failed on request code %r", fields.get("code"), exc_info=True)
        try:
            request = command_from_json(fields, body)
        except CodecError:
            return False
        try:
            ctx.connection.send_nowait(request.response(ResponseCode.SYSTEM_ERROR, f"{type(exc).__name__}: {exc}"))
        except RemotingConnectError:
            log.debug("answer to opaque %d dropped: connection closed", request.opaque)
        return True

    def set_default(self, processor: Processor, pool: ProcessorPool) -> None:
        """Route every unregistered code here (RocketMQ's default/admin processor) instead of answering 3."""
        self._default = (processor, pool)
        self._add_pool(pool)

    def _add_pool(self, pool: ProcessorPool) -> None:
        if id(pool) in self._pools:
            return
        self._pools[id(pool)] = pool
        pool.admission = self._admission
        if self._nursery is not None:
            self._nursery.start_soon(pool.run)

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        """Run every pool (each in its own nursery) until cancelled. Pools added later start at once."""
        if self._nursery is not None:
            raise RuntimeError("dispatcher is already running")
        try:
            async with trio.open_nursery() as nursery:
                for pool in self._pools.values():
                    await nursery.start(pool.run)
                self._nursery = nursery
                task_status.started()
        finally:
            self._nursery = None

    async def dispatch(self, ctx: RequestContext, request: RemotingCommand) -> None:
        """Queue ``request`` on its pool, or answer 3 / 2 at once (see the module docstring). Called by readers."""
        entry = self._table.get(request.code) or self._default
        if entry is None:
            refusal = None if self._admission is None else self._admission(ctx, request)
            unknown = request.response(ResponseCode.REQUEST_CODE_NOT_SUPPORTED, not_supported_remark(request.code))
            answer = unknown if refusal is None else refusal
        elif (reject := self._rejects.get(request.code)) is not None and reject():
            answer = request.response(ResponseCode.SYSTEM_BUSY, REJECT_REMARK)
        elif entry[1].submit(entry[0], ctx, request):
            return
        else:
            answer = request.response(ResponseCode.SYSTEM_BUSY, OVERLOAD_REMARK)
        if request.is_oneway:
            ctx.connection.oneway_done(request, answer)
            return
        try:
            await ctx.connection.send(answer)
        except RemotingConnectError:
            log.debug("answer to opaque %d dropped: connection closed", request.opaque)


def broker_pools(
    cpus: int | None = None,
    *,
    fast_failure: bool = False,
    sizes: Mapping[str, tuple[int, int | float]] | None = None,
) -> dict[str, ProcessorPool]:
    """Fresh pools sized like a RocketMQ 4.9.8 broker's, keyed by family name
    (docs/protocol.md#714-processor-pools-and-flow-control); ``sizes`` replaces a family's ``(workers, queue
    capacity)`` (the broker's ``*ThreadPoolNums`` and ``*QueueCapacity`` settings).

    Families: send, pull, query, admin (default processor), client_manage, heartbeat, consumer_manage,
    end_transaction, reply (request-reply's 324/325: ``processReplyMessageThreadPoolNums`` = 16 + 2n and
    ``replyThreadPoolQueueCapacity`` = 10,000), ack (RocketMQ 5's pop acks: 16, 100,000). Unbounded Java queues are
    ``math.inf`` here. ``fast_failure`` (Java's ``brokerFastFailureEnable``, on by default there) sets each pool's
    ``max_wait`` to ``waitTimeMillsIn{Send,Pull,Heartbeat,Transaction,Ack}Queue``: 200 ms, 5 s, 31 s, 3 s, 3 s.
    """
    n = cpus or available_cpus()
    send_workers = min(n, 4)

    chosen: dict[str, tuple[int, int | float]] = {
        "send": (send_workers, 10_000),
        "pull": (16 + 2 * n, 100_000),
        "query": (8 + n, 20_000),
        "admin": (16, math.inf),
        "client_manage": (32, 1_000_000),
        "heartbeat": (min(32, n), 50_000),
        "consumer_manage": (32, math.inf),
        "end_transaction": (max(8 + 2 * n, 4 * send_workers), 100_000),
        "reply": (16 + 2 * n, 10_000),
        "ack": (16, 100_000),
    }
    chosen.update(sizes or {})
    waits = {"send": 0.2, "pull": 5.0, "heartbeat": 31.0, "end_transaction": 3.0, "ack": 3.0}
    return {
        name: ProcessorPool(name, workers, capacity, max_wait=waits.get(name) if fast_failure else None)
        for name, (workers, capacity) in chosen.items()
    }
