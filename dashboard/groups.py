"""The Consumer groups page's data and actions: every group with its lag (RocketMQ's "diff total") and consume
TPS, one group's per-queue progress, connections (with client versions) and subscriptions, resetting its offsets to
a time, its SubscriptionGroupConfig on each broker (viewed, edited on the brokers picked), and deleting it with its
retry and dead-letter topics (everywhere, or on the brokers picked). The Producers page's producer connections are here
too (a group's on a topic, and every producer online).

The list costs one GET_BROKER_CONSUME_STATS per broker, its master or else a slave (every group's offsets and rates
at once), plus one GET_CONSUMER_CONNECTION_LIST per group, asked concurrently. A reset of an offline group falls back
to committing the offsets of that time on every queue it reads, as rocketmq-dashboard does when the broker answers
CONSUMER_NOT_ONLINE.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Sequence
from typing import Any

import anyio
import attrs

from client.admin import BROKER_FAILURES, Admin, ConsumerConnection
from client.errors import MQBrokerError
from client.mqadmin_groups import running_info_text
from client.mqadmin_support import version_desc
from client.offset_reset import reset_offline
from dashboard.targets import cluster_of, master_addrs, picked_brokers
from remoting.codec.bodies import MessageQueue
from remoting.codec.bodies.admin import ClientConnection, OffsetWrapper
from remoting.codec.bodies.broker_metadata import SubscriptionGroupConfig
from remoting.codec.codes import ResponseCode
from remoting.codec.topics import SYSTEM_GROUP_PREFIX, dlq_topic, retry_topic

log = logging.getLogger(__name__)

#: Groups the broker and the tools use for themselves, listed as SYSTEM: 5.3.3's ``MixAll.PREDEFINE_GROUP_SET``
#: (common/src/main/java/org/apache/rocketmq/common/MixAll.java, 4.9.8's ``MixAll`` names) and the 5.x proxy's
#: heartbeat syncer group, as rocketmq-dashboard's ``ConsumerServiceImpl.SYSTEM_GROUP_SET``; besides, every
#: ``CID_RMQ_SYS_`` group (``MixAll.isSysConsumerGroup``: the broker's pop revive groups, the transaction checker's).
SYSTEM_GROUPS = frozenset(
    {
        "DEFAULT_CONSUMER",
        "DEFAULT_PRODUCER",
        "TOOLS_CONSUMER",
        "SCHEDULE_CONSUMER",
        "FILTERSRV_CONSUMER",
        "__MONITOR_CONSUMER",
        "CLIENT_INNER_PRODUCER",
        "SELF_TEST_P_GROUP",
        "SELF_TEST_C_GROUP",
        "CID_ONS-HTTP-PROXY",
        "CID_ONSAPI_PERMISSION",
        "CID_ONSAPI_OWNER",
        "CID_ONSAPI_PULL",
        "CID_RMQ_SYS_TRANS",
        "CID_DefaultHeartBeatSyncerTopic",
    }
)


def group_kind(group: str, orderly: bool = False) -> str:
    """SYSTEM for a group of :data:`SYSTEM_GROUPS` or a ``CID_RMQ_SYS_`` one, else FIFO for one whose config consumes
    in order (``orderly``), else NORMAL: rocketmq-dashboard's ``subGroupType``."""
    if group in SYSTEM_GROUPS or group.startswith(SYSTEM_GROUP_PREFIX):
        return "SYSTEM"
    return "FIFO" if orderly else "NORMAL"


_CONNECTION_LOOKUPS = 16


def diff_total(offsets: Iterable[OffsetWrapper]) -> int:
    """RocketMQ's "diff total" over the given queues: broker offset minus consumer offset, summed as they are, a
    queue whose committed offset is past its end counting negative (common/src/main/java/org/apache/rocketmq/common/
    admin/ConsumeStats.java ``computeTotalDiff``, which rocketmq-dashboard shows), so wrong offsets show."""
    return sum(w.broker_offset - w.consumer_offset for w in offsets)


async def topic_consumers(admin: Admin, topic: str) -> list[dict[str, Any]]:
    """The groups consuming ``topic`` with their lag and TPS on it (GET_CONSUME_STATS per group, 16 at once); a
    group whose stats fail (a refusal, a broker that does not answer) is listed with the error, as
    rocketmq-dashboard's ``queryConsumeStatsListByTopicName`` passes over it."""
    limiter = anyio.CapacityLimiter(_CONNECTION_LOOKUPS)
    rows: list[dict[str, Any]] = []

    async def one(group: str) -> None:
        async with limiter:
            try:
                stats = await admin.consume_stats(group, topic)
            except BROKER_FAILURES as exc:
                error = (exc.remark if isinstance(exc, MQBrokerError) else None) or str(exc)
                rows.append({"group": group, "diffTotal": None, "consumeTps": None, "error": error})
                return
        diff = diff_total(stats.offset_table.values())
        rows.append({"group": group, "diffTotal": diff, "consumeTps": round(stats.consume_tps, 2), "error": None})

    async with anyio.create_task_group() as tg:
        for group in await admin.topic_consumed_by(topic):
            tg.start_soon(one, group)
    return sorted(rows, key=lambda r: r["group"])


async def _connection(admin: Admin, group: str) -> ConsumerConnection | None:
    """The group's online consumers, ``None`` when none is online."""
    try:
        return await admin.consumer_connection(group)
    except MQBrokerError as exc:
        if exc.code == ResponseCode.CONSUMER_NOT_ONLINE:
            return None
        raise


async def group_list(admin: Admin) -> tuple[list[dict[str, Any]], list[dict[str, str]]]:
    """Every subscription group of every broker: topics, lag, TPS and who is connected (nobody when that lookup
    fails); and the brokers that did not answer (``broker``, ``address``, ``error``), whose groups are missing.

    rocketmq-dashboard's ``ConsumerServiceImpl.makeGroupListCache`` fails the whole list when one broker's
    ``getAllSubscriptionGroup`` fails; ours lists the others' groups and names the broker it could not read.
    Each broker is read at ``BrokerData.selectBrokerAddr()``, its master else a slave while the master is down (the
    slave holds the groups and offsets synced from it), as ``makeGroupListCache`` reads each broker's groups; masters
    only made a broker's groups vanish in an outage."""
    merged: dict[str, dict[str, Any]] = {}
    unread: list[dict[str, str]] = []
    brokers = (await admin.cluster_info()).broker_addr_table
    read_at = sorted((a, name) for name, bd in brokers.items() if (a := bd.select_broker_addr()))
    for addr, name in read_at:
        try:
            stats = await admin.broker_consume_stats(addr)
        except BROKER_FAILURES as exc:  # a broker that does not answer: the others' groups are still listed
            log.warning("consume stats of %s failed: %s", addr, exc)
            unread.append({"broker": name, "address": addr, "error": str(exc) or type(exc).__name__})
            continue
        for group, per_topic in stats.consume_stats_list:
            row = merged.setdefault(group, {"group": group, "topics": set(), "diffTotal": 0, "consumeTps": 0.0})
            for s in per_topic:
                row["topics"].update(mq.topic for mq in s.offset_table)
                row["diffTotal"] += diff_total(s.offset_table.values())
                row["consumeTps"] += s.consume_tps
    limiter = anyio.CapacityLimiter(_CONNECTION_LOOKUPS)

    async def online(row: dict[str, Any]) -> None:
        conn = None
        async with limiter:
            try:
                conn = await _connection(admin, row["group"])
            except BROKER_FAILURES as exc:  # listed without connections, as rocketmq-dashboard's queryGroup
                log.warning("connections of group %s failed: %s", row["group"], exc)
        row.update(_connection_summary(conn))

    async with anyio.create_task_group() as tg:
        for row in merged.values():
            tg.start_soon(online, row)
    rows = sorted(merged.values(), key=lambda r: r["group"])
    orderly = await _orderly_groups(admin, [addr for addr, _ in read_at])
    for row in rows:
        row["topics"] = sorted(row["topics"])
        row["consumeTps"] = round(row["consumeTps"], 2)
        row["kind"] = group_kind(row["group"], orderly.get(row["group"], False))
    return rows, unread


async def _orderly_groups(admin: Admin, addrs: Iterable[str]) -> dict[str, bool]:
    """Whether each group's SubscriptionGroupConfig has ``consumeMessageOrderly`` on every broker at ``addrs`` that
    has it (GET_ALL_SUBSCRIPTIONGROUP_CONFIG), as rocketmq-dashboard's ``makeGroupListCache`` types a group FIFO; a
    broker that does not answer is passed over."""
    flags: dict[str, list[bool]] = {}
    for addr in addrs:
        try:
            table = await admin.subscription_groups(addr)
        except BROKER_FAILURES as exc:
            log.warning("subscription groups of %s failed: %s", addr, exc)
            continue
        for name, config in table.items():
            flags.setdefault(name, []).append(config.consume_message_orderly)
    return {name: all(each) for name, each in flags.items()}


def _connection_summary(conn: ConsumerConnection | None) -> dict[str, Any]:
    if conn is None:
        return {"online": 0, "consumeType": "", "messageModel": "", "versions": []}
    return {
        "online": len(conn.connection_set),
        "consumeType": conn.consume_type or "",
        "messageModel": conn.message_model or "",
        "versions": sorted({version_desc(c.version) for c in conn.connection_set}),
    }


async def group_detail(admin: Admin, group: str) -> dict[str, Any]:
    """Per-queue progress, connections and subscriptions of ``group``."""
    stats = await admin.consume_stats(group)
    conn = await _connection(admin, group)
    holders = {} if conn is None else await queue_holders(admin, group, conn.connection_set)
    queues = [
        {
            "topic": mq.topic,
            "brokerName": mq.broker_name,
            "queueId": mq.queue_id,
            "brokerOffset": w.broker_offset,
            "consumerOffset": w.consumer_offset,
            "diff": diff_total([w]),
            "lastTimestamp": w.last_timestamp,
            "clientInfo": holders.get(mq, ""),
        }
        for mq, w in stats.offset_table.items()
    ]
    connections = [] if conn is None else client_rows(conn.connection_set)
    subscriptions = [] if conn is None else [
        {"topic": s.topic, "expression": s.sub_string, "expressionType": s.expression_type}
        for s in sorted(conn.subscription_table.values(), key=lambda s: s.topic)
    ]  # fmt: skip
    return {
        "group": group,
        "diffTotal": sum(q["diff"] for q in queues),
        "consumeTps": round(stats.consume_tps, 2),
        "queues": queues,
        "connections": connections,
        "subscriptions": subscriptions,
        **{k: v for k, v in _connection_summary(conn).items() if k in ("consumeType", "messageModel")},
    }


async def queue_holders(admin: Admin, group: str, connections: Iterable[ClientConnection]) -> dict[MessageQueue, str]:
    """The client id holding each queue: the ``mqTable`` of each online client's GET_CONSUMER_RUNNING_INFO, as
    rocketmq-dashboard's ``ConsumerServiceImpl.getClientConnection`` fills ``QueueStatInfo.clientInfo``. A client that
    does not answer holds no queue here (logged); the others still show."""
    holders: dict[MessageQueue, str] = {}
    limiter = anyio.CapacityLimiter(_CONNECTION_LOOKUPS)

    async def ask(client_id: str) -> None:
        async with limiter:
            try:
                info = await admin.consumer_running_info(group, client_id)
            except BROKER_FAILURES as exc:
                log.warning("running info of %s in group %s failed: %s", client_id, group, exc)
                return
        holders.update((mq, client_id) for mq in info.get("mqTable") or {} if isinstance(mq, MessageQueue))

    async with anyio.create_task_group() as tg:
        for c in sorted(connections, key=lambda c: c.client_id):
            tg.start_soon(ask, c.client_id)
    return holders


async def client_running_info(admin: Admin, group: str, client_id: str, *, jstack: bool = False) -> dict[str, Any]:
    """One online client's ConsumerRunningInfo (GET_CONSUMER_RUNNING_INFO, relayed by a broker of the group), as
    rocketmq-dashboard's ``/consumer/consumerRunningInfo.query`` answers it: properties, subscriptions, the queues it
    holds with their ProcessQueueInfo, RT and TPS per topic, with ``jstack`` its thread stacks; and ``text``, the
    whole as ``mqadmin consumerStatus`` prints it (``ConsumerRunningInfo.formatString``)."""
    info = await admin.consumer_running_info(group, client_id, jstack=jstack)
    table = sorted((mq, pq) for mq, pq in (info.get("mqTable") or {}).items() if isinstance(mq, MessageQueue))
    subscriptions = sorted(
        info.get("subscriptionSet") or [], key=lambda s: (s.get("topic", ""), s.get("subString", ""))
    )
    return {
        "group": group,
        "clientId": client_id,
        "properties": info.get("properties") or {},
        "subscriptions": subscriptions,
        "queues": [{"topic": mq.topic, "brokerName": mq.broker_name, "queueId": mq.queue_id, **pq} for mq, pq in table],
        "status": [{"topic": t, **v} for t, v in sorted((info.get("statusTable") or {}).items())],
        "jstack": info.get("jstack"),
        "text": running_info_text(info),
    }


async def reset_offsets(admin: Admin, group: str, topic: str, timestamp_ms: int) -> dict[str, Any]:
    """Move ``group`` on ``topic`` to ``timestamp_ms`` (-1: the end) on its brokers, which tell the online consumers
    (4.9.8) or reset the offsets themselves (``useServerSideResetOffset``, RocketMQ 5.3.3's default); where a broker
    answers that no consumer is online, the offsets are committed directly on every queue the group reads (Java's
    ``resetOffsetByTimestampOld``, :func:`client.offset_reset.reset_offline`, forced). Returns the new offset per
    queue and the way used."""
    try:
        table = await admin.reset_offset_by_time(group, topic, timestamp_ms, force=True)
        way = "reset by the brokers"
    except MQBrokerError as exc:
        if exc.code != ResponseCode.CONSUMER_NOT_ONLINE:
            raise
        rollbacks = await reset_offline(admin, group, topic, timestamp_ms, force=True)
        table = {r.mq: r.rollback_offset for r in rollbacks}
        way = "offsets committed (no consumer online)"
    return {
        "way": way,
        "offsets": [{"brokerName": mq.broker_name, "queueId": mq.queue_id, "offset": o} for mq, o in table.items()],
    }


async def delete_group(admin: Admin, group: str) -> list[str]:
    """Delete the subscription group (and its offsets) on every master, then its ``%RETRY%`` and ``%DLQ%`` topics on
    every master and name server, as rocketmq-dashboard's ``ConsumerServiceImpl.deleteSubGroup``; the brokers asked.
    A refusal stops there and propagates."""
    brokers = await admin.delete_subscription_group(group, clean_offset=True)
    for topic in (retry_topic(group), dlq_topic(group)):
        await admin.delete_topic(topic)
    return brokers


#: The settings the page edits (rocketmq-dashboard's ConsumerConfigItem.jsx): SubscriptionGroupConfig's JSON name ->
#: its field here and its Java type (common/src/main/java/org/apache/rocketmq/common/subscription/
#: SubscriptionGroupConfig.java).
EDITABLE: dict[str, tuple[str, str]] = {
    "consumeEnable": ("consume_enable", "boolean"),
    "consumeBroadcastEnable": ("consume_broadcast_enable", "boolean"),
    "consumeFromMinEnable": ("consume_from_min_enable", "boolean"),
    "consumeMessageOrderly": ("consume_message_orderly", "boolean"),  # RocketMQ 5 (5.3.3's SubscriptionGroupConfig)
    "retryQueueNums": ("retry_queue_nums", "int"),
    "retryMaxTimes": ("retry_max_times", "int"),
    "brokerId": ("broker_id", "long"),
    "whichBrokerWhenConsumeSlowly": ("which_broker_when_consume_slowly", "long"),
}


class NoBrokerPicked(ValueError):
    """A create-or-update or delete naming no broker where none is implied (answered 400)."""


async def _configs(admin: Admin, group: str) -> list[tuple[str, str, str | None, SubscriptionGroupConfig | str]]:
    """(broker name, cluster, address asked, the group's config or the error text) for each broker that has the group
    or failed to answer; every broker is asked at its master, else a slave (GET_ALL_SUBSCRIPTIONGROUP_CONFIG, as
    4.9.8's ``examineSubscriptionGroupConfig``), concurrently."""
    info = await admin.cluster_info()
    clusters = cluster_of(info)
    found: list[tuple[str, str, str | None, SubscriptionGroupConfig | str]] = []

    async def ask(name: str, addr: str) -> None:
        try:
            table = await admin.subscription_groups(addr)
        except BROKER_FAILURES as exc:
            found.append((name, clusters.get(name, ""), addr, str(exc) or type(exc).__name__))
            return
        if (config := table.get(group)) is not None:
            found.append((name, clusters.get(name, ""), addr, config))

    async with anyio.create_task_group() as tg:
        for name, bd in info.broker_addr_table.items():
            if addr := bd.select_broker_addr():
                tg.start_soon(ask, name, addr)
    return sorted(found, key=lambda f: f[0])


async def group_configs(admin: Admin, group: str) -> list[dict[str, Any]]:
    """The group's SubscriptionGroupConfig on each broker that has it (rocketmq-dashboard's
    ``examineSubscriptionGroupConfig``), by broker name; a broker that does not answer is listed with ``error`` (where
    rocketmq-dashboard leaves it out), so a missing row always means the broker lacks the group."""
    rows = []
    for name, cluster, addr, config in await _configs(admin, group):
        row: dict[str, Any] = {"brokerName": name, "cluster": cluster, "address": addr}
        if isinstance(config, str):
            row.update(config=None, error=config)
        else:
            row.update(config=config.to_json(), error=None)
        rows.append(row)
    return rows


async def update_group(
    admin: Admin, group: str, changes: dict[str, Any], *, clusters: Sequence[str] = (), brokers: Sequence[str] = ()
) -> dict[str, list[str]]:
    """Create or update ``group`` on the masters of the picked ``clusters`` and ``brokers`` (rocketmq-dashboard's
    ``createAndUpdateSubscriptionGroupConfig``; UPDATE_AND_CREATE_SUBSCRIPTIONGROUP), ``changes`` (field names of
    :data:`EDITABLE`) over each broker's present config, else the defaults, so the settings the page does not show
    keep their values. With nothing picked, the brokers that have the group; a group that none has is a
    :class:`NoBrokerPicked`, as rocketmq-dashboard refuses ("clusterName or brokerName can not be all blank")."""
    info = await admin.cluster_info()
    names = picked_brokers(info, clusters, brokers)
    present = {name: c for name, _, _, c in await _configs(admin, group) if not isinstance(c, str)}
    if not names and not (names := sorted(present)):
        raise NoBrokerPicked(f"no broker has group {group!r}: pick the clusters or brokers to create it on")
    addrs = master_addrs(info, names)
    for name in names:
        config = attrs.evolve(present.get(name) or SubscriptionGroupConfig(group), **changes)
        await admin.create_subscription_group(config, broker_addr=addrs[name])
    return {"brokerNames": names, "brokers": [addrs[n] for n in names]}


async def delete_group_on(admin: Admin, group: str, brokers: Sequence[str]) -> dict[str, Any]:
    """Delete ``group`` on the masters of ``brokers`` (names), as rocketmq-dashboard's ``deleteSubGroup``: on each,
    DELETE_SUBSCRIPTIONGROUP with ``removeOffset`` (its offsets go too, 4.9.8) and the ``%RETRY%`` and ``%DLQ%``
    topics in that broker; those topics leave the name servers only when every broker that had the group was picked
    (``namesrvCleaned``). No broker picked is a :class:`NoBrokerPicked`; a refusal stops there and propagates."""
    if not brokers:
        raise NoBrokerPicked("brokerNameList must name the brokers to delete the group on")
    info = await admin.cluster_info()
    names = picked_brokers(info, (), brokers)
    addrs = master_addrs(info, names)
    holders = {name for name, _, _, c in await _configs(admin, group) if not isinstance(c, str)}
    whole = holders <= set(names)
    for name in names:
        await admin.delete_subscription_group(group, broker_addr=addrs[name], clean_offset=True)
        for topic in (retry_topic(group), dlq_topic(group)):
            await admin.delete_topic_in_brokers(topic, [addrs[name]])
    if whole:
        for topic in (retry_topic(group), dlq_topic(group)):
            await admin.delete_topic_in_namesrv(topic)
    return {"brokerNames": names, "brokers": [addrs[n] for n in names], "namesrvCleaned": whole}


async def producer_connections(admin: Admin, group: str, topic: str) -> list[dict[str, Any]]:
    """The producers of ``group`` connected to the masters of ``topic``; empty when none is connected."""
    try:
        conn = await admin.producer_connection(group, topic)
    except MQBrokerError as exc:
        if exc.code in (ResponseCode.SYSTEM_ERROR, ResponseCode.CONSUMER_NOT_ONLINE):
            return []
        raise
    return client_rows(conn.connection_set)


async def all_producers(admin: Admin) -> list[dict[str, Any]]:
    """Every producer connected to a master (GET_ALL_PRODUCER_INFO), one row per group and client with the masters
    it is connected to, by group. A master that does not answer is passed over (logged)."""
    rows: dict[tuple[str, str], dict[str, Any]] = {}
    for addr in await admin.master_addresses():
        try:
            table = await admin.producer_table(addr)
        except BROKER_FAILURES as exc:
            log.warning("producers of %s failed: %s", addr, exc)
            continue
        for group, infos in table.data.items():
            for p in infos:
                row = rows.setdefault(
                    (group, p.client_id),
                    {
                        "group": group,
                        "clientId": p.client_id,
                        "clientAddr": p.remote_ip.lstrip("/"),
                        "language": p.language,
                        "version": version_desc(p.version),
                        "lastUpdateTimestamp": 0,
                        "brokers": [],
                    },
                )
                row["brokers"].append(addr)
                row["lastUpdateTimestamp"] = max(row["lastUpdateTimestamp"], p.last_update_timestamp)
    return [rows[key] for key in sorted(rows)]


def client_rows(connections: Iterable[ClientConnection]) -> list[dict[str, Any]]:
    """Connected clients by id, with RocketMQ's version names (``V4_9_8``)."""
    return [
        {
            "clientId": c.client_id,
            "clientAddr": c.client_addr,
            "language": c.language,
            "version": version_desc(c.version),
        }
        for c in sorted(connections, key=lambda c: c.client_id)
    ]
