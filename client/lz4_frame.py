"""LZ4 frame decoding, for the bodies a RocketMQ 5 producer compresses with ``compressType=LZ4``
(common/src/main/java/org/apache/rocketmq/common/compression/Lz4Compressor.java writes one LZ4 frame with lz4-java's
``LZ4FrameOutputStream``; the consumer's ``MessageDecoder.decode`` reads it back with ``LZ4FrameInputStream``).

Pure Python: the frame format (magic, descriptor, blocks, end mark) and the block format (sequences of literals and
matches) of the LZ4 specification. Checksums are skipped, not verified. A body that is no LZ4 frame raises
:class:`Lz4Error`, a ``zlib.error`` so that the callers that drop or keep a body that does not inflate treat both
codecs alike.
"""

from __future__ import annotations

import zlib
from typing import Final

__all__ = ["Lz4Error", "decompress_frame"]

_MAGIC: Final = 0x184D2204
#: Skippable frames: magic 0x184D2A50 to 0x184D2A5F, a 4-byte size, then that many bytes to ignore.
_SKIPPABLE_MASK: Final = 0xFFFFFFF0
_SKIPPABLE: Final = 0x184D2A50


class Lz4Error(zlib.error):
    """The body is no well-formed LZ4 frame."""


def decompress_frame(data: bytes) -> bytes:
    """The content of the LZ4 frame(s) ``data`` holds, concatenated. Raises :class:`Lz4Error`."""
    out = bytearray()
    pos, end = 0, len(data)
    if end == 0:
        raise Lz4Error("lz4: empty body")
    while pos < end:
        magic = _u32(data, pos)
        if magic & _SKIPPABLE_MASK == _SKIPPABLE:
            pos += 8 + _u32(data, pos + 4)
            continue
        if magic != _MAGIC:
            raise Lz4Error(f"lz4: bad frame magic {magic:#x} at {pos}")
        pos = _frame(data, pos + 4, out)
    if pos != end:
        raise Lz4Error("lz4: truncated frame")
    return bytes(out)


def _frame(data: bytes, pos: int, out: bytearray) -> int:
    """Decode the frame whose descriptor starts at ``pos`` into ``out``; the position after it."""
    if pos + 3 > len(data):
        raise Lz4Error("lz4: truncated frame descriptor")
    flg = data[pos]
    if flg >> 6 != 1:
        raise Lz4Error(f"lz4: unsupported frame version {flg >> 6}")
    block_checksum, content_size, content_checksum, dict_id = flg & 0x10, flg & 0x08, flg & 0x04, flg & 0x01
    pos += 2 + (8 if content_size else 0) + (4 if dict_id else 0) + 1  # FLG, BD, sizes, header checksum
    if dict_id:
        raise Lz4Error("lz4: frames with a dictionary are not supported")
    while True:
        if pos + 4 > len(data):
            raise Lz4Error("lz4: truncated block header")
        word = _u32(data, pos)
        pos += 4
        if word == 0:  # end mark
            break
        size = word & 0x7FFFFFFF
        if pos + size > len(data):
            raise Lz4Error("lz4: truncated block")
        if word & 0x80000000:  # stored uncompressed
            out += data[pos : pos + size]
        else:
            _block(data, pos, pos + size, out)
        pos += size + (4 if block_checksum else 0)
    return pos + (4 if content_checksum else 0)


def _block(data: bytes, pos: int, end: int, out: bytearray) -> None:
    """Append the content of the compressed block ``data[pos:end]`` to ``out``. Matches may reach back into the
    earlier blocks' output (linked blocks) as well as this one's."""
    while pos < end:
        token = data[pos]
        pos += 1
        literals = token >> 4
        if literals == 15:
            literals, pos = _length(data, pos, end, literals)
        if pos + literals > end:
            raise Lz4Error("lz4: literals overrun the block")
        out += data[pos : pos + literals]
        pos += literals
        if pos == end:  # the last sequence has literals only
            return
        if pos + 2 > end:
            raise Lz4Error("lz4: truncated match offset")
        offset = data[pos] | data[pos + 1] << 8
        pos += 2
        if offset == 0 or offset > len(out):
            raise Lz4Error(f"lz4: match offset {offset} out of range")
        length = token & 0x0F
        if length == 15:
            length, pos = _length(data, pos, end, length)
        length += 4
        start = len(out) - offset
        if length <= offset:
            out += out[start : start + length]
        else:  # overlapping: the match repeats the last ``offset`` bytes
            pattern = out[start:]
            whole, rest = divmod(length, offset)
            out += pattern * whole + pattern[:rest]


def _length(data: bytes, pos: int, end: int, length: int) -> tuple[int, int]:
    """A length of 15 continued by bytes of 255 and a final byte below it."""
    while True:
        if pos >= end:
            raise Lz4Error("lz4: truncated length")
        byte = data[pos]
        pos += 1
        length += byte
        if byte != 255:
            return length, pos


def _u32(data: bytes, pos: int) -> int:
    if pos + 4 > len(data):
        raise Lz4Error("lz4: truncated frame")
    return int.from_bytes(data[pos : pos + 4], "little")
