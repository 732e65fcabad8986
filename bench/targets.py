"""``python -m bench.targets``: every throughput and footprint target of docs/PERFORMANCE.md, measured in one run.

Each case runs an existing tool in a child process, one after the other (so they never share the 2 CPUs), and
reads its JSON summary; nothing is re-implemented here:

- ``async_send``: ``bench.load.producer --mode async --inflight 1024`` (one connection, 128 B);
- ``batch_send``: ``bench.load.producer --batch 64 --inflight 8``;
- ``consume``: ``bench.load.consumer --prefill N --produce-inflight 0`` (a pre-filled topic drained end to end), with
  the push consumer's default ``pullBatchSize`` 32 and, as RocketMQ's benchmark consumer allows, with 256;
- ``sync_flush_64x1``: ``bench.load.producer --flush-disk-type SYNC_FLUSH --inflight 64`` (sync sends);
- ``sync_flush_8x32``: the same with ``--mode async --connections 8 --inflight 256`` (8 x 32 outstanding);
- ``held_pull_wake``: ``bench.broker --only held_pull_wake`` (p99 from issuing a send to the parked pull's answer);
- ``idle_rss`` / ``cold_start``: ``python -m broker.embedded`` on port 0: exec to the broker's boot line, then
  VmRSS after ``--settle`` seconds idle.

Output: one JSON line per case on stdout, a table on stderr, ``bench/results/targets.json``. A case whose tool fails
is a row with its error, never a made-up figure. ``--only A,B`` runs the cases whose name contains A or B.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import attrs
from rich.console import Console
from rich.table import Table

from bench.load.report import environment

RESULTS = Path("bench/results")
STDERR = Console(stderr=True)


@attrs.frozen
class Case:
    """One target: how to measure it, which figure of the result counts, and the bar it must clear."""

    name: str
    target: str
    unit: str
    goal: float
    higher_is_better: bool
    measure: Callable[[argparse.Namespace], dict[str, Any]]

    def met(self, value: float) -> bool:
        return value >= self.goal if self.higher_is_better else value <= self.goal


def _last_json(stdout: str, key: str, value: str) -> dict[str, Any]:
    """The last JSON line of ``stdout`` whose ``key`` equals ``value``."""
    for line in reversed(stdout.splitlines()):
        if line.startswith("{"):
            data = json.loads(line)
            if data.get(key) == value:
                return data  # type: ignore[no-any-return]
    raise RuntimeError(f"no {key}={value} line in the tool's output")


def _run(argv: list[str], timeout: float) -> str:
    done = subprocess.run(
        [sys.executable, *argv], capture_output=True, text=True, timeout=timeout, check=False
    )  # fmt: skip
    if done.returncode != 0:
        raise RuntimeError(f"{' '.join(argv[:2])} exited {done.returncode}: {done.stderr.strip()[-400:]}")
    return done.stdout


def load_tool(tool: str, *options: str) -> Callable[[argparse.Namespace], dict[str, Any]]:
    """A measurement running ``bench.load.<tool>`` with ``options`` and returning its whole-run result."""

    def measure(args: argparse.Namespace) -> dict[str, Any]:
        argv = ["-m", f"bench.load.{tool}", "--quiet", "--duration", str(args.duration), "--out", str(args.out)]
        summary = _last_json(_run([*argv, *options], timeout=args.duration * 10 + 120), "type", "summary")
        result: dict[str, Any] = summary["result"]
        result["value"] = result["tps"]
        for key in ("load_cpu_seconds", "broker_cpu_seconds"):  # CPU of the load process and of the broker
            result[key] = summary.get(key)
        return result

    return measure


def held_pull(args: argparse.Namespace) -> dict[str, Any]:
    line = _last_json(
        _run(["-m", "bench.broker", "--only", "held_pull_wake", "--samples", "500"], timeout=300),
        "op",
        "held_pull_wake",
    )
    return {**line, "value": line["p99_ms"]}


def boot(args: argparse.Namespace) -> dict[str, Any]:
    """Exec-to-boot-line seconds and idle VmRSS of the embedded name server + broker (one process)."""
    with tempfile.TemporaryDirectory(prefix="rocketrio-targets-") as data:
        argv = [sys.executable, "-m", "broker.embedded", "--data", data, "--namesrv-port", "0", "--listenPort", "0"]
        start = time.perf_counter()
        proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
        try:
            assert proc.stdout is not None
            for line in proc.stdout:
                if line.startswith("The broker["):
                    break
            else:
                raise RuntimeError(f"the embedded cluster exited {proc.wait()} before its boot line")
            cold_start = time.perf_counter() - start
            time.sleep(args.settle)
            status = Path(f"/proc/{proc.pid}/status").read_text()
            rss_kb = next(int(line.split()[1]) for line in status.splitlines() if line.startswith("VmRSS:"))
        finally:
            proc.terminate()
            proc.wait(timeout=30)
    return {"cold_start_s": round(cold_start, 3), "idle_rss_mb": round(rss_kb / 1024, 1)}


_BOOTS: list[dict[str, Any]] = []  # one boot serves both footprint rows of a run


def boot_figure(key: str) -> Callable[[argparse.Namespace], dict[str, Any]]:
    def measure(args: argparse.Namespace) -> dict[str, Any]:
        if not _BOOTS:
            _BOOTS.append(boot(args))
        return {**_BOOTS[0], "value": _BOOTS[0][key]}

    return measure


CASES = (
    Case("async_send", ">= 100,000 msg/s async send, 128 B, one connection", "msg/s", 100_000, True,
         load_tool("producer", "--mode", "async", "--inflight", "1024")),
    Case("batch_send", ">= 500,000 msg/s batch send", "msg/s", 500_000, True,
         load_tool("producer", "--batch", "64", "--inflight", "8")),
    Case("consume", ">= 200,000 msg/s end-to-end consume (pullBatchSize 32)", "msg/s", 200_000, True,
         load_tool("consumer", "--prefill", "300000", "--produce-inflight", "0")),
    Case("consume_batch256", ">= 200,000 msg/s end-to-end consume (pullBatchSize 256)", "msg/s", 200_000, True,
         load_tool("consumer", "--prefill", "300000", "--produce-inflight", "0", "--pull-batch-size", "256",
                   "--max-transfer-count", "256")),
    Case("held_pull_wake", "held-pull wake latency p99 <= 2 ms", "ms p99", 2.0, False, held_pull),
    Case("sync_flush_64x1", ">= 30,000 msg/s SYNC_FLUSH, 64 producers x 1 in flight", "msg/s", 30_000, True,
         load_tool("producer", "--flush-disk-type", "SYNC_FLUSH", "--inflight", "64")),
    Case("sync_flush_8x32", ">= 50,000 msg/s SYNC_FLUSH, 8 connections x 32 in flight", "msg/s", 50_000, True,
         load_tool("producer", "--flush-disk-type", "SYNC_FLUSH", "--mode", "async", "--connections", "8",
                   "--inflight", "256")),
    Case("idle_rss", "broker idle RSS <= 60 MB", "MB", 60.0, False, boot_figure("idle_rss_mb")),
    Case("cold_start", "cold start to boot line <= 1 s", "s", 1.0, False, boot_figure("cold_start_s")),
)  # fmt: skip


def run_case(case: Case, args: argparse.Namespace) -> dict[str, Any]:
    row: dict[str, Any] = {"bench": "targets", "case": case.name, "target": case.target, "unit": case.unit}
    try:
        result = case.measure(args)
    except (RuntimeError, OSError, subprocess.TimeoutExpired, KeyError, StopIteration) as exc:
        return {**row, "error": f"{type(exc).__name__}: {exc}"}
    value = float(result.pop("value"))
    share = value / case.goal if case.higher_is_better else case.goal / value if value else float("inf")
    return {**row, "value": value, "met": case.met(value), "share_of_target": round(share, 3), "detail": result}


def render(rows: list[dict[str, Any]]) -> Table:
    table = Table(title="performance targets, one run")
    for column in ("case", "target", "measured", "met", "x of target"):
        table.add_column(column, justify="right" if column in ("measured", "x of target") else "left")
    for row in rows:
        if "error" in row:
            table.add_row(row["case"], row["target"], "error", row["error"][:60], "")
            continue
        value = row["value"]
        shown = f"{value:,.0f} {row['unit']}" if value >= 100 else f"{value:.2f} {row['unit']}"
        table.add_row(row["case"], row["target"], shown, "yes" if row["met"] else "no", f"{row['share_of_target']}")
    return table


def main(argv: list[str] | None = None) -> list[dict[str, Any]]:
    parser = argparse.ArgumentParser(prog="bench.targets", description=__doc__.split("\n")[0])
    parser.add_argument("--duration", type=float, default=5.0, help="seconds per load case")
    parser.add_argument("--settle", type=float, default=3.0, help="idle seconds before reading the broker's RSS")
    parser.add_argument("--only", help="comma-separated: run only the cases whose name contains one of these")
    parser.add_argument("--out", type=Path, default=RESULTS, help="where targets.json (and tool summaries) go")
    args = parser.parse_args(argv)
    args.out.mkdir(parents=True, exist_ok=True)
    rows = []
    for case in CASES:
        if args.only and not any(part in case.name for part in args.only.split(",")):
            continue
        row = run_case(case, args)
        print(json.dumps(row), flush=True)
        rows.append(row)
    STDERR.print(render(rows))
    report = {"environment": environment("per case"), "load_average": os.getloadavg(), "cases": rows}
    (args.out / "targets.json").write_text(json.dumps(report, indent=2) + "\n")
    return rows


if __name__ == "__main__":
    main()
