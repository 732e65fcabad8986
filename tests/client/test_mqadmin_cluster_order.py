"""``mqadmin``'s ``-c <cluster>`` commands go over the cluster's brokers in the order RocketMQ 4.9.8's tools do:
``CommandUtil``'s helpers (tools/src/main/java/org/apache/rocketmq/tools/command/CommandUtil.java) collect the
masters in a ``HashSet`` (``fetchMasterAddrByClusterName``, ``fetchMasterAndSlaveAddrByClusterName``), in a
``HashMap(4)`` keyed by master (``fetchMasterAndSlaveDistinguish``) or hand back the cluster's broker-name ``Set``
that fastjson fills as a ``HashSet`` (``fetchBrokerNameByClusterName``), and a script reading the output sees that
order, not names sorted. The orders expected here were checked with ``jshell`` (Java 17's ``java.util.HashSet`` /
``HashMap``); each test failed on the code before, which sorted."""

from __future__ import annotations

import re
from pathlib import Path

import anyio
from click.testing import CliRunner, Result

from client.admin import Admin
from client.mqadmin import main as mqadmin
from tests.client.helpers import HANG_GUARD, register_dead_broker
from tests.threaded_cluster import ThreadedCluster

#: Masters that do not answer, registered as brokers hash-a/b/c of HashCluster: in a java.util.HashSet they iterate
#: 2, 3, 26; in a HashMap(4) filled in any order 26, 2, 3; sorted as text 2, 26, 3.
_DEAD = {"hash-a": "127.0.0.1:2", "hash-b": "127.0.0.1:3", "hash-c": "127.0.0.1:26"}
_HASH_SET_ORDER = ["127.0.0.1:2", "127.0.0.1:3", "127.0.0.1:26"]
_HASH_MAP_4_ORDER = ["127.0.0.1:26", "127.0.0.1:2", "127.0.0.1:3"]


def _run(*args: str) -> Result:
    return CliRunner().invoke(mqadmin, list(args))


def _register_hash_cluster(cluster: ThreadedCluster) -> None:
    for name, addr in _DEAD.items():
        register_dead_broker(cluster, name=name, addr=addr, cluster="HashCluster")


def _addrs_in(text: str) -> list[str]:
    """The dead masters' addresses in the order ``text`` first names them."""
    found = re.findall(r"127\.0\.0\.1:(?:26|2|3)\b", text)
    return list(dict.fromkeys(found))


def test_cluster_commands_go_over_the_masters_in_java_s_hash_set_order(cluster: ThreadedCluster) -> None:
    """UpdateSubGroupSubCommand -c, UpdateBrokerConfigSubCommand -c (fetchMasterAddrByClusterName, a HashSet) and
    BrokerStatusSubCommand -c (fetchMasterAndSlaveAddrByClusterName, a HashSet) try each broker in its own
    try/catch, in the set's order: 2, 3, 26 here. Ours sorted them (2, 26, 3)."""
    _register_hash_cluster(cluster)
    ns = cluster.namesrv_addr
    for args in (
        ("updateSubGroup", "-g", "hash-order-cg"),
        ("updateBrokerConfig", "-k", "fileReservedTime", "-v", "47"),
        ("brokerStatus",),
    ):
        result = _run(args[0], "-n", ns, "-c", "HashCluster", *args[1:])
        assert _addrs_in(result.stderr) == _HASH_SET_ORDER, (args[0], result.stderr)


def test_get_broker_config_of_a_cluster_goes_over_java_s_hash_map_of_masters(cluster: ThreadedCluster) -> None:
    """GetBrokerConfigCommand -c iterates fetchMasterAndSlaveDistinguish's ``new HashMap<>(4)`` of masters (its
    table starts at 4 buckets): 127.0.0.1:26 first, whose header Java prints before its getBrokerConfig fails the
    command. Ours printed the sorted first one, 127.0.0.1:2."""
    _register_hash_cluster(cluster)
    result = _run("getBrokerConfig", "-n", cluster.namesrv_addr, "-c", "HashCluster")
    assert result.exit_code == 1, result.output
    headers = [line for line in result.stdout.splitlines() if line.startswith("============")]
    assert headers == [f"============Master: {_HASH_MAP_4_ORDER[0]}============"], result.stdout


def test_topic_cluster_list_prints_java_s_hash_set_of_clusters(cluster: ThreadedCluster) -> None:
    """DefaultMQAdminExtImpl.getTopicClusterList collects the clusters holding the topic's first broker in a
    HashSet, which TopicClusterSubCommand prints: ACluster, ZCluster, DefaultCluster (as java.util.HashSet iterates
    them). Ours printed them sorted."""
    for name in ("ZCluster", "DefaultCluster", "ACluster"):
        register_dead_broker(cluster, name="hash-t", addr="127.0.0.1:4", topics=("HashClustersTopic",), cluster=name)
    result = _run("topicClusterList", "-n", cluster.namesrv_addr, "-t", "HashClustersTopic")
    assert result.exit_code == 0, result.output
    assert result.stdout.splitlines() == ["ACluster", "ZCluster", "DefaultCluster"], result.stdout


def test_update_order_topic_on_a_cluster_writes_the_broker_names_in_java_s_order(cluster: ThreadedCluster) -> None:
    """UpdateTopicSubCommand -c -o true writes the order conf over fetchBrokerNameByClusterName's set, the
    cluster's broker names as fastjson fills a HashSet: broker-b, broker-c, broker-a. Ours sorted them, so the name
    server's ORDER_TOPIC_CONFIG value (which producers read as the order of the topic's queues) differed."""
    ns = cluster.namesrv_addr
    stops = [cluster.start_extra_broker(name)[1] for name in ("broker-b", "broker-c")]
    try:

        async def all_registered() -> None:
            async with Admin(ns) as admin:
                with anyio.fail_after(HANG_GUARD):
                    while len((await admin.cluster_info()).broker_addr_table) < 3:
                        await anyio.sleep(0.02)

        anyio.run(all_registered)
        result = _run("updateTopic", "-n", ns, "-c", "DefaultCluster", "-t", "HashOrderTopic", "-w", "2", "-o", "true")
    finally:
        for stop in stops:
            stop()
    assert result.exit_code == 0, result.output
    assert "orderConf=[broker-b:2;broker-c:2;broker-a:2]" in result.stdout, result.stdout


def test_delete_topic_of_an_unknown_cluster_says_so(cluster: ThreadedCluster) -> None:
    """DeleteTopicSubCommand.deleteTopic reads the masters with fetchMasterAddrByClusterName, which prints
    "[error] Make sure the specified clusterName exists ..." for an unknown cluster before the two success lines.
    Ours printed only the success lines."""
    result = _run("deleteTopic", "-n", cluster.namesrv_addr, "-c", "NoSuchCluster", "-t", "NoSuchTopic")
    assert result.exit_code == 0, result.output
    assert result.stdout.startswith(
        "[error] Make sure the specified clusterName exists or the name server connected to is correct."
        "delete topic [NoSuchTopic] from cluster [NoSuchCluster] success."
    ), result.stdout


def test_topic_list_by_cluster_names_the_first_cluster_in_java_s_hash_map_order(cluster: ThreadedCluster) -> None:
    """TopicListSubCommand -c names a topic's cluster with findTopicBelongToWhichCluster: the first cluster of
    ``ClusterInfo.clusterAddrTable`` (a HashMap: ZCluster before DefaultCluster) whose brokers include the topic's
    first broker. Ours took the first in the name server's order (DefaultCluster)."""
    for name in ("DefaultCluster", "ZCluster"):
        register_dead_broker(cluster, name="hash-t", addr="127.0.0.1:4", topics=("HashClustersTopic",), cluster=name)
    result = _run("topicList", "-n", cluster.namesrv_addr, "-c")
    assert result.exit_code == 0, result.output
    rows = [line.split() for line in result.stdout.splitlines()[1:] if "HashClustersTopic" in line]
    assert rows == [["ZCluster", "HashClustersTopic"]], result.stdout


#: Masters that do not answer, registered as acl-a/acl-b of AclHashCluster: a java.util.HashSet iterates 5 before 2,
#: sorted as text 2 comes first.
_ACL_DEAD = {"acl-a": "127.0.0.1:2", "acl-b": "127.0.0.1:5"}


def test_acl_commands_of_a_cluster_go_over_its_brokers_in_java_s_hash_set_order(cluster: ThreadedCluster) -> None:
    """UpdateAccessConfigSubCommand, DeleteAccessConfigSubCommand, UpdateGlobalWhiteAddrSubCommand -c
    (CommandUtil.fetchMasterAndSlaveAddrByClusterName) and ClusterAclConfigVersionListSubCommand -c
    (fetchMasterAddrByClusterName) go over the HashSet of the cluster's brokers, and the first that fails ends the
    command: 127.0.0.1:5 here, as java.util.HashSet iterates {127.0.0.1:2, 127.0.0.1:5}. Ours sorted them, so the
    command failed on 127.0.0.1:2."""
    for name, addr in _ACL_DEAD.items():
        register_dead_broker(cluster, name=name, addr=addr, cluster="AclHashCluster")
    for args in (
        ("updateAclConfig", "-a", "RocketMQ", "-s", "12345678"),
        ("deleteAclConfig", "-a", "RocketMQ"),
        ("updateGlobalWhiteAddr", "-g", "10.10.10.*"),
        ("clusterAclConfigVersion",),
    ):
        result = _run(args[0], "-n", cluster.namesrv_addr, "-c", "AclHashCluster", *args[1:])
        assert result.exit_code == 1, (args[0], result.output)
        named = re.findall(r"127\.0\.0\.1:[25]\b", result.stderr)
        assert named and set(named) == {"127.0.0.1:5"}, (args[0], result.stderr)


def test_acl_commands_of_an_unknown_cluster_say_so(cluster: ThreadedCluster) -> None:
    """CommandUtil's fetchMasterAndSlaveAddrByClusterName and fetchMasterAddrByClusterName print "[error] Make sure
    the specified clusterName exists ..." (no line end) for a cluster the name server does not know, before the ACL
    command's own lines. Ours printed only those."""
    ns = cluster.namesrv_addr
    error = "[error] Make sure the specified clusterName exists or the name server connected to is correct."
    deleted = _run("deleteAclConfig", "-n", ns, "-c", "NoSuchCluster", "-a", "RocketMQ")
    assert deleted.exit_code == 0, deleted.output
    assert deleted.stdout.startswith(error + "account's accesskey is:RocketMQ"), deleted.stdout
    versions = _run("clusterAclConfigVersion", "-n", ns, "-c", "NoSuchCluster")
    assert versions.exit_code == 0, versions.output
    assert versions.stdout.startswith(error + "#Cluster Name"), versions.stdout


def test_clean_commands_of_a_cluster_go_over_its_brokers_in_java_s_hash_set_order(cluster: ThreadedCluster) -> None:
    """cleanExpiredCQ -c and deleteExpiredCommitLog -c ask the brokers of ClusterInfo.retrieveAllAddrByCluster
    (common/src/main/java/org/apache/rocketmq/common/protocol/body/ClusterInfo.java): the cluster's broker names as
    the HashSet fastjson fills iterates them, each broker's addresses by id, and the first that fails ends the
    command: acl-b's 127.0.0.1:5 here (a java.util.HashSet iterates acl-b before acl-a). Ours sorted the addresses,
    so the command failed on 127.0.0.1:2."""
    for name, addr in _ACL_DEAD.items():
        register_dead_broker(cluster, name=name, addr=addr, cluster="AclHashCluster")
    for command in ("cleanExpiredCQ", "deleteExpiredCommitLog"):
        result = _run(command, "-n", cluster.namesrv_addr, "-c", "AclHashCluster")
        assert result.exit_code == 1, (command, result.output)
        named = re.findall(r"127\.0\.0\.1:[25]\b", result.stderr)
        assert named and set(named) == {"127.0.0.1:5"}, (command, result.stderr)


def test_export_metrics_goes_over_the_cluster_s_broker_names_in_java_s_hash_set_order(
    cluster: ThreadedCluster, tmp_path: Path
) -> None:
    """ExportMetricsCommand reads each broker of the cluster's broker-name Set (the HashSet fastjson fills) in its
    order, the first that fails ending the command: acl-b's 127.0.0.1:5 here. Ours sorted the names (acl-a first)."""
    for name, addr in _ACL_DEAD.items():
        register_dead_broker(cluster, name=name, addr=addr, cluster="AclHashCluster")
    result = _run("exportMetrics", "-n", cluster.namesrv_addr, "-c", "AclHashCluster", "-f", str(tmp_path))
    assert result.exit_code == 1, result.output
    named = re.findall(r"127\.0\.0\.1:[25]\b", result.stderr)
    assert named and set(named) == {"127.0.0.1:5"}, result.stderr


def test_clean_unused_topic_of_a_cluster_goes_over_its_brokers_in_java_s_hash_set_order(
    cluster: ThreadedCluster,
) -> None:
    """cleanUnusedTopic -c asks the brokers of ClusterInfo.retrieveAllAddrByCluster in turn, as cleanExpiredCQ
    (DefaultMQAdminExtImpl.cleanUnusedTopicByCluster, tools/src/main/java/org/apache/rocketmq/tools/admin/
    DefaultMQAdminExtImpl.java), the first that fails ending the command: acl-b's 127.0.0.1:5 here. Ours asked
    Admin.broker_addresses' sorted list, so the command failed on 127.0.0.1:2."""
    for name, addr in _ACL_DEAD.items():
        register_dead_broker(cluster, name=name, addr=addr, cluster="AclHashCluster")
    result = _run("cleanUnusedTopic", "-n", cluster.namesrv_addr, "-c", "AclHashCluster")
    assert result.exit_code == 1, result.output
    named = re.findall(r"127\.0\.0\.1:[25]\b", result.stderr)
    assert named and set(named) == {"127.0.0.1:5"}, result.stderr
