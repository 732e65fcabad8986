"""Per-minute event counts by tag: a streaming pipeline from one rocketrio topic to another through Spark.

Input: messages whose body is a JSON event ``{"ts": <epoch ms>, ...}`` and whose RocketMQ tag is the event's kind.
Output: one message per (minute, tag) once the minute is complete (the watermark passed it), body
``{"minute": "2024-01-01T10:00:00Z", "tag": "click", "count": 42}``, tag = the event tag, key = ``minute|tag``.
Events without a parsable ``ts`` are counted at their store time. The output is exactly once: a restart from the
checkpoint republishes nothing.

Run it against the embedded broker (``make run`` in another terminal)::

    python examples/minute_counts.py --name-server 127.0.0.1:9876 --demo-events 1000 --once

``--demo-events N`` first sends N sample events spread over five minutes (plus one late event that closes them);
``--once`` stops when everything available is processed, otherwise the query runs until Ctrl-C. Without
``--checkpoint`` each run starts a new query in a temporary checkpoint directory, removed once the query has stopped
cleanly and kept (its path printed) when it failed, as Spark does with the temporary checkpoint it makes for a query
without ``checkpointLocation``. ``--checkpoint DIR`` keeps the query's offsets and state in DIR: a later run with the
same DIR resumes that query, publishing nothing twice.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import sys
import tempfile
import time
from typing import Any

EVENT_SCHEMA = "ts BIGINT"


def minute_counts(events: Any, watermark: str = "1 minute") -> Any:
    """``events`` is a ``rocketmq`` read; returns the sink's columns (body, keys, tags) of the per-minute counts."""
    from pyspark.sql import functions as F

    parsed = events.select(
        F.from_json(F.col("body").cast("string"), EVENT_SCHEMA).alias("e"), "tags", "store_timestamp"
    )
    stamped = parsed.select(
        F.coalesce(F.timestamp_millis(F.col("e.ts")), F.col("store_timestamp")).alias("event_time"),
        F.coalesce(F.col("tags"), F.lit("")).alias("tag"),
    )
    counts = (
        stamped.withWatermark("event_time", watermark)
        .groupBy(F.window("event_time", "1 minute").alias("w"), "tag")
        .count()
    )
    minute = F.date_format(F.col("w.start"), "yyyy-MM-dd'T'HH:mm:ss'Z'")
    return counts.select(
        F.to_json(F.struct(minute.alias("minute"), F.col("tag"), F.col("count"))).alias("body"),
        F.concat_ws("|", minute, F.col("tag")).alias("keys"),
        F.col("tag").alias("tags"),
    )


def start(spark: Any, name_server: str, source: str, target: str, checkpoint: str, watermark: str = "1 minute") -> Any:
    """Start the pipeline; returns the StreamingQuery. The ``rocketmq`` format must be registered."""
    events = (
        spark.readStream.format("rocketmq")
        .option("nameServer", name_server)
        .option("topic", source)
        .option("startingOffsets", "earliest")
        .load()
    )
    return (
        minute_counts(events, watermark)
        .writeStream.format("rocketmq")
        .outputMode("append")
        .option("nameServer", name_server)
        .option("topic", target)
        .option("checkpointLocation", checkpoint)
        .queryName("minute_counts")
        .start()
    )


def send_demo_events(name_server: str, topic: str, count: int) -> None:
    """``count`` events over the five minutes before now, tags click/view/buy, then one event 10 minutes later that
    moves the watermark past them all."""
    from client import Message
    from client.sync import Producer

    now = int(time.time() * 1000) // 60_000 * 60_000
    with Producer("minute-counts-demo", name_server) as producer:
        for i in range(count):
            ts = now - 300_000 + random.randrange(300_000)
            tag = random.choice(["click", "view", "buy"])
            producer.send(Message(topic, json.dumps({"ts": ts, "n": i}).encode(), tags=tag))
        producer.send(Message(topic, json.dumps({"ts": now + 600_000}).encode(), tags="tick"))


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--name-server", default="127.0.0.1:9876")
    parser.add_argument("--source", default="Events")
    parser.add_argument("--target", default="MinuteCounts")
    parser.add_argument(
        "--checkpoint", default=None, help="checkpoint directory, kept to resume from (default: a temporary one)"
    )
    parser.add_argument("--watermark", default="1 minute")
    parser.add_argument("--demo-events", type=int, default=0, help="send N sample events first")
    parser.add_argument("--once", action="store_true", help="stop once everything available is processed")
    args = parser.parse_args(argv)

    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    from pyspark.sql import SparkSession

    from spark import register

    if args.demo_events:
        send_demo_events(args.name_server, args.source, args.demo_events)
    spark = (
        SparkSession.builder.master("local[2]")
        .appName("minute-counts")
        .config("spark.sql.shuffle.partitions", "2")
        .config("spark.sql.session.timeZone", "UTC")
        .getOrCreate()
    )
    register(spark)
    # A fixed default made every run resume the previous one's query: its watermark and offsets, whatever the topics
    # or the broker now hold. A run without --checkpoint runs a query of its own in a temporary directory.
    temporary = args.checkpoint is None
    checkpoint = args.checkpoint or tempfile.mkdtemp(prefix="rocketrio-minute-counts-")
    query = start(spark, args.name_server, args.source, args.target, checkpoint, args.watermark)
    failed = True
    try:
        if args.once:
            query.processAllAvailable()
        else:
            query.awaitTermination()
        failed = False
    except KeyboardInterrupt:
        failed = False
    finally:
        query.stop()
        progress = query.lastProgress
        spark.stop()
        if failed and temporary:
            print(f"the query failed; its checkpoint is kept in {checkpoint}", file=sys.stderr)
    kept = not temporary
    if temporary:
        shutil.rmtree(checkpoint, ignore_errors=True)
    summary = {"query": "minute_counts", "checkpoint": checkpoint, "kept": kept, "last_progress": progress}
    print(json.dumps(summary, default=str))


if __name__ == "__main__":
    main()
