"""``mqadmin``: RocketMQ's admin command line over :class:`client.admin.Admin`, with RocketMQ's command names and
flags. Output is a rich table; ``--json`` (before or after the command) prints JSON for scripts instead.

    python -m client.mqadmin updateTopic -n 127.0.0.1:9876 -t TopicTest -c DefaultCluster -r 4 -w 4
    python -m client.mqadmin consumerProgress -n 127.0.0.1:9876 -g my-group --json

Statistics and broker-settings commands live in :mod:`client.mqadmin_stats`. A command that fails prints the error
on stderr and exits with status 1.
"""

from __future__ import annotations

from typing import Any

import click

from client.admin import Admin
from client.message import Message
from client.mqadmin_stats import COMMANDS
from client.mqadmin_support import MSG_COLUMNS, Output, common, format_ts, msg_row, parse_timestamp, run_job
from client.producer import Producer
from remoting.codec.bodies import PERM_READ, PERM_WRITE, MessageQueue
from remoting.codec.bodies.configs import SubscriptionGroupConfig


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
@click.option("-g", "--groupName", "group", required=True)
@click.option("-t", "--topicName", "topic")
def consumer_progress(ctx: click.Context, **o: Any) -> None:
    """Per-queue broker offset, consumer offset and lag of a group."""

    async def job(admin: Admin, out: Output) -> None:
        progress = await admin.consumer_progress(o["group"], o["topic"])
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
            for mq, w in progress.items()
        ]
        total = sum(w.broker_offset - w.consumer_offset for w in progress.values())
        out.table(
            f"Progress of {o['group']}",
            ["Topic", "BrokerName", "QID", "BrokerOffset", "ConsumerOffset", "Diff", "LastTime"],
            rows,
            {"diffTotal": total},
        )

    run_job(ctx, job)


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


@main.command("queryMsgById")
@common
@click.option("-i", "--msgId", "msg_id", required=True, help="offset message id")
def query_msg_by_id(ctx: click.Context, **o: Any) -> None:
    """A message by its offset msgId."""

    async def job(admin: Admin, out: Output) -> None:
        m = await admin.query_msg_by_id(o["msg_id"])
        out.table("Message", MSG_COLUMNS, [msg_row(m)], {"properties": m.properties} if out.as_json else None)

    run_job(ctx, job)


@main.command("queryMsgByKey")
@common
@click.option("-t", "--topic", required=True)
@click.option("-k", "--msgKey", "key", required=True)
def query_msg_by_key(ctx: click.Context, **o: Any) -> None:
    """Messages of a topic by key."""

    async def job(admin: Admin, out: Output) -> None:
        out.table(
            f"Key {o['key']}", MSG_COLUMNS, [msg_row(m) for m in await admin.query_msg_by_key(o["topic"], o["key"])]
        )

    run_job(ctx, job)


@main.command("queryMsgByOffset")
@common
@click.option("-t", "--topic", required=True)
@click.option("-b", "--brokerName", "broker", required=True)
@click.option("-i", "--queueId", "queue_id", type=int, required=True)
@click.option("-o", "--offset", type=int, required=True)
def query_msg_by_offset(ctx: click.Context, **o: Any) -> None:
    """The message at a queue offset."""

    async def job(admin: Admin, out: Output) -> None:
        msgs = await admin.query_msg_by_offset(MessageQueue(o["topic"], o["broker"], o["queue_id"]), o["offset"])
        out.table("Message", MSG_COLUMNS, [msg_row(m) for m in msgs])

    run_job(ctx, job)


@main.command("sendMessage")
@common
@click.option("-t", "--topic", required=True)
@click.option("-p", "--body", required=True)
@click.option("-k", "--key", "keys")
@click.option("-c", "--tags")
@click.option("-b", "--broker")
@click.option("-i", "--qid", type=int)
def send_message(ctx: click.Context, **o: Any) -> None:
    """Send one message."""

    async def job(admin: Admin, out: Output) -> None:
        async with Producer("TOOLS_PRODUCER", admin.instance.config.namesrv_addr) as producer:
            queue = MessageQueue(o["topic"], o["broker"], o["qid"]) if o["broker"] and o["qid"] is not None else None
            r = await producer.send(
                Message(o["topic"], o["body"].encode(), tags=o["tags"], keys=o["keys"]), queue=queue
            )
        out.table(
            "Sent",
            ["Broker Name", "Queue Id", "Queue Offset", "Send Status", "MsgId", "OffsetMsgId"],
            [[r.broker_name, r.queue_id, r.queue_offset, r.send_status.name, r.msg_id, r.offset_msg_id]],
        )

    run_job(ctx, job)


@main.command("consumeMessage")
@common
@click.option("-t", "--topic", required=True)
@click.option("-b", "--brokerName", "broker")
@click.option("-i", "--queueId", "queue_id", type=int)
@click.option("-o", "--offset", type=int, default=0, show_default=True)
@click.option("-c", "--messageNumber", "count", type=int, default=128, show_default=True)
def consume_message(ctx: click.Context, **o: Any) -> None:
    """Read messages from a topic's queues (no offsets committed)."""

    async def job(admin: Admin, out: Output) -> None:
        route = await admin.topic_route(o["topic"])
        queues = [
            MessageQueue(o["topic"], qd.broker_name, q) for qd in route.queue_datas for q in range(qd.read_queue_nums)
        ]
        queues = [
            mq for mq in queues if (o["broker"] in (None, mq.broker_name)) and (o["queue_id"] in (None, mq.queue_id))
        ]
        rows: list[list[Any]] = []
        for mq in sorted(queues):
            if len(rows) < o["count"]:
                msgs = await admin.query_msg_by_offset(mq, o["offset"], min(32, o["count"] - len(rows)))
                rows.extend(msg_row(m) for m in msgs)
        out.table(f"Messages of {o['topic']}", MSG_COLUMNS, rows)

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
        targets = [o["broker_addr"]] if o["broker_addr"] else await admin.master_addresses(o["cluster"])
        rows = [
            [addr, key, value] for addr in targets for key, value in sorted((await admin.broker_status(addr)).items())
        ]
        out.table("Broker status", ["Broker", "Key", "Value"], rows)

    run_job(ctx, job)


for _command in COMMANDS:
    main.add_command(_command)


if __name__ == "__main__":
    main()
