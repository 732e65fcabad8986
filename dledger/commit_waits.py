"""``CommitWaits``: the sends waiting for their DLedger entry to be committed, owned by one
:class:`~dledger.commitlog_store.DLedgerMessageStore` on the Trio thread.

An append registers its last entry's index with its CommitLog end offset; the send's answer registers a callback by
that end offset (:meth:`CommitWaits.notify`). The entry's outcome becomes a put status as RocketMQ 4.9.8's
``DLedgerCommitLog.asyncPutMessage`` maps DLedger's result codes: 200 PUT_OK; NOT_LEADER, INCONSISTENT_LEADER,
LEADER_NOT_READY, DISK_FULL SERVICE_NOT_AVAILABLE; WAIT_QUORUM_ACK_TIMEOUT and LEADER_PENDING_FULL OS_PAGECACHE_BUSY
(which the send processor answers SYSTEM_ERROR "[PC_SYNCHRONIZED]broker busy, start flow control for a while", a
send-back SYSTEM_ERROR "OS_PAGECACHE_BUSY"); anything else (TERM_CHANGED) UNKNOWN_ERROR, answered SYSTEM_ERROR
"UNKNOWN_ERROR". A leader that loses its role fails every waiting send at once (UNKNOWN_ERROR) and forgets the
outcomes nobody claimed.

``notify(end, wait, callback(status))``, ``needed``, ``can_notify`` and ``status`` are the store's ``put_waits``
interface (:mod:`store.put_waits`) the send processor waits through. An outcome that arrives before its callback (a
group of one commits inside the append) is kept for the last 4,096 appends.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable

import trio

from dledger.codes import ResponseCode
from dledger.effects import AppendDone
from store.put_waits import NOTIFY, PutWaits
from store.results import PutStatus

PutCallback = Callable[[PutStatus], None]
_RECENT = 4096
_NOT_AVAILABLE = frozenset(
    {ResponseCode.NOT_LEADER, ResponseCode.INCONSISTENT_LEADER, ResponseCode.LEADER_NOT_READY, ResponseCode.DISK_FULL}
)


_BUSY = frozenset({ResponseCode.WAIT_QUORUM_ACK_TIMEOUT, ResponseCode.LEADER_PENDING_FULL})


def put_status_of(code: int) -> PutStatus:
    """The put status of an append's outcome, as store/src/main/java/org/apache/rocketmq/store/dledger/
    DLedgerCommitLog.java ``asyncPutMessage`` maps the append future's code."""
    if code == ResponseCode.SUCCESS:
        return PutStatus.PUT_OK
    if code in _NOT_AVAILABLE:
        return PutStatus.SERVICE_NOT_AVAILABLE
    return PutStatus.OS_PAGECACHE_BUSY if code in _BUSY else PutStatus.UNKNOWN_ERROR


class CommitWaits(PutWaits):
    """The store's ``put_waits`` in DLedger mode (it replaces :class:`store.put_waits.PutWaits`: no group commit, no
    HA slave, the quorum instead)."""

    def __init__(self) -> None:  # no super(): nothing of the group commit or the HA service is used
        self._pending: dict[int, int] = {}  # last entry index of an append -> its end offset
        self._waiters: dict[int, PutCallback] = {}  # end offset -> callback
        self._outcomes: OrderedDict[int, PutStatus] = OrderedDict()  # end offset -> status nobody waited for yet

    def register(self, last_index: int, end_offset: int) -> None:
        self._pending[last_index] = end_offset

    def done(self, result: AppendDone) -> None:
        """The node's verdict on an append (its last entry's index)."""
        end = self._pending.pop(result.index, None)
        if end is None:
            return
        status = put_status_of(result.code)
        waiter = self._waiters.pop(end, None)
        if waiter is not None:
            waiter(status)
            return
        self._outcomes[end] = status
        while len(self._outcomes) > _RECENT:
            self._outcomes.popitem(last=False)

    def fail_all(self) -> None:
        """A role change (or the store stopping): every waiting send fails, and the outcomes nobody claimed yet are
        forgotten: the entries of a lost term may be truncated, and a later term's append ending at the same offset
        must get its own outcome (DLedgerCommitLog waits for each append's own future)."""
        waiters, self._waiters = self._waiters, {}
        self._pending.clear()
        self._outcomes.clear()
        for waiter in waiters.values():
            waiter(PutStatus.UNKNOWN_ERROR)

    # ---- the put-waits interface -----------------------------------------------------------------------------------

    def needed(self, wait: bool) -> bool:
        """Every send waits for the quorum, whatever its ``WAIT`` (DLedgerCommitLog waits for the append future)."""
        return True

    def can_notify(self, wait: bool) -> bool:
        return True

    def plan(self, wait: bool) -> int:
        """Always :data:`~store.put_waits.NOTIFY`: the quorum, never the group commit."""
        return NOTIFY

    def notify(self, end_offset: int, wait: bool, callback: PutCallback) -> PutStatus | None:
        """``None`` and later ``callback(status)``, or the status at once when the outcome is already known."""
        outcome = self._outcomes.pop(end_offset, None)
        if outcome is not None:
            return outcome
        self._waiters[end_offset] = callback
        return None

    async def status(self, end_offset: int, wait: bool) -> PutStatus:
        done = trio.Event()
        result: list[PutStatus] = []

        def finished(status: PutStatus) -> None:
            result.append(status)
            done.set()

        now = self.notify(end_offset, wait, finished)
        if now is not None:
            return now
        await done.wait()
        return result[0]
