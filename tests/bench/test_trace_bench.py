"""Smoke test for bench.trace: a tiny real run prints a round and a summary per mode, and the traced producer sent
trace batches without dropping records (no timing assertions)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from bench.trace import Failures, async_mode, send_mode
from client import Producer

ROOT = Path(__file__).resolve().parents[2]


def test_a_one_round_run_reports_each_mode_and_sends_trace_batches() -> None:
    argv = [sys.executable, "-m", "bench.trace", "--rounds", "1", "--duration", "0.5", "--inflight", "4"]
    done = subprocess.run(argv, cwd=ROOT, capture_output=True, text=True, timeout=180, check=True)
    lines = [json.loads(line) for line in done.stdout.splitlines()]
    rounds = [line for line in lines if not line.get("summary")]
    summaries = [line for line in lines if line.get("summary")]
    assert [r["mode"] for r in rounds] == ["send", "async"], done.stderr
    assert [s["mode"] for s in summaries] == ["send", "async"]
    assert all(r["off_rps"] > 0 and r["on_rps"] > 0 and r["batches"] >= 1 and r["dropped"] == 0 for r in rounds)
    assert all(r["off_failed"] == 0 and r["on_failed"] == 0 for r in rounds)


async def test_failed_sends_are_counted_apart_from_the_sent_ones() -> None:
    """Nothing listens on port 1: every send fails (async: its callback gets the exception), none is counted as sent
    (RocketMQ's benchmark Producer counts onSuccess only; on_rps / off_rps and the ratio use the count)."""
    async with Producer("bench-trace-failing", "127.0.0.1:1") as producer:
        failures = Failures()
        assert await async_mode(producer, 4, 0.2, failures) == 0
        assert failures.count >= 4 and failures.last
        failures = Failures()
        assert await send_mode(producer, 2, 0.2, failures) == 0
        assert failures.count >= 2
