"""What the producer and the consumer tool share: the target cluster, the profiler and the measured window.

:func:`run_tool` starts an embedded cluster (unless ``--namesrv`` names one), creates the topics, starts py-spy
when ``--profile`` is given, sets ``load(namesrv, stats)`` up (clients started, routes fetched), measures its run
(the window: elapsed time, CPU, ``--duration``) with the live view beside it, shuts it down, then writes
``<out>/<name>.json`` (and, profiled, ``<name>.speedscope.json`` and ``<name>.svg``) and prints the "where the time
goes" table. A profile that cannot be taken is reported in the summary (``profile.error``), never fatal.

The embedded broker's options (``--flush-disk-type``, ``--max-transfer-count``, ``--broker-property``) are refused
with ``--namesrv``: that broker runs with its own settings, and the summary says ``null`` for them. A run in which
no message succeeded is no measurement: its summary carries ``error`` and :func:`exit_status` is 1, so that
``bench.targets`` and ``bench.scale`` report an error rather than 0 msg/s.
"""

from __future__ import annotations

import argparse
import contextlib
import math
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import attrs
import trio
from rich.table import Table

from bench.load.cluster import FLUSH_MODES, ClusterProcess, create_topics
from bench.load.procstat import process_cpu_seconds
from bench.load.profile import BrokerProfiler, ProfileError, render_flamegraph, spawn_argv, top_frames
from bench.load.report import STDERR, environment, final_table, live_view, write_summary
from bench.load.stats import LoadStats, Snapshot

#: The measured window's work: sends or receives into the tool's LoadStats until the budget is used up.
Run = Callable[["Budget"], Awaitable[None]]
#: Sets a run up against the cluster's name server (clients started, routes fetched), yields it and then shuts it
#: down: only the :data:`Run` is inside the measured window (its clock, both processes' CPU and its deadline).
Load = Callable[[str, LoadStats], contextlib.AbstractAsyncContextManager[Run]]
#: Runs against the cluster's name server after the topics exist and before the measured window (e.g. a prefill).
Prepare = Callable[[str], Awaitable[None]]
#: The embedded broker's maxTransferCountOnMessageInMemory unless --max-transfer-count says otherwise (RocketMQ's).
MAX_TRANSFER_COUNT = 32


@attrs.frozen
class Window:
    """The measured window: its seconds, this process's and the broker's CPU seconds in it (``None``: unknown), and
    its bounds on ``time.monotonic()`` (Linux's CLOCK_MONOTONIC, one clock for every process of the host, so that
    another process can read its own figures over the same window)."""

    seconds: float
    cpu: float
    broker_cpu: float | None
    monotonic: tuple[float, float]


class Budget:
    """The run's bound: until ``deadline`` (trio clock) and, if ``messages`` is set, that many messages."""

    def __init__(self, duration: float, messages: int | None) -> None:
        self.deadline = trio.current_time() + duration
        self.messages = messages if messages is not None else math.inf
        self.taken = 0

    def take(self, n: int = 1) -> bool:
        """Claim ``n`` messages; False once time or count is used up."""
        if trio.current_time() >= self.deadline or self.taken + n > self.messages:
            return False
        self.taken += n
        return True


def common_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--namesrv", help="an existing name server (default: start an embedded cluster)")
    parser.add_argument("--broker", help="with --namesrv: the broker address topics are created on")
    parser.add_argument("--broker-pid", type=int, help="with --namesrv and --profile: the broker process to sample")
    parser.add_argument(
        "--flush-disk-type", choices=FLUSH_MODES, help=f"the embedded broker's flushDiskType (default {FLUSH_MODES[0]})"
    )
    parser.add_argument(
        "--max-transfer-count",
        type=int,
        help=f"the embedded broker's maxTransferCountOnMessageInMemory (default {MAX_TRANSFER_COUNT})",
    )
    parser.add_argument("--topics", type=int, default=1, help="topics, named <topic-prefix>0..N-1")
    parser.add_argument("--topic-prefix", default="BenchLoad")
    parser.add_argument("--queues", type=int, default=4, help="read/write queues per topic")
    parser.add_argument("--size", type=int, default=128, help="message body bytes")
    parser.add_argument("--duration", type=float, default=10.0, help="seconds of measured load")
    parser.add_argument("--messages", type=int, help="stop after this many messages (and at --duration)")
    parser.add_argument("--out", type=Path, default=Path("bench/results"), help="where the summary goes")
    parser.add_argument("--profile", action="store_true", help="py-spy the broker for the measured window")
    parser.add_argument("--quiet", action="store_true", help="no live view on stderr (JSON lines only)")
    parser.add_argument(
        "--broker-property", action="append", default=[], metavar="NAME=VALUE", help="an embedded broker setting"
    )


def topic_names(args: argparse.Namespace) -> list[str]:
    return [f"{args.topic_prefix}{i}" for i in range(args.topics)]


def check_target(args: argparse.Namespace) -> None:
    """Refuse (:class:`SystemExit`) ``--namesrv`` without ``--broker`` or with an embedded broker's option."""
    if not args.namesrv:
        return
    if args.broker is None:
        raise SystemExit("--namesrv needs --broker (topics are created on it)")
    options = {"--flush-disk-type": args.flush_disk_type, "--max-transfer-count": args.max_transfer_count}
    given = [flag for flag, value in {**options, "--broker-property": args.broker_property}.items() if value]
    if given:
        raise SystemExit(f"{', '.join(given)}: the embedded broker's, not a --namesrv broker's (it has its own)")


def broker_settings(args: argparse.Namespace) -> dict[str, Any]:
    """The measured broker's settings this tool chose: the embedded one's, or ``None`` each with ``--namesrv``."""
    if args.namesrv:
        return {"flush_disk_type": None, "max_transfer_count": None}
    return {
        "flush_disk_type": args.flush_disk_type or FLUSH_MODES[0],
        "max_transfer_count": args.max_transfer_count or MAX_TRANSFER_COUNT,
    }


def exit_status(summary: dict[str, Any]) -> int:
    """The tool's exit status: 1 when its run measured nothing (``error`` in the summary), else 0."""
    return 1 if summary.get("error") else 0


async def _measure(
    name: str,
    namesrv: str,
    broker: str,
    args: argparse.Namespace,
    load: Load,
    stats: LoadStats,
    prepare: Prepare | None,
    broker_pid: int | None,
) -> Window:
    """Create the topics, ``prepare``, set ``load`` up and measure its run (:func:`_window`), then shut it down. The
    live view's nursery surrounds the load: a run may start what the load's shutdown closes (a consumer)."""
    await create_topics(broker, topic_names(args), args.queues)
    if prepare is not None:
        await prepare(namesrv)
    async with trio.open_nursery() as nursery, load(namesrv, stats) as run:
        return await _window(name, run, args, stats, broker_pid, nursery)


async def _window(
    name: str, run: Run, args: argparse.Namespace, stats: LoadStats, broker_pid: int | None, nursery: trio.Nursery
) -> Window:
    """Measure ``run`` with the live view beside it (in ``nursery``); the budget's deadline starts with it. The
    window ends when ``run`` returns: ``stats`` is closed then, so nothing received later (a consumer's listener
    runs on until its shutdown) counts in the summary or the view's last line."""
    stop, shown = trio.Event(), trio.Event()

    async def view() -> None:
        await live_view(name, stats, stop, args.quiet)
        shown.set()

    cpu0, broker0 = time.process_time(), process_cpu_seconds(broker_pid)
    start, monotonic0 = trio.current_time(), time.monotonic()
    nursery.start_soon(view)
    try:
        await run(Budget(args.duration, args.messages))
    finally:
        stats.close()
        stop.set()
    elapsed, cpu, broker1 = trio.current_time() - start, time.process_time() - cpu0, process_cpu_seconds(broker_pid)
    bounds = (monotonic0, time.monotonic())
    await shown.wait()  # its last window line is taken now, none of the shutdown in its seconds
    return Window(elapsed, cpu, None if broker0 is None or broker1 is None else broker1 - broker0, bounds)


def _where_the_time_goes(speedscope: Path) -> list[dict[str, Any]]:
    shares = top_frames(speedscope)
    table = Table(title="where the time goes (broker, share of samples)")
    for column in ("self %", "total %", "frame", "location"):
        table.add_column(column)
    for share in shares:
        table.add_row(f"{share.self_share:.1%}", f"{share.total_share:.1%}", share.name, share.location)
    STDERR.print(table)
    return [
        {"frame": s.name, "location": s.location, "self": round(s.self_share, 4), "total": round(s.total_share, 4)}
        for s in shares
    ]


def _embedded(stack: contextlib.ExitStack, args: argparse.Namespace, wrap: list[str] | None) -> tuple[str, str, int]:
    """Start an embedded cluster in ``stack`` (``wrap``: under py-spy): its name server, broker and broker pid."""
    broker = broker_settings(args)
    cluster = ClusterProcess(broker["flush_disk_type"], wrap, broker["max_transfer_count"], tuple(args.broker_property))
    stack.enter_context(cluster)
    return cluster.namesrv, cluster.broker, cluster.pid


def run_tool(
    name: str,
    args: argparse.Namespace,
    settings: dict[str, Any],
    load: Load,
    per_sample: int = 1,
    prepare: Prepare | None = None,
) -> dict[str, Any]:
    """Measure, report and return the summary (see the module docstring); ``prepare`` runs before the window."""
    check_target(args)
    stats = LoadStats(per_sample)
    speedscope = args.out / f"{name}.speedscope.json"
    args.out.mkdir(parents=True, exist_ok=True)
    speedscope.unlink(missing_ok=True)
    profile: dict[str, Any] | None = None
    with contextlib.ExitStack() as stack:
        profiler: BrokerProfiler | None = None
        if args.namesrv:
            namesrv, broker, pid = args.namesrv, args.broker, args.broker_pid
        else:
            if args.profile:
                try:
                    spawn_argv(speedscope, [])  # py-spy present at all?
                except ProfileError as exc:
                    profile = {"error": str(exc)}
            namesrv, broker, pid = _embedded(stack, args, None)
        if args.profile and profile is None:
            if pid is None:
                profile = {"error": "--profile with --namesrv needs --broker-pid"}
            else:
                profiler = BrokerProfiler(pid, speedscope)
                try:
                    profiler.start()
                    profile = {"mode": "attach"}
                except ProfileError as exc:
                    profiler = None
                    if args.namesrv:  # someone else's broker: nothing we could restart under py-spy
                        profile = {"error": str(exc)}
                    else:
                        # no ptrace rights here: measure a fresh broker started under py-spy instead
                        stack.close()
                        namesrv, broker, pid = _embedded(stack, args, spawn_argv(speedscope, []))
                        profile = {"mode": "spawn", "attach_error": str(exc)}
        window = trio.run(_measure, name, namesrv, broker, args, load, stats, prepare, pid)
        if profiler is not None:
            with contextlib.suppress(ProfileError):  # a missing file is reported below
                profiler.stop()
    summary = _summary(name, args, settings, stats.total(window.seconds), stats.last_error)
    summary |= {"load_cpu_seconds": round(window.cpu, 3), "broker_cpu_seconds": _rounded(window.broker_cpu)}
    summary["window_monotonic"] = [round(t, 4) for t in window.monotonic]
    if args.profile and profile is not None and "error" not in profile:
        if speedscope.exists():
            svg = args.out / f"{name}.svg"
            render_flamegraph(speedscope, svg, f"rocketrio broker under bench.load.{name}")
            profile.update(speedscope=str(speedscope), svg=str(svg), top_frames=_where_the_time_goes(speedscope))
        else:
            profile["error"] = "py-spy wrote no profile"
    summary["profile"] = profile
    write_summary(args.out, name, summary)
    return summary


def _rounded(seconds: float | None) -> float | None:
    return None if seconds is None else round(seconds, 3)


def _summary(
    name: str, args: argparse.Namespace, settings: dict[str, Any], total: Snapshot, last_error: str | None
) -> dict[str, Any]:
    """The summary's figures; ``error`` when no message succeeded (the run measured nothing), said on stderr too."""
    if not args.quiet:
        final_table(name, total)
    broker = broker_settings(args)
    summary: dict[str, Any] = {
        "tool": name,
        "settings": {**settings, **broker},
        "result": total.as_dict(),
        "last_error": last_error,
        "environment": environment(broker["flush_disk_type"]),
    }
    if not total.ok:
        summary["error"] = f"no message succeeded ({total.failed} failed): nothing was measured"
        STDERR.print(f"{name}: {summary['error']}; last error: {last_error}")
    return summary
