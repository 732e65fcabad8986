"""The example pipeline (examples/minute_counts.py): per-minute counts by tag, checked against the events sent."""

from __future__ import annotations

import datetime
import json
from collections import Counter
from pathlib import Path
from typing import Any

from client import Message
from examples.minute_counts import start
from tests.spark.helpers import make_topic, produce, read_topic
from tests.threaded_cluster import ThreadedCluster

MINUTE = 60_000
BASE = 1_700_000_040_000  # a whole minute


def test_minute_counts_pipeline_publishes_each_closed_minute_once_with_its_counts(
    spark: Any, rocketmq: ThreadedCluster, tmp_path: Path
) -> None:
    ns = rocketmq.namesrv_addr
    make_topic(ns, "SparkEvents", 2)
    make_topic(ns, "SparkMinuteCounts", 1)
    events = [(BASE + (i % 3) * MINUTE + i * 7, ("click", "view")[i % 2]) for i in range(60)]
    produce(ns, [Message("SparkEvents", json.dumps({"ts": ts}).encode(), tags=tag) for ts, tag in events])
    produce(ns, [Message("SparkEvents", json.dumps({"ts": BASE + 10 * MINUTE}).encode(), tags="tick")])

    query = start(spark, ns, "SparkEvents", "SparkMinuteCounts", str(tmp_path / "checkpoint"))
    try:
        query.processAllAvailable()
    finally:
        query.stop()

    expected = Counter((ts // MINUTE * MINUTE, tag) for ts, tag in events)
    stored = read_topic(ns, "SparkMinuteCounts")
    got = {}
    for msg in stored:
        out = json.loads(msg.body)
        minute = int(datetime.datetime.fromisoformat(out["minute"]).timestamp() * 1000)
        assert msg.tags == out["tag"] and msg.keys == [f"{out['minute']}|{out['tag']}"]
        got[(minute, out["tag"])] = out["count"]
    assert len(stored) == len(got)  # one message per closed (minute, tag)
    assert got == dict(expected)  # the minute of the "tick" event is still open: not published
