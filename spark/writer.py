"""Batch write: each task sends its rows as messages, in SEND_BATCH_MESSAGE requests per topic.

Input columns: ``body`` (binary, or string sent as UTF-8) is required; the ``topic`` option for every row, or else a
``topic`` column (string) per row: the option overrides the column, as in Kafka's sink, so rows read from one topic
are written to the option's; optional ``keys`` (a string of space-separated keys, or an array of strings), ``tags``
(string) and ``properties`` (map<string,string>; names RocketMQ keeps for itself, :data:`SYSTEM_PROPERTIES`, are left
out, so a read's rows copy over with their user properties only, and so are null and empty values, which a message
cannot carry), and ``flag`` (an integer column within Java's int, ``Message.setFlag``; the column a read has, so a
copied row keeps its flag). Other columns are ignored. A column of another
type fails the write at planning (:func:`check_columns`); a row without a topic or a body raises
:class:`~spark.options.OptionError` in its task, which fails the write.

A batch write appends (``mode("append")``; ``overwrite`` fails at planning: a topic cannot be truncated) and is
at least once: a task that fails after some sends is retried by Spark and sends those rows again, and a failed job
leaves what it sent published (``abort`` logs how many rows its finished tasks sent).
Streaming writes are exactly once (:mod:`spark.stream_writer`).
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Iterator
from typing import Any

import attrs
from pyspark.sql.datasource import DataSourceWriter, WriterCommitMessage
from pyspark.sql.types import StructType

from client.errors import MQBrokerError
from client.message import Message
from client.send_request import MAX_MESSAGE_SIZE, batch_entry_size, check_topic
from remoting.codec.codes import ResponseCode
from spark.options import OptionError, SourceOptions, check_name
from spark.session import BrokerSession

__all__ = [
    "COLUMN_TYPES",
    "SEND_CHUNK",
    "SYSTEM_PROPERTIES",
    "RocketMQBatchWriter",
    "WriteCommit",
    "check_columns",
    "row_to_message",
    "send_rows",
]

log = logging.getLogger(__name__)

#: Messages handed to one ``send_batch`` call at most; fewer when their batch body would pass the producer's 4 MiB
#: limit (``send_batch`` refuses it, as Java's ``DefaultMQProducer.send(Collection)``).
SEND_CHUNK = 512


@attrs.frozen(slots=True)
class WriteCommit(WriterCommitMessage):
    """What a write task reports to the driver: rows sent now and rows skipped as already published."""

    partition_id: int
    sent: int
    skipped: int = 0
    query_id: str | None = None
    batch_id: int | None = None


#: Property names RocketMQ keeps for itself (``MessageConst.STRING_HASH_SET`` of 4.9.8 and 5.3.3,
#: common/src/main/java/org/apache/rocketmq/common/message/MessageConst.java), which Java's
#: ``Message.putUserProperty`` refuses. A read's ``properties`` column holds them too: written back as they were, a
#: copy would carry its source's ``UNIQ_KEY`` (every copy the same msgId), ``TAGS`` and ``KEYS`` in place of its
#: columns', the source's ``TRAN_MSG``, ``PGROUP``, ``DELAY`` or timer... so the sink leaves them out.
SYSTEM_PROPERTIES: frozenset[str] = frozenset(
    {
        "TRACE_ON", "MSG_REGION", "KEYS", "TAGS", "WAIT", "DELAY", "RETRY_TOPIC", "REAL_TOPIC", "REAL_QID",
        "TRAN_MSG", "PGROUP", "MIN_OFFSET", "MAX_OFFSET", "BUYER_ID", "ORIGIN_MESSAGE_ID", "TRANSFER_FLAG",
        "CORRECTION_FLAG", "MQ2_FLAG", "RECONSUME_TIME", "UNIQ_KEY", "MAX_RECONSUME_TIMES", "CONSUME_START_TIME",
        "POP_CK", "POP_CK_OFFSET", "1ST_POP_TIME", "TRAN_PREPARED_QUEUE_OFFSET", "DUP_INFO", "EXTEND_UNIQ_INFO",
        "INSTANCE_ID", "CORRELATION_ID", "REPLY_TO_CLIENT", "TTL", "ARRIVE_TIME", "PUSH_REPLY_TIME", "CLUSTER",
        "MSG_TYPE", "INNER_MULTI_QUEUE_OFFSET", "TIMER_DELAY_MS", "TIMER_DELAY_SEC", "TIMER_DELIVER_MS",
        "TIMER_ENQUEUE_MS", "TIMER_DEQUEUE_MS", "TIMER_ROLL_TIMES", "TIMER_OUT_MS", "TIMER_DEL_UNIQKEY",
        "TIMER_DELAY_LEVEL", "__BORNHOST", "BORN_TIMESTAMP", "DLQ_ORIGIN_TOPIC", "DLQ_ORIGIN_MESSAGE_ID", "__CRC32#",
    }
)  # fmt: skip

#: The Spark types (``simpleString``) each input column may have.
COLUMN_TYPES: dict[str, tuple[str, ...]] = {
    "body": ("binary", "string"),
    "topic": ("string",),
    "tags": ("string",),
    "keys": ("string", "array<string>"),
    "properties": ("map<string,string>",),
    "flag": ("tinyint", "smallint", "int", "bigint"),  # Python ints infer as bigint
}


def check_columns(schema: StructType, options: SourceOptions) -> None:
    """Planning-time check of the input columns and the write's ``topic`` option; raises OptionError naming a missing
    column, one of a wrong type, or a topic RocketMQ forbids sending to. The ``topic`` column is not read, so not
    checked, when the ``topic`` option is set."""
    names = schema.fieldNames()
    if "body" not in names:
        raise OptionError("a rocketmq write needs a body column (binary or string)")
    if "topic" not in names and not options.topics:
        raise OptionError("a rocketmq write needs a topic column or the topic option")
    if len(options.topics) > 1:
        raise OptionError("option topic names one topic for writes, not a list")
    if options.topics:  # a topic Java's producer may not send to (Validators.isNotAllowedSendTopic)
        check_name("topic", options.topics[0], check_topic)
    for name, allowed in COLUMN_TYPES.items():
        if name not in names or (name == "topic" and options.topics):
            continue
        kind = schema[name].dataType.simpleString()
        if kind not in allowed:
            raise OptionError(f"column {name} of a rocketmq write is {kind}; expected {' or '.join(allowed)}")


def row_to_message(row: Any, topic_option: str | None, extra: dict[str, str] | None = None) -> Message:
    """The message for one input row (a Spark Row or a mapping), sent to ``topic_option`` when set, else to the row's
    ``topic``. Raises OptionError without topic or body."""
    fields = row.asDict() if hasattr(row, "asDict") else dict(row)
    topic = topic_option or fields.get("topic")
    body = fields.get("body")
    if not topic:
        raise OptionError("a row has no topic (set the topic column or the topic option)")
    if body is None:
        raise OptionError(f"a row for topic {topic!r} has a null body")
    keys = fields.get("keys")
    if isinstance(keys, list | tuple):
        keys = [k for k in keys if k is not None]
    # A null map value is no property (it used to be stored as the text "None"), nor is an empty one: the wire form
    # cannot carry it (Java's MessageDecoder.string2messageProperties drops "name\x01", as every read here does, and
    # Java's putUserProperty refuses it). RocketMQ's own names are not the row's.
    given = (fields.get("properties") or {}).items()
    props = {str(k): str(v) for k, v in given if v is not None and v != "" and str(k) not in SYSTEM_PROPERTIES}
    if extra:
        props.update(extra)
    return Message(
        topic=topic,
        body=body.encode() if isinstance(body, str) else bytes(body),
        tags=fields.get("tags") or None,
        keys=keys if isinstance(keys, list) else keys or None,
        properties=props,
        flag=_flag(fields.get("flag"), topic),
    )


def _flag(value: int | None, topic: str) -> int:
    """A row's flag as Java's ``int``; OptionError outside its range (a ``bigint`` column may hold one)."""
    flag = value or 0
    if not -(2**31) <= flag < 2**31:
        raise OptionError(f"a row for topic {topic!r} has flag {flag}, outside Java's int")
    return flag


def send_rows(session: BrokerSession, msgs: Iterable[Message]) -> int:
    """Send ``msgs`` in chunks of :data:`SEND_CHUNK` and at most 4 MiB, one topic per request; returns how many were
    sent. A chunk the broker refuses as too large is sent again in halves, and later chunks are kept under half its
    size (:func:`_send_chunk`)."""
    sent = 0
    limit = [MAX_MESSAGE_SIZE]  # the most bytes a chunk may take: lowered when the broker refuses one
    pending: dict[str, list[Message]] = {}
    sizes: dict[str, int] = {}
    for msg in msgs:
        size = batch_entry_size(msg)
        chunk = pending.setdefault(msg.topic, [])
        if chunk and sizes[msg.topic] + size > limit[0]:
            sent += _send_chunk(session, chunk, limit)
            chunk = pending[msg.topic] = []
        if not chunk:
            sizes[msg.topic] = 0
        chunk.append(msg)
        sizes[msg.topic] += size
        if len(chunk) >= SEND_CHUNK:
            sent += _send_chunk(session, chunk, limit)
            pending[msg.topic] = []
    for chunk in pending.values():
        if chunk:
            sent += _send_chunk(session, chunk, limit)
    return sent


def _send_chunk(session: BrokerSession, chunk: list[Message], limit: list[int]) -> int:
    """Send ``chunk`` in one SEND_BATCH_MESSAGE. A broker checks a batch's whole body against its own
    ``maxMessageSize``, which may be set below the producer's 4 MiB, and refuses it as MESSAGE_ILLEGAL before storing
    any of it (``store/src/main/java/org/apache/rocketmq/store/DefaultMessageStore.java`` ``checkMessages``): a
    refused chunk of several messages is sent again in two halves, and ``limit[0]`` drops below half its size for the
    chunks to come. A single message refused is raised, as Java's ``send`` of it would fail."""
    try:
        session.send_batch(chunk)
    except MQBrokerError as exc:
        if exc.code != ResponseCode.MESSAGE_ILLEGAL or len(chunk) == 1:
            raise
        limit[0] = min(limit[0], sum(batch_entry_size(m) for m in chunk) // 2)
        half = len(chunk) // 2
        return _send_chunk(session, chunk[:half], limit) + _send_chunk(session, chunk[half:], limit)
    return len(chunk)


def task_partition_id() -> int:
    from pyspark import TaskContext

    context = TaskContext.get()
    return context.partitionId() if context is not None else 0


class RocketMQBatchWriter(DataSourceWriter):
    """See the module docstring."""

    def __init__(self, options: SourceOptions) -> None:
        self.options = options

    def write(self, iterator: Iterator[Any]) -> WriteCommit:
        topic_option = self.options.topics[0] if self.options.topics else None
        with BrokerSession(
            self.options.name_server, producer_group=self.options.producer_group, config=self.options.client_config()
        ) as session:
            sent = send_rows(session, (row_to_message(row, topic_option) for row in iterator))
        return WriteCommit(task_partition_id(), sent)

    def abort(self, messages: list[WriterCommitMessage | None]) -> None:
        """Say what a failed job left behind: its finished tasks' rows (and whatever its failed tasks sent) are stored
        and stay so, as RocketMQ has no way to take a sent message back; running the write again sends them again.
        ``messages`` holds a :class:`WriteCommit` per finished task, None per failed one."""
        done = [m for m in messages if isinstance(m, WriteCommit)]
        where = self.options.topics[0] if self.options.topics else "its topics"
        log.warning(
            "batch write to %s aborted: the %d rows its %d finished tasks sent stay published, and any its failed "
            "tasks sent before failing; running the write again sends them again (a batch write is at least once)",
            where,
            sum(m.sent for m in done),
            len(done),
        )
