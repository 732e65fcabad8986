"""``CommitWaits`` (dledger/commit_waits.py): the outcome of a DLedger append nobody waited for yet (an internal
writer's append, or a group of one that commits inside the append) is kept for the send that asks for it, but only
within the term it was appended in."""

from __future__ import annotations

from dledger.codes import ResponseCode
from dledger.commit_waits import CommitWaits
from dledger.effects import AppendDone
from store.results import PutStatus


def test_an_outcome_kept_before_a_role_change_does_not_answer_a_later_append_at_the_same_end() -> None:
    """An append that timed out waiting for the quorum (OS_PAGECACHE_BUSY) leaves its outcome behind when nobody
    waited for it; the leader then loses its role, and the new leader truncates the entry. Once this member leads
    again, a new append may end at the same CommitLog offset: its send must wait for its own entry's outcome, not be
    answered at once with the outcome of the entry that is gone (as 4.9.8's DLedgerCommitLog waits for each append's
    own future: store/src/main/java/org/apache/rocketmq/store/dledger/DLedgerCommitLog.java)."""
    waits = CommitWaits()
    waits.register(5, 1000)
    waits.done(AppendDone(ticket=1, code=ResponseCode.WAIT_QUORUM_ACK_TIMEOUT, index=5))
    waits.fail_all()  # the role change (DLedgerMessageStore._on_role)
    waits.register(7, 1000)  # a later term's append ending where the truncated one ended
    answered: list[PutStatus] = []
    assert waits.notify(1000, True, answered.append) is None
    waits.done(AppendDone(ticket=2, code=ResponseCode.SUCCESS, index=7))
    assert answered == [PutStatus.PUT_OK]
