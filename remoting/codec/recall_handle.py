"""Recall handles, sans-IO (RocketMQ 5.3's
``common/src/main/java/org/apache/rocketmq/common/producer/RecallMessageHandle.java``).

A send of a timer (delay) message is answered with a handle naming it; RECALL_MESSAGE and the gRPC RecallMessage
take it back. Version 1 is ``v1 <topic> <brokerName> <timestamp> <messageId>``, joined by single spaces and written
in URL-safe base64 with padding. ``timestamp`` is the message's ``TIMER_OUT_MS`` + 1 (a string, read leniently as a
Java ``long`` by the broker: :func:`java_long_or`), ``messageId`` its ``UNIQ_KEY``.

Decoding reads what Java's decoder reads: URL-safe base64 (padding optional, ``+``, ``/`` and other characters
refused), the bytes as UTF-8 with malformed sequences replaced, split as Java's ``String.split(" ")`` (trailing
empty items dropped, items beyond the fifth ignored). Anything else raises :class:`RecallHandleError` with Java's
message, "recall handle is invalid".
"""

from __future__ import annotations

import base64
import binascii
import re
from typing import Final, NamedTuple

__all__ = ["RecallHandle", "RecallHandleError", "decode_recall_handle", "encode_recall_handle", "java_long_or"]

VERSION_1: Final = "v1"
_INVALID: Final = "recall handle is invalid"
_URL_SAFE: Final = re.compile(r"[A-Za-z0-9_-]*(={0,2})")
_JAVA_LONG: Final = re.compile(r"[+-]?\d+")
_LONG_MIN: Final = -(1 << 63)
_LONG_MAX: Final = (1 << 63) - 1


class RecallHandleError(ValueError):
    """A handle that does not decode; the message is RocketMQ's."""


class RecallHandle(NamedTuple):
    """A decoded version-1 handle; ``timestamp`` is kept as written (the broker parses it)."""

    topic: str
    broker_name: str
    timestamp: str
    message_id: str


def encode_recall_handle(topic: str, broker_name: str, timestamp: str, message_id: str) -> str:
    """The handle of a message (no check of the parts, as in RocketMQ)."""
    raw = " ".join((VERSION_1, topic, broker_name, timestamp, message_id))
    return base64.urlsafe_b64encode(raw.encode()).decode("ascii")


def decode_recall_handle(handle: str) -> RecallHandle:
    """The parts of ``handle``; raises :class:`RecallHandleError` (see the module docstring)."""
    if not handle:
        raise RecallHandleError(_INVALID)
    found = _URL_SAFE.fullmatch(handle)
    if found is None:
        raise RecallHandleError(_INVALID)
    data = handle[: found.start(1)]
    padding = len(found.group(1))
    # Java: a lone character in the last unit has too few bits; '=' must complete the unit it ends.
    if len(data) % 4 == 1 or (padding and (len(data) + padding) % 4):
        raise RecallHandleError(_INVALID)
    try:
        raw = base64.urlsafe_b64decode(data + "=" * (-len(data) % 4))
    except (binascii.Error, ValueError):
        raise RecallHandleError(_INVALID) from None
    items = raw.decode("utf-8", errors="replace").split(" ")
    while items and not items[-1]:
        items.pop()  # Java's String.split drops trailing empty strings
    if len(items) < 5 or items[0] != VERSION_1:
        raise RecallHandleError(_INVALID)
    return RecallHandle(items[1], items[2], items[3], items[4])


def java_long_or(text: str, default: int) -> int:
    """Commons-lang's ``NumberUtils.toLong(text, default)``: Java's ``Long.parseLong`` or ``default``."""
    if _JAVA_LONG.fullmatch(text) is None:
        return default
    value = int(text)
    return value if _LONG_MIN <= value <= _LONG_MAX else default
