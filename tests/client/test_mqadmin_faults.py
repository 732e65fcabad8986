"""Where ``mqadmin`` departed from RocketMQ 4.9.8's (tools/src/main/java/org/apache/rocketmq/tools/command/**; found
by a review, each test failing on the code before), against the threaded embedded cluster: brokerStatus -b, a
registered broker that does not answer (clusterList, brokerStatus -c, consumerProgress, updateSubGroup -c,
updateBrokerConfig -c/-b), timestamps (a bad one, SSS as milliseconds), numbers past Java's types, an unknown group's
progress, deleteTopic on every name server and for its cluster only, an unknown -c cluster, a broker name missing from
the route, trimmed option values."""

from __future__ import annotations

import json
from datetime import datetime
from pathlib import Path
from typing import Any

import anyio
import click
import pytest
from click.testing import CliRunner, Result

from client.admin import Admin
from client.mqadmin import main as mqadmin
from client.mqadmin_support import JAVA_INT, java_bool
from namesrv.config import NamesrvConfig
from namesrv.server import NamesrvServer
from remoting.client import RemotingClient
from remoting.codec.bodies import ConsumerData, HeartbeatData, MessageQueue, ProducerData
from remoting.codec.bodies.broker_metadata import SubscriptionGroupConfig, TopicConfig
from remoting.codec.bodies.topic_config import TopicConfigSerializeWrapper
from remoting.codec.codes import RequestCode
from remoting.codec.command import RemotingCommand, request
from remoting.processor import RequestContext
from tests.client.helpers import (
    create_topic,
    fill_queues,
    register_dead_broker,
    runtime_as_5x,
    topic_on_two_brokers,
)
from tests.threaded_cluster import ThreadedCluster


def _run(*args: str) -> Result:
    # catch_exceptions=True: a Python exception escaping the command is kept in result.exception.
    return CliRunner().invoke(mqadmin, list(args))


def _assert_clean_failure(result: Result) -> None:
    """Java's mqadmin wraps any error in SubCommandException("<X>SubCommand command failed"); rocketrio's contract
    (client/mqadmin.py docstring) is: the error on stderr and exit status 1 - not a Python traceback."""
    escaped = result.exception if not isinstance(result.exception, SystemExit) else None
    assert escaped is None, f"traceback escaped the command: {escaped!r}"
    assert result.exit_code == 1, result.output


# -- brokerStatus -b ----------------------------------------------------------------------------------------------


def test_broker_status_by_addr_prints_java_key_value_lines(cluster: ThreadedCluster) -> None:
    """Java BrokerStatusSubCommand.printBrokerRuntimeStats(printBroker=false): ``%-32s: %s%n`` per key, no header."""
    result = _run("brokerStatus", "-n", cluster.namesrv_addr, "-b", cluster.broker_addr)
    assert result.exception is None, f"brokerStatus -b crashed: {result.exception!r}"
    assert result.exit_code == 0
    assert any(line.startswith("brokerVersionDesc") for line in result.output.splitlines())


# -- clusterList with a registered broker that does not answer ---------------------------------------------------


def test_cluster_list_still_lists_the_live_brokers_when_one_does_not_answer(cluster: ThreadedCluster) -> None:
    """Java ClusterListSubCommand.printClusterBaseInfo catches each broker's fetchBrokerRuntimeStats failure
    (e.printStackTrace) and prints that broker's row with 0.00 figures; the others are listed as usual."""
    register_dead_broker(cluster, cluster="DefaultCluster", name="broker-dead", addr="127.0.0.1:1")
    result = _run("clusterList", "-n", cluster.namesrv_addr)
    assert result.exit_code == 0, result.output
    assert cluster.broker_addr in result.output
    assert "127.0.0.1:1 " in result.output


def test_cluster_list_prints_empty_figures_for_a_broker_that_does_not_answer(cluster: ThreadedCluster) -> None:
    """Java ClusterListSubCommand.printClusterBaseInfo starts each figure as "" and only a successful
    fetchBrokerRuntimeStats replaces them: a dead broker's row has an empty version, ``0.00(,ms)`` and an empty
    PCWait, never Python's ``None``."""
    register_dead_broker(cluster, cluster="DefaultCluster", name="broker-dead", addr="127.0.0.1:1")
    result = _run("clusterList", "-n", cluster.namesrv_addr)
    assert result.exit_code == 0, result.output
    fmt = "%-16s  %-22s  %-4s  %-22s %-16s %19s %19s %10s %5s %6s"
    expected = fmt % ("DefaultCluster", "broker-dead", "0", "127.0.0.1:1", "", "     0.00(,ms)", "     0.00(,ms)", "",
                      "0.00", "0.0000")  # fmt: skip
    assert expected in result.output.splitlines(), result.output


def test_cluster_list_reads_a_5x_brokers_transferred_tps(
    cluster: ThreadedCluster, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A RocketMQ 5 broker names its transfer rate ``getTransferredTps`` (5.3.3's StoreStatsService, which 5.3.3's
    ClusterListSubCommand and ExportMetricsCommand read); 4.9.8's is ``getTransferedTps``. Ours read only the 4.9.8
    name, so a 5.x broker's OutTPS showed 0. Here the broker's runtime info is renamed as a 5.x broker's."""
    assert cluster.cluster is not None
    runtime_as_5x(cluster.cluster.controller, monkeypatch, "12.5 3.0 1.0")
    result = _run("clusterList", "-n", cluster.namesrv_addr)
    assert result.exit_code == 0, result.output
    [row] = [line for line in result.output.splitlines() if cluster.broker_addr in line]
    assert "    12.50(" in row, row


def test_cluster_list_more_stats_lists_the_live_brokers_when_one_does_not_answer(cluster: ThreadedCluster) -> None:
    """Java ClusterListSubCommand.printClusterMoreStats catches each broker's fetchBrokerRuntimeStats failure and
    prints its row with zeros; before, the first dead broker ended ``clusterList -m``."""
    register_dead_broker(cluster, name="broker-0dead", addr="127.0.0.1:1")
    result = _run("clusterList", "-n", cluster.namesrv_addr, "-m")
    assert result.exit_code == 0, result.output
    rows = [line.split() for line in result.output.splitlines()[1:]]
    assert ["DefaultCluster", "broker-0dead", "0", "0", "0", "0"] in rows, result.output
    assert any(row[1:2] == ["broker-a"] for row in rows), result.output


def test_broker_status_of_a_cluster_shows_the_live_brokers_when_one_does_not_answer(cluster: ThreadedCluster) -> None:
    """Java BrokerStatusSubCommand -c: each broker's printBrokerRuntimeStats in its own try/catch, so the live
    brokers' key-value lines are printed; before, the dead one ended the command."""
    register_dead_broker(cluster, name="broker-0dead", addr="127.0.0.1:1")
    result = _run("brokerStatus", "-n", cluster.namesrv_addr, "-c", "DefaultCluster")
    assert result.exit_code == 0, result.output
    assert any(line.split()[:2] == [cluster.broker_addr, "brokerVersionDesc"] for line in result.output.splitlines())


def test_consumer_progress_of_all_groups_lists_a_group_whose_broker_does_not_answer(cluster: ThreadedCluster) -> None:
    """Java ConsumerProgressSubCommand without -g: examineConsumeStats and examineConsumerConnectionInfo are each
    caught per group; a group on a dead broker gets its row (count 0, OFFLINE) and the listing goes on. Before, that
    group's OSError ended the whole command with exit status 1."""
    register_dead_broker(cluster, name="broker-0dead", addr="127.0.0.1:1", topics=("%RETRY%dead-broker-group",))
    result = _run("consumerProgress", "-n", cluster.namesrv_addr)
    assert result.exit_code == 0, result.output
    rows = [line.split() for line in result.output.splitlines()[1:]]
    assert ["dead-broker-group", "0", "OFFLINE", "0", "0"] in rows, result.output


def test_update_sub_group_on_a_cluster_reaches_the_live_masters_past_a_dead_one(cluster: ThreadedCluster) -> None:
    """Java UpdateSubGroupSubCommand -c: createAndUpdateSubscriptionGroupConfig per master in a try/catch, so every
    live master gets the group; before, the dead master (sorted first) ended the command before the live one."""
    register_dead_broker(cluster, name="broker-0dead", addr="127.0.0.1:1")
    result = _run("updateSubGroup", "-n", cluster.namesrv_addr, "-c", "DefaultCluster", "-g", "cluster-wide-group")
    assert f"create subscription group to {cluster.broker_addr} success." in result.output, result.output
    assert "cluster-wide-group" in _groups_on(cluster.namesrv_addr, cluster.broker_addr)


def test_update_broker_config_on_a_cluster_reaches_the_live_masters_past_a_dead_one(cluster: ThreadedCluster) -> None:
    """Java UpdateBrokerConfigSubCommand -c: updateBrokerConfig per master in a try/catch, so the live masters are
    updated and report ``update broker config success``; before, the dead master ended the command."""
    register_dead_broker(cluster, name="broker-0dead", addr="127.0.0.1:1")
    result = _run(
        "updateBrokerConfig", "-n", cluster.namesrv_addr, "-c", "DefaultCluster", "-k", "fileReservedTime", "-v", "47"
    )
    assert f"update broker config success, {cluster.broker_addr}" in result.output, result.output
    assert _config_of(cluster.namesrv_addr, cluster.broker_addr)["fileReservedTime"] == "47"


def test_update_broker_config_of_one_dead_broker_fails(cluster: ThreadedCluster) -> None:
    """Java UpdateBrokerConfigSubCommand -b: no try/catch around the one broker, the command fails."""
    result = _run("updateBrokerConfig", "-n", cluster.namesrv_addr, "-b", "127.0.0.1:1", "-k", "fileReservedTime",
                  "-v", "47")  # fmt: skip
    _assert_clean_failure(result)


def _groups_on(ns: str, addr: str) -> set[str]:
    async def read() -> set[str]:
        async with Admin(ns) as admin:
            return set(await admin.subscription_groups(addr))

    return anyio.run(read)


def _config_of(ns: str, addr: str) -> dict[str, str]:
    async def read() -> dict[str, str]:
        async with Admin(ns) as admin:
            return await admin.broker_config(addr)

    return anyio.run(read)


# -- resetOffsetByTime -s ----------------------------------------------------------------------------------------


def test_reset_offset_by_time_with_a_malformed_timestamp_fails_cleanly(cluster: ThreadedCluster) -> None:
    """Java ResetOffsetByTimeCommand: UtilAll.parseDate returns null -> NPE inside the try -> "command failed"."""
    result = _run("resetOffsetByTime", "-n", cluster.namesrv_addr, "-g", "g", "-t", "TBW102", "-s", "2024-01-01")
    _assert_clean_failure(result)


def test_reset_offset_by_time_reads_sss_as_milliseconds_like_simple_date_format(cluster: ThreadedCluster) -> None:
    """Java parses ``-s`` with SimpleDateFormat("yyyy-MM-dd#HH:mm:ss:SSS"): ``:5`` is 5 ms, not half a second.
    The command prints the parsed value in ``timestamp(long)[...]``."""
    anyio.run(create_topic, cluster.namesrv_addr, "ResetSSS", 1)
    anyio.run(_commit_offset, cluster.namesrv_addr, cluster.broker_addr, "sss-g", "ResetSSS")
    text = "2024-01-02#03:04:05:5"
    expected = int(datetime(2024, 1, 2, 3, 4, 5).timestamp() * 1000) + 5
    result = _run("resetOffsetByTime", "-n", cluster.namesrv_addr, "-g", "sss-g", "-t", "ResetSSS", "-s", text)
    assert result.exit_code == 0, result.output
    assert f"timestamp(long)[{expected}]" in result.output, result.output


async def _commit_offset(ns: str, addr: str, group: str, topic: str) -> None:
    async with Admin(ns) as admin:
        await admin.update_consumer_offset(addr, group, MessageQueue(topic, "broker-a", 0), 0)


# -- updateSubGroup -i out of range -------------------------------------------------------------------------------


def test_update_sub_group_with_a_broker_id_beyond_a_java_long_fails_cleanly(cluster: ThreadedCluster) -> None:
    """Java UpdateSubGroupSubCommand: Long.parseLong("99999999999999999999") throws inside the try -> "command
    failed"."""
    result = _run(
        "updateSubGroup",
        "-n",
        cluster.namesrv_addr,
        "-g",
        "g1",
        "-b",
        cluster.broker_addr,
        "-i",
        "99999999999999999999",
    )
    _assert_clean_failure(result)


# -- consumerProgress -g of an unknown group ------------------------------------------------------------------------


def test_consumer_progress_of_a_group_that_does_not_exist_fails(cluster: ThreadedCluster) -> None:
    """Java examineConsumeStats: the route of %RETRY%<group> (TOPIC_NOT_EXIST) or an empty offset table
    (CONSUMER_NOT_ONLINE "Not found the consumer group consume stats") throws -> "command failed", no table."""
    result = _run("consumerProgress", "-n", cluster.namesrv_addr, "-g", "no-such-group")
    _assert_clean_failure(result)
    assert "Diff Total" not in result.output


# -- deleteTopic on the name servers ------------------------------------------------------------------------------


def test_delete_topic_leaves_other_clusters_routes_on_the_name_server(cluster: ThreadedCluster) -> None:
    """Java DeleteTopicSubCommand.deleteTopic calls deleteTopicInNameServer(nameServerSet, topic, clusterName): the
    name server removes only that cluster's brokers' queues of the topic (DeleteTopicFromNamesrvRequestHeader
    .clusterName); a broker of another cluster keeps serving it."""
    ns = cluster.namesrv_addr
    anyio.run(create_topic, ns, "SharedTopic", 2)
    register_dead_broker(cluster, cluster="OtherCluster", name="broker-z", addr="127.0.0.1:1", topics=("SharedTopic",))
    deleted = _run("deleteTopic", "-n", ns, "-t", "SharedTopic", "-c", "DefaultCluster")
    assert deleted.exit_code == 0, deleted.output
    route = _run("topicRoute", "-n", ns, "-t", "SharedTopic", "--json")
    assert route.exit_code == 0, route.output
    assert [b["brokerName"] for b in json.loads(route.output)["route"]["brokerDatas"]] == ["broker-z"]


def test_delete_topic_deletes_from_every_name_server(cluster: ThreadedCluster, tmp_path: Path) -> None:
    """Java deleteTopicInNameServer loops over every address of -n (split on ';')."""
    ns1 = cluster.namesrv_addr
    ns2 = _second_namesrv(cluster, tmp_path / "ns2")
    anyio.run(create_topic, ns1, "TwoNs", 2)

    _copy_registration(cluster, ns2, "TwoNs")
    assert _route_brokers(ns2, "TwoNs") == ["broker-a"]
    deleted = _run("deleteTopic", "-n", f"{ns1};{ns2}", "-t", "TwoNs", "-c", "DefaultCluster")
    assert deleted.exit_code == 0, deleted.output
    assert _route_brokers(ns2, "TwoNs") == [], "the topic is still routed on the second name server"


def _copy_registration(threaded: ThreadedCluster, ns2: str, topic: str) -> None:
    """Register broker-a (its real address) with the second name server, as its periodic registration would."""

    async def register() -> None:
        assert threaded.cluster is not None
        server = _SECOND[ns2]
        server.route_table.register_broker(
            cluster_name="DefaultCluster",
            broker_addr=threaded.broker_addr,
            broker_name="broker-a",
            broker_id=0,
            ha_server_addr="",
            topic_config_wrapper=TopicConfigSerializeWrapper({topic: TopicConfig(topic, 2, 2)}),
            filter_server_list=None,
            connection=None,
            now=server.processor._clock(),
        )

    threaded.call(register)


def _route_brokers(ns: str, topic: str) -> list[str]:
    async def route() -> list[str]:
        async with Admin(ns) as admin:
            try:
                return [b.broker_name for b in (await admin.topic_route(topic)).broker_datas]
            except Exception:
                return []

    return anyio.run(route)


_SECOND: dict[str, Any] = {}


def _second_namesrv(threaded: ThreadedCluster, files: Path) -> str:
    """A second name server, its files under ``files`` (the defaults are under $HOME)."""

    async def start() -> str:
        config = NamesrvConfig(
            listen_port=0,
            listen_host="127.0.0.1",
            kv_config_path=str(files / "kvConfig.json"),
            config_store_path=str(files / "namesrv.properties"),
        )
        server = NamesrvServer(config)
        host, port = await threaded._extra.start(server.serve)
        addr = f"{host}:{port}"
        _SECOND[addr] = server
        return addr

    return threaded.call(start)


# -- updateTopic -c of an unknown cluster --------------------------------------------------------------------------


def test_update_topic_on_an_unknown_cluster_says_so(cluster: ThreadedCluster) -> None:
    """Java CommandUtil.fetchMasterAddrByClusterName prints "[error] Make sure the specified clusterName exists or
    the name server connected to is correct." when -c names no cluster; before, nothing was created and nothing said."""
    result = _run("updateTopic", "-n", cluster.namesrv_addr, "-t", "NoWhere", "-c", "NoSuchCluster")
    assert "Make sure the specified clusterName exists" in result.output, result.output


# -- printMsgByQueue / consumeMessage of a broker name the route lacks ---------------------------------------------


def test_print_msg_by_queue_of_an_unknown_broker_fails_cleanly(cluster: ThreadedCluster) -> None:
    """Java PrintMessageByQueueCommand: minOffset(mq) of a broker not in the route throws MQClientException("The
    broker[...] not exist") inside the try ("command failed"); before, a StopIteration escaped as RuntimeError."""
    anyio.run(create_topic, cluster.namesrv_addr, "PbqUnknownBroker", 1)
    result = _run(
        "printMsgByQueue", "-n", cluster.namesrv_addr, "-t", "PbqUnknownBroker", "-a", "no-such-broker", "-i", "0"
    )
    _assert_clean_failure(result)
    assert "The broker[no-such-broker] not exist" in result.output


def test_consume_message_of_an_unknown_broker_or_topic_says_so_and_ends_normally(cluster: ThreadedCluster) -> None:
    """ConsumeMessageCommand.executeByCondition and executeDefault catch what their queue reads throw (minOffset of
    an unknown broker, fetchSubscribeMessageQueues of an unknown topic) and print the stack trace: no
    SubCommandException, no "command failed" line (tools/src/main/java/org/apache/rocketmq/tools/command/message/
    ConsumeMessageCommand.java). Here the error goes to stderr and the command ends normally, as where Java goes on
    past a broker; before, it failed the command (no traceback, but Java's failure line and exit status 1)."""
    anyio.run(create_topic, cluster.namesrv_addr, "CmUnknownBroker", 1)
    ns = cluster.namesrv_addr
    by_queue = _run("consumeMessage", "-n", ns, "-t", "CmUnknownBroker", "-b", "no-such-broker", "-i", "0")
    unknown_topic = _run("consumeMessage", "-n", ns, "-t", "CmNoSuchTopic")
    for result, cause in ((by_queue, "The broker[no-such-broker] not exist"), (unknown_topic, "CmNoSuchTopic")):
        assert result.exception is None or isinstance(result.exception, SystemExit), repr(result.exception)
        assert result.exit_code == 0, result.output
        assert "command failed" not in result.output, result.output
        assert cause in result.output, result.output


# -- consumeMessage with a malformed -s/-e ----------------------------------------------------------------------------


@pytest.mark.parametrize("option", ["-s", "-e"])
def test_consume_message_with_a_malformed_timestamp_fails_cleanly(cluster: ThreadedCluster, option: str) -> None:
    """Java ConsumeMessageCommand.timestampFormat: UtilAll.parseDate gives null, the NPE is inside the try ("command
    failed"); before, the ValueError was raised outside the command's error handling: a traceback."""
    result = _run("consumeMessage", "-n", cluster.namesrv_addr, "-t", "TBW102", option, "yesterday")
    _assert_clean_failure(result)


# -- store maintenance on an unknown -c cluster ---------------------------------------------------------------------


@pytest.mark.parametrize("command", ["cleanExpiredCQ", "deleteExpiredCommitLog", "cleanUnusedTopic"])
def test_maintenance_commands_on_an_unknown_cluster_print_false(cluster: ThreadedCluster, command: str) -> None:
    """Java DefaultMQAdminExtImpl.cleanExpiredConsumerQueue / deleteExpiredCommitLog / cleanUnusedTopic(cluster):
    ClusterInfo.retrieveAllAddrByCluster of an unknown cluster is empty, the result stays false and the command
    prints ``false``; before, nothing was asked and ``success`` was printed."""
    result = _run(command, "-n", cluster.namesrv_addr, "-c", "NoSuchCluster")
    assert result.exit_code == 0, result.output
    assert result.output == "false", repr(result.output)


@pytest.mark.parametrize(
    "args",
    [
        ("brokerStatus", "-c", "NoSuchCluster"),
        ("getBrokerConfig", "-c", "NoSuchCluster"),
        ("updateBrokerConfig", "-c", "NoSuchCluster", "-k", "fileReservedTime", "-v", "48"),
        ("exportConfigs", "-c", "NoSuchCluster", "-f", "{tmp}"),
    ],
    ids=["brokerStatus", "getBrokerConfig", "updateBrokerConfig", "exportConfigs"],
)
def test_broker_commands_on_an_unknown_cluster_say_so(
    cluster: ThreadedCluster, tmp_path: Path, args: tuple[str, ...]
) -> None:
    """Java CommandUtil.fetchMasterAndSlaveAddrByClusterName (brokerStatus), fetchMasterAndSlaveDistinguish
    (getBrokerConfig, exportConfigs) and fetchMasterAddrByClusterName (updateBrokerConfig) print "[error] Make sure
    the specified clusterName exists or the name server connected to is correct." for an unknown -c; before, these
    printed nothing."""
    result = _run(args[0], "-n", cluster.namesrv_addr, *(a.format(tmp=tmp_path) for a in args[1:]))
    assert "Make sure the specified clusterName exists" in result.output, repr(result.output)


# -- option values are trimmed, as Java's getOptionValue(..).trim() ---------------------------------------------------


def test_update_broker_config_trims_the_cluster_name(cluster: ThreadedCluster) -> None:
    """Java UpdateBrokerConfigSubCommand: ``getOptionValue('c').trim()``, so a cluster name with a trailing blank (a
    quoted shell variable) updates the cluster; before, ``-c "DefaultCluster "`` matched no cluster."""
    result = _run(
        "updateBrokerConfig", "-n", cluster.namesrv_addr, "-c", "DefaultCluster ", "-k", "fileReservedTime", "-v", "46"
    )
    assert result.exit_code == 0, result.output
    assert _config_of(cluster.namesrv_addr, cluster.broker_addr)["fileReservedTime"] == "46", result.output


@pytest.mark.parametrize(
    ("args", "answer"),
    [
        (("cleanUnusedTopic", "-b", "{b} "), "success"),
        (("consumerConnection", "-g", "some-group", "-b", " {b}"), "not online"),
    ],
    ids=["cleanUnusedTopic", "consumerConnection"],
)
def test_broker_addr_options_are_trimmed(cluster: ThreadedCluster, args: tuple[str, ...], answer: str) -> None:
    """Java: ``commandLine.getOptionValue('b').trim()`` (CleanUnusedTopicCommand, ConsumerConnectionSubCommand): the
    broker answers (consumerConnection: the group is not online); before, the untrimmed address failed with ``bad
    remoting address '127.0.0.1:NNNN '``."""
    result = _run(args[0], "-n", cluster.namesrv_addr, *(a.format(b=cluster.broker_addr) for a in args[1:]))
    assert answer in result.output, result.output


@pytest.mark.parametrize(
    "args",
    [
        ("brokerStatus", "-c", "NoSuchCluster"),
        ("getBrokerConfig", "-c", "NoSuchCluster"),
        ("updateBrokerConfig", "-c", "NoSuchCluster", "-k", "fileReservedTime", "-v", "48"),
    ],
    ids=["brokerStatus", "getBrokerConfig", "updateBrokerConfig"],
)
def test_an_unknown_cluster_keeps_json_output_one_document(cluster: ThreadedCluster, args: tuple[str, ...]) -> None:
    """``--json`` promises one JSON document on stdout (client/mqadmin_support.py): the unknown cluster's
    "[error] Make sure ..." line goes into its ``lines`` (it was echoed ahead of the document)."""
    result = CliRunner().invoke(mqadmin, [args[0], "-n", cluster.namesrv_addr, "--json", *args[1:]])
    assert result.exit_code == 0, result.output
    try:
        doc = json.loads(result.output)
    except ValueError:
        pytest.fail(f"--json output is not one JSON document: {result.output!r}")
    assert any("Make sure the specified clusterName exists" in line for line in doc.get("lines", [])), doc


# -- resetOffsetByTime -c (a C++ client's offsets) -----------------------------------------------------------------


@pytest.mark.anyio
async def test_reset_offset_by_time_with_c_pushes_the_offset_list_a_cpp_client_reads(cluster: ThreadedCluster) -> None:
    """Java's ResetOffsetByTimeCommand ``-c`` (isC) sends INVOKE_BROKER_TO_RESET_OFFSET as LanguageCode.CPP
    (MQClientAPIImpl.invokeBrokerToResetOffset); the broker then pushes ResetOffsetBodyForC, a list of
    MessageQueueForC, the only form the C++ client parses (AdminBrokerProcessor.resetOffset, Broker2Client.resetOffset).
    Before, ``-c`` was ignored and the consumer got the Java map."""
    ns, addr = cluster.namesrv_addr, cluster.broker_addr
    await create_topic(ns, "CppReset", queues=1)
    pushed: list[RemotingCommand] = []

    class CppConsumer:
        async def process(self, ctx: RequestContext, cmd: RemotingCommand) -> RemotingCommand | None:
            if cmd.code == RequestCode.RESET_CONSUMER_CLIENT_OFFSET:
                pushed.append(cmd)
            return None

    async with RemotingClient(request_handler=CppConsumer()) as consumer:
        beat = HeartbeatData("10.0.0.7@cpp", consumer_data_set=(ConsumerData("cpp-cg"),))
        assert (await consumer.invoke(addr, request(RequestCode.HEART_BEAT, body=beat.encode()), 5)).code == 0
        await _commit_offset(ns, addr, "cpp-cg", "CppReset")
        args = ("resetOffsetByTime", "-n", ns, "-g", "cpp-cg", "-t", "CppReset", "-s", "now", "-c")
        result = await anyio.to_thread.run_sync(lambda: _run(*args))
        assert result.exit_code == 0, result.output
        with anyio.fail_after(10):
            while not pushed:
                await consumer.invoke(addr, request(RequestCode.GET_BROKER_RUNTIME_INFO), 5)
    assert bytes(pushed[0].body) == (
        b'{"offsetTable":[{"brokerName":"broker-a","offset":0,"queueId":0,"topic":"CppReset"}]}'
    )


# -- printMsg / consumeMessage past a refused pull, consumeMessage -g ------------------------------------------------


async def _refuse_group_on(addr: str, namesrv: str, group: str) -> None:
    """``group``'s consumption switched off on the broker at ``addr`` (its pulls get NO_PERMISSION)."""
    async with Admin(namesrv) as admin:
        await admin.create_subscription_group(
            SubscriptionGroupConfig(group_name=group, consume_enable=False), broker_addr=addr
        )


@pytest.mark.parametrize("command", ["printMsg", "consumeMessage"])
def test_a_refused_pull_ends_only_its_queue(cluster: ThreadedCluster, command: str) -> None:
    """Java's PrintMessageSubCommand breaks out of a queue's loop when a pull throws (printStackTrace) and goes on
    with the next queue, and ConsumeMessageCommand.pullMessageByQueue returns to executeDefault likewise
    (tools/src/main/java/org/apache/rocketmq/tools/command/message/): the other brokers' messages are printed.
    Before, the first refused pull failed the whole command."""
    ns = cluster.namesrv_addr
    anyio.run(topic_on_two_brokers, cluster, "PullRefusedOnA")
    anyio.run(fill_queues, ns, "PullRefusedOnA", 1)
    anyio.run(_refuse_group_on, cluster.broker_addr, ns, "TOOLS_CONSUMER")  # broker-a refuses the tools' pulls
    result = _run(command, "-n", ns, "-t", "PullRefusedOnA")
    assert result.exception is None or isinstance(result.exception, SystemExit), repr(result.exception)
    assert result.exit_code == 0, result.output
    assert "broker-b-0-0" in result.output  # broker-b's message, after broker-a's queue failed
    assert "broker-a-0-0" not in result.output


def test_consume_message_pulls_as_the_group_given_with_g(cluster: ThreadedCluster) -> None:
    """ConsumeMessageCommand sets ``-g`` as its pull consumer's group before starting it: the pulls are that
    group's, and a group whose consumption is off on the broker gets nothing. Before, ``-g`` was ignored and every
    pull went as TOOLS_CONSUMER."""
    ns = cluster.namesrv_addr
    anyio.run(create_topic, ns, "ConsumeAsGroup", 1)
    anyio.run(fill_queues, ns, "ConsumeAsGroup", 1)
    anyio.run(_refuse_group_on, cluster.broker_addr, ns, "cg-consume-off")
    refused = _run("consumeMessage", "-n", ns, "-t", "ConsumeAsGroup", "-g", "cg-consume-off")
    assert "broker-a-0-0" not in refused.output, refused.output
    allowed = _run("consumeMessage", "-n", ns, "-t", "ConsumeAsGroup", "-g", "cg-consume-on")
    assert allowed.exit_code == 0, allowed.output
    assert "broker-a-0-0" in allowed.output, allowed.output


def test_print_msg_by_queue_ends_normally_past_a_refused_pull(cluster: ThreadedCluster) -> None:
    """PrintMessageByQueueCommand catches a pull's exception (printStackTrace), breaks out of the queue's loop and
    still prints the counts by tag, the command ending normally
    (tools/src/main/java/org/apache/rocketmq/tools/command/message/PrintMessageByQueueCommand.java). Before, the
    refused pull failed the command, as printMsg and consumeMessage did."""
    ns = cluster.namesrv_addr
    anyio.run(create_topic, ns, "PbqRefused", 1)
    anyio.run(fill_queues, ns, "PbqRefused", 1)
    anyio.run(_refuse_group_on, cluster.broker_addr, ns, "TOOLS_CONSUMER")
    result = _run("printMsgByQueue", "-n", ns, "-t", "PbqRefused", "-a", "broker-a", "-i", "0", "-f", "true")
    assert result.exception is None or isinstance(result.exception, SystemExit), repr(result.exception)
    assert result.exit_code == 0, result.output


def test_number_and_boolean_options_trim_as_java_string_trim() -> None:
    """Java trims each option value with ``String.trim`` (the characters up to U+0020) before ``Integer.parseInt`` /
    ``Boolean.parseBoolean``: a control character around the value goes, an ideographic or no-break space stays, so
    ``"\\u300012"`` is a NumberFormatException and ``"true\\u00a0"`` is false."""
    assert JAVA_INT.convert("\x0112\x1b", None, None) == 12
    with pytest.raises(click.BadParameter, match='For input string: "\u300012"'):
        JAVA_INT.convert("\u300012", None, None)
    assert java_bool("\x01true\x1b") is True
    assert java_bool("true\u00a0") is False


@pytest.mark.anyio
async def test_reset_offset_commands_print_the_queues_in_java_s_hash_map_order(cluster: ThreadedCluster) -> None:
    """DefaultMQAdminExtImpl.resetOffsetByTimestamp puts each broker's answer (the HashMap fastjson fills) into a
    ``new HashMap<MessageQueue, Long>()`` with ``putAll``, which sizes the table for the first answer (8 buckets
    for 4 queues), and ResetOffsetByTimeCommand / SkipAccumulationSubCommand print that map's entries in its
    order (tools/src/main/java/org/apache/rocketmq/tools/admin/DefaultMQAdminExtImpl.java, tools/src/main/java/org/
    apache/rocketmq/tools/command/offset/ResetOffsetByTimeCommand.java): queues 2, 3, 0, 1 of broker-a here, as
    jshell's java.util.HashMap lists MessageQueue keys of RocketMQ's hashCode. Ours printed them sorted."""
    ns, addr = cluster.namesrv_addr, cluster.broker_addr
    await create_topic(ns, "ResetOrder", queues=4)

    class Consumer:
        async def process(self, ctx: RequestContext, cmd: RemotingCommand) -> RemotingCommand | None:
            return None

    async with RemotingClient(request_handler=Consumer()) as consumer, Admin(ns) as admin:
        beat = HeartbeatData("10.0.0.8@java", consumer_data_set=(ConsumerData("reset-order-cg"),))
        assert (await consumer.invoke(addr, request(RequestCode.HEART_BEAT, body=beat.encode()), 5)).code == 0
        for q in range(4):
            await admin.update_consumer_offset(addr, "reset-order-cg", MessageQueue("ResetOrder", "broker-a", q), 0)
        for args in (("resetOffsetByTime", "-s", "now"), ("skipAccumulatedMessage",)):
            argv = (args[0], "-n", ns, "-g", "reset-order-cg", "-t", "ResetOrder", *args[1:])
            result = await anyio.to_thread.run_sync(lambda argv=argv: _run(*argv))
            assert result.exit_code == 0, result.output
            rows = [line.split() for line in result.stdout.splitlines() if line.startswith("broker-a")]
            assert [int(row[1]) for row in rows] == [2, 3, 0, 1], result.stdout


def test_reset_offset_of_an_offline_group_goes_over_java_s_hash_map_of_its_offsets(cluster: ThreadedCluster) -> None:
    """With no consumer online DefaultMQAdminExtImpl.resetOffsetByTimestampOld resets, and ResetOffsetByTimeOldCommand
    lists, the queues of each broker's ``ConsumeStats.offsetTable`` (a ``HashMap`` fastjson fills) in that map's
    order (tools/src/main/java/org/apache/rocketmq/tools/admin/DefaultMQAdminExtImpl.java): queues 2, 1, 3, 0 of
    ResetOld here, as jshell's java.util.HashMap lists MessageQueue keys of RocketMQ's hashCode. Ours sorted them."""
    ns, addr = cluster.namesrv_addr, cluster.broker_addr

    async def prepare() -> None:
        await create_topic(ns, "ResetOld", queues=4)
        async with Admin(ns) as admin:
            for q in range(4):
                await admin.update_consumer_offset(addr, "reset-old-cg", MessageQueue("ResetOld", "broker-a", q), 0)

    anyio.run(prepare)
    result = _run("resetOffsetByTime", "-n", ns, "-g", "reset-old-cg", "-t", "ResetOld", "-s", "now")
    assert result.exit_code == 0, result.output
    assert "specified consumerGroup[reset-old-cg]" in result.stdout, result.stdout
    rows = [line.split() for line in result.stdout.splitlines() if line.startswith("broker-a")]
    assert [int(row[1]) for row in rows] == [2, 1, 3, 0], result.stdout


# -- producerConnection of a group whose producers all left -------------------------------------------------------


def test_producer_connection_of_a_group_with_no_connection_left_fails(cluster: ThreadedCluster) -> None:
    """The broker keeps a producer group whose connections closed (ProducerManager.doChannelCloseEvent) and answers
    its connection list SUCCESS, empty; Java's DefaultMQAdminExtImpl.examineProducerConnectionInfo then throws
    "Not found the producer group connection" (tools/src/main/java/org/apache/rocketmq/tools/admin/
    DefaultMQAdminExtImpl.java), so ProducerConnectionSubCommand fails. Ours printed nothing and succeeded."""
    ns, addr = cluster.namesrv_addr, cluster.broker_addr

    async def producer_came_and_went() -> None:
        await create_topic(ns, "ProducersGone", queues=1)
        async with RemotingClient() as producer:
            beat = HeartbeatData("10.0.0.8@gone", producer_data_set=(ProducerData("gone-pg"),))
            assert (await producer.invoke(addr, request(RequestCode.HEART_BEAT, body=beat.encode()), 5)).code == 0
        async with Admin(ns) as admin:
            with anyio.fail_after(10):
                while (await admin.producer_connection("gone-pg", "ProducersGone")).connection_set:
                    await anyio.sleep(0.01)

    anyio.run(producer_came_and_went)
    result = _run("producerConnection", "-n", ns, "-g", "gone-pg", "-t", "ProducersGone")
    _assert_clean_failure(result)
    assert "Not found the producer group connection" in result.output, result.output
