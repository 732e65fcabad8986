"""Message record codec throughput: records encoded / decoded per second for 128 B, 1 KiB and 4 KiB bodies.

Ops:

- ``prepare+write``: :func:`prepare_message` then :func:`write_record` into a reused buffer (the store's append path);
- ``write``: :func:`write_record` of an already prepared message (the part done under the append "lock");
- ``meta``: :func:`read_record_meta` (the store's dispatch / recovery fast path, without CRC);
- ``meta+crc``: the same with the body CRC check (recovery);
- ``decode``: :func:`decode_record` into a ``MessageExt`` (clients, tools);
- ``iter32``: :func:`iter_records` over a 32-record pull body, counted per record.

Output: one JSON object per line, e.g. ``{"bench": "records", "body": 1024, "op": "write", "ops_per_s": 1.2e6,
"mb_per_s": 1300.0}``. Compare ops within one run; absolute figures vary by machine.
``--profile`` re-runs under ``py-spy record`` and writes ``bench/results/records.svg``.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from collections.abc import Callable

from bench.codec import py_spy
from remoting.codec.message import (
    MessageRecord,
    decode_record,
    encode_record,
    iter_records,
    prepare_message,
    read_record_meta,
    write_record,
)
from remoting.codec.msgid import pack_socket_address

SIZES = (128, 1024, 4096)
PROPS = "UNIQ_KEY\x017F000001000118B4AAC20D5A1C0000\x02TAGS\x01TagA\x02KEYS\x01order-1\x02CLUSTER\x01DefaultCluster"


def rate(fn: Callable[[], object], per_call: int, duration: float) -> float:
    """Best of three thirds of ``duration``: calls per second times ``per_call``."""
    best = 0.0
    for _ in range(3):
        calls = 0
        start = time.perf_counter()
        deadline = start + duration / 3
        while True:
            for _ in range(50):
                fn()
            calls += 50
            now = time.perf_counter()
            if now >= deadline:
                break
        best = max(best, calls * per_call / (now - start))
    return best


def cases_for(size: int) -> tuple[int, list[tuple[str, Callable[[], object], int]]]:
    """The record length and the timed cases for one body size."""
    msg = MessageRecord(
        topic="BenchTopic",
        body=b"m" * size,
        queue_id=1,
        properties=PROPS,
        born_timestamp=1_700_000_000_000,
        born_host=pack_socket_address("10.0.0.7", 40000),
        store_host=pack_socket_address("10.0.0.9", 10911),
    )
    prepared = prepare_message(msg)
    buf = bytearray(prepared.size * 2)
    record = encode_record(msg, 5, 4096, 1_700_000_000_001)
    pull_body = record * 32
    return len(record), [
        ("prepare+write", lambda: write_record(buf, 0, prepare_message(msg), 5, 0, 1), 1),
        ("write", lambda: write_record(buf, 0, prepared, 5, 0, 1), 1),
        ("meta", lambda: read_record_meta(record), 1),
        ("meta+crc", lambda: read_record_meta(record, 0, True), 1),
        ("decode", lambda: decode_record(record), 1),
        ("iter32", lambda: sum(1 for _ in iter_records(pull_body)), 32),
    ]


def measure(duration: float) -> None:
    for size in SIZES:
        record_len, cases = cases_for(size)
        for op, fn, per_call in cases:
            ops = rate(fn, per_call, duration)
            line = {"bench": "records", "body": size, "op": op, "ops_per_s": round(ops),
                    "mb_per_s": round(ops * record_len / 1e6, 1)}  # fmt: skip
            print(json.dumps(line), flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--duration", type=float, default=0.3, help="seconds per case (best of 3 thirds)")
    parser.add_argument("--profile", action="store_true", help="re-run under py-spy, writing bench/results/records.svg")
    args = parser.parse_args()
    measure(args.duration)
    if args.profile:
        os.makedirs("bench/results", exist_ok=True)
        argv = [sys.executable, "-m", "bench.records", "--duration", str(max(args.duration, 1.0))]
        subprocess.run([py_spy(), "record", "-o", "bench/results/records.svg", "--", *argv], check=True)


if __name__ == "__main__":
    main()
