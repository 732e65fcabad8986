"""What the 1-second put sampling costs with many of the broker's own puts marked (pop checkpoints, send-backs,
committed transaction messages: :meth:`broker.stats.manager.BrokerStatsManager.record_uncounted_put`). One JSON
object per line::

    {"bench": "stats_marks", "layout": "contiguous", "marked": 10000, "unmarked": 0, "ms": ..., "us_per_mark": ...}

A real store over a temporary directory; per round and layout, ``marked`` entries are appended to one queue and
marked (``contiguous``: all marked; ``interleaved``: each followed by an unmarked send; ``none``: the same entries
unmarked, the baseline), then one :meth:`~broker.stats.manager.BrokerStatsManager.count_puts` is timed in this
thread's CPU time (steadier on a shared machine). Usage: ``python -m bench.stats_marks [--rounds 3] [--marked
10000]``; ``--profile`` re-runs it under ``py-spy record`` and writes ``bench/results/stats_marks.txt`` (raw
stacks).
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Final

from bench.profiling import py_spy
from broker.stats.manager import BrokerStatsManager
from remoting.codec.message import MessageRecord
from store.message_store import MessageStore
from store.store_config import StoreConfig

BODY: Final = b"c" * 200
LAYOUTS: Final = ("none", "contiguous", "interleaved")


def emit(record: dict[str, object]) -> None:
    print(json.dumps({"bench": "stats_marks", **record}), flush=True)


def one(store: MessageStore, stats: BrokerStatsManager, layout: str, marked: int) -> float:
    """Append and mark per ``layout``, then return the CPU seconds of one sampling."""
    topic = "BenchMarks"
    for _ in range(marked):
        appended = store.append(MessageRecord(topic, BODY, 0))
        if layout != "none":
            stats.record_uncounted_put(topic, 0, appended.queue_offset)
        if layout == "interleaved":
            store.append(MessageRecord(topic, BODY, 0))
    started = time.thread_time()
    stats.count_puts()
    return time.thread_time() - started


def measure(rounds: int, marked: int) -> None:
    with tempfile.TemporaryDirectory(prefix="bench-stats-marks-") as tmp:
        config = StoreConfig(Path(tmp) / "store", mapped_file_size_commit_log=1 << 30, message_index_enable=False)
        store = MessageStore(config)
        store.load()
        stats = BrokerStatsManager(store, "BenchCluster")
        stats.start_counting()
        try:
            for round_no in range(rounds):
                for layout in LAYOUTS:
                    seconds = one(store, stats, layout, marked)
                    emit(
                        {
                            "round": round_no,
                            "layout": layout,
                            "marked": 0 if layout == "none" else marked,
                            "unmarked": marked if layout in ("none", "interleaved") else 0,
                            "ms": round(seconds * 1000, 3),
                            "us_per_mark": round(seconds * 1e6 / marked, 3),
                        }
                    )
        finally:
            store.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--marked", type=int, default=10_000)
    parser.add_argument("--profile", action="store_true", help="re-run under py-spy record (raw stacks)")
    args = parser.parse_args()
    if args.profile:
        out = Path(__file__).parent / "results" / "stats_marks.txt"
        command = [sys.executable, "-m", "bench.stats_marks", "--rounds", str(args.rounds)]
        command += ["--marked", str(args.marked)]
        subprocess.run([py_spy(), "record", "-r", "500", "-f", "raw", "-o", str(out), "--", *command], check=True)
        return
    measure(args.rounds, args.marked)


if __name__ == "__main__":
    main()
