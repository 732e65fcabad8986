"""Send throughput of a three-member DLedger group against one broker alone, same flush mode, same run.

Each round starts, in turn, a name server with one plain ``mqbroker`` (A), a name server with three ``mqbroker``
processes in DLedger mode (B, the load sent to the leader) and the same with ``enableBatchPush=true`` (C), runs
``python -m bench.load.producer`` against each for ``--duration`` seconds with ``--inflight`` synchronous senders, and
stops them. A, B and C alternate within a round, so the ratios B/A and C/A compare runs made under the same machine
load (the machine is shared: only ratios within one run mean anything). Prints one JSON line per measurement (with
the brokers' ``flush_disk_type``, each broker's and the producer tool's CPU ms per acknowledged send, both over the
tool's measured window, and their sum, the machine's) and a summary per ratio with every round's value, their range
and median, the load average, and the ratio the machine's CPU allows (``cpu_bounds``: one broker's and its
producer's CPU per send over the group's and its producer's; every process shares the same cores, so each setup's
rate is about the cores over that sum)::

    python -m bench.dledger_throughput --rounds 3 --duration 10 --inflight 32

``--baseline DIR`` (A/B in one run): both groups run a second time in each round as ``dledger3@base`` and
``dledger3_batch@base``, their processes started in the checkout ``DIR`` (its code), each with its ratio to the same
single broker.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

import trio

from bench.dledger_failover import _BIN, SEGMENT, Group, Member, free_ports
from bench.load.procstat import CpuSampler
from remoting.client import RemotingClient


async def _load(namesrv: str, broker: str, args: argparse.Namespace, out: Path,
                members: dict[str, int] | None = None) -> dict[str, Any]:  # fmt: skip
    """Run the producer tool; its summary's result, with the flush mode the brokers were started with (the tool
    takes none for a ``--namesrv`` broker) and the CPU ms per acknowledged send of each member (``members``: name ->
    pid) and of the producer over the tool's window (:func:`window_cpu`; the CPU the machine's other load leaves a
    member shows less in it than in the sends per second). RuntimeError when the tool printed no summary."""
    argv = [sys.executable, "-m", "bench.load.producer", "--namesrv", namesrv, "--broker", broker, "--quiet",
            "--inflight", str(args.inflight), "--duration", str(args.duration), "--size", str(args.size),
            "--out", str(out)]  # fmt: skip
    with contextlib.ExitStack() as stack:
        samplers = {name: stack.enter_context(CpuSampler([pid])) for name, pid in (members or {}).items()}
        done = await trio.run_process(argv, capture_stdout=True, stderr=subprocess.DEVNULL, check=False)
    lines = [json.loads(line) for line in done.stdout.decode().splitlines() if line.startswith("{")]
    summary = next((line for line in reversed(lines) if line.get("type") == "summary"), None)
    if summary is None:
        raise RuntimeError(f"the producer tool printed no summary (exit {done.returncode})")
    result: dict[str, Any] = summary["result"] | {"flush_disk_type": args.flush}
    ok = result.get("ok") or 0
    if samplers and ok:
        spent = window_cpu(summary, samplers)
        result["cpu_ms_per_send"] = {name: round(seconds * 1000 / ok, 4) for name, seconds in spent.items()}
        result["machine_cpu_ms_per_send"] = round(sum(spent.values()) * 1000 / ok, 4)
    return result


def window_cpu(summary: dict[str, Any], samplers: dict[str, CpuSampler]) -> dict[str, float]:
    """The CPU seconds each member's sampler read over the producer tool's window (``window_monotonic``), and the
    producer's own in it (``load_cpu_seconds``): not its interpreter start, set-up and shutdown around the sends."""
    start, end = summary["window_monotonic"]
    spent = {name: sampler.between(start, end) for name, sampler in samplers.items()}
    return spent | {"producer": summary["load_cpu_seconds"]}


def cpu_bound(alone: dict[str, Any], group: dict[str, Any]) -> float | None:
    """The ratio the machine's CPU allows: one broker's and its producer's CPU per send over the group's and its
    producer's (every process shares the same cores, so each setup's rate is about the cores over that sum)."""
    single, together = alone.get("machine_cpu_ms_per_send"), group.get("machine_cpu_ms_per_send")
    return round(single / together, 3) if single and together else None


def _pids(group: Group, leader: Member) -> dict[str, int]:
    """``leader`` and ``follower-<id>`` -> pid of each running member."""
    return {
        ("leader" if member is leader else f"follower-{member.member_id}"): member.process.pid
        for member in group.members.values()
        if member.process is not None
    }


async def single(work: Path, args: argparse.Namespace) -> dict[str, Any]:
    """One plain broker (no DLedger) with the same segment size and flush mode."""
    group = Group(work, 0, {})
    port = free_ports(1)[0]
    member = next(iter(group.members.values()))
    member.argv = [str(_BIN / "mqbroker"), "--brokerName", "broker-a", "--listenHost", "127.0.0.1",
                   "--listenPort", str(port), "--storePathRootDir", str(work / "single"),
                   "--fastChannelEnable", "false", "--mappedFileSizeCommitLog", str(SEGMENT),
                   "--flushDiskType", args.flush]  # fmt: skip
    member.port = port
    group.members = {member.member_id: member}
    try:
        await group.start_namesrv()
        await group.start(member)
        async with RemotingClient() as client:
            await group.create_topic(client)
        assert member.process is not None
        return await _load(group.namesrv_addr, member.addr, args, work / "out-single", {"broker": member.process.pid})
    finally:
        await group.kill_all()


async def dledger(work: Path, args: argparse.Namespace, batch: bool, code: Path | None = None) -> dict[str, Any]:
    """A three-member group, its members running this checkout or ``code`` (``--baseline``)."""
    settings = {"flushDiskType": args.flush, "enableBatchPush": str(batch).lower()}
    group = Group(work, 0, settings) if code is None else Group(work, 0, settings, str(code))
    try:
        async with RemotingClient() as client, trio.open_nursery() as nursery:
            leader = await group.boot(client, nursery)
            nursery.cancel_scope.cancel()
        return await _load(group.namesrv_addr, leader.addr, args, work / "out-dledger", _pids(group, leader))
    finally:
        await group.kill_all()


async def run(args: argparse.Namespace) -> None:
    work = Path(tempfile.mkdtemp(prefix="dledger-tput-"))
    try:
        await _rounds(args, work)
    finally:
        shutil.rmtree(work, ignore_errors=True)  # the groups' stores: about 0.6 GB a round


async def _rounds(args: argparse.Namespace, work: Path) -> None:
    setups: list[tuple[str, bool, Path | None]] = [("dledger3", False, None), ("dledger3_batch", True, None)]
    if args.baseline is not None:
        setups += [(f"{setup}@base", batch, args.baseline.resolve()) for setup, batch, _ in setups]
    ratios: dict[str, list[float]] = {setup: [] for setup, _, _ in setups}
    bounds: dict[str, list[float]] = {setup: [] for setup, _, _ in setups}
    for number in range(args.rounds):
        alone = await single(work / f"r{number}-a", args)
        print(json.dumps({"round": number, "setup": "single", **alone}), flush=True)
        for setup, batch, code in setups:
            group = await dledger(work / f"r{number}-{setup.replace('@', '-')}", args, batch, code)
            print(json.dumps({"round": number, "setup": setup, **group}), flush=True)
            if alone["tps"]:
                ratios[setup].append(round(group["tps"] / alone["tps"], 3))
            bound = cpu_bound(alone, group)
            if bound is not None:
                bounds[setup].append(bound)
    for setup, values in ratios.items():
        line = {"summary": f"{setup}/single tps", "inflight": args.inflight, "flush": args.flush, "ratios": values}
        spread = {"min": min(values, default=None), "max": max(values, default=None)}
        cpu = {"cpu_bounds": bounds[setup], "cpu_bound_median": _median(bounds[setup])}
        print(json.dumps(line | spread | {"median": _median(values)} | cpu
                         | {"load_average": round(os.getloadavg()[0], 2)}))  # fmt: skip


def _median(values: list[float]) -> float | None:
    return statistics.median(values) if values else None


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.dledger_throughput", description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--duration", type=float, default=10.0)
    parser.add_argument("--inflight", type=int, default=32)
    parser.add_argument("--size", type=int, default=128)
    parser.add_argument("--flush", default="ASYNC_FLUSH", choices=("ASYNC_FLUSH", "SYNC_FLUSH"))
    parser.add_argument(
        "--baseline", type=Path, default=None, help="a checkout whose brokers run the groups again as <setup>@base"
    )
    trio.run(run, parser.parse_args())


if __name__ == "__main__":
    main()
