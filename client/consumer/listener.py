"""Message listeners and their results (Java's ``MessageListenerConcurrently`` / ``MessageListenerOrderly``).

A listener is called with a list of messages (at most ``consume_message_batch_max_size``) and returns a status.
It may be a coroutine function (run as a task on the event loop) or a plain function (run in a worker thread under
the consumer's capacity limiter, so blocking code is fine). Raising counts as RECONSUME_LATER (concurrent) or
SUSPEND_CURRENT_QUEUE_A_MOMENT (orderly); returning ``None`` counts as success.
"""

from __future__ import annotations

import enum
import inspect
import logging
from collections.abc import Awaitable, Callable
from typing import Final

import anyio

from remoting.codec.message import MessageExt

log = logging.getLogger(__name__)

#: what a worker thread returns for a listener call ``skip`` cancelled
_SKIPPED: Final = object()


class ConsumeConcurrentlyStatus(enum.Enum):
    CONSUME_SUCCESS = "CONSUME_SUCCESS"
    RECONSUME_LATER = "RECONSUME_LATER"


class ConsumeOrderlyStatus(enum.Enum):
    SUCCESS = "SUCCESS"
    SUSPEND_CURRENT_QUEUE_A_MOMENT = "SUSPEND_CURRENT_QUEUE_A_MOMENT"


ConsumeStatus = ConsumeConcurrentlyStatus | ConsumeOrderlyStatus
MessageListener = Callable[[list[MessageExt]], "ConsumeStatus | Awaitable[ConsumeStatus | None] | None"]


async def call_listener(
    listener: MessageListener,
    msgs: list[MessageExt],
    limiter: anyio.CapacityLimiter,
    failed: ConsumeStatus,
    skip: Callable[[], bool] | None = None,
) -> ConsumeStatus:
    """Run ``listener`` under ``limiter``; exceptions are logged and become ``failed``. With ``skip``, asked once the
    limiter is taken (a call may wait there long): when it says so the listener is not called and ``failed`` is
    returned (the caller knows why)."""
    try:
        if inspect.iscoroutinefunction(listener) or inspect.iscoroutinefunction(type(listener).__call__):
            async with limiter:
                if skip is not None and skip():
                    return failed
                result = await listener(msgs)  # type: ignore[misc]
        else:

            def run(batch: list[MessageExt]) -> object:
                return _SKIPPED if skip is not None and skip() else listener(batch)

            result = await anyio.to_thread.run_sync(run, msgs, limiter=limiter)
            if result is _SKIPPED:
                return failed
            if inspect.isawaitable(result):
                async with limiter:
                    result = await result
    except Exception:
        log.exception("message listener failed on %d message(s)", len(msgs))
        return failed
    if result is None:
        return (
            ConsumeConcurrentlyStatus.CONSUME_SUCCESS
            if isinstance(failed, ConsumeConcurrentlyStatus)
            else (ConsumeOrderlyStatus.SUCCESS)
        )
    if not isinstance(result, (ConsumeConcurrentlyStatus, ConsumeOrderlyStatus)):
        log.warning("message listener returned %r, treated as a failure", result)
        return failed
    return result
