"""``mqadmin`` consumer- and producer-group commands, as RocketMQ 4.9.8's ``tools/.../command/consumer/``,
``connection/`` and ``producer/``: ``updateSubGroup``, ``deleteSubGroup``, ``consumerProgress``,
``consumerConnection``, ``producerConnection``, ``consumerStatus``, ``getConsumerConfig``, ``producer`` and
``startMonitoring``. Options, required options and printed lines are Java's; :mod:`client.mqadmin` registers them.

``consumerStatus`` writes each client's running info to ``<now>/<clientId>`` as Java does, in rocketrio's text form
of it (:func:`running_info_text`). ``startMonitoring`` runs Java's monitor round (20 s after the start, then every
60 s: each consumer group's undone messages per topic) and prints what Java's ``DefaultMonitorListener`` logs;
``--rounds`` (ours) stops it.
"""

from __future__ import annotations

import functools
import time
from contextlib import suppress
from datetime import datetime
from pathlib import Path
from typing import Any

import anyio
import click

from client.admin import BROKER_FAILURES, Admin
from client.errors import MQClientError
from client.mqadmin_messages import mq_text
from client.mqadmin_support import (
    JAVA_INT,
    JAVA_LONG,
    NO_CONSUME_STATS,
    NO_PRODUCER_CONNECTION,
    Output,
    broker_may_fail,
    cluster_masters,
    common,
    format_date,
    group_config_text,
    java_bool,
    java_concurrent_hash_map_order,
    java_hash_set,
    java_properties_order,
    java_text,
    java_topic_list,
    printf,
    run_job,
    version_desc,
)
from client.mqadmin_topics import delete_topic_in_cluster
from client.route import master_address
from remoting.codec.bodies import MessageQueue
from remoting.codec.bodies.admin import (
    PROP_CONSUME_ORDERLY,
    PROP_CONSUME_TYPE,
    PROP_CONSUMER_START_TIMESTAMP,
    OffsetWrapper,
)
from remoting.codec.bodies.assignment import MessageRequestMode
from remoting.codec.bodies.broker_metadata import SubscriptionGroupConfig
from remoting.codec.codes import RequestCode
from remoting.codec.message_properties import java_hash, java_trim
from remoting.codec.topics import DLQ_GROUP_TOPIC_PREFIX, RETRY_GROUP_TOPIC_PREFIX

__all__ = ["COMMANDS", "monitor", "running_info_text"]

#: Java's ``MonitorConfig.roundInterval``, in seconds (tools/src/main/java/org/apache/rocketmq/tools/monitor/).
MONITOR_ROUND = 60.0
#: How long after the start the first round runs (``MonitorService.startScheduleTask``'s initial delay), in seconds.
MONITOR_FIRST_ROUND = 20.0


def _sub_group_config(o: dict[str, Any]) -> SubscriptionGroupConfig:
    """updateSubGroup's config: Java's defaults, broadcast and from-min off unless asked; a broker id past a Java
    long or a count past a Java int is a ValueError (Java's parse fails the command)."""
    for key, bits in (("retry_queues", 32), ("retry_max", 32), ("broker_id", 64), ("slowly", 64)):
        if o[key] is not None and not -(1 << (bits - 1)) <= o[key] < 1 << (bits - 1):
            raise ValueError(f"{o[key]} is out of range for a Java {'int' if bits == 32 else 'long'}")
    base = SubscriptionGroupConfig(o["group"])
    return SubscriptionGroupConfig(
        group_name=base.group_name,
        consume_enable=java_bool(o["consume_enable"], base.consume_enable),
        consume_from_min_enable=java_bool(o["from_min"]),
        consume_broadcast_enable=java_bool(o["broadcast"]),
        retry_queue_nums=base.retry_queue_nums if o["retry_queues"] is None else o["retry_queues"],
        retry_max_times=base.retry_max_times if o["retry_max"] is None else o["retry_max"],
        broker_id=base.broker_id if o["broker_id"] is None else o["broker_id"],
        which_broker_when_consume_slowly=base.which_broker_when_consume_slowly if o["slowly"] is None else o["slowly"],
        notify_consumer_ids_changed_enable=java_bool(o["notify"], base.notify_consumer_ids_changed_enable),
    )


@click.command("updateSubGroup", help="Update or create subscription group")
@common
@click.option("-b", "--brokerAddr", "broker_addr", help="create subscription group to which broker")
@click.option("-c", "--clusterName", "cluster", help="create subscription group to which cluster")
@click.option("-g", "--groupName", "group", required=True, help="consumer group name")
@click.option("-s", "--consumeEnable", "consume_enable", help="consume enable")
@click.option("-m", "--consumeFromMinEnable", "from_min", help="from min offset")
@click.option("-d", "--consumeBroadcastEnable", "broadcast", help="broadcast")
@click.option("-q", "--retryQueueNums", "retry_queues", type=JAVA_INT, help="retry queue nums")
@click.option("-r", "--retryMaxTimes", "retry_max", type=JAVA_INT, help="retry max times")
@click.option("-i", "--brokerId", "broker_id", type=JAVA_LONG, help="consumer from which broker id")
@click.option(
    "-w", "--whichBrokerWhenConsumeSlowly", "slowly", type=JAVA_LONG, help="which broker id when consume slowly"
)
@click.option("-a", "--notifyConsumerIdsChanged", "notify", help="notify consumerId changed")
def update_sub_group(ctx: click.Context, **o: Any) -> None:
    async def job(admin: Admin, out: Output) -> None:
        config = _sub_group_config(o)  # inside the job: a bad number fails the command, as Java's parse does
        if o["broker_addr"]:
            targets = [o["broker_addr"]]
        elif o["cluster"]:
            targets = await cluster_masters(admin, out, o["cluster"])
        else:
            click.echo(ctx.get_help())
            return
        for addr in targets:
            with broker_may_fail(addr, go_on=not o["broker_addr"]):  # Java: -c goes on past a master, -b fails
                await admin.create_subscription_group(config, broker_addr=addr)
                out.line("create subscription group to %s success.%n", addr)
        out.line("%s", group_config_text(config))

    run_job(ctx, job)


@click.command("deleteSubGroup", help="Delete subscription group from broker.")
@common
@click.option("-b", "--brokerAddr", "broker_addr", help="delete subscription group from which broker")
@click.option("-c", "--clusterName", "cluster", help="delete subscription group from which cluster")
@click.option("-g", "--groupName", "group", required=True, help="subscription group name")
@click.option("-r", "--removeOffset", "remove_offset", help="remove offset")
def delete_sub_group(ctx: click.Context, **o: Any) -> None:
    async def job(admin: Admin, out: Output) -> None:
        group, clean = o["group"], java_bool(o["remove_offset"])
        if o["broker_addr"]:
            addr = o["broker_addr"]
            await admin.delete_subscription_group(group, broker_addr=addr, clean_offset=clean)
            out.line("delete subscription group [%s] from broker [%s] success.%n", group, addr)
        elif o["cluster"]:
            cluster = o["cluster"]
            for addr in await cluster_masters(admin, out, cluster):
                await admin.delete_subscription_group(group, broker_addr=addr, clean_offset=clean)
                out.line("delete subscription group [%s] from broker [%s] in cluster [%s] success.%n", group, addr,
                         cluster)  # fmt: skip
            # Java catches a failure deleting these topics (e.printStackTrace; the %DLQ% one then not tried):
            # tools/src/main/java/org/apache/rocketmq/tools/command/consumer/DeleteSubscriptionGroupCommand.java
            with broker_may_fail(cluster):
                for prefix in (RETRY_GROUP_TOPIC_PREFIX, DLQ_GROUP_TOPIC_PREFIX):
                    await delete_topic_in_cluster(admin, out, cluster, prefix + group)
        else:
            click.echo(ctx.get_help())

    run_job(ctx, job)


@click.command("setConsumeMode", help="Set consume message mode. pull/pop etc.")
@common
@click.option("-b", "--brokerAddr", "broker_addr", help="create subscription group to which broker")
@click.option("-c", "--clusterName", "cluster", help="create subscription group to which cluster")
@click.option("-t", "--topicName", "topic", required=True, help="topic name")
@click.option("-g", "--groupName", "group", required=True, help="consumer group name")
@click.option("-m", "--mode", "mode", required=True, help="consume mode. PULL/POP")
@click.option(
    "-q", "--popShareQueueNum", "share", type=JAVA_INT, default=0, help="num of queue which share in pop mode"
)
def set_consume_mode(ctx: click.Context, **o: Any) -> None:
    """tools/src/main/java/org/apache/rocketmq/tools/command/consumer/SetConsumeModeSubCommand.java: -b fails on
    the broker's refusal, -c goes on past a master that refuses (Java prints its stack trace)."""

    async def job(admin: Admin, out: Output) -> None:
        topic, group, share = java_trim(o["topic"]), java_trim(o["group"]), o["share"]
        name = java_trim(o["mode"])
        if name not in MessageRequestMode.__members__:  # MessageRequestMode.valueOf
            raise ValueError(f"No enum constant org.apache.rocketmq.common.message.MessageRequestMode.{name}")
        mode = MessageRequestMode[name]
        if o["broker_addr"]:
            targets, go_on = [java_trim(o["broker_addr"])], False
        elif o["cluster"]:
            targets, go_on = await cluster_masters(admin, out, java_trim(o["cluster"])), True
        else:
            click.echo(ctx.get_help())
            return
        for addr in targets:
            with broker_may_fail(addr, go_on=go_on):
                await admin.set_message_request_mode(addr, topic, group, mode, share)
                out.line("set consume mode to %s success.%n", addr)
        out.line("topic[%s] group[%s] consume mode[%s] popShareQueueNum[%d]", topic, group, mode.name, share)

    run_job(ctx, job)


_PROGRESS = "%-64s  %-32s  %-4s  %-20s  %-20s  %-20s  %s%n"
_PROGRESS_ROW = "%-64.64s  %-32.32s  %-4d  %-20d  %-20d  %-20d  %s%n"
_PROGRESS_IP = "%-64s  %-32s  %-4s  %-20s  %-20s  %-20s %-20s  %s%n"
_PROGRESS_IP_ROW = "%-64.64s  %-32.32s  %-4d  %-20d  %-20d  %-20s %-20d  %s%n"
_GROUPS = "%-64s  %-6s  %-24s %-5s  %-14s  %-7s  %s%n"
_GROUPS_ROW = "%-64.64s  %-6d  %-24s %-5s  %-14s  %-7d  %d%n"


async def _allocation(admin: Admin, group: str) -> dict[MessageQueue, str]:
    """Which client IP holds each queue (Java's ``getMessageQueueAllocationResult``); empty when unknown."""
    found: dict[MessageQueue, str] = {}
    try:
        for conn in (await admin.consumer_connection(group)).connection_set:
            info = await admin.consumer_running_info(group, conn.client_id)
            for mq in info.get("mqTable") or {}:
                if isinstance(mq, MessageQueue):
                    found[mq] = conn.client_id.split("@")[0]
    except Exception:  # as Java: no allocation column values rather than no progress
        pass
    return found


async def _group_progress(admin: Admin, out: Output, group: str, show_ip: bool) -> None:
    stats = await admin.consume_stats(group)
    progress = stats.offset_table
    if not progress:  # DefaultMQAdminExtImpl.examineConsumeStats fails the command
        raise MQClientError(NO_CONSUME_STATS)
    where = await _allocation(admin, group) if show_ip else {}
    columns = ("#Topic", "#Broker Name", "#QID", "#Broker Offset", "#Consumer Offset")
    if show_ip:
        out.header(_PROGRESS_IP, *columns, "#Client IP", "#Diff", "#LastTime")
    else:
        out.header(_PROGRESS, *columns, "#Diff", "#LastTime")
    total = 0
    for mq, w in sorted(progress.items()):
        diff = w.broker_offset - w.consumer_offset
        total += diff
        last = "N/A" if w.last_timestamp == 0 else format_date(w.last_timestamp)
        head = (mq.topic, mq.broker_name, mq.queue_id, w.broker_offset, w.consumer_offset)
        if show_ip:
            out.row(_PROGRESS_IP_ROW, *head, where.get(mq, "N/A"), diff, last)
        else:
            out.row(_PROGRESS_ROW, *head, diff, last)
    tps = stats.consume_tps
    out.line("%n")
    out.line("Consume TPS: %.2f%n", tps)
    out.line("Diff Total: %d%n", total)
    out.field("Consume TPS", tps)
    out.field("Diff Total", total)


async def _all_groups(admin: Admin, out: Output) -> None:
    out.header(_GROUPS, "#Group", "#Count", "#Version", "#Type", "#Model", "#TPS", "#Diff Total")
    for topic in await java_topic_list(admin):
        if topic.startswith(RETRY_GROUP_TOPIC_PREFIX):
            await _group_row(admin, out, topic[len(RETRY_GROUP_TOPIC_PREFIX) :])


async def _group_row(admin: Admin, out: Output, group: str) -> None:
    """One group's line (Java's ``GroupConsumeInfo``): its consume stats and its connections are each read apart,
    and one that fails (refused, or a broker that does not answer) leaves its figures at 0 and the group OFFLINE. The
    type is PULL for CONSUME_ACTIVELY, else PUSH (a null one too); the model is shown for CONSUME_PASSIVELY only, and a
    push group whose model is null gets no line: ``messageModelDesc`` throws NullPointerException there, which
    ConsumerProgressSubCommand's loop catches (tools/src/main/java/org/apache/rocketmq/tools/command/consumer/
    ConsumerProgressSubCommand.java)."""
    diff, tps = 0, 0.0
    with suppress(*BROKER_FAILURES):
        stats = await admin.consume_stats(group)
        diff = sum(w.broker_offset - w.consumer_offset for w in stats.offset_table.values())
        tps = stats.consume_tps
    conn = None
    with suppress(*BROKER_FAILURES):
        conn = await admin.consumer_connection(group)
    if conn is None or not conn.connection_set:
        out.row(_GROUPS_ROW, group, 0, "OFFLINE", "", "", int(tps), diff)
        return
    count = len(conn.connection_set)
    pull = conn.consume_type == "CONSUME_ACTIVELY"
    version = min(c.version for c in conn.connection_set)
    model = conn.message_model if conn.consume_type == "CONSUME_PASSIVELY" else ""
    if model is None:
        return
    out.row(_GROUPS_ROW, group, count, version_desc(version), "PULL" if pull else "PUSH", model, int(tps), diff)


@click.command("consumerProgress", help="Query consumers's progress, speed")
@common
@click.option("-g", "--groupName", "group", help="consumer group name")
@click.option("-s", "--showClientIP", "show_ip", help="Show Client IP per Queue")
def consumer_progress(ctx: click.Context, **o: Any) -> None:
    async def job(admin: Admin, out: Output) -> None:
        if o["group"]:
            await _group_progress(admin, out, o["group"], (o["show_ip"] or "").lower() == "true")
        else:
            await _all_groups(admin, out)

    run_job(ctx, job)


@click.command("consumerConnection", help="Query consumer's socket connection, client version and subscription")
@common
@click.option("-g", "--consumerGroup", "group", required=True, help="consumer group name")
@click.option("-b", "--brokerAddr", "broker_addr", help="broker address")
def consumer_connection(ctx: click.Context, **o: Any) -> None:
    async def job(admin: Admin, out: Output) -> None:
        conn = await admin.consumer_connection(o["group"], o["broker_addr"])
        out.header("%-36s %-22s %-10s %s%n", "#ClientId", "#ClientAddr", "#Language", "#Version")
        for c in conn.connection_set:
            out.row("%-36s %-22s %-10s %s%n", c.client_id, c.client_addr, c.language, version_desc(c.version))
        out.line("%nBelow is subscription:\n")
        out.line("%-20s %s%n", "#Topic", "#SubExpression")
        # ConsumerConnection.subscriptionTable is a ConcurrentHashMap fastjson fills in the broker's order
        # (common/src/main/java/org/apache/rocketmq/common/protocol/body/ConsumerConnection.java), which resizes
        # and splits its bins unlike a HashMap.
        topics = list(conn.subscription_table)
        for i in java_concurrent_hash_map_order([java_hash(topic) for topic in topics]):
            sub = conn.subscription_table[topics[i]]
            out.line("%-20s %s%n", sub.topic, sub.sub_string)
        out.line("\n")
        out.line("ConsumeType: %s%n", conn.consume_type)
        out.line("MessageModel: %s%n", conn.message_model)
        out.line("ConsumeFromWhere: %s%n", conn.consume_from_where)
        out.field("subscriptions", {t: s.sub_string for t, s in conn.subscription_table.items()})
        out.field("consumeType", conn.consume_type)
        out.field("messageModel", conn.message_model)

    run_job(ctx, job)


@click.command("producerConnection", help="Query producer's socket connection and client version")
@common
@click.option("-g", "--producerGroup", "group", required=True, help="producer group name")
@click.option("-t", "--topic", required=True, help="topic name")
def producer_connection(ctx: click.Context, **o: Any) -> None:
    async def job(admin: Admin, out: Output) -> None:
        conn = await admin.producer_connection(o["group"], o["topic"])
        if not conn.connection_set:  # a group whose producers all left: Java's examine fails the command
            raise MQClientError(NO_PRODUCER_CONNECTION)
        for i, c in enumerate(conn.connection_set, 1):
            text = printf(
                "%04d  %-32s %-22s %-8s %s%n", i, c.client_id, c.client_addr, c.language, version_desc(c.version)
            )
            out.entry(text, Index=i, ClientId=c.client_id, ClientAddr=c.client_addr, Language=c.language,
                      Version=version_desc(c.version))  # fmt: skip

    run_job(ctx, job)


#: ``ProcessQueueInfo``'s fields in the order its ``toString`` prints them, with their Java defaults
#: (common/src/main/java/org/apache/rocketmq/common/protocol/body/ProcessQueueInfo.java).
_PQ_FIELDS: tuple[tuple[str, object], ...] = (
    ("commitOffset", 0),
    ("cachedMsgMinOffset", 0),
    ("cachedMsgMaxOffset", 0),
    ("cachedMsgCount", 0),
    ("cachedMsgSizeInMiB", 0),
    ("transactionMsgMinOffset", 0),
    ("transactionMsgMaxOffset", 0),
    ("transactionMsgCount", 0),
    ("locked", False),
    ("tryUnlockTimes", 0),
    ("lastLockTimestamp", 0),
    ("droped", False),
    ("lastPullTimestamp", 0),
    ("lastConsumeTimestamp", 0),
)
_PQ_TIMES = frozenset({"lastLockTimestamp", "lastPullTimestamp", "lastConsumeTimestamp"})
#: ``ConsumeStatus``' figures, in the order of formatString's ``#Consumer RT&TPS#`` columns.
_RT_TPS = ("pullRT", "pullTPS", "consumeRT", "consumeOKTPS", "consumeFailedTPS")


def _human_ms(ms: int) -> str:
    """``UtilAll.timeMillisToHumanString``: ``yyyyMMddHHmmssSSS`` in the local zone."""
    return f"{datetime.fromtimestamp(ms // 1000):%Y%m%d%H%M%S}{ms % 1000:03d}"


def _process_queue_text(pq: dict[str, Any]) -> str:
    """``ProcessQueueInfo.toString()``."""
    parts = []
    for key, default in _PQ_FIELDS:
        value = pq.get(key, default)
        parts.append(f"{key}={_human_ms(int(value or 0)) if key in _PQ_TIMES else java_text(value)}")
    return f"ProcessQueueInfo [{', '.join(parts)}]"


def running_info_text(info: dict[str, Any]) -> str:
    """A consumer's running info as Java's ``ConsumerRunningInfo.formatString`` prints it
    (common/src/main/java/org/apache/rocketmq/common/protocol/body/ConsumerRunningInfo.java): the properties in the
    order Java 8's ``Properties`` fastjson fills from the body holds them (:func:`java_properties_order`), the
    subscriptions in their TreeSet order (``topic@subString``), the offset and detail tables of the ``mqTable`` and
    the ``#Consumer RT&TPS#`` table of the ``statusTable``, each under Java's header (the ``#Topic`` column 64 wide,
    the offset rows' 32), then the stacks when the consumer sent them."""
    out = ["#Consumer Properties#\n"]
    props = info.get("properties") or {}
    out += [printf("%-40s: %s%n", k, props[k]) for k in java_properties_order(list(props))]
    out.append("\n\n#Consumer Subscription#\n")
    subs = sorted(info.get("subscriptionSet") or [], key=lambda s: f"{s.get('topic')}@{s.get('subString')}")
    for i, sub in enumerate(subs, 1):
        out.append(printf("%03d Topic: %-40s ClassFilter: %-8s SubExpression: %s%n", i, sub.get("topic"),
                          bool(sub.get("classFilterMode")), sub.get("subString")))  # fmt: skip
    table = sorted((info.get("mqTable") or {}).items())
    out.append("\n\n#Consumer Offset#\n")
    out.append(printf("%-64s  %-32s  %-4s  %-20s%n", "#Topic", "#Broker Name", "#QID", "#Consumer Offset"))
    for mq, pq in table:
        out.append(printf("%-32s  %-32s  %-4d  %-20d%n", mq.topic, mq.broker_name, mq.queue_id,
                          int(pq.get("commitOffset") or 0)))  # fmt: skip
    out.append("\n\n#Consumer MQ Detail#\n")
    out.append(printf("%-64s  %-32s  %-4s  %-20s%n", "#Topic", "#Broker Name", "#QID", "#ProcessQueueInfo"))
    for mq, pq in table:
        out.append(printf("%-64s  %-32s  %-4d  %s%n", mq.topic, mq.broker_name, mq.queue_id, _process_queue_text(pq)))
    out.append("\n\n#Consumer RT&TPS#\n")
    out.append(printf("%-64s  %14s %14s %14s %14s %18s %25s%n", "#Topic", "#Pull RT", "#Pull TPS", "#Consume RT",
                      "#ConsumeOK TPS", "#ConsumeFailed TPS", "#ConsumeFailedMsgsInHour"))  # fmt: skip
    for topic, status in sorted((info.get("statusTable") or {}).items()):
        figures = [float(status.get(key) or 0.0) for key in _RT_TPS]
        out.append(printf("%-32s  %14.2f %14.2f %14.2f %14.2f %18.2f %25d%n", topic, *figures,
                          int(status.get("consumeFailedMsgs") or 0)))  # fmt: skip
    if info.get("jstack") is not None:  # formatString's last section, when the consumer sent its stacks
        out.append("\n\n#Consumer jstack#\n" + str(info["jstack"]))
    return "".join(out)


def analyze_process_queue(client_id: str, info: dict[str, Any], now_ms: int) -> str:
    """Java's ``ConsumerRunningInfo.analyzeProcessQueue`` (common/src/main/java/org/apache/rocketmq/common/protocol/
    body/ConsumerRunningInfo.java), which ``consumerStatus`` prints per client after ``Rebalance OK``: for a push
    consumer, an orderly one's queues it has not locked ("can't lock for a while") or dropped while locked and failed
    to unlock ("unlock N times, still failed"), a concurrent one's queues holding messages and not consumed for over a
    minute ("can't consume for a while, maybe blocked")."""
    props = info.get("properties") or {}
    if not _is_push(props):
        return ""
    orderly = str(props.get(PROP_CONSUME_ORDERLY)).lower() == "true"  # Boolean.parseBoolean
    out = []
    for mq, pq in sorted((info.get("mqTable") or {}).items()):
        if orderly:
            if not pq.get("locked"):
                waited = now_ms - int(pq.get("lastLockTimestamp") or 0)
                out.append(f"{client_id} {mq_text(mq)} can't lock for a while, {waited}ms\n")
            elif pq.get("droped") and int(pq.get("tryUnlockTimes") or 0) > 0:
                out.append(f"{client_id} {mq_text(mq)} unlock {pq['tryUnlockTimes']} times, still failed\n")
        else:
            idle = now_ms - int(pq.get("lastConsumeTimestamp") or 0)
            if idle > 60_000 and int(pq.get("cachedMsgCount") or 0) > 0:
                out.append(f"{client_id} {mq_text(mq)} can't consume for a while, maybe blocked, {idle}ms\n")
    return "".join(out)


def _is_push(props: dict[str, Any]) -> bool:
    """Whether a client's running info says it is a push consumer, read as analyzeSubscription and
    analyzeProcessQueue read it, ``ConsumeType.valueOf(property)`` (common/src/main/java/org/apache/rocketmq/common/
    protocol/body/ConsumerRunningInfo.java): a PROP_CONSUME_TYPE that is missing (Java's NullPointerException) or
    names no ConsumeType (IllegalArgumentException) fails the command."""
    kind = props.get(PROP_CONSUME_TYPE)
    if kind is None:
        raise ValueError(f"java.lang.NullPointerException: the client's running info has no {PROP_CONSUME_TYPE}")
    if kind not in ("CONSUME_ACTIVELY", "CONSUME_PASSIVELY"):
        raise ValueError(f"No enum constant org.apache.rocketmq.common.protocol.heartbeat.ConsumeType.{kind}")
    return bool(kind == "CONSUME_PASSIVELY")


def _start_timestamp(props: dict[str, Any]) -> int:
    """A client's PROP_CONSUMER_START_TIMESTAMP as analyzeSubscription reads it, ``Long.parseLong`` of the value
    (``"null"`` when missing): anything else than a 64-bit decimal fails the command (NumberFormatException). Its
    ``Character.digit`` takes any decimal digit of one UTF-16 unit (java/lang/Long.java): fullwidth or Devanagari
    digits too, not one outside the BMP."""
    text = str(java_text(props.get(PROP_CONSUMER_START_TIMESTAMP)))
    digits = text[1:] if text[:1] in ("+", "-") else text
    decimal = digits.isdecimal() and all(ord(c) < 0x10000 for c in digits)
    if not decimal or not -(1 << 63) <= int(text) < 1 << 63:
        raise ValueError(f'java.lang.NumberFormatException: For input string: "{text}"')
    return int(text)


def _subscriptions(info: dict[str, Any]) -> set[tuple[str, str]]:
    """A client's ``subscriptionSet`` as its ``TreeSet`` compares it (``SubscriptionData.compareTo``: topic@sub)."""
    return {(s.get("topic", ""), s.get("subString", "")) for s in info.get("subscriptionSet") or []}


def analyze_subscription(infos: dict[str, dict[str, Any]], now_ms: int) -> bool:
    """Java's ``ConsumerRunningInfo.analyzeSubscription`` over the clients by client id (common/src/main/java/org/
    apache/rocketmq/common/protocol/body/ConsumerRunningInfo.java): only when the first client is a push consumer
    started more than 2 minutes ago are the subscriptions compared, a difference or an empty set of the last one
    answering false; otherwise true. (Java's ``analyzeRebalance`` always answers true.) The first client's type and
    start time are read whatever they are, failing the command when Java's reading fails (:func:`_is_push`,
    :func:`_start_timestamp`)."""
    ids = sorted(infos)
    props = infos[ids[0]].get("properties") or {}
    push = _is_push(props)
    up_a_while = now_ms - _start_timestamp(props) > 2 * 60 * 1000
    if not (push and up_a_while):
        return True
    first = _subscriptions(infos[ids[0]])
    if any(_subscriptions(infos[i]) != first for i in ids):
        return False
    return bool(_subscriptions(infos[ids[-1]]))


@click.command("consumerStatus", help="Query consumer's internal data structure")
@common
@click.option("-g", "--consumerGroup", "group", required=True, help="consumer group name")
@click.option("-i", "--clientId", "client_id", help="The consumer's client id")
@click.option("-b", "--brokerAddr", "broker_addr", help="broker address")
@click.option("-s", "--jstack", is_flag=True, help="Run jstack command in the consumer progress")
def consumer_status(ctx: click.Context, **o: Any) -> None:
    async def job(admin: Admin, out: Output) -> None:
        group = o["group"]
        conn = await admin.consumer_connection(group, o["broker_addr"])
        if o["client_id"]:
            info = await admin.consumer_running_info(group, o["client_id"], jstack=o["jstack"])
            out.line("%s", running_info_text(info))
            return
        now = int(time.time() * 1000)
        infos: dict[str, dict[str, Any]] = {}
        out.header("%-10s %-40s %-20s %s%n", "#Index", "#ClientId", "#Version", "#ConsumerRunningInfoFile")
        for c in sorted(conn.connection_set, key=lambda c: c.client_id):
            # Java reads each client in its own try/catch: one that cannot answer is said (on stderr here) and
            # left out, the index counting the listed ones (tools/src/main/java/org/apache/rocketmq/tools/command/
            # consumer/ConsumerStatusSubCommand.java).
            with broker_may_fail(c.client_id):
                info = await admin.consumer_running_info(group, c.client_id, jstack=o["jstack"])
                infos[c.client_id] = info
                path = Path(str(now)) / c.client_id
                path.parent.mkdir(parents=True, exist_ok=True)
                path.write_text(running_info_text(info), encoding="utf-8")
                out.row("%-10d %-40s %-20s %s%n", len(infos), c.client_id, version_desc(c.version), str(path))
        if not infos:
            return
        now_ms = int(time.time() * 1000)
        if not analyze_subscription(infos, now_ms):
            out.line("%n%nWARN: Different subscription in the same group of consumer!!!")
            return
        out.line("%n%nSame subscription in the same group of consumer")
        out.line("%n%nRebalance %s%n", "OK")  # ConsumerRunningInfo.analyzeRebalance answers true
        for client_id, info in infos.items():
            out.line("%s", analyze_process_queue(client_id, info, now_ms))

    run_job(ctx, job)


#: ``SubscriptionGroupConfig``'s fields in 4.9.8, in their declaration order: ``getConsumerConfig`` prints them as
#: ``getClass().getDeclaredFields()`` lists them (tools/src/main/java/org/apache/rocketmq/tools/command/consumer/
#: GetConsumerConfigSubCommand.java; common/src/main/java/org/apache/rocketmq/common/subscription/
#: SubscriptionGroupConfig.java), not sorted, and without the later versions' fields rocketrio also keeps.
_GROUP_CONFIG_FIELDS = (
    "groupName",
    "consumeEnable",
    "consumeFromMinEnable",
    "consumeBroadcastEnable",
    "retryQueueNums",
    "retryMaxTimes",
    "brokerId",
    "whichBrokerWhenConsumeSlowly",
    "notifyConsumerIdsChangedEnable",
)


@click.command("getConsumerConfig", help="Get consumer config by subscription group name!")
@common
@click.option("-g", "--groupName", "group", required=True, help="subscription group name")
def get_consumer_config(ctx: click.Context, **o: Any) -> None:
    async def job(admin: Admin, out: Output) -> None:
        group = o["group"]
        info = await admin.cluster_info()
        # Java iterates ClusterInfo.brokerAddrTable, a HashMap, in its order, not sorted
        # (common/src/main/java/org/apache/rocketmq/common/protocol/body/ClusterInfo.java).
        for name in java_hash_set(list(info.broker_addr_table)):
            bd = info.broker_addr_table[name]
            cluster = next((c for c, names in info.cluster_addr_table.items() if name in names), None)
            addr = bd.master_addr or next(iter(bd.broker_addrs.values()), None)
            config = None if addr is None else (await admin.subscription_groups(addr)).get(group)
            if config is None:
                continue
            out.line("=============================%s:%s=============================\n", cluster, name)
            fields = config.to_json()
            for key in _GROUP_CONFIG_FIELDS:
                value = fields.get(key)
                text = "" if value is None else java_text(value)
                out.entry(printf("%s%-40s=  %s\n", "", key, text), broker=name, key=key, value=value)

    run_job(ctx, job)


@click.command("producer", help="Query producer's instances")
@common
@click.option("-b", "--broker", required=True, help="broker address")
def producer(ctx: click.Context, **o: Any) -> None:
    async def job(admin: Admin, out: Output) -> None:
        table = await admin.producer_table(o["broker"])
        # ProducerTableInfo.data is a Map fastjson fills as a HashMap: Java goes over it by hash bucket
        # (common/src/main/java/org/apache/rocketmq/common/protocol/body/ProducerTableInfo.java).
        for group in java_hash_set(list(table.data)):
            infos = table.data[group]
            if not infos:
                out.line("producer group (%s) instances are empty\n", group)
            for p in infos:
                text = (f"clientId={p.client_id},remoteIP={p.remote_ip}, language={p.language}, version={p.version}, "
                        f"lastUpdateTimestamp={p.last_update_timestamp}")  # fmt: skip
                out.entry(f"producer group ({group}) instance : {text}\n", group=group, **p.to_json())

    run_job(ctx, job)


@click.command("startMonitoring", help="Start Monitoring")
@common
@click.option("--rounds", type=int, default=0, help="stop after this many rounds (rocketrio; 0: run until stopped)")
def start_monitoring(ctx: click.Context, **o: Any) -> None:
    run_job(ctx, functools.partial(monitor, rounds=o["rounds"]))


async def monitor(admin: Admin, out: Output, rounds: int = 0) -> None:
    """The monitor's rounds (``rounds`` of them, 0: until cancelled) at Java's fixed rate: the first
    ``MONITOR_FIRST_ROUND`` after the start, then every ``MONITOR_ROUND`` from there, a late round followed at once by
    the next due (``MonitorService.startScheduleTask``'s ``scheduleAtFixedRate``). A round that fails, whatever the
    error (a malformed answer too), is reported on stderr and the next one runs: MonitorService catches every
    Exception, logs "doMonitorWork Exception" and goes on. Cancellation still ends it."""
    due = anyio.current_time() + MONITOR_FIRST_ROUND
    done = 0
    while not rounds or done < rounds:
        await anyio.sleep_until(due)
        try:
            await _monitor_round(admin, out)
        except Exception as exc:  # Java's catch (Exception e) around doMonitorWork
            click.echo(f"mqadmin: doMonitorWork Exception: {exc}", err=True)
        done += 1
        due += MONITOR_ROUND


async def _monitor_round(admin: Admin, out: Output) -> None:
    """``MonitorService.doMonitorWork``: the undone-messages report of each group with a retry topic; a group's that
    fails, whatever the error, is left unfinished in silence and the next group's follows, as Java's."""
    for topic in await java_topic_list(admin):
        if topic.startswith(RETRY_GROUP_TOPIC_PREFIX):
            with suppress(Exception):  # Java: catch (Exception e) {} around reportUndoneMsgs
                await _report_undone(admin, out, topic[len(RETRY_GROUP_TOPIC_PREFIX) :])


async def _report_undone(admin: Admin, out: Output, group: str) -> None:
    """Java's ``MonitorService.reportUndoneMsgs`` (tools/src/main/java/org/apache/rocketmq/tools/monitor/
    MonitorService.java): for a group with offsets and a consumer online, per topic (in its ``HashMap``'s order),
    the total and largest queue lag and the delay of ``computeUndoneMsgs``; a group whose figures cannot be read is
    passed over."""
    try:
        progress = await admin.consumer_progress(group)
        await admin.consumer_connection(group)  # examineConsumerConnectionInfo: an offline group is not reported
    except BROKER_FAILURES:
        return
    by_topic: dict[str, dict[MessageQueue, OffsetWrapper]] = {}
    for mq, w in progress.items():
        by_topic.setdefault(mq.topic, {})[mq] = w
    for topic in java_hash_set(list(by_topic)):
        table = by_topic[topic]
        diffs = [w.broker_offset - w.consumer_offset for w in table.values()]
        delay = max([0, *[await _delay(admin, mq, w) for mq, w in table.items()]])
        out.line("reportUndoneMsgs: UndoneMsgs [consumerGroup=%s, topic=%s, undoneMsgsTotal=%d, "
                 "undoneMsgsSingleMQ=%d, undoneMsgsDelayTimeMills=%d]%n", group, topic,
                 sum(d for d in diffs if d > 0), max([0, *diffs]), delay)  # fmt: skip


async def _delay(admin: Admin, mq: MessageQueue, w: OffsetWrapper) -> int:
    """``computeUndoneMsgs``' delay of one queue: the store time of its newest message (GET_MAX_OFFSET, then a pull
    of ``maxOffset - 1``) minus that of the last one consumed; 0 when nothing was consumed or the reads fail, whatever
    the error (``computeUndoneMsgs`` catches every Exception of a queue's reads)."""
    if w.last_timestamp <= 0:
        return 0
    try:
        addr = master_address(await admin.topic_route(mq.topic), mq.broker_name)
        newest = await admin.queue_offset(addr, mq, RequestCode.GET_MAX_OFFSET) if addr else 0
        found = (await admin.pull(mq, newest - 1, 1)).messages if newest > 0 else ()
    except Exception:  # Java's catch (Exception e) {} around a queue's reads
        return 0
    return found[0].store_timestamp - w.last_timestamp if found else 0


#: The commands :mod:`client.mqadmin` registers.
COMMANDS = (
    update_sub_group,
    set_consume_mode,  # 5.3.3's MQAdminStartup lists it between these two
    delete_sub_group,
    consumer_progress,
    consumer_connection,
    producer_connection,
    consumer_status,
    get_consumer_config,
    producer,
    start_monitoring,
)
