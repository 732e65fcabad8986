"""Batch reads: a range of queue offsets, read through Spark with the declared schema and exact contents."""

from __future__ import annotations

import datetime
import json
from typing import Any

import anyio
import pytest

from client import Message
from tests.client.helpers import fill_queues
from tests.spark.helpers import make_topic, on_two_masters, produce, read_topic
from tests.threaded_cluster import ThreadedCluster

SCHEMA = (
    "struct<topic:string,broker_name:string,queue_id:int,queue_offset:bigint,msg_id:string,keys:string,tags:string,body:binary,"
    "properties:map<string,string>,born_timestamp:timestamp,store_timestamp:timestamp,born_host:string,"
    "store_host:string,reconsume_times:int>"
)


def _load(spark: Any, namesrv: str, topic: str, **options: str) -> Any:
    reader = spark.read.format("rocketmq").option("nameServer", namesrv).option("topic", topic)
    for name, value in options.items():
        reader = reader.option(name, value)
    return reader.load()


def test_batch_read_of_an_offset_range_returns_exactly_those_messages(spark: Any, rocketmq: ThreadedCluster) -> None:
    ns = rocketmq.namesrv_addr
    make_topic(ns, "SparkBatchRange", 2)
    produce(
        ns,
        [
            Message(
                "SparkBatchRange",
                f"m{i}".encode(),
                tags="even" if i % 2 == 0 else "odd",
                keys=f"k{i}",
                properties={"n": str(i)},
            )
            for i in range(40)
        ],
    )
    df = _load(
        spark,
        ns,
        "SparkBatchRange",
        startingOffsets='{"SparkBatchRange": {"0": 5, "1": 2}}',
        endingOffsets='{"SparkBatchRange": {"0": 15}}',
    )
    assert df.schema.simpleString() == SCHEMA
    rows = df.orderBy("queue_id", "queue_offset").collect()
    per_queue: dict[int, list[int]] = {}
    for row in rows:
        per_queue.setdefault(row.queue_id, []).append(row.queue_offset)
    assert per_queue[0] == list(range(5, 15))
    assert per_queue[1] == list(range(2, 20))  # queue 1 left out of endingOffsets: read to its end
    first = rows[0]
    n = int(first.properties["n"])
    assert first.body == f"m{n}".encode()
    assert first.keys == f"k{n}"
    assert first.tags == ("even" if n % 2 == 0 else "odd")
    assert first.topic == "SparkBatchRange"
    assert {r.broker_name for r in rows} == {rocketmq.cluster.broker_config().broker_name}  # "broker-a"
    assert first.msg_id and first.born_host and first.store_host.endswith(rocketmq.broker_addr.rpartition(":")[2])
    assert first.store_timestamp >= first.born_timestamp
    assert first.reconsume_times == 0
    assert len({r.msg_id for r in rows}) == len(rows)


def test_a_read_of_a_topic_on_two_masters_names_each_rows_broker(spark: Any, rocketmq: ThreadedCluster) -> None:
    """A topic's queue ids repeat on every master and the offsets JSON keys queues as ``brokerName:queueId``: without
    ``broker_name`` a row's (topic, queue_id, queue_offset) named a message on each master, and a row could not be
    mapped to its queue in ``startingOffsets``. rocketmq-spark's schema has ``brokerName`` beside ``queueId`` too."""
    ns, topic = rocketmq.namesrv_addr, "SparkTwoMasters"
    with on_two_masters(rocketmq, topic):
        anyio.run(fill_queues, ns, topic, 2)  # bodies "<broker>-<queue id>-<i>"
        starting = json.dumps({topic: {"broker-b:0": 1}})
        rows = _load(spark, ns, topic, startingOffsets=starting).collect()
    assert sorted((r.broker_name, r.queue_id, r.queue_offset, bytes(r.body)) for r in rows) == [
        ("broker-a", 0, 0, b"broker-a-0-0"),
        ("broker-a", 0, 1, b"broker-a-0-1"),
        ("broker-b", 0, 1, b"broker-b-0-1"),
    ]


def test_batch_read_with_a_tag_expression_keeps_only_matching_messages(spark: Any, rocketmq: ThreadedCluster) -> None:
    ns = rocketmq.namesrv_addr
    make_topic(ns, "SparkBatchTags", 1)
    produce(ns, [Message("SparkBatchTags", f"t{i}".encode(), tags=("A", "B", "C")[i % 3]) for i in range(30)])
    rows = _load(spark, ns, "SparkBatchTags", tags="A || C").orderBy("queue_offset").collect()
    assert [r.body for r in rows] == [f"t{i}".encode() for i in range(30) if i % 3 != 1]


@pytest.mark.parametrize(
    ("option", "value", "message"),
    [
        ("startingOffsets", "yesterday", "startingOffsets"),
        ("endingOffsets", '{"SparkBad": {"x": 1}}', "queue key"),
        ("maxRecordsPerTrigger", "-3", "maxRecordsPerTrigger"),
    ],
)
def test_a_bad_option_fails_at_planning_with_a_clear_message(
    spark: Any, rocketmq: ThreadedCluster, option: str, value: str, message: str
) -> None:
    with pytest.raises(Exception, match=message):
        _load(spark, rocketmq.namesrv_addr, "SparkBad", **{option: value}).collect()


def test_batch_read_from_a_timestamp_starts_at_the_first_message_stored_at_or_after_it(
    spark: Any, rocketmq: ThreadedCluster
) -> None:
    ns = rocketmq.namesrv_addr
    make_topic(ns, "SparkBatchTime", 2)
    produce(ns, [Message("SparkBatchTime", f"e{i}".encode()) for i in range(10)])
    produce(ns, [Message("SparkBatchTime", f"l{i}".encode()) for i in range(10)])
    stored = read_topic(ns, "SparkBatchTime")
    moment = sorted(m.store_timestamp for m in stored)[len(stored) // 2]
    iso = datetime.datetime.fromtimestamp(moment / 1000, tz=datetime.UTC).isoformat()
    for start in (str(moment), iso):
        rows = _load(spark, ns, "SparkBatchTime", startingOffsets=start).collect()
        assert sorted(bytes(r.body) for r in rows) == sorted(m.body for m in stored if m.store_timestamp >= moment)


def test_batch_read_of_a_topic_list_reads_every_topic(spark: Any, rocketmq: ThreadedCluster) -> None:
    ns = rocketmq.namesrv_addr
    for topic in ("SparkListA", "SparkListB"):
        make_topic(ns, topic, 1)
        produce(ns, [Message(topic, f"{topic}-{i}".encode()) for i in range(3)])
    rows = _load(spark, ns, " SparkListA, SparkListB").collect()
    assert sorted((r.topic, bytes(r.body)) for r in rows) == sorted(
        (t, f"{t}-{i}".encode()) for t in ("SparkListA", "SparkListB") for i in range(3)
    )


def test_batch_read_of_an_empty_topic_returns_no_rows(spark: Any, rocketmq: ThreadedCluster) -> None:
    """Nothing to read plans no range, and PySpark then hands the reader one empty partition of its own: it used to
    fail the read (an assertion) instead of returning no rows; the same from ``latest``."""
    ns = rocketmq.namesrv_addr
    make_topic(ns, "SparkReviewEmpty", 2)
    df = spark.read.format("rocketmq").option("nameServer", ns).option("topic", "SparkReviewEmpty").load()
    assert df.count() == 0


def test_batch_read_from_latest_returns_no_rows(spark: Any, rocketmq: ThreadedCluster) -> None:
    ns = rocketmq.namesrv_addr
    make_topic(ns, "SparkReviewLatest", 2)
    produce(ns, [Message("SparkReviewLatest", b"x")])
    df = (
        spark.read.format("rocketmq")
        .option("nameServer", ns)
        .option("topic", "SparkReviewLatest")
        .option("startingOffsets", "latest")
        .load()
    )
    assert df.collect() == []
