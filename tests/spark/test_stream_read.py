"""Streaming reads: admission control, progress reporting, and a restart from the checkpoint with no duplicates
and no gaps."""

from __future__ import annotations

import json
import logging
import socket
from collections.abc import Callable
from pathlib import Path
from typing import Any

import anyio
import pytest

from client import Message
from client.sync import Admin
from tests.client.helpers import fill_queues, register_dead_broker, topic_on_two_brokers
from tests.spark.helpers import (
    RETAINED,
    DeafFirstProxy,
    _forgotten,
    delete_by_retention,
    make_topic,
    produce,
    retention_cluster,
)
from tests.threaded_cluster import ThreadedCluster


def _run(
    spark: Any,
    ns: str,
    topic: str,
    batches: dict[int, list[tuple[int, int, bytes]]],
    checkpoint: Path,
    *,
    available_now: bool = False,
    after_batch: Callable[[int], None] = lambda _: None,
    **options: str,
) -> Any:
    """Run the stream until it has read everything (with ``available_now``, under ``Trigger.AvailableNow`` until it
    stops), recording each micro-batch's rows under its batch id (a replayed batch overwrites its entry, as an
    idempotent sink would), then calling ``after_batch(batch id)``."""
    reader = spark.readStream.format("rocketmq").option("nameServer", ns).option("topic", topic)
    for name, value in options.items():
        reader = reader.option(name, value)

    def record(df: Any, batch_id: int) -> None:
        batches[batch_id] = sorted((r.queue_id, r.queue_offset, bytes(r.body)) for r in df.collect())
        after_batch(batch_id)

    writer = reader.load().selectExpr("queue_id", "queue_offset", "body").writeStream.foreachBatch(record)
    if available_now:
        writer = writer.trigger(availableNow=True)
    query = writer.option("checkpointLocation", str(checkpoint)).start()
    try:
        if available_now:
            query.awaitTermination()
        else:
            query.processAllAvailable()
    finally:
        query.stop()
    return query


def test_stream_restarted_from_its_checkpoint_reads_every_message_exactly_once(
    spark: Any, rocketmq: ThreadedCluster, tmp_path: Path
) -> None:
    ns, topic = rocketmq.namesrv_addr, "SparkStreamRestart"
    make_topic(ns, topic, 2)
    produce(ns, [Message(topic, f"a{i}".encode()) for i in range(30)])
    checkpoint = tmp_path / "checkpoint"
    options = {"startingOffsets": "earliest", "maxRecordsPerTrigger": "10", "consumerGroup": "spark-stream-cg"}
    batches: dict[int, list[tuple[int, int, bytes]]] = {}

    first = _run(spark, ns, topic, batches, checkpoint, **options)
    assert [len(batches[b]) for b in sorted(batches)] == [10, 10, 10]  # maxRecordsPerTrigger admits 10 per batch
    progress = [p for p in first.recentProgress if p["numInputRows"] > 0]
    assert json.loads(progress[0]["sources"][0]["latestOffset"]) == {topic: {"broker-a:0": 15, "broker-a:1": 15}}
    before = dict(batches)

    # The query "dies" inside its last batch: Spark logged the batch's offsets but never committed it.
    last = max(batches)
    for name in (str(last), f".{last}.crc"):
        (checkpoint / "commits" / name).unlink(missing_ok=True)
    produce(ns, [Message(topic, f"b{i}".encode()) for i in range(12)])

    _run(spark, ns, topic, batches, checkpoint, **options)
    assert batches[last] == before[last]  # the replayed batch re-read exactly the same messages
    assert [len(batches[b]) for b in sorted(batches)] == [10, 10, 10, 10, 2]
    rows = [row for b in sorted(batches) for row in batches[b]]
    assert len({(q, o) for q, o, _ in rows}) == len(rows) == 42  # no duplicates
    assert sorted(body for _, _, body in rows) == sorted(
        [f"a{i}".encode() for i in range(30)] + [f"b{i}".encode() for i in range(12)]
    )  # no gaps

    with Admin(ns) as admin:
        lag = admin.consumer_progress("spark-stream-cg", topic)
    # Spark commits a batch to its source when it plans the next one: the group trails by the final batch.
    assert {w.broker_offset for w in lag.values()} == {21}
    assert sum(w.consumer_offset for w in lag.values()) == 42 - len(batches[max(batches)])


def test_max_offsets_per_trigger_limits_each_batch(spark: Any, rocketmq: ThreadedCluster, tmp_path: Path) -> None:
    """``maxOffsetsPerTrigger`` is the rate limit's name in rocketmq-spark (``RocketMQSource``) and Kafka's source; a
    stream given it read its whole backlog in one batch. It limits each batch as ``maxRecordsPerTrigger`` does."""
    ns, topic = rocketmq.namesrv_addr, "SparkMaxOffsets"
    make_topic(ns, topic, 2)
    produce(ns, [Message(topic, f"m{i}".encode()) for i in range(24)])
    batches: dict[int, list[tuple[int, int, bytes]]] = {}
    _run(spark, ns, topic, batches, tmp_path / "checkpoint", startingOffsets="earliest", maxOffsetsPerTrigger="10")
    assert [len(batches[b]) for b in sorted(batches)] == [10, 10, 4]


def _bodies(spark: Any, ns: str, topic: str, checkpoint: Path, **options: str) -> list[bytes]:
    """Every body one run of the stream read (:func:`_run`)."""
    batches: dict[int, list[tuple[int, int, bytes]]] = {}
    _run(spark, ns, topic, batches, checkpoint, **options)
    return [body for rows in batches.values() for _, _, body in rows]


def test_a_stream_read_with_a_schema_of_its_own_is_refused_at_planning(
    spark: Any, rocketmq: ThreadedCluster, tmp_path: Path
) -> None:
    """As a batch read: a stream has the one fixed schema, and rocketmq-spark's ``sourceSchema`` refuses another ("has
    a fixed schema and cannot be set with a custom one"). It was taken, and each batch's task failed on rows that did
    not match it."""
    ns, topic = rocketmq.namesrv_addr, "SparkStreamOwnSchema"
    make_topic(ns, topic, 1)
    produce(ns, [Message(topic, b"one")])
    stream = spark.readStream.format("rocketmq").option("nameServer", ns).option("topic", topic)
    stream = stream.option("startingOffsets", "earliest").schema("body binary").load()
    query = stream.writeStream.foreachBatch(lambda df, _: df.collect())
    query = query.option("checkpointLocation", str(tmp_path / "checkpoint")).start()
    try:
        with pytest.raises(Exception, match="fixed schema"):
            query.processAllAvailable()
    finally:
        query.stop()


def test_a_stream_whose_queue_lost_its_next_offset_fails_or_starts_it_over(
    spark: Any, rocketmq: ThreadedCluster, tmp_path: Path
) -> None:
    """The topic was deleted and made again (as a wiped broker would): the checkpoint's offset 8 is past the queue's
    end. The query fails by default (Kafka's failOnDataLoss); with failOnDataLoss=false it reads the new messages.
    It used to wait silently past them (no batch until the queue passed 8, the new ones never read). That batch,
    [8 -> 0, 3), replayed with failOnDataLoss back at true fails too: its range is not moved silently."""
    ns, topic = rocketmq.namesrv_addr, "SparkLostOffsets"
    make_topic(ns, topic, 1)
    produce(ns, [Message(topic, f"old{i}".encode()) for i in range(8)])
    checkpoint = tmp_path / "checkpoint"
    assert len(_bodies(spark, ns, topic, checkpoint, startingOffsets="earliest")) == 8
    with Admin(ns) as admin:
        admin.delete_topic(topic)
    make_topic(ns, topic, 1)
    produce(ns, [Message(topic, f"new{i}".encode()) for i in range(3)])
    with pytest.raises(Exception, match="failOnDataLoss"):
        _bodies(spark, ns, topic, checkpoint)
    assert sorted(_bodies(spark, ns, topic, checkpoint, failOnDataLoss="false")) == [b"new0", b"new1", b"new2"]
    last = max(int(p.name) for p in (checkpoint / "commits").iterdir() if p.name.isdigit())
    for name in (str(last), f".{last}.crc"):  # the query "died" in the batch that went on from offset 0
        (checkpoint / "commits" / name).unlink()
    with pytest.raises(Exception, match="was reset: the batch ends at 3, before its start 8"):
        _bodies(spark, ns, topic, checkpoint)


def test_a_master_leaving_the_route_does_not_fail_a_stream_with_a_consumer_group(spark: Any, tmp_path: Path) -> None:
    """The stream keeps the position of a queue that vanished from the route, but with ``consumerGroup`` set
    ``commit`` mirrored every queue of the batch's end offset, the vanished master's too: "broker broker-b ... has
    no master" killed the query, though the mirror is for monitoring only. It now mirrors the routed queues."""
    with ThreadedCluster(tmp_path / "cluster") as cluster:
        ns, topic = cluster.namesrv_addr, "SparkGoneMaster"
        _, stop_b = anyio.run(topic_on_two_brokers, cluster, topic)
        anyio.run(fill_queues, ns, topic, 2)
        checkpoint = tmp_path / "checkpoint"
        options = {"startingOffsets": "earliest", "consumerGroup": "spark-gone-master-cg"}
        assert sorted(_bodies(spark, ns, topic, checkpoint, **options)) == sorted(
            f"{broker}-0-{i}".encode() for broker in ("broker-a", "broker-b") for i in range(2)
        )
        stop_b()  # between two runs: no request of the query can race the stop
        anyio.run(_forgotten, ns, "broker-b")
        produce(ns, [Message(topic, b"after")])
        assert _bodies(spark, ns, topic, checkpoint, **options) == [b"after"]


def _closed_port() -> str:
    """``127.0.0.1:port`` of a port nothing listens on: a connection there is refused."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return f"127.0.0.1:{sock.getsockname()[1]}"


def _last_offsets(checkpoint: Path) -> dict[str, Any]:
    """The end offset of the checkpoint's last logged batch (the last line of its offsets log entry)."""
    last = max((p for p in (checkpoint / "offsets").iterdir() if p.name.isdigit()), key=lambda p: int(p.name))
    offset: dict[str, Any] = json.loads(last.read_text().splitlines()[-1])
    return offset


def test_a_master_down_but_still_routed_keeps_its_queues_position_while_the_others_go_on(
    spark: Any, tmp_path: Path
) -> None:
    """broker-b goes down and the name server still routes it (it has not noticed yet; its queues' addresses refuse
    connections). The stream's next batch used to fail the query: ``latestOffset`` asked every queue's offsets and
    gave up after ``fetchOffset.numRetries`` attempts, so one master down stopped a stream of a topic on two. Now the
    queues of a master that does not answer keep their position and the other master's queues go on; the queue is
    read from there once its master answers again."""
    with ThreadedCluster(tmp_path / "cluster") as cluster:
        ns, topic = cluster.namesrv_addr, "SparkDownMaster"
        _, stop_b = anyio.run(topic_on_two_brokers, cluster, topic)
        anyio.run(fill_queues, ns, topic, 2)
        checkpoint = tmp_path / "checkpoint"
        assert len(_bodies(spark, ns, topic, checkpoint, startingOffsets="earliest")) == 4
        stop_b()
        anyio.run(_forgotten, ns, "broker-b")
        produce(ns, [Message(topic, b"after")])  # to broker-a: the only master routed now
        register_dead_broker(cluster, name="broker-b", addr=_closed_port(), topics=(topic,))
        quick = {"fetchOffset.retryIntervalMs": "10"}  # the old failure came after every retry: no need to wait
        assert _bodies(spark, ns, topic, checkpoint, **quick) == [b"after"]
        assert _last_offsets(checkpoint)[topic] == {"broker-a:0": 3, "broker-b:0": 2}


def test_trigger_available_now_does_not_end_short_of_a_down_masters_start_end(tmp_path: Path) -> None:
    """``Trigger.AvailableNow`` reads what every queue held when the query started. broker-b goes down mid-run and
    the name server still routes it: ``latestOffset`` kept its queue where it was and let broker-a's go on, so once
    broker-a's queue reached its end the offsets stopped moving, Spark ended the run as done, and broker-b's rows
    below that end went unread by a run that reported success. Kafka's source reads to the ends its start recorded
    (``KafkaMicroBatchStream.latestOffset`` under AvailableNow): a queue it cannot reach fails the run. Here the fetch
    fails (and is retried) while a master that does not answer still owes rows below the run's end. The reader is
    driven as Spark drives it."""
    from pyspark.sql.streaming.datasource import ReadMaxRows

    from client.errors import MQClientError
    from remoting.errors import RemotingError
    from spark.options import SourceOptions
    from spark.stream_reader import RocketMQStreamReader

    with ThreadedCluster(tmp_path / "cluster") as cluster:
        ns, topic = cluster.namesrv_addr, "SparkAvailableNowDownMaster"
        _, stop_b = anyio.run(topic_on_two_brokers, cluster, topic)
        anyio.run(fill_queues, ns, topic, 2)
        raw = {"nameServer": ns, "topic": topic, "startingOffsets": "earliest", "fetchOffset.retryIntervalMs": "10"}
        reader = RocketMQStreamReader(SourceOptions.parse(raw), True)
        limit = ReadMaxRows(2)
        try:
            reader.prepareForTriggerAvailableNow()
            start = reader.latestOffset({}, limit)
            assert start[topic] == {"broker-a:0": 1, "broker-b:0": 1}
            stop_b()
            anyio.run(_forgotten, ns, "broker-b")
            register_dead_broker(cluster, name="broker-b", addr=_closed_port(), topics=(topic,))
            with pytest.raises((MQClientError, RemotingError)):  # the run, batch after batch
                for _ in range(4):
                    end = reader.latestOffset(start, limit)
                    if end == start:  # no new batch: Spark ends a Trigger.AvailableNow run here
                        break
                    start = end
        finally:
            reader.stop()
        assert start[topic]["broker-b:0"] == 1  # its position was kept for a later run, not skipped


def test_a_master_that_answers_with_an_error_fails_the_batch_instead_of_stalling(tmp_path: Path) -> None:
    """broker-b is up but refuses the stream's requests (ACL on there, and the stream signs nothing: an account
    missing from one broker's ``plain_acl.yml``). ``latestOffset`` treated that answer as a master that does not
    answer: broker-b's queue kept its offset batch after batch, with a warning, while broker-a's went on, so the
    stream silently never read broker-b. A master down keeps its queues (it answers nothing); a master that answers
    with an error fails the fetch, as every fetch did before, and the query reports it after the retries."""
    from pyspark.sql.streaming.datasource import ReadAllAvailable

    from client import Producer
    from client.admin import Admin as AsyncAdmin
    from client.config import ClientConfig
    from client.errors import MQBrokerError, TopicRouteNotFoundError
    from remoting.codec.bodies import MessageQueue
    from spark.options import SourceOptions
    from spark.stream_reader import RocketMQStreamReader
    from tests.acl.conftest import PLAIN_ACL

    home = tmp_path / "home"
    (home / "conf").mkdir(parents=True)
    (home / "conf" / "plain_acl.yml").write_text(PLAIN_ACL)
    with ThreadedCluster(tmp_path / "cluster") as cluster:
        ns, topic = cluster.namesrv_addr, "SparkRefusingMaster"
        addr_b, _ = cluster.start_extra_broker("broker-b", acl_enable=True, rocketmq_home=str(home))

        async def create() -> None:
            config = ClientConfig(namesrv_addr=ns, access_key="rocketmq2", secret_key="12345678")  # admin: true
            async with AsyncAdmin(config=config) as admin:
                for addr in (cluster.broker_addr, addr_b):
                    await admin.create_topic(topic, read_queue_nums=1, write_queue_nums=1, broker_addr=addr)
                with anyio.fail_after(30):
                    while True:
                        try:
                            if len((await admin.topic_route(topic)).queue_datas) == 2:
                                return
                        except TopicRouteNotFoundError:
                            pass
                        await anyio.sleep(0.02)
            async with Producer("pg", ns) as producer:  # broker-a has no ACL: it takes an unsigned send
                await producer.send(Message(topic, b"a"), queue=MessageQueue(topic, "broker-a", 0))

        anyio.run(create)
        options = SourceOptions.parse({"nameServer": ns, "topic": topic, "fetchOffset.retryIntervalMs": "10"})
        reader = RocketMQStreamReader(options, False)
        start = {topic: {"broker-a:0": 0, "broker-b:0": 0}}  # a checkpointed offset, as Spark hands it back
        try:
            with pytest.raises(MQBrokerError):
                reader.latestOffset(start, ReadAllAvailable())
        finally:
            reader.stop()


def test_a_replayed_first_batch_keeps_the_offsets_the_stream_started_at(
    spark: Any, rocketmq: ThreadedCluster, tmp_path: Path
) -> None:
    """A stream from ``latest`` plans batch 0 as [5, 5) and dies before committing it. On restart Spark replays batch
    0 from ``initialOffset()``: it used to resolve ``latest`` anew (8, past the batch's end) and ``partitions`` then
    "reset" the queue to its first offset, replaying the 5 messages stored before the stream started. Batch 0's end
    offset in the checkpoint now records where the stream started (as Kafka's source keeps its initial offsets)."""
    ns, topic = rocketmq.namesrv_addr, "SparkInitialReplay"
    make_topic(ns, topic, 1)
    produce(ns, [Message(topic, f"before{i}".encode()) for i in range(5)])
    checkpoint = tmp_path / "checkpoint"
    batches: dict[int, list[tuple[int, int, bytes]]] = {}
    _run(spark, ns, topic, batches, checkpoint)
    assert batches == {0: []}  # started at latest: nothing read
    for name in ("0", ".0.crc"):  # the query "died" in batch 0: offsets logged, batch never committed
        (checkpoint / "commits" / name).unlink()
    produce(ns, [Message(topic, f"after{i}".encode()) for i in range(3)])

    batches.clear()
    _run(spark, ns, topic, batches, checkpoint)
    assert batches.get(0, []) == []  # the replay of batch 0 re-reads exactly [5, 5)
    assert sorted(body for rows in batches.values() for _, _, body in rows) == [b"after0", b"after1", b"after2"]


def test_a_replayed_batch_whose_messages_retention_deleted_is_data_loss(spark: Any, tmp_path: Path) -> None:
    """Batch 0 [0, 30) is logged, the query dies before committing it, and retention then deletes the segments holding
    its first offsets. The replay read the messages left, dropped the others without a word and went on. Like Kafka's
    and rocketmq-spark's readers (``RocketMQDataConsumer.get``: "Cannot fetch records in [offset, record.offset)") it
    now fails; with ``failOnDataLoss=false`` it reads what is left and goes on."""
    with retention_cluster(tmp_path) as cluster:
        ns, topic = cluster.namesrv_addr, "SparkRetentionReplay"
        make_topic(ns, topic, 1)
        produce(ns, [Message(topic, body) for body in RETAINED])
        checkpoint = tmp_path / "checkpoint"
        batches: dict[int, list[tuple[int, int, bytes]]] = {}
        _run(spark, ns, topic, batches, checkpoint, startingOffsets="earliest")
        assert list(batches) == [0] and len(batches[0]) == 30
        for name in ("0", ".0.crc"):  # the query "died" in batch 0: logged, never committed
            (checkpoint / "commits" / name).unlink()
        delete_by_retention(cluster)

        with pytest.raises(Exception, match=r"offsets \[0, \d+\) are gone.*deleted by retention; set failOnDataLoss"):
            _bodies(spark, ns, topic, checkpoint)
        left = _bodies(spark, ns, topic, checkpoint, failOnDataLoss="false")
        assert 0 < len(left) < 30 and left == RETAINED[-len(left) :]


@pytest.mark.parametrize("kind", ["stream", "batch"])
def test_offsets_retention_deletes_between_planning_and_reading_are_data_loss(
    pyspark_ready: None, tmp_path: Path, kind: str
) -> None:
    """The driver plans [0, 30), then retention deletes the first offsets before the task reads: ``read`` returned
    the messages left and raised nothing. It now fails, for a stream's batch and for a batch read alike (Kafka's
    batch read honours ``failOnDataLoss`` too); with ``failOnDataLoss=false`` it reads what is left."""
    from pyspark.sql.streaming.datasource import ReadAllAvailable

    from spark.data_loss import DataLossError
    from spark.options import SourceOptions
    from spark.reader import RocketMQBatchReader
    from spark.stream_reader import RocketMQStreamReader

    def planned(fail_on_data_loss: str) -> tuple[Any, list[Any]]:
        options = SourceOptions.parse(
            {"nameServer": ns, "topic": topic, "startingOffsets": "earliest", "failOnDataLoss": fail_on_data_loss}
        )
        if kind == "batch":
            reader: Any = RocketMQBatchReader(options)
            return reader, list(reader.partitions())
        reader = RocketMQStreamReader(options, True)
        try:
            return reader, list(reader.partitions({}, reader.latestOffset({}, ReadAllAvailable())))
        finally:
            reader.stop()

    def read(reader: Any, parts: list[Any]) -> list[int]:
        return [o for p in parts for b in reader.read(p) for o in b.column("queue_offset").to_pylist()]

    with retention_cluster(tmp_path) as cluster:
        ns, topic = cluster.namesrv_addr, f"SparkRetentionRace{kind}"
        make_topic(ns, topic, 1)
        produce(ns, [Message(topic, body) for body in RETAINED])
        strict, lenient = planned("true"), planned("false")
        assert read(*strict) == list(range(30))
        delete_by_retention(cluster)

        with pytest.raises(DataLossError, match=r"queue 0 on broker-a: offsets \[0, \d+\) are gone, the queue holds"):
            read(*strict)
        left = read(*lenient)
        assert 0 < len(left) < 30 and left == list(range(30 - len(left), 30))


@pytest.mark.parametrize("lost", ["by retention", "by a reset"])
def test_a_stream_whose_queue_lost_its_next_offset_logs_the_loss_once(
    pyspark_ready: None, tmp_path: Path, caplog: pytest.LogCaptureFixture, lost: str
) -> None:
    """With failOnDataLoss=false, ``latestOffset`` logged the loss of the stream's next offset and the batch it
    planned, still starting at that offset, logged it again (its read for deleted offsets, ``partitions`` for a
    reset). ``latestOffset`` now only counts the admitted rows from the queue's first offset; the loss is logged once
    and the batch reads what the queue holds."""
    from pyspark.sql.streaming.datasource import ReadAllAvailable

    from spark.options import SourceOptions
    from spark.stream_reader import RocketMQStreamReader

    with retention_cluster(tmp_path) as cluster:
        ns, topic = cluster.namesrv_addr, "SparkLostOnce"
        make_topic(ns, topic, 1)
        produce(ns, [Message(topic, body) for body in RETAINED])
        if lost == "by retention":
            delete_by_retention(cluster)
            start = 0  # retention left the last few messages
        else:
            with Admin(ns) as admin:
                admin.delete_topic(topic)
            make_topic(ns, topic, 1)
            produce(ns, [Message(topic, body) for body in RETAINED[:3]])
            start = 30  # the new queue holds 0..3
        options = SourceOptions.parse({"nameServer": ns, "topic": topic, "failOnDataLoss": "false"})
        reader = RocketMQStreamReader(options, True)
        begin = {topic: {"broker-a:0": start}}
        with caplog.at_level(logging.WARNING, logger="spark.data_loss"):
            try:
                parts = reader.partitions(begin, reader.latestOffset(begin, ReadAllAvailable()))
            finally:
                reader.stop()
            bodies = [bytes(b) for p in parts for batch in reader.read(p) for b in batch.column("body").to_pylist()]
        assert [r.name for r in caplog.records if r.name.startswith("spark.")] == ["spark.data_loss"]
        assert 0 < len(bodies) < 30 and bodies == (RETAINED[-len(bodies) :] if lost == "by retention" else RETAINED[:3])


def test_queues_added_to_a_topic_between_batches_are_read_from_their_first_offset(
    rocketmq: ThreadedCluster,
) -> None:
    """The topic grows from one queue to three between two micro-batches (``updateTopic`` with more queues): the next
    batch reads the new queues from their first offset, beside the old queue's new messages, as Kafka's source
    reads partitions added to a topic from their earliest offset. The stream reader is driven as Spark drives it:
    ``latestOffset`` from the last end offset, then ``partitions`` and ``read``."""
    from pyspark.sql.streaming.datasource import ReadAllAvailable

    from spark.options import SourceOptions
    from spark.stream_reader import RocketMQStreamReader

    ns, topic = rocketmq.namesrv_addr, "SparkGrowingTopic"
    make_topic(ns, topic, 1)
    produce(ns, [Message(topic, f"before{i}".encode()) for i in range(2)])
    options = SourceOptions.parse({"nameServer": ns, "topic": topic, "startingOffsets": "earliest"})
    reader = RocketMQStreamReader(options, True)

    def batch(start: dict[str, Any]) -> tuple[dict[str, Any], list[bytes]]:
        end = reader.latestOffset(start, ReadAllAvailable())
        parts = reader.partitions(start, end)
        return end, [bytes(b) for p in parts for rows in reader.read(p) for b in rows.column("body").to_pylist()]

    try:
        first, bodies = batch({})
        assert sorted(bodies) == [b"before0", b"before1"]
        make_topic(ns, topic, 3)
        anyio.run(fill_queues, ns, topic, 2)
        second, bodies = batch(first)
    finally:
        reader.stop()
    assert sorted(bodies) == sorted(f"broker-a-{q}-{i}".encode() for q in range(3) for i in range(2))
    assert second[topic] == {"broker-a:0": 4, "broker-a:1": 2, "broker-a:2": 2}


def test_a_json_starting_offset_the_queue_does_not_hold_is_data_loss(
    spark: Any, rocketmq: ThreadedCluster, tmp_path: Path
) -> None:
    """``startingOffsets`` names offset 50 of a queue holding 0..5: it used to be clamped to 5 silently. Like Kafka's
    source (``reportDataLoss("startingOffsets for tp was X but consumer reset to Y")``) the stream fails; with
    ``failOnDataLoss=false`` it logs it and starts at the nearest offset the queue holds. (An offset below the queue's
    first one takes the same path.)"""
    ns, topic = rocketmq.namesrv_addr, "SparkStartOutside"
    make_topic(ns, topic, 1)
    produce(ns, [Message(topic, f"m{i}".encode()) for i in range(5)])
    starting = json.dumps({topic: {"0": 50}})
    with pytest.raises(Exception, match=r"offset 50, but it holds offsets 0\.\.5"):
        _bodies(spark, ns, topic, tmp_path / "failing", startingOffsets=starting)
    assert _bodies(spark, ns, topic, tmp_path / "going-on", startingOffsets=starting, failOnDataLoss="false") == []


def test_trigger_available_now_reads_what_its_start_found_in_rate_limited_batches(
    spark: Any, rocketmq: ThreadedCluster, tmp_path: Path
) -> None:
    """``Trigger.AvailableNow``: the source records every queue's max offset as the query starts and reads to there in
    batches of ``maxRecordsPerTrigger``; what is stored meanwhile waits for the next run, which goes on from the
    checkpoint. Spark's wrapper for sources without AvailableNow support (enabled here) is not used: it ignores the
    rate limit, and its ``latestOffset(initialOffset())`` resolved ``startingOffsets`` again on every restart, so a
    JSON start the queue no longer holds (here 50) failed a stream far past it with DataLossError."""
    ns, topic = rocketmq.namesrv_addr, "SparkAvailableNow"
    make_topic(ns, topic, 1)
    produce(ns, [Message(topic, f"m{i}".encode()) for i in range(5)])
    checkpoint = tmp_path / "checkpoint"
    batches: dict[int, list[tuple[int, int, bytes]]] = {}

    def produce_during_batch_0(batch_id: int) -> None:
        if batch_id == 0:
            produce(ns, [Message(topic, f"late{i}".encode()) for i in range(2)])

    wrapper = "spark.sql.streaming.triggerAvailableNowWrapper.enabled"
    spark.conf.set(wrapper, "true")
    try:
        _run(spark, ns, topic, batches, checkpoint, available_now=True, after_batch=produce_during_batch_0,
             startingOffsets=json.dumps({topic: {"0": 1}}), maxRecordsPerTrigger="2")  # fmt: skip
        assert batches == {0: [(0, 1, b"m1"), (0, 2, b"m2")], 1: [(0, 3, b"m3"), (0, 4, b"m4")]}

        batches.clear()
        _run(spark, ns, topic, batches, checkpoint, available_now=True,
             startingOffsets=json.dumps({topic: {"0": 50}}), maxRecordsPerTrigger="2")  # fmt: skip
        assert batches == {2: [(0, 5, b"late0"), (0, 6, b"late1")]}
    finally:
        spark.conf.unset(wrapper)


def test_the_end_offset_a_stream_reports_for_its_first_batch_is_a_starting_offsets_value(
    spark: Any, rocketmq: ThreadedCluster, tmp_path: Path
) -> None:
    """As with Kafka, a progress's ``endOffset`` is what one gives ``startingOffsets`` to go on from there. Batch 0's
    also carries the stream's start under ``"@startedAt"`` (Spark reports the offset it logs); ``startingOffsets``
    refused it (``queue key 'Topic' of '@startedAt'``) and now skips it."""
    ns, topic = rocketmq.namesrv_addr, "SparkProgressEndAsStart"
    make_topic(ns, topic, 1)
    produce(ns, [Message(topic, f"a{i}".encode()) for i in range(4)])
    batches: dict[int, list[tuple[int, int, bytes]]] = {}
    query = _run(spark, ns, topic, batches, tmp_path / "checkpoint", startingOffsets="earliest")
    assert batches == {0: [(0, i, f"a{i}".encode()) for i in range(4)]}
    end = next(p for p in query.recentProgress if p["numInputRows"] > 0)["sources"][0]["endOffset"]
    assert "@startedAt" in json.loads(end)
    produce(ns, [Message(topic, f"b{i}".encode()) for i in range(2)])

    rows = (
        spark.read.format("rocketmq").option("nameServer", ns).option("topic", topic)
        .option("startingOffsets", end).load().collect()
    )  # fmt: skip
    assert sorted(bytes(r.body) for r in rows) == [b"b0", b"b1"]


def test_a_first_batch_logged_without_the_start_record_replays_from_the_json_start(
    spark: Any, rocketmq: ThreadedCluster, tmp_path: Path
) -> None:
    """A checkpoint from before batch 0's end offset recorded the stream's start: the plain table. The stream started
    at the JSON offset 3 and died before committing batch 0 [3, 5). Its replay found no start record, took the queue
    as new since the batch's start and replayed [0, 5); it now resolves ``startingOffsets`` again, as the stream did
    (at most the batch's end, for a ``latest`` that has moved on)."""
    ns, topic = rocketmq.namesrv_addr, "SparkStartlessCheckpoint"
    make_topic(ns, topic, 1)
    produce(ns, [Message(topic, f"m{i}".encode()) for i in range(5)])
    checkpoint = tmp_path / "checkpoint"
    starting = json.dumps({topic: {"0": 3}})
    batches: dict[int, list[tuple[int, int, bytes]]] = {}
    _run(spark, ns, topic, batches, checkpoint, startingOffsets=starting)
    assert batches == {0: [(0, 3, b"m3"), (0, 4, b"m4")]}

    log = checkpoint / "offsets" / "0"  # rewritten as the earlier code logged it, the batch not committed
    version, metadata, source = log.read_text().split("\n", 2)
    table = json.loads(source)
    table.pop("@startedAt")
    log.write_text("\n".join([version, metadata, json.dumps(table)]))
    for path in (checkpoint / "offsets" / ".0.crc", checkpoint / "commits" / "0", checkpoint / "commits" / ".0.crc"):
        path.unlink(missing_ok=True)

    batches.clear()
    _run(spark, ns, topic, batches, checkpoint, startingOffsets=starting)
    assert batches.get(0) == [(0, 3, b"m3"), (0, 4, b"m4")]


@pytest.mark.parametrize("replay", ["a queue new since the batch's start", "batch 0 without its start record"])
def test_offsets_fetched_when_a_stream_plans_a_logged_batch_are_retried(
    pyspark_ready: None, rocketmq: ThreadedCluster, replay: str
) -> None:
    """A restarted query first plans its logged batch (``partitions``) on a new reader, which asks the cluster for a
    queue new since the batch's start (its first offset) or, for a batch 0 logged without its start record, for
    ``startingOffsets`` again. ``latestOffset`` retried its fetches (``fetchOffset.numRetries``) but these were not:
    one request the name server left unanswered failed the query. Kafka's source and rocketmq-spark fetch them
    through the same retries (``RocketMQOffsetReader.fetchEarliestOffsets(newPartitions)``, ``withRetries``)."""
    from spark.options import SourceOptions
    from spark.stream_reader import RocketMQStreamReader

    ns, topic = rocketmq.namesrv_addr, "SparkPlanRetry" + ("New" if replay.startswith("a queue") else "Startless")
    make_topic(ns, topic, 2)
    produce(ns, [Message(topic, f"m{i}".encode()) for i in range(6)])
    end = _ends(ns, topic)
    held = end[topic]
    start: dict[str, Any] = {topic: {"broker-a:0": 0}} if replay.startswith("a queue") else {}
    with DeafFirstProxy(ns) as proxy:
        options = SourceOptions.parse(
            {
                "nameServer": proxy.addr,
                "topic": topic,
                "startingOffsets": "earliest",
                "fetchOffset.retryIntervalMs": "10",
            }
        )
        reader = RocketMQStreamReader(options, True)
        try:
            parts = reader.partitions(start, end)
        finally:
            reader.stop()
    assert sorted((p.queue_id, p.start, p.end) for p in parts) == [
        (0, 0, held["broker-a:0"]),
        (1, 0, held["broker-a:1"]),
    ]
    assert proxy.accepted >= 2


def _ends(ns: str, topic: str) -> dict[str, dict[str, int]]:
    """The topic's max offsets as stream offset JSON."""
    from spark import offsets
    from spark.session import BrokerSession

    with BrokerSession(ns) as session:
        bounds = session.min_max_offsets(offsets.list_queues(session, [topic]))
    return offsets.to_json({mq: high for mq, (_, high) in bounds.items()})


def test_a_queue_new_to_the_stream_whose_first_offsets_retention_deleted_is_data_loss(
    pyspark_ready: None, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """Queue 1 is added to the topic after the stream's last batch, and retention deletes its first offsets before the
    stream plans the next one (a query stopped for a while, or slow triggers): the batch started the new queue at its
    first offset held and said nothing of the messages it never read. rocketmq-spark reports it as data loss
    (``rocketmq-spark/src/main/scala/org/apache/spark/sql/rocketmq/RocketMQSource.scala`` ``getBatch``: "Added
    partition ... starts from X instead of 0"), as Kafka's source does: the stream fails, and with
    ``failOnDataLoss=false`` it logs the loss once and reads the queue from its first offset."""
    from pyspark.sql.streaming.datasource import ReadAllAvailable

    from client import Producer
    from spark.data_loss import DataLossError
    from spark.options import SourceOptions
    from spark.stream_reader import RocketMQStreamReader

    async def fill_queue_1() -> None:
        async with Producer("spark-new-queue-pg", ns) as producer:
            info = await producer.publish_info(topic)
            (queue_1,) = [mq for mq in info.message_queues if mq.queue_id == 1]
            for body in RETAINED:
                await producer.send(Message(topic, body), queue=queue_1)

    def next_batch(fail_on_data_loss: str) -> list[bytes]:
        options = SourceOptions.parse({"nameServer": ns, "topic": topic, "failOnDataLoss": fail_on_data_loss})
        reader = RocketMQStreamReader(options, True)
        try:
            parts = reader.partitions(first, reader.latestOffset(first, ReadAllAvailable()))
        finally:
            reader.stop()
        return [bytes(b) for p in parts for batch in reader.read(p) for b in batch.column("body").to_pylist()]

    with retention_cluster(tmp_path) as cluster:
        ns, topic = cluster.namesrv_addr, "SparkNewQueueAged"
        make_topic(ns, topic, 1)
        first = {topic: {"broker-a:0": 0}}  # the stream's last end offset: queue 0, empty
        make_topic(ns, topic, 2)
        anyio.run(fill_queue_1)
        delete_by_retention(cluster)

        with pytest.raises(DataLossError, match=r"queue 1 on broker-a.*offsets \[0, \d+\)"):
            next_batch("true")
        with caplog.at_level(logging.WARNING, logger="spark.data_loss"):
            left = next_batch("false")
        assert [r.name for r in caplog.records if r.name.startswith("spark.")] == ["spark.data_loss"]
        assert 0 < len(left) < 30 and left == RETAINED[-len(left) :]
