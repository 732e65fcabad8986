"""The reader's shortcut (:meth:`remoting.dispatch.Dispatcher.fast_request`) over real loopback sockets: what a fast
handler takes it answers; admission, a busy pool, a non-JSON header, a oneway flag or a bad frame leave the general
path in charge."""

from __future__ import annotations

from typing import Any

import trio
import trio.testing

from remoting.codec.codes import ResponseCode, SerializeType
from remoting.codec.command import RemotingCommand, request
from remoting.codec.frame import encode_command
from remoting.dispatch import Dispatcher, ProcessorPool
from remoting.processor import RequestContext
from remoting.server import RemotingServer
from tests.remoting.helpers import EchoProcessor, GateProcessor, RawPeer

ECHO, SLOW = 1001, 1002
FAST_REMARK = "fast"


class FastEcho:
    """Takes requests whose ``take`` field is ``yes``; answers with remark ``fast``."""

    def __init__(self) -> None:
        self.offered = 0

    def __call__(self, ctx: RequestContext, fields: dict[str, Any], body: bytes) -> bool:
        self.offered += 1
        if fields["extFields"].get("take") != "yes":
            return False
        answer = RemotingCommand(ResponseCode.SUCCESS, fields["opaque"], 1, remark=FAST_REMARK, body=body)
        ctx.connection.send_frame_nowait(encode_command(answer))
        return True


async def _serve(dispatcher: Dispatcher, nursery: trio.Nursery) -> RawPeer:
    address = await nursery.start(RemotingServer(dispatcher).serve)
    return await RawPeer.connect(address)


async def test_a_fast_handler_answers_what_it_takes_and_the_pool_answers_the_rest() -> None:
    dispatcher, fast = Dispatcher(), FastEcho()
    dispatcher.register(ECHO, EchoProcessor(), ProcessorPool("send", 1, 100))
    dispatcher.register_fast(ECHO, fast)
    async with trio.open_nursery() as nursery:
        peer = await _serve(dispatcher, nursery)
        taken = request(ECHO, {"take": "yes"}, b"a")
        declined = request(ECHO, {"take": "no"}, b"b")
        binary = request(ECHO, {"take": "yes"}, b"c", serialize_type=SerializeType.ROCKETMQ)
        oneway = request(ECHO, {"take": "yes"}, b"d", oneway=True)
        await peer.send(taken, declined, binary, oneway)
        answers = {}
        for _ in range(3):
            resp = await peer.receive()
            assert resp is not None and resp.code == ResponseCode.SUCCESS
            answers[resp.opaque] = resp
        assert answers[taken.opaque].remark == FAST_REMARK and answers[taken.opaque].body == b"a"
        assert answers[declined.opaque].remark != FAST_REMARK
        assert answers[binary.opaque].remark != FAST_REMARK
        assert fast.offered == 2  # neither the binary header nor the oneway request was offered
        nursery.cancel_scope.cancel()


async def test_admission_or_a_busy_pool_keeps_requests_on_the_general_path() -> None:
    refused = Dispatcher(admission=lambda ctx, req: req.response(ResponseCode.NO_PERMISSION, "no"))
    gated, fast = Dispatcher(), FastEcho()
    refused.register(ECHO, EchoProcessor(), ProcessorPool("send", 1, 100))
    refused.register_fast(ECHO, fast)
    gate = GateProcessor()
    pool = ProcessorPool("send", 1, 100)
    gated.register((ECHO, SLOW), gate, pool)
    gated.register_fast(ECHO, fast)
    async with trio.open_nursery() as nursery:
        peer = await _serve(refused, nursery)
        await peer.send(request(ECHO, {"take": "yes"}))
        resp = await peer.receive()
        assert resp is not None and resp.code == ResponseCode.NO_PERMISSION
        peer = await _serve(gated, nursery)
        slow, behind = request(SLOW), request(ECHO, {"take": "yes"})
        await peer.send(slow, behind)  # the slow one holds the pool: the next must queue behind it, in order
        await trio.testing.wait_all_tasks_blocked()
        gate.gate.set()
        answers = [await peer.receive() for _ in range(2)]
        assert [a.opaque for a in answers if a] == [slow.opaque, behind.opaque]
        assert all(a is not None and a.remark != FAST_REMARK for a in answers)
        assert fast.offered == 0
        nursery.cancel_scope.cancel()


async def test_with_admission_a_fast_admission_decides_and_what_it_declines_gets_the_general_answer() -> None:
    """The ACL shape: ``fast_admission`` admits from the header's fields; what it does not admit goes through the
    admission (which refuses it here) and never reaches the fast handler."""
    admitted: list[str] = []

    def fast_admission(ctx: RequestContext, fields: dict[str, Any], body: bytes) -> bool:
        admitted.append(fields["extFields"]["key"])
        return bool(fields["extFields"]["key"] == "good")

    def admission(ctx: RequestContext, req: RemotingCommand) -> RemotingCommand | None:
        return None if req.ext_fields.get("key") == "good" else req.response(ResponseCode.NO_PERMISSION, "no")

    dispatcher, fast = Dispatcher(admission, fast_admission), FastEcho()
    dispatcher.register(ECHO, EchoProcessor(), ProcessorPool("send", 1, 100))
    dispatcher.register_fast(ECHO, fast)
    async with trio.open_nursery() as nursery:
        peer = await _serve(dispatcher, nursery)
        good, bad = request(ECHO, {"take": "yes", "key": "good"}), request(ECHO, {"take": "yes", "key": "bad"})
        await peer.send(good, bad)
        answers = {}
        for _ in range(2):
            resp = await peer.receive()
            assert resp is not None
            answers[resp.opaque] = resp
        assert answers[good.opaque].remark == FAST_REMARK
        assert answers[bad.opaque].code == ResponseCode.NO_PERMISSION
        assert admitted == ["good", "bad"] and fast.offered == 1
        nursery.cancel_scope.cancel()


async def test_a_frame_whose_json_header_does_not_parse_closes_the_connection() -> None:
    dispatcher, fast = Dispatcher(), FastEcho()
    dispatcher.register(ECHO, EchoProcessor(), ProcessorPool("send", 1, 100))
    dispatcher.register_fast(ECHO, fast)
    async with trio.open_nursery() as nursery:
        peer = await _serve(dispatcher, nursery)
        payload = len(header := b"{not json").to_bytes(4, "big") + header
        await peer.stream.send_all(len(payload).to_bytes(4, "big") + payload)
        assert await peer.receive() is None
        nursery.cancel_scope.cancel()


def _raising_fast(ctx: RequestContext, fields: dict[str, Any], body: bytes) -> bool:
    raise LookupError("no such thing")


async def test_a_fast_handler_that_raises_answers_system_error_and_the_server_serves_on() -> None:
    """A fast handler is its processor's first half, run in the reader: what it raises is answered as a processor's
    exception is (NettyRemotingAbstract.processRequestCommand's SYSTEM_ERROR), not raised out of the reader, where it
    ended every connection of the server."""
    dispatcher = Dispatcher()
    dispatcher.register(ECHO, EchoProcessor(), ProcessorPool("send", 1, 100))
    dispatcher.register_fast(ECHO, _raising_fast)
    async with trio.open_nursery() as nursery:
        address = await nursery.start(RemotingServer(dispatcher).serve)
        first, second = await RawPeer.connect(address), await RawPeer.connect(address)
        await first.send(req := request(ECHO, {"take": "yes"}))
        resp = await first.receive()
        assert resp is not None and resp.opaque == req.opaque and resp.is_response
        assert resp.code == ResponseCode.SYSTEM_ERROR and resp.remark == "LookupError: no such thing"
        await first.send(again := request(ECHO))
        resp = await first.receive()
        assert resp is not None and (resp.opaque, resp.code) == (again.opaque, ResponseCode.SYSTEM_ERROR)
        await second.send(other := request(ECHO))
        resp = await second.receive()
        assert resp is not None and (resp.opaque, resp.code) == (other.opaque, ResponseCode.SYSTEM_ERROR)
        nursery.cancel_scope.cancel()
