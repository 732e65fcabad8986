"""The connector's ``accessKey`` / ``secretKey`` options against a broker with ACL on: a batch write and a batch read
signed with an account's keys go through; the same read without them is refused with RocketMQ's ACL error; a
streaming write signed by an account without the admin right creates its commit topic all the same."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import pytest

from client.admin import Admin
from client.config import ClientConfig
from client.errors import TopicRouteNotFoundError
from spark.options import OptionError, SourceOptions
from tests.acl.conftest import PLAIN_ACL
from tests.threaded_cluster import ThreadedCluster

KEYS = {"accessKey": "spark-job", "secretKey": "spark-secret"}
ACCOUNT = "  - {accessKey: spark-job, secretKey: spark-secret, defaultTopicPerm: PUB|SUB, defaultGroupPerm: SUB}\n"


@pytest.fixture(scope="module")
def acl_rocketmq(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ThreadedCluster]:
    home = tmp_path_factory.mktemp("spark-acl-home")
    (home / "conf").mkdir()
    (home / "conf" / "plain_acl.yml").write_text(PLAIN_ACL + ACCOUNT)
    cluster = ThreadedCluster(home / "cluster", acl_enable=True, rocketmq_home=str(home)).start()
    try:
        yield cluster
    finally:
        cluster.stop()


async def _create_topic(ns: str, topic: str) -> None:
    config = ClientConfig(namesrv_addr=ns, access_key="rocketmq2", secret_key="12345678")
    async with Admin(config=config) as admin:
        await admin.create_topic(topic, read_queue_nums=2, write_queue_nums=2)
        with anyio.fail_after(30):  # the broker registers the new topic with the name server asynchronously
            while True:
                try:
                    if (await admin.topic_route(topic)).queue_datas:
                        return
                except TopicRouteNotFoundError:
                    pass
                await anyio.sleep(0.05)


# Three Spark jobs and a second cluster; run alone, this test also pays the JVM's start.
@pytest.mark.timeout(300)
def test_keys_in_the_options_sign_writes_and_reads(spark: Any, acl_rocketmq: ThreadedCluster, tmp_path: Path) -> None:
    ns = acl_rocketmq.namesrv_addr
    anyio.run(_create_topic, ns, "SparkAcl")
    rows = [("SparkAcl", f"m{i}".encode(), f"k{i}") for i in range(12)]
    frame = spark.createDataFrame(rows, "topic string, body binary, keys string")
    frame.write.format("rocketmq").option("nameServer", ns).options(**KEYS).mode("append").save()
    read = spark.read.format("rocketmq").option("nameServer", ns).option("topic", "SparkAcl").options(**KEYS).load()
    assert sorted(r.keys for r in read.select("keys").collect()) == sorted(k for _, _, k in rows)
    unsigned = spark.read.format("rocketmq").option("nameServer", ns).option("topic", "SparkAcl").load()
    with pytest.raises(Exception, match="No accessKey is configured"):
        unsigned.collect()


@pytest.mark.timeout(300)
def test_a_stream_write_signed_by_a_publishing_account_needs_no_admin_right(
    spark: Any, acl_rocketmq: ThreadedCluster, tmp_path: Path
) -> None:
    """The account is not admin (``defaultTopicPerm: PUB|SUB``). The sink's first task created the commit topic with
    UPDATE_AND_CREATE_TOPIC, which only an admin may send: the write failed with RocketMQ's "Need admin permission"
    until an operator created RMQ_SPARK_SINK_COMMITS. Refused, it now lets the first marker's send auto-create the
    topic (``autoCreateTopicEnable``), which a publishing account may do."""
    ns = acl_rocketmq.namesrv_addr
    for topic in ("SparkAclSrc", "SparkAclDst"):
        anyio.run(_create_topic, ns, topic)
    frame = spark.createDataFrame([("SparkAclSrc", f"s{i}") for i in range(5)], "topic string, body string")
    frame.write.format("rocketmq").option("nameServer", ns).options(**KEYS).mode("append").save()
    query = (
        spark.readStream.format("rocketmq").option("nameServer", ns).option("topic", "SparkAclSrc")
        .option("startingOffsets", "earliest").options(**KEYS).load().select("body")
        .writeStream.format("rocketmq").option("nameServer", ns).option("topic", "SparkAclDst").options(**KEYS)
        .option("checkpointLocation", str(tmp_path / "checkpoint")).start()
    )  # fmt: skip
    try:
        query.processAllAvailable()
    finally:
        query.stop()
    read = spark.read.format("rocketmq").option("nameServer", ns).option("topic", "SparkAclDst").options(**KEYS)
    assert sorted(bytes(r.body) for r in read.load().collect()) == [f"s{i}".encode() for i in range(5)]


def test_a_key_without_its_secret_is_an_option_error() -> None:
    with pytest.raises(OptionError, match="accessKey and secretKey go together"):
        SourceOptions.parse({"nameServer": "127.0.0.1:9876", "accessKey": "spark-job"})
    with pytest.raises(OptionError, match="option tls"):
        SourceOptions.parse({"nameServer": "127.0.0.1:9876", "tls": "maybe"})
    config = SourceOptions.parse({"nameServer": "127.0.0.1:9876", **KEYS, "tls": "TRUE"}).client_config()
    assert (config.access_key, config.secret_key, config.tls) == ("spark-job", "spark-secret", True)
