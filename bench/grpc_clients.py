"""Send and receive throughput of the official 5.x Python client (gRPC, ``rocketmq-python-client``) against our 4.x
Python client (remoting, ``client/``) on the same broker in the same run (docs/grpc.md#figures).

A name server and ``mqbroker --enable-proxy`` (ASYNC_FLUSH) run as child processes; both clients run in this process,
one at a time, in interleaved rounds, each round on fresh topics and groups:

- ``send``: ``messages`` messages of ``size`` bytes, one send after the other (each waits for its receipt), through
  ``rocketmq.Producer.send`` and through :meth:`client.producer.Producer.send`;
- ``receive``: the same number of messages already stored, consumed by a fresh group: a 5.x ``SimpleConsumer``
  (``receive(32)`` then ``ack`` each, as its API is used) against a 4.x ``PushConsumer`` (pull, listener, offset
  commit).

One JSON line per measurement, then a summary with each figure's range and the 5.x / 4.x ratio of the medians
(the issue's target: ≥ 0.5). Usage: ``python -m bench.grpc_clients [--rounds 3] [--messages 2000] [--size 1024]``.
"""

from __future__ import annotations

import argparse
import json
import re
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

import trio

from client import Admin, ConsumeConcurrentlyStatus, Message, MessageExt, Producer, PushConsumer

_ADDRESS = re.compile(r"address (\S+)|The broker\[[^,]+, (\S+?)\]|grpcServerPort=(\d+)")


def emit(record: dict[str, object]) -> None:
    print(json.dumps(record), flush=True)


def start(argv: list[str], want: int) -> tuple[subprocess.Popen[str], list[str]]:
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    assert proc.stdout is not None
    found: list[str] = []
    while len(found) < want:
        line = proc.stdout.readline()
        if not line:
            raise RuntimeError(f"{argv[2]} exited")
        for match in _ADDRESS.finditer(line):
            found.append(next(g for g in match.groups() if g))
    return proc, found


def send_5x(endpoint: str, topic: str, messages: int, body: bytes, inflight: int) -> float:
    from tests.proxy.official import make_message, start_producer

    producer = start_producer(endpoint, [topic])
    started = time.perf_counter()
    pending: list[Any] = []
    for _ in range(messages):
        if inflight == 1:
            producer.send(make_message(topic, body))
            continue
        pending.append(producer.send_async(make_message(topic, body)))
        if len(pending) >= inflight:
            pending.pop(0).result()
    for future in pending:
        future.result()
    elapsed = time.perf_counter() - started
    producer.shutdown()
    return messages / elapsed


def receive_5x(endpoint: str, topic: str, group: str, messages: int, threads: int) -> float:
    """``threads`` threads share one SimpleConsumer, each receiving and acknowledging (its ``ack_async`` cannot be
    used: in 5.1.2 it recurses until the stack overflows)."""
    from concurrent.futures import ThreadPoolExecutor

    from tests.proxy.official import start_consumer

    consumer = start_consumer(endpoint, group, topic, await_duration=5)
    got = [0]
    done_at = [0.0]
    lock = threading.Lock()

    def work() -> None:
        while got[0] < messages:
            for msg in consumer.receive(32, 30):
                consumer.ack(msg)
                with lock:
                    got[0] += 1
                    if got[0] == messages:
                        done_at[0] = time.perf_counter()  # the other threads may still be in a long poll

    started = time.perf_counter()
    with ThreadPoolExecutor(threads) as pool:
        for future in [pool.submit(work) for _ in range(threads)]:
            future.result()
    consumer.shutdown()
    return messages / (done_at[0] - started)


async def send_4x(namesrv: str, topic: str, messages: int, body: bytes, inflight: int) -> float:
    async with Producer(f"bench-4x-{topic}", namesrv) as producer:
        await producer.send(Message(topic, body))  # route lookup outside the measurement
        left = [messages - 1]

        async def sender() -> None:
            while left[0] > 0:
                left[0] -= 1
                await producer.send(Message(topic, body))

        started = time.perf_counter()
        async with trio.open_nursery() as nursery:
            for _ in range(inflight):
                nursery.start_soon(sender)
        return (messages - 1) / (time.perf_counter() - started)


async def receive_4x(namesrv: str, topic: str, group: str, messages: int) -> float:
    done = trio.Event()
    count = 0
    started = 0.0

    async def listener(msgs: list[MessageExt]) -> ConsumeConcurrentlyStatus:
        nonlocal count, started
        if count == 0:
            started = time.perf_counter()
        count += len(msgs)
        if count >= messages:
            done.set()
        return ConsumeConcurrentlyStatus.CONSUME_SUCCESS

    consumer = PushConsumer(group, namesrv)
    consumer.subscribe(topic, "*")
    consumer.register_message_listener(listener)
    async with consumer:
        await done.wait()
        return messages / (time.perf_counter() - started)


#: (name, 5.x send requests in flight or receive threads, 4.x send requests in flight)
MODES = [("serial", 1), ("concurrent", 16)]


async def one_round(args: argparse.Namespace, namesrv: str, endpoint: str, tag: str, width: int) -> dict[str, float]:
    body = b"x" * args.size
    topics = {k: f"Bench{k}{tag}" for k in ("5", "4")}
    async with Admin(namesrv) as admin:
        for topic in topics.values():
            await admin.create_topic(topic, read_queue_nums=4, write_queue_nums=4)
    out = {
        "send_5x": await trio.to_thread.run_sync(send_5x, endpoint, topics["5"], args.messages, body, width),
        "send_4x": await send_4x(namesrv, topics["4"], args.messages, body, width),
    }
    out["receive_5x"] = await trio.to_thread.run_sync(
        receive_5x, endpoint, topics["5"], f"BenchG5{tag}", args.messages, width
    )
    out["receive_4x"] = await receive_4x(namesrv, topics["4"], f"BenchG4{tag}", args.messages - 1)
    return out


async def bench(args: argparse.Namespace, namesrv: str, endpoint: str) -> None:
    figures: dict[str, dict[str, list[float]]] = {mode: {} for mode, _ in MODES}
    for round_no in range(args.rounds):
        for mode, width in MODES:
            rates = await one_round(args, namesrv, endpoint, f"{mode}{round_no}", width)
            for key, rate in rates.items():
                figures[mode].setdefault(key, []).append(rate)
            emit({"bench": "grpc_clients", "round": round_no, "mode": mode, "width": width,
                  **{k: round(v) for k, v in rates.items()}})  # fmt: skip
    for mode, width in MODES:
        for op in ("send", "receive"):
            five, four = figures[mode][f"{op}_5x"], figures[mode][f"{op}_4x"]
            emit({"bench": "grpc_clients", "summary": op, "mode": mode, "width": width,
                  "msgs_per_s_5x": [round(min(five)), round(max(five))],
                  "msgs_per_s_4x": [round(min(four)), round(max(four))],
                  "ratio_5x_to_4x": round(statistics.median(five) / statistics.median(four), 2)})  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--messages", type=int, default=2000)
    parser.add_argument("--size", type=int, default=1024)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        namesrv_proc, (namesrv,) = start([sys.executable, "-m", "namesrv.cli", "--listenPort", "0"], 1)
        argv = [sys.executable, "-m", "broker.cli", "--enable-proxy", "-n", namesrv, "--listenPort", "0"]
        argv += ["--grpcServerPort", "0", "--storePathRootDir", str(Path(tmp) / "store"), "--brokerIP1", "127.0.0.1"]
        broker_proc, found = start(argv, 2)
        try:
            trio.run(bench, args, namesrv, f"127.0.0.1:{found[0]}")
        finally:
            for proc in (broker_proc, namesrv_proc):
                proc.terminate()
                proc.wait(30)


if __name__ == "__main__":
    main()
