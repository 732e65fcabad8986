"""Smoke test for bench.security: a tiny run prints a JSON line per mode and round and the two summaries with
positive, finite figures. No timing assertions."""

from __future__ import annotations

import json
import math
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_security_bench_reports_every_mode_and_both_ratios() -> None:
    argv = [sys.executable, "-m", "bench.security", "--duration", "0.3", "--rounds", "1", "--inflight", "4"]
    done = subprocess.run(argv, cwd=ROOT, capture_output=True, text=True, timeout=180)
    assert done.returncode == 0, done.stderr
    rows = [json.loads(line) for line in done.stdout.splitlines()]
    assert {row["mode"] for row in rows if "mode" in row} == {"plain", "acl", "tls"}
    summaries = {row["summary"]: row for row in rows if "summary" in row}
    assert set(summaries) == {"acl_vs_plain", "tls_vs_plain"}
    for row in summaries.values():
        assert math.isfinite(row["cpu_ratio"]) and row["cpu_ratio"] > 0 and row["median"] > 0


def test_security_micro_bench_times_signing_and_the_check() -> None:
    argv = [sys.executable, "-m", "bench.security", "micro", "--number", "50"]
    done = subprocess.run(argv, cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    rows = {row["micro"]: row for row in map(json.loads, done.stdout.splitlines())}
    assert set(rows) == {"sign", "check"}
    assert all(math.isfinite(row["us_per_request"]) and row["us_per_request"] > 0 for row in rows.values())
