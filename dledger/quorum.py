"""The leader's acknowledgements: watermarks, waiting appends and the commit index (DLedger's ``QuorumAckChecker``
and ``waitAck`` in ``DLedgerEntryPusher.java``).

A watermark is the last index a member is known to hold in the current term (the leader's own counts once written,
or once flushed under ``sync_before_ack``). The quorum index is the middle of the sorted watermarks
(``sorted_desc[n/2]``). Waiting appends are keyed by ``(term, last index)``; each completes once:

- 200 when the commit index covers it;
- 502 WAIT_QUORUM_ACK_TIMEOUT once older than ``maxWaitAckTimeMs`` (2.5 s) while nothing advances; it stays counted
  against ``maxPendingRequestsNum`` (then 503), as in DLedger;
- 501 TERM_CHANGED when the term moved on. DLedger does this only when the member is leader again; here it happens as
  soon as the member stops leading, so a deposed leader's sends fail instead of hanging (docs/architecture.md#dledger).

The commit rule is Raft's: the quorum index commits only when its entry is of the current term; the leader appends an
empty entry when elected so earlier entries commit with it. DLedger 0.3.1.2 commits the quorum index whatever its term
(the node's ``faithful`` mode), which can lose a committed entry: tests/dledger/test_sim_regressions.py holds seeds
where DLedger's rules lose one.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import attrs

from dledger.codes import ResponseCode

if TYPE_CHECKING:
    from dledger.node import RaftNode


@attrs.define
class _Waiting:
    ticket: int
    created: int
    positions: tuple[int, ...]
    done: bool = False


class Quorum:
    def __init__(self, node: RaftNode) -> None:
        self.node = node
        self.watermarks: dict[int, dict[str, int]] = {}
        self.waiting: dict[int, dict[int, _Waiting]] = {}
        self.last_quorum_index = -1
        self.last_check_leak_time = node.now

    def _marks(self, term: int) -> dict[str, int]:
        marks = self.watermarks.get(term)
        if marks is None:
            marks = self.watermarks[term] = dict.fromkeys(self.node.member.peers, -1)
        return marks

    def watermark(self, term: int, peer: str) -> int:
        return self._marks(term)[peer]

    def update_watermark(self, term: int, peer: str, index: int) -> None:
        marks = self._marks(term)
        if marks.get(peer, -1) < index:
            marks[peer] = index

    def pending_full(self, term: int) -> bool:
        return len(self.waiting.get(term, {})) > self.node.config.max_pending_requests_num

    def wait_ack(self, term: int, index: int, ticket: int, positions: tuple[int, ...]) -> None:
        """Register a local append whose last entry is ``index``; the leader's own watermark moves unless it must
        wait for the flush."""
        if not self.node.config.sync_before_ack:
            self.update_watermark(term, self.node.member.self_id, index)
        self.waiting.setdefault(term, {})[index] = _Waiting(ticket, self.node.now, positions)

    def fail_all(self, code: ResponseCode) -> None:
        """Complete every waiting append with ``code`` (leadership lost)."""
        for waits in self.waiting.values():
            for index, w in waits.items():
                self._complete(w, code, index)
        self.waiting.clear()

    def _complete(self, w: _Waiting, code: int, index: int) -> None:
        if not w.done:
            w.done = True
            self.node.append_done(w.ticket, code, index, w.positions)

    def quorum_index(self, term: int) -> int:
        marks = sorted(self._marks(term).values(), reverse=True)
        return marks[len(marks) // 2]

    def check(self) -> None:
        """One pass of the ack checker (leader only)."""
        node = self.node
        member, ledger, now = node.member, node.ledger, node.now
        if not member.is_leader:
            return
        term = member.curr_term
        for old in [t for t in self.waiting if t != term]:
            for index, w in self.waiting.pop(old).items():
                self._complete(w, ResponseCode.TERM_CHANGED, index)
        for old in [t for t in self.watermarks if t != term]:
            del self.watermarks[old]
        quorum_index = self.quorum_index(term)
        self._commit(term, quorum_index)
        acked_upto = min(quorum_index, ledger.committed_index)
        waits = self.waiting.setdefault(term, {})
        acked, need_check = 0, False
        for index in range(acked_upto, self.last_quorum_index, -1):
            waiting = waits.pop(index) if index in waits else None
            if waiting is None:
                need_check = True
                break
            self._complete(waiting, ResponseCode.SUCCESS, index)
            acked += 1
        if acked == 0:
            self._time_out(waits, acked_upto + 1)
        if now - self.last_check_leak_time > 1000 or need_check:
            self._refresh_own(term)
            for index in [i for i in waits if i <= acked_upto]:
                self._complete(waits.pop(index), ResponseCode.SUCCESS, index)
            self.last_check_leak_time = now
        self.last_quorum_index = acked_upto

    def _refresh_own(self, term: int) -> None:
        ledger = self.node.ledger
        own = ledger.flushed_index if self.node.config.sync_before_ack else ledger.end_index
        self.update_watermark(term, self.node.member.self_id, own)

    def on_flushed(self) -> None:
        if self.node.member.is_leader and self.node.config.sync_before_ack:
            self._refresh_own(self.node.member.curr_term)

    def _commit(self, term: int, quorum_index: int) -> None:
        ledger = self.node.ledger
        if quorum_index < 0 or quorum_index <= ledger.committed_index:
            return
        if not self.node.faithful:
            entry = self.node.entry(quorum_index)  # its term only: the recent entry, not one decoded from the files
            if entry is None or entry.term != term:
                return
        self.node.update_committed_index(term, quorum_index)

    def _time_out(self, waits: dict[int, _Waiting], begin: int) -> None:
        """Fail with 502 the waiting appends from ``begin`` on that are older than ``maxWaitAckTimeMs``, oldest
        first (they stay counted against the pending limit, as in DLedger)."""
        limit, now = self.node.config.max_wait_ack_time_ms, self.node.now
        for index, w in waits.items():  # insertion order is index order
            if index < begin or w.done:
                continue
            if now - w.created < limit:
                break
            self._complete(w, ResponseCode.WAIT_QUORUM_ACK_TIMEOUT, index)

    def next_deadline(self) -> int:
        node = self.node
        if not node.member.is_leader:
            return 1 << 62
        deadline = self.last_check_leak_time + 1001
        waits = self.waiting.get(node.member.curr_term)
        if waits:
            for w in waits.values():  # in index order, so in creation order: the first open one is the oldest
                if not w.done:
                    return min(deadline, w.created + node.config.max_wait_ack_time_ms)
        return deadline
