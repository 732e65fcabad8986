"""A send's properties string as the broker stores it (:func:`rewrite_properties`), for the send processor and its
fast path (docs/protocol.md#75-send-checks): ``WAIT`` read and removed, ``CLUSTER`` set, ``TRAN_MSG`` and ``DELAY``
read. Pure functions of their arguments; they never raise."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Final

from remoting.codec.message_properties import java_parse_long

__all__ = ["StoredProperties", "has_sharding_key", "message_type", "rewrite_properties", "without_property"]


class StoredProperties:
    """A send's properties string as it will be stored, plus what the broker read from it. ``bad_delay`` is a
    ``DELAY`` value Java's Integer.parseInt refuses (the send then fails, as there), else ``None``."""

    __slots__ = ("bad_delay", "delay_level", "stored", "transactional", "wait")

    def __init__(
        self, stored: str, wait: bool, transactional: bool, delay_level: int, bad_delay: str | None = None
    ) -> None:
        self.stored = stored
        self.wait = wait
        self.transactional = transactional
        self.delay_level = delay_level
        self.bad_delay = bad_delay


_SHARDING_KEY: Final = "__SHARDINGKEY\x01"


def rewrite_properties(raw: str | None, cluster: str) -> StoredProperties:
    """The stored form of a properties string: ``WAIT`` and any client ``CLUSTER`` removed, ``CLUSTER=<cluster>``
    appended. Other segments are kept verbatim (an ali-ons trailing ``0x02`` survives), so a record pulled back
    carries exactly what the producer sent plus the broker's additions. A ``WAIT`` with an empty value counts as
    absent (true), as Java's decoder drops it. Never raises."""
    raw = raw or ""
    tail = "CLUSTER\x01" + cluster
    if "TRAN_MSG\x01" in raw or "DELAY\x01" in raw or "CLUSTER\x01" in raw:
        return _rewrite_segments(raw, tail)
    wait = True
    if "WAIT\x01" in raw:  # every Java producer sends WAIT: cut it out without splitting the whole string
        raw, value = _cut_property(raw, "WAIT\x01")
        if value:
            wait = value.lower() == "true"
    if not raw:
        return StoredProperties(tail, wait, False, 0)
    return StoredProperties(raw + tail if raw[-1] == "\x02" else f"{raw}\x02{tail}", wait, False, 0)


def _cut_property(raw: str, prefix: str) -> tuple[str, str | None]:
    """``raw`` without the segments starting with ``prefix`` (``NAME\x01``), and the last such segment's value."""
    value = None
    start = 0
    while (pos := raw.find(prefix, start)) >= 0:
        if pos and raw[pos - 1] != "\x02":  # the name merely ends with ours, or sits inside a value
            start = pos + 1
            continue
        end = raw.find("\x02", pos)
        if end < 0:
            return raw[:pos], raw[pos + len(prefix) :]
        value = raw[pos + len(prefix) : end]
        raw = raw[:pos] + raw[end + 1 :]
        start = pos
    return raw, value


def java_int(text: str) -> int | None:
    """Java's Integer.parseInt (4.9.8's Message.getDelayTimeLevel reads DELAY with it): an optional sign and decimal
    digits within an int, any Unicode decimal digit of one UTF-16 unit included (``Character.digit``), else ``None``."""
    try:
        return java_parse_long(text, 32)
    except ValueError:
        return None


def _rewrite_segments(raw: str, tail: str) -> StoredProperties:
    wait, transactional, delay, bad_delay = True, False, 0, None
    kept = []
    for segment in raw.split("\x02"):
        name, _, value = segment.partition("\x01")
        if name == "WAIT":
            if value:
                wait = value.lower() == "true"
            continue
        if name == "CLUSTER":
            continue
        if name == "TRAN_MSG":
            transactional = value.lower() == "true"
        elif name == "DELAY" and value:  # an empty value is no property (MessageDecoder.string2messageProperties)
            parsed = java_int(value)
            delay, bad_delay = (0, value) if parsed is None else (parsed, None)
        if segment:
            kept.append(segment)
    kept.append(tail)
    return StoredProperties("\x02".join(kept), wait, transactional, delay, bad_delay)


def without_property(stored: str, name: str) -> str:
    prefix = name + "\x01"
    return "\x02".join(s for s in stored.split("\x02") if not s.startswith(prefix))


def has_sharding_key(stored: str) -> bool:
    """Whether stored properties carry ``__SHARDINGKEY`` (a 5.x message group): RocketMQ 5.3.3's
    ``BrokerMetricsManager.getMessageType`` labels such a message ``fifo``."""
    return stored.startswith(_SHARDING_KEY) or "\x02" + _SHARDING_KEY in stored


#: The properties that make 5.3.3's ``getMessageType`` say ``delay``: a start-deliver time, a delay level, a timer.
_DELAY_PROPERTIES: Final = ("__STARTDELIVERTIME", "DELAY", "TIMER_DELIVER_MS", "TIMER_DELAY_SEC", "TIMER_DELAY_MS")


def message_type(props: Mapping[str, str]) -> str:
    """RocketMQ 5.3.3's ``BrokerMetricsManager.getMessageType`` of a request's decoded properties: ``transaction``
    (TRAN_MSG true), else ``fifo`` (a sharding key), else ``delay``, else ``normal``."""
    if props.get("TRAN_MSG", "").lower() == "true":
        return "transaction"
    if "__SHARDINGKEY" in props:
        return "fifo"
    return "delay" if any(name in props for name in _DELAY_PROPERTIES) else "normal"
