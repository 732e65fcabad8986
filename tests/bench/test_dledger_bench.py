"""The DLedger benches' plumbing: processes run the checkout they are given (``--baseline``), the producer tool runs
against the broker it is given, and the CPU per send is read over the tool's measured window."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from argparse import Namespace
from pathlib import Path

from bench import dledger_calls
from bench.dledger_failover import _ROOT, run_env
from bench.dledger_throughput import _load, cpu_bound, window_cpu
from bench.load.procstat import CpuSampler
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


async def test_the_dledger_rows_producer_cpu_is_read_over_its_window(tmp_path: Path) -> None:
    """The producer's share of ``cpu_ms_per_send`` (and so ``machine_cpu_ms_per_send`` and ``cpu_bounds``) is its
    window's CPU, the ``load_cpu_seconds`` of the summary it wrote, not its whole life's: its interpreter start,
    set-up and shutdown are not divided by the sends acknowledged in the window."""
    async with EmbeddedCluster(tmp_path / "c", **SMALL_STORE) as cluster:
        args = Namespace(inflight=2, duration=0.3, size=16, flush="ASYNC_FLUSH")
        result = await _load(cluster.namesrv_addr, cluster.broker_addr, args, tmp_path / "out", {"b": os.getpid()})
    window_cpu_seconds = json.loads((tmp_path / "out" / "producer.json").read_text())["load_cpu_seconds"]
    producer_cpu = result["cpu_ms_per_send"]["producer"] * result["ok"] / 1000
    assert producer_cpu <= window_cpu_seconds * 1.1 + 0.02, (producer_cpu, window_cpu_seconds)
    assert set(result["cpu_ms_per_send"]) == {"b", "producer"}


def test_each_members_cpu_is_read_over_the_producer_tools_window() -> None:
    """A member's CPU before and after the producer tool's window (its start-up and shutdown) is left out."""
    member = CpuSampler([])
    member.samples = [(10.0, 1.0), (11.0, 2.0), (12.0, 2.5), (13.0, 4.0)]
    summary = {"window_monotonic": [11.0, 12.0], "load_cpu_seconds": 0.25}
    assert window_cpu(summary, {"leader": member}) == {"leader": 0.5, "producer": 0.25}


def test_the_calls_bench_prints_each_case_each_way_and_their_medians() -> None:
    lines = dledger_calls.run(2, scale=0.001)
    cases = list(dledger_calls.CASES)
    assert cases[:2] == ["answer_decode", "flush_handoff"] and "post_flush" in cases
    assert [(line.get("round"), line.get("case") or line.get("summary")) for line in lines] == [
        *((0, case) for case in cases),
        *((1, case) for case in cases),
        *((None, case) for case in cases),
    ]
    medians = {line["summary"]: set(line["median_us_per_call"]) for line in lines if "summary" in line}
    assert medians["answer_decode"] == {"general", "field_by_field", "c"}
    assert medians["flush_handoff"] == {"to_thread", "run_in_thread"}
    assert medians["post_flush"] == {"whole_pass", "on_flushed"}
    assert all(medians[case] == {"c", "python"} for case in cases if case.startswith(("push_", "follower", "leader")))
