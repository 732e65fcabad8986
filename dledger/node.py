"""``RaftNode``: one DLedger member as a sans-IO state machine (docs/architecture.md#dledger).

The node owns the member state (:mod:`dledger.member`), the elector (:mod:`dledger.elector`), the leader's
dispatchers and ack checker (:mod:`dledger.dispatcher`, :mod:`dledger.quorum`) and the follower's handler
(:mod:`dledger.handler`), over a :class:`~dledger.ledger.Ledger`. It never reads a clock, opens a socket or starts a
thread: every input carries ``now`` (ms), randomness comes from the ``rng`` it is given, and what it wants done comes
out of :meth:`RaftNode.drain` as :mod:`dledger.effects`. A shell calls :meth:`RaftNode.tick` at
:meth:`RaftNode.next_deadline` (and may call it more often); the Trio shell is :mod:`dledger.server`, the simulator
:mod:`dledger.sim`.

Inputs: :meth:`handle_request` (a request from a peer or a DLedger client, with an opaque reply handle),
:meth:`handle_response` (what came back for a :class:`~dledger.effects.Send`, or ``None``), :meth:`append` (a local
write, the broker's path), :meth:`on_flushed` (the ledger's flushed index moved), :meth:`leader_unreachable` (the
leader's process is gone).

Where it departs from DLedger 0.3.1.2, each found or confirmed by the simulator (``faithful=True`` restores DLedger's
behaviour for the tests that show the difference): the Raft commit rule with an empty entry at the start of each term
(:mod:`dledger.quorum`); a COMPARE that finds the follower longer compares again instead of truncating
(:mod:`dledger.dispatcher`); a truncation clamps the committed index; a bare COMMIT's index is taken only from
the leader followed, in its term (:mod:`dledger.handler`); waiting appends fail with TERM_CHANGED as soon as
leadership is lost; leadership goes only to a member whose log the leader has matched in its term, and the transferee
takes over only once it holds the leader's entry at the take index (:meth:`RaftNode._may_take_over`,
:meth:`RaftNode._holds_take_index`); and ``sync_before_ack`` (answers and the leader's own count wait for the flush).
Elections are faster too (:mod:`dledger.elector`): a follower that loses its leader votes in the next term, vote rounds
do not wait for silent peers, a leader steps down on any heartbeat answer with a higher term and votes in that term
(after a vote interval when it was handing leadership over, while a transferee, preferred or not, votes within the
take-leadership interval), a new leader's heartbeats go out before its first push, and a leader whose process is gone
(the shell's connect refused) or that does not answer a METADATA call once its heartbeat is overdue (paused,
partitioned) is noticed without the heartbeat leak.
"""

from __future__ import annotations

import itertools
import logging
import random
from collections.abc import Callable, Sequence

from dledger.codes import ResponseCode, Role
from dledger.config import DLedgerConfig
from dledger.dispatcher import Dispatcher
from dledger.effects import AppendDone, Committed, Effect, Reply, RoleChanged, Send
from dledger.elector import Elector
from dledger.entry import Entry
from dledger.handler import EntryHandler
from dledger.ledger import Bodies, Ledger, LedgerError
from dledger.member import MemberState, TermStore
from dledger.messages import (
    PUSHED_JSON_BODY_MAX,
    AppendEntryRequest,
    AppendEntryResponse,
    GetEntriesRequest,
    GetEntriesResponse,
    HeartBeatRequest,
    HeartBeatResponse,
    LeadershipTransferRequest,
    LeadershipTransferResponse,
    MetadataRequest,
    MetadataResponse,
    PushEntryRequest,
    PushEntryResponse,
    Request,
    Response,
    VoteRequest,
    VoteResponse,
)
from dledger.quorum import Quorum

log = logging.getLogger(__name__)

NEVER = 1 << 62
#: how many of its latest entries a leader keeps at hand for the pushes, and the largest body it keeps
RECENT_ENTRIES = 2048
RECENT_BODY_MAX = PUSHED_JSON_BODY_MAX
_RESPONSE_OF: dict[type[Request], type[Response]] = {
    VoteRequest: VoteResponse,
    HeartBeatRequest: HeartBeatResponse,
    PushEntryRequest: PushEntryResponse,
    LeadershipTransferRequest: LeadershipTransferResponse,
    AppendEntryRequest: AppendEntryResponse,
    MetadataRequest: MetadataResponse,
    GetEntriesRequest: GetEntriesResponse,
}
#: Ticket of the empty entry a new leader appends (its completion is not reported).
NOOP_TICKET = 0
_Callback = Callable[[Response | None], None]


class RaftNode:
    def __init__(self, config: DLedgerConfig, ledger: Ledger, terms: TermStore, *, rng: random.Random, now: int,
                 faithful: bool = False) -> None:  # fmt: skip
        self.config = config
        self.ledger = ledger
        self.rng = rng
        self.now = now
        self.member = MemberState(config.group, config.self_id, config.peer_map, terms)
        #: DLedger 0.3.1.2's behaviour where this core departs from it (tests show what each departure prevents).
        self.faithful = faithful
        self.quorum = Quorum(self)
        self.elector = Elector(self)
        self.handler = EntryHandler(self)
        self.dispatchers = {peer: Dispatcher(self, peer) for peer in self.member.others()}
        self._outbox: list[Effect] = []
        #: index -> entry appended as leader in this term (see :meth:`entry`)
        self._recent: dict[int, Entry] = {}
        self._calls: dict[int, tuple[int, _Callback]] = {}
        self._tokens = itertools.count(1)
        self._tickets = itertools.count(1)
        self._client_appends: dict[int, object] = {}
        self._take_waits: list[tuple[LeadershipTransferRequest, object, int]] = []
        self._woken = False
        self._working = False
        self.flush_wanted = False
        self.last_preferred_check = now
        #: ``config.preferred_leaders``, split once (the work loop asks on every pass)
        self._preferred = config.preferred_leaders
        #: Set by a shell that coalesces pushes: :meth:`append` then leaves the push (and the ack check) to the next
        #: :meth:`tick`, asked for by ``push_wanted``, so appends made meanwhile travel in one batch push.
        #: ``push_wanted`` also asks for the tick that applies requests taken with ``handle_request(defer=True)``.
        self.defer_push = False
        self.push_wanted = False

    # ---- inputs ------------------------------------------------------------------------------------------------

    def _advance(self, now: int) -> None:
        if now > self.now:
            self.now = now

    def tick(self, now: int) -> None:
        self._advance(now)
        self.push_wanted = False
        calls = self._calls
        while calls:  # registered in deadline order (one timeout per node, time never goes back)
            token = next(iter(calls))
            deadline, callback = calls[token]
            if deadline > self.now:
                break
            del calls[token]
            callback(None)
        self._work()

    def handle_response(self, now: int, token: int, response: Response | None) -> None:
        self._advance(now)
        call = self._calls.pop(token, None)
        if call is not None:
            call[1](response)
        self._work()

    def handle_responses(self, now: int, responses: Sequence[tuple[int, Response | None]]) -> None:
        """:meth:`handle_response` for each ``(token, response)`` in order, with one work loop after the last (a
        shell that collects the answers of a scheduler pass); the loop also makes the pushes that deferred appends
        asked for (``push_wanted``), as :meth:`tick` would."""
        self._advance(now)
        calls = self._calls
        for token, response in responses:
            call = calls.pop(token, None)
            if call is not None:
                call[1](response)
        self.push_wanted = False
        self._work()

    def handle_request(self, now: int, request: Request, handle: object, *, defer: bool = False) -> None:
        """A request from a peer or a DLedger client. With ``defer`` a push is only queued (its checks and answer
        come with the next :meth:`tick`, which ``push_wanted`` asks for), so a shell can apply a pass's pushes in
        one work loop; the leader sees that as a slower network."""
        self._advance(now)
        member = self.member
        if request.remote_id != member.self_id:
            self.reply(handle, self._refusal(request, ResponseCode.UNKNOWN_MEMBER))
        elif request.group != member.group:
            self.reply(handle, self._refusal(request, ResponseCode.UNKNOWN_GROUP))
        elif isinstance(request, VoteRequest):
            self.elector.heard_from(request.local_id)
            self.reply(handle, self.elector.handle_vote(request))
        elif isinstance(request, HeartBeatRequest):
            self.elector.heard_from(request.local_id)
            self.reply(handle, self.elector.handle_heartbeat(request))
        elif isinstance(request, PushEntryRequest):
            self.handler.handle_push(request, handle)
        elif isinstance(request, LeadershipTransferRequest):
            self._leadership_transfer(request, handle)
        elif isinstance(request, AppendEntryRequest):
            self._client_append(request, handle)
        elif isinstance(request, MetadataRequest):
            self.reply(handle, MetadataResponse(group=member.group, peers=dict(member.peers),
                                                leader_id=member.leader_id))  # fmt: skip
        elif isinstance(request, GetEntriesRequest):
            self.reply(handle, self._get_entry(request))
        if defer:
            self.push_wanted = True
        else:
            self._work()

    def append(self, now: int, bodies: Bodies, reply_to: object = None) -> tuple[int, int, list[Entry]]:
        """A local write of one entry per ``(body size, fill)``, or of what a :data:`~dledger.ledger.LeaderWrite`
        appends: ``(code, ticket, entries)``. Code 200 means
        appended and waiting for the quorum (an :class:`~dledger.effects.AppendDone` with ``ticket`` follows, or,
        with ``reply_to``, an APPEND answer to that request handle);
        anything else (404 NOT_LEADER, 506 LEADER_TRANSFERRING, 503 LEADER_PENDING_FULL, 414/415) means nothing
        was written."""
        self._advance(now)
        member = self.member
        if not member.is_leader:
            return ResponseCode.NOT_LEADER, -1, []
        if member.transferee is not None:
            return ResponseCode.LEADER_TRANSFERRING, -1, []
        if self.quorum.pending_full(member.curr_term):
            return ResponseCode.LEADER_PENDING_FULL, -1, []
        if not bodies:
            return ResponseCode.REQUEST_WITH_EMPTY_BODYS, -1, []
        ticket = next(self._tickets)
        try:
            entries = self._append_entries(bodies, ticket)
        except LedgerError as exc:
            return exc.code, -1, []
        if reply_to is not None:  # before the work loop: a group of one commits at once
            self._client_appends[ticket] = reply_to
        if self.defer_push:
            self.push_wanted = True
        else:
            self._work()
        return ResponseCode.SUCCESS, ticket, entries

    def entry(self, index: int) -> Entry | None:
        """The entry at ``index``: from the entries this leader appended lately (the pushes read them right after
        the append, once per follower), else from the ledger."""
        found = self._recent.get(index)
        return found if found is not None else self.ledger.get(index)

    def _append_entries(self, bodies: Bodies, ticket: int) -> list[Entry]:
        term = self.member.curr_term
        entries = bodies(term) if callable(bodies) else self.ledger.append_as_leader(term, bodies)
        recent = self._recent
        for e in entries:
            if len(e.body) <= RECENT_BODY_MAX:
                recent[e.index] = e
        if len(recent) > RECENT_ENTRIES:
            for index in list(itertools.islice(recent, len(recent) - RECENT_ENTRIES // 2)):
                del recent[index]
        self.quorum.wait_ack(term, entries[-1].index, ticket, tuple(e.pos for e in entries))
        if self.config.sync_before_ack:
            self.request_flush()
        if not self.defer_push:
            for dispatcher in self.dispatchers.values():
                dispatcher.work()
        return entries

    def leader_unreachable(self, now: int, leader_id: str) -> None:
        """The shell found ``leader_id`` gone (its connection closed, a new one refused): a follower of it campaigns
        at once rather than after the heartbeat leak (ours; DLedger waits for the leak)."""
        self._advance(now)
        self.elector.leader_unreachable(leader_id)
        self._work()

    def on_flushed(self, now: int) -> bool:
        """The ledger's ``flushed_index`` moved: release the answers and the leader's count waiting for it; whether
        it ran the work loop. Without ``sync_before_ack`` nothing waits for a flush (no answer is held, the leader
        counts itself once written), so the pass after each flush (every ``flushFileInterval``) is skipped."""
        self.flush_wanted = False
        if not self.config.sync_before_ack:
            return False
        self._advance(now)
        self.handler.on_flushed()
        self.quorum.on_flushed()
        self._work()
        return True

    # ---- outputs -----------------------------------------------------------------------------------------------

    @property
    def has_effects(self) -> bool:
        """Whether :meth:`drain` would return anything."""
        return bool(self._outbox)

    def drain(self) -> list[Effect]:
        out, self._outbox = self._outbox, []
        return out

    def next_deadline(self) -> int:
        deadlines = [self.elector.next_deadline(), self.quorum.next_deadline(), self.handler.next_deadline()]
        deadlines.extend(d.next_deadline() for d in self.dispatchers.values())
        if self._calls:
            deadlines.append(self.calls_deadline())
        if self._take_waits:
            deadlines.append(self.now + 10)
        if self.push_wanted:
            deadlines.append(self.now)
        if self.member.is_leader and self._preferred:
            deadlines.append(self.last_preferred_check + 1000)
        return max(self.now, min(deadlines))

    def calls_deadline(self) -> int:
        """When the oldest outstanding call times out (calls are kept in the order of their deadlines)."""
        calls = self._calls
        return calls[next(iter(calls))][0] if calls else NEVER

    # ---- services for the components -----------------------------------------------------------------------------

    def call(self, peer: str, request: Request, callback: _Callback) -> None:
        token = next(self._tokens)
        self._calls[token] = (self.now + self.config.rpc_timeout_ms, callback)
        self._outbox.append(Send(peer, token, request))

    def reply(self, handle: object, response: Response) -> None:
        """Answer the request that came with ``handle`` (``None``: a request the node made itself; dropped)."""
        if handle is not None:
            self._outbox.append(Reply(handle, response))

    def wake(self) -> None:
        self._woken = True

    def request_flush(self) -> None:
        self.flush_wanted = True

    def append_done(self, ticket: int, code: int, index: int, positions: tuple[int, ...]) -> None:
        if ticket == NOOP_TICKET:
            return
        handle = self._client_appends.pop(ticket, None)
        if handle is not None:
            pos = positions[-1] if positions and code == ResponseCode.SUCCESS else -1
            self.reply(
                handle,
                AppendEntryResponse(
                    group=self.member.group,
                    code=code,
                    index=index,
                    pos=pos,
                    term=self.member.curr_term,
                    leader_id=self.member.leader_id,
                ),
            )
            return
        self._outbox.append(AppendDone(ticket, code, index, positions))

    def role_changed(self, term: int, role: Role) -> None:
        self._recent.clear()  # a leader's entries stay as written while it leads; after that the log may change
        if role is not Role.LEADER:
            self.quorum.fail_all(ResponseCode.TERM_CHANGED)
        self._outbox.append(RoleChanged(term, role, self.member.leader_id))
        if role is Role.LEADER and not self.faithful:
            try:
                self._append_entries([(0, lambda _pos: b"")], NOOP_TICKET)
            except (LedgerError, OSError) as exc:
                log.error("dledger %s: leader of term %d cannot append its first entry, a candidate again: %s",
                          self.member.self_id, term, exc)  # fmt: skip
                self.elector.give_up_leading(term)

    def update_committed_index(self, term: int, index: int) -> None:
        """DLedger's ``updateCommittedIndex``: ignores -1, an empty ledger, an old term or no change; never goes
        back or below the first index; clamps to the last one."""
        ledger = self.ledger
        if index == -1 or ledger.end_index == -1 or term < self.member.curr_term:
            return
        if index <= ledger.committed_index or index < ledger.begin_index:
            return
        index = min(index, ledger.end_index)
        if index <= ledger.committed_index:
            return
        ledger.set_committed(index)
        self._outbox.append(Committed(index))

    def truncate(self, entry: Entry) -> None:
        """A follower's TRUNCATE. DLedger leaves the committed index alone even when the cut goes below it (a race
        of a late APPEND with a COMPARE can cut a committed entry the leader then pushes again); here it is clamped
        to the new end, so a member never claims a committed entry it does not hold."""
        ledger = self.ledger
        try:
            ledger.truncate(entry)
        finally:  # also after a truncation that failed midway: the log may end before the cut
            if ledger.committed_index > ledger.end_index and not self.faithful:
                ledger.set_committed(ledger.end_index)

    # ---- the work loop -------------------------------------------------------------------------------------------

    def _work(self) -> None:
        if self._working:
            self._woken = True
            return
        self._working = True
        try:
            for _ in range(100):
                self._woken = False
                self.elector.maintain()
                for dispatcher in self.dispatchers.values():
                    dispatcher.work()
                self.handler.work()
                self.quorum.check()
                self._check_preferred_leader()
                self._check_take_waits()
                if not self._woken:
                    break
        finally:
            self._working = False

    # ---- requests beyond the elector and the handler -------------------------------------------------------------

    def _refusal(self, request: Request, code: ResponseCode) -> Response:
        """DLedgerServer's answer to a request that failed a precondition (another member's, 401, or group's, 400, a
        refused leadership transfer): the request's base info copied, the code and the member's leader id."""
        kind = _RESPONSE_OF[type(request)]
        return kind(group=request.group, remote_id=request.remote_id, local_id=request.local_id, term=request.term,
                    code=code, leader_id=self.member.leader_id)  # fmt: skip

    def _client_append(self, request: AppendEntryRequest, handle: object) -> None:
        body = request.body or b""
        code, _, _ = self.append(self.now, [(len(body), lambda _pos: body)], reply_to=handle)
        if code != ResponseCode.SUCCESS:
            self.reply(
                handle,
                AppendEntryResponse(
                    group=self.member.group, code=code, leader_id=self.member.leader_id, term=self.member.curr_term
                ),
            )

    def _get_entry(self, request: GetEntriesRequest) -> Response:
        """DLedgerServer.handleGet: the leader's entry at ``beginIndex``, committed or not; else 404 NOT_LEADER, or
        the store's ``indexCheck`` refusal: 410 INDEX_OUT_OF_RANGE below 0 or past the end, 419
        INDEX_LESS_THAN_LOCAL_BEGIN below the first entry. An entry the files cannot read is 414 DISK_ERROR, a
        missing ``beginIndex`` 411 UNEXPECTED_ARGUMENT (ours: Java's unboxing throws and the remoting layer answers
        SYSTEM_ERROR)."""
        index, ledger = request.begin_index, self.ledger
        if not self.member.is_leader:
            code = ResponseCode.NOT_LEADER
        elif index is None:
            code = ResponseCode.UNEXPECTED_ARGUMENT
        elif index < 0:
            code = ResponseCode.INDEX_OUT_OF_RANGE
        elif index < ledger.begin_index:
            code = ResponseCode.INDEX_LESS_THAN_LOCAL_BEGIN
        elif index > ledger.end_index:
            code = ResponseCode.INDEX_OUT_OF_RANGE
        else:
            entry = self.entry(index)
            if entry is not None:
                return GetEntriesResponse(group=self.member.group, entries=(entry,))
            code = ResponseCode.DISK_ERROR
        return self._refusal(request, code)

    def _leadership_transfer(self, request: LeadershipTransferRequest, handle: object) -> None:
        member = self.member

        def refuse(code: ResponseCode) -> None:  # DLedgerServer's failed PreConditions: the request's base info
            self.reply(handle, self._refusal(request, code))

        if request.transfer_id == member.self_id:
            transferee = request.transferee_id
            if not member.is_peer(transferee):
                refuse(ResponseCode.UNKNOWN_MEMBER)
            elif member.curr_term != request.term:
                refuse(ResponseCode.INCONSISTENT_TERM)
            elif not member.is_leader:
                refuse(ResponseCode.NOT_LEADER)
            elif not self._may_take_over(request.term, transferee or ""):
                refuse(ResponseCode.FALL_BEHIND_TOO_MUCH)
            else:
                self.elector.transfer(request, handle)
        elif request.transferee_id == member.self_id:
            if request.transfer_id != member.leader_id:
                refuse(ResponseCode.INCONSISTENT_LEADER)
            else:
                self._take_waits.append((request, handle, self.now))
        else:
            self.reply(handle, LeadershipTransferResponse(term=member.curr_term, code=ResponseCode.UNEXPECTED_ARGUMENT))

    def _may_take_over(self, term: int, peer: str) -> bool:
        """Whether the leader may hand its leadership to ``peer``: its log is known to match the leader's in this
        term (a watermark) and is less than ``maxLeadershipTransferWaitIndex`` behind. DLedger takes a peer without a
        watermark (-1) as ``end + 1`` behind, so a member whose longer log of an older term the dispatcher has not
        compared yet was asked to take over, could not win (its last term is older) and moved the group to a new term
        every time; the compare, restarting in each term, might never reach the divergence."""
        mark = self.quorum.watermark(term, peer)
        if mark < 0 and not self.faithful:
            return False
        return self.ledger.end_index - mark < self.config.max_leadership_transfer_wait_index

    def _holds_take_index(self, request: LeadershipTransferRequest) -> bool:
        """Whether this transferee holds the leader's entry at the take index: the entry there is of the leader's
        term (the leader's last entry is, from the empty entry it appends when elected), so its log up to there is the
        leader's and its vote can pass. DLedger checks only that its log reaches that index, which a longer log of
        an older term does too."""
        index = request.take_leadership_ledger_index
        if self.faithful:
            return self.ledger.end_index >= index
        entry = self.ledger.get(index)
        return entry is not None and entry.term == request.term

    def _check_take_waits(self) -> None:
        waits, self._take_waits = self._take_waits, []
        for request, handle, since in waits:
            if self._holds_take_index(request):
                self.elector.take_leadership(request, handle)
            elif self.now - since > self.config.leadership_transfer_wait_timeout:
                self.reply(handle, self._refusal(request, ResponseCode.TAKE_LEADERSHIP_FAILED))
            else:
                self._take_waits.append((request, handle, since))

    def _check_preferred_leader(self) -> None:
        member, config = self.member, self.config
        if not member.is_leader or not self._preferred or self.now - self.last_preferred_check < 1000:
            return
        self.last_preferred_check = self.now
        if member.transferee is not None or member.self_id in config.preferred_leaders:
            return
        term = member.curr_term
        candidates = [p for p in config.preferred_leaders if member.is_peer(p) and member.peers_live.get(p)]
        candidates = [p for p in candidates if self._may_take_over(term, p)]
        if not candidates:
            return
        best = max(candidates, key=lambda p: self.quorum.watermark(term, p))
        request = LeadershipTransferRequest(term=term, transferee_id=best)
        self.elector.transfer(request, None)

    # ---- views ---------------------------------------------------------------------------------------------------

    def status(self) -> dict[str, object]:
        """Term, role, leader, the ledger's indexes and, on a leader, each peer's watermark (match index)."""
        member, ledger = self.member, self.ledger
        marks = dict(self.quorum.watermarks.get(member.curr_term, {})) if member.is_leader else {}
        return {
            "selfId": member.self_id,
            "group": member.group,
            "role": member.role.name,
            "term": member.curr_term,
            "leaderId": member.leader_id,
            "ledgerBeginIndex": ledger.begin_index,
            "ledgerEndIndex": ledger.end_index,
            "ledgerEndTerm": ledger.end_term,
            "committedIndex": ledger.committed_index,
            "peerWatermarks": marks,
        }
