"""Smoke test for bench.targets: a short run of some cases yields one row per case with a measured figure and a
verdict, or the tool's error; the report file holds the same rows. No timing assertions."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def run_targets(tmp_path: Path, only: str) -> list[dict[str, object]]:
    argv = [sys.executable, "-m", "bench.targets", "--only", only, "--duration", "1", "--settle", "0.2"]
    done = subprocess.run([*argv, "--out", str(tmp_path)], cwd=ROOT, capture_output=True, text=True, timeout=180)
    assert done.returncode == 0, done.stderr
    rows = [json.loads(line) for line in done.stdout.splitlines()]
    assert json.loads((tmp_path / "targets.json").read_text())["cases"] == rows
    return rows


def test_selected_cases_each_give_a_figure_and_a_verdict_and_footprint_boots_once(tmp_path: Path) -> None:
    rows = run_targets(tmp_path, "idle_rss,cold_start,async_send")
    by_case = {row["case"]: row for row in rows}
    assert list(by_case) == ["async_send", "idle_rss", "cold_start"]
    for name in ("idle_rss", "cold_start"):
        row = by_case[name]
        assert "error" not in row, row
        assert isinstance(row["value"], float) and row["value"] > 0
        assert row["met"] == (row["value"] <= {"idle_rss": 60.0, "cold_start": 1.0}[name])
    assert by_case["idle_rss"]["detail"] == by_case["cold_start"]["detail"]
    for row in rows:
        assert ("error" in row) != ("value" in row), row
