"""The leader's pusher to one follower (DLedger's ``EntryDispatcher`` in ``DLedgerEntryPusher.java``).

States ``COMPARE -> (TRUNCATE) -> APPEND``, reset to COMPARE on every new term or leader:

- COMPARE sends the leader's entry at ``compareIndex`` (from its last entry down) until the follower holds an equal
  one; then APPEND right after it, or first TRUNCATE the follower's longer or disagreeing log. One COMPARE or
  TRUNCATE is in flight at a time (DLedger blocks on it for up to 3 s), and only the answer to that very request is
  read (:meth:`Dispatcher._call_awaited`): a late answer to one given up on is dropped, as DLedger's timed-out future.
- APPEND pushes every entry from ``writeIndex`` to the leader's end (at most 1000 unanswered), or with
  ``enableBatchPush`` as batches of about ``maxBatchPushSize`` bytes; an answer 200 moves the follower's watermark, 406
  sends the dispatcher back to COMPARE if it is still in the APPEND run that push belongs to (DLedger's
  ``changeState`` moves only APPEND to COMPARE), at once unless it refuses the same push as the last 406 did, with
  the follower's watermark unmoved since (a follower whose files cannot take the entry): then after a 500 ms pause.
  Once caught up it pushes a bare COMMIT every second; the push carrying the entry after the watermark is pushed
  again from there when its answer is over ``maxPushTimeOutMs`` late. Single pushes of entries more than 1000 entries
  and ``peerPushThrottlePoint`` bytes behind the end are throttled to ``peerPushQuota`` bytes a second (a follower
  catching up on a long backlog). Batches are paced (DLedger sends each at once): while that push is unanswered the
  next one leaves only when it is full, so under load a push carries what arrived during one round trip instead of
  one scheduler pass's appends.

Any failure (a COMPARE or TRUNCATE that times out or answers anything but 200/406) resets to COMPARE and pauses the
dispatcher 500 ms, as DLedger's exception handler does. Every push carries the leader's committed index.
"""

from __future__ import annotations

import functools
import itertools
from collections.abc import Callable
from typing import TYPE_CHECKING

from dledger.codes import PushType, ResponseCode
from dledger.entry import Entry
from dledger.messages import PushEntryRequest, PushEntryResponse

if TYPE_CHECKING:
    from dledger.node import RaftNode

MAX_PENDING = 1000
PAUSE_AFTER_ERROR_MS = 500


class Dispatcher:
    def __init__(self, node: RaftNode, peer: str) -> None:
        self.node = node
        self.peer = peer
        self.type = PushType.COMPARE
        self.compare_index = -1
        self.write_index = -1
        self.term = -1
        self.leader_id: str | None = None
        self.last_push_commit_time = -1
        self.last_check_leak_time = node.now
        #: first index of an unanswered APPEND -> (send time, entries in it)
        self.pending: dict[int, tuple[int, int]] = {}
        #: serial of the COMPARE or TRUNCATE whose answer is awaited (None: none in flight)
        self.awaiting: int | None = None
        self._serials = itertools.count(1)
        #: bumped on every state change: an APPEND's answer from an earlier state moves no state
        self.state_changes = 0
        self.paused_until = -1
        #: during COMPARE, the highest index found equal on the follower (-1: none yet)
        self.matched = -1
        #: ``(first index, watermark then)`` of the last APPEND refused with 406 (:meth:`_refused`)
        self.refusal: tuple[int, int] | None = None
        #: ``[second, bytes]`` of the throttled pushes in that second (:meth:`_throttled`)
        self._quota = [-1, 0]

    # ---- state -------------------------------------------------------------------------------------------------

    def _fresh(self) -> bool:
        member = self.node.member
        if not member.is_leader:
            return False
        if self.term != member.curr_term or self.leader_id != member.leader_id:
            self.term = member.curr_term
            self.leader_id = member.self_id
            self.awaiting = None
            self.refusal = None
            self._change(-1, PushType.COMPARE)
        return True

    def _change(self, index: int, target: PushType) -> None:
        self.state_changes += 1
        if target is PushType.APPEND:
            self.compare_index = -1
            self.node.quorum.update_watermark(self.term, self.peer, index)
            self.write_index = index + 1
        elif target is PushType.COMPARE:
            self.matched = -1
            if self.type is PushType.APPEND:
                self.compare_index = -1
                self.pending.clear()
        elif target is PushType.TRUNCATE:
            self.compare_index = -1
        self.type = target

    def _fail(self) -> None:
        self._change(-1, PushType.COMPARE)
        self.awaiting = None
        self.paused_until = self.node.now + PAUSE_AFTER_ERROR_MS

    def _request(self, entries: tuple[Entry, ...], kind: PushType) -> PushEntryRequest:
        member = self.node.member
        batch = kind is PushType.APPEND and self.node.config.enable_batch_push
        return PushEntryRequest(group=member.group, remote_id=self.peer, leader_id=self.leader_id,
                                local_id=member.self_id, term=self.term, type=kind,
                                entry=None if batch or not entries else entries[0],
                                batch_entry=entries if batch else (),
                                commit_index=self.node.ledger.committed_index)  # fmt: skip

    # ---- work --------------------------------------------------------------------------------------------------

    def work(self) -> None:
        if self.node.now < self.paused_until or not self._fresh() or self.awaiting is not None:
            return
        if self.type is PushType.APPEND:
            self._append()
        else:
            self._compare()

    def next_deadline(self) -> int:
        node = self.node
        if not node.member.is_leader:
            return 1 << 62
        if node.now < self.paused_until:
            return self.paused_until
        if self.awaiting is not None or self.type is not PushType.APPEND:
            return 1 << 62
        # A bare COMMIT leaves only once caught up (write_index past the end); a held-back batch waits for the
        # answer or the timeout of the push carrying the entry after the watermark.
        deadline = self.last_push_commit_time + 1001 if self.write_index > node.ledger.end_index else 1 << 62
        carrying = self._carrying()
        if carrying is not None:
            deadline = min(deadline, carrying[1] + node.config.max_push_time_out_ms + 1)
        return deadline

    # ---- APPEND ------------------------------------------------------------------------------------------------

    def _append(self) -> None:
        node = self.node
        ledger, config = node.ledger, node.config
        while self.type is PushType.APPEND:
            if self.write_index > ledger.end_index:
                self._commit()
                self._check_append_response()
                return
            if len(self.pending) >= MAX_PENDING or node.now - self.last_check_leak_time > 1000:
                mark = node.quorum.watermark(self.term, self.peer)
                for first in [i for i, (_, n) in self.pending.items() if i + n - 1 <= mark]:
                    del self.pending[first]
                self.last_check_leak_time = node.now
            if len(self.pending) >= MAX_PENDING:
                self._check_append_response()
                return
            if config.enable_batch_push:
                batch = self._batch_from(self.write_index)
                if batch and not self._worth_pushing(batch):
                    self._check_append_response()
                    return
                self._push(batch)
            else:
                entry = node.entry(self.write_index)
                if entry is not None and self._throttled(entry):
                    return
                self._push(() if entry is None else (entry,))

    def _throttled(self, entry: Entry) -> bool:
        """Whether the push of ``entry`` waits for the next second: it is more than :data:`MAX_PENDING` entries and
        ``peerPushThrottlePoint`` bytes behind the leader's end, and this second's ``peerPushQuota`` bytes for this
        follower are spent (DLedger's ``checkQuotaAndWait`` in
        dledger/src/main/java/io/openmessaging/storage/dledger/DLedgerEntryPusher.java sleeps until then), so a
        follower catching up on a long backlog leaves the leader's disk and network to the live traffic. Otherwise
        the entry's size is counted and False. The distance is taken from the log's write position, as DLedger's
        from ``getMaxWrotePosition``: reading the last entry copied its body at every push."""
        node = self.node
        ledger, config = node.ledger, node.config
        if ledger.end_index - entry.index <= MAX_PENDING:
            return False
        if ledger.write_pos - entry.pos < config.peer_push_throttle_point:
            return False
        second = node.now // 1000
        if self._quota[0] != second:
            self._quota = [second, 0]
        if self._quota[1] >= config.peer_push_quota:
            self.paused_until = (second + 1) * 1000
            return True
        self._quota[1] += entry.size
        return False

    def _batch_from(self, index: int) -> tuple[Entry, ...]:
        ledger, limit = self.node.ledger, self.node.config.max_batch_push_size
        entries: list[Entry] = []
        total = 0
        while index <= ledger.end_index and total < limit:
            entry = self.node.entry(index)
            if entry is None:
                break
            entries.append(entry)
            total += entry.size
            index += 1
        return tuple(entries)

    def _worth_pushing(self, batch: tuple[Entry, ...]) -> bool:
        """A batch leaves at once when nothing pushed is unanswered or when it is full; otherwise it waits for the
        answer, collecting the entries appended meanwhile. Batches then grow with the load instead of staying at
        what one scheduler pass appends, and each one costs a request, an answer and a commit step for all its
        entries (DLedger pushes every batch at once; this only paces them). The wait is bounded: the push carrying
        the entry after the watermark is pushed again once its answer is over ``maxPushTimeOutMs`` late."""
        if self._carrying() is None:  # no answer to wait for (none due, or the push carrying it is forgotten)
            return True
        return sum(e.size for e in batch) >= self.node.config.max_batch_push_size

    def _push(self, entries: tuple[Entry, ...]) -> None:
        if not entries:  # below the leader's first index: compare again
            self._change(-1, PushType.COMPARE)
            return
        request = self._request(entries, PushType.APPEND)
        first = entries[0].index
        self.pending[first] = (self.node.now, len(entries))
        self.write_index = max(self.write_index, entries[-1].index + 1)
        self.last_push_commit_time = self.node.now
        self.node.call(self.peer, request, functools.partial(self._on_append, self.state_changes))

    def _on_append(self, state: int, response: object) -> None:
        """An APPEND's answer. A 200 names the entries the follower took from this leader in this term, so it moves
        the watermark whenever it comes; anything else matters only while the dispatcher is still in the APPEND run
        (``state``) the push was sent in: a 406 then sends it back to COMPARE."""
        if not isinstance(response, PushEntryResponse):
            return
        current = state == self.state_changes
        if response.code == ResponseCode.SUCCESS and response.index is not None:
            if current:
                self.pending.pop(response.index, None)
            last = response.index + max(response.count, 1) - 1
            self.node.quorum.update_watermark(response.term, self.peer, last)
            self.node.wake()
        elif response.code == ResponseCode.INCONSISTENT_STATE and current:
            self._refused(response.index)
            self._change(-1, PushType.COMPARE)
            self.node.wake()

    def _refused(self, first: int | None) -> None:
        """An APPEND from ``first`` answered 406. The same push refused again with the follower's watermark unmoved
        since (it compared equal up to the entry before, so its files cannot take the entry: a disk fault) pauses the
        dispatcher :data:`PAUSE_AFTER_ERROR_MS` before it compares again; otherwise APPEND, 406 and COMPARE cycled as
        fast as round trips go for as long as the fault lasted (DLedger pauses 1 ms a loop). A first refusal, the
        usual one, compares at once."""
        refusal = (-1 if first is None else first, self.node.quorum.watermark(self.term, self.peer))
        if refusal == self.refusal:
            self.paused_until = self.node.now + PAUSE_AFTER_ERROR_MS
        self.refusal = refusal

    def _commit(self) -> None:
        now = self.node.now
        if now - self.last_push_commit_time > 1000:
            self.node.call(self.peer, self._request((), PushType.COMMIT), lambda _r: None)
            self.last_push_commit_time = now

    def _carrying(self) -> tuple[int, int, int] | None:
        """The unanswered push that carries the entry after the follower's watermark, as ``(first index, send time,
        entries)``, or None when that entry was not pushed (caught up) or its push is forgotten. Usually the push
        starts there (DLedger looks only there); a 200 from an earlier APPEND run can move the watermark into the
        middle of one. Pending pushes never overlap (a re-push replaces the one it repeats), so at most one does."""
        mark = self.node.quorum.watermark(self.term, self.peer)
        if mark + 1 >= self.write_index:
            return None
        sent = self.pending.get(mark + 1)
        if sent is not None:
            return mark + 1, *sent
        for first, (at, count) in self.pending.items():
            if first <= mark < first + count - 1:
                return first, at, count
        return None

    def _check_append_response(self) -> None:
        """Push the rest of the push carrying the entry after the watermark again when its answer is over
        ``maxPushTimeOutMs`` late (DLedger's ``doCheckAppendResponse``: from the watermark + 1 on)."""
        node = self.node
        carrying = self._carrying()
        if carrying is None or node.now - carrying[1] <= node.config.max_push_time_out_ms:
            return
        first, _, count = carrying
        start = node.quorum.watermark(self.term, self.peer) + 1
        entries = tuple(e for i in range(start, first + count) if (e := node.entry(i)) is not None)
        if entries and not node.config.enable_batch_push and self._throttled(entries[0]):
            return  # pushed again once the next second's quota opens (DLedger's re-push goes through the quota too)
        del self.pending[first]
        self._push(entries)

    # ---- COMPARE / TRUNCATE ------------------------------------------------------------------------------------

    def _compare(self) -> None:
        ledger = self.node.ledger
        if self.compare_index == -1 and ledger.end_index == -1:
            return
        if self.compare_index == -1 or not ledger.begin_index <= self.compare_index <= ledger.end_index:
            self.compare_index = ledger.end_index
        entry = ledger.get(self.compare_index)
        if entry is None:
            self._fail()
            return
        self._call_awaited(entry, PushType.COMPARE, self._on_compare)

    def _call_awaited(self, entry: Entry, kind: PushType, on_answer: Callable[[object], None]) -> None:
        """Send the COMPARE or TRUNCATE of ``entry``; ``on_answer`` gets its answer unless the dispatcher gave up on
        it meanwhile (a new term, a failure). An answer is never read as the answer to another request: the
        follower's 200 to an earlier COMPARE would pass for a match at the index compared now."""
        serial = self.awaiting = next(self._serials)

        def answer(response: object) -> None:
            if serial == self.awaiting:
                self.awaiting = None
                on_answer(response)

        self.node.call(self.peer, self._request((entry,), kind), answer)

    def _on_compare(self, response: object) -> None:
        ok = ResponseCode.SUCCESS, ResponseCode.INCONSISTENT_STATE
        if not isinstance(response, PushEntryResponse) or response.code not in ok:
            self._fail()
            return
        ledger = self.node.ledger
        truncate_index = -1
        if response.code == ResponseCode.SUCCESS:
            if self.compare_index == response.end_index:
                self._change(self.compare_index, PushType.APPEND)
                self.node.wake()
                return
            further = min(response.end_index, ledger.end_index)
            if further > self.compare_index and not self.node.faithful:
                # The follower holds more: APPENDs still in flight may have landed after its last answer. Compare
                # there rather than cut what may be committed (DLedger truncates at once; the simulator showed a
                # committed entry left on a minority by that). Walking back down stops at this known match.
                self.matched = self.compare_index
                self.compare_index = further
                self._compare()
                return
            truncate_index = self.compare_index
        elif (response.end_index < ledger.begin_index or response.begin_index > ledger.end_index
              or self.compare_index < response.begin_index):  # fmt: skip
            # No overlap with the leader's log, or the compared index is below the follower's first: start over.
            truncate_index = ledger.begin_index
        elif self.compare_index > response.end_index:
            self.compare_index = response.end_index
            self.matched = -1
        else:
            self.compare_index -= 1
            if self.compare_index <= self.matched:
                truncate_index = self.matched
        if self.compare_index < ledger.begin_index:
            truncate_index = ledger.begin_index
        if truncate_index != -1:
            self._change(truncate_index, PushType.TRUNCATE)
            self._truncate(truncate_index)
        self.node.wake()

    def _truncate(self, index: int) -> None:
        entry = self.node.ledger.get(index)
        if entry is None:
            self._fail()
            return

        def done(response: object) -> None:
            if isinstance(response, PushEntryResponse) and response.code == ResponseCode.SUCCESS:
                self.last_push_commit_time = self.node.now
                self._change(index, PushType.APPEND)
                self.node.wake()
            else:
                self._fail()

        self._call_awaited(entry, PushType.TRUNCATE, done)
