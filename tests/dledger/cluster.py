"""A scripted in-memory DLedger group for the core's tests: the real :class:`~dledger.node.RaftNode` per member over
a FIFO network with a fixed delay, under virtual time. Faults are explicit (``isolate``, ``crash``, ``restart``);
nothing is random but the members' own timers, each seeded. ``faithful=True`` runs every member by DLedger 0.3.1.2's
rules (:class:`~dledger.node.RaftNode`'s ``faithful``)."""

from __future__ import annotations

import heapq
import itertools
import random
from collections.abc import Callable
from typing import Any

from dledger.codes import ResponseCode, Role
from dledger.config import DLedgerConfig
from dledger.effects import AppendDone, Reply, Send
from dledger.ledger import MemoryLedger
from dledger.member import MemoryTermStore
from dledger.node import RaftNode


class MemCluster:
    def __init__(self, members: int = 3, *, delay: int = 2, seed: int = 7, faithful: bool = False,
                 **settings: Any) -> None:  # fmt: skip
        self.faithful = faithful
        self.ids = [f"n{i}" for i in range(members)]
        self.peers = ";".join(f"{i}-mem:{40000 + n}" for n, i in enumerate(self.ids))
        self.settings = settings
        self.delay = delay
        self.now = 0
        self.rng = random.Random(seed)
        self.ledgers = {i: MemoryLedger() for i in self.ids}
        self.terms = {i: MemoryTermStore() for i in self.ids}
        self.nodes: dict[str, RaftNode | None] = {}
        self.cut: set[frozenset[str]] = set()
        self.done: dict[tuple[str, int], AppendDone] = {}
        self.delivered: list[tuple[str, str, object]] = []
        #: called with (src, dst, message); return False to drop it
        self.filter: Callable[[str, str, object], bool] = lambda _s, _d, _m: True
        self._events: list[tuple[int, int, str, tuple[Any, ...]]] = []
        self._seq = itertools.count()
        #: members whose answers are kept in ``held`` (``(token, response)``) instead of handed over
        self.holding: set[str] = set()
        self.held: list[tuple[int, Any]] = []
        for i in self.ids:
            self.start(i)

    def config(self, member: str) -> DLedgerConfig:
        return DLedgerConfig(group="g", self_id=member, peers=self.peers, **self.settings)

    def start(self, member: str) -> RaftNode:
        node = RaftNode(self.config(member), self.ledgers[member], self.terms[member],
                        rng=random.Random(self.rng.getrandbits(32)), now=self.now, faithful=self.faithful)  # fmt: skip
        self.nodes[member] = node
        self._flush(member)
        return node

    def node(self, member: str) -> RaftNode:
        node = self.nodes[member]
        assert node is not None
        return node

    # ---- faults -----------------------------------------------------------------------------------------------

    def crash(self, member: str, *, lose_unsynced: bool = False) -> None:
        self.nodes[member] = None
        self.ledgers[member].crash(lose_unsynced)

    def isolate(self, member: str) -> None:
        for other in self.ids:
            if other != member:
                self.cut.add(frozenset((member, other)))

    def heal(self) -> None:
        self.cut.clear()

    # ---- driving ----------------------------------------------------------------------------------------------

    def _flush(self, member: str) -> None:
        node = self.nodes[member]
        if node is None:
            return
        for effect in node.drain():
            if isinstance(effect, Send):
                self._send(member, effect.peer, ("req", member, effect.token, effect.request))
            elif isinstance(effect, Reply) and isinstance(effect.handle, list):
                effect.handle.append(effect.response)  # a request from outside the group (:meth:`ask`)
            elif isinstance(effect, Reply):
                src, token = effect.handle  # type: ignore[misc]
                self._send(member, src, ("resp", token, effect.response))
            elif isinstance(effect, AppendDone):
                self.done[(member, effect.ticket)] = effect
        if node.flush_wanted:
            self.ledgers[member].flush()
            node.on_flushed(self.now)
            self._flush(member)
            return
        heapq.heappush(self._events, (node.next_deadline(), next(self._seq), "tick", (member,)))

    def _send(self, src: str, dst: str, message: tuple[Any, ...]) -> None:
        if frozenset((src, dst)) in self.cut or not self.filter(src, dst, message[-1]):
            return
        heapq.heappush(self._events, (self.now + self.delay, next(self._seq), "msg", (dst, message)))

    def ask(self, member: str, request: Any) -> list[Any]:
        """Hand ``member`` a request from outside the group (an admin tool) now; the list collects its answer."""
        answers: list[Any] = []
        self.node(member).handle_request(self.now, request, answers)
        self._flush(member)
        return answers

    def run(self, ms: int) -> None:
        self.run_until(lambda: False, ms, fail=False)

    def run_until(self, done: Callable[[], bool], ms: int = 60_000, *, fail: bool = True) -> int:
        """Advance virtual time until ``done()`` or ``ms`` later; returns the ms it took (raises on timeout)."""
        start, end = self.now, self.now + ms
        while not done():
            if not self._events or self._events[0][0] > end:
                self.now = end
                if done() or not fail:
                    break
                raise TimeoutError(f"not done after {ms} ms")
            when, _, kind, args = heapq.heappop(self._events)
            self.now = max(self.now, when)
            member = args[0]
            node = self.nodes[member]
            if node is None:
                continue
            if kind == "tick":
                node.tick(self.now)
            else:
                message = args[1]
                self.delivered.append((message[1] if message[0] == "req" else "", member, message[-1]))
                if message[0] == "req":
                    node.handle_request(self.now, message[3], (message[1], message[2]))
                elif member in self.holding:
                    self.held.append((message[1], message[2]))
                else:
                    node.handle_response(self.now, message[1], message[2])
            self._flush(member)
        return self.now - start

    # ---- queries and writes -----------------------------------------------------------------------------------

    def leaders(self) -> list[str]:
        return [i for i, n in self.nodes.items() if n is not None and n.member.role is Role.LEADER]

    def leader(self) -> str:
        """Run until the live members settle: one leader, the others following it, every log committed to its end."""
        self.run_until(self.settled)
        return self.leaders()[0]

    def settled(self) -> bool:
        leaders = self.leaders()
        if len(leaders) != 1:
            return False
        live = [n for n in self.nodes.values() if n is not None]
        end = self.ledgers[leaders[0]].end_index
        return all(
            n.member.leader_id == leaders[0] and n.ledger.end_index == end == n.ledger.committed_index for n in live
        )

    def append(self, member: str, *bodies: bytes) -> tuple[int, int]:
        node = self.node(member)
        code, ticket, _ = node.append(self.now, [(len(b), lambda _pos, b=b: b) for b in bodies])
        self._flush(member)
        return code, ticket

    def append_and_wait(self, member: str, *bodies: bytes, ms: int = 10_000) -> AppendDone:
        code, ticket = self.append(member, *bodies)
        assert code == ResponseCode.SUCCESS, code
        self.run_until(lambda: (member, ticket) in self.done, ms)
        return self.done[(member, ticket)]

    def bodies(self, member: str) -> list[bytes]:
        """The non-empty bodies of a member's log (the empty ones are the leaders' term-start entries)."""
        return [e.body for e in self.ledgers[member].entries if e.body]
