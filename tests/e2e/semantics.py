"""Message semantics through the real clients: delay levels, send-back retries, transactions with check-back and
queries, played inside the session of ``scenarios.py`` (same broker, concurrently with its conformance scenarios).

What each client offers, read from the installed packages:

- C++ core (rocketmq-python-cvs 2.1.0): delay levels (``Message.set_delay_time_level``); RECONSUME_LATER through the C
  API (the wrapper turns a raising callback into CONSUME_SUCCESS); a transactional producer only in the C API
  (``CreateTransactionProducer`` / ``SendMessageTransaction``, driven by ``cpp/agent.py txproducer``). No query or
  view-by-id call at all (the library exports none). Its send result's msgId is the client's unique id (UNIQ_KEY).
- ali-ons 3.12: delay levels (``Message#delayTimeLevel``); a throwing handler is sent back with
  CONSUMER_SEND_MSG_BACK. No transactional producer: it can mark a half message (``TRAN_MSG``) but never sends
  END_TRANSACTION nor answers CHECK_TRANSACTION_STATE. ``viewMessage`` is commented out in its sources; no
  ``queryMessage``. Its send result's msgId is the broker's offset msgId.

So queries go through our ``mqadmin`` on the ids the real producers returned: ``queryMsgById`` for an offset msgId,
``queryMsgByKey`` for keys, ``queryMsgByUniqueKey`` for a unique id, then ``queryMsgById`` again on the offset msgId
the broker listed.

Message trace: the C++ core writes traces when switched on (``SetProducerMessageTrace`` /
``SetPushConsumerMessageTrace``; ``cpp/agent.py --trace 1`` and every C++ consumer here), ali-ons has none.

The broker runs with ``transactionCheckInterval`` and ``transactionTimeOut`` of 1 s (see ``cluster.py``), so a
check-back happens within seconds; retries use RocketMQ's schedule (first retry: level 3, 10 s).
"""

from __future__ import annotations

import json
import sys
from typing import TYPE_CHECKING, Any

import attrs
import trio

from client.admin import Admin
from client.errors import MQClientError
from tests.e2e.harness import Agent, Event, ScenarioError

if TYPE_CHECKING:
    from tests.e2e.scenarios import Session

STEP = 90.0
#: Delay levels sent by the real producers (RocketMQ's default table: level 1 = 1 s, level 2 = 5 s).
DELAY_LEVELS = {1: 1000, 2: 5000}
#: The first send-back goes to delay level 3 + 0 reconsumes = 10 s.
FIRST_RETRY_DELAY_MS = 10_000
RETRY_KEYS = ("retry-0", "retry-1")
#: key -> (what the local transaction answers, what the check-back answers). A decided transaction answers its
#: checks the same way, as a real application would: on a loaded machine a half message can be checked before the
#: producer's own END_TRANSACTION arrives (it is checkable once it is ``transactionTimeOut`` old, counted from its
#: birth on the client), and either answer must then decide the same outcome.
TX_CASES = {
    "tx-commit": ("commit", "commit"),
    "tx-rollback": ("rollback", "rollback"),
    "tx-check-commit": ("unknown", "commit"),
    "tx-check-rollback": ("unknown", "rollback"),
}
TX_SENTINEL = "tx-sentinel"
QUERY_SAMPLES = 3


@attrs.define
class QueryOutcome:
    """One message a real producer sent, looked up through ``mqadmin``: rows as printed with ``--json``."""

    key: str
    client_msg_id: str
    by_key: list[dict[str, Any]] = attrs.field(factory=list)
    by_client_id: list[dict[str, Any]] = attrs.field(factory=list)
    by_offset_id: list[dict[str, Any]] = attrs.field(factory=list)


@attrs.define
class SemanticsReport:
    delay_sent: list[Event] = attrs.field(factory=list)
    delay_received: list[Event] = attrs.field(factory=list)
    retry_received: list[Event] = attrs.field(factory=list)
    retry_stored: dict[str, dict[str, str]] = attrs.field(factory=dict)
    tx_producer: list[Event] = attrs.field(factory=list)
    tx_received: list[Event] = attrs.field(factory=list)
    queries: list[QueryOutcome] = attrs.field(factory=list)
    trace_msg_id: str = ""
    trace: list[dict[str, Any]] = attrs.field(factory=list)


def _message(topic: str, key: str, **extra: Any) -> Event:
    return {"topic": topic, "tags": "TagS", "keys": key, "body": f"{key} body ✓", "props": {}, **extra}


async def _produce(producer: Agent, messages: list[Event]) -> list[Event]:
    sent = await producer.produce(messages, timeout=60)
    failed = [e for e in sent if not e.get("ok")]
    if failed:
        raise ScenarioError(f"{len(failed)} sends failed, first: {failed[0]}")
    return sent


def _received_ok(agent: Agent, keys: set[str]) -> bool:
    return {e["keys"] for e in agent.received if not e.get("failed")} >= keys


async def delay_scenario(session: Session) -> None:
    """One message per delay level and one without, from the real producer to the real consumer."""
    report = session.report.semantics
    consumer = await session.agent("consumer", "CG_e2e_delay", session.delay, "delay")
    producer = await session.agent("producer", "PG_e2e_delay")
    try:
        messages = [_message(session.delay, "delay-0")]
        messages += [_message(session.delay, f"delay-{level}", delayLevel=level) for level in DELAY_LEVELS]
        report.delay_sent = await _produce(producer, messages)
        keys = {m["keys"] for m in messages}
        await consumer.wait_until(lambda: _received_ok(consumer, keys), STEP, "every delayed message")
    finally:
        report.delay_received = consumer.received
        await producer.stop()
        await consumer.stop()


async def retry_scenario(session: Session) -> None:
    """A consumer whose listener fails the first delivery: the client sends the message back and receives it again
    from its retry topic. The broker's copy in ``%RETRY%group`` is looked up by key."""
    report = session.report.semantics
    group = "CG_e2e_retry"
    consumer = await session.agent("consumer", group, session.retry, "retry", fail_times=1)
    producer = await session.agent("producer", "PG_e2e_retry")
    try:
        await _produce(producer, [_message(session.retry, key) for key in RETRY_KEYS])
        await consumer.wait_until(lambda: _received_ok(consumer, set(RETRY_KEYS)), STEP, "the redeliveries")
    finally:
        report.retry_received = consumer.received
        await producer.stop()
        await consumer.stop()
    async with Admin(session.broker.namesrv_addr) as admin:
        for key in RETRY_KEYS:
            stored = await admin.query_msg_by_key(f"%RETRY%{group}", key)
            if stored:
                report.retry_stored[key] = {**stored[0].properties, "topic": stored[0].topic}


async def transaction_scenario(session: Session) -> None:
    """The C++ transactional producer: commit, rollback, and two unknown outcomes resolved by the broker's check-back
    (one to commit, one to rollback). A committed sentinel sent after every resolution closes the one-queue topic:
    once it arrives, nothing resolved before it can still appear."""
    report = session.report.semantics
    consumer = await session.agent("consumer", "CG_e2e_tx", session.tx, "tx")
    producer = await session.agent("txproducer", "PG_e2e_tx")
    try:
        messages = {
            key: _message(session.tx, key, props={"txExecute": execute, "txCheck": check})
            for key, (execute, check) in TX_CASES.items()
        }
        await _produce(producer, [messages["tx-commit"], messages["tx-rollback"]])
        # The C++ core heartbeats (registering its producer group, the only way the broker finds whom to ask) at start,
        # when it knows no broker yet, and then every 30 s: unknown outcomes wait for it, or they would use up their
        # checks (15, one per second here) before anyone could answer.
        await _wait_for_producer(session, "PG_e2e_tx")
        await _produce(producer, [messages["tx-check-commit"], messages["tx-check-rollback"]])

        def checked() -> bool:
            return {e["key"] for e in producer.of("tx_check")} >= {"tx-check-commit", "tx-check-rollback"}

        await producer.wait_until(checked, STEP, "check-backs of both unknown transactions")
        await consumer.wait_until(lambda: _received_ok(consumer, {"tx-commit", "tx-check-commit"}), STEP, "commits")
        await _produce(
            producer, [_message(session.tx, TX_SENTINEL, props={"txExecute": "commit", "txCheck": "commit"})]
        )
        await consumer.wait_until(lambda: _received_ok(consumer, {TX_SENTINEL}), STEP, "the sentinel")
    finally:
        report.tx_producer = list(producer.events)
        report.tx_received = consumer.received
        await producer.stop()
        await consumer.stop()


async def _wait_for_producer(session: Session, group: str) -> None:
    """Poll GET_PRODUCER_CONNECTION_LIST until the broker lists a producer of ``group``."""
    async with Admin(session.broker.namesrv_addr) as admin:
        with trio.move_on_after(STEP):
            while True:
                try:
                    if (await admin.producer_connection(group, session.tx)).connection_set:
                        return
                except MQClientError:
                    pass
                # The client heartbeats on its own timer; re-ask shortly.
                await trio.sleep(0.5)
    raise ScenarioError(f"producer group {group} never registered within {STEP:.0f}s")


async def _mqadmin(*args: str) -> dict[str, Any]:
    """``python -m client.mqadmin --json <args>``: the printed JSON document (rows, messages, lines...)."""
    argv = [sys.executable, "-m", "client.mqadmin", "--json", *args]
    done = await trio.run_process(argv, capture_stdout=True, capture_stderr=True, check=False)
    if done.returncode != 0:
        raise ScenarioError(f"mqadmin {' '.join(args)} failed: {done.stderr.decode(errors='replace')[-500:]}")
    doc: dict[str, Any] = json.loads(done.stdout)
    return doc


async def query_scenario(session: Session) -> None:
    """Look up the first messages of the setup's producer (sent before the broker was SIGKILLed and restarted):
    by key, by the id the send returned (``queryMsgById`` for ali-ons' offset msgId, ``queryMsgByUniqueKey`` for the
    C++ core's unique id), then by the offset msgId that lookup printed."""
    namesrv = session.broker.namesrv_addr
    offset_ids = session.kind.name == "ali-ons"
    for sent in session.report.sent[:QUERY_SAMPLES]:
        outcome = QueryOutcome(sent["key"], sent["msgId"])
        session.report.semantics.queries.append(outcome)
        by_key = await _mqadmin("queryMsgByKey", "-n", namesrv, "-t", session.main, "-k", sent["key"])
        outcome.by_key = by_key.get("rows", [])
        if offset_ids:
            found = await _mqadmin("queryMsgById", "-n", namesrv, "-i", sent["msgId"])
        else:
            found = await _mqadmin("queryMsgByUniqueKey", "-n", namesrv, "-t", session.main, "-i", sent["msgId"])
        outcome.by_client_id = found.get("messages", [])
        if outcome.by_client_id:
            offset_id = outcome.by_client_id[0]["OffsetID"]
            again = await _mqadmin("queryMsgById", "-n", namesrv, "-i", offset_id)
            outcome.by_offset_id = again.get("messages", [])


async def trace_scenario(session: Session) -> None:
    """The C++ core with message trace on at both ends: its producer writes a Pub record, its consumer SubBefore and
    SubAfter records (to its own ``rmq_sys_TRACE_DATA_<region>`` topics, in its own shorter encoding); our
    ``mqadmin queryMsgTraceById`` finds and decodes them by the id the send returned."""
    report = session.report.semantics
    consumer = await session.agent("consumer", "CG_e2e_trace", session.trace, "trace")
    producer = await session.agent("producer", "PG_e2e_trace", trace=1)
    try:
        (sent,) = await _produce(producer, [_message(session.trace, "trace-0")])
        await consumer.wait_until(lambda: _received_ok(consumer, {"trace-0"}), STEP, "the traced message")
        report.trace_msg_id = sent["msgId"]
        with trio.move_on_after(STEP):
            while True:
                try:
                    doc = await _mqadmin("queryMsgTraceById", "-n", session.broker.namesrv_addr, "-i", sent["msgId"])
                except ScenarioError as exc:
                    if "but no message." not in str(exc):
                        raise
                    doc = {}  # no trace message indexed yet: the command fails, as Java's
                report.trace = doc.get("records", [])
                if {"Pub", "SubAfter"} <= {r["type"] for r in report.trace}:
                    return
                await trio.sleep(1)
        raise ScenarioError(f"no Pub and SubAfter records for {sent['msgId']} within {STEP:.0f}s: {report.trace}")
    finally:
        await producer.stop()
        await consumer.stop()
