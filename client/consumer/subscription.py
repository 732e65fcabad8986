"""Subscriptions: a tag expression (``"*"``, ``"TagA || TagB"``) or an SQL92 expression turned into the
:class:`~remoting.codec.bodies.SubscriptionData` a heartbeat carries, plus the client-side tag filter."""

from __future__ import annotations

import time

from remoting.codec.bodies import EXPRESSION_SQL92, EXPRESSION_TAG, SUB_ALL, SubscriptionData
from remoting.codec.message_properties import java_string_hash, java_trim


def build_subscription(
    topic: str, expression: str | None = SUB_ALL, expression_type: str = EXPRESSION_TAG
) -> SubscriptionData:
    """Java's ``FilterAPI.build``: a tag expression is sent as written, its tags split on ``||`` and trimmed as
    ``String.trim`` does, hash codes with Java's string hash, ``subVersion`` = now in ms. An empty or ``*`` tag
    expression (exactly: ``" * "`` names the tag ``*``, a blank one no tag, matching nothing) subscribes to
    everything. An SQL92 expression is sent as written; the broker parses it (with ``enablePropertyFilter`` on) and
    answers SUBSCRIPTION_PARSE_FAILED with the parser's message when it is malformed.

    Raises ``ValueError`` for an empty SQL92 expression (Java's "Expression can't be null!"), a tag expression made of
    ``||`` alone (Java's "subString split error": the broker would refuse every pull of it) and an expression type
    other than ``TAG`` and ``SQL92``.
    """
    version = time.time_ns() // 1_000_000
    if expression_type == EXPRESSION_SQL92:
        if not expression or not expression.strip():
            raise ValueError(f"Expression can't be null! {EXPRESSION_SQL92}")
        return SubscriptionData(
            topic=topic, sub_string=expression, sub_version=version, expression_type=EXPRESSION_SQL92
        )
    if expression_type != EXPRESSION_TAG:
        raise ValueError(f"unknown expression type {expression_type!r}: {EXPRESSION_TAG} or {EXPRESSION_SQL92}")
    raw = expression or ""
    if raw in ("", SUB_ALL):
        return SubscriptionData(topic=topic, sub_string=SUB_ALL, sub_version=version)
    parts = raw.split("||")
    if all(not part for part in parts):
        raise ValueError(f"subString split error: tag expression {raw!r} names no tag")
    tags = tuple(dict.fromkeys(tag for tag in map(java_trim, parts) if tag))
    return SubscriptionData(
        topic=topic,
        sub_string=raw,
        tags_set=tags,
        code_set=tuple(dict.fromkeys(java_string_hash(t) for t in tags)),
        sub_version=version,
    )


def tag_filter(sub: SubscriptionData) -> frozenset[str] | None:
    """The tags a pulled message must carry, or ``None`` when every message matches (``*`` or SQL92, which the
    broker filters)."""
    if sub.expression_type != EXPRESSION_TAG or sub.sub_string == SUB_ALL or not sub.tags_set:
        return None
    return frozenset(sub.tags_set)


def retry_topic(group: str) -> str:
    """``%RETRY%<group>``, where a CLUSTERING consumer's failed messages come back."""
    return f"%RETRY%{group}"
