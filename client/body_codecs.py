"""The body codecs of RocketMQ 5's ``compressType`` (common/src/main/java/org/apache/rocketmq/common/compression/
CompressionType.java): LZ4 frames (``Lz4Compressor``, lz4-java's ``LZ4FrameOutputStream``) and Zstandard frames
(``ZstdCompressor``, zstd-jni), read with the well-kept ``lz4`` and ``zstandard`` bindings of the reference C
libraries. zlib (type 0 or 3) stays with :mod:`zlib`.

A body that does not inflate raises :class:`BodyCodecError`, a ``zlib.error``, so the callers that drop or keep a
body that does not inflate treat every codec alike.
"""

from __future__ import annotations

import zlib

import lz4.frame
import zstandard

__all__ = ["BodyCodecError", "inflate_lz4", "inflate_zstd"]


class BodyCodecError(zlib.error):
    """The body is no well-formed frame of its codec."""


def inflate_lz4(data: bytes) -> bytes:
    """The content of the LZ4 frame(s) ``data`` holds. Raises :class:`BodyCodecError`."""
    try:
        return bytes(lz4.frame.decompress(data))
    except (RuntimeError, ValueError) as exc:
        raise BodyCodecError(f"LZ4 body does not inflate: {exc}") from None


def inflate_zstd(data: bytes) -> bytes:
    """The content of the Zstandard frame(s) ``data`` holds, with or without a content size in the header. Raises
    :class:`BodyCodecError`."""
    try:
        reader = zstandard.ZstdDecompressor().decompressobj()
        out = reader.decompress(data)
    except zstandard.ZstdError as exc:
        raise BodyCodecError(f"ZSTD body does not inflate: {exc}") from None
    if not reader.eof:
        raise BodyCodecError("ZSTD body does not inflate: the frame is cut short")
    return out
