"""The DLedger benches' plumbing: processes run the checkout they are given (``--baseline``), and the CPU a process
spent is read from ``/proc``."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

from bench.dledger_failover import _ROOT, run_env
from bench.dledger_throughput import cpu_seconds


def _imported_from(env: dict[str, str], cwd: Path) -> str:
    code = "import dledger, sys; sys.stdout.write(dledger.__file__)"
    return subprocess.run([sys.executable, "-c", code], env=env, cwd=cwd, capture_output=True, text=True,
                          check=True).stdout  # fmt: skip


def test_a_group_of_another_checkout_imports_that_checkout(tmp_path: Path) -> None:
    other = tmp_path / "other"
    (other / "dledger").mkdir(parents=True)
    (other / "dledger" / "__init__.py").write_text("")
    elsewhere = tmp_path / "cwd"
    elsewhere.mkdir()
    assert _imported_from(run_env(str(other)), elsewhere) == str(other / "dledger" / "__init__.py")
    assert _imported_from(run_env(_ROOT), elsewhere) == str(Path(_ROOT) / "dledger" / "__init__.py")


def test_cpu_seconds_counts_what_the_process_spent() -> None:
    before = cpu_seconds(os.getpid())
    end = time.process_time() + 0.05
    while time.process_time() < end:
        pass
    assert cpu_seconds(os.getpid()) >= before + 0.03
    assert cpu_seconds(1 << 30) == 0.0  # no such process
