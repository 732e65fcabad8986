"""The follower's side of replication (DLedger's ``EntryHandler`` in ``DLedgerEntryPusher.java``).

APPEND pushes wait in a map keyed by their first index and are applied strictly in order (the one at the
follower's end + 1 next); a second push for a waiting index answers 413 REPEATED_PUSH. COMMIT, COMPARE and TRUNCATE
go through a queue of 1024 (full: 421), processed first; COMPARE and TRUNCATE drop the waiting APPENDs unanswered (the
leader re-pushes). Only a FOLLOWER applies anything: a candidate holds what it got until it follows (DLedger's
``EntryHandler.doWork`` waits; the leader gives a COMPARE up after 3 s), a leader answers the queue 405 NOT_FOLLOWER.

- APPEND: the entry must be next, of the current term, from the current leader and land at its ``pos``, and the disk
  not above DLedger's full ratio (the ledger's ``disk_full``: DLedger's ``appendAsFollower`` DISK_FULL), else 406;
  an entry the files cannot take (OSError: a segment that cannot be made) is logged and answered 406 too, with
  nothing of it written (DLedger's ``handleDoAppend`` answers any Throwable so), and the leader pushes it again.
- COMPARE: 200 when the local entry equals the pushed one, else 406.
- TRUNCATE: from the current term and leader only; keeps the entry if equal, else cuts at its ``pos`` and writes it.
  One the files cannot take (OSError) is logged and answered 406, as DLedger's ``handleDoTruncate`` answers any
  Throwable, the log left ending before the entry (the leader pauses, compares and truncates again).
- COMMIT: 200; adopts the leader's committed index only from the leader followed, in this member's term (ours:
  DLedger takes it from any term not below its own).
- every answer carries the follower's begin and end index; a 200 to APPEND or TRUNCATE then adopts the leader's
  committed index (clamped to the local end).

Once a second, with nothing applicable, a waiting APPEND already covered by the log is answered 200 if identical
(the ack was lost) or 406, else the oldest one waiting over a second answers 406 so the leader compares again.

Under ``sync_before_ack`` a 200 that vouches for entries (APPEND, COMPARE, TRUNCATE) leaves only once those entries
are flushed (:meth:`EntryHandler.on_flushed`); a truncation drops those it cut away unsent.
"""

from __future__ import annotations

import logging
from collections import deque
from typing import TYPE_CHECKING

from dledger.codes import PushType, ResponseCode
from dledger.entry import Entry
from dledger.ledger import LedgerError
from dledger.messages import PushEntryRequest, PushEntryResponse

if TYPE_CHECKING:
    from dledger.node import RaftNode

log = logging.getLogger(__name__)

QUEUE_CAPACITY = 1024
CHECK_INTERVAL_MS = 1000
PUSH_TIMEOUT_MS = 1000


class EntryHandler:
    def __init__(self, node: RaftNode) -> None:
        self.node = node
        #: first index -> (request, reply handle, arrival time)
        self.writes: dict[int, tuple[PushEntryRequest, object, int]] = {}
        self.queue: deque[tuple[PushEntryRequest, object]] = deque()
        self.last_check_time = node.now
        #: answers held until the flush reaches their index: (index, handle, response)
        self.unflushed: list[tuple[int, object, PushEntryResponse]] = []
        #: (term, leader) of the pushes applied last, and the first index of the log's suffix they wrote
        self._session: tuple[int, str | None] = (-1, None)
        self._written_from = 0
        #: the index the files last failed to take (logged once: the leader pushes it again at once, 406 after 406)
        self._unwritten = -1

    def response(self, request: PushEntryRequest, code: int) -> PushEntryResponse:
        ledger = self.node.ledger
        commit = request.type is PushType.COMMIT
        return PushEntryResponse(group=request.group, code=code, term=request.term,
                                 index=None if commit else request.first_entry_index,
                                 count=0 if commit else request.count, begin_index=ledger.begin_index,
                                 end_index=ledger.end_index)  # fmt: skip

    def handle_push(self, request: PushEntryRequest, handle: object) -> None:
        node = self.node
        kind = request.type
        if kind is PushType.APPEND:
            if not request.entries:
                node.reply(handle, self.response(request, ResponseCode.UNEXPECTED_ARGUMENT))
                return
            index = request.first_entry_index
            if index in self.writes:
                node.reply(handle, self.response(request, ResponseCode.REPEATED_PUSH))
                return
            if request.last_entry_index <= node.ledger.end_index and node.member.is_follower and not node.faithful:
                # Held already (its answer was lost): answer now, not at the next once-a-second check, or a follower
                # whose acks were lost catches up one entry per second (the simulator's seed 135).
                self._answer_held(request, handle)
                return
            self.writes[index] = (request, handle, node.now)
            return
        if kind is not PushType.COMMIT:
            if request.entry is None:
                node.reply(handle, self.response(request, ResponseCode.UNEXPECTED_ARGUMENT))
                return
            self.writes.clear()
        if len(self.queue) >= QUEUE_CAPACITY:
            node.reply(handle, self.response(request, ResponseCode.PUSH_REQUEST_IS_FULL))
            return
        self.queue.append((request, handle))

    def work(self) -> None:
        node = self.node
        if not node.member.is_follower:
            # A candidate holds what it got until it follows, as DLedger's doWork waits: a heartbeat may make it the
            # follower of the leader that sent them a moment later, and a 405 would cost that leader its error pause.
            while node.member.is_leader and self.queue:
                request, handle = self.queue.popleft()
                node.reply(handle, self.response(request, ResponseCode.NOT_FOLLOWER))
            return
        while True:
            if self.queue:
                request, handle = self.queue.popleft()
                if request.type is PushType.TRUNCATE:
                    self._truncate(request, handle)
                elif request.type is PushType.COMPARE:
                    self._compare(request, handle)
                else:
                    if self._from_followed_leader(request) or node.faithful:
                        self._adopt_commit(request)
                    node.reply(handle, self.response(request, ResponseCode.SUCCESS))
                continue
            waiting = self.writes.pop(node.ledger.end_index + 1, None)
            if waiting is None:
                self._check_abnormal()
                return
            self._append(*waiting[:2])

    def next_deadline(self) -> int:
        if self.writes and self.node.member.is_follower:
            return self.last_check_time + CHECK_INTERVAL_MS
        return 1 << 62

    # ---- the four pushes -------------------------------------------------------------------------------------------

    def _check_leader(self, request: PushEntryRequest) -> bool:
        member = self.node.member
        if not (member.is_follower and request.term == member.curr_term and request.leader_id == member.leader_id):
            return False
        if (request.term, request.leader_id) != self._session:
            self._session = (request.term, request.leader_id)
            self._written_from = self.node.ledger.end_index + 1
        return True

    def _from_followed_leader(self, request: PushEntryRequest) -> bool:
        """Whether a bare COMMIT comes from the leader this member follows, in its term. Only that leader's commit
        index covers this log: a leader of a later term this member has not heard of yet may have compared its log
        before the old leader appended more, and its index would then commit the old leader's entries. DLedger's
        ``handleDoCommit`` (dledger/src/main/java/io/openmessaging/storage/dledger/DLedgerEntryPusher.java) adopts it
        from any term not below its own; it is answered 200 all the same (the leader reads no COMMIT answer)."""
        member = self.node.member
        return request.term == member.curr_term and request.leader_id == member.leader_id

    def _append(self, request: PushEntryRequest, handle: object) -> None:
        ledger = self.node.ledger
        try:
            if not self._check_leader(request) or request.first_entry_index != ledger.end_index + 1:
                raise LedgerError(ResponseCode.INCONSISTENT_STATE)
            ledger.append_run_as_follower(request.entries)
        except LedgerError:
            self.node.reply(handle, self.response(request, ResponseCode.INCONSISTENT_STATE))
            return
        except OSError as exc:
            self._disk_failed(ledger.end_index + 1, exc)
            self.node.reply(handle, self.response(request, ResponseCode.INCONSISTENT_STATE))
            return
        self._answer(request.last_entry_index, handle, self.response(request, ResponseCode.SUCCESS))
        self._adopt_commit(request)

    def _disk_failed(self, index: int, exc: OSError) -> None:
        """Log that the files could not take entry ``index``, once while the leader keeps pushing it again."""
        if index != self._unwritten:
            self._unwritten = index
            log.error("dledger %s: entry %d not written, answered 406 until it can be: %s", self.node.member.self_id,
                      index, exc)  # fmt: skip

    def _compare(self, request: PushEntryRequest, handle: object) -> None:
        entry = request.entry
        assert entry is not None
        if self.node.ledger.get(entry.index) == entry:
            self._answer(entry.index, handle, self.response(request, ResponseCode.SUCCESS))
        else:
            self.node.reply(handle, self.response(request, ResponseCode.INCONSISTENT_STATE))

    def _truncate(self, request: PushEntryRequest, handle: object) -> None:
        entry = request.entry
        assert entry is not None
        node = self.node
        try:
            if not self._check_leader(request) or not self._may_start_at(entry, request):
                raise LedgerError(ResponseCode.INCONSISTENT_STATE)
            if not node.faithful and node.ledger.get(entry.index) == entry:
                # Everything after the entry that this leader wrote itself in this term, or that is committed,
                # matches the leader's log: a TRUNCATE that arrives late (duplicated or reordered) must not cut it.
                ledger = node.ledger
                keep = ledger.end_index if self._written_from <= entry.index + 1 else entry.index
                keep = max(keep, ledger.committed_index)
                if keep > entry.index:
                    keep_entry = node.ledger.get(keep)
                    assert keep_entry is not None
                    entry = keep_entry
            self._truncate_to(entry)
        except LedgerError:
            node.reply(handle, self.response(request, ResponseCode.INCONSISTENT_STATE))
            return
        except OSError as exc:
            self._disk_failed(entry.index, exc)
            node.reply(handle, self.response(request, ResponseCode.INCONSISTENT_STATE))
            return
        self._answer(entry.index, handle, self.response(request, ResponseCode.SUCCESS))
        self._adopt_commit(request)

    def _truncate_to(self, entry: Entry) -> None:
        """Make ``entry`` the log's last; whether that succeeds or fails midway (the log then ends before it: see
        :meth:`~dledger.file_store.FileLedger.truncate`), the answers held for entries cut go unsent."""
        ledger = self.node.ledger
        cut = entry.index + 1 if ledger.get(entry.index) == entry else entry.index
        try:
            self.node.truncate(entry)
        finally:
            self._drop_held(min(cut, ledger.end_index + 1))
            self._written_from = min(self._written_from, entry.index + 1, ledger.end_index + 1)

    def _adopt_commit(self, request: PushEntryRequest) -> None:
        self.node.update_committed_index(request.term, request.commit_index)

    # ---- answers and the once-a-second check -----------------------------------------------------------------------

    def _answer(self, index: int, handle: object, response: PushEntryResponse) -> None:
        node = self.node
        if node.config.sync_before_ack and index > node.ledger.flushed_index:
            self.unflushed.append((index, handle, response))
            node.request_flush()
            return
        node.reply(handle, response)

    def _may_start_at(self, entry: Entry, request: PushEntryRequest) -> bool:
        """A TRUNCATE past this log's end (the log then starts afresh at it: the leader's first entry, the ones
        before deleted) only to an entry the leader says is committed, and never below this log's first entry (a
        late or duplicated TRUNCATE after this member's own retention moved it)."""
        ledger = self.node.ledger
        if entry.index > ledger.end_index + 1 and entry.index > request.commit_index:
            return False
        return entry.index >= ledger.begin_index

    def _drop_held(self, cut: int) -> None:
        """A truncation at ``cut`` (or a rebuild, which moves the begin index) drops the answers held for a flush
        (``sync_before_ack``) at or after the cut and before the log's first entry, never sends them: they vouch for
        entries this member may no longer hold, and a flush of what replaced them would release them."""
        begin = self.node.ledger.begin_index
        self.unflushed = [held for held in self.unflushed if begin <= held[0] < cut]

    def on_flushed(self) -> None:
        flushed = self.node.ledger.flushed_index
        keep = []
        for index, handle, response in self.unflushed:
            if index <= flushed:
                self.node.reply(handle, response)
            else:
                keep.append((index, handle, response))
        self.unflushed = keep

    def _answer_held(self, request: PushEntryRequest, handle: object) -> None:
        """An APPEND whose entries the log already covers: 200 if they are the same, else 406."""
        if all(self.node.ledger.get(e.index) == e for e in request.entries):
            self._answer(request.last_entry_index, handle, self.response(request, ResponseCode.SUCCESS))
        else:
            self.node.reply(handle, self.response(request, ResponseCode.INCONSISTENT_STATE))

    def _check_abnormal(self) -> None:
        node = self.node
        now = node.now
        if now - self.last_check_time < CHECK_INTERVAL_MS or not self.writes:
            return
        self.last_check_time = now
        end = node.ledger.end_index
        oldest = None
        for first, (request, handle, arrived) in list(self.writes.items()):
            if request.last_entry_index <= end:
                del self.writes[first]
                self._answer_held(request, handle)
                continue
            if first == end + 1:
                return
            if now - arrived >= PUSH_TIMEOUT_MS and (oldest is None or first < oldest):
                oldest = first
        if oldest is not None:
            request, handle, _ = self.writes.pop(oldest)
            node.reply(handle, self.response(request, ResponseCode.INCONSISTENT_STATE))
