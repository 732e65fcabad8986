"""What one ``/metrics`` scrape's ``rocketmq_timer_message_snapshot`` costs the Trio thread (broker/timer/wheel.py
``TimerWheel.entries_ahead``, from kept per-slot counts) against the full scan of the wheel it made before, on a
wheel of the default shape (604,800 slots of 100 ms) holding ``timers`` entries at random slots. Output: one JSON
object per line, times in milliseconds (best of ``--rounds``)::

    {"bench": "timer_snapshot", "timers": ..., "filled_slots": ..., "kept_ms": ..., "scan_ms": ...,
     "count_from_ms": ...}

- ``kept_ms``: one ``entries_ahead`` over RocketMQ 5.3.3's eight ``timerDist`` bounds (what a scrape now costs);
- ``scan_ms``: the same figures by a scan of every filled slot (what a scrape cost before);
- ``count_from_ms``: building the counts after a clean load (once, in the load's worker thread).
"""

from __future__ import annotations

import argparse
import bisect
import json
import random
import tempfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path

from broker.timer.service import TIMER_DIST_S
from broker.timer.wheel import WHEEL_SLOTS, Slot, TimerWheel

NOW_MS = 1_700_000_000_000


def _best_ms(run: Callable[[], object], rounds: int) -> float:
    best = float("inf")
    for _ in range(rounds):
        start = time.perf_counter()
        run()
        best = min(best, time.perf_counter() - start)
    return round(best * 1000, 3)


def _scanned(wheel: TimerWheel, bounds_ms: Sequence[int]) -> list[int]:
    start, prec = wheel.slot_time(NOW_MS), wheel.precision_ms
    totals = [0] * len(bounds_ms)
    for _, slot in wheel.filled():
        ahead = (slot.slot_ms - start) // prec
        if 0 <= ahead * prec < bounds_ms[-1]:
            totals[bisect.bisect_right(bounds_ms, ahead * prec)] += slot.num
    return totals


def _fill(wheel: TimerWheel, timers: int, rng: random.Random) -> None:
    for _ in range(timers):
        at = wheel.slot_time(NOW_MS + rng.randrange(WHEEL_SLOTS) * wheel.precision_ms)
        slot = wheel.get(at)
        wheel.put(Slot(at, 0, slot.entries + 1))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--timers", type=int, nargs="*", default=[0, 10_000, 100_000])
    args = parser.parse_args()
    bounds = [bound * 1000 for bound in TIMER_DIST_S]
    rng = random.Random(1)
    with tempfile.TemporaryDirectory() as root:
        for timers in args.timers:
            wheel = TimerWheel(Path(root) / f"wheel{timers}", WHEEL_SLOTS, 100)
            wheel.load()
            _fill(wheel, timers, rng)
            kept = wheel.entries_ahead(NOW_MS, bounds, counted_from_ms=NOW_MS)
            assert kept == _scanned(wheel, bounds), "the kept counts differ from the scan"
            row = {
                "bench": "timer_snapshot",
                "timers": timers,
                "filled_slots": sum(1 for _ in wheel.filled()),
                "kept_ms": _best_ms(
                    lambda w=wheel: w.entries_ahead(NOW_MS, bounds, counted_from_ms=NOW_MS), args.rounds
                ),
                "scan_ms": _best_ms(lambda w=wheel: _scanned(w, bounds), args.rounds),
                "count_from_ms": _best_ms(lambda w=wheel: w.count_from(NOW_MS), args.rounds),
            }
            print(json.dumps(row), flush=True)
            wheel.close()


if __name__ == "__main__":
    main()
