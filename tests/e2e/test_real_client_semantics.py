"""Message semantics through the real clients (ali-ons, the C++ core): delay levels, send-back retries, transactions
with check-back (C++ only) and queries, asserted on the session the ``session`` fixture played (see ``semantics.py`` for
what each client's API offers)."""

from __future__ import annotations

import pytest

from tests.e2e.harness import Event
from tests.e2e.scenarios import SessionReport
from tests.e2e.semantics import (
    DELAY_LEVELS,
    FIRST_RETRY_DELAY_MS,
    QUERY_SAMPLES,
    RETRY_KEYS,
    TX_CASES,
    TX_SENTINEL,
)
from tests.e2e.test_real_clients import _require

pytestmark = pytest.mark.timeout(600)


def _by_key(events: list[Event]) -> dict[str, list[Event]]:
    out: dict[str, list[Event]] = {}
    for e in events:
        out.setdefault(str(e["keys"]), []).append(e)
    return out


def test_delay_levels_sent_by_a_real_producer_arrive_after_their_delay_not_at_once(session: SessionReport) -> None:
    _require(session, "delay")
    report = session.semantics
    sent = {e["key"]: e for e in report.delay_sent}
    received = _by_key(report.delay_received)
    assert set(received) == {"delay-0", *(f"delay-{level}" for level in DELAY_LEVELS)}
    for level, delay_ms in DELAY_LEVELS.items():
        (got,) = received[f"delay-{level}"]
        # Lower bounds only: the schedule re-stores the message when due, so its store time trails its birth.
        assert int(got["storeTs"]) - int(got["bornTs"]) >= delay_ms, (level, got)
        assert int(got["recvTs"]) - int(sent[f"delay-{level}"]["sendTs"]) >= delay_ms, level
    topic = f"e2e_{session.client.replace('-', '_')}_delay"
    assert {e["topic"] for e in report.delay_received} == {topic}, "delivered to the real topic"
    (plain,) = received["delay-0"]
    last = received[f"delay-{max(DELAY_LEVELS)}"][0]
    assert int(plain["recvTs"]) <= int(last["recvTs"])


def test_a_failing_listener_gets_the_message_back_through_the_retry_topic_with_a_higher_reconsume_count(
    session: SessionReport,
) -> None:
    _require(session, "retry")
    report = session.semantics
    received = _by_key(report.retry_received)
    assert set(received) == set(RETRY_KEYS)
    for key in RETRY_KEYS:
        first, second = received[key][:2]
        assert (first.get("failed"), first["reconsumeTimes"]) == (True, 0), first
        assert (second.get("failed"), second["reconsumeTimes"]) == (None, 1), second
        assert second["topic"] == first["topic"], "the client restores the original topic"
        assert second["body"] == first["body"]
        # The first send-back waits in delay level 3 (10 s) before the retry topic receives it.
        assert int(second["recvTs"]) - int(first["recvTs"]) >= FIRST_RETRY_DELAY_MS, key
        stored = report.retry_stored.get(key)
        assert stored is not None, f"no copy of {key} in the group's retry topic"
        assert stored["topic"] == "%RETRY%CG_e2e_retry"
        assert stored["RETRY_TOPIC"] == first["topic"]
        assert stored.get("ORIGIN_MESSAGE_ID")


def _require_transactions(session: SessionReport) -> None:
    if session.client == "ali-ons":
        pytest.skip("ali-ons 3.12 has no transactional producer: it never sends END_TRANSACTION nor answers checks")
    _require(session, "transaction")


def test_real_transactional_producer_commits_and_rolls_back(session: SessionReport) -> None:
    _require_transactions(session)
    report = session.semantics
    executed = {e["key"]: e["answer"] for e in report.tx_producer if e.get("ev") == "tx_execute"}
    assert executed == {key: execute for key, (execute, _check) in {**TX_CASES, TX_SENTINEL: ("commit", "")}.items()}
    keys = [e["keys"] for e in report.tx_received]
    assert sorted(keys) == sorted(["tx-commit", "tx-check-commit", TX_SENTINEL]), keys
    assert "tx-rollback" not in keys and "tx-check-rollback" not in keys


def test_unknown_outcomes_are_resolved_by_the_brokers_check_back_answered_by_the_client(session: SessionReport) -> None:
    _require_transactions(session)
    report = session.semantics
    checks = [e for e in report.tx_producer if e.get("ev") == "tx_check"]
    asked = {e["key"] for e in checks}
    unknown = {"tx-check-commit", "tx-check-rollback"}
    # The unknown ones are asked (decided ones only if a check overtook the producer's own END_TRANSACTION); the
    # client's answer (commit / rollback) decides their fate.
    assert asked >= unknown, checks
    first_checks = {e["key"]: e["checkTimes"] for e in reversed(checks) if e["key"] in unknown}
    assert first_checks == {"tx-check-commit": "1", "tx-check-rollback": "1"}, checks
    sent = {e["key"]: e["msgId"] for e in report.tx_producer if e.get("ev") == "sent"}
    assert {e["key"]: e["msgId"] for e in checks} == {k: sent[k] for k in asked}
    received = {e["keys"] for e in report.tx_received}
    assert "tx-check-commit" in received and "tx-check-rollback" not in received


def test_messages_of_a_real_producer_are_found_by_key_by_their_send_id_and_by_offset_msg_id(
    session: SessionReport,
) -> None:
    _require(session, "query")
    queries = session.semantics.queries
    assert len(queries) == QUERY_SAMPLES
    for q in queries:
        want = session.expected[q.key]
        (by_key,) = q.by_key
        (by_client_id,) = q.by_client_id
        (by_offset_id,) = q.by_offset_id
        got = (by_client_id["Topic"], by_client_id["Keys"], by_client_id["Body"])
        assert got == (want["topic"], [q.key], want["body"]), q
        assert by_client_id == by_offset_id, q
        assert by_key == {"Message ID": by_client_id["MsgId"], "QID": by_client_id["QueueId"],
                          "Offset": by_client_id["QueueOffset"]}, q  # fmt: skip


def test_the_cpp_clients_traces_are_decoded_by_query_msg_trace_by_id(session: SessionReport) -> None:
    if session.client == "ali-ons":
        pytest.skip("ali-ons 3.12 writes no message trace")
    _require(session, "trace")
    records = session.semantics.trace
    pubs = [r for r in records if r["type"] == "Pub"]
    subs = [r for r in records if r["type"] == "SubAfter"]
    assert [(r["group"], r["status"]) for r in pubs] == [("PG_e2e_trace", "success")], records
    # The C++ SubAfter record names no group; the view takes it from the SubBefore of the same request.
    assert [(r["group"], r["status"]) for r in subs] == [("CG_e2e_trace", "success")], records
    assert all(r["clientHost"] == "127.0.0.1" for r in records)  # the born IP, as Java's TraceView shows it
