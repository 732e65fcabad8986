"""``PutFutureService``: answers SYNC_FLUSH sends once the group commit covers them, off the send pool.

RocketMQ runs the wait for a synchronous flush on a "put-message future" executor, not on the send threads. The same
matters here: the send pool has ``min(cpus, 4)`` workers, so a worker that awaited the fsync itself would let only
that many puts share one group commit (measured: ~2 messages per fsync on 2 cores). A send worker instead appends,
hands the wait to this service and takes the next request; each waiting put is one task in this service's nursery
that writes its response when the sync covering it completes (or FLUSH_DISK_TIMEOUT when it does not).

Owned by the broker controller, started with ``nursery.start``; cancelling it drops the waits still pending (their
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
