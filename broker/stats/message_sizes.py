"""``rocketmq_message_size``: RocketMQ 5.3.3's histogram of incoming message sizes (broker/src/main/java/org/apache/
rocketmq/broker/processor/SendMessageProcessor.java ``handlePutMessageResult``), one value per send request: the
written bytes over the message count (a batch's average record size), labelled as ``rocketmq_messages_in_total``
(topic as stored, message type). Retry and DLQ topics are left out, as Java's send path leaves them out; a delay
level's delivery is recorded under its real topic as ``delay`` (:meth:`MessageSizes.record_delivery`).

Recorded by the send paths (one dict lookup, one bisect and two additions per request); at most ``series_limit`` - 1
label sets, the rest in an overflow row, as 5.3.3's OpenTelemetry view with ``metricsOtelCardinalityLimit``.
Trio thread only.
"""

from __future__ import annotations

from bisect import bisect_left

from remoting.codec.topics import DLQ_GROUP_TOPIC_PREFIX, RETRY_GROUP_TOPIC_PREFIX

#: 5.3.3's ``messageSizeBuckets`` (BrokerMetricsManager ``registerMetricsView``): 1 KB, 4 KB, 512 KB, 1 MB, 2 MB, 4 MB
MESSAGE_SIZE_BOUNDS = (1024, 4 * 1024, 512 * 1024, 1024 * 1024, 2 * 1024 * 1024, 4 * 1024 * 1024)
_SUM = len(MESSAGE_SIZE_BOUNDS) + 1  # a row: counts per bucket, one above the last bound, then the sum


class MessageSizes:
    """Rows of bucket counts and the sum, per (topic, message type)."""

    def __init__(self, series_limit: int) -> None:
        self.series_limit = series_limit
        self.rows: dict[tuple[str, str], list[int]] = {}
        self.overflow = [0] * (_SUM + 1)

    def record(self, topic: str, kind: str, size: int) -> None:
        """One send request to ``topic`` stored messages of ``size`` bytes on average, as message type ``kind``."""
        row = self.rows.get((topic, kind))
        if row is None:
            row = self._new_row(topic, kind)
        row[bisect_left(MESSAGE_SIZE_BOUNDS, size)] += 1
        row[_SUM] += size

    def record_delivery(self, topic: str, size: int) -> None:
        """A delay level delivered a message of ``size`` bytes to ``topic``: ``delay``, a retry topic's too (5.3.3's
        ScheduleMessageService ``PutResultProcess.onSuccess`` checks no topic)."""
        row = self.rows.get((topic, "delay")) or self._new_row(topic, "delay", any_topic=True)
        row[bisect_left(MESSAGE_SIZE_BOUNDS, size)] += 1
        row[_SUM] += size

    def _new_row(self, topic: str, kind: str, any_topic: bool = False) -> list[int]:
        if not any_topic and topic.startswith((RETRY_GROUP_TOPIC_PREFIX, DLQ_GROUP_TOPIC_PREFIX)):
            return [0] * (_SUM + 1)  # not kept
        if len(self.rows) >= self.series_limit - 1:
            return self.overflow
        row = self.rows[(topic, kind)] = [0] * (_SUM + 1)
        return row

    def figures(self) -> dict[tuple[str, str] | None, tuple[list[int], int]]:
        """A copy for a scrape: (bucket counts, sum) per label set, the overflow under ``None`` if used."""
        copy: dict[tuple[str, str] | None, tuple[list[int], int]] = {}
        for key, row in self.rows.items():
            copy[key] = (row[:_SUM], row[_SUM])
        if any(self.overflow):
            copy[None] = (self.overflow[:_SUM], self.overflow[_SUM])
        return copy
