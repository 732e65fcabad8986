"""IndexService put and query rates, against the raw floor of the same byte writes, in one run.

Keys look like real ones: ``BenchTopic#<32-hex UNIQ_KEY>``, one per message, all distinct (so Java-hash caching does
not help). Output: one JSON object per line, e.g.::

    {"bench": "index", "op": "put", "keys": 100000, "keys_per_s": ..., "floor_per_s": ..., "ratio": ...}
    {"bench": "index", "op": "query", "queries": 100000, "queries_per_s": ..., "hits": 100000}

- ``put``: ``IndexService.put`` of one key per message into a fresh index (default RocketMQ geometry: 5M slots,
  20M entries, a 420 MB sparse mapped file);
- ``floor``: the bytes a put must write (one slot read, one 20-byte entry, one slot, the 40-byte header) done with
  ``struct.pack_into`` on an mmap of the same geometry, with the hash precomputed; ``ratio`` = put / floor;
- ``query``: ``IndexService.query(topic, key, 32, 0, now)`` for keys that exist, in random order.

``--profile`` re-runs the same measurement under ``py-spy record`` and writes ``bench/results/index.svg``.
"""

from __future__ import annotations

import argparse
import json
import mmap
import os
import random
import struct
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from bench.profiling import py_spy
from store.index import HEADER_SIZE, IndexService, index_file_size, index_key_hash

TOPIC = "BenchTopic"
T0 = 1_700_000_000_000


def make_keys(count: int, seed: int = 7) -> list[str]:
    rng = random.Random(seed)
    return [f"{rng.getrandbits(128):032X}" for _ in range(count)]


def measure_floor(hashes: list[int], slots: int, entries: int) -> float:
    """Rate of the raw byte work of a put, without hashing or bookkeeping."""
    header, entry, slot = struct.Struct(">qqqqii"), struct.Struct(">iqii"), struct.Struct(">i")
    entries_at = HEADER_SIZE + slots * 4
    size = index_file_size(slots, entries)
    with tempfile.TemporaryFile() as f:
        f.truncate(size)
        mm = mmap.mmap(f.fileno(), size)
        start = time.perf_counter()
        for number, key_hash in enumerate(hashes, start=1):
            slot_pos = HEADER_SIZE + (key_hash % slots) * 4
            (prev,) = slot.unpack_from(mm, slot_pos)
            entry.pack_into(mm, entries_at + number * 20, key_hash, number, 0, prev)
            slot.pack_into(mm, slot_pos, number)
            header.pack_into(mm, 0, T0, T0, 0, number, number, number + 1)
        elapsed = time.perf_counter() - start
        mm.close()
    return len(hashes) / elapsed


def measure(count: int, slots: int, entries: int) -> None:
    keys = make_keys(count)
    with tempfile.TemporaryDirectory() as d:
        service = IndexService(Path(d), max_hash_slots=slots, max_index_num=entries)
        start = time.perf_counter()
        for i, key in enumerate(keys):
            service.put(TOPIC, (key,), i, T0 + i)
        put_rate = count / (time.perf_counter() - start)

        floor_rate = measure_floor([index_key_hash(f"{TOPIC}#{k}") for k in keys], slots, entries)
        print(
            json.dumps(
                {
                    "bench": "index",
                    "op": "put",
                    "keys": count,
                    "max_hash_slots": slots,
                    "max_index_num": entries,
                    "files": len(service.files),
                    "keys_per_s": round(put_rate),
                    "floor_per_s": round(floor_rate),
                    "ratio": round(put_rate / floor_rate, 3),
                }
            ),
            flush=True,
        )

        order = keys[:]
        random.Random(11).shuffle(order)
        end = T0 + count
        start = time.perf_counter()
        hits = sum(len(service.query(TOPIC, key, 32, 0, end)) for key in order)
        query_rate = count / (time.perf_counter() - start)
        print(
            json.dumps(
                {"bench": "index", "op": "query", "queries": count, "queries_per_s": round(query_rate), "hits": hits}
            ),
            flush=True,
        )
        service.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0] if __doc__ else None)
    parser.add_argument("--count", type=int, default=100_000, help="messages (one key each) to put and query")
    parser.add_argument("--slots", type=int, default=5_000_000, help="maxHashSlotNum")
    parser.add_argument("--entries", type=int, default=20_000_000, help="maxIndexNum")
    parser.add_argument("--profile", action="store_true", help="re-run under py-spy, writing bench/results/index.svg")
    args = parser.parse_args()
    measure(args.count, args.slots, args.entries)
    if args.profile:
        os.makedirs("bench/results", exist_ok=True)
        argv = [sys.executable, "-m", "bench.index", "--count", str(args.count)]
        argv += ["--slots", str(args.slots), "--entries", str(args.entries)]
        subprocess.run([py_spy(), "record", "-o", "bench/results/index.svg", "--", *argv], check=True)


if __name__ == "__main__":
    main()
