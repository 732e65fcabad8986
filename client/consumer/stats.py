"""A client instance's consume statistics (Java's ``ConsumerStatsManager``, client/src/main/java/org/apache/rocketmq/
client/stat/, over the ``StatsItemSet`` windows of common/src/main/java/org/apache/rocketmq/common/stats/), reported
per subscribed topic in GET_CONSUMER_RUNNING_INFO's ``statusTable`` (Java's ``ConsumeStatus``).

Per key ``(group, topic)`` (Java's ``topic@group``) five items, each a running ``value`` and call count ``times``:
pull RT (ms per FOUND pull), pull TPS (messages per non-empty FOUND pull), consume RT (ms per listener call),
consume OK TPS and consume failed TPS (messages per listener call). Each item is sampled into Java's windows: every
10 s into the *minute* window (7 samples, 60 s) and every 10 min into the *hour* window (7 samples); an empty window
first gets a zero sample one period back. A reading takes a window's first and last sample: ``sum`` = value added,
``tps`` = sum per second between them, ``avgpt`` = sum per call. ``consumeRT`` falls back to the hour window when the
minute window's sum is 0, and ``consumeFailedMsgs`` is the hour window's failed sum, as Java's ``consumeStatus``.

Sampling is lazy: an item samples the ticks that passed (times ``origin + k * period`` of the loop's clock, the
origin being the instance's first record) when it is next added to or read, with the counters it holds then, which
are the counters it held at those ticks since nothing was added in between. So there is no timer task, and virtual
time drives the windows in tests. As in Java an item is created by its first record and first sampled at the next
tick after that. The day window and the periodic log lines of Java's items are not kept.

Ownership: :class:`~client.instance.MQClientInstance` holds one :class:`ConsumerStats`; the push consumer's pull loop
and consume services and the lite pull consumer's pull loop record into it on the event loop's thread, the running
info reads it there (no locks). Callers pass the loop's current time in seconds, which they already read. Nothing
here raises.
"""

from __future__ import annotations

import collections
import math
from typing import Final

#: Sampling periods of the minute and hour windows (Java: 10 s and 10 min) and their sample counts (7 each).
MINUTE_PERIOD: Final = 10.0
HOUR_PERIOD: Final = 600.0
WINDOW_SAMPLES: Final = 7

#: (loop time s, times, value)
_Sample = tuple[float, int, int]


class Snapshot:
    """A window's reading (Java's ``StatsSnapshot``): ``sum`` over the window, ``tps`` per second, ``avgpt`` per
    call, ``times`` calls."""

    __slots__ = ("avgpt", "sum", "times", "tps")

    def __init__(self, total: int = 0, tps: float = 0.0, avgpt: float = 0.0, times: int = 0) -> None:
        self.sum, self.tps, self.avgpt, self.times = total, tps, avgpt, times


_EMPTY: Final = Snapshot()


def _read(window: collections.deque[_Sample]) -> Snapshot:
    """Java's ``StatsItem.computeStatsData``: from the window's first to its last sample."""
    if not window:
        return _EMPTY
    first_ts, first_times, first_value = window[0]
    last_ts, last_times, last_value = window[-1]
    total = last_value - first_value
    span = last_ts - first_ts
    times = last_times - first_times
    return Snapshot(total, total / span if span > 0 else 0.0, total / times if times > 0 else 0.0, times)


class StatsItem:
    """One statistic of one key: ``value`` and ``times`` with their minute and hour windows (see the module
    docstring). ``origin`` is the owner's first tick; the item's first sample is the first tick after ``now``."""

    __slots__ = ("_hour", "_hour_tick", "_minute", "_minute_tick", "_origin", "due", "times", "value")

    def __init__(self, origin: float, now: float) -> None:
        self.value = 0
        self.times = 0
        self._origin = origin
        self._minute: collections.deque[_Sample] = collections.deque(maxlen=WINDOW_SAMPLES)
        self._hour: collections.deque[_Sample] = collections.deque(maxlen=WINDOW_SAMPLES)
        #: the last tick of each window already behind the item (sampled, or passed before it existed)
        self._minute_tick = math.floor((now - origin) / MINUTE_PERIOD)
        self._hour_tick = math.floor((now - origin) / HOUR_PERIOD)
        #: loop time of the next minute tick (every hour tick is a minute tick too)
        self.due = origin + (self._minute_tick + 1) * MINUTE_PERIOD

    def add(self, now: float, value: int) -> None:
        """One call adding ``value`` at loop time ``now`` (Java's ``addValue(key, value, 1)``)."""
        if now >= self.due:
            self._sample(now)
        self.value += value
        self.times += 1

    def in_minute(self, now: float) -> Snapshot:
        if now >= self.due:
            self._sample(now)
        return _read(self._minute)

    def in_hour(self, now: float) -> Snapshot:
        if now >= self.due:
            self._sample(now)
        return _read(self._hour)

    def _sample(self, now: float) -> None:
        self._minute_tick = self._catch_up(self._minute, MINUTE_PERIOD, self._minute_tick, now)
        self._hour_tick = self._catch_up(self._hour, HOUR_PERIOD, self._hour_tick, now)
        self.due = self._origin + (self._minute_tick + 1) * MINUTE_PERIOD

    def _catch_up(self, window: collections.deque[_Sample], period: float, last: int, now: float) -> int:
        """Sample the ticks of ``window`` after tick ``last`` up to ``now`` (only the ones it can still hold);
        returns the last tick sampled."""
        tick = math.floor((now - self._origin) / period)
        if tick <= last:
            return last
        if not window:
            window.append((self._origin + last * period, 0, 0))
        sample = (self.times, self.value)
        for k in range(max(last + 1, tick - WINDOW_SAMPLES + 1), tick + 1):
            window.append((self._origin + k * period, *sample))
        return tick


class TopicStats:
    """The five items of one ``(group, topic)``, each created by its first record (as a ``StatsItemSet`` creates an
    item on its first ``addValue``)."""

    __slots__ = ("_origin", "consume_failed", "consume_ok", "consume_rt", "pull_rt", "pull_tps")

    def __init__(self, origin: float) -> None:
        self._origin = origin
        self.pull_rt: StatsItem | None = None
        self.pull_tps: StatsItem | None = None
        self.consume_rt: StatsItem | None = None
        self.consume_ok: StatsItem | None = None
        self.consume_failed: StatsItem | None = None

    def _new(self, now: float) -> StatsItem:
        return StatsItem(self._origin, now)

    def pulled(self, now: float, rt_ms: int) -> None:
        """A FOUND pull that took ``rt_ms`` (Java's ``incPullRT``)."""
        item = self.pull_rt or self._set("pull_rt", now)
        item.add(now, rt_ms)

    def pulled_messages(self, now: float, count: int) -> None:
        """``count`` messages a FOUND pull handed over, after the tag filter (Java's ``incPullTPS``)."""
        item = self.pull_tps or self._set("pull_tps", now)
        item.add(now, count)

    def consumed(self, now: float, rt_ms: int) -> None:
        """A listener call that took ``rt_ms`` (Java's ``incConsumeRT``)."""
        item = self.consume_rt or self._set("consume_rt", now)
        item.add(now, rt_ms)

    def consumed_ok(self, now: float, count: int) -> None:
        """``count`` messages of a listener call done (Java's ``incConsumeOKTPS``)."""
        item = self.consume_ok or self._set("consume_ok", now)
        item.add(now, count)

    def consumed_failed(self, now: float, count: int) -> None:
        """``count`` messages of a listener call to be consumed again (Java's ``incConsumeFailedTPS``)."""
        item = self.consume_failed or self._set("consume_failed", now)
        item.add(now, count)

    def _set(self, name: str, now: float) -> StatsItem:
        item = self._new(now)
        setattr(self, name, item)
        return item

    def status(self, now: float) -> dict[str, float | int]:
        """Java's ``ConsumerStatsManager.consumeStatus``: the ``ConsumeStatus`` JSON fields."""

        def minute(item: StatsItem | None) -> Snapshot:
            return _EMPTY if item is None else item.in_minute(now)

        def hour(item: StatsItem | None) -> Snapshot:
            return _EMPTY if item is None else item.in_hour(now)

        consume_rt = minute(self.consume_rt)
        if consume_rt.sum == 0:
            consume_rt = hour(self.consume_rt)
        return {
            "pullRT": minute(self.pull_rt).avgpt,
            "pullTPS": minute(self.pull_tps).tps,
            "consumeRT": consume_rt.avgpt,
            "consumeOKTPS": minute(self.consume_ok).tps,
            "consumeFailedTPS": minute(self.consume_failed).tps,
            "consumeFailedMsgs": hour(self.consume_failed).sum,
        }


class ConsumerStats:
    """Every ``(group, topic)``'s :class:`TopicStats` of one client instance (Java's one ``ConsumerStatsManager``
    per ``MQClientInstance``). The first :meth:`topic` call sets the origin of the sampling ticks. A time before the
    latest one seen (the instance started again under another event loop, whose clock is another) starts over: the
    old clock's ticks may lie ahead of the new clock however far it is past the origin, which would freeze the
    windows."""

    def __init__(self) -> None:
        self._topics: dict[tuple[str, str], TopicStats] = {}
        self._origin: float | None = None
        self._latest = -math.inf

    @property
    def origin(self) -> float | None:
        """Loop time of the first record, the ticks' origin (None before it)."""
        return self._origin

    def _start_over(self) -> None:
        self._origin = None
        self._topics.clear()

    def topic(self, group: str, topic: str, now: float) -> TopicStats:
        """The statistics of ``topic`` consumed by ``group``, created on first use."""
        if now < self._latest:  # another event loop's clock
            self._start_over()
        self._latest = now
        stats = self._topics.get((group, topic))
        if stats is None:
            origin = self._origin
            if origin is None:  # the first record
                self._origin = origin = now
            stats = self._topics[(group, topic)] = TopicStats(origin)
        return stats

    def status(self, group: str, topic: str, now: float) -> dict[str, float | int]:
        """``topic``'s ``ConsumeStatus`` for ``group`` at loop time ``now``; all zero when nothing was recorded."""
        if now < self._latest:  # another event loop's clock
            self._start_over()
        self._latest = now
        stats = self._topics.get((group, topic))
        return (stats or TopicStats(now)).status(now)
