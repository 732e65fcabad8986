"""Store throughput against the raw floor measured in the same run.

Cases (one JSON object per line on stdout):

- ``floor``: copy the same encoded record bytes, one record at a time, into a prefaulted file mmap: the memcpy floor
  (best of three passes, each into memory not written before, as every append's is).
- ``bookkeeping``: the cheapest append a Python-level API can make: the record already encoded (no CRC, no packing,
  no tags code), only the checks, the queue-offset dict, the copy, one 20-byte ConsumeQueue pack and the result
  object, single and per message of a 32-record batch. ``vs_floor`` bounds what any Python append can reach.
- ``append`` / ``append_batch``: ``MessageStore.append`` of single messages / ``append_batch`` of 32, for 128 B,
  1 KiB and 4 KiB bodies, ASYNC_FLUSH, segments warmed up, best of three fresh stores. ``vs_floor`` = store MB/s /
  floor MB/s; ``cpu_us_per_msg`` = process CPU time per message (steadier than rates on a shared machine).
- ``append_spread``: single appends as a broker sees them: distinct messages round-robin over 8 queues, each with its
  own topic string object (``append`` repeats one message to one queue).
- ``sync_flush``: SYNC_FLUSH ``put`` with 1, 16 and 64 concurrent writers (group commit), PUT_OK puts counted;
  ``vs_1_writer``.
- ``sustained`` (on request): batch appends for 3x ``--duration`` per size with flushes, rolls and warm-ups included.
- ``get``: 32-message ``get`` calls per second and the record slices per second they return.
- ``recovery``: ``load()`` after a crash (``abort`` present) with the checkpoint at the start (whole log re-scanned
  with CRC) and with a recent checkpoint (only the tail); ``--size`` sets the log size (``--size 1GiB``).

``--profile`` re-runs the measurement under ``py-spy record`` and writes ``bench/results/store.svg``.
Targets (docs/PERFORMANCE.md): append >= 0.25x floor, batch >= 0.5x floor, 64 writers >= 10x one writer.
"""

from __future__ import annotations

import argparse
import json
import mmap
import os
import shutil
import struct
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import trio

from bench.codec import py_spy
from remoting.codec.message import MessageRecord, encode_record
from remoting.codec.msgid import pack_socket_address
from store.message_store import MessageStore
from store.results import AppendResult
from store.store_config import FlushDiskType, StoreConfig

SIZES = (128, 1024, 4096)
PROPS = "UNIQ_KEY\x017F000001000118B4AAC20D5A1C0000\x02TAGS\x01TagA\x02CLUSTER\x01DefaultCluster"
STORE_HOST = pack_socket_address("10.0.0.9", 10911)


def emit(line: dict[str, object]) -> None:
    print(json.dumps(line), flush=True)


def parse_size(text: str) -> int:
    units = {"kib": 1 << 10, "mib": 1 << 20, "gib": 1 << 30, "k": 1 << 10, "m": 1 << 20, "g": 1 << 30}
    lowered = text.strip().lower()
    for suffix, factor in units.items():
        if lowered.endswith(suffix):
            return int(float(lowered[: -len(suffix)]) * factor)
    return int(lowered)


def msg(size: int, queue_id: int = 0, topic: str = "BenchTopic") -> MessageRecord:
    return MessageRecord(topic, b"m" * size, queue_id, 0, PROPS, 0, 1_700_000_000_000, STORE_HOST, STORE_HOST)


def spread_messages(size: int, queues: int) -> list[MessageRecord]:
    """256 distinct messages round-robin over ``queues`` queues, each with its own topic string object, as a broker
    decodes them from separate requests (a producer's default queue selection is round-robin)."""
    return [msg(size, i % queues, "".join(["Bench", "Topic"])) for i in range(256)]


def config(root: Path, segment: int, **kw: object) -> StoreConfig:
    return StoreConfig(root, mapped_file_size_commit_log=segment, warm_mapped_file_enable=True,
                       message_index_enable=False, **kw)  # type: ignore[arg-type]  # fmt: skip


def floor(size: int, count: int, workdir: Path) -> float:
    """Bytes per second of copying ``count`` records one by one into a prefaulted mapping.

    Best of three passes, each into its own prefaulted region: an append always writes memory it has not written
    before, so a pass over a region an earlier pass left in the CPU cache (this machine's L3 holds hundreds of MiB)
    would measure a cache-hot copy no append can make."""
    record = encode_record(msg(size))
    n = len(record)
    region = count * n
    path = workdir / "floor"
    with open(path, "w+b") as f:
        f.truncate(3 * region)
        mm = mmap.mmap(f.fileno(), 3 * region)
    for pos in range(0, 3 * region, 4096):
        mm[pos] = 0
    best = float("inf")
    for base in (0, region, 2 * region):
        start = time.perf_counter()
        pos = base
        for _ in range(count):
            mm[pos : pos + n] = record
            pos += n
        best = min(best, time.perf_counter() - start)
    mm.close()
    path.unlink()
    return count * n / best


def bookkeeping(size: int, count: int, batch: int, segment: int, workdir: Path) -> float:
    """Bytes per second of :func:`floor`'s copies wrapped in an append's unavoidable Python bookkeeping (see the module
    docstring); ``batch`` records per call, copied and indexed with one slice each, as a batch append does."""
    record = encode_record(msg(size)) * batch
    n = len(record)
    entries = struct.pack(">qiq", 0, n // batch, 0) * batch
    path = workdir / "bookkeeping"
    with open(path, "w+b") as f:
        f.truncate(segment)
        mm = mmap.mmap(f.fileno(), segment)
    cq = mmap.mmap(-1, 300_000 * 20)
    for m in (mm, cq):
        for pos in range(0, len(m), 4096):
            m[pos] = 0
    offsets: dict[tuple[str, int], int] = {}
    state = {"closed": False, "full": None, "pos": 0}
    message = msg(size)

    def append(m: MessageRecord) -> AppendResult:
        if state["closed"] or state["full"] is not None:
            raise RuntimeError("closed")
        key = (m.topic, m.queue_id)
        queue_offset = offsets.get(key, 0)
        pos = state["pos"]
        if segment - pos < n + 8:
            pos = 0  # wrap, as the floor does
        mm[pos : pos + n] = record
        state["pos"] = pos + n
        offsets[key] = queue_offset + batch
        at = queue_offset * 20 % (len(cq) - len(entries))
        cq[at : at + len(entries)] = entries
        return AppendResult(pos, n, queue_offset, 0, None if batch == 1 else entries, STORE_HOST)

    best = float("inf")
    for _ in range(3):
        start = time.perf_counter()
        for _ in range(count // batch):
            append(message)
        best = min(best, time.perf_counter() - start)
    mm.close()
    cq.close()
    path.unlink()
    return (count // batch) * n / best


async def appends(size: int, count: int, batch: int, segment: int, workdir: Path,
                  spread: int = 0) -> tuple[float, float, float]:  # fmt: skip
    """(messages/s, bytes/s, CPU us per message) of async-flush appends; the store's services run so segments are
    preallocated. The CPU figure (process time, threads included) is the one to compare on a busy machine.
    ``spread``: single appends of :func:`spread_messages` over that many queues instead of one message again."""
    root = Path(tempfile.mkdtemp(dir=workdir))
    store = MessageStore(config(root, segment, flush_interval_commit_log=500), store_host=STORE_HOST)
    store.load()
    messages = spread_messages(size, spread) if spread else [msg(size) for _ in range(batch)]
    record_len = len(encode_record(messages[0]))
    async with trio.open_nursery() as nursery:
        await nursery.start(store.run)
        for queue in range(max(spread, 1)):  # creates the ConsumeQueue files: once per queue, not the steady rate
            store.append_batch(messages[queue : queue + 1] if spread else messages)
        start = time.perf_counter()
        cpu_start = time.process_time()
        done = 0
        while done < count:
            if spread:
                for m in messages:
                    store.append(m)
                done += len(messages)
            elif batch == 1:
                for _ in range(256):
                    store.append(messages[0])
                done += 256
            else:
                for _ in range(8):
                    store.append_batch(messages)
                done += 8 * batch
            await trio.sleep(0)  # let the allocation service prepare the next segment, as a broker would
        elapsed = time.perf_counter() - start
        cpu = time.process_time() - cpu_start
        nursery.cancel_scope.cancel()
    shutil.rmtree(root, ignore_errors=True)
    return done / elapsed, done * record_len / elapsed, cpu / done * 1e6


async def sync_writers(
    writers: int, duration: float, workdir: Path, flush: FlushDiskType, **settings: object
) -> tuple[float, float]:
    """(messages/s, CPU microseconds per message, the group-commit thread's included) of ``writers`` tasks each
    putting one message at a time (``settings``: more StoreConfig fields). Only PUT_OK puts count: one answered
    FLUSH_DISK_TIMEOUT (or a SYNC_MASTER's other statuses) was not confirmed."""
    root = Path(tempfile.mkdtemp(dir=workdir))
    store = MessageStore(config(root, 64 << 20, flush_disk_type=flush, **settings), store_host=STORE_HOST)
    store.load()
    done = 0
    message = msg(128)

    # An ASYNC_FLUSH put never yields: without a checkpoint the first writer would never let the timeout fire.
    pause = trio.lowlevel.checkpoint if flush is FlushDiskType.ASYNC_FLUSH else None

    async def writer() -> None:
        nonlocal done
        while True:
            if (await store.put(message)).ok:
                done += 1
            if pause is not None:
                await pause()

    async with trio.open_nursery() as nursery:
        await nursery.start(store.run)
        start, cpu = time.perf_counter(), time.process_time()
        with trio.move_on_after(duration):
            async with trio.open_nursery() as inner:
                for _ in range(writers):
                    inner.start_soon(writer)
        elapsed, cpu = time.perf_counter() - start, time.process_time() - cpu
        nursery.cancel_scope.cancel()
    return done / elapsed, 1e6 * cpu / max(1, done)


async def sustained(size: int, duration: float, workdir: Path) -> tuple[float, float]:
    """(MB/s, process CPU us per message) of batch appends of 32 for ``duration`` seconds into 256 MiB segments,
    the store's services running: unlike ``append``, this spans periodic flushes, segment rolls and warm-ups, so it
    shows what disk write-back costs beside the append itself."""
    root = Path(tempfile.mkdtemp(dir=workdir))
    store = MessageStore(config(root, 256 << 20, flush_interval_commit_log=500), store_host=STORE_HOST)
    store.load()
    messages = [msg(size) for _ in range(32)]
    async with trio.open_nursery() as nursery:
        await nursery.start(store.run)
        start, cpu, first = time.perf_counter(), time.process_time(), store.max_phy_offset
        done = 0
        while time.perf_counter() - start < duration:
            for _ in range(8):
                store.append_batch(messages)
            done += 256
            await trio.sleep(0)
        elapsed, cpu = time.perf_counter() - start, time.process_time() - cpu
        written = store.max_phy_offset - first
        nursery.cancel_scope.cancel()
    shutil.rmtree(root, ignore_errors=True)
    return written / elapsed / 1e6, cpu / done * 1e6


def gets(duration: float, workdir: Path) -> tuple[float, float]:
    root = Path(tempfile.mkdtemp(dir=workdir))
    store = MessageStore(config(root, 64 << 20), store_host=STORE_HOST)
    store.load()
    total = 20_000
    for _ in range(total):
        store.append(msg(1024))
    calls = slices = 0
    offset = 0
    start = time.perf_counter()
    deadline = start + duration
    while time.perf_counter() < deadline:
        for _ in range(20):
            result = store.get("BenchTopic", 0, offset, 32)
            calls += 1
            slices += result.message_count
            offset = result.next_begin_offset if result.next_begin_offset < total else 0
    elapsed = time.perf_counter() - start
    store.close()
    return calls / elapsed, slices / elapsed


def recovery(size: int, workdir: Path) -> None:
    root = Path(tempfile.mkdtemp(dir=workdir))
    segment = min(size, 1 << 30)
    store = MessageStore(config(root, segment), store_host=STORE_HOST)
    store.load()
    message = msg(1024)
    tail_start = 0
    while store.max_phy_offset < size - 4096:
        phy = store.append(message).phy_offset
        if phy <= size - (1 << 20):
            tail_start = phy
    written = store.max_phy_offset
    for label, checkpoint_at in (("full_scan", 0), ("tail_only", tail_start)):
        store.flush_all_blocking()
        assert store.checkpoint is not None
        store.checkpoint.safe_offset = checkpoint_at
        store.checkpoint.flush()
        store.abandon()
        start = time.perf_counter()
        store = MessageStore(config(root, segment), store_host=STORE_HOST)
        store.load()
        elapsed = time.perf_counter() - start
        assert store.abnormal_recovery and store.max_phy_offset == written
        emit({"bench": "store", "case": "recovery", "mode": label, "log_bytes": written,
              "rescanned_bytes": written - checkpoint_at, "seconds": round(elapsed, 3),
              "mb_per_s": round((written - checkpoint_at) / elapsed / 1e6, 1)})  # fmt: skip
    store.close()


async def measure(args: argparse.Namespace) -> None:
    workdir = Path(tempfile.mkdtemp(prefix="rocketrio-bench-", dir=args.dir))
    try:
        await _measure(args, workdir)
    finally:
        shutil.rmtree(workdir, ignore_errors=True)


async def _measure(args: argparse.Namespace, workdir: Path) -> None:
    cases = set(args.cases.split(","))
    segment = 64 << 20
    if "append" in cases:
        for size in SIZES:
            count = max(2000, int(args.mb * (1 << 20) / (size + 180)))
            floor_bps = floor(size, count, workdir)
            emit({"bench": "store", "case": "floor", "body": size, "mb_per_s": round(floor_bps / 1e6, 1)})
            for batch in (1, 32):
                bps = bookkeeping(size, count, batch, segment, workdir)
                emit({"bench": "store", "case": "bookkeeping", "body": size, "batch": batch,
                      "vs_floor": round(bps / floor_bps, 3)})  # fmt: skip
            for case, batch, spread in (("append", 1, 0), ("append_spread", 1, 8), ("append_batch", 32, 0)):
                # Best of three fresh stores, as the floor is best of three passes: neither carries a busy moment.
                mps, bps, cpu_us = max([await appends(size, count, batch, segment, workdir, spread)
                                        for _ in range(3)])  # fmt: skip
                emit({"bench": "store", "case": case, "body": size, "msgs_per_s": round(mps),
                      "mb_per_s": round(bps / 1e6, 1), "vs_floor": round(bps / floor_bps, 3),
                      "cpu_us_per_msg": round(cpu_us, 2)})  # fmt: skip
    if "sync" in cases:
        single = 0.0
        for writers in (1, 16, 64):
            rate, cpu_us = await sync_writers(writers, args.duration, workdir, FlushDiskType.SYNC_FLUSH)
            single = single or rate
            # No put confirmed by the one writer (a short run on a loaded machine): the ratio to it is unknown.
            ratio = round(rate / single, 2) if single else None
            emit({"bench": "store", "case": "sync_flush", "writers": writers, "msgs_per_s": round(rate),
                  "vs_1_writer": ratio, "cpu_us_per_msg": round(cpu_us, 1)})  # fmt: skip
        # The same puts without the flush wait: what SYNC_FLUSH adds per message is the difference.
        rate, cpu_us = await sync_writers(64, args.duration, workdir, FlushDiskType.ASYNC_FLUSH)
        emit({"bench": "store", "case": "async_flush_put", "writers": 64, "msgs_per_s": round(rate),
              "cpu_us_per_msg": round(cpu_us, 1)})  # fmt: skip
    if "get" in cases:
        calls, slices = gets(args.duration, workdir)
        emit({"bench": "store", "case": "get", "msgs_per_get": 32, "gets_per_s": round(calls),
              "slices_per_s": round(slices)})  # fmt: skip
    if "sustained" in cases:
        for size in SIZES:
            mb_s, cpu_us = await sustained(size, args.duration * 3, workdir)
            emit({"bench": "store", "case": "sustained", "body": size, "mb_per_s": round(mb_s, 1),
                  "cpu_us_per_msg": round(cpu_us, 2)})  # fmt: skip
    if "recovery" in cases:
        recovery(parse_size(args.size), workdir)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--mb", type=float, default=24, help="MiB appended per append case")
    parser.add_argument("--duration", type=float, default=1.0, help="seconds per SYNC_FLUSH / get case")
    parser.add_argument("--size", default="64MiB", help="log size for the recovery case (e.g. 1GiB)")
    parser.add_argument(
        "--cases",
        default="append,sync,get,recovery",
        help="comma-separated subset to run (also: sustained, 3x --duration of batch appends per size)",
    )
    parser.add_argument("--dir", default=None, help="directory for the benchmark stores (default: system temp)")
    parser.add_argument("--profile", action="store_true", help="re-run under py-spy, writing bench/results/store.svg")
    args = parser.parse_args()
    trio.run(measure, args)
    if args.profile:
        os.makedirs("bench/results", exist_ok=True)
        argv = [sys.executable, "-m", "bench.store", "--mb", str(args.mb), "--size", args.size, "--cases", args.cases]
        subprocess.run([py_spy(), "record", "-o", "bench/results/store.svg", "--", *argv], check=True)


if __name__ == "__main__":
    main()
