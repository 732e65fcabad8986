"""Blocking work of a member (its flushes, every ``flushFileInterval``) handed to a worker thread, cheaper than
``trio.to_thread.run_sync``: no capacity limiter, no thread renamed through ``ctypes`` twice a call, no context copy
(about 60 against 100 us of CPU a call on the shared machine). DLedger runs the flush in a thread of its own
(``DLedgerMmapFileStore.FlushDataService``); ours runs in Trio's thread cache, one call at a time per task."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any, TypeVar

import trio

if TYPE_CHECKING:
    import outcome  # trio's own dependency, for the annotation only

_T = TypeVar("_T")


def _wait_for_the_work(_: Any) -> trio.lowlevel.Abort:
    """A cancel does not abandon the work: the caller waits until it is done (as ``to_thread.run_sync`` by default),
    so a flush is never left running behind its task; the cancel is taken at the caller's next checkpoint."""
    return trio.lowlevel.Abort.FAILED


async def run_in_thread(work: Callable[..., _T], *args: Any) -> _T:
    """``work(*args)`` in a worker thread; its result, or its exception raised here. A caller already cancelled
    gets ``Cancelled`` and no work runs, as ``to_thread.run_sync`` checks before it starts."""
    await trio.lowlevel.checkpoint_if_cancelled()
    task = trio.lowlevel.current_task()
    token = trio.lowlevel.current_trio_token()

    def deliver(result: outcome.Outcome[_T]) -> None:
        token.run_sync_soon(trio.lowlevel.reschedule, task, result)

    trio.lowlevel.start_thread_soon(lambda: work(*args), deliver)
    return await trio.lowlevel.wait_task_rescheduled(_wait_for_the_work)  # type: ignore[no-any-return]
