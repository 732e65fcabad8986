"""``SniffingFront``: RocketMQ 5's permissive TLS on one gRPC port
(proxy/src/main/java/org/apache/rocketmq/proxy/grpc/ProxyAndTlsProtocolNegotiator.java), in front of grpcio.

grpcio binds a port either plaintext or TLS, so in ``permissive`` mode :class:`proxy.server.GrpcServer` binds both
on 127.0.0.1 (free ports) and this front listens on ``grpcServerPort``: it reads each connection's first byte and,
as :func:`remoting.tls.sniff` decides for the mode, pipes the connection's raw bytes to grpcio's TLS port (grpcio's
C core does the handshake and the crypto) or to its plaintext port, or closes it. It runs on the gRPC thread's asyncio
loop (never on the broker's Trio thread), with asyncio protocols, each side pausing the other's reads while its
writes are buffered (flow control both ways), and half-closes passed through.

The peer: grpcio sees the front's loopback connection. Every such connection is bound to a port of its own on
127.0.0.1 before it connects, and :meth:`SniffingFront.real_peer` maps grpcio's view of it
(``ipv4:127.0.0.1:<that port>``) back to the client's address, so the ACL white list and the client registry see the
client (RocketMQ 5 reads the channel's remote address: ``proxy/.../grpc/interceptor/HeaderInterceptor.java``). A
client that goes away (a reset included) has its loopback connection half-closed and kept, with its address, until
grpcio closes it, so the calls grpcio starts meanwhile still see the client; it is closed at once when grpcio has
already ended its side, and otherwise after ``_LINGER`` seconds, or sooner as the oldest of more than
``max_lingering`` such connections (so peers that connect and reset at any rate cannot pin file descriptors). Any other
peer of grpcio's loopback ports (a call started on an ended connection, a local process bypassing the front) is
unknown, ``""``, which the ACL refuses: never 127.0.0.1, which a white list may trust.

Errors: a connection silent for ``sniff_timeout`` seconds, refused by the mode, or whose loopback connection cannot
be opened is closed (logged, rate-limited); nothing else is affected. Garbage after the first byte is grpcio's to
refuse, as for a direct connection.
"""

from __future__ import annotations

import asyncio
import logging
import socket
from typing import Final

from remoting.ratelog import RateLimitedLog
from remoting.tls import sniff

__all__ = ["SniffingFront"]

log = logging.getLogger(__name__)

_LOOPBACK: Final = "127.0.0.1"
_LOOPBACK_PEER: Final = f"ipv4:{_LOOPBACK}:"
#: How long a loopback connection whose client has gone waits for grpcio to close it (grpcio closes at once on the
#: half-close; this bounds a connection grpcio would keep).
_LINGER: Final = 30.0
#: Default bound on such lingering connections per front (each holds a file descriptor here and one in grpcio).
MAX_LINGERING: Final = 256


def _grpc_peer(address: tuple[object, ...]) -> str:
    host, port = str(address[0]), address[1]
    return f"ipv6:[{host}]:{port}" if ":" in host else f"ipv4:{host}:{port}"


class SniffingFront:
    """Serves one listening socket; ``plain_port`` / ``tls_port`` are grpcio's loopback ports, ``mode`` one of
    :mod:`remoting.tls`'s three names; at most ``max_lingering`` loopback connections outlive their client."""

    def __init__(
        self,
        mode: str,
        plain_port: int,
        tls_port: int,
        sniff_timeout: float = 120.0,
        max_lingering: int = MAX_LINGERING,
    ) -> None:
        self.mode = mode
        self.plain_port = plain_port
        self.tls_port = tls_port
        self.sniff_timeout = sniff_timeout
        self.max_lingering = max_lingering
        #: Loopback connections whose client has gone, oldest first, each with the timer that closes it.
        self._lingering: dict[asyncio.Transport, asyncio.TimerHandle] = {}
        #: Connections closed by the mode, by silence or for want of a loopback connection (tests and stats).
        self.refused = 0
        self._refusals = RateLimitedLog(log)
        #: The local port of each open loopback connection -> its client's peer, as grpcio writes peers.
        self.peers: dict[int, str] = {}

    def real_peer(self, peer: str) -> str:
        """The client behind ``peer`` (grpcio's ``context.peer()`` of a call on its loopback ports), or ``""`` when
        ``peer`` is no open loopback connection of this front (unknown: see the module docstring)."""
        port = peer[len(_LOOPBACK_PEER) :] if peer.startswith(_LOOPBACK_PEER) else ""
        return self.peers.get(int(port), "") if port.isdigit() else ""

    async def start(self, host: str, port: int) -> asyncio.Server:
        """Listen on ``host:port`` (0: a free port). Raises ``OSError`` if it cannot be bound."""
        loop = asyncio.get_running_loop()
        return await loop.create_server(lambda: _Inbound(self), host, port, reuse_address=True, backlog=1024)

    def refuse(self, peer: str, why: str) -> None:
        self.refused += 1
        self._refusals.warning("closing gRPC connection from %s: %s", peer, why)

    def linger(self, transport: asyncio.Transport) -> None:
        """Keep ``transport``, a loopback connection whose client has gone, until grpcio closes it: at most
        ``_LINGER`` seconds, and while it is among the ``max_lingering`` newest such connections. Past either it is
        aborted (what grpcio has not read yet is dropped: ``close`` would wait for grpcio to read it)."""
        self._lingering[transport] = asyncio.get_running_loop().call_later(_LINGER, transport.abort)
        while len(self._lingering) > self.max_lingering:
            oldest = next(iter(self._lingering))
            self.forget(oldest)
            oldest.abort()

    def forget(self, transport: asyncio.Transport) -> None:
        """``transport`` has closed: it no longer lingers."""
        timer = self._lingering.pop(transport, None)
        if timer is not None:
            timer.cancel()


class _Pipe(asyncio.Protocol):
    """One side of a piped connection: what it receives is written to ``other``; a full ``other`` pauses it."""

    transport: asyncio.Transport | None = None
    other: _Pipe | None = None
    #: This side's peer has ended its writes (a half-close, or before a close).
    ended = False

    def data_received(self, data: bytes) -> None:
        if self.other is not None and self.other.transport is not None:
            self.other.transport.write(data)

    def eof_received(self) -> bool:
        self.ended = True
        other = self.other
        if other is None or other.transport is None or other.ended or not other.transport.can_write_eof():
            return False  # both directions ended (asyncio would keep the half-closed pair open forever): close
        other.transport.write_eof()
        return True  # keep the other direction open until its own end

    def pause_writing(self) -> None:
        if self.other is not None and self.other.transport is not None:
            self.other.transport.pause_reading()

    def resume_writing(self) -> None:
        if self.other is not None and self.other.transport is not None:
            self.other.transport.resume_reading()

    def connection_lost(self, exc: Exception | None) -> None:
        other, self.other = self.other, None
        if other is not None and other.transport is not None:
            other.other = None
            other.peer_gone(other.transport)

    def peer_gone(self, transport: asyncio.Transport) -> None:
        """The other side's connection has ended: end this one."""
        transport.close()


class _Outbound(_Pipe):
    """The loopback connection to grpcio; its local port is in ``front.peers`` from when it is piped until it ends."""

    def __init__(self, front: SniffingFront) -> None:
        self.front = front

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        self.transport = transport
        transport.get_extra_info("socket").setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

    def peer_gone(self, transport: asyncio.Transport) -> None:
        """The client has gone: close when grpcio has already ended its side (nothing would close it then); otherwise
        half-close, so grpcio ends the connection once it has read what came before, and keep reading (its close
        ends this side) while the front lets it linger."""
        if self.ended or not transport.can_write_eof():
            transport.close()
            return
        transport.write_eof()
        transport.resume_reading()  # a client that could not keep up had paused it
        self.front.linger(transport)

    def connection_lost(self, exc: Exception | None) -> None:
        if self.transport is not None:
            self.front.forget(self.transport)
        sockname = self.transport.get_extra_info("sockname") if self.transport is not None else None
        if sockname is not None:
            self.front.peers.pop(sockname[1], None)  # a call grpcio starts from now on has no known client
        super().connection_lost(exc)


class _Inbound(_Pipe):
    """The client's connection: sniffed on its first bytes, then piped to grpcio."""

    def __init__(self, front: SniffingFront) -> None:
        self.front = front
        self.peer = ""
        self.pending = bytearray()  # received before the loopback connection is open
        self.closed = False
        self.timer: asyncio.TimerHandle | None = None
        self.connecting: asyncio.Task[None] | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        self.transport = transport
        self.peer = _grpc_peer(transport.get_extra_info("peername") or ("", 0))
        self.timer = asyncio.get_running_loop().call_later(self.front.sniff_timeout, self._silent)

    def _silent(self) -> None:
        self.front.refuse(self.peer, "nothing received before the sniff timeout")
        if self.transport is not None:
            self.transport.close()

    def data_received(self, data: bytes) -> None:
        if self.other is not None:
            super().data_received(data)
            return
        if self.connecting is not None:
            self.pending += data
            return
        if self.timer is not None:
            self.timer.cancel()
        over_tls, refusal = sniff(data[0], self.front.mode)
        assert self.transport is not None
        if refusal is not None:
            self.front.refuse(self.peer, refusal)
            self.transport.close()
            return
        self.pending += data
        self.transport.pause_reading()
        port = self.front.tls_port if over_tls else self.front.plain_port
        self.connecting = asyncio.get_running_loop().create_task(self._connect(port))

    async def _connect(self, port: int) -> None:
        loop = asyncio.get_running_loop()
        try:
            _, outbound = await loop.create_connection(
                lambda: _Outbound(self.front), _LOOPBACK, port, local_addr=(_LOOPBACK, 0)
            )
        except OSError as exc:
            self.front.refuse(self.peer, f"cannot reach grpcio's port {port}: {exc!r}")
            if self.transport is not None:
                self.transport.close()
            return
        assert outbound.transport is not None
        if self.closed:
            outbound.transport.close()
            return
        self.front.peers[outbound.transport.get_extra_info("sockname")[1]] = self.peer
        self.other, outbound.other = outbound, self
        outbound.transport.write(bytes(self.pending))
        self.pending.clear()
        assert self.transport is not None
        self.transport.resume_reading()

    def eof_received(self) -> bool:
        if self.other is None:  # ended before the loopback connection was open: nothing to pass on
            return False
        return super().eof_received()

    def connection_lost(self, exc: Exception | None) -> None:
        self.closed = True
        if self.timer is not None:
            self.timer.cancel()
        super().connection_lost(exc)
