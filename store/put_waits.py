"""``PutWaits``: what a put waits for after its append, as RocketMQ's ``CommitLog.asyncPutMessage`` combines them.

- SYNC_FLUSH (and ``WAIT`` true): the group commit covering the record (FLUSH_DISK_TIMEOUT after
  ``syncFlushTimeout``).
- SYNC_MASTER (and ``WAIT`` true): a slave's acknowledgement of the record's end (SLAVE_NOT_AVAILABLE at once without
  a slave in reach, FLUSH_SLAVE_TIMEOUT after ``slaveTimeout``; :meth:`store.ha.service.HAService.notify_replicated`).

Both run at once; the answer is PUT_OK unless one failed, the replication status winning when both did. Everything
is callbacks on the Trio thread (no task per put): :meth:`PutWaits.notify` registers them, :meth:`PutWaits.status`
parks the calling task on them instead. Owned by the :class:`~store.message_store.MessageStore`.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Final

import trio

from store.results import PutStatus
from store.store_config import BrokerRole, FlushDiskType

if TYPE_CHECKING:
    from store.message_store import MessageStore

PutCallback = Callable[[PutStatus], None]

#: :meth:`PutWaits.plan`'s answers.
NO_WAIT: Final = 0
FLUSH: Final = 1
NOTIFY: Final = 2
INLINE: Final = 3


class _Join:
    """Both waits of one put: calls back once the second one answered."""

    __slots__ = ("callback", "flush", "pending", "replica")

    def __init__(self, callback: PutCallback) -> None:
        self.callback: PutCallback | None = callback
        self.flush = self.replica = PutStatus.PUT_OK
        self.pending = 2

    def flushed(self, ok: bool) -> None:
        if not ok:
            self.flush = PutStatus.FLUSH_DISK_TIMEOUT
        self.done()

    def replicated(self, ok: bool) -> None:
        if not ok:
            self.replica = PutStatus.FLUSH_SLAVE_TIMEOUT
        self.done()

    def done(self) -> None:
        self.pending -= 1
        callback = self.callback
        if self.pending == 0 and callback is not None:
            callback(self.replica if self.replica is not PutStatus.PUT_OK else self.flush)


class PutWaits:
    def __init__(self, store: MessageStore) -> None:
        self.store = store

    def _flushes(self, wait: bool) -> bool:
        return wait and self.store.config.flush_disk_type is FlushDiskType.SYNC_FLUSH

    def _replicates(self, wait: bool) -> bool:
        return wait and self.store.config.broker_role is BrokerRole.SYNC_MASTER

    def needed(self, wait: bool) -> bool:
        """Whether a put with this ``WAIT`` setting waits for anything."""
        return self._flushes(wait) or self._replicates(wait)

    def plan(self, wait: bool) -> int:
        """How a put with this ``WAIT`` setting is answered, in one call for the send fast path: :data:`NO_WAIT`,
        :data:`FLUSH` (the group commit alone: :meth:`MessageStore.notify_flushed` takes a bool callback directly),
        :data:`NOTIFY` (:meth:`notify`) or :data:`INLINE` (no services running: await :meth:`status`)."""
        if not wait:
            return NO_WAIT
        store = self.store
        config = store.config
        replicates = config.broker_role is BrokerRole.SYNC_MASTER
        if config.flush_disk_type is FlushDiskType.SYNC_FLUSH:
            if not store.group_commit.running:
                return INLINE
            return NOTIFY if replicates else FLUSH
        return NOTIFY if replicates else NO_WAIT

    def can_notify(self, wait: bool) -> bool:
        """The services a put needs are running (a store used without ``run`` syncs inline: :meth:`status`)."""
        return not self._flushes(wait) or self.store.group_commit.running

    def notify(self, end_offset: int, wait: bool, callback: PutCallback) -> PutStatus | None:
        """Register the put ending at ``end_offset`` (the caller checked :meth:`needed` and :meth:`can_notify`):
        ``None`` and later ``callback(status)``, or the status at once when nothing was registered."""
        store = self.store
        flushes, replicates = self._flushes(wait), self._replicates(wait)
        if not replicates:
            store.notify_flushed(
                end_offset, lambda ok: callback(PutStatus.PUT_OK if ok else PutStatus.FLUSH_DISK_TIMEOUT)
            )
            return None
        if not flushes:
            return store.ha.notify_replicated(
                end_offset, lambda ok: callback(PutStatus.PUT_OK if ok else PutStatus.FLUSH_SLAVE_TIMEOUT)
            )
        join = _Join(callback)
        store.notify_flushed(end_offset, join.flushed)
        now = store.ha.notify_replicated(end_offset, join.replicated)
        if now is not None:
            join.replica = now
            join.done()
        return None

    async def statuses(self, puts: list[tuple[int, bool]]) -> list[PutStatus]:
        """The statuses of several puts ``(end_offset, wait)`` appended together, each registered before anything
        is awaited (so their timeouts run side by side, and no role change can come between an append and its
        registration), in the order given."""
        out: list[PutStatus | None] = [None] * len(puts)
        inline: list[int] = []
        left = [0]
        done = trio.Event()
        registering = [True]
        for i, (end, wait) in enumerate(puts):
            if not self.needed(wait):
                out[i] = PutStatus.PUT_OK
                continue
            if not self.can_notify(wait):
                inline.append(i)
                continue

            def answered(status: PutStatus, i: int = i) -> None:
                out[i] = status
                left[0] -= 1
                if left[0] == 0 and not registering[0]:
                    done.set()

            left[0] += 1
            now = self.notify(end, wait, answered)
            if now is not None:
                out[i] = now
                left[0] -= 1
        registering[0] = False
        for i in inline:
            out[i] = await self.status(*puts[i])
        if left[0] > 0:
            await done.wait()
        return [PutStatus.UNKNOWN_ERROR if s is None else s for s in out]

    async def status(self, end_offset: int, wait: bool) -> PutStatus:
        """:meth:`notify`, awaited by the calling task. Cancelling the wait leaves the record appended."""
        if not self.needed(wait):
            return PutStatus.PUT_OK
        if not self.can_notify(wait):
            # No services (a store used without ``run``): sync inline; no HA service means no slave either.
            flush = await self.store.flush_status(end_offset, wait)
            return PutStatus.SLAVE_NOT_AVAILABLE if self._replicates(wait) else flush
        task = trio.lowlevel.current_task()
        answer: list[PutStatus] = []
        live = [True]

        def answered(status: PutStatus) -> None:
            if live[0]:
                answer.append(status)
                trio.lowlevel.reschedule(task)

        now = self.notify(end_offset, wait, answered)
        if now is not None:
            return now

        def abort(_: object) -> trio.lowlevel.Abort:
            live[0] = False
            return trio.lowlevel.Abort.SUCCEEDED

        await trio.lowlevel.wait_task_rescheduled(abort)
        return answer[0]
