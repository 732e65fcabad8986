"""RocketMQ 5's topic attributes, sans-IO: the modification text of UPDATE_AND_CREATE_TOPIC and the topic message
type (``common/src/main/java/org/apache/rocketmq/common/attribute/AttributeParser.java``, ``AttributeUtil.java``,
``TopicMessageType.java``).

A modification reads ``+key=value,+key2=value2,-key3``: ``+`` adds or alters, ``-`` deletes, each key at most once
(``+k=v,-k`` is refused whatever ``v`` is: every key is checked before any value); creating a topic allows ``+`` only.
The one key served is ``message.type`` (``NORMAL``, ``FIFO``, ``DELAY``, ``TRANSACTION``, ``MIXED``, ``UNSPECIFIED``;
``MIXED`` only with the broker's ``enableMixedMessageType``; an ``UNSPECIFIED`` topic takes no 5.x send); RocketMQ's
``queue.type`` and ``cleanup.policy`` are refused as unsupported here. :func:`alter_attributes` raises
:class:`TopicAttributeError` with RocketMQ's message, which the admin processor answers as SYSTEM_ERROR (RocketMQ
catches the same RuntimeException), but MIXED as :class:`MixedTypeRefused`, which it answers INVALID_PARAMETER as
5.3 does.

:func:`message_type_of` classifies a message by its stored properties as RocketMQ 5's proxy does before checking it
against the topic's type.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping
from typing import Final

__all__ = ["MESSAGE_TYPE", "MixedTypeRefused", "TopicAttributeError", "TopicMessageType", "alter_attributes",
           "message_type_of", "topic_type"]  # fmt: skip

MESSAGE_TYPE: Final = "message.type"


class TopicMessageType(enum.Enum):
    UNSPECIFIED = "UNSPECIFIED"
    NORMAL = "NORMAL"
    FIFO = "FIFO"
    DELAY = "DELAY"
    TRANSACTION = "TRANSACTION"
    MIXED = "MIXED"


#: The properties that make a message a delay message (RocketMQ's ``MessageConst`` names).
_DELAY_KEYS: Final = ("DELAY", "TIMER_DELIVER_MS", "TIMER_DELAY_SEC", "TIMER_DELAY_MS")
#: The values ``message.type`` may be set to (``TopicMessageType.topicMessageTypeSet``, UNSPECIFIED included).
_SETTABLE: Final = frozenset(t.value for t in TopicMessageType)


class TopicAttributeError(ValueError):
    """A modification RocketMQ refuses; the message is RocketMQ's."""


class MixedTypeRefused(TopicAttributeError):
    """``+message.type=MIXED`` on a broker without ``enableMixedMessageType``: RocketMQ 5 answers it with
    INVALID_PARAMETER, not the SYSTEM_ERROR of the other refusals (broker/src/main/java/org/apache/rocketmq/broker/
    processor/AdminBrokerProcessor.java, updateAndCreateTopic)."""


def parse_modification(text: str | None) -> dict[str, str]:
    """``{"+key": value, "-key": ""}`` (``AttributeParser.parseToMap``); raises :class:`TopicAttributeError`."""
    if not text:
        return {}
    out: dict[str, str] = {}
    for item in text.split(","):
        if "=" in item:
            key, _, value = item.partition("=")
            value = value.split("=", 1)[0]
            if "+" not in key:
                raise TopicAttributeError(f"add/alter attribute format is wrong: {key}")
        else:
            key, value = item, ""
            if "-" not in key:
                raise TopicAttributeError(f"delete attribute format is wrong: {key}")
        if key in out:
            raise TopicAttributeError(f"key duplication: {key}")
        out[key] = value
    return out


def alter_attributes(
    create: bool, current: Mapping[str, str], text: str | None, *, mixed_allowed: bool = False
) -> dict[str, str]:
    """The topic's attributes after ``text`` (``AttributeUtil.alterCurrentAttributes``, after the admin processor's
    MIXED check): every entry's key is checked before any entry's value; raises :class:`TopicAttributeError`."""
    modification = parse_modification(text)
    if not mixed_allowed and modification.get(f"+{MESSAGE_TYPE}") == TopicMessageType.MIXED.value:
        raise MixedTypeRefused("MIXED message type is not supported.")
    _check_keys(create, current, modification)
    for key, value in modification.items():
        _verify(key[1:], value if key.startswith("+") else None)
    final = dict(current)
    for key, value in modification.items():
        if key.startswith("+"):
            final[key[1:]] = value
        else:
            del final[key[1:]]
    return final


def _check_keys(create: bool, current: Mapping[str, str], modification: Mapping[str, str]) -> None:
    """AttributeUtil's loop over the entries: the key's form (``validate``), one entry per key
    (``duplicationCheck``), add only while creating, delete only what exists."""
    seen: set[str] = set()
    for key in modification:
        real = key[1:]
        if not real or "+" in real or "-" in real:  # also every key not led by its sign
            raise TopicAttributeError("kv string format wrong.")
        if real in seen:
            raise TopicAttributeError(f"alter duplication key. key: {real}")
        seen.add(real)
        if create and not key.startswith("+"):
            raise TopicAttributeError(f"only add attribute is supported while creating topic. key: {real}")
        if key.startswith("-") and real not in current:
            raise TopicAttributeError(f"attempt to delete a nonexistent key: {real}")


def _verify(real: str, value: str | None) -> None:
    """``AttributeUtil.validateAlter`` for one key: a served key, and a value in its set unless it is deleted."""
    if real != MESSAGE_TYPE:
        raise TopicAttributeError(f"unsupported key: {real}")
    if value is not None and value not in _SETTABLE:
        raise TopicAttributeError(f"value is not in set: {sorted(_SETTABLE)}")


def topic_type(declared: str | None) -> TopicMessageType | None:
    """The type a topic's ``message.type`` attribute declares; None without one; UNSPECIFIED for unknown text."""
    if declared is None:
        return None
    try:
        return TopicMessageType(declared)
    except ValueError:
        return TopicMessageType.UNSPECIFIED


def message_type_of(properties: Mapping[str, str]) -> TopicMessageType:
    """TRANSACTION for a half message, DELAY with a delay level or timer property, FIFO with a sharding key (a 5.x
    message group), else NORMAL (``TopicMessageType.parseFromMessageProperty``)."""
    if properties.get("TRAN_MSG") == "true":
        return TopicMessageType.TRANSACTION
    if any(properties.get(key) is not None for key in _DELAY_KEYS):
        return TopicMessageType.DELAY
    if properties.get("__SHARDINGKEY") is not None:
        return TopicMessageType.FIFO
    return TopicMessageType.NORMAL
