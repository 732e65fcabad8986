"""The ``rocketmq`` data source's options, parsed once from Spark's string map into a frozen :class:`SourceOptions`.

Option names are case-insensitive (Spark hands them over in a case-insensitive map); values are strings. Every bad
value raises :class:`OptionError` (a ``ValueError``) naming the option and what was expected, so a query fails at
planning, before any task runs.

Offsets (``startingOffsets`` / ``endingOffsets``) are one of:

- ``earliest`` / ``latest``: each queue's min / max offset when the query is planned;
- a timestamp: milliseconds since the epoch (``1700000000000``) or ISO-8601 (``2024-01-01T00:00:00Z``; no zone means
  UTC), resolved per queue with SEARCH_OFFSET_BY_TIMESTAMP;
- JSON ``{"topic": {"queueId": offset}}`` with ``-2`` meaning earliest and ``-1`` latest (Kafka's convention). A key
  is a bare queue id (that queue on every broker holding the topic) or ``"brokerName:queueId"``, or a broker name
  mapping queue ids to offsets (rocketmq-spark's form, ``{"topic": {"brokerName": {"queueId": offset}}}``); queues
  the JSON leaves out start at earliest (ending: at latest). A ``"@startedAt"`` entry (:data:`STARTED_AT`, batch 0's
  record of where a stream started) is skipped, so any offset a streaming query reports in its progress is a valid
  value.

``tags`` (a tag expression, ``"A || B"``) is also accepted under rocketmq-spark's name ``subExpression``
(``rocketmq-spark/src/main/scala/org/apache/spark/sql/rocketmq/RocketMQConf.scala``), and ``maxRecordsPerTrigger``
(queue entries per micro-batch) under rocketmq-spark's and Kafka's ``maxOffsetsPerTrigger`` (``RocketMQSource.scala``).

``pullBatchSize`` (messages one pull asks for, 32) and ``pullTimeoutMs`` (how long a task waits for a pull, 10000)
are rocketmq-spark's options of the same names. The queues and offsets a query plans with are fetched up to
``fetchOffset.numRetries`` times (3), ``fetchOffset.retryIntervalMs`` apart (1000), as rocketmq-spark and Kafka do.

rocketmq-spark's ``group`` is refused, as rocketmq-spark refuses it ("Option 'group' can not be specified",
``RocketMQSourceProvider.paramsForDriver`` / ``paramsForExecutors`` / ``paramsForProducer``: every query pulls and
sends under groups of its own): here ``consumerGroup`` names the group a stream mirrors its progress into and
``producerGroup`` the group writes send under, so a ``group`` option taken silently would do neither.

Security: ``accessKey`` and ``secretKey`` sign every request for brokers with ACL on (both or neither); ``tls``
(``true``/``false``) connects with TLS, and ``tlsCaFile`` names the CA that checks the servers' certificates
(only with ``tls=true``: alone it turns nothing on, as Java's client needs ``useTLS``).
"""

from __future__ import annotations

import datetime
import enum
from collections.abc import Mapping
from typing import Any

import attrs
import orjson

from client.config import ClientConfig
from client.errors import MQClientError
from client.send_request import check_consumer_group, check_producer_group, check_topic, check_topic_name

__all__ = ["STARTED_AT", "OffsetKind", "OffsetSpec", "OptionError", "SourceOptions", "check_name"]

#: Where the exactly-once sink's markers go unless ``commitTopic`` says otherwise.
DEFAULT_COMMIT_TOPIC = "RMQ_SPARK_SINK_COMMITS"
#: The group writes send under unless ``producerGroup`` says otherwise.
DEFAULT_PRODUCER_GROUP = "SPARK_ROCKETMQ_SINK"
#: The group batch and streaming reads pull with when ``consumerGroup`` is not set (RocketMQ's tools group).
TOOLS_CONSUMER_GROUP = "TOOLS_CONSUMER"
#: rocketmq-spark's defaults of ``pullBatchSize`` and of ``pullTimeoutMs`` (ours: the session's RPC timeout).
PULL_BATCH_SIZE = 32
PULL_TIMEOUT_MS = 10_000
EARLIEST = -2
LATEST = -1
#: Key of a stream's batch 0 end offset holding the stream's resolved starting offsets (no topic name has an "@"):
#: written by :mod:`spark.stream_reader`, skipped by the offsets JSON of an option.
STARTED_AT = "@startedAt"


class OptionError(ValueError):
    """A missing or malformed option; the message names the option and the accepted forms."""


class OffsetKind(enum.Enum):
    EARLIEST = "earliest"
    LATEST = "latest"
    TIMESTAMP = "timestamp"
    SPECIFIC = "specific"


@attrs.frozen(slots=True)
class OffsetSpec:
    """A parsed offset option. ``per_queue`` (SPECIFIC only) maps topic -> queue key -> offset (-2/-1 allowed)."""

    kind: OffsetKind
    timestamp_ms: int = 0
    per_queue: Mapping[str, Mapping[str, int]] = attrs.field(factory=dict)

    @classmethod
    def parse(cls, name: str, text: str) -> OffsetSpec:
        value = text.strip()
        lowered = value.lower()
        if lowered == "earliest":
            return cls(OffsetKind.EARLIEST)
        if lowered == "latest":
            return cls(OffsetKind.LATEST)
        if value.startswith("{"):
            return cls(OffsetKind.SPECIFIC, per_queue=_parse_offset_json(name, value))
        if value.isdigit():
            return cls(OffsetKind.TIMESTAMP, timestamp_ms=int(value))
        try:
            moment = datetime.datetime.fromisoformat(value)
        except ValueError:
            raise OptionError(
                f"option {name}={text!r}: expected earliest, latest, a timestamp (epoch ms or ISO-8601) or JSON "
                '{"topic": {"queueId": offset}}'
            ) from None
        if moment.tzinfo is None:
            moment = moment.replace(tzinfo=datetime.UTC)
        return cls(OffsetKind.TIMESTAMP, timestamp_ms=int(moment.timestamp() * 1000))


def _parse_offset_json(name: str, text: str) -> dict[str, dict[str, int]]:
    try:
        raw = orjson.loads(text)
    except orjson.JSONDecodeError as exc:
        raise OptionError(f"option {name}: not valid JSON ({exc})") from None
    if not isinstance(raw, dict):
        raise OptionError(f'option {name}: expected a JSON object {{"topic": {{"queueId": offset}}}}')
    out: dict[str, dict[str, int]] = {}
    for topic, queues in raw.items():
        if topic == STARTED_AT:
            continue  # a stream's progress: batch 0's record of its own start, not an offset to read from
        if not isinstance(queues, dict):
            raise OptionError(f"option {name}: topic {topic!r} must map queue ids to offsets")
        table: dict[str, int] = {}
        for key, offset in _flat_queues(queues):
            queue_id = key.rpartition(":")[2]
            if not queue_id.isdigit():
                raise OptionError(f"option {name}: queue key {key!r} of {topic!r} is not a queue id or broker:queueId")
            if isinstance(offset, bool) or not isinstance(offset, int) or offset < EARLIEST:
                raise OptionError(f"option {name}: offset {offset!r} of {topic}/{key} must be an integer >= -2")
            table[key] = offset
        out[topic] = table
    return out


def _flat_queues(queues: dict[str, Any]) -> list[tuple[str, Any]]:
    """A topic's ``(queue key, offset)`` pairs. An object under a key is rocketmq-spark's nested form, the key a broker
    name mapping queue ids to offsets (``{"broker-a": {"0": 23}}``, ``JsonUtils.partitionOffsets`` in
    ``rocketmq-spark/src/main/scala/org/apache/spark/sql/rocketmq/JsonUtils.scala``): its keys become
    ``"broker-a:0"``."""
    pairs: list[tuple[str, Any]] = []
    for key, value in queues.items():
        if isinstance(value, dict):
            pairs.extend((f"{key}:{queue_id}", offset) for queue_id, offset in value.items())
        else:
            pairs.append((key, value))
    return pairs


def _name_servers(text: str) -> str:
    """``text`` as ``host:port;host:port``, empty items dropped (RocketMQ splits ``namesrvAddr`` on ";", and Java's
    ``split`` drops a trailing empty item; :class:`~client.config.ClientConfig` drops every empty one). Raises
    OptionError when no address is left or an item is not ``host:port``."""
    addrs = [addr.strip() for addr in text.split(";") if addr.strip()]
    if not addrs:
        raise OptionError('option nameServer is required, e.g. "127.0.0.1:9876" (several: "h1:9876;h2:9876")')
    for addr in addrs:
        host, _, port = addr.rpartition(":")
        if not host or not port.isdigit():
            raise OptionError(f"option nameServer={text!r}: {addr!r} is not host:port")
    return ";".join(addrs)


def _security(opts: Mapping[str, str]) -> dict[str, Any]:
    access_key, secret_key = opts.get("accesskey") or None, opts.get("secretkey") or None
    if (access_key is None) != (secret_key is None):
        raise OptionError("options accessKey and secretKey go together: give both or neither")
    tls = _flag(opts, "tls", default=False)
    ca_file = opts.get("tlscafile") or None
    return {"access_key": access_key, "secret_key": secret_key, "tls": tls, "tls_ca_file": ca_file}


def _checked_name(options: Mapping[str, str], name: str, default: str | None, check: Any) -> str | None:
    """Option ``name`` (``default`` when unset or empty), passed through ``check``, one of Java's client-side name
    checks (``client/src/main/java/org/apache/rocketmq/client/Validators.java`` ``checkGroup`` / ``checkTopic`` /
    ``isNotAllowedSendTopic``, ``DefaultMQProducerImpl.checkConfig``): a name RocketMQ refuses is an option error at
    planning, not a failure inside a task. Raises OptionError naming the option, with Java's remark."""
    value = options.get(name.lower()) or default
    if value is not None:
        check_name(name, value, check)
    return value


def check_name(name: str, value: str, check: Any) -> None:
    """Pass option ``name``'s ``value`` through ``check``, one of the client's Java-equivalent name checks; raises
    OptionError naming the option, with Java's remark."""
    try:
        check(value)
    except MQClientError as exc:
        raise OptionError(f"option {name}={value!r}: {exc}") from None


def _one_of(options: Mapping[str, str], name: str, *aliases: str) -> str:
    """Which of option ``name`` and its ``aliases`` (the same option under rocketmq-spark's or Kafka's name) is set:
    ``name`` when none is. Raises OptionError when two are set to different values."""
    given = {n: options[n.lower()] for n in (name, *aliases) if n.lower() in options}
    if len(set(given.values())) > 1:
        raise OptionError(f"options {' and '.join(given)} are one option under two names: give one")
    return next(iter(given), name)


def _positive_int(options: Mapping[str, str], name: str) -> int | None:
    text = options.get(name.lower())
    if text is None:
        return None
    try:
        value = int(text)
    except ValueError:
        raise OptionError(f"option {name}={text!r}: expected a positive integer") from None
    if value <= 0:
        raise OptionError(f"option {name}={text!r}: expected a positive integer")
    return value


def _non_negative_int(options: Mapping[str, str], name: str, default: int) -> int:
    text = options.get(name.lower())
    if text is None:
        return default
    if not text.strip().isdigit():
        raise OptionError(f"option {name}={text!r}: expected an integer >= 0")
    return int(text)


def _flag(options: Mapping[str, str], name: str, *, default: bool) -> bool:
    text = options.get(name.lower())
    if text is None:
        return default
    if text.strip().lower() not in ("true", "false"):
        raise OptionError(f"option {name}={text!r}: expected true or false")
    return text.strip().lower() == "true"


@attrs.frozen(slots=True)
class SourceOptions:
    """Every option of the data source, typed. Build with :meth:`parse`; picklable (it travels to the executors)."""

    name_server: str
    topics: tuple[str, ...]
    starting: OffsetSpec
    ending: OffsetSpec
    tags: str
    max_records_per_trigger: int | None
    consumer_group: str | None
    commit_topic: str
    producer_group: str
    endings_given: bool
    access_key: str | None = None
    secret_key: str | None = attrs.field(default=None, repr=False)
    tls: bool = False
    tls_ca_file: str | None = None
    #: A stream whose next offset a queue no longer holds (retention deleted it, or the topic or the broker's data was
    #: reset below it), or whose JSON ``startingOffsets`` a queue does not hold, fails (Kafka's ``failOnDataLoss``, true
    #: by default); false starts that queue over at its first offset (at the nearest held one), with a warning. A batch
    #: or streaming read whose planned offsets are gone when its task reads them fails too, and so does a batch read
    #: whose JSON ``endingOffsets`` a queue does not hold; false skips them (ends at the nearest offset held).
    fail_on_data_loss: bool = True
    #: rocketmq-spark's ``pullBatchSize`` and ``pullTimeoutMs`` (``RocketMQConf.PULL_MAX_BATCH_SIZE`` /
    #: ``PULL_TIMEOUT_MS``, ``rocketmq-spark/src/main/scala/org/apache/spark/sql/rocketmq/CachedRocketMQConsumer.scala``
    #: ``get``): the most messages one pull asks for (the broker caps it, ``maxTransferCountOnMessageInMemory``, 32 by
    #: default) and how long a task waits for a pull's answer.
    pull_batch_size: int = PULL_BATCH_SIZE
    pull_timeout_ms: int = PULL_TIMEOUT_MS
    #: ``fetchOffset.numRetries`` / ``fetchOffset.retryIntervalMs``: attempts of the queues and offsets a query plans
    #: with, and the pause between them (:func:`spark.offsets.with_retries`).
    fetch_offset_attempts: int = 3
    fetch_offset_interval_ms: int = 1000

    @classmethod
    def parse(cls, options: Mapping[str, str]) -> SourceOptions:
        """Parse Spark's option map (keys already lower-cased or case-insensitive). Raises :class:`OptionError`."""
        opts = {str(k).lower(): str(v) for k, v in options.items()}
        if "group" in opts:
            raise OptionError(
                "option group is not taken (rocketmq-spark refuses it too): set consumerGroup for the group a stream "
                "mirrors its offsets into, producerGroup for the group writes send under"
            )
        name_server = _name_servers(opts.get("nameserver", ""))
        topics = tuple(t.strip() for t in opts.get("topic", "").split(",") if t.strip())
        for topic in topics:
            check_name("topic", topic, check_topic_name)  # a write's is checked for sending too: check_columns
        return cls(
            name_server=name_server,
            topics=topics,
            starting=OffsetSpec.parse("startingOffsets", opts.get("startingoffsets", "earliest")),
            ending=OffsetSpec.parse("endingOffsets", opts.get("endingoffsets", "latest")),
            tags=opts.get(_one_of(opts, "tags", "subExpression").lower(), "*").strip() or "*",
            max_records_per_trigger=_positive_int(opts, _one_of(opts, "maxRecordsPerTrigger", "maxOffsetsPerTrigger")),
            consumer_group=_checked_name(opts, "consumerGroup", None, check_consumer_group),
            commit_topic=_checked_name(opts, "commitTopic", DEFAULT_COMMIT_TOPIC, check_topic) or DEFAULT_COMMIT_TOPIC,
            producer_group=_checked_name(opts, "producerGroup", DEFAULT_PRODUCER_GROUP, check_producer_group)
            or DEFAULT_PRODUCER_GROUP,
            endings_given="endingoffsets" in opts,
            fail_on_data_loss=_flag(opts, "failOnDataLoss", default=True),
            pull_batch_size=_positive_int(opts, "pullBatchSize") or PULL_BATCH_SIZE,
            pull_timeout_ms=_positive_int(opts, "pullTimeoutMs") or PULL_TIMEOUT_MS,
            fetch_offset_attempts=_positive_int(opts, "fetchOffset.numRetries") or 3,
            fetch_offset_interval_ms=_non_negative_int(opts, "fetchOffset.retryIntervalMs", 1000),
            **_security(opts),
        )

    def client_config(self) -> ClientConfig:
        """The client settings every session of this source uses (name servers, ACL keys, TLS)."""
        return ClientConfig(
            namesrv_addr=self.name_server,
            access_key=self.access_key,
            secret_key=self.secret_key,
            tls=self.tls,
            tls_ca_file=self.tls_ca_file,
        )

    def require_topics(self) -> tuple[str, ...]:
        """The topics to read; raises OptionError when the ``topic`` option is missing."""
        if not self.topics:
            raise OptionError('option topic is required for reads: one topic or a comma list ("a,b")')
        return self.topics

    @property
    def pull_group(self) -> str:
        return self.consumer_group or TOOLS_CONSUMER_GROUP
