"""``python -m bench.compare`` (``make compare``): rocketrio beside Redis Streams, RabbitMQ, NATS JetStream and
Mosquitto on one workload, in one run.

Two durability classes, each system in the one it belongs to:

- ``fsync-per-ack`` (the acknowledgement means the message is on disk): rocketrio SYNC_FLUSH, Redis
  ``appendfsync always``, RabbitMQ durable queue + persistent messages + publisher confirms;
- ``periodic-fsync`` (acknowledged once written, flushed in the background): rocketrio ASYNC_FLUSH, Redis
  ``appendfsync everysec``, NATS JetStream file storage, Mosquitto QoS 1 with persistence.

and a third, ``replicated`` (acknowledged once a second machine's process has it, each flushing in the
background): rocketrio SYNC_MASTER with one slave, a Redis primary with one replica (each XADD followed by
``WAIT 1``), NATS JetStream file storage with 3 replicas in a 3-server cluster and a RabbitMQ quorum queue on a
3-node cluster (both acknowledged by a majority, 2 of 3). Every server of a row runs on this one machine.

Every row: publish msgs/s with ``--inflight`` publishers awaiting acks, p50/p99 ack latency, then consume msgs/s
draining what was published. A drain that ran out of ``--drain-timeout`` before it read everything back says so
(``drained`` false, ``drain_incomplete``: what it read of what it had to) and gets no consume ratio.
``ratio`` is rocketrio ÷ peer for publish and consume within the class. Output: JSON
lines on stdout, a rich table on stderr, ``bench/results/compare.json`` and ``bench/results/compare.png``;
``--profile`` then re-runs the rocketrio rows under py-spy into ``bench/results/compare.svg``. A peer
whose package cannot be installed or whose server does not start is a ``skipped`` row with the reason.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import anyio
from rich.console import Console
from rich.table import Table

from bench.compare import drivers, servers
from bench.compare.drivers import Measurement, Workload
from bench.load.cluster import ClusterProcess, create_topics
from bench.load.profile import py_spy
from bench.load.report import environment

STDERR = Console(stderr=True, width=150)


def run_rocketrio(flush: str, w: Workload) -> Measurement:
    import trio

    with ClusterProcess(flush) as cluster:
        trio.run(create_topics, cluster.broker, [drivers.TOPIC], 4)
        result: Measurement = anyio.run(drivers.rocketrio, cluster.namesrv, w, backend="trio")
        return result


def run_rocketrio_replicated(w: Workload) -> Measurement:
    """A SYNC_MASTER and its slave (ASYNC_FLUSH, each its own process, as :mod:`bench.replication` runs them)."""
    import trio

    from bench.replication import Deployment, wait_for
    from remoting.client import RemotingClient

    async def prepare(master: str) -> None:
        await create_topics(master, [drivers.TOPIC], 4)
        async with RemotingClient() as client:
            await wait_for(client, master, "haConnectionCount", "1", timeout=60)

    with tempfile.TemporaryDirectory(prefix="bench-compare-ha-") as scratch:
        deployment = Deployment(Path(scratch) / "ha", "sync", 256 << 20)
        try:
            deployment.start()
            assert deployment.master is not None
            trio.run(prepare, deployment.master.addr)
            result: Measurement = anyio.run(drivers.rocketrio, deployment.namesrv.addr, w, backend="trio")
            return result
        finally:
            deployment.stop()


def run_peer(
    binary: str,
    start: Callable[[], servers.PeerServer | servers.PeerGroup],
    driver: Any,
    w: Workload,
    install: bool,
) -> Measurement | str:
    reason = servers.ensure_installed(binary) if install else servers.missing(binary)
    if reason:
        return reason
    try:
        server = start()
    except servers.PeerUnavailable as exc:
        return f"server did not start: {exc}"
    try:
        result: Measurement = anyio.run(driver, server.port, w, backend="asyncio")
        return result
    finally:
        server.stop()


def matrix(w: Workload, only: set[str] | None, install: bool = True) -> list[dict[str, Any]]:
    plan: list[tuple[str, str, Callable[[], Measurement | str]]] = [
        ("fsync-per-ack", "rocketrio SYNC_FLUSH", lambda: run_rocketrio("SYNC_FLUSH", w)),
        ("fsync-per-ack", "redis appendfsync always", lambda: run_peer(
            "redis-server", lambda: servers.start_redis("always"), drivers.redis_streams, w, install)),
        ("fsync-per-ack", "rabbitmq confirms+durable", lambda: run_peer(
            "rabbitmq-server", servers.start_rabbitmq, drivers.rabbitmq, w, install)),
        ("periodic-fsync", "rocketrio ASYNC_FLUSH", lambda: run_rocketrio("ASYNC_FLUSH", w)),
        ("periodic-fsync", "redis appendfsync everysec", lambda: run_peer(
            "redis-server", lambda: servers.start_redis("everysec"), drivers.redis_streams, w, install)),
        ("periodic-fsync", "nats jetstream file", lambda: run_peer(
            "nats-server", servers.start_nats, drivers.nats_jetstream, w, install)),
        ("periodic-fsync", "mosquitto qos1 persistent", lambda: run_peer(
            "mosquitto", servers.start_mosquitto, drivers.mosquitto, w, install)),
        ("replicated", "rocketrio SYNC_MASTER + slave", lambda: run_rocketrio_replicated(w)),
        ("replicated", "redis + replica, WAIT 1", lambda: run_peer(
            "redis-server", servers.start_redis_replicated, drivers.redis_replicated, w, install)),
        ("replicated", "nats jetstream file, R3", lambda: run_peer(
            "nats-server", servers.start_nats_cluster, drivers.nats_jetstream_replicated, w, install)),
        ("replicated", "rabbitmq quorum queue, 3 nodes", lambda: run_peer(
            "rabbitmq-server", servers.start_rabbitmq_cluster, drivers.rabbitmq_quorum, w, install)),
    ]  # fmt: skip
    rows: list[dict[str, Any]] = []
    for durability, system, run in plan:
        if only and not any(name in system for name in only) and not system.startswith("rocketrio"):
            continue
        STDERR.print(f"[bold]{durability}[/]: {system} ...")
        row: dict[str, Any] = {"bench": "compare", "durability": durability, "system": system}
        try:
            outcome = run()
        except ImportError as exc:
            outcome = f"client library missing ({exc.name}): pip install -e '.[bench]'"
        except Exception as exc:  # one broken peer must not lose the other rows
            outcome = f"failed: {type(exc).__name__}: {exc}"
        if isinstance(outcome, str):
            row["skipped"] = outcome
        else:
            row.update(
                publish_rps=round(outcome.publish_rps),
                published=outcome.published,
                p50_ms=round(outcome.p50_ms, 3),
                p99_ms=round(outcome.p99_ms, 3),
                consume_rps=round(outcome.consume_rps),
                consumed=outcome.consumed,
                drained=outcome.drained,
            )
            if not outcome.drained:
                row["drain_incomplete"] = f"{outcome.consumed} of {outcome.expected} in {w.drain_timeout} s"
        STDERR.print(f"  {row}")
        rows.append(row)
    for row in rows:
        ours = next(r for r in rows if r["durability"] == row["durability"] and r["system"].startswith("rocketrio"))
        if "skipped" in row or "skipped" in ours:
            continue
        for key in ("publish_rps", "consume_rps"):
            partial = key == "consume_rps" and not (row["drained"] and ours["drained"])  # a timed-out rate
            if row[key] and not partial:
                row[f"{key.split('_')[0]}_ratio"] = round(ours[key] / row[key], 2)
    for row in rows:
        print(json.dumps(row), flush=True)
    return rows


def show(rows: list[dict[str, Any]]) -> None:
    table = Table(title="rocketrio vs peers (ratio = rocketrio ÷ peer, same durability class)")
    for column in ("durability", "system", "publish/s", "p50 ms", "p99 ms", "consume/s", "pub ratio", "cons ratio"):
        table.add_column(column, justify="left" if column in ("durability", "system") else "right")
    for r in rows:
        if "skipped" in r:
            table.add_row(r["durability"], r["system"], f"skipped: {r['skipped']}", "", "", "", "", "")
            continue
        table.add_row(
            r["durability"],
            r["system"],
            f"{r['publish_rps']:,}",
            f"{r['p50_ms']:.2f}",
            f"{r['p99_ms']:.2f}",
            f"{r['consume_rps']:,}" + ("" if r["drained"] else " (drain incomplete)"),
            str(r.get("publish_ratio", "")),
            str(r.get("consume_ratio", "")),
        )
    STDERR.print(table)


def chart(rows: list[dict[str, Any]], png: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    measured = [r for r in rows if "skipped" not in r]
    fig, axes = plt.subplots(1, 2, figsize=(13, 5))
    for ax, key, title in (
        (axes[0], "publish_rps", "acknowledged publish msg/s"),
        (axes[1], "consume_rps", "consume msg/s"),
    ):
        labels = [f"{r['system']}\n({r['durability']})" for r in measured]
        colors = ["tab:orange" if r["system"].startswith("rocketrio") else "tab:blue" for r in measured]
        bars = ax.barh(labels, [r[key] for r in measured], color=colors)
        for bar, r in zip(bars, measured, strict=True):
            ratio = r.get(f"{key.split('_')[0]}_ratio")
            if ratio is not None:
                ax.text(bar.get_width(), bar.get_y() + bar.get_height() / 2, f" x{ratio}", va="center", fontsize=8)
        ax.set_title(title)
        ax.invert_yaxis()
        ax.tick_params(axis="y", labelsize=7)
    fig.suptitle("rocketrio vs peers (label: rocketrio ÷ peer in the same durability class)")
    fig.tight_layout()
    png.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(png, dpi=110)
    plt.close(fig)


def main(argv: list[str] | None = None) -> list[dict[str, Any]]:
    parser = argparse.ArgumentParser(prog="bench.compare", description=__doc__.split("\n")[0] if __doc__ else None)
    parser.add_argument("--size", type=int, default=128, help="message body bytes")
    parser.add_argument("--inflight", type=int, default=32, help="publishers awaiting acks concurrently")
    parser.add_argument("--duration", type=float, default=3.0, help="publish seconds per system")
    parser.add_argument("--max-messages", type=int, default=200_000, help="publish at most this many per system")
    parser.add_argument("--drain-timeout", type=float, default=20.0, help="consume at most this long per system")
    parser.add_argument("--only", action="append", help="peers whose name contains this (repeatable); rocketrio always")
    parser.add_argument("--no-install", action="store_true", help="skip peers that are not installed (no apt-get)")
    parser.add_argument(
        "--profile",
        action="store_true",
        help="then re-run the rocketrio rows under py-spy (brokers included) into <out>/compare.svg",
    )
    parser.add_argument("--out", type=Path, default=Path("bench/results"))
    args = parser.parse_args(argv)
    w = Workload(args.size, args.inflight, args.duration, args.max_messages, args.drain_timeout)
    rows = matrix(w, set(args.only) if args.only else None, not args.no_install)
    show(rows)
    summary = {"workload": {k: getattr(w, k) for k in ("size", "inflight", "duration", "max_messages")}, "rows": rows}
    summary["environment"] = environment("per row")
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "compare.json").write_text(json.dumps(summary, indent=2) + "\n")
    try:
        chart(rows, args.out / "compare.png")
    except ImportError:
        STDERR.print("matplotlib is not installed (pip install -e '.[bench]'): no chart")
    if args.profile:
        profile_rocketrio(w, args.out / "compare.svg")
    return rows


def profile_rocketrio(w: Workload, svg: Path) -> None:
    """The rocketrio rows again under py-spy (a peer name matching nothing skips every peer); that run's own
    figures go to a scratch directory, so the table above stays the unprofiled one."""
    with tempfile.TemporaryDirectory(prefix="bench-compare-profile-") as scratch:
        argv = [sys.executable, "-m", "bench.compare", "--size", str(w.size), "--inflight", str(w.inflight)]
        argv += ["--duration", str(w.duration), "--max-messages", str(w.max_messages), "--no-install"]
        argv += ["--only", "rocketrio-only", "--out", scratch]
        record = [py_spy(), "record", "--subprocesses", "-o", str(svg), "--", *argv]
        subprocess.run(record, check=True, stdout=subprocess.DEVNULL)


if __name__ == "__main__":
    main()
