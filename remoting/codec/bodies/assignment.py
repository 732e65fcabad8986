"""QUERY_ASSIGNMENT's and SET_MESSAGE_REQUEST_MODE's bodies, RocketMQ 5.3.3's ``QueryAssignmentRequestBody``,
``QueryAssignmentResponseBody`` and ``SetMessageRequestModeRequestBody``
(remoting/src/main/java/org/apache/rocketmq/remoting/protocol/body/) with ``MessageQueueAssignment`` items
(common/src/main/java/org/apache/rocketmq/common/message/): fastjson, enums by name."""

from __future__ import annotations

import enum
from typing import Any

import attrs

from remoting.codec.bodies._json import (
    dumps,
    expect_object,
    get_enum,
    get_int,
    get_list,
    get_str,
    get_str_map,
    load_object,
)
from remoting.codec.bodies.heartbeat import MessageModel
from remoting.codec.bodies.tables import MessageQueue

__all__ = [
    "MessageQueueAssignment",
    "MessageRequestMode",
    "QueryAssignmentRequestBody",
    "QueryAssignmentResponseBody",
    "SetMessageRequestModeRequestBody",
]


class MessageRequestMode(enum.Enum):
    """How a push consumer reads its queues (common/.../message/MessageRequestMode.java)."""

    PULL = "PULL"
    POP = "POP"


@attrs.frozen
class QueryAssignmentRequestBody:
    topic: str = ""
    consumer_group: str = ""
    client_id: str = ""
    strategy_name: str = ""
    #: ``None``: the body named none (Java's field stays null)
    message_model: MessageModel | None = MessageModel.CLUSTERING

    def encode(self) -> bytes:
        out = {"clientId": self.client_id, "consumerGroup": self.consumer_group, "strategyName": self.strategy_name,
               "topic": self.topic}  # fmt: skip
        if self.message_model is not None:  # fastjson leaves nulls out
            out["messageModel"] = self.message_model.name
        return dumps(out)

    @classmethod
    def decode(cls, data: bytes | memoryview) -> QueryAssignmentRequestBody:
        return cls.from_json(load_object(data, "QueryAssignmentRequestBody"))

    @classmethod
    def from_json(cls, obj: object) -> QueryAssignmentRequestBody:
        o = expect_object(obj, "QueryAssignmentRequestBody")
        model = (
            None
            if o.get("messageModel") is None
            else get_enum(o, "messageModel", MessageModel, MessageModel.CLUSTERING)
        )
        return cls(
            get_str(o, "topic") or "",
            get_str(o, "consumerGroup") or "",
            get_str(o, "clientId") or "",
            get_str(o, "strategyName") or "",
            model,
        )


@attrs.frozen
class SetMessageRequestModeRequestBody:
    """A group's request mode on a topic; ``pop_share_queue_num``: how many following consumers' queues a POP
    consumer pops besides its own (0 or less, or at least the consumers less one: every queue)."""

    topic: str = ""
    consumer_group: str = ""
    mode: MessageRequestMode = MessageRequestMode.PULL
    pop_share_queue_num: int = 0

    def to_json(self) -> dict[str, Any]:
        return {"consumerGroup": self.consumer_group, "mode": self.mode.name,
                "popShareQueueNum": self.pop_share_queue_num, "topic": self.topic}  # fmt: skip

    def encode(self) -> bytes:
        return dumps(self.to_json())

    @classmethod
    def from_json(cls, obj: object) -> SetMessageRequestModeRequestBody:
        o = expect_object(obj, "SetMessageRequestModeRequestBody")
        return cls(
            get_str(o, "topic") or "",
            get_str(o, "consumerGroup") or "",
            get_enum(o, "mode", MessageRequestMode, MessageRequestMode.PULL),
            get_int(o, "popShareQueueNum", 0, 32),
        )

    @classmethod
    def decode(cls, data: bytes | memoryview) -> SetMessageRequestModeRequestBody:
        return cls.from_json(load_object(data, "SetMessageRequestModeRequestBody"))


@attrs.frozen
class MessageQueueAssignment:
    message_queue: MessageQueue
    mode: MessageRequestMode = MessageRequestMode.PULL
    attachments: dict[str, str] | None = None

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"messageQueue": self.message_queue.to_json(), "mode": self.mode.name}
        if self.attachments is not None:  # fastjson leaves nulls out
            out["attachments"] = self.attachments
        return out

    @classmethod
    def from_json(cls, obj: object) -> MessageQueueAssignment:
        o = expect_object(obj, "MessageQueueAssignment")
        attachments = get_str_map(o, "attachments") if o.get("attachments") is not None else None
        mode = get_enum(o, "mode", MessageRequestMode, MessageRequestMode.PULL)
        return cls(MessageQueue.from_json(o.get("messageQueue")), mode, attachments)


@attrs.frozen
class QueryAssignmentResponseBody:
    """``None``: no valid answer (the client keeps what it had); empty: the client drops every queue."""

    message_queue_assignments: tuple[MessageQueueAssignment, ...] | None = None

    def encode(self) -> bytes:
        items = self.message_queue_assignments
        return dumps({} if items is None else {"messageQueueAssignments": [a.to_json() for a in items]})

    @classmethod
    def decode(cls, data: bytes | memoryview) -> QueryAssignmentResponseBody:
        o = load_object(data, "QueryAssignmentResponseBody")
        if o.get("messageQueueAssignments") is None:
            return cls(None)
        return cls(tuple(MessageQueueAssignment.from_json(a) for a in get_list(o, "messageQueueAssignments")))
