"""mqadmin statsAll, brokerConsumeStats, updateBrokerConfig and getBrokerConfig against the embedded cluster (the
rates themselves are checked in virtual time in tests/processors/test_stats_and_offset_moved.py)."""

from __future__ import annotations

import json
from typing import Any

import anyio
import pytest
from click.testing import CliRunner

from client.admin import Admin
from client.consumer.lite_pull import LitePullConsumer
from client.errors import MQBrokerError
from client.message import Message
from client.mqadmin import main as mqadmin
from client.producer import Producer
from remoting.codec.bodies import MessageQueue
from tests.client.helpers import create_topic
from tests.threaded_cluster import ThreadedCluster


def _cli(*args: str) -> Any:
    result = CliRunner().invoke(mqadmin, [*args, "--json"], catch_exceptions=False)
    assert result.exit_code == 0, result.output
    return json.loads(result.output)


@pytest.mark.anyio
async def test_stats_commands_show_groups_lag_and_the_brokers_stats_items(cluster: ThreadedCluster) -> None:
    ns, addr = cluster.namesrv_addr, cluster.broker_addr
    await create_topic(ns, "StatsCli", queues=1)
    async with Producer("pg-stats", ns) as producer:
        for i in range(6):
            await producer.send(Message("StatsCli", f"{i}".encode()))
    mq = MessageQueue("StatsCli", "broker-a", 0)
    async with LitePullConsumer("cg-stats", ns, auto_commit=False, pull_batch_size=2) as consumer:
        await consumer.assign([mq])
        with anyio.fail_after(20):
            taken = 0
            while taken < 2:
                taken += len(await consumer.poll(timeout=10))
        await consumer.commit([mq])
        async with Admin(ns) as admin:
            with anyio.fail_after(20):
                while (await admin.consumer_progress("cg-stats", "StatsCli"))[mq].consumer_offset == 0:
                    await anyio.sleep(0.05)
            assert await admin.topic_consumed_by("StatsCli") == ["cg-stats"]
            # The sampler turns the stored messages into a TOPIC_PUT_NUMS item within a second.
            with anyio.fail_after(20):
                while True:
                    try:
                        await admin.view_broker_stats_data(addr, "TOPIC_PUT_NUMS", "StatsCli")
                        break
                    except MQBrokerError:
                        await anyio.sleep(0.1)
            lag = 6 - (await admin.consumer_progress("cg-stats", "StatsCli"))[mq].consumer_offset
    run = anyio.to_thread.run_sync
    stats = await run(_cli, "statsAll", "-n", ns, "-t", "StatsCli")
    assert [(r["Topic"], r["Consumer Group"], r["Accumulation"]) for r in stats["rows"]] == [
        ("StatsCli", "cg-stats", lag)
    ]
    consume = await run(_cli, "brokerConsumeStats", "-n", ns, "-b", addr)
    rows = [r for r in consume["rows"] if r["Topic"] == "StatsCli"]
    assert [(r["Group"], r["QID"], r["Broker Offset"], r["Diff"]) for r in rows] == [("cg-stats", 0, 6, lag)]
    assert consume["Diff Total"] >= lag


def test_broker_config_commands_change_and_show_a_setting(cluster: ThreadedCluster) -> None:
    ns, addr = cluster.namesrv_addr, cluster.broker_addr
    before = {r["Key"]: r["Value"] for r in _cli("getBrokerConfig", "-n", ns, "-b", addr)["rows"]}
    assert before["maxMessageSize"] == str(4 * 1024 * 1024)
    assert _cli("updateBrokerConfig", "-n", ns, "-b", addr, "-k", "maxMessageSize", "-v", "65536")["brokers"] == [addr]
    after = {r["Key"]: r["Value"] for r in _cli("getBrokerConfig", "-n", ns, "-c", "DefaultCluster")["rows"]}
    assert after["maxMessageSize"] == "65536"


def test_clean_unused_topic_command_asks_every_broker(cluster: ThreadedCluster) -> None:
    done = _cli("cleanUnusedTopic", "-n", cluster.namesrv_addr, "-c", "DefaultCluster")
    assert done["ok"] and done["brokers"] == [cluster.broker_addr]


#: Broker settings put in this order into Java 8's ``java.util.Properties`` (a ``Hashtable``: 11 buckets, grown to
#: 23 and 47), and the order its ``entrySet()`` hands them back, as jshell printed them for ``java.util.Hashtable``.
_PUT = [
    "brokerClusterName",
    "brokerName",
    "brokerId",
    "namesrvAddr",
    "listenPort",
    "brokerIP1",
    "brokerIP2",
    "storePathRootDir",
    "storePathCommitLog",
    "mappedFileSizeCommitLog",
    "mappedFileSizeConsumeQueue",
    "flushIntervalCommitLog",
    "deleteWhen",
    "fileReservedTime",
    "brokerRole",
    "flushDiskType",
    "maxMessageSize",
    "sendMessageThreadPoolNums",
    "pullMessageThreadPoolNums",
    "autoCreateTopicEnable",
    "autoCreateSubscriptionGroup",
    "brokerPermission",
    "defaultTopicQueueNums",
    "enablePropertyFilter",
    "traceTopicEnable",
    "aclEnable",
    "haListenPort",
    "haMasterAddress",
    "transientStorePoolEnable",
    "slaveReadEnable",
    "longPollingEnable",
    "shortPollingTimeMills",
    "notifyConsumerIdsChangedEnable",
    "highSpeedMode",
    "commercialEnable",
]
_HASHTABLE_ORDER = [
    "highSpeedMode",
    "deleteWhen",
    "flushIntervalCommitLog",
    "aclEnable",
    "longPollingEnable",
    "fileReservedTime",
    "namesrvAddr",
    "autoCreateSubscriptionGroup",
    "autoCreateTopicEnable",
    "pullMessageThreadPoolNums",
    "flushDiskType",
    "commercialEnable",
    "haMasterAddress",
    "brokerRole",
    "brokerName",
    "sendMessageThreadPoolNums",
    "enablePropertyFilter",
    "haListenPort",
    "brokerId",
    "maxMessageSize",
    "storePathCommitLog",
    "mappedFileSizeCommitLog",
    "brokerPermission",
    "shortPollingTimeMills",
    "defaultTopicQueueNums",
    "slaveReadEnable",
    "transientStorePoolEnable",
    "brokerIP2",
    "storePathRootDir",
    "brokerIP1",
    "notifyConsumerIdsChangedEnable",
    "traceTopicEnable",
    "mappedFileSizeConsumeQueue",
    "brokerClusterName",
    "listenPort",
]


def test_java_properties_order_follows_java_8_s_hashtable() -> None:
    """MixAll.string2Properties loads the broker's config into a ``java.util.Properties``, in Java 8 a
    ``Hashtable`` (bucket ``(hash & 0x7FFFFFFF) % length``, new keys at a chain's head, grown to ``2n + 1`` once
    it holds 3/4, enumerated from the last bucket down)."""
    from client.mqadmin_support import java_properties_order

    assert java_properties_order(_PUT) == _HASHTABLE_ORDER


def test_get_broker_config_prints_the_keys_in_java_s_properties_order(cluster: ThreadedCluster) -> None:
    """GetBrokerConfigCommand.getAndPrint prints ``properties.entrySet()`` of the Properties MixAll.string2Properties
    loaded the broker's answer into, in that table's order (tools/src/main/java/org/apache/rocketmq/tools/command/
    broker/GetBrokerConfigCommand.java). Ours printed the keys sorted."""
    from client.mqadmin_support import java_properties_order

    ns, addr = cluster.namesrv_addr, cluster.broker_addr

    async def sent() -> list[str]:
        async with Admin(ns) as admin:
            return list(await admin.broker_config(addr))  # the body's keys, in the order the broker wrote them

    expected = java_properties_order(anyio.run(sent))
    assert expected != sorted(expected)
    result = CliRunner().invoke(mqadmin, ["getBrokerConfig", "-n", ns, "-b", addr], catch_exceptions=False)
    assert result.exit_code == 0, result.output
    printed = [line.split("=  ", 1)[0].rstrip() for line in result.stdout.splitlines() if "=  " in line]
    assert printed == expected
    assert [r["Key"] for r in _cli("getBrokerConfig", "-n", ns, "-b", addr)["rows"]] == expected
