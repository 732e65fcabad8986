"""BATCH_ACK_MESSAGE's body, RocketMQ 5.3.3's ``BatchAckMessageRequestBody`` with its ``BatchAck`` entries
(remoting/src/main/java/org/apache/rocketmq/remoting/protocol/body/): fastjson with the short names of BatchAck's
``@JSONField`` (``c``, ``t``, ``r``, ``so``, ``q``, ``rq``, ``pt``, ``it``, ``b``; the long ones read too, as its
``alternateNames``), the acked offsets as the base64 of ``BitSet.toByteArray`` (``BitSetSerializerDeserializer``:
bit ``i`` acks ``startOffset + i``, little-endian bytes)."""

from __future__ import annotations

import base64
import binascii
from collections.abc import Mapping
from typing import Any

import attrs

from remoting.codec.bodies._json import BodyDecodeError, dumps, expect_object, get_list, load_object, to_int

__all__ = ["BatchAck", "BatchAckMessageRequestBody"]


def _field(obj: Mapping[str, Any], short: str, long: str) -> Any:
    return obj[short] if short in obj else obj.get(long)


def _number(obj: Mapping[str, Any], short: str, long: str, bits: int = 64) -> int:
    """A number field, 0 when absent (a Java primitive)."""
    value = _field(obj, short, long)
    return 0 if value is None else to_int(value, long, bits)


def _bits(value: object) -> tuple[int, ...]:
    """The set bits of a serialized BitSet: base64 text (fastjson's byte array) or a JSON array of bytes."""
    if value is None:
        return ()
    if isinstance(value, list):
        raw = bytes(to_int(v, "bitSet", 8) & 0xFF for v in value)
    elif isinstance(value, str):
        try:
            raw = base64.b64decode(value, validate=True)
        except binascii.Error:
            raise BodyDecodeError(f"BatchAck bitSet does not decode: {value[:40]!r}") from None
    else:
        raise BodyDecodeError(f"BatchAck bitSet must be base64 text, got {type(value).__name__}")
    return tuple(8 * i + j for i, byte in enumerate(raw) for j in range(8) if byte >> j & 1)


@attrs.frozen(slots=True)
class BatchAck:
    """The offsets ``start_offset + i`` for each ``i`` of ``bits``, popped together (one CK) from queue ``queue_id``
    of ``topic`` (``retry`` "1": its V1 retry topic) by ``consumer_group``."""

    consumer_group: str
    topic: str
    retry: str
    start_offset: int
    queue_id: int
    revive_queue_id: int
    pop_time: int
    invisible_time: int
    bits: tuple[int, ...]

    @classmethod
    def from_json(cls, obj: object) -> BatchAck:
        entry = expect_object(obj, "BatchAck")
        return cls(
            consumer_group=str(_field(entry, "c", "consumerGroup") or ""),
            topic=str(_field(entry, "t", "topic") or ""),
            retry=str(_field(entry, "r", "retry") or "0"),
            start_offset=_number(entry, "so", "startOffset"),
            queue_id=_number(entry, "q", "queueId", 32),
            revive_queue_id=_number(entry, "rq", "reviveQueueId", 32),
            pop_time=_number(entry, "pt", "popTime"),
            invisible_time=_number(entry, "it", "invisibleTime"),
            bits=_bits(_field(entry, "b", "bitSet")),
        )

    def to_json(self) -> dict[str, Any]:
        raw = bytearray((max(self.bits) // 8 + 1) if self.bits else 0)
        for i in self.bits:
            raw[i // 8] |= 1 << (i % 8)
        return {"b": base64.b64encode(bytes(raw)).decode(), "c": self.consumer_group, "it": self.invisible_time,
                "pt": self.pop_time, "q": self.queue_id, "r": self.retry, "rq": self.revive_queue_id,
                "so": self.start_offset, "t": self.topic}  # fmt: skip


@attrs.frozen(slots=True)
class BatchAckMessageRequestBody:
    broker_name: str | None
    acks: tuple[BatchAck, ...]

    @classmethod
    def decode(cls, data: bytes | bytearray | memoryview) -> BatchAckMessageRequestBody:
        """Raises :class:`BodyDecodeError` for a body that is not such JSON."""
        obj = load_object(data, "BatchAckMessageRequestBody")
        name = obj.get("brokerName")
        return cls(None if name is None else str(name), tuple(map(BatchAck.from_json, get_list(obj, "acks"))))

    def encode(self) -> bytes:
        body: dict[str, Any] = {"acks": [a.to_json() for a in self.acks]}
        if self.broker_name is not None:
            body["brokerName"] = self.broker_name
        return dumps(body)
