"""Smoke test for bench.proxy_work: a tiny run prints one JSON line per round and case with positive figures. No
timing assertions: the figures only have to exist and be finite."""

from __future__ import annotations

import json
import math
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_work_and_bridge_report_positive_figures() -> None:
    argv = [sys.executable, "-m", "bench.proxy_work", "--rounds", "1", "--messages", "40", "--calls", "64"]
    done = subprocess.run(argv, cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    rows = {row["case"]: row for row in map(json.loads, done.stdout.splitlines())}
    assert set(rows) == {"work", "bridge"}
    keys = {"work": ("send_us_per_msg", "receive_us_per_msg", "ack_us_per_msg"),
            "bridge": ("serial_cpu_us_per_call", "overlapped_16_cpu_us_per_call")}  # fmt: skip
    for case, row in rows.items():
        assert all(isinstance(row[k], float) and math.isfinite(row[k]) and row[k] >= 0 for k in keys[case]), row
