"""Headers of the operations requests: consume-progress maintenance, consume-queue inspection, half-message resume,
request-reply and the topic config query (docs/protocol.md#315-operations-headers).

Each class follows its Java 4.9.8 header in ``common/src/main/java/org/apache/rocketmq/common/protocol/header/``
(``GetTopicConfigRequestHeader`` is RocketMQ 5's, in
``remoting/src/main/java/org/apache/rocketmq/remoting/protocol/header/``): the same keys, the ``@CFNotNull`` fields
required, the rest optional with Java's defaults.
"""

from __future__ import annotations

import attrs

from remoting.codec.codes import RequestCode
from remoting.codec.headers.base import Header, wire


@attrs.frozen(slots=True)
class QueryConsumeTimeSpanRequestHeader(Header):
    """QUERY_CONSUME_TIME_SPAN (303): per queue of ``topic``, the stored time span and ``group``'s consume time."""

    REQUEST_CODES = (RequestCode.QUERY_CONSUME_TIME_SPAN,)

    topic: str = attrs.field(metadata=wire("topic"))
    group: str = attrs.field(metadata=wire("group"))


@attrs.frozen(slots=True)
class QueryCorrectionOffsetHeader(Header):
    """QUERY_CORRECTION_OFFSET (308). ``filter_groups`` is a comma list of groups left out of the minimum."""

    REQUEST_CODES = (RequestCode.QUERY_CORRECTION_OFFSET,)

    compare_group: str = attrs.field(metadata=wire("compareGroup"))
    topic: str = attrs.field(metadata=wire("topic"))
    filter_groups: str | None = attrs.field(default=None, metadata=wire("filterGroups"))


@attrs.frozen(slots=True)
class CloneGroupOffsetRequestHeader(Header):
    """CLONE_GROUP_OFFSET (314): copy ``src_group``'s offsets of ``topic`` (every topic when absent) to
    ``dest_group``. Online (``offline`` false), a topic the live source group does not subscribe to is skipped."""

    REQUEST_CODES = (RequestCode.CLONE_GROUP_OFFSET,)

    src_group: str = attrs.field(metadata=wire("srcGroup"))
    dest_group: str = attrs.field(metadata=wire("destGroup"))
    topic: str | None = attrs.field(default=None, metadata=wire("topic"))
    offline: bool = attrs.field(default=False, metadata=wire("offline"))


@attrs.frozen(slots=True)
class QueryConsumeQueueRequestHeader(Header):
    """QUERY_CONSUME_QUEUE (321): ``count`` raw entries of one ConsumeQueue from logical ``index``. Java declares no
    field not-null; the topic is required here because a missing one can only fail."""

    REQUEST_CODES = (RequestCode.QUERY_CONSUME_QUEUE,)

    topic: str = attrs.field(metadata=wire("topic"))
    queue_id: int = attrs.field(default=0, metadata=wire("queueId", int32=True))
    index: int = attrs.field(default=0, metadata=wire("index"))
    count: int = attrs.field(default=0, metadata=wire("count", int32=True))
    consumer_group: str | None = attrs.field(default=None, metadata=wire("consumerGroup"))


@attrs.frozen(slots=True)
class ResumeCheckHalfMessageRequestHeader(Header):
    """RESUME_CHECK_HALF_MESSAGE (323): the offset msgId of a half message to check again from zero."""

    REQUEST_CODES = (RequestCode.RESUME_CHECK_HALF_MESSAGE,)

    msg_id: str | None = attrs.field(default=None, metadata=wire("msgId"))


@attrs.frozen(slots=True)
class GetTopicConfigRequestHeader(Header):
    """GET_TOPIC_CONFIG (351, RocketMQ 5; rocketmq-dashboard's topic view asks it). ``lo`` asks for the logic
    queue mapping, which a 4.x-style broker has none of."""

    REQUEST_CODES = (RequestCode.GET_TOPIC_CONFIG,)

    topic: str = attrs.field(metadata=wire("topic"))
    lo: bool | None = attrs.field(default=None, metadata=wire("lo"))


@attrs.frozen(slots=True)
class ReplyMessageRequestHeader(Header):
    """PUSH_REPLY_MESSAGE_TO_CLIENT (326): the broker hands a reply to the requester's connection; the body is the
    reply's body. ``born_host``/``store_host`` are ``ip:port`` text."""

    REQUEST_CODES = (RequestCode.PUSH_REPLY_MESSAGE_TO_CLIENT,)

    producer_group: str = attrs.field(metadata=wire("producerGroup"))
    topic: str = attrs.field(metadata=wire("topic"))
    default_topic: str = attrs.field(metadata=wire("defaultTopic"))
    default_topic_queue_nums: int = attrs.field(metadata=wire("defaultTopicQueueNums", int32=True))
    queue_id: int = attrs.field(metadata=wire("queueId", int32=True))
    sys_flag: int = attrs.field(metadata=wire("sysFlag", int32=True))
    born_timestamp: int = attrs.field(metadata=wire("bornTimestamp"))
    flag: int = attrs.field(metadata=wire("flag", int32=True))
    born_host: str = attrs.field(metadata=wire("bornHost"))
    store_host: str = attrs.field(metadata=wire("storeHost"))
    store_timestamp: int = attrs.field(metadata=wire("storeTimestamp"))
    properties: str | None = attrs.field(default=None, metadata=wire("properties"))
    reconsume_times: int | None = attrs.field(default=None, metadata=wire("reconsumeTimes", int32=True))
    unit_mode: bool = attrs.field(default=False, metadata=wire("unitMode"))
