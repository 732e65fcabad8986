"""What each group consuming a message's topic did with it: Java's ``DefaultMQAdminExtImpl.messageTrackDetail``
(``tools/src/main/java/org/apache/rocketmq/tools/admin/DefaultMQAdminExtImpl.java``), the track ``mqadmin
queryMsgById`` prints and rocketmq-dashboard's message page shows.

Per group, in Java's order: its consumers' connection first (the broker's CONSUMER_NOT_ONLINE: NOT_ONLINE; any other
failure: UNKNOWN); a pull consumer (CONSUME_ACTIVELY) is PULL; for a push consumer the group's committed offsets
(none at all: NOT_ONLINE, as Java's ``examineConsumeStats``), then its offset in the message's queue on the broker
whose master stored it: past the message is CONSUMED, or CONSUMED_BUT_FILTERED when the group's subscription to the
topic names tags and not the message's; otherwise NOT_CONSUME_YET. A failure for one group is that group's
``exception_desc`` and never hides the others; only listing the topic's groups (QUERY_TOPIC_CONSUME_BY_WHO) raises,
and a group whose connection carries no consume type (the broker registered it null) raises
:class:`TrackTypeNullError`, as Java's ``switch`` on it throws NullPointerException: no track at all. Another name
(5.x's CONSUME_POP) is UNKNOWN, as 5.3.3's ``switch`` default.
"""

from __future__ import annotations

from enum import StrEnum

import attrs

from client.admin import BROKER_FAILURES, Admin
from client.errors import MQBrokerError, MQClientError
from client.mqadmin_support import java_hash_set
from remoting.codec.bodies.admin import ConsumerConnection
from remoting.codec.codes import ResponseCode
from remoting.codec.message import MessageExt

__all__ = ["MessageTrack", "TrackType", "TrackTypeNullError", "message_track_detail"]

#: Java's ``examineConsumeStats`` refusal of a group without any committed offset (a CONSUMER_NOT_ONLINE).
NO_OFFSETS = (
    "Not found the consumer group consume stats, because return offset table is empty, maybe the consumer not "
    "consume any message"
)


class TrackTypeNullError(MQClientError):
    """A group's consume type is null: Java's messageTrackDetail throws NullPointerException, whose stack trace
    QueryMsgByIdSubCommand prints first as ``java.lang.NullPointerException`` (its str), with no track."""

    def __init__(self) -> None:
        super().__init__("java.lang.NullPointerException")


class TrackType(StrEnum):
    """Java's ``TrackType``."""

    CONSUMED = "CONSUMED"
    CONSUMED_BUT_FILTERED = "CONSUMED_BUT_FILTERED"
    PULL = "PULL"
    NOT_CONSUME_YET = "NOT_CONSUME_YET"
    NOT_ONLINE = "NOT_ONLINE"
    UNKNOWN = "UNKNOWN"


@attrs.frozen
class MessageTrack:
    """Java's ``MessageTrack``; ``consumer_offset`` (ours) is the group's offset in the message's queue when read."""

    consumer_group: str
    track_type: TrackType
    exception_desc: str | None = None
    consumer_offset: int | None = None

    def __str__(self) -> str:
        desc = "null" if self.exception_desc is None else self.exception_desc
        return f"MessageTrack [consumerGroup={self.consumer_group}, trackType={self.track_type}, exceptionDesc={desc}]"


async def message_track_detail(admin: Admin, msg: MessageExt) -> list[MessageTrack]:
    """The track of every group consuming ``msg``'s topic, by group (see the module docstring)."""
    # Java's messageTrackDetail iterates GroupList's HashSet (tools/src/main/java/org/apache/rocketmq/tools/admin/
    # DefaultMQAdminExtImpl.java, common/src/main/java/org/apache/rocketmq/common/protocol/body/GroupList.java).
    groups = java_hash_set(await admin.topic_consumed_by(msg.topic))
    return [await _track(admin, msg, group) for group in groups]


async def _track(admin: Admin, msg: MessageExt, group: str) -> MessageTrack:
    try:
        conn = await admin.consumer_connection(group)
    except BROKER_FAILURES as exc:
        return _failed(group, exc)
    if conn.consume_type is None:
        raise TrackTypeNullError
    if conn.consume_type == "CONSUME_ACTIVELY":
        return MessageTrack(group, TrackType.PULL)
    if conn.consume_type != "CONSUME_PASSIVELY":
        return MessageTrack(group, TrackType.UNKNOWN)
    try:
        offset = await _offset_in_queue(admin, msg, group)
    except BROKER_FAILURES as exc:
        return _failed(group, exc)
    if offset is None or offset <= msg.queue_offset:
        return MessageTrack(group, TrackType.NOT_CONSUME_YET, consumer_offset=offset)
    kind = TrackType.CONSUMED if _takes(conn, msg) else TrackType.CONSUMED_BUT_FILTERED
    return MessageTrack(group, kind, consumer_offset=offset)


def _failed(group: str, exc: Exception) -> MessageTrack:
    """NOT_ONLINE for a CONSUMER_NOT_ONLINE refusal, else UNKNOWN; the error as Java describes it."""
    if not isinstance(exc, MQBrokerError):
        return MessageTrack(group, TrackType.UNKNOWN, str(exc) or type(exc).__name__)
    kind = TrackType.NOT_ONLINE if exc.code == ResponseCode.CONSUMER_NOT_ONLINE else TrackType.UNKNOWN
    return MessageTrack(group, kind, f"CODE:{exc.code} DESC:{exc.remark}")


async def _offset_in_queue(admin: Admin, msg: MessageExt, group: str) -> int | None:
    """``group``'s committed offset in the queue holding ``msg``: same topic and queue id, on the broker whose master
    is the message's store host (Java's ``consumed``); ``None`` when it has none there. A group without any offset
    raises CONSUMER_NOT_ONLINE, as Java's ``examineConsumeStats``."""
    table = (await admin.consume_stats(group)).offset_table
    if not table:
        raise MQBrokerError(ResponseCode.CONSUMER_NOT_ONLINE, NO_OFFSETS)
    brokers = (await admin.cluster_info()).broker_addr_table
    store = f"{msg.store_host[0]}:{msg.store_host[1]}"
    for mq, wrapper in table.items():
        broker = brokers.get(mq.broker_name)
        if (mq.topic, mq.queue_id) == (msg.topic, msg.queue_id) and broker and broker.master_addr == store:
            return wrapper.consumer_offset
    return None


def _takes(conn: ConsumerConnection, msg: MessageExt) -> bool:
    """Whether the group's subscription to ``msg``'s topic takes its tag: no subscription, ``*``, no tags (an SQL92
    expression) or the message's tag among them (Java's check on ``SubscriptionData.getTagsSet``)."""
    sub = conn.subscription_table.get(msg.topic)
    return sub is None or not sub.tags_set or "*" in sub.tags_set or msg.tags in sub.tags_set
