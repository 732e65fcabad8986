"""What taking blocks ahead of mapped writes costs (store/mapped_file.py ``reserve_blocks``, ``MappedFile.reserve``).

A sparse mapped file written where it has no block, on a full disk, is a SIGBUS; so the index files, DLedger's index
segments and the checkpoint take their blocks (``posix_fallocate``) before writes reach them. Output: one JSON object
per line, times in microseconds (median of ``--rounds``), on the file system of ``--dir`` (default: the temp dir)::

    {"bench": "reserve_blocks", "op": "index_create", "sparse_us": ..., "reserved_us": ..., "reserved_mib": ...}
    {"bench": "reserve_blocks", "op": "chunk", "us": ..., "us_per_record": ...}
    {"bench": "reserve_blocks", "op": "loaded", "mib": ..., "us": ...}

- ``index_create``: an index file of RocketMQ's default geometry (5M slots, 20M entries: 420 MB) made sparse
  (truncate, map, header: the old way) and made by ``IndexFile.create`` (header and slots, 20 MB, and a first chunk
  of entries reserved); ``reserved_mib`` is the disk it takes at once;
- ``chunk``: one ``MappedFile.reserve`` of the next :data:`~store.mapped_file.RESERVE_CHUNK` of a sparse 160 MB
  DLedger index segment, and that per 32-byte record it covers;
- ``loaded``: the first reserve of a segment loaded from disk, all of it written: ``fallocate`` over blocks it has.
"""

from __future__ import annotations

import argparse
import json
import mmap
import os
import statistics
import tempfile
import time
from pathlib import Path

from store.index_file import HEADER_SIZE, IndexFile, index_file_size
from store.mapped_file import RESERVE_CHUNK, MappedFile

SLOTS, ENTRIES = 5_000_000, 20_000_000
DLEDGER_INDEX = 32 * 5 * 1024 * 1024


def _us(start: float) -> float:
    return (time.perf_counter() - start) * 1e6


def sparse_index_create(path: Path) -> None:
    """The index file made as before: sized, mapped, header written (one page takes a block)."""
    size = index_file_size(SLOTS, ENTRIES)
    with open(path, "w+b") as f:
        f.truncate(size)
        mm = mmap.mmap(f.fileno(), size)
    mm[:HEADER_SIZE] = bytes(HEADER_SIZE)
    mm.close()


def index_create(directory: Path, rounds: int) -> dict[str, object]:
    sparse, reserved, taken = [], [], 0
    for i in range(rounds):
        path = directory / f"sparse{i}"
        start = time.perf_counter()
        sparse_index_create(path)
        sparse.append(_us(start))
        path.unlink()
        path = directory / f"reserved{i}"
        start = time.perf_counter()
        IndexFile.create(path, SLOTS, ENTRIES).close()
        reserved.append(_us(start))
        taken = os.stat(path).st_blocks * 512
        path.unlink()
    return {"op": "index_create", "sparse_us": round(statistics.median(sparse)),
            "reserved_us": round(statistics.median(reserved)), "reserved_mib": round(taken / 2**20, 2)}  # fmt: skip


def chunk(directory: Path, rounds: int) -> dict[str, object]:
    mf = MappedFile(directory / "index", 0, DLEDGER_INDEX, preallocate=False)
    times = []
    for i in range(1, rounds + 1):
        start = time.perf_counter()
        mf.reserve(i * RESERVE_CHUNK)
        times.append(_us(start))
    mf.destroy()
    us = statistics.median(times)
    per_record = us / (RESERVE_CHUNK // 32)
    return {"op": "chunk", "chunk": RESERVE_CHUNK, "us": round(us, 1), "us_per_record": round(per_record, 5)}


def loaded(directory: Path, rounds: int) -> dict[str, object]:
    path = directory / "loaded"
    MappedFile(path, 0, DLEDGER_INDEX).close()  # every block taken, as a segment written to its end
    times = []
    for _ in range(rounds):
        mf = MappedFile(path, 0, DLEDGER_INDEX, preallocate=False)
        start = time.perf_counter()
        mf.reserve(DLEDGER_INDEX - 32)
        times.append(_us(start))
        mf.close()
    path.unlink()
    return {"op": "loaded", "mib": DLEDGER_INDEX // 2**20, "us": round(statistics.median(times))}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0] if __doc__ else None)
    parser.add_argument("--rounds", type=int, default=21)
    parser.add_argument("--dir", type=Path, default=None, help="where the files go (default: the temp dir)")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(dir=args.dir) as d:
        for measure in (index_create, chunk, loaded):
            print(json.dumps({"bench": "reserve_blocks", **measure(Path(d), args.rounds)}), flush=True)


if __name__ == "__main__":
    main()
