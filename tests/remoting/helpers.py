"""Test doubles that are not our components: raw peers speaking frames over plain Trio sockets, and processors."""

from __future__ import annotations

import os
import re
import socket
import subprocess
from pathlib import Path

import trio
import trio.testing

from remoting.codec.codes import RequestCode, ResponseCode
from remoting.codec.command import RemotingCommand, request
from remoting.codec.frame import FrameDecoder, encode_command
from remoting.connection import SEND_HIGH_WATER, Connection
from remoting.dispatch import Dispatcher, ProcessorPool, RequestContext
from remoting.server import RemotingServer
from remoting.tls import self_signed_pem


class EchoProcessor:
    """Answers SUCCESS with the request's body and ext fields; counts what it saw."""

    def __init__(self) -> None:
        self.seen: list[RemotingCommand] = []

    async def process(self, ctx: RequestContext, request: RemotingCommand) -> RemotingCommand | None:
        self.seen.append(request)
        return request.response(ResponseCode.SUCCESS, ext_fields=dict(request.ext_fields), body=request.body)


class GateProcessor:
    """Holds every request until ``gate`` is set, then echoes it: a stand-in for a slow or held request."""

    def __init__(self) -> None:
        self.gate = trio.Event()
        self.entered = 0

    async def process(self, ctx: RequestContext, request: RemotingCommand) -> RemotingCommand | None:
        self.entered += 1
        await self.gate.wait()
        return request.response(ResponseCode.SUCCESS, body=request.body)


class FailingProcessor:
    async def process(self, ctx: RequestContext, request: RemotingCommand) -> RemotingCommand | None:
        raise LookupError("no such thing")


class RawPeer:
    """A bare frame-level peer on a Trio socket, so server tests do not depend on our client."""

    def __init__(self, stream: trio.SocketStream) -> None:
        self.stream = stream
        self.decoder = FrameDecoder()

    @classmethod
    async def connect(cls, address: tuple[str, int]) -> RawPeer:
        return cls(await trio.open_tcp_stream(*address))

    async def send(self, *cmds: RemotingCommand) -> None:
        await self.stream.send_all(b"".join(encode_command(c) for c in cmds))

    async def receive(self) -> RemotingCommand | None:
        """The next command, or None at end of stream."""
        while (cmd := self.decoder.next_command()) is None:
            data = await self.stream.receive_some(65536)
            if not data:
                return None
            self.decoder.receive_data(data)
        return cmd

    async def aclose(self) -> None:
        await self.stream.aclose()


async def held_worker(
    nursery: trio.Nursery, code: int, pool: ProcessorPool
) -> tuple[RawPeer, GateProcessor, RemotingCommand]:
    """Serve ``code`` from ``pool`` through a :class:`GateProcessor` and send one such request from a
    :class:`RawPeer`; returns the peer, the gate and that request once it holds a worker (until ``gate.gate`` is
    set)."""
    dispatcher = Dispatcher()
    gate = GateProcessor()
    dispatcher.register(code, gate, pool)
    address = await nursery.start(RemotingServer(dispatcher).serve)
    peer = await RawPeer.connect(address)
    first = request(code)
    await peer.send(first)
    while gate.entered == 0:
        await trio.sleep(0)
    return peer, gate, first


class CountingSocket(socket.socket):
    """A real socket that counts the ``send`` calls a connection makes on it (its ``raw_socket``)."""

    sends = 0

    @classmethod
    def twin_of(cls, sock: socket.socket) -> CountingSocket:
        """A second descriptor for ``sock``'s connection, as the server's raw socket is."""
        return cls(sock.family, sock.type, fileno=os.dup(sock.fileno()))

    def send(self, data: object, flags: int = 0) -> int:  # type: ignore[override]
        self.sends += 1
        return super().send(data, flags)  # type: ignore[arg-type]


def tcp_pair() -> tuple[socket.socket, socket.socket]:
    """Two connected TCP sockets on 127.0.0.1 (port 0); the first non-blocking."""
    with socket.create_server(("127.0.0.1", 0)) as listener:
        a = socket.create_connection(listener.getsockname())
        b, _ = listener.accept()
    a.setblocking(False)
    return a, b


async def ignore_requests(ctx: object, cmd: object) -> None:
    """A connection's request handler that does nothing (the test reads what the connection writes)."""
    return None


def served_connection(
    nursery: trio.Nursery, port: int, *, small_buffers: bool = False
) -> tuple[Connection, trio.SocketStream]:
    """A broker-side connection from 127.0.0.1:``port`` over a real socket pair, run in ``nursery`` (requests
    ignored), and the client's end of it, which the caller keeps open."""
    a, b = tcp_pair()
    if small_buffers:
        a.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 4096)
        b.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    conn = Connection(trio.SocketStream(trio.socket.from_stdlib_socket(a)), ("127.0.0.1", port), ("127.0.0.1", 10911))
    nursery.start_soon(conn.run, ignore_requests)
    return conn, trio.SocketStream(trio.socket.from_stdlib_socket(b))


async def congest(conn: Connection) -> None:
    """Leave ``conn`` congested for good, as a peer that stopped reading does (its process hangs, or its host
    vanished): its writer blocked on a first backlog the peer never reads (``small_buffers``), and more than
    SEND_HIGH_WATER bytes queued behind it."""
    filler = request(RequestCode.NOTIFY_CONSUMER_IDS_CHANGED, {}, b"x" * (SEND_HIGH_WATER + 1), oneway=True)
    conn.send_nowait(filler)
    await trio.testing.wait_all_tasks_blocked()  # the writer took it and is stuck in send_all
    conn.send_nowait(filler)
    assert conn.congested


def listen_backlog(port: int) -> int:
    """The accept-queue size the kernel holds for the listener on ``port`` (``ss``'s Send-Q of a listening socket)."""
    out = subprocess.run(["ss", "-ltnH", f"sport = :{port}"], capture_output=True, text=True, check=True).stdout
    (line,) = out.splitlines()
    return int(line.split()[2])


def accepted_buffer_sizes(port: int) -> tuple[int, int]:
    """The kernel's receive and send buffer sizes (``ss``'s skmem ``rb``/``tb``) of the one accepted connection of
    the listener on ``port``."""
    out = subprocess.run(
        ["ss", "-tmnH", "state", "established", f"sport = :{port}"], capture_output=True, text=True, check=True
    ).stdout
    (skmem,) = re.findall(r"skmem:\(([^)]*)\)", out)
    fields = dict(re.match(r"([a-z]+)(\d+)", part).groups() for part in skmem.split(","))  # type: ignore[union-attr]
    return int(fields["rb"]), int(fields["tb"])


def write_self_signed(folder: Path) -> tuple[Path, Path]:
    """A self-signed certificate and its key written to ``folder`` (``cert.pem``, ``key.pem``): files a server with
    test mode off must name to start, as in RocketMQ."""
    cert_pem, key_pem = self_signed_pem()
    cert, key = folder / "cert.pem", folder / "key.pem"
    cert.write_bytes(cert_pem)
    key.write_bytes(key_pem)
    return cert, key
