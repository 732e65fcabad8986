"""Smoke tests for bench.metrics: tiny real runs print their JSON lines and summaries (no timing assertions)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def run(*args: str) -> list[dict[str, object]]:
    argv = [sys.executable, "-m", "bench.metrics", *args]
    done = subprocess.run(argv, cwd=ROOT, capture_output=True, text=True, timeout=180, check=True)
    lines = [json.loads(line) for line in done.stdout.splitlines()]
    assert lines and lines[-1]["type"] == "summary", done.stderr
    return lines


def test_a_small_scrape_run_reports_every_scrape_and_a_summary() -> None:
    lines = run("scrape", "--topics", "6", "--groups", "2", "--per-group", "3", "--scrapes", "2")
    scrapes = lines[:-1]
    assert len(scrapes) == 2
    # 6 topics in, 2 groups x 3 topics out and lagging: the families have samples for each.
    assert all(isinstance(s["samples"], int) and s["samples"] > 6 + 2 * 3 for s in scrapes)


def test_a_one_round_path_run_compares_nothing_without_a_base_tree() -> None:
    lines = run("path", "--rounds", "1", "--sends", "200", "--pulls", "20")
    assert lines[0]["tree"] == "this" and "median_ratio_to_base" not in lines[-1]
