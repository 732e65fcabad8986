"""The message record's decoder (docs/protocol.md#51-record-layout): bytes to :class:`MessageExt` values or to a
:class:`RecordMeta`.

:func:`decode_record` / :func:`iter_records` serve pull bodies and tools; :func:`read_record_meta` is the store's fast
path (sizes, offsets, store time, topic and raw properties, no body or properties decoding). Re-exported by
:mod:`remoting.codec.message`, the import path callers use. Every malformed input raises
:class:`~remoting.codec.errors.MessageDecodeError`; nothing here performs I/O.
"""

from __future__ import annotations

import functools
import struct
from collections.abc import Iterator
from typing import Final, NamedTuple

import attrs

from remoting.codec.crc import body_crc
from remoting.codec.errors import MessageDecodeError
from remoting.codec.message_properties import (
    PROPERTY_KEYS,
    PROPERTY_TAGS,
    PROPERTY_TRANSACTION_PREPARED,
    PROPERTY_UNIQ_KEY,
    decode_properties,
)
from remoting.codec.msgid import offset_msg_id, unpack_socket_address
from remoting.codec.record_layout import (
    FIXED,
    MAGIC_V1,
    MAX_TOPIC_BYTES,
    RECORD_OVERHEAD_V4,
    SHORT,
    SYSFLAG_BORNHOST_V6,
    SYSFLAG_STOREHOST_V6,
)

_INT: Final = struct.Struct(">i")


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
    born_timestamp: int = 0


_Fields = tuple[int, int, int, int, int, int, int, int, int, bytes, int, bytes, int, int, int]


def _parse(view: memoryview, pos: int, check_crc: bool) -> tuple[_Fields, int, int, int]:
    """Validate the record at ``pos``; returns its fixed fields, the topic-length position (just after the body),
    the properties-length position and the record end."""
    try:
        sys_flag = _INT.unpack_from(view, pos + 36)[0]
        fixed = FIXED[20 if sys_flag & SYSFLAG_BORNHOST_V6 else 8, 20 if sys_flag & SYSFLAG_STOREHOST_V6 else 8]
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
        if props_at + 2 + SHORT.unpack_from(view, props_at)[0] != end:
            raise MessageDecodeError(f"record at {pos}: size {size} disagrees with its fields")
    except (struct.error, IndexError) as exc:
        raise MessageDecodeError(f"truncated record at {pos}") from exc
    if check_crc and body_crc(view[topic_at - body_len : topic_at]) != fields[2]:
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
        f[0], f[2], f[3], f[5], f[6], f[7], f[10], topic_at - f[14], f[14], topic, bytes(view[props_at + 2 : end]), f[8]
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

    @property
    def transaction_id(self) -> str | None:
        """The UNIQ_KEY of a transaction's half message (``TRAN_MSG`` true, as a check-back's is), else None: the
        ``getTransactionId()`` Java's client sets (ClientRemotingProcessor.checkTransactionState,
        PullAPIWrapper.processPullResult), the id the local transaction got."""
        if self.properties.get(PROPERTY_TRANSACTION_PREPARED, "").lower() != "true":
            return None
        return self.properties.get(PROPERTY_UNIQ_KEY) or None


@functools.lru_cache(maxsize=1024)
def decoded_host(packed: bytes) -> tuple[str, int]:
    """``(ip, port)`` of a packed socket address, cached (the record decoders and the pull-body fast path share it)."""
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
        decoded_host(f[9]),
        f[10],
        decoded_host(f[11]),
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
