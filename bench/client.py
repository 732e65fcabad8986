"""End-to-end producer -> consumer throughput and latency through our client, beside the raw driver of
``bench.broker`` (``send_load``).

The embedded cluster (name server + broker, ASYNC_FLUSH, temporary data) runs in its own process
(``python -m bench.client serve``) and the load in this one. One JSON object per line::

    {"bench": "client", "op": "send", "inflight": 32, "client_rps": ..., "raw_rps": ..., "cost_ratio": ...}
    {"bench": "client", "op": "e2e", "driver": "client", "backend": "trio", "messages": 5000, "msgs_per_s": ...,
     "p50_ms": ..., "p99_ms": ...}
    {"bench": "client", "op": "e2e", "driver": "raw", ...}
    {"bench": "client", "op": "e2e_overhead", "backend": "trio", "cost_ratio": ...}

- ``send``: :meth:`client.producer.Producer.send` with ``inflight`` concurrent senders on one connection against the
  raw driver (``bench.broker.send_load``: prebuilt SEND_MESSAGE_V2 requests through ``RemotingClient``);
  ``cost_ratio`` = raw_rps / client_rps, i.e. the client's cost per message relative to the raw driver's (the target
  is < 1.5);
- ``e2e``: ``messages`` messages sent with ``inflight`` in flight while a consumer long-polls the topic's 4 queues;
  throughput is messages over the time from the first send to the last receipt; latency is per message, from just
  before its send to its receipt (the send time travels in the body; both ends are in this process). ``client`` is a
  :class:`~client.producer.Producer` + :class:`~client.consumer.push.PushConsumer` (async listener), ``raw`` the raw
  driver's sends plus one long-polling PULL_MESSAGE loop per queue. ``e2e_overhead``: ``cost_ratio`` = raw / client
  throughput, ``cpu_ratio`` = client / raw CPU time per message in this process (both ends of the client run here;
  the broker's CPU is in the other process), the steadier figure on a shared machine.

``--profile`` re-runs the measurement under ``py-spy record`` and writes ``bench/results/client.svg``; compare as
ratios within one run.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import shutil
import statistics
import struct
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Final

import anyio
import trio

from bench.broker import create_topic_request, percentile, pull_request, send_load, send_request
from bench.profiling import py_spy
from bench.rpc import Completed
from client import ConsumeConcurrentlyStatus, ConsumeFromWhere, Message, MessageExt, Producer, PushConsumer
from client.config import ClientConfig
from remoting.client import RemotingClient
from remoting.codec.codes import RequestCode, ResponseCode
from remoting.codec.command import request
from remoting.codec.message import iter_records

QUEUES: Final = 4
BODY_PAD: Final = b"m" * 120  # 8-byte timestamp + 120 = the raw driver's 128-byte body


def emit(record: dict[str, object]) -> None:
    print(json.dumps(record), flush=True)


# -- the cluster (child process) ------------------------------------------------------------------------------


async def serve_cluster(data_dir: str) -> None:
    from broker.embedded import EmbeddedCluster

    async with EmbeddedCluster(data_dir, mapped_file_size_commit_log=256 << 20) as cluster:
        print(cluster.namesrv_addr, cluster.broker_addr, flush=True)
        await trio.sleep_forever()


def start_cluster(data_dir: str) -> tuple[subprocess.Popen[str], str, str]:
    proc = subprocess.Popen(
        [sys.executable, "-m", "bench.client", "serve", "--data", data_dir], stdout=subprocess.PIPE, text=True
    )
    assert proc.stdout is not None
    namesrv, broker = proc.stdout.readline().split()
    return proc, namesrv, broker


async def create_topics(broker: str, *topics: str) -> None:
    async with RemotingClient() as remoting:
        for topic in topics:
            cmd = create_topic_request(topic)
            cmd = request(cmd.code, {**cmd.ext_fields, "topic": topic})
            response = await remoting.invoke(broker, cmd, 10)
            assert response.code == ResponseCode.SUCCESS, response.remark
    await anyio.sleep(0.5)  # the broker registers new topics with the name server asynchronously


# -- send: client vs raw ----------------------------------------------------------------------------------------


async def client_send_load(
    namesrv: str, topic: str, inflight: int, duration: float, config: ClientConfig | None = None
) -> Completed:
    """The sends one producer with ``inflight`` concurrent senders completed in about ``duration`` seconds
    (``config``: keys, TLS)."""
    count = 0
    async with Producer("bench-pg", namesrv, config=config) as producer:
        await producer.send(Message(topic, BODY_PAD))
        deadline = anyio.current_time() + duration

        async def sender() -> None:
            nonlocal count
            while anyio.current_time() < deadline:
                await producer.send(Message(topic, BODY_PAD, tags="TagA", keys="k1"))
                count += 1

        start = anyio.current_time()
        async with anyio.create_task_group() as tg:
            for _ in range(inflight):
                tg.start_soon(sender)
        return Completed(count, anyio.current_time() - start)


# -- end to end -------------------------------------------------------------------------------------------------


def _stamp() -> bytes:
    return struct.pack(">d", time.perf_counter()) + BODY_PAD


def _latency_ms(body: bytes) -> float:
    sent: float = struct.unpack_from(">d", body)[0]
    return (time.perf_counter() - sent) * 1000


async def _send_all(send: object, messages: int, inflight: int) -> None:
    remaining = messages

    async def worker() -> None:
        nonlocal remaining
        while remaining > 0:
            remaining -= 1
            await send()  # type: ignore[operator]

    async with anyio.create_task_group() as tg:
        for _ in range(inflight):
            tg.start_soon(worker)


async def client_e2e(namesrv: str, topic: str, messages: int, inflight: int) -> tuple[float, list[float], float]:
    latencies: list[float] = []
    done = anyio.Event()

    async def listener(msgs: list[MessageExt]) -> ConsumeConcurrentlyStatus:
        for m in msgs:
            latencies.append(_latency_ms(m.body))
        if len(latencies) >= messages:
            done.set()
        return ConsumeConcurrentlyStatus.CONSUME_SUCCESS

    consumer = PushConsumer(
        f"bench-cg-{topic}",
        namesrv,
        consume_from_where=ConsumeFromWhere.CONSUME_FROM_LAST_OFFSET,
        consume_message_batch_max_size=32,
    )
    consumer.subscribe(topic)
    consumer.register_message_listener(listener)
    async with consumer, Producer("bench-pg", namesrv) as producer:
        start, cpu0 = anyio.current_time(), time.process_time()
        await _send_all(lambda: producer.send(Message(topic, _stamp())), messages, inflight)
        await done.wait()
        elapsed, cpu = anyio.current_time() - start, time.process_time() - cpu0
    return messages / elapsed, latencies, cpu * 1e6 / messages


async def raw_e2e(broker: str, topic: str, messages: int, inflight: int) -> tuple[float, list[float], float]:
    latencies: list[float] = []
    done = anyio.Event()
    template = send_request(topic)
    async with RemotingClient() as consumer, RemotingClient() as producer:

        async def puller(queue_id: int) -> None:
            offset = 0
            while True:
                response = await consumer.invoke(broker, pull_request(topic, queue_id, offset, suspend=True), 30)
                if response.code == ResponseCode.SUCCESS:
                    for record in iter_records(response.body):
                        latencies.append(_latency_ms(record.body))
                    if len(latencies) >= messages:
                        done.set()
                offset = int(response.ext_fields["nextBeginOffset"])

        async def send() -> None:
            cmd = request(RequestCode.SEND_MESSAGE_V2, dict(template.ext_fields), _stamp())
            response = await producer.invoke(broker, cmd, 30)
            assert response.code == ResponseCode.SUCCESS, response.remark

        async with anyio.create_task_group() as tg:
            for queue_id in range(QUEUES):
                tg.start_soon(puller, queue_id)
            await anyio.sleep(0.05)  # pulls parked before the first send
            start, cpu0 = anyio.current_time(), time.process_time()
            await _send_all(send, messages, inflight)
            await done.wait()
            elapsed, cpu = anyio.current_time() - start, time.process_time() - cpu0
            tg.cancel_scope.cancel()
    return messages / elapsed, latencies, cpu * 1e6 / messages


def _timed(
    fn: Any, target: str, topic: str, messages: int, inflight: int, backend: str
) -> tuple[float, list[float], float]:
    """(msgs/s, latencies, CPU microseconds per message in this process from the first send to the last receipt:
    producer and consumer side together, start-up and shutdown excluded)."""
    result: tuple[float, list[float], float] = anyio.run(fn, target, topic, messages, inflight, backend=backend)
    return result


def measure(duration: float, messages: int, inflight: int, rounds: int) -> None:
    """Client and raw runs alternate, ``rounds`` times each, and medians are compared: the machine's background load
    then hits both drivers alike."""
    data_dir = tempfile.mkdtemp(prefix="bench-client-")
    proc, namesrv, broker = start_cluster(data_dir)
    try:
        e2e_topics = [f"BenchE2E{i}" for i in range(4 * rounds + 2)]
        trio.run(create_topics, broker, "BenchClientSend", *e2e_topics)
        trio.run(send_load, broker, 1, inflight, 0.1)  # warm-up
        trio.run(client_send_load, namesrv, "BenchClientSend", inflight, 0.1)
        client_runs: list[float] = []
        raw_runs: list[float] = []
        for _ in range(rounds):
            client_runs.append(trio.run(client_send_load, namesrv, "BenchClientSend", inflight, duration / rounds).rate)
            raw_runs.append(trio.run(send_load, broker, 1, inflight, duration / rounds))
        client_rps, raw_rps = statistics.median(client_runs), statistics.median(raw_runs)
        emit(
            {
                "bench": "client",
                "op": "send",
                "inflight": inflight,
                "rounds": rounds,
                "client_rps": round(client_rps),
                "raw_rps": round(raw_rps),
                "cost_ratio": round(raw_rps / client_rps, 3),
            }
        )
        topics = iter(e2e_topics)
        for backend in ("trio", "asyncio"):
            results: dict[str, list[tuple[float, list[float], float]]] = {"client": [], "raw": []}
            for _ in range(rounds):
                results["client"].append(_timed(client_e2e, namesrv, next(topics), messages, inflight, backend))
                results["raw"].append(_timed(raw_e2e, broker, next(topics), messages, inflight, backend))
            rates: dict[str, float] = {}
            cpu: dict[str, float] = {}
            for driver, runs in results.items():
                rates[driver] = statistics.median(rate for rate, _, _ in runs)
                cpu[driver] = statistics.median(us for _, _, us in runs)
                latencies = [ms for _, lat, _ in runs for ms in lat]
                emit(
                    {
                        "bench": "client",
                        "op": "e2e",
                        "driver": driver,
                        "backend": backend,
                        "messages": messages,
                        "inflight": inflight,
                        "rounds": rounds,
                        "msgs_per_s": round(rates[driver]),
                        "p50_ms": percentile(latencies, 0.5),
                        "p99_ms": percentile(latencies, 0.99),
                        "cpu_us_per_msg": round(cpu[driver], 1),
                    }
                )
            emit(
                {
                    "bench": "client",
                    "op": "e2e_overhead",
                    "backend": backend,
                    "cost_ratio": round(rates["raw"] / rates["client"], 3),
                    "cpu_ratio": round(cpu["client"] / cpu["raw"], 3),
                }
            )
    finally:
        proc.terminate()
        proc.wait()
        shutil.rmtree(data_dir, ignore_errors=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0] if __doc__ else None)
    parser.add_argument("mode", nargs="?", default="measure", choices=["measure", "serve"])
    parser.add_argument("--data", help="serve: the data directory")
    parser.add_argument("--duration", type=float, default=1.5, help="seconds per send measurement (all rounds)")
    parser.add_argument("--messages", type=int, default=1500, help="messages per end-to-end run")
    parser.add_argument("--rounds", type=int, default=3, help="alternating runs per driver (medians compared)")
    parser.add_argument("--inflight", type=int, default=32, help="concurrent sends")
    parser.add_argument("--profile", action="store_true", help="re-run under py-spy, writing bench/results/client.svg")
    args = parser.parse_args()
    if args.mode == "serve":
        with contextlib.suppress(KeyboardInterrupt):
            trio.run(serve_cluster, args.data)
        return
    measure(args.duration, args.messages, args.inflight, args.rounds)
    if args.profile:
        Path("bench/results").mkdir(parents=True, exist_ok=True)
        argv = [sys.executable, "-m", "bench.client", "--duration", str(args.duration)]
        argv += ["--messages", str(args.messages), "--inflight", str(args.inflight), "--rounds", str(args.rounds)]
        subprocess.run([py_spy(), "record", "-o", "bench/results/client.svg", "--", *argv], check=True)


if __name__ == "__main__":
    main()
