"""``python -m bench.metrics``: what the runtime statistics and ``/metrics`` cost. JSON lines on stdout.

``scrape``: an embedded broker with ``metricsExporterType=PROM``, ``--topics`` topics (4 queues, a few messages
each) and ``--groups`` online consumer groups (each subscribed to ``--per-group`` topics, each having pulled from
them): the wall time of ``GET /metrics`` over HTTP, the part of it spent on the Trio thread (the snapshot), the size
of the text and its number of samples. One line per scrape, then a summary. With ``--tag-backlog N`` each queue
holds N messages, every other one tagged ``TagA``, and the groups subscribe to ``TagA`` with offsets committed at 0
instead of pulling: the worst case of the lag estimates (``broker/metrics/lag.py``).

``path``: the same comparison without sockets or a second process, so far less noisy: a worker process per round
and tree drives ``SendMessageProcessor.process`` (one message) and ``PullMessageProcessor.process`` (32 messages)
in a loop over a real store and reports CPU microseconds per call; ``--base-tree`` as for ``cost``.

``cost``: the broker's CPU per acknowledged message under ``bench.load.producer`` (async sends), in interleaved
rounds of each variant: ``off`` (this tree, metrics off: the always-on statistics only), ``prom`` (this tree with
``metricsExporterType=PROM``: every request timed, nothing scraping) and, with ``--base-tree DIR`` (a checkout of
the commit before the statistics, C extensions copied in), ``base``. Each round is one line; the summary gives each
variant's range and its median ratio to the first variant.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path
from typing import Any

import trio

from broker.embedded import EmbeddedCluster
from processors.pull import build_subscription
from remoting.client import RemotingClient
from remoting.codec.bodies.heartbeat import ConsumerData, HeartbeatData
from remoting.codec.codes import RequestCode, ResponseCode
from remoting.codec.command import request
from remoting.codec.message import MessageRecord
from store.metadata_files import TopicConfig

QUEUES = 4


def emit(line: dict[str, Any]) -> None:
    print(json.dumps(line), flush=True)


async def _populate(
    cluster: EmbeddedCluster, client: RemotingClient, topics: list[str], groups: int, per_group: int, backlog: int = 0
) -> None:
    """Topics with messages in every queue; ``groups`` consumers online on ``client``'s connection, each subscribed
    to ``per_group`` topics and having pulled once from every queue of them (with ``backlog``: see the module
    docstring)."""
    state = cluster.controller.context
    for topic in topics:
        state.topics.update_topic(TopicConfig(topic, QUEUES, QUEUES))
        for queue_id in range(QUEUES):
            for n in range(max(1, backlog)):
                tags = "TAGS\x01" + ("TagA" if n % 2 else "TagB") if backlog else ""
                state.store.append(MessageRecord(topic, b"m" * 64, queue_id=queue_id, properties=tags))
    consumers = tuple(
        ConsumerData(
            f"bench_cg_{g}",
            subscription_data_set=tuple(
                build_subscription(topics[(g * per_group + i) % len(topics)], "TagA" if backlog else "*")
                for i in range(per_group)
            ),
        )
        for g in range(groups)
    )
    beat = request(RequestCode.HEART_BEAT, body=HeartbeatData("bench@metrics", consumer_data_set=consumers).encode())
    answer = await client.invoke(cluster.broker_addr, beat, 30)
    assert answer.code == ResponseCode.SUCCESS, answer.remark
    if backlog:
        for data in consumers:
            for sub in data.subscription_data_set:
                for queue_id in range(QUEUES):
                    state.offsets.commit(data.group_name, sub.topic, queue_id, 0)
        return
    for data in consumers:
        for sub in data.subscription_data_set:
            for queue_id in range(QUEUES):
                fields = {
                    "consumerGroup": data.group_name, "topic": sub.topic, "queueId": str(queue_id),
                    "queueOffset": "0", "maxMsgNums": "32", "sysFlag": "4", "commitOffset": "0",
                    "suspendTimeoutMillis": "0", "subscription": "*", "subVersion": "0",
                }  # fmt: skip
                await client.invoke(cluster.broker_addr, request(RequestCode.PULL_MESSAGE, fields), 30)


async def scrape_bench(args: argparse.Namespace) -> None:
    with tempfile.TemporaryDirectory(prefix="bench-metrics-") as data:
        async with EmbeddedCluster(
            data,
            metrics_exporter_type="PROM",
            metrics_prom_exporter_port=0,
            mapped_file_size_commit_log=64 << 20,
            mapped_file_size_consume_queue=max(1000, args.tag_backlog) * 20,
        ) as cluster:
            topics = [f"BenchMetricsTopic{i}" for i in range(args.topics)]
            async with RemotingClient() as client:  # its connection keeps the groups online
                await _populate(cluster, client, topics, args.groups, args.per_group, args.tag_backlog)
                await _scrapes(cluster, args)


async def _scrapes(cluster: EmbeddedCluster, args: argparse.Namespace) -> None:
    exporter = cluster.controller.metrics
    assert exporter is not None and exporter.address is not None
    url = f"http://{exporter.address[0]}:{exporter.address[1]}/metrics"
    (broker_source, rpc_source) = exporter.sources
    wall, loop = [], []
    for n in range(args.scrapes):
        start = time.perf_counter()
        broker_source()  # the Trio-thread part of a scrape, timed alone
        rpc_source()
        loop.append((time.perf_counter() - start) * 1000)

        def get() -> bytes:
            with urllib.request.urlopen(url, timeout=60) as answer:
                return bytes(answer.read())

        start = time.perf_counter()
        text = await trio.to_thread.run_sync(get)
        wall.append((time.perf_counter() - start) * 1000)
        samples = sum(1 for line in text.splitlines() if line and not line.startswith(b"#"))
        emit({"bench": "metrics.scrape", "n": n, "scrape_ms": round(wall[-1], 1), "trio_thread_ms": round(loop[-1], 1),
              "bytes": len(text), "samples": samples})  # fmt: skip
    emit(
        {
            "bench": "metrics.scrape",
            "type": "summary",
            "topics": args.topics,
            "groups": args.groups,
            "topics_per_group": args.per_group,
            "tag_backlog": args.tag_backlog,
            "scrape_ms": _spread(wall),
            "trio_thread_ms": _spread(loop),
        }
    )


def _spread(values: list[float]) -> dict[str, float]:
    return {"min": round(min(values), 1), "median": round(statistics.median(values), 1), "max": round(max(values), 1)}


def _producer_run(tree: Path, properties: list[str], args: argparse.Namespace, out: Path) -> dict[str, Any]:
    argv = [sys.executable, "-m", "bench.load.producer", "--mode", "async", "--inflight", "256", "--size", "128",
            "--messages", str(args.messages), "--duration", "120", "--quiet", "--out", str(out)]  # fmt: skip
    for prop in properties:
        argv += ["--broker-property", prop]
    subprocess.run(argv, cwd=tree, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    summary = json.loads((out / "producer.json").read_text())
    ok, cpu = summary["result"]["ok"], summary["broker_cpu_seconds"]
    return {"ok": ok, "broker_cpu_us_per_msg": round(cpu / ok * 1e6, 2), "tps": summary["result"]["tps"]}


def cost_bench(args: argparse.Namespace) -> None:
    here = Path(__file__).resolve().parent.parent
    variants: dict[str, tuple[Path, list[str]]] = {}
    if args.base_tree:
        variants["base"] = (Path(args.base_tree), [])
    variants["off"] = (here, [])
    variants["prom"] = (here, ["metricsExporterType=PROM", "metricsPromExporterPort=0"])
    per_msg: dict[str, list[float]] = {name: [] for name in variants}
    with tempfile.TemporaryDirectory(prefix="bench-metrics-cost-") as tmp:
        for round_no in range(args.rounds):
            for name, (tree, properties) in variants.items():
                result = _producer_run(tree, properties, args, Path(tmp) / name)
                per_msg[name].append(result["broker_cpu_us_per_msg"])
                emit({"bench": "metrics.cost", "round": round_no, "variant": name, **result})
    first = next(iter(variants))
    ratios = {
        name: round(statistics.median(b / a for a, b in zip(per_msg[first], values, strict=True)), 3)
        for name, values in per_msg.items()
    }
    emit(
        {
            "bench": "metrics.cost",
            "type": "summary",
            "messages": args.messages,
            "rounds": args.rounds,
            "broker_cpu_us_per_msg": {n: {"min": min(v), "max": max(v)} for n, v in per_msg.items()},
            f"median_ratio_to_{first}": ratios,
        }
    )


#: Run with ``python -c`` in a tree's directory, so that tree's packages are the ones imported.
_PATH_WORKER = """
import json, sys, tempfile, time, trio, trio.testing
from pathlib import Path
from processors.pull import PullMessageProcessor
from processors.send import SendMessageProcessor
from remoting.connection import Connection
from tests.processors.conftest import PEER, open_broker, pull_request, send_request

async def main(sends, pulls):
    with tempfile.TemporaryDirectory() as tmp:
        broker = open_broker(Path(tmp), store_overrides={"mapped_file_size_commit_log": 256 << 20})
        left, _ = trio.testing.memory_stream_pair()
        ctx = Connection(left, PEER, ("127.0.0.1", 10911)).context
        send, pull = SendMessageProcessor(broker), PullMessageProcessor(broker)
        req = send_request(body=b"x" * 128)
        for _ in range(1000):
            await send.process(ctx, req)
        start = time.process_time()
        for _ in range(sends):
            await send.process(ctx, req)
        send_us = (time.process_time() - start) / sends * 1e6
        start = time.process_time()
        for i in range(pulls):
            await pull.process(ctx, pull_request(offset=(i * 32) % sends, sys_flag=0x4))
        pull_us = (time.process_time() - start) / pulls * 1e6
        broker.store.close()
    print(json.dumps({"send_us": round(send_us, 3), "pull_us": round(pull_us, 3)}))

trio.run(main, int(sys.argv[1]), int(sys.argv[2]))
"""


def path_bench(args: argparse.Namespace) -> None:
    here = Path(__file__).resolve().parent.parent
    trees = {"base": Path(args.base_tree)} if args.base_tree else {}
    trees["this"] = here
    results: dict[str, dict[str, list[float]]] = {name: {"send_us": [], "pull_us": []} for name in trees}
    for round_no in range(args.rounds):
        for name, tree in trees.items():
            argv = [sys.executable, "-c", _PATH_WORKER, str(args.sends), str(args.pulls)]
            line = subprocess.run(argv, cwd=tree, check=True, capture_output=True, text=True).stdout.strip()
            measured = json.loads(line.splitlines()[-1])
            for key, value in measured.items():
                results[name][key].append(value)
            emit({"bench": "metrics.path", "round": round_no, "tree": name, **measured})
    summary: dict[str, Any] = {"bench": "metrics.path", "type": "summary", "sends": args.sends, "pulls": args.pulls}
    for name, values in results.items():
        summary[name] = {key: {"min": min(v), "max": max(v)} for key, v in values.items()}
    if "base" in results:
        base, this = results["base"], results["this"]
        summary["median_ratio_to_base"] = {
            key: round(statistics.median(b / a for a, b in zip(base[key], this[key], strict=True)), 3)
            for key in ("send_us", "pull_us")
        }
    emit(summary)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="bench.metrics", description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="what", required=True)
    scrape = sub.add_parser("scrape", help="scrape time of /metrics")
    scrape.add_argument("--topics", type=int, default=1000)
    scrape.add_argument("--groups", type=int, default=100)
    scrape.add_argument("--per-group", type=int, default=10, help="topics each group subscribes to")
    scrape.add_argument("--scrapes", type=int, default=10)
    scrape.add_argument("--tag-backlog", type=int, default=0, help="messages per queue behind TagA groups")
    path = sub.add_parser("path", help="CPU per send and per pull in-process, this tree against --base-tree")
    path.add_argument("--rounds", type=int, default=7)
    path.add_argument("--sends", type=int, default=30_000)
    path.add_argument("--pulls", type=int, default=3_000)
    path.add_argument("--base-tree", help="a checkout of the commit to compare with (C extensions built or copied)")
    cost = sub.add_parser("cost", help="broker CPU per message with and without the statistics and /metrics")
    cost.add_argument("--rounds", type=int, default=5)
    cost.add_argument("--messages", type=int, default=40_000)
    cost.add_argument("--base-tree", help="a checkout of the commit to compare with (C extensions built or copied)")
    args = parser.parse_args(argv)
    if args.what == "scrape":
        trio.run(scrape_bench, args)
    elif args.what == "path":
        path_bench(args)
    else:
        cost_bench(args)


if __name__ == "__main__":
    os.environ.setdefault("PYTHONUNBUFFERED", "1")
    main()
