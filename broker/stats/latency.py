"""Put latency: RocketMQ's ``putMessageDistributeTime``, ``putMessageEntireTimeMax`` and ``putLatency99/999``
(``StoreStatsService``), measured on the send path, and the cumulative histogram ``/metrics`` exports.

A put's latency is the time from the start of the store append to the moment its answer is ready: the append alone
for ASYNC_FLUSH, append plus the group commit's ``fdatasync`` for SYNC_FLUSH (Java times ``asyncPutMessage`` until
its future completes, which includes the flush wait the same way). Whole milliseconds are the floor of the measured
nanoseconds, as Java's ``currentTimeMillis`` differences are.

Counts are cumulative since boot. Java keeps two bucket tables per one-minute window and swaps them when its stats
thread prints; here the owner calls :meth:`PutLatencyStats.roll_window` once a minute, which remembers the totals,
and the runtime info reads the previous window as the difference of two snapshots. Until the first window closes
``putMessageDistributeTime`` is the literal ``null``, as in Java.

Hot path: :meth:`PutLatencyStats.record` is one comparison and two additions for a put under a millisecond (nearly
every ASYNC_FLUSH put); slower puts also bisect two bucket tables. Single-threaded (the Trio thread). Nothing here
raises.
"""

from __future__ import annotations

import bisect
import itertools
from typing import Final

from remoting.codec.java_format import java_fixed

#: Java's 13 distribution buckets: a put of ``ms`` lands in the first bucket whose bound exceeds it.
DISTRIBUTION_BOUNDS_MS: Final = (1, 10, 50, 100, 200, 500, 1000, 2000, 3000, 4000, 5000, 10_000)
DISTRIBUTION_NAMES: Final = (
    "[<=0ms]", "[0~10ms]", "[10~50ms]", "[50~100ms]", "[100~200ms]", "[200~500ms]", "[500ms~1s]", "[1~2s]", "[2~3s]",
    "[3~4s]", "[4~5s]", "[5~10s]", "[10s~]",
)  # fmt: skip


def _fine_bounds() -> tuple[int, ...]:
    """The percentile buckets' upper bounds (Java's ``PUT_MESSAGE_ENTIRE_TIME_BUCKETS``): 1 ms steps to 20 ms, 2 ms to
    50, 5 ms to 100, 10 ms to 200, 50 ms to 500, 100 ms to 1 s, 1 s to 10 s; one more bucket holds everything above."""
    steps = ((1, 20), (2, 15), (5, 10), (10, 10), (50, 6), (100, 5), (1000, 9))
    return tuple(itertools.accumulate(step for step, times in steps for _ in range(times)))


PERCENTILE_BOUNDS_MS: Final = _fine_bounds()
_NS_PER_MS: Final = 1_000_000


class PutLatencyStats:
    """See the module docstring. ``fast`` counts puts under a millisecond; the lists count the rest by bucket."""

    __slots__ = ("_window_end", "_window_start", "distribution", "fast", "fine", "max_ms", "sum_ns")

    def __init__(self) -> None:
        self.fast = 0
        self.sum_ns = 0
        self.max_ms = 0
        #: Puts of a millisecond or more, by distribution bucket (index 0 stays 0: ``fast`` holds those).
        self.distribution = [0] * len(DISTRIBUTION_NAMES)
        #: The same puts by percentile bucket (index 0, ``(0, 1]`` ms, holds the 1 ms ones; ``fast`` the rest).
        self.fine = [0] * (len(PERCENTILE_BOUNDS_MS) + 1)
        self._window_start: tuple[int, list[int], list[int]] | None = None
        self._window_end: tuple[int, list[int], list[int]] | None = None

    def record(self, elapsed_ns: int) -> None:
        """One put that took ``elapsed_ns``."""
        self.sum_ns += elapsed_ns
        if elapsed_ns < _NS_PER_MS:
            self.fast += 1
            return
        ms = elapsed_ns // _NS_PER_MS
        self.distribution[bisect.bisect_right(DISTRIBUTION_BOUNDS_MS, ms)] += 1
        self.fine[bisect.bisect_left(PERCENTILE_BOUNDS_MS, ms)] += 1
        if ms > self.max_ms:
            self.max_ms = ms

    @property
    def count(self) -> int:
        return self.fast + sum(self.distribution)

    def roll_window(self) -> None:
        """Close the current one-minute window (the owner calls this every 60 s)."""
        self._window_start = self._window_end
        self._window_end = (self.fast, list(self.distribution), list(self.fine))

    def _last_window(self) -> tuple[list[int], list[int]] | None:
        """Counts of the last closed window by distribution and by percentile bucket; ``None`` before one closed."""
        end = self._window_end
        if end is None:
            return None
        start = self._window_start or (0, [0] * len(end[1]), [0] * len(end[2]))
        fast = end[0] - start[0]
        distribution = [b - a for a, b in zip(start[1], end[1], strict=True)]
        fine = [b - a for a, b in zip(start[2], end[2], strict=True)]
        distribution[0] += fast
        fine[0] += fast
        return distribution, fine

    def distribution_text(self) -> str:
        """Java's ``putMessageDistributeTime`` for the last closed window (``null`` before the first)."""
        window = self._last_window()
        if window is None:
            return "null"
        return "".join(f"{name}:{count} " for name, count in zip(DISTRIBUTION_NAMES, window[0], strict=True))

    def percentile(self, px: float) -> float:
        """Java's ``findPutMessageEntireTimePX`` over the last closed window: linear interpolation inside the bucket
        holding the ``px`` rank. The open last bucket (above 10 s) reads as its lower bound (Java multiplies into a
        ``long`` there and overflows)."""
        window = self._last_window()
        if window is None:
            return 0.0
        counts = window[1]
        rank = int(sum(counts) * px)
        passed = 0
        for i, count in enumerate(counts):
            if rank <= passed + count:
                if i == len(PERCENTILE_BOUNDS_MS):
                    return float(PERCENTILE_BOUNDS_MS[-1])
                low = 0 if i == 0 else PERCENTILE_BOUNDS_MS[i - 1]
                relative = rank - passed
                return low + ((PERCENTILE_BOUNDS_MS[i] - low) * relative / count if count else 0.0)
            passed += count
        return 0.0

    def histogram(self) -> tuple[tuple[int, ...], list[int], float]:
        """Since boot: the bucket bounds (ms), the count in each bucket (one more bucket above the last bound) and
        the sum in ms, for a Prometheus histogram. A bound is exclusive here (a put of exactly 10 ms counts above
        10); puts are whole milliseconds, so only a put of exactly a bound is placed one bucket higher."""
        counts = list(self.distribution)
        counts[0] += self.fast
        return DISTRIBUTION_BOUNDS_MS, counts, self.sum_ns / _NS_PER_MS

    def runtime_entries(self) -> dict[str, str]:
        """The GET_BROKER_RUNTIME_INFO keys this class owns, in Java's formats."""
        return {
            "putMessageEntireTimeMax": str(self.max_ms),
            "putMessageDistributeTime": self.distribution_text(),
            # String.format("%.2f"), rounded as Java's Formatter (store/.../StoreStatsService.java getRuntimeInfo)
            "putLatency99": java_fixed(self.percentile(0.99), 2),
            "putLatency999": java_fixed(self.percentile(0.999), 2),
        }
