"""RocketMQ's "stats items" (``StatsItem`` / ``StatsItemSet``): a running total and a call count per key, sampled
into three sliding windows from which a sum, a rate and an average per call are read.

The windows are Java's: every 10 s into the *minute* window (7 samples, so it spans 60 s), every 10 min into the
*hour* window (7 samples) and every hour into the *day* window (25 samples). An empty window first gets a zero sample
one period back, so the first reading already covers one period, as in Java. The owner
(:class:`~broker.stats.manager.BrokerStatsManager`) calls the ``sample_*`` methods from its background task; the hot
path only adds to ``value`` and ``times``. Times are milliseconds of the owner's clock (virtual time in tests).

Single-threaded (the Trio thread): no locks. Nothing here raises.
"""

from __future__ import annotations

import collections
from collections.abc import Callable, Iterator
from typing import Final

import attrs

MINUTE_PERIOD_MS: Final = 10_000
HOUR_PERIOD_MS: Final = 600_000
DAY_PERIOD_MS: Final = 3_600_000

#: (timestamp ms, times, value)
_Sample = tuple[int, int, int]


@attrs.frozen
class StatsSnapshot:
    """A window's reading: ``total`` added over the window, ``tps`` per second, ``avgpt`` = total per call."""

    total: int = 0
    tps: float = 0.0
    avgpt: float = 0.0
    times: int = 0


def _window(maxlen: int) -> collections.deque[_Sample]:
    return collections.deque(maxlen=maxlen)


class StatsItem:
    """One key's counters and windows. ``value`` and ``times`` are public on purpose: the hot path adds to them."""

    __slots__ = ("_day", "_hour", "_minute", "key", "times", "value")

    def __init__(self, key: str) -> None:
        self.key = key
        self.value = 0
        self.times = 0
        self._minute = _window(7)
        self._hour = _window(7)
        self._day = _window(25)

    def add(self, value: int, times: int = 1) -> None:
        self.value += value
        self.times += times

    def _sample(self, window: collections.deque[_Sample], now_ms: int, period_ms: int) -> None:
        if not window:
            window.append((now_ms - period_ms, 0, 0))
        window.append((now_ms, self.times, self.value))

    def sample_seconds(self, now_ms: int) -> None:
        self._sample(self._minute, now_ms, MINUTE_PERIOD_MS)

    def sample_minutes(self, now_ms: int) -> None:
        self._sample(self._hour, now_ms, HOUR_PERIOD_MS)

    def sample_hour(self, now_ms: int) -> None:
        self._sample(self._day, now_ms, DAY_PERIOD_MS)

    def in_minute(self) -> StatsSnapshot:
        return _compute(self._minute)

    def in_hour(self) -> StatsSnapshot:
        return _compute(self._hour)

    def in_day(self) -> StatsSnapshot:
        return _compute(self._day)


def _compute(window: collections.deque[_Sample]) -> StatsSnapshot:
    """Java's ``computeStatsData``: first and last sample of the window."""
    if not window:
        return StatsSnapshot()
    first_ts, first_times, first_value = window[0]
    last_ts, last_times, last_value = window[-1]
    total = last_value - first_value
    span = last_ts - first_ts
    tps = total * 1000.0 / span if span > 0 else 0.0
    times = last_times - first_times
    return StatsSnapshot(total, tps, total / times if times > 0 else 0.0, times)


class StatsItemSet:
    """The items of one statistic (``TOPIC_PUT_NUMS``, ``GROUP_GET_NUMS``...) by key (``topic``, ``topic@group``)."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.items: dict[str, StatsItem] = {}

    def get(self, key: str) -> StatsItem | None:
        return self.items.get(key)

    def get_or_create(self, key: str) -> StatsItem:
        item = self.items.get(key)
        if item is None:
            item = self.items[key] = StatsItem(key)
        return item

    def __iter__(self) -> Iterator[StatsItem]:
        return iter(list(self.items.values()))

    def delete_where(self, keep: Callable[[str], bool]) -> None:
        """Drop the items whose key ``keep`` refuses (Java's ``delValueBy*Key`` after a topic or group deletion)."""
        for key in [k for k in self.items if not keep(k)]:
            del self.items[key]
