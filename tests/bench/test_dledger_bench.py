"""The DLedger benches' plumbing: processes run the checkout they are given (``--baseline``), the CPU a process
spent is read from ``/proc``, and the producer tool runs against the broker it is given."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from argparse import Namespace
from pathlib import Path

import trio

from bench.dledger_failover import _ROOT, run_env
from bench.dledger_throughput import _load, children_cpu_seconds, cpu_bound, cpu_seconds
from broker.embedded import EmbeddedCluster
from tests.conftest import SMALL_STORE


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


async def test_the_producer_tools_cpu_is_read_once_it_has_ended() -> None:
    before = children_cpu_seconds()
    burn = "import time\nend = time.process_time() + 0.05\nwhile time.process_time() < end: pass"
    await trio.run_process([sys.executable, "-c", burn])
    assert children_cpu_seconds() >= before + 0.03


def test_the_cpu_bound_is_one_brokers_machine_cpu_per_send_over_the_groups() -> None:
    alone = {"machine_cpu_ms_per_send": 0.028}
    assert cpu_bound(alone, {"machine_cpu_ms_per_send": 0.135}) == 0.207
    assert cpu_bound(alone, {}) is None and cpu_bound({}, {"machine_cpu_ms_per_send": 0.1}) is None


async def test_the_load_runs_the_producer_tool_against_the_given_broker_and_names_its_flush_mode(
    tmp_path: Path,
) -> None:
    """The producer tool refuses ``--flush-disk-type`` with ``--namesrv`` (that broker flushes as it was started):
    the flush mode is the brokers' setting, and the row says which it was."""
    async with EmbeddedCluster(tmp_path / "c", **SMALL_STORE) as cluster:
        args = Namespace(inflight=2, duration=0.5, size=16, flush="ASYNC_FLUSH")
        result = await _load(cluster.namesrv_addr, cluster.broker_addr, args, tmp_path / "out")
    assert result["ok"] > 0 and result["failed"] == 0, result
    assert result["flush_disk_type"] == "ASYNC_FLUSH"
