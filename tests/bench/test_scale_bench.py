"""bench.scale: a tiny run reports its figures, and the brokers' CPU is read over the producers' windows only (not
the producer processes' start-up and shutdown around them)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from bench.load.procstat import CpuSampler

ROOT = Path(__file__).resolve().parents[2]


def test_the_cpu_between_two_moments_is_interpolated_from_the_samples_around_them() -> None:
    sampler = CpuSampler([])
    sampler.samples = [(10.0, 1.0), (11.0, 3.0), (12.0, 3.5)]
    assert sampler.between(10.5, 11.5) == 1.25  # 2.0 at 10.5, 3.25 at 11.5
    assert sampler.at(9.0) == 1.0 and sampler.at(13.0) == 3.5  # outside: the first or last reading


def test_a_short_scale_run_reports_the_brokers_cpu_over_the_producers_windows(tmp_path: Path) -> None:
    argv = [sys.executable, "-m", "bench.scale", "--brokers", "1", "--rounds", "1", "--seconds", "1"]
    argv += ["--load-procs", "1", "--inflight", "16", "--out", str(tmp_path)]
    done = subprocess.run(argv, cwd=ROOT, capture_output=True, text=True, timeout=180, check=True)
    run, summary = [json.loads(line) for line in done.stdout.splitlines()]
    assert "error" not in run, run
    assert run["acked"] > 0 and run["broker_cpu_us_per_msg"] > 0 and run["broker_cores"] > 0
    assert summary["type"] == "summary" and summary["broker_cpu_us_per_msg_median_by_brokers"]["1"] > 0
