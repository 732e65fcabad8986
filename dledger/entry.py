"""The DLedger entry and its index record: bytes on disk and values in messages (docs/protocol.md#15-dledger-files).

Layout (big-endian; ``dledger/src/main/java/io/openmessaging/storage/dledger/entry/DLedgerEntry.java`` and
``DLedgerEntryCoder.java`` of DLedger 0.3.1.2): a 48-byte header ``magic:i32 size:i32 index:i64 term:i64 pos:i64
channel:i32 chainCrc:i32 bodyCrc:i32 bodyLength:i32`` then the body; ``size`` is the whole entry (48 + body). The
index record is 32 bytes, ``magic:i32 pos:i64 size:i32 index:i64 term:i64``, at ``index * 32`` in the index files.
A data segment that cannot hold the next entry plus 8 bytes ends with a blank ``[-1:i32][remaining:i32]``.

Everything here is pure: :func:`decode_header` and friends raise :class:`EntryDecodeError` for bytes that are not an
entry; nothing does I/O.
"""

from __future__ import annotations

import mmap
import struct
from typing import Final

import attrs

#: The only entry magic DLedger 0.3.1.2 writes; a data segment's end-of-file blank starts with -1 instead.
CURRENT_MAGIC: Final = 1
BLANK_MAGIC: Final = -1
HEADER_SIZE: Final = 48
#: Where ``pos`` sits in the header (RocketMQ's append hook reads it there).
POS_OFFSET: Final = 24
INDEX_UNIT_SIZE: Final = 32
#: A segment must keep room for a blank after the last entry.
MIN_BLANK_LEN: Final = 8

_HEADER: Final = struct.Struct(">iiqqqiiii")
#: The index record's layout (``magic pos size index term``).
INDEX_LAYOUT: Final = struct.Struct(">iqiqq")
_INDEX: Final = INDEX_LAYOUT
#: The header's first two fields (``magic size``).
HEAD_LAYOUT: Final = struct.Struct(">ii")
_BLANK: Final = struct.Struct(">ii")
BLANK_HEADER_SIZE: Final = _BLANK.size


class EntryDecodeError(ValueError):
    """Bytes that do not hold a well-formed entry or index record."""


@attrs.frozen(slots=True)
class Entry:
    """One log entry. ``size`` is derived from the body; equality is DLedger's (every field but the CRCs)."""

    index: int
    term: int
    pos: int
    body: bytes = attrs.field(eq=True)
    magic: int = CURRENT_MAGIC
    channel: int = 0
    chain_crc: int = attrs.field(default=0, eq=False)
    body_crc: int = attrs.field(default=0, eq=False)

    @property
    def size(self) -> int:
        return HEADER_SIZE + len(self.body)

    @property
    def end_pos(self) -> int:
        return self.pos + self.size

    def encode(self) -> bytes:
        return encode_header(self) + self.body


def encode_header(entry: Entry) -> bytes:
    return _HEADER.pack(entry.magic, entry.size, entry.index, entry.term, entry.pos, entry.channel, entry.chain_crc,
                        entry.body_crc, len(entry.body))  # fmt: skip


def pack_header_into(buf: bytearray | memoryview | mmap.mmap, at: int, entry: Entry) -> None:
    _HEADER.pack_into(buf, at, entry.magic, entry.size, entry.index, entry.term, entry.pos, entry.channel,
                      entry.chain_crc, entry.body_crc, len(entry.body))  # fmt: skip


@attrs.frozen(slots=True)
class Header:
    magic: int
    size: int
    index: int
    term: int
    pos: int
    channel: int
    chain_crc: int
    body_crc: int
    body_length: int


def decode_header(buf: bytes | bytearray | memoryview, at: int = 0) -> Header:
    """The header at ``at``. Raises EntryDecodeError when short or inconsistent (size != 48 + body length)."""
    if len(buf) - at < HEADER_SIZE:
        raise EntryDecodeError(f"{len(buf) - at} bytes left, an entry header needs {HEADER_SIZE}")
    header = Header(*_HEADER.unpack_from(buf, at))
    if header.magic != CURRENT_MAGIC:
        raise EntryDecodeError(f"entry magic {header.magic}")
    if header.body_length < 0 or header.size != HEADER_SIZE + header.body_length:
        raise EntryDecodeError(f"entry size {header.size} with body length {header.body_length}")
    return header


def decode_entry(buf: bytes | bytearray | memoryview, at: int = 0) -> Entry:
    """The whole entry at ``at`` (the body copied). Raises EntryDecodeError."""
    h = decode_header(buf, at)
    if len(buf) - at < h.size:
        raise EntryDecodeError(f"entry of {h.size} bytes truncated to {len(buf) - at}")
    body = bytes(buf[at + HEADER_SIZE : at + h.size])
    return Entry(h.index, h.term, h.pos, body, h.magic, h.channel, h.chain_crc, h.body_crc)


def is_blank(buf: bytes | bytearray | memoryview, at: int) -> bool:
    """Whether ``at`` starts an end-of-segment blank (magic -1)."""
    return len(buf) - at >= _BLANK.size and _BLANK.unpack_from(buf, at)[0] == BLANK_MAGIC


def blank_length(buf: bytes | bytearray | memoryview, at: int) -> int:
    """The length a blank at ``at`` covers; 0 when ``at`` starts no blank."""
    return _BLANK.unpack_from(buf, at)[1] if is_blank(buf, at) else 0


def blank_header(length: int) -> bytes:
    """The first :data:`BLANK_HEADER_SIZE` bytes of a blank covering ``length`` bytes (the rest are zeros)."""
    return _BLANK.pack(BLANK_MAGIC, length)


def blank(remaining: int) -> bytes:
    """The blank that fills the last ``remaining`` bytes of a segment (header then zeros)."""
    return blank_header(remaining) + bytes(remaining - _BLANK.size)


@attrs.frozen(slots=True)
class IndexRecord:
    magic: int
    pos: int
    size: int
    index: int
    term: int

    def encode(self) -> bytes:
        return _INDEX.pack(self.magic, self.pos, self.size, self.index, self.term)


def index_record_of(entry: Entry) -> IndexRecord:
    return IndexRecord(entry.magic, entry.pos, entry.size, entry.index, entry.term)


def decode_index(buf: bytes | bytearray | memoryview, at: int = 0) -> IndexRecord:
    if len(buf) - at < INDEX_UNIT_SIZE:
        raise EntryDecodeError("short index record")
    return IndexRecord(*_INDEX.unpack_from(buf, at))


def place(end: int, size: int, segment_size: int) -> tuple[int, int]:
    """Where an entry of ``size`` bytes goes when the data ends at ``end``: ``(pos, blank bytes before it)``.

    An entry that would not leave ``MIN_BLANK_LEN`` bytes in its segment starts the next segment, after a blank that
    fills the rest of the current one (DLedger's ``MmapFileList.preAppend``)."""
    used = end % segment_size
    if used and size + MIN_BLANK_LEN > segment_size - used:
        return end + segment_size - used, segment_size - used
    return end, 0
