"""BATCH_ACK_MESSAGE's body, RocketMQ 5.3.3's ``BatchAckMessageRequestBody`` with its ``BatchAck`` entries
(remoting/src/main/java/org/apache/rocketmq/remoting/protocol/body/): fastjson with the short names of BatchAck's
``@JSONField`` (``c``, ``t``, ``r``, ``so``, ``q``, ``rq``, ``pt``, ``it``, ``b``; the long ones read too, as its
``alternateNames``), the acked offsets as the base64 of ``BitSet.toByteArray`` (``BitSetSerializerDeserializer``:
bit ``i`` acks ``startOffset + i``, little-endian bytes)."""

from __future__ import annotations

import base64
import binascii
from collections.abc import Iterator, Mapping
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


def _bit_set(value: object) -> bytes:
    """A serialized BitSet's bytes: base64 text (fastjson's byte array) or a JSON array of bytes."""
    if value is None:
        return b""
    if isinstance(value, list):
        return bytes(to_int(v, "bitSet", 8) & 0xFF for v in value)
    if isinstance(value, str):
        try:
            return base64.b64decode(value, validate=True)
        except binascii.Error:
            raise BodyDecodeError(f"BatchAck bitSet does not decode: {value[:40]!r}") from None
    raise BodyDecodeError(f"BatchAck bitSet must be base64 text, got {type(value).__name__}")


@attrs.frozen(slots=True)
class BatchAck:
    """The offsets ``start_offset + i`` for each bit ``i`` set in ``bit_set`` (``BitSet.toByteArray``: bit ``i`` is bit
    ``i % 8`` of byte ``i // 8``), popped together (one CK) from queue ``queue_id`` of ``topic`` (``retry`` "1": its V1
    retry topic) by ``consumer_group``. Kept as bytes: a body's bits may name far more offsets than a queue holds."""

    consumer_group: str
    topic: str
    retry: str
    start_offset: int
    queue_id: int
    revive_queue_id: int
    pop_time: int
    invisible_time: int
    bit_set: bytes

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
            bit_set=_bit_set(_field(entry, "b", "bitSet")),
        )

    def offsets(self, low: int, high: int) -> Iterator[int]:
        """The acked offsets within ``[low, high]``, ascending, reading only the bytes that can name them (5.3.3's
        AckMessageProcessor.appendAck walks BitSet.nextSetBit and skips offsets out of the queue's range)."""
        first, last = max(low - self.start_offset, 0), min(high - self.start_offset, 8 * len(self.bit_set) - 1)
        for index in range(first // 8, last // 8 + 1) if first <= last else ():
            byte = self.bit_set[index]
            for bit in range(8) if byte else ():
                if byte >> bit & 1 and first <= 8 * index + bit <= last:
                    yield self.start_offset + 8 * index + bit

    def to_json(self) -> dict[str, Any]:
        return {"b": base64.b64encode(self.bit_set).decode(), "c": self.consumer_group, "it": self.invisible_time,
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
