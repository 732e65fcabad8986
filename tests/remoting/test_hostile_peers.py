"""Hostile peers of the transport and the name server: a CBOR header field no Java peer sends (a decimal with a huge
exponent, whose int() held the Trio thread for seconds, then minutes), a compressed REGISTER_BROKER body that would
inflate a thousandfold, and a client that never reads its answers (every pool worker used to wait for it, starving
the other clients)."""

from __future__ import annotations

import tracemalloc
import zlib
from collections.abc import AsyncIterator
from pathlib import Path

import cbor2
import pytest
import trio
import trio.testing

from namesrv.config import NamesrvConfig
from namesrv.server import NamesrvServer
from remoting.client import RemotingClient
from remoting.codec.codes import LanguageCode, RequestCode, ResponseCode
from remoting.codec.command import request
from remoting.codec.errors import HeaderDecodeError
from remoting.codec.serializers import decode_header
from remoting.dispatch import Dispatcher, ProcessorPool
from remoting.server import RemotingServer, ServerConfig
from tests.remoting.helpers import EchoProcessor, RawPeer


@pytest.fixture
async def nursery() -> AsyncIterator[trio.Nursery]:
    async with trio.open_nursery() as n:
        yield n
        n.cancel_scope.cancel()


async def _serve(nursery: trio.Nursery, processor: object, workers: int = 64) -> tuple[str, int]:
    dispatcher = Dispatcher()
    dispatcher.register(1000, processor, ProcessorPool("work", workers, 10_000))  # type: ignore[arg-type]
    server = RemotingServer(dispatcher, ServerConfig())
    address: tuple[str, int] = await nursery.start(server.serve, "127.0.0.1", 0)
    return address


@pytest.mark.parametrize("field", ["code", "opaque", "flag", "version"])
def test_a_cbor_decimal_in_an_int_field_is_refused_before_any_arithmetic(field: str) -> None:
    """CBOR tag 4 decodes to a Decimal; int() of ``1E+1000000`` takes about 28 s on the Trio thread (quadratic in the
    exponent), freezing every connection. Such a field is refused by its type now, whatever its size (the small one
    here used to be converted, then refused as outside int32)."""
    fields = {"code": 1000, "flag": 0, "opaque": 1, "version": 0} | {field: cbor2.CBORTag(4, [300, 1])}
    with pytest.raises(HeaderDecodeError, match=r"not an integer \(Decimal\)"):
        decode_header(0xCB, cbor2.dumps(fields), b"")


async def test_compressed_register_body_is_decompressed_without_bound(tmp_path: Path, nursery: trio.Nursery) -> None:
    """REGISTER_BROKER with compressed=true inflated the whole stream (~1000:1): one 16 MiB frame could ask the name
    server for ~16 GiB. It stops at 16 MiB now, and the body is refused."""
    server = NamesrvServer(
        NamesrvConfig(listen_port=0, listen_host="127.0.0.1", kv_config_path=str(tmp_path / "kv.json"))
    )
    host, port = await nursery.start(server.serve)
    body = zlib.compress(b"\0" * (64 << 20), 9)
    fields = {
        "brokerAddr": "127.0.0.1:10911",
        "brokerId": "0",
        "brokerName": "broker-a",
        "clusterName": "DefaultCluster",
        "compressed": "true",
        "haServerAddr": "127.0.0.1:10912",
        "bodyCrc32": "0",
    }
    tracemalloc.start()
    try:
        async with RemotingClient() as client:
            answer = await client.invoke(
                f"{host}:{port}", request(RequestCode.REGISTER_BROKER, fields, body, language=LanguageCode.JAVA), 30
            )
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert answer.code == ResponseCode.SYSTEM_ERROR
    assert peak < 40 << 20, f"{len(body)} bytes of request made the name server allocate {peak >> 20} MiB"


async def test_a_client_that_does_not_read_parks_every_pool_worker(nursery: trio.Nursery) -> None:
    """A worker used to wait for a peer that does not read to drain its answers (past 4 MiB queued): every worker of
    the pool ended up waiting on that one connection, and the other clients' requests were never processed (Netty
    never blocks a business thread on a write). The answers now count in that connection's budget only."""
    echo = EchoProcessor()
    address = await _serve(nursery, echo, workers=4)
    peer = await RawPeer.connect(address)  # never reads
    body = b"z" * (1 << 20)
    nursery.start_soon(peer.send, *(request(1000, {}, body, opaque=i + 1) for i in range(48)))
    await trio.sleep(1.0)
    async with RemotingClient() as other:
        answer = await other.invoke(f"{address[0]}:{address[1]}", request(1000, {}, b"hi"), 3)
    assert bytes(answer.body) == b"hi"
