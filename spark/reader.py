"""Batch read: one Spark partition per queue range ``[start, end)``, read as Arrow record batches.

Planning (``partitions``) runs on the driver side: it asks the name server for the topics' queues and resolves
``startingOffsets`` (default earliest) and ``endingOffsets`` (default latest) to concrete offsets, so the read is a
fixed snapshot (a topic without a readable queue fails it: :func:`spark.offsets.list_queues`); a read from ``latest``
or to ``earliest`` reads nothing, so it is refused (:func:`check_batch_offsets`). A queue range longer than
:data:`MAX_RANGE` is split into several partitions, so a large queue is read in parallel. Each task opens its own
:class:`~spark.session.BrokerSession` (readers are pickled to the executors with options only) and pulls its range in
pages of at most :data:`PAGE` offsets and about :data:`PAGE_BYTES` of bodies, yielding one record batch per page.
Messages whose tags do not match ``tags`` are skipped; their offsets still count toward the range. Offsets the broker
no longer holds when the task reads them (retention ran since planning) fail the read, or with
``failOnDataLoss=false`` are logged and skipped (:mod:`spark.data_loss`), for batch and streaming reads alike; each
gap is reported once, whole, however many pages it spans. So does a JSON ``startingOffsets`` the queue does not hold
at planning (the read then starts at the nearest offset held), as for a stream, and a JSON ``endingOffsets`` outside
the queue's offsets (past its max offset: the read then ends there), as Kafka's batch read fails on it. A rate limit
(``maxRecordsPerTrigger``) is a stream's: a batch read logs that it ignores it, as rocketmq-spark does.
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Iterator, Sequence

import attrs
from pyspark.sql.datasource import DataSourceReader, InputPartition

from remoting.codec.bodies import MessageQueue
from remoting.codec.message import MessageExt
from spark import data_loss, offsets
from spark.options import EARLIEST, LATEST, OffsetKind, OptionError, SourceOptions
from spark.schema import messages_to_batch
from spark.session import BrokerSession

__all__ = [
    "MAX_RANGE",
    "PAGE",
    "PAGE_BYTES",
    "QueueRange",
    "RocketMQBatchReader",
    "check_batch_offsets",
    "next_page",
    "plan_ranges",
    "read_range",
]

log = logging.getLogger(__name__)

#: Offsets one task reads at most; longer queue ranges become several partitions.
MAX_RANGE = 250_000
#: Offsets pulled per round trip to the background loop (one record batch each), at most.
PAGE = 4096
#: Body bytes a page should hold: pages of large messages span fewer offsets (:func:`next_page`).
PAGE_BYTES = 32 << 20


@attrs.frozen(slots=True)
class QueueRange(InputPartition):
    """Queue offsets ``[start, end)`` of one queue; picklable (it is a Spark input partition)."""

    topic: str
    broker_name: str
    queue_id: int
    start: int
    end: int

    @property
    def queue(self) -> MessageQueue:
        return MessageQueue(self.topic, self.broker_name, self.queue_id)


def plan_ranges(start: dict[MessageQueue, int], end: dict[MessageQueue, int]) -> list[QueueRange]:
    """Non-empty ranges from ``start`` to ``end`` per queue, each at most :data:`MAX_RANGE` long."""
    ranges: list[QueueRange] = []
    for mq in sorted(end):
        low, high = start.get(mq, 0), end[mq]
        for s in range(low, high, MAX_RANGE):
            ranges.append(QueueRange(mq.topic, mq.broker_name, mq.queue_id, s, min(s + MAX_RANGE, high)))
    return ranges


def read_range(options: SourceOptions, part: QueueRange, page_bytes: int = PAGE_BYTES) -> Iterator[object]:
    """Record batches of ``part``'s messages (tag-filtered), one per page of offsets that held a match: up to
    :data:`PAGE` offsets, fewer for large messages, so a page holds about ``page_bytes`` of bodies
    (:func:`next_page`). Offsets of the range the broker no longer holds are data loss
    (:class:`spark.data_loss.RangeLosses`: raised, or logged and skipped); a queue that now ends below the range ends
    the read."""
    losses = data_loss.RangeLosses(options, part.queue, part.end)
    with BrokerSession(options.name_server, config=options.client_config()) as session:
        pull = (options.pull_batch_size, options.pull_timeout_ms / 1000)
        offset, page = part.start, options.pull_batch_size
        while offset < part.end:
            page_end = min(offset + page, part.end)
            read = session.read_queue(part.queue, offset, page_end, options.pull_group, options.tags, pull)
            page = next_page(read.messages, page_end - offset, page_bytes, options.pull_batch_size)
            offset = losses.add(read.lost, page_end)
            if read.messages:
                yield messages_to_batch(read.messages, part.broker_name)
    losses.flush()


def next_page(messages: Sequence[MessageExt], span: int, page_bytes: int, least: int) -> int:
    """Offsets the next page spans, after one that spanned ``span`` offsets and returned ``messages``: as many as
    hold about ``page_bytes`` of bodies at the size of these, between ``least`` (one pull's worth) and :data:`PAGE`.
    The first page spans ``least``: a task holds a bounded number of bytes whatever the messages' size, as
    rocketmq-spark's holds one pull (``RocketMQDataConsumer.get``) and Kafka's one poll."""
    held = sum(len(m.body) for m in messages)
    if held == 0:
        return PAGE  # nothing matched, or empty bodies: no bytes to bound
    per_offset = held / max(span, 1)
    return max(least, min(PAGE, int(page_bytes / per_offset)))


def check_batch_offsets(options: SourceOptions) -> None:
    """Refuse a batch read that starts at ``latest`` or ends at ``earliest`` (the option's word, or ``-1`` / ``-2`` in
    its JSON): it reads nothing by definition, so it is a mistake, refused at planning as rocketmq-spark does
    (``rocketmq-spark/src/main/scala/org/apache/spark/sql/rocketmq/RocketMQSourceProvider.scala``
    ``validateBatchOptions``) and Spark's Kafka source too. Raises OptionError."""
    if options.starting.kind is OffsetKind.LATEST:
        raise OptionError("option startingOffsets latest is for streaming queries only: a batch read from it is empty")
    if options.ending.kind is OffsetKind.EARLIEST:
        raise OptionError(
            "option endingOffsets earliest would read nothing: a batch read ends at latest or JSON offsets"
        )
    for spec, refused, what in (
        (options.starting, LATEST, "startingOffsets"),
        (options.ending, EARLIEST, "endingOffsets"),
    ):
        for topic, queues in spec.per_queue.items():
            for key, offset in queues.items():
                if offset != refused:
                    continue
                if refused == LATEST:
                    raise OptionError(f"option {what} -1 (latest) for {topic}/{key} is for streaming queries only")
                raise OptionError(f"option {what} -2 (earliest) for {topic}/{key} would read nothing")


class RocketMQBatchReader(DataSourceReader):
    """See the module docstring."""

    def __init__(self, options: SourceOptions) -> None:
        self.options = options
        self.options.require_topics()
        check_batch_offsets(options)
        if options.max_records_per_trigger is not None:  # as rocketmq-spark's validateBatchOptions warns
            log.warning(
                "option maxRecordsPerTrigger (maxOffsetsPerTrigger) ignored in batch queries: a batch read reads all "
                "its range"
            )

    def partitions(self) -> Sequence[InputPartition]:
        start, end = offsets.with_retries(self.options, self._resolve)
        for mq, offset in start.items():
            if offset > end[mq]:
                raise OptionError(f"startingOffsets {offset} is past endingOffsets {end[mq]} for {mq}")
        return plan_ranges(start, end)

    def _resolve(self) -> tuple[offsets.OffsetTable, offsets.OffsetTable]:
        """The start and end offsets of every queue read, through a session of their own."""
        with BrokerSession(self.options.name_server, config=self.options.client_config()) as session:
            mqs = offsets.list_queues(session, self.options.topics)
            missing = functools.partial(data_loss.start_missing, self.options)
            start = offsets.resolve(
                session, self.options.starting, mqs, default=EARLIEST, option="startingOffsets", out_of_range=missing
            )
            past = functools.partial(data_loss.end_missing, self.options)
            end = offsets.resolve(
                session, self.options.ending, mqs, default=LATEST, option="endingOffsets", out_of_range=past
            )
        return start, end

    def read(self, partition: InputPartition) -> Iterator[object]:
        if not isinstance(partition, QueueRange):  # nothing to read: PySpark plans one empty partition of its own
            return iter(())
        return read_range(self.options, partition)
