"""Property: however a peer orders its responses, every invocation gets the response to its own request."""

from __future__ import annotations

import trio
import trio.testing
from hypothesis import given, settings
from hypothesis import strategies as st

from remoting.codec.codes import ResponseCode
from remoting.codec.command import RemotingCommand, request
from remoting.connection import Connection
from remoting.dispatch import RequestContext


class ReorderingPeer:
    """Collects ``n`` requests, then answers them in the order given by ``order``."""

    def __init__(self, order: list[int]) -> None:
        self.order = order
        self.requests: list[RemotingCommand] = []

    async def on_request(self, ctx: RequestContext, cmd: RemotingCommand) -> None:
        self.requests.append(cmd)
        if len(self.requests) == len(self.order):
            for i in self.order:
                req = self.requests[i]
                await ctx.connection.send(req.response(ResponseCode.SUCCESS, body=req.body))


@settings(max_examples=30, deadline=None)
@given(st.integers(min_value=1, max_value=40).flatmap(lambda n: st.permutations(list(range(n)))))
def test_invocations_get_their_own_responses_in_any_response_order(order: list[int]) -> None:
    async def main() -> None:
        left_stream, right_stream = trio.testing.memory_stream_pair()
        client = Connection(left_stream, ("server", 1), ("client", 2))
        server = Connection(right_stream, ("client", 2), ("server", 1))
        peer = ReorderingPeer(order)
        results: dict[int, bytes] = {}

        async def invoke(i: int) -> None:
            response = await client.invoke(request(1, body=str(i).encode()), timeout=60)
            results[i] = bytes(response.body)

        async def ignore(ctx: RequestContext, cmd: RemotingCommand) -> None:
            return None

        async with trio.open_nursery() as nursery:
            nursery.start_soon(client.run, ignore)
            nursery.start_soon(server.run, peer.on_request)
            async with trio.open_nursery() as callers:
                for i in range(len(order)):
                    callers.start_soon(invoke, i)
            nursery.cancel_scope.cancel()
        assert results == {i: str(i).encode() for i in range(len(order))}

    trio.run(main)
