"""Small list and map bodies: TopicList and KVTable (docs/protocol.md#48-topiclist-and-kvtable), MessageQueue and the
lock bodies (docs/protocol.md#49-messagequeue-and-lock-bodies).

Decoding raises :class:`~remoting.codec.bodies._json.BodyDecodeError` on a wrong shape; unknown fields are ignored.
"""

from __future__ import annotations

import attrs

from remoting.codec.bodies._json import (
    JsonObject,
    dumps,
    expect_object,
    get_int,
    get_list,
    get_str,
    get_str_list,
    get_str_map,
    load_object,
    req_str,
)


@attrs.frozen(slots=True)
class TopicList:
    """``brokerAddr`` is omitted from the JSON when ``None``."""

    topic_list: list[str] = attrs.field(factory=list)
    broker_addr: str | None = None

    def to_json(self) -> JsonObject:
        out: JsonObject = {"topicList": list(self.topic_list)}
        if self.broker_addr is not None:
            out["brokerAddr"] = self.broker_addr
        return out

    def encode(self) -> bytes:
        return dumps(self.to_json())

    @classmethod
    def decode(cls, data: bytes | memoryview) -> TopicList:
        o = load_object(data, "TopicList")
        return cls(topic_list=get_str_list(o, "topicList"), broker_addr=get_str(o, "brokerAddr"))


@attrs.frozen(slots=True)
class KVTable:
    table: dict[str, str] = attrs.field(factory=dict)

    def to_json(self) -> JsonObject:
        return {"table": dict(self.table)}

    def encode(self) -> bytes:
        return dumps(self.to_json())

    @classmethod
    def decode(cls, data: bytes | memoryview) -> KVTable:
        return cls(table=get_str_map(load_object(data, "KVTable"), "table"))


@attrs.frozen(slots=True, order=True)
class MessageQueue:
    """A queue's identity: (topic, brokerName, queueId). Hashable and ordered so it can live in sets."""

    topic: str
    broker_name: str
    queue_id: int

    def to_json(self) -> JsonObject:
        return {"brokerName": self.broker_name, "queueId": self.queue_id, "topic": self.topic}

    @classmethod
    def from_json(cls, obj: object) -> MessageQueue:
        o = expect_object(obj, "MessageQueue")
        return cls(
            topic=req_str(o, "topic"), broker_name=req_str(o, "brokerName"), queue_id=get_int(o, "queueId", bits=32)
        )


def _mq_list(obj: JsonObject, key: str) -> frozenset[MessageQueue]:
    return frozenset(MessageQueue.from_json(mq) for mq in get_list(obj, key))


@attrs.frozen(slots=True)
class LockBatchRequestBody:
    """LOCK_BATCH_MQ body; UNLOCK_BATCH_MQ has the same shape (:data:`UnlockBatchRequestBody`)."""

    consumer_group: str
    client_id: str
    mq_set: frozenset[MessageQueue] = frozenset()

    def to_json(self) -> JsonObject:
        return {
            "clientId": self.client_id,
            "consumerGroup": self.consumer_group,
            "mqSet": [mq.to_json() for mq in sorted(self.mq_set)],
        }

    def encode(self) -> bytes:
        return dumps(self.to_json())

    @classmethod
    def decode(cls, data: bytes | memoryview) -> LockBatchRequestBody:
        o = load_object(data, cls.__name__)
        return cls(
            consumer_group=req_str(o, "consumerGroup"),
            client_id=get_str(o, "clientId") or "",
            mq_set=_mq_list(o, "mqSet"),
        )


UnlockBatchRequestBody = LockBatchRequestBody


@attrs.frozen(slots=True)
class LockBatchResponseBody:
    lock_ok_mq_set: frozenset[MessageQueue] = frozenset()

    def to_json(self) -> JsonObject:
        return {"lockOKMQSet": [mq.to_json() for mq in sorted(self.lock_ok_mq_set)]}

    def encode(self) -> bytes:
        return dumps(self.to_json())

    @classmethod
    def decode(cls, data: bytes | memoryview) -> LockBatchResponseBody:
        return cls(lock_ok_mq_set=_mq_list(load_object(data, "LockBatchResponseBody"), "lockOKMQSet"))
