"""``python -m bench.compare.publish_cpu``: the CPU ``make compare``'s rocketrio publishers cost, per publish.

The publish half of :func:`bench.compare.drivers.rocketrio` (``--inflight`` tasks each awaiting ``Producer.send`` of
a ``--size`` byte message, for ``--seconds``) against an embedded cluster in a child process
(:class:`~bench.load.cluster.ClusterProcess`, ``--flush-disk-type``), with the CPU of this process (the client) and
of the broker over the acknowledged publishes: the figure that moves little with the machine's load, where the
rates of ``make compare`` move two-fold (docs/PERFORMANCE.md, "The client's send path"). Output: one JSON line;
``--rounds`` runs it that many times, each on a fresh cluster.
"""

from __future__ import annotations

import argparse
import json
import os
import time
from typing import Any

import anyio
import trio

from bench.compare import drivers
from bench.load.cluster import FLUSH_MODES, ClusterProcess, create_topics


def process_cpu_seconds(pid: int) -> float:
    """User plus system CPU seconds of ``pid`` (``/proc/<pid>/stat``)."""
    with open(f"/proc/{pid}/stat") as stat:
        fields = stat.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


async def _publish(namesrv: str, broker_pid: int, w: drivers.Workload) -> dict[str, Any]:
    from client import Message, Producer

    body = b"r" * w.size
    async with Producer("bench_compare_pg", namesrv) as producer:
        await drivers.send_ok(producer, Message(drivers.TOPIC, body))  # the route, before the window
        client0, broker0 = time.process_time(), process_cpu_seconds(broker_pid)
        count, seconds, _ = await drivers.publish_loop(
            lambda: drivers.send_ok(producer, Message(drivers.TOPIC, body)), w
        )
        client = time.process_time() - client0
        broker = process_cpu_seconds(broker_pid) - broker0
    count = max(count, 1)
    return {
        "published": count,
        "publish_rps": round(count / seconds),
        "client_us": round(client / count * 1e6, 1),
        "broker_us": round(broker / count * 1e6, 1),
    }


def measure(flush: str, w: drivers.Workload) -> dict[str, Any]:
    """One round on a fresh cluster."""
    with ClusterProcess(flush) as cluster:
        trio.run(create_topics, cluster.broker, [drivers.TOPIC], 4)
        result: dict[str, Any] = anyio.run(_publish, cluster.namesrv, cluster.pid, w, backend="trio")
    return {"bench": "publish_cpu", "flush_disk_type": flush, **result}


def main(argv: list[str] | None = None) -> list[dict[str, Any]]:
    parser = argparse.ArgumentParser(prog="bench.compare.publish_cpu", description=__doc__.splitlines()[0])
    parser.add_argument("--flush-disk-type", default="ASYNC_FLUSH", choices=FLUSH_MODES)
    parser.add_argument("--seconds", type=float, default=4.0)
    parser.add_argument("--inflight", type=int, default=32)
    parser.add_argument("--size", type=int, default=128)
    parser.add_argument("--rounds", type=int, default=1)
    args = parser.parse_args(argv)
    w = drivers.Workload(size=args.size, inflight=args.inflight, duration=args.seconds, max_messages=10**9)
    rows = []
    for _ in range(args.rounds):
        row = measure(args.flush_disk_type, w)
        print(json.dumps(row), flush=True)
        rows.append(row)
    return rows


if __name__ == "__main__":
    main()
