"""``mqadmin`` statistics and broker-settings commands, as RocketMQ 4.9.8's ``tools/.../command/stats/`` and
``broker/``: ``statsAll``, ``brokerConsumeStats``, ``updateBrokerConfig``, ``getBrokerConfig`` and
``cleanUnusedTopic``. Options, required options and printed lines are Java's; :mod:`client.mqadmin` registers them.
"""

from __future__ import annotations

from typing import Any

import click

from client.admin import BROKER_FAILURES, Admin
from client.mqadmin_support import (
    JAVA_LONG,
    Output,
    broker_may_fail,
    cluster_masters,
    cluster_masters_and_slaves,
    common,
    format_date,
    java_bool,
    java_hash_set,
    java_properties_order,
    java_topic_list,
    maintenance_targets,
    print_result,
    printf,
    run_job,
)
from remoting.codec.bodies.stats import BrokerStatsData
from remoting.codec.topics import is_retry_or_dlq_topic

__all__ = ["COMMANDS"]

_STATS = "%-64s  %-64s %12s %11s %11s %14s %14s%n"
_STATS_ROW = "%-64.64s  %-64.64s %12d %11.2f %11.2f %14d %14d%n"
_STATS_NO_CONSUMER = "%-64.64s  %-64s %12d %11.2f %11s %14d %14s%n"
_CONSUME = "%-64s  %-64s  %-32s  %-4s  %-20s  %-20s  %-20s  %s%n"
_CONSUME_ROW = "%-64.64s  %-64s  %-32.32s  %-4d  %-20d  %-20d  %-20d  %s%n"


async def _stats(admin: Admin, addrs: list[str], name: str, key: str) -> tuple[float, int]:
    """Minute rate and 24-hour sum of one stats item summed over ``addrs``; brokers without the item, or that do not
    answer, count 0 (Java catches each broker's viewBrokerStatsData)."""
    tps, total = 0.0, 0
    for addr in addrs:
        try:
            data: BrokerStatsData = await admin.view_broker_stats_data(addr, name, key)
        except BROKER_FAILURES:
            continue
        tps += data.stats_minute.tps
        total += data.sum_24_hours()
    return tps, total


async def _topic_rows(admin: Admin, out: Output, topic: str, active_only: bool) -> None:
    """Java's ``printTopicDetail`` (tools/src/main/java/org/apache/rocketmq/tools/command/stats/
    StatsAllSubCommand.java)."""
    route = await admin.topic_route(topic)
    masters = [bd.master_addr for bd in route.broker_datas if bd.master_addr]
    in_tps, in_today = await _stats(admin, masters, "TOPIC_PUT_NUMS", topic)
    # Java iterates GroupList's HashSet (common/src/main/java/org/apache/rocketmq/common/protocol/body/GroupList.java).
    groups = java_hash_set(await admin.topic_consumed_by(topic))
    if not groups:
        if not active_only or in_today > 0:
            out.row(_STATS_NO_CONSUMER, topic, "", 0, in_tps, "", in_today, "NO_CONSUMER")
        return
    for group in groups:
        out_tps, out_today = await _stats(admin, masters, "GROUP_GET_NUMS", f"{topic}@{group}")
        try:
            progress = await admin.consumer_progress(group, topic)
            lag = max(0, sum(w.broker_offset - w.consumer_offset for w in progress.values()))
        except BROKER_FAILURES:  # Java catches examineConsumeStats' failure, a broker not answering included
            lag = 0
        if not active_only or in_today > 0 or out_today > 0:
            out.row(_STATS_ROW, topic, group, lag, in_tps, out_tps, in_today, out_today)


@click.command("statsAll", help="Topic and Consumer tps stats")
@common
@click.option("-a", "--activeTopic", "active", is_flag=True, help="print active topic only")
@click.option("-t", "--topic", help="print select topic only")
def stats_all(ctx: click.Context, **o: Any) -> None:
    async def job(admin: Admin, out: Output) -> None:
        out.header(_STATS, "#Topic", "#Consumer Group", "#Accumulation", "#InTPS", "#OutTPS", "#InMsg24Hour",
                   "#OutMsg24Hour")  # fmt: skip
        for topic in await java_topic_list(admin):
            if is_retry_or_dlq_topic(topic):
                continue
            if o["topic"] and topic != o["topic"]:
                continue
            try:
                await _topic_rows(admin, out, topic, o["active"])
            except BROKER_FAILURES:
                continue  # as Java's statsAll: a topic without a usable route is skipped

    run_job(ctx, job)


@click.command("brokerConsumeStats", help="Fetch broker consume stats data")
@common
@click.option("-b", "--brokerAddr", "broker_addr", required=True, help="Broker address")
@click.option("-t", "--timeoutMillis", "timeout", type=JAVA_LONG, default=50000, help="request timeout Millis")
@click.option("-l", "--level", type=JAVA_LONG, default=0, help="threshold of print diff")
@click.option("-o", "--order", help="order topic")
def broker_consume_stats(ctx: click.Context, **o: Any) -> None:
    async def job(admin: Admin, out: Output) -> None:
        # BrokerConsumeStatsSubCommad passes -t (default 50000 ms) to fetchConsumeStatsInBroker as the request's
        # timeout (tools/src/main/java/org/apache/rocketmq/tools/command/broker/BrokerConsumeStatsSubCommad.java);
        # Java's 0 or less times out at once, here after 1 ms.
        timeout = max(o["timeout"], 1) / 1000
        stats = await admin.broker_consume_stats(o["broker_addr"], is_order=java_bool(o["order"]), timeout=timeout)
        out.header(_CONSUME, "#Topic", "#Group", "#Broker Name", "#QID", "#Broker Offset", "#Consumer Offset", "#Diff",
                   "#LastTime")  # fmt: skip
        for group, per_topic in stats.consume_stats_list:
            for consume in per_topic:
                for mq, w in sorted(consume.offset_table.items()):
                    diff = w.broker_offset - w.consumer_offset
                    if diff >= o["level"] and w.last_timestamp > 0:
                        out.row(_CONSUME_ROW, mq.topic, group, mq.broker_name, mq.queue_id, w.broker_offset,
                                w.consumer_offset, diff, format_date(w.last_timestamp))  # fmt: skip
        out.line("%nDiff Total: %d%n", stats.total_diff)
        out.field("Diff Total", stats.total_diff)

    run_job(ctx, job)


@click.command("updateBrokerConfig", help="Update broker's config")
@common
@click.option("-b", "--brokerAddr", "broker_addr", help="update which broker")
@click.option("-c", "--clusterName", "cluster", help="update which cluster")
@click.option("-k", "--key", required=True, help="config key")
@click.option("-v", "--value", required=True, help="config value")
def update_broker_config(ctx: click.Context, **o: Any) -> None:
    async def job(admin: Admin, out: Output) -> None:
        if not (o["broker_addr"] or o["cluster"]):
            click.echo(ctx.get_help())
            return
        targets = [o["broker_addr"]] if o["broker_addr"] else await cluster_masters(admin, out, o["cluster"])
        for addr in targets:
            with broker_may_fail(addr, go_on=not o["broker_addr"]):  # Java: -c goes on past a master, -b fails
                await admin.update_broker_config(addr, {o["key"]: o["value"]})
                out.line("update broker config success, %s\n", addr)
        out.field("brokers", targets)

    run_job(ctx, job)


async def _print_config(admin: Admin, out: Output, prefix: str, addr: str) -> None:
    out.line("%s", prefix)
    config = await admin.broker_config(addr)
    # getAndPrint walks the Properties MixAll.string2Properties loaded the answer into: Java 8's Hashtable order
    # (tools/src/main/java/org/apache/rocketmq/tools/command/broker/GetBrokerConfigCommand.java).
    for key in java_properties_order(list(config)):
        value = config[key]
        out.entry(printf("%-50s=  %s\n", key, value), Broker=addr, Key=key, Value=value)
    out.line("%n")


@click.command("getBrokerConfig", help="Get broker config by cluster or special broker!")
@common
@click.option("-b", "--brokerAddr", "broker_addr", help="get which broker")
@click.option("-c", "--clusterName", "cluster", help="get which cluster")
def get_broker_config(ctx: click.Context, **o: Any) -> None:
    async def job(admin: Admin, out: Output) -> None:
        if o["broker_addr"]:
            addr = o["broker_addr"]
            await _print_config(admin, out, f"============{addr}============\n", addr)
        elif o["cluster"]:
            for master, slaves in await cluster_masters_and_slaves(admin, out, o["cluster"]):
                await _print_config(admin, out, f"============Master: {master}============\n", master)
                for slave in slaves:
                    await _print_config(
                        admin, out, f"============My Master: {master}=====Slave: {slave}============\n", slave
                    )

    run_job(ctx, job)


@click.command("cleanUnusedTopic", help="Clean unused topic on broker.")
@common
@click.option("-b", "--brokerAddr", "broker_addr", help="Broker address")
@click.option("-c", "--cluster", help="cluster name")
def clean_unused_topic(ctx: click.Context, **o: Any) -> None:
    async def job(admin: Admin, out: Output) -> None:
        # DefaultMQAdminExtImpl.cleanUnusedTopic asks the brokers one by one in ClusterInfo.retrieveAllAddrByCluster's
        # order, the first that fails ending the command (tools/src/main/java/org/apache/rocketmq/tools/admin/
        # DefaultMQAdminExtImpl.java).
        targets = await maintenance_targets(admin, o["broker_addr"], o["cluster"])
        for addr in targets:
            await admin.clean_unused_topic(broker_addr=addr)
        print_result(out, bool(targets))
        out.field("brokers", targets)

    run_job(ctx, job)


#: The commands :mod:`client.mqadmin` registers.
COMMANDS = (stats_all, broker_consume_stats, update_broker_config, get_broker_config, clean_unused_topic)
