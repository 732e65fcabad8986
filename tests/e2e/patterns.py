"""Usage patterns of the real clients beyond send and push-consume (docs/protocol.md#93-usage-patterns): orderly
sends and an orderly consumer handing its queues over (C++ core), broadcasting with local offsets (both clients), a
batch send (C++ core), and a compressed body through the retry path (both clients).

One broker process per client kind; the scenarios run concurrently in it, each recording its own failure in
``errors`` (as ``scenarios.py`` does). What each client offers, read from the installed packages:

- C++ core 2.1 (C API through ``cpp/agent.py``): ``SendMessageOrderly`` (a queue selector callback),
  ``SendMessageOrderlyByShardingKey``, ``RegisterMessageCallbackOrderly`` (it locks its queues on the broker with
  LOCK_BATCH_MQ before pulling them and unlocks all but the first of each broker with UNLOCK_BATCH_MQ at shutdown,
  see docs/protocol.md#93-usage-patterns), ``SetPushConsumerMessageModel``
  (BROADCASTING keeps offsets in ``$HOME/.rocketmq_offsets``), ``SendBatchMessage``.
- ali-ons 3.12: ``isBroadcast`` (offsets in ``$HOME/.rocketmq_offsets_node``). No orderly consumer, no queue selector
  nor sharding key on its producer, no batch send.

Every wait is bounded by :data:`STEP`; nothing asserts a duration.
"""

from __future__ import annotations

import functools
import re
from pathlib import Path

import attrs
import trio

from client import api
from client.admin import Admin
from remoting.client import RemotingClient
from remoting.codec.bodies import LockBatchRequestBody, MessageQueue
from tests.e2e.harness import Agent, ClientKind, Event, ScenarioError, kill_all
from tests.e2e.scenarios import Session, describe

STEP = 90.0
PATTERNS_LIMIT = 300.0
#: Orderly: ORDERS interleaved sequences of STEPS messages; the first consumer slows down after ORDERLY_FAST.
ORDERS = 4
STEPS = 40
ORDERLY_FAST = 8
ORDERLY_QUEUES = 4
BROADCAST_QUEUES = 2
BROADCAST_COUNT = 20
BROADCAST_TAIL = 5
BATCH_SIZE = 10
#: Past both clients' 4 KiB compression threshold.
BIG_BODY = "big ✓ " + "z" * 6000 + " é end"
BIG_RETRY_KEYS = ("big-0", "small-0")
PROBE_CLIENT = "127.0.0.9@lock-probe"
#: The broker's queue lock lifetime (``rebalanceLockMaxLiveTime``; RocketMQ's 60 s by default). The C++ core renews
#: its locks every 20 s and holds one for 30 s without renewal (``PullRequest::RebalanceLockInterval`` and
#: ``RebalanceLockMaxLiveTime``, src/consumer/PullRequest.cpp), so 30 s never expires a lock the core still counts
#: on, and halves the handover's wait for the queue its shutdown leaves locked.
LOCK_MAX_LIVE_MS = 30_000
#: The C++ core's log line for each queue its UNLOCK_BATCH_MQ named.
UNLOCKED = re.compile(r"unlockBatchMQ success of mq:MessageQueue \[topic=\S+, brokerName=\S+, queueId=(\d+)\]")


@attrs.define
class PatternsReport:
    client: str
    log_dir: Path
    errors: dict[str, str] = attrs.field(factory=dict)
    orderly_sent: list[Event] = attrs.field(factory=list)
    orderly_first: list[Event] = attrs.field(factory=list)
    orderly_second: list[Event] = attrs.field(factory=list)
    #: Queues another member could lock before the first orderly consumer started (every one: the probe works),
    #: while it ran, and after it stopped cleanly.
    orderly_lockable_before: set[int] = attrs.field(factory=set)
    orderly_lockable_while_held: set[int] = attrs.field(factory=set)
    orderly_lockable_after_stop: set[int] = attrs.field(factory=set)
    #: The queues the C++ core's shutdown named in its UNLOCK_BATCH_MQ (from its own log).
    orderly_unlocked_by_client: set[int] = attrs.field(factory=set)
    orderly_shutdown_aborted: bool = False
    broadcast_keys: set[str] = attrs.field(factory=set)
    broadcast_tail_keys: set[str] = attrs.field(factory=set)
    broadcast_a: list[Event] = attrs.field(factory=list)
    broadcast_b: list[Event] = attrs.field(factory=list)
    broadcast_a_again: list[Event] = attrs.field(factory=list)
    #: The broadcasting group's offsets on the broker (GET_CONSUME_STATS), queue id -> consumer offset.
    broadcast_broker_offsets: dict[int, int] = attrs.field(factory=dict)
    broadcast_offset_files: list[str] = attrs.field(factory=list)
    batch_sent: list[Event] = attrs.field(factory=list)
    batch_expected: list[Event] = attrs.field(factory=list)
    batch_received: list[Event] = attrs.field(factory=list)
    big_retry_received: list[Event] = attrs.field(factory=list)

    def failure(self, scenario: str) -> str | None:
        err = self.errors.get(scenario) or self.errors.get("setup")
        return None if err is None else f"[{self.client}] {scenario} did not run through: {err}\nlogs: {self.log_dir}"


def orderly_messages(topic: str) -> list[Event]:
    """ORDERS sequences interleaved step by step; orders 0 and 1 pick their queue by selector argument, the others
    by sharding key. ``origin`` names the order, ``seq`` the step."""
    out = []
    for step in range(STEPS):
        for order in range(ORDERS):
            spec: Event = {
                "topic": topic,
                "tags": "TagO",
                "keys": f"o{order}-{step:03d}",
                "body": f"order {order} step {step} ✓",
                "props": {"seq": str(step), "origin": f"order-{order}"},
            }
            if order < 2:
                spec["orderArg"] = order
            else:
                spec["shardingKey"] = f"order-{order}"
            out.append(spec)
    return out


def _message(topic: str, key: str, body: str = "", **extra: object) -> Event:
    return {"topic": topic, "tags": "TagP", "keys": key, "body": body or f"{key} body ✓", "props": {}, **extra}


class Patterns:
    def __init__(self, kind: ClientKind, work: Path, nursery: trio.Nursery) -> None:
        self.session = Session(kind, work, nursery)
        self.kind = kind
        self.report = PatternsReport(kind.name, self.session.logs)
        prefix = "pat_" + kind.name.replace("-", "_")
        self.orderly, self.broadcast, self.batch = f"{prefix}_orderly", f"{prefix}_bcast", f"{prefix}_batch"
        self.big_retry = f"{prefix}_bigretry"
        self.session.topics = {self.broadcast: BROADCAST_QUEUES, self.big_retry: 1}
        self.session.broker.extra_args = ("--rebalanceLockMaxLiveTime", str(LOCK_MAX_LIVE_MS))
        if kind.name == "cpp":
            self.session.topics.update({self.orderly: ORDERLY_QUEUES, self.batch: 1})

    async def guarded(self, scenario: str, body: functools.partial[object]) -> None:
        try:
            await body()
        except Exception as exc:
            self.report.errors[scenario] = describe(exc)

    async def run(self) -> None:
        try:
            await self.session.broker.start(self.session.nursery)
            await self.session.create_topics()
        except Exception as exc:
            self.report.errors["setup"] = describe(exc)
            return
        async with trio.open_nursery() as scenarios:
            scenarios.start_soon(self.guarded, "broadcast", functools.partial(self.broadcast_scenario))
            scenarios.start_soon(self.guarded, "big_retry", functools.partial(self.big_retry_scenario))
            if self.kind.name == "cpp":  # ali-ons has neither an orderly consumer nor a batch send
                scenarios.start_soon(self.guarded, "orderly", functools.partial(self.orderly_scenario))
                scenarios.start_soon(self.guarded, "batch", functools.partial(self.batch_scenario))

    async def _produce(self, producer: Agent, messages: list[Event]) -> list[Event]:
        sent = await producer.produce(messages, timeout=STEP)
        failed = [e for e in sent if not e.get("ok")]
        if failed:
            raise ScenarioError(f"{len(failed)} sends failed, first: {failed[0]}")
        return sent

    async def _lockable(self, group: str, queues: int) -> set[int]:
        """The queues of the orderly topic another member of ``group`` can lock now; released again at once."""
        broker = self.session.broker
        mqs = frozenset(MessageQueue(self.orderly, broker.broker_name, q) for q in range(queues))
        body = LockBatchRequestBody(consumer_group=group, client_id=PROBE_CLIENT, mq_set=mqs)
        async with RemotingClient() as admin:
            got = await api.lock_batch_mq(admin, broker.broker_addr, body, 10)
            if got:
                release = LockBatchRequestBody(consumer_group=group, client_id=PROBE_CLIENT, mq_set=got)
                await api.unlock_batch_mq(admin, broker.broker_addr, release, 10)
        return {mq.queue_id for mq in got}

    async def orderly_scenario(self) -> None:
        """Orderly sends, then an orderly consumer that holds every queue's lock, stops cleanly midway (unlocking
        them) and is replaced by another member of the group that consumes the rest, in order."""
        group = "CG_pat_orderly"
        report = self.report
        producer = await self.session.agent("producer", "PG_pat_orderly")
        try:
            report.orderly_sent = await self._produce(producer, orderly_messages(self.orderly))
        finally:
            await producer.stop()
        report.orderly_lockable_before = await self._lockable(group, ORDERLY_QUEUES)
        first = await self.session.agent(
            "consumer", group, self.orderly, "orderly-1", slow_after=ORDERLY_FAST, orderly=1
        )
        try:
            # Once it consumed from every order it holds the locks (the core locks each queue it is given, used or
            # not, before pulling it).
            await first.wait_until(
                lambda: len({e["props"]["origin"] for e in first.received}) == ORDERS, STEP, "every order"
            )
            report.orderly_lockable_while_held = await self._lockable(group, ORDERLY_QUEUES)
        finally:
            await first.stop()
            report.orderly_first = first.received
            report.orderly_shutdown_aborted = first.shutdown_aborted
            report.orderly_unlocked_by_client = {
                int(m.group(1))
                for line in first.native_log_lines("unlockBatchMQ success")
                if (m := UNLOCKED.search(line))
            }
        report.orderly_lockable_after_stop = await self._lockable(group, ORDERLY_QUEUES)
        second = await self.session.agent("consumer", group, self.orderly, "orderly-2", orderly=1)
        wanted = {e["key"] for e in report.orderly_sent}

        def covered() -> bool:
            return (first.received_keys() | second.received_keys()) >= wanted

        try:
            await second.wait_until(covered, STEP, "the rest of every order")
        finally:
            await second.stop()
            report.orderly_second = second.received

    async def broadcast_scenario(self) -> None:
        """Two consumers of one BROADCASTING group each get every message; one restarted with its local offsets gets
        only what was sent while it was down; the broker keeps no offset for the group."""
        group = "CG_pat_bcast"
        report = self.report
        homes = {name: str(self.session.logs / f"home-{name}") for name in ("a", "b")}
        a = await self.session.agent("consumer", group, self.broadcast, "bcast-a", broadcast=1, home=homes["a"])
        b = await self.session.agent("consumer", group, self.broadcast, "bcast-b", broadcast=1, home=homes["b"])
        producer = await self.session.agent("producer", "PG_pat_bcast")
        again: Agent | None = None
        try:
            await self._settle_broadcast(producer, (a, b))
            messages = [_message(self.broadcast, f"bcast-{i:02d}") for i in range(BROADCAST_COUNT)]
            report.broadcast_keys = {m["keys"] for m in messages}
            await self._produce(producer, messages)
            for each in (a, b):
                await each.wait_until(lambda c=each: c.received_keys() >= report.broadcast_keys, STEP, "every one")
            await a.stop()
            tail = [_message(self.broadcast, f"bcast-tail-{i}") for i in range(BROADCAST_TAIL)]
            report.broadcast_tail_keys = {m["keys"] for m in tail}
            await self._produce(producer, tail)
            await b.wait_until(lambda: b.received_keys() >= report.broadcast_tail_keys, STEP, "the tail")
            again = await self.session.agent("consumer", group, self.broadcast, "bcast-a", broadcast=1, home=homes["a"])
            restarted = again
            await again.wait_until(
                lambda: restarted.received_keys() >= report.broadcast_tail_keys, STEP, "the tail after restart"
            )
        finally:
            report.broadcast_a, report.broadcast_b = a.received, b.received
            if again is not None:
                report.broadcast_a_again = again.received
                await again.stop()
            await b.stop()
            await producer.stop()
        broker = self.session.broker
        async with Admin(broker.namesrv_addr) as admin:
            stats = await admin.consume_stats(group, broker_addr=broker.broker_addr)
        report.broadcast_broker_offsets = {mq.queue_id: o.consumer_offset for mq, o in stats.offset_table.items()}
        report.broadcast_offset_files = sorted(
            str(path) for home in homes.values() for path in Path(home).rglob("*") if path.is_file()
        )

    async def _settle_broadcast(self, producer: Agent, consumers: tuple[Agent, Agent]) -> None:
        """Probe rounds until each consumer received a probe from every queue: from then on both pull every queue
        (a new broadcasting consumer starts at the queue's end, so earlier messages are not for it)."""
        for round_no in range(30):
            probes = [_message(self.broadcast, f"probe{round_no}-{i}") for i in range(2 * BROADCAST_QUEUES)]
            await self._produce(producer, probes)
            try:
                # The clients rebalance on their own timers: a round that finds a consumer not pulling yet is retried.
                await consumers[0].wait_until(lambda: all(map(self._probed_every_queue, consumers)), 2.0, "probes")
            except ScenarioError:
                if not all(c.running for c in consumers):
                    raise
                continue
            return
        raise ScenarioError("the broadcasting consumers never pulled every queue")

    @staticmethod
    def _probed_every_queue(consumer: Agent) -> bool:
        return len({e["queueId"] for e in consumer.received if e["keys"].startswith("probe")}) == BROADCAST_QUEUES

    async def batch_scenario(self) -> None:
        """One SendBatchMessage of BATCH_SIZE messages with their own keys, tags and properties."""
        report = self.report
        consumer = await self.session.agent("consumer", "CG_pat_batch", self.batch, "batch")
        producer = await self.session.agent("producer", "PG_pat_batch")
        try:
            report.batch_expected = [
                {
                    "topic": self.batch,
                    "tags": f"TagB{i % 2}",
                    "keys": f"batch-{i:02d}",
                    "body": f"batch #{i} ✓" + ("w" * 5000 if i == 3 else ""),
                    "props": {"seq": str(i), "origin": "batch·é"},
                }
                for i in range(BATCH_SIZE)
            ]
            before = len(producer.of("sent"))
            await producer.command("produce_batch", STEP, messages=report.batch_expected)
            report.batch_sent = producer.of("sent")[before:]
            keys = {m["keys"] for m in report.batch_expected}
            await consumer.wait_until(lambda: consumer.received_keys() >= keys, STEP, "every batched message")
        finally:
            report.batch_received = consumer.received
            await producer.stop()
            await consumer.stop()

    async def big_retry_scenario(self) -> None:
        """A body past the compression threshold (and a small one) fails once in the listener and comes back from
        the retry topic intact."""
        consumer = await self.session.agent("consumer", "CG_pat_bigretry", self.big_retry, "bigretry", fail_times=1)
        producer = await self.session.agent("producer", "PG_pat_bigretry")
        try:
            await self._produce(
                producer, [_message(self.big_retry, "big-0", BIG_BODY), _message(self.big_retry, "small-0")]
            )

            def redelivered() -> bool:
                return {e["keys"] for e in consumer.received if not e.get("failed")} >= set(BIG_RETRY_KEYS)

            await consumer.wait_until(redelivered, STEP, "both redeliveries")
        finally:
            self.report.big_retry_received = consumer.received
            await producer.stop()
            await consumer.stop()


async def run_patterns(kind: ClientKind, work: Path) -> PatternsReport:
    """Play every pattern scenario ``kind`` supports under ``work``; never raises for a scenario failure."""
    patterns: Patterns | None = None
    try:
        with trio.move_on_after(PATTERNS_LIMIT) as scope:
            async with trio.open_nursery() as nursery:
                patterns = Patterns(kind, work, nursery)
                await patterns.run()
                nursery.cancel_scope.cancel()
        assert patterns is not None
        if scope.cancelled_caught:
            for name in ("setup", "broadcast", "big_retry", "orderly", "batch"):
                patterns.report.errors.setdefault(name, "the session ran out of time")
        for agent in patterns.session.agents:
            agent.dump_events(patterns.session.logs / f"{agent.name}.events.jsonl")
        return patterns.report
    finally:
        await kill_all()
