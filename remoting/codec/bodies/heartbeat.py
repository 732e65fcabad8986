"""HeartbeatData and its parts (docs/protocol.md#44-heartbeatdata), plus ConsumerListBody
(docs/protocol.md#45-consumerlistbody).

Input tolerance (docs/protocol.md#92-what-a-server-must-tolerate): enums as names (Java, ali-ons) or Java ordinals (C++
core), ``subVersion`` as a number or a string of up to 19 digits (absent or null: the time of decoding, in ms, as
Java's initial value), ``expressionType`` absent (ali-ons) meaning ``TAG``.
Output writes enums by name. Decoding raises :class:`~remoting.codec.bodies._json.BodyDecodeError` on a wrong shape;
unknown fields are ignored.
"""

from __future__ import annotations

import enum
import time

import attrs

from remoting.codec.bodies._json import (
    BodyDecodeError,
    JsonObject,
    dumps,
    expect_object,
    get_bool,
    get_int,
    get_list,
    get_nullable_enum,
    get_str,
    get_str_list,
    load_object,
    req_str,
    to_int,
)

EXPRESSION_TAG = "TAG"
EXPRESSION_SQL92 = "SQL92"
SUB_ALL = "*"


class ConsumeType(enum.Enum):
    """Member order is the Java ordinal (clients may send ordinals)."""

    CONSUME_ACTIVELY = "CONSUME_ACTIVELY"
    CONSUME_PASSIVELY = "CONSUME_PASSIVELY"


class MessageModel(enum.Enum):
    """Member order is the Java ordinal."""

    BROADCASTING = "BROADCASTING"
    CLUSTERING = "CLUSTERING"


class ConsumeFromWhere(enum.Enum):
    """Member order is the Java ordinal, deprecated members included."""

    CONSUME_FROM_LAST_OFFSET = "CONSUME_FROM_LAST_OFFSET"
    CONSUME_FROM_LAST_OFFSET_AND_FROM_MIN_WHEN_BOOT_FIRST = "CONSUME_FROM_LAST_OFFSET_AND_FROM_MIN_WHEN_BOOT_FIRST"
    CONSUME_FROM_MIN_OFFSET = "CONSUME_FROM_MIN_OFFSET"
    CONSUME_FROM_MAX_OFFSET = "CONSUME_FROM_MAX_OFFSET"
    CONSUME_FROM_FIRST_OFFSET = "CONSUME_FROM_FIRST_OFFSET"
    CONSUME_FROM_TIMESTAMP = "CONSUME_FROM_TIMESTAMP"


@attrs.frozen(slots=True)
class SubscriptionData:
    topic: str
    sub_string: str = SUB_ALL
    tags_set: tuple[str, ...] = ()
    code_set: tuple[int, ...] = ()
    sub_version: int = 0
    class_filter_mode: bool = False
    expression_type: str = EXPRESSION_TAG

    def to_json(self) -> JsonObject:
        return {
            "classFilterMode": self.class_filter_mode,
            "codeSet": list(self.code_set),
            "expressionType": self.expression_type,
            "subString": self.sub_string,
            "subVersion": self.sub_version,
            "tagsSet": list(self.tags_set),
            "topic": self.topic,
        }

    @classmethod
    def from_json(cls, obj: object) -> SubscriptionData:
        o = expect_object(obj, "SubscriptionData")
        return cls(
            topic=req_str(o, "topic"),
            sub_string=get_str(o, "subString", SUB_ALL) or SUB_ALL,
            tags_set=tuple(dict.fromkeys(get_str_list(o, "tagsSet"))),
            code_set=tuple(dict.fromkeys(to_int(c, "codeSet", bits=32) for c in get_list(o, "codeSet"))),
            # Java's initial value, which fastjson keeps for an absent or null field (SubscriptionData.java)
            sub_version=get_int(o, "subVersion", time.time_ns() // 1_000_000),
            class_filter_mode=get_bool(o, "classFilterMode"),
            expression_type=get_str(o, "expressionType", EXPRESSION_TAG) or EXPRESSION_TAG,
        )


@attrs.frozen(slots=True)
class ProducerData:
    group_name: str

    def to_json(self) -> JsonObject:
        return {"groupName": self.group_name}

    @classmethod
    def from_json(cls, obj: object) -> ProducerData:
        return cls(group_name=req_str(expect_object(obj, "ProducerData"), "groupName"))


@attrs.frozen(slots=True)
class ConsumerData:
    """A consumer group's part of a heartbeat. An enum field the body leaves out, sends null or names no member of
    (a name is matched in any ASCII case) is None, as 4.9.8's ConsumerData, whose enum fields have no initial value,
    is read by fastjson 1.2.69 (common/src/main/java/org/apache/rocketmq/common/protocol/heartbeat/ConsumerData.java);
    a None field is left out of the JSON, as fastjson writes no null field."""

    group_name: str
    consume_type: ConsumeType | None = ConsumeType.CONSUME_PASSIVELY
    message_model: MessageModel | None = MessageModel.CLUSTERING
    consume_from_where: ConsumeFromWhere | None = ConsumeFromWhere.CONSUME_FROM_LAST_OFFSET
    subscription_data_set: tuple[SubscriptionData, ...] = ()
    unit_mode: bool = False

    def to_json(self) -> JsonObject:
        out: JsonObject = {
            "groupName": self.group_name,
            "subscriptionDataSet": [s.to_json() for s in self.subscription_data_set],
            "unitMode": self.unit_mode,
        }
        enums = (
            ("consumeFromWhere", self.consume_from_where),
            ("consumeType", self.consume_type),
            ("messageModel", self.message_model),
        )
        out.update((key, value.name) for key, value in enums if value is not None)
        return out

    @classmethod
    def from_json(cls, obj: object) -> ConsumerData:
        o = expect_object(obj, "ConsumerData")
        return cls(
            group_name=req_str(o, "groupName"),
            consume_type=get_nullable_enum(o, "consumeType", ConsumeType, None),
            message_model=get_nullable_enum(o, "messageModel", MessageModel, None),
            consume_from_where=get_nullable_enum(o, "consumeFromWhere", ConsumeFromWhere, None),
            subscription_data_set=tuple(SubscriptionData.from_json(s) for s in get_list(o, "subscriptionDataSet")),
            unit_mode=get_bool(o, "unitMode"),
        )


@attrs.frozen(slots=True)
class HeartbeatData:
    client_id: str
    producer_data_set: tuple[ProducerData, ...] = ()
    consumer_data_set: tuple[ConsumerData, ...] = ()

    def to_json(self) -> JsonObject:
        return {
            "clientID": self.client_id,
            "consumerDataSet": [c.to_json() for c in self.consumer_data_set],
            "producerDataSet": [p.to_json() for p in self.producer_data_set],
        }

    @classmethod
    def from_json(cls, obj: object) -> HeartbeatData:
        o = expect_object(obj, "HeartbeatData")
        client_id = get_str(o, "clientID")
        if client_id is None:
            raise BodyDecodeError("heartbeat lacks clientID")
        return cls(
            client_id=client_id,
            producer_data_set=tuple(ProducerData.from_json(p) for p in get_list(o, "producerDataSet")),
            consumer_data_set=tuple(ConsumerData.from_json(c) for c in get_list(o, "consumerDataSet")),
        )

    def encode(self) -> bytes:
        return dumps(self.to_json())

    @classmethod
    def decode(cls, data: bytes | memoryview) -> HeartbeatData:
        return cls.from_json(load_object(data, "HeartbeatData"))


@attrs.frozen(slots=True)
class ConsumerListBody:
    consumer_id_list: list[str] = attrs.field(factory=list)

    def to_json(self) -> JsonObject:
        return {"consumerIdList": list(self.consumer_id_list)}

    def encode(self) -> bytes:
        return dumps(self.to_json())

    @classmethod
    def decode(cls, data: bytes | memoryview) -> ConsumerListBody:
        return cls(consumer_id_list=get_str_list(load_object(data, "ConsumerListBody"), "consumerIdList"))
