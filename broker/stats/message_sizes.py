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

from broker.stats.histograms import CappedHistogram
from remoting.codec.topics import DLQ_GROUP_TOPIC_PREFIX, RETRY_GROUP_TOPIC_PREFIX

#: 5.3.3's ``messageSizeBuckets`` (BrokerMetricsManager ``registerMetricsView``): 1 KB, 4 KB, 512 KB, 1 MB, 2 MB, 4 MB
MESSAGE_SIZE_BOUNDS = (1024, 4 * 1024, 512 * 1024, 1024 * 1024, 2 * 1024 * 1024, 4 * 1024 * 1024)


class MessageSizes:
    """A :class:`~broker.stats.histograms.CappedHistogram` per (topic, message type)."""

    def __init__(self, series_limit: int) -> None:
        self.histogram: CappedHistogram[tuple[str, str]] = CappedHistogram(MESSAGE_SIZE_BOUNDS, series_limit)

    def record(self, topic: str, kind: str, size: int) -> None:
        """One send request to ``topic`` stored messages of ``size`` bytes on average, as message type ``kind``."""
        histogram = self.histogram
        key = (topic, kind)
        if key not in histogram.rows and topic.startswith((RETRY_GROUP_TOPIC_PREFIX, DLQ_GROUP_TOPIC_PREFIX)):
            return  # not kept
        histogram.add(histogram.row(key), size)

    def record_delivery(self, topic: str, size: int) -> None:
        """A delay level delivered a message of ``size`` bytes to ``topic``: ``delay``, a retry topic's too (5.3.3's
        ScheduleMessageService ``PutResultProcess.onSuccess`` checks no topic)."""
        histogram = self.histogram
        histogram.add(histogram.row((topic, "delay")), size)

    def figures(self) -> dict[tuple[str, str] | None, tuple[list[int], int]]:
        """A copy for a scrape: (bucket counts, sum) per label set, the overflow under ``None`` if used."""
        return self.histogram.figures()
