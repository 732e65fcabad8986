"""``Connection.invoke_callback``: the task-free invocation behind ``send_async``. Every outcome (response, timeout,
close, a closed connection) reaches the callback exactly once, and it matches what ``invoke`` gives."""

from __future__ import annotations

import logging
import socket

import pytest
import trio
import trio.testing

from remoting.codec.codes import ResponseCode
from remoting.codec.command import RemotingCommand, request
from remoting.connection import Connection
from remoting.dispatch import RequestContext
from remoting.errors import RemotingClosedError, RemotingConnectError, RemotingError, RemotingTimeoutError

ECHO, SILENT = 1, 2


async def _answer(ctx: RequestContext, cmd: RemotingCommand) -> None:
    if cmd.code == ECHO:
        await ctx.connection.send(cmd.response(ResponseCode.SUCCESS, ext_fields={"x": "1"}, body=cmd.body))


def _pair() -> tuple[Connection, Connection]:
    """Over a real socket pair; the invoking side also writes directly to its raw socket, as the client does."""
    left, right = socket.socketpair()
    raw = left.dup()
    raw.setblocking(False)
    return (
        Connection(trio.SocketStream(trio.socket.from_stdlib_socket(left)), ("peer", 1), ("me", 2), raw_socket=raw),
        Connection(trio.SocketStream(trio.socket.from_stdlib_socket(right)), ("me", 2), ("peer", 1)),
    )


async def test_callback_gets_the_same_response_invoke_returns():
    conn, other = _pair()
    outcomes: list[RemotingCommand | RemotingError] = []
    async with trio.open_nursery() as nursery:
        nursery.start_soon(other.run, _answer)
        nursery.start_soon(conn.run, _answer)
        for i in range(20):
            conn.invoke_callback(request(ECHO, body=b"cb%d" % i), 5.0, outcomes.append)
        awaited = await conn.invoke(request(ECHO, body=b"cb19"), 5.0)
        with trio.fail_after(5):
            while len(outcomes) < 20:
                await trio.sleep(0.001)
        nursery.cancel_scope.cancel()
    assert [o.body for o in outcomes if isinstance(o, RemotingCommand)] == [b"cb%d" % i for i in range(20)]
    last = outcomes[-1]
    assert isinstance(last, RemotingCommand)
    assert (last.code, last.ext_fields, last.body) == (awaited.code, awaited.ext_fields, awaited.body)
    assert conn.pending_invocations == 0


async def test_timeout_reaches_the_callback_once_and_a_late_answer_is_dropped(autojump_clock):
    conn, other = _pair()
    outcomes: list[tuple[float, RemotingCommand | RemotingError]] = []
    async with trio.open_nursery() as nursery:
        nursery.start_soon(other.run, _answer)
        nursery.start_soon(conn.run, _answer)
        start = trio.current_time()
        conn.invoke_callback(request(SILENT), 3.0, lambda o: outcomes.append((trio.current_time() - start, o)))
        conn.invoke_callback(request(SILENT), 1.0, lambda o: outcomes.append((trio.current_time() - start, o)))
        await trio.sleep(10)
        nursery.cancel_scope.cancel()
    assert [round(t, 3) for t, _ in outcomes] == [1.0, 3.0]
    assert all(isinstance(o, RemotingTimeoutError) for _, o in outcomes)
    assert "request code 2" in str(outcomes[0][1])


async def test_close_fails_every_pending_callback_once_and_a_closed_connection_fails_at_once():
    conn, other = _pair()
    outcomes: list[RemotingCommand | RemotingError] = []
    async with trio.open_nursery() as nursery:
        nursery.start_soon(other.run, _answer)
        nursery.start_soon(conn.run, _answer)
        for _ in range(5):
            conn.invoke_callback(request(SILENT), 30.0, outcomes.append)
        await trio.sleep(0.01)
        conn.close()
        conn.close()
        assert len(outcomes) == 5 and all(isinstance(o, RemotingConnectError) for o in outcomes)
        conn.invoke_callback(request(ECHO), 30.0, outcomes.append)
        nursery.cancel_scope.cancel()
    assert len(outcomes) == 6 and isinstance(outcomes[5], RemotingClosedError)


async def test_a_raising_callback_is_logged_and_the_reader_goes_on(caplog: pytest.LogCaptureFixture):
    conn, other = _pair()
    outcomes: list[RemotingCommand | RemotingError] = []

    def explode(outcome: RemotingCommand | RemotingError) -> None:
        raise ValueError("callback bug")

    with caplog.at_level(logging.ERROR):
        async with trio.open_nursery() as nursery:
            nursery.start_soon(other.run, _answer)
            nursery.start_soon(conn.run, _answer)
            conn.invoke_callback(request(ECHO), 5.0, explode)
            conn.invoke_callback(request(ECHO, body=b"after"), 5.0, outcomes.append)
            with trio.fail_after(5):
                while not outcomes:
                    await trio.sleep(0.001)
            assert not conn.closed
            nursery.cancel_scope.cancel()
    assert isinstance(outcomes[0], RemotingCommand) and outcomes[0].body == b"after"
    assert "callback bug" in caplog.text
