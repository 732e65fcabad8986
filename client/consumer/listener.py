"""Message listeners and their results (Java's ``MessageListenerConcurrently`` / ``MessageListenerOrderly``).

A listener is called with a list of messages (at most ``consume_message_batch_max_size``) and returns a status; one
that takes a second positional parameter is also given the call's context (:class:`ConsumeConcurrentlyContext` or
:class:`ConsumeOrderlyContext`, Java's ``consumeMessage(msgs, context)``), whose settings it may change.
It may be a coroutine function (run as a task on the event loop) or a plain function (run in a worker thread under
the consumer's capacity limiter, so blocking code is fine; a shutdown that outlasts ``await_termination`` abandons
that thread, as Java's ``awaitTermination`` gives up on a consume thread, drops its result and may learn when it
returns). Raising counts as RECONSUME_LATER (concurrent) or SUSPEND_CURRENT_QUEUE_A_MOMENT (orderly), and so does
returning ``None`` (Java's null status: ConsumeReturnType RETURNNULL, so a listener that forgets ``return`` commits
nothing); a status of the other kind counts as its counterpart (an orderly listener's RECONSUME_LATER suspends its
queue, a concurrent one's SUCCESS is CONSUME_SUCCESS).
"""

from __future__ import annotations

import asyncio
import contextlib
import enum
import inspect
import logging
import math
import threading
import traceback
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any, Final, Protocol, cast

import anyio
import anyio.lowlevel
import attrs

from remoting.codec.bodies import MessageQueue
from remoting.codec.message import MessageExt

log = logging.getLogger(__name__)

#: what :func:`run_listener` returns for a listener call ``skip`` cancelled
SKIPPED: Final = object()


class ConsumeConcurrentlyStatus(enum.Enum):
    CONSUME_SUCCESS = "CONSUME_SUCCESS"
    RECONSUME_LATER = "RECONSUME_LATER"


class ConsumeOrderlyStatus(enum.Enum):
    """Java's ``ConsumeOrderlyStatus``; ROLLBACK and COMMIT (deprecated there) serve a context without
    ``auto_commit`` and count as SUCCESS with it."""

    SUCCESS = "SUCCESS"
    ROLLBACK = "ROLLBACK"
    COMMIT = "COMMIT"
    SUSPEND_CURRENT_QUEUE_A_MOMENT = "SUSPEND_CURRENT_QUEUE_A_MOMENT"


ConsumeStatus = ConsumeConcurrentlyStatus | ConsumeOrderlyStatus
#: A listener called with the messages alone.
PlainListener = Callable[[list[MessageExt]], "ConsumeStatus | Awaitable[ConsumeStatus]"]
#: A listener called with the messages, or with the messages and the call's context (see :func:`takes_context`).
MessageListener = PlainListener | Callable[[list[MessageExt], Any], "ConsumeStatus | Awaitable[ConsumeStatus]"]

#: ``ack_index`` of a context nobody changed: every message of a successful call is done (Java's Integer.MAX_VALUE).
ACK_ALL: Final = 2**31 - 1


@attrs.define(slots=True)
class ConsumeConcurrentlyContext:
    """Java's ``ConsumeConcurrentlyContext``: the queue of a concurrent listener call and what the listener decides
    about the batch (``ConsumeMessageConcurrentlyService.processConsumeResult``). ``delay_level_when_next_consume`` is
    the delay level the messages that failed are sent back with (0: the broker's, 3 + reconsume times; -1: the DLQ at
    once); ``ack_index`` the index of the last message done when the call returns CONSUME_SUCCESS (the ones after it
    are sent back as failed)."""

    message_queue: MessageQueue
    delay_level_when_next_consume: int = 0
    ack_index: int = ACK_ALL


@attrs.define(slots=True)
class ConsumeOrderlyContext:
    """Java's ``ConsumeOrderlyContext``: the queue of an orderly listener call and, for a suspension, how long the
    queue waits before its batch is consumed again (``suspend_current_queue_time_ms``; -1: the consumer's
    ``suspend_current_queue_time``). Without ``auto_commit`` a SUCCESS commits nothing: COMMIT commits every message
    taken since the last commit, ROLLBACK hands them out again after the suspension
    (``ConsumeMessageOrderlyService.processConsumeResult``)."""

    message_queue: MessageQueue
    suspend_current_queue_time_ms: int = -1
    auto_commit: bool = True


def takes_context(listener: MessageListener) -> bool:
    """Whether ``listener`` is to be called with its context too: it takes two positional parameters or more (not
    ``*args``, which a decorator wrapping a one-parameter listener shows)."""
    try:
        parameters = inspect.signature(listener).parameters.values()
    except (TypeError, ValueError):
        return False
    positional = (inspect.Parameter.POSITIONAL_ONLY, inspect.Parameter.POSITIONAL_OR_KEYWORD)
    return sum(1 for p in parameters if p.kind in positional) >= 2


def bind_context(listener: MessageListener, context: object, takes: bool) -> PlainListener:
    """``listener`` as a listener of the messages alone: given ``context`` too when ``takes`` (its
    :func:`takes_context`), a coroutine function again when it is one."""
    if not takes:
        return cast(PlainListener, listener)
    call = cast(Callable[[list[MessageExt], object], Any], listener)
    if _is_async(listener):

        async def with_context_async(msgs: list[MessageExt]) -> Any:
            return await call(msgs, context)

        return with_context_async
    return lambda msgs: call(msgs, context)


def _is_async(listener: object) -> bool:
    return inspect.iscoroutinefunction(listener) or inspect.iscoroutinefunction(type(listener).__call__)


#: Told of a plain listener's thread abandoned while it runs.
Abandoned = Callable[["ListenerThread"], None]


async def run_listener(
    listener: PlainListener,
    msgs: list[MessageExt],
    limiter: anyio.CapacityLimiter,
    skip: Callable[[], bool] | None = None,
    started: Callable[[], None] | None = None,
    abandoned: Abandoned | None = None,
) -> object:
    """Run ``listener`` under ``limiter`` (a consume slot) and return what it returned; its exception propagates.
    Once the limiter is taken (a call may wait there long), on the event loop: ``skip`` is asked, and when it says so
    the listener is not called and :data:`SKIPPED` is returned; else ``started`` is told the call starts now (Java: a
    consume thread took the request). The event loop holds the limiter token while :func:`invoke_listener` runs."""
    async with limiter:
        if skip is not None and skip():
            return SKIPPED
        if started is not None:
            started()
        return await invoke_listener(listener, msgs, abandoned)


async def invoke_listener(
    listener: PlainListener, msgs: list[MessageExt], abandoned: Abandoned | None = None
) -> object:
    """Call ``listener``: a coroutine function on the event loop, a plain function in a worker thread. Cancelled (a
    shutdown past ``await_termination``), a plain function's thread is abandoned, as Java's ``awaitTermination``
    gives up on a consume thread: it runs on, and what it returns is dropped (this raises the cancellation, so no
    caller commits its messages); ``abandoned`` is told of it while it still runs."""
    if _is_async(listener):
        return await listener(msgs)  # type: ignore[misc]
    thread = ListenerThread(listener, msgs)
    try:
        # The caller's limiter already bounds the threads: the call must not wait for the default thread limiter too.
        result = await anyio.to_thread.run_sync(
            thread.run, abandon_on_cancel=True, limiter=anyio.CapacityLimiter(math.inf)
        )
    except anyio.get_cancelled_exc_class():
        if thread.abandon() and abandoned is not None:
            abandoned(thread)
        raise
    if inspect.isawaitable(result):
        result = await result
    return result


class _TrioToken(Protocol):
    def run_sync_soon(self, sync_fn: Callable[[], object]) -> None: ...


def _wake_up(event: anyio.Event) -> Callable[[], object]:
    """What another thread calls to have ``event`` set on the current event loop, without waiting for that loop
    (asyncio's ``call_soon_threadsafe``, Trio's ``TrioToken.run_sync_soon``): a loop stopped but not closed never
    runs it, and a closed one (or a finished Trio run) raises :class:`RuntimeError`."""
    native = anyio.lowlevel.current_token().native_token
    if isinstance(native, asyncio.AbstractEventLoop):
        return lambda: native.call_soon_threadsafe(event.set)
    trio_token = cast(_TrioToken, native)
    return lambda: trio_token.run_sync_soon(event.set)


class ListenerThread:
    """A plain listener's call in a worker thread. Abandoned before the thread got to it, the listener is not called;
    abandoned while it runs, whoever must not run beside it can see whether it still does and wait until it returned,
    on whichever event loop they run (a consumer may be restarted on another one)."""

    def __init__(self, listener: PlainListener, msgs: list[MessageExt]) -> None:
        self._listener, self._msgs = listener, msgs
        self._guard = threading.Lock()
        self._started = self._over = False
        #: the wake-up calls of the tasks in :meth:`wait`
        self._waiters: set[Callable[[], object]] = set()

    def run(self) -> object:
        """In the worker thread: the listener's call, unless abandoned first; then the waiters are woken up, without
        waiting for their event loops (a stopped one wakes its waiter when it runs again; a closed one, or a finished
        Trio run, is skipped: nobody waits there any more)."""
        with self._guard:
            if self._over:
                return None
            self._started = True
        try:
            return self._listener(self._msgs)
        finally:
            with self._guard:
                self._over, waiters, self._waiters = True, self._waiters, set()
            for wake_up in waiters:
                with contextlib.suppress(RuntimeError):  # the waiter's loop is closed, or its Trio run ended
                    wake_up()

    def abandon(self) -> bool:
        """On the event loop, the call cancelled: whether the listener runs on (else it never will)."""
        with self._guard:
            running = self._started and not self._over
            self._over = not running
            return running

    @property
    def running(self) -> bool:
        with self._guard:
            return self._started and not self._over

    async def wait(self) -> None:
        """Return once the listener returned (at once when it is not running)."""
        event = anyio.Event()
        wake_up = _wake_up(event)
        with self._guard:
            if not self._started or self._over:
                return
            self._waiters.add(wake_up)
        try:
            await event.wait()
        finally:
            with self._guard:
                self._waiters.discard(wake_up)


#: A status of the other kind of consumption, as its counterpart: success stays success, a retry stays a retry.
_COUNTERPART: Final[dict[ConsumeStatus, ConsumeStatus]] = {
    ConsumeConcurrentlyStatus.CONSUME_SUCCESS: ConsumeOrderlyStatus.SUCCESS,
    ConsumeConcurrentlyStatus.RECONSUME_LATER: ConsumeOrderlyStatus.SUSPEND_CURRENT_QUEUE_A_MOMENT,
    ConsumeOrderlyStatus.SUCCESS: ConsumeConcurrentlyStatus.CONSUME_SUCCESS,
    ConsumeOrderlyStatus.SUSPEND_CURRENT_QUEUE_A_MOMENT: ConsumeConcurrentlyStatus.RECONSUME_LATER,
    ConsumeOrderlyStatus.COMMIT: ConsumeConcurrentlyStatus.CONSUME_SUCCESS,
    ConsumeOrderlyStatus.ROLLBACK: ConsumeConcurrentlyStatus.RECONSUME_LATER,
}


def listener_status(result: object, failed: ConsumeStatus) -> ConsumeStatus:
    """What a listener's ``result`` counts as, in the kind of ``failed``: a status itself, a status of the other kind
    its counterpart (Java's listeners cannot return one: an orderly RECONSUME_LATER committed as a success would lose
    the message), ``None`` (Java's null status, which both ConsumeRequest.run turn into their failure), anything else
    (and :data:`SKIPPED`) ``failed``."""
    if result is None:
        log.warning("message listener returned None, treated as %s", failed.name)
        return failed
    if not isinstance(result, (ConsumeConcurrentlyStatus, ConsumeOrderlyStatus)):
        if result is not SKIPPED:
            log.warning("message listener returned %r, treated as a failure", result)
        return failed
    return result if type(result) is type(failed) else _COUNTERPART[result]


async def call_listener(
    listener: PlainListener,
    msgs: list[MessageExt],
    limiter: anyio.CapacityLimiter,
    failed: ConsumeStatus,
    skip: Callable[[], bool] | None = None,
    started: Callable[[], None] | None = None,
    abandoned: Abandoned | None = None,
    raised: Callable[[], None] | None = None,
    returned_none: Callable[[], None] | None = None,
) -> ConsumeStatus:
    """:func:`run_listener` and :func:`listener_status`; an exception is logged, ``raised`` told of it, and becomes
    ``failed``, as do a ``None`` result (``returned_none`` told of it) and a call ``skip`` cancelled (the caller knows
    why)."""
    try:
        result = await run_listener(listener, msgs, limiter, skip, started, abandoned)
    except Exception:
        log.exception("message listener failed on %d message(s)", len(msgs))
        if raised is not None:
            raised()
        return failed
    if result is None and returned_none is not None:
        returned_none()
    return listener_status(result, failed)


def exception_string(exc: BaseException) -> str:
    """``exc`` as Java's ``Throwable.toString`` gives it: the class name, then ``": "`` and the message if any."""
    message = str(exc)
    return f"{type(exc).__name__}: {message}" if message else type(exc).__name__


def exception_simple_desc(exc: BaseException) -> str:
    """``exc`` and where it was raised, in one line (Java's ``RemotingHelper.exceptionSimpleDesc``: its
    :func:`exception_string`, then the innermost frame)."""
    frames = traceback.extract_tb(exc.__traceback__)
    where = f", {frames[-1].name}({Path(frames[-1].filename).name}:{frames[-1].lineno})" if frames else ""
    return exception_string(exc) + where
