"""RECALL_MESSAGE (370) headers, RocketMQ 5.3's ``RecallMessageRequestHeader`` and ``RecallMessageResponseHeader``
(``remoting/src/main/java/org/apache/rocketmq/remoting/protocol/header/``)."""

from __future__ import annotations

import attrs

from remoting.codec.codes import RequestCode
from remoting.codec.headers.base import Header, wire


@attrs.frozen(slots=True)
class RecallMessageRequestHeader(Header):
    """Take back the timer message ``recall_handle`` names (the handle of its send answer) from ``topic``."""

    REQUEST_CODES = (RequestCode.RECALL_MESSAGE,)

    topic: str = attrs.field(metadata=wire("topic"))
    recall_handle: str = attrs.field(metadata=wire("recallHandle"))
    producer_group: str | None = attrs.field(default=None, metadata=wire("producerGroup"))
    bname: str | None = attrs.field(default=None, metadata=wire("bname"))


@attrs.frozen(slots=True)
class RecallMessageResponseHeader(Header):
    """A recall's answer: the recalled message's id (its ``UNIQ_KEY``)."""

    msg_id: str = attrs.field(metadata=wire("msgId"))
