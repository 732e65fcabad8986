"""``mqadmin`` export commands, as RocketMQ 4.9.8's ``tools/src/main/java/org/apache/rocketmq/tools/command/export/``:
``exportMetadata`` (user topics and subscription groups as JSON, queue numbers summed over a cluster's masters),
``exportConfigs`` (the cluster's scale and each master's main settings) and ``exportMetrics`` (each master's disk,
rates, day totals, topic and group counts, client versions). Files go under ``-f`` (``/tmp/rocketmq/export``) with
Java's names and keys; :mod:`client.mqadmin` registers the commands.

Java reads ``runtimeEnv``'s ``cpuNum`` from the broker config's ``clientCallbackExecutorThreads`` and its
``totalMemKBytes`` from the runtime info, which neither a 4.9.8 nor a rocketrio broker reports: ``null``.
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any, Final

import click

from client.admin import Admin, transferred_tps
from client.errors import MQBrokerError, MQClientError
from client.mqadmin_support import (
    Output,
    cluster_masters,
    cluster_masters_and_slaves,
    common,
    java_hash_set,
    run_job,
    version_desc,
)
from remoting.codec.bodies.broker_metadata import DataVersion, SubscriptionGroupConfig, TopicConfig
from remoting.codec.bodies.topic_config import TopicConfigSerializeWrapper
from remoting.codec.codes import CURRENT_VERSION
from remoting.codec.topics import SCHEDULE_TOPIC, TRANS_HALF_TOPIC, is_retry_or_dlq_topic

__all__ = ["COMMANDS"]

DEFAULT_PATH: Final = "/tmp/rocketmq/export"
#: Java's ``DefaultMQAdminExtImpl.SYSTEM_GROUP_SET``; ``CID_RMQ_SYS_`` groups are system groups too.
SYSTEM_GROUPS: Final = frozenset(
    {
        "DEFAULT_CONSUMER", "DEFAULT_PRODUCER", "TOOLS_CONSUMER", "FILTERSRV_CONSUMER", "__MONITOR_CONSUMER",
        "CLIENT_INNER_PRODUCER", "SELF_TEST_P_GROUP", "SELF_TEST_C_GROUP", "CID_ONS-HTTP-PROXY",
        "CID_ONSAPI_PERMISSION", "CID_ONSAPI_OWNER", "CID_ONSAPI_PULL",
    }
)  # fmt: skip
#: The broker settings ``exportConfigs`` keeps (Java's ``needBrokerProprties``).
CONFIG_KEYS: Final = (
    "brokerClusterName", "brokerId", "brokerName", "brokerRole", "fileReservedTime", "filterServerNums",
    "flushDiskType", "maxMessageSize", "messageDelayLevel", "msgTraceTopicName", "slaveReadEnable", "traceOn",
    "traceTopicEnable", "useTLS", "autoCreateTopicEnable", "autoCreateSubscriptionGroup",
)  # fmt: skip


def _write(path: Path, document: object) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(document, indent=1, default=str), encoding="utf-8")


async def user_topic_wrapper(admin: Admin, addr: str, special: bool) -> TopicConfigSerializeWrapper:
    """Java's ``getUserTopicConfig``: the broker's topic table minus its system topics (and retry/DLQ unless
    ``special``), with the table's DataVersion."""
    system = set(await admin.system_topics(addr))
    wrapper = await admin.all_topic_config(addr)
    table = {
        name: tc
        for name, tc in wrapper.topic_config_table.items()
        if name not in system and (special or not is_retry_or_dlq_topic(name))
    }
    return TopicConfigSerializeWrapper(table, wrapper.data_version)


async def user_topics(admin: Admin, addr: str, special: bool) -> dict[str, TopicConfig]:
    """The topics of :func:`user_topic_wrapper`."""
    return (await user_topic_wrapper(admin, addr, special)).topic_config_table


async def user_group_wrapper(admin: Admin, addr: str) -> tuple[dict[str, SubscriptionGroupConfig], DataVersion]:
    """Java's ``getUserSubscriptionGroup``: the broker's groups minus the system groups, with the table's
    DataVersion."""
    groups, version = await admin.subscription_group_wrapper(addr)
    return {n: g for n, g in groups.items() if n not in SYSTEM_GROUPS and not n.startswith("CID_RMQ_SYS_")}, version


async def user_groups(admin: Admin, addr: str) -> dict[str, SubscriptionGroupConfig]:
    """The groups of :func:`user_group_wrapper`."""
    return (await user_group_wrapper(admin, addr))[0]


@click.command("exportMetadata", help="export metadata")
@common
@click.option("-c", "--clusterName", "cluster", help="choose a cluster to export")
@click.option("-b", "--brokerAddr", "broker_addr", help="choose a broker to export")
@click.option(
    "-f", "--filePath", "path", default=DEFAULT_PATH, help="export metadata.json path | default /tmp/rocketmq/export"
)
@click.option("-t", "--topic", "topics_only", is_flag=True, help="only export topic metadata")
@click.option("-g", "--subscriptionGroup", "groups_only", is_flag=True, help="only export subscriptionGroup metadata")
@click.option("-s", "--specialTopic", "special", is_flag=True, help="need retryTopic and dlqTopic")
def export_metadata(ctx: click.Context, **o: Any) -> None:
    async def job(admin: Admin, out: Output) -> None:
        if o["broker_addr"]:
            path = await _export_broker(admin, Path(o["path"]), o)
            if path is None:
                return
            out.line("export %s success", str(path))
        elif o["cluster"]:
            path = await _export_cluster(admin, out, Path(o["path"]), o)
            out.line("export %s success%n", str(path))
        else:
            click.echo(ctx.get_help())
            return
        out.field("path", str(path))

    run_job(ctx, job)


async def _export_broker(admin: Admin, base: Path, o: dict[str, Any]) -> Path | None:
    """``exportMetadata -b``: the broker's user topics (``-t``), else its user groups (``-g``), else nothing."""
    addr = o["broker_addr"]
    doc: dict[str, Any]
    # Java writes the wrappers getUserTopicConfig and getUserSubscriptionGroup answer, dataVersion included.
    if o["topics_only"]:
        path, doc = base / "topic.json", (await user_topic_wrapper(admin, addr, o["special"])).to_json()
    elif o["groups_only"]:
        groups, version = await user_group_wrapper(admin, addr)
        table = {n: g.to_json() for n, g in groups.items()}
        path, doc = base / "subscriptionGroup.json", {"dataVersion": version.to_json(), "subscriptionGroupTable": table}
    else:
        return None
    _write(path, doc)
    return path


async def _export_cluster(admin: Admin, out: Output, base: Path, o: dict[str, Any]) -> Path:
    """``exportMetadata -c``, as Java's ``if (t) ... else if (g) ... else``: the topics (``-t``, with or without
    ``-g``), else the groups (``-g``), else both in ``metadata.json``; each with ``exportTime``."""
    topics, groups = await _cluster_metadata(admin, out, o["cluster"], o["special"])
    doc: dict[str, Any]
    if o["topics_only"]:
        name, doc = "topic.json", {"topicConfigTable": topics}
    elif o["groups_only"]:
        name, doc = "subscriptionGroup.json", {"subscriptionGroupTable": groups}
    else:
        name, doc = "metadata.json", {"topicConfigTable": topics, "subscriptionGroupTable": groups}
    _write(base / name, {**doc, "exportTime": int(time.time() * 1000)})
    return base / name


async def _cluster_metadata(
    admin: Admin, out: Output, cluster: str, special: bool
) -> tuple[dict[str, dict[str, Any]], dict[str, dict[str, Any]]]:
    """The user topics and groups of ``cluster``'s masters as JSON, queue numbers summed over the masters."""
    topics: dict[str, dict[str, Any]] = {}
    groups: dict[str, dict[str, Any]] = {}
    for addr in await cluster_masters(admin, out, cluster):
        for name, tc in (await user_topics(admin, addr, special)).items():
            merged = tc.to_json()
            if name in topics:
                merged["writeQueueNums"] += topics[name]["writeQueueNums"]
                merged["readQueueNums"] += topics[name]["readQueueNums"]
            topics[name] = merged
        for name, g in (await user_groups(admin, addr)).items():
            merged = g.to_json()
            if name in groups:
                merged["retryQueueNums"] += groups[name]["retryQueueNums"]
            groups[name] = merged
    return topics, groups


@click.command("exportConfigs", help="export configs")
@common
@click.option("-c", "--clusterName", "cluster", required=True, help="choose a cluster to export")
@click.option(
    "-f", "--filePath", "path", default=DEFAULT_PATH, help="export configs.json path | default /tmp/rocketmq/export"
)
def export_configs(ctx: click.Context, **o: Any) -> None:
    async def job(admin: Admin, out: Output) -> None:
        configs, slaves = {}, 0
        brokers = await cluster_masters_and_slaves(admin, out, o["cluster"])
        for master, its_slaves in brokers:
            slaves += len(its_slaves)
            props = await admin.broker_config(master)
            configs[props.get("brokerName")] = {k: props.get(k) for k in CONFIG_KEYS}
        scale = {"namesrvSize": len(admin.namesrv_addrs), "masterBrokerSize": len(brokers), "slaveBrokerSize": slaves}
        path = Path(o["path"]) / "configs.json"
        _write(path, {"brokerConfigs": configs, "clusterScale": scale})
        out.line("export %s success", str(path))
        out.field("path", str(path))

    run_job(ctx, job)


#: ``totalData``'s keys, each 0 until a master adds to it (ExportMetricsCommand.initTotalMap).
_TOTAL_TPS: Final = ("totalNormalInTps", "totalNormalOutTps", "totalTransInTps", "totalScheduleInTps")
_TOTAL_DAY: Final = ("normalOneDayInNum", "normalOneDayOutNum", "transOneDayInNum", "scheduleOneDayInNum")


def _first_tps(text: str | None) -> float:
    try:
        return float((text or "0").split(" ")[0] or 0)
    except ValueError:
        return 0.0


async def _broker_metrics(admin: Admin, addr: str, totals: dict[str, dict[str, Any]]) -> dict[str, Any]:
    """One master's part of Java's ``exportMetrics`` report, adding into ``totals``."""
    kv = await admin.runtime_info(addr)
    config = await admin.broker_config(addr)
    groups = await user_groups(admin, addr)
    special: dict[str, tuple[float, int]] = {}
    for key, topic in (("trans", TRANS_HALF_TOPIC), ("schedule", SCHEDULE_TOPIC)):
        try:
            data = await admin.view_broker_stats_data(addr, "TOPIC_PUT_NUMS", topic)
            special[key] = (data.stats_minute.tps, data.sum_24_hours())
        except MQBrokerError:
            special[key] = (0.0, 0)
    tps = {"normalInTps": _first_tps(kv.get("putTps")), "normalOutTps": _first_tps(transferred_tps(kv)),
           "transInTps": special["trans"][0], "scheduleInTps": special["schedule"][0]}  # fmt: skip
    day = {
        "normalOneDayInNum": int(kv.get("msgPutTotalTodayMorning", 0)) - int(kv.get("msgPutTotalYesterdayMorning", 0)),
        "normalOneDayOutNum": int(kv.get("msgGetTotalTodayMorning", 0)) - int(kv.get("msgGetTotalYesterdayMorning", 0)),
        "transOneDayInNum": special["trans"][1],
        "scheduleOneDayInNum": special["schedule"][1],
    }
    for key, value in tps.items():
        total_key = "total" + key[0].upper() + key[1:]
        totals["totalTps"][total_key] = totals["totalTps"].get(total_key, 0.0) + value
    for key, value in day.items():
        totals["totalOneDayNum"][key] = totals["totalOneDayNum"].get(key, 0) + value
    clients: set[str] = set()
    for group in groups:
        try:
            conn = await admin.consumer_connection(group)
        except MQBrokerError:
            continue
        clients.update(f"{c.language}%{version_desc(c.version)}" for c in conn.connection_set)
    quota = {
        "diskRatio": {
            "commitLogDiskRatio": kv.get("commitLogDiskRatio"),
            "consumeQueueDiskRatio": kv.get("consumeQueueDiskRatio"),
        },
        "tps": tps,
        "oneDayNum": day,
        "messageAverageSize": kv.get("putMessageAverageSize"),
        "topicSize": len(await user_topics(admin, addr, False)),
        "groupSize": len(groups),
    }
    return {
        "runtimeEnv": {
            "cpuNum": config.get("clientCallbackExecutorThreads"),
            "totalMemKBytes": kv.get("totalMemKBytes"),
        },
        "runtimeQuota": quota,
        "runtimeVersion": {"rocketmqVersion": version_desc(CURRENT_VERSION), "clientInfo": sorted(clients)},
    }


@click.command("exportMetrics", help="export metrics")
@common
@click.option("-c", "--clusterName", "cluster", required=True, help="choose a cluster to export")
@click.option(
    "-f", "--filePath", "path", default=DEFAULT_PATH, help="export metrics.json path | default /tmp/rocketmq/export"
)
def export_metrics(ctx: click.Context, **o: Any) -> None:
    async def job(admin: Admin, out: Output) -> None:
        info = await admin.cluster_info()
        names = info.cluster_addr_table.get(o["cluster"])
        if names is None:  # Java iterates the null Set of an unknown cluster: a NullPointerException
            raise MQClientError(f"java.lang.NullPointerException: no cluster {o['cluster']} on the name server")
        totals: dict[str, dict[str, Any]] = {"totalTps": dict.fromkeys(_TOTAL_TPS, 0.0),
                                             "totalOneDayNum": dict.fromkeys(_TOTAL_DAY, 0)}  # fmt: skip
        report = {}
        # ExportMetricsCommand goes over the cluster's broker names as the HashSet fastjson fills iterates them
        # (tools/src/main/java/org/apache/rocketmq/tools/command/export/ExportMetricsCommand.java).
        for name in java_hash_set(list(names)):
            data = info.broker_addr_table.get(name)
            if data is not None and data.master_addr:
                report[name] = await _broker_metrics(admin, data.master_addr, totals)
        path = Path(o["path"]) / "metrics.json"
        _write(path, {"evaluateReport": report, "totalData": totals})
        out.line("export %s success", str(path))
        out.field("path", str(path))

    run_job(ctx, job)


#: The commands :mod:`client.mqadmin` registers.
COMMANDS = (export_metadata, export_configs, export_metrics)
