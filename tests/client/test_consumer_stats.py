"""The consume statistics' windows and figures (client/consumer/stats.py) against Java's StatsItem / StatsItemSet and
ConsumerStatsManager.consumeStatus formulas, on explicit loop times (the first record at 0 sets the ticks: every 10 s
for the minute window, every 600 s for the hour window)."""

from __future__ import annotations

import pytest

from client.consumer.stats import ConsumerStats


def test_minute_window_is_empty_until_the_first_tick_then_starts_one_period_back() -> None:
    stats = ConsumerStats()
    topic = stats.topic("g", "T", 0.0)
    topic.pulled(0.0, 100)
    topic.pulled(3.0, 300)
    topic.pulled_messages(3.0, 64)
    # No tick since the items were created: Java's empty window reads all zero.
    assert stats.status("g", "T", 9.9)["pullRT"] == 0.0
    # Tick at 10: a zero sample at 0 and (10, 2 calls, 400): avgpt 400 / 2, tps over the 10 s between them.
    status = stats.status("g", "T", 10.0)
    assert status["pullRT"] == 200.0
    assert status["pullTPS"] == pytest.approx(64 / 10)


def test_minute_window_spans_six_periods_and_slides() -> None:
    stats = ConsumerStats()
    topic = stats.topic("g", "T", 0.0)
    topic.consumed_ok(0.0, 30)
    topic.consumed_ok(15.0, 12)  # after tick 10, before tick 20
    topic.consumed_ok(65.0, 6)  # after tick 60
    # At 65 the window holds the zero sample at 0 and ticks 10..60: 42 messages over 60 s.
    assert stats.status("g", "T", 65.0)["consumeOKTPS"] == pytest.approx(42 / 60)
    # At 70 the zero sample slid out: ticks 10..70 saw 12 + 6 messages.
    assert stats.status("g", "T", 70.0)["consumeOKTPS"] == pytest.approx(18 / 60)
    # Long idle: every sample equal, nothing in the window.
    assert stats.status("g", "T", 500.0)["consumeOKTPS"] == 0.0


def test_an_item_created_later_starts_at_the_tick_before_it() -> None:
    stats = ConsumerStats()
    stats.topic("g", "T", 0.0).pulled(0.0, 1)  # sets the origin
    late = stats.topic("g", "T2", 25.0)
    late.consumed_failed(25.0, 5)
    # The item's first sample is tick 30, its zero sample tick 20: 5 messages over 10 s.
    assert stats.status("g", "T2", 30.0)["consumeFailedTPS"] == pytest.approx(0.5)
    # Java's window holds 7 samples: at 80 the zero sample at 20 and ticks 30..80.
    assert stats.status("g", "T2", 80.0)["consumeFailedTPS"] == pytest.approx(5 / 60)


def test_consume_rt_falls_back_to_the_hour_and_failed_msgs_are_the_hours_sum() -> None:
    stats = ConsumerStats()
    topic = stats.topic("g", "T", 0.0)
    for rt in (250, 250, 100):
        topic.consumed(1.0, rt)
    topic.consumed_failed(1.0, 3)
    topic.consumed_failed(2.0, 0)  # Java's concurrent success records 0 failed: a call, no message
    status = stats.status("g", "T", 30.0)
    assert status["consumeRT"] == 200.0
    assert status["consumeFailedTPS"] == pytest.approx(3 / 30)
    assert status["consumeFailedMsgs"] == 0  # no hour tick yet
    # At 600 the minute window has been idle for a minute: its RT sum is 0, so the hour window's average counts.
    status = stats.status("g", "T", 600.0)
    assert status["consumeRT"] == 200.0
    assert status["consumeFailedTPS"] == 0.0
    assert status["consumeFailedMsgs"] == 3
    # Seven hour samples: the zero one at 0 slides out at 4200, and the failures with it.
    assert stats.status("g", "T", 3600.0)["consumeFailedMsgs"] == 3
    assert stats.status("g", "T", 4200.0)["consumeFailedMsgs"] == 0
    assert stats.status("g", "T", 4200.0)["consumeRT"] == 0.0


def test_keys_are_per_group_and_topic_and_unknown_ones_read_zero() -> None:
    stats = ConsumerStats()
    stats.topic("g1", "T", 0.0).consumed_ok(0.0, 10)
    stats.topic("g2", "T", 0.0).consumed_ok(0.0, 20)
    assert stats.status("g1", "T", 10.0)["consumeOKTPS"] == pytest.approx(1.0)
    assert stats.status("g2", "T", 10.0)["consumeOKTPS"] == pytest.approx(2.0)
    assert stats.status("g3", "T", 10.0) == {
        "pullRT": 0.0,
        "pullTPS": 0.0,
        "consumeRT": 0.0,
        "consumeOKTPS": 0.0,
        "consumeFailedTPS": 0.0,
        "consumeFailedMsgs": 0,
    }


def test_a_clock_going_back_another_loops_starts_the_statistics_over() -> None:
    stats = ConsumerStats()
    stats.topic("g", "T", 5000.0).consumed_ok(5000.0, 10)
    stats.topic("g", "T", 100.0).consumed_ok(100.0, 4)  # an instance restarted under a new event loop
    assert stats.origin == 100.0
    assert stats.status("g", "T", 110.0)["consumeOKTPS"] == pytest.approx(0.4)


def test_a_clock_going_back_to_after_the_origin_starts_the_statistics_over() -> None:
    # The new loop's clock went back, but not before the first record: the items' next ticks lie ahead in the old
    # clock, so unless the statistics start over their windows stay frozen until the new clock reaches them.
    stats = ConsumerStats()
    stats.topic("g", "T", 100.0).consumed_ok(100.0, 10)
    stats.topic("g", "T", 5000.0).consumed_ok(5000.0, 10)
    stats.topic("g", "T", 1000.0).consumed_ok(1000.0, 4)  # an instance restarted under a new event loop
    assert stats.origin == 1000.0
    assert stats.status("g", "T", 1010.0)["consumeOKTPS"] == pytest.approx(0.4)


def test_a_reading_on_a_clock_gone_back_shows_nothing_of_the_old_clocks_figures() -> None:
    stats = ConsumerStats()
    stats.topic("g", "T", 5000.0).consumed_ok(5000.0, 10)
    assert stats.status("g", "T", 5010.0)["consumeOKTPS"] == pytest.approx(1.0)
    # Restarted under a new event loop that consumes nothing: a minute later its figures are not the old loop's.
    assert stats.status("g", "T", 100.0)["consumeOKTPS"] == 0.0
    assert stats.status("g", "T", 170.0)["consumeOKTPS"] == 0.0
