"""The body codecs of RocketMQ 5's ``compressType`` (common/src/main/java/org/apache/rocketmq/common/compression/
CompressionType.java): LZ4 frames (``Lz4Compressor``, lz4-java's ``LZ4FrameOutputStream``) and Zstandard frames
(``ZstdCompressor``, zstd-jni), read with the well-kept ``lz4`` and ``zstandard`` bindings of the reference C
libraries. zlib (type 0 or 3) stays with :mod:`zlib`. :func:`compressor` is the producer's side.

A body that does not inflate raises :class:`BodyCodecError`, a ``zlib.error``, so the callers that drop or keep a
body that does not inflate treat every codec alike.
"""

from __future__ import annotations

import os
import zlib
from collections.abc import Callable
from typing import Any

import lz4.frame
import zstandard

__all__ = [
    "BodyCodecError",
    "compressor",
    "default_compress_level",
    "default_compress_type",
    "inflate_lz4",
    "inflate_zstd",
]


class BodyCodecError(zlib.error):
    """The body is no well-formed frame of its codec."""


def inflate_lz4(data: bytes) -> bytes:
    """The content of the LZ4 frame(s) ``data`` holds. Raises :class:`BodyCodecError`."""
    return _frames(data, lz4.frame.LZ4FrameDecompressor, (RuntimeError, ValueError), "LZ4")


def inflate_zstd(data: bytes) -> bytes:
    """The content of the Zstandard frame(s) ``data`` holds, with or without a content size in the header. Raises
    :class:`BodyCodecError`."""
    return _frames(data, zstandard.ZstdDecompressor().decompressobj, (zstandard.ZstdError,), "ZSTD")


def _frames(data: bytes, reader: Callable[[], Any], errors: tuple[type[Exception], ...], codec: str) -> bytes:
    """Frame after frame to the end of ``data``: common/src/main/java/org/apache/rocketmq/common/compression/
    Lz4Compressor.java and ZstdCompressor.java ``decompress`` read their stream (lz4-java's ``LZ4FrameInputStream``,
    zstd-jni's ``ZstdInputStream``) until it ends, and those read on after a frame's end (skippable frames hold no
    content). The bindings' one-shot calls stop at the first frame and drop what follows it, a second frame or junk
    alike. A frame cut short, or bytes after a frame that are no frame, raise as a body that is no frame at all."""
    out: list[bytes] = []
    rest = data
    try:
        while True:
            frame = reader()
            out.append(frame.decompress(rest))
            if not frame.eof:
                raise BodyCodecError(f"{codec} body does not inflate: the frame is cut short")
            rest = frame.unused_data
            if not rest:
                return b"".join(out)
    except errors as exc:
        raise BodyCodecError(f"{codec} body does not inflate: {exc}") from None


def _lz4(data: bytes, level: int) -> bytes:
    # Lz4Compressor ignores the level: an LZ4FrameOutputStream with its defaults.
    return bytes(lz4.frame.compress(data))


def _zstd(data: bytes, level: int) -> bytes:
    return bytes(zstandard.ZstdCompressor(level=level).compress(data))


def _zlib(data: bytes, level: int) -> bytes:
    return zlib.compress(data, level)


#: CompressionType's names, their sysflag bits (``getCompressionFlag``, the COMPRESSION_*_TYPE of
#: common/src/main/java/org/apache/rocketmq/common/sysflag/MessageSysFlag.java) and compressors.
_COMPRESSORS: dict[str, tuple[int, Callable[[bytes, int], bytes]]] = {
    "LZ4": (1 << 8, _lz4),
    "ZSTD": (2 << 8, _zstd),
    "ZLIB": (3 << 8, _zlib),
}


def compressor(name: str) -> tuple[int, Callable[[bytes, int], bytes]]:
    """The sysflag bits and the ``compress(body, level)`` of the compress type ``name`` (LZ4, ZSTD or ZLIB, any
    case, as ``CompressionType.of``). Raises ValueError "Unsupported compress type name: ..." for another."""
    found = _COMPRESSORS.get(name.strip().upper())
    if found is None:
        raise ValueError(f"Unsupported compress type name: {name}")
    return found


def default_compress_level() -> int:
    """A producer's compress level when told none: ``ROCKETMQ_MESSAGE_COMPRESS_LEVEL``, else 5, as
    client/src/main/java/org/apache/rocketmq/client/impl/producer/DefaultMQProducerImpl.java reads the system property
    ``rocketmq.message.compressLevel`` (the client's Java system properties are environment variables here, as
    ``rocketmq.client.localOffsetStoreDir`` is ``ROCKETMQ_CLIENT_LOCAL_OFFSET_STORE_DIR``). Raises ValueError for a
    value that is no integer, as Java's ``Integer.parseInt`` fails the producer."""
    return int(os.environ.get("ROCKETMQ_MESSAGE_COMPRESS_LEVEL", "5"))


def default_compress_type() -> str:
    """A producer's compress type when told none: ``ROCKETMQ_MESSAGE_COMPRESS_TYPE``, else ZLIB, as
    DefaultMQProducerImpl reads ``rocketmq.message.compressType`` (see :func:`default_compress_level`)."""
    return os.environ.get("ROCKETMQ_MESSAGE_COMPRESS_TYPE", "ZLIB")
