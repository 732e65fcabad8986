"""Send and receive throughput of the official 5.x Python client (gRPC, ``rocketmq-python-client``) against our 4.x
Python client (remoting, ``client/``) on the same broker in the same run (docs/grpc.md#figures).

A name server and ``mqbroker --enable-proxy`` (ASYNC_FLUSH) run as child processes; both clients run in this process,
one at a time, in interleaved rounds, each round on fresh topics and groups:

- ``send``: ``messages`` messages of ``size`` bytes, one send after the other (each waits for its receipt), through
  ``rocketmq.Producer.send`` and through :meth:`client.producer.Producer.send`;
- ``receive``: the same number of messages already stored, consumed by a fresh group: a 5.x ``SimpleConsumer``
  (``receive(32)`` then ``ack`` each, as its API is used) against a 4.x ``PushConsumer`` (pull, listener, offset
  commit).

One JSON line per measurement (rates, and the CPU each message cost the broker process, its Trio thread and this
client process, in µs, from ``/proc``), then a summary with each figure's range and the 5.x / 4.x ratio of the medians
(the target: ≥ 0.5). ``--baseline DIR`` runs a second name server and broker from the checkout ``DIR`` (named
``base``; this tree's is ``head``), measured in the same rounds, alternating which goes first (A/B in one run).
This tree's broker runs with ``--tlsTestModeEnable false`` (grpcio serves grpcServerPort directly). ``--front`` adds
a broker of this tree as it starts by default, with the test-mode certificate in permissive mode (named ``front``):
the same plaintext clients, through the sniffing front of ``proxy/front.py``; ``--ops send_5x,...`` measures only
those.
Usage: ``python -m bench.grpc_clients [--rounds 3] [--messages 2000] [--size 1024] [--baseline DIR] [--front]
[--ops LIST]``.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

import attrs
import trio

from client import Admin, ConsumeConcurrentlyStatus, Message, MessageExt, Producer, PushConsumer

_ADDRESS = re.compile(r"address (\S+)|The broker\[[^,]+, (\S+?)\]|grpcServerPort=(\d+)")


def emit(record: dict[str, object]) -> None:
    print(json.dumps(record), flush=True)


def start(argv: list[str], want: int, code: Path | None = None) -> tuple[subprocess.Popen[str], list[str]]:
    """Start ``argv`` (in the checkout ``code``, else here) and read the addresses it prints."""
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True, cwd=code)
    assert proc.stdout is not None
    found: list[str] = []
    while len(found) < want:
        line = proc.stdout.readline()
        if not line:
            raise RuntimeError(f"{argv[2]} exited")
        for match in _ADDRESS.finditer(line):
            found.append(next(g for g in match.groups() if g))
    return proc, found


_TICK_US = 1e6 / os.sysconf("SC_CLK_TCK")


def cpu_us(pid: int, tid: int | None = None) -> float:
    """User + system CPU of process ``pid`` (or of its thread ``tid``) so far, in µs."""
    path = f"/proc/{pid}/stat" if tid is None else f"/proc/{pid}/task/{tid}/stat"
    with open(path) as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) * _TICK_US


async def measured(broker: int, messages: int, run: Any) -> tuple[float, dict[str, float]]:
    """``await run()`` (a rate); with the CPU per message of the broker, its Trio (main) thread and this process."""
    before = cpu_us(broker), cpu_us(broker, broker), time.process_time()
    rate = await run()
    after = cpu_us(broker), cpu_us(broker, broker), time.process_time()
    return rate, {
        "broker_us": round((after[0] - before[0]) / messages),
        "trio_us": round((after[1] - before[1]) / messages),
        "client_us": round((after[2] - before[2]) * 1e6 / messages),
    }


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


async def one_round(
    args: argparse.Namespace, namesrv: str, endpoint: str, broker: int, tag: str, width: int
) -> tuple[dict[str, float], dict[str, dict[str, float]]]:
    body = b"x" * args.size
    n = args.messages
    topics = {k: f"Bench{k}{tag}" for k in ("5", "4")}
    async with Admin(namesrv) as admin:
        for topic in topics.values():
            await admin.create_topic(topic, read_queue_nums=4, write_queue_nums=4)
    runs = {
        "send_5x": lambda: trio.to_thread.run_sync(send_5x, endpoint, topics["5"], n, body, width),
        "send_4x": lambda: send_4x(namesrv, topics["4"], n, body, width),
        "receive_5x": lambda: trio.to_thread.run_sync(receive_5x, endpoint, topics["5"], f"BenchG5{tag}", n, width),
        "receive_4x": lambda: receive_4x(namesrv, topics["4"], f"BenchG4{tag}", n - 1),
    }
    rates: dict[str, float] = {}
    cpu: dict[str, dict[str, float]] = {}
    for key, run in runs.items():
        if args.ops and key not in args.ops.split(","):
            continue
        rates[key], cpu[key] = await measured(broker, n, run)
    return rates, cpu


@attrs.frozen
class Stack:
    """A name server and ``mqbroker --enable-proxy`` running the code of one checkout."""

    name: str
    namesrv: str
    endpoint: str
    broker: int


async def bench(args: argparse.Namespace, stacks: list[Stack]) -> None:
    figures: dict[tuple[str, str], dict[str, list[float]]] = {(s.name, m): {} for s in stacks for m, _ in MODES}
    for round_no in range(args.rounds):
        order = stacks if round_no % 2 == 0 else stacks[::-1]
        for stack in order:
            for mode, width in MODES:
                tag = f"{mode}{round_no}"
                rates, cpu = await one_round(args, stack.namesrv, stack.endpoint, stack.broker, tag, width)
                for key, rate in rates.items():
                    figures[stack.name, mode].setdefault(key, []).append(rate)
                emit({"bench": "grpc_clients", "code": stack.name, "round": round_no, "mode": mode, "width": width,
                      **{k: round(v) for k, v in rates.items()}, "cpu_per_msg": cpu})  # fmt: skip
    for stack in stacks:
        for mode, width in MODES:
            for op in ("send", "receive"):
                if f"{op}_5x" not in figures[stack.name, mode] or f"{op}_4x" not in figures[stack.name, mode]:
                    continue
                five, four = figures[stack.name, mode][f"{op}_5x"], figures[stack.name, mode][f"{op}_4x"]
                emit({"bench": "grpc_clients", "code": stack.name, "summary": op, "mode": mode, "width": width,
                      "msgs_per_s_5x": [round(min(five)), round(statistics.median(five)), round(max(five))],
                      "msgs_per_s_4x": [round(min(four)), round(statistics.median(four)), round(max(four))],
                      "ratio_5x_to_4x": round(statistics.median(five) / statistics.median(four), 2)})  # fmt: skip
    emit({"bench": "grpc_clients", "load_average": os.getloadavg()})


def start_stack(
    name: str, root: Path, code: Path | None, extra: tuple[str, ...] = ()
) -> tuple[Stack, list[subprocess.Popen[str]]]:
    namesrv_proc, (namesrv,) = start([sys.executable, "-m", "namesrv.cli", "--listenPort", "0"], 1, code)
    argv = [sys.executable, "-m", "broker.cli", "--enable-proxy", "-n", namesrv, "--listenPort", "0"]
    argv += ["--grpcServerPort", "0", "--storePathRootDir", str(root / "store"), "--brokerIP1", "127.0.0.1", *extra]
    broker_proc, found = start(argv, 2, code)
    return Stack(name, namesrv, f"127.0.0.1:{found[0]}", broker_proc.pid), [broker_proc, namesrv_proc]


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--messages", type=int, default=2000)
    parser.add_argument("--size", type=int, default=1024)
    parser.add_argument("--baseline", type=Path, default=None, help="a checkout whose broker runs as 'base' (A/B)")
    parser.add_argument("--front", action="store_true", help="also this tree with TLS permissive on grpcServerPort")
    parser.add_argument("--ops", default="", help="only these of send_5x,send_4x,receive_5x,receive_4x")
    args = parser.parse_args()
    variants: list[tuple[str, Path | None, tuple[str, ...]]] = [("head", None, ("--tlsTestModeEnable", "false"))]
    if args.baseline:
        variants.append(("base", args.baseline, ()))
    if args.front:  # plaintext clients through proxy/front.py's sniffing hop
        variants.append(("front", None, ("--tlsTestModeEnable", "true", "--tls.server.mode", "permissive")))
    procs: list[subprocess.Popen[str]] = []
    with tempfile.TemporaryDirectory() as tmp:
        try:
            stacks = []
            for name, code, extra in variants:
                stack, started = start_stack(name, Path(tmp) / name, code, extra)
                stacks.append(stack)
                procs += started
            trio.run(bench, args, stacks)
        finally:
            for proc in procs:
                proc.terminate()
                proc.wait(30)


if __name__ == "__main__":
    main()
