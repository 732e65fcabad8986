"""Batch reads: a range of queue offsets, read through Spark with the declared schema and exact contents."""

from __future__ import annotations

import datetime
import json
import logging
from pathlib import Path
from typing import Any

import anyio
import pytest

from client import Message
from spark.schema import spark_schema
from spark.session import BrokerSession
from tests.client.helpers import fill_queues
from tests.spark.helpers import (
    RETAINED,
    DeafFirstProxy,
    commit_log_segments,
    delete_by_retention,
    delete_commit_log_segments,
    make_topic,
    on_two_masters,
    produce,
    read_topic,
    retention_cluster,
)
from tests.threaded_cluster import ThreadedCluster

SCHEMA = (
    "struct<topic:string,broker_name:string,queue_id:int,queue_offset:bigint,msg_id:string,keys:string,tags:string,body:binary,"
    "properties:map<string,string>,born_timestamp:timestamp,store_timestamp:timestamp,born_host:string,"
    "store_host:string,reconsume_times:int,flag:int>"
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
                flag=i,
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
    assert all(r.flag == int(r.properties["n"]) for r in rows)  # the producer's flag (rocketmq-spark's `flag` column)
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


def test_rocketmq_sparks_sub_expression_option_filters_by_tag(spark: Any, rocketmq: ThreadedCluster) -> None:
    """rocketmq-spark names its tag filter ``subExpression`` (``RocketMQConf.CONSUMER_SUB_EXPRESSION``); a read
    carrying it over ignored it and returned every tag's messages. It is ``tags`` under its rocketmq-spark name."""
    ns = rocketmq.namesrv_addr
    make_topic(ns, "SparkSubExpression", 1)
    produce(ns, [Message("SparkSubExpression", f"s{i}".encode(), tags=("A", "B")[i % 2]) for i in range(10)])
    rows = _load(spark, ns, "SparkSubExpression", subExpression="B").orderBy("queue_offset").collect()
    assert [r.body for r in rows] == [f"s{i}".encode() for i in range(10) if i % 2]


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


def test_a_batch_read_with_a_schema_of_its_own_is_refused_at_planning(spark: Any, rocketmq: ThreadedCluster) -> None:
    """A read has one fixed schema: rocketmq-spark refuses another ("RocketMQ source has a fixed schema and cannot be
    set with a custom one", ``RocketMQSourceProvider.sourceSchema``), as Spark's Kafka source does. PySpark hands
    ``.schema(...)`` to the reader instead of asking the source: it was taken, and every task then failed on rows that
    did not match it. The source's own schema, given explicitly, still reads."""
    ns = rocketmq.namesrv_addr
    make_topic(ns, "SparkOwnSchema", 1)
    produce(ns, [Message("SparkOwnSchema", b"one")])
    reader = spark.read.format("rocketmq").option("nameServer", ns).option("topic", "SparkOwnSchema")
    with pytest.raises(Exception, match="fixed schema"):
        reader.schema("body binary, topic string").load().collect()
    assert [bytes(r.body) for r in reader.schema(spark_schema()).load().collect()] == [b"one"]


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
    fail the read (an assertion) instead of returning no rows."""
    ns = rocketmq.namesrv_addr
    make_topic(ns, "SparkReviewEmpty", 2)
    df = spark.read.format("rocketmq").option("nameServer", ns).option("topic", "SparkReviewEmpty").load()
    assert df.count() == 0


@pytest.mark.parametrize(
    ("option", "value", "message"),
    [
        ("startingOffsets", "latest", "startingOffsets latest is for streaming queries only"),
        ("startingOffsets", '{"SparkReviewLatest": {"0": -1}}', "startingOffsets -1 .latest. .*streaming"),
        ("endingOffsets", "earliest", "endingOffsets earliest would read nothing"),
        ("endingOffsets", '{"SparkReviewLatest": {"1": -2}}', "endingOffsets -2 .earliest. .* would read nothing"),
    ],
)
def test_a_batch_read_from_latest_or_to_earliest_is_refused_at_planning(
    spark: Any, rocketmq: ThreadedCluster, option: str, value: str, message: str
) -> None:
    """A batch read from ``latest`` (or to ``earliest``) reads nothing by definition, so it is a mistake: rocketmq-spark
    refuses both (``RocketMQSourceProvider.validateBatchOptions``: "starting offset can't be latest for batch queries",
    "ending offset can't be earliest"), as Spark's Kafka source does. It used to plan an empty read."""
    ns = rocketmq.namesrv_addr
    make_topic(ns, "SparkReviewLatest", 2)
    produce(ns, [Message("SparkReviewLatest", b"x")])
    with pytest.raises(Exception, match=message):
        _load(spark, ns, "SparkReviewLatest", **{option: value}).collect()


def test_the_pull_batch_size_option_sets_how_many_messages_each_pull_asks_for(
    spark: Any, rocketmq: ThreadedCluster
) -> None:
    """rocketmq-spark's ``pullBatchSize`` (default 32) is the most messages one pull asks for and ``pullTimeoutMs`` its
    timeout (``RocketMQConf.PULL_MAX_BATCH_SIZE`` / ``PULL_TIMEOUT_MS``, used by ``CachedRocketMQConsumer.get``).
    Both were accepted and ignored: every pull asked for 32. The broker's own pull statistics (GROUP_GET_NUMS, what
    ``mqadmin statsAll`` shows) count the pulls that read 40 messages with ``pullBatchSize=8``: five."""
    from broker.stats import GROUP_GET_NUMS
    from broker.stats.manager import stats_key

    ns, topic, group = rocketmq.namesrv_addr, "SparkPullBatchSize", "SparkPullBatchSizeGroup"
    make_topic(ns, topic, 1)
    produce(ns, [Message(topic, f"p{i}".encode()) for i in range(40)])
    rows = _load(spark, ns, topic, consumerGroup=group, pullBatchSize="8", pullTimeoutMs="5000").collect()
    assert sorted(r.queue_offset for r in rows) == list(range(40))
    assert rocketmq.cluster is not None
    pulls = rocketmq.cluster.controller.context.stats.item(GROUP_GET_NUMS, stats_key(topic, group))
    assert pulls is not None
    assert (pulls.value, pulls.times) == (40, 5)


@pytest.mark.parametrize(("option", "value"), [("pullBatchSize", "0"), ("pullTimeoutMs", "soon")])
def test_a_bad_pull_option_is_an_option_error(option: str, value: str) -> None:
    from spark.options import OptionError, SourceOptions

    with pytest.raises(OptionError, match=option):
        SourceOptions.parse({"nameServer": "127.0.0.1:9876", option: value})


def test_offsets_fetched_at_planning_are_retried_when_the_name_server_does_not_answer_once(
    spark: Any, rocketmq: ThreadedCluster
) -> None:
    """Planning asks the name server for the topic's queues and the broker for their offsets. One request that goes
    unanswered failed the whole read; rocketmq-spark retries the offset fetch (``RocketMQOffsetReader.withRetries``:
    ``fetchOffset.numRetries`` attempts, default 3, ``fetchOffset.retryIntervalMs`` apart, default 1000), as Spark's
    Kafka source does. Here the name server's first connection is never answered: the route lookup times out, and the
    next attempt, on a new connection, plans the read."""
    ns, topic = rocketmq.namesrv_addr, "SparkFetchRetry"
    make_topic(ns, topic, 1)
    produce(ns, [Message(topic, f"r{i}".encode()) for i in range(5)])
    with DeafFirstProxy(ns) as proxy:
        rows = _load(spark, proxy.addr, topic, **{"fetchOffset.retryIntervalMs": "10"}).collect()
    assert sorted(bytes(r.body) for r in rows) == [f"r{i}".encode() for i in range(5)]
    assert proxy.accepted >= 2


def _read_offsets(options: dict[str, str], part: Any) -> list[int]:
    """The queue offsets ``read_range`` returns for the QueueRange ``part``, read in this process."""
    from spark.options import SourceOptions
    from spark.reader import read_range

    return [o for b in read_range(SourceOptions.parse(options), part) for o in b.column("queue_offset").to_pylist()]


def test_offsets_whose_commit_log_data_is_gone_before_the_queue_moves_past_them_are_data_loss(
    pyspark_ready: None, tmp_path: Path
) -> None:
    """Retention deletes CommitLog segments first and moves the ConsumeQueues' first offsets afterwards (Java:
    CleanCommitLogService, then CleanConsumeQueueService). A pull in between finds entries whose data is gone: the
    store answers MESSAGE_WAS_REMOVING (PULL_RETRY_IMMEDIATELY past them) or FOUND with the messages after them, and a
    tag-less read of [0, 30) silently returned the tail, even with failOnDataLoss=true. Like rocketmq-spark's
    ``RocketMQDataConsumer.get`` ("Cannot fetch records in [offset, record.offset)") it now fails; with
    failOnDataLoss=false it reads what is left."""
    from spark.data_loss import DataLossError
    from spark.reader import QueueRange

    with ThreadedCluster(tmp_path / "cluster", mapped_file_size_commit_log=16384) as cluster:
        ns, topic = cluster.namesrv_addr, "SparkCommitLogGone"
        make_topic(ns, topic, 1)
        produce(ns, [Message(topic, body) for body in RETAINED])
        delete_commit_log_segments(cluster, 1)
        part = QueueRange(topic, "broker-a", 0, 0, 30)
        with pytest.raises(DataLossError, match=r"offsets \[0, \d+\) are gone, the queue holds 0\.\.30: no longer"):
            _read_offsets({"nameServer": ns, "topic": topic}, part)
        left = _read_offsets({"nameServer": ns, "topic": topic, "failOnDataLoss": "false"}, part)
        assert 0 < len(left) < 30 and left == list(range(30 - len(left), 30))


@pytest.mark.parametrize("deleted", ["by retention", "from the commit log only"])
def test_a_gap_longer_than_a_page_is_reported_once_whole(
    pyspark_ready: None, tmp_path: Path, caplog: pytest.LogCaptureFixture, deleted: str
) -> None:
    """A read pulls its range a PAGE (4096 offsets) at a time, and reported a gap page by page: failOnDataLoss=true
    named only [0, 4096) and offered to go on from 4096, itself gone; failOnDataLoss=false logged the gap once per
    page. The gap is now reported once, whole, with the first offset held after it, whether the queue's first offset
    has moved past it (retention done) or still lists it (its CommitLog data deleted first)."""
    from spark.data_loss import DataLossError
    from spark.reader import PAGE, QueueRange

    count = PAGE + 1000
    with retention_cluster(tmp_path) as cluster:
        ns, topic = cluster.namesrv_addr, "SparkLongGap"
        make_topic(ns, topic, 1)
        with BrokerSession(ns, producer_group="spark-long-gap-pg") as session:
            for first in range(0, count, 64):  # a batch's record fits a 16 KiB segment
                session.send_batch([Message(topic, b"%06d" % i) for i in range(first, min(first + 64, count))])
        if deleted == "by retention":
            delete_by_retention(cluster)
        else:
            delete_commit_log_segments(cluster, commit_log_segments(cluster) - 1)
        part = QueueRange(topic, "broker-a", 0, 0, count)
        with caplog.at_level(logging.WARNING, logger="spark.data_loss"):
            left = _read_offsets({"nameServer": ns, "topic": topic, "failOnDataLoss": "false"}, part)
        resume = left[0]
        assert PAGE < resume < count and left == list(range(resume, count))
        logged = [r.getMessage() for r in caplog.records if r.name == "spark.data_loss"]
        assert len(logged) == 1 and f"offsets [0, {resume}) are gone" in logged[0]
        with pytest.raises(DataLossError, match=rf"offsets \[0, {resume}\) are gone.*go on from offset {resume}$"):
            _read_offsets({"nameServer": ns, "topic": topic}, part)


def test_a_json_start_retention_deleted_is_data_loss_for_a_batch_read(pyspark_ready: None, tmp_path: Path) -> None:
    """A JSON startingOffsets the queue no longer held at planning was moved up to the queue's first offset without a
    word: asked for [0, 30) with failOnDataLoss=true, the read returned what retention left. As a stream does for the
    same option, and as Kafka's batch read fails ("Cannot fetch offset ... Some data may have been lost"), planning
    now fails; with failOnDataLoss=false the read starts at the first offset the queue holds."""
    from spark.data_loss import DataLossError
    from spark.options import SourceOptions
    from spark.reader import RocketMQBatchReader

    with retention_cluster(tmp_path) as cluster:
        ns, topic = cluster.namesrv_addr, "SparkJsonStartGone"
        make_topic(ns, topic, 1)
        produce(ns, [Message(topic, body) for body in RETAINED])
        delete_by_retention(cluster)
        options = {"nameServer": ns, "topic": topic, "startingOffsets": json.dumps({topic: {"0": 0}})}
        with pytest.raises(
            DataLossError, match=r"startingOffsets gives .* offset 0, but it holds offsets [1-9]\d*\.\.30"
        ):
            RocketMQBatchReader(SourceOptions.parse(options)).partitions()
        reader = RocketMQBatchReader(SourceOptions.parse({**options, "failOnDataLoss": "false"}))
        parts = list(reader.partitions())
        left = [o for p in parts for b in reader.read(p) for o in b.column("queue_offset").to_pylist()]
        assert 0 < len(left) < 30 and left == list(range(30 - len(left), 30))


def test_a_json_ending_offset_past_the_queues_end_is_data_loss(pyspark_ready: None, rocketmq: ThreadedCluster) -> None:
    """A JSON endingOffsets past the queue's max offset was moved down to it without a word: asked for [0, 50) of a
    queue holding 5 messages, the read returned 5 rows as if the other 45 had been read. Kafka's batch read keeps the
    ending offset it was given and its task fails on the offsets the partition does not hold
    (``connector/kafka-0-10-sql/.../consumer/KafkaDataConsumer.scala``: ``fetch`` raises OffsetOutOfRangeException at
    or past the latest offset, ``get`` reports it as data loss); so planning now fails, and with
    failOnDataLoss=false the read ends at the queue's max offset."""
    from spark.data_loss import DataLossError
    from spark.options import SourceOptions
    from spark.reader import RocketMQBatchReader

    ns, topic = rocketmq.namesrv_addr, "SparkJsonEndPast"
    make_topic(ns, topic, 1)
    produce(ns, [Message(topic, f"e{i}".encode()) for i in range(5)])
    options = {"nameServer": ns, "topic": topic, "endingOffsets": json.dumps({topic: {"0": 50}})}
    with pytest.raises(DataLossError, match=r"endingOffsets gives .* offset 50, but it holds offsets 0\.\.5"):
        RocketMQBatchReader(SourceOptions.parse(options)).partitions()
    reader = RocketMQBatchReader(SourceOptions.parse({**options, "failOnDataLoss": "false"}))
    parts = list(reader.partitions())
    assert [o for p in parts for b in reader.read(p) for o in b.column("queue_offset").to_pylist()] == list(range(5))


async def _master_unrouted(namesrv: str, topic: str) -> None:
    """Return once the name server routes ``topic``'s broker without its master (brokerId 0)."""
    from client.admin import Admin

    async with Admin(namesrv) as admin:
        with anyio.fail_after(60):
            while 0 in (await admin.topic_route(topic)).broker_datas[0].broker_addrs:
                await anyio.sleep(0.05)


def test_a_planned_range_is_read_from_the_slave_while_its_master_is_down(pyspark_ready: None, tmp_path: Path) -> None:
    """A task reads a range planned while broker-a's master was up; the master is down when the task runs, its slave
    up and routed. The read failed ("broker-a ... has no master") batch after batch until the master came back, so a
    stream could not finish the batch it had logged. RocketMQ's pull goes to a slave when the master is not in the
    route (``client/.../impl/consumer/PullAPIWrapper.java`` ``pullKernelImpl``, through
    ``MQClientInstance.findBrokerAddressInSubscribe(brokerName, MASTER_ID, false)``), so rocketmq-spark's task, a
    DefaultMQPullConsumer, reads it there."""
    from spark.reader import QueueRange

    with ThreadedCluster(tmp_path / "cluster", slaves=1) as cluster:
        ns, topic = cluster.namesrv_addr, "SparkSlaveRead"
        make_topic(ns, topic, 1)
        produce(ns, [Message(topic, f"s{i}".encode()) for i in range(5)])
        embedded = cluster.cluster
        assert embedded is not None

        async def master_down() -> None:
            await embedded.wait_replicated()
            slave = embedded.slave_controllers[0]
            assert slave.replication.slave_sync is not None
            await slave.replication.slave_sync.sync_all()  # the topic's config, as its 10 s sync would
            await embedded.stop_broker()

        cluster.call(master_down)
        anyio.run(_master_unrouted, ns, topic)
        part = QueueRange(topic, "broker-a", 0, 0, 5)
        assert _read_offsets({"nameServer": ns, "topic": topic}, part) == [0, 1, 2, 3, 4]
        # A range past what the slave holds (it replicates behind its master) is not lost: the read fails, to be
        # retried once the master is back, even with failOnDataLoss=false (which would skip it).
        ahead = QueueRange(topic, "broker-a", 0, 3, 7)
        with pytest.raises(Exception, match="its slave holds SparkSlaveRead queue 0 only up to offset 5, short of 7"):
            _read_offsets({"nameServer": ns, "topic": topic, "failOnDataLoss": "false"}, ahead)


async def _write_only_topic(namesrv: str, topic: str) -> None:
    """``topic`` with permission 2 (write only: ``updateTopicPerm -p 2``), once the name server routes it."""
    from client.admin import Admin
    from client.errors import TopicRouteNotFoundError
    from remoting.codec.bodies import PERM_WRITE

    async with Admin(namesrv) as admin:
        await admin.create_topic(topic, read_queue_nums=2, write_queue_nums=2, perm=PERM_WRITE)
        with anyio.fail_after(60):
            while True:
                try:
                    if (await admin.topic_route(topic)).queue_datas:
                        return
                except TopicRouteNotFoundError:
                    pass
                await anyio.sleep(0.05)


def test_a_read_of_a_topic_without_a_readable_queue_fails_instead_of_returning_nothing(
    pyspark_ready: None, rocketmq: ThreadedCluster
) -> None:
    """A topic whose queues are all write-only (an operator's ``updateTopicPerm -p 2``) has no queue to read: the read
    planned nothing and returned no rows, and a stream on it read nothing forever, without a word. rocketmq-spark lists
    a topic's queues with ``fetchSubscribeMessageQueues``
    (``rocketmq-spark/.../RocketMQOffsetReader.scala`` ``fetchTopicPartitions``), which refuses a topic without a
    readable queue ("Can not find Message Queue for this topic", ``client/.../impl/MQAdminImpl.java``), so the query
    fails there after its ``fetchOffset`` retries."""
    from client.errors import MQClientError
    from spark.options import SourceOptions
    from spark.reader import RocketMQBatchReader

    ns, topic = rocketmq.namesrv_addr, "SparkWriteOnly"
    anyio.run(_write_only_topic, ns, topic)
    options = SourceOptions.parse({"nameServer": ns, "topic": topic, "fetchOffset.retryIntervalMs": "0"})
    with pytest.raises(MQClientError, match=f"Can not find Message Queue for this topic, {topic}"):
        RocketMQBatchReader(options).partitions()


def test_a_slave_read_below_the_slaves_first_offset_goes_on_from_it(pyspark_ready: None, tmp_path: Path) -> None:
    """A slave without ``offsetCheckInSlave`` (the default) answers a pull below its first offset with
    PULL_RETRY_IMMEDIATELY and the offset asked as the next one (``store/.../DefaultMessageStore.java``
    ``nextOffsetCorrection``, ``broker/.../processor/PullMessageProcessor.java``), where a master answers
    PULL_OFFSET_MOVED to its first offset. A read with ``failOnDataLoss=false`` took "no way forward" for a gap up to
    the end of what it pulled at once, and skipped the messages the slave still held there; it now goes on from the
    slave's first offset, as from a master's."""
    from spark.data_loss import DataLossError
    from spark.reader import QueueRange

    small = {"mapped_file_size_commit_log": 16384, "file_reserved_time": 0}  # as retention_cluster's
    with ThreadedCluster(tmp_path / "cluster", slaves=1, **small) as cluster:
        ns, topic = cluster.namesrv_addr, "SparkSlaveRetention"
        make_topic(ns, topic, 1)
        produce(ns, [Message(topic, body) for body in RETAINED])
        embedded = cluster.cluster
        assert embedded is not None

        async def retained_on_the_slave_then_master_down() -> int:
            from store.maintenance import request_manual_delete

            await embedded.wait_replicated()
            slave = embedded.slave_controllers[0]
            assert slave.replication.slave_sync is not None
            await slave.replication.slave_sync.sync_all()
            store = slave.context.store
            while True:
                store.flush_all_blocking()
                request_manual_delete(store)
                if await store.retention.check_once() == 0:
                    break
            await embedded.stop_broker()
            return store.consume_queue(topic, 0).min_offset

        first = cluster.call(retained_on_the_slave_then_master_down)
        assert 0 < first < len(RETAINED)
        anyio.run(_master_unrouted, ns, topic)
        part = QueueRange(topic, "broker-a", 0, 0, len(RETAINED))
        held = _read_offsets({"nameServer": ns, "topic": topic, "failOnDataLoss": "false"}, part)
        assert held == list(range(first, len(RETAINED)))
        # the gap is data loss for a tag-filtered read too, as a master's PULL_OFFSET_MOVED is
        with pytest.raises(DataLossError, match=rf"offsets \[0, {first}\) are gone"):
            _read_offsets({"nameServer": ns, "topic": topic, "tags": "T"}, part)


def test_a_read_of_large_messages_holds_a_bounded_number_of_bytes_at_once(
    pyspark_ready: None, rocketmq: ThreadedCluster
) -> None:
    """A task pulled a page of 4096 offsets into memory before it yielded a record batch, whatever the messages' size:
    4096 messages of 1 MiB are 4 GiB in one Python worker, which dies. rocketmq-spark's task holds one pull at a time
    (``RocketMQDataConsumer.get``, ``pullBatchSize`` messages), as Kafka's. A page now holds about ``page_bytes`` of
    bodies (one pull's worth at least), sized from the messages read so far."""
    from spark.options import SourceOptions
    from spark.reader import QueueRange, read_range

    ns, topic = rocketmq.namesrv_addr, "SparkLargeBodies"
    make_topic(ns, topic, 1)
    body = 8 * 1024
    produce(ns, [Message(topic, bytes([i]) * body) for i in range(60)])
    batches = list(
        read_range(SourceOptions.parse({"nameServer": ns, "topic": topic}), QueueRange(topic, "broker-a", 0, 0, 60),
                   page_bytes=64 * 1024)
    )  # fmt: skip
    offsets = [o for b in batches for o in b.column("queue_offset").to_pylist()]
    assert offsets == list(range(60))
    assert max(b.num_rows for b in batches) * body <= 64 * 1024 + 32 * body  # a page's budget, plus one pull at most
