"""The load tools' output: a rich live view once a second, environment facts, the JSON summary.

The live view goes to stderr (so stdout stays JSON lines: one ``"window"`` object a second and the final
``"summary"``). :func:`write_summary` also stores the summary as ``<out>/<name>.json``. Nothing here raises except
for I/O errors writing the summary.
"""

from __future__ import annotations

import json
import os
import platform
import sys
from importlib import metadata
from pathlib import Path
from typing import Any

import trio
from rich.console import Console
from rich.table import Table

from bench.load.stats import LoadStats, Snapshot

STDERR = Console(stderr=True)


def environment(flush_disk_type: str | None) -> dict[str, Any]:
    """Facts that make a figure reproducible: CPU, Python, package versions, flush mode (``None``: not known, a
    broker this tool did not start)."""
    cpu_model = platform.processor() or "?"
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu_model = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    versions: dict[str, str | None] = {}
    for package in ("rocketrio", "trio", "anyio", "orjson", "cbor2"):
        try:
            versions[package] = metadata.version(package)
        except metadata.PackageNotFoundError:
            versions[package] = None
    return {
        "cpu_model": cpu_model,
        "cpu_count": os.cpu_count(),
        "python": sys.version.split()[0],
        "implementation": platform.python_implementation(),
        "platform": platform.platform(),
        "versions": versions,
        "flush_disk_type": flush_disk_type,
    }


def _row(table: Table, label: str, snap: Snapshot) -> None:
    table.add_row(
        label,
        f"{snap.tps:,.0f}",
        f"{snap.avg_ms:.3f}",
        f"{snap.p50_ms:.3f}",
        f"{snap.p99_ms:.3f}",
        f"{snap.max_ms:.3f}",
        str(snap.failed),
    )


def _table(title: str) -> Table:
    table = Table(title=title)
    for column in ("interval", "TPS", "avg ms", "p50 ms", "p99 ms", "max ms", "failures"):
        table.add_column(column, justify="right")
    return table


async def live_view(name: str, stats: LoadStats, stop: trio.Event, quiet: bool = False) -> None:
    """Every second until ``stop``: one rich line on stderr and one ``window`` JSON line on stdout."""
    second = 0
    last = trio.current_time()
    while not stop.is_set():
        with trio.move_on_after(1.0):
            await stop.wait()
        now = trio.current_time()
        snap = stats.take_window(now - last)
        last, second = now, second + 1
        print(json.dumps({"bench": name, "type": "window", "second": second, **snap.as_dict()}), flush=True)
        if not quiet:
            STDERR.print(
                f"[bold]{name}[/] {second:>4}s  TPS {snap.tps:>10,.0f}  avg {snap.avg_ms:7.3f}  "
                f"p50 {snap.p50_ms:7.3f}  p99 {snap.p99_ms:7.3f}  max {snap.max_ms:8.3f} ms  fail {snap.failed}"
            )


def final_table(name: str, total: Snapshot) -> None:
    table = _table(f"{name}: whole run")
    _row(table, f"{total.seconds:.1f}s", total)
    STDERR.print(table)


def write_summary(out: Path, name: str, summary: dict[str, Any]) -> Path:
    """Print the ``summary`` JSON line and store it as ``out/<name>.json``."""
    out.mkdir(parents=True, exist_ok=True)
    path = out / f"{name}.json"
    path.write_text(json.dumps(summary, indent=2) + "\n")
    print(json.dumps({"bench": name, "type": "summary", **summary}), flush=True)
    return path
