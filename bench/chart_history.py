"""What the charts' day files cost at the end of a day: writing and reading one day of samples.

    python -m bench.chart_history [--topics 1000] [--brokers 4] [--samples 1440] [--rounds 5]

A day of one-minute samples (1,440) of every broker and topic, in rocketmq-dashboard's line format, is written
(``write_ms``: what the sampler does after every sample, the day's files replaced whole, as Java's ``saveData``
does every 5 seconds) and read back (``read_ms``: a past day's chart, or a restart). One JSON line: the files'
bytes and the min, median and max over the rounds.
"""

from __future__ import annotations

import argparse
import json
import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from dashboard.history import DayFiles, Lines

DAY = "2026-03-04"
START_MS = 1_772_611_200_000


def day_of_lines(keys: list[str], samples: int, topic: bool) -> Lines:
    def line(i: int) -> str:
        ms = START_MS + i * 60_000
        return f"{ms},12.50000,{i * 750},3.25000,{i * 195}" if topic else f"{ms},40.12345,12.50000,3.25000"

    return {key: [line(i) for i in range(samples)] for key in keys}


def timed(fn: Callable[[], object], rounds: int) -> dict[str, float]:
    figures = []
    for _ in range(rounds):
        started = time.perf_counter()
        fn()
        figures.append((time.perf_counter() - started) * 1000)
    low, middle, high = min(figures), statistics.median(figures), max(figures)
    return {"min": round(low, 1), "median": round(middle, 1), "max": round(high, 1)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--topics", type=int, default=1000)
    parser.add_argument("--brokers", type=int, default=4)
    parser.add_argument("--samples", type=int, default=1440)
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    brokers = day_of_lines([f"broker-{i}:0" for i in range(args.brokers)], args.samples, topic=False)
    topics = day_of_lines([f"Topic{i}" for i in range(args.topics)], args.samples, topic=True)
    with tempfile.TemporaryDirectory() as directory:
        files = DayFiles(Path(directory))
        write = timed(lambda: files.write(DAY, brokers, topics), args.rounds)
        read = timed(lambda: files.read(DAY), args.rounds)
        size = files.brokers_path(DAY).stat().st_size + files.topics_path(DAY).stat().st_size
    figures = {"topics": args.topics, "brokers": args.brokers, "samples": args.samples, "bytes": size}
    print(json.dumps({"bench": "chart_history", **figures, "write_ms": write, "read_ms": read}))


if __name__ == "__main__":
    main()
