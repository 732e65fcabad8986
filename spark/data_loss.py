"""Data loss (Kafka's ``failOnDataLoss``): messages a read should have returned that the broker no longer holds.

Retention deleted them, or the topic or the broker's data was reset below them. With ``failOnDataLoss`` (true by
default) :func:`report` raises :class:`DataLossError`, which fails the query or the batch read; with ``false`` it
logs a warning and the caller goes on from the offset it names, as Kafka's source and rocketmq-spark's
(``RocketMQDataConsumer.get``) do.
"""

from __future__ import annotations

import logging

from remoting.codec.bodies import MessageQueue
from spark.options import SourceOptions
from spark.session import LostOffsets

__all__ = ["DataLossError", "describe", "lost_offsets", "report"]

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


def lost_offsets(mq: MessageQueue, lost: LostOffsets, end: int) -> str:
    """What a read that needed ``[lost.start, end)`` of ``mq`` found."""
    if lost.start < lost.low:
        cause = "deleted by retention"
    elif lost.start >= lost.high:
        cause = "the queue was reset"
    else:
        cause = "no longer stored"
    return f"{describe(mq)}: offsets [{lost.start}, {end}) are gone, the queue holds {lost.low}..{lost.high}: {cause}"
