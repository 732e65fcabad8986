"""Smoke test for bench.replication: a short run prints one send line per deployment, the two ratio lines, the lag
line and a catch-up line with positive figures."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_a_short_replication_benchmark_reports_every_figure(tmp_path: Path) -> None:
    argv = [sys.executable, "-m", "bench.replication", "--seconds", "0.5", "--rounds", "1", "--catchup-mib", "4"]
    argv += ["--catchup-body", "4096", "--segment-mib", "8", "--dir", str(tmp_path / "data")]
    done = subprocess.run(argv, cwd=ROOT, capture_output=True, text=True, timeout=300, check=True)
    lines = [json.loads(line) for line in done.stdout.splitlines()]
    sends = {line["mode"]: line for line in lines if line["op"] == "send"}
    assert set(sends) == {"none", "async", "sync"} and all(s["rps"] > 0 and s["p99_ms"] > 0 for s in sends.values())
    ratios = {line["mode"]: line for line in lines if line["op"] == "send_ratio"}
    assert set(ratios) == {"async", "sync"} and all(r["ratios"][0] > 0 for r in ratios.values())
    (lag,) = [line for line in lines if line["op"] == "lag"]
    assert lag["samples"] > 0 and lag["bytes_max"] >= 0
    (catchup,) = [line for line in lines if line["op"] == "catchup"]
    assert catchup["behind_bytes"] >= 4 << 20 and catchup["mb_per_s"] > 0 and catchup["disk_write_mb_per_s"] > 0
