"""A deterministic simulator for the Raft core: one seed, one run, exactly reproducible.

The very :class:`~dledger.node.RaftNode` the broker runs is driven here over an in-memory network, under virtual time
(integer ms), with every random choice drawn from one ``random.Random(seed)``. The network drops, delays (a long tail
past the RPC timeout), duplicates and thereby reorders messages; faults partition and heal members, pause them (a
SIGSTOP: nothing runs, messages wait) and crash and restart them. A crash keeps what a killed process keeps (the page
cache) or, with ``power_loss``, only what was flushed; the ``currterm`` file is always kept (it is synced when
written). Clients append a unique body at random times to whichever member they try.

After every event :class:`~dledger.invariants.Checker` checks the Raft invariants; at the end the faults stop, every
member restarts and heals, and the group must elect a leader and commit everything it acknowledged (liveness). A run
whose virtual time stops moving (a member's timer ticking at a deadline that stays in the past, which spins the
broker's timer task) fails as stuck instead of hanging.

``python -m dledger.simulation --seeds 1000`` runs seeds and prints the figures (seeds per minute, checks, appends
acknowledged); ``--seed N --trace`` replays one seed and prints its events. A failing run raises
:class:`SimulationFailure` naming its seed and the last events.
"""

from __future__ import annotations

import heapq
import itertools
import random
import shlex
from collections.abc import Callable
from typing import Any

import attrs

from dledger.codes import ResponseCode, Role
from dledger.config import DLedgerConfig
from dledger.effects import AppendDone, Reply, RoleChanged, Send
from dledger.entry import Entry
from dledger.invariants import Checker, InvariantViolation, MemberView
from dledger.ledger import MemoryLedger
from dledger.member import MemoryTermStore
from dledger.messages import PushEntryRequest
from dledger.node import RaftNode

#: virtual ms of faults and appends before the settling (CI runs shorter seeds and replays name theirs)
DURATION_MS = 60_000
#: events run without virtual time moving before a run fails as stuck (a timer whose deadline stays in the past
#: would tick forever; a run otherwise sees at most a few dozen events at one instant)
MAX_EVENTS_AT_ONE_INSTANT = 20_000


class SimulationFailure(AssertionError):
    pass


@attrs.frozen(kw_only=True)
class SimConfig:
    members: int = 3
    duration_ms: int = DURATION_MS
    settle_ms: int = 40_000
    drop: float = 0.05
    duplicate: float = 0.03
    min_delay_ms: int = 1
    max_delay_ms: int = 40
    #: share of messages held far longer (past the 3 s RPC timeout sometimes)
    slow: float = 0.02
    fault_every_ms: int = 4000
    append_every_ms: int = 150
    #: a crash loses what was not flushed (else it keeps the page cache, as kill -9 does)
    power_loss: bool = False
    sync_before_ack: bool = False
    #: DLedger 0.3.1.2's behaviour where the core departs from it (:class:`~dledger.node.RaftNode`)
    faithful: bool = False
    enable_batch_push: bool = False
    #: Appends push at the next tick, pushes received are applied at the next tick and answers are handed over with
    #: :meth:`RaftNode.handle_responses`, as the broker's shell runs every member now; off by default (each input
    #: worked through at once, as DLedger does) so the kept seeds replay the runs they were found in. With
    #: ``enable_batch_push`` appends always defer.
    shell_passes: bool = False
    flush_delay_ms: int = 5
    #: DLedger's ``preferredLeaderIds``: the leader hands leadership to a caught-up one (LEADERSHIP_TRANSFER)
    preferred_leader_ids: str = ""


class _SimLedger(MemoryLedger):
    """Remembers the lowest index a truncation removed since the last check."""

    removed_from: int | None = None

    def __init__(self, segment_size: int) -> None:
        super().__init__(segment_size)
        self.truncations: list[tuple[int, int, int, int]] = []

    def truncate(self, entry: Entry) -> int:
        if self.get(entry.index) != entry or entry.index < self.end_index:
            cut = entry.index if self.get(entry.index) != entry else entry.index + 1
            self.removed_from = cut if self.removed_from is None else min(self.removed_from, cut)
            self.truncations.append((entry.index, entry.term, self.end_index, self.committed_index))
        return super().truncate(entry)


@attrs.define
class _Member:
    member_id: str
    ledger: _SimLedger
    terms: MemoryTermStore
    node: RaftNode | None = None
    incarnation: int = 0
    paused_until: int = -1
    tick_at: int = -1


class Simulation:
    def __init__(self, seed: int, config: SimConfig | None = None) -> None:
        self.seed = seed
        self.config = config or SimConfig()
        self.rng = random.Random(seed)
        self.now = 0
        self.trace: list[str] = []
        self._events: list[tuple[int, int, str, tuple[Any, ...]]] = []
        self._seq = itertools.count()
        ids = [f"n{i}" for i in range(self.config.members)]
        self.peers = ";".join(f"{i}-sim:{40911 + n}" for n, i in enumerate(ids))
        self.members = {i: _Member(i, _SimLedger(segment_size=1 << 12), MemoryTermStore()) for i in ids}
        self.cut: set[frozenset[str]] = set()
        self.checker = Checker(ids)
        self.appends = itertools.count()
        self._tickets: dict[tuple[str, int, int], bytes] = {}
        self.acknowledged: list[tuple[int, bytes]] = []
        self.faults = 0
        self.flushes_pending: set[str] = set()
        self.faulting = True
        for member in self.members.values():
            self._start(member)

    # ---- scheduling ---------------------------------------------------------------------------------------------

    def _at(self, when: int, kind: str, *args: Any) -> None:
        heapq.heappush(self._events, (max(when, self.now), next(self._seq), kind, args))

    def log(self, text: str) -> None:
        self.trace.append(f"{self.now:>7} {text}")

    def _start(self, member: _Member) -> None:
        c = self.config
        config = DLedgerConfig(group="sim", self_id=member.member_id, peers=self.peers,
                               sync_before_ack=c.sync_before_ack, enable_batch_push=c.enable_batch_push,
                               max_batch_push_size=256, preferred_leader_ids=c.preferred_leader_ids)  # fmt: skip
        member.incarnation += 1
        node_rng = random.Random(self.rng.getrandbits(64))
        member.node = RaftNode(config, member.ledger, member.terms, rng=node_rng, now=self.now,
                               faithful=c.faithful)  # fmt: skip
        member.node.defer_push = c.enable_batch_push or c.shell_passes  # as the broker's shell runs it
        member.tick_at = -1
        self.checker.forget(member.member_id)
        self._after(member)

    def _after(self, member: _Member) -> None:
        """Carry out what the member's node asked for, then schedule its next tick."""
        node = member.node
        if node is None:
            return
        for effect in node.drain():
            if isinstance(effect, Send):
                # The destination's incarnation too: a restart breaks the connection and what was in flight on it.
                to = self.members[effect.peer].incarnation
                payload = (effect.token, effect.request, member.incarnation, to)
                self._transmit(member.member_id, effect.peer, "request", payload)
            elif isinstance(effect, Reply):
                handle: tuple[str, int, int] = effect.handle  # type: ignore[assignment]
                self._transmit(member.member_id, handle[0], "response", (handle[1], effect.response, handle[2]))
            elif isinstance(effect, AppendDone):
                self._append_done(member, effect)
            elif isinstance(effect, RoleChanged):
                self.log(
                    f"{member.member_id} is {effect.role.name} of term {effect.term} (end {node.ledger.end_index})"
                )
        if node.flush_wanted and member.member_id not in self.flushes_pending:
            self.flushes_pending.add(member.member_id)
            self._at(self.now + self.rng.randint(1, self.config.flush_delay_ms), "flush", member.member_id,
                     member.incarnation)  # fmt: skip
        deadline = node.next_deadline()
        if member.tick_at <= self.now or deadline < member.tick_at:
            member.tick_at = deadline
            self._at(deadline, "tick", member.member_id, member.incarnation)

    def _transmit(self, src: str, dst: str, kind: str, payload: tuple[Any, ...]) -> None:
        c, rng = self.config, self.rng
        if self.faulting and (frozenset((src, dst)) in self.cut or rng.random() < c.drop):
            return
        copies = 2 if self.faulting and rng.random() < c.duplicate else 1
        for _ in range(copies):
            delay = rng.randint(c.min_delay_ms, c.max_delay_ms)
            if self.faulting and rng.random() < c.slow:
                delay += rng.randint(500, 4000)
            self._at(self.now + delay, kind, src, dst, payload)

    # ---- events -------------------------------------------------------------------------------------------------

    def _live(self, member_id: str, incarnation: int | None = None) -> _Member | None:
        member = self.members[member_id]
        if member.node is None or (incarnation is not None and incarnation != member.incarnation):
            return None
        return member

    def _deliver(self, kind: str, args: tuple[Any, ...]) -> _Member | None:
        """Run one event on its member; a paused member gets it when it resumes."""
        if kind == "tick" or kind == "flush":
            member = self._live(args[0], args[1])
        else:
            member = self._live(args[1])
            if member is not None and frozenset((args[0], args[1])) in self.cut:
                return None
        if member is None:
            return None
        if member.paused_until > self.now:
            self._at(member.paused_until, kind, *args)
            return None
        node = member.node
        assert node is not None
        if kind == "tick":
            if args[1] == member.incarnation:
                node.tick(self.now)
        elif kind == "flush":
            self.flushes_pending.discard(member.member_id)
            member.ledger.flush()
            node.on_flushed(self.now)
        elif kind == "request":
            token, request, incarnation, to = args[2]
            if to == member.incarnation:
                # The shell takes pushes in its connections' readers and applies them with its push task's pass.
                defer = self.config.shell_passes and isinstance(request, PushEntryRequest)
                node.handle_request(self.now, request, (args[0], token, incarnation), defer=defer)
        else:
            token, response, incarnation = args[2]
            if incarnation == member.incarnation:
                if self.config.shell_passes:  # as the shell's push task hands them over
                    node.handle_responses(self.now, [(token, response)])
                else:
                    node.handle_response(self.now, token, response)
        return member

    def _append(self) -> None:
        member = self.members[self.rng.choice(sorted(self.members))]
        node = member.node
        if node is None or member.paused_until > self.now:
            return
        body = f"s{self.seed}-a{next(self.appends)}".encode()
        count = 1 + (self.rng.random() < 0.2) * self.rng.randint(1, 3)
        bodies = [body + b"." + str(i).encode() for i in range(count)]
        code, ticket, _ = node.append(self.now, [(len(b), _constant(b)) for b in bodies])
        if code == ResponseCode.SUCCESS:
            self._tickets[(member.member_id, member.incarnation, ticket)] = bodies[-1]
        self._after(member)

    def _append_done(self, member: _Member, done: AppendDone) -> None:
        body = self._tickets.pop((member.member_id, member.incarnation, done.ticket), None)
        if body is not None and done.code == ResponseCode.SUCCESS:
            self.acknowledged.append((done.index, body))

    # ---- faults -------------------------------------------------------------------------------------------------

    def _fault(self) -> None:
        rng, ids = self.rng, sorted(self.members)
        self.faults += 1
        choice = rng.random()
        victim = self.members[rng.choice(ids)]
        if choice < 0.3:
            other = rng.choice([i for i in ids if i != victim.member_id])
            self.cut.add(frozenset((victim.member_id, other)))
            self.log(f"cut {victim.member_id} <-> {other}")
            self._at(self.now + rng.randint(500, 12_000), "heal", victim.member_id, other)
        elif choice < 0.45:
            for other in ids:
                if other != victim.member_id:
                    self.cut.add(frozenset((victim.member_id, other)))
            self.log(f"isolate {victim.member_id}")
            self._at(self.now + rng.randint(500, 12_000), "heal_all", victim.member_id)
        elif choice < 0.7 and victim.node is not None:
            self._crash(victim)
            self._at(self.now + rng.randint(100, 8000), "restart", victim.member_id)
        elif choice < 0.85 and victim.node is not None and victim.paused_until <= self.now:
            victim.paused_until = self.now + rng.randint(1000, 10_000)
            self.log(f"pause {victim.member_id} until {victim.paused_until}")

    def _crash(self, member: _Member) -> None:
        lose = self.config.power_loss and self.rng.random() < 0.5
        before = member.ledger.end_index
        member.node = None
        member.paused_until = -1
        self.flushes_pending.discard(member.member_id)
        durable = member.ledger.durable
        member.ledger.crash(lose_unsynced=lose)
        self.log(f"crash {member.member_id} ({'power loss' if lose else 'process'}, {before} -> "
                 f"{member.ledger.end_index})")  # fmt: skip
        if lose:
            self.checker.entries_removed(member.member_id, durable, self.views())

    def views(self) -> list[MemberView]:
        out = []
        for m in self.members.values():
            node = m.node
            log = None if node is None else m.ledger.entries
            committed = -1 if node is None else m.ledger.committed_index
            role = None if node is None else node.member.role
            term = m.terms.term if node is None else node.member.curr_term
            out.append(MemberView(m.member_id, log, committed, role, term, m.ledger.entries, m.ledger.durable))
        return out

    # ---- the run ------------------------------------------------------------------------------------------------

    def run(self) -> Simulation:
        c = self.config
        self._at(self.rng.randint(0, c.append_every_ms), "append")
        self._at(self.rng.randint(1000, c.fault_every_ms), "fault")
        self._at(c.duration_ms, "settle")
        end = c.duration_ms + c.settle_ms
        at_this_instant = 0
        try:
            while self._events:
                when, _, kind, args = heapq.heappop(self._events)
                if when > end:
                    break
                at_this_instant = at_this_instant + 1 if when == self.now else 1
                if at_this_instant > MAX_EVENTS_AT_ONE_INSTANT:
                    stuck = at_this_instant - 1
                    raise InvariantViolation(f"stuck at {when} ms: {stuck} events without virtual time moving")
                self.now = when
                self._step(kind, args)
            self._final_check()
        except InvariantViolation as exc:
            raise SimulationFailure(self._failure(str(exc))) from exc
        return self

    def _step(self, kind: str, args: tuple[Any, ...]) -> None:
        c, rng = self.config, self.rng
        if kind == "append":
            if self.faulting:
                self._append()
                self._at(self.now + rng.randint(1, 2 * c.append_every_ms), "append")
        elif kind == "fault":
            if self.faulting:
                self._fault()
                self._at(self.now + rng.randint(1, 2 * c.fault_every_ms), "fault")
        elif kind == "settle":
            self._settle()
            return
        elif kind in ("heal", "heal_all", "restart"):
            self._recover(kind, args)
        else:
            member = self._deliver(kind, args)
            if member is not None:
                self._after(member)
        self._check()

    def _recover(self, kind: str, args: tuple[Any, ...]) -> None:
        if kind == "heal":
            self.cut.discard(frozenset(args))
            self.log(f"heal {args[0]} <-> {args[1]}")
        elif kind == "heal_all":
            self.cut = {pair for pair in self.cut if args[0] not in pair}
            self.log(f"heal {args[0]}")
        else:
            member = self.members[args[0]]
            if member.node is None:
                self.log(f"restart {member.member_id}")
                self._start(member)

    def _settle(self) -> None:
        """Stop the faults (the network turns perfect), resume and restart everyone; the group must converge."""
        self.faulting = False
        self.cut.clear()
        self.log("settle: faults stop")
        for member in self.members.values():
            member.paused_until = -1
            if member.node is None:
                self._start(member)
            else:
                self._after(member)

    def _check(self) -> None:
        for member in self.members.values():
            removed, member.ledger.removed_from = member.ledger.removed_from, None
            for cut in member.ledger.truncations:
                self.log(
                    f"{member.member_id} truncates at {cut[0]} (term {cut[1]}; end was {cut[2]}, committed {cut[3]})"
                )
            member.ledger.truncations.clear()
            if removed is not None:
                self.checker.entries_removed(member.member_id, removed, self.views())
        self.checker.check(self.views())
        while self.acknowledged:
            index, body = self.acknowledged.pop()
            self.checker.acknowledged(index, body)

    def _final_check(self) -> None:
        """Liveness once the faults stopped: one leader, every member holding and committing its whole log."""
        nodes = [m.node for m in self.members.values() if m.node is not None]
        leaders = [n for n in nodes if n.member.role is Role.LEADER]
        if len(leaders) != 1:
            raise InvariantViolation(f"{len(leaders)} leaders after the faults stopped")
        end = leaders[0].ledger.end_index
        behind = [n.member.self_id for n in nodes if n.ledger.committed_index != end or n.ledger.end_index != end]
        if behind:
            raise InvariantViolation(f"members {behind} have not caught up with the leader's {end} after the faults")

    def _failure(self, what: str) -> str:
        tail = "\n".join(self.trace[-40:])
        c = self.config
        flags = "".join(
            flag
            for flag, on in (
                (f" --members {c.members}", c.members != 3),
                (" --power-loss", c.power_loss),
                (" --batch", c.enable_batch_push),
                (" --shell-passes", c.shell_passes),
                (f" --preferred {shlex.quote(c.preferred_leader_ids)}", bool(c.preferred_leader_ids)),
                (" --faithful", c.faithful),
                (f" --duration {c.duration_ms}", c.duration_ms != DURATION_MS),
            )
            if on
        )
        replay = f"python -m dledger.simulation --seed {self.seed}{flags} --trace"
        return f"seed {self.seed}: {what}\nlast events:\n{tail}\nreplay: {replay}"

    def summary(self) -> dict[str, int]:
        return {
            "seed": self.seed,
            "checks": self.checker.checks,
            "acknowledged": self.checker.acked,
            "committed": len(self.checker.committed),
            "terms": len(self.checker.leaders),
            "faults": self.faults,
        }


def _constant(body: bytes) -> Callable[[int], bytes]:
    return lambda _pos: body


def run_seed(seed: int, config: SimConfig | None = None, trace: Callable[[str], None] | None = None) -> dict[str, int]:
    sim = Simulation(seed, config)
    try:
        sim.run()
    finally:
        if trace is not None:
            for line in sim.trace:
                trace(line)
    return sim.summary()


def _main() -> None:
    import argparse
    import json
    import time

    parser = argparse.ArgumentParser(prog="python -m dledger.simulation", description=__doc__.split("\n\n")[0])
    parser.add_argument("--seed", type=int, help="run this one seed")
    parser.add_argument("--seeds", type=int, default=100, help="run seeds 0..N-1 (default 100)")
    parser.add_argument("--first", type=int, default=0, help="first seed of the range")
    parser.add_argument("--trace", action="store_true", help="print the events of the run")
    parser.add_argument("--members", type=int, default=3)
    parser.add_argument("--power-loss", action="store_true", help="crashes lose unflushed data (implies sync acks)")
    parser.add_argument("--batch", action="store_true", help="enableBatchPush")
    parser.add_argument("--faithful", action="store_true", help="DLedger 0.3.1.2's behaviour where ours departs")
    parser.add_argument("--shell-passes", action="store_true", help="appends and answers taken in as the shell does")
    parser.add_argument("--preferred", default="", help="preferredLeaderIds, e.g. n1")
    parser.add_argument("--duration", type=int, default=DURATION_MS, help="ms of faults before the settling")
    args = parser.parse_args()
    config = SimConfig(members=args.members, power_loss=args.power_loss, sync_before_ack=args.power_loss,
                       enable_batch_push=args.batch, faithful=args.faithful, shell_passes=args.shell_passes,
                       preferred_leader_ids=args.preferred, duration_ms=args.duration)  # fmt: skip
    seeds = [args.seed] if args.seed is not None else range(args.first, args.first + args.seeds)
    started, cpu = time.perf_counter(), time.process_time()
    totals = {"seeds": 0, "checks": 0, "acknowledged": 0, "committed": 0}
    for seed in seeds:
        summary = run_seed(seed, config, print if args.trace else None)
        totals["seeds"] += 1
        for key in ("checks", "acknowledged", "committed"):
            totals[key] += summary[key]
    elapsed = time.perf_counter() - started
    cpu = time.process_time() - cpu
    rates = {
        "seeds_per_minute": round(60 * totals["seeds"] / elapsed),
        "seeds_per_cpu_minute": round(60 * totals["seeds"] / cpu),
    }
    print(json.dumps({**totals, "seconds": round(elapsed, 1), "cpu_seconds": round(cpu, 1), **rates}))


if __name__ == "__main__":
    _main()
