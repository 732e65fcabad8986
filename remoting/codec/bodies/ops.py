"""Bodies of the operations requests (docs/protocol.md#414-operations-bodies), in the JSON shapes of Java 4.9.8's
``common/src/main/java/org/apache/rocketmq/common/protocol/body/`` classes: consume time spans (303), correction
offsets (308), raw ConsumeQueue entries (321), the producer table (328), consumer status (221/223), the topic
config answer (351), and RocketMQ 5's subscription of a group (345).

Java's ``Map<MessageQueue, Long>`` tables keep fastjson's object keys (see :mod:`remoting.codec.bodies.admin`);
everything else is standard JSON with sorted keys. Decoders raise :class:`~remoting.codec.bodies.BodyDecodeError`.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import attrs

from remoting.codec.bodies._json import (
    BodyDecodeError,
    dumps,
    expect_object,
    get_bool,
    get_int,
    get_list,
    get_map,
    get_str,
    load_object,
)
from remoting.codec.bodies.admin import dumps_mq_map, loads_fastjson
from remoting.codec.bodies.heartbeat import SubscriptionData
from remoting.codec.bodies.tables import MessageQueue

__all__ = [
    "ConsumeQueueData",
    "ConsumerStatusBody",
    "ProducerInfo",
    "ProducerTableInfo",
    "QueryConsumeQueueResponseBody",
    "QueryConsumeTimeSpanBody",
    "QueryCorrectionOffsetBody",
    "QuerySubscriptionResponseBody",
    "QueueTimeSpan",
]


@attrs.frozen
class QueueTimeSpan:
    """One queue's stored span and a group's position in it (Java's ``QueueTimeSpan``); ``delay_time`` is how long
    the next unconsumed message has waited, 0 when the group is caught up."""

    message_queue: MessageQueue
    min_time_stamp: int = 0
    max_time_stamp: int = 0
    consume_time_stamp: int = 0
    delay_time: int = 0

    def to_json(self) -> dict[str, Any]:
        return {
            "consumeTimeStamp": self.consume_time_stamp,
            "delayTime": self.delay_time,
            "maxTimeStamp": self.max_time_stamp,
            "messageQueue": self.message_queue.to_json(),
            "minTimeStamp": self.min_time_stamp,
        }

    @classmethod
    def from_json(cls, obj: object) -> QueueTimeSpan:
        o = expect_object(obj, "QueueTimeSpan")
        return cls(
            MessageQueue.from_json(o.get("messageQueue")),
            get_int(o, "minTimeStamp"),
            get_int(o, "maxTimeStamp"),
            get_int(o, "consumeTimeStamp"),
            get_int(o, "delayTime"),
        )


@attrs.frozen
class QueryConsumeTimeSpanBody:
    """QUERY_CONSUME_TIME_SPAN (303) answer: ``{"consumeTimeSpanSet": [QueueTimeSpan, ...]}``."""

    consume_time_span_set: tuple[QueueTimeSpan, ...] = ()

    def encode(self) -> bytes:
        return dumps({"consumeTimeSpanSet": [s.to_json() for s in self.consume_time_span_set]})

    @classmethod
    def decode(cls, data: bytes | memoryview) -> QueryConsumeTimeSpanBody:
        o = load_object(data, "QueryConsumeTimeSpanBody")
        return cls(tuple(QueueTimeSpan.from_json(s) for s in get_list(o, "consumeTimeSpanSet")))


@attrs.frozen
class QueryCorrectionOffsetBody:
    """QUERY_CORRECTION_OFFSET (308) answer: ``{"correctionOffsets": {queueId: offset}}``."""

    correction_offsets: dict[int, int] = attrs.field(factory=dict)

    def encode(self) -> bytes:
        return dumps({"correctionOffsets": dict(sorted(self.correction_offsets.items()))})

    @classmethod
    def decode(cls, data: bytes | memoryview) -> QueryCorrectionOffsetBody:
        table = get_map(load_object(data, "QueryCorrectionOffsetBody"), "correctionOffsets")
        try:
            return cls({int(q): int(o) for q, o in table.items()})
        except (TypeError, ValueError) as exc:
            raise BodyDecodeError(f"correctionOffsets: {exc}") from None


@attrs.frozen
class ConsumeQueueData:
    """One raw ConsumeQueue entry (Java's ``ConsumeQueueData``); the ``ext``/``bitMap`` fields belong to the
    ConsumeQueue extension, which rocketrio does not write."""

    physic_offset: int
    physic_size: int
    tags_code: int
    extend_data_json: str | None = None
    bit_map: str | None = None
    eval: bool = False
    msg: str | None = None

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "eval": self.eval,
            "physicOffset": self.physic_offset,
            "physicSize": self.physic_size,
            "tagsCode": self.tags_code,
        }
        for key, value in (("bitMap", self.bit_map), ("extendDataJson", self.extend_data_json), ("msg", self.msg)):
            if value is not None:
                out[key] = value
        return dict(sorted(out.items()))

    @classmethod
    def from_json(cls, obj: object) -> ConsumeQueueData:
        o = expect_object(obj, "ConsumeQueueData")
        return cls(
            get_int(o, "physicOffset"),
            get_int(o, "physicSize"),
            get_int(o, "tagsCode"),
            get_str(o, "extendDataJson"),
            get_str(o, "bitMap"),
            get_bool(o, "eval"),
            get_str(o, "msg"),
        )


@attrs.frozen
class QueryConsumeQueueResponseBody:
    """QUERY_CONSUME_QUEUE (321) answer: the queue's index range, the entries asked for and, when a consumer group
    was named, its subscription and filter data (``"<group>@<topic> is not online!"`` when it has none)."""

    max_queue_index: int = 0
    min_queue_index: int = 0
    queue_data: tuple[ConsumeQueueData, ...] | None = None
    subscription_data: SubscriptionData | None = None
    filter_data: str | None = None

    def encode(self) -> bytes:
        out: dict[str, Any] = {"maxQueueIndex": self.max_queue_index, "minQueueIndex": self.min_queue_index}
        if self.queue_data is not None:
            out["queueData"] = [q.to_json() for q in self.queue_data]
        if self.subscription_data is not None:
            out["subscriptionData"] = self.subscription_data.to_json()
        if self.filter_data is not None:
            out["filterData"] = self.filter_data
        return dumps(out)

    @classmethod
    def decode(cls, data: bytes | memoryview) -> QueryConsumeQueueResponseBody:
        o = load_object(data, "QueryConsumeQueueResponseBody")
        queue_data = o.get("queueData")
        sub = o.get("subscriptionData")
        return cls(
            get_int(o, "maxQueueIndex"),
            get_int(o, "minQueueIndex"),
            None if queue_data is None else tuple(ConsumeQueueData.from_json(q) for q in get_list(o, "queueData")),
            None if sub is None else SubscriptionData.from_json(sub),
            get_str(o, "filterData"),
        )


@attrs.frozen
class ProducerInfo:
    """One producer connection as GET_ALL_PRODUCER_INFO lists it. ``remote_ip`` is Java's
    ``SocketAddress.toString()``: ``/host:port``."""

    client_id: str
    remote_ip: str
    language: str
    version: int
    last_update_timestamp: int

    def to_json(self) -> dict[str, Any]:
        return {
            "clientId": self.client_id,
            "language": self.language,
            "lastUpdateTimestamp": self.last_update_timestamp,
            "remoteIP": self.remote_ip,
            "version": self.version,
        }

    @classmethod
    def from_json(cls, obj: object) -> ProducerInfo:
        o = expect_object(obj, "ProducerInfo")
        return cls(
            get_str(o, "clientId") or "",
            get_str(o, "remoteIP") or "",
            get_str(o, "language") or "",
            get_int(o, "version"),
            get_int(o, "lastUpdateTimestamp"),
        )


@attrs.frozen
class ProducerTableInfo:
    """GET_ALL_PRODUCER_INFO (328) answer: ``{"data": {group: [ProducerInfo, ...]}}``."""

    data: dict[str, tuple[ProducerInfo, ...]] = attrs.field(factory=dict)

    def encode(self) -> bytes:
        return dumps({"data": {g: [p.to_json() for p in infos] for g, infos in self.data.items()}})

    @classmethod
    def decode(cls, data: bytes | memoryview) -> ProducerTableInfo:
        table = get_map(load_object(data, "ProducerTableInfo"), "data")
        out: dict[str, tuple[ProducerInfo, ...]] = {}
        for group, infos in table.items():
            if not isinstance(infos, list):
                raise BodyDecodeError(f"ProducerTableInfo.data[{group!r}] must be an array")
            out[group] = tuple(ProducerInfo.from_json(p) for p in infos)
        return cls(out)


def _offset_table(value: object, what: str) -> dict[MessageQueue, int]:
    if value is None:
        return {}
    if not isinstance(value, dict) or not all(isinstance(k, MessageQueue) for k in value):
        raise BodyDecodeError(f"{what} must map MessageQueue objects to offsets")
    try:
        return {mq: int(offset) for mq, offset in value.items()}
    except (TypeError, ValueError) as exc:
        raise BodyDecodeError(f"{what}: {exc}") from None


@attrs.frozen
class ConsumerStatusBody:
    """Java's ``GetConsumerStatusBody``: a client's answer to GET_CONSUMER_STATUS_FROM_CLIENT (221) fills
    ``message_queue_table`` (its offsets of one topic); the broker's answer to INVOKE_BROKER_TO_GET_CONSUMER_STATUS
    (223) fills ``consumer_table`` (client id -> those offsets)."""

    message_queue_table: Mapping[MessageQueue, int] = attrs.field(factory=dict)
    consumer_table: Mapping[str, Mapping[MessageQueue, int]] = attrs.field(factory=dict)

    def encode(self) -> bytes:
        consumers = b",".join(
            dumps(client) + b":" + dumps_mq_map(table) for client, table in sorted(self.consumer_table.items())
        )
        return (
            b'{"consumerTable":{'
            + consumers
            + b'},"messageQueueTable":'
            + dumps_mq_map(self.message_queue_table)
            + b"}"
        )

    @classmethod
    def decode(cls, data: bytes | memoryview) -> ConsumerStatusBody:
        root = expect_object(loads_fastjson(data), "GetConsumerStatusBody")
        consumers = root.get("consumerTable") or {}
        if not isinstance(consumers, dict):
            raise BodyDecodeError("GetConsumerStatusBody.consumerTable must be an object")
        return cls(
            _offset_table(root.get("messageQueueTable"), "messageQueueTable"),
            {str(c): _offset_table(t, f"consumerTable[{c!r}]") for c, t in consumers.items()},
        )


@attrs.frozen
class QuerySubscriptionResponseBody:
    """QUERY_SUBSCRIPTION_BY_CONSUMER (345) answer (RocketMQ 5's ``QuerySubscriptionResponseBody``): the group, the
    topic and the online group's subscription of it, left out when it has none (fastjson drops a null field)."""

    group: str
    topic: str | None = None
    subscription_data: SubscriptionData | None = None

    def encode(self) -> bytes:
        out: dict[str, Any] = {"group": self.group, "topic": self.topic}
        if self.subscription_data is not None:
            out["subscriptionData"] = self.subscription_data.to_json()
        return dumps({k: v for k, v in out.items() if v is not None})

    @classmethod
    def decode(cls, data: bytes | memoryview) -> QuerySubscriptionResponseBody:
        o = load_object(data, "QuerySubscriptionResponseBody")
        sub = o.get("subscriptionData")
        return cls(
            get_str(o, "group") or "", get_str(o, "topic"), None if sub is None else SubscriptionData.from_json(sub)
        )
