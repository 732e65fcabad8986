"""How transactions ended, for ``/metrics``: RocketMQ 5.3.3's ``rocketmq_commit_messages_total``,
``rocketmq_rollback_messages_total`` and ``rocketmq_finish_message_latency`` (broker/src/main/java/org/apache/
rocketmq/broker/processor/EndTransactionProcessor.java ``processRequest``), per real topic.

A commit counts once its message is stored (Java: ``sendFinalMessage`` answered SUCCESS), with its finish latency:
whole seconds from the half message's born time, as Java records them under the instrument's ``ms`` unit; a
rollback counts once its half message was verified. Each table keeps at most ``series_limit`` - 1 topics, the rest
in an overflow count, as 5.3.3's OpenTelemetry views with ``metricsOtelCardinalityLimit``. Trio thread only.
"""

from __future__ import annotations

from collections.abc import Mapping

import attrs

from broker.stats.histograms import CappedHistogram

#: 5.3.3's ``commitLatencyBuckets`` (BrokerMetricsManager ``registerMetricsView``): 5 s, 1 min, 10 min, 1 h, 12 h, 24 h
FINISH_BUCKETS_S = (5, 60, 600, 3600, 12 * 3600, 24 * 3600)


@attrs.frozen
class TransactionFigures:
    """A copy of :class:`TransactionEnds` for one scrape; ``None`` keys hold the overflow."""

    commits: dict[str | None, int]
    rollbacks: dict[str | None, int]
    finish: dict[str | None, tuple[list[int], int]]


class TransactionEnds:
    """Commits, rollbacks and the commits' finish latency histogram, per real topic."""

    def __init__(self, series_limit: int) -> None:
        self.series_limit = series_limit
        self.commits: dict[str, int] = {}
        self.rollbacks: dict[str, int] = {}
        #: the commits' finish latencies in seconds, per topic
        self.finish: CappedHistogram[str] = CappedHistogram(FINISH_BUCKETS_S, series_limit)
        #: commits and rollbacks past the limit
        self.overflow_commits = 0
        self.overflow_rollbacks = 0

    def commit(self, topic: str, born_ms: int, now_ms: int) -> None:
        """A committed message of ``topic`` was stored at ``now_ms``, its half born at ``born_ms``."""
        seconds = (now_ms - born_ms) // 1000
        if self._fits(self.commits, topic):
            self.commits[topic] = self.commits.get(topic, 0) + 1
        else:
            self.overflow_commits += 1
        self.finish.add(self.finish.row(topic), seconds)

    def rollback(self, topic: str) -> None:
        """A half message of ``topic`` was rolled back."""
        if self._fits(self.rollbacks, topic):
            self.rollbacks[topic] = self.rollbacks.get(topic, 0) + 1
        else:
            self.overflow_rollbacks += 1

    def figures(self) -> TransactionFigures:
        """A copy for a scrape, each overflow under the key ``None`` when anything went there."""
        commits: dict[str | None, int] = {}
        commits.update(self.commits)
        rollbacks: dict[str | None, int] = {}
        rollbacks.update(self.rollbacks)
        if self.overflow_commits:
            commits[None] = self.overflow_commits
        if self.overflow_rollbacks:
            rollbacks[None] = self.overflow_rollbacks
        return TransactionFigures(commits, rollbacks, self.finish.figures())

    def _fits(self, table: Mapping[str, object], topic: str) -> bool:
        return topic in table or len(table) < self.series_limit - 1
