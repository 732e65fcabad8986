"""Cost of broker fast failure on the send path, on and off measured alternately in the same run:

- ``op: send``: two broker processes, ``brokerFastFailureEnable`` true and false, loaded in turn with
  :func:`bench.broker.send_load` (SEND_MESSAGE_V2, 128-byte body); besides requests per second (noisy on a shared
  machine) each broker process's CPU time per send (``/proc/<pid>/stat``), which background load disturbs less;
- ``op: pool``: the pool path alone in this process (:class:`remoting.dispatch.ProcessorPool`, one worker, a
  processor that answers nothing): ``max_wait`` 0.2 s and ``page_cache_busy`` a store's (not busy) check, as the
  broker's send pool with fast failure on, against neither: CPU time per request through submit and the worker.
  Sends take this path only when the send pool is not idle (docs/protocol.md#714-processor-pools-and-flow-control);
- ``op: append``: the store's append (128-byte body) timed for the page-cache-busy check (``on`` = the store's
  default, two monotonic clock reads per append) against the same store with the timing unset: CPU time per append.

``ratios`` are on/off per round (1.0 = no cost; for CPU per request, above 1.0 is a cost); usage:
``python -m bench.fast_failure --rounds 4 --duration 2``.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import tempfile
import time
from pathlib import Path

import trio

from bench.broker import prepare, send_load, start_broker
from remoting.codec.command import RemotingCommand, request
from remoting.codec.message import MessageRecord
from remoting.dispatch import ProcessorPool, Reject
from remoting.processor import RequestContext
from store.message_store import MessageStore
from store.store_config import StoreConfig

SCENARIOS = ((1, 32), (8, 32))
POOL_REQUESTS = 200_000


def cpu_seconds(pid: int) -> float:
    """User plus system CPU time of process ``pid``."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


class Silent:
    async def process(self, ctx: RequestContext, request: RemotingCommand) -> RemotingCommand | None:
        return None


async def pool_cpu_per_request(max_wait: float | None, busy: Reject | None) -> float:
    """CPU seconds per request through one pool: submitted 64 at a time, drained by its one worker."""
    pool = ProcessorPool("send", 1, 10_000, max_wait=max_wait, page_cache_busy=busy)
    processor, cmd = Silent(), request(310)
    ctx: RequestContext = None  # type: ignore[assignment]  # the silent processor never touches it
    async with trio.open_nursery() as nursery:
        await nursery.start(pool.run)
        start = time.process_time()
        for _ in range(POOL_REQUESTS // 64):
            for _ in range(64):
                pool.submit(processor, ctx, cmd)
            while not pool.idle:
                await trio.sleep(0)
        spent = time.process_time() - start
        nursery.cancel_scope.cancel()
    return spent / POOL_REQUESTS


def measure_pool(rounds: int) -> None:
    on: list[float] = []
    off: list[float] = []
    root = Path(tempfile.mkdtemp(prefix="bench-ff-pool-"))
    store = MessageStore(StoreConfig(root, mapped_file_size_commit_log=1 << 20))
    try:
        store.load()
        busy = store.is_os_page_cache_busy
        for i in range(rounds * 2):
            runs = [(on, 0.2, busy), (off, None, None)]
            for results, max_wait, check in runs if i % 2 == 0 else runs[::-1]:
                results.append(trio.run(pool_cpu_per_request, max_wait, check))
    finally:
        store.close()
        shutil.rmtree(root, ignore_errors=True)
    emit("pool", {}, [x * 1e6 for x in on], [x * 1e6 for x in off], "cpu_us_per_request")


APPENDS = 100_000


def append_cpu(root: Path, timed: bool) -> float:
    """CPU seconds per append of a 128-byte message, with the put lock's hold timed or not."""
    store = MessageStore(StoreConfig(root, mapped_file_size_commit_log=64 << 20))
    store.load()
    try:
        appender = store._appender
        if appender is not None and not timed:
            appender.on_slow = None
        record = MessageRecord("BenchAppend", b"m" * 128, 0)
        append = store.append
        start = time.process_time()
        for _ in range(APPENDS):
            append(record)
        return (time.process_time() - start) / APPENDS
    finally:
        store.close()


def measure_append(rounds: int) -> None:
    on, off = [], []
    for i in range(rounds * 2):
        order = [(on, True), (off, False)] if i % 2 == 0 else [(off, False), (on, True)]
        for results, timed in order:
            root = Path(tempfile.mkdtemp(prefix="bench-ff-append-"))
            try:
                results.append(append_cpu(root, timed) * 1e6)
            finally:
                shutil.rmtree(root, ignore_errors=True)
    emit("append", {}, on, off, "cpu_us_per_append")


def emit(op: str, fields: dict[str, object], on: list[float], off: list[float], unit: str) -> None:
    ratios = [a / b for a, b in zip(on, off, strict=True)]
    print(
        json.dumps(
            {
                "bench": "fast_failure",
                "op": op,
                **fields,
                "unit": unit,
                "on": [round(x, 3) for x in on],
                "off": [round(x, 3) for x in off],
                "ratios": [round(r, 3) for r in ratios],
                "median_ratio": round(statistics.median(ratios), 3),
                "ratio_of_means": round(statistics.mean(on) / statistics.mean(off), 3),
            }
        ),
        flush=True,
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0] if __doc__ else None)
    parser.add_argument("--rounds", type=int, default=4, help="alternations of on and off per scenario")
    parser.add_argument("--duration", type=float, default=2.0, help="seconds per measurement")
    parser.add_argument("--only", choices=["send", "pool", "append"], help="measure only this op")
    args = parser.parse_args()
    if args.only == "pool":
        measure_pool(args.rounds)
        return
    if args.only == "append":
        measure_append(args.rounds)
        return
    dirs = [tempfile.mkdtemp(prefix="bench-ff-") for _ in range(2)]
    (on_proc, on_addr), (off_proc, off_addr) = start_broker(dirs[0], True), start_broker(dirs[1], False)
    try:
        for address in (on_addr, off_addr):
            trio.run(prepare, address)
        for connections, inflight in SCENARIOS:
            for address in (on_addr, off_addr):
                trio.run(send_load, address, connections, inflight, 0.3)  # warm-up
            on, off, on_cpu, off_cpu = [], [], [], []
            for i in range(args.rounds):  # alternate which goes first, too
                runs = [(on, on_cpu, on_proc, on_addr), (off, off_cpu, off_proc, off_addr)]
                for rps, cpu, proc, address in runs if i % 2 == 0 else runs[::-1]:
                    before = cpu_seconds(proc.pid)
                    rate = trio.run(send_load, address, connections, inflight, args.duration)
                    rps.append(rate)
                    cpu.append((cpu_seconds(proc.pid) - before) / (rate * args.duration) * 1e6)
            where = {"connections": connections, "inflight": inflight}
            emit("send", where, on, off, "rps")
            emit("send", where, on_cpu, off_cpu, "broker_cpu_us_per_send")
        if args.only is None:
            measure_pool(args.rounds)
            measure_append(args.rounds)
    finally:
        for proc in (on_proc, off_proc):
            proc.terminate()
            proc.wait()
        for d in dirs:
            shutil.rmtree(d, ignore_errors=True)


if __name__ == "__main__":
    main()
