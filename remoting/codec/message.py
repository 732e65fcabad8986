"""The message record: CommitLog entry and pull/query wire record (store.md 2.1), plus the batch send body (3.2).

Layout (big-endian, magic v1): ``size | magic | bodyCRC | queueId | flag | queueOffset | phyOffset | sysFlag |
bornTs | bornHost(8/20) | storeTs | storeHost(8/20) | reconsumeTimes | preparedTxOffset | bodyLen body |
topicLen(signed byte) topic | propsLen(int16) props``. The host sizes follow sysFlag bits 0x10 (born) and 0x20 (store).

Three ways in:

* the store's append path: :func:`prepare_message` validates and measures a :class:`MessageRecord` once, then
  :func:`write_record` packs it straight into the mapped segment with the offsets and store time assigned under the
  append lock (one ``pack_into`` for the fixed part, one copy each for body and tail);
* :func:`decode_record` / :func:`iter_records` turn bytes into :class:`MessageExt` values (pull bodies, tools);
  :func:`remoting.codec.pull_body.decode_records` is the consumer's whole-pull-body fast path;
* :func:`read_record_meta`, the store's fast path, reads only sizes, offsets, store time, topic and raw properties.

Every malformed input raises :class:`~remoting.codec.errors.MessageDecodeError`; an unencodable message raises
:class:`MessageEncodeError`. Nothing here performs I/O.
"""

from __future__ import annotations

import functools
import struct
import zlib
from collections.abc import Iterable, Iterator
from typing import Final, NamedTuple

import attrs

from remoting.codec.errors import MessageDecodeError
from remoting.codec.msgid import offset_msg_id, unpack_socket_address
from remoting.codec.properties import PROPERTY_KEYS, PROPERTY_TAGS, decode_properties

MAGIC_V1: Final = 0xDAA320A7
BLANK_MAGIC: Final = 0xCBD43194

SYSFLAG_COMPRESSED: Final = 0x1
SYSFLAG_MULTI_TAGS: Final = 0x2
SYSFLAG_TRANSACTION_MASK: Final = 0xC
SYSFLAG_TRANSACTION_NOT_TYPE: Final = 0x0
SYSFLAG_TRANSACTION_PREPARED: Final = 0x4
SYSFLAG_TRANSACTION_COMMIT: Final = 0x8
SYSFLAG_TRANSACTION_ROLLBACK: Final = 0xC
SYSFLAG_BORNHOST_V6: Final = 0x10
SYSFLAG_STOREHOST_V6: Final = 0x20

MAX_TOPIC_BYTES: Final = 127
MAX_PROPERTIES_BYTES: Final = 32767
#: Fixed bytes of a record with IPv4 hosts; each IPv6 host adds 12.
RECORD_OVERHEAD_V4: Final = 91

#: Fixed positions (independent of the host sizes): magic @4, queue offset @20, physical offset @28, sysFlag @36.
POS_MAGIC: Final = 4

_LOCALHOST: Final = bytes([127, 0, 0, 1]) + (0).to_bytes(4, "big")
_INT: Final = struct.Struct(">i")
_UINT: Final = struct.Struct(">I")
_SHORT: Final = struct.Struct(">h")
_BLANK: Final = struct.Struct(">iI")
_TOPIC_LEN: Final = [bytes((n,)) for n in range(MAX_TOPIC_BYTES + 1)]


# Precomputed per (born host length, store host length): everything up to and including the body length.
_FIXED: Final = {(b, s): struct.Struct(f">iIiiiqqiq{b}sq{s}siqi") for b in (8, 20) for s in (8, 20)}


class MessageEncodeError(ValueError):
    """The message cannot be stored: topic or properties too long for their length fields, or a bad host."""


class PropertiesTooLongError(MessageEncodeError):
    """The properties string exceeds the int16 length field (32767 bytes)."""


class BodyTooLongError(MessageEncodeError):
    """A body exceeds the store's ``maxMessageSize`` (checked by :func:`prepare_batch`)."""


@attrs.frozen(slots=True)
class MessageRecord:
    """What the broker asks the store to append (Java's ``MessageExtBrokerInner``).

    ``properties`` is the already-encoded properties string; hosts are packed socket addresses
    (:func:`~remoting.codec.msgid.pack_socket_address`); the IPv6 sysFlag bits are derived from their lengths.
    """

    topic: str
    body: bytes | memoryview
    queue_id: int = 0
    flag: int = 0
    properties: str = ""
    sys_flag: int = 0
    born_timestamp: int = 0
    born_host: bytes = _LOCALHOST
    store_host: bytes = _LOCALHOST
    reconsume_times: int = 0
    prepared_transaction_offset: int = 0


class PreparedMessage:
    """A validated, measured message ready for :func:`write_record`. ``size`` is the record length.

    ``message`` supplies the fields a batch shares (topic, queue, hosts, times); ``body``, ``flag`` and ``text`` (the
    properties string, ``properties`` its UTF-8 bytes) are the message's own, so one template record serves a whole
    batch (:func:`prepare_batch`)."""

    __slots__ = ("body", "body_crc", "flag", "message", "properties", "size", "sys_flag", "tail", "text", "topic")

    def __init__(self, message: MessageRecord, topic: bytes, properties: bytes, sys_flag: int, crc: int,
                 body: bytes | memoryview, flag: int, text: str) -> None:  # fmt: skip
        self.message = message
        self.topic = topic
        self.properties = properties
        self.body = body
        self.flag = flag
        self.text = text
        self.sys_flag = sys_flag
        self.body_crc = crc
        self.tail = b"".join((_TOPIC_LEN[len(topic)], topic, _SHORT.pack(len(properties)), properties))
        self.size = 75 + len(message.born_host) + len(message.store_host) + len(body) + len(topic) + len(properties)


def body_crc(body: bytes | memoryview) -> int:
    """The stored body CRC: zlib CRC32 masked to 31 bits, as the Java broker computes it."""
    return zlib.crc32(body) & 0x7FFFFFFF


def prepare_message(message: MessageRecord) -> PreparedMessage:
    """Validate and measure ``message``; raises :class:`MessageEncodeError` on an oversized topic or properties."""
    topic = message.topic.encode()
    if 0 < len(topic) <= MAX_TOPIC_BYTES and len(message.born_host) == 8 and len(message.store_host) == 8:
        sys_flag = message.sys_flag & ~(SYSFLAG_BORNHOST_V6 | SYSFLAG_STOREHOST_V6)
    else:
        topic, sys_flag = _check_template(message)
    props = message.properties.encode()
    if len(props) > MAX_PROPERTIES_BYTES:
        raise PropertiesTooLongError(f"properties must be at most {MAX_PROPERTIES_BYTES} bytes, got {len(props)}")
    body = message.body
    crc = zlib.crc32(body) & 0x7FFFFFFF
    return PreparedMessage(message, topic, props, sys_flag, crc, body, message.flag, message.properties)


def prepare_batch(
    template: MessageRecord, entries: Iterable[tuple[bytes, str, int]], max_body: int
) -> list[PreparedMessage]:
    """One prepared message per ``(body, properties, flag)`` entry, the other fields from ``template`` (whose own
    body, properties and flag are ignored): the same records as :func:`prepare_message` of a full
    :class:`MessageRecord` per entry, without building one (about 1 us each on the batch-send path).

    Raises, in the order a per-message loop would meet them: :class:`BodyTooLongError` for a body over ``max_body``,
    then :class:`MessageEncodeError` / :class:`PropertiesTooLongError` as :func:`prepare_message` does."""
    prepared: list[PreparedMessage] = []
    crc32 = zlib.crc32
    for body, text, flag in entries:
        if len(body) > max_body:
            raise BodyTooLongError(f"message body {len(body)} bytes exceeds {max_body}")
        if not prepared:
            topic, sys_flag = _check_template(template)
        props = text.encode()
        if len(props) > MAX_PROPERTIES_BYTES:
            raise PropertiesTooLongError(f"properties must be at most {MAX_PROPERTIES_BYTES} bytes, got {len(props)}")
        prepared.append(PreparedMessage(template, topic, props, sys_flag, crc32(body) & 0x7FFFFFFF, body, flag, text))
    return prepared


def _check_template(message: MessageRecord) -> tuple[bytes, int]:
    """The encoded topic and the sysFlag with the host bits set; raises :class:`MessageEncodeError`."""
    topic = message.topic.encode()
    if not 0 < len(topic) <= MAX_TOPIC_BYTES:
        raise MessageEncodeError(f"topic must be 1..{MAX_TOPIC_BYTES} bytes, got {len(topic)}")
    sys_flag = message.sys_flag & ~(SYSFLAG_BORNHOST_V6 | SYSFLAG_STOREHOST_V6)
    born, store = len(message.born_host), len(message.store_host)
    if born != 8 or store != 8:
        for length, bit in ((born, SYSFLAG_BORNHOST_V6), (store, SYSFLAG_STOREHOST_V6)):
            if length == 20:
                sys_flag |= bit
            elif length != 8:
                raise MessageEncodeError(f"a packed host is 8 or 20 bytes, got {length}")
    return topic, sys_flag


def write_record(
    buf: bytearray | memoryview | object,
    pos: int,
    prepared: PreparedMessage,
    queue_offset: int,
    phy_offset: int,
    store_timestamp: int,
) -> int:
    """Write the record at ``buf[pos:]`` (any writable buffer, e.g. an ``mmap``) and return its size.

    The caller guarantees ``prepared.size`` bytes of room; an overrun raises ``struct.error``/``IndexError``.
    """
    m = prepared.message
    body = prepared.body
    born = m.born_host
    store = m.store_host
    fixed = _FIXED[len(born), len(store)]
    fixed.pack_into(
        buf,  # type: ignore[arg-type]
        pos,
        prepared.size,
        MAGIC_V1,
        prepared.body_crc,
        m.queue_id,
        prepared.flag,
        queue_offset,
        phy_offset,
        prepared.sys_flag,
        m.born_timestamp,
        born,
        store_timestamp,
        store,
        m.reconsume_times,
        m.prepared_transaction_offset,
        len(body),
    )
    start = pos + fixed.size
    end = start + len(body)
    buf[start:end] = body  # type: ignore[index]
    buf[end : pos + prepared.size] = prepared.tail  # type: ignore[index]
    return prepared.size


def encode_record(
    message: MessageRecord, queue_offset: int = 0, phy_offset: int = 0, store_timestamp: int = 0
) -> bytes:
    """The whole record as ``bytes`` (tests, tools and the batch/replica paths)."""
    prepared = prepare_message(message)
    buf = bytearray(prepared.size)
    write_record(buf, 0, prepared, queue_offset, phy_offset, store_timestamp)
    return bytes(buf)


def write_blank(buf: bytearray | memoryview | object, pos: int, free: int) -> None:
    """The end-of-file marker: ``free`` (bytes left in the segment from ``pos``) then BLANK_MAGIC."""
    _BLANK.pack_into(buf, pos, free, BLANK_MAGIC)  # type: ignore[arg-type]


def record_magic(buf: bytes | bytearray | memoryview | object, pos: int) -> int:
    """The unsigned magic at ``buf[pos+4:pos+8]``; raises :class:`MessageDecodeError` when fewer than 8 bytes."""
    try:
        return int(_UINT.unpack_from(buf, pos + POS_MAGIC)[0])  # type: ignore[arg-type]
    except struct.error as exc:
        raise MessageDecodeError(f"no record header at {pos}") from exc


class RecordMeta(NamedTuple):
    """What the store needs from a record without decoding body or properties."""

    size: int
    body_crc: int
    queue_id: int
    queue_offset: int
    phy_offset: int
    sys_flag: int
    store_timestamp: int
    body_start: int
    body_len: int
    topic: str
    properties: bytes


_Fields = tuple[int, int, int, int, int, int, int, int, int, bytes, int, bytes, int, int, int]


def _parse(view: memoryview, pos: int, check_crc: bool) -> tuple[_Fields, int, int, int]:
    """Validate the record at ``pos``; returns its fixed fields, the topic-length position (just after the body),
    the properties-length position and the record end."""
    try:
        sys_flag = _INT.unpack_from(view, pos + 36)[0]
        fixed = _FIXED[20 if sys_flag & SYSFLAG_BORNHOST_V6 else 8, 20 if sys_flag & SYSFLAG_STOREHOST_V6 else 8]
        fields: _Fields = fixed.unpack_from(view, pos)
        size, magic, body_len = fields[0], fields[1], fields[14]
        end = pos + size
        if magic != MAGIC_V1:
            raise MessageDecodeError(f"bad magic {magic:#010x} at {pos}")
        if size < RECORD_OVERHEAD_V4 or end > len(view):
            raise MessageDecodeError(f"record size {size} at {pos} does not fit in {len(view) - pos} bytes")
        topic_at = pos + fixed.size + body_len
        if body_len < 0 or topic_at + 3 > end:
            raise MessageDecodeError(f"body length {body_len} overruns the record at {pos}")
        props_at = topic_at + 1 + view[topic_at]
        if view[topic_at] > MAX_TOPIC_BYTES or props_at + 2 > end:
            raise MessageDecodeError(f"bad topic length at {pos}")
        if props_at + 2 + _SHORT.unpack_from(view, props_at)[0] != end:
            raise MessageDecodeError(f"record at {pos}: size {size} disagrees with its fields")
    except (struct.error, IndexError) as exc:
        raise MessageDecodeError(f"truncated record at {pos}") from exc
    if check_crc and zlib.crc32(view[topic_at - body_len : topic_at]) & 0x7FFFFFFF != fields[2]:
        raise MessageDecodeError(f"body CRC mismatch in the record at {pos}")
    return fields, topic_at, props_at, end


def read_record_meta(buf: bytes | bytearray | memoryview | object, pos: int = 0, check_crc: bool = False) -> RecordMeta:
    """Validate the record at ``pos`` (magic v1, self-consistent lengths, optionally the body CRC) and summarise it.

    Raises :class:`MessageDecodeError` for a blank marker, another magic, a truncated record or a CRC mismatch.
    """
    view = buf if isinstance(buf, memoryview) else memoryview(buf)  # type: ignore[arg-type]
    f, topic_at, props_at, end = _parse(view, pos, check_crc)
    topic = bytes(view[topic_at + 1 : props_at]).decode("utf-8", "replace")
    return RecordMeta(
        f[0], f[2], f[3], f[5], f[6], f[7], f[10], topic_at - f[14], f[14], topic, bytes(view[props_at + 2 : end])
    )


@attrs.frozen(slots=True)
class MessageExt:
    """A decoded record (Java's ``MessageExt``). Hosts are ``(ip, port)``; ``properties`` is decoded."""

    store_size: int
    body_crc: int
    queue_id: int
    flag: int
    queue_offset: int
    commit_log_offset: int
    sys_flag: int
    born_timestamp: int
    born_host: tuple[str, int]
    store_timestamp: int
    store_host: tuple[str, int]
    reconsume_times: int
    prepared_transaction_offset: int
    body: bytes
    topic: str
    properties: dict[str, str]
    store_host_packed: bytes

    @property
    def msg_id(self) -> str:
        """The offset msgId (store host + physical offset)."""
        return offset_msg_id(self.store_host_packed, self.commit_log_offset)

    @property
    def tags(self) -> str | None:
        return self.properties.get(PROPERTY_TAGS)

    @property
    def keys(self) -> list[str]:
        return [k for k in self.properties.get(PROPERTY_KEYS, "").split(" ") if k]


@functools.lru_cache(maxsize=1024)
def _host(packed: bytes) -> tuple[str, int]:
    # Few distinct hosts appear in a pull body (one store host, a handful of producers): decode each once.
    return unpack_socket_address(packed)


def decode_record(buf: bytes | bytearray | memoryview, pos: int = 0, check_crc: bool = False) -> MessageExt:
    """Decode the full record at ``pos``. Raises :class:`MessageDecodeError` on any inconsistency."""
    view = buf if isinstance(buf, memoryview) else memoryview(buf)
    f, topic_at, props_at, end = _parse(view, pos, check_crc)
    return MessageExt(
        f[0],
        f[2],
        f[3],
        f[4],
        f[5],
        f[6],
        f[7],
        f[8],
        _host(f[9]),
        f[10],
        _host(f[11]),
        f[12],
        f[13],
        bytes(view[topic_at - f[14] : topic_at]),
        bytes(view[topic_at + 1 : props_at]).decode("utf-8", "replace"),
        decode_properties(view[props_at + 2 : end]),
        f[11],
    )


def iter_records(buf: bytes | bytearray | memoryview, check_crc: bool = False) -> Iterator[MessageExt]:
    """Decode concatenated records (a pull body) until the buffer is exhausted; garbage raises MessageDecodeError."""
    pos = 0
    end = len(buf)
    while pos < end:
        msg = decode_record(buf, pos, check_crc)
        pos += msg.store_size
        yield msg


@attrs.frozen(slots=True)
class BatchEntry:
    """One message of a SEND_BATCH_MESSAGE body: the compact client-side record."""

    body: bytes
    properties: str = ""
    flag: int = 0


_BATCH_HEAD: Final = struct.Struct(">iiiii")


def encode_batch_body(entries: list[BatchEntry]) -> bytes:
    """The client's batch body: per entry ``size | magic 0 | crc 0 | flag | bodyLen body | propsLen props``."""
    out = bytearray()
    for e in entries:
        props = e.properties.encode()
        if len(props) > MAX_PROPERTIES_BYTES:
            raise MessageEncodeError(f"batch entry properties exceed {MAX_PROPERTIES_BYTES} bytes")
        out += _BATCH_HEAD.pack(22 + len(e.body) + len(props), 0, 0, e.flag, len(e.body))
        out += e.body
        out += _SHORT.pack(len(props)) + props
    return bytes(out)


def decode_batch_body(body: bytes | bytearray | memoryview) -> list[BatchEntry]:
    """Split a batch send body; the magic and CRC words are ignored (clients write 0). Raises MessageDecodeError."""
    return [BatchEntry(data, props, flag) for data, props, flag in split_batch_body(body)]


def split_batch_body(body: bytes | bytearray | memoryview) -> list[tuple[bytes, str, int]]:
    """:func:`decode_batch_body` as ``(body, properties, flag)`` tuples, the broker's batch-send path (the input of
    :func:`prepare_batch`). Raises MessageDecodeError."""
    view = memoryview(body)
    entries = []
    pos = 0
    end = len(view)
    try:
        while pos < end:
            size, _magic, _crc, flag, body_len = _BATCH_HEAD.unpack_from(view, pos)
            p = pos + 20
            if body_len < 0 or p + body_len + 2 > end:
                raise MessageDecodeError(f"batch entry body length {body_len} overruns the body at {pos}")
            data = bytes(view[p : p + body_len])
            p += body_len
            props_len = _SHORT.unpack_from(view, p)[0]
            p += 2
            if props_len < 0 or p + props_len > end or size != p + props_len - pos:
                raise MessageDecodeError(f"batch entry at {pos}: size {size} disagrees with its fields")
            props = bytes(view[p : p + props_len]).decode("utf-8", "replace")
            entries.append((data, props, flag))
            pos += size
    except struct.error as exc:
        raise MessageDecodeError(f"truncated batch entry at {pos}") from exc
    return entries
