"""Replication's cost and speed (``python -m bench.replication``): real processes on 127.0.0.1, one JSON object per
line, ratios taken within one run.

Three deployments run side by side, each a name server, a master and (but the first) a slave in processes of their
own (``python -m namesrv.cli`` / ``broker.cli``), all ASYNC_FLUSH:

- ``none``: an ASYNC_MASTER without a slave, the baseline;
- ``async``: an ASYNC_MASTER with a slave;
- ``sync``: a SYNC_MASTER with a slave.

``send``: SEND_MESSAGE_V2 of a 128-byte body (bench.broker's request) from 32 tasks on one connection for
``--seconds`` per round, the deployments taken in turn, ``--rounds`` rounds; each line has the throughput and p99 of
one round with the CPU microseconds per acknowledged send of the master's and the slave's processes, the summary the
range and median of the ratios to ``none`` measured in the same round, against the targets (SYNC_MASTER at least
0.6x, ASYNC_MASTER 0.9x), and the master's CPU per send as a ratio to ``none``'s (on a shared machine the steadier
figure)::

    {"bench": "replication", "op": "send", "mode": "sync", "round": 0, "rps": ..., "p50_ms": ..., "p99_ms": ...}
    {"bench": "replication", "op": "send_ratio", "mode": "sync", "ratios": [..], "target": 0.6, "met": true}

``lag``: one more ``async`` send round, apart from the measured ones, while the master's runtime info is sampled
every 20 ms: the bytes between its CommitLog end and its slave's acknowledged offset, and how long each sampled end
took to be acknowledged (ms, to the 20 ms sampling step). Sampling goes on after the sends, up to
:data:`SETTLE_LIMIT`, until the slave acknowledged the last end sampled while sending (those later samples only time
acknowledgements); an end still unacknowledged then counts as waiting until the last sample, and
``unacknowledged`` says how many there were (0 for a healthy slave).

``--baseline DIR`` (A/B in one run): ``async`` and ``sync`` run a second time as ``async@base`` and ``sync@base``,
their master and slave processes started in the checkout ``DIR`` (its code, with its built extensions), so a change
is measured against the code before it in interleaved rounds on the same machine; each gets its ratio line to the
same ``none``.

``catchup``: the ``async`` slave is stopped, ``--catchup-mib`` (1024) MiB are sent to the master in
``--catchup-body``-byte messages, and the slave is started again; the line gives the MB/s from its restart until it
has dispatched the master's whole log, beside this disk's sequential write rate (a file of the same directory
written in 1 MiB blocks and synced) measured in the same run.

Errors: a server that does not boot raises ``RuntimeError`` with its log's tail; every process is terminated on the
way out.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import re
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any, Final

import trio

from bench.broker import create_topic_request, send_request
from bench.load.procstat import process_cpu_seconds
from bench.load.stats import percentile
from remoting.client import RemotingClient
from remoting.codec.bodies import KVTable
from remoting.codec.codes import RequestCode, ResponseCode
from remoting.codec.command import request

MODES: Final = ("none", "async", "sync")
TARGETS: Final = {"async": 0.9, "sync": 0.6}
TOPIC: Final = "BenchBrokerTopic"
INFLIGHT: Final = 32
LAG_STEP: Final = 0.02
#: How long the lag round samples on after its sends, waiting for the slave to acknowledge the last sampled end.
SETTLE_LIMIT: Final = 5.0
#: One lag sample: (``time.perf_counter()``, the master's CommitLog end, the slave's acknowledged offset).
Sample = tuple[float, int, int]


class Server:
    """One ``namesrv.cli`` or ``broker.cli`` process; its address comes from its boot line."""

    def __init__(self, argv: list[str], log: Path, cwd: Path | None = None) -> None:
        self.argv, self.log, self.cwd = argv, log, cwd
        self.proc: subprocess.Popen[str] | None = None
        self.addr = ""

    def start(self) -> str:
        with self.log.open("ab") as err:
            self.proc = subprocess.Popen(self.argv, stdout=subprocess.PIPE, stderr=err, text=True, cwd=self.cwd)
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            found = re.search(r"address (\S+)$|The broker\[[^,]+, (\S+?)\] boot success", line.strip())
            if found:
                self.addr = found.group(1) or found.group(2)
                return self.addr
        raise RuntimeError(f"{self.argv[2]} exited before booting: {self.log.read_text()[-2000:]}")

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()


class Deployment:
    """A name server, a master and optionally a slave, under ``root``; ``mode`` is one of :data:`MODES`, with
    ``@base`` when the brokers run the code in ``code`` (``--baseline``)."""

    def __init__(self, root: Path, mode: str, segment: int, code: Path | None = None) -> None:
        root.mkdir(parents=True)
        self.mode, self.role = mode, mode.partition("@")[0]
        self._code = code
        self.namesrv = Server([sys.executable, "-m", "namesrv.cli", "--listenPort", "0"], root / "namesrv.log")
        self._root, self._segment = root, segment
        self.master: Server | None = None
        self.slave: Server | None = None

    def _broker(self, name: str, role: str, broker_id: int) -> Server:
        props = {"brokerName": "bench-ha", "brokerRole": role, "brokerId": str(broker_id), "listenPort": "0",
                 "listenHost": "127.0.0.1",
                 "storePathRootDir": str(self._root / name), "mappedFileSizeCommitLog": str(self._segment)}  # fmt: skip
        argv = [sys.executable, "-m", "broker.cli", "-n", self.namesrv.addr]
        for key, value in props.items():
            argv += [f"--{key}", value]
        return Server(argv, self._root / f"{name}.log", self._code)

    def start(self) -> None:
        self.namesrv.start()
        self.master = self._broker("master", "SYNC_MASTER" if self.role == "sync" else "ASYNC_MASTER", 0)
        self.master.start()
        if self.role != "none":
            self.slave = self._broker("slave", "SLAVE", 1)
            self.slave.start()

    def stop(self) -> None:
        for server in (self.slave, self.master, self.namesrv):
            if server is not None:
                server.stop()


async def runtime_info(client: RemotingClient, broker: str) -> dict[str, str]:
    response = await client.invoke(broker, request(RequestCode.GET_BROKER_RUNTIME_INFO), 10)
    return KVTable.decode(response.body).table


async def wait_for(client: RemotingClient, broker: str, key: str, value: str, timeout: float = 120) -> None:
    """Poll ``broker``'s runtime info until ``key`` shows ``value``; TooSlowError after ``timeout`` s."""
    with trio.fail_after(timeout):
        while (await runtime_info(client, broker)).get(key) != value:
            await trio.sleep(0.05)


async def prepare(client: RemotingClient, deployment: Deployment) -> None:
    assert deployment.master is not None
    answer = await client.invoke(deployment.master.addr, create_topic_request(TOPIC), 10)
    assert answer.code == ResponseCode.SUCCESS, answer.remark
    if deployment.slave is not None:
        await wait_for(client, deployment.master.addr, "haConnectionCount", "1")


async def send_round(client: RemotingClient, broker: str, seconds: float, body: bytes | None = None) -> list[float]:
    """32 tasks sending for ``seconds``; the latencies (s) of the SEND_OK answers."""
    latencies: list[float] = []
    deadline = trio.current_time() + seconds

    async def sender() -> None:
        while trio.current_time() < deadline:
            cmd = send_request()  # a request per send: each gets its own opaque
            if body is not None:
                cmd = request(RequestCode.SEND_MESSAGE_V2, cmd.ext_fields, body)
            start = time.perf_counter()
            answer = await client.invoke(broker, cmd, 30)
            if answer.code == ResponseCode.SUCCESS:
                latencies.append(time.perf_counter() - start)

    async with trio.open_nursery() as nursery:
        for _ in range(INFLIGHT):
            nursery.start_soon(sender)
    return latencies


async def sample_lag(client: RemotingClient, broker: str, samples: list[Sample]) -> None:
    """Append ``(time, CommitLog end, slave ack)`` every :data:`LAG_STEP` until cancelled."""
    while True:
        info = await runtime_info(client, broker)
        end, ack = int(info["commitLogMaxOffset"]), int(info.get("haPush2SlaveMaxOffset", "0"))
        samples.append((time.perf_counter(), end, ack))
        await trio.sleep(LAG_STEP)


def acknowledgement_delays(samples: list[Sample], after: list[Sample] | None = None) -> tuple[list[float], int]:
    """The ms from each of ``samples`` until the first sample (of them or of ``after``, taken once the sends stopped,
    whose ends are not measured) whose slave ack reached its CommitLog end, and how many ends were never
    acknowledged: those count as waiting until the last sample (a lower bound), so a slave that stalls reports its
    longest waits instead of dropping them."""
    delays, unacknowledged = [], 0
    seen = samples + (after or [])
    last = seen[-1][0] if seen else 0.0
    for i, (t, end, _ack) in enumerate(samples):
        later = next((t2 for t2, _e, ack2 in seen[i:] if ack2 >= end), None)
        if later is None:
            unacknowledged += 1
            later = last
        delays.append((later - t) * 1000)
    return delays, unacknowledged


def lag_figures(samples: list[Sample], after: list[Sample] | None = None) -> dict[str, float]:
    """Bytes behind at each of ``samples`` (those taken while sending), and the ms until each sampled end was
    acknowledged (p50, p99, max; :func:`acknowledgement_delays`, ``after`` the samples taken once the sends
    stopped), with the count of ends still unacknowledged at the last sample."""
    behind = sorted(end - ack for _t, end, ack in samples)
    delays, unacknowledged = acknowledgement_delays(samples, after)
    delays.sort()
    return {
        "bytes_p50": pct(behind, 50), "bytes_p99": pct(behind, 99), "bytes_max": behind[-1] if behind else 0,
        "ms_p50": round(pct(delays, 50), 1), "ms_p99": round(pct(delays, 99), 1),
        "ms_max": round(delays[-1], 1) if delays else 0.0, "samples": len(behind), "unacknowledged": unacknowledged,
    }  # fmt: skip


def cpu_seconds(server: Server | None) -> float:
    """The CPU seconds ``server``'s process used so far (0 for none)."""
    if server is None or server.proc is None:
        return 0.0
    return process_cpu_seconds(server.proc.pid) or 0.0


def pct(values: list[float] | list[int], p: float) -> float:
    """The ``p`` percentile (0..100) of sorted ``values`` by nearest rank (:func:`bench.load.stats.percentile`)."""
    return percentile(values, p / 100)


def emit(line: dict[str, Any]) -> None:
    print(json.dumps({"bench": "replication", **line}), flush=True)


async def send_rounds(client: RemotingClient, deployments: dict[str, Deployment], args: argparse.Namespace) -> None:
    rps: dict[str, list[float]] = {mode: [] for mode in deployments}
    master_cpu: dict[str, list[float]] = {mode: [] for mode in deployments}
    for round_no in range(args.rounds):
        order = list(deployments)[round_no % len(deployments) :] + list(deployments)[: round_no % len(deployments)]
        for mode in order:
            master, slave = deployments[mode].master, deployments[mode].slave
            assert master is not None
            cpu_before = [cpu_seconds(master), cpu_seconds(slave)]
            latencies = await send_round(client, master.addr, args.seconds)
            master_us, slave_us = (
                round((cpu_seconds(server) - before) * 1e6 / max(1, len(latencies)), 1)
                for server, before in zip((master, slave), cpu_before, strict=True)
            )
            master_cpu[mode].append(master_us)
            latencies.sort()
            rps[mode].append(len(latencies) / args.seconds)
            p50, p99 = round(pct(latencies, 50) * 1000, 2), round(pct(latencies, 99) * 1000, 2)
            emit({"op": "send", "mode": mode, "round": round_no, "inflight": INFLIGHT, "rps": round(rps[mode][-1]),
                  "p50_ms": p50, "p99_ms": p99, "master_cpu_us_per_msg": master_us,
                  "slave_cpu_us_per_msg": slave_us})  # fmt: skip
    for mode in rps:
        target = TARGETS.get(mode.partition("@")[0])
        if target is not None and "none" in rps:
            ratios = [round(r / base, 3) for r, base in zip(rps[mode], rps["none"], strict=True) if base]
            cpu = [round(c / base, 3) for c, base in zip(master_cpu[mode], master_cpu["none"], strict=True) if base]
            emit({"op": "send_ratio", "mode": mode, "ratios": ratios, "range": [min(ratios), max(ratios)],
                  "median": statistics.median(ratios), "target": target, "met": min(ratios) >= target,
                  "master_cpu_ratios": cpu})  # fmt: skip
    if "async" in deployments:
        emit({"op": "lag", "mode": "async", **await lag_round(client, deployments["async"], args.seconds)})


async def lag_round(client: RemotingClient, deployment: Deployment, seconds: float) -> dict[str, float]:
    """One more send round on ``deployment`` while its master's lag is sampled (apart from the measured rounds: the
    sampling's requests cost the master CPU), sampling on until the slave acknowledged the last end sampled while
    sending (:func:`settle`)."""
    assert deployment.master is not None
    samples: list[Sample] = []
    async with trio.open_nursery() as nursery:
        nursery.start_soon(sample_lag, client, deployment.master.addr, samples)
        await send_round(client, deployment.master.addr, seconds)
        sending = len(samples)
        await settle(samples, sending)
        nursery.cancel_scope.cancel()
    return lag_figures(samples[:sending], samples[sending:])


async def settle(samples: list[Sample], sending: int) -> None:
    """Wait while ``samples`` grows until its latest ack reached the end of the last of the first ``sending`` (those
    taken while sending), at most :data:`SETTLE_LIMIT` seconds: a stalled slave leaves ends unacknowledged."""
    if not sending:
        return
    end = samples[sending - 1][1]
    with trio.move_on_after(SETTLE_LIMIT):
        while samples[-1][2] < end:
            await trio.sleep(LAG_STEP)


def disk_write_rate(directory: Path, mib: int) -> float:
    """MB/s writing ``mib`` MiB sequentially in 1 MiB blocks, then fdatasync (the file is removed)."""
    path = directory / "disk-rate.tmp"
    block = os.urandom(1 << 20)
    start = time.perf_counter()
    with path.open("wb", buffering=0) as out:
        for _ in range(mib):
            out.write(block)
        os.fdatasync(out.fileno())
    elapsed = time.perf_counter() - start
    path.unlink()
    return mib * 1.048576 / elapsed


async def catch_up(client: RemotingClient, deployment: Deployment, root: Path, args: argparse.Namespace) -> None:
    """Stop the slave, send ``--catchup-mib`` MiB, restart it and time its catch-up."""
    master, slave = deployment.master, deployment.slave
    assert master is not None and slave is not None
    slave.stop()
    before = int((await runtime_info(client, master.addr))["commitLogMaxOffset"])
    body = b"c" * args.catchup_body
    target = before + args.catchup_mib * (1 << 20)
    while int((await runtime_info(client, master.addr))["commitLogMaxOffset"]) < target:
        await send_round(client, master.addr, 1.0, body)
    end = (await runtime_info(client, master.addr))["commitLogMaxOffset"]
    disk = disk_write_rate(root, min(args.catchup_mib, 512))
    start = time.perf_counter()
    await trio.to_thread.run_sync(slave.start)
    await wait_for(client, slave.addr, "haSlaveDispatchedOffset", end, timeout=1800)
    elapsed = time.perf_counter() - start
    behind = int(end) - before
    rate = behind / 1e6 / elapsed
    emit({"op": "catchup", "behind_bytes": behind, "body": args.catchup_body, "seconds": round(elapsed, 2),
          "mb_per_s": round(rate, 1), "disk_write_mb_per_s": round(disk, 1),
          "ratio": round(rate / disk, 3)})  # fmt: skip


@contextlib.contextmanager
def deployments(
    root: Path, modes: list[str], segment: int, baseline: Path | None = None
) -> Iterator[dict[str, Deployment]]:
    """The deployments of ``modes``, plus ``<mode>@base`` for the replicated ones with a ``baseline`` checkout."""
    started: dict[str, Deployment] = {}
    runs = [(mode, None) for mode in modes]
    if baseline is not None:
        runs += [(f"{mode}@base", baseline) for mode in modes if mode != "none"]
    try:
        for mode, code in runs:
            started[mode] = Deployment(root / mode.replace("@", "-"), mode, segment, code)
            started[mode].start()
        yield started
    finally:
        for deployment in started.values():
            deployment.stop()


async def main_async(args: argparse.Namespace, root: Path) -> None:
    with deployments(root, args.modes, args.segment_mib << 20, args.baseline) as running:
        async with RemotingClient() as client:
            for deployment in running.values():
                await prepare(client, deployment)
            await send_rounds(client, running, args)
            if args.catchup_mib and "async" in running:
                await catch_up(client, running["async"], root, args)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="bench.replication", description=__doc__.split("\n\n")[0])
    parser.add_argument("--seconds", type=float, default=5.0, help="length of one send round per deployment")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--modes", nargs="+", default=list(MODES), choices=MODES)
    parser.add_argument("--catchup-mib", type=int, default=1024, help="how far behind the slave restarts (0: skip)")
    parser.add_argument("--catchup-body", type=int, default=16 * 1024, help="message size of the catch-up fill")
    parser.add_argument("--segment-mib", type=int, default=1024, help="mappedFileSizeCommitLog of every broker")
    parser.add_argument("--baseline", type=Path, default=None, help="a checkout whose brokers run as <mode>@base")
    parser.add_argument("--dir", default=None, help="data directory (default: a temporary one, removed after)")
    args = parser.parse_args(argv)
    root = Path(args.dir) if args.dir else Path(tempfile.mkdtemp(prefix="bench-replication-"))
    try:
        trio.run(main_async, args, root)
    finally:
        if not args.dir:
            shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
