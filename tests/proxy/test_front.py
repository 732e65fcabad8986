"""``proxy.front.SniffingFront`` over real sockets: the first byte picks grpcio's TLS or plaintext port as the mode
says, the bytes are piped both ways with half-closes, refused connections close alone, and ``real_peer`` maps the
loopback connection back to the client's address. Two asyncio echo servers stand in for grpcio's ports."""

from __future__ import annotations

import asyncio
import socket

import pytest

from proxy.front import _PEERS, SniffingFront, real_peer
from remoting.tls import DISABLED, ENFORCING, PERMISSIVE

pytestmark = pytest.mark.timeout(30)


class Backend:
    """An echo server that tags what it echoes with its name and records each connection's grpcio-style peer."""

    def __init__(self, name: bytes) -> None:
        self.name = name
        self.peers: list[str] = []

    async def handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        host, port = writer.get_extra_info("peername")[:2]
        self.peers.append(f"ipv4:{host}:{port}")
        data = await reader.read()  # up to the client's half-close
        writer.write(self.name + b":" + data)
        await writer.drain()
        writer.close()


async def _exchange(port: int, payload: bytes) -> tuple[bytes, str]:
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    host, local = writer.get_extra_info("sockname")[:2]
    writer.write(payload)
    writer.write_eof()
    answer = await reader.read()
    writer.close()
    return answer, f"ipv4:{host}:{local}"


def _run(mode: str, payloads: list[bytes]) -> tuple[list[tuple[bytes, str]], Backend, Backend, SniffingFront]:
    async def main() -> tuple[list[tuple[bytes, str]], Backend, Backend, SniffingFront]:
        plain, tls = Backend(b"plain"), Backend(b"tls")
        plain_server = await asyncio.start_server(plain.handle, "127.0.0.1", 0)
        tls_server = await asyncio.start_server(tls.handle, "127.0.0.1", 0)
        front = SniffingFront(mode, plain_server.sockets[0].getsockname()[1], tls_server.sockets[0].getsockname()[1])
        server = await front.start("127.0.0.1", 0)
        port = server.sockets[0].getsockname()[1]
        answers = await asyncio.gather(*(_exchange(port, p) for p in payloads))
        for s in (server, plain_server, tls_server):
            s.close()
        return answers, plain, tls, front

    return asyncio.run(main())


def test_permissive_routes_by_first_byte_and_carries_the_peer() -> None:
    big = b"\x00" + bytes(range(256)) * 4096  # 1 MiB: flow control both ways
    answers, plain, tls, front = _run(PERMISSIVE, [b"\x16\x03\x01hello", b"PRI * HTTP/2.0", big])
    assert [a for a, _ in answers] == [b"tls:\x16\x03\x01hello", b"plain:PRI * HTTP/2.0", b"plain:" + big]
    assert len(tls.peers) == 1 and len(plain.peers) == 2 and front.refused == 0


def test_real_peer_while_connected() -> None:
    async def main() -> tuple[str, str]:
        seen: asyncio.Queue[str] = asyncio.Queue()

        async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            host, port = writer.get_extra_info("peername")[:2]
            await reader.readexactly(1)  # grpcio sees a call only after bytes came, when the front has mapped it
            seen.put_nowait(real_peer(f"ipv4:{host}:{port}"))
            await reader.read()
            writer.close()

        backend = await asyncio.start_server(handle, "127.0.0.1", 0)
        bport = backend.sockets[0].getsockname()[1]
        server = await SniffingFront(PERMISSIVE, bport, bport).start("127.0.0.1", 0)
        _reader, writer = await asyncio.open_connection("127.0.0.1", server.sockets[0].getsockname()[1])
        writer.write(b"x")
        mapped = await seen.get()
        host, local = writer.get_extra_info("sockname")[:2]
        client = f"ipv4:{host}:{local}"
        assert client in _PEERS.values()
        writer.close()
        while client in _PEERS.values():  # the mapping goes with the connection (bounded by the test's timeout)
            await asyncio.sleep(0.001)
        server.close()
        backend.close()
        return mapped, client

    mapped, client = asyncio.run(main())
    assert mapped == client


def test_a_silent_connection_is_closed_after_the_sniff_timeout() -> None:
    async def main() -> tuple[bytes, int, bytes]:
        plain = Backend(b"plain")
        backend = await asyncio.start_server(plain.handle, "127.0.0.1", 0)
        bport = backend.sockets[0].getsockname()[1]
        front = SniffingFront(PERMISSIVE, bport, bport, sniff_timeout=0.05)
        server = await front.start("127.0.0.1", 0)
        port = server.sockets[0].getsockname()[1]
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        silent = await reader.read()  # the front closes it: end of stream
        writer.close()
        answer, _ = await _exchange(port, b"still served")
        server.close()
        backend.close()
        return silent, front.refused, answer

    assert asyncio.run(main()) == (b"", 1, b"plain:still served")


@pytest.mark.parametrize(("mode", "served"), [(ENFORCING, b"\x16"), (DISABLED, b"P")])
def test_modes_refuse_the_other_kind(mode: str, served: bytes) -> None:
    answers, _plain, _tls, front = _run(mode, [b"\x16\x03\x01x", b"PRI * HTTP/2.0"])
    by_first = {payload[:1]: answer for payload, (answer, _) in zip([b"\x16", b"P"], answers, strict=True)}
    assert by_first[served].startswith(b"tls:" if served == b"\x16" else b"plain:")
    refused = b"P" if served == b"\x16" else b"\x16"
    assert by_first[refused] == b""  # closed without an answer
    assert front.refused == 1


def test_a_client_gone_before_a_byte_affects_nothing() -> None:
    async def main() -> bytes:
        plain = Backend(b"plain")
        backend = await asyncio.start_server(plain.handle, "127.0.0.1", 0)
        bport = backend.sockets[0].getsockname()[1]
        server = await SniffingFront(PERMISSIVE, bport, bport).start("127.0.0.1", 0)
        port = server.sockets[0].getsockname()[1]
        for _ in range(20):
            with socket.create_connection(("127.0.0.1", port)):
                pass
        answer, _ = await _exchange(port, b"after")
        server.close()
        backend.close()
        return answer

    assert asyncio.run(main()) == b"plain:after"
