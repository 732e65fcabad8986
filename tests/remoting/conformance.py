"""Transport conformance: what any :class:`~remoting.connection.Connection` must do over any connected stream pair.

``await check_connection_pair(left_stream, right_stream)`` wraps both ends in connections, runs their readers and
checks, in order: invocations in both directions matched by opaque even when answered out of order, oneway frames
delivered with no response, a response nobody waits for dropped harmlessly, and closing one end failing the other
end's outstanding invocation with ``RemotingConnectError`` and later writes with ``RemotingClosedError``.
Used by tests over Trio memory streams, lockstep streams and real sockets, so that every transport passes the same
checks (in the manner of ``trio.testing``'s stream conformance checks).
"""

from __future__ import annotations

import pytest
import trio

from remoting.codec.codes import ResponseCode
from remoting.codec.command import RemotingCommand, request
from remoting.connection import ByteStream, Connection
from remoting.dispatch import RequestContext
from remoting.errors import RemotingClosedError, RemotingConnectError

HOLD, ECHO, ONEWAY = 1, 2, 3


class _Peer:
    """Echo for ECHO, a held answer for HOLD (released by ``release``), a record for ONEWAY."""

    def __init__(self) -> None:
        self.release = trio.Event()
        self.oneway: list[RemotingCommand] = []

    async def on_request(self, ctx: RequestContext, cmd: RemotingCommand) -> None:
        if cmd.code == ONEWAY:
            self.oneway.append(cmd)
        elif cmd.code == ECHO:
            await ctx.connection.send(cmd.response(ResponseCode.SUCCESS, body=cmd.body))
        elif cmd.code == HOLD:
            trio.lowlevel.spawn_system_task(self._answer_later, ctx.connection, cmd)

    async def _answer_later(self, conn: Connection, cmd: RemotingCommand) -> None:
        await self.release.wait()
        await conn.send(cmd.response(ResponseCode.SUCCESS, body=b"held"))


async def check_connection_pair(left_stream: ByteStream, right_stream: ByteStream) -> None:
    left = Connection(left_stream, ("left", 1), ("right", 2))
    right = Connection(right_stream, ("right", 2), ("left", 1))
    left_peer, right_peer = _Peer(), _Peer()
    async with trio.open_nursery() as nursery:
        nursery.start_soon(left.run, left_peer.on_request)
        nursery.start_soon(right.run, right_peer.on_request)

        held: list[RemotingCommand] = []

        async def invoke_held() -> None:
            held.append(await left.invoke(request(HOLD), timeout=30))

        nursery.start_soon(invoke_held)
        quick = await left.invoke(request(ECHO, body=b"ping"), timeout=30)
        assert quick.body == b"ping" and not held  # answered while the earlier request is still held
        back = await right.invoke(request(ECHO, body=b"pong"), timeout=30)
        assert back.body == b"pong"
        right_peer.release.set()
        while not held:
            await trio.sleep(0)
        assert held[0].body == b"held"

        await left.invoke_oneway(request(ONEWAY, body=b"one"))
        await left.send(request(ECHO).response(ResponseCode.SUCCESS))  # unmatched response: dropped
        assert (await left.invoke(request(ECHO, body=b"after"), timeout=30)).body == b"after"
        assert [c.body for c in right_peer.oneway] == [b"one"] and right_peer.oneway[0].is_oneway

        failures: list[BaseException] = []

        async def invoke_never_answered() -> None:
            try:
                await right.invoke(request(HOLD), timeout=30)
            except RemotingConnectError as exc:
                failures.append(exc)

        left_peer.release = trio.Event()  # left holds this one forever
        nursery.start_soon(invoke_never_answered)
        while right.pending_invocations == 0:
            await trio.sleep(0)
        left.close()
        while not failures:
            await trio.sleep(0)
        assert isinstance(failures[0], RemotingConnectError)
        with pytest.raises(RemotingClosedError):
            await left.send(request(ECHO))
        while not right.closed:
            await trio.sleep(0)
        nursery.cancel_scope.cancel()
