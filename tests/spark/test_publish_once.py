"""The sink's exactly-once core without Spark: a task attempt that died part-way is resumed by the next attempt,
which sends only the rows the first did not store; a finished task sends nothing again."""

from __future__ import annotations

import socket
from collections.abc import Iterator
from pathlib import Path

import anyio
import pytest

from client.admin import Admin
from client.errors import TopicRouteNotFoundError
from spark.options import SourceOptions
from spark.session import BrokerSession
from tests.client.helpers import HANG_GUARD, register_dead_broker
from tests.spark.helpers import _forgotten, make_topic, read_topic
from tests.threaded_cluster import ThreadedCluster

SEND_CHUNK = 512  # spark.writer.SEND_CHUNK (checked below)
ROWS = [{"body": f"p{i}".encode(), "tags": "P"} for i in range(SEND_CHUNK * 2 + 100)]


class TaskDied(RuntimeError):
    pass


def _dies_after(n: int) -> Iterator[dict[str, object]]:
    for i, row in enumerate(ROWS):
        if i == n:
            raise TaskDied(f"executor lost after {n} rows")
        yield row


def test_a_task_retried_after_a_partial_send_publishes_only_the_missing_rows(
    pyspark_ready: None, rocketmq: ThreadedCluster
) -> None:
    from spark import writer
    from spark.stream_writer import SEQ_PROPERTY, TXN_PROPERTY, RocketMQStreamWriter

    assert writer.SEND_CHUNK == SEND_CHUNK
    ns, topic = rocketmq.namesrv_addr, "SparkPublishOnce"
    make_topic(ns, topic, 2)
    writer = RocketMQStreamWriter(SourceOptions.parse({"nameServer": ns, "topic": topic}))
    with BrokerSession(ns, producer_group="spark-once-pg") as session:
        with pytest.raises(TaskDied):
            writer.publish_once(session, "query-1", 7, 0, _dies_after(SEND_CHUNK + 50))
        partial = read_topic(ns, topic)
        assert len(partial) == SEND_CHUNK  # the first chunk was stored before the task died

        assert writer.publish_once(session, "query-1", 7, 0, iter(ROWS)) == (len(ROWS) - SEND_CHUNK, SEND_CHUNK)
        assert writer.publish_once(session, "query-1", 7, 0, iter(ROWS)) == (0, len(ROWS))  # done: nothing again
        assert writer.publish_once(session, "query-1", 8, 0, iter(ROWS[:3])) == (3, 0)  # another batch is new

    stored = read_topic(ns, topic)
    assert sorted(m.body for m in stored) == sorted([r["body"] for r in ROWS] + [r["body"] for r in ROWS[:3]])
    seqs = {(m.properties[TXN_PROPERTY], m.properties[SEQ_PROPERTY]) for m in stored}
    assert len(seqs) == len(stored)


def test_a_task_retried_with_its_rows_in_another_order_publishes_each_row_once(
    pyspark_ready: None, rocketmq: ThreadedCluster
) -> None:
    """A write task behind a shuffle (an aggregation, a ``repartition`` by key: the example pipeline's counts) gets
    the same rows on a retry, but not in the same order: Spark marks a shuffle's output UNORDERED
    (``core/src/main/scala/org/apache/spark/rdd/RDD.scala`` ``DeterministicLevel``; reducers fetch map outputs as they
    arrive). The retry used to skip rows by their position in the first attempt, so it dropped rows the first
    attempt never sent and sent again rows it had: a row may be keyed by its position only among equal rows."""
    from spark.stream_writer import RocketMQStreamWriter

    ns, topic = rocketmq.namesrv_addr, "SparkPublishReordered"
    make_topic(ns, topic, 2)
    rows = ROWS[:3] + ROWS  # equal rows are published as often as they occur
    died = SEND_CHUNK + 50

    def first_attempt() -> Iterator[dict[str, object]]:
        yield from rows[:died]
        raise TaskDied(f"executor lost after {died} rows")

    writer = RocketMQStreamWriter(SourceOptions.parse({"nameServer": ns, "topic": topic}))
    with BrokerSession(ns, producer_group="spark-reorder-pg") as session:
        with pytest.raises(TaskDied):
            writer.publish_once(session, "query-o", 4, 0, first_attempt())
        assert len(read_topic(ns, topic)) == SEND_CHUNK
        assert writer.publish_once(session, "query-o", 4, 0, iter(rows[::-1])) == (len(rows) - SEND_CHUNK, SEND_CHUNK)
    assert sorted(m.body for m in read_topic(ns, topic)) == sorted(r["body"] for r in rows)


def test_a_task_retried_after_dying_before_its_first_send_to_a_new_topic_publishes(
    pyspark_ready: None, rocketmq: ThreadedCluster
) -> None:
    """The first attempt marked its start on a topic that did not exist yet (the first send creates it) and died before
    that send: every retry used to look the topic up to resume, fail, and so the query could never go on."""
    from spark.stream_writer import RocketMQStreamWriter

    ns, topic = rocketmq.namesrv_addr, "SparkAutoCreatedLater"  # never created: the first send auto-creates it
    writer = RocketMQStreamWriter(SourceOptions.parse({"nameServer": ns, "topic": topic}))
    rows = ROWS[:20]
    with BrokerSession(ns, producer_group="spark-auto-pg") as session:
        with pytest.raises(TaskDied):
            writer.publish_once(session, "query-r", 3, 0, _dies_after(5))
        assert writer.publish_once(session, "query-r", 3, 0, iter(rows)) == (len(rows), 0)
    assert sorted(m.body for m in read_topic(ns, topic)) == sorted(r["body"] for r in rows)


def test_rows_whose_chunk_passes_4_mib_are_sent_in_smaller_batches(
    pyspark_ready: None, rocketmq: ThreadedCluster
) -> None:
    """The producer refuses a batch body over 4 MiB, as Java's: the writer splits its chunk before that."""
    from client.message import Message
    from spark.writer import send_rows

    ns, topic = rocketmq.namesrv_addr, "SparkBigRows"
    make_topic(ns, topic, 1)
    msgs = [Message(topic, bytes([i]) * (900 << 10)) for i in range(6)]  # 5.3 MiB in all
    with BrokerSession(ns, producer_group="spark-big-pg") as session:
        assert send_rows(session, iter(msgs)) == 6
    assert sorted(m.body[:1] for m in read_topic(ns, topic)) == [bytes([i]) for i in range(6)]


def test_rows_differing_only_in_their_flag_are_not_equal_rows(pyspark_ready: None) -> None:
    """A retried task knows a stored row by a digest of what it sends, and tells equal rows apart by their position
    only: two rows that differ in their flag (a write's ``flag`` column) are not interchangeable, so they must not
    share a digest, or a retry in another order would skip one for the other and send the other twice."""
    from collections import Counter

    from client.message import Message
    from spark.stream_writer import row_seq

    plain = row_seq(Message("T", b"x"), Counter())
    assert plain.endswith(":0")
    assert (
        len({plain, row_seq(Message("T", b"x", flag=1), Counter()), row_seq(Message("T", b"x", flag=2), Counter())})
        == 3
    )


async def _topic_on(namesrv: str, topic: str, broker_addr: str, masters: int) -> None:
    """Create ``topic`` (one queue) on the master at ``broker_addr``; return once ``masters`` masters route it."""
    async with Admin(namesrv) as admin:
        await admin.create_topic(topic, read_queue_nums=1, write_queue_nums=1, broker_addr=broker_addr)
        with anyio.fail_after(HANG_GUARD):
            while True:
                try:
                    if len((await admin.topic_route(topic)).queue_datas) == masters:
                        return
                except TopicRouteNotFoundError:
                    pass
                await anyio.sleep(0.02)


def _closed_port() -> str:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return f"127.0.0.1:{sock.getsockname()[1]}"


def test_a_marker_on_a_master_that_does_not_answer_is_not_taken_for_no_marker(
    pyspark_ready: None, tmp_path: Path
) -> None:
    """A task's markers are on broker-b, which then goes down while the name server still routes it (the commit topic
    is on broker-a too). A replay of the task looked its markers up with the admin's QUERY_MESSAGE, which passes over
    a master that does not answer, as Java's ``MQAdminImpl.queryMessage`` does for ``mqadmin queryMsgByKey``: it found
    no ``done`` and no start marker and published every row again. A lookup that cannot ask every master of the
    commit topic cannot tell "no marker" from "unreachable": the task fails (Spark retries it) and sends nothing."""
    from client.errors import MQClientError
    from remoting.errors import RemotingError
    from spark.stream_writer import RocketMQStreamWriter

    with ThreadedCluster(tmp_path / "cluster") as cluster:
        ns, topic, commits = cluster.namesrv_addr, "SparkMarkersAway", "SparkMarkersAwayCommits"
        make_topic(ns, topic, 1)  # on broker-a alone: broker-b starts next
        addr_b, stop_b = cluster.start_extra_broker("broker-b")
        anyio.run(_topic_on, ns, commits, addr_b, 1)  # the first attempt's markers all go to broker-b
        options = SourceOptions.parse({"nameServer": ns, "topic": topic, "commitTopic": commits})
        writer, rows = RocketMQStreamWriter(options), ROWS[:10]
        with BrokerSession(ns, producer_group="spark-away-pg") as session:
            assert writer.publish_once(session, "query-m", 2, 0, iter(rows)) == (10, 0)

        stop_b()
        anyio.run(_forgotten, ns, "broker-b")
        anyio.run(_topic_on, ns, commits, cluster.broker_addr, 1)
        register_dead_broker(cluster, name="broker-b", addr=_closed_port(), topics=(commits,))
        with BrokerSession(ns, producer_group="spark-away-pg") as session:
            assert {mq.broker_name for mq in session.queues(commits)} == {"broker-a", "broker-b"}
            with pytest.raises((MQClientError, RemotingError)):
                writer.publish_once(session, "query-m", 2, 0, iter(rows))
        assert sorted(m.body for m in read_topic(ns, topic)) == sorted(r["body"] for r in rows)  # none twice
