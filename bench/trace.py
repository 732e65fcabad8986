"""What message trace costs a producer: send throughput with ``enable_msg_trace`` on against off, in one run.

The embedded cluster runs in its own process (``bench.client``'s ``serve``), the load in this one. Each round runs the
same load twice, trace off then on (the order alternates between rounds, so a drift in the machine's background load
hits both), each with a fresh producer for ``--duration`` seconds:

- ``send``: ``--inflight`` tasks each awaiting :meth:`~client.producer.Producer.send` in a loop;
- ``async``: :meth:`~client.producer.Producer.send_async` with ``--inflight`` messages in flight (the callback path).

One JSON object per round and mode, then a summary per mode::

    {"bench": "trace", "mode": "send", "round": 1, "off_rps": ..., "on_rps": ..., "ratio": ..., "off_failed": 0,
     "on_failed": 0, "dropped": 0, "batches": ...}
    {"bench": "trace", "mode": "send", "summary": true, "ratio_median": ..., "ratio_min": ..., "ratio_max": ...}

Rates and per-message figures count successful sends only (as RocketMQ's benchmark ``Producer``: a send that
raises, or whose callback gets an exception, is a failure, ``*_failed``); a run in which none succeeded stops the
tool with an error. ``ratio`` is on / off throughput (the target: >= 0.9); ``cpu_ratio`` is on / off CPU time per
message in this process (the producer's own cost, steadier than throughput on a shared machine: the broker runs
elsewhere and does not count); ``broker_*_cpu_us`` is the broker process's CPU per successful send of the run
(it stores and indexes the trace messages, every record's msgId and keys). ``dropped`` counts trace records the
dispatcher's full queue refused (0 means every send was traced) and ``batches`` the trace messages it sent.
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
import attrs
import trio

from bench.client import create_topics, start_cluster
from client import Message, Producer

TOPIC: Final = "BenchTrace"
BODY: Final = b"t" * 128


def emit(record: dict[str, object]) -> None:
    print(json.dumps(record), flush=True)


class Failures:
    """Sends that failed (an exception from the send or in the callback), counted apart from the successes."""

    def __init__(self) -> None:
        self.count = 0
        self.last: str | None = None

    def add(self, error: BaseException) -> None:
        self.count += 1
        self.last = f"{type(error).__name__}: {error}"


async def send_mode(producer: Producer, inflight: int, duration: float, failures: Failures | None = None) -> int:
    """Successful sends of ``inflight`` tasks each awaiting ``send`` until ``duration`` ends; failures go to
    ``failures``."""
    failures = failures or Failures()
    count = 0
    deadline = anyio.current_time() + duration

    async def sender() -> None:
        nonlocal count
        while anyio.current_time() < deadline:
            try:
                await producer.send(Message(TOPIC, BODY, tags="TagA", keys="order-1"))
            except Exception as exc:  # counted apart, the load goes on
                failures.add(exc)
            else:
                count += 1

    async with anyio.create_task_group() as tg:
        for _ in range(inflight):
            tg.start_soon(sender)
    return count


async def async_mode(producer: Producer, inflight: int, duration: float, failures: Failures | None = None) -> int:
    """Successful sends with ``inflight`` ``send_async`` calls outstanding until ``duration`` ends (RocketMQ's
    benchmark Producer: ``onSuccess`` counts, ``onException`` is a failure); failures go to ``failures``."""
    failures = failures or Failures()
    count = 0
    slots = trio.Semaphore(inflight)

    def done(outcome: object) -> None:
        nonlocal count
        if isinstance(outcome, BaseException):
            failures.add(outcome)
        else:
            count += 1
        slots.release()

    deadline = anyio.current_time() + duration
    while anyio.current_time() < deadline:
        await slots.acquire()
        producer.send_async(Message(TOPIC, BODY, tags="TagA", keys="order-1"), done)
    for _ in range(inflight):
        await slots.acquire()
    return count


@attrs.frozen
class Run:
    """One timed run: successful sends over ``seconds``, this process's CPU seconds, the failures, and the trace
    records dropped and batches sent (0, 0 without trace)."""

    count: int
    seconds: float
    cpu_seconds: float
    failed: int
    dropped: int
    batches: int

    @property
    def rps(self) -> float:
        return self.count / self.seconds

    @property
    def cpu_us(self) -> float:
        """This process's CPU per successful send (the producer's own cost, trace dispatcher and its flush at close
        included)."""
        return self.cpu_seconds / self.count * 1e6


async def one_run(namesrv: str, mode: str, trace: bool, inflight: int, duration: float) -> Run:
    """One run of ``mode``; raises :class:`RuntimeError` when no send succeeded (there is no rate to compare)."""
    group = f"bench-trace-{mode}-{'on' if trace else 'off'}"
    failures = Failures()
    async with Producer(group, namesrv, enable_msg_trace=trace) as producer:
        await producer.send(Message(TOPIC, BODY))  # route and connection first
        start, cpu = anyio.current_time(), time.process_time()
        count = await (send_mode if mode == "send" else async_mode)(producer, inflight, duration, failures)
        seconds = anyio.current_time() - start
        dispatcher = producer.trace
    if not count:
        raise RuntimeError(f"{mode}, trace {'on' if trace else 'off'}: no send succeeded ({failures.last})")
    dropped = 0 if dispatcher is None else dispatcher.dropped
    batches = 0 if dispatcher is None else dispatcher.sent_batches
    return Run(count, seconds, time.process_time() - cpu, failures.count, dropped, batches)


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
                    broker_cpu[trace] = (process_cpu(proc.pid) - before) / runs[trace].count * 1e6
                off, on = runs[False], runs[True]
                ratios.append(on.rps / off.rps)
                cpu_ratios.append(on.cpu_us / off.cpu_us)
                emit({"bench": "trace", "mode": mode, "round": r, "off_rps": round(off.rps), "on_rps": round(on.rps),
                      "ratio": round(on.rps / off.rps, 3), "off_cpu_us": round(off.cpu_us, 1),
                      "on_cpu_us": round(on.cpu_us, 1), "cpu_ratio": round(on.cpu_us / off.cpu_us, 3),
                      "broker_off_cpu_us": round(broker_cpu[False], 1), "broker_on_cpu_us": round(broker_cpu[True], 1),
                      "off_failed": off.failed, "on_failed": on.failed, "dropped": on.dropped,
                      "batches": on.batches})  # fmt: skip
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
