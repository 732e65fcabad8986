"""Per-queue offsets: the JSON form Spark checkpoints, resolving ``startingOffsets``/``endingOffsets`` against a
cluster, and admission control for ``maxRecordsPerTrigger``.

An offset table is ``{topic: {"brokerName:queueId": offset}}`` (the JSON a streaming query writes into its checkpoint
and reports in its progress; batch 0's end offset adds the stream's start under ``"@startedAt"``, which the offset
options skip, so a reported offset is a valid ``startingOffsets``). The broker name is part of the key because a
topic's queue ids repeat on every master. Offsets are queue offsets: the next message to read, so a range
``[start, end)`` holds ``end - start`` entries.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterable, Mapping
from typing import TypeVar

from client.errors import MQClientError
from remoting.codec.bodies import MessageQueue
from remoting.errors import RemotingError
from spark.options import EARLIEST, LATEST, OffsetKind, OffsetSpec, OptionError, SourceOptions
from spark.session import BrokerSession

__all__ = ["OffsetTable", "admit", "from_json", "queue_key", "resolve", "to_json", "with_retries"]

log = logging.getLogger(__name__)
T = TypeVar("T")

OffsetTable = dict[MessageQueue, int]


def queue_key(mq: MessageQueue) -> str:
    return f"{mq.broker_name}:{mq.queue_id}"


def to_json(table: Mapping[MessageQueue, int]) -> dict[str, dict[str, int]]:
    """The checkpoint form, sorted so equal tables serialize equally."""
    out: dict[str, dict[str, int]] = {}
    for mq in sorted(table):
        out.setdefault(mq.topic, {})[queue_key(mq)] = table[mq]
    return out


def from_json(obj: Mapping[str, Mapping[str, int]]) -> OffsetTable:
    """Inverse of :func:`to_json`. Raises ValueError on a key that is not ``brokerName:queueId``."""
    table: OffsetTable = {}
    for topic, queues in obj.items():
        for key, offset in queues.items():
            broker, sep, queue_id = key.rpartition(":")
            if not sep or not queue_id.isdigit():
                raise ValueError(f"offset key {key!r} of {topic!r} is not brokerName:queueId")
            table[MessageQueue(topic, broker, int(queue_id))] = int(offset)
    return table


def with_retries(options: SourceOptions, fetch: Callable[[], T], reset: Callable[[], None] | None = None) -> T:
    """``fetch()`` (queues and offsets for planning), attempted up to ``fetchOffset.numRetries`` times
    ``fetchOffset.retryIntervalMs`` apart while the cluster fails it (a request unanswered, a connection refused, a
    route not found); ``reset()`` after each failure drops the session it used, so the next attempt connects anew.
    Raises the last failure. rocketmq-spark retries its offset fetches so
    (``rocketmq-spark/src/main/scala/org/apache/spark/sql/rocketmq/RocketMQOffsetReader.scala`` ``withRetries``, which
    resets its consumer between attempts), as Spark's Kafka source does; option errors and data loss are not
    retried."""
    attempt = 1
    while True:
        try:
            return fetch()
        except (MQClientError, RemotingError) as exc:
            if reset is not None:
                reset()
            if attempt >= options.fetch_offset_attempts:
                raise
            log.warning("attempt %d of fetching offsets failed, retrying: %s", attempt, exc)
            attempt += 1
            time.sleep(options.fetch_offset_interval_ms / 1000)


def list_queues(session: BrokerSession, topics: Iterable[str]) -> list[MessageQueue]:
    """The readable queues of ``topics``. Raises MQClientError for a topic the route gives none (its queues all
    write-only), as ``client/.../impl/MQAdminImpl.java`` ``fetchSubscribeMessageQueues`` refuses it, through which
    rocketmq-spark lists a topic's queues (``RocketMQOffsetReader.fetchTopicPartitions``): a read of it would return
    nothing without a word."""
    queues: list[MessageQueue] = []
    for topic in topics:
        readable = session.queues(topic)
        if not readable:
            raise MQClientError(f"Can not find Message Queue for this topic, {topic}: no queue of it is readable")
        queues.extend(readable)
    return queues


#: Told of an explicit offset outside its queue's offsets: (queue, offset, min offset, max offset).
OutOfRange = Callable[[MessageQueue, int, int, int], None]


def resolve(
    session: BrokerSession,
    spec: OffsetSpec,
    mqs: list[MessageQueue],
    *,
    default: int,
    option: str,
    out_of_range: OutOfRange | None = None,
) -> OffsetTable:
    """Concrete offsets of ``mqs`` for ``spec``: earliest is each queue's min offset, latest its max offset,
    a timestamp is searched per queue, and JSON gives explicit offsets (``default`` -- EARLIEST or LATEST -- for the
    queues it leaves out). Offsets are clamped into ``[min, max]``; an explicit one that needs it is first passed to
    ``out_of_range``, which may raise. Raises OptionError when the JSON names a topic that is not read or a queue the
    topic does not have."""
    bounds = session.min_max_offsets(mqs)
    if spec.kind is OffsetKind.EARLIEST:
        return {mq: low for mq, (low, _) in bounds.items()}
    if spec.kind is OffsetKind.LATEST:
        return {mq: high for mq, (_, high) in bounds.items()}
    if spec.kind is OffsetKind.TIMESTAMP:
        found = session.offsets_for_timestamp(mqs, spec.timestamp_ms)
        return {mq: min(max(found[mq], low), high) for mq, (low, high) in bounds.items()}
    topics = {mq.topic for mq in mqs}
    wanted: dict[MessageQueue, int] = {}
    for topic, queues in spec.per_queue.items():
        if topic not in topics:
            raise OptionError(f"option {option} names topic {topic!r}, which is not in the topic option")
        for key, offset in queues.items():
            matches = [mq for mq in mqs if mq.topic == topic and (key == str(mq.queue_id) or key == queue_key(mq))]
            if not matches:
                raise OptionError(f"option {option}: topic {topic!r} has no queue {key!r}")
            for mq in matches:
                wanted[mq] = offset
    table: OffsetTable = {}
    for mq, (low, high) in bounds.items():
        offset = wanted.get(mq, default)
        if offset >= 0 and not low <= offset <= high and out_of_range is not None:
            out_of_range(mq, offset, low, high)
        table[mq] = low if offset == EARLIEST else high if offset == LATEST else min(max(offset, low), high)
    return table


def admit(start: Mapping[MessageQueue, int], latest: Mapping[MessageQueue, int], max_rows: int) -> OffsetTable:
    """End offsets that take at most ``max_rows`` queue entries past ``start``, shared fairly: every queue with a
    backlog gets an equal share, and what a short queue leaves over goes to the others (Kafka's rate limit is
    proportional; an equal split keeps small queues from starving behind a large one). Rows too few for one each go
    one per queue in turn (:func:`_in_turn`), so a limit below the queue count still reaches every queue."""
    end = {mq: max(latest[mq], start.get(mq, 0)) for mq in latest}
    backlog = {mq: end[mq] - start.get(mq, 0) for mq in end if end[mq] > start.get(mq, 0)}
    admitted = {mq: 0 for mq in backlog}
    budget = max_rows
    turn = sum(start.get(mq, 0) for mq in end)
    while budget > 0 and backlog:
        queues = sorted(backlog)
        share = budget // len(queues)
        if share == 0:
            queues, share = _in_turn(queues, turn)[:budget], 1
        for mq in queues:
            take = min(share, backlog[mq])
            admitted[mq] += take
            backlog[mq] -= take
            budget -= take
        backlog = {mq: left for mq, left in backlog.items() if left > 0}
    for mq in admitted:
        end[mq] = start.get(mq, 0) + admitted[mq]
    return end


def _in_turn(queues: list[MessageQueue], turn: int) -> list[MessageQueue]:
    """``queues`` rotated to start at ``turn`` (mod their count). :func:`admit` passes the sum of the start offsets,
    which grows by the rows each batch admits: the next batch's single rows begin where this one's stopped, with no
    state beyond the checkpointed offsets (Kafka's ``rateLimit`` rounds small shares up to one row instead, which
    may exceed the limit)."""
    first = turn % len(queues)
    return queues[first:] + queues[:first]
