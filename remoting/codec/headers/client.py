"""Client-management headers (docs/protocol.md#38-client-management-headers): unregister, consumer list,
consumer-ids-changed notification."""

from __future__ import annotations

import attrs

from remoting.codec.codes import RequestCode
from remoting.codec.headers.base import Header, wire


@attrs.frozen(slots=True)
class UnregisterClientRequestHeader(Header):
    """UNREGISTER_CLIENT (35). Note the wire key ``clientID`` with a capital ID."""

    REQUEST_CODES = (RequestCode.UNREGISTER_CLIENT,)

    client_id: str = attrs.field(metadata=wire("clientID"))
    producer_group: str | None = attrs.field(default=None, metadata=wire("producerGroup"))
    consumer_group: str | None = attrs.field(default=None, metadata=wire("consumerGroup"))


@attrs.frozen(slots=True)
class GetConsumerListByGroupRequestHeader(Header):
    """GET_CONSUMER_LIST_BY_GROUP (38); the answer is a JSON body, not a header."""

    REQUEST_CODES = (RequestCode.GET_CONSUMER_LIST_BY_GROUP,)

    consumer_group: str = attrs.field(metadata=wire("consumerGroup"))


@attrs.frozen(slots=True)
class NotifyConsumerIdsChangedRequestHeader(Header):
    """NOTIFY_CONSUMER_IDS_CHANGED (40), broker -> consumer, oneway: rebalance now."""

    REQUEST_CODES = (RequestCode.NOTIFY_CONSUMER_IDS_CHANGED,)

    consumer_group: str = attrs.field(metadata=wire("consumerGroup"))
