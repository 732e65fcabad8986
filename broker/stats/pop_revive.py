"""The revive topic's traffic, for ``/metrics``: RocketMQ 5.3.3's PopMetricsManager counters
(broker/src/main/java/org/apache/rocketmq/broker/metrics/PopMetricsManager.java).

- ``puts``: each CK and ACK record put into the revive topic, by (group, topic, ``CK`` or ``ACK``, put status):
  ``incPopReviveCkPutCount`` (PopBufferMergeService ``putCkToStore``, ChangeInvisibleTimeProcessor) and
  ``incPopReviveAckPutCount`` (AckMessageProcessor, ChangeInvisibleTimeProcessor). Ours: a put's status is the
  append's (``PUT_OK``, or the refusal's); a flush or replica wait's later outcome does not relabel it.
- ``gets``: each record the revive reads back, by (group, topic, revive queue id, type): PopReviveService
  ``consumeReviveMessage``.
- ``retries``: each copy the revive puts into a pop retry topic, by (group, the CK's topic, put status):
  PopReviveService ``reviveRetry``.

Each keeps at most ``series_limit`` - 1 label sets, the rest summed in an overflow count, as 5.3.3's OpenTelemetry
counters under ``metricsOtelCardinalityLimit``. Trio thread only.
"""

from __future__ import annotations

from typing import Generic, TypeVar

import attrs

_K = TypeVar("_K")

CK: str = "CK"
ACK: str = "ACK"


class CappedCounts(Generic[_K]):
    """A count per key, at most ``series_limit`` - 1 keys; what another key adds goes to :attr:`overflow`."""

    def __init__(self, series_limit: int) -> None:
        self.series_limit = series_limit
        self.counts: dict[_K, int] = {}
        self.overflow = 0

    def add(self, key: _K, count: int = 1) -> None:
        counts = self.counts
        if key in counts or len(counts) < self.series_limit - 1:
            counts[key] = counts.get(key, 0) + count
        else:
            self.overflow += count

    def figures(self) -> dict[_K | None, int]:
        """A copy for a scrape, the overflow under ``None`` when anything went there."""
        copy: dict[_K | None, int] = dict(self.counts.items())
        if self.overflow:
            copy[None] = self.overflow
        return copy


@attrs.frozen
class PopReviveFigures:
    """A copy of :class:`PopReviveCounts` for one scrape; ``None`` keys hold the overflow."""

    puts: dict[tuple[str, str, str, str] | None, int]
    gets: dict[tuple[str, str, int, str] | None, int]
    retries: dict[tuple[str, str, str] | None, int]


class PopReviveCounts:
    """See the module docstring."""

    def __init__(self, series_limit: int) -> None:
        self.puts: CappedCounts[tuple[str, str, str, str]] = CappedCounts(series_limit)
        self.gets: CappedCounts[tuple[str, str, int, str]] = CappedCounts(series_limit)
        self.retries: CappedCounts[tuple[str, str, str]] = CappedCounts(series_limit)

    def put(self, group: str, topic: str, kind: str, status: str) -> None:
        """A ``kind`` (:data:`CK` or :data:`ACK`) record of ``group`` on ``topic`` was put, with ``status``."""
        self.puts.add((group, topic, kind, status))

    def got(self, group: str, topic: str, queue_id: int, kind: str) -> None:
        """The revive read a ``kind`` record of ``group`` on ``topic`` from revive queue ``queue_id``."""
        self.gets.add((group, topic, queue_id, kind))

    def retried(self, group: str, topic: str, status: str) -> None:
        """The revive put a copy of a message of ``group``'s CK on ``topic`` into a pop retry topic, with ``status``."""
        self.retries.add((group, topic, status))

    def figures(self) -> PopReviveFigures:
        return PopReviveFigures(self.puts.figures(), self.gets.figures(), self.retries.figures())
