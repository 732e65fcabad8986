"""Request timing in the transport (remoting/rpc_metrics.py) over real loopback sockets: every answered request is
counted once under its request and response code, whoever answers it (a worker, the dispatcher's SYSTEM_BUSY, a
late answer); oneway requests count when their processor returns; nothing is timed without a recorder. And the
pools' head wait (the runtime info's ``*ThreadPoolQueueHeadWaitTimeMills``)."""

from __future__ import annotations

import time

import trio

from remoting.codec.codes import ResponseCode
from remoting.codec.command import RemotingCommand, request
from remoting.codec.frame import encode_command
from remoting.dispatch import Dispatcher, ProcessorPool
from remoting.processor import RequestContext
from remoting.rpc_metrics import RPC_LATENCY_BUCKETS_MS, RpcLatency
from remoting.server import RemotingServer
from tests.remoting.helpers import EchoProcessor, GateProcessor, RawPeer, held_worker

ECHO, SLOW, LATE, FAST, UNTIMED = 1001, 1002, 1004, 1005, 1006


class LateProcessor:
    """Answers nothing now; the test answers later through the connection (as a group commit or a held pull)."""

    def __init__(self) -> None:
        self.parked: list[tuple[RequestContext, RemotingCommand]] = []

    async def process(self, ctx: RequestContext, req: RemotingCommand) -> RemotingCommand | None:
        self.parked.append((ctx, req))
        return None


def counts(recorder: RpcLatency) -> dict[tuple[int, int, bool, str], int]:
    return {key: sum(buckets) for key, buckets, _ in recorder.snapshot()}


async def test_each_answered_request_is_timed_once_whoever_answers_it() -> None:
    recorder = RpcLatency()
    dispatcher = Dispatcher()
    gate, late = GateProcessor(), LateProcessor()
    dispatcher.register(ECHO, EchoProcessor(), ProcessorPool("send", 2, 100))
    dispatcher.register(SLOW, gate, ProcessorPool("pull", 1, 0))
    dispatcher.register(LATE, late, ProcessorPool("admin", 1, 100))
    server = RemotingServer(dispatcher, rpc_latency=recorder)
    async with trio.open_nursery() as nursery:
        address = await nursery.start(server.serve)
        peer = await RawPeer.connect(address)
        await peer.send(
            *[request(ECHO) for _ in range(5)], request(ECHO, oneway=True), request(4242), request(4242, oneway=True)
        )
        for _ in range(6):
            assert await peer.receive() is not None
        await peer.send(request(SLOW))
        while gate.entered == 0:
            await trio.sleep(0)
        await peer.send(request(SLOW))  # the pool's only worker is busy and it has no queue: SYSTEM_BUSY
        busy = await peer.receive()
        assert busy is not None and busy.code == ResponseCode.SYSTEM_BUSY
        gate.gate.set()
        assert await peer.receive() is not None
        await peer.send(request(LATE))
        while not late.parked:
            await trio.sleep(0)
        ctx, parked = late.parked[0]
        await ctx.connection.send(parked.response(ResponseCode.SUCCESS))
        assert await peer.receive() is not None
        assert all(not c._timed for c in server.connections)  # nothing left behind once everything is answered
        nursery.cancel_scope.cancel()
    assert counts(recorder) == {
        (ECHO, ResponseCode.SUCCESS, False, "success"): 5,
        (ECHO, ResponseCode.SUCCESS, False, "oneway"): 1,
        (4242, ResponseCode.REQUEST_CODE_NOT_SUPPORTED, False, "success"): 1,
        (4242, ResponseCode.REQUEST_CODE_NOT_SUPPORTED, False, "oneway"): 1,
        (SLOW, ResponseCode.SYSTEM_BUSY, False, "success"): 1,
        (SLOW, ResponseCode.SUCCESS, False, "success"): 1,
        (LATE, ResponseCode.SUCCESS, False, "success"): 1,
    }


async def test_a_slow_answer_lands_in_a_higher_bucket() -> None:
    recorder = RpcLatency()
    recorder.observe(1, 0, False, "success", 0)
    recorder.observe(1, 0, False, "success", 1_999_999)  # 1 ms (whole milliseconds, as Java's elapsed)
    recorder.observe(1, 0, False, "success", 50_000_000)
    recorder.observe(1, 0, True, "success", 5_000_000_000)
    series = {key: (buckets, total) for key, buckets, total in recorder.snapshot()}
    buckets, total = series[(1, 0, False, "success")]
    assert buckets[0] == 2 and buckets[RPC_LATENCY_BUCKETS_MS.index(100)] == 1 and total == 51
    held, _ = series[(1, 0, True, "success")]
    assert held[-1] == 1  # above 3 s


class FrameAnswerer:
    """A fast handler answering SUCCESS as an encoded frame (as the send fast path writes its template), telling
    the connection it answered when it was registered as timed."""

    def __init__(self, *, timed: bool) -> None:
        self.taken = 0
        self.timed = timed

    def __call__(self, ctx: RequestContext, fields: dict[str, object], body: bytes) -> bool:
        opaque, code = fields["opaque"], fields["code"]
        assert isinstance(opaque, int) and isinstance(code, int)
        self.taken += 1
        ctx.connection.send_frame_nowait(encode_command(RemotingCommand(code, opaque).response(ResponseCode.SUCCESS)))
        if self.timed:
            ctx.connection.fast_answered(opaque)
        return True


async def test_a_timed_fast_handler_keeps_taking_requests_and_each_is_timed_once() -> None:
    """With request timing on, a fast handler registered as timed still takes its requests (the send fast path:
    timing used to send every request down the general path, about twice the broker's CPU per send), each timed
    once under its code; one not registered as timed is not offered them, and the general path times them."""
    recorder = RpcLatency()
    dispatcher = Dispatcher()
    timed, untimed = FrameAnswerer(timed=True), FrameAnswerer(timed=False)
    dispatcher.register([FAST, UNTIMED], EchoProcessor(), ProcessorPool("send", 1, 100))
    dispatcher.register_fast(FAST, timed, timed=True)
    dispatcher.register_fast(UNTIMED, untimed)
    server = RemotingServer(dispatcher, rpc_latency=recorder)
    async with trio.open_nursery() as nursery:
        address = await nursery.start(server.serve)
        peer = await RawPeer.connect(address)
        for code in (FAST, UNTIMED):
            for _ in range(3):
                await peer.send(request(code))
                assert await peer.receive() is not None
        assert all(not c._timed for c in server.connections)
        nursery.cancel_scope.cancel()
    assert (timed.taken, untimed.taken) == (3, 0)
    assert counts(recorder) == {
        (FAST, ResponseCode.SUCCESS, False, "success"): 3,
        (UNTIMED, ResponseCode.SUCCESS, False, "success"): 3,
    }


async def test_without_a_recorder_no_request_is_timed() -> None:
    dispatcher = Dispatcher()
    dispatcher.register(ECHO, EchoProcessor(), ProcessorPool("send", 1, 10))
    server = RemotingServer(dispatcher)
    async with trio.open_nursery() as nursery:
        address = await nursery.start(server.serve)
        peer = await RawPeer.connect(address)
        await peer.send(request(ECHO))
        assert await peer.receive() is not None
        (connection,) = server.connections
        assert connection.rpc_latency is None and not connection._timed
        nursery.cancel_scope.cancel()


async def test_head_wait_is_how_long_the_oldest_queued_request_has_waited() -> None:
    pool = ProcessorPool("send", 1, 100)
    async with trio.open_nursery() as nursery:
        peer, gate, _ = await held_worker(nursery, SLOW, pool)
        assert pool.head_wait_ms == 0  # the one request is in the worker, none waits
        await peer.send(request(SLOW), request(SLOW))
        while pool.queued < 2:
            await trio.sleep(0)
        time.sleep(0.03)  # the queued requests wait at least this long (a lower bound, not a threshold)
        assert pool.head_wait_ms >= 30
        gate.gate.set()
        for _ in range(3):
            assert await peer.receive() is not None
        assert pool.head_wait_ms == 0
        nursery.cancel_scope.cancel()


def test_the_cardinality_limit_counts_the_overflow_series_as_opentelemetry_does() -> None:
    """``metricsOtelCardinalityLimit`` is the most series an instrument holds, its overflow series included:
    OpenTelemetry 1.29's DefaultSynchronousMetricStorage (which RocketMQ 5.3.3 ships) keeps ``limit - 1`` label sets
    and records every further one under ``otel.metric.overflow=true``. Ours kept ``limit`` label sets and the
    overflow series besides, one more than Java."""
    recorder = RpcLatency(cardinality_limit=3)
    for code in range(5):
        recorder.observe(code, ResponseCode.SUCCESS, False, "success", 0)
    assert [key[0] for key, _, _ in recorder.snapshot()] == [0, 1]
    overflow = recorder.overflow_snapshot()
    assert overflow is not None and sum(overflow[0]) == 3
