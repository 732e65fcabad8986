"""SYNC_MASTER's waiting sends (RocketMQ's ``GroupTransferService``), as callbacks: no task per send.

A send registers the CommitLog offset its record ends at, a deadline (``slaveTimeout``) and a callback. Every slave
acknowledgement that reaches the offset releases it with ``True`` (PUT_OK); the sweeper releases it with ``False``
(FLUSH_SLAVE_TIMEOUT) at its deadline. Waiters queue in append order, which is offset order and, with one timeout,
deadline order, so both releases pop from the head of one deque.

Callbacks run on the Trio thread and must not block; one that raises is logged and the others still run. When the
service stops, every waiter left is released with ``False``.
"""

from __future__ import annotations

from collections.abc import Callable

import trio

from store.services import WaiterQueue, release_waiter


class TransferWaits:
    """The waiting sends of one master. :meth:`run` (started with ``nursery.start``) expires them."""

    def __init__(self) -> None:
        self._queue = WaiterQueue()
        self.running = False

    def __len__(self) -> int:
        return len(self._queue.waiters)

    def add(self, offset: int, timeout: float, callback: Callable[[bool], None]) -> None:
        """Wait for an acknowledgement of ``offset`` (the caller checked :attr:`running`)."""
        self._queue.add(offset, timeout, callback)

    def acknowledged(self, offset: int, floor: int = 0) -> None:
        """A slave has everything from ``floor`` to ``offset``: release the waiters it covers; those ending at or
        below ``floor`` stay queued, in order (they need another slave or time out)."""
        waiters = self._queue.waiters
        if not floor:
            while waiters and waiters[0].offset <= offset:
                release_waiter(waiters.popleft(), True)
            return
        kept = []
        while waiters and waiters[0].offset <= offset:
            waiter = waiters.popleft()
            if waiter.offset > floor:
                release_waiter(waiter, True)
            else:
                kept.append(waiter)
        waiters.extendleft(reversed(kept))

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        self.running = True
        task_status.started()
        try:
            await self._queue.expire()
        finally:
            self.running = False
            waiters = self._queue.waiters
            while waiters:
                release_waiter(waiters.popleft(), False)
