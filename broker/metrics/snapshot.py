"""What one scrape of a broker's ``/metrics`` reads, copied on the Trio thread into plain values
(:func:`take_snapshot`), so that building and formatting the families can run in the HTTP thread
(:mod:`broker.metrics.families`).

Sources, all kept by the broker anyway: the statistics' incoming messages (after adding what the store took since
the last sample, so a scrape sees every acknowledged message) and pull items, the DLQ counts, the put latency
histogram, the pools' queues, the client registry, the topic and group tables, the offsets
(:mod:`broker.metrics.lag`), the store's offsets and the file system. Cost: proportional to topics, (group, topic)
pairs and their queues; one ``statvfs``.
"""

from __future__ import annotations

import collections
import os
import time
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING

import attrs

from broker.metrics.lag import GroupLag, group_lags
from broker.stats import BrokerStatsManager
from broker.stats.manager import OutKey
from broker.stats.pop_revive import PopReviveFigures
from broker.stats.transactions import TransactionFigures
from remoting.codec.codes import version_desc
from remoting.dispatch import ProcessorPool

if TYPE_CHECKING:
    from broker.context import BrokerState
    from broker.timer.service import TimerFigures

#: Reads the timer's four gauges (see :attr:`BrokerSnapshot.timer`); ``None`` when it exports none.
TimerGauges = Callable[[], "TimerFigures | None"]


@attrs.frozen
class PopGauges:
    """PopMetricsManager's gauges: the pop service's held offset moves and those of them with a CK
    (PopBufferMergeService ``getOffsetTotalSize``, ``getBufferedCKSize``), and the revive's records and ms behind
    (PopReviveService ``getReviveBehindMessages``, ``getReviveBehindMillis``)."""

    offset_buffer: int
    checkpoint_buffer: int
    revive_behind: int
    revive_latency_ms: int


#: Reads the pop gauges (see :attr:`BrokerSnapshot.pop`); ``None`` before the pop service exists.
PopGaugeReader = Callable[[], "PopGauges | None"]

#: Our pool families under RocketMQ 5's ``processor`` label values.
PROCESSOR_NAMES = {
    "send": "send",
    "pull": "pull",
    "query": "query_message",
    "admin": "admin",
    "client_manage": "client_manager",
    "heartbeat": "heartbeat",
    "consumer_manage": "consumer_manager",
    "end_transaction": "transaction",
    "ack": "ack",
}
#: Every ``processor`` RocketMQ 5.3.3 records ``rocketmq_processor_watermark`` for at each collection
#: (broker/src/main/java/org/apache/rocketmq/broker/metrics/BrokerMetricsManager.java ``initStatsMetrics``): those
#: we run no pool for (``async_put``, ``lite_pull``) read 0, as an idle Java queue does.
JAVA_PROCESSORS = (
    "send",
    "async_put",
    "pull",
    "ack",
    "query_message",
    "client_manager",
    "heartbeat",
    "lite_pull",
    "transaction",
    "consumer_manager",
    "admin",
    "reply",
)


@attrs.frozen
class BrokerSnapshot:
    """Plain numbers; see :mod:`broker.metrics.families` for the metrics each becomes."""

    #: topic -> (messages, bytes) stored while a master, since the broker started
    incoming: dict[str, tuple[int, int]]
    #: (topic, message type) -> (messages, bytes) of those the broker put as that type (delay-level deliveries)
    incoming_typed: dict[tuple[str, str], tuple[int, int]]
    #: (messages, bytes) of both past the cardinality limit (OpenTelemetry's overflow series)
    incoming_overflow: tuple[int, int]
    #: the broker's system topics (its TopicConfigManager's set; ``rmq_sys_`` names count too)
    system_topics: frozenset[str]
    #: (topic, group, None) -> (messages, bytes) pulled; (topic, group, is_retry) -> popped from the topic or from
    #: the group's pop retry topic of the topic; deleted pairs' included, within the cardinality limit
    outgoing: dict[OutKey, tuple[int, int]]
    #: (messages, bytes) of outgoing label sets past the cardinality limit
    outgoing_overflow: tuple[int, int]
    #: (group, original topic) -> messages sent to the DLQ
    dlq: dict[tuple[str, str], int]
    #: messages sent to a DLQ under label sets past the cardinality limit
    dlq_overflow: int
    lags: list[GroupLag]
    #: (language, version) -> producer connections
    producers: dict[tuple[str, str], int]
    #: (group, language, version, consume type) -> consumer connections
    consumers: dict[tuple[str, str, str, str], int]
    #: processor label -> queued requests
    watermarks: dict[str, int]
    permission: int
    #: sizes of the topic config and subscription group tables
    topic_count: int
    group_count: int
    #: (bucket bounds ms, counts per bucket with one more above the last bound, sum ms)
    put_latency: tuple[tuple[int, ...], list[int], float]
    storage_used: int
    flush_behind: int
    dispatch_behind: int
    reserve_time_ms: int
    now_ms: int
    #: ``metricsOtelCardinalityLimit``: series per gauge, the overflow one included
    series_limit: int
    #: (topic, message type) -> (bucket counts, sum) of ``rocketmq_message_size``; ``None``: the overflow
    message_sizes: dict[tuple[str, str] | None, tuple[list[int], int]] = attrs.field(factory=dict)
    #: real topic -> half messages (``rocketmq_half_messages``)
    half_messages: dict[str, int] = attrs.field(factory=dict)
    #: commits, rollbacks and finish latencies of transactions, per real topic
    transactions: TransactionFigures | None = None
    #: the timer's figures (:class:`~broker.timer.service.TimerFigures`); ``None``: not exported
    timer: TimerFigures | None = None
    #: the revive topic's puts, gets and retry copies (PopMetricsManager's counters)
    pop_revive: PopReviveFigures | None = None
    #: the pop service's and the revive's gauges; ``None``: no pop service yet
    pop: PopGauges | None = None


def _connections(state: BrokerState) -> tuple[dict[tuple[str, str], int], dict[tuple[str, str, str, str], int]]:
    clients = state.clients
    producers: collections.Counter[tuple[str, str]] = collections.Counter()
    for group in clients.producer_groups:
        for info in clients.producer_connections(group):
            producers[(info.language.name.lower(), version_desc(info.version).lower())] += 1
    consumers: collections.Counter[tuple[str, str, str, str]] = collections.Counter()
    for group, group_info in clients.consumer_groups.items():
        if group_info.consume_type is None:
            # 5.3.3's BrokerMetricsManager labels getTypeCN() of it: a NullPointerException, no series for it
            continue
        mode = "pull" if group_info.consume_type.name == "CONSUME_ACTIVELY" else "push"
        for info in group_info.channels.values():
            consumers[(group, info.language.name.lower(), version_desc(info.version).lower(), mode)] += 1
    return dict(producers), dict(consumers)


def _storage_used(root: os.PathLike[str]) -> int:
    """Bytes used on the store's file system (RocketMQ 5's ``rocketmq_storage_size``: total - free); -1 unreadable."""
    try:
        st = os.statvfs(root)
    except OSError:
        return -1
    return (st.f_blocks - st.f_bfree) * st.f_frsize


def _incoming(stats: BrokerStatsManager) -> dict[str, tuple[int, int]]:
    stats.count_puts()
    return dict(stats.incoming)


def _watermarks(pools: Mapping[str, ProcessorPool]) -> dict[str, int]:
    """Queued requests per ``processor`` label: Java's twelve (0 without a pool here), and any other pool's."""
    queued = dict.fromkeys(JAVA_PROCESSORS, 0)
    for name, pool in pools.items():
        queued[PROCESSOR_NAMES.get(name, name)] = pool.queued
    return queued


def take_snapshot(
    state: BrokerState,
    pools: Mapping[str, ProcessorPool],
    timer_gauges: TimerGauges | None = None,
    pop_gauges: PopGaugeReader | None = None,
) -> BrokerSnapshot:
    """Everything one scrape exports (call it on the Trio thread); ``timer_gauges`` reads the timer's
    (``TimerMessageService.gauges``), ``pop_gauges`` the pop service's and its revive's
    (``BrokerController.pop_gauges``)."""
    stats, store = state.stats, state.store
    producers, consumers = _connections(state)
    now_ms = int(time.time() * 1000)
    earliest = store.earliest_store_time()
    topics = state.topics.topics
    outgoing, outgoing_overflow = stats.outgoing()
    return BrokerSnapshot(
        incoming=_incoming(stats),
        incoming_typed=dict(stats.incoming_typed),
        incoming_overflow=stats.incoming_overflow,
        system_topics=state.topics.system_topic_names,
        outgoing=outgoing,
        outgoing_overflow=outgoing_overflow,
        dlq=dict(stats.dlq_messages),
        dlq_overflow=stats.dlq_overflow,
        lags=list(group_lags(state)),
        producers=producers,
        consumers=consumers,
        watermarks=_watermarks(pools),
        permission=state.config.broker_permission,
        topic_count=len(topics),
        group_count=len(state.groups.groups),
        put_latency=stats.put_latency.histogram(),
        storage_used=_storage_used(store.root),
        flush_behind=store.unflushed_bytes,
        dispatch_behind=store.dispatch_behind_bytes(),
        reserve_time_ms=now_ms - earliest if earliest > 0 else -1,
        now_ms=now_ms,
        series_limit=state.config.metrics_otel_cardinality_limit,
        message_sizes=stats.message_sizes.figures(),
        half_messages={topic: count for topic, (count, _) in state.half_messages.counts.items()},
        transactions=stats.transactions.figures(),
        timer=None if timer_gauges is None else timer_gauges(),
        pop_revive=stats.pop_revive.figures(),
        pop=None if pop_gauges is None else pop_gauges(),
    )
