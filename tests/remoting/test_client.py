"""The anyio client against our Trio server over loopback: invocations, pushes, timeouts, reconnects, asyncio."""

from __future__ import annotations

import queue
import socket
import struct
import threading
from collections.abc import AsyncIterator

import anyio
import pytest
import trio
import trio.testing

from remoting.client import RemotingClient, parse_address
from remoting.codec.codes import RequestCode, ResponseCode, SerializeType
from remoting.codec.command import RemotingCommand, request
from remoting.connection import Connection
from remoting.dispatch import Dispatcher, ProcessorPool, RequestContext
from remoting.errors import RemotingConnectError, RemotingError, RemotingTimeoutError
from remoting.server import RemotingServer
from tests.remoting.helpers import EchoProcessor, GateProcessor

ECHO, SLOW, REMEMBER = 1001, 1002, 1003


class RememberConnection:
    """Server-side processor that keeps the caller's connection, for server-initiated requests."""

    def __init__(self) -> None:
        self.connections: list[Connection] = []

    async def process(self, ctx: RequestContext, request: RemotingCommand) -> RemotingCommand | None:
        self.connections.append(ctx.connection)
        return request.response(ResponseCode.SUCCESS)


class NotifyHandler:
    """Client-side handler for requests the server pushes."""

    def __init__(self) -> None:
        self.seen: list[RemotingCommand] = []

    async def process(self, ctx: RequestContext, request: RemotingCommand) -> RemotingCommand | None:
        self.seen.append(request)
        return request.response(ResponseCode.SUCCESS, ext_fields={"handled": request.ext_fields.get("group", "")})


def make_dispatcher() -> tuple[Dispatcher, GateProcessor, RememberConnection]:
    dispatcher = Dispatcher()
    gate, remember = GateProcessor(), RememberConnection()
    dispatcher.register(ECHO, EchoProcessor(), ProcessorPool("send", 2, 10_000))
    dispatcher.register(SLOW, gate, ProcessorPool("pull", 16, 10_000))
    dispatcher.register(REMEMBER, remember, ProcessorPool("admin", 1, 100))
    return dispatcher, gate, remember


@pytest.fixture
async def server() -> AsyncIterator[tuple[str, GateProcessor, RememberConnection]]:
    dispatcher, gate, remember = make_dispatcher()
    async with trio.open_nursery() as nursery:
        host, port = await nursery.start(RemotingServer(dispatcher).serve)
        yield f"{host}:{port}", gate, remember
        nursery.cancel_scope.cancel()


def test_addresses_parse_with_ipv4_ipv6_and_reject_garbage():
    assert parse_address("127.0.0.1:9876") == ("127.0.0.1", 9876)
    assert parse_address("[::1]:10911") == ("::1", 10911)
    with pytest.raises(RemotingConnectError):
        parse_address("nohost")


def test_an_address_with_a_port_past_65535_is_malformed():
    """Found by a review: such a port used to reach the socket call and fail there with an OverflowError."""
    assert parse_address("127.0.0.1:65535") == ("127.0.0.1", 65535)
    for bad in ("127.0.0.1:65536", "127.0.0.1:99999", "127.0.0.1:²"):
        with pytest.raises(RemotingConnectError):
            parse_address(bad)


async def test_concurrent_invocations_share_one_connection_and_match_by_opaque(server):
    addr, _, _ = server
    async with RemotingClient() as client:
        results: dict[int, bytes] = {}

        async def one(i: int) -> None:
            resp = await client.invoke(addr, request(ECHO, body=str(i).encode()), timeout=10)
            results[i] = bytes(resp.body)

        async with trio.open_nursery() as nursery:
            for i in range(200):
                nursery.start_soon(one, i)
        assert results == {i: str(i).encode() for i in range(200)}
        assert len(client.connections) == 1


async def test_serialize_type_is_chosen_per_client_and_mirrored(server):
    addr, _, _ = server
    async with RemotingClient(serialize_type=SerializeType.CBOR) as client:
        resp = await client.invoke(addr, request(ECHO, {"k": "v"}), timeout=10)
    assert resp.serialize_type == SerializeType.CBOR and resp.ext_fields == {"k": "v"}


async def test_invoke_times_out_and_the_connection_survives(server, autojump_clock):
    addr, _, _ = server
    async with RemotingClient() as client:
        start = trio.current_time()
        with pytest.raises(RemotingTimeoutError):
            await client.invoke(addr, request(SLOW), timeout=3.0)
        assert trio.current_time() - start == pytest.approx(3.0)
        assert (await client.invoke(addr, request(ECHO, body=b"ok"), timeout=3.0)).body == b"ok"


async def test_connect_refused_raises_remoting_connect_error():
    listener = trio.socket.socket()
    await listener.bind(("127.0.0.1", 0))
    port = listener.getsockname()[1]
    listener.close()  # bound then closed: nothing listens there
    async with RemotingClient() as client:
        with pytest.raises(RemotingConnectError):
            await client.invoke(f"127.0.0.1:{port}", request(ECHO), timeout=3.0)


async def test_a_peer_resetting_right_after_the_handshake_raises_remoting_connect_error(monkeypatch):
    """The reset lands between the handshake and the client reading the peer's address (seen under load)."""
    listener = trio.socket.socket()
    await listener.bind(("127.0.0.1", 0))
    listener.listen()
    port = listener.getsockname()[1]
    real_connect = anyio.connect_tcp

    async def connect_then_reset(*args, **kwargs):
        tcp = await real_connect(*args, **kwargs)
        accepted, _ = await listener.accept()
        accepted.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        accepted.close()  # linger 0: an RST
        raw = tcp.extra(anyio.abc.SocketAttribute.raw_socket)
        with trio.fail_after(5):
            while _connected(raw):
                await trio.sleep(0.01)
        return tcp

    monkeypatch.setattr(anyio, "connect_tcp", connect_then_reset)
    with listener:
        async with RemotingClient() as client:
            with pytest.raises(RemotingConnectError):
                await client.invoke(f"127.0.0.1:{port}", request(ECHO), timeout=3.0)


def _connected(sock: socket.socket) -> bool:
    try:
        sock.getpeername()
    except OSError:
        return False
    return True


async def test_oneway_is_written_and_gets_no_response(server):
    addr, _, remember = server
    async with RemotingClient() as client:
        await client.invoke_oneway(addr, request(REMEMBER), 10)
        # the next request on the same connection is answered after the oneway one was processed
        await client.invoke(addr, request(REMEMBER), timeout=10)
        assert len(remember.connections) == 2
        conn = client.connections[addr]
        assert conn.pending_invocations == 0


async def test_a_oneway_waits_behind_a_backlog_the_peer_does_not_read_at_most_its_timeout(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """A oneway to a broker that stopped reading (more than SEND_HIGH_WATER queued for it) returns after its
    timeout, its frame left queued, as Java's invokeOneway never waits past its ``timeoutMillis``; it used to wait
    for the backlog to drain (END_TRANSACTION, oneway offset commits and send_oneway hung with it)."""
    listener = (await trio.open_tcp_listeners(0, host="127.0.0.1"))[0]
    listener.socket.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)  # the accepted socket inherits it
    addr = f"127.0.0.1:{listener.socket.getsockname()[1]}"
    async with trio.open_nursery() as nursery, listener:
        nursery.start_soon(_accept_and_never_read, listener)
        async with RemotingClient() as client:
            filler = request(ECHO, body=b"x" * (1 << 20), oneway=True)
            for _ in range(64):
                await client.invoke_oneway(addr, filler, 2.0)
                if client.connections[addr].congested:
                    break
            assert client.connections[addr].congested
            start = trio.current_time()
            with trio.fail_after(60):  # virtual seconds
                await client.invoke_oneway(addr, request(ECHO, oneway=True), 2.0)
            assert trio.current_time() == start + 2.0
            assert not client.connections[addr].closed
        nursery.cancel_scope.cancel()


async def _accept_and_never_read(listener: trio.SocketListener) -> None:
    stream = await listener.accept()
    async with stream:
        await trio.sleep_forever()


async def test_invoke_callback_gets_response_or_error(server, autojump_clock):
    addr, _, _ = server
    outcomes: list[RemotingCommand | RemotingError] = []
    done = trio.Event()

    async def on_done(outcome: RemotingCommand | RemotingError) -> None:
        outcomes.append(outcome)
        if len(outcomes) == 2:
            done.set()

    async with RemotingClient() as client:
        client.invoke_callback(addr, request(ECHO, body=b"cb"), 5.0, on_done)
        client.invoke_callback(addr, request(SLOW), 1.0, on_done)
        await done.wait()
    assert isinstance(outcomes[0], RemotingCommand) and outcomes[0].body == b"cb"
    assert isinstance(outcomes[1], RemotingTimeoutError)


async def test_server_initiated_request_is_answered_by_the_client_handler(server):
    addr, _, remember = server
    handler = NotifyHandler()
    async with RemotingClient(request_handler=handler) as client:
        await client.invoke(addr, request(REMEMBER), timeout=10)
        server_side = remember.connections[0]
        push = request(RequestCode.NOTIFY_CONSUMER_IDS_CHANGED, {"group": "G1"})
        resp = await server_side.invoke(push, timeout=10)
        assert resp.code == ResponseCode.SUCCESS and resp.ext_fields == {"handled": "G1"}
        await server_side.invoke_oneway(request(RequestCode.NOTIFY_CONSUMER_IDS_CHANGED, {"group": "G2"}))
        await server_side.invoke(push, timeout=10)
        while len(handler.seen) < 3:  # pushes run in tasks of their own: the oneway one may finish last
            await trio.sleep(0)
        assert sorted(c.ext_fields["group"] for c in handler.seen) == ["G1", "G1", "G2"]
        assert [c.is_oneway for c in handler.seen if c.ext_fields["group"] == "G2"] == [True]


async def test_client_without_handler_answers_pushes_not_supported(server):
    addr, _, remember = server
    async with RemotingClient() as client:
        await client.invoke(addr, request(REMEMBER), timeout=10)
        resp = await remember.connections[0].invoke(request(RequestCode.CHECK_TRANSACTION_STATE), timeout=10)
    assert resp.code == ResponseCode.REQUEST_CODE_NOT_SUPPORTED


async def test_client_reconnects_after_the_server_restarts_on_the_same_port():
    dispatcher, gate, _ = make_dispatcher()
    async with RemotingClient() as client, trio.open_nursery() as outer:
        async with trio.open_nursery() as first:
            host, port = await first.start(RemotingServer(dispatcher).serve)
            addr = f"{host}:{port}"
            assert (await client.invoke(addr, request(ECHO, body=b"1"), timeout=10)).body == b"1"
            failures: list[BaseException] = []
            outstanding = trio.Event()

            async def held() -> None:
                try:
                    outstanding.set()
                    await client.invoke(addr, request(SLOW), timeout=30)
                except RemotingConnectError as exc:
                    failures.append(exc)

            outer.start_soon(held)
            await outstanding.wait()
            while gate.entered == 0:
                await trio.sleep(0)
            first.cancel_scope.cancel()  # server gone: the held invocation fails at once
        while not failures:
            await trio.sleep(0)
        assert isinstance(failures[0], RemotingConnectError)

        dispatcher2, _, _ = make_dispatcher()
        async with trio.open_nursery() as second:
            await second.start(RemotingServer(dispatcher2).serve, host, port)
            assert (await client.invoke(addr, request(ECHO, body=b"2"), timeout=10)).body == b"2"
            second.cancel_scope.cancel()


def test_client_works_under_asyncio():
    ready: queue.Queue[tuple[str, int] | BaseException] = queue.Queue()
    stop: dict[str, object] = {}

    async def serve() -> None:
        dispatcher, _, remember = make_dispatcher()
        stop["remember"] = remember
        async with trio.open_nursery() as nursery:
            stop["scope"] = nursery.cancel_scope
            stop["token"] = trio.lowlevel.current_trio_token()
            ready.put(await nursery.start(RemotingServer(dispatcher).serve))

    def run_server() -> None:
        try:
            trio.run(serve)
        except BaseException as exc:  # surface startup failures to the test thread
            ready.put(exc)

    thread = threading.Thread(target=run_server, daemon=True)
    thread.start()
    started = ready.get(timeout=30)
    assert not isinstance(started, BaseException)
    addr = f"{started[0]}:{started[1]}"

    async def main() -> list[bytes]:
        handler = NotifyHandler()
        async with RemotingClient(request_handler=handler) as client:
            bodies = []
            for i in range(3):
                resp = await client.invoke(addr, request(ECHO, body=f"aio{i}".encode()), timeout=10)
                bodies.append(bytes(resp.body))
            got: list[object] = []
            client.invoke_callback(addr, request(ECHO, body=b"cb"), 10, got.append)
            while not got:
                await anyio.sleep(0.001)
            assert isinstance(got[0], RemotingCommand)
            return bodies

    try:
        assert anyio.run(main, backend="asyncio") == [b"aio0", b"aio1", b"aio2"]
    finally:
        trio.from_thread.run_sync(stop["scope"].cancel, trio_token=stop["token"])  # type: ignore[attr-defined]
        thread.join(timeout=30)
