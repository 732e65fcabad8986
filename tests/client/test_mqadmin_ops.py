"""The ``mqadmin`` commands beyond tests/client/test_admin.py and test_mqadmin_stats.py, against the embedded cluster:
RocketMQ's lookup rules (any case, aliases, ``help``, ``NAMESRV_ADDR``), and each remaining 4.9.8 subcommand with its
RocketMQ output (docs/mqadmin.md maps every command to its test)."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import anyio
import pytest
from click.testing import CliRunner, Result

from client import mqadmin_groups
from client.admin import Admin
from client.consumer.listener import ConsumeConcurrentlyStatus
from client.consumer.push import PushConsumer
from client.message import Message, MessageExt
from client.mqadmin import main as mqadmin
from client.producer import Producer
from remoting.codec.bodies import MessageQueue
from remoting.codec.bodies.broker_metadata import SubscriptionGroupConfig
from tests.client.helpers import create_topic, wait_until
from tests.threaded_cluster import ThreadedCluster


def _run(*args: str, env: dict[str, str] | None = None) -> Result:
    return CliRunner().invoke(mqadmin, list(args), env=env, catch_exceptions=False)


def _cli(*args: str, env: dict[str, str] | None = None) -> Any:
    result = _run(*args, "--json", env=env)
    assert result.exit_code == 0, result.output
    return json.loads(result.output)


def _text(*args: str) -> str:
    result = _run(*args)
    assert result.exit_code == 0, result.output
    return result.output


def test_commands_are_found_in_any_case_by_alias_and_listed_and_n_comes_from_namesrv_addr(
    cluster: ThreadedCluster,
) -> None:
    listing = _text()
    assert listing.startswith("The most commonly used mqadmin commands are:\n")
    names = [line.split()[0] for line in listing.splitlines()[1:] if line.startswith("   ")]
    names_of_5 = ("setConsumeMode", "haStatus")  # 5.3.3 commands on top of 4.9.8's 56 (with ACL)
    assert len(names) == 58 and "queryMsgTraceById" in names and set(names_of_5) <= set(names) and "help" not in names
    assert names[names.index("updateSubGroup") + 1] == "setConsumeMode"  # 5.3.3's, after updateSubGroup
    assert "See 'mqadmin help <command>' for more information on a specific command." in listing
    help_text = _text("help", "updatetopic")
    assert "-t, --topic" in help_text and help_text.startswith("Usage: main updateTopic [OPTIONS]")  # once "main"
    unknown = _run("noSuchCommand")
    assert (unknown.exit_code, unknown.output) == (1, "The sub command noSuchCommand not exist.\n")
    env = {"NAMESRV_ADDR": cluster.namesrv_addr}
    assert {"Cluster": "DefaultCluster"} in _cli("TOPICCLUSTERLIST", "-t", "TBW102", env=env)["rows"]
    untraced = _run("QueryMsgTraceById", "-i", "nothing", env=env)  # found by alias; nothing traced fails
    assert untraced.exit_code == 1 and "but no message." in untraced.output
    missing = _run("topicList", env={"NAMESRV_ADDR": ""})
    assert missing.exit_code == 1 and "NAMESRV_ADDR" in missing.output
    required = _run("updateKvConfig", "-n", cluster.namesrv_addr, "-s", "ns")
    assert required.exit_code == 2 and "Missing option '-k'" in required.output


def test_topic_commands_perm_order_conf_and_allocation(cluster: ThreadedCluster) -> None:
    ns, addr = cluster.namesrv_addr, cluster.broker_addr
    anyio.run(create_topic, ns, "OpsTopic", 4)
    changed = _cli("updateTopicPerm", "-n", ns, "-t", "OpsTopic", "-b", addr, "-p", "4")
    assert changed["lines"][0] == f"update topic perm from 6 to 4 in {addr} success."
    conf = _cli("updateOrderConf", "-n", ns, "-t", "OpsTopic", "-m", "put", "-v", "broker-a:4")
    assert conf["lines"] == ["update orderConf success. topic=[OpsTopic], orderConf=[broker-a:4]"]
    got = _cli("updateOrderConf", "-n", ns, "-t", "OpsTopic", "-m", "get")
    assert got["lines"] == ["get orderConf success. topic=[OpsTopic], orderConf=[broker-a:4] "]
    deleted = _cli("updateOrderConf", "-n", ns, "-t", "OpsTopic", "-m", "delete")
    assert deleted["lines"] == ["delete orderConf success. topic=[OpsTopic]"]
    allocation = _cli("allocateMQ", "-n", ns, "-t", "OpsTopic", "-i", "10.0.0.1,10.0.0.2")["result"]
    # Java's tool leaves the queues in its HashSet's order, 3 2 1 0 for OpsTopic (test_mqadmin_output.py)
    assert [[q["queueId"] for q in allocation[ip]] for ip in ("10.0.0.1", "10.0.0.2")] == [[3, 2], [1, 0]]
    ordered = _cli("updateTopic", "-n", ns, "-t", "OrderedTopic", "-b", addr, "-o", "true", "-r", "2", "-w", "2")
    assert "set broker orderConf. isOrder=true, orderConf=[broker-a:2]" in ordered["lines"]


def test_update_order_conf_get_of_a_topic_without_one_fails(cluster: ThreadedCluster) -> None:
    """UpdateOrderConfCommand ``-m get`` reads the value with MQClientAPIImpl.getKVConfigValue, which throws
    MQClientException with the name server's QUERY_NOT_FOUND code and remark when it has none
    (client/src/main/java/org/apache/rocketmq/client/impl/MQClientAPIImpl.java): the command fails. Ours printed
    ``orderConf=[null]`` and succeeded."""
    ns = cluster.namesrv_addr
    result = CliRunner().invoke(mqadmin, ["updateOrderConf", "-n", ns, "-t", "NoOrderConf", "-m", "get"])
    assert result.exit_code == 1, result.output
    assert "get orderConf success" not in result.output
    assert "UpdateOrderConfCommand command failed" in result.output
    assert "No config item, Namespace: ORDER_TOPIC_CONFIG Key: NoOrderConf" in result.output


def test_topic_list_prints_only_the_topic_names(cluster: ThreadedCluster) -> None:
    """Java TopicListSubCommand without -c: ``printf("%s%n", topic)`` per topic and no header (4.9.8 and 5.3.3), so
    a script reading the lines gets no topic named ``#Topic``."""
    anyio.run(create_topic, cluster.namesrv_addr, "ListedTopic", 1)
    lines = _text("topicList", "-n", cluster.namesrv_addr).splitlines()
    assert "ListedTopic" in lines
    assert "#Topic" not in lines, lines[:3]


@pytest.mark.anyio
async def test_group_commands_status_config_and_producers(
    cluster: ThreadedCluster, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    ns, addr = cluster.namesrv_addr, cluster.broker_addr
    await create_topic(ns, "GroupOps", queues=2)
    seen: list[MessageExt] = []

    async def listener(msgs: list[MessageExt]) -> ConsumeConcurrentlyStatus:
        seen.extend(msgs)
        return ConsumeConcurrentlyStatus.CONSUME_SUCCESS

    consumer = PushConsumer("ops-cg", ns)
    consumer.subscribe("GroupOps")
    consumer.register_message_listener(listener)
    run = anyio.to_thread.run_sync
    async with Producer("ops-pg", ns) as producer, consumer:
        await producer.send(Message("GroupOps", b"one"))
        await wait_until(lambda: len(seen) == 1)
        await consumer.persist_offsets()  # consumerProgress lists the queues a group has committed offsets on
        producers = await run(_cli, "producer", "-n", ns, "-b", addr)
        assert [r["clientId"] for r in producers["rows"] if r["group"] == "ops-pg"] == [producer.instance.client_id]
        import os

        cwd = os.getcwd()
        os.chdir(tmp_path)
        try:
            status = await run(_cli, "consumerStatus", "-n", ns, "-g", "ops-cg")
        finally:
            os.chdir(cwd)
        (row,) = status["rows"]
        assert row["ClientId"] == consumer.instance.client_id and row["Version"] == "V4_9_8"
        assert "#Consumer Subscription#" in (tmp_path / row["ConsumerRunningInfoFile"]).read_text()
        assert "Rebalance OK" in " ".join(status["lines"])
        one = await run(_text, "consumerStatus", "-n", ns, "-g", "ops-cg", "-i", consumer.instance.client_id)
        assert "#Consumer MQ Detail#" in one and "GroupOps" in one
        progress = await run(_cli, "consumerProgress", "-n", ns, "-g", "ops-cg", "-s", "true")
        assert {r["Client IP"] for r in progress["rows"] if r["Topic"] == "GroupOps"} == {
            consumer.instance.client_id.split("@")[0]
        }
        groups = await run(_cli, "consumerProgress", "-n", ns)
        assert any(r["Group"] == "ops-cg" and r["Type"] == "PUSH" for r in groups["rows"])
        monkeypatch.setattr(mqadmin_groups, "MONITOR_FIRST_ROUND", 0.0)  # not Java's 20 s
        monitored = await run(_cli, "startMonitoring", "-n", ns, "--rounds", "1")  # an online group's report
        assert any("consumerGroup=ops-cg, topic=GroupOps, undoneMsgsTotal=0" in line for line in monitored["lines"])
    config = await run(_cli, "getConsumerConfig", "-n", ns, "-g", "ops-cg")
    assert {"broker": "broker-a", "key": "groupName", "value": "ops-cg"} in config["rows"]


@pytest.mark.anyio
async def test_offset_commands_skip_clone_and_query_the_consume_queue(cluster: ThreadedCluster) -> None:
    ns, addr = cluster.namesrv_addr, cluster.broker_addr
    await create_topic(ns, "OffsetOps", queues=1)
    async with Producer("offset-pg", ns) as producer:
        for i in range(5):
            await producer.send(Message("OffsetOps", f"{i}".encode(), tags="T"))
    mq = MessageQueue("OffsetOps", "broker-a", 0)
    async with Admin(ns) as admin:
        await admin.update_consumer_offset(addr, "src-g", mq, 2)
    run = anyio.to_thread.run_sync
    cloned = await run(_cli, "cloneGroupOffset", "-n", ns, "-s", "src-g", "-d", "dst-g", "-t", "OffsetOps")
    assert cloned["lines"] == ["clone group offset success. srcGroup[src-g], destGroup=[dst-g], topic[OffsetOps]"]
    skipped = await run(_cli, "skipAccumulatedMessage", "-n", ns, "-g", "dst-g", "-t", "OffsetOps")
    assert [(r["queueId"], r["consumerOffset"], r["rollbackOffset"]) for r in skipped["rows"]] == [(0, 2, 5)]
    rolled = await run(_cli, "resetOffsetByTime", "-n", ns, "-g", "dst-g", "-t", "OffsetOps", "-s", "0")
    assert [r["rollbackOffset"] for r in rolled["rows"]] == [0]
    async with Admin(ns) as admin:
        assert (await admin.consumer_progress("dst-g", "OffsetOps"))[mq].consumer_offset == 0
    cq = await run(_cli, "queryCq", "-n", ns, "-t", "OffsetOps", "-q", "0", "-i", "1", "-c", "2")
    assert [r["idx"] for r in cq["rows"]] == [1, 2] and all(r["physicSize"] > 0 for r in cq["rows"])
    assert "Queue data: \nmax: 5, min: 0" in "\n".join(cq["lines"])


@pytest.mark.anyio
@pytest.mark.broker(use_server_side_reset_offset=True)
async def test_reset_offset_by_time_resets_one_queue_with_b_q_and_o_and_every_queue_with_no_consumer_online(
    cluster: ThreadedCluster,
) -> None:
    """RocketMQ 5.3.3's ``resetOffsetByTime -b -q [-o]`` commits one queue of one broker (UPDATE_CONSUMER_OFFSET) and
    has the broker reset it (INVOKE_BROKER_TO_RESET_OFFSET naming the queue and offset), the offset searched at the
    time without ``-o``; a broker resetting offsets itself (``useServerSideResetOffset``) answers a reset of every
    queue with the table, no consumer online (tools/.../command/offset/ResetOffsetByTimeCommand.java)."""
    ns, addr = cluster.namesrv_addr, cluster.broker_addr
    await create_topic(ns, "ResetOneQueue", queues=2)
    async with Producer("reset-one-pg", ns) as producer:
        for queue_id in (0, 1):
            for i in range(4):
                await producer.send(
                    Message("ResetOneQueue", b"%d" % i), queue=MessageQueue("ResetOneQueue", "broker-a", queue_id)
                )
    q0, q1 = (MessageQueue("ResetOneQueue", "broker-a", q) for q in (0, 1))
    async with Admin(ns) as admin:
        await admin.create_subscription_group(SubscriptionGroupConfig("reset-one-g"))
        for mq in (q0, q1):
            await admin.update_consumer_offset(addr, "reset-one-g", mq, 4)
    run = anyio.to_thread.run_sync
    base = ("resetOffsetByTime", "-n", ns, "-g", "reset-one-g", "-t", "ResetOneQueue")
    before = int(time.time() * 1000)
    one = await run(_cli, *base, "-s", "now", "-b", addr, "-q", "1", "-o", "2")
    after = int(time.time() * 1000)
    start, now_ms = one["lines"][0].rsplit("timestamp(long)[", 1)
    assert start == (
        f"start reset consumer offset by specified, group[reset-one-g], topic[ResetOneQueue], queueId[1], "
        f"broker[{addr}], timestamp(string)[now], "
    )
    assert before <= int(now_ms.rstrip("]")) <= after  # 5.3.3: ``now`` is System.currentTimeMillis()
    assert one["lines"][1:] == ["reset consumer offset to 2"]
    async with Admin(ns) as admin:
        progress = await admin.consumer_progress("reset-one-g", "ResetOneQueue")
        assert [progress[mq].consumer_offset for mq in (q0, q1)] == [4, 2]
    searched = await run(_cli, *base, "-s", "0", "-b", addr, "-q", "0")
    assert searched["lines"][-1] == "reset consumer offset to 0"  # 5.3.3 resets nothing for 0; ours does
    async with Admin(ns) as admin:
        assert (await admin.consumer_progress("reset-one-g", "ResetOneQueue"))[q0].consumer_offset == 0
    await run(_cli, *base, "-s", "now")  # every queue to its end, on the broker: no consumer online needed
    async with Admin(ns) as admin:
        progress = await admin.consumer_progress("reset-one-g", "ResetOneQueue")
        assert [progress[mq].consumer_offset for mq in (q0, q1)] == [4, 4]


@pytest.mark.anyio
async def test_message_commands_print_and_probe(cluster: ThreadedCluster) -> None:
    ns = cluster.namesrv_addr
    await create_topic(ns, "MsgOps", queues=2)
    async with Producer("msg-pg", ns) as producer:
        sent = [
            await producer.send(Message("MsgOps", f"body-{i}".encode(), tags="A" if i % 2 else "B")) for i in range(4)
        ]
    run = anyio.to_thread.run_sync
    unique = await run(_cli, "queryMsgByUniqueKey", "-n", ns, "-t", "MsgOps", "-i", sent[0].msg_id)
    assert [m["Body"] for m in unique["messages"]] == ["body-0"]
    printed = await run(_cli, "printMsg", "-n", ns, "-t", "MsgOps", "-s", "A")
    assert sorted(r["BODY"] for r in printed["rows"]) == ["body-1", "body-3"]
    queue = str(sent[0].queue_id)
    by_queue = await run(_cli, "printMsgByQueue", "-n", ns, "-t", "MsgOps", "-a", "broker-a", "-i", queue, "-f", "true")
    assert by_queue["rows"] and all("Tag" in r for r in by_queue["rows"])
    text = await run(_text, "printMsg", "-n", ns, "-t", "MsgOps", "-d", "false")
    assert "BODY: NOT PRINT BODY" in text and "minOffset=0, maxOffset=" in text
    rt = await run(_cli, "checkMsgSendRT", "-n", ns, "-t", "MsgOps", "-a", "4", "-s", "16")
    assert [r["Send Result"] for r in rt["rows"]] == [True] * 4
    assert [r["QID"] for r in rt["rows"]] == [0, 1, 0, 1]
    status = await run(_cli, "sendMsgStatus", "-n", ns, "-b", "broker-a", "-c", "3")
    assert [r["status"] for r in status["rows"]] == ["SEND_OK"] * 3
    cluster_rt = await run(_cli, "clusterRT", "-n", ns, "-a", "3", "--rounds", "1")
    assert [(r["Cluster Name"], r["successCount"]) for r in cluster_rt["rows"]] == [("DefaultCluster", 3)]


def test_name_server_commands_kv_permissions_and_settings(cluster: ThreadedCluster) -> None:
    ns = cluster.namesrv_addr
    assert _cli("updateKvConfig", "-n", ns, "-s", "myns", "-k", "k", "-v", "v1")["ok"]
    assert anyio.run(_kv, ns) == "v1"
    assert _cli("deleteKvConfig", "-n", ns, "-s", "myns", "-k", "k")["ok"]
    assert anyio.run(_kv, ns) is None
    wiped = _cli("wipeWritePerm", "-n", ns, "-b", "broker-a")["rows"]
    assert wiped[0]["ok"] and wiped[0]["topics"] > 0
    added = _cli("addWritePerm", "-n", ns, "-b", "broker-a")["rows"]
    assert added[0]["ok"] and added[0]["topics"] == wiped[0]["topics"]
    assert _cli("updateNamesrvConfig", "-n", ns, "-k", "orderMessageEnable", "-v", "true")["ok"]
    configs = {r["key"]: r["value"] for r in _cli("getNamesrvConfig", "-n", ns)["rows"]}
    assert configs["orderMessageEnable"] == "true"


def test_update_namesrv_config_trims_and_prints_as_java(cluster: ThreadedCluster) -> None:
    """UpdateNamesrvConfigCommand (tools/src/main/java/org/apache/rocketmq/tools/command/namesrv/
    UpdateNamesrvConfigCommand.java, 4.9.8) trims ``-k`` and ``-v``, and prints the server list only when ``-n`` named
    it (NAMESRV_ADDR reaches the client's config instead). Ours sent `` orderMessageEnable`` as a key the name server
    does not have, and printed NAMESRV_ADDR's servers as if ``-n`` had named them."""
    ns = cluster.namesrv_addr
    output = _run("updateNamesrvConfig", "-k", " orderMessageEnable ", "-v", " true ", env={"NAMESRV_ADDR": ns}).output
    assert output == "update name server config success!\norderMessageEnable : true\n"
    configs = {r["key"]: r["value"] for r in _cli("getNamesrvConfig", "-n", ns)["rows"]}
    assert configs["orderMessageEnable"] == "true"
    assert _text("updateNamesrvConfig", "-n", ns, "-k", "orderMessageEnable", "-v", "false") == (
        f"update name server config success![{ns}]\norderMessageEnable : false\n"
    )


async def _kv(ns: str) -> str | None:
    async with Admin(ns) as admin:
        return await admin.get_kv_config("myns", "k")


@pytest.mark.broker(mapped_file_size_commit_log=64 << 10, max_message_size=16 << 10, file_reserved_time=0)
def test_store_maintenance_commands(cluster: ThreadedCluster) -> None:
    ns = cluster.namesrv_addr
    assert _cli("deleteExpiredCommitLog", "-n", ns)["lines"] == ["success"]
    assert _cli("cleanExpiredCQ", "-n", ns, "-c", "DefaultCluster")["lines"] == ["success"]
    assert _text("cleanExpiredCQ", "-n", ns, "-b", cluster.broker_addr) == "success"  # no newline, as Java


def test_export_commands_write_rocketmq_s_files(cluster: ThreadedCluster, tmp_path: Path) -> None:
    ns = cluster.namesrv_addr
    anyio.run(create_topic, ns, "ExportTopic", 3)
    _cli("updateSubGroup", "-n", ns, "-g", "export-g", "-c", "DefaultCluster")
    out = tmp_path / "export"
    assert _cli("exportMetadata", "-n", ns, "-c", "DefaultCluster", "-f", str(out))["path"] == str(
        out / "metadata.json"
    )
    metadata = json.loads((out / "metadata.json").read_text())
    assert metadata["topicConfigTable"]["ExportTopic"]["readQueueNums"] == 3
    assert "TBW102" not in metadata["topicConfigTable"] and "TOOLS_CONSUMER" not in metadata["subscriptionGroupTable"]
    assert "export-g" in metadata["subscriptionGroupTable"]
    _cli("exportMetadata", "-n", ns, "-b", cluster.broker_addr, "-t", "-f", str(out))
    assert "ExportTopic" in json.loads((out / "topic.json").read_text())["topicConfigTable"]
    _cli("exportConfigs", "-n", ns, "-c", "DefaultCluster", "-f", str(out))
    configs = json.loads((out / "configs.json").read_text())
    assert configs["clusterScale"] == {"namesrvSize": 1, "masterBrokerSize": 1, "slaveBrokerSize": 0}
    assert configs["brokerConfigs"]["broker-a"]["brokerName"] == "broker-a"
    _cli("exportMetrics", "-n", ns, "-c", "DefaultCluster", "-f", str(out))
    metrics = json.loads((out / "metrics.json").read_text())
    report = metrics["evaluateReport"]["broker-a"]
    assert report["runtimeVersion"]["rocketmqVersion"] == "V4_9_8" and report["runtimeQuota"]["topicSize"] >= 1
    assert set(metrics["totalData"]["totalTps"]) == {"totalNormalInTps", "totalNormalOutTps", "totalTransInTps",
                                                      "totalScheduleInTps"}  # fmt: skip


def test_export_metadata_of_a_cluster_with_t_and_g_exports_the_topics(cluster: ThreadedCluster, tmp_path: Path) -> None:
    """Java ExportMetadataCommand -c: ``if (hasOption('t')) topics -> topic.json; else if (hasOption('g')) ...``, so
    with both flags the topics are exported (before, topic.json held only ``exportTime``)."""
    anyio.run(create_topic, cluster.namesrv_addr, "ExportedWithBoth", 1)
    out = tmp_path / "export"
    _cli("exportMetadata", "-n", cluster.namesrv_addr, "-c", "DefaultCluster", "-t", "-g", "-f", str(out))
    doc = json.loads((out / "topic.json").read_text())
    assert "ExportedWithBoth" in doc["topicConfigTable"] and "subscriptionGroupTable" not in doc, doc


@pytest.mark.anyio
async def test_query_msg_trace_by_id_prints_publish_and_consume_records(cluster: ThreadedCluster) -> None:
    ns = cluster.namesrv_addr
    await create_topic(ns, "TraceCli", queues=1)
    seen: list[MessageExt] = []

    async def listener(msgs: list[MessageExt]) -> ConsumeConcurrentlyStatus:
        seen.extend(msgs)
        return ConsumeConcurrentlyStatus.CONSUME_SUCCESS

    consumer = PushConsumer("trace-cli-cg", ns, enable_msg_trace=True)
    consumer.subscribe("TraceCli")
    consumer.register_message_listener(listener)
    async with consumer:
        sent = await anyio.to_thread.run_sync(_cli, "sendMessage", "-n", ns, "-t", "TraceCli", "-p", "t", "-m", "true")
        await wait_until(lambda: len(seen) == 1)
    msg_id = sent["rows"][0]["MsgId"]
    with anyio.fail_after(60):
        while True:
            found = await anyio.to_thread.run_sync(_run, "queryMsgTraceById", "-n", ns, "-i", msg_id, "--json")
            trace = json.loads(found.output) if found.exit_code == 0 else {}  # 1: no trace message yet
            types = [r.get("Type") for r in trace.get("rows", [])]
            if "Pub" in types and "Sub" in types:
                break
            await anyio.sleep(0.2)
    sub = next(r for r in trace["rows"] if r["Type"] == "Sub")
    assert (sub["ConsumerGroup"], sub["Status"]) == ("trace-cli-cg", "success")
    text = await anyio.to_thread.run_sync(_text, "queryMsgTraceById", "-n", ns, "-i", msg_id)
    assert text.startswith(
        "#Type      #ProducerGroup       #ClientHost          #SendTime            #CostTimes #Status"
    )


@pytest.mark.anyio
async def test_query_msg_trace_by_id_lists_consumer_groups_in_java_s_hash_map_order(cluster: ThreadedCluster) -> None:
    """QueryMsgTraceByIdSubCommand.printMessageTrace groups the SubAfter rows in a ``HashMap<String, ...>(16)`` and
    prints the groups in its iteration order (by hash bucket): ``trace-cg-2`` before ``trace-cg-1``, not sorted."""
    ns = cluster.namesrv_addr
    await create_topic(ns, "TraceTwoGroups", queues=1)
    seen: dict[str, int] = {}
    consumers = []

    def listener_of(group: str) -> Any:
        async def listener(msgs: list[MessageExt]) -> ConsumeConcurrentlyStatus:
            seen[group] = seen.get(group, 0) + len(msgs)
            return ConsumeConcurrentlyStatus.CONSUME_SUCCESS

        return listener

    for group in ("trace-cg-1", "trace-cg-2"):
        consumer = PushConsumer(group, ns, enable_msg_trace=True)
        consumer.subscribe("TraceTwoGroups")
        consumer.register_message_listener(listener_of(group))
        consumers.append(consumer)
    async with consumers[0], consumers[1]:
        sent = await anyio.to_thread.run_sync(_cli, "sendMessage", "-n", ns, "-t", "TraceTwoGroups", "-p", "t")
        await wait_until(lambda: len(seen) == 2)
    msg_id = sent["rows"][0]["MsgId"]
    with anyio.fail_after(60):
        while True:
            found = await anyio.to_thread.run_sync(_run, "queryMsgTraceById", "-n", ns, "-i", msg_id, "--json")
            trace = json.loads(found.output) if found.exit_code == 0 else {}
            if {r.get("ConsumerGroup") for r in trace.get("rows", [])} >= {"trace-cg-1", "trace-cg-2"}:
                break
            await anyio.sleep(0.2)
    groups = [r["ConsumerGroup"] for r in trace["rows"] if r.get("Type") == "Sub"]
    assert groups == ["trace-cg-2", "trace-cg-1"], groups
    text = await anyio.to_thread.run_sync(_text, "queryMsgTraceById", "-n", ns, "-i", msg_id)
    assert text.index("trace-cg-2") < text.index("trace-cg-1"), text


@pytest.mark.anyio
async def test_query_msg_trace_by_id_takes_rocketmq_5_time_range_and_max_num(cluster: ThreadedCluster) -> None:
    """5.3.3's QueryMsgTraceByIdSubCommand takes ``-b beginTimestamp`` (0), ``-e endTimestamp`` (Long.MAX_VALUE)
    and ``-c maxNum`` (64) and hands them to DefaultMQAdminExt.queryMessage: a range that ends before the trace
    message was stored finds none and fails the command. Ours refused the options as unknown."""
    ns = cluster.namesrv_addr
    await create_topic(ns, "TraceRange", queues=1)
    async with Producer("trace-range-pg", ns, enable_msg_trace=True) as producer:
        msg_id = (await producer.send(Message("TraceRange", b"x"))).msg_id
    with anyio.fail_after(60):
        while (await anyio.to_thread.run_sync(_run, "queryMsgTraceById", "-n", ns, "-i", msg_id)).exit_code:
            await anyio.sleep(0.2)
    wide = ["-b", "0", "-e", "9223372036854775807", "-c", "64"]
    found = await anyio.to_thread.run_sync(_run, "queryMsgTraceById", "-n", ns, "-i", msg_id, *wide)
    assert found.exit_code == 0 and "trace-range-pg" in found.output, found.output
    early = await anyio.to_thread.run_sync(_run, "queryMsgTraceById", "-n", ns, "-i", msg_id, "-e", "1")
    assert early.exit_code == 1, early.output
    assert "query message by key finished, but no message." in early.output


@pytest.mark.parametrize("trace_topic", [None, "TraceHere"], ids=["default-topic", "given-topic"])
def test_query_msg_trace_by_id_fails_when_no_trace_message_is_found(
    cluster: ThreadedCluster, trace_topic: str | None
) -> None:
    """QueryMsgTraceByIdSubCommand reads the trace with DefaultMQAdminExt.queryMessage, which throws
    MQClientException(NO_MESSAGE, "query message by key finished, but no message.") when no message is indexed under
    the id (MQAdminImpl.queryMessage); the command fails with it. Before, it printed nothing and succeeded, as if
    the message had been traced with no record."""
    ns = cluster.namesrv_addr
    topic_args: list[str] = []
    if trace_topic is not None:
        anyio.run(create_topic, ns, trace_topic, 1)
        topic_args = ["-t", trace_topic]
    result = _run("queryMsgTraceById", "-n", ns, "-i", "7F00000100002A9F0000000000000000", *topic_args)
    assert result.exit_code == 1, result.output
    assert "query message by key finished, but no message." in result.output


@pytest.mark.parametrize(
    ("elapsed_ms", "amount", "tlog", "table"),
    [(5, 3, "3", "2.50"), (1, 9, "0", "0.13"), (3, 3, "2", "1.50"), (7, 3, "4", "3.50")],
)
def test_cluster_rt_rounds_its_average_half_up(elapsed_ms: int, amount: int, tlog: str, table: str) -> None:
    """CLusterSendMsgRTCommand (tools/.../command/cluster/CLusterSendMsgRTCommand.java) averages whole milliseconds
    over ``amount - 1`` sends and prints ``-p true`` lines with ``new BigDecimal(rt).setScale(0, ROUND_HALF_UP)``, the
    table with ``String.format("%.2f", rt)`` (half up, too): 2.5 ms is 3 and 0.125 ms 0.13. Before, Python's
    round() and format() gave 2 and 0.12 (half to even)."""
    from client.mqadmin_cluster import rt_texts

    assert rt_texts(elapsed_ms, amount) == (tlog, table)


@pytest.mark.parametrize(
    ("value", "places", "java"),
    [
        (0.125, 2, "0.13"),
        (0.375, 2, "0.38"),
        (1.005, 2, "1.01"),
        (2.675, 2, "2.68"),
        (-0.125, 2, "-0.13"),
        (0.045, 2, "0.05"),
        (123.455, 2, "123.46"),
        (-0.001, 2, "-0.00"),
        (-0.0, 2, "-0.00"),
        (0.00005, 4, "0.0001"),
        (5e-324, 4, "0.0000"),
        (1e30, 2, "1" + "0" * 30 + ".00"),
        (float("nan"), 2, "NaN"),
        (float("inf"), 4, "Infinity"),
        (float("-inf"), 2, "-Infinity"),
    ],
)
def test_java_fixed_rounds_as_java_s_formatter(value: float, places: int, java: str) -> None:
    """``String.format("%.2f", d)`` (java/util/Formatter.java over jdk/internal/math/FormattedFloatingDecimal.java)
    rounds the double's shortest decimal (``Double.toString``'s digits) half up: 0.125 is 0.13 and 1.005 and 2.675,
    whose binary values are just below the tie, 1.01 and 2.68; NaN and the infinities print as ``NaN`` and
    ``Infinity``. Expected values are Java 17's output. Python's ``%.2f`` gave 0.12, 1.00, 2.67, nan and inf."""
    from client.mqadmin_support import java_fixed

    assert java_fixed(value, places) == java


def test_mqadmin_rows_print_their_fixed_point_figures_as_java() -> None:
    """statsAll's row (tools/.../command/stats/StatsAllSubCommand.java: ``%11.2f`` TPS columns) and
    consumerProgress' ``Consume TPS: %.2f`` line go through :func:`printf`, which must round as Java's printf."""
    from client.mqadmin_stats import _STATS_ROW
    from client.mqadmin_support import printf

    row = printf(_STATS_ROW, "T", "G", 10, 0.125, 1.005, 3, 4)
    assert row == "T".ljust(64) + "  " + "G".ljust(64) + " " + "10".rjust(12) + "        0.13        1.01" + (
        "3".rjust(15) + "4".rjust(15) + "\n"
    )
    assert printf("Consume TPS: %.2f%n", 0.375) == "Consume TPS: 0.38\n"
    assert printf("%-8s|%11.2f|%n", "x", float("nan")) == "x       |        NaN|\n"


def test_cluster_rt_of_one_send_averages_java_s_nan(cluster: ThreadedCluster) -> None:
    """CLusterSendMsgRTCommand (tools/.../command/cluster/CLusterSendMsgRTCommand.java) divides ``(double) elapsed /
    (amount - 1)``: ``-a 1`` is 0.0 / 0, NaN, which the table prints as ``String.format("%.2f")`` does, ``NaN``,
    and for which ``-p true``'s ``new BigDecimal(rt)`` throws, failing the command. Ours divided by at least 1 and
    printed ``0.00`` and ``0``."""
    ns = cluster.namesrv_addr
    table = _text("clusterRT", "-n", ns, "-a", "1", "--rounds", "1").splitlines()
    assert [line.split() for line in table[1:]] == [["DefaultCluster", "broker-a", "NaN", "1", "0"]], table
    tlog = CliRunner().invoke(mqadmin, ["clusterRT", "-n", ns, "-a", "1", "-p", "true", "--rounds", "1"])
    assert tlog.exit_code == 1, tlog.output
    assert tlog.stdout == "", tlog.stdout
    assert tlog.stderr.splitlines()[0] == (
        "org.apache.rocketmq.tools.command.SubCommandException: CLusterSendMsgRTCommand command failed"
    ), tlog.stderr


def test_get_namesrv_config_prints_java_s_hash_map_of_servers_and_properties_order(cluster: ThreadedCluster) -> None:
    """GetNamesrvConfigCommand prints MQClientAPIImpl.getNameServerConfig's ``new HashMap<String, Properties>(4)``
    keyed by the ``-n`` addresses (tools/src/main/java/org/apache/rocketmq/tools/command/namesrv/
    GetNamesrvConfigCommand.java, client/src/main/java/org/apache/rocketmq/client/impl/MQClientAPIImpl.java): the
    servers in that map's bucket order whatever order ``-n`` lists them in, each one's settings in the order of the
    Properties MixAll.string2Properties loaded (Java 8's Hashtable). Ours printed the servers as given and each
    server's keys in the order it wrote them. The one name server is named twice here, by two spellings of its
    address that fall into different buckets of the 4-bucket table."""
    from client.mqadmin_support import java_hash_set, java_properties_order
    from remoting.codec.message_properties import java_hash

    port = cluster.namesrv_addr.rpartition(":")[2]
    spellings = [f"{host}:{port}" for host in ("127.0.0.1", "127.1", "127.0.1", "localhost")]
    bucket = {s: ((java_hash(s) & 0xFFFFFFFF) ^ ((java_hash(s) & 0xFFFFFFFF) >> 16)) & 3 for s in spellings}
    pair = next([a, b] for a in spellings for b in spellings if bucket[a] != bucket[b])
    servers = java_hash_set(pair, capacity=4)

    async def sent() -> list[str]:
        async with Admin(cluster.namesrv_addr) as admin:
            return list((await admin.namesrv_config([cluster.namesrv_addr]))[cluster.namesrv_addr])

    keys = java_properties_order(anyio.run(sent))
    assert keys != sorted(keys)
    expected = [line for server in servers for line in [f"============{server}============", *keys]]
    for given in (pair, pair[::-1]):
        lines = _text("getNamesrvConfig", "-n", ";".join(given)).splitlines()
        assert [line.split("=  ", 1)[0].rstrip() for line in lines] == expected


def test_set_consume_mode_sets_a_mode_on_a_broker_or_each_master(cluster: ThreadedCluster) -> None:
    """5.3.3's ``mqadmin setConsumeMode`` (tools/src/main/java/org/apache/rocketmq/tools/command/consumer/
    SetConsumeModeSubCommand.java): SET_MESSAGE_REQUEST_MODE to the broker or each master of the cluster, Java's
    output; a mode MessageRequestMode.valueOf refuses fails the command."""
    ns, addr = cluster.namesrv_addr, cluster.broker_addr
    anyio.run(create_topic, ns, "ModeTopic", 2)
    by_broker = _text("setConsumeMode", "-n", ns, "-b", addr, "-t", "ModeTopic", "-g", "ModeGroup", "-m", "POP")
    # Java's last printf has no %n.
    assert by_broker == f"set consume mode to {addr} success.\ntopic[ModeTopic] group[ModeGroup] consume mode[POP] " \
        "popShareQueueNum[0]"  # fmt: skip
    by_cluster = _cli("setConsumeMode", "-n", ns, "-c", "DefaultCluster", "-t", "ModeTopic", "-g", "ModeGroup",
                      "-m", "PULL", "-q", "2")  # fmt: skip
    assert by_cluster["lines"] == [
        f"set consume mode to {addr} success.",
        "topic[ModeTopic] group[ModeGroup] consume mode[PULL] popShareQueueNum[2]",
    ]
    refused = _run("setConsumeMode", "-n", ns, "-b", addr, "-t", "%RETRY%ModeGroup", "-g", "ModeGroup", "-m", "POP")
    assert refused.exit_code == 1 and "retry topic is not allowed to set mode" in refused.output
    bad = _run("setConsumeMode", "-n", ns, "-b", addr, "-t", "ModeTopic", "-g", "ModeGroup", "-m", "PUSH")
    assert bad.exit_code == 1 and "MessageRequestMode.PUSH" in bad.output
