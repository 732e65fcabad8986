"""``mqadmin`` commands for throughput statistics and broker maintenance, with RocketMQ's names and flags:
``statsAll``, ``brokerConsumeStats``, ``updateBrokerConfig``, ``getBrokerConfig`` and ``cleanUnusedTopic``.
:mod:`client.mqadmin` adds them to its command group. Output and errors as in :mod:`client.mqadmin`.
"""

from __future__ import annotations

from typing import Any

import click

from client.admin import Admin
from client.errors import MQBrokerError, MQClientError
from client.mqadmin_support import DLQ_PREFIX, RETRY_PREFIX, Output, common, format_ts, run_job
from remoting.codec.bodies.stats import BrokerStatsData
from remoting.errors import RemotingError

__all__ = ["COMMANDS"]


async def _stats(admin: Admin, addrs: list[str], name: str, key: str) -> tuple[float, int]:
    """Minute rate and 24-hour sum of one stats item summed over ``addrs``; brokers without the item count 0."""
    tps, total = 0.0, 0
    for addr in addrs:
        try:
            data: BrokerStatsData = await admin.view_broker_stats_data(addr, name, key)
        except MQBrokerError:
            continue
        tps += data.stats_minute.tps
        total += data.sum_24_hours()
    return tps, total


async def _topic_rows(admin: Admin, topic: str, active_only: bool) -> list[list[Any]]:
    route = await admin.topic_route(topic)
    masters = [bd.master_addr for bd in route.broker_datas if bd.master_addr]
    in_tps, in_today = await _stats(admin, masters, "TOPIC_PUT_NUMS", topic)
    groups = await admin.topic_consumed_by(topic)
    if not groups:
        if active_only and in_today == 0:
            return []
        return [[topic, "", 0, round(in_tps, 2), "", in_today, "NO_CONSUMER"]]
    rows = []
    for group in groups:
        out_tps, out_today = await _stats(admin, masters, "GROUP_GET_NUMS", f"{topic}@{group}")
        progress = await admin.consumer_progress(group, topic)
        lag = max(0, sum(w.broker_offset - w.consumer_offset for w in progress.values()))
        if not active_only or in_today > 0 or out_today > 0:
            rows.append([topic, group, lag, round(in_tps, 2), round(out_tps, 2), in_today, out_today])
    return rows


@click.command("statsAll")
@common
@click.option("-a", "--activeTopic", "active", is_flag=True, help="print active topics only")
@click.option("-t", "--topic", help="print this topic only")
def stats_all(ctx: click.Context, **o: Any) -> None:
    """Topic and consumer TPS stats (put and pull rates over the last minute, messages in 24 hours)."""

    async def job(admin: Admin, out: Output) -> None:
        rows = []
        for topic in sorted(await admin.topic_list()):
            if topic.startswith((RETRY_PREFIX, DLQ_PREFIX)) or (o["topic"] and topic != o["topic"]):
                continue
            try:
                rows.extend(await _topic_rows(admin, topic, o["active"]))
            except (MQClientError, RemotingError):
                continue  # as Java's statsAll: a topic without a usable route is skipped
        columns = ["#Topic", "#Consumer Group", "#Accumulation", "#InTPS", "#OutTPS", "#InMsg24Hour", "#OutMsg24Hour"]
        out.table("Stats", columns, rows)

    run_job(ctx, job)


@click.command("brokerConsumeStats")
@common
@click.option("-b", "--brokerAddr", "broker_addr", required=True)
@click.option("-o", "--order", type=bool, default=False, help="order topics only")
@click.option("-l", "--level", type=int, default=0, help="show queues whose lag is at least this")
def broker_consume_stats(ctx: click.Context, **o: Any) -> None:
    """Every group's consume progress on one broker, and the broker's total lag."""

    async def job(admin: Admin, out: Output) -> None:
        stats = await admin.broker_consume_stats(o["broker_addr"], is_order=o["order"])
        rows = []
        for group, per_topic in stats.consume_stats_list:
            for consume in per_topic:
                for mq, w in sorted(consume.offset_table.items()):
                    diff = w.broker_offset - w.consumer_offset
                    if diff >= o["level"]:
                        rows.append(
                            [
                                mq.topic,
                                group,
                                mq.broker_name,
                                mq.queue_id,
                                w.broker_offset,
                                w.consumer_offset,
                                diff,
                                format_ts(w.last_timestamp),
                            ]
                        )
        columns = [
            "#Topic",
            "#Group",
            "#Broker Name",
            "#QID",
            "#Broker Offset",
            "#Consumer Offset",
            "#Diff",
            "#LastTime",
        ]
        out.table(f"Consume stats of {stats.broker_addr}", columns, rows, {"Diff Total": stats.total_diff})

    run_job(ctx, job)


@click.command("updateBrokerConfig")
@common
@click.option("-b", "--brokerAddr", "broker_addr")
@click.option("-c", "--clusterName", "cluster")
@click.option("-k", "--key", required=True)
@click.option("-v", "--value", required=True)
def update_broker_config(ctx: click.Context, **o: Any) -> None:
    """Change one broker setting on a broker (or every master of a cluster); persisted in its ``-c`` file."""

    async def job(admin: Admin, out: Output) -> None:
        targets = await admin.target_brokers(o["broker_addr"], o["cluster"])
        for addr in targets:
            await admin.update_broker_config(addr, {o["key"]: o["value"]})
        out.done(f"update broker config success, {', '.join(targets)}", brokers=targets)

    run_job(ctx, job)


@click.command("getBrokerConfig")
@common
@click.option("-b", "--brokerAddr", "broker_addr")
@click.option("-c", "--clusterName", "cluster")
def get_broker_config(ctx: click.Context, **o: Any) -> None:
    """Every setting of a broker (or of every master of a cluster)."""

    async def job(admin: Admin, out: Output) -> None:
        rows = [
            [addr, key, value]
            for addr in await admin.target_brokers(o["broker_addr"], o["cluster"])
            for key, value in sorted((await admin.broker_config(addr)).items())
        ]
        out.table("Broker config", ["Broker", "Key", "Value"], rows)

    run_job(ctx, job)


@click.command("cleanUnusedTopic")
@common
@click.option("-b", "--brokerAddr", "broker_addr")
@click.option("-c", "--clusterName", "cluster")
def clean_unused_topic(ctx: click.Context, **o: Any) -> None:
    """Drop stored queues of topics a broker (or every master of a cluster) no longer has."""

    async def job(admin: Admin, out: Output) -> None:
        targets = await admin.clean_unused_topic(broker_addr=o["broker_addr"], cluster=o["cluster"])
        out.done(f"clean unused topic success, {', '.join(targets)}", brokers=targets)

    run_job(ctx, job)


#: The commands :mod:`client.mqadmin` registers.
COMMANDS = (stats_all, broker_consume_stats, update_broker_config, get_broker_config, clean_unused_topic)
