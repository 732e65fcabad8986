"""The example pipeline (examples/minute_counts.py): per-minute counts by tag, checked against the events sent."""

from __future__ import annotations

import datetime
import json
import os
import subprocess
import sys
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

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


@pytest.mark.timeout(300)
def test_the_example_without_a_checkpoint_counts_its_events_in_a_checkpoint_of_its_own(
    pyspark_ready: None, rocketmq: ThreadedCluster, tmp_path: Path
) -> None:
    """The example's README command as a real process. Its checkpoint defaulted to one fixed path, so a second run
    resumed the first one's query, whose watermark was already past the new events, and published nothing (or, against
    a fresh broker, failed on offsets the new topic does not hold). Without ``--checkpoint`` a run now starts a query
    in a new temporary directory of its own (``tempfile.mkdtemp``, under ``TMPDIR``), which it removes once the query
    has stopped cleanly, as Spark removes the temporary checkpoint it makes for a query without
    ``checkpointLocation``; each run used to leave its directory behind. ``--checkpoint DIR`` is kept, to resume.
    One run only: each starts a JVM."""
    ns = rocketmq.namesrv_addr
    root = Path(__file__).resolve().parents[2]
    env = {**os.environ, "PYTHONPATH": str(root), "SPARK_LOCAL_IP": "127.0.0.1", "PYSPARK_PYTHON": sys.executable}
    env["TMPDIR"] = str(tmp_path)  # where the run's own checkpoint goes
    make_topic(ns, "SparkExampleEvents", 1)
    make_topic(ns, "SparkExampleCounts", 1)
    command = [sys.executable, "examples/minute_counts.py", "--name-server", ns, "--source", "SparkExampleEvents"]
    command += ["--target", "SparkExampleCounts", "--demo-events", "30", "--once"]
    done = subprocess.run(command, cwd=root, env=env, check=True, capture_output=True, text=True, timeout=280)
    summary = json.loads(done.stdout.strip().splitlines()[-1])
    checkpoint = Path(summary["checkpoint"])
    assert checkpoint.parent == tmp_path and checkpoint.name.startswith("rocketrio-minute-counts-")
    assert summary["kept"] is False and not checkpoint.exists()
    assert summary["last_progress"]  # the query ran there: it made progress before its directory went
    assert sum(json.loads(msg.body)["count"] for msg in read_topic(ns, "SparkExampleCounts")) == 30
