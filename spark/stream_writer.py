"""Streaming write, exactly once per (query id, batch id): a replayed micro-batch never publishes a row twice.

Design: idempotent task publishing with markers the broker can be asked about.

Each write task knows its identity from Spark's task context: the query id (stable across restarts from one
checkpoint), the batch id and its partition id, together the task's *transaction* ``txn = "query:batch:partition"``.
Spark replays a micro-batch from the offsets in its checkpoint, so a replayed task sees the same rows, in the same
order or, behind a shuffle, in another (its output is UNORDERED); each row of a task is stamped with the properties
``SPARK_TXN=txn`` and ``SPARK_SEQ=digest:n``, a digest of what the row sends and how many equal rows came before it
in the task (:func:`row_seq`), so a retry knows a stored row in whatever order it comes. Markers are small messages
in the ``commitTopic`` (default ``RMQ_SPARK_SINK_COMMITS``), found again by key with QUERY_MESSAGE:

1. ``query:batch:commit`` -- written by the driver's ``commit`` once every task has succeeded;
2. ``txn:done`` -- written by a task after all its rows are stored;
3. ``txn:start:topic`` -- written by a task before its first send to ``topic``; its body records every queue's max
   offset of that topic at that moment.

The first task creates the commit topic: with UPDATE_AND_CREATE_TOPIC, or, for an account without the admin right
that request needs under ACL, by its first marker's send (:class:`MarkerLog`).

A task first looks for (1) and (2): either found means its rows are already published, and it sends nothing. Else it
looks for (3) per topic: when found (an earlier attempt of the task died part-way), it pulls the topic's queues from
the recorded offsets, collects the ``SPARK_SEQ`` values stamped with its ``txn`` and sends only the other rows. Every
lookup asks the master of each broker the commit topic's route lists and fails the task when one does not answer or
a listed broker has no master up: a marker there is not known to be absent (the admin's QUERY_MESSAGE, as Java's
``MQAdminImpl.queryMessage``, passes a silent master over and reads a slave while its master is down, and a slave may
not hold what its master stored: HA copies asynchronously). So a commit that fails after the tasks published, a
driver crash, a task retried after a partial send, and a batch re-planned after a restart all end with each row
stored once. A task without rows opens no client and writes no marker, and neither does the commit of a batch without
rows.

Why not transactional half messages: they would make rows invisible until the driver commits, but they depend on the
broker's transaction check-back and END_TRANSACTION, which were being built at the same time as this connector; the
marker design needs only SEND, QUERY_MESSAGE (the key index must be on, as it is by default) and PULL. Its costs: rows
are visible as soon as their task stores them, before the batch commits (Kafka's non-transactional sink behaves the
same), and a row carries the two SPARK_* properties. ``abort`` therefore undoes nothing: a batch's rows that were
published stay published, and whatever replay follows publishes only what is missing. A committed batch can never
be undone.

Limits: a broker the commit topic's route no longer lists is not asked: the name server drops a broker whose master is
gone and that has no slave (at once when its connection closes, else after 120 s without a registration,
namesrv/src/main/java/org/apache/rocketmq/namesrv/routeinfo/RouteInfoManager.java ``onChannelDestroy`` /
``scanNotActiveBroker``, BROKER_CHANNEL_EXPIRED_TIME), so a replay while a slave-less master that held the task's
markers is down, or after it was replaced by another broker, finds no marker and publishes the task's rows again. Keep
the commit topic on brokers with slaves (or DLedger groups): their route stays listed and a lookup fails until a master
is up. Exactly once also assumes the replayed batch's rows reach the same partition (true for Spark's deterministic
micro-batch replay; their order may differ); a send that the producer retried after a lost response may still be stored
twice, as with any RocketMQ producer. Two attempts of one task running at once (``spark.speculation``) would both
publish the rows: neither sees the other's ``done`` marker, and the second may scan the first's rows while it is still
sending; a session with speculation on therefore has its stream writes refused when the query starts
(:func:`spark.source.register`, :func:`spark.source.check_no_speculation`).
"""

from __future__ import annotations

import hashlib
import itertools
import logging
import time
from collections import Counter
from collections.abc import Iterable, Iterator
from typing import Any

import orjson
from pyspark.sql.datasource import DataSourceStreamWriter, WriterCommitMessage

from client.errors import MQBrokerError, TopicRouteNotFoundError
from client.message import Message
from remoting.codec.bodies import MessageQueue
from spark.offsets import from_json, to_json
from spark.options import OptionError, SourceOptions
from spark.session import BrokerSession
from spark.writer import WriteCommit, row_to_message, send_rows

__all__ = ["SEQ_PROPERTY", "TXN_PROPERTY", "MarkerLog", "RocketMQStreamWriter"]

TXN_PROPERTY = "SPARK_TXN"
SEQ_PROPERTY = "SPARK_SEQ"
QUERY_ID_PROPERTY = "sql.streaming.queryId"
BATCH_ID_PROPERTY = "streaming.sql.batchId"
#: How long a task waits for a commit topic it just created to show up at the name server.
TOPIC_WAIT = 10.0

log = logging.getLogger(__name__)


class MarkerLog:
    """The markers of one commit topic, through a session that has a producer.

    The topic is made on first use: with UPDATE_AND_CREATE_TOPIC when the account may (that request is admin-only
    under ACL, ``acl/.../PlainPermissionManager.java`` ``checkPerm``), else by the first marker's send, which the
    broker's ``autoCreateTopicEnable`` (on by default) lets a publishing account do. Either way the log waits until
    the topic routes before it is relied on, so a lookup that finds nothing means "no marker", never "no route yet";
    until a marker is put, a topic without a route holds none. A broker with auto-creation off and an account that
    may not create topics fail the first marker's send: create the commit topic beforehand."""

    def __init__(self, session: BrokerSession, topic: str) -> None:
        self.session = session
        self.topic = topic
        self._created_by_put = False

    def ensure_topic(self) -> None:
        """Create the commit topic when the name server does not know it, and wait until it routes. When the broker
        refuses to create it, leaves that to the first :meth:`put`. Raises TopicRouteNotFoundError after
        :data:`TOPIC_WAIT` seconds."""
        try:
            self.session.queues(self.topic)
            return
        except TopicRouteNotFoundError:
            pass
        try:
            self.session.create_topic(self.topic)
        except MQBrokerError as exc:
            log.info("commit topic %s not created (%s): the first marker's send creates it", self.topic, exc)
            self._created_by_put = True
            return
        self._wait_routed()

    def _wait_routed(self) -> None:
        deadline = time.monotonic() + TOPIC_WAIT
        while True:
            try:
                self.session.queues(self.topic)
                return
            except TopicRouteNotFoundError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.05)

    def find(self, key: str) -> list[dict[str, Any]]:
        """Bodies (JSON objects) of the markers stored under ``key``, oldest first."""
        return [orjson.loads(m.body) for m in self.session.query_by_key(self.topic, key)]

    def put(self, key: str, body: dict[str, Any]) -> None:
        """Store a marker; the first one to a topic :meth:`ensure_topic` could not create then waits for its route."""
        self.session.send(Message(self.topic, orjson.dumps(body), keys=key))
        if self._created_by_put:
            self._wait_routed()
            self._created_by_put = False


def task_identity() -> tuple[str, int, int]:
    """(query id, batch id, partition id) of the running write task; raises OptionError outside a streaming query."""
    from pyspark import TaskContext

    context = TaskContext.get()
    query_id = context.getLocalProperty(QUERY_ID_PROPERTY) if context is not None else None
    batch_id = context.getLocalProperty(BATCH_ID_PROPERTY) if context is not None else None
    if context is None or not query_id or batch_id is None:
        raise OptionError("the rocketmq stream writer runs only inside a streaming query's write task")
    return query_id, int(batch_id), context.partitionId()


def row_seq(msg: Message, occurrences: Counter[str]) -> str:
    """The ``SPARK_SEQ`` of the next row of a task, ``msg``: a digest of what it sends (topic, body, tags, keys,
    properties, flag) and how many equal rows the task had before it (``occurrences`` counts them). A retried task
    gets the same rows, but behind a shuffle not in the same order (Spark marks a shuffle's output UNORDERED,
    ``core/src/main/scala/org/apache/spark/rdd/RDD.scala`` ``DeterministicLevel``): only equal rows, which are
    interchangeable, are told apart by their position."""
    sends: list[Any] = [msg.topic, sorted(msg.all_properties().items())]
    if msg.flag:  # a flag is part of what a row sends (0 left out: the digests of rows without one stay as they were)
        sends.append(msg.flag)
    digest = hashlib.blake2b(orjson.dumps(sends), digest_size=16)
    digest.update(msg.body)
    key = digest.hexdigest()
    seen = occurrences[key]
    occurrences[key] = seen + 1
    return f"{key}:{seen}"


def published_seqs(session: BrokerSession, begin: dict[MessageQueue, int], txn: str, group: str) -> set[str]:
    """``SPARK_SEQ`` values of the messages stamped ``txn`` stored at or after the offsets ``begin``."""
    seqs: set[str] = set()
    bounds = session.min_max_offsets(list(begin))
    for mq, offset in begin.items():
        high = bounds[mq][1]
        for page in range(offset, high, 4096):
            for msg in session.pull_range(mq, page, min(page + 4096, high), group):
                if msg.properties.get(TXN_PROPERTY) == txn:
                    seqs.add(msg.properties[SEQ_PROPERTY])
    return seqs


class RocketMQStreamWriter(DataSourceStreamWriter):
    """See the module docstring."""

    def __init__(self, options: SourceOptions) -> None:
        self.options = options

    def write(self, iterator: Iterator[Any]) -> WriteCommit:
        query_id, batch_id, partition = task_identity()
        rows = iter(iterator)
        first = next(rows, None)
        if first is None:  # an empty partition (a shuffle's idle reducer): no client, no marker, nothing to dedupe
            return WriteCommit(partition, 0, 0, query_id, batch_id)
        with BrokerSession(
            self.options.name_server, producer_group=self.options.producer_group, config=self.options.client_config()
        ) as session:
            sent, skipped = self.publish_once(session, query_id, batch_id, partition, itertools.chain([first], rows))
        return WriteCommit(partition, sent, skipped, query_id, batch_id)

    def publish_once(
        self, session: BrokerSession, query_id: str, batch_id: int, partition: int, rows: Iterable[Any]
    ) -> tuple[int, int]:
        """Publish the rows of task (query, batch, partition) that no earlier attempt stored; returns (sent,
        skipped). Raises what sending raised, leaving the markers so that the next attempt resumes."""
        txn = f"{query_id}:{batch_id}:{partition}"
        topic_option = self.options.topics[0] if self.options.topics else None
        markers = MarkerLog(session, self.options.commit_topic)
        markers.ensure_topic()
        if markers.find(f"{query_id}:{batch_id}:commit") or markers.find(f"{txn}:done"):
            skipped = sum(1 for _ in rows)
            log.info("%s already published (%d rows): nothing sent", txn, skipped)
            return 0, skipped
        done: dict[str, set[str]] = {}
        skipped = 0

        def pending() -> Iterator[Message]:
            nonlocal skipped
            occurrences: Counter[str] = Counter()
            for row in rows:
                msg = row_to_message(row, topic_option)
                seq = row_seq(msg, occurrences)
                msg.properties.update({TXN_PROPERTY: txn, SEQ_PROPERTY: seq})
                seen = done.get(msg.topic)
                if seen is None:
                    seen = done[msg.topic] = self._begin_topic(session, markers, txn, msg.topic)
                if seq in seen:
                    skipped += 1
                    continue
                yield msg

        sent = send_rows(session, pending())
        markers.put(f"{txn}:done", {"sent": sent, "skipped": skipped})
        return sent, skipped

    def _begin_topic(self, session: BrokerSession, markers: MarkerLog, txn: str, topic: str) -> set[str]:
        """The rows of ``txn`` already stored in ``topic`` by an earlier attempt; writes the start marker when this
        is the first attempt to send there."""
        key = f"{txn}:start:{topic}"
        found = markers.find(key)
        if found:
            # Attempts that died each left a start marker: scan from the lowest offsets recorded, and from the start
            # of any queue none recorded (the topic was auto-created by that attempt, or grew queues since).
            begin: dict[MessageQueue, int] = {}
            for body in found:
                for mq, offset in from_json(body).items():
                    begin[mq] = min(offset, begin.get(mq, offset))
            try:
                mqs = session.queues(topic)
            except TopicRouteNotFoundError:
                return set()  # the attempts that marked it died before their first send created the topic
            for mq, (low, _) in session.min_max_offsets(mqs).items():
                begin.setdefault(mq, low)
            return published_seqs(session, begin, txn, self.options.pull_group)
        try:
            mqs = session.queues(topic)
        except TopicRouteNotFoundError:
            mqs = []  # a topic the producer will auto-create: nothing of it can have been stored before
        start = {mq: high for mq, (_, high) in session.min_max_offsets(mqs).items()}
        markers.put(key, to_json(start))
        return set()

    def commit(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:
        commits = [m for m in messages if isinstance(m, WriteCommit)]
        if not commits or commits[0].query_id is None or not any(c.sent or c.skipped for c in commits):
            return  # a batch without rows has nothing a replay could duplicate
        key = f"{commits[0].query_id}:{batchId}:commit"
        with BrokerSession(
            self.options.name_server, producer_group=self.options.producer_group, config=self.options.client_config()
        ) as session:
            markers = MarkerLog(session, self.options.commit_topic)
            if not markers.find(key):
                total = {"sent": sum(c.sent for c in commits), "skipped": sum(c.skipped for c in commits)}
                markers.put(key, {"batch": batchId, **total})

    def abort(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:
        sent = sum(m.sent for m in messages if isinstance(m, WriteCommit))
        log.warning("batch %d aborted: %d rows its finished tasks published stay published", batchId, sent)
