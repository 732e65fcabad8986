"""Replication by the Raft core, as DLedger's AppendAndPushTest and BatchPushTest exercise it, plus the cases where
this core departs from DLedger 0.3.1.2 (each compared with ``faithful=True``)."""

from __future__ import annotations

import itertools

import pytest

from dledger.codes import PushType, ResponseCode, Role
from dledger.effects import AppendDone, Committed, Reply
from dledger.entry import Entry
from dledger.invariants import Checker, InvariantViolation, MemberView
from dledger.messages import PushEntryRequest, PushEntryResponse
from tests.dledger.cluster import MemCluster


def check(cluster: MemCluster, checker: Checker | None = None) -> Checker:
    checker = checker or Checker(cluster.ids)
    views = []
    for i in cluster.ids:
        node, ledger = cluster.nodes[i], cluster.ledgers[i]
        role = None if node is None else node.member.role
        term = cluster.terms[i].term if node is None else node.member.curr_term
        log = None if node is None else ledger.entries
        views.append(MemberView(i, log, ledger.committed_index, role, term, ledger.entries, ledger.durable))
    checker.check(views)
    return checker


@pytest.mark.parametrize("batch", [False, True])
def test_appends_commit_on_every_member_with_dledger_positions(batch: bool) -> None:
    cluster = MemCluster(3, enable_batch_push=batch, max_batch_push_size=64)
    leader = cluster.leader()
    bodies = [bytes([65 + i]) * (10 + i) for i in range(20)]
    done = cluster.append_and_wait(leader, *bodies)
    assert done.code == ResponseCode.SUCCESS
    cluster.run_until(cluster.settled)
    for i in cluster.ids:
        assert cluster.bodies(i) == bodies
    entries = cluster.ledgers[leader].entries
    # Positions: each entry starts where the previous one ended (48-byte header + body), as BatchPushTest checks.
    assert all(b.pos == a.pos + 48 + len(a.body) for a, b in itertools.pairwise(entries))
    assert done.positions == tuple(e.pos for e in entries[-20:])
    check(cluster)


def test_a_follower_learns_the_committed_index_from_the_next_push() -> None:
    cluster = MemCluster(3)
    leader = cluster.leader()
    cluster.append_and_wait(leader, b"one")
    cluster.run(1500)  # a bare COMMIT push goes out once a second when nothing else does
    assert {cluster.ledgers[i].committed_index for i in cluster.ids} == {cluster.ledgers[leader].end_index}


def test_without_a_quorum_appends_time_out_with_502_then_the_pending_limit_answers_503() -> None:
    cluster = MemCluster(3, max_pending_requests_num=3)
    leader = cluster.leader()
    for i in cluster.ids:
        if i != leader:
            cluster.crash(i)
    done = cluster.append_and_wait(leader, b"lost")
    assert done.code == ResponseCode.WAIT_QUORUM_ACK_TIMEOUT
    codes = [cluster.append(leader, b"x")[0] for _ in range(6)]
    assert codes[-1] == ResponseCode.LEADER_PENDING_FULL and ResponseCode.SUCCESS in codes


def test_appends_on_a_follower_or_a_transferring_leader_are_refused() -> None:
    cluster = MemCluster(3)
    leader = cluster.leader()
    follower = next(i for i in cluster.ids if i != leader)
    assert cluster.append(follower, b"x")[0] == ResponseCode.NOT_LEADER
    cluster.node(leader).member.transferee = follower
    assert cluster.append(leader, b"x")[0] == ResponseCode.LEADER_TRANSFERRING


def test_a_new_leader_truncates_the_uncommitted_suffix_of_the_old_one() -> None:
    """testPushTruncate: the old leader's entries nobody else has are cut when it rejoins as a follower."""
    cluster = MemCluster(3)
    old = cluster.leader()
    cluster.append_and_wait(old, *[b"c%d" % i for i in range(5)])
    cluster.isolate(old)
    tickets = [cluster.append(old, b"lost%d" % i)[1] for i in range(5)]
    cluster.run_until(lambda: any(i != old for i in cluster.leaders()))
    new = next(i for i in cluster.leaders() if i != old)
    cluster.append_and_wait(new, b"after")
    cluster.heal()
    cluster.run_until(cluster.settled)
    assert cluster.bodies(old) == cluster.bodies(new) == [b"c%d" % i for i in range(5)] + [b"after"]
    # Its waiting appends failed (after 2.5 s, or when it stopped leading) rather than stay unanswered.
    failed = (ResponseCode.WAIT_QUORUM_ACK_TIMEOUT, ResponseCode.TERM_CHANGED)
    assert all(cluster.done[(old, t)].code in failed for t in tickets)
    check(cluster)


def test_a_follower_whose_acks_were_lost_catches_up_without_waiting_a_second_per_entry() -> None:
    cluster = MemCluster(3)
    leader = cluster.leader()
    follower = next(i for i in cluster.ids if i != leader)
    other = next(i for i in cluster.ids if i not in (leader, follower))
    cluster.crash(other)
    # The follower stores 50 entries but every answer it sends is lost.
    cluster.filter = lambda src, dst, msg: not (src == follower and getattr(msg, "index", None) is not None)
    cluster.append(leader, *[b"e%d" % i for i in range(50)])
    cluster.run(500)
    assert cluster.ledgers[follower].end_index == cluster.ledgers[leader].end_index
    cluster.filter = lambda *_: True
    took = cluster.run_until(lambda: cluster.ledgers[leader].committed_index == cluster.ledgers[leader].end_index)
    assert took < 3000  # re-pushes are answered at once; DLedger's follower answers one a second


def _late_truncate(faithful: bool) -> Checker:
    """A TRUNCATE the follower already applied arrives again after it appended (and the leader committed) more:
    DLedger cuts the committed entries again; this core keeps what the same leader wrote since."""
    cluster = MemCluster(3, seed=3)
    leader = cluster.leader()
    for i in cluster.ids:
        cluster.node(i).faithful = faithful
    follower = next(i for i in cluster.ids if i != leader)
    other = next(i for i in cluster.ids if i not in (leader, follower))
    cluster.append_and_wait(leader, b"a")
    entry = cluster.ledgers[leader].entries[-1]
    node = cluster.node(leader)
    stale = PushEntryRequest(group="g", remote_id=follower, local_id=leader, leader_id=leader,
                             term=node.member.curr_term, type=PushType.TRUNCATE, entry=entry,
                             commit_index=node.ledger.committed_index)  # fmt: skip
    cluster.crash(other)
    cluster.append_and_wait(leader, b"b", b"c")
    cluster.node(follower).handle_request(cluster.now, stale, (leader, 10**9))
    checker = check(cluster)
    cluster.crash(leader)
    cluster.start(other)
    cluster.run_until(lambda: bool(cluster.leaders()))
    cluster.append_and_wait(cluster.leaders()[0], b"d")
    return check(cluster, checker)


def test_a_late_truncate_does_not_cut_what_the_leader_committed_since() -> None:
    _late_truncate(faithful=False)
    with pytest.raises(InvariantViolation, match="at committed index"):
        _late_truncate(faithful=True)


def test_a_deposed_leaders_waiting_appends_fail_at_once() -> None:
    cluster = MemCluster(3)
    leader = cluster.leader()
    cluster.isolate(leader)
    _, ticket = cluster.append(leader, b"pending")
    took = cluster.run_until(lambda: (leader, ticket) in cluster.done)
    assert cluster.done[(leader, ticket)].code in (ResponseCode.WAIT_QUORUM_ACK_TIMEOUT, ResponseCode.TERM_CHANGED)
    assert took <= 2600
    cluster.run_until(lambda: cluster.node(leader).member.role is not Role.LEADER)


def _appends_pushed_to(cluster: MemCluster, follower: str) -> list[int]:
    """The number of entries in each APPEND push the follower received, in order."""
    return [
        message.count
        for _src, dst, message in cluster.delivered
        if dst == follower and isinstance(message, PushEntryRequest) and message.type is PushType.APPEND
    ]


@pytest.mark.parametrize("limit", [4096, 60])
def test_a_batch_push_waits_for_the_unanswered_one_unless_a_full_batch_is_ready(limit: int) -> None:
    """Paced batch pushes: while a push is unanswered the entries appended meanwhile wait for its answer and leave
    together, unless they make a full ``maxBatchPushSize`` batch (60 bytes: one 13-byte entry, 61 bytes with its
    header, fills one), which leaves at once."""
    cluster = MemCluster(3, delay=5, enable_batch_push=True, max_batch_push_size=limit)
    leader = cluster.leader()
    follower = next(i for i in cluster.ids if i != leader)
    before = len(_appends_pushed_to(cluster, follower))
    cluster.append(leader, b"first-entry-1")
    cluster.run(1)  # the first push is on its way (5 ms each way)
    for i in range(2, 6):
        cluster.append(leader, f"next-entry-{i}".encode())
        cluster.run(1)
    cluster.run_until(cluster.settled)
    pushed = _appends_pushed_to(cluster, follower)[before:]
    assert pushed == ([1, 4] if limit == 4096 else [1, 1, 1, 1, 1])
    assert cluster.bodies(follower)[-5:] == [b"first-entry-1"] + [f"next-entry-{i}".encode() for i in range(2, 6)]
    check(cluster)


def test_answers_handed_over_together_commit_in_one_step_and_never_before_a_majority() -> None:
    """The shell's push task hands the leader a scheduler pass's answers at once (RaftNode.handle_responses): one
    commit step and one round of effects for all of them; an entry no follower has answered for stays unacknowledged."""
    cluster = MemCluster(3)
    leader = cluster.leader()
    node = cluster.node(leader)
    node.defer_push = True
    cluster.holding.add(leader)
    tickets = [cluster.append(leader, b"e%d" % i)[1] for i in range(8)]
    cluster.run(50)
    assert not any((leader, t) in cluster.done for t in tickets)  # pushed and answered, nothing handed over yet
    answers = [(token, r) for token, r in cluster.held if isinstance(r, PushEntryResponse) and r.index is not None]
    assert len(answers) == 16  # one APPEND per entry and follower (and the bare COMMIT pushes)
    first_four = sorted(answers, key=lambda a: a[1].index)[:8]  # both followers' answers for the first four entries
    node.handle_responses(cluster.now, first_four)
    effects = node.drain()
    assert [e.index for e in effects if isinstance(e, Committed)] == [node.ledger.end_index - 4]
    done = sorted(e.ticket for e in effects if isinstance(e, AppendDone))
    assert done == tickets[:4] and all(e.code == ResponseCode.SUCCESS for e in effects if isinstance(e, AppendDone))
    node.handle_responses(cluster.now, [a for a in answers if a not in first_four])
    effects = node.drain()
    assert [e.index for e in effects if isinstance(e, Committed)] == [node.ledger.end_index]
    assert sorted(e.ticket for e in effects if isinstance(e, AppendDone)) == tickets[4:]


def test_answers_held_for_a_flush_are_dropped_when_a_truncation_cuts_their_entries() -> None:
    """Under sync_before_ack a follower holds each 200 until its entries are on disk. A TRUNCATE that replaces
    those entries drops the held answers: sent after the flush of what replaced them, they would vouch for entries
    this member no longer holds."""
    cluster = MemCluster(3, sync_before_ack=True)
    leader = cluster.leader()
    cluster.append_and_wait(leader, b"a")
    follower = next(i for i in cluster.ids if i != leader)
    node, ledger = cluster.node(follower), cluster.ledgers[follower]
    base = ledger.entries[-1]
    term = node.member.curr_term

    def push(kind: PushType, body: bytes) -> PushEntryRequest:
        entry = Entry(base.index + 1, term, base.end_pos, body)
        return PushEntryRequest(group="g", remote_id=follower, local_id=leader, leader_id=leader, term=term,
                                type=kind, entry=entry, commit_index=ledger.committed_index)  # fmt: skip

    node.handle_request(cluster.now, push(PushType.APPEND, b"old"), ("held", 1))
    assert not [e for e in node.drain() if isinstance(e, Reply)]  # held until flushed
    node.handle_request(cluster.now, push(PushType.TRUNCATE, b"new"), ("truncate", 2))
    ledger.flush()
    node.on_flushed(cluster.now)
    answered = [e.handle for e in node.drain() if isinstance(e, Reply)]
    assert ("truncate", 2) in answered and ("held", 1) not in answered
    assert ledger.entries[-1].body == b"new"


def test_a_truncation_that_keeps_the_entry_keeps_the_answer_held_for_it() -> None:
    cluster = MemCluster(3, sync_before_ack=True)
    leader = cluster.leader()
    cluster.append_and_wait(leader, b"a")
    follower = next(i for i in cluster.ids if i != leader)
    node, ledger = cluster.node(follower), cluster.ledgers[follower]
    base, term = ledger.entries[-1], node.member.curr_term
    entry = Entry(base.index + 1, term, base.end_pos, b"b")

    def push(kind: PushType) -> PushEntryRequest:
        return PushEntryRequest(group="g", remote_id=follower, local_id=leader, leader_id=leader, term=term,
                                type=kind, entry=entry, commit_index=ledger.committed_index)  # fmt: skip

    node.handle_request(cluster.now, push(PushType.APPEND), ("held", 1))
    node.handle_request(cluster.now, push(PushType.TRUNCATE), ("truncate", 2))  # a duplicate: the entry stays
    ledger.flush()
    node.on_flushed(cluster.now)
    answered = [e.handle for e in node.drain() if isinstance(e, Reply)]
    assert ("held", 1) in answered and ("truncate", 2) in answered
