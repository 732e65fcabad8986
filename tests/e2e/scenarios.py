"""The real-client conformance scenarios (docs/protocol.md#9-real-clients) for one real client, in one broker process
and as few client processes as the scenarios allow.

:func:`run_session` plays every scenario and returns a :class:`SessionReport` that the tests assert on, one
behaviour per test. Timeline (``T`` = 1,000 messages)::

    broker up -> topics MAIN, SPLIT, CRASH (4 queues), LATENCY (1) -> producer sends T to MAIN -> SIGKILL + restart
    -> at once: [once] one consumer reads MAIN               [resume] a consumer stops after ~300, a successor ends it
                [split] two consumers share SPLIT, the first leaves  [latency] a message sent while a pull is held
                [crash] as [split] on CRASH, the first one SIGKILLed
    -> [once] stops; 8 tail messages are sent; a restarted [once] consumer must get exactly the tail.

The message-semantics scenarios of ``semantics.py`` (delay levels, send-back retries, C++ transactions, queries) run in
the same nursery, and so does the master fail-over of ``failover.py`` (its own name server, master and slave). Each
scenario records its own failure in ``errors`` instead of aborting the others, so a broker bug shows up as the tests
it breaks. Waits for the clients' own timers (both rebalance every 10 s; the C++ core also
rebalances on NOTIFY_CONSUMER_IDS_CHANGED, ali-ons ignores it) are bounded by :data:`STEP`; nothing here asserts a
duration except the latency scenario's correctness bound.
"""

from __future__ import annotations

import functools
import traceback
from collections import Counter
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import attrs
import trio

from remoting.client import RemotingClient
from remoting.errors import RemotingError
from tests.e2e.cluster import EmbeddedBroker, create_topic, wait_for_consumers, wait_for_route
from tests.e2e.failover import FailoverReport, failover_scenario
from tests.e2e.harness import Agent, ClientKind, Event, ScenarioError, kill_all
from tests.e2e.semantics import (
    SemanticsReport,
    delay_scenario,
    query_scenario,
    retry_scenario,
    trace_scenario,
    transaction_scenario,
)

TOTAL = 1000
TAGS = ("TagA", "TagB", "TagC")
USER_PROPS = ("seq", "origin")
STEP = 90.0  # bound for any one step that waits on client timers (rebalance, offset persistence)
SESSION_LIMIT = 400.0
RESUME_STOP_AFTER = 300
SPLIT_BATCH = 200
LATENCY_SAMPLES = 3
#: A held pull lasts 15 s; a wake-up that takes 5 s is not "within milliseconds" by any reading.
LATENCY_BOUND_MS = 5000


def make_messages(topic: str, prefix: str, count: int) -> list[Event]:
    """Distinct keys, rotating tags, two user properties (one non-ASCII), UTF-8 bodies; every 100th is 6 KiB
    (past the clients' 4 KiB compression threshold)."""
    out = []
    for i in range(count):
        body = f"{prefix} #{i} héllo ✓ " + "x" * (i % 37)
        if i % 100 == 7:
            body += "y" * 6144
        props = {"seq": str(i), "origin": f"{prefix}·é"}
        out.append({"topic": topic, "tags": TAGS[i % 3], "keys": f"{prefix}-{i:04d}", "body": body, "props": props})
    return out


@attrs.define
class SplitOutcome:
    """Two consumers of one group: probe ``rounds`` until they split the queues, ``batch1`` while both run,
    ``batch2`` after the first left; what each received (``survivor_before_leave``: the survivor's count at leave)."""

    rounds: int = 0
    batch1: set[str] = attrs.field(factory=set)
    batch2: set[str] = attrs.field(factory=set)
    leaver: list[Event] = attrs.field(factory=list)
    survivor: list[Event] = attrs.field(factory=list)
    survivor_before_leave: int = 0


@attrs.define
class SessionReport:
    """What happened, per scenario. ``errors[scenario]`` holds a failure message; absent means it ran through."""

    client: str
    log_dir: Path
    expected: dict[str, Event] = attrs.field(factory=dict)
    sent: list[Event] = attrs.field(factory=list)
    send_retries: list[str] = attrs.field(factory=list)
    once: list[Event] = attrs.field(factory=list)
    once_tail_keys: set[str] = attrs.field(factory=set)
    once_restarted: list[Event] = attrs.field(factory=list)
    resume_first: list[Event] = attrs.field(factory=list)
    resume_second: list[Event] = attrs.field(factory=list)
    split: SplitOutcome = attrs.field(factory=lambda: SplitOutcome())
    crash: SplitOutcome = attrs.field(factory=lambda: SplitOutcome())
    latency_ms: list[int] = attrs.field(factory=list)
    errors: dict[str, str] = attrs.field(factory=dict)
    client_errors: dict[str, list[str]] = attrs.field(factory=dict)
    semantics: SemanticsReport = attrs.field(factory=lambda: SemanticsReport())
    failover: FailoverReport = attrs.field(factory=lambda: FailoverReport())

    def failure(self, scenario: str) -> str | None:
        err = self.errors.get(scenario) or self.errors.get("setup")
        return None if err is None else f"[{self.client}] {scenario} did not run through: {err}\nlogs: {self.log_dir}"


class Session:
    def __init__(self, kind: ClientKind, work: Path, nursery: trio.Nursery) -> None:
        self.kind = kind
        self.nursery = nursery
        self.logs = work / "logs"
        self.logs.mkdir(parents=True, exist_ok=True)
        self.broker = EmbeddedBroker(work / "data", self.logs)
        self.report = SessionReport(kind.name, self.logs)
        self.agents: list[Agent] = []
        self._once_consumer: Agent | None = None
        prefix = "e2e_" + kind.name.replace("-", "_")
        self.main, self.split, self.latency = f"{prefix}_main", f"{prefix}_split", f"{prefix}_latency"
        self.crash = f"{prefix}_crash"
        self.delay, self.retry, self.tx = f"{prefix}_delay", f"{prefix}_retry", f"{prefix}_tx"
        self.trace = f"{prefix}_trace"
        self.topics = {self.main: 4, self.split: 4, self.crash: 4, self.latency: 1}
        self.topics.update({self.delay: 2, self.retry: 1, self.tx: 1, self.trace: 1})

    async def agent(
        self,
        role: str,
        group: str,
        topic: str = "",
        instance: str = "",
        slow_after: int = 0,
        fail_times: int = 0,
        namesrv: str = "",
        trace: int = 0,
        orderly: int = 0,
        broadcast: int = 0,
        home: str = "",
    ) -> Agent:
        """A started client driver; against the session's broker unless ``namesrv`` names another cluster.
        ``orderly``, ``broadcast`` and ``home`` are the consumer options of the drivers (``cpp/agent.py``)."""
        name = f"{role}-{group}-{instance or len(self.agents)}"
        if any(agent.name == name for agent in self.agents):  # a restart under the same instance name
            name += f"-{len(self.agents)}"
        options: dict[str, str | int] = {"namesrv": namesrv or self.broker.namesrv_addr, "group": group}
        if trace:
            options["trace"] = trace
        if role == "consumer":
            options.update(topic=topic, instance=instance, slow_after=slow_after, fail_times=fail_times)
            options.update(orderly=orderly, broadcast=broadcast, home=home)
            if self.kind.name == "cpp":
                options["props"] = ",".join(USER_PROPS)
        if self.kind.name == "cpp":
            options["logs"] = str(self.logs / f"cpp-{name}")
        agent = Agent(name, self.kind.argv(role, **options), self.logs / f"{name}.log")
        if self.kind.name == "cpp":
            agent.native_log_dir = self.logs / f"cpp-{name}"
        self.agents.append(agent)
        return await agent.started(self.nursery)

    async def guarded(self, scenario: str, body: Callable[[], Awaitable[None]]) -> None:
        try:
            await body()
        except Exception as exc:
            self.report.errors[scenario] = describe(exc)

    async def setup(self) -> None:
        await self.broker.start(self.nursery)
        await self.create_topics()
        producer = await self.agent("producer", "PG_e2e_main")
        messages = make_messages(self.main, "m", TOTAL)
        self.report.expected = {m["keys"]: m for m in messages}
        self.report.sent = await producer.produce(messages, timeout=180)
        await producer.stop()
        # The C++ core retries a failed send on its own (the wrapper cannot turn that off) and logs each failure.
        self.report.send_retries = producer.native_log_lines("send failed of times")
        await self.broker.kill_and_restart(self.nursery)
        async with RemotingClient() as admin:
            for topic in self.topics:
                await wait_for_route(admin, self.broker.namesrv_addr, topic)

    async def create_topics(self) -> None:
        async with RemotingClient() as admin:
            for topic, queues in self.topics.items():
                await create_topic(admin, self.broker.broker_addr, topic, queues)
            for topic in self.topics:
                await wait_for_route(admin, self.broker.namesrv_addr, topic)

    async def once(self) -> None:
        consumer = await self.agent("consumer", "CG_e2e_once", self.main, "once")
        self._once_consumer = consumer
        try:
            await consumer.wait_until(lambda: consumer.received_keys() >= set(self.report.expected), STEP, "all")
        finally:
            self.report.once = consumer.received

    async def once_finish(self) -> None:
        """Stop the long-running [once] consumer, send a tail, and check a restarted one gets exactly the tail."""
        consumer = self._once_consumer
        assert consumer is not None
        await consumer.stop()
        self.report.once = consumer.received
        producer = await self.agent("producer", "PG_e2e_tail")
        tail = make_messages(self.main, "tail", 8)
        self.report.once_tail_keys = {m["keys"] for m in tail}
        self.report.expected.update({m["keys"]: m for m in tail})
        sent = await producer.produce(tail, timeout=60)
        await producer.stop()
        if not all(e.get("ok") for e in sent):
            raise ScenarioError(f"tail sends failed: {sent}")
        again = await self.agent("consumer", "CG_e2e_once", self.main, "once-again")
        tail_keys = self.report.once_tail_keys
        await again.wait_until(lambda: again.received_keys() >= tail_keys, STEP, "the tail after restart")
        await again.stop()
        self.report.once_restarted = again.received

    async def resume(self) -> None:
        first = await self.agent("consumer", "CG_e2e_resume", self.main, "resume-1", slow_after=RESUME_STOP_AFTER)
        await first.wait_until(lambda: len(first.received) >= RESUME_STOP_AFTER, STEP, f"{RESUME_STOP_AFTER} messages")
        await first.stop()
        self.report.resume_first = first.received
        second = await self.agent("consumer", "CG_e2e_resume", self.main, "resume-2")
        wanted = {k for k in self.report.expected if k.startswith("m-")}

        def covered() -> bool:
            return (first.received_keys() | second.received_keys()) >= wanted

        try:
            await second.wait_until(covered, STEP, "the messages the first consumer left")
        finally:
            await second.stop()
            self.report.resume_second = second.received

    async def split_scenario(self, outcome: SplitOutcome, crash: bool) -> None:
        """Two consumers share a topic; the first one leaves (``crash``: SIGKILL, no unregistration, no final offset
        commit) and the later one takes over.

        That order matters for the C++ 2.1.0 core: a consumer that dropped a queue in a rebalance and is given it
        back later never pulls it again (its per-queue pull callback keeps the dropped request), so the survivor must
        be one that never owned the leaver's queues: the later joiner.
        """
        kind = "crash" if crash else "split"
        topic, group = (self.crash if crash else self.split), f"CG_e2e_{kind}"
        async with RemotingClient() as admin:
            leaver = await self.agent("consumer", group, topic, f"{kind}-1")
            await wait_for_consumers(admin, self.broker.broker_addr, group, 1)
            survivor = await self.agent("consumer", group, topic, f"{kind}-2")
            await wait_for_consumers(admin, self.broker.broker_addr, group, 2)
            producer = await self.agent("producer", f"PG_e2e_{kind}")
            try:
                outcome.rounds = await self._settle_split(topic, leaver, survivor, producer)
                batch1 = make_messages(topic, f"{kind}1", SPLIT_BATCH)
                outcome.batch1 = {m["keys"] for m in batch1}
                await self._send_all(producer, batch1)
                both = (leaver, survivor)
                await survivor.wait_until(functools.partial(_all_received, both, outcome.batch1), STEP, "batch 1")
                outcome.survivor_before_leave = len(survivor.received)
                if crash:
                    leaver.kill()
                    await leaver.wait_exit(30)
                else:
                    await leaver.stop()
                # A clean leave unregisters at once; a killed client is dropped when the broker sees its socket close.
                await wait_for_consumers(admin, self.broker.broker_addr, group, 1)
                batch2 = make_messages(topic, f"{kind}2", SPLIT_BATCH)
                outcome.batch2 = {m["keys"] for m in batch2}
                await self._send_all(producer, batch2)
                await survivor.wait_until(
                    functools.partial(_all_received, (survivor,), outcome.batch2), STEP, "batch 2 after takeover"
                )
            finally:
                outcome.leaver, outcome.survivor = leaver.received, survivor.received
            await producer.stop()
            await survivor.stop()

    async def _settle_split(self, topic: str, a: Agent, b: Agent, producer: Agent) -> int:
        """Send probe rounds until two rounds in a row show each queue owned by one consumer and both used; returns
        the number of rounds."""
        clean_rounds = 0
        for round_no in range(30):
            probes = make_messages(topic, f"probe{round_no}", 8)
            keys = {m["keys"] for m in probes}
            await self._send_all(producer, probes)
            await a.wait_until(functools.partial(_all_received, (a, b), keys), STEP, "probe round")
            owners: dict[int, set[str]] = {}
            for who, agent in (("a", a), ("b", b)):
                for e in agent.received:
                    if e["keys"] in keys:
                        owners.setdefault(e["queueId"], set()).add(who)
            users = set().union(*owners.values())
            clean = all(len(o) == 1 for o in owners.values()) and users == {"a", "b"}
            clean_rounds = clean_rounds + 1 if clean else 0
            if clean_rounds == 2:
                return round_no + 1
            # The clients rebalance on their own timers; give them a moment before the next probe round.
            await trio.sleep(1.0)
        raise ScenarioError("the two consumers never settled on disjoint queue sets")

    async def _send_all(self, producer: Agent, messages: list[Event]) -> None:
        sent = await producer.produce(messages, timeout=120)
        failed = [e for e in sent if not e.get("ok")]
        if failed:
            raise ScenarioError(f"{len(failed)} sends failed, first: {failed[0]}")

    async def latency_scenario(self) -> None:
        consumer = await self.agent("consumer", "CG_e2e_latency", self.latency, "latency")
        producer = await self.agent("producer", "PG_e2e_latency")
        try:
            for i in range(LATENCY_SAMPLES + 1):
                if i:
                    # Let the consumer's next pull reach the broker and park (the client re-pulls at once).
                    await trio.sleep(2.0)
                msg = make_messages(self.latency, f"lat{i}", 1)
                [sent] = await producer.produce(msg, timeout=30)
                key = msg[0]["keys"]
                await consumer.wait_until(functools.partial(_has_key, consumer, key), 30, key)
                got = next(e for e in consumer.received if e["keys"] == key)
                if i:  # the first message is a warm-up: the consumer may not have been pulling yet
                    self.report.latency_ms.append(int(got["recvTs"]) - int(sent["sendTs"]))
        finally:
            await producer.stop()
            await consumer.stop()

    async def run(self) -> None:
        await self.guarded("setup", self.setup)
        if "setup" in self.report.errors:
            return
        async with trio.open_nursery() as scenarios:
            scenarios.start_soon(self.guarded, "once", self.once)
            scenarios.start_soon(self.guarded, "resume", self.resume)
            split = functools.partial(self.split_scenario, self.report.split, False)
            scenarios.start_soon(self.guarded, "split", split)
            crash = functools.partial(self.split_scenario, self.report.crash, True)
            scenarios.start_soon(self.guarded, "crash", crash)
            scenarios.start_soon(self.guarded, "latency", self.latency_scenario)
            scenarios.start_soon(self.guarded, "delay", functools.partial(delay_scenario, self))
            scenarios.start_soon(self.guarded, "retry", functools.partial(retry_scenario, self))
            scenarios.start_soon(self.guarded, "query", functools.partial(query_scenario, self))
            scenarios.start_soon(self.guarded, "failover", functools.partial(failover_scenario, self))
            if self.kind.name == "cpp":  # ali-ons has no transactional producer nor message trace (see semantics.py)
                scenarios.start_soon(self.guarded, "transaction", functools.partial(transaction_scenario, self))
                scenarios.start_soon(self.guarded, "trace", functools.partial(trace_scenario, self))
        if "once" not in self.report.errors:
            await self.guarded("once_restart", self.once_finish)
        else:
            self.report.errors["once_restart"] = "skipped: the first [once] consumer failed"


async def run_session(kind: ClientKind, work: Path) -> SessionReport:
    """Play every scenario for ``kind`` with processes under ``work``; never raises for a scenario failure."""
    session: Session | None = None
    try:
        with trio.move_on_after(SESSION_LIMIT) as scope:
            async with trio.open_nursery() as nursery:
                session = Session(kind, work, nursery)
                await session.run()
                nursery.cancel_scope.cancel()
        assert session is not None
        if scope.cancelled_caught:
            session.report.errors.setdefault("session", f"the session exceeded {SESSION_LIMIT:.0f}s")
            names = ("setup", "once", "resume", "split", "crash", "latency", "once_restart")
            for name in (*names, "delay", "retry", "query", "transaction", "trace", "failover"):
                session.report.errors.setdefault(name, "the session ran out of time")
        for agent in session.agents:
            agent.dump_events(session.logs / f"{agent.name}.events.jsonl")
            if agent.client_errors():
                session.report.client_errors[agent.name] = agent.client_errors()
        return session.report
    finally:
        await kill_all()


def describe(exc: BaseException) -> str:
    """Scenario failures as ``Type: message``, one per line, unwrapping exception groups; tracebacks for bugs."""
    if isinstance(exc, BaseExceptionGroup):
        return "\n".join(describe(inner) for inner in exc.exceptions)
    if isinstance(exc, ScenarioError | AssertionError | OSError | RemotingError):
        return f"{type(exc).__name__}: {exc}"
    return "".join(traceback.format_exception(exc))


def _all_received(agents: tuple[Agent, ...], keys: set[str]) -> bool:
    return set().union(*(agent.received_keys() for agent in agents)) >= keys


def _has_key(agent: Agent, key: str) -> bool:
    return key in agent.received_keys()


def duplicates(events: list[Event]) -> dict[str, int]:
    counts = Counter(e["keys"] for e in events)
    return {k: n for k, n in counts.items() if n > 1}


def mismatches(report: SessionReport, events: list[Event]) -> list[str]:
    """Received messages whose topic, body, tags, keys or user properties differ from what was sent."""
    bad = []
    for e in events:
        want = report.expected.get(e["keys"])
        if want is None:
            bad.append(f"unexpected key {e['keys']!r}")
            continue
        got: dict[str, Any] = {"topic": e["topic"], "tags": e["tags"], "body": e["body"]}
        got["props"] = {k: v for k, v in e["props"].items() if k in USER_PROPS}
        expected = {"topic": want["topic"], "tags": want["tags"], "body": want["body"], "props": want["props"]}
        if got != expected:
            bad.append(f"{e['keys']}: got {got!r:.300}, sent {expected!r:.300}")
    return bad
