"""Smoke test for bench.dashboard: a tiny run prints a populate line, a sample line and one line per page, each with
finite figures. No timing assertions: the figures only have to exist."""

from __future__ import annotations

import json
import math
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_every_page_reports_its_load_and_api_times() -> None:
    argv = [sys.executable, "-m", "bench.dashboard", "--topics", "5", "--groups", "2", "--rounds", "1"]
    done = subprocess.run(argv, cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    rows = [json.loads(line) for line in done.stdout.splitlines()]
    assert [r["what"] for r in rows[:2]] == ["populate", "sample_ms"]
    pages = {r["page"]: r for r in rows if r["what"] == "page"}
    assert {"/cluster", "/topics", "/groups", "/charts"} <= set(pages)
    for row in pages.values():
        for figure in ("page_ms", "api_ms"):
            assert all(math.isfinite(v) and v > 0 for v in row[figure].values()), row
