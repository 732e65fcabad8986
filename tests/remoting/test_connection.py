"""Our Connection passes the transport conformance check over every kind of Trio stream pair."""

from __future__ import annotations

import trio
import trio.testing

from remoting.codec.command import request
from remoting.connection import Connection
from remoting.dispatch import RequestContext
from tests.remoting.conformance import check_connection_pair


async def test_connection_conforms_over_memory_streams():
    await check_connection_pair(*trio.testing.memory_stream_pair())


async def test_connection_conforms_over_lockstep_streams():
    await check_connection_pair(*trio.testing.lockstep_stream_pair())


async def test_connection_conforms_over_real_sockets():
    a, b = trio.socket.socketpair()
    await check_connection_pair(trio.SocketStream(a), trio.SocketStream(b))


async def test_idle_connection_closes_without_read_or_write_over_memory_streams(autojump_clock):
    left_stream, right_stream = trio.testing.memory_stream_pair()
    conn = Connection(left_stream, ("peer", 1), ("me", 2), idle_timeout=10.0)
    other = Connection(right_stream, ("me", 2), ("peer", 1))

    async def ignore(ctx: RequestContext, cmd: object) -> None:
        return None

    closed_at: list[float] = []

    async def run_and_record() -> None:
        await conn.run(ignore)
        closed_at.append(trio.current_time())

    async with trio.open_nursery() as nursery:
        nursery.start_soon(other.run, ignore)
        start = trio.current_time()
        nursery.start_soon(run_and_record)
        await trio.sleep(6)
        await conn.send(request(1, oneway=True))  # a write counts as activity: the deadline moves to 16 s
        await trio.sleep(9)
        assert not conn.closed
        await trio.sleep(2)
        assert conn.closed and closed_at == [start + 16.0]
        nursery.cancel_scope.cancel()
