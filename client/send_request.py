"""Building send requests (Java's ``DefaultMQProducerImpl`` preparation steps), without I/O: validation, the
UNIQ_KEY, body compression above the threshold, the SEND_MESSAGE_V2 header, and batch bodies split at the size limit.

:class:`SendBuilder` holds a producer's settings; everything raises :class:`~client.errors.MessageValidationError`
for a message that cannot be sent as given.
"""

from __future__ import annotations

import time
import zlib
from collections.abc import Sequence
from typing import Final

import attrs

from client.errors import MessageValidationError
from client.message import COMPRESSION_ZLIB, PROPERTY_MAX_RECONSUME_TIMES, PROPERTY_RECONSUME_TIME, Message
from remoting.codec.message import SYSFLAG_COMPRESSED, BatchEntry, encode_batch_body
from remoting.codec.message_properties import PROPERTY_UNIQ_KEY, PROPERTY_WAIT, encode_properties
from remoting.codec.msgid import UniqKeyGenerator

#: Java's ``maxMessageSize`` and ``compressMsgBodyOverHowmuch`` defaults.
MAX_MESSAGE_SIZE: Final = 4 * 1024 * 1024
COMPRESS_OVER: Final = 4 * 1024
#: Bytes a batch entry adds around its body and properties.
BATCH_ENTRY_OVERHEAD: Final = 22

_uniq_keys: dict[str, UniqKeyGenerator] = {}


def uniq_key_generator(ip: str) -> UniqKeyGenerator:
    """One generator per client IP for the process (the counter must not repeat within a millisecond)."""
    gen = _uniq_keys.get(ip)
    if gen is None:
        try:
            gen = UniqKeyGenerator(ip)
        except ValueError:
            gen = UniqKeyGenerator()
        _uniq_keys[ip] = gen
    return gen


def split_batch(entries: Sequence[BatchEntry], limit: int = MAX_MESSAGE_SIZE) -> list[list[BatchEntry]]:
    """Split ``entries`` in order into runs whose encoded batch body stays within ``limit`` bytes.

    Raises :class:`MessageValidationError` when a single entry alone exceeds ``limit``.
    """
    batches: list[list[BatchEntry]] = []
    current: list[BatchEntry] = []
    size = 0
    for entry in entries:
        entry_size = BATCH_ENTRY_OVERHEAD + len(entry.body) + len(entry.properties.encode())
        if entry_size > limit:
            raise MessageValidationError(f"a batch message of {entry_size} bytes exceeds the {limit}-byte limit")
        if current and size + entry_size > limit:
            batches.append(current)
            current, size = [], 0
        current.append(entry)
        size += entry_size
    if current:
        batches.append(current)
    return batches


@attrs.frozen(slots=True)
class PreparedSend:
    """A send ready to go but for the queue: the SEND_MESSAGE_V2 extFields (``e`` and ``n`` are set per attempt by
    :meth:`for_queue`), the (maybe compressed) body and the message id(s)."""

    fields: dict[str, str]
    body: bytes
    msg_id: str

    @property
    def topic(self) -> str:
        return self.fields["b"]

    def for_queue(self, queue_id: int, broker_name: str) -> dict[str, str]:
        fields = dict(self.fields)
        fields["e"] = str(queue_id)
        fields["n"] = broker_name
        return fields


@attrs.define(slots=True)
class SendBuilder:
    group: str
    uniq: UniqKeyGenerator
    max_message_size: int = MAX_MESSAGE_SIZE
    compress_over: int = COMPRESS_OVER
    create_topic_key: str = "TBW102"
    default_topic_queue_nums: int = 4

    def validate(self, msg: Message) -> None:
        if not msg.topic:
            raise MessageValidationError("the message topic is empty")
        if not msg.body:
            raise MessageValidationError("the message body is empty")
        if len(msg.body) > self.max_message_size:
            raise MessageValidationError(
                f"the message body is {len(msg.body)} bytes, more than the {self.max_message_size}-byte limit"
            )
        if msg.delay_level < 0:
            raise MessageValidationError(f"delay level {msg.delay_level} is negative")

    def _fields(self, topic: str, sys_flag: int, flag: int, properties: str, reconsume: int) -> dict[str, str]:
        """The V2 fields (the layout :class:`~remoting.codec.headers.SendMessageRequestHeaderV2` declares), built as
        a plain dict because this is the send hot path."""
        return {
            "a": self.group,
            "b": topic,
            "c": self.create_topic_key,
            "d": str(self.default_topic_queue_nums),
            "e": "0",
            "f": str(sys_flag),
            "g": str(time.time_ns() // 1_000_000),
            "h": str(flag),
            "i": properties,
            "j": str(reconsume),
            "k": "false",
        }

    def single(self, msg: Message) -> PreparedSend:
        """One message: UNIQ_KEY added, body zlib-compressed (level 5) when at least ``compress_over`` bytes and
        smaller that way, RECONSUME_TIME / MAX_RECONSUME_TIMES moved into the header as Java does."""
        self.validate(msg)
        uniq = self.uniq.next_id()
        props = msg.all_properties()
        props[PROPERTY_UNIQ_KEY] = uniq
        body = bytes(msg.body)
        sys_flag = 0
        if len(body) >= self.compress_over:
            compressed = zlib.compress(body, 5)
            if len(compressed) < len(body):
                body = compressed
                sys_flag = SYSFLAG_COMPRESSED | COMPRESSION_ZLIB
        reconsume = props.pop(PROPERTY_RECONSUME_TIME, None)
        max_reconsume = props.pop(PROPERTY_MAX_RECONSUME_TIMES, None)
        fields = self._fields(msg.topic, sys_flag, msg.flag, encode_properties(props), int(reconsume or 0))
        if max_reconsume:
            fields["l"] = str(int(max_reconsume))
        return PreparedSend(fields, body, uniq)

    def batch(self, msgs: Sequence[Message]) -> list[PreparedSend]:
        """SEND_BATCH_MESSAGE requests for ``msgs`` (one topic, no delay, no retry topic), each body within
        ``max_message_size``; ``msg_id`` joins the messages' UNIQ_KEYs by commas."""
        if not msgs:
            raise MessageValidationError("an empty batch cannot be sent")
        topic = msgs[0].topic
        entries: list[BatchEntry] = []
        ids: list[str] = []
        for m in msgs:
            if m.topic != topic:
                raise MessageValidationError("every message of a batch must have the same topic")
            if m.delay_level > 0:
                raise MessageValidationError("batch messages cannot have a delay level")
            if topic.startswith("%RETRY%"):
                raise MessageValidationError("batch messages cannot be sent to a retry topic")
            self.validate(m)
            uniq = self.uniq.next_id()
            props = m.all_properties()
            props[PROPERTY_UNIQ_KEY] = uniq
            entries.append(BatchEntry(bytes(m.body), encode_properties(props), m.flag))
            ids.append(uniq)
        prepared: list[PreparedSend] = []
        start = 0
        for chunk in split_batch(entries, self.max_message_size):
            fields = self._fields(topic, 0, 0, encode_properties({PROPERTY_WAIT: "true"}), 0)
            fields["m"] = "true"
            prepared.append(PreparedSend(fields, encode_batch_body(chunk), ",".join(ids[start : start + len(chunk)])))
            start += len(chunk)
        return prepared
