"""Delay-level delivery throughput: how fast the schedule service moves due messages from ``SCHEDULE_TOPIC_XXXX`` to
their real topics, beside a plain append of the same messages. One JSON object per line::

    {"bench": "delay", "op": "append", "messages": 100000, "msgs_per_s": ...}
    {"bench": "delay", "op": "schedule", "messages": 100000, "msgs_per_s": ...}
    {"bench": "delay", "op": "deliver", "messages": 100000, "levels": 4, "msgs_per_s": ..., "ratio_to_append": ...}

- ``append``: plain ``MessageStore.append`` of ``messages`` 128-byte messages (the floor every delivery pays once);
- ``schedule``: the send path's delay rewrite plus the append into the level queues;
- ``deliver``: :meth:`~broker.schedule.ScheduleMessageService.deliver_due` over every level once all are due (read
  the consume queue, decode the record, rebuild and append it to the real topic); ``ratio_to_append`` = deliver /
  append throughput (compare ratios, not runs).

Store and service run in this process over a temporary directory, on the store's test clock (no sleeping).
``--profile`` re-runs the measurement under ``py-spy record`` and writes ``bench/results/delay.svg``.
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
from broker.schedule import ScheduleMessageService
from remoting.codec.message import MessageRecord
from store.message_store import MessageStore
from store.store_config import StoreConfig

BODY: Final = b"d" * 128
PROPERTIES: Final = (
    "UNIQ_KEY\x017F0000010001000000000000000000\x02TAGS\x01TagA\x02KEYS\x01k1\x02CLUSTER\x01DefaultCluster"
)


def emit(record: dict[str, object]) -> None:
    print(json.dumps({"bench": "delay", **record}), flush=True)


def _store(root: Path, now: list[int]) -> MessageStore:
    config = StoreConfig(root, mapped_file_size_commit_log=256 << 20, message_index_enable=False, now_ms=lambda: now[0])
    store = MessageStore(config)
    store.load()
    return store


def measure(messages: int, levels: int) -> None:
    now = [1_700_000_000_000]
    with tempfile.TemporaryDirectory(prefix="bench-delay-") as tmp:
        plain = _store(Path(tmp) / "plain", now)
        started = time.perf_counter()
        for i in range(messages):
            plain.append(MessageRecord("BenchPlain", BODY, i % 4, properties=PROPERTIES))
        append_rate = messages / (time.perf_counter() - started)
        emit({"op": "append", "messages": messages, "msgs_per_s": round(append_rate)})
        plain.close()

        store = _store(Path(tmp) / "delay", now)
        service = ScheduleMessageService(store, Path(tmp) / "delay" / "config")
        started = time.perf_counter()
        for i in range(messages):
            record = MessageRecord("BenchDelayed", BODY, i % 4, properties=PROPERTIES)
            store.append(service.rewrite(record, 1 + i % levels))
        emit({"op": "schedule", "messages": messages, "msgs_per_s": round(messages / (time.perf_counter() - started))})
        now[0] += 10 * 24 * 3600 * 1000  # everything is due
        started = time.perf_counter()
        for level in range(1, levels + 1):
            while service.deliver_due(level) is not None:
                pass
        elapsed = time.perf_counter() - started
        assert service.delivered == messages, (service.delivered, messages)
        rate = messages / elapsed
        emit(
            {
                "op": "deliver",
                "messages": messages,
                "levels": levels,
                "msgs_per_s": round(rate),
                "ratio_to_append": round(rate / append_rate, 3),
            }
        )
        store.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0] if __doc__ else None)
    parser.add_argument("--messages", type=int, default=100_000, help="delayed messages")
    parser.add_argument("--levels", type=int, default=4, help="delay levels they are spread over")
    parser.add_argument("--profile", action="store_true", help="re-run under py-spy: bench/results/delay.svg")
    args = parser.parse_args()
    measure(args.messages, args.levels)
    if args.profile:
        Path("bench/results").mkdir(parents=True, exist_ok=True)
        argv = [sys.executable, "-m", "bench.delay", "--messages", str(args.messages), "--levels", str(args.levels)]
        subprocess.run([py_spy(), "record", "-o", "bench/results/delay.svg", "--", *argv], check=True)


if __name__ == "__main__":
    main()
