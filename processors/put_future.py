"""``PutFutureService``: a nursery for the SYNC_FLUSH answers that have to wait, off the send pool.

RocketMQ runs the wait for a synchronous flush on a "put-message future" executor, not on the send threads. Here the
wait itself needs no task: the group commit calls back (see :mod:`processors.send_answer`) and the response is
written with ``send_nowait``. Only a response to a congested connection, whose write must wait for the writer to
drain, runs as a task in this service's nursery, so a send worker never blocks on a slow reader.

Owned by the broker controller, started with ``nursery.start``; cancelling it drops the writes still pending (their
records are appended; the producers see a timeout, as with a Java broker stopped mid-flush).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

import trio


class PutFutureService:
    def __init__(self) -> None:
        self._nursery: trio.Nursery | None = None

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        try:
            async with trio.open_nursery() as nursery:
                self._nursery = nursery
                task_status.started()
                await trio.sleep_forever()
        finally:
            self._nursery = None

    def submit(self, fn: Callable[..., Awaitable[Any]], *args: Any) -> bool:
        """Run ``fn(*args)`` in the service's nursery; ``False`` (and nothing runs) when the service is not running,
        so the caller waits inline instead."""
        if self._nursery is None:
            return False
        self._nursery.start_soon(fn, *args)
        return True
