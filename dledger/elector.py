"""Elections and heartbeats, as DLedger's ``DLedgerLeaderElector.java`` (0.3.1.2) runs them, without threads.

DLedger's state maintainer is one thread that, every 10 ms, maintains the member in its role; while it waits for a
vote round (up to 2 s + a random part of ``maxVoteIntervalMs``) or a heartbeat round (up to
``heartBeatTimeIntervalMs``) it does nothing else. Here a round is an object the core finishes when its latch would
open (every answer in, a quorum, or a known leader) or its deadline passes; until then :meth:`Elector.maintain`
returns at once, as the blocked thread would.

- Follower: becomes candidate when no heartbeat came for ``maxHeartBeatLeak`` x interval (6 s), or at once when
  the shell finds the leader's process gone (:meth:`Elector.leader_unreachable`; ours). Ours too: a heartbeat
  overdue by a quarter interval (2.5 s without one) makes it ask the leader whether it is alive (METADATA, as any
  DLedger member answers it); no answer within half an interval, a failed connection or an answer naming no leader
  makes it give up as well (:class:`~dledger.leader_probe.LeaderProbe`, which owns that call). DLedger's candidate
  then votes in the same term first; ours, as Raft's, in the next (:meth:`Elector._leader_lost`).
- Candidate: votes at ``nextTimeToRequestVote`` (randomised 300-1000 ms, 30-100 ms while taking leadership: a
  preferred leader's in DLedger, any transferee's here); the table of outcomes is ``_conclude``. Ours: a round also
  ends once only silent peers are left to answer (:attr:`Elector.silent`), and a leader stepping down on a higher term
  votes in that term next (after a vote interval while it hands leadership over). There is no pre-vote: a higher term
  in a vote or heartbeat makes the receiver a candidate that bumps its term at once and answers TERM_NOT_READY
  (ours: ending its own vote or heartbeat round of a lower term first, :meth:`Elector._higher_term`; DLedger's
  maintainer waits for it).
- Leader: heartbeats every interval, the first at once on election, before its first push (ours); a round
  without a quorum of answers for 6 s since the last good one (the leader's lease), a higher term or a second leader
  in the same term makes it a candidate. Ours, as Raft: any heartbeat answer showing a higher term makes it step down
  when it comes, also after its round closed on a quorum of others (:meth:`Elector._beat_answer`); DLedger reads a
  round only when it closes and keeps leading.

Answers: :meth:`Elector.handle_vote` and :meth:`Elector.handle_heartbeat` answer at once.

A ``currterm`` file that cannot be written (OSError from the term store) changes nothing (ours; DLedger logs it and
goes on unsaved): a vote that cannot be recorded is not granted (answered UNKNOWN, which counts as no answer), and a
candidate that cannot save its next term stays in its own and tries again after a vote interval.
"""

from __future__ import annotations

import functools
import logging
from typing import TYPE_CHECKING

import attrs

from dledger.codes import ParseResult, ResponseCode, Role, VoteResult
from dledger.leader_probe import LeaderProbe, Probe
from dledger.messages import (
    HeartBeatRequest,
    HeartBeatResponse,
    LeadershipTransferRequest,
    LeadershipTransferResponse,
    VoteRequest,
    VoteResponse,
)

if TYPE_CHECKING:
    from dledger.node import RaftNode

log = logging.getLogger(__name__)


@attrs.define
class _VoteRound:
    term: int
    deadline: int
    all: int = 0
    valid: int = 0
    accepted: int = 0
    not_ready: int = 0
    bigger_ledger: int = 0
    already_has_leader: bool = False
    known_max_term: int = 0
    opened: bool = False
    #: the peers asked that have not answered yet
    waiting: set[str] = attrs.Factory(set)


@attrs.define
class _BeatRound:
    term: int
    deadline: int
    all: int = 1
    succ: int = 1
    not_ready: int = 0
    max_term: int = -1
    inconsistent_leader: bool = False
    opened: bool = False


class Elector:
    def __init__(self, node: RaftNode) -> None:
        self.node = node
        self.member = node.member
        self.config = node.config
        self.next_time_to_request_vote = -1
        self.need_increase_term_immediately = False
        self.last_parse_result = ParseResult.WAIT_TO_REVOTE
        if self.member.vote_for == self.member.self_id and not node.faithful:
            # It may have led this term before a restart that lost unflushed entries: leading the same term again
            # could put a second entry at an index and term (the simulator's power-loss seed 102). Raft's candidates
            # always move to a new term; DLedger votes in the stored one first.
            self.last_parse_result = ParseResult.WAIT_TO_VOTE_NEXT
            if self.member.peer_size > 1:
                # It may as well have lost that term's election (or voted for itself on rejoining) and followed
                # another leader, which still leads. DLedger's vote in the stored term then meets
                # REJECT_ALREADY_HAS_LEADER and waits a vote interval and the heartbeat leak, in which the leader's
                # heartbeat makes it a follower (maintainAsCandidate in DLedger's
                # dledger/src/main/java/io/openmessaging/storage/dledger/DLedgerLeaderElector.java); voting in the
                # next term at once made every member a candidate and deposed that leader. So it listens as long first.
                c = self.config
                self.next_time_to_request_vote = (self._next_vote_time()
                                                  + c.heart_beat_time_interval_ms * c.max_heart_beat_leak)  # fmt: skip
        self.last_leader_heartbeat_time = -1
        self.last_send_heartbeat_time = -1
        self.last_succ_heartbeat_time = -1
        #: the METADATA call to an overdue leader (ours), ticked while this member follows
        self.probe = LeaderProbe(node, self._give_up_on)
        self._vote: _VoteRound | None = None
        #: peers not heard from since they went quiet (the leader given up on, a call that got no answer); a vote
        #: round does not wait for them (ours: DLedger waits 2-3 s for every peer)
        self.silent: set[str] = set()
        self._beat: _BeatRound | None = None
        #: the pending take-leadership request (this member is the transferee) and its reply
        self._take: tuple[LeadershipTransferRequest, object] | None = None

    # ---- the state maintainer --------------------------------------------------------------------------------

    def maintain(self) -> None:
        now = self.node.now
        if self._vote is not None:
            if self._vote.opened or now >= self._vote.deadline:
                self._conclude(self._vote)
            return
        if self._beat is not None:
            if self._beat.opened or now >= self._beat.deadline:
                self._finish_beat(self._beat)
            return
        if not self.config.enable_leader_elector:
            return
        if self.member.is_leader:
            if now - self.last_send_heartbeat_time > self.config.heart_beat_time_interval_ms:
                self._send_heartbeats()
        elif self.member.is_follower:
            interval = self.config.heart_beat_time_interval_ms
            elapsed = now - self.last_leader_heartbeat_time
            if elapsed > 2 * interval and elapsed > self.config.max_heart_beat_leak * interval:
                log.info("dledger %s: no heartbeat from leader %s for %d ms, electing", self.member.self_id,
                         self.member.leader_id, elapsed)  # fmt: skip
                self._leader_lost()
            elif not self.node.faithful:
                self.probe.tick(now, self.last_leader_heartbeat_time)
        else:
            self._maintain_as_candidate()

    def next_deadline(self) -> int:
        """When :meth:`maintain` next has something to do without any input."""
        if self._vote is not None:
            return self.node.now if self._vote.opened else self._vote.deadline
        if self._beat is not None:
            return self.node.now if self._beat.opened else self._beat.deadline
        interval = self.config.heart_beat_time_interval_ms
        if self.member.is_leader:
            return self.last_send_heartbeat_time + interval + 1
        if self.member.is_follower:
            leak = self.last_leader_heartbeat_time + max(2, self.config.max_heart_beat_leak) * interval + 1
            if self.node.faithful:
                return leak
            return min(leak, self.probe.next_deadline(self.last_leader_heartbeat_time))
        if self.need_increase_term_immediately:
            return self.node.now
        return max(self.next_time_to_request_vote, self.node.now)

    # ---- asking an overdue leader (ours) -------------------------------------------------------------------------

    def _give_up_on(self, probe: Probe, why: str) -> None:
        """Campaign unless a heartbeat came since the probe left or the member follows someone else by now."""
        member = self.member
        if not (member.is_follower and member.leader_id == probe.leader and member.curr_term == probe.term):
            return
        if self.last_leader_heartbeat_time >= probe.sent:
            return
        log.info("dledger %s: leader %s of term %d %s, %d ms after its last heartbeat: electing", member.self_id,
                 probe.leader, probe.term, why, self.node.now - self.last_leader_heartbeat_time)  # fmt: skip
        self._leader_lost()

    # ---- role changes ------------------------------------------------------------------------------------------

    def leader_unreachable(self, leader_id: str) -> None:
        """The shell saw this member's leader go away for good (its connection closed and a new one was refused):
        campaign now instead of after the heartbeat leak. Ignored unless ``leader_id`` is still the leader followed."""
        member = self.member
        if member.is_follower and member.leader_id == leader_id and self.config.enable_leader_elector:
            self._leader_lost()

    def _leader_lost(self) -> None:
        """A follower gives up on its leader. DLedger first votes again in the leader's own term, a round that cannot
        pass (the leader holds a majority of that term's votes) and that waits 2-3 s for a paused leader, or a heartbeat
        leak more when a member still following it answers REJECT_ALREADY_HAS_LEADER; here, as in Raft, the member
        votes in the next term after DLedger's random vote interval (which keeps the followers from splitting it)."""
        term, leader = self.member.curr_term, self.member.leader_id
        self.change_to_candidate(term)
        if not self.node.faithful:
            # Only the leader is silent now: the group worked while this member followed, and a peer it gave up on
            # in an earlier election may have restarted since without calling on it.
            self.silent = {leader} if leader is not None else set()
            self.last_parse_result = ParseResult.WAIT_TO_VOTE_NEXT
            self.next_time_to_request_vote = self._next_vote_time()

    def change_to_leader(self, term: int) -> None:
        if self.member.curr_term != term:
            return
        self.member.change_to_leader(term)
        self.last_send_heartbeat_time = -1
        if not self.node.faithful:
            # Heartbeats before the first push: a voter that has not heard of this leader yet is still a candidate
            # and holds a push until a heartbeat makes it follow (DLedger races them).
            self._send_heartbeats()
        self._role_changed(term, Role.LEADER)

    def give_up_leading(self, term: int) -> None:
        """A new leader that cannot append its first entry (ours: :meth:`~dledger.node.RaftNode.role_changed`) is a
        candidate again, its heartbeat round dropped, and votes in the next term after a vote interval: voting again
        at once, in its term, it won again at once and failed again as fast as votes go."""
        self._beat = None
        self.change_to_candidate(term)
        self.last_parse_result = ParseResult.WAIT_TO_VOTE_NEXT
        self.next_time_to_request_vote = self._next_vote_time()

    def change_to_candidate(self, term: int) -> None:
        if term < self.member.curr_term:
            return
        self.member.change_to_candidate(term)
        self._role_changed(term, Role.CANDIDATE)

    def change_to_follower(self, term: int, leader_id: str) -> None:
        self.last_parse_result = ParseResult.WAIT_TO_REVOTE
        self.member.change_to_follower(term, leader_id)
        self.last_leader_heartbeat_time = self.node.now
        self.probe.cancel()
        self._role_changed(term, Role.FOLLOWER)

    def _role_changed(self, term: int, role: Role) -> None:
        self._check_take_leadership(term, role)
        self.node.role_changed(term, role)

    # ---- candidate ---------------------------------------------------------------------------------------------

    def _taking_leadership(self) -> bool:
        member = self.member
        return member.term_to_take_leadership == member.curr_term and member.self_id in self.config.preferred_leaders

    def _next_vote_time(self) -> int:
        """A vote interval from now; a member taking leadership (the transferee, in the term it moved to) waits the
        take-leadership interval. DLedger (``getNextTimeToRequestVote`` in
        dledger/src/main/java/io/openmessaging/storage/dledger/DLedgerLeaderElector.java) shortens it only
        for a preferred leader; here any transferee, so one an admin's LEADERSHIP_TRANSFER named campaigns before its
        old leader, which waits at least a vote interval once it learns the new term (:meth:`_step_down`)."""
        rng, c, member = self.node.rng, self.config, self.member
        taking = member.term_to_take_leadership == member.curr_term and not self.node.faithful
        if taking or self._taking_leadership():
            lo, hi = c.min_take_leadership_vote_interval_ms, c.max_take_leadership_vote_interval_ms
        else:
            lo, hi = c.min_vote_interval_ms, c.max_vote_interval_ms
        return self.node.now + lo + rng.randrange(max(1, hi - lo))

    def _maintain_as_candidate(self) -> None:
        member, node = self.member, self.node
        if node.now < self.next_time_to_request_vote and not self.need_increase_term_immediately:
            return
        if not member.is_candidate:
            return
        if self.last_parse_result is ParseResult.WAIT_TO_VOTE_NEXT or self.need_increase_term_immediately:
            try:
                term = member.next_term()
            except OSError as exc:
                self._term_not_saved(exc)
                return
            self.last_parse_result = ParseResult.WAIT_TO_REVOTE
        else:
            term = member.curr_term
        if self.need_increase_term_immediately:
            self.next_time_to_request_vote = self._next_vote_time()
            self.need_increase_term_immediately = False
            return
        ledger = node.ledger
        wait = 2000 + node.rng.randrange(max(1, self.config.max_vote_interval_ms))
        round_ = self._vote = _VoteRound(term, node.now + wait, known_max_term=term, waiting=set(member.others()))
        for peer in member.peers:
            request = VoteRequest(group=member.group, ledger_end_index=ledger.end_index,
                                  ledger_end_term=ledger.end_term, leader_id=member.self_id, term=term,
                                  remote_id=peer, local_id=member.self_id)  # fmt: skip
            if peer == member.self_id:
                self._tally(round_, peer, self.handle_vote(request, own=True))
            else:
                node.call(peer, request, functools.partial(self._tally, round_, peer))
        self._open_unless_waiting_for_speakers(round_)

    def _term_not_saved(self, exc: OSError) -> None:
        """The next term could not be saved (the ``currterm`` file cannot be written): the candidate stays in its term
        and tries again after a vote interval (DLedger's ``persistTerm`` logs it and moves to the term unsaved)."""
        log.error("dledger %s: term %d not left, the currterm file cannot be written: %s", self.member.self_id,
                  self.member.curr_term, exc)  # fmt: skip
        self.need_increase_term_immediately = False
        self.last_parse_result = ParseResult.WAIT_TO_VOTE_NEXT
        self.next_time_to_request_vote = self._next_vote_time()

    def heard_from(self, peer: str | None) -> None:
        """A request or an answer came from ``peer``: vote rounds wait for it again."""
        if self.silent and peer is not None:
            self.silent.discard(peer)

    def _open_unless_waiting_for_speakers(self, round_: _VoteRound) -> None:
        """Ours: a round whose remaining answers can only come from silent peers ends now, as DLedger's would once
        every peer answered; a silent peer's answer would come after the 2-3 s wait, if at all."""
        if not self.node.faithful and round_.waiting <= self.silent:
            round_.opened = True

    def _tally(self, round_: _VoteRound, peer: str, response: object) -> None:
        if peer != self.member.self_id and not self.node.faithful:
            if response is None:
                self.silent.add(peer)
            else:
                self.heard_from(peer)
        if round_ is not self._vote:
            return
        round_.waiting.discard(peer)
        result = response.vote_result if isinstance(response, VoteResponse) else VoteResult.UNKNOWN
        if result is not VoteResult.UNKNOWN:
            round_.valid += 1
        term = response.term if isinstance(response, VoteResponse) else -1
        if result is VoteResult.ACCEPT:
            round_.accepted += 1
        elif result is VoteResult.REJECT_ALREADY_HAS_LEADER:
            round_.already_has_leader = True
        elif result in (VoteResult.REJECT_TERM_SMALL_THAN_LEDGER, VoteResult.REJECT_EXPIRED_VOTE_TERM):
            round_.known_max_term = max(round_.known_max_term, term)
        elif result in (VoteResult.REJECT_EXPIRED_LEDGER_TERM, VoteResult.REJECT_SMALL_LEDGER_END_INDEX):
            round_.bigger_ledger += 1
        elif result is VoteResult.REJECT_TERM_NOT_READY:
            round_.not_ready += 1
        quorum = self.member.is_quorum
        if round_.already_has_leader or quorum(round_.accepted) or quorum(round_.accepted + round_.not_ready):
            round_.opened = True
        round_.all += 1
        if round_.all == self.member.peer_size:
            round_.opened = True
        self._open_unless_waiting_for_speakers(round_)

    def _conclude(self, round_: _VoteRound) -> None:
        """DLedger's reading of a vote round, first match wins."""
        self._vote = None
        quorum, term, c = self.member.is_quorum, round_.term, self.config
        if round_.known_max_term > term:
            result = ParseResult.WAIT_TO_VOTE_NEXT
            self.next_time_to_request_vote = self._next_vote_time()
            self.change_to_candidate(round_.known_max_term)
        elif round_.already_has_leader:
            result = ParseResult.WAIT_TO_REVOTE
            leak = c.heart_beat_time_interval_ms * c.max_heart_beat_leak
            self.next_time_to_request_vote = self._next_vote_time() + leak
        elif not quorum(round_.valid):
            result = ParseResult.WAIT_TO_REVOTE
            self.next_time_to_request_vote = self._next_vote_time()
        elif not quorum(round_.valid - round_.bigger_ledger):
            result = ParseResult.WAIT_TO_REVOTE
            self.next_time_to_request_vote = self._next_vote_time() + c.max_vote_interval_ms
        elif quorum(round_.accepted):
            result = ParseResult.PASSED
        elif quorum(round_.accepted + round_.not_ready):
            result = ParseResult.REVOTE_IMMEDIATELY
        else:
            result = ParseResult.WAIT_TO_VOTE_NEXT
            self.next_time_to_request_vote = self._next_vote_time()
        self.last_parse_result = result
        if result is ParseResult.PASSED:
            self.change_to_leader(term)

    # ---- vote and heartbeat requests ---------------------------------------------------------------------------

    def handle_vote(self, request: VoteRequest, own: bool = False) -> VoteResponse:
        member, ledger = self.member, self.node.ledger

        def answer(result: VoteResult, term: int | None = None) -> VoteResponse:
            return VoteResponse(group=request.group, remote_id=request.remote_id, local_id=request.local_id,
                                leader_id=request.leader_id, term=member.curr_term if term is None else term,
                                vote_result=result)  # fmt: skip

        candidate = request.leader_id
        if not member.is_peer(candidate):
            return answer(VoteResult.REJECT_UNKNOWN_LEADER)
        if not own and candidate == member.self_id:
            return answer(VoteResult.REJECT_UNEXPECTED_LEADER)
        if request.ledger_end_term < ledger.end_term:
            return answer(VoteResult.REJECT_EXPIRED_LEDGER_TERM)
        if request.ledger_end_term == ledger.end_term and request.ledger_end_index < ledger.end_index:
            return answer(VoteResult.REJECT_SMALL_LEDGER_END_INDEX)
        if request.term < member.curr_term:
            return answer(VoteResult.REJECT_EXPIRED_VOTE_TERM)
        if request.term == member.curr_term:
            if member.vote_for is not None and member.vote_for != candidate:
                if member.leader_id is not None:
                    return answer(VoteResult.REJECT_ALREADY_HAS_LEADER)
                return answer(VoteResult.REJECT_ALREADY_VOTED)
        else:
            self._higher_term(request.term)
            return answer(VoteResult.REJECT_TERM_NOT_READY)
        if request.term < ledger.end_term:
            return answer(VoteResult.REJECT_TERM_SMALL_THAN_LEDGER, ledger.end_term)
        if (not own and self._taking_leadership() and request.ledger_end_term == ledger.end_term
                and ledger.end_index >= request.ledger_end_index):  # fmt: skip
            return answer(VoteResult.REJECT_TAKING_LEADERSHIP)
        try:
            member.set_vote(candidate)
        except OSError as exc:
            # Ours: a vote granted but not recorded could be granted to another candidate after a restart (DLedger's
            # persistTerm logs the failure and the vote stands). UNKNOWN counts as no answer.
            log.error("dledger %s: no vote for %s in term %d, the currterm file cannot be written: %s",
                      member.self_id, candidate, member.curr_term, exc)  # fmt: skip
            return answer(VoteResult.UNKNOWN)
        return answer(VoteResult.ACCEPT)

    def _higher_term(self, term: int) -> None:
        """A vote or heartbeat of a higher ``term``: a candidate that moves to it with its next tick (DLedger's
        ``needIncreaseTermImmediately``). Ours: a vote or heartbeat round of a lower term still open ends here, unread,
        so the move comes at once and the member can grant the other candidate's immediate re-vote in ``term``;
        DLedger's maintainer waits for the round first (a vote round 2-3 s, a leader's heartbeat round up to an
        interval, while a peer it does not know silent says nothing) and answers every re-vote TERM_NOT_READY
        meanwhile. The round's late answers are ignored (:meth:`_tally`, :meth:`_beat_answer`)."""
        self.change_to_candidate(term)
        self.need_increase_term_immediately = True
        if self.node.faithful:
            return
        if self._vote is not None and self._vote.term < term:
            self._vote = None
        if self._beat is not None and self._beat.term < term:
            self._beat = None

    def handle_heartbeat(self, request: HeartBeatRequest) -> HeartBeatResponse:
        member = self.member
        leader = request.leader_id
        if not member.is_peer(leader):
            return HeartBeatResponse(term=member.curr_term, code=ResponseCode.UNKNOWN_MEMBER)
        if leader == member.self_id:
            return HeartBeatResponse(term=member.curr_term, code=ResponseCode.UNEXPECTED_MEMBER)
        assert leader is not None
        if request.term < member.curr_term:
            return HeartBeatResponse(term=member.curr_term, code=ResponseCode.EXPIRED_TERM)
        if request.term == member.curr_term:
            if member.leader_id is None:
                self.change_to_follower(request.term, leader)
                return HeartBeatResponse()
            if leader == member.leader_id:
                self.last_leader_heartbeat_time = self.node.now
                return HeartBeatResponse()
            return HeartBeatResponse(code=ResponseCode.INCONSISTENT_LEADER)
        self._higher_term(request.term)
        return HeartBeatResponse(code=ResponseCode.TERM_NOT_READY)

    # ---- leader ------------------------------------------------------------------------------------------------

    def _send_heartbeats(self) -> None:
        member, node = self.member, self.node
        self.last_send_heartbeat_time = node.now
        term, leader = member.curr_term, member.leader_id
        round_ = self._beat = _BeatRound(term, node.now + self.config.heart_beat_time_interval_ms)
        for peer in member.others():
            request = HeartBeatRequest(group=member.group, local_id=member.self_id, remote_id=peer, leader_id=leader,
                                       term=term)  # fmt: skip
            node.call(peer, request, functools.partial(self._beat_answer, round_, peer))
        if member.peer_size == 1:
            round_.opened = True

    def _beat_answer(self, round_: _BeatRound, peer: str, response: object) -> None:
        live = self.member.peers_live
        if not isinstance(response, HeartBeatResponse) or response.code == ResponseCode.NETWORK_ERROR:
            live[peer] = False
        else:
            code = response.code
            if code == ResponseCode.SUCCESS:
                round_.succ += 1
            elif code == ResponseCode.EXPIRED_TERM:
                round_.max_term = response.term
                if not self.node.faithful:
                    self._higher_term_seen(round_, response.term)
            elif code == ResponseCode.INCONSISTENT_LEADER:
                round_.inconsistent_leader = True
            elif code == ResponseCode.TERM_NOT_READY:
                round_.not_ready += 1
            live[peer] = True
            quorum = self.member.is_quorum
            if quorum(round_.succ) or quorum(round_.succ + round_.not_ready):
                round_.opened = True
        round_.all += 1
        if round_.all == self.member.peer_size:
            round_.opened = True

    def _higher_term_seen(self, round_: _BeatRound, term: int) -> None:
        """Raft's rule: a leader that hears of a higher term steps down at once, whether or not the round is still
        open. The member at the higher term is often one cut off past the heartbeat leak, a candidate whose log is
        too short to win: its votes name no term to the others (DLedger's handleVote checks the log first), so only
        this answer shows it, and the round has usually closed on the other followers' answers already. DLedger
        keeps leading and the member stays out of the group until the leader fails."""
        member = self.member
        if term <= member.curr_term or not member.is_leader or member.curr_term != round_.term:
            return
        if self._beat is round_:
            self._beat = None
        self._step_down(term)

    def _finish_beat(self, round_: _BeatRound) -> None:
        self._beat = None
        quorum, term = self.member.is_quorum, round_.term
        if quorum(round_.succ):
            self.last_succ_heartbeat_time = self.node.now
            return
        lease = self.config.max_heart_beat_leak * self.config.heart_beat_time_interval_ms
        if quorum(round_.succ + round_.not_ready):
            self.last_send_heartbeat_time = -1
        elif round_.max_term > term:
            self._step_down(round_.max_term)
        elif round_.inconsistent_leader or self.node.now - self.last_succ_heartbeat_time > lease:
            self.change_to_candidate(term)

    def _step_down(self, higher_term: int) -> None:
        """A heartbeat answer showed ``higher_term``. DLedger's candidate then votes in its own term first (its last
        round PASSED), where its old voters accept it again, so it leads that term again and the member at the higher
        term stays out (the simulator's seed 592 once elections got faster); here its next vote is in the higher
        term, as Raft's: at once, so a leader deposed by a healed follower cut off past the heartbeat leak (whose
        log is behind) leads again within round trips. A leader handing leadership over (``transferee`` set) votes
        in it only after a vote interval, as DLedger's second vote comes once the round in its own term found the
        higher term (sendHeartbeats and maintainAsCandidate in DLedgerLeaderElector.java): voting at once, it took
        the vote of a transferee still waiting to campaign, led again and the transfer failed (418)."""
        transferring = self.member.transferee is not None
        self.change_to_candidate(higher_term)
        if not self.node.faithful:
            self.last_parse_result = ParseResult.WAIT_TO_VOTE_NEXT
            if transferring:
                self.next_time_to_request_vote = self._next_vote_time()

    # ---- leadership transfer -------------------------------------------------------------------------------------

    def transfer(self, request: LeadershipTransferRequest, reply: object) -> None:
        """The leader's half: mark the transferee (appends now fail), ask it to take over, pass its answer on."""
        member, node = self.member, self.node
        if member.curr_term != request.term:
            node.reply(reply, LeadershipTransferResponse(term=member.curr_term, code=ResponseCode.INCONSISTENT_TERM))
            return
        if not member.is_leader:
            node.reply(reply, LeadershipTransferResponse(term=member.curr_term, code=ResponseCode.NOT_LEADER))
            return
        if member.transferee is not None:
            node.reply(reply, LeadershipTransferResponse(term=member.curr_term, code=ResponseCode.LEADER_TRANSFERRING))
            return
        transferee = request.transferee_id
        assert transferee is not None
        member.transferee = transferee
        take = LeadershipTransferRequest(group=member.group, leader_id=member.leader_id, local_id=member.self_id,
                                         remote_id=transferee, term=request.term,
                                         take_leadership_ledger_index=node.ledger.end_index,
                                         transfer_id=member.self_id, transferee_id=transferee)  # fmt: skip

        def done(response: object) -> None:
            if not isinstance(response, LeadershipTransferResponse):
                response = LeadershipTransferResponse(code=ResponseCode.NETWORK_ERROR)
            failed = response.code != ResponseCode.SUCCESS
            if (failed or (member.curr_term == request.term and member.transferee is not None)) and member.is_leader:
                member.transferee = None
            node.reply(reply, response)

        node.call(transferee, take, done)

    def take_leadership(self, request: LeadershipTransferRequest, reply: object) -> None:
        """The transferee's half, once caught up: campaign at once in the next term; answer when that settles."""
        member = self.member
        if member.curr_term != request.term:
            response = LeadershipTransferResponse(term=member.curr_term, code=ResponseCode.INCONSISTENT_TERM)
            self.node.reply(reply, response)
            return
        target = request.term + 1
        member.term_to_take_leadership = target
        self._take = (request, reply)
        self.change_to_candidate(target)
        self.need_increase_term_immediately = True

    def _check_take_leadership(self, term: int, role: Role) -> None:
        target = self.member.term_to_take_leadership
        if target == -1 or self._take is None:
            return
        if term > target:
            code = ResponseCode.EXPIRED_TERM
        elif term == target:
            if role is Role.LEADER:
                code = ResponseCode.SUCCESS
            elif role is Role.FOLLOWER:
                code = ResponseCode.TAKE_LEADERSHIP_FAILED
            else:
                return
        else:
            code = ResponseCode.TAKE_LEADERSHIP_FAILED if role is Role.FOLLOWER else ResponseCode.INTERNAL_ERROR
        _, reply = self._take
        self._take = None
        self.member.term_to_take_leadership = -1
        self.node.reply(reply, LeadershipTransferResponse(term=term, code=code))
