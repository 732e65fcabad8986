"""Streaming read: micro-batches over per-queue offset ranges, with Spark's checkpoint as the source of truth.

Offsets are the JSON of :func:`spark.offsets.to_json` (``{topic: {"brokerName:queueId": next offset}}``). Spark
writes each batch's end offsets to its checkpoint before running it and hands them back after a restart, so a
restarted query re-reads exactly the uncommitted batch and continues after it: no duplicates and no gaps, whatever
was committed to the broker. ``commit(end)`` only mirrors ``end`` into ``consumerGroup``'s offsets on the broker when
that option is set, for monitoring with ``mqadmin consumerProgress``; it is never read back, so it skips queues the
route no longer lists and logs a failure instead of failing the query.

- ``initialOffset`` is ``{}``, the stream's start: the first ``latestOffset`` resolves ``startingOffsets`` (default
  ``latest``, like Kafka's streaming source) and records the result in batch 0's end offset under
  :data:`~spark.options.STARTED_AT`. Spark logs that offset in the checkpoint, so a replay of batch 0 after a restart
  starts where the stream first did, not where ``startingOffsets`` points now (Kafka's source keeps its initial
  offsets in its checkpoint too, ``KafkaMicroBatchStream.getOrCreateInitialPartitionOffsets``; PySpark gives a Python
  reader no path of its own there). A batch 0 logged without that record (an older checkpoint) starts at
  ``startingOffsets`` resolved again, at most at the batch's end. The progress reports the record too, and a
  ``startingOffsets`` option skips it. A JSON starting offset outside its queue's offsets is data loss
  (``failOnDataLoss``).
- ``latestOffset(start, limit)`` asks every queue's max offset; under ``ReadMaxRows`` (``maxRecordsPerTrigger``)
  it admits at most that many queue entries, shared across the queues by :func:`spark.offsets.admit`. A queue that
  appears later (more queues, a new broker) starts at its min offset; when that is not 0, the messages below it were
  deleted before the stream read them, data loss reported by ``partitions`` (rocketmq-spark's and Kafka's "added
  partition starts from X instead of 0"). With nothing new it returns ``start`` itself.
  The queues of a master that does not answer (down, while the name server still routes it) keep their position and
  the others go on (:meth:`~RocketMQStreamReader._answered_bounds`; a master that answers with an error is up, and
  fails the fetch); only when no master answers does the fetch fail (and is retried), as does the first batch's,
  which resolves ``startingOffsets`` on every queue, and, under ``Trigger.AvailableNow``, any batch's while a master
  that does not answer owes rows below the run's end (else the run would end as done without them:
  :meth:`~RocketMQStreamReader._check_owed`). A task reading a range of a master that goes down mid-batch fails:
  Spark retries the task, and a query that fails replays the logged batch from its checkpoint, so nothing is
  skipped.
  A queue that no longer holds the stream's next offset has its entries counted from its first one, and the batch
  still starts at the stream's offset: ``partitions`` or ``read`` reports the loss, once (Kafka's source reports it
  in ``planInputPartitions`` and in its reader too).
- ``prepareForTriggerAvailableNow`` records every queue's max offset: a ``Trigger.AvailableNow`` query reads to
  there, in batches of ``maxRecordsPerTrigger``, and stops (Kafka's source does the same). Spark calls it instead of
  wrapping the source (``spark.sql.streaming.triggerAvailableNowWrapper.enabled``), whose ``latestOffset(
  initialOffset())`` would resolve ``startingOffsets`` again on every restart.
- ``latestOffset``, ``prepareForTriggerAvailableNow`` and ``partitions`` fetch the offsets up to
  ``fetchOffset.numRetries`` times, on a new session after a failure (:func:`spark.offsets.with_retries`), as
  rocketmq-spark and Kafka's source do.
- ``reportLatestOffset`` returns the max offsets seen by the last ``latestOffset`` (the query progress's
  ``latestOffset``), so a rate-limited query shows its backlog.
- ``partitions(start, end)`` never moves a range silently: a queue whose batch ends below its start (reset under the
  stream) is data loss, raised or logged per ``failOnDataLoss``. ``read`` is the batch reader's
  :func:`~spark.reader.read_range`: offsets of a planned range that are gone when the task reads them (retention ran
  since planning, or during a replay of a logged batch) are data loss too.

The reader keeps one :class:`~spark.session.BrokerSession` for the driver-side calls (opened lazily, closed by
``stop``); it is not pickled to the executors, whose ``read`` opens its own.
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

from pyspark.sql.datasource import DataSourceStreamReader, InputPartition
from pyspark.sql.streaming.datasource import ReadAllAvailable, ReadLimit, ReadMaxRows, SupportsTriggerAvailableNow

from client.errors import MQBrokerError, MQClientError
from remoting.codec.bodies import MessageQueue
from remoting.errors import RemotingError
from spark import data_loss, offsets
from spark.offsets import OffsetTable
from spark.options import EARLIEST, STARTED_AT, OffsetKind, OffsetSpec, OptionError, SourceOptions
from spark.reader import QueueRange, plan_ranges, read_range
from spark.session import BrokerSession

log = logging.getLogger(__name__)


__all__ = ["RocketMQStreamReader"]


def _queue_offsets(offset: Mapping[str, Any]) -> dict[str, Any]:
    """A stream offset without batch 0's record of the start: the JSON of an offset table."""
    return {topic: queues for topic, queues in offset.items() if topic != STARTED_AT}


class RocketMQStreamReader(DataSourceStreamReader, SupportsTriggerAvailableNow):
    """See the module docstring."""

    def __init__(self, options: SourceOptions, starting_given: bool) -> None:
        options.require_topics()
        if options.endings_given:
            raise OptionError("option endingOffsets is for batch reads only: a stream has no end")
        self.options = options
        self.starting = options.starting if starting_given else OffsetSpec(OffsetKind.LATEST)
        self._session: BrokerSession | None = None
        self._latest: dict[str, dict[str, int]] | None = None
        self._target: OffsetTable | None = None  # Trigger.AvailableNow's end: see prepareForTriggerAvailableNow

    def __getstate__(self) -> dict[str, Any]:
        state = dict(self.__dict__)
        state["_session"] = None  # a live client never travels to the executors
        return state

    def _broker(self) -> BrokerSession:
        if self._session is None:
            self._session = BrokerSession(self.options.name_server, config=self.options.client_config()).open()
        return self._session

    def initialOffset(self) -> dict[str, Any]:
        return {}  # the stream's start: resolved by the first latestOffset, recorded in batch 0's end offset

    def _starting_offsets(self, session: BrokerSession, mqs: list[MessageQueue]) -> OffsetTable:
        missing = functools.partial(data_loss.start_missing, self.options)
        return offsets.resolve(
            session, self.starting, mqs, default=EARLIEST, option="startingOffsets", out_of_range=missing
        )

    def _reset(self) -> None:
        """Drop the driver-side session after a failed fetch: the next attempt connects anew."""
        self.stop()

    def _bounds(self, mqs: list[MessageQueue]) -> dict[MessageQueue, tuple[int, int]]:
        """``min_max_offsets(mqs)`` through :func:`spark.offsets.with_retries`: ``partitions`` fetches offsets too (a
        restarted query plans its logged batch first, on a new reader), and Kafka's source and rocketmq-spark retry
        those as well (``rocketmq-spark/src/main/scala/org/apache/spark/sql/rocketmq/RocketMQOffsetReader.scala``
        ``fetchEarliestOffsets(newPartitions)``, in ``withRetries``)."""
        return offsets.with_retries(self.options, lambda: self._broker().min_max_offsets(mqs), self._reset)

    def latestOffset(self, start: dict[str, Any], limit: ReadLimit) -> dict[str, Any]:
        latest: dict[str, Any] = offsets.with_retries(
            self.options, functools.partial(self._latest_offset, start, limit), self._reset
        )
        return latest

    def _latest_offset(self, start: dict[str, Any], limit: ReadLimit) -> dict[str, Any]:
        session = self._broker()
        mqs = offsets.list_queues(session, self.options.topics)
        bounds = self._answered_bounds(session, mqs) if start else session.min_max_offsets(mqs)
        self._latest = offsets.to_json({mq: high for mq, (_, high) in bounds.items()})
        latest = self._readable_ends(bounds)
        begin = offsets.from_json(_queue_offsets(start)) if start else self._starting_offsets(session, mqs)
        for mq, (low, _) in bounds.items():
            begin.setdefault(mq, low)
        if self._target is not None:
            self._check_owed(mqs, bounds, begin)
        self._into_held(begin, bounds)
        if isinstance(limit, ReadMaxRows):
            end = offsets.admit(begin, latest, limit.max_rows)
        else:
            end = {mq: max(latest[mq], begin[mq]) for mq in latest}
        for mq, offset in begin.items():
            end.setdefault(mq, offset)  # a queue that vanished from the route keeps its position
        table = offsets.to_json(end)
        if not start:
            return {**table, STARTED_AT: offsets.to_json(begin)}
        return start if table == _queue_offsets(start) else table  # unchanged: no new batch

    @staticmethod
    def _answered_bounds(session: BrokerSession, mqs: list[MessageQueue]) -> dict[MessageQueue, tuple[int, int]]:
        """The (min, max) offsets of ``mqs``, master by master: the queues of a master that does not answer (down,
        while the name server still routes it) are left out, with a warning, so they keep their position in the
        stream and the other masters' queues go on, as a RocketMQ consumer goes on with the masters that answer.
        Raises the first failure when no master answers, and a master's error answer (:class:`MQBrokerError`) at
        once: it is up (:func:`spark.offsets.with_retries` retries both)."""
        by_master: dict[str, list[MessageQueue]] = {}
        for mq in mqs:
            by_master.setdefault(mq.broker_name, []).append(mq)
        bounds: dict[MessageQueue, tuple[int, int]] = {}
        failures: list[Exception] = []
        for master, queues in sorted(by_master.items()):
            try:
                bounds.update(session.min_max_offsets(queues))
            except MQBrokerError:
                # It answered: an error code (an ACL refusal, ``acl/.../PlainPermissionManager.java`` validate) is no
                # master down, and leaving its queues behind would stall them without a word to the query.
                raise
            except (MQClientError, RemotingError) as exc:
                failures.append(exc)
                log.warning("master %s does not answer, its %d queues keep their offsets: %s", master, len(queues), exc)
        if failures and not bounds:
            raise failures[0]
        return bounds

    def _check_owed(
        self, mqs: list[MessageQueue], bounds: Mapping[MessageQueue, tuple[int, int]], begin: OffsetTable
    ) -> None:
        """Under Trigger.AvailableNow, raise when a master that did not answer still owes rows below the end the run
        started with: left behind, its queues would stop the offsets moving once the others reach their ends, and
        Spark would end the run as done with those rows unread. Spark's ``SupportsTriggerAvailableNow`` reads all
        the data available when ``prepareForTriggerAvailableNow`` ran (Kafka's ``KafkaMicroBatchStream.latestOffset``
        reads to those ends and fails on a partition it cannot read), so the fetch fails and is retried."""
        assert self._target is not None
        owed = sorted(mq for mq in mqs if mq not in bounds and mq in begin and begin[mq] < self._target.get(mq, 0))
        if owed:
            masters = ", ".join(sorted({mq.broker_name for mq in owed}))
            raise MQClientError(
                f"Trigger.AvailableNow: master {masters} does not answer and {len(owed)} of its queues are short of "
                "the end the run started with"
            )

    def prepareForTriggerAvailableNow(self) -> None:
        def fetch() -> dict[MessageQueue, tuple[int, int]]:
            session = self._broker()
            return session.min_max_offsets(offsets.list_queues(session, self.options.topics))

        bounds = offsets.with_retries(self.options, fetch, self._reset)
        self._target = {mq: high for mq, (_, high) in bounds.items()}

    def _readable_ends(self, bounds: Mapping[MessageQueue, tuple[int, int]]) -> OffsetTable:
        """Each queue's max offset; under Trigger.AvailableNow at most the one it had when the query started (a queue
        routed since then has nothing to read)."""
        if self._target is None:
            return {mq: high for mq, (_, high) in bounds.items()}
        return {mq: min(high, self._target.get(mq, low)) for mq, (low, high) in bounds.items()}

    @staticmethod
    def _into_held(begin: dict[MessageQueue, int], bounds: Mapping[MessageQueue, tuple[int, int]]) -> None:
        """Move each queue's start in ``begin`` (in place) into the offsets the queue holds, which is where the
        admitted rows are counted from. The batch still starts at the stream's offset, so a queue that no longer holds
        it is data loss reported once, where Kafka's source reports it: by :meth:`partitions` when the queue was reset
        below it (the batch ends before its start), by the task reading the batch when retention deleted it
        (:func:`~spark.reader.read_range`)."""
        for mq, (low, high) in bounds.items():
            if not low <= begin[mq] <= high:
                begin[mq] = low

    def getDefaultReadLimit(self) -> ReadLimit:
        if self.options.max_records_per_trigger is not None:
            return ReadMaxRows(self.options.max_records_per_trigger)
        return ReadAllAvailable()

    def reportLatestOffset(self) -> dict[str, Any] | None:
        return self._latest

    def partitions(self, start: dict[str, Any], end: dict[str, Any]) -> Sequence[InputPartition]:
        until = offsets.from_json(_queue_offsets(end))
        begin = offsets.from_json(_queue_offsets(start)) if start else self._first_batch_start(end, until)
        self._check_reset(begin, until)
        missing = [mq for mq in until if mq not in begin]
        if missing:  # a queue new since the batch's start begins at its first offset
            for mq, (low, high) in self._bounds(missing).items():
                if low > 0:
                    self._new_queue_aged(mq, low, high)
                begin[mq] = low
        return plan_ranges(begin, until)

    def _new_queue_aged(self, mq: MessageQueue, low: int, high: int) -> None:
        """A queue new to the stream whose first offset is not 0: its messages below ``low`` were deleted (retention)
        before the stream read them. Data loss, raised or logged, as rocketmq-spark's ``getBatch`` reports an added
        queue that does not start from 0
        (``rocketmq-spark/src/main/scala/org/apache/spark/sql/rocketmq/RocketMQSource.scala``), and Kafka's source an
        added partition."""
        what = (
            f"{data_loss.describe(mq)} is new to the stream and holds offsets {low}..{high}: offsets [0, {low}) are "
            "gone, deleted by retention before the stream read them"
        )
        data_loss.report(self.options, what, low)

    def _first_batch_start(self, end: Mapping[str, Any], until: Mapping[MessageQueue, int]) -> OffsetTable:
        """Where batch 0, which starts at the stream's start ``{}``, begins: what its end offset (in the checkpoint)
        recorded. A checkpoint written before that record existed has none: ``startingOffsets`` resolved now, as the
        stream then did, and at most the batch's end (``latest`` has moved on since)."""
        if STARTED_AT in end:
            return offsets.from_json(end[STARTED_AT])

        def fetch() -> OffsetTable:
            session = self._broker()
            return self._starting_offsets(session, offsets.list_queues(session, self.options.topics))

        resolved = offsets.with_retries(self.options, fetch, self._reset)
        return {mq: min(offset, until[mq]) for mq, offset in resolved.items() if mq in until}

    def _check_reset(self, begin: dict[MessageQueue, int], until: Mapping[MessageQueue, int]) -> None:
        """A queue whose batch ends below its start was reset below the stream's offset (``latestOffset`` went on
        from its first offset under ``failOnDataLoss=false``). Raises DataLossError, or logs and reads that queue
        from its first offset (``begin`` is changed in place)."""
        reset = [mq for mq, offset in begin.items() if mq in until and offset > until[mq]]
        if not reset:
            return
        for mq, (low, _) in self._bounds(reset).items():
            resume = min(low, until[mq])
            what = f"{data_loss.describe(mq)} was reset: the batch ends at {until[mq]}, before its start {begin[mq]}"
            data_loss.report(self.options, what, resume)
            begin[mq] = resume

    def read(self, partition: InputPartition) -> Iterator[object]:
        assert isinstance(partition, QueueRange)
        return read_range(self.options, partition)

    def commit(self, end: dict[str, Any]) -> None:
        if self.options.consumer_group is not None:
            self._mirror(self.options.consumer_group, offsets.from_json(_queue_offsets(end)))

    def _mirror(self, group: str, table: OffsetTable) -> None:
        """Copy ``table`` into ``group``'s offsets on the brokers, for monitoring only (the checkpoint is the stream's
        position): a queue the route no longer lists is left out (the stream keeps its position, but it has no master
        to tell), and a failure is logged per queue, never raised into the query."""
        session = self._broker()
        try:
            routed = set(offsets.list_queues(session, self.options.topics))
        except (MQClientError, RemotingError) as exc:
            log.warning("consumerGroup %s: offsets not mirrored, no route: %s", group, exc)
            return
        for mq in sorted(routed & table.keys()):
            try:
                session.update_consumer_offsets(group, {mq: table[mq]})
            except (MQClientError, RemotingError) as exc:
                where = data_loss.describe(mq)
                log.warning("consumerGroup %s: offset %d of %s not mirrored: %s", group, table[mq], where, exc)

    def stop(self) -> None:
        session, self._session = self._session, None
        if session is not None:
            session.close()
