"""What message trace costs a producer: send throughput with ``enable_msg_trace`` on against off, in one run.

The embedded cluster runs in its own process (``bench.client``'s ``serve``), the load in this one. Each round runs the
same load twice, trace off then on (the order alternates between rounds, so a drift in the machine's background load
hits both), each with a fresh producer for ``--duration`` seconds:

- ``send``: ``--inflight`` tasks each awaiting :meth:`~client.producer.Producer.send` in a loop;
- ``async``: :meth:`~client.producer.Producer.send_async` with ``--inflight`` messages in flight (the callback path).

One JSON object per round and mode, then a summary per mode::

    {"bench": "trace", "mode": "send", "round": 1, "off_rps": ..., "on_rps": ..., "ratio": ..., "dropped": 0,
     "batches": ...}
    {"bench": "trace", "mode": "send", "summary": true, "ratio_median": ..., "ratio_min": ..., "ratio_max": ...}

``ratio`` is on / off throughput (the target: >= 0.9); ``cpu_ratio`` is on / off CPU time per message in this
process (the producer's own cost, steadier than throughput on a shared machine: the broker runs elsewhere and does
not count); ``broker_*_cpu_us`` is the broker process's CPU per message sent (it stores and indexes the trace
messages, every record's msgId and keys). ``dropped`` counts trace records the dispatcher's full queue
refused (0 means every send was traced) and ``batches`` the trace messages it sent.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import tempfile
import time
from typing import Final

import anyio
import trio

from bench.client import create_topics, start_cluster
from client import Message, Producer

TOPIC: Final = "BenchTrace"
BODY: Final = b"t" * 128


def emit(record: dict[str, object]) -> None:
    print(json.dumps(record), flush=True)


async def send_mode(producer: Producer, inflight: int, duration: float) -> int:
    count = 0
    deadline = anyio.current_time() + duration

    async def sender() -> None:
        nonlocal count
        while anyio.current_time() < deadline:
            await producer.send(Message(TOPIC, BODY, tags="TagA", keys="order-1"))
            count += 1

    async with anyio.create_task_group() as tg:
        for _ in range(inflight):
            tg.start_soon(sender)
    return count


async def async_mode(producer: Producer, inflight: int, duration: float) -> int:
    count = 0
    slots = trio.Semaphore(inflight)

    def done(outcome: object) -> None:
        nonlocal count
        count += 1
        slots.release()

    deadline = anyio.current_time() + duration
    while anyio.current_time() < deadline:
        await slots.acquire()
        producer.send_async(Message(TOPIC, BODY, tags="TagA", keys="order-1"), done)
    for _ in range(inflight):
        await slots.acquire()
    return count


async def one_run(
    namesrv: str, mode: str, trace: bool, inflight: int, duration: float
) -> tuple[float, float, int, int]:
    """Messages per second, this process's CPU microseconds per message (the producer's own cost, trace dispatcher
    and its flush at close included), trace records dropped and trace batches sent (0, 0 without trace)."""
    group = f"bench-trace-{mode}-{'on' if trace else 'off'}"
    async with Producer(group, namesrv, enable_msg_trace=trace) as producer:
        await producer.send(Message(TOPIC, BODY))  # route and connection first
        start, cpu = anyio.current_time(), time.process_time()
        count = await (send_mode if mode == "send" else async_mode)(producer, inflight, duration)
        rps = count / (anyio.current_time() - start)
        dispatcher = producer.trace
    cpu_us = (time.process_time() - cpu) / count * 1e6
    dropped = 0 if dispatcher is None else dispatcher.dropped
    batches = 0 if dispatcher is None else dispatcher.sent_batches
    return rps, cpu_us, dropped, batches


def process_cpu(pid: int) -> float:
    """CPU seconds (user + system) a process has used so far, from ``/proc/<pid>/stat`` (Linux)."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def measure(rounds: int, duration: float, inflight: int) -> None:
    data = tempfile.mkdtemp(prefix="rocketrio-bench-trace-")
    proc, namesrv, broker = start_cluster(data)
    try:
        trio.run(create_topics, broker, TOPIC)
        for mode in ("send", "async"):
            ratios, cpu_ratios = [], []
            for r in range(1, rounds + 1):
                order = (False, True) if r % 2 else (True, False)
                runs, broker_cpu = {}, {}
                for trace in order:
                    before = process_cpu(proc.pid)
                    runs[trace] = trio.run(one_run, namesrv, mode, trace, inflight, duration)
                    broker_cpu[trace] = (process_cpu(proc.pid) - before) / (runs[trace][0] * duration) * 1e6
                (off, off_cpu, _, _), (on, on_cpu, dropped, batches) = runs[False], runs[True]
                ratios.append(on / off)
                cpu_ratios.append(on_cpu / off_cpu)
                emit({"bench": "trace", "mode": mode, "round": r, "off_rps": round(off), "on_rps": round(on),
                      "ratio": round(on / off, 3), "off_cpu_us": round(off_cpu, 1), "on_cpu_us": round(on_cpu, 1),
                      "cpu_ratio": round(on_cpu / off_cpu, 3), "broker_off_cpu_us": round(broker_cpu[False], 1),
                      "broker_on_cpu_us": round(broker_cpu[True], 1), "dropped": dropped,
                      "batches": batches})  # fmt: skip
            emit({"bench": "trace", "mode": mode, "summary": True, "rounds": rounds, "inflight": inflight,
                  "ratio_median": round(statistics.median(ratios), 3), "ratio_min": round(min(ratios), 3),
                  "ratio_max": round(max(ratios), 3), "cpu_ratio_median": round(statistics.median(cpu_ratios), 3),
                  "cpu_ratio_min": round(min(cpu_ratios), 3), "cpu_ratio_max": round(max(cpu_ratios), 3)})  # fmt: skip
    finally:
        proc.terminate()
        proc.wait(30)
        shutil.rmtree(data, ignore_errors=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0] if __doc__ else None)
    parser.add_argument("--rounds", type=int, default=5, help="on/off pairs per mode")
    parser.add_argument("--duration", type=float, default=2.0, help="seconds per run")
    parser.add_argument("--inflight", type=int, default=32, help="concurrent sends")
    args = parser.parse_args()
    measure(args.rounds, args.duration, args.inflight)


if __name__ == "__main__":
    main()
