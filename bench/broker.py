"""Broker data path: send, pull and held-pull wake latency against the embedded broker, beside the bare-echo floor.

The broker (an :class:`~broker.embedded.EmbeddedCluster`: name server + broker, ASYNC_FLUSH, data in a temporary
directory) runs in its own process (``python -m bench.broker serve``) and the load in this one, so on a 2-core
machine each side gets a core; the echo floor (``bench.rpc``'s bare Trio echo of a frame of the same size) is
measured the same way in the same run. One JSON object per line::

    {"bench": "broker", "op": "send", "connections": 1, "inflight": 32, "rps": ..., "echo_rps": ..., "ratio": ...,
     "rpc_floor_rps": ..., "ratio_to_rpc": ...}
    {"bench": "broker", "op": "pull", "queues": 4, "batch": 32, "msgs_per_s": ..., "pulls_per_s": ...}
    {"bench": "broker", "op": "held_pull_wake", "samples": 200, "p50_ms": ..., "p99_ms": ..., "send_rtt_p50_ms": ...}

- ``send``: SEND_MESSAGE_V2 (128-byte body, Java-shaped properties) through :class:`~remoting.client.RemotingClient`
  for 1 connection x 1 in flight, 1 x 32 and 8 x 32; ``ratio`` = rps / echo_rps (compare ratios, not runs) and
  ``ratio_to_rpc`` = rps / ``bench.rpc``'s store-less send-shaped RPC (what the processor and store cost on top of
  our transport);
- ``pull``: PULL_MESSAGE of 32 messages per request over a pre-filled topic, one puller per queue on one connection;
- ``held_pull_wake``: a pull parked at the end of an empty queue, then one send; the time from issuing the send to
  receiving the pull's answer (p50/p99), beside the plain send round trip for scale.

``--profile`` re-runs the whole measurement under ``py-spy record --subprocesses`` and writes
``bench/results/broker.svg`` (the broker process's stacks are the interesting ones).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Final

import trio

from bench.load.stats import percentile as nearest_rank
from bench.profiling import py_spy
from bench.rpc import echo_client, rpc_client
from bench.rpc import start_server as start_floor_server
from remoting.client import RemotingClient
from remoting.codec.codes import RequestCode, ResponseCode
from remoting.codec.command import RemotingCommand, request
from remoting.codec.frame import encode_command

SEND_SCENARIOS: Final = ((1, 1), (1, 32), (8, 32))
OPS: Final = frozenset({"send", "pull", "held_pull_wake"})
TOPIC: Final = "BenchBrokerTopic"
PULL_TOPIC: Final = "BenchPullTopic"
WAKE_TOPIC: Final = "BenchWakeTopic"
QUEUES: Final = 4
GROUP: Final = "bench_consumer_group"
BODY: Final = b"m" * 128
PROPERTIES: Final = "UNIQ_KEY\x017F0000010001000000000000000000\x02WAIT\x01true\x02TAGS\x01TagA\x02KEYS\x01k1"


def send_request(topic: str = TOPIC, queue_id: int = -1) -> RemotingCommand:
    fields = {
        "a": "bench_producer_group",
        "b": topic,
        "c": "TBW102",
        "d": str(QUEUES),
        "e": str(queue_id),
        "f": "0",
        "g": str(int(time.time() * 1000)),
        "h": "0",
        "i": PROPERTIES,
        "j": "0",
        "k": "false",
        "m": "false",
    }
    return request(RequestCode.SEND_MESSAGE_V2, fields, BODY)


def pull_request(topic: str, queue_id: int, offset: int, *, suspend: bool) -> RemotingCommand:
    fields = {
        "consumerGroup": GROUP,
        "topic": topic,
        "queueId": str(queue_id),
        "queueOffset": str(offset),
        "maxMsgNums": "32",
        "sysFlag": str(0x4 | (0x2 if suspend else 0)),
        "commitOffset": "0",
        "suspendTimeoutMillis": "15000",
        "subVersion": "0",
        "subscription": "*",
    }
    return request(RequestCode.PULL_MESSAGE, fields)


def create_topic_request(topic: str) -> RemotingCommand:
    fields = {
        "topic": topic,
        "defaultTopic": "TBW102",
        "readQueueNums": str(QUEUES),
        "writeQueueNums": str(QUEUES),
        "perm": "6",
        "topicFilterType": "SINGLE_TAG",
        "topicSysFlag": "0",
        "order": "false",
    }
    return request(RequestCode.UPDATE_AND_CREATE_TOPIC, fields)


# -- the broker (child process) -------------------------------------------------------------------------------


async def serve_broker(data_dir: str, fast_failure: bool = True) -> None:
    from broker.embedded import EmbeddedCluster

    async with EmbeddedCluster(
        data_dir, mapped_file_size_commit_log=256 << 20, broker_fast_failure_enable=fast_failure
    ) as cluster:
        print(cluster.broker_addr, flush=True)
        await trio.sleep_forever()


def start_broker(data_dir: str, fast_failure: bool = True) -> tuple[subprocess.Popen[str], str]:
    """A broker process serving ``data_dir`` (``brokerFastFailureEnable`` as given) and its address."""
    proc = subprocess.Popen(
        [sys.executable, "-m", "bench.broker", "serve", "--data", data_dir]
        + ([] if fast_failure else ["--no-fast-failure"]),
        stdout=subprocess.PIPE,
        text=True,
        env=os.environ.copy(),
    )
    assert proc.stdout is not None
    return proc, proc.stdout.readline().strip()


# -- load (this process) --------------------------------------------------------------------------------------


async def prepare(address: str) -> None:
    async with RemotingClient() as client:
        for topic in (TOPIC, PULL_TOPIC, WAKE_TOPIC):
            response = await client.invoke(address, create_topic_request(topic), timeout=10)
            assert response.code == ResponseCode.SUCCESS, response.remark


async def send_load(address: str, connections: int, inflight: int, duration: float) -> float:
    count = 0
    deadline = trio.current_time() + duration
    clients = [RemotingClient() for _ in range(connections)]

    async def caller(client: RemotingClient) -> None:
        nonlocal count
        while trio.current_time() < deadline:
            response = await client.invoke(address, send_request(), timeout=30)
            assert response.code == ResponseCode.SUCCESS, response.remark
            count += 1

    async with contextlib.AsyncExitStack() as stack:
        for client in clients:
            await stack.enter_async_context(client)
            await client.connection(address)
        start = trio.current_time()
        async with trio.open_nursery() as nursery:
            for client in clients:
                for _ in range(inflight):
                    nursery.start_soon(caller, client)
        return count / (trio.current_time() - start)


async def fill(address: str, topic: str, per_queue: int) -> None:
    async with RemotingClient() as client:

        async def one_queue(queue_id: int) -> None:
            for _ in range(per_queue):
                response = await client.invoke(address, send_request(topic, queue_id), timeout=30)
                assert response.code == ResponseCode.SUCCESS

        async with trio.open_nursery() as nursery:
            for queue_id in range(QUEUES):
                for _ in range(8):  # 8 in flight per queue; order within a queue does not matter here
                    nursery.start_soon(one_queue, queue_id)


async def pull_load(address: str, per_queue: int) -> tuple[float, float]:
    """(messages/s, pulls/s) reading every queue of PULL_TOPIC from 0 to the end."""
    messages = pulls = 0
    async with RemotingClient() as client:

        async def reader(queue_id: int) -> None:
            nonlocal messages, pulls
            offset = 0
            while offset < per_queue:
                response = await client.invoke(address, pull_request(PULL_TOPIC, queue_id, offset, suspend=False), 30)
                assert response.code == ResponseCode.SUCCESS, (response.code, response.remark)
                next_offset = int(response.ext_fields["nextBeginOffset"])
                messages += next_offset - offset
                pulls += 1
                offset = next_offset

        start = trio.current_time()
        async with trio.open_nursery() as nursery:
            for queue_id in range(QUEUES):
                nursery.start_soon(reader, queue_id)
        elapsed = trio.current_time() - start
    return messages / elapsed, pulls / elapsed


async def wake_latency(address: str, samples: int) -> tuple[list[float], list[float]]:
    """Per sample: ms from issuing a send to receiving the held pull's answer, and the send's own round trip."""
    wakes: list[float] = []
    sends: list[float] = []
    async with RemotingClient() as consumer, RemotingClient() as producer:
        woken_at: list[float] = []

        async def held_pull(offset: int) -> None:
            response = await consumer.invoke(address, pull_request(WAKE_TOPIC, 0, offset, suspend=True), timeout=30)
            woken_at.append(time.perf_counter())
            assert response.code == ResponseCode.SUCCESS, (response.code, response.remark)

        for offset in range(samples):
            async with trio.open_nursery() as nursery:
                nursery.start_soon(held_pull, offset)
                await trio.sleep(0.005)  # let the pull reach the broker and park (a bench may wait; tests may not)
                sent_at = time.perf_counter()
                response = await producer.invoke(address, send_request(WAKE_TOPIC, 0), timeout=30)
                sends.append((time.perf_counter() - sent_at) * 1000)
                assert response.code == ResponseCode.SUCCESS
            wakes.append((woken_at[-1] - sent_at) * 1000)
    return wakes, sends


def percentile(values: list[float], q: float) -> float:
    """The ``q`` quantile of unsorted ``values`` by nearest rank (:func:`bench.load.stats.percentile`), 3 places."""
    return round(nearest_rank(sorted(values), q), 3)


def emit(record: dict[str, object]) -> None:
    print(json.dumps(record), flush=True)


def measure(duration: float, per_queue: int, samples: int, only: frozenset[str] = OPS) -> None:
    data_dir = tempfile.mkdtemp(prefix="bench-broker-")
    broker_proc, address = start_broker(data_dir)
    echo_proc, echo_port = start_floor_server("echo")
    rpc_proc, rpc_port = start_floor_server("rpc")
    frame = encode_command(send_request())
    try:
        trio.run(prepare, address)
        for connections, inflight in SEND_SCENARIOS if "send" in only else ():
            trio.run(send_load, address, connections, inflight, 0.1)  # warm-up
            trio.run(echo_client, echo_port, connections, inflight, frame, 0.1)
            trio.run(rpc_client, rpc_port, connections, inflight, 0.1)
            ours, echo, rpc = [], [], []
            for _ in range(2):  # alternate halves so background load hits every stack alike
                ours.append(trio.run(send_load, address, connections, inflight, duration / 2))
                echo.append(trio.run(echo_client, echo_port, connections, inflight, frame, duration / 2).rate)
                rpc.append(trio.run(rpc_client, rpc_port, connections, inflight, duration / 2).rate)
            rps, echo_rps, rpc_rps = statistics.mean(ours), statistics.mean(echo), statistics.mean(rpc)
            emit(
                {
                    "bench": "broker",
                    "op": "send",
                    "connections": connections,
                    "inflight": inflight,
                    "frame_bytes": len(frame),
                    "rps": round(rps),
                    "echo_rps": round(echo_rps),
                    "ratio": round(rps / echo_rps, 3),
                    "rpc_floor_rps": round(rpc_rps),
                    "ratio_to_rpc": round(rps / rpc_rps, 3),
                }
            )
        if "pull" in only:
            measure_pull(address, per_queue)
        if "held_pull_wake" in only:
            measure_wake(address, samples)
    finally:
        for proc in (broker_proc, echo_proc, rpc_proc):
            proc.terminate()
            proc.wait()
        shutil.rmtree(data_dir, ignore_errors=True)


def measure_pull(address: str, per_queue: int) -> None:
    trio.run(fill, address, PULL_TOPIC, per_queue)
    msgs, pulls = trio.run(pull_load, address, per_queue)
    emit(
        {
            "bench": "broker",
            "op": "pull",
            "queues": QUEUES,
            "messages": per_queue * QUEUES,
            "batch": 32,
            "msgs_per_s": round(msgs),
            "pulls_per_s": round(pulls),
        }
    )


def measure_wake(address: str, samples: int) -> None:
    wakes, sends = trio.run(wake_latency, address, samples)
    emit(
        {
            "bench": "broker",
            "op": "held_pull_wake",
            "samples": samples,
            "p50_ms": percentile(wakes, 0.5),
            "p99_ms": percentile(wakes, 0.99),
            "max_ms": round(max(wakes), 3),
            "send_rtt_p50_ms": percentile(sends, 0.5),
            "send_rtt_p99_ms": percentile(sends, 0.99),
        }
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0] if __doc__ else None)
    parser.add_argument("mode", nargs="?", default="measure", choices=["measure", "serve"])
    parser.add_argument("--data", help="serve: the data directory")
    parser.add_argument("--duration", type=float, default=1.0, help="seconds per send scenario and stack")
    parser.add_argument("--per-queue", type=int, default=2500, help="pull: messages per queue (4 queues)")
    parser.add_argument("--samples", type=int, default=200, help="held-pull wake samples")
    parser.add_argument("--profile", action="store_true", help="re-run under py-spy, writing bench/results/broker.svg")
    parser.add_argument("--only", action="append", choices=sorted(OPS), help="measure only these ops (repeatable)")
    parser.add_argument("--no-fast-failure", action="store_true", help="serve: brokerFastFailureEnable=false")
    args = parser.parse_args()
    if args.mode == "serve":
        with contextlib.suppress(KeyboardInterrupt):
            trio.run(serve_broker, args.data, not args.no_fast_failure)
        return
    only = frozenset(args.only) if args.only else OPS
    measure(args.duration, args.per_queue, args.samples, only)
    if args.profile:
        Path("bench/results").mkdir(parents=True, exist_ok=True)
        argv = [sys.executable, "-m", "bench.broker", "--duration", str(args.duration)]
        argv += ["--per-queue", str(args.per_queue), "--samples", str(args.samples)]
        argv += [f"--only={op}" for op in sorted(only)]
        subprocess.run(
            [py_spy(), "record", "--subprocesses", "-o", "bench/results/broker.svg", "--", *argv],
            check=True,
        )


if __name__ == "__main__":
    main()
