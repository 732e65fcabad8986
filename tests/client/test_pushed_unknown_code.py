"""A request a broker pushes to the client with a code the client does not serve."""

from __future__ import annotations

import trio

from client.config import ClientConfig
from client.instance import MQClientInstance
from remoting.codec.codes import ResponseCode
from remoting.codec.command import RemotingCommand, request
from remoting.dispatch import Dispatcher, ProcessorPool, RequestContext
from remoting.server import RemotingServer

ASK, UNKNOWN = 1001, 4321


class PushUnknown:
    """Pushes UNKNOWN to the caller over its own connection and answers with what the caller answered."""

    async def process(self, ctx: RequestContext, req: RemotingCommand) -> RemotingCommand | None:
        pushed = await ctx.connection.invoke(request(UNKNOWN), 3.0)
        return req.response(pushed.code, pushed.remark)


async def test_a_pushed_code_the_client_does_not_serve_is_answered_as_java_answers_it() -> None:
    """remoting/src/main/java/org/apache/rocketmq/remoting/netty/NettyRemotingAbstract.java answers a code with no
    processor (the Java client registers its ClientRemotingProcessor for the codes it serves) REQUEST_CODE_NOT_SUPPORTED
    with the remark ``" request type <code> not supported"``."""
    dispatcher = Dispatcher()
    dispatcher.register(ASK, PushUnknown(), ProcessorPool("admin", 1, 10))
    async with trio.open_nursery() as nursery:
        host, port = await nursery.start(RemotingServer(dispatcher).serve)
        async with MQClientInstance(ClientConfig(namesrv_addr="127.0.0.1:1")) as instance:
            answer = await instance.remoting.invoke(f"{host}:{port}", request(ASK), 5.0)
        assert (answer.code, answer.remark) == (
            ResponseCode.REQUEST_CODE_NOT_SUPPORTED,
            f" request type {UNKNOWN} not supported",
        )
        nursery.cancel_scope.cancel()
