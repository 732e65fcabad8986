"""The less common ``mqadmin`` commands against RocketMQ 4.9.8's tools (tools/src/main/java/org/apache/rocketmq/
tools/command/**), run as the real CLI against the threaded embedded cluster; each test failed on the code before."""

from __future__ import annotations

import json
from pathlib import Path

import anyio
import pytest
from click.testing import CliRunner, Result

from client import mqadmin_groups
from client.admin import Admin
from client.message import Message
from client.mqadmin import main as mqadmin
from client.producer import Producer
from remoting.client import RemotingClient
from remoting.codec.bodies import ConsumerData, HeartbeatData, MessageQueue, SubscriptionData
from remoting.codec.codes import RequestCode
from remoting.codec.command import request
from tests.client.helpers import create_topic
from tests.threaded_cluster import ThreadedCluster


def _run(*args: str) -> Result:
    return CliRunner().invoke(mqadmin, list(args))


# -- exportMetrics --------------------------------------------------------------------------------------------------


def test_export_metrics_reads_cpu_num_from_the_broker_config(cluster: ThreadedCluster, tmp_path: Path) -> None:
    """ExportMetricsCommand.getRuntimeEnv puts ``cpuNum`` = the broker config's ``clientCallbackExecutorThreads``
    (GET_BROKER_CONFIG); ours wrote null."""
    result = _run("exportMetrics", "-n", cluster.namesrv_addr, "-c", "DefaultCluster", "-f", str(tmp_path))
    assert result.exit_code == 0, result.output
    config = _run("getBrokerConfig", "-n", cluster.namesrv_addr, "-b", cluster.broker_addr, "--json")
    threads = next(r["Value"] for r in json.loads(config.output)["rows"] if r["Key"] == "clientCallbackExecutorThreads")
    report = json.loads((tmp_path / "metrics.json").read_text())["evaluateReport"]["broker-a"]
    assert report["runtimeEnv"]["cpuNum"] == threads


def test_export_metrics_of_an_unknown_cluster_fails(cluster: ThreadedCluster, tmp_path: Path) -> None:
    """ExportMetricsCommand iterates ``getClusterAddrTable().get(clusterName)``: for a cluster the name server does
    not know that is null, a NullPointerException, so the command fails and writes no file; ours wrote an empty
    report and said ``export ... success``."""
    result = _run("exportMetrics", "-n", cluster.namesrv_addr, "-c", "NoSuchCluster", "-f", str(tmp_path))
    assert result.exit_code == 1, result.output
    assert "ExportMetricsCommand command failed" in result.stderr
    assert "success" not in result.stdout and not (tmp_path / "metrics.json").exists()


def test_export_metadata_of_a_broker_keeps_its_tables_data_version(cluster: ThreadedCluster, tmp_path: Path) -> None:
    """ExportMetadataCommand -b writes ``JSON.toJSONString(wrapper, true)`` of getUserTopicConfig's
    TopicConfigSerializeWrapper and getUserSubscriptionGroup's SubscriptionGroupWrapper: the broker's answer with the
    system entries removed, its ``dataVersion`` kept beside the table. Ours wrote the table alone."""
    ns, addr = cluster.namesrv_addr, cluster.broker_addr
    assert _run("updateSubGroup", "-n", ns, "-b", addr, "-g", "export-version-g").exit_code == 0
    versions = {}
    for flag, name in (("-t", "topic.json"), ("-g", "subscriptionGroup.json")):
        result = _run("exportMetadata", "-n", ns, "-b", addr, flag, "-f", str(tmp_path))
        assert result.exit_code == 0, result.output
        versions[name] = json.loads((tmp_path / name).read_text()).get("dataVersion")

    async def topic_version() -> object:
        async with Admin(ns) as admin:
            return (await admin.all_topic_config(addr)).data_version.to_json()

    assert versions["topic.json"] == anyio.run(topic_version)
    group_version = versions["subscriptionGroup.json"]
    assert group_version is not None and group_version["counter"] > 0, group_version  # updateSubGroup bumped it


# -- startMonitoring ------------------------------------------------------------------------------------------------


async def _store_times(ns: str, mq: MessageQueue) -> list[int]:
    async with Admin(ns) as admin:
        return [m.store_timestamp for m in (await admin.pull(mq, 0, 32)).messages]


@pytest.mark.anyio
async def test_start_monitoring_reports_online_groups_with_java_s_delay(
    cluster: ThreadedCluster, monkeypatch: pytest.MonkeyPatch
) -> None:
    """MonitorService.reportUndoneMsgs (tools/src/main/java/org/apache/rocketmq/tools/monitor/MonitorService.java)
    reports a group only when examineConsumerConnectionInfo finds it online, and computeUndoneMsgs' delay is, over
    the queues whose last consumed message has a store time, the newest message's store time (GET_MAX_OFFSET, then a
    pull of maxOffset - 1) minus it. Ours reported the offline group too and took QUERY_CONSUME_TIME_SPAN's
    now - store time of the next message. MonitorConfig.roundInterval is 60 s, not 20 (its first round's delay)."""
    monkeypatch.setattr(mqadmin_groups, "MONITOR_FIRST_ROUND", 0.0)  # Java's 20 s: test_mqadmin_monitor_schedule.py
    ns, addr = cluster.namesrv_addr, cluster.broker_addr
    await create_topic(ns, "MonitorTopic", queues=1)
    for group in ("mon-online", "mon-offline"):
        await create_topic(ns, f"%RETRY%{group}", queues=1)
    async with Producer("mon-pg", ns) as producer:
        for i in range(5):
            await producer.send(Message("MonitorTopic", f"{i}".encode()))
            await anyio.sleep(0.05)  # distinct store times
    mq = MessageQueue("MonitorTopic", "broker-a", 0)
    async with Admin(ns) as admin:
        for group in ("mon-online", "mon-offline"):
            await admin.update_consumer_offset(addr, group, mq, 2)
    times = await _store_times(ns, mq)
    sub = SubscriptionData("MonitorTopic", "*")
    beat = HeartbeatData("10.0.0.9@mon", consumer_data_set=(ConsumerData("mon-online", subscription_data_set=(sub,)),))
    async with RemotingClient() as online:
        assert (await online.invoke(addr, request(RequestCode.HEART_BEAT, body=beat.encode()), 5)).code == 0
        result = await anyio.to_thread.run_sync(lambda: _run("startMonitoring", "-n", ns, "--rounds", "1"))
    assert result.exit_code == 0, result.output
    lines = [line for line in result.stdout.splitlines() if "topic=MonitorTopic" in line]
    expected = (
        "reportUndoneMsgs: UndoneMsgs [consumerGroup=mon-online, topic=MonitorTopic, undoneMsgsTotal=3, "
        f"undoneMsgsSingleMQ=3, undoneMsgsDelayTimeMills={times[4] - times[1]}]"
    )
    assert lines == [expected], result.output
    assert mqadmin_groups.MONITOR_ROUND == 60.0


def test_start_monitoring_goes_on_past_a_round_that_fails(monkeypatch: pytest.MonkeyPatch) -> None:
    """MonitorService.start schedules doMonitorWork in a try/catch that logs the failure ("doMonitorWork
    Exception") and runs the next round: a name server that does not answer does not end the monitor. Ours ended
    the command at the first round's topic list (exit 1)."""
    monkeypatch.setattr(mqadmin_groups, "MONITOR_ROUND", 0.01)
    monkeypatch.setattr(mqadmin_groups, "MONITOR_FIRST_ROUND", 0.0)
    result = _run("startMonitoring", "-n", "127.0.0.1:1", "--rounds", "2")
    assert result.exit_code == 0, result.output
    assert result.stderr.count("doMonitorWork") == 2, result.stderr
