"""RPC round trips per second: our server + client against a bare Trio echo of the same frame size.

Each stack's server runs in its own process (``python -m bench.rpc serve <kind>``) and the client in this one, so on
a 2-core machine each side gets a core, for both stacks alike. Scenarios: connections x requests in flight
(1x1, 1x32, 8x32 by default). Output: one JSON object per line, e.g.::

    {"bench": "rpc", "connections": 1, "inflight": 32, "frame_bytes": 301, "echo_rps": ..., "rpc_rps": ...,
     "ratio": 0.71}

- ``rpc``: ``RemotingClient.invoke`` of a SEND_MESSAGE-shaped request (ext fields and a 128-byte body) answered by
  a processor on a send pool with a response carrying msgId/queueId/queueOffset, the whole path a real send takes
  minus the store;
- ``echo``: the floor. The server reads a length prefix and payload and writes the frame back; the client keeps
  ``inflight`` frames outstanding per connection, writing one frame per frame received. Frames are the byte size of
  our request frame.

``--profile`` re-runs the same measurement under ``py-spy record --subprocesses`` and writes
``bench/results/rpc.svg``; compare stacks as ratios within one run, never across runs.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from functools import partial
from typing import Final

import attrs
import trio

from bench.profiling import py_spy
from remoting.client import RemotingClient
from remoting.codec.codes import RequestCode, ResponseCode
from remoting.codec.command import RemotingCommand, request
from remoting.codec.frame import encode_command
from remoting.dispatch import Dispatcher, ProcessorPool, RequestContext
from remoting.server import RemotingServer

SCENARIOS: Final = ((1, 1), (1, 32), (8, 32))

SEND_FIELDS: Final = {
    "producerGroup": "bench_producer_group",
    "topic": "BenchTopic",
    "defaultTopic": "TBW102",
    "defaultTopicQueueNums": "4",
    "queueId": "1",
    "sysFlag": "0",
    "bornTimestamp": "1700000000000",
    "flag": "0",
    "properties": "UNIQ_KEY\x017F0000010001000000000000000000\x02WAIT\x01true\x02",
    "reconsumeTimes": "0",
    "unitMode": "false",
    "batch": "false",
}
BODY: Final = b"m" * 128


def send_request() -> RemotingCommand:
    return request(RequestCode.SEND_MESSAGE, dict(SEND_FIELDS), BODY)


class SendLikeProcessor:
    """Answers like a successful send, without a store."""

    def __init__(self) -> None:
        self.offset = 0

    async def process(self, ctx: RequestContext, req: RemotingCommand) -> RemotingCommand | None:
        self.offset += 1
        fields = {
            "msgId": "7F00000100002A9F0000000000000000",
            "queueId": req.ext_fields["queueId"],
            "queueOffset": str(self.offset),
            "MSG_REGION": "DefaultRegion",
            "TRACE_ON": "true",
        }
        return req.response(ResponseCode.SUCCESS, ext_fields=fields)


# -- servers (child processes) --------------------------------------------------------------------------------


async def serve_rpc() -> None:
    dispatcher = Dispatcher()
    dispatcher.register(RequestCode.SEND_MESSAGE, SendLikeProcessor(), ProcessorPool("send", 4, 10_000))
    async with trio.open_nursery() as nursery:
        _, port = await nursery.start(RemotingServer(dispatcher).serve)
        print(port, flush=True)


async def _echo_connection(stream: trio.SocketStream) -> None:
    buf = bytearray()
    while data := await stream.receive_some(65536):
        buf += data
        pos = 0
        while len(buf) - pos >= 4:
            end = pos + 4 + int.from_bytes(buf[pos : pos + 4], "big")
            if end > len(buf):
                break
            await stream.send_all(bytes(buf[pos:end]))
            pos = end
        del buf[:pos]


async def serve_echo() -> None:
    async with trio.open_nursery() as nursery:
        listeners = await nursery.start(trio.serve_tcp, _echo_connection, 0)
        print(listeners[0].socket.getsockname()[1], flush=True)


# -- clients (this process) -----------------------------------------------------------------------------------


@attrs.frozen
class Completed:
    """What a timed load completed: ``count`` requests in ``seconds`` (its last in-flight requests included)."""

    count: int
    seconds: float

    @property
    def rate(self) -> float:
        return self.count / self.seconds


async def echo_client(port: int, connections: int, inflight: int, frame: bytes, duration: float) -> Completed:
    counts = [0] * connections
    deadline = trio.current_time() + duration

    async def one(i: int) -> None:
        stream = await trio.open_tcp_stream("127.0.0.1", port)
        await stream.send_all(frame * inflight)
        buf, outstanding = bytearray(), inflight
        while outstanding:
            data = await stream.receive_some(65536)
            buf += data
            pos = 0
            while len(buf) - pos >= 4:
                end = pos + 4 + int.from_bytes(buf[pos : pos + 4], "big")
                if end > len(buf):
                    break
                pos = end
                counts[i] += 1
                outstanding -= 1
                if trio.current_time() < deadline:
                    await stream.send_all(frame)
                    outstanding += 1
            del buf[:pos]
        await stream.aclose()

    start = trio.current_time()
    async with trio.open_nursery() as nursery:
        for i in range(connections):
            nursery.start_soon(one, i)
    return Completed(sum(counts), trio.current_time() - start)


async def rpc_client(port: int, connections: int, inflight: int, duration: float) -> Completed:
    addresses = [f"127.0.0.1:{port}" for _ in range(connections)]
    count = 0
    deadline = trio.current_time() + duration
    clients = [RemotingClient() for _ in range(connections)]  # one client each: one connection per address

    async def caller(client: RemotingClient, address: str) -> None:
        nonlocal count
        while trio.current_time() < deadline:
            response = await client.invoke(address, send_request(), timeout=30)
            assert response.code == ResponseCode.SUCCESS
            count += 1

    async with contextlib.AsyncExitStack() as stack:
        for client, address in zip(clients, addresses, strict=True):
            await stack.enter_async_context(client)
            await client.connection(address)
        start = trio.current_time()
        async with trio.open_nursery() as nursery:
            for client, address in zip(clients, addresses, strict=True):
                for _ in range(inflight):
                    nursery.start_soon(caller, client, address)
        elapsed = trio.current_time() - start
    return Completed(count, elapsed)


def start_server(kind: str) -> tuple[subprocess.Popen[str], int]:
    proc = subprocess.Popen(
        [sys.executable, "-m", "bench.rpc", "serve", kind], stdout=subprocess.PIPE, text=True, env=os.environ.copy()
    )
    assert proc.stdout is not None
    return proc, int(proc.stdout.readline())


def process_cpu_seconds(pid: int) -> float:
    """User + system CPU of another process (Linux ``/proc``); 0.0 where unavailable."""
    try:
        with open(f"/proc/{pid}/stat") as stat:
            fields = stat.read().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


@attrs.define
class Tally:
    """Requests, wall seconds and CPU seconds of the client (this process) and the server, summed over rounds."""

    rates: list[float] = attrs.field(factory=list)
    requests: int = 0
    client_cpu: float = 0.0
    server_cpu: float = 0.0

    def run(self, server_pid: int, client: Callable[[], Completed]) -> None:
        server0, client0 = process_cpu_seconds(server_pid), time.process_time()
        done = client()
        self.server_cpu += process_cpu_seconds(server_pid) - server0
        self.client_cpu += time.process_time() - client0
        self.rates.append(done.rate)
        self.requests += done.count

    def us_per_request(self, cpu: float) -> float:
        return round(cpu / self.requests * 1e6, 1) if self.requests else 0.0


def measure(duration: float, rounds: int, scenarios: tuple[tuple[int, int], ...]) -> None:
    frame = encode_command(send_request())
    echo_proc, echo_port = start_server("echo")
    rpc_proc, rpc_port = start_server("rpc")
    span = duration / rounds
    try:
        for connections, inflight in scenarios:
            trio.run(echo_client, echo_port, connections, inflight, frame, 0.1)  # warm both servers up
            trio.run(rpc_client, rpc_port, connections, inflight, 0.1)
            # Alternate short rounds so load from anything else on the machine hits both stacks alike.
            echo, ours = Tally(), Tally()
            for _ in range(rounds):
                echo.run(echo_proc.pid, partial(trio.run, echo_client, echo_port, connections, inflight, frame, span))
                ours.run(rpc_proc.pid, partial(trio.run, rpc_client, rpc_port, connections, inflight, span))
            line = {
                "bench": "rpc",
                "connections": connections,
                "inflight": inflight,
                "frame_bytes": len(frame),
                "echo_rps": round(statistics.median(echo.rates)),
                "rpc_rps": round(statistics.median(ours.rates)),
                "ratio": round(statistics.median(r / e for r, e in zip(ours.rates, echo.rates, strict=True)), 3),
                # CPU per request is steadier than rates on a shared machine: it does not count time spent waiting.
                "echo_client_cpu_us": echo.us_per_request(echo.client_cpu),
                "echo_server_cpu_us": echo.us_per_request(echo.server_cpu),
                "rpc_client_cpu_us": ours.us_per_request(ours.client_cpu),
                "rpc_server_cpu_us": ours.us_per_request(ours.server_cpu),
                "rounds": rounds,
            }
            print(json.dumps(line), flush=True)
    finally:
        for proc in (echo_proc, rpc_proc):
            proc.terminate()
            proc.wait()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0] if __doc__ else None)
    parser.add_argument("mode", nargs="?", default="measure", choices=["measure", "serve"])
    parser.add_argument("kind", nargs="?", choices=["echo", "rpc"])
    parser.add_argument("--duration", type=float, default=1.0, help="seconds per stack and scenario")
    parser.add_argument("--rounds", type=int, default=5, help="alternating rounds per scenario (median reported)")
    parser.add_argument("--scenario", action="append", help="CONNECTIONSxINFLIGHT, repeatable (default 1x1 1x32 8x32)")
    parser.add_argument("--profile", action="store_true", help="re-run under py-spy, writing bench/results/rpc.svg")
    args = parser.parse_args()
    if args.mode == "serve":
        with contextlib.suppress(KeyboardInterrupt):
            trio.run(serve_rpc if args.kind == "rpc" else serve_echo)
        return
    scenarios = (
        tuple((int(c), int(n)) for c, n in (s.split("x") for s in args.scenario)) if args.scenario else SCENARIOS
    )
    measure(args.duration, args.rounds, scenarios)
    if args.profile:
        os.makedirs("bench/results", exist_ok=True)
        argv = [sys.executable, "-m", "bench.rpc", "--duration", str(args.duration), "--rounds", str(args.rounds)]
        for connections, inflight in scenarios:
            argv += ["--scenario", f"{connections}x{inflight}"]
        subprocess.run(
            [py_spy(), "record", "--subprocesses", "-o", "bench/results/rpc.svg", "--", *argv],
            check=True,
        )


if __name__ == "__main__":
    main()
