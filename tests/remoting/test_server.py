"""The Trio server over real loopback sockets, driven by raw frame-level peers."""

from __future__ import annotations

import math
import struct
import sys
from collections.abc import AsyncIterator

import pytest
import trio

from remoting.codec.codes import ResponseCode, SerializeType
from remoting.codec.command import RemotingCommand, request
from remoting.dispatch import OVERLOAD_REMARK, Dispatcher, ProcessorPool, broker_pools
from remoting.processor import RequestContext
from remoting.server import RemotingServer, ServerConfig
from tests.remoting.helpers import EchoProcessor, FailingProcessor, GateProcessor, RawPeer, held_worker

ECHO, SLOW, FAIL = 1001, 1002, 1003


@pytest.fixture
async def stack() -> AsyncIterator[tuple[RemotingServer, tuple[str, int], GateProcessor]]:
    dispatcher = Dispatcher()
    gate = GateProcessor()
    dispatcher.register(ECHO, EchoProcessor(), ProcessorPool("send", 2, 10_000))
    dispatcher.register(SLOW, gate, ProcessorPool("pull", 128, 10_000))
    dispatcher.register(FAIL, FailingProcessor(), ProcessorPool("admin", 1, 100))
    server = RemotingServer(dispatcher)
    async with trio.open_nursery() as nursery:
        address = await nursery.start(server.serve)
        yield server, address, gate
        nursery.cancel_scope.cancel()


async def test_pipelined_requests_are_answered_while_slow_ones_are_held(stack):
    _, address, gate = stack
    peer = await RawPeer.connect(address)
    cmds = [request(SLOW if i % 10 == 0 else ECHO, {"i": str(i)}, body=b"x" * 100) for i in range(1000)]
    await peer.send(*cmds)
    slow_opaques = {c.opaque for c in cmds if c.code == SLOW}
    answered = []
    for _ in range(900):
        resp = await peer.receive()
        assert resp is not None and resp.code == ResponseCode.SUCCESS
        answered.append(resp.opaque)
    assert not slow_opaques & set(answered)
    assert gate.entered == 100
    gate.gate.set()
    for _ in range(100):
        resp = await peer.receive()
        assert resp is not None
        answered.append(resp.opaque)
    assert sorted(answered) == sorted(c.opaque for c in cmds)
    await peer.aclose()


async def test_full_pool_queue_answers_system_busy_at_once():
    dispatcher = Dispatcher()
    gate = GateProcessor()
    dispatcher.register(SLOW, gate, ProcessorPool("send", 1, 2))
    async with trio.open_nursery() as nursery:
        address = await nursery.start(RemotingServer(dispatcher).serve)
        peer = await RawPeer.connect(address)
        cmds = [request(SLOW) for _ in range(10)]
        await peer.send(*cmds)
        # one in the worker, two queued: seven rejected before anything completes
        busy = [await peer.receive() for _ in range(7)]
        assert all(r is not None and r.code == ResponseCode.SYSTEM_BUSY for r in busy)
        assert all(r is not None and r.remark == OVERLOAD_REMARK for r in busy)
        assert {r.opaque for r in busy if r} == {c.opaque for c in cmds[3:]}
        gate.gate.set()
        done = [await peer.receive() for _ in range(3)]
        assert all(r is not None and r.code == ResponseCode.SUCCESS for r in done)
        nursery.cancel_scope.cancel()


async def test_unknown_code_is_answered_request_code_not_supported(stack):
    _, address, _ = stack
    peer = await RawPeer.connect(address)
    await peer.send(request(4242))
    resp = await peer.receive()
    assert resp is not None
    assert resp.code == ResponseCode.REQUEST_CODE_NOT_SUPPORTED
    assert resp.remark == " request type 4242 not supported"


async def test_processor_exception_answers_system_error_and_keeps_the_connection(stack):
    _, address, _ = stack
    peer = await RawPeer.connect(address)
    await peer.send(request(FAIL))
    resp = await peer.receive()
    assert resp is not None and resp.code == ResponseCode.SYSTEM_ERROR
    assert resp.remark is not None and "no such thing" in resp.remark
    await peer.send(request(ECHO, body=b"still here"))
    resp = await peer.receive()
    assert resp is not None and resp.body == b"still here"


async def test_oneway_request_gets_no_response_even_when_unknown_or_failing(stack):
    _, address, _ = stack
    peer = await RawPeer.connect(address)
    await peer.send(request(ECHO, oneway=True), request(4242, oneway=True), request(FAIL, oneway=True))
    marker = request(ECHO, body=b"marker")
    await peer.send(marker)
    resp = await peer.receive()
    assert resp is not None and resp.opaque == marker.opaque


async def test_headers_java_decodes_are_answered_not_closed(stack):
    """A JSON header without ``code`` (fastjson's 0) and a ROCKETMQ header whose extFields length is negative (read
    as none) decode in Java (remoting/src/main/java/org/apache/rocketmq/remoting/protocol/RemotingCommand.java), which
    answers them on an open connection."""
    _, address, _ = stack
    peer = await RawPeer.connect(address)
    no_code = b'{"flag":0,"opaque":77}'
    binary = struct.pack(">hBhii", ECHO, 0, 409, 78, 0) + struct.pack(">i", 0) + struct.pack(">i", -1)
    await peer.stream.send_all(
        b"".join(struct.pack(">ii", 4 + len(h), (t << 24) | len(h)) + h for t, h in ((0, no_code), (1, binary)))
    )
    first = await peer.receive()
    assert first is not None
    assert (first.code, first.opaque, first.remark) == (3, 77, " request type 0 not supported")
    second = await peer.receive()
    assert second is not None
    assert (second.code, second.opaque, second.ext_fields) == (ResponseCode.SUCCESS, 78, {})


class UnencodableAnswer:
    """A processor's bug: answers with an extFields value that is not text, which no header encoder takes."""

    async def process(self, ctx: RequestContext, request: RemotingCommand) -> RemotingCommand | None:
        return request.response(ResponseCode.SUCCESS, ext_fields={"k": b"\xff"})  # type: ignore[dict-item]


async def test_an_answer_that_does_not_encode_closes_only_its_connection():
    """remoting/src/main/java/org/apache/rocketmq/remoting/netty/NettyEncoder.java logs an answer that does not encode
    and closes that channel; the server serves on."""
    dispatcher = Dispatcher()
    dispatcher.register(FAIL, UnencodableAnswer(), ProcessorPool("admin", 1, 100))
    dispatcher.register(ECHO, EchoProcessor(), ProcessorPool("send", 1, 100))
    async with trio.open_nursery() as nursery:
        address = await nursery.start(RemotingServer(dispatcher).serve)
        bad = await RawPeer.connect(address)
        await bad.send(request(FAIL))
        assert await bad.receive() is None
        good = await RawPeer.connect(address)
        await good.send(request(ECHO, body=b"still serving"))
        answer = await good.receive()
        assert answer is not None and answer.body == b"still serving"
        nursery.cancel_scope.cancel()


class HalfPairAnswer:
    """Answers with a lone surrogate in its remark and in an extFields value (Python strings can hold one)."""

    async def process(self, ctx: RequestContext, request: RemotingCommand) -> RemotingCommand | None:
        return request.response(ResponseCode.SUCCESS, remark="half a pair: \ud83d", ext_fields={"k": "v\udc00"})


@pytest.mark.parametrize("serialize_type", [SerializeType.JSON, SerializeType.ROCKETMQ, SerializeType.CBOR])
async def test_a_lone_surrogate_in_an_answer_is_written_as_a_question_mark(serialize_type: SerializeType):
    """Java's encoders write an unpaired surrogate as ``?`` (String.getBytes(UTF_8) after fastjson, Netty's
    writeCharSequence in RocketMQSerializable), so the answer goes out and the connection stays open; our CBOR peers
    get the same (found by a review: cbor2 refused it and the connection closed)."""
    dispatcher = Dispatcher()
    dispatcher.register(FAIL, HalfPairAnswer(), ProcessorPool("admin", 1, 100))
    async with trio.open_nursery() as nursery:
        address = await nursery.start(RemotingServer(dispatcher).serve)
        peer = await RawPeer.connect(address)
        for _ in range(2):
            await peer.send(request(FAIL, serialize_type=serialize_type))
            answer = await peer.receive()
            assert answer is not None
            assert (answer.remark, answer.ext_fields) == ("half a pair: ?", {"k": "v?"})
        nursery.cancel_scope.cancel()


async def test_garbage_frame_closes_only_that_connection(stack):
    server, address, _ = stack
    good = await RawPeer.connect(address)
    bad = await RawPeer.connect(address)
    await bad.stream.send_all(b"\xff\xff\xff\xffgarbage")
    assert await bad.receive() is None
    await good.send(request(ECHO, body=b"ok"))
    resp = await good.receive()
    assert resp is not None and resp.body == b"ok"
    while len(server.connections) != 1:  # the bad connection's task finishes its cleanup
        await trio.sleep(0)
    assert not any(c.closed for c in server.connections)


async def test_idle_connection_is_closed_after_idle_timeout(autojump_clock):
    dispatcher = Dispatcher()
    dispatcher.register(ECHO, EchoProcessor(), ProcessorPool("send", 1, 10))
    server = RemotingServer(dispatcher, ServerConfig(idle_timeout=120.0))
    closed_at: list[float] = []
    closed = trio.Event()

    def on_close(conn: object) -> None:
        closed_at.append(trio.current_time())
        closed.set()

    server.add_close_listener(on_close)
    async with trio.open_nursery() as nursery:
        address = await nursery.start(server.serve)
        peer = await RawPeer.connect(address)
        start = trio.current_time()
        await trio.sleep(100)
        await peer.send(request(ECHO))  # activity pushes the deadline
        assert await peer.receive() is not None
        assert not closed_at
        assert await peer.receive() is None
        await closed.wait()
        assert closed_at[0] - start == pytest.approx(220, abs=1)
        nursery.cancel_scope.cancel()


async def test_frame_above_max_frame_closes_the_connection():
    dispatcher = Dispatcher()
    dispatcher.register(ECHO, EchoProcessor(), ProcessorPool("send", 1, 10))
    async with trio.open_nursery() as nursery:
        address = await nursery.start(RemotingServer(dispatcher, ServerConfig(max_frame=4096)).serve)
        peer = await RawPeer.connect(address)
        await peer.send(request(ECHO, body=b"small"))
        assert (resp := await peer.receive()) is not None and resp.body == b"small"
        await peer.send(request(ECHO, body=b"x" * 8192))
        assert await peer.receive() is None
        nursery.cancel_scope.cancel()


async def test_close_listener_sees_the_connection_and_its_attributes():
    class Tagging:
        async def process(self, ctx, request):
            ctx.connection.attributes["clientId"] = request.ext_fields["clientId"]
            return request.response(ResponseCode.SUCCESS)

    dispatcher = Dispatcher()
    dispatcher.register(ECHO, Tagging(), ProcessorPool("admin", 1, 10))
    server = RemotingServer(dispatcher)
    closed: list[dict[str, object]] = []
    gone = trio.Event()
    server.add_close_listener(lambda conn: (closed.append(dict(conn.attributes)), gone.set()))
    async with trio.open_nursery() as nursery:
        address = await nursery.start(server.serve)
        peer = await RawPeer.connect(address)
        await peer.send(request(ECHO, {"clientId": "10.0.0.1@1234"}))
        assert await peer.receive() is not None
        assert len(server.connections) == 1
        await peer.aclose()
        await gone.wait()
        assert closed == [{"clientId": "10.0.0.1@1234"}] and not server.connections
        nursery.cancel_scope.cancel()


async def test_default_processor_takes_unregistered_codes_and_late_pools_start():
    dispatcher = Dispatcher()
    admin = EchoProcessor()
    dispatcher.set_default(admin, ProcessorPool("admin", 2, 100))
    async with trio.open_nursery() as nursery:
        address = await nursery.start(RemotingServer(dispatcher).serve)
        dispatcher.register(ECHO, EchoProcessor(), ProcessorPool("late", 1, 10))  # registered while running
        peer = await RawPeer.connect(address)
        await peer.send(request(4242, body=b"default"), request(ECHO, body=b"late"))
        bodies = {bytes((await peer.receive()).body) for _ in range(2)}  # type: ignore[union-attr]
        assert bodies == {b"default", b"late"}
        assert [c.code for c in admin.seen] == [4242]
        nursery.cancel_scope.cancel()


async def test_shutdown_by_cancellation_closes_every_connection_and_tells_the_listeners():
    dispatcher = Dispatcher()
    gate = GateProcessor()
    dispatcher.register(SLOW, gate, ProcessorPool("pull", 4, 100))
    server = RemotingServer(dispatcher)
    closed: list[object] = []
    server.add_close_listener(closed.append)
    peers = []
    async with trio.open_nursery() as nursery:
        address = await nursery.start(server.serve)
        for _ in range(3):
            peer = await RawPeer.connect(address)
            await peer.send(request(SLOW))  # held in a worker when the server goes away
            peers.append(peer)
        while gate.entered < 3:
            await trio.sleep(0)
        nursery.cancel_scope.cancel()
    assert len(closed) == 3 and not server.connections
    for peer in peers:
        assert await peer.receive() is None


async def test_request_that_waited_past_max_wait_is_answered_busy_instead_of_processed(autojump_clock):
    async with trio.open_nursery() as nursery:
        peer, gate, first = await held_worker(nursery, SLOW, ProcessorPool("send", 1, 100, max_wait=0.2))
        stale = [request(SLOW), request(SLOW, oneway=True), request(SLOW)]
        await peer.send(*stale)
        await trio.sleep(1.0)  # the one worker is held: the queued requests go stale
        gate.gate.set()
        answers = {r.opaque: r for r in [await peer.receive() for _ in range(3)] if r is not None}
        assert answers[first.opaque].code == ResponseCode.SUCCESS
        for cmd in (stale[0], stale[2]):
            assert answers[cmd.opaque].code == ResponseCode.SYSTEM_BUSY
            assert (answers[cmd.opaque].remark or "").startswith("[TIMEOUT_CLEAN_QUEUE]broker busy")
        assert gate.entered == 1  # no stale request reached the processor
        fresh = request(SLOW, body=b"fresh")
        await peer.send(fresh)
        assert (resp := await peer.receive()) is not None and resp.opaque == fresh.opaque
        assert resp.code == ResponseCode.SUCCESS
        nursery.cancel_scope.cancel()


class _AnswerSink:
    """Collects what a pool worker writes back: the one connection method a processed request reaches."""

    def __init__(self) -> None:
        self.answers: list[RemotingCommand] = []

    def send_nowait(self, response: RemotingCommand) -> None:
        self.answers.append(response)


async def test_a_request_an_idle_worker_takes_is_processed_even_after_the_loop_stalled(autojump_clock):
    """Java's sweep (BrokerFastFailure.cleanExpiredRequestInQueue) only finds requests left in a pool's queue because
    every thread was busy: an idle thread takes a new one at once. Here a request submitted while the worker was idle
    is processed even when the whole loop stalled before the worker ran (a machine too busy to schedule the broker:
    the clock's jump). Before, it was answered SYSTEM_BUSY [TIMEOUT_CLEAN_QUEUE] with size of queue 0."""
    pool = ProcessorPool("send", 1, 100, max_wait=0.2)
    sink = _AnswerSink()
    echo = GateProcessor()
    echo.gate.set()
    async with trio.open_nursery() as nursery:
        await nursery.start(pool.run)
        assert pool.submit(echo, RequestContext(sink), request(SLOW))  # type: ignore[arg-type]
        autojump_clock.jump(1.0)
        while not sink.answers:
            await trio.sleep(0)
        assert [answer.code for answer in sink.answers] == [ResponseCode.SUCCESS]
        assert echo.entered == 1
        nursery.cancel_scope.cancel()


def test_broker_pools_follow_rocketmq_sizes_and_fast_failure_is_opt_in():
    pools = broker_pools(cpus=2)
    assert (pools["send"].workers, pools["send"].queue_capacity) == (2, 10_000)
    assert (pools["pull"].workers, pools["pull"].queue_capacity) == (20, 100_000)
    assert pools["admin"].queue_capacity == math.inf
    assert all(p.max_wait is None for p in pools.values())
    fast = broker_pools(cpus=2, fast_failure=True)
    assert {name: p.max_wait for name, p in fast.items() if p.max_wait is not None} == {
        "send": 0.2,
        "pull": 5.0,
        "heartbeat": 31.0,
        "end_transaction": 3.0,
        "ack": 3.0,
    }
    assert (pools["ack"].workers, pools["ack"].queue_capacity) == (16, 100_000)


async def test_requests_queued_behind_stuck_workers_are_answered_busy_after_max_wait(autojump_clock):
    """BrokerFastFailure sweeps each pool's queue every 10 ms, whether or not a thread is free: a request that waited
    ``waitTimeMillsInSendQueue`` (200 ms) is answered SYSTEM_BUSY [TIMEOUT_CLEAN_QUEUE] then, so a producer fails
    over to another broker at once. Here the refusal waited for a worker to come free: while the workers were held (a
    stuck processor) queued sends were never answered, and producers timed out instead."""
    async with trio.open_nursery() as nursery:
        peer, gate, first = await held_worker(nursery, SLOW, ProcessorPool("send", 1, 100, max_wait=0.2))
        sent_at = trio.current_time()
        stale = [request(SLOW), request(SLOW)]
        await peer.send(*stale)
        answers: list[RemotingCommand | None] = []
        with trio.move_on_after(1.0):  # the worker stays held throughout
            while len(answers) < len(stale):
                answers.append(await peer.receive())
        assert gate.entered == 1 and not gate.gate.is_set()
        assert [(r.opaque, r.code) for r in answers if r is not None] == [
            (cmd.opaque, ResponseCode.SYSTEM_BUSY) for cmd in stale
        ]
        assert all((r.remark or "").startswith("[TIMEOUT_CLEAN_QUEUE]broker busy") for r in answers if r)
        assert trio.current_time() - sent_at == pytest.approx(0.2, abs=0.05)
        gate.gate.set()
        assert (resp := await peer.receive()) is not None and resp.opaque == first.opaque
        nursery.cancel_scope.cancel()


async def test_a_lowered_max_wait_reaches_requests_already_queued_behind_stuck_workers(autojump_clock):
    """BrokerFastFailure reads BrokerConfig at each 10 ms sweep, so UPDATE_BROKER_CONFIG lowering
    ``waitTimeMillsInSendQueue`` refuses the requests queued behind stuck threads at once. Here the sweeper slept on
    until the wait the request was queued under."""
    pool = ProcessorPool("send", 1, 100, max_wait=1.5)
    async with trio.open_nursery() as nursery:
        peer, gate, _ = await held_worker(nursery, SLOW, pool)
        queued = request(SLOW)
        await peer.send(queued)
        while pool.queued == 0:
            await trio.sleep(0)
        await trio.sleep(1.0)
        changed_at = trio.current_time()
        pool.max_wait = 0.5  # what UPDATE_BROKER_CONFIG does (broker/controller.py apply_fast_failure)
        assert (resp := await peer.receive()) is not None and resp.opaque == queued.opaque
        assert resp.code == ResponseCode.SYSTEM_BUSY
        assert trio.current_time() - changed_at == pytest.approx(0, abs=0.05)
        gate.gate.set()
        nursery.cancel_scope.cancel()


class _Silent:
    async def process(self, ctx: RequestContext, request: RemotingCommand) -> RemotingCommand | None:
        return None


async def test_a_request_through_a_pool_runs_no_python_attribute_hook():
    """A worker writes ``busy`` twice per request. A change hook on ``max_wait`` (``on_setattr``) made attrs give
    the pool a Python ``__setattr__`` that every such write went through: the pool path cost 1.8 times the CPU per
    request of the commit before the sweeper (``python -m bench.fast_failure --only pool``), with fast failure on or
    off."""
    pool = ProcessorPool("send", 1, 100, max_wait=0.2)
    called: list[str] = []

    def profile(frame, event, arg):
        if event == "call":
            called.append(frame.f_code.co_name)

    async with trio.open_nursery() as nursery:
        await nursery.start(pool.run)
        sys.setprofile(profile)
        try:
            for _ in range(8):
                pool.submit(_Silent(), None, request(SLOW))  # type: ignore[arg-type]  # never touched
            while not pool.idle:
                await trio.sleep(0)
        finally:
            sys.setprofile(None)
        nursery.cancel_scope.cancel()
    assert "process" in called
    assert "__setattr__" not in called


async def test_a_request_stale_behind_stuck_workers_is_answered_after_a_stall_whoever_runs_first(autojump_clock):
    """BrokerFastFailure refuses a request that waited ``waitTimeMillsInSendQueue`` behind busy threads at its next
    sweep. After the loop was held past that wait (an append on the Trio thread; here the reader's admission), the
    sweeper judged the oldest entry of its wait list, which was a request already handed to an idle worker the loop
    had not run yet: when the scheduler ran the sweeper first, it slept another full wait, and the stale request
    behind the stuck worker was answered at 500 ms instead of 300 ms. Trio runs a batch forwards or backwards at
    random, hence the rounds."""
    for _ in range(16):
        gate = GateProcessor()

        def hold_the_loop(ctx: RequestContext, cmd: RemotingCommand) -> RemotingCommand | None:
            if cmd.code == ECHO:
                autojump_clock.jump(0.3)
                return cmd.response(ResponseCode.SUCCESS)
            return None

        dispatcher = Dispatcher(admission=hold_the_loop)
        dispatcher.register(SLOW, gate, ProcessorPool("send", 2, 100, max_wait=0.2))
        async with trio.open_nursery() as nursery:
            address = await nursery.start(RemotingServer(dispatcher).serve)
            peer = await RawPeer.connect(address)
            await peer.send(request(SLOW))  # holds one worker
            while gate.entered == 0:
                await trio.sleep(0)
            taken, stale = request(SLOW), request(SLOW)
            sent_at = trio.current_time()
            await peer.send(taken, stale, request(ECHO))  # the idle worker's, one behind the held one, the stall
            answers = {}
            while stale.opaque not in answers:
                answer = await peer.receive()
                assert answer is not None
                answers[answer.opaque] = (answer, trio.current_time() - sent_at)
            answer, elapsed = answers[stale.opaque]
            assert answer.code == ResponseCode.SYSTEM_BUSY and (answer.remark or "").startswith("[TIMEOUT_CLEAN_QUEUE]")
            assert elapsed == pytest.approx(0.3, abs=0.05)
            assert gate.entered == 2 and taken.opaque not in answers
            gate.gate.set()
            nursery.cancel_scope.cancel()
