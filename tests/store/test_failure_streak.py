"""FailureStreak: the first failure of a streak and the success that ends it are the ones to log."""

from __future__ import annotations

from store.failure_streak import FailureStreak


def test_a_streak_logs_its_first_failure_and_the_success_that_ends_it() -> None:
    streak = FailureStreak()
    assert not streak.succeeded()  # no streak to end yet
    assert [streak.failed(), streak.failed(), streak.failed()] == [True, False, False]
    assert streak.failing
    assert streak.succeeded()
    assert not streak.succeeded()
    assert not streak.failing
    assert streak.failed()  # a new streak is logged again
