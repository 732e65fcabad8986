"""bench.replication: a short run prints one send line per deployment, the two ratio lines, the lag line and a
catch-up line with positive figures; the lag figures count the ends the slave never acknowledged."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from bench import replication

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
    assert lag["unacknowledged"] == 0, lag  # a healthy async slave acknowledges every end once the sends stopped
    (catchup,) = [line for line in lines if line["op"] == "catchup"]
    assert catchup["behind_bytes"] >= 4 << 20 and catchup["mb_per_s"] > 0 and catchup["disk_write_mb_per_s"] > 0


def test_the_lag_of_a_slave_that_never_acknowledged_runs_to_the_last_sample() -> None:
    """Three samples 20 ms apart, the slave's ack reaching no sampled end: the first end waited at least 40 ms."""
    figures = replication.lag_figures([(0.00, 1000, 0), (0.02, 2000, 0), (0.04, 3000, 0)])
    assert figures["bytes_max"] == 3000
    assert (figures["ms_max"], figures["unacknowledged"]) == (40.0, 3), figures


def test_the_lag_max_counts_the_ends_still_unacknowledged_when_the_round_ended() -> None:
    """100 samples 20 ms apart: the first 90 ends are acknowledged at the next sample (20 ms), then the slave stalls;
    the oldest of the last 10 ends had waited 180 ms when sampling stopped, the slowest figure, not one to drop."""
    samples = [(i * 0.02, (i + 1) * 100, min(i, 90) * 100) for i in range(100)]
    figures = replication.lag_figures(samples)
    assert (figures["ms_p50"], figures["ms_max"], figures["unacknowledged"]) == (20.0, 180.0, 10), figures


def test_the_samples_after_the_sends_time_the_last_ends_acknowledgements_only() -> None:
    """Sampling goes on after the sends until the slave acknowledged the last end: the ends sampled while sending get
    their real waits (40 ms each, not 20 and 0 cut at the last of them) and none is left unacknowledged; the later
    samples add no end and no bytes figure."""
    sending = [(0.00, 1000, 0), (0.02, 2000, 0)]
    figures = replication.lag_figures(sending, [(0.04, 2000, 1000), (0.06, 2000, 2000)])
    assert (figures["samples"], figures["bytes_max"], figures["unacknowledged"]) == (2, 2000, 0), figures
    assert (figures["ms_p50"], figures["ms_max"]) == (40.0, 40.0), figures
