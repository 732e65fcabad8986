"""The byte-stream shape a :class:`~remoting.connection.Connection` runs over, and the errors that end one.

Any object with Trio's ``send_all`` / ``receive_some`` / ``aclose`` works (all Trio streams do);
:class:`AnyioByteStream` adapts an anyio stream (the client's, under Trio or asyncio). The adapter owns the stream it
wraps and closes it in ``aclose``; it raises what the underlying stream raises (see :data:`STREAM_ERRORS`).
"""

from __future__ import annotations

from typing import Final, Protocol

import anyio
import anyio.abc
import trio

#: Bytes asked of the socket per read: large enough to take many pipelined send requests in one go.
RECEIVE_SIZE: Final = 256 * 1024
#: Errors that mean "the peer or the socket is gone" under either backend.
STREAM_ERRORS: Final = (
    OSError,
    anyio.BrokenResourceError,
    anyio.ClosedResourceError,
    trio.BrokenResourceError,
    trio.ClosedResourceError,
)


class ByteStream(Protocol):
    """The stream shape a connection needs: Trio's ``Stream`` (``receive_some`` returns ``b""`` at EOF)."""

    async def send_all(self, data: bytes | bytearray | memoryview) -> None: ...

    async def receive_some(self, max_bytes: int | None = None) -> bytes | bytearray: ...

    async def aclose(self) -> None: ...


class AnyioByteStream:
    """Adapts an anyio byte stream (``send`` / ``receive`` raising ``EndOfStream``) to :class:`ByteStream`."""

    __slots__ = ("_stream",)

    def __init__(self, stream: anyio.abc.ByteStream) -> None:
        self._stream = stream

    async def send_all(self, data: bytes | bytearray | memoryview) -> None:
        await self._stream.send(bytes(data) if not isinstance(data, bytes) else data)

    async def receive_some(self, max_bytes: int | None = None) -> bytes:
        try:
            return await self._stream.receive(max_bytes or RECEIVE_SIZE)
        except anyio.EndOfStream:
            return b""

    async def aclose(self) -> None:
        await self._stream.aclose()
