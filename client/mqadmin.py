"""``mqadmin``: RocketMQ's admin command line over :class:`client.admin.Admin`, with RocketMQ's command names and
flags. Output is a rich table; ``--json`` (before or after the command) prints JSON for scripts instead.

    python -m client.mqadmin updateTopic -n 127.0.0.1:9876 -t TopicTest -c DefaultCluster -r 4 -w 4
    python -m client.mqadmin consumerProgress -n 127.0.0.1:9876 -g my-group --json

Message commands (query, send, consume) live in :mod:`client.mqadmin_messages`, statistics and broker-settings
commands in :mod:`client.mqadmin_stats`. A command that fails prints the error on stderr and exits with status 1.
"""

from __future__ import annotations

from typing import Any

import click

from client.admin import Admin, ConsumerConnection, ConsumeStats
from client.errors import MQClientError
from client.mqadmin_messages import COMMANDS as MESSAGE_COMMANDS
from client.mqadmin_stats import COMMANDS as STATS_COMMANDS
from client.mqadmin_support import RETRY_PREFIX, Output, common, format_ts, parse_timestamp, run_job, version_desc
from remoting.codec.bodies import PERM_READ, PERM_WRITE
from remoting.codec.bodies.broker_metadata import SubscriptionGroupConfig
from remoting.errors import RemotingError


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.option("--json", "as_json", is_flag=True, help="print JSON instead of tables")
@click.pass_context
def main(ctx: click.Context, as_json: bool) -> None:
    """RocketMQ admin commands (rocketrio)."""
    ctx.ensure_object(dict)["json"] = as_json


@main.command("updateTopic")
@common
@click.option("-t", "--topic", required=True)
@click.option("-c", "--clusterName", "cluster")
@click.option("-b", "--brokerAddr", "broker_addr")
@click.option("-r", "--readQueueNums", "read", type=int, default=8, show_default=True)
@click.option("-w", "--writeQueueNums", "write", type=int, default=8, show_default=True)
@click.option("-p", "--perm", type=int, default=PERM_READ | PERM_WRITE, show_default=True)
@click.option("-o", "--order", type=bool, default=False)
def update_topic(ctx: click.Context, **o: Any) -> None:
    """Create or update a topic on a broker or every master of a cluster."""

    async def job(admin: Admin, out: Output) -> None:
        brokers = await admin.create_topic(
            o["topic"],
            read_queue_nums=o["read"],
            write_queue_nums=o["write"],
            perm=o["perm"],
            order=o["order"],
            broker_addr=o["broker_addr"],
            cluster=o["cluster"],
        )
        out.done(f"create topic to {', '.join(brokers)} success.", topic=o["topic"], brokers=brokers)

    run_job(ctx, job)


@main.command("deleteTopic")
@common
@click.option("-t", "--topic", required=True)
@click.option("-c", "--clusterName", "cluster")
def delete_topic(ctx: click.Context, **o: Any) -> None:
    """Delete a topic from the brokers and the name servers."""

    async def job(admin: Admin, out: Output) -> None:
        await admin.delete_topic(o["topic"], cluster=o["cluster"])
        out.done(f"delete topic [{o['topic']}] success.", topic=o["topic"])

    run_job(ctx, job)


@main.command("topicList")
@common
def topic_list(ctx: click.Context, **o: Any) -> None:
    """Every topic the name servers know."""

    async def job(admin: Admin, out: Output) -> None:
        out.table("Topics", ["Topic"], [[t] for t in sorted(await admin.topic_list())])

    run_job(ctx, job)


@main.command("topicRoute")
@common
@click.option("-t", "--topic", required=True)
def topic_route(ctx: click.Context, **o: Any) -> None:
    """A topic's brokers and queues."""

    async def job(admin: Admin, out: Output) -> None:
        route = await admin.topic_route(o["topic"])
        addrs = {bd.broker_name: bd.broker_addrs for bd in route.broker_datas}
        rows = [
            [qd.broker_name, addrs.get(qd.broker_name, {}).get(0), qd.read_queue_nums, qd.write_queue_nums, qd.perm]
            for qd in route.queue_datas
        ]
        out.table(
            f"Route of {o['topic']}",
            ["BrokerName", "Master", "ReadQueues", "WriteQueues", "Perm"],
            rows,
            {"route": route.to_json()} if out.as_json else None,
        )

    run_job(ctx, job)


@main.command("topicStatus")
@common
@click.option("-t", "--topic", required=True)
def topic_status(ctx: click.Context, **o: Any) -> None:
    """Min and max offset of every queue of a topic."""

    async def job(admin: Admin, out: Output) -> None:
        stats = await admin.topic_status(o["topic"])
        rows = [
            [mq.broker_name, mq.queue_id, s.min_offset, s.max_offset, format_ts(s.last_update_timestamp)]
            for mq, s in stats.items()
        ]
        out.table(f"Status of {o['topic']}", ["BrokerName", "QID", "MinOffset", "MaxOffset", "LastUpdated"], rows)

    run_job(ctx, job)


@main.command("clusterList")
@common
def cluster_list(ctx: click.Context, **o: Any) -> None:
    """Clusters, their brokers and addresses."""

    async def job(admin: Admin, out: Output) -> None:
        info = await admin.cluster_info()
        rows = [
            [cluster, name, bid, addr]
            for cluster, names in sorted(info.cluster_addr_table.items())
            for name in sorted(names)
            for bid, addr in sorted(info.broker_addr_table[name].broker_addrs.items())
            if name in info.broker_addr_table
        ]
        out.table("Clusters", ["Cluster", "BrokerName", "BID", "Addr"], rows)

    run_job(ctx, job)


@main.command("updateSubGroup")
@common
@click.option("-g", "--groupName", "group", required=True)
@click.option("-c", "--clusterName", "cluster")
@click.option("-b", "--brokerAddr", "broker_addr")
@click.option("-s", "--consumeEnable", "consume_enable", type=bool, default=True)
@click.option("-d", "--consumeBroadcastEnable", "broadcast", type=bool, default=True)
@click.option("-q", "--retryQueueNums", "retry_queues", type=int, default=1)
@click.option("-r", "--retryMaxTimes", "retry_max", type=int, default=16)
def update_sub_group(ctx: click.Context, **o: Any) -> None:
    """Create or update a subscription group."""

    async def job(admin: Admin, out: Output) -> None:
        config = SubscriptionGroupConfig(
            group_name=o["group"],
            consume_enable=o["consume_enable"],
            consume_broadcast_enable=o["broadcast"],
            retry_queue_nums=o["retry_queues"],
            retry_max_times=o["retry_max"],
        )
        brokers = await admin.create_subscription_group(config, broker_addr=o["broker_addr"], cluster=o["cluster"])
        out.done(f"create subscription group to {', '.join(brokers)} success.", group=o["group"], brokers=brokers)

    run_job(ctx, job)


@main.command("deleteSubGroup")
@common
@click.option("-g", "--groupName", "group", required=True)
@click.option("-c", "--clusterName", "cluster")
@click.option("-b", "--brokerAddr", "broker_addr")
def delete_sub_group(ctx: click.Context, **o: Any) -> None:
    """Delete a subscription group."""

    async def job(admin: Admin, out: Output) -> None:
        brokers = await admin.delete_subscription_group(o["group"], broker_addr=o["broker_addr"], cluster=o["cluster"])
        out.done(f"delete subscription group [{o['group']}] from {', '.join(brokers)} success.", brokers=brokers)

    run_job(ctx, job)


@main.command("consumerProgress")
@common
@click.option("-g", "--groupName", "group", help="this group's queues; without it, one line per consumer group")
@click.option("-t", "--topicName", "topic", help="with -g: only this topic's queues")
def consumer_progress(ctx: click.Context, **o: Any) -> None:
    """Per-queue broker offset, consumer offset and lag of a group, or a summary line of every group."""

    async def job(admin: Admin, out: Output) -> None:
        if o["group"] is None:
            await _all_groups_progress(admin, out)
            return
        stats = await admin.consume_stats(o["group"], o["topic"])
        rows = [
            [
                mq.topic,
                mq.broker_name,
                mq.queue_id,
                w.broker_offset,
                w.consumer_offset,
                w.broker_offset - w.consumer_offset,
                format_ts(w.last_timestamp),
            ]
            for mq, w in stats.offset_table.items()
        ]
        out.table(
            f"Progress of {o['group']}",
            ["Topic", "BrokerName", "QID", "BrokerOffset", "ConsumerOffset", "Diff", "LastTime"],
            rows,
            {"consumeTps": round(stats.consume_tps, 2), "diffTotal": _diff_total(stats)},
        )

    run_job(ctx, job)


def _diff_total(stats: ConsumeStats) -> int:
    return sum(w.broker_offset - w.consumer_offset for w in stats.offset_table.values())


async def _all_groups_progress(admin: Admin, out: Output) -> None:
    """RocketMQ's ``consumerProgress`` without ``-g`` (tools/src/main/java/org/apache/rocketmq/tools/command/consumer/
    ConsumerProgressSubCommand.java): the groups are those with a ``%RETRY%<group>`` topic; each line has the online
    clients, the lowest client version, consume type and message model (blank when none is online) and the group's
    consume TPS and total lag, which a group without an online consumer shows too."""
    rows = []
    for topic in sorted(await admin.topic_list()):
        if not topic.startswith(RETRY_PREFIX):
            continue
        group = topic[len(RETRY_PREFIX) :]
        try:
            stats = await admin.consume_stats(group)
        except (MQClientError, RemotingError):
            stats = ConsumeStats()
        try:
            clients = await admin.consumer_connection(group)
        except (MQClientError, RemotingError):
            clients = ConsumerConnection()
        count = len(clients.connection_set)
        version = version_desc(min(c.version for c in clients.connection_set)) if count else "OFFLINE"
        pull = clients.consume_type == "CONSUME_ACTIVELY"
        consume_type = ("PULL" if pull else "PUSH") if count else ""
        model = (clients.message_model or "") if count and not pull else ""
        rows.append([group, count, version, consume_type, model, int(stats.consume_tps), _diff_total(stats)])
    out.table("Consumer groups", ["#Group", "#Count", "#Version", "#Type", "#Model", "#TPS", "#Diff Total"], rows)


@main.command("consumerConnection")
@common
@click.option("-g", "--consumerGroup", "group", required=True)
def consumer_connection(ctx: click.Context, **o: Any) -> None:
    """The online consumers of a group and their subscriptions."""

    async def job(admin: Admin, out: Output) -> None:
        conn = await admin.consumer_connection(o["group"])
        rows = [[c.client_id, c.client_addr, c.language, c.version] for c in conn.connection_set]
        subs = {t: s.sub_string for t, s in conn.subscription_table.items()}
        out.table(
            f"Consumers of {o['group']}",
            ["ClientId", "ClientAddr", "Language", "Version"],
            rows,
            {"subscriptions": subs, "consumeType": conn.consume_type, "messageModel": conn.message_model},
        )

    run_job(ctx, job)


@main.command("producerConnection")
@common
@click.option("-g", "--producerGroup", "group", required=True)
@click.option("-t", "--topic", required=True)
def producer_connection(ctx: click.Context, **o: Any) -> None:
    """The producers of a group connected to a topic's brokers."""

    async def job(admin: Admin, out: Output) -> None:
        conn = await admin.producer_connection(o["group"], o["topic"])
        rows = [[c.client_id, c.client_addr, c.language, c.version] for c in conn.connection_set]
        out.table(f"Producers of {o['group']}", ["ClientId", "ClientAddr", "Language", "Version"], rows)

    run_job(ctx, job)


@main.command("resetOffsetByTime")
@common
@click.option("-g", "--group", required=True)
@click.option("-t", "--topic", required=True)
@click.option("-s", "--timestamp", required=True, help="now, ms, or yyyy-MM-dd#HH:mm:ss:SSS")
@click.option("-f", "--force", type=bool, default=True)
def reset_offset_by_time(ctx: click.Context, **o: Any) -> None:
    """Move an online group's offsets of a topic to a point in time."""

    async def job(admin: Admin, out: Output) -> None:
        table = await admin.reset_offset_by_time(
            o["group"], o["topic"], parse_timestamp(o["timestamp"]), force=o["force"]
        )
        out.table(
            "Reset offsets",
            ["BrokerName", "QID", "Offset"],
            [[mq.broker_name, mq.queue_id, off] for mq, off in table.items()],
        )

    run_job(ctx, job)


@main.command("brokerStatus")
@common
@click.option("-b", "--brokerAddr", "broker_addr")
@click.option("-c", "--clusterName", "cluster")
def broker_status(ctx: click.Context, **o: Any) -> None:
    """Runtime statistics of a broker (or every master of a cluster)."""

    async def job(admin: Admin, out: Output) -> None:
        targets = await admin.target_brokers(o["broker_addr"], o["cluster"])
        rows = [
            [addr, key, value] for addr in targets for key, value in sorted((await admin.broker_status(addr)).items())
        ]
        out.table("Broker status", ["Broker", "Key", "Value"], rows)

    run_job(ctx, job)


for _command in (*MESSAGE_COMMANDS, *STATS_COMMANDS):
    main.add_command(_command)


if __name__ == "__main__":
    main()
