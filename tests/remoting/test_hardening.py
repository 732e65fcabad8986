"""Per-connection budgets (requests in flight, buffered bytes), the connection cap and rate-limited refusal logs:
one client cannot make the server buffer without bound, and the others keep being served."""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator
from typing import Any

import pytest
import trio
import trio.testing

from remoting.client import RemotingClient
from remoting.codec.codes import ResponseCode
from remoting.codec.command import FLAG_RESPONSE, RemotingCommand, request
from remoting.codec.frame import encode_command
from remoting.connection import REQUEST_OVERHEAD
from remoting.dispatch import Dispatcher, ProcessorPool, RequestContext
from remoting.ratelog import RateLimitedLog
from remoting.server import ListenerSettings, RemotingServer, ServerConfig
from tests.remoting.helpers import EchoProcessor, GateProcessor, RawPeer


@pytest.fixture
async def nursery() -> AsyncIterator[trio.Nursery]:
    async with trio.open_nursery() as n:
        yield n
        n.cancel_scope.cancel()


async def _serve(nursery: trio.Nursery, processor: object, **config: object) -> tuple[RemotingServer, tuple[str, int]]:
    dispatcher = Dispatcher()
    dispatcher.register(1000, processor, ProcessorPool("work", 64, 10_000))  # type: ignore[arg-type]
    server = RemotingServer(dispatcher, ServerConfig(**config))  # type: ignore[arg-type]
    address = await nursery.start(server.serve, "127.0.0.1", 0)
    return server, address


async def test_requests_in_flight_are_capped_per_connection_and_the_rest_wait_in_tcp(nursery: trio.Nursery) -> None:
    gate = GateProcessor()
    server, address = await _serve(nursery, gate, max_requests_in_flight=4)
    peer = await RawPeer.connect(address)
    await peer.send(*(request(1000, {}, b"r%d" % i, opaque=i + 1) for i in range(20)))
    await trio.testing.wait_all_tasks_blocked(0.05)
    assert gate.entered == 4  # the pool has 64 workers: only the budget stops the rest
    (conn,) = server.connections
    assert conn.requests_in_flight == 4
    gate.gate.set()
    answers = [await peer.receive() for _ in range(20)]
    assert sorted(a.opaque for a in answers if a is not None) == list(range(1, 21))
    await peer.aclose()


async def test_oneway_requests_count_until_their_processor_returns(nursery: trio.Nursery) -> None:
    gate = GateProcessor()
    server, address = await _serve(nursery, gate, max_requests_in_flight=4)
    peer = await RawPeer.connect(address)
    await peer.send(*(request(1000, {}, b"w%d" % i, oneway=True, opaque=i + 1) for i in range(20)))
    await trio.testing.wait_all_tasks_blocked(0.05)
    assert gate.entered == 4  # a oneway flood is held like any other: the pool's queue does not grow
    (conn,) = server.connections
    assert conn.requests_in_flight == 4
    gate.gate.set()
    await trio.testing.wait_all_tasks_blocked(0.05)
    assert gate.entered == 20
    assert conn.requests_in_flight == 0 and conn.buffered_bytes == 0
    await peer.aclose()


async def test_requests_sharing_an_opaque_each_count_in_the_budget(nursery: trio.Nursery) -> None:
    """A peer reusing one opaque (a constant 0, say) for requests still in flight gets each counted, not just the
    latest: the in-flight and byte budgets hold, and every answer gives its request's share back."""
    gate = GateProcessor()
    server, address = await _serve(nursery, gate, max_requests_in_flight=4)
    peer = await RawPeer.connect(address)
    await peer.send(*(request(1000, {}, b"s%d" % i, opaque=7) for i in range(20)))
    await trio.testing.wait_all_tasks_blocked(0.05)
    (conn,) = server.connections
    assert gate.entered == 4
    assert conn.requests_in_flight == 4 and conn.buffered_bytes == 4 * (2 + REQUEST_OVERHEAD)
    gate.gate.set()
    answers = [await peer.receive() for _ in range(20)]
    assert all(a is not None and a.opaque == 7 for a in answers)
    assert sorted(bytes(a.body) for a in answers if a is not None) == sorted(b"s%d" % i for i in range(20))
    await trio.testing.wait_all_tasks_blocked(0.05)
    assert conn.requests_in_flight == 0 and conn.buffered_bytes == 0
    await peer.aclose()


async def test_buffered_request_bytes_are_capped_per_connection(nursery: trio.Nursery) -> None:
    gate = GateProcessor()
    server, address = await _serve(nursery, gate, max_buffered_bytes=1 << 20)
    peer = await RawPeer.connect(address)
    big = b"x" * (512 << 10)
    answers = []

    async def receive_all() -> None:
        answers.extend([await peer.receive() for _ in range(12)])

    async with trio.open_nursery() as sending:
        sending.start_soon(peer.send, *(request(1000, {}, big, opaque=i + 1) for i in range(12)))
        await trio.testing.wait_all_tasks_blocked(0.05)
        assert gate.entered == 2  # 2 x (512 KiB + overhead) is over 1 MiB: reading stops there
        (conn,) = server.connections
        assert conn.buffered_bytes == 2 * (len(big) + REQUEST_OVERHEAD)
        sending.start_soon(receive_all)
        gate.gate.set()
    assert len(answers) == 12 and all(a is not None and a.code == ResponseCode.SUCCESS for a in answers)
    await peer.aclose()


async def test_a_client_that_never_reads_its_answers_cannot_grow_the_servers_buffers(nursery: trio.Nursery) -> None:
    echo = EchoProcessor()
    server, address = await _serve(nursery, echo, max_buffered_bytes=1 << 20)
    peer = await RawPeer.connect(address)
    body = b"y" * (256 << 10)
    async with trio.open_nursery() as sending:
        sending.start_soon(peer.send, *(request(1000, {}, body, opaque=i + 1) for i in range(400)))  # 100 MiB
        await trio.testing.wait_all_tasks_blocked(0.1)
        (conn,) = server.connections
        assert conn.buffered_bytes <= (1 << 20) + 2 * len(body)
        assert len(echo.seen) < 400  # socket buffers took some; the rest waits in the peer
        async with RemotingClient() as other:  # another client is served meanwhile
            answer = await other.invoke(f"{address[0]}:{address[1]}", request(1000, {}, b"hi"), 5)
            assert bytes(answer.body) == b"hi"
        sending.cancel_scope.cancel()
    await peer.aclose()


def _fast_echo(ctx: RequestContext, fields: dict[str, Any], body: bytes) -> bool:
    """A fast handler (the broker's send fast path, DLedger's push) answering in the reader, body echoed."""
    answer = RemotingCommand(ResponseCode.SUCCESS, fields["opaque"], FLAG_RESPONSE, body=body)
    ctx.connection.send_frame_nowait(encode_command(answer))
    return True


async def test_answers_of_a_fast_handler_count_in_the_byte_budget_of_a_client_that_never_reads(
    nursery: trio.Nursery,
) -> None:
    dispatcher = Dispatcher()
    dispatcher.register(1000, EchoProcessor(), ProcessorPool("work", 4, 10_000))
    dispatcher.register_fast(1000, _fast_echo)
    server = RemotingServer(dispatcher, ServerConfig(max_buffered_bytes=1 << 20))
    address = await nursery.start(server.serve, "127.0.0.1", 0)
    peer = await RawPeer.connect(address)
    body = b"z" * (64 << 10)
    async with trio.open_nursery() as sending:
        sending.start_soon(peer.send, *(request(1000, {}, body, opaque=i + 1) for i in range(400)))  # 25 MiB
        await trio.testing.wait_all_tasks_blocked(0.1)
        (conn,) = server.connections
        assert conn.buffered_bytes <= (1 << 20) + 2 * len(body)
        sending.cancel_scope.cancel()
    await peer.aclose()


async def test_connections_beyond_the_cap_are_closed_at_once(
    nursery: trio.Nursery, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING, logger="remoting.server")
    server, address = await _serve(nursery, EchoProcessor(), max_connections=2)
    first, second = await RawPeer.connect(address), await RawPeer.connect(address)
    for peer in (first, second):
        await peer.send(request(1000, {}, b"ok"))
        assert await peer.receive() is not None
    third = await RawPeer.connect(address)
    await third.send(request(1000, {}, b"refused"))
    try:
        refused = await third.receive()
    except trio.BrokenResourceError:
        refused = None
    assert refused is None and server.refused_connections == 1
    assert any("2 connections already open" in r.message for r in caplog.records)
    await first.aclose()
    await trio.testing.wait_all_tasks_blocked(0.05)
    fourth = await RawPeer.connect(address)
    await fourth.send(request(1000, {}, b"room again"))
    assert await fourth.receive() is not None


def test_refusal_logs_are_rate_limited_and_count_what_they_suppressed(caplog: pytest.LogCaptureFixture) -> None:
    now = [0.0]
    log = RateLimitedLog(logging.getLogger("tests.ratelog"), period=10.0, burst=3, clock=lambda: now[0])
    caplog.set_level(logging.WARNING, logger="tests.ratelog")
    written = [log.warning("refused %d", i) for i in range(10)]
    assert written == [True] * 3 + [False] * 7
    now[0] = 10.0
    assert log.warning("refused %d", 10)
    assert [r.getMessage() for r in caplog.records] == [
        "refused 0",
        "refused 1",
        "refused 2",
        "refused 10 (7 similar lines suppressed before this one)",
    ]


class _ParkingProcessor:
    """Code 1001 parks its request as long polling does (suspended, answered later); anything else is echoed."""

    def __init__(self) -> None:
        self.parked: list[tuple[RequestContext, RemotingCommand]] = []

    async def process(self, ctx: RequestContext, request: RemotingCommand) -> RemotingCommand | None:
        if request.code == 1001:
            ctx.connection.mark_suspended(request.opaque)
            self.parked.append((ctx, request))
            return None
        return request.response(ResponseCode.SUCCESS, body=request.body)


async def test_parked_long_polls_do_not_stop_the_reader(nursery: trio.Nursery) -> None:
    """A suspended pull holds no worker (RocketMQ's ``PullRequestHoldService`` parks it without a limit, see
    broker/src/main/java/org/apache/rocketmq/broker/longpolling/PullRequestHoldService.java): a client instance with
    more held pulls than the request budget must still get its sends and heartbeats read on the same connection.
    Their bytes still count."""
    parking = _ParkingProcessor()
    dispatcher = Dispatcher()
    pool = ProcessorPool("work", 8, 10_000)
    dispatcher.register((1000, 1001), parking, pool)  # type: ignore[arg-type]
    server = RemotingServer(dispatcher, ServerConfig(max_requests_in_flight=4))
    address = await nursery.start(server.serve, "127.0.0.1", 0)
    peer = await RawPeer.connect(address)
    await peer.send(*(request(1001, {}, b"", opaque=i + 1) for i in range(6)))
    await peer.send(request(1000, {}, b"ping", opaque=100))
    await trio.testing.wait_all_tasks_blocked(0.05)
    assert len(parking.parked) == 6
    (conn,) = server.connections
    assert conn.buffered_bytes == 6 * REQUEST_OVERHEAD
    answer = await peer.receive()
    assert answer is not None and answer.opaque == 100 and bytes(answer.body) == b"ping"
    for ctx, parked in parking.parked:
        ctx.connection.send_nowait(parked.response(ResponseCode.SUCCESS))
    answers = [await peer.receive() for _ in range(6)]
    assert sorted(a.opaque for a in answers if a is not None) == list(range(1, 7))
    await trio.testing.wait_all_tasks_blocked(0.05)
    assert conn.requests_in_flight == 0 and conn.buffered_bytes == 0
    await peer.aclose()


async def test_parked_long_polls_beyond_three_times_the_request_budget_count_again(nursery: trio.Nursery) -> None:
    """Parked pulls leave the request count, but not without end: past three times the budget they count again, so
    one client cannot park pulls until only its byte budget (64 MiB of frames, far more in objects) stops it."""
    parking = _ParkingProcessor()
    dispatcher = Dispatcher()
    dispatcher.register((1000, 1001), parking, ProcessorPool("work", 8, 10_000))  # type: ignore[arg-type]
    server = RemotingServer(dispatcher, ServerConfig(max_requests_in_flight=4))
    address = await nursery.start(server.serve, "127.0.0.1", 0)
    peer = await RawPeer.connect(address)
    await peer.send(*(request(1001, {}, b"", opaque=i + 1) for i in range(40)))
    await trio.testing.wait_all_tasks_blocked(0.05)
    assert 16 <= len(parking.parked) < 40  # the reader stopped: 3 x 4 parked outside the budget, then 4 in it
    answered = 0
    while answered < len(parking.parked):  # answered pulls free room: the rest is read
        for ctx, parked in parking.parked[answered:]:
            ctx.connection.send_nowait(parked.response(ResponseCode.SUCCESS))
            answered += 1
        await trio.testing.wait_all_tasks_blocked(0.05)
    assert answered == 40
    await peer.aclose()


@pytest.mark.parametrize(
    ("setting", "value"),
    [("server_max_requests_in_flight", 0), ("server_max_buffered_bytes", -1), ("server_max_connections", -1)],
)
async def test_a_budget_setting_of_zero_or_less_caps_nothing_instead_of_stalling_the_reader(
    autojump_clock: trio.testing.MockClock, nursery: trio.Nursery, setting: str, value: int
) -> None:
    """``serverMaxConnections=0`` means no cap; ``serverMaxRequestsInFlight`` and ``serverMaxBufferedBytes`` of 0 (or
    less) meant a budget always spent: the reader paused after the first request and never read another, so every
    client of the broker stalled after one call. ``serverMaxConnections`` below 0 closed every connection at once."""
    dispatcher = Dispatcher()
    dispatcher.register(1000, EchoProcessor(), ProcessorPool("work", 4, 100))
    config = ListenerSettings(**{setting: value}).listener_config(120.0)
    server = RemotingServer(dispatcher, config)
    address = await nursery.start(server.serve, "127.0.0.1", 0)
    peer = await RawPeer.connect(address)
    answers: list[RemotingCommand | None] = []
    with trio.move_on_after(60):  # virtual time: jumps once the reader stalls
        for i in range(3):
            await peer.send(request(1000, {}, b"r%d" % i, opaque=i + 1))
            answers.append(await peer.receive())
    assert [a.opaque for a in answers if a is not None] == [1, 2, 3]
    await peer.aclose()
