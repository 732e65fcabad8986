"""Data loss (Kafka's ``failOnDataLoss``): messages a read should have returned that the broker no longer holds.

Retention deleted them, or the topic or the broker's data was reset below them. With ``failOnDataLoss`` (true by
default) :func:`report` raises :class:`DataLossError`, which fails the query or the batch read; with ``false`` it
logs a warning and the caller goes on from the offset it names, as Kafka's source and rocketmq-spark's
(``RocketMQDataConsumer.get``) do.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence

import attrs

from remoting.codec.bodies import MessageQueue
from spark.options import SourceOptions
from spark.session import LostOffsets

__all__ = ["DataLossError", "RangeLosses", "describe", "end_missing", "lost_offsets", "report", "start_missing"]

log = logging.getLogger(__name__)


class DataLossError(RuntimeError):
    """Offsets a read needs are gone from a queue (see ``failOnDataLoss``)."""


def describe(mq: MessageQueue) -> str:
    return f"{mq.topic} queue {mq.queue_id} on {mq.broker_name}"


def report(options: SourceOptions, what: str, resume: int) -> None:
    """Raise DataLossError about ``what``, or with ``failOnDataLoss=false`` log it (the caller resumes at
    ``resume``)."""
    if options.fail_on_data_loss:
        raise DataLossError(f"{what}; set failOnDataLoss=false to go on from offset {resume}")
    log.warning("data lost: %s; going on from offset %d (failOnDataLoss=false)", what, resume)


def start_missing(options: SourceOptions, mq: MessageQueue, offset: int, low: int, high: int) -> None:
    """:func:`report` a JSON ``startingOffsets`` offset that ``mq``, holding ``low..high``, does not hold (an
    :data:`spark.offsets.OutOfRange` once ``options`` is bound): the read starts at the nearest offset held."""
    _missing(options, "startingOffsets", mq, offset, low, high)


def end_missing(options: SourceOptions, mq: MessageQueue, offset: int, low: int, high: int) -> None:
    """:func:`report` a JSON ``endingOffsets`` offset outside ``low..high``, the offsets ``mq`` holds: the read ends
    at the nearest offset held. Kafka's batch read keeps such an ending offset and its task reports the offsets the
    partition does not hold as data loss (``connector/kafka-0-10-sql/.../consumer/KafkaDataConsumer.scala`` ``fetch``
    / ``get``); here planning does."""
    _missing(options, "endingOffsets", mq, offset, low, high)


def _missing(options: SourceOptions, option: str, mq: MessageQueue, offset: int, low: int, high: int) -> None:
    what = f"{option} gives {describe(mq)} offset {offset}, but it holds offsets {low}..{high}"
    report(options, what, min(max(offset, low), high))


def lost_offsets(mq: MessageQueue, lost: LostOffsets) -> str:
    """What a read that needed offsets ``[lost.start, lost.end)`` of ``mq`` found."""
    if lost.start < lost.low:
        cause = "deleted by retention"
    elif lost.start >= lost.high:
        cause = "the queue was reset"
    else:
        cause = "no longer stored"
    what = f"offsets [{lost.start}, {lost.end}) are gone, the queue holds {lost.low}..{lost.high}: {cause}"
    return f"{describe(mq)}: {what}"


@attrs.define(slots=True)
class RangeLosses:
    """The offsets one task's read of ``mq`` up to ``end`` finds gone, page by page: a gap that goes on into the next
    page is merged with what that page finds, and each gap is reported (:func:`report`) once, whole, with the offset
    after it as the one to go on from."""

    options: SourceOptions
    mq: MessageQueue
    end: int
    pending: LostOffsets | None = None

    def add(self, lost: Sequence[LostOffsets], page_end: int) -> int:
        """Take the lost ranges, in offset order, of a page read up to ``page_end``; report the gaps that end inside
        it. Returns the offset to read on from: ``page_end``, or past a gap known to reach further (the offsets below
        the queue's first one, the rest of a queue that now ends before them)."""
        for one in lost:
            one = attrs.evolve(one, end=self._extent(one))
            if self.pending is not None and self.pending.end >= one.start:
                one = attrs.evolve(self.pending, end=max(self.pending.end, one.end))
            else:
                self.flush()
            self.pending = one
        if self.pending is not None and self.pending.end < page_end:
            self.flush()
        return page_end if self.pending is None else max(page_end, self.pending.end)

    def _extent(self, lost: LostOffsets) -> int:
        if lost.start >= lost.high:  # the queue ends before them: the rest of the range is gone
            return self.end
        if lost.start < lost.low:  # every offset below the queue's first one is gone
            return min(max(lost.end, lost.low), self.end)
        return lost.end

    def flush(self) -> None:
        """Report the gap still open (the read ended, or the next gap does not follow it)."""
        pending, self.pending = self.pending, None
        if pending is not None:
            report(self.options, lost_offsets(self.mq, pending), pending.end)
