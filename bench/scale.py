"""``python -m bench.scale``: throughput of 1, 2, ... master brokers on this host, and the CPU each message costs them.

For each count in ``--brokers`` (``--rounds`` times, the counts interleaved so the machine's other load falls on all
of them alike) the tool starts ``python -m broker.embedded --brokers N`` (``make run``'s cluster: broker-a in the
name server's process, the others each in a process of its own), creates one topic with ``--queues`` queues on every
master, waits until its route names them all, then runs ``--load-procs`` processes of ``bench.load.producer`` (async
sends, ``--inflight`` outstanding each) for ``--seconds``. One JSON line per run: msg/s (the producers' acknowledged
sends over their windows), the broker processes' CPU seconds per acknowledged message and the cores they kept busy
(both over the producers' windows, from the first one's start to the last one's end: sampled every
:data:`~bench.load.procstat.SAMPLE_STEP` by :class:`~bench.load.procstat.CpuSampler`, interpolated at the bounds
each producer reports), and how many messages each broker stored (the client spreads by queue over every broker of
the route). The ``summary`` line projects, from the median CPU per message of the largest broker count, what N
cores give when the brokers alone are the limit (clients on other machines, one broker per core): N / CPU per
message. Output also goes to ``<out>/scale.json``.

Errors: a cluster or producer process that fails makes the run's line carry ``error`` and the tool goes on.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

import trio

from bench.load.procstat import CpuSampler, children_of
from bench.load.report import environment
from client import Admin, TopicRouteNotFoundError

TOPIC_PREFIX = "ScaleTopic"
TOPIC = f"{TOPIC_PREFIX}0"
BROKER_BOOT = re.compile(r"The broker\[([^,\]]+), (\S+?):(\d+)\] boot success")
NAMESRV_BOOT = re.compile(r"The Name Server boot success\. serializeType=JSON, address (\S+):(\d+)")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="bench.scale", description="Throughput of N brokers on one host")
    parser.add_argument("--brokers", type=int, nargs="+", default=[1, 2], help="broker counts to measure")
    parser.add_argument("--rounds", type=int, default=2, help="runs of each count, interleaved")
    parser.add_argument("--seconds", type=float, default=10.0, help="measured window of each run")
    parser.add_argument("--load-procs", type=int, default=2, help="producer processes")
    parser.add_argument("--inflight", type=int, default=256, help="async sends outstanding per producer process")
    parser.add_argument("--size", type=int, default=128, help="message body bytes")
    parser.add_argument("--queues", type=int, default=8, help="queues of the topic on each broker")
    parser.add_argument("--out", type=Path, default=Path("bench/results"))
    return parser


async def brokers_in_route(admin: Admin, topic: str) -> int:
    """How many brokers the name server's route of ``topic`` names now (0 before any registered it)."""
    admin.instance.forget_route(topic)
    try:
        return len((await admin.topic_route(topic)).queue_datas)
    except TopicRouteNotFoundError:
        return 0


async def prepare(namesrv: str, brokers: int, queues: int) -> None:
    """The topic on every master, and a route naming them all."""
    async with Admin(namesrv) as admin:
        with trio.fail_after(60):
            while len((await admin.cluster_info()).broker_addr_table) < brokers:
                await trio.sleep(0.1)
            await admin.create_topic(TOPIC, read_queue_nums=queues, write_queue_nums=queues)
            while await brokers_in_route(admin, TOPIC) < brokers:
                await trio.sleep(0.1)


async def stored_by_broker(namesrv: str) -> dict[str, int]:
    async with Admin(namesrv) as admin:
        status = await admin.topic_status(TOPIC)
    stored: dict[str, int] = {}
    for mq, offsets in status.items():
        stored[mq.broker_name] = stored.get(mq.broker_name, 0) + offsets.max_offset
    return dict(sorted(stored.items()))


def one_run(args: argparse.Namespace, brokers: int, data: Path) -> dict[str, Any]:
    argv = [sys.executable, "-m", "broker.embedded", "--data", str(data / "cluster"), "--namesrv-port", "0",
            "--listenPort", "0", "--brokers", str(brokers), "--mappedFileSizeCommitLog", str(256 << 20)]  # fmt: skip
    cluster = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    row: dict[str, Any] = {"type": "run", "brokers": brokers}
    try:
        assert cluster.stdout is not None
        namesrv, broker_a, boots = "", "", 0
        while not namesrv or boots < brokers:
            line = cluster.stdout.readline()
            if not line:
                return {**row, "error": f"the cluster exited with {cluster.poll()} before booting"}
            if match := NAMESRV_BOOT.search(line):
                namesrv = f"{match.group(1)}:{match.group(2)}"
            elif match := BROKER_BOOT.search(line):
                boots += 1
                broker_a = broker_a or f"{match.group(2)}:{match.group(3)}"  # broker-a's line comes first
        pids = [cluster.pid, *children_of(cluster.pid)]
        trio.run(prepare, namesrv, brokers, args.queues)
        load_argv = [sys.executable, "-m", "bench.load.producer", "--namesrv", namesrv, "--broker", broker_a,
                     "--topic-prefix", TOPIC_PREFIX, "--queues", str(args.queues), "--mode", "async",
                     "--inflight", str(args.inflight), "--size", str(args.size), "--duration", str(args.seconds),
                     "--quiet"]  # fmt: skip
        with CpuSampler(pids) as sampler:
            loads = [
                subprocess.Popen([*load_argv, "--out", str(data / f"load{i}")], stdout=subprocess.DEVNULL)
                for i in range(args.load_procs)
            ]
            codes = [load.wait() for load in loads]
        if any(codes):
            return {**row, "error": f"producer exit codes {codes}"}
        summaries = [json.loads((data / f"load{i}" / "producer.json").read_text()) for i in range(len(loads))]
        # the producers' windows, not their start-up and shutdown: from the first window's start to the last one's end
        start = min(s["window_monotonic"][0] for s in summaries)
        end = max(s["window_monotonic"][1] for s in summaries)
        cpu = sampler.between(start, end)
        results = [s["result"] for s in summaries]
        ok = sum(r["ok"] for r in results)
        client_cpu = sum(s["load_cpu_seconds"] for s in summaries)
        row.update(
            msg_s=round(sum(r["ok"] / r["seconds"] for r in results)),
            acked=ok,
            failed=sum(r["failed"] for r in results),
            p99_ms=max(r["p99_ms"] for r in results),
            broker_cpu_us_per_msg=round(cpu / ok * 1e6, 1) if ok else None,
            client_cpu_us_per_msg=round(client_cpu / ok * 1e6, 1) if ok else None,
            broker_cores=round(cpu / (end - start), 2),  # cores the brokers kept busy in the windows
            broker_processes=len(pids),
            stored=trio.run(stored_by_broker, namesrv),
            load_average=round(os.getloadavg()[0], 2),
        )
        return row
    finally:
        cluster.send_signal(signal.SIGTERM)
        try:
            cluster.wait(60)
        except subprocess.TimeoutExpired:
            cluster.kill()
            cluster.wait()


def main(argv: list[str] | None = None) -> dict[str, Any]:
    args = build_parser().parse_args(argv)
    rows: list[dict[str, Any]] = []
    for _ in range(args.rounds):
        for brokers in args.brokers:
            data = Path(tempfile.mkdtemp(prefix="bench-scale-"))
            try:
                row = one_run(args, brokers, data)
            finally:
                shutil.rmtree(data, ignore_errors=True)
            rows.append(row)
            print(json.dumps({"bench": "scale", **row}), flush=True)
    cpu_by = {
        n: [r["broker_cpu_us_per_msg"] for r in rows if r["brokers"] == n and r.get("broker_cpu_us_per_msg")]
        for n in args.brokers
    }
    medians = {n: statistics.median(cpu) for n, cpu in cpu_by.items() if cpu}
    # the projection takes the CPU per message of the most brokers measured: each then batches less per connection
    per_msg = medians[max(medians)] if medians else None
    summary: dict[str, Any] = {
        "bench": "scale",
        "type": "summary",
        "settings": {k: getattr(args, k) for k in ("brokers", "rounds", "seconds", "load_procs", "inflight", "size")},
        "msg_s_by_brokers": {
            str(n): [r["msg_s"] for r in rows if r["brokers"] == n and "msg_s" in r] for n in args.brokers
        },
        "broker_cpu_us_per_msg_median_by_brokers": {str(n): m for n, m in medians.items()},
        # brokers alone the limit: each core runs one broker at 1 / (CPU per message)
        "projected_msg_s_by_cores": {str(n): round(n * 1e6 / per_msg) for n in (1, 2, 4, 8, 16)} if per_msg else {},
        "environment": environment("ASYNC_FLUSH"),
        "runs": rows,
    }
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "scale.json").write_text(json.dumps(summary, indent=2) + "\n")
    print(json.dumps({k: v for k, v in summary.items() if k != "runs"}), flush=True)
    return summary


if __name__ == "__main__":
    main()
