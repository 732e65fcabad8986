"""Framing (docs/protocol.md#11-frame-layout): ``int32 length | int32 headerWord | header | body``.

:class:`FrameDecoder` is sans-IO in the h11 style: feed it whatever chunks the socket produced with
:meth:`~FrameDecoder.receive_data`, then drain complete commands with :meth:`~FrameDecoder.next_command` (``None``
means "need more data"). Chunk boundaries never change the result. A bad length prefix, an oversized frame or a header
that does not fit raises a :class:`~remoting.codec.errors.CodecError`; after that the decoder is poisoned and the
connection should be closed, because the stream can no longer be re-synchronised.
"""

from __future__ import annotations

import struct
from typing import Final

import orjson

from remoting.codec.codes import CURRENT_VERSION
from remoting.codec.command import RemotingCommand
from remoting.codec.errors import CodecError, FrameLengthError, HeaderLengthError
from remoting.codec.serializers import decode_header, encode_header

#: Java's default ``com.rocketmq.remoting.frameMaxLength``: prefix plus payload.
MAX_FRAME: Final = 16 * 1024 * 1024

_I32: Final = struct.Struct(">i")
_U32: Final = struct.Struct(">I")
_HEAD: Final = struct.Struct(">ii")


def encode_command(cmd: RemotingCommand) -> bytes:
    """The whole frame for ``cmd``, ready for one ``send_all``."""
    header = encode_header(cmd)
    body = cmd.body
    length = 4 + len(header) + len(body)
    prefix = length.to_bytes(4, "big") + ((cmd.serialize_type << 24) | len(header)).to_bytes(4, "big")
    if body:
        return b"".join((prefix, header, body))
    return prefix + header


#: a request header without ``extFields`` (code and opaque left as ``%d``)
_BARE_REQUEST: Final = (
    b'{"code":%d,"flag":0,"language":"PYTHON","opaque":%d,"serializeTypeCurrentRPC":"JSON","version":'
    + str(CURRENT_VERSION).encode()
    + b"}"
)


def encode_json_request(code: int, opaque: int, ext_fields: dict[str, str], body: bytes) -> bytes:
    """``encode_command(request(code, ext_fields, body, opaque=opaque))`` for a JSON request, written straight from
    its parts (no command object): the client's send path. Empty ``ext_fields`` are left out, as encode_json does."""
    if ext_fields:
        header = orjson.dumps(
            {
                "code": code,
                "extFields": ext_fields,
                "flag": 0,
                "language": "PYTHON",
                "opaque": opaque,
                "serializeTypeCurrentRPC": "JSON",
                "version": CURRENT_VERSION,
            }
        )
    else:
        header = _BARE_REQUEST % (code, opaque)
    size = len(header)
    return b"".join((_HEAD.pack(4 + size + len(body), size), header, body))


#: :func:`encode_json_request`'s header around its code, extFields object and opaque.
_JSON_REQUEST: Final = (
    b'{"code":%d,"extFields":%b,"flag":0,"language":"PYTHON","opaque":%d,"serializeTypeCurrentRPC":"JSON","version":'
    + str(CURRENT_VERSION).encode()
    + b"}"
)


def encode_json_request_ext(code: int, opaque: int, ext: bytes, body: bytes) -> bytes:
    """:func:`encode_json_request` with the extFields object already encoded (``orjson.dumps(ext_fields)``): the
    producer keeps its send's fields encoded (:class:`client.send_request.PreparedSend`)."""
    header = _JSON_REQUEST % (code, ext, opaque)
    size = len(header)
    return b"".join((_HEAD.pack(4 + size + len(body), size), header, body))


def decode_payload(payload: bytes | memoryview) -> RemotingCommand:
    """Decode one frame without its 4-byte length prefix (``headerWord | header | body``)."""
    if len(payload) < 4:
        raise FrameLengthError(f"frame payload of {len(payload)} bytes has no header word")
    word = int.from_bytes(payload[:4], "big")
    header_len = word & 0xFFFFFF
    if header_len > len(payload) - 4:
        raise HeaderLengthError(f"header length {header_len} exceeds the frame ({len(payload) - 4} bytes left)")
    end = 4 + header_len
    body = bytes(payload[end:])
    return decode_header(word >> 24, payload[4:end], body)


class FrameDecoder:
    """Reassembles frames from a byte stream. Owns its buffer; not thread-safe (one per connection)."""

    __slots__ = ("_buf", "_error", "_max_frame", "_pos")

    def __init__(self, max_frame: int = MAX_FRAME) -> None:
        self._buf = bytearray()
        self._pos = 0
        self._max_frame = max_frame
        self._error: CodecError | None = None

    @property
    def buffered(self) -> int:
        """Bytes received but not yet returned as a command."""
        return len(self._buf) - self._pos

    def receive_data(self, data: bytes | bytearray | memoryview) -> None:
        if self._error is not None:
            return  # poisoned: the caller is about to close the connection
        if self._pos and self._pos == len(self._buf):
            self._buf.clear()
            self._pos = 0
        self._buf += data

    def next_frame(self) -> tuple[int, bytes, bytes] | None:
        """The next complete frame as ``(serialize type, header bytes, body)``, undecoded, or ``None`` when more bytes
        are needed: for a reader with a fast path of its own (:attr:`remoting.connection.Connection.fast_request`).
        The same length errors as :meth:`next_command`; the header is not checked (decode it with
        :func:`~remoting.codec.serializers.decode_header`, which raises what :meth:`next_command` would)."""
        if self._error is not None:
            raise self._error
        buf, pos = self._buf, self._pos
        if len(buf) - pos < 4:
            return None
        (length,) = _I32.unpack_from(buf, pos)
        if length < 4 or length + 4 > self._max_frame:
            self._error = FrameLengthError(f"frame length {length} outside [4, {self._max_frame - 4}]")
            raise self._error
        end = pos + 4 + length
        if len(buf) < end:
            return None
        (word,) = _U32.unpack_from(buf, pos + 4)
        header_end = pos + 8 + (word & 0xFFFFFF)
        if header_end > end:
            self._error = HeaderLengthError(
                f"header length {word & 0xFFFFFF} exceeds the frame ({length - 4} bytes left)"
            )
            raise self._error
        with memoryview(buf) as view:
            header = view[pos + 8 : header_end].tobytes()
            body = view[header_end:end].tobytes()
        self._advance(end)
        return word >> 24, header, body

    def poison(self, error: CodecError) -> None:
        """A header taken by :meth:`next_frame` did not decode: every later call raises ``error``."""
        self._error = error

    def next_command(self) -> RemotingCommand | None:
        """The next complete command, or ``None`` when more bytes are needed.

        Raises ``CodecError`` on a malformed frame, and keeps raising it on every later call.
        """
        frame = self.next_frame()
        if frame is None:
            return None
        try:
            return decode_header(*frame)
        except CodecError as exc:
            self._error = exc
            raise

    def _advance(self, end: int) -> None:
        if end == len(self._buf):
            self._buf.clear()
            self._pos = 0
        elif end > 65536 and end * 2 > len(self._buf):
            del self._buf[:end]
            self._pos = 0
        else:
            self._pos = end
