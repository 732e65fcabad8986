"""Real RocketMQ clients (ali-ons over node, the Apache C++ core via rocketmq-python-cvs) against the embedded broker,
unchanged (docs/protocol.md#9-real-clients). Each test asserts one behaviour of the session the ``session`` fixture
played."""

from __future__ import annotations

from collections import defaultdict

import pytest

from tests.e2e.scenarios import (
    LATENCY_BOUND_MS,
    LATENCY_SAMPLES,
    RESUME_STOP_AFTER,
    TOTAL,
    SessionReport,
    SplitOutcome,
    duplicates,
    mismatches,
)

# The session runs once per client and takes about a minute; its own bound is scenarios.SESSION_LIMIT.
pytestmark = pytest.mark.timeout(600)


def _require(session: SessionReport, scenario: str) -> None:
    failure = session.failure(scenario)
    if failure is not None:
        extra = "".join(f"\n{name}: {errs[:5]}" for name, errs in session.client_errors.items())
        pytest.fail(failure + extra, pytrace=False)


def _main_keys(session: SessionReport) -> set[str]:
    return {k for k in session.expected if k.startswith("m-")}


def test_producer_sends_1000_messages_with_tags_and_keys_all_succeed(session: SessionReport) -> None:
    _require(session, "setup")
    assert len(session.sent) == TOTAL
    failed = [e for e in session.sent if not e.get("ok")]
    assert not failed, f"{len(failed)} sends failed, first: {failed[:3]}"
    assert {e["key"] for e in session.sent} == _main_keys(session)
    assert all(e.get("msgId") for e in session.sent), "every send result carries a msgId"
    assert not session.send_retries, f"first attempts failed and were retried by the client: {session.send_retries[:3]}"


def test_push_consumer_receives_each_message_exactly_once_intact(session: SessionReport) -> None:
    _require(session, "once")
    main = [e for e in session.once if e["keys"].startswith("m-")]
    assert not duplicates(main), f"delivered more than once: {list(duplicates(main).items())[:10]}"
    assert {e["keys"] for e in main} == _main_keys(session)
    bad = mismatches(session, main)
    assert not bad, f"{len(bad)} messages altered, first: {bad[:3]}"


def test_send_results_name_the_id_and_queue_position_the_consumer_sees(session: SessionReport) -> None:
    _require(session, "once")
    sent = {e["key"]: e for e in session.sent}
    wrong = []
    for got in session.once:
        result = sent.get(got["keys"])
        if result is None:
            continue
        claimed = (result["msgId"], result.get("queueId", got["queueId"]), result["queueOffset"])
        seen = (got["msgId"], got["queueId"], got["queueOffset"])
        if claimed != seen:
            wrong.append(f"{got['keys']}: send said {claimed}, consumer saw {seen}")
    assert not wrong, f"{len(wrong)} send results disagree with the stored messages, first: {wrong[:3]}"


def test_broker_killed_between_produce_and_consume_loses_nothing(session: SessionReport) -> None:
    _require(session, "once")
    # Every acknowledged send was fsynced (SYNC_FLUSH) before the SIGKILL, so all of it is consumable afterwards.
    acked = {e["key"] for e in session.sent if e.get("ok")}
    lost = acked - {e["keys"] for e in session.once}
    assert not lost, f"{len(lost)} acknowledged messages lost across the restart, e.g. {sorted(lost)[:10]}"


def test_restarted_consumer_resumes_from_committed_offsets(session: SessionReport) -> None:
    _require(session, "resume")
    first = {e["keys"] for e in session.resume_first}
    second = {e["keys"] for e in session.resume_second}
    assert RESUME_STOP_AFTER <= len(first) < TOTAL, "the first consumer stopped midway"
    assert first | second >= _main_keys(session), "nothing is lost between the two consumers"
    # Resuming from zero would redeliver all of `first`; committed offsets leave at most in-flight messages.
    again = first & second
    assert len(again) <= 32 * 4, f"{len(again)} of {len(first)} consumed messages delivered again after restart"


def test_restarted_consumer_gets_only_messages_sent_after_it_stopped(session: SessionReport) -> None:
    _require(session, "once_restart")
    keys = [e["keys"] for e in session.once_restarted]
    assert set(keys) == session.once_tail_keys, f"expected only the tail, got {sorted(set(keys))[:20]}"
    assert not duplicates(session.once_restarted)
    assert not mismatches(session, session.once_restarted)


def test_two_consumers_in_one_group_split_the_queues(session: SessionReport) -> None:
    _require(session, "split")
    split = session.split
    owners: dict[int, set[str]] = defaultdict(set)
    for who, events in (("leaver", split.leaver), ("survivor", split.survivor)):
        for e in events:
            if e["keys"] in split.batch1:
                owners[e["queueId"]].add(who)
    assert set().union(*owners.values()) == {"leaver", "survivor"}, f"both consumers get queues: {dict(owners)}"
    shared = {q: o for q, o in owners.items() if len(o) > 1}
    assert not shared, f"queues consumed by both consumers at once: {shared}"
    batch1 = [e for e in split.leaver + split.survivor if e["keys"] in split.batch1]
    assert {e["keys"] for e in batch1} == split.batch1
    assert not duplicates(batch1)


def _assert_takeover_without_loss(split: SplitOutcome) -> None:
    after = {e["keys"] for e in split.survivor[split.survivor_before_leave :]}
    missing = split.batch2 - after
    assert not missing, f"{len(missing)} messages sent after the other consumer left never arrived"
    everything = {e["keys"] for e in split.leaver + split.survivor}
    assert everything >= split.batch1 | split.batch2
    batch2 = [e for e in split.survivor if e["keys"] in split.batch2]
    assert {e["queueId"] for e in batch2} == {0, 1, 2, 3}, "the survivor consumes every queue"


def test_remaining_consumer_takes_over_the_queues_of_one_that_left_without_loss(session: SessionReport) -> None:
    _require(session, "split")
    _assert_takeover_without_loss(session.split)


def test_consumer_killed_without_unregistering_is_dropped_and_replaced_without_loss(session: SessionReport) -> None:
    # The broker forgets a client whose connection closed, so the group rebalances without waiting 120 s.
    _require(session, "crash")
    _assert_takeover_without_loss(session.crash)


def test_message_sent_during_a_held_pull_is_delivered_long_before_the_hold_expires(session: SessionReport) -> None:
    _require(session, "latency")
    assert len(session.latency_ms) == LATENCY_SAMPLES
    assert max(session.latency_ms) < LATENCY_BOUND_MS, f"send -> receive took {session.latency_ms} ms"
