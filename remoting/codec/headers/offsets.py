"""Offset headers (docs/protocol.md#36-consumer-offset-headers, docs/protocol.md#37-queue-offset-and-time-headers):
consumer offsets and queue offset/time queries, with their responses.

Every client -> broker request here accepts the optional ``bname`` that Java clients >= 4.9.5 add.
"""

from __future__ import annotations

import attrs

from remoting.codec.codes import RequestCode
from remoting.codec.headers.base import Header, wire


@attrs.frozen(slots=True)
class QueryConsumerOffsetRequestHeader(Header):
    """QUERY_CONSUMER_OFFSET (14). ``set_zero_if_not_found``: RocketMQ 5's ``setZeroIfNotFound``; ``False`` asks
    for QUERY_NOT_FOUND rather than offset 0 when the group has no offset."""

    REQUEST_CODES = (RequestCode.QUERY_CONSUMER_OFFSET,)

    consumer_group: str = attrs.field(metadata=wire("consumerGroup"))
    topic: str = attrs.field(metadata=wire("topic"))
    queue_id: int = attrs.field(metadata=wire("queueId", int32=True))
    bname: str | None = attrs.field(default=None, metadata=wire("bname"))
    set_zero_if_not_found: bool | None = attrs.field(default=None, metadata=wire("setZeroIfNotFound"))


@attrs.frozen(slots=True)
class QueryConsumerOffsetResponseHeader(Header):
    """QUERY_CONSUMER_OFFSET response on SUCCESS (QUERY_NOT_FOUND carries no offset)."""

    offset: int = attrs.field(metadata=wire("offset"))


@attrs.frozen(slots=True)
class UpdateConsumerOffsetRequestHeader(Header):
    """UPDATE_CONSUMER_OFFSET (15); may arrive with flag 0 or oneway (docs/protocol.md#13-flag-bits)."""

    REQUEST_CODES = (RequestCode.UPDATE_CONSUMER_OFFSET,)

    consumer_group: str = attrs.field(metadata=wire("consumerGroup"))
    topic: str = attrs.field(metadata=wire("topic"))
    queue_id: int = attrs.field(metadata=wire("queueId", int32=True))
    commit_offset: int = attrs.field(metadata=wire("commitOffset"))
    bname: str | None = attrs.field(default=None, metadata=wire("bname"))


@attrs.frozen(slots=True)
class UpdateConsumerOffsetResponseHeader(Header):
    """UPDATE_CONSUMER_OFFSET response: no fields (kept so every request has a response type)."""


@attrs.frozen(slots=True)
class GetMaxOffsetRequestHeader(Header):
    """GET_MAX_OFFSET (30)."""

    REQUEST_CODES = (RequestCode.GET_MAX_OFFSET,)

    topic: str = attrs.field(metadata=wire("topic"))
    queue_id: int = attrs.field(metadata=wire("queueId", int32=True))
    bname: str | None = attrs.field(default=None, metadata=wire("bname"))


@attrs.frozen(slots=True)
class GetMaxOffsetResponseHeader(Header):
    """GET_MAX_OFFSET response: the next offset to be written (0 for an unknown queue)."""

    offset: int = attrs.field(metadata=wire("offset"))


@attrs.frozen(slots=True)
class GetMinOffsetRequestHeader(Header):
    """GET_MIN_OFFSET (31)."""

    REQUEST_CODES = (RequestCode.GET_MIN_OFFSET,)

    topic: str = attrs.field(metadata=wire("topic"))
    queue_id: int = attrs.field(metadata=wire("queueId", int32=True))
    bname: str | None = attrs.field(default=None, metadata=wire("bname"))


@attrs.frozen(slots=True)
class GetMinOffsetResponseHeader(Header):
    """GET_MIN_OFFSET response."""

    offset: int = attrs.field(metadata=wire("offset"))


@attrs.frozen(slots=True)
class SearchOffsetRequestHeader(Header):
    """SEARCH_OFFSET_BY_TIMESTAMP (29): ``timestamp`` in ms since the epoch; ``boundaryType`` (RocketMQ 5's clients
    send ``LOWER`` or ``UPPER``; 4.x ones nothing)."""

    REQUEST_CODES = (RequestCode.SEARCH_OFFSET_BY_TIMESTAMP,)

    topic: str = attrs.field(metadata=wire("topic"))
    queue_id: int = attrs.field(metadata=wire("queueId", int32=True))
    timestamp: int = attrs.field(metadata=wire("timestamp"))
    bname: str | None = attrs.field(default=None, metadata=wire("bname"))
    boundary_type: str | None = attrs.field(default=None, metadata=wire("boundaryType"))


@attrs.frozen(slots=True)
class SearchOffsetResponseHeader(Header):
    """SEARCH_OFFSET_BY_TIMESTAMP response."""

    offset: int = attrs.field(metadata=wire("offset"))


@attrs.frozen(slots=True)
class GetEarliestMsgStoretimeRequestHeader(Header):
    """GET_EARLIEST_MSG_STORETIME (32)."""

    REQUEST_CODES = (RequestCode.GET_EARLIEST_MSG_STORETIME,)

    topic: str = attrs.field(metadata=wire("topic"))
    queue_id: int = attrs.field(metadata=wire("queueId", int32=True))
    bname: str | None = attrs.field(default=None, metadata=wire("bname"))


@attrs.frozen(slots=True)
class GetEarliestMsgStoretimeResponseHeader(Header):
    """GET_EARLIEST_MSG_STORETIME response: store time (ms) of the queue's first message."""

    timestamp: int = attrs.field(metadata=wire("timestamp"))
