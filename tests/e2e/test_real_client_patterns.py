"""Usage patterns through the real clients (``patterns.py``): orderly sends and an orderly consumer's queue locks
(C++ core), broadcasting with local offsets (both), a batch send (C++ core) and a compressed body through the retry
path (both). One broker process per client kind; a missing client fails its tests, as in ``conftest.py``."""

from __future__ import annotations

from collections import defaultdict

import pytest
import trio

from tests.e2e.harness import CLIENT_KINDS, Event, require
from tests.e2e.patterns import (
    BIG_BODY,
    BIG_RETRY_KEYS,
    BROADCAST_QUEUES,
    ORDERLY_QUEUES,
    ORDERS,
    STEPS,
    PatternsReport,
    run_patterns,
)
from tests.e2e.scenarios import duplicates

pytestmark = pytest.mark.timeout(600)


@pytest.fixture(scope="module", params=sorted(CLIENT_KINDS))
def patterns(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> PatternsReport:
    kind = CLIENT_KINDS[request.param]
    require(kind)
    return trio.run(run_patterns, kind, tmp_path_factory.mktemp(f"e2e-patterns-{kind.name}"))


def _require(report: PatternsReport, scenario: str) -> None:
    failure = report.failure(scenario)
    if failure is not None:
        pytest.fail(failure, pytrace=False)


def _cpp_only(report: PatternsReport, what: str) -> None:
    if report.client == "ali-ons":
        pytest.skip(f"ali-ons 3.12 has no {what}")


def _steps_by_order(events: list[Event]) -> dict[str, list[int]]:
    out: dict[str, list[int]] = defaultdict(list)
    for e in events:
        out[e["props"]["origin"]].append(int(e["props"]["seq"]))
    return out


def test_orderly_sends_keep_each_order_on_one_queue(patterns: PatternsReport) -> None:
    _cpp_only(patterns, "queue selector nor sharding key")
    _require(patterns, "orderly")
    sent = patterns.orderly_sent
    assert len(sent) == ORDERS * STEPS and all(e["ok"] for e in sent)
    queues: dict[str, set[int]] = defaultdict(set)
    for e in patterns.orderly_first + patterns.orderly_second:
        queues[e["props"]["origin"]].add(e["queueId"])
    assert all(len(q) == 1 for q in queues.values()), dict(queues)
    # The selector sends order N to queue N % queues; a sharding key picks its queue by its hash.
    assert queues["order-0"] == {0} and queues["order-1"] == {1 % ORDERLY_QUEUES}, dict(queues)


def test_an_orderly_consumer_gets_each_queue_in_order_across_a_handover(patterns: PatternsReport) -> None:
    _cpp_only(patterns, "orderly consumer")
    _require(patterns, "orderly")
    first, second = _steps_by_order(patterns.orderly_first), _steps_by_order(patterns.orderly_second)
    for order in (f"order-{n}" for n in range(ORDERS)):
        for who, steps in (("first", first[order]), ("second", second[order])):
            assert steps == sorted(steps) and len(set(steps)) == len(steps), (who, order, steps)
        assert set(first[order]) | set(second[order]) == set(range(STEPS)), order
        # The second consumer starts where the first one's committed offset left the queue: no step is skipped,
        # none is delivered again (the first one committed everything it consumed when it stopped; a shutdown the
        # core aborted, harness.Agent.stop, lost that commit, and the second gets again what followed the last one).
        if not patterns.orderly_shutdown_aborted:
            assert not set(first[order]) & set(second[order]), order
    assert 0 < len(patterns.orderly_first) < ORDERS * STEPS, "the first consumer stopped midway"


def test_an_orderly_consumer_holds_its_queue_locks_until_it_stops(patterns: PatternsReport) -> None:
    _cpp_only(patterns, "orderly consumer")
    _require(patterns, "orderly")
    assert patterns.orderly_lockable_before == set(range(ORDERLY_QUEUES)), "the probe locks a free queue"
    assert patterns.orderly_lockable_while_held == set(), "another member locked a queue the consumer held"
    if patterns.orderly_shutdown_aborted:
        pytest.skip("the C++ core aborted in its own shutdown() (harness.Agent.stop), before its UNLOCK_BATCH_MQ")
    # The 2.1.0 core's UNLOCK_BATCH_MQ at shutdown leaves out the first queue of each broker (``Rebalance::unlockAll``
    # creates a broker's list without adding the queue that created it), which stays locked until the lock expires
    # (patterns.LOCK_MAX_LIVE_MS here, RocketMQ's 60 s by default); each queue it did name is free for another member
    # at once.
    unlocked = patterns.orderly_unlocked_by_client
    assert unlocked, "the core sent UNLOCK_BATCH_MQ at shutdown"
    assert patterns.orderly_lockable_after_stop == unlocked, (patterns.orderly_lockable_after_stop, unlocked)


def test_two_broadcasting_consumers_of_one_group_each_get_every_message(patterns: PatternsReport) -> None:
    _require(patterns, "broadcast")
    for name, events in (("a", patterns.broadcast_a), ("b", patterns.broadcast_b)):
        got = [e for e in events if e["keys"] in patterns.broadcast_keys]
        assert {e["keys"] for e in got} == patterns.broadcast_keys, name
        assert not duplicates(got), name
        assert {e["queueId"] for e in got} == set(range(BROADCAST_QUEUES)), name


def test_a_restarted_broadcasting_consumer_resumes_from_its_local_offsets(patterns: PatternsReport) -> None:
    _require(patterns, "broadcast")
    again = {e["keys"] for e in patterns.broadcast_a_again}
    assert again == patterns.broadcast_tail_keys, sorted(again)
    assert {e["keys"] for e in patterns.broadcast_b} >= patterns.broadcast_tail_keys
    assert patterns.broadcast_broker_offsets == {}, "a broadcasting group keeps its offsets on the client"
    assert any("CG_pat_bcast" in path for path in patterns.broadcast_offset_files), patterns.broadcast_offset_files


def test_a_batch_send_stores_every_message_intact_in_consecutive_offsets(patterns: PatternsReport) -> None:
    _cpp_only(patterns, "batch send")
    _require(patterns, "batch")
    (sent,) = patterns.batch_sent
    assert sent["ok"], sent
    by_key = {e["keys"]: e for e in patterns.batch_received}
    assert len(patterns.batch_received) == len(by_key) == len(patterns.batch_expected)
    for want in patterns.batch_expected:
        got = by_key[want["keys"]]
        assert (got["topic"], got["tags"], got["body"], got["props"]) == (
            want["topic"], want["tags"], want["body"], want["props"]
        ), want["keys"]  # fmt: skip
    offsets = [by_key[m["keys"]]["queueOffset"] for m in patterns.batch_expected]
    assert offsets == list(range(offsets[0], offsets[0] + len(offsets))), offsets
    assert len({e["msgId"] for e in patterns.batch_received}) == len(offsets)


def test_a_compressed_body_that_fails_once_comes_back_intact(patterns: PatternsReport) -> None:
    _require(patterns, "big_retry")
    by_key: dict[str, list[Event]] = defaultdict(list)
    for e in patterns.big_retry_received:
        by_key[e["keys"]].append(e)
    assert set(by_key) == set(BIG_RETRY_KEYS)
    for key, events in by_key.items():
        first, second = events[:2]
        assert (first.get("failed"), first["reconsumeTimes"]) == (True, 0), first
        assert (second.get("failed"), second["reconsumeTimes"]) == (None, 1), second
        assert first["body"] == second["body"], key
    assert by_key["big-0"][1]["body"] == BIG_BODY
