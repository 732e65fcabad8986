"""Streaming and batch writes: rows become messages; a micro-batch replayed after a failed commit publishes nothing
twice."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from client import Message
from client.message import uniq_msg_id
from remoting.codec.message_properties import decode_properties, encode_properties
from spark.writer import row_to_message
from tests.spark.helpers import make_topic, produce, read_topic
from tests.threaded_cluster import ThreadedCluster


def _copy(spark: Any, ns: str, source: str, sink_format: str, target: str, checkpoint: Path, **sink: str) -> None:
    writer = (
        spark.readStream.format("rocketmq")
        .option("nameServer", ns)
        .option("topic", source)
        .option("startingOffsets", "earliest")
        .load()
        .selectExpr("body", "tags", "keys", "map('src', concat(queue_id, ':', queue_offset)) AS properties")
        .writeStream.format(sink_format)
        .option("nameServer", ns)
        .option("topic", target)
        .option("checkpointLocation", str(checkpoint))
    )
    for name, value in sink.items():
        writer = writer.option(name, value)
    query = writer.start()
    try:
        query.processAllAvailable()
    finally:
        query.stop()


def test_stream_write_replayed_after_a_failed_commit_publishes_no_duplicates(
    spark: Any, rocketmq: ThreadedCluster, tmp_path: Path
) -> None:
    ns = rocketmq.namesrv_addr
    make_topic(ns, "SparkWriteSrc", 2)
    make_topic(ns, "SparkWriteDst", 2)
    from tests.spark.flaky import FailOnceCommitSource  # imports pyspark: only once the spark fixture ran

    spark.dataSource.register(FailOnceCommitSource)
    produce(ns, [Message("SparkWriteSrc", f"w{i}".encode(), tags="T", keys=f"key{i}") for i in range(20)])
    checkpoint, flag = tmp_path / "checkpoint", tmp_path / "commit-failed"

    with pytest.raises(Exception, match="injected failure committing batch 0"):
        _copy(spark, ns, "SparkWriteSrc", "rocketmq_fail_once_commit", "SparkWriteDst", checkpoint, failFlag=str(flag))
    assert len(read_topic(ns, "SparkWriteDst")) == 20  # the tasks had published before the commit failed

    produce(ns, [Message("SparkWriteSrc", f"x{i}".encode(), tags="T") for i in range(5)])
    _copy(spark, ns, "SparkWriteSrc", "rocketmq_fail_once_commit", "SparkWriteDst", checkpoint, failFlag=str(flag))

    stored = read_topic(ns, "SparkWriteDst")
    bodies = sorted(m.body for m in stored)
    assert bodies == sorted([f"w{i}".encode() for i in range(20)] + [f"x{i}".encode() for i in range(5)])
    one = next(m for m in stored if m.body == b"w7")
    assert one.tags == "T" and one.keys == ["key7"] and one.properties["src"].count(":") == 1


def test_batch_write_sends_every_row_with_its_topic_tags_keys_and_properties(
    spark: Any, rocketmq: ThreadedCluster
) -> None:
    ns = rocketmq.namesrv_addr
    make_topic(ns, "SparkBatchWriteA", 2)
    make_topic(ns, "SparkBatchWriteB", 1)
    rows = [
        ("SparkBatchWriteA" if i % 3 else "SparkBatchWriteB", f"r{i}", f"tag{i % 2}", [f"k{i}", "all"])
        for i in range(30)
    ]
    df = spark.createDataFrame(rows, "topic string, body string, tags string, keys array<string>")
    df = df.selectExpr("*", "map('i', body) AS properties", "CAST(substr(body, 2) AS INT) AS flag")
    df.write.format("rocketmq").option("nameServer", ns).mode("append").save()
    a, b = read_topic(ns, "SparkBatchWriteA"), read_topic(ns, "SparkBatchWriteB")
    assert sorted(m.body for m in a) == sorted(f"r{i}".encode() for i in range(30) if i % 3)
    assert sorted(m.body for m in b) == sorted(f"r{i}".encode() for i in range(30) if not i % 3)
    for m in a + b:
        i = int(m.body[1:])
        assert (m.tags, m.keys, m.properties["i"]) == (f"tag{i % 2}", [f"k{i}", "all"], f"r{i}")
        assert m.flag == i  # the flag column a read has, so a copied row keeps its flag


def test_a_flag_column_of_python_ints_is_written_within_javas_int(spark: Any, rocketmq: ThreadedCluster) -> None:
    """Python ints make a ``bigint`` column: a write took only ``int`` flags and refused such a DataFrame at planning
    (found by a read-only review). Any integer column is taken; a row's flag outside Java's int fails the write."""
    ns, topic = rocketmq.namesrv_addr, "SparkFlagBigint"
    make_topic(ns, topic, 1)
    df = spark.createDataFrame([(b"f1", 1), (b"f2", 2**31 - 1)], ["body", "flag"])
    assert df.schema["flag"].dataType.simpleString() == "bigint"
    df.write.format("rocketmq").option("nameServer", ns).option("topic", topic).mode("append").save()
    assert sorted((m.body, m.flag) for m in read_topic(ns, topic)) == [(b"f1", 1), (b"f2", 2**31 - 1)]
    too_big = spark.createDataFrame([(b"f3", 2**31)], ["body", "flag"])
    with pytest.raises(Exception, match="outside Java's int"):
        too_big.write.format("rocketmq").option("nameServer", ns).option("topic", topic).mode("append").save()


def test_a_null_property_value_is_not_written_as_the_string_none(spark: Any, rocketmq: ThreadedCluster) -> None:
    """A null value in the properties map is no property (it was stored as the text "None")."""
    ns, topic = rocketmq.namesrv_addr, "SparkReviewNullProp"
    make_topic(ns, topic, 1)
    df = spark.createDataFrame([("x",)], "body string").selectExpr(
        "body", "map('set', 'v', 'unset', CAST(NULL AS STRING)) AS properties"
    )
    df.write.format("rocketmq").option("nameServer", ns).option("topic", topic).mode("append").save()
    (msg,) = read_topic(ns, topic)
    assert msg.properties["set"] == "v"
    assert "unset" not in msg.properties


def test_an_empty_property_value_is_left_out_as_a_message_cannot_carry_it() -> None:
    """``name\\x01`` with nothing after it is no property to Java's ``MessageDecoder.string2messageProperties`` (nor to
    ours, so a read never shows it) and Java's ``putUserProperty`` refuses a blank value: the sink used to send it
    anyway, bytes every reader drops. It is now left out, as a null value is; a value of spaces is carried."""
    row = {"topic": "T", "body": b"x", "properties": {"empty": "", "spaces": " ", "set": "v"}}
    msg = row_to_message(row, None)
    assert msg.properties == {"spaces": " ", "set": "v"}
    assert decode_properties(encode_properties(msg.properties)) == msg.properties


def test_the_topic_option_overrides_the_topic_column_of_the_rows(spark: Any, rocketmq: ThreadedCluster) -> None:
    """Rows read from ``rocketmq`` carry a ``topic`` column (their source); written with the ``topic`` option they go to
    the option's topic, as in Kafka's sink and rocketmq-spark (``RocketMQWriteTask``: ``topic.map(Literal(_))
    .orElse(column)``). The row's topic used to win: a read -> write copy doubled its source."""
    ns = rocketmq.namesrv_addr
    make_topic(ns, "SparkCopySrc", 1)
    make_topic(ns, "SparkCopyDst", 1)
    produce(ns, [Message("SparkCopySrc", f"c{i}".encode()) for i in range(3)])
    rows = spark.read.format("rocketmq").option("nameServer", ns).option("topic", "SparkCopySrc").load()
    rows.write.format("rocketmq").option("nameServer", ns).option("topic", "SparkCopyDst").mode("append").save()
    assert sorted(m.body for m in read_topic(ns, "SparkCopyDst")) == [b"c0", b"c1", b"c2"]
    assert len(read_topic(ns, "SparkCopySrc")) == 3


@pytest.mark.parametrize(
    ("topic", "columns", "row", "named"),
    [
        ("SparkIntBody", "body int", (3,), "column body"),
        ("SparkIntKeys", "body string, keys int", ("x", 3), "column keys"),
    ],
)
def test_a_column_of_a_type_the_sink_cannot_send_fails_the_write_at_planning(
    spark: Any, rocketmq: ThreadedCluster, topic: str, columns: str, row: tuple[Any, ...], named: str
) -> None:
    """An ``int`` body was sent as ``bytes(3)``, three zero bytes. Like rocketmq-spark and Kafka's sink
    (``createProjection`` checks each column's type), a column of a type other than :data:`spark.writer.COLUMN_TYPES`
    allows fails the write before any row is sent, naming the column."""
    ns = rocketmq.namesrv_addr
    make_topic(ns, topic, 1)
    df = spark.createDataFrame([row], columns)
    with pytest.raises(Exception, match=named):
        df.write.format("rocketmq").option("nameServer", ns).option("topic", topic).mode("append").save()
    assert read_topic(ns, topic) == []


def test_a_batch_write_in_overwrite_mode_fails_instead_of_appending(spark: Any, rocketmq: ThreadedCluster) -> None:
    """A topic cannot be truncated: rocketmq-spark refuses ``SaveMode.Overwrite`` (``RocketMQSourceProvider
    .createRelation``: "Save mode Overwrite not allowed for RocketMQ"), as Kafka's sink does. ``mode("overwrite")``
    used to append the rows beside the ones it was asked to replace, and report success."""
    ns, topic = rocketmq.namesrv_addr, "SparkOverwriteMode"
    make_topic(ns, topic, 1)
    produce(ns, [Message(topic, b"kept")])
    df = spark.createDataFrame([("new",)], "body string")
    with pytest.raises(Exception, match="cannot overwrite"):
        df.write.format("rocketmq").option("nameServer", ns).option("topic", topic).mode("overwrite").save()
    assert [m.body for m in read_topic(ns, topic)] == [b"kept"]


def test_a_copied_rows_system_properties_are_not_sent_as_its_own(spark: Any, rocketmq: ThreadedCluster) -> None:
    """A read's ``properties`` column holds every stored property, RocketMQ's own too (``UNIQ_KEY``, ``TAGS``,
    ``KEYS``, ``CLUSTER``, ``TRAN_MSG`` of a committed transactional message...). Written back, the copies carried the
    source's ``UNIQ_KEY``: every copy of a message had its msgId, and two copies had the same one. Java's
    ``Message.putUserProperty`` refuses these names (``MessageConst.STRING_HASH_SET``): a copy gets its own msgId,
    its tags and keys from its columns, and keeps the user properties."""
    ns = rocketmq.namesrv_addr
    make_topic(ns, "SparkSysPropSrc", 1)
    make_topic(ns, "SparkSysPropDst", 1)
    produce(ns, [Message("SparkSysPropSrc", b"c", tags="T", keys="k", properties={"user": "u"})])
    (source,) = read_topic(ns, "SparkSysPropSrc")
    rows = spark.read.format("rocketmq").option("nameServer", ns).option("topic", "SparkSysPropSrc").load()
    for _ in range(2):
        rows.drop("keys").write.format("rocketmq").option("nameServer", ns).option("topic", "SparkSysPropDst").mode(
            "append"
        ).save()
    copies = read_topic(ns, "SparkSysPropDst")
    ids = {uniq_msg_id(m) for m in copies}
    assert len(copies) == len(ids) == 2 and uniq_msg_id(source) not in ids
    for copy in copies:
        assert (copy.body, copy.tags, copy.keys, copy.properties["user"]) == (b"c", "T", [], "u")


def test_an_aborted_batch_write_says_its_finished_tasks_rows_stay_published(
    pyspark_ready: None, caplog: pytest.LogCaptureFixture
) -> None:
    """A batch write whose job fails has its finished tasks' rows stored already (a topic cannot take them back), and
    a rerun of the job sends them again: the batch sink is at least once. Its ``abort`` said nothing (PySpark's
    default does nothing), so the job's failure read as if nothing had been written; like the streaming sink's it now
    warns how many rows stay published."""
    import logging

    from spark.options import SourceOptions
    from spark.writer import RocketMQBatchWriter, WriteCommit

    writer = RocketMQBatchWriter(SourceOptions.parse({"nameServer": "127.0.0.1:9876", "topic": "SparkAborted"}))
    with caplog.at_level(logging.WARNING, logger="spark"):
        writer.abort([WriteCommit(0, 7), None, WriteCommit(2, 5)])
    assert [r.getMessage() for r in caplog.records] == [
        "batch write to SparkAborted aborted: the 12 rows its 2 finished tasks sent stay published, and any its failed "
        "tasks sent before failing; running the write again sends them again (a batch write is at least once)"
    ]


def test_a_batch_write_to_a_broker_with_a_smaller_max_message_size_sends_every_row(spark: Any, tmp_path: Path) -> None:
    """The sink sends its rows in batches of up to 4 MiB (the producer's ``maxMessageSize``), but a broker checks a
    batch's whole body against its own ``maxMessageSize`` (``store/.../DefaultMessageStore.java`` ``checkMessages``:
    MESSAGE_ILLEGAL, nothing stored): on a broker set below 4 MiB every write of more than its limit failed, though
    each row fits, and rocketmq-spark, sending row by row, writes them. A refused batch of several rows is now sent
    in smaller batches; a single row the broker refuses still fails the write."""
    from tests.threaded_cluster import ThreadedCluster

    with ThreadedCluster(tmp_path / "cluster", max_message_size=64 << 10) as cluster:
        ns, topic = cluster.namesrv_addr, "SparkSmallBrokerLimit"
        make_topic(ns, topic, 2)
        df = spark.createDataFrame([(f"{i:04d}".encode() * 256,) for i in range(300)], "body binary")
        df.write.format("rocketmq").option("nameServer", ns).option("topic", topic).mode("append").save()
        stored = read_topic(ns, topic)
        assert sorted(m.body for m in stored) == sorted(f"{i:04d}".encode() * 256 for i in range(300))

        too_big = spark.createDataFrame([(b"x" * (65 << 10),)], "body binary")
        with pytest.raises(Exception, match="msg body length limit 65536B"):
            too_big.write.format("rocketmq").option("nameServer", ns).option("topic", topic).mode("append").save()


@pytest.mark.parametrize("topic", ["SCHEDULE_TOPIC_XXXX", "RMQ_SYS_TRANS_HALF_TOPIC", "OFFSET_MOVED_EVENT"])
def test_a_write_to_a_topic_rocketmq_forbids_sending_to_fails_at_planning(pyspark_ready: None, topic: str) -> None:
    """Java's producer refuses a send to these topics before sending (``client/.../Validators.java``
    ``isNotAllowedSendTopic``, 4.9.8), as the options already refused them for ``commitTopic``; a write to one under
    the ``topic`` option passed planning, and every task failed at its first send, the streaming sink's after
    creating its commit topic and writing a start marker. Both writers refuse it at planning now; a read of such a
    topic is no send, and is still planned."""
    from pyspark.sql.types import BinaryType, StructField, StructType

    from spark.options import OptionError
    from spark.source import RocketMQDataSource

    source = RocketMQDataSource({"nameServer": "127.0.0.1:9876", "topic": topic})
    schema = StructType([StructField("body", BinaryType())])
    forbidden = f"option topic='{topic}': Sending message to topic[{topic}] is forbidden."
    for plan in (source.writer, source.streamWriter):
        with pytest.raises(OptionError) as caught:
            plan(schema, False)
        assert str(caught.value) == forbidden
    assert source.reader(source.schema()) is not None  # the read takes its own schema


def test_a_stream_write_whose_topic_is_its_commit_topic_fails_at_planning(pyspark_ready: None) -> None:
    """The exactly-once sink keeps its markers in ``commitTopic``; a stream writing its data into that same topic
    mixes markers with rows (every reader of the data sees the markers as messages), so the plan is refused, the
    default commit topic and a named one alike. A batch write keeps no markers and is planned."""
    from pyspark.sql.types import BinaryType, StructField, StructType

    from spark.options import DEFAULT_COMMIT_TOPIC, OptionError
    from spark.source import RocketMQDataSource

    schema = StructType([StructField("body", BinaryType())])
    for options in (
        {"topic": DEFAULT_COMMIT_TOPIC},
        {"topic": "orders", "commitTopic": "orders"},
    ):
        source = RocketMQDataSource({"nameServer": "127.0.0.1:9876", **options})
        with pytest.raises(OptionError, match="commitTopic"):
            source.streamWriter(schema, False)
        assert source.writer(schema, False) is not None


SPECULATING_WRITE = """
import sys
from pyspark.sql import SparkSession
from spark import register

spark = SparkSession.builder.master("local[1]").config("spark.ui.enabled", "false").config(
    "spark.driver.host", "127.0.0.1").config("spark.speculation", "true").getOrCreate()
spark.sparkContext.setLogLevel("ERROR")
register(spark)
rows = spark.readStream.format("rate").option("rowsPerSecond", "5").load().selectExpr("CAST(value AS STRING) AS body")
try:
    query = rows.writeStream.format("rocketmq").option("nameServer", sys.argv[1]).option("topic", sys.argv[2]).option(
        "checkpointLocation", sys.argv[3]).start()
    query.processAllAvailable()
    query.stop()
    print("WRITTEN")
except Exception as exc:
    print("REFUSED", exc)
spark.stop()
"""


@pytest.mark.timeout(300)
def test_a_stream_write_with_speculation_on_is_refused(
    pyspark_ready: None, rocketmq: ThreadedCluster, tmp_path: Path
) -> None:
    """Under ``spark.speculation=true`` Spark runs a second attempt of a slow task beside the first: both attempts of
    one (query, batch, partition) find no marker of the other, or find the first's start marker while it is still
    sending, and both publish the rows, which RocketMQ cannot take back. The exactly-once sink wrote on as if nothing
    could go wrong; a stream write in a session with speculation on is now refused when the query starts. Its own
    process: speculation is a setting of the SparkContext, one per JVM."""
    ns, topic = rocketmq.namesrv_addr, "SparkSpeculatingDst"
    make_topic(ns, topic, 1)
    root = Path(__file__).resolve().parents[2]
    env = {**os.environ, "PYTHONPATH": str(root), "SPARK_LOCAL_IP": "127.0.0.1", "PYSPARK_PYTHON": sys.executable}
    command = [sys.executable, "-c", SPECULATING_WRITE, ns, topic, str(tmp_path / "checkpoint")]
    done = subprocess.run(command, cwd=root, env=env, check=True, capture_output=True, text=True, timeout=280)
    assert "REFUSED" in done.stdout and "spark.speculation" in done.stdout, done.stdout + done.stderr
    assert read_topic(ns, topic) == []
