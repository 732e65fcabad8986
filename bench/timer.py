"""Timer messages: insert and fire rates with many pending timers, and what they cost in memory. One JSON object per
line::

    {"bench": "timer", "op": "append", "timers": 1000000, "msgs_per_s": ...}
    {"bench": "timer", "op": "file", "timers": 1000000, "timers_per_s": ..., "rss_anon_mb": ..., "log_mb": ...}
    {"bench": "timer", "op": "fire", "timers": 1000000, "timers_per_s": ..., "ratio_to_file": ...}

- ``append``: the send path's timer rewrite plus the CommitLog append into ``rmq_sys_wheel_timer``;
- ``file``: :meth:`~broker.timer.timer_store.TimerStore.enqueue` filing every pending timer into the on-disk wheel
  (delivery times spread over one hour). ``rss_anon_mb`` is the growth of the process's anonymous memory while
  filing (the wheel and log are file-backed mappings, so per-timer RAM shows up here if anywhere), ``log_mb`` the
  timer log's size on disk;
- ``fire``: :meth:`~broker.timer.timer_store.TimerStore.dequeue` once every timer is due: walk the slots, read each
  message back and append it to its real topic; ``ratio_to_file`` = fire / file throughput.

Store and timer run in this process over a temporary directory on the store's test clock (no sleeping). The default
(100 000 timers) takes a few seconds; the full-size run is ``--timers 1000000`` (about a minute on 2 vCPUs).
``--profile`` re-runs the measurement under ``py-spy record`` and writes ``bench/results/timer.svg``.
"""

from __future__ import annotations

import argparse
import json
import random
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Final

from bench.profiling import py_spy
from broker.timer.service import TimerMessageService
from remoting.codec.message import MessageRecord
from store.message_store import MessageStore
from store.store_config import StoreConfig

BODY: Final = b"t" * 128
PROPERTIES: Final = "UNIQ_KEY\x017F0000010001000000000000000000\x02TAGS\x01TagA\x02CLUSTER\x01DefaultCluster"
SPREAD_MS: Final = 3_600_000


def emit(record: dict[str, object]) -> None:
    print(json.dumps({"bench": "timer", **record}), flush=True)


def rss_anon_kb() -> int:
    """RssAnon of this process (Linux), 0 where unavailable."""
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("RssAnon:"):
                return int(line.split()[1])
    except OSError:
        pass
    return 0


def measure(timers: int) -> None:
    now = [1_700_000_000_000]
    rng = random.Random(7)
    with tempfile.TemporaryDirectory(prefix="bench-timer-") as tmp:
        root = Path(tmp) / "store"
        config = StoreConfig(
            root, mapped_file_size_commit_log=1 << 30, message_index_enable=False, now_ms=lambda: now[0]
        )
        store = MessageStore(config)
        store.load()
        service = TimerMessageService(store, root / "config")
        core = service.timers
        core.load()
        started = time.perf_counter()
        for i in range(timers):
            props = f"{PROPERTIES}\x02TIMER_DELAY_MS\x01{rng.randrange(1000, SPREAD_MS)}"
            store.append(service.rewrite(MessageRecord("BenchTimed", BODY, i % 4, properties=props)))
        emit({"op": "append", "timers": timers, "msgs_per_s": round(timers / (time.perf_counter() - started))})

        rss_before = rss_anon_kb()
        started = time.perf_counter()
        while core.enqueue(65_536):
            pass
        file_rate = timers / (time.perf_counter() - started)
        log_mb = sum(f.stat().st_size for f in (root / "timer" / "timerlog").iterdir()) / 2**20
        emit(
            {
                "op": "file",
                "timers": timers,
                "pending": core.pending,
                "timers_per_s": round(file_rate),
                "rss_anon_mb": round((rss_anon_kb() - rss_before) / 1024, 1),
                "log_mb": round(log_mb, 1),
            }
        )

        now[0] += SPREAD_MS + 1000
        started = time.perf_counter()
        while core.dequeue(now[0], 65_536) is not None:
            pass
        fire_rate = timers / (time.perf_counter() - started)
        assert core.delivered == timers and core.pending == 0, (core.delivered, core.pending)
        emit(
            {
                "op": "fire",
                "timers": timers,
                "timers_per_s": round(fire_rate),
                "ratio_to_file": round(fire_rate / file_rate, 3),
            }
        )
        core.close()
        store.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0] if __doc__ else None)
    parser.add_argument("--timers", type=int, default=100_000, help="pending timers (the full-size run: 1000000)")
    parser.add_argument("--profile", action="store_true", help="re-run under py-spy: bench/results/timer.svg")
    args = parser.parse_args()
    measure(args.timers)
    if args.profile:
        Path("bench/results").mkdir(parents=True, exist_ok=True)
        argv = [sys.executable, "-m", "bench.timer", "--timers", str(args.timers)]
        subprocess.run([py_spy(), "record", "-o", "bench/results/timer.svg", "--", *argv], check=True)


if __name__ == "__main__":
    main()
