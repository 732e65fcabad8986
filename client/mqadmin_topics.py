"""``mqadmin`` topic commands, as RocketMQ 4.9.8's ``tools/src/main/java/org/apache/rocketmq/tools/command/topic/``:
``updateTopic``, ``deleteTopic``, ``updateTopicPerm``, ``topicRoute``, ``topicStatus``, ``topicClusterList``,
``topicList``, ``updateOrderConf`` and ``allocateMQ``. Options, required options and printed lines are Java's;
:mod:`client.mqadmin` registers them.
"""

from __future__ import annotations

import json
from typing import Any

import click

from client.admin import Admin
from client.admin_ops import ORDER_TOPIC_CONFIG
from client.consumer.allocate import allocate_average
from client.errors import MQClientError
from client.mqadmin_support import (
    JAVA_INT,
    NO_TOPIC_STATS,
    Output,
    cluster_broker_names,
    cluster_masters,
    common,
    fastjson_pretty,
    format_ts,
    java_bool,
    java_hash_set,
    java_map_text,
    java_subscribe_queues,
    java_topic_list,
    run_job,
    topic_config_text,
)
from remoting.codec.bodies import PERM_READ, PERM_WRITE
from remoting.codec.bodies.broker_metadata import TopicConfig
from remoting.codec.java_hash_order import java_hash_map_order
from remoting.codec.message_properties import java_hash, java_split
from remoting.codec.topics import is_retry_or_dlq_topic

__all__ = ["COMMANDS"]


async def _broker_name_of(admin: Admin, addr: str) -> str:
    """Java's ``CommandUtil.fetchBrokerNameByAddr``."""
    info = await admin.cluster_info()
    for name, bd in info.broker_addr_table.items():
        if addr in bd.broker_addrs.values():
            return name
    raise click.UsageError(f"Make sure the specified broker addr exists or retry please: {addr}")


@click.command("updateTopic", help="Update or create topic")
@common
@click.option("-b", "--brokerAddr", "broker_addr", help="create topic to which broker")
@click.option("-c", "--clusterName", "cluster", help="create topic to which cluster")
@click.option("-t", "--topic", required=True, help="topic name")
@click.option("-r", "--readQueueNums", "read", type=JAVA_INT, default=8, help="set read queue nums")
@click.option("-w", "--writeQueueNums", "write", type=JAVA_INT, default=8, help="set write queue nums")
@click.option("-p", "--perm", type=JAVA_INT, default=PERM_READ | PERM_WRITE, help="set topic's permission(2|4|6)")
@click.option("-o", "--order", help="set topic's order(true|false)")
@click.option("-u", "--unit", help="is unit topic (true|false)")
@click.option("-s", "--hasUnitSub", "unit_sub", help="has unit sub (true|false)")
@click.option("-a", "--attributes", help="attribute(+a=b,+c=d,-e)")
def update_topic(ctx: click.Context, **o: Any) -> None:
    if bool(o["broker_addr"]) == bool(o["cluster"]):
        raise click.UsageError("exactly one of -b/--brokerAddr and -c/--clusterName is required")
    order = java_bool(o["order"])
    sys_flag = (1 if java_bool(o["unit"]) else 0) | (2 if java_bool(o["unit_sub"]) else 0)
    config = TopicConfig(o["topic"], o["read"], o["write"], o["perm"], topic_sys_flag=sys_flag, order=order)

    async def job(admin: Admin, out: Output) -> None:
        kwargs = dict(read_queue_nums=config.read_queue_nums, write_queue_nums=config.write_queue_nums,
                      perm=config.perm, order=order, topic_sys_flag=sys_flag,
                      attributes=o["attributes"])  # fmt: skip
        if o["broker_addr"]:
            addr = o["broker_addr"]
            await admin.create_topic(config.topic_name, broker_addr=addr, **kwargs)
            if order:
                conf = f"{await _broker_name_of(admin, addr)}:{config.write_queue_nums}"
                await admin.create_or_update_order_conf(config.topic_name, conf, is_cluster=False)
                out.line("set broker orderConf. isOrder=%s, orderConf=[%s]", order, conf)
            out.line("create topic to %s success.%n", addr)
        else:
            cluster = o["cluster"]
            for addr in await cluster_masters(admin, out, cluster):
                await admin.create_topic(config.topic_name, broker_addr=addr, **kwargs)
                out.line("create topic to %s success.%n", addr)
            if order:
                names = await cluster_broker_names(admin, cluster)
                conf = ";".join(f"{name}:{config.write_queue_nums}" for name in names)
                await admin.create_or_update_order_conf(config.topic_name, conf, is_cluster=True)
                out.line("set cluster orderConf. isOrder=%s, orderConf=[%s]", order, conf)
        out.line("%s", topic_config_text(config))

    run_job(ctx, job)


@click.command("deleteTopic", help="Delete topic from broker and NameServer.")
@common
@click.option("-t", "--topic", required=True, help="topic name")
@click.option("-c", "--clusterName", "cluster", required=True, help="delete topic from which cluster")
def delete_topic(ctx: click.Context, **o: Any) -> None:
    async def job(admin: Admin, out: Output) -> None:
        await delete_topic_in_cluster(admin, out, o["cluster"], o["topic"])

    run_job(ctx, job)


async def delete_topic_in_cluster(admin: Admin, out: Output, cluster: str, topic: str) -> None:
    """Java's ``DeleteTopicSubCommand.deleteTopic``: every master of ``cluster`` (CommandUtil's set of them, with
    its error line for an unknown cluster), then every name server."""
    await admin.delete_topic_in_brokers(topic, await cluster_masters(admin, out, cluster))
    await admin.delete_topic_in_namesrv(topic, cluster=cluster)
    out.line("delete topic [%s] from cluster [%s] success.%n", topic, cluster)
    out.line("delete topic [%s] from NameServer success.%n", topic)


@click.command("updateTopicPerm", help="Update topic perm")
@common
@click.option("-b", "--brokerAddr", "broker_addr", help="create topic to which broker")
@click.option("-c", "--clusterName", "cluster", help="create topic to which cluster")
@click.option("-t", "--topic", required=True, help="topic name")
@click.option("-p", "--perm", type=JAVA_INT, required=True, help="set topic's permission(2|4|6), intro[2:W; 4:R; 6:RW]")
def update_topic_perm(ctx: click.Context, **o: Any) -> None:
    async def job(admin: Admin, out: Output) -> None:
        topic, perm = o["topic"], o["perm"]
        route = await admin.topic_route(topic)
        first = route.queue_datas[0]
        kwargs = dict(read_queue_nums=first.read_queue_nums, write_queue_nums=first.write_queue_nums, perm=perm,
                      topic_sys_flag=first.topic_sys_flag)  # fmt: skip
        config = TopicConfig(
            topic, first.read_queue_nums, first.write_queue_nums, perm, topic_sys_flag=first.topic_sys_flag
        )
        if o["broker_addr"]:
            addr = o["broker_addr"]
            name = next((bd.broker_name for bd in route.broker_datas if bd.broker_addrs.get(0) == addr), None)
            if name is None:
                out.line("updateTopicPerm error broker not exit or broker is not master!.%n")
                return
            old = next(qd.perm for qd in route.queue_datas if qd.broker_name == name)
            if old == perm:
                out.line("new perm equals to the old one!%n")
                return
            await admin.create_topic(topic, broker_addr=addr, **kwargs)
            out.line("update topic perm from %s to %s in %s success.%n", old, perm, addr)
            out.line("%s.%n", topic_config_text(config))
        elif o["cluster"]:
            for addr in await cluster_masters(admin, out, o["cluster"]):
                await admin.create_topic(topic, broker_addr=addr, **kwargs)
                out.line("update topic perm from %s to %s in %s success.%n", first.perm, perm, addr)
        else:
            click.echo(ctx.get_help())

    run_job(ctx, job)


_ROUTE = "%-45s %-32s %-50s %-10s %-11s %-5s%n"


@click.command("topicRoute", help="Examine topic route info")
@common
@click.option("-t", "--topic", required=True, help="topic name")
@click.option("-l", "--list", "as_list", is_flag=True, help="Use list format to print data")
def topic_route(ctx: click.Context, **o: Any) -> None:
    async def job(admin: Admin, out: Output) -> None:
        route = await admin.topic_route(o["topic"])
        out.field("route", route.to_json())
        if not o["as_list"]:  # Java: topicRouteData.toJson(true), fastjson's pretty format
            brokers: list[dict[str, Any]] = [
                {"brokerAddrs": dict(bd.broker_addrs), "brokerName": bd.broker_name, "cluster": bd.cluster}
                for bd in route.broker_datas
            ]
            out.line("%s%n", fastjson_pretty({**route.to_json(), "brokerDatas": brokers}))
            return
        queues = {qd.broker_name: qd for qd in route.queue_datas}
        out.header(_ROUTE, "#ClusterName", "#BrokerName", "#BrokerAddrs", "#ReadQueue", "#WriteQueue", "#Perm")
        read = write = 0
        for bd in sorted(route.broker_datas, key=lambda b: b.broker_name):
            qd = queues[bd.broker_name]
            read, write = read + qd.read_queue_nums, write + qd.write_queue_nums
            addrs = java_map_text(dict(sorted(bd.broker_addrs.items())))
            out.row(_ROUTE, bd.cluster, bd.broker_name, addrs, qd.read_queue_nums, qd.write_queue_nums, qd.perm)
        out.line("%s%n", "-" * 158)
        out.line(_ROUTE, "Total:", len(queues), "", read, write, "")

    run_job(ctx, job)


@click.command("topicStatus", help="Examine topic Status info")
@common
@click.option("-t", "--topic", required=True, help="topic name")
def topic_status(ctx: click.Context, **o: Any) -> None:
    async def job(admin: Admin, out: Output) -> None:
        stats = await admin.topic_status(o["topic"])
        if not stats:
            raise MQClientError(NO_TOPIC_STATS)
        out.header(
            "%-32s  %-4s  %-20s  %-20s    %s%n", "#Broker Name", "#QID", "#Min Offset", "#Max Offset", "#Last Updated"
        )
        for mq, s in sorted(stats.items()):
            last = format_ts(s.last_update_timestamp) if s.last_update_timestamp > 0 else ""
            row = (mq.broker_name, mq.queue_id, s.min_offset, s.max_offset, last)
            out.row("%-32.32s  %-4d  %-20d  %-20d    %s%n", *row)

    run_job(ctx, job)


@click.command("topicClusterList", help="get cluster info for topic")
@common
@click.option("-t", "--topic", required=True, help="topic name")
def topic_cluster_list(ctx: click.Context, **o: Any) -> None:
    async def job(admin: Admin, out: Output) -> None:
        route = await admin.topic_route(o["topic"])
        name = route.broker_datas[0].broker_name
        info = await admin.cluster_info()
        # Java prints the names only (tools/src/main/java/org/apache/rocketmq/tools/command/topic/
        # TopicClusterSubCommand.java); the JSON rows keep the key.
        # DefaultMQAdminExtImpl.getTopicClusterList collects them in a HashSet
        # (tools/src/main/java/org/apache/rocketmq/tools/admin/DefaultMQAdminExtImpl.java).
        out.header("", "#Cluster")
        for cluster in java_hash_set([c for c, names in info.cluster_addr_table.items() if name in names]):
            out.row("%s%n", cluster)

    run_job(ctx, job)


@click.command("topicList", help="Fetch all topic list from name server")
@common
@click.option("-c", "--clusterModel", "cluster_model", is_flag=True, help="clusterModel")
def topic_list(ctx: click.Context, **o: Any) -> None:
    async def job(admin: Admin, out: Output) -> None:
        topics = await java_topic_list(admin)
        if not o["cluster_model"]:
            out.header("", "#Topic")  # Java prints the names only; the JSON rows keep the key
            for topic in topics:
                out.row("%s%n", topic)
            return
        info = await admin.cluster_info()
        out.header("%-20s  %-48s  %-48s%n", "#Cluster Name", "#Topic", "#Consumer Group")
        for topic in topics:
            if is_retry_or_dlq_topic(topic):
                continue
            cluster: str | None = ""
            groups = [""]
            try:
                name = (await admin.topic_route(topic)).broker_datas[0].broker_name
                # findTopicBelongToWhichCluster: the first cluster of ClusterInfo.clusterAddrTable, a HashMap, holding
                # the broker, else null (tools/src/main/java/org/apache/rocketmq/tools/command/topic/
                # TopicListSubCommand.java).
                clusters = java_hash_set(list(info.cluster_addr_table))
                cluster = next((c for c in clusters if name in info.cluster_addr_table[c]), None)
                # GroupList.groupList is a HashSet: Java prints it in its iteration order
                # (common/src/main/java/org/apache/rocketmq/common/protocol/body/GroupList.java).
                groups = java_hash_set(await admin.topic_consumed_by(topic)) or [""]
            except Exception:  # as Java: a topic whose route or groups cannot be read still gets its line
                pass
            for group in groups:
                out.row("%-20.20s  %-64.64s  %-64.64s%n", cluster, topic, group)

    run_job(ctx, job)


@click.command("updateOrderConf", help="Create or update or delete order conf")
@common
@click.option("-t", "--topic", required=True, help="topic name")
@click.option("-v", "--orderConf", "order_conf", help="set order conf [eg. brokerName1:num;brokerName2:num]")
@click.option("-m", "--method", required=True, help="option type [eg. put|get|delete")
def update_order_conf(ctx: click.Context, **o: Any) -> None:
    async def job(admin: Admin, out: Output) -> None:
        topic, method = o["topic"], o["method"]
        if method == "get":
            # getKVConfigValue throws on the name server's QUERY_NOT_FOUND: the command fails
            # (client/src/main/java/org/apache/rocketmq/client/impl/MQClientAPIImpl.java).
            conf = await admin.get_kv_config(ORDER_TOPIC_CONFIG, topic, missing_ok=False)
            out.line("get orderConf success. topic=[%s], orderConf=[%s] ", topic, conf)
        elif method == "put":
            conf = o["order_conf"] or ""
            if not conf:
                raise ValueError("please set orderConf with option -v.")
            await admin.create_or_update_order_conf(topic, conf, is_cluster=True)
            out.line("update orderConf success. topic=[%s], orderConf=[%s]", topic, conf)
        elif method == "delete":
            await admin.delete_kv_config(ORDER_TOPIC_CONFIG, topic)
            out.line("delete orderConf success. topic=[%s]", topic)
        else:
            click.echo(ctx.get_help())

    run_job(ctx, job)


@click.command("allocateMQ", help="Allocate MQ")
@common
@click.option("-t", "--topic", required=True, help="topic name")
@click.option("-i", "--ipList", "ip_list", required=True, help="ipList")
def allocate_mq(ctx: click.Context, **o: Any) -> None:
    async def job(admin: Admin, out: Output) -> None:
        topic = o["topic"]
        route = await admin.topic_route(topic)
        # Java hands the strategy the HashSet topicRouteData2TopicSubscribeInfo builds, in its iteration order, and
        # the -i addresses as given, and prints RebalanceResult's HashMap: none of them sorted
        # (tools/src/main/java/org/apache/rocketmq/tools/command/topic/AllocateMQSubCommand.java).
        queues = java_subscribe_queues(topic, route)
        ips = java_split(o["ip_list"], ",")
        keys = list(dict.fromkeys(ips))
        result = {
            keys[i]: [mq.to_json() for mq in allocate_average.allocate_as_given("aa", keys[i], queues, ips)]
            for i in java_hash_map_order([java_hash(ip) for ip in keys])
        }
        out.field("result", result)
        out.line("%s%n", json.dumps({"result": result}, separators=(",", ":")))

    run_job(ctx, job)


#: The commands :mod:`client.mqadmin` registers.
COMMANDS = (
    update_topic,
    delete_topic,
    update_topic_perm,
    topic_route,
    topic_status,
    topic_cluster_list,
    topic_list,
    update_order_conf,
    allocate_mq,
)
