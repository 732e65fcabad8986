"""The Raft invariants the simulator checks after every step (:mod:`dledger.simulation`).

1. **Election safety**: at most one leader per term, ever (across crashes).
2. **Committed entries are never lost or changed**: every member's log up to its committed index equals the group's
   committed log (which only grows); and whenever entries leave a log (a truncation, or a crash that loses unsynced
   data), each committed entry is still held by a majority of members (counting what a crashed member's disk holds).
3. **Logs match up to the commit index**: part of 2, per member and per step.
4. **An acknowledged append is committed**: when a leader reports an append done (200), the group's committed log
   holds that very body at that index.

A violation raises :class:`InvariantViolation` with what was seen; the simulator adds the seed and the trace.
"""

from __future__ import annotations

from collections.abc import Iterable

import attrs

from dledger.codes import Role
from dledger.entry import Entry


class InvariantViolation(AssertionError):
    pass


@attrs.frozen(slots=True)
class MemberView:
    """What the checker reads of one member: its live log (None while crashed), committed index, role and term, and
    the log a restart would find."""

    member_id: str
    log: list[Entry] | None
    committed_index: int
    role: Role | None
    term: int
    #: the member's entries and how many of them are durable (a crashed member's disk holds that prefix)
    entries: list[Entry]
    durable: int


class Checker:
    def __init__(self, member_ids: Iterable[str]) -> None:
        self.member_ids = list(member_ids)
        self.leaders: dict[int, str] = {}
        self.committed: list[Entry] = []
        self._verified: dict[str, int] = dict.fromkeys(self.member_ids, -1)
        self.acked = 0
        self.checks = 0

    @property
    def majority(self) -> int:
        return len(self.member_ids) // 2 + 1

    def forget(self, member_id: str) -> None:
        """A member restarted or lost entries: verify its log from the start again."""
        self._verified[member_id] = -1

    def check(self, views: Iterable[MemberView]) -> None:
        for view in views:
            self.checks += 1
            if view.role is Role.LEADER:
                leader = self.leaders.setdefault(view.term, view.member_id)
                if leader != view.member_id:
                    raise InvariantViolation(f"two leaders in term {view.term}: {leader} and {view.member_id}")
            if view.log is not None:
                self._check_log(view)

    def _check_log(self, view: MemberView) -> None:
        log, upto = view.log, view.committed_index
        assert log is not None
        if upto >= len(log):
            raise InvariantViolation(f"{view.member_id} committed {upto} but its log ends at {len(log) - 1}")
        start = self._verified[view.member_id] + 1
        committed = self.committed
        for index in range(start, upto + 1):
            entry = log[index]
            if index < len(committed):
                if committed[index] != entry:
                    raise InvariantViolation(
                        f"{view.member_id} has {_show(entry)} at committed index {index}, the group committed "
                        f"{_show(committed[index])}"
                    )
            else:
                committed.append(entry)
        self._verified[view.member_id] = max(self._verified[view.member_id], upto)

    def entries_removed(self, member_id: str, from_index: int, views: Iterable[MemberView]) -> None:
        """After ``member_id`` lost entries from ``from_index`` on: every committed entry there still has a
        majority."""
        self._verified[member_id] = min(self._verified[member_id], from_index - 1)
        logs = [v.entries[: v.durable] if v.log is None else v.log for v in views]
        for index in range(max(0, from_index), len(self.committed)):
            entry = self.committed[index]
            holders = sum(1 for log in logs if index < len(log) and log[index] == entry)
            if holders < self.majority:
                raise InvariantViolation(f"committed {_show(entry)} at {index} is held by only {holders} members")

    def acknowledged(self, index: int, body: bytes) -> None:
        self.acked += 1
        if index >= len(self.committed) or self.committed[index].body != body:
            got = _show(self.committed[index]) if index < len(self.committed) else "nothing"
            raise InvariantViolation(f"append of {body!r} acknowledged at {index}, the group committed {got} there")


def _show(entry: Entry) -> str:
    return f"(index {entry.index}, term {entry.term}, pos {entry.pos}, {entry.body[:24]!r})"
