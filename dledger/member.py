"""A member's Raft state: role, term, vote, leader (DLedger's ``MemberState.java``).

``curr_term`` and ``vote_for`` are persistent: every change is saved through the :class:`TermStore` before it is
made (DLedger's ``currterm`` file; the file store writes it durably, the simulator keeps it across crashes); a save
that fails (OSError, which propagates) changes nothing, where DLedger's ``persistTerm`` logs the failure and keeps
the change.
Roles start at CANDIDATE, as DLedger's do. The rules mirror DLedger's: :meth:`MemberState.next_term` jumps to the
largest term seen in the group when that is ahead, else adds one; :meth:`MemberState.change_to_candidate` records the
term it was given as the largest known but does not adopt it (the next vote round does).

Errors: ``IllegalStateError`` (DLedger's ILLEGAL_MEMBER_STATE) for a transition called in the wrong role or term:
the core's callers check first, so it marks a bug.
"""

from __future__ import annotations

from typing import Protocol

from dledger.codes import Role


class IllegalStateError(RuntimeError):
    pass


class TermStore(Protocol):
    """Where ``currTerm`` and ``voteLeader`` live between restarts."""

    def load(self) -> tuple[int, str | None]: ...

    def save(self, term: int, vote_for: str | None) -> None: ...


class MemoryTermStore:
    """A :class:`TermStore` in memory (tests and the simulator; a simulated crash keeps it, as a synced file)."""

    def __init__(self) -> None:
        self.term = 0
        self.vote_for: str | None = None
        self.saves = 0

    def load(self) -> tuple[int, str | None]:
        return self.term, self.vote_for

    def save(self, term: int, vote_for: str | None) -> None:
        self.term, self.vote_for = term, vote_for
        self.saves += 1


class MemberState:
    def __init__(self, group: str, self_id: str, peers: dict[str, str], store: TermStore) -> None:
        if self_id not in peers:
            raise ValueError(f"self id {self_id!r} is not one of the peers {sorted(peers)}")
        self.group = group
        self.self_id = self_id
        self.peers = dict(peers)
        self.store = store
        self.role = Role.CANDIDATE
        self.leader_id: str | None = None
        self.curr_term, self.vote_for = store.load()
        self.known_max_term_in_group = -1
        self.transferee: str | None = None
        self.term_to_take_leadership = -1
        #: peer id -> whether its last heartbeat answered (DLedger's peersLiveTable; cleared on becoming leader).
        self.peers_live: dict[str, bool] = {}

    # ---- queries ---------------------------------------------------------------------------------------------

    @property
    def is_leader(self) -> bool:
        return self.role is Role.LEADER

    @property
    def is_follower(self) -> bool:
        return self.role is Role.FOLLOWER

    @property
    def is_candidate(self) -> bool:
        return self.role is Role.CANDIDATE

    @property
    def peer_size(self) -> int:
        return len(self.peers)

    def is_quorum(self, num: int) -> bool:
        return num >= self.peer_size // 2 + 1

    def is_peer(self, peer_id: str | None) -> bool:
        return peer_id is not None and peer_id in self.peers

    def others(self) -> list[str]:
        return [p for p in self.peers if p != self.self_id]

    # ---- transitions -----------------------------------------------------------------------------------------

    def set_vote(self, vote_for: str | None) -> None:
        """Record the vote, saved first (unless already recorded): OSError from the store leaves it unrecorded."""
        if vote_for != self.vote_for:
            self.store.save(self.curr_term, vote_for)
            self.vote_for = vote_for

    def next_term(self) -> int:
        """Move to the next term (the largest seen in the group when ahead), saved first: OSError from the store
        leaves the term unchanged."""
        if self.role is not Role.CANDIDATE:
            raise IllegalStateError(f"next term as {self.role.name}")
        term = max(self.known_max_term_in_group, self.curr_term + 1)
        self.store.save(term, None)
        self.curr_term, self.vote_for = term, None
        return term

    def change_to_leader(self, term: int) -> None:
        if term != self.curr_term:
            raise IllegalStateError(f"leader of term {term} in term {self.curr_term}")
        self.role = Role.LEADER
        self.leader_id = self.self_id
        self.peers_live.clear()

    def change_to_follower(self, term: int, leader_id: str) -> None:
        if term != self.curr_term:
            raise IllegalStateError(f"follower of term {term} in term {self.curr_term}")
        self.role = Role.FOLLOWER
        self.leader_id = leader_id
        self.transferee = None

    def change_to_candidate(self, term: int) -> None:
        if term < self.curr_term:
            raise IllegalStateError(f"candidate of term {term} in term {self.curr_term}")
        self.known_max_term_in_group = max(self.known_max_term_in_group, term)
        self.role = Role.CANDIDATE
        self.leader_id = None
        self.transferee = None
