"""Which gRPC stack serves the 5.x front door from a Trio process: measured, not assumed (docs/grpc.md#choosing-the-
stack).

Three servers answer the same two RPCs of ``apache.rocketmq.v2.MessagingService`` with the same protobuf messages,
each in a child process (``python -m bench.grpc_stack serve VARIANT``); the client is grpcio's, as in the official
5.x clients, in this process:

- ``grpcio-bridge``: grpcio's asyncio server on its own thread, each call computed on the Trio thread through
  :class:`proxy.bridge.TrioBridge` (what ``proxy/`` ships);
- ``grpcio-direct``: the same server computing on its own asyncio thread (the bridge's cost is the difference);
- ``grpcio-threads``: grpcio's classic server (a thread pool, blocking handlers), computing in its worker threads;
- ``grpcio-threads-trio``: the same server, each call computed on a Trio thread (worker threads block on a lock the
  Trio side releases: what serving the broker from it would cost);
- ``h2-trio``: pure-Python HTTP/2 (``h2``) on Trio streams with hand-written gRPC framing, no thread.

Figures, one JSON line each: ``unary`` = QueryRoute round trips one after another (p50/p99 in µs, calls/s, the
server process's CPU time per call); ``stream`` = ReceiveMessage server streams of 32 messages of 1 KiB each
(messages/s). Rounds interleave the variants (the machine is shared and noisy); the summary gives each figure's range
and its ratio to ``grpcio-bridge``.
Usage: ``python -m bench.grpc_stack [--rounds 3] [--calls 2000] [--streams 200]``.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import grpc
import trio

from bench.load.stats import percentile
from proxy.pb import definition, service, service_grpc

VARIANTS = ("grpcio-bridge", "grpcio-direct", "grpcio-threads", "grpcio-threads-trio", "h2-trio")
BODY = b"x" * 1024


def emit(record: dict[str, object]) -> None:
    print(json.dumps(record), flush=True)


# ---- what every server answers ---------------------------------------------------------------------------------


def route_answer(req: Any) -> Any:
    response = service.QueryRouteResponse(status=definition.Status(code=definition.Code.OK, message="OK"))
    queue = response.message_queues.add(id=0, permission=definition.Permission.READ_WRITE)
    queue.topic.CopyFrom(req.topic)
    return response


def receive_answer(req: Any) -> list[Any]:
    out = [service.ReceiveMessageResponse(status=definition.Status(code=definition.Code.OK, message="OK"))]
    for i in range(req.batch_size):
        msg = definition.Message(body=BODY)
        msg.topic.name = req.message_queue.topic.name
        msg.system_properties.message_id = f"{i:034d}"
        out.append(service.ReceiveMessageResponse(message=msg))
    return out


# ---- grpcio servers --------------------------------------------------------------------------------------------


class BenchServicer(service_grpc.MessagingServiceServicer):  # type: ignore[misc]
    def __init__(self, bridge: Any | None) -> None:
        self.bridge = bridge

    async def _on_trio(self, fn: Any, req: Any) -> Any:
        if self.bridge is None:
            return fn(req)
        return await self.bridge.call_sync(fn, req)  # as proxy/servicer.py serves the RPCs that never wait

    async def QueryRoute(self, request: Any, context: Any) -> Any:
        return await self._on_trio(route_answer, request)

    async def ReceiveMessage(self, request: Any, context: Any) -> Any:
        for response in await self._on_trio(receive_answer, request):
            yield response


async def serve_grpcio(bridged: bool) -> None:
    from proxy.server import GrpcServer

    server = GrpcServer(lambda bridge, _peer: BenchServicer(bridge if bridged else None), "127.0.0.1", 0)
    async with trio.open_nursery() as nursery:
        port = await nursery.start(server.serve)
        print(port, flush=True)


class ThreadedServicer(service_grpc.MessagingServiceServicer):  # type: ignore[misc]
    def QueryRoute(self, request: Any, context: Any) -> Any:
        return route_answer(request)

    def ReceiveMessage(self, request: Any, context: Any) -> Any:
        yield from receive_answer(request)


def serve_grpcio_threads() -> None:
    from concurrent import futures

    server = grpc.server(futures.ThreadPoolExecutor(4))
    service_grpc.add_MessagingServiceServicer_to_server(ThreadedServicer(), server)
    port = server.add_insecure_port("127.0.0.1:0")
    server.start()
    print(port, flush=True)
    server.wait_for_termination()


class ThreadsToTrio:
    """What a thread-pool server would need to compute on the Trio thread: each worker thread queues its call for
    the Trio thread (one ``run_sync_soon`` wake-up per batch, as :class:`proxy.bridge.TrioBridge`) and blocks on a
    lock the Trio side releases with the answer."""

    def __init__(self) -> None:
        import collections
        import threading

        self._token = trio.lowlevel.current_trio_token()
        self._jobs: collections.deque[Any] = collections.deque()
        self._scheduled = False
        self._lock = threading.Lock  # a fresh lock per call

    def run(self, fn: Any, req: Any) -> Any:
        done = self._lock()
        done.acquire()
        box: list[Any] = []

        def job() -> None:
            box.append(fn(req))
            done.release()

        self._jobs.append(job)
        if not self._scheduled:
            self._scheduled = True
            self._token.run_sync_soon(self._drain)
        done.acquire()
        return box[0]

    def _drain(self) -> None:
        self._scheduled = False
        while self._jobs:
            self._jobs.popleft()()


class ThreadedTrioServicer(service_grpc.MessagingServiceServicer):  # type: ignore[misc]
    def __init__(self, bridge: ThreadsToTrio) -> None:
        self.bridge = bridge

    def QueryRoute(self, request: Any, context: Any) -> Any:
        return self.bridge.run(route_answer, request)

    def ReceiveMessage(self, request: Any, context: Any) -> Any:
        yield from self.bridge.run(receive_answer, request)


async def serve_grpcio_threads_trio() -> None:
    from concurrent import futures

    server = grpc.server(futures.ThreadPoolExecutor(16))
    service_grpc.add_MessagingServiceServicer_to_server(ThreadedTrioServicer(ThreadsToTrio()), server)
    port = server.add_insecure_port("127.0.0.1:0")
    server.start()
    print(port, flush=True)
    await trio.sleep_forever()


# ---- h2 on Trio ------------------------------------------------------------------------------------------------


def grpc_frame(message: Any) -> bytes:
    data = message.SerializeToString()
    return b"\x00" + len(data).to_bytes(4, "big") + data


async def h2_connection(stream: trio.SocketStream) -> None:
    import h2.config
    import h2.connection
    import h2.events

    conn = h2.connection.H2Connection(h2.config.H2Configuration(client_side=False, header_encoding="utf-8"))
    conn.initiate_connection()
    await stream.send_all(conn.data_to_send())
    paths: dict[int, str] = {}
    bodies: dict[int, bytearray] = {}
    pending: dict[int, bytes] = {}  # response bytes waiting for flow-control window, trailers sent after

    def flush(sid: int) -> None:
        data = pending.get(sid)
        while data:
            window = min(conn.local_flow_control_window(sid), conn.max_outbound_frame_size)
            if window <= 0:
                break
            conn.send_data(sid, data[:window])
            data = data[window:]
        if data:
            pending[sid] = data
        else:
            pending.pop(sid, None)
            conn.send_headers(sid, [("grpc-status", "0")], end_stream=True)

    while True:
        data = await stream.receive_some(65536)
        if not data:
            return
        for event in conn.receive_data(data):
            if isinstance(event, h2.events.RequestReceived):
                paths[event.stream_id] = dict(event.headers)[":path"]
                bodies[event.stream_id] = bytearray()
            elif isinstance(event, h2.events.DataReceived):
                bodies[event.stream_id] += event.data
                conn.acknowledge_received_data(event.flow_controlled_length, event.stream_id)
            elif isinstance(event, h2.events.StreamEnded):
                sid = event.stream_id
                body = bytes(bodies.pop(sid))[5:]
                if paths.pop(sid).endswith("/QueryRoute"):
                    answer = grpc_frame(route_answer(service.QueryRouteRequest.FromString(body)))
                else:
                    answers = receive_answer(service.ReceiveMessageRequest.FromString(body))
                    answer = b"".join(grpc_frame(a) for a in answers)
                conn.send_headers(sid, [(":status", "200"), ("content-type", "application/grpc")])
                pending[sid] = answer
                flush(sid)
            elif isinstance(event, h2.events.WindowUpdated):
                for sid in list(pending) if event.stream_id == 0 else [event.stream_id]:
                    if sid in pending:
                        flush(sid)
        await stream.send_all(conn.data_to_send())


async def serve_h2() -> None:
    listeners = await trio.open_tcp_listeners(0, host="127.0.0.1")
    print(listeners[0].socket.getsockname()[1], flush=True)
    await trio.serve_listeners(h2_connection, listeners)


# ---- the client ------------------------------------------------------------------------------------------------


def cpu_seconds(pid: int) -> float:
    """User + system CPU time of a process (Linux ``/proc``)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def measure(port: int, pid: int, calls: int, streams: int) -> dict[str, float]:
    with grpc.insecure_channel(f"127.0.0.1:{port}") as channel:
        stub = service_grpc.MessagingServiceStub(channel)
        route = service.QueryRouteRequest()
        route.topic.name = "Bench"
        for _ in range(50):
            stub.QueryRoute(route, timeout=5)
        samples = []
        cpu = cpu_seconds(pid)
        started = time.perf_counter()
        for _ in range(calls):
            t0 = time.perf_counter()
            stub.QueryRoute(route, timeout=5)
            samples.append(time.perf_counter() - t0)
        unary_elapsed = time.perf_counter() - started
        unary_cpu = cpu_seconds(pid) - cpu
        receive = service.ReceiveMessageRequest(batch_size=32)
        receive.message_queue.topic.name = "Bench"
        started = time.perf_counter()
        received = sum(
            1 for _ in range(streams) for r in stub.ReceiveMessage(receive, timeout=10) if r.HasField("message")
        )
        stream_elapsed = time.perf_counter() - started
    samples.sort()
    return {
        "p50_us": round(percentile(samples, 0.5) * 1e6, 1),
        "p99_us": round(percentile(samples, 0.99) * 1e6, 1),
        "calls_per_s": round(calls / unary_elapsed),
        "server_cpu_us_per_call": round(unary_cpu / calls * 1e6),
        "stream_msgs_per_s": round(received / stream_elapsed),
    }


def run_variant(variant: str, calls: int, streams: int) -> dict[str, float]:
    proc = subprocess.Popen(
        [sys.executable, "-m", "bench.grpc_stack", "serve", variant], stdout=subprocess.PIPE, text=True
    )
    try:
        assert proc.stdout is not None
        port = int(proc.stdout.readline())
        return measure(port, proc.pid, calls, streams)
    finally:
        proc.terminate()
        proc.wait(10)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("mode", nargs="?", default="bench")
    parser.add_argument("variant", nargs="?")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--calls", type=int, default=2000)
    parser.add_argument("--streams", type=int, default=200)
    args = parser.parse_args()
    if args.mode == "serve":
        if args.variant == "h2-trio":
            trio.run(serve_h2)
        elif args.variant == "grpcio-threads":
            serve_grpcio_threads()
        elif args.variant == "grpcio-threads-trio":
            trio.run(serve_grpcio_threads_trio)
        else:
            trio.run(serve_grpcio, args.variant == "grpcio-bridge")
        return
    results: dict[str, list[dict[str, float]]] = {v: [] for v in VARIANTS}
    for round_no in range(args.rounds):
        for variant in VARIANTS:
            figures = run_variant(variant, args.calls, args.streams)
            results[variant].append(figures)
            emit({"bench": "grpc_stack", "round": round_no, "variant": variant, **figures})
    base = {k: statistics.median(r[k] for r in results["grpcio-bridge"]) for k in results["grpcio-bridge"][0]}
    for variant, rounds in results.items():
        summary: dict[str, object] = {"bench": "grpc_stack", "summary": variant}
        for key in rounds[0]:
            values = [r[key] for r in rounds]
            summary[key] = [min(values), max(values)]
            summary[f"{key}_vs_bridge"] = round(statistics.median(values) / base[key], 2)
        emit(summary)


if __name__ == "__main__":
    asyncio.set_event_loop_policy(None)
    main()
