"""``RebalanceLockManager``: queue locks for orderly consumption (LOCK_BATCH_MQ / UNLOCK_BATCH_MQ,
docs/protocol.md#74-client-registry-and-heartbeats).

A lock on (group, MessageQueue) belongs to one client id and lives ``max_live_time`` seconds (60 s) after that client's
last lock request; the owner re-locks every 20 s to keep it. Another client takes the queue only once the lock has
expired. Unlock releases only locks the caller owns. State is in memory only (Java's is too: after a broker restart
clients simply re-lock). All methods are synchronous; ``clock`` is Trio's so tests run in virtual time.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable

import attrs
import trio

from remoting.codec.bodies import MessageQueue

log = logging.getLogger(__name__)


@attrs.define
class LockEntry:
    client_id: str
    last_update: float


class RebalanceLockManager:
    """Group -> {MessageQueue: LockEntry}. See the module docstring."""

    def __init__(self, max_live_time: float = 60.0, clock: Callable[[], float] = trio.current_time) -> None:
        self.max_live_time = max_live_time
        self._clock = clock
        self._table: dict[str, dict[MessageQueue, LockEntry]] = {}

    def _expired(self, entry: LockEntry, now: float) -> bool:
        return now - entry.last_update > self.max_live_time

    def is_locked(self, group: str, mq: MessageQueue, client_id: str) -> bool:
        """True (and the lock refreshed) when ``client_id`` holds a live lock on ``mq``."""
        entry = self._table.get(group, {}).get(mq)
        now = self._clock()
        if entry is not None and entry.client_id == client_id and not self._expired(entry, now):
            entry.last_update = now
            return True
        return False

    def try_lock_batch(self, group: str, mqs: Iterable[MessageQueue], client_id: str) -> set[MessageQueue]:
        """Lock what can be locked for ``client_id``; returns the queues it now holds (refreshed or newly taken)."""
        locks = self._table.setdefault(group, {})
        now = self._clock()
        granted: set[MessageQueue] = set()
        for mq in mqs:
            entry = locks.get(mq)
            if entry is None:
                locks[mq] = LockEntry(client_id, now)
                granted.add(mq)
            elif entry.client_id == client_id:
                entry.last_update = now
                granted.add(mq)
            elif self._expired(entry, now):
                log.warning("lock on %s of group %s moves from %s to %s", mq, group, entry.client_id, client_id)
                locks[mq] = LockEntry(client_id, now)
                granted.add(mq)
        return granted

    def unlock_batch(self, group: str, mqs: Iterable[MessageQueue], client_id: str) -> None:
        """Release the caller's locks among ``mqs``; locks held by others are left alone."""
        locks = self._table.get(group)
        if locks is None:
            return
        for mq in mqs:
            entry = locks.get(mq)
            if entry is not None and entry.client_id == client_id:
                del locks[mq]
        if not locks:
            del self._table[group]

    def owner(self, group: str, mq: MessageQueue) -> str | None:
        """The client id holding a live lock on ``mq``, if any."""
        entry = self._table.get(group, {}).get(mq)
        if entry is None or self._expired(entry, self._clock()):
            return None
        return entry.client_id
