"""Message-query headers (docs/protocol.md#312-message-query-headers): QUERY_MESSAGE by key and VIEW_MESSAGE_BY_ID by
physical offset."""

from __future__ import annotations

import attrs

from remoting.codec.codes import RequestCode
from remoting.codec.headers.base import Header, wire


@attrs.frozen(slots=True)
class QueryMessageRequestHeader(Header):
    """QUERY_MESSAGE (12): messages whose key is ``key`` stored between the two timestamps (ms).

    ``unique_key_query`` is the extra extField ``_UNIQUE_KEY_QUERY`` (lookup by UNIQ_KEY; the broker then forces
    ``max_num`` to 32). It is not part of Java's header class but travels in the same map.
    """

    REQUEST_CODES = (RequestCode.QUERY_MESSAGE,)

    topic: str = attrs.field(metadata=wire("topic"))
    key: str = attrs.field(metadata=wire("key"))
    max_num: int = attrs.field(metadata=wire("maxNum", int32=True))
    begin_timestamp: int = attrs.field(metadata=wire("beginTimestamp"))
    end_timestamp: int = attrs.field(metadata=wire("endTimestamp"))
    unique_key_query: bool | None = attrs.field(default=None, metadata=wire("_UNIQUE_KEY_QUERY"))


@attrs.frozen(slots=True)
class QueryMessageResponseHeader(Header):
    """QUERY_MESSAGE response on SUCCESS; the body is the concatenated stored records."""

    index_last_update_timestamp: int = attrs.field(metadata=wire("indexLastUpdateTimestamp"))
    index_last_update_phyoffset: int = attrs.field(metadata=wire("indexLastUpdatePhyoffset"))


@attrs.frozen(slots=True)
class ViewMessageRequestHeader(Header):
    """VIEW_MESSAGE_BY_ID (33): ``offset`` is the physical offset decoded from an offset message id."""

    REQUEST_CODES = (RequestCode.VIEW_MESSAGE_BY_ID,)

    offset: int = attrs.field(metadata=wire("offset"))
