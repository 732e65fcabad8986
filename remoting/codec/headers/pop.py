"""Pop headers over remoting: POP_MESSAGE (200050), ACK_MESSAGE (200051), PEEK_MESSAGE (200052),
CHANGE_MESSAGE_INVISIBLETIME (200053), NOTIFICATION (200054) and POLLING_INFO (200055), RocketMQ 5.3.3's request and
response headers of those names
(remoting/src/main/java/org/apache/rocketmq/remoting/protocol/header/)."""

from __future__ import annotations

import attrs

from remoting.codec.codes import RequestCode
from remoting.codec.headers.base import Header, wire


@attrs.frozen(slots=True)
class PopMessageRequestHeader(Header):
    """Pop up to ``max_msg_nums`` messages of ``topic`` (queue ``queue_id``, negative: every queue) for
    ``invisible_time`` ms, waiting up to ``poll_time`` ms from ``born_time`` (epoch ms) when none is visible."""

    REQUEST_CODES = (RequestCode.POP_MESSAGE,)

    consumer_group: str = attrs.field(metadata=wire("consumerGroup"))
    topic: str = attrs.field(metadata=wire("topic"))
    queue_id: int = attrs.field(metadata=wire("queueId", int32=True))
    max_msg_nums: int = attrs.field(metadata=wire("maxMsgNums", int32=True))
    invisible_time: int = attrs.field(metadata=wire("invisibleTime"))
    poll_time: int = attrs.field(metadata=wire("pollTime"))
    born_time: int = attrs.field(metadata=wire("bornTime"))
    init_mode: int = attrs.field(metadata=wire("initMode", int32=True))
    exp_type: str | None = attrs.field(default=None, metadata=wire("expType"))
    exp: str | None = attrs.field(default=None, metadata=wire("exp"))
    order: bool = attrs.field(default=False, metadata=wire("order"))
    attempt_id: str | None = attrs.field(default=None, metadata=wire("attemptId"))


@attrs.frozen(slots=True)
class PopMessageResponseHeader(Header):
    """A pop's answer: the pop time and invisible time of its handles, their revive queue (999: orderly), the
    entries left unread, and per queue (``;``-separated) where its checkpoint starts and which offsets it holds."""

    pop_time: int = attrs.field(metadata=wire("popTime"))
    invisible_time: int = attrs.field(metadata=wire("invisibleTime"))
    revive_qid: int = attrs.field(metadata=wire("reviveQid", int32=True))
    rest_num: int = attrs.field(metadata=wire("restNum"))
    start_offset_info: str | None = attrs.field(default=None, metadata=wire("startOffsetInfo"))
    msg_offset_info: str | None = attrs.field(default=None, metadata=wire("msgOffsetInfo"))
    order_count_info: str | None = attrs.field(default=None, metadata=wire("orderCountInfo"))


@attrs.frozen(slots=True)
class AckMessageRequestHeader(Header):
    """Acknowledge the message at ``offset`` of queue ``queue_id``; ``extra_info`` is its ``POP_CK``."""

    REQUEST_CODES = (RequestCode.ACK_MESSAGE,)

    consumer_group: str = attrs.field(metadata=wire("consumerGroup"))
    topic: str = attrs.field(metadata=wire("topic"))
    queue_id: int = attrs.field(metadata=wire("queueId", int32=True))
    extra_info: str = attrs.field(metadata=wire("extraInfo"))
    offset: int = attrs.field(metadata=wire("offset"))


@attrs.frozen(slots=True)
class ChangeInvisibleTimeRequestHeader(Header):
    """Make the message at ``offset`` invisible for ``invisible_time`` ms from now."""

    REQUEST_CODES = (RequestCode.CHANGE_MESSAGE_INVISIBLETIME,)

    consumer_group: str = attrs.field(metadata=wire("consumerGroup"))
    topic: str = attrs.field(metadata=wire("topic"))
    queue_id: int = attrs.field(metadata=wire("queueId", int32=True))
    extra_info: str = attrs.field(metadata=wire("extraInfo"))
    offset: int = attrs.field(metadata=wire("offset"))
    invisible_time: int = attrs.field(metadata=wire("invisibleTime"))


@attrs.frozen(slots=True)
class ChangeInvisibleTimeResponseHeader(Header):
    """The new handle's pop time, invisible time and revive queue."""

    pop_time: int = attrs.field(metadata=wire("popTime"))
    invisible_time: int = attrs.field(metadata=wire("invisibleTime"))
    revive_qid: int = attrs.field(metadata=wire("reviveQid", int32=True))


@attrs.frozen(slots=True)
class NotificationRequestHeader(Header):
    """Whether ``topic`` (queue ``queue_id``, negative: any) has messages for ``consumer_group``, waiting up to
    ``poll_time`` ms from ``born_time`` for one."""

    REQUEST_CODES = (RequestCode.NOTIFICATION,)

    consumer_group: str = attrs.field(metadata=wire("consumerGroup"))
    topic: str = attrs.field(metadata=wire("topic"))
    queue_id: int = attrs.field(metadata=wire("queueId", int32=True))
    poll_time: int = attrs.field(metadata=wire("pollTime"))
    born_time: int = attrs.field(metadata=wire("bornTime"))
    order: bool = attrs.field(default=False, metadata=wire("order"))
    attempt_id: str | None = attrs.field(default=None, metadata=wire("attemptId"))


@attrs.frozen(slots=True)
class NotificationResponseHeader(Header):
    """``has_msg``: a pop would find something; ``polling_full``: the wait was refused at the polling limits."""

    has_msg: bool = attrs.field(metadata=wire("hasMsg"))
    polling_full: bool = attrs.field(default=False, metadata=wire("pollingFull"))


@attrs.frozen(slots=True)
class PeekMessageRequestHeader(Header):
    """Read up to ``max_msg_nums`` messages of ``topic`` (queue ``queue_id``, negative: all) at the group's offsets
    without popping them."""

    REQUEST_CODES = (RequestCode.PEEK_MESSAGE,)

    topic: str = attrs.field(metadata=wire("topic"))
    queue_id: int = attrs.field(metadata=wire("queueId", int32=True))
    max_msg_nums: int = attrs.field(metadata=wire("maxMsgNums", int32=True))
    consumer_group: str = attrs.field(metadata=wire("consumerGroup"))


@attrs.frozen(slots=True)
class PollingInfoRequestHeader(Header):
    """How many pops of ``consumer_group`` wait on ``topic`` (queue ``queue_id``, -1: those of every queue)."""

    REQUEST_CODES = (RequestCode.POLLING_INFO,)

    consumer_group: str = attrs.field(metadata=wire("consumerGroup"))
    topic: str = attrs.field(metadata=wire("topic"))
    queue_id: int = attrs.field(metadata=wire("queueId", int32=True))


@attrs.frozen(slots=True)
class PollingInfoResponseHeader(Header):
    polling_num: int = attrs.field(metadata=wire("pollingNum", int32=True))
