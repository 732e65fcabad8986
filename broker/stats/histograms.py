"""``CappedHistogram``: bucket counts and a sum per label set, for the ``/metrics`` histograms the broker records
itself (``rocketmq_message_size``, ``rocketmq_finish_message_latency``). At most ``series_limit`` - 1 label sets;
the rest go to one overflow row, as RocketMQ 5.3.3's OpenTelemetry views cap them with
``metricsOtelCardinalityLimit``. Trio thread only."""

from __future__ import annotations

from bisect import bisect_left
from collections.abc import Sequence
from typing import Generic, TypeVar

_K = TypeVar("_K")


class CappedHistogram(Generic[_K]):
    """A row per key: the counts per bucket of ``bounds`` (one more above the last), then the sum."""

    def __init__(self, bounds: Sequence[int], series_limit: int) -> None:
        self.bounds = bounds
        self.series_limit = series_limit
        self.rows: dict[_K, list[int]] = {}
        self.overflow = [0] * (len(bounds) + 2)

    def row(self, key: _K) -> list[int]:
        """``key``'s row, made if the limit leaves room, else the overflow row."""
        row = self.rows.get(key)
        if row is None:
            if len(self.rows) >= self.series_limit - 1:
                return self.overflow
            row = self.rows[key] = [0] * (len(self.bounds) + 2)
        return row

    def add(self, row: list[int], value: int) -> None:
        """One ``value`` into ``row`` (one of :meth:`row`'s, or a row kept nowhere)."""
        row[bisect_left(self.bounds, value)] += 1
        row[-1] += value

    def figures(self) -> dict[_K | None, tuple[list[int], int]]:
        """A copy for a scrape: (bucket counts, sum) per key, the overflow under ``None`` if used."""
        copy: dict[_K | None, tuple[list[int], int]] = {key: (row[:-1], row[-1]) for key, row in self.rows.items()}
        if any(self.overflow):
            copy[None] = (self.overflow[:-1], self.overflow[-1])
        return copy
