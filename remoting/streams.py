"""The byte-stream shape a :class:`~remoting.connection.Connection` runs over, and the errors that end one.

Any object with Trio's ``send_all`` / ``receive_some`` / ``aclose`` works (all Trio streams do);
:class:`AnyioByteStream` adapts an anyio stream (the client's, under Trio or asyncio); :class:`RawSocketIO` reads and
writes a connection's duplicate socket directly under Trio. The adapter owns the stream it
wraps and closes it in ``aclose``; it raises what the underlying stream raises (see :data:`STREAM_ERRORS`).
"""

from __future__ import annotations

import socket
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
        try:
            await self._stream.send(bytes(data) if not isinstance(data, bytes) else data)
        except anyio.EndOfStream:  # a TLS peer that closed (e.g. refused our certificate after the handshake)
            raise anyio.BrokenResourceError("the peer closed the connection") from None

    async def receive_some(self, max_bytes: int | None = None) -> bytes:
        try:
            return await self._stream.receive(max_bytes or RECEIVE_SIZE)
        except anyio.EndOfStream:
            return b""

    async def aclose(self) -> None:
        await self._stream.aclose()


class RawSocketIO:
    """``receive_some`` / ``send_all`` straight on a non-blocking socket under Trio: what Trio's ``SocketStream``
    does, minus its layers and anyio's (wrapper calls and exception translation cost about as much as the system
    call itself: 10 % of the async producer's CPU on writes). Same checkpoint rules: a call that needs no wait still
    yields once, so a busy connection cannot starve the others. Socket errors propagate as ``OSError``. Does not own
    the socket (``aclose`` does nothing); one reader and one writer at a time."""

    __slots__ = ("_sock",)

    def __init__(self, sock: socket.socket) -> None:
        self._sock = sock

    async def receive_some(self, max_bytes: int | None = None) -> bytes:
        sock = self._sock
        while True:
            try:
                data = sock.recv(max_bytes or RECEIVE_SIZE)
            except BlockingIOError:
                await trio.lowlevel.wait_readable(sock)
                continue
            await trio.lowlevel.checkpoint()
            return data

    async def send_all(self, data: bytes | bytearray | memoryview) -> None:
        sock = self._sock
        view = memoryview(data)
        sent, total = 0, len(view)
        while sent < total:
            try:
                sent += sock.send(view[sent:])
            except BlockingIOError:
                await trio.lowlevel.wait_writable(sock)
        await trio.lowlevel.checkpoint()

    async def aclose(self) -> None:
        return None
