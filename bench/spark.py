"""The ``rocketmq`` Spark data source: batch-read throughput beside the client's own consume rate, and streaming
micro-batch latency.

The embedded cluster runs in its own process (``python -m bench.spark serve``); Spark (``local[2]``) and the client
run in this one. One JSON object per line::

    {"bench": "spark", "op": "produce", "messages": N, "msgs_per_s": ...}
    {"bench": "spark", "op": "consume", "driver": "lite_pull", "messages": N, "rows_per_s": ...}
    {"bench": "spark", "op": "consume", "driver": "connector", "run": "cold"|"warm", "messages": N, "rows_per_s": ...}
    {"bench": "spark", "op": "consume_ratio", "connector_vs_client": ...}
    {"bench": "spark", "op": "stream_latency", "rounds": R, "p50_ms": ..., "max_ms": ..., "trigger_p50_ms": ...}

- ``lite_pull``: a :class:`~client.consumer.lite_pull.LitePullConsumer` assigned every queue, polling until it has
  all ``messages``; ``connector``: ``spark.read.format("rocketmq")`` over the same topic, every column materialised
  (``sum(length(body))`` plus a count over the Arrow batches), timed from the action's start, Spark's planning
  included; ``cold`` is the session's first action (JVM warm-up, Python workers starting), ``warm`` the same read
  again. ``consume_ratio`` = warm connector / client rows per second, within one run. Every line carries ``at_s``,
  seconds since the start.
- ``stream_latency``: a streaming query (default trigger, a ``foreachBatch`` sink in this process) is running; a
  message is sent and the time until its batch reaches the sink is measured, ``rounds`` times.
  ``trigger_p50_ms`` is the median ``triggerExecution`` of the batches that carried a row.

``--messages 1000000`` is the full-size run; the default is smaller so a run takes seconds. ``--profile`` re-runs
under ``py-spy record --subprocesses`` (Spark's Python workers included) into ``bench/results/spark.svg``.
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
import threading
import time
from pathlib import Path
from typing import Any, Final

import trio

from bench.profiling import py_spy
from client import Message
from client.sync import Admin, LitePullConsumer, Producer

QUEUES: Final = 4
BODY: Final = b"x" * 100
TOPIC: Final = "BenchSpark"
LATENCY_TOPIC: Final = "BenchSparkLatency"


_STARTED = time.perf_counter()


def emit(record: dict[str, object]) -> None:
    print(json.dumps({**record, "at_s": round(time.perf_counter() - _STARTED, 1)}), flush=True)


async def serve_cluster(data_dir: str) -> None:
    from broker.embedded import EmbeddedCluster

    overrides = {"mapped_file_size_commit_log": 512 << 20, "mapped_file_size_consume_queue": 300_000 * 20}
    async with EmbeddedCluster(data_dir, **overrides) as cluster:
        print(cluster.namesrv_addr, cluster.broker_addr, flush=True)
        await trio.sleep_forever()


def start_cluster(data_dir: str) -> tuple[subprocess.Popen[str], str]:
    proc = subprocess.Popen(
        [sys.executable, "-m", "bench.spark", "serve", "--data", data_dir], stdout=subprocess.PIPE, text=True
    )
    assert proc.stdout is not None
    namesrv, _ = proc.stdout.readline().split()
    return proc, namesrv


def create_topic(namesrv: str, topic: str) -> None:
    with Admin(namesrv) as admin:
        admin.create_topic(topic, read_queue_nums=QUEUES, write_queue_nums=QUEUES)
        for _ in range(500):  # the broker registers new topics with the name server asynchronously
            with contextlib.suppress(Exception):
                admin.topic_route(topic)
                return
            time.sleep(0.02)


def produce(namesrv: str, messages: int) -> None:
    started = time.perf_counter()
    with Producer("bench-spark-pg", namesrv) as producer:
        chunk = [Message(TOPIC, BODY, tags="T") for _ in range(512)]
        for sent in range(0, messages, len(chunk)):
            producer.send_batch(chunk[: min(len(chunk), messages - sent)])
    elapsed = time.perf_counter() - started
    emit({"bench": "spark", "op": "produce", "messages": messages, "msgs_per_s": round(messages / elapsed)})


def consume_lite_pull(namesrv: str, messages: int) -> float:
    with LitePullConsumer("bench-spark-lite", namesrv, pull_batch_size=32) as consumer:
        started = time.perf_counter()
        consumer.assign(consumer.fetch_message_queues(TOPIC))
        got = 0
        while got < messages:
            got += len(consumer.poll(timeout=5.0))
        elapsed = time.perf_counter() - started
    rate = messages / elapsed
    emit({"bench": "spark", "op": "consume", "driver": "lite_pull", "messages": messages, "rows_per_s": round(rate)})
    return rate


def consume_connector(spark: Any, namesrv: str, messages: int, run: str) -> float:
    df = spark.read.format("rocketmq").option("nameServer", namesrv).option("topic", TOPIC).load()
    started = time.perf_counter()
    row = df.selectExpr("count(*) AS n", "sum(length(body)) AS bytes", "max(length(msg_id)) AS id").collect()[0]
    elapsed = time.perf_counter() - started
    assert row.n == messages, (row.n, messages)
    rate = messages / elapsed
    emit({"bench": "spark", "op": "consume", "driver": "connector", "run": run, "messages": messages,
          "rows_per_s": round(rate)})  # fmt: skip
    return rate


def stream_latency(spark: Any, namesrv: str, rounds: int, checkpoint: str) -> None:
    create_topic(namesrv, LATENCY_TOPIC)
    arrived: dict[bytes, float] = {}
    seen = threading.Condition()

    def sink(df: Any, batch_id: int) -> None:
        bodies = [bytes(r.body) for r in df.select("body").collect()]
        now = time.perf_counter()
        with seen:
            for body in bodies:
                arrived[body] = now
            seen.notify_all()

    query = (
        spark.readStream.format("rocketmq")
        .option("nameServer", namesrv)
        .option("topic", LATENCY_TOPIC)
        .option("startingOffsets", "earliest")  # a fresh topic: the warm-up message is read whenever the query starts
        .load()
        .writeStream.foreachBatch(sink)
        .option("checkpointLocation", checkpoint)
        .start()
    )
    latencies: list[float] = []
    try:
        with Producer("bench-spark-latency", namesrv) as producer:
            producer.send(Message(LATENCY_TOPIC, b"warm-up"))
            with seen:
                seen.wait_for(lambda: b"warm-up" in arrived, timeout=120)
            for i in range(rounds):
                body = f"r{i}".encode()
                sent = time.perf_counter()
                producer.send(Message(LATENCY_TOPIC, body))
                with seen:
                    if not seen.wait_for(lambda b=body: b in arrived, timeout=120):  # type: ignore[misc]
                        raise TimeoutError(f"round {i}: the message never reached the sink")
                latencies.append((arrived[body] - sent) * 1000)
        triggers = [p["durationMs"]["triggerExecution"] for p in query.recentProgress if p["numInputRows"] > 0]
    finally:
        query.stop()
    emit(
        {
            "bench": "spark",
            "op": "stream_latency",
            "rounds": rounds,
            "p50_ms": round(statistics.median(latencies), 1),
            "max_ms": round(max(latencies), 1),
            "trigger_p50_ms": statistics.median(triggers) if triggers else None,
        }
    )


def measure(messages: int, rounds: int) -> None:
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    from pyspark.sql import SparkSession

    from spark import register

    data_dir = tempfile.mkdtemp(prefix="bench-spark-")
    proc, namesrv = start_cluster(data_dir)
    spark = None
    try:
        create_topic(namesrv, TOPIC)
        produce(namesrv, messages)
        client_rate = consume_lite_pull(namesrv, messages)
        spark = (
            SparkSession.builder.master("local[2]")
            .appName("bench-spark")
            .config("spark.ui.enabled", "false")
            .config("spark.sql.shuffle.partitions", "2")
            .getOrCreate()
        )
        spark.sparkContext.setLogLevel("ERROR")
        register(spark)
        consume_connector(spark, namesrv, messages, "cold")  # JVM JIT and Python workers start here
        connector_rate = consume_connector(spark, namesrv, messages, "warm")
        emit({"bench": "spark", "op": "consume_ratio", "connector_vs_client": round(connector_rate / client_rate, 2)})
        stream_latency(spark, namesrv, rounds, os.path.join(data_dir, "checkpoint"))
    finally:
        if spark is not None:
            spark.stop()
        proc.terminate()
        proc.wait()
        shutil.rmtree(data_dir, ignore_errors=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0] if __doc__ else None)
    parser.add_argument("mode", nargs="?", default="measure", choices=["measure", "serve"])
    parser.add_argument("--data", help="serve: the data directory")
    parser.add_argument("--messages", type=int, default=100_000, help="messages in the batch-read topic")
    parser.add_argument("--rounds", type=int, default=10, help="streaming latency samples")
    parser.add_argument("--profile", action="store_true", help="re-run under py-spy, writing bench/results/spark.svg")
    args = parser.parse_args()
    if args.mode == "serve":
        with contextlib.suppress(KeyboardInterrupt):
            trio.run(serve_cluster, args.data)
        return
    measure(args.messages, args.rounds)
    if args.profile:
        Path("bench/results").mkdir(parents=True, exist_ok=True)
        argv = [sys.executable, "-m", "bench.spark", "--messages", str(args.messages), "--rounds", str(args.rounds)]
        cmd = [py_spy(), "record", "--subprocesses", "-o", "bench/results/spark.svg", "--", *argv]
        subprocess.run(cmd, check=True)


if __name__ == "__main__":
    main()
