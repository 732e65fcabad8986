"""Latency and failure accounting for the load tools: one per-second window plus the whole run.

Ownership: a :class:`LoadStats` belongs to one tool run; it is updated from the run's tasks (one thread, so no
locks) and read by the live view once a second. Latencies are milliseconds; nothing here raises.
"""

from __future__ import annotations

import math
from array import array
from collections.abc import Sequence
from typing import Final

import attrs

QUANTILES: Final = (0.5, 0.99)
#: ``q * n`` in floating point may land a hair above a whole rank (0.07 * 100 = 7.000000000000001): not the next one.
RANK_SLACK: Final = 1e-9


def percentile(ordered: Sequence[float], q: float) -> float:
    """The ``q`` quantile (0..1) of already sorted values by nearest rank: the ``ceil(q * n)``-th value, the smallest
    with at least ``q`` of the values at or below it (p99 of 1..100 is 99, the median of 1..10 is 5); 0.0 for no
    values. Every bench tool's percentiles come from here."""
    if not ordered:
        return 0.0
    rank = math.ceil(q * len(ordered) - RANK_SLACK)
    return float(ordered[min(max(rank, 1), len(ordered)) - 1])


@attrs.frozen
class Snapshot:
    """Counts and response times (ms) over one interval of ``seconds``."""

    seconds: float
    ok: int
    failed: int
    avg_ms: float
    p50_ms: float
    p99_ms: float
    max_ms: float

    @property
    def tps(self) -> float:
        return self.ok / self.seconds if self.seconds > 0 else 0.0

    def as_dict(self) -> dict[str, float | int]:
        return {
            "seconds": round(self.seconds, 3),
            "ok": self.ok,
            "failed": self.failed,
            "tps": round(self.tps, 1),
            "avg_ms": round(self.avg_ms, 3),
            "p50_ms": round(self.p50_ms, 3),
            "p99_ms": round(self.p99_ms, 3),
            "max_ms": round(self.max_ms, 3),
        }


def summarise(latencies: array[float], failed: int, seconds: float, count: int | None = None) -> Snapshot:
    """A :class:`Snapshot` of ``latencies``; ``count`` overrides the success count (a batch is one latency but many
    messages)."""
    ordered = sorted(latencies)
    ok = len(ordered) if count is None else count
    avg = sum(ordered) / len(ordered) if ordered else 0.0
    return Snapshot(
        seconds,
        ok,
        failed,
        avg,
        percentile(ordered, 0.5),
        percentile(ordered, 0.99),
        ordered[-1] if ordered else 0.0,
    )


class LoadStats:
    """Response times and failures; a sample is one send of ``messages_per_sample`` messages (a batch), and both its
    success and its failure count that many messages. Once :meth:`close` ends the measured window, what is still
    recorded or failed (a consumer's listener runs until the consumer shut down) is ignored."""

    def __init__(self, messages_per_sample: int = 1) -> None:
        self.messages_per_sample = messages_per_sample
        self.all: array[float] = array("d")
        self.window: array[float] = array("d")
        self.failed = 0
        self.window_failed = 0
        self.last_error: str | None = None
        self.closed = False

    def close(self) -> None:
        """End the measured window: later :meth:`record` and :meth:`fail` calls count nothing."""
        self.closed = True

    def record(self, latency_ms: float) -> None:
        if self.closed:
            return
        self.all.append(latency_ms)
        self.window.append(latency_ms)

    def fail(self, error: BaseException | str) -> None:
        """A failed send: its ``messages_per_sample`` messages count as failed."""
        if self.closed:
            return
        self.failed += self.messages_per_sample
        self.window_failed += self.messages_per_sample
        self.last_error = error if isinstance(error, str) else f"{type(error).__name__}: {error}"

    @property
    def messages(self) -> int:
        return len(self.all) * self.messages_per_sample

    def take_raw(self) -> tuple[array[float], int]:
        """The window's latencies and failures since the previous take, then a fresh window."""
        window, failed = self.window, self.window_failed
        self.window, self.window_failed = array("d"), 0
        return window, failed

    def take_window(self, seconds: float) -> Snapshot:
        """The interval since the previous take, summarised, then a fresh window."""
        window, failed = self.take_raw()
        return summarise(window, failed, seconds, len(window) * self.messages_per_sample)

    def total(self, seconds: float) -> Snapshot:
        return summarise(self.all, self.failed, seconds, self.messages)
