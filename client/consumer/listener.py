"""Message listeners and their results (Java's ``MessageListenerConcurrently`` / ``MessageListenerOrderly``).

A listener is called with a list of messages (at most ``consume_message_batch_max_size``) and returns a status.
It may be a coroutine function (run as a task on the event loop) or a plain function (run in a worker thread under
the consumer's capacity limiter, so blocking code is fine; a shutdown that outlasts ``await_termination`` abandons
that thread, as Java's ``awaitTermination`` gives up on a consume thread, and drops its result). Raising counts as
RECONSUME_LATER (concurrent) or SUSPEND_CURRENT_QUEUE_A_MOMENT (orderly); returning ``None`` counts as success.
"""

from __future__ import annotations

import enum
import inspect
import logging
import math
import traceback
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Final

import anyio

from remoting.codec.message import MessageExt

log = logging.getLogger(__name__)

#: what :func:`run_listener` returns for a listener call ``skip`` cancelled
SKIPPED: Final = object()


class ConsumeConcurrentlyStatus(enum.Enum):
    CONSUME_SUCCESS = "CONSUME_SUCCESS"
    RECONSUME_LATER = "RECONSUME_LATER"


class ConsumeOrderlyStatus(enum.Enum):
    SUCCESS = "SUCCESS"
    SUSPEND_CURRENT_QUEUE_A_MOMENT = "SUSPEND_CURRENT_QUEUE_A_MOMENT"


ConsumeStatus = ConsumeConcurrentlyStatus | ConsumeOrderlyStatus
MessageListener = Callable[[list[MessageExt]], "ConsumeStatus | Awaitable[ConsumeStatus | None] | None"]


async def run_listener(
    listener: MessageListener,
    msgs: list[MessageExt],
    limiter: anyio.CapacityLimiter,
    skip: Callable[[], bool] | None = None,
    started: Callable[[], None] | None = None,
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
        return await invoke_listener(listener, msgs)


async def invoke_listener(listener: MessageListener, msgs: list[MessageExt]) -> object:
    """Call ``listener``: a coroutine function on the event loop, a plain function in a worker thread. Cancelled (a
    shutdown past ``await_termination``), a plain function's thread is abandoned, as Java's ``awaitTermination``
    gives up on a consume thread: it runs on, and what it returns is dropped (this raises the cancellation, so no
    caller commits its messages)."""
    if inspect.iscoroutinefunction(listener) or inspect.iscoroutinefunction(type(listener).__call__):
        return await listener(msgs)  # type: ignore[misc]
    # The caller's limiter already bounds the threads: the call must not wait for the default thread limiter too.
    result = await anyio.to_thread.run_sync(
        listener, msgs, abandon_on_cancel=True, limiter=anyio.CapacityLimiter(math.inf)
    )
    if inspect.isawaitable(result):
        result = await result
    return result


def listener_status(result: object, failed: ConsumeStatus) -> ConsumeStatus:
    """What a listener's ``result`` counts as: ``None`` success, a status itself, anything else (and
    :data:`SKIPPED`) ``failed``."""
    if result is None:
        return (
            ConsumeConcurrentlyStatus.CONSUME_SUCCESS
            if isinstance(failed, ConsumeConcurrentlyStatus)
            else (ConsumeOrderlyStatus.SUCCESS)
        )
    if not isinstance(result, (ConsumeConcurrentlyStatus, ConsumeOrderlyStatus)):
        if result is not SKIPPED:
            log.warning("message listener returned %r, treated as a failure", result)
        return failed
    return result


async def call_listener(
    listener: MessageListener,
    msgs: list[MessageExt],
    limiter: anyio.CapacityLimiter,
    failed: ConsumeStatus,
    skip: Callable[[], bool] | None = None,
    started: Callable[[], None] | None = None,
) -> ConsumeStatus:
    """:func:`run_listener` and :func:`listener_status`; an exception is logged and becomes ``failed``, as does a
    call ``skip`` cancelled (the caller knows why)."""
    try:
        result = await run_listener(listener, msgs, limiter, skip, started)
    except Exception:
        log.exception("message listener failed on %d message(s)", len(msgs))
        return failed
    return listener_status(result, failed)


def exception_simple_desc(exc: BaseException) -> str:
    """``exc`` and where it was raised, in one line (Java's ``RemotingHelper.exceptionSimpleDesc``; as Java's
    ``Throwable.toString``, an empty message leaves just the class name)."""
    frames = traceback.extract_tb(exc.__traceback__)
    where = f", {frames[-1].name}({Path(frames[-1].filename).name}:{frames[-1].lineno})" if frames else ""
    message = str(exc)
    return f"{type(exc).__name__}: {message}{where}" if message else f"{type(exc).__name__}{where}"
