"""``python -m bench.load.soak``: does the broker stay flat under long steady load?

An embedded cluster (name server and broker in one child process, :class:`bench.load.cluster.ClusterProcess`) is
loaded in two phases. **Peak** (``--peak-seconds``, skipped when ``--rate`` is given): senders unpaced, to measure
the acknowledged msg/s this machine gives. **Soak** (``--duration``, default 10 minutes): the senders paced at
``--fraction`` (default 0.8) of that peak. Throughout, push consumers pull from the first offset and ``--connections``
(default 100) producers, each its own client instance with its own connections, live a random ``--lifetime`` and are
replaced: connections come and go all the time. The load runs in ``--processes`` (default 2) shard processes
(:mod:`bench.load.soak_shard`), each with its own topic, consumer and share of the senders and producers, so that no
load process is saturated (a saturated generator's own queueing would be the latency the samples measure). They share
every core unless ``--pin`` puts the broker on the first CPU and the shards on the others (for a machine with cores
to spare; on two cores the shards then fill theirs: docs/PERFORMANCE.md#soak).

Every ``--interval`` seconds (default 10) one JSON line samples the broker process: RSS (``VmRSS`` and its
anonymous part, the heap; the rest is the CommitLog's mapped pages), open descriptors (sockets, the store's files,
the rest), p50/p99 send latency over the interval (all shards' sends, each from its paced slot to its
acknowledgement), msg/s sent and consumed, CommitLog end and growth, broker CPU and each shard's, the machine's busy
and stolen CPU shares. The summary's ``cpus`` is where the broker and each shard were allowed to run, read from the
running processes.
When the load stops the consumer drains (``--drain`` seconds at most) and the clients close; then the checks of
:mod:`bench.load.soak_checks` run: RSS (anonymous) and p99 flat within 10 % over the soak phase after ``--warmup``
(the drain is not judged), nothing lost (every acknowledged message consumed), open files and sockets back to their
pre-load counts. The default warm-up, 3 minutes, is what the broker's heap took to level off in the first 10-minute
run (docs/PERFORMANCE.md#soak).
Output: the JSON lines, a ``summary`` line, ``<out>/soak.json`` (summary and samples), ``<out>/soak.samples.json``
and ``<out>/soak.png`` (needs matplotlib, the ``bench`` extra). The exit status is 1 when a check failed. Example::

    python -m bench.load.soak --duration 600            # the full soak
    python -m bench.load.soak --duration 24 --interval 2 --warmup 6 --rate 200 --lifetime 1 4   # a short one
"""

from __future__ import annotations

import argparse
import functools
import json
import os
import shutil
import sys
from array import array
from collections import Counter
from pathlib import Path
from typing import Any

import trio

from bench.load import procstat
from bench.load.cluster import ClusterProcess, create_topics
from bench.load.procstat import process_cpu_seconds
from bench.load.report import STDERR, environment, write_summary
from bench.load.soak_checks import verdict
from bench.load.soak_shard import ShardProcess, gather
from bench.load.stats import summarise
from client import Admin

TOPIC = "SoakTopic"
GROUP = "soak_cg"
SETTINGS = (
    "duration", "fraction", "interval", "warmup", "connections", "senders", "size", "queues", "peak_seconds",
    "processes", "pin",
)  # fmt: skip
#: The shards' final counts the summary carries, summed over the shards.
FINAL_KEYS = (
    "acked", "consumed", "duplicates", "failed_sends", "last_error", "producers_opened", "producers_closed",
    "producer_start_failures",
)  # fmt: skip


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="bench.load.soak", description="A soak of the broker at a share of its peak")
    parser.add_argument("--duration", type=float, default=600.0, help="seconds of paced load")
    parser.add_argument("--fraction", type=float, default=0.8, help="share of the measured peak to send at")
    parser.add_argument("--rate", type=float, help="msg/s to send at (skips the peak phase)")
    parser.add_argument("--peak-seconds", type=float, default=20.0, help="length of the unpaced peak phase")
    parser.add_argument("--interval", type=float, default=10.0, help="seconds between samples")
    parser.add_argument("--warmup", type=float, default=180.0, help="seconds of soak before the flatness checks")
    parser.add_argument("--connections", type=int, default=100, help="producers, each with its own connections")
    parser.add_argument("--lifetime", type=float, nargs=2, default=(10.0, 60.0), metavar=("MIN", "MAX"),
                        help="seconds a producer lives before it is replaced")  # fmt: skip
    parser.add_argument("--senders", type=int, default=64, help="sender tasks (most sends in flight)")
    parser.add_argument("--size", type=int, default=128, help="message body bytes")
    parser.add_argument("--queues", type=int, default=8, help="queues of each shard's topic")
    parser.add_argument("--processes", type=int, default=2,
                        help="load processes (shards), each with its own topic and share of the load")  # fmt: skip
    parser.add_argument("--drain", type=float, default=120.0, help="most seconds the consumer may take to catch up")
    parser.add_argument("--settle", type=float, default=15.0, help="most seconds for closed connections to go")
    parser.add_argument("--out", type=Path, default=Path("bench/results"), help="where soak.json and soak.png go")
    parser.add_argument("--no-plot", action="store_true", help="no soak.png")
    parser.add_argument("--pin", action="store_true",
                        help="the broker on the first CPU, the load processes on the others (taskset)")  # fmt: skip
    return parser


def core_split(pin: bool) -> tuple[list[int], list[int]] | None:
    """The CPUs for the broker (the first one this process may use) and for the load processes (the others), or None
    when not pinning: without ``--pin``, or (said on stderr) with fewer than two CPUs or no ``taskset`` (util-linux)."""
    if not pin:
        return None
    cpus = sorted(os.sched_getaffinity(0))
    if len(cpus) < 2 or shutil.which("taskset") is None:
        STDERR.print(f"--pin: not pinning (CPUs {cpus}, taskset {shutil.which('taskset')})")
        return None
    return cpus[:1], cpus[1:]


def taskset(cpus: list[int] | None) -> list[str]:
    """The command prefix that runs a child on ``cpus`` only; empty for None."""
    return [] if cpus is None else ["taskset", "-c", ",".join(map(str, cpus))]


def cpus_of(pid: int) -> list[int]:
    """The CPUs process ``pid`` may run on; [] when it is gone."""
    try:
        return sorted(os.sched_getaffinity(pid))
    except ProcessLookupError:
        return []


class Soak:
    """One run: the cluster's addresses and pid, the load shards and the samples so far."""

    def __init__(self, args: argparse.Namespace, namesrv: str, broker: str, pid: int, store_dir: str,
                 load_cpus: list[int] | None = None) -> None:  # fmt: skip
        self.args = args
        self.load_cpus = load_cpus
        self.cpus: dict[str, list[int] | list[list[int]]] = {}  # where the processes ran (read once they started)
        self.namesrv, self.broker, self.pid, self.store_dir = namesrv, broker, pid, store_dir
        self.shards = [ShardProcess(f"shard-{i}", self.shard_argv(i)) for i in range(args.processes)]
        self.samples: list[dict[str, Any]] = []
        self.phase = "setup"
        self.origin = 0.0  # trio time the soak phase starts (sample times are relative to it)
        self.peak: float | None = None
        self.rate: float | None = None
        self._load_cpu: dict[str, float | None] = {}

    def shard_argv(self, i: int) -> list[str]:
        """Shard ``i``'s command line: its share of the senders and connections (the first shards take the rest)."""
        args, n = self.args, self.args.processes
        senders, connections = (total // n + (i < total % n) for total in (args.senders, args.connections))
        return [
            *taskset(self.load_cpus), sys.executable, "-m", "bench.load.soak_shard", "--namesrv", self.namesrv,
            "--topic", f"{TOPIC}{i}", "--group", f"{GROUP}{i}", "--senders", str(senders),
            "--connections", str(connections), "--lifetime", *map(str, args.lifetime), "--size", str(args.size),
            "--seed", str(i),
        ]  # fmt: skip

    def descriptors(self) -> procstat.Descriptors:
        return procstat.descriptors(self.pid, self.store_dir)

    async def window(self) -> tuple[array[float], Counter[str]]:
        """Every shard's window, merged: one latency summary and the summed counts."""
        latencies: array[float] = array("d")
        counts: Counter[str] = Counter()
        for shard_latencies, event in await gather(shard.window for shard in self.shards):
            latencies.extend(shard_latencies)
            counts.update({k: v for k, v in event.items() if isinstance(v, int)})
        return latencies, counts

    async def sampler(self, admin: Admin) -> None:
        """A JSON line every interval until cancelled."""
        interval = self.args.interval
        last_t, last_cpu = trio.current_time(), process_cpu_seconds(self.pid)
        last_end, last_machine = await self.commitlog_end(admin), procstat.machine_cpu()
        next_at = last_t
        while True:
            next_at += interval  # fixed deadlines: a slow sample does not push the later ones back
            await trio.sleep_until(next_at)
            latencies, counts = await self.window()
            now, cpu = trio.current_time(), process_cpu_seconds(self.pid)
            seconds = now - last_t
            window = summarise(latencies, counts["failed"], seconds)
            end, machine = await self.commitlog_end(admin), procstat.machine_cpu()
            fds = self.descriptors()
            sample = {
                "type": "sample",
                "phase": self.phase,
                "t": round(now - self.origin, 1),
                "send_tps": round(window.tps, 1),
                "failed": window.failed,
                "p50_ms": round(window.p50_ms, 2),
                "p99_ms": round(window.p99_ms, 2),
                "consume_tps": round(counts["consumed"] / seconds, 1),
                "rss_mb": round(procstat.rss_mb(self.pid), 1),
                "rss_anon_mb": round(procstat.rss_mb(self.pid, "RssAnon:"), 1),
                "files": fds.files,
                "store_files": fds.store,
                "sockets": fds.sockets,
                "commitlog_mb": round(end / 1e6, 2),
                "commitlog_growth_mb_s": round((end - last_end) / 1e6 / seconds, 3),
                "broker_cpu": None if cpu is None or last_cpu is None else round((cpu - last_cpu) / seconds, 3),
                "load_cpu": self.load_cpu(seconds),
                **procstat.machine_shares(last_machine, machine),
                "live_producers": counts["live"],
                "producers_opened": counts["opened"],
                "producers_closed": counts["closed"],
                "outstanding": counts["outstanding"],
            }
            self.samples.append(sample)
            print(json.dumps({"bench": "soak", **sample}), flush=True)
            last_t, last_cpu, last_end, last_machine = now, cpu, end, machine

    def load_cpu(self, seconds: float) -> list[float | None]:
        """Each shard's share of a core since the previous sample (``None`` when it could not be read)."""
        shares = []
        for shard in self.shards:
            cpu = process_cpu_seconds(shard.pid) if shard.pid else None
            before = self._load_cpu.get(shard.name)
            self._load_cpu[shard.name] = cpu
            shares.append(None if cpu is None or before is None else round((cpu - before) / seconds, 3))
        return shares

    async def commitlog_end(self, admin: Admin) -> int:
        try:
            return int((await admin.broker_status(self.broker)).get("commitLogMaxOffset", "0"))
        except Exception:  # a busy broker missed the poll: the sample shows no growth, the soak goes on
            return self.samples[-1]["commitlog_mb"] * 1_000_000 if self.samples else 0

    async def phase_run(self, name: str, rate: float | None, seconds: float) -> int:
        """Every shard's senders for ``seconds`` at ``rate`` msg/s in all (``None``: unpaced); returns the messages
        acknowledged."""
        self.phase = name
        share = None if rate is None else rate / len(self.shards)
        for shard in self.shards:
            await shard.command("phase", rate=share, seconds=seconds)
        return sum(event["acked"] for event in await gather(functools.partial(s.answer, "phase") for s in self.shards))

    async def finish(self) -> dict[str, Any]:
        """Drain and close every shard; their final counts, summed (``last_error``: any shard's)."""
        for shard in self.shards:
            await shard.command("finish", drain=self.args.drain)
        totals: dict[str, Any] = {"last_error": None}
        for event in await gather(functools.partial(s.answer, "final") for s in self.shards):
            for key, value in event.items():
                if isinstance(value, int):
                    totals[key] = totals.get(key, 0) + value
            totals["last_error"] = event["last_error"] or totals["last_error"]
        return totals

    async def settle(self, baseline: procstat.Descriptors) -> procstat.Descriptors:
        """Wait (at most ``--settle`` seconds) for the broker's sockets and files to come back to ``baseline``."""
        fds = self.descriptors()
        with trio.move_on_after(self.args.settle):
            while fds.sockets > baseline.sockets or fds.files > baseline.files:
                await trio.sleep(0.2)
                fds = self.descriptors()
        return fds

    async def load(self, admin: Admin) -> dict[str, Any]:
        """Start the shards, run the phases with the sampler beside them, and finish the shards."""
        args = self.args
        try:
            async with trio.open_nursery() as nursery:
                await gather(functools.partial(shard.start, nursery) for shard in self.shards)
                self.cpus = self.affinity()
                self.origin = trio.current_time() + (0 if args.rate else args.peak_seconds)
                nursery.start_soon(self.sampler, admin)
                if args.rate:
                    self.rate = args.rate
                else:
                    self.peak = await self.phase_run("peak", None, args.peak_seconds) / args.peak_seconds
                    self.rate = args.fraction * self.peak
                    self.origin = trio.current_time()
                await self.phase_run("soak", self.rate, args.duration)
                self.phase = "drain"
                totals = await self.finish()
                nursery.cancel_scope.cancel()
            return totals
        finally:
            for shard in self.shards:
                await shard.close()

    def affinity(self) -> dict[str, list[int] | list[list[int]]]:
        """The CPUs the broker and each shard may run on, read from the running processes ([] for one gone)."""
        shards = [cpus_of(shard.pid) for shard in self.shards if shard.pid is not None]
        return {"broker": cpus_of(self.pid), "load": shards}

    async def run(self) -> dict[str, Any]:
        args = self.args
        await create_topics(self.broker, [f"{TOPIC}{i}" for i in range(args.processes)], args.queues)
        baseline = self.descriptors()  # no client of ours connected (create_topics waited after closing)
        async with Admin(self.namesrv) as admin:
            totals = await self.load(admin)
        settled = await self.settle(baseline)  # every client of ours has closed: the broker must let go too
        checks = verdict(
            self.samples,
            args.warmup,
            acked=totals["acked"],
            lost=totals["outstanding"],
            baseline={"files": baseline.files, "sockets": baseline.sockets},
            settled={"files": settled.files, "sockets": settled.sockets},
        )
        return {
            "tool": "soak",
            "settings": {k: getattr(args, k) for k in SETTINGS},
            "cpus": self.cpus,
            "peak_tps": None if self.peak is None else round(self.peak, 1),
            "rate_tps": round(self.rate or 0, 1),
            **{key: totals[key] for key in FINAL_KEYS},
            "checks": checks,
            "environment": environment("ASYNC_FLUSH"),
        }


def plot(samples: list[dict[str, Any]], warmup: float, png: Path) -> None:
    """Four panels over time: RSS, p99 send latency, descriptors, CommitLog end and send rate."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    t = [s["t"] for s in samples]
    fig, axes = plt.subplots(2, 2, figsize=(12, 7), sharex=True)
    panels = (
        (axes[0][0], "broker RSS (MB)", (("rss_mb", "VmRSS"), ("rss_anon_mb", "anonymous (heap)"))),
        (axes[0][1], "send latency (ms)", (("p99_ms", "p99"), ("p50_ms", "p50"))),
        (axes[1][0], "broker descriptors", (("sockets", "sockets"), ("files", "other"), ("store_files", "store"))),
        (axes[1][1], "msg/s and CommitLog", (("send_tps", "sent msg/s"), ("consume_tps", "consumed msg/s"))),
    )
    for ax, title, series in panels:
        for key, label in series:
            ax.plot(t, [s[key] for s in samples], marker=".", label=label)
        ax.axvline(warmup, color="grey", linestyle=":", linewidth=1)
        ax.axvline(0, color="grey", linestyle="--", linewidth=1)
        ax.set_title(title)
        ax.legend(fontsize=7, loc="upper left")
        ax.grid(alpha=0.3)
    log = axes[1][1].twinx()
    log.plot(t, [s["commitlog_mb"] for s in samples], color="tab:red", label="CommitLog end (MB)")
    log.legend(fontsize=7, loc="lower right")
    for ax in axes[1]:
        ax.set_xlabel("seconds from the soak's start (dashed; dotted: end of warm-up)")
    fig.suptitle("rocketrio broker under a soak: peak phase before 0 s, paced load after")
    fig.tight_layout()
    png.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(png, dpi=100)
    plt.close(fig)


def main(argv: list[str] | None = None) -> dict[str, Any]:
    args = build_parser().parse_args(argv)
    broker_cpus, load_cpus = core_split(args.pin) or (None, None)
    with ClusterProcess(wrap=taskset(broker_cpus)) as cluster:
        data_dir = str(Path(cluster.data_dir).resolve())
        soak = Soak(args, cluster.namesrv, cluster.broker, cluster.pid, data_dir, load_cpus)
        summary = trio.run(soak.run)
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "soak.samples.json").write_text(json.dumps(soak.samples, indent=1) + "\n")
    if not args.no_plot:
        try:
            plot(soak.samples, args.warmup, args.out / "soak.png")
            summary["plot"] = str(args.out / "soak.png")
        except ImportError:
            STDERR.print("matplotlib is not installed (pip install -e '.[bench]'): no plot")
    write_summary(args.out, "soak", summary)
    return summary


if __name__ == "__main__":
    sys.exit(0 if main()["checks"]["ok"] else 1)
