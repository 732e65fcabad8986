"""A broker's ``/metrics`` families, built from a :class:`~broker.metrics.snapshot.BrokerSnapshot` (in the HTTP
thread), with RocketMQ 5's names and labels (``BrokerMetricsConstant``, ``DefaultStoreMetricsConstant``) wherever
the concept exists here; every family also carries the broker's common labels (``cluster``, ``node_type``,
``node_id``, ``metricsLabel``). ``rocketmq_topic_number`` and ``rocketmq_consumer_group_number`` are 5.3.3's: the
sizes of the topic config and subscription group tables, system ones included (``BrokerMetricsManager``
``initStatsMetrics``). A metric with a unit carries it as a suffix, as the OpenTelemetry 1.29 Prometheus exporter
RocketMQ 5.3.3 ships names it (it appends the instrument's ``setUnit`` unless the name holds it already):
``rocketmq_consumer_lag_latency_milliseconds``, ``rocketmq_consumer_queueing_latency_milliseconds``,
``rocketmq_storage_size_bytes``, ``rocketmq_storage_message_reserve_time_milliseconds`` (the units of
broker/src/main/java/org/apache/rocketmq/broker/metrics/BrokerMetricsManager.java and
store/src/main/java/org/apache/rocketmq/store/metrics/DefaultStoreMetricsManager.java). ``is_system`` is Java's
``TopicValidator.isSystemTopic`` in the broker's JVM: the fixed system topics and every topic the broker made at
start (the snapshot's ``system_topics``), or a ``CID_RMQ_SYS_`` group.

Where ours differ, and why:

- ``rocketmq_messages_in_total`` / ``rocketmq_throughput_in_total`` count messages where they are stored, read from
  the store: a delayed, timer or transactional message counts first under its system topic (``message_type`` ``delay``
  / ``transaction``, ``is_system`` true), as 5.3.3's send path, which sees the topic its store hook gave it. A delay
  level's delivery counts again under its real topic as ``delay`` (5.3.3's ScheduleMessageService
  ``PutResultProcess.onSuccess``, with ``enableScheduleMessageStats``); a timer's delivery or roll does not count
  again (5.3.3's TimerMessageStore ``doPut`` adds to the put statistics only). ``message_type`` is ``fifo`` for a
  message carrying a sharding key (a 5.x message group; 5.3.3's ``getMessageType``, whatever the topic's order
  flag), ``normal`` otherwise. Retry and DLQ topics are left out, as in Java's send path, except a delay level's
  delivery to one (a retry's redelivery: ScheduleMessageService checks no topic). Bytes are record sizes (Java's
  ``wroteBytes``). Only a master counts them: a slave's (or DLedger follower's) puts are the master's messages
  replicated, which Java, counting in ``SendMessageProcessor.handlePutMessageResult``, never sees there; a member
  promoted to master counts from its promotion. Those counters, the outgoing ones and
  ``rocketmq_send_to_dlq_messages_total`` keep their series past the topic's or group's deletion, at most
  ``metricsOtelCardinalityLimit`` - 1 label sets each and the rest in one ``otel_metric_overflow="true"`` series, as
  5.3.3's OpenTelemetry views. Each gauge too serves at most limit - 1 label sets per scrape, then one overflow
  series with the last value left out (5.3.3's default gauge view).
- ``rocketmq_storage_put_latency`` (ms) is ours: RocketMQ 5 has no put latency metric; its buckets are the runtime
  info's ``putMessageDistributeTime`` bounds, cumulative since start.
- The timer's ``rocketmq_timer_enqueue_lag``, ``rocketmq_timer_enqueue_latency_milliseconds``,
  ``rocketmq_timer_dequeue_lag`` and ``rocketmq_timer_dequeue_latency_milliseconds`` are 5.3.3's, values included:
  the last is in seconds (TimerMessageStore ``getDequeueBehind``) under its milliseconds unit, as Java exports it.
- ``rocketmq_timing_messages`` is 5.3.3's too: per real topic, the timer messages filed and not delivered yet.
- ``rocketmq_timer_enqueue_total`` / ``rocketmq_timer_dequeue_total`` count, per real topic, the records the timer
  filed and the messages it delivered or rolled on since it started (5.3.3's ``incTimerEnqueueCount`` /
  ``incTimerDequeueCount``), at most ``metricsOtelCardinalityLimit`` - 1 topics each, the rest in the overflow.
- ``rocketmq_half_messages`` (5.3.3's TransactionMetrics, kept in ``config/transactionMetrics``:
  :mod:`broker.stats.half_messages`), ``rocketmq_commit_messages_total``, ``rocketmq_rollback_messages_total`` and
  ``rocketmq_finish_message_latency_milliseconds`` (EndTransactionProcessor ``processRequest``) are 5.3.3's, per
  real topic; the latency is whole seconds under the instrument's ``ms`` unit, as Java records it
  (:mod:`broker.stats.transactions`).
- ``rocketmq_message_size`` is 5.3.3's: one value per send request, the batch's average record size, labelled as
  ``rocketmq_messages_in_total``, and a delay level's delivery under its real topic as ``delay``
  (:mod:`broker.stats.message_sizes`); a stored reply too, labelled by ``getMessageType`` of its properties, in
  ``rocketmq_messages_in_total`` as well (5.3.3's ReplyMessageProcessor ``handlePutMessageResult``).
- The consumer gauges of a group known from its pops only are pop lag, with a second series per topic over the
  group's pop retry topic labelled ``is_retry="true"`` (:mod:`broker.metrics.lag`); Java's latency of that series
  without a retry topic is now - ``Long.MAX_VALUE``, ours 0.
- PopMetricsManager's counters of the revive topic (``rocketmq_pop_revive_in_message_total``,
  ``rocketmq_pop_revive_out_message_total``, ``rocketmq_pop_revive_retry_messages_total``) are 5.3.3's
  (:mod:`broker.stats.pop_revive`); a put is labelled with its append's status.
- ``rocketmq_pop_revive_lag_milliseconds`` (records behind, under Java's ``milliseconds`` unit) and
  ``rocketmq_pop_revive_latency_milliseconds`` are 5.3.3's, for our one revive queue (``queue_id="0"``), from
  :meth:`~broker.pop.revive.ReviveService.gauges`.
- ``rocketmq_pop_offset_buffer_size`` and ``rocketmq_pop_checkpoint_buffer_size`` are the pop service's held
  offset moves and those with a CK (:meth:`~broker.pop.service.PopService.buffer_sizes`), 0 unless the store
  waits for puts.
- ``rocketmq_timer_message_snapshot`` is 5.3.3's: per ``timer_bound_s`` of TimerMetrics' ``timerDist`` (5 s to
  24 h), the wheel's slot counts (messages less delete markers) from the previous bound on ahead of now's slot.
- ``rocketmq_delay_message_latency_seconds`` is 5.3.3's ``timerMessageSetLatency``: per real topic, each record the
  timer reads to file, ``TIMER_OUT_MS`` less its born time in whole seconds truncated toward zero (a negative one
  dropped, as OpenTelemetry's histogram drops it), since the timer started.
- Not exported yet: ``rocketmq_pop_buffer_scan_time_consume`` (ours has no buffer scan).
"""

from __future__ import annotations

import itertools
from collections.abc import Iterable, Iterator
from typing import Any

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, HistogramMetricFamily, Metric

from broker.metrics.snapshot import BrokerSnapshot
from broker.stats.message_sizes import MESSAGE_SIZE_BOUNDS
from broker.stats.transactions import FINISH_BUCKETS_S
from broker.timer.timer_store import SET_LATENCY_BUCKETS_S
from remoting.codec.topics import (
    SCHEDULE_TOPIC,
    SYSTEM_GROUP_PREFIX,
    SYSTEM_TOPIC_PREFIX,
    TIMER_TOPIC,
    TRANS_HALF_TOPIC,
)
from remoting.prometheus import OVERFLOW_LABEL, histogram_buckets

_STORAGE = {"storage_type": "local", "storage_medium": "disk"}
_MESSAGE_TYPES = {SCHEDULE_TOPIC: "delay", TIMER_TOPIC: "delay", TRANS_HALF_TOPIC: "transaction"}


def _bool(value: bool) -> str:
    return "true" if value else "false"


def _system_topic(snap: BrokerSnapshot, topic: str) -> bool:
    """Java's ``TopicValidator.isSystemTopic`` in the broker's JVM: its set includes the topics made at start."""
    return topic in snap.system_topics or topic.startswith(SYSTEM_TOPIC_PREFIX)


def _system_group(group: str) -> bool:
    return group.lower().startswith(SYSTEM_GROUP_PREFIX.lower())


class _Families:
    """Makes families that all carry ``common`` labels first."""

    def __init__(self, common: dict[str, str]) -> None:
        self.names = list(common)
        self.values = list(common.values())

    def gauge(self, name: str, doc: str, labels: tuple[str, ...] = ()) -> GaugeMetricFamily:
        return GaugeMetricFamily(name, doc, labels=[*self.names, *labels])

    def counter(self, name: str, doc: str, labels: tuple[str, ...] = ()) -> CounterMetricFamily:
        return CounterMetricFamily(name, doc, labels=[*self.names, *labels])

    def row(self, *values: str) -> list[str]:
        return [*self.values, *values]


def _add_overflow(family: CounterMetricFamily | GaugeMetricFamily, value: float) -> None:
    """OpenTelemetry's overflow series of a counter or gauge: its one label, none of the others."""
    overflow = type(family)(family.name, family.documentation, labels=[OVERFLOW_LABEL])
    overflow.add_metric(["true"], value)
    family.samples.extend(overflow.samples)


def _capped(family: Metric, limit: int) -> Metric:
    """A gauge past ``limit`` - 1 series keeps the first ones and, in the overflow series, the last value, as
    OpenTelemetry 1.29's AsynchronousMetricStorage ``recordPoint`` under 5.3.3's default gauge view."""
    keep = max(0, limit - 1)
    if not isinstance(family, GaugeMetricFamily) or len(family.samples) <= keep:
        return family
    last = family.samples[-1].value
    del family.samples[keep:]
    _add_overflow(family, last)
    return family


def _traffic(snap: BrokerSnapshot, f: _Families) -> Iterator[Metric]:
    labels_in = ("topic", "message_type", "is_system")
    messages_in = f.counter("rocketmq_messages_in_total", "Total number of incoming messages", labels_in)
    bytes_in = f.counter("rocketmq_throughput_in_total", "Total traffic of incoming messages", labels_in)
    incoming = {(topic, _MESSAGE_TYPES.get(topic, "normal")): counts for topic, counts in snap.incoming.items()}
    incoming.update(snap.incoming_typed)
    for (topic, kind), (count, size) in sorted(incoming.items()):
        row = f.row(topic, kind, _bool(_system_topic(snap, topic)))
        messages_in.add_metric(row, count)
        bytes_in.add_metric(row, size)
    if snap.incoming_overflow[0]:
        _add_overflow(messages_in, snap.incoming_overflow[0])
        _add_overflow(bytes_in, snap.incoming_overflow[1])
    labels_out = ("topic", "consumer_group", "is_system")
    messages_out = f.counter("rocketmq_messages_out_total", "Total number of outgoing messages", labels_out)
    bytes_out = f.counter("rocketmq_throughput_out_total", "Total traffic of outgoing messages", labels_out)
    pulls = sorted((topic, group, counts) for (topic, group, retry), counts in snap.outgoing.items() if retry is None)
    for topic, group, (count, size) in pulls:
        row = f.row(topic, group, _bool(_system_topic(snap, topic) or _system_group(group)))
        messages_out.add_metric(row, count)
        bytes_out.add_metric(row, size)
    # Pops: under the popped topic, labelled ``is_retry`` (whether they read the group's pop retry topic), a series
    # apart from the pulls', as 5.3.3's ``popMsgFromQueue`` in
    # broker/src/main/java/org/apache/rocketmq/broker/processor/PopMessageProcessor.java (a pull's,
    # DefaultPullMessageResultHandler.java, has no ``is_retry``).
    labels_pop = (*labels_out, "is_retry")
    pops_out = f.counter(messages_out.name, messages_out.documentation, labels_pop)
    pop_bytes_out = f.counter(bytes_out.name, bytes_out.documentation, labels_pop)
    pops = sorted(
        (topic, group, retry, counts) for (topic, group, retry), counts in snap.outgoing.items() if retry is not None
    )
    for topic, group, retry, (count, size) in pops:
        row = f.row(topic, group, _bool(_system_topic(snap, topic) or _system_group(group)), _bool(retry))
        pops_out.add_metric(row, count)
        pop_bytes_out.add_metric(row, size)
    messages_out.samples.extend(pops_out.samples)
    bytes_out.samples.extend(pop_bytes_out.samples)
    if snap.outgoing_overflow[0]:
        _add_overflow(messages_out, snap.outgoing_overflow[0])
        _add_overflow(bytes_out, snap.outgoing_overflow[1])
    dlq = f.counter(
        "rocketmq_send_to_dlq_messages_total", "Consumer send to DLQ messages", ("consumer_group", "topic", "is_system")
    )
    for (group, topic), count in sorted(snap.dlq.items()):
        dlq.add_metric(f.row(group, topic, _bool(_system_topic(snap, topic) or _system_group(group))), count)
    if snap.dlq_overflow:
        _add_overflow(dlq, snap.dlq_overflow)
    yield from (messages_in, bytes_in, messages_out, bytes_out, dlq, _message_sizes(snap, f))


def _message_sizes(snap: BrokerSnapshot, f: _Families) -> Metric:
    """RocketMQ 5.3.3's ``rocketmq_message_size``: one value per send request (SendMessageProcessor
    ``handlePutMessageResult``), labelled as ``rocketmq_messages_in_total``."""
    name, doc = "rocketmq_message_size", "Incoming messages size"
    sizes = HistogramMetricFamily(name, doc, labels=[*f.names, "topic", "message_type", "is_system"])
    for key, (buckets, total) in snap.message_sizes.items():
        if key is not None:
            topic, kind = key
            row = f.row(topic, kind, _bool(_system_topic(snap, topic)))
            sizes.add_metric(row, histogram_buckets(MESSAGE_SIZE_BOUNDS, buckets), total)
    if None in snap.message_sizes:
        _add_histogram_overflow(sizes, MESSAGE_SIZE_BOUNDS, *snap.message_sizes[None])
    return sizes


def _add_histogram_overflow(
    family: HistogramMetricFamily, bounds: Iterable[float], buckets: Iterable[int], total: float
) -> None:
    """The overflow series (``otel_metric_overflow="true"``) of a histogram past its cardinality limit."""
    overflow = HistogramMetricFamily(family.name, family.documentation, labels=[OVERFLOW_LABEL])
    overflow.add_metric(["true"], histogram_buckets(bounds, buckets), total)
    family.samples.extend(overflow.samples)


def _consumers(snap: BrokerSnapshot, f: _Families) -> Iterator[Metric]:
    labels = ("consumer_group", "topic", "is_retry", "is_system")
    lag = f.gauge("rocketmq_consumer_lag_messages", "Consumer lag messages", labels)
    lag_ms = f.gauge("rocketmq_consumer_lag_latency_milliseconds", "Consumer lag time", labels)
    inflight = f.gauge("rocketmq_consumer_inflight_messages", "Consumer inflight messages", labels)
    queueing = f.gauge("rocketmq_consumer_queueing_latency_milliseconds", "Consumer queueing time", labels)
    ready = f.gauge("rocketmq_consumer_ready_messages", "Consumer ready messages", labels)
    for entry in snap.lags:
        system = _system_topic(snap, entry.topic) or _system_group(entry.group)
        row = f.row(entry.group, entry.topic, _bool(entry.retry), _bool(system))
        lag.add_metric(row, entry.lag)
        lag_ms.add_metric(row, snap.now_ms - entry.earliest_unconsumed_ms if entry.earliest_unconsumed_ms else 0)
        inflight.add_metric(row, entry.inflight)
        queueing.add_metric(row, snap.now_ms - entry.earliest_unpulled_ms if entry.earliest_unpulled_ms else 0)
        ready.add_metric(row, entry.ready)
    yield from (lag, lag_ms, inflight, queueing, ready)
    producers = f.gauge(
        "rocketmq_producer_connections", "Producer connections", ("language", "version", "protocol_type")
    )
    for (language, version), count in sorted(snap.producers.items()):
        producers.add_metric(f.row(language, version, "remoting"), count)
    consumer_labels = ("consumer_group", "language", "version", "consume_mode", "protocol_type", "is_system")
    consumers = f.gauge("rocketmq_consumer_connections", "Consumer connections", consumer_labels)
    for (group, language, version, mode), count in sorted(snap.consumers.items()):
        consumers.add_metric(f.row(group, language, version, mode, "remoting", _bool(_system_group(group))), count)
    yield from (producers, consumers)


def _broker(snap: BrokerSnapshot, f: _Families) -> Iterator[Metric]:
    watermark = f.gauge("rocketmq_processor_watermark", "Request processor watermark", ("processor",))
    for processor, queued in snap.watermarks.items():  # Java's recording order
        watermark.add_metric(f.row(processor), queued)
    permission = f.gauge("rocketmq_broker_permission", "Broker permission")
    permission.add_metric(f.row(), snap.permission)
    topics = f.gauge("rocketmq_topic_number", "Active topic number")
    topics.add_metric(f.row(), snap.topic_count)
    groups = f.gauge("rocketmq_consumer_group_number", "Active subscription group number")
    groups.add_metric(f.row(), snap.group_count)
    yield from (watermark, permission, topics, groups)
    storage = f.row(*_STORAGE.values())
    names = tuple(_STORAGE)
    gauges = [
        ("rocketmq_storage_size_bytes", "Broker storage size", snap.storage_used),
        ("rocketmq_storage_flush_behind_bytes", "Broker flush behind bytes", snap.flush_behind),
        ("rocketmq_storage_dispatch_behind_bytes", "Broker dispatch behind bytes", snap.dispatch_behind),
        ("rocketmq_storage_message_reserve_time_milliseconds", "Broker message reserve time", snap.reserve_time_ms),
    ]
    for name, doc, value in gauges:
        if value >= 0:
            gauge = f.gauge(name, doc, names)
            gauge.add_metric(storage, value)
            yield gauge
    bounds, counts, sum_ms = snap.put_latency
    latency = HistogramMetricFamily(
        "rocketmq_storage_put_latency", "Store put latency (ms), ours", labels=[*f.names, *names]
    )
    latency.add_metric(storage, histogram_buckets(bounds, counts), sum_ms)
    yield latency
    yield from _timer(snap, f)


def _timer(snap: BrokerSnapshot, f: _Families) -> Iterator[Metric]:
    """RocketMQ 5.3.3's timer gauges and counters (DefaultStoreMetricsManager), with the store's labels."""
    timer = snap.timer
    if timer is None:
        return
    docs = (
        ("rocketmq_timer_enqueue_lag", "Timer enqueue messages lag"),
        ("rocketmq_timer_enqueue_latency_milliseconds", "Timer enqueue latency"),
        ("rocketmq_timer_dequeue_lag", "Timer dequeue messages lag"),
        ("rocketmq_timer_dequeue_latency_milliseconds", "Timer dequeue latency"),
    )
    for (name, doc), value in zip(docs, timer.lags, strict=True):
        gauge = f.gauge(name, doc, tuple(_STORAGE))
        gauge.add_metric(f.row(*_STORAGE.values()), value)
        yield gauge
    timing = f.gauge("rocketmq_timing_messages", "Current message number in timing", (*_STORAGE, "topic"))
    for topic, count in timer.timing.items():
        timing.add_metric(f.row(*_STORAGE.values(), topic), count)
    yield timing
    doc = "Timer message distribution snapshot, only count timing messages in 24h."
    snapshot = f.gauge("rocketmq_timer_message_snapshot", doc, (*_STORAGE, "timer_bound_s"))
    for bound_s, entries in timer.snapshot.items():
        snapshot.add_metric(f.row(*_STORAGE.values(), str(bound_s)), entries)
    yield snapshot
    yield _set_latency(timer.set_latency, f)
    for name, doc, counts in (
        ("rocketmq_timer_enqueue_total", "Total number of timer enqueue", timer.enqueued),
        ("rocketmq_timer_dequeue_total", "Total number of timer dequeue", timer.dequeued),
    ):
        yield _per_topic(f, f.counter(name, doc, (*_STORAGE, "topic")), counts, snap.series_limit)


def _set_latency(rows: dict[str | None, tuple[list[int], int]], f: _Families) -> Metric:
    """RocketMQ 5.3.3's ``rocketmq_delay_message_latency`` (DefaultStoreMetricsManager ``timerMessageSetLatency``,
    unit seconds) per real topic, with the store's labels."""
    name, doc = "rocketmq_delay_message_latency_seconds", "Timer message set latency distribution"
    latency = HistogramMetricFamily(name, doc, labels=[*f.names, *_STORAGE, "topic"])
    for topic, (buckets, total) in rows.items():
        if topic is not None:
            latency.add_metric(
                f.row(*_STORAGE.values(), topic), histogram_buckets(SET_LATENCY_BUCKETS_S, buckets), total
            )
    if None in rows:
        _add_histogram_overflow(latency, SET_LATENCY_BUCKETS_S, *rows[None])
    return latency


def _transactions(snap: BrokerSnapshot, f: _Families) -> Iterator[Metric]:
    """RocketMQ 5.3.3's transaction metrics per real topic: half messages (TransactionMetrics), commits, rollbacks,
    and the commits' finish latency (whole seconds, under the instrument's ``ms`` unit; EndTransactionProcessor
    ``processRequest``)."""
    halves = f.gauge("rocketmq_half_messages", "Half messages of all topics", ("topic",))
    for real_topic, pending in snap.half_messages.items():
        halves.add_metric(f.row(real_topic), pending)
    yield _capped(halves, snap.series_limit)
    ends = snap.transactions
    if ends is None:
        return
    for name, doc, counts in (
        ("rocketmq_commit_messages_total", "Total number of commit messages", ends.commits),
        ("rocketmq_rollback_messages_total", "Total number of rollback messages", ends.rollbacks),
    ):
        family = f.counter(name, doc, ("topic",))
        for topic, count in counts.items():
            if topic is not None:
                family.add_metric(f.row(topic), count)
        if None in counts:
            _add_overflow(family, counts[None])
        yield family
    name, doc = "rocketmq_finish_message_latency_milliseconds", "Transaction finish latency"
    latency = HistogramMetricFamily(name, doc, labels=[*f.names, "topic"])
    for topic, (buckets, total) in ends.finish.items():
        if topic is not None:
            latency.add_metric(f.row(topic), histogram_buckets(FINISH_BUCKETS_S, buckets), total)
    if None in ends.finish:
        _add_histogram_overflow(latency, FINISH_BUCKETS_S, *ends.finish[None])
    yield latency


def _pop_revive(snap: BrokerSnapshot, f: _Families) -> Iterator[Metric]:
    """RocketMQ 5.3.3's PopMetricsManager counters (:mod:`broker.stats.pop_revive`)."""
    figures = snap.pop_revive
    if figures is None:
        return
    families: tuple[tuple[str, str, tuple[str, ...], dict[Any, int]], ...] = (
        ("rocketmq_pop_revive_in_message_total", "Total number of put message to revive topic",
         ("consumer_group", "topic", "revive_message_type", "put_status"), figures.puts),
        ("rocketmq_pop_revive_out_message_total", "Total number of get message from revive topic",
         ("consumer_group", "topic", "queue_id", "revive_message_type"), figures.gets),
        ("rocketmq_pop_revive_retry_messages_total", "Total number of put message to pop retry topic",
         ("consumer_group", "topic", "put_status"), figures.retries),
    )  # fmt: skip
    for name, doc, labels, counts in families:
        family = f.counter(name, doc, labels)
        for key, count in counts.items():
            if key is not None:
                family.add_metric(f.row(*map(str, key)), count)
        if None in counts:
            _add_overflow(family, counts[None])
        yield family
    yield from _pop_gauges(snap, f)


def _pop_gauges(snap: BrokerSnapshot, f: _Families) -> Iterator[Metric]:
    """RocketMQ 5.3.3's PopMetricsManager gauges: the buffer sizes, and the revive's, per revive queue (ours: 0)."""
    gauges = snap.pop
    if gauges is None:
        return
    for name, doc, value in (
        ("rocketmq_pop_offset_buffer_size", "Time number of buffered offset", gauges.offset_buffer),
        ("rocketmq_pop_checkpoint_buffer_size", "The number of buffered checkpoint", gauges.checkpoint_buffer),
    ):
        gauge = f.gauge(name, doc)
        gauge.add_metric(f.row(), value)
        yield gauge
    for name, doc, value in (
        ("rocketmq_pop_revive_lag_milliseconds", "The processing lag of revive topic", gauges.revive_behind),
        (
            "rocketmq_pop_revive_latency_milliseconds",
            "The processing latency of revive topic",
            gauges.revive_latency_ms,
        ),
    ):
        gauge = f.gauge(name, doc, ("queue_id",))
        gauge.add_metric(f.row("0"), value)
        yield gauge


def _per_topic(f: _Families, family: CounterMetricFamily, counts: dict[str, int], limit: int) -> CounterMetricFamily:
    """``family`` with a series per topic of ``counts`` (first seen first), at most ``limit`` - 1, the rest summed
    in the overflow series, as OpenTelemetry's cardinality limit counts them."""
    keep = max(0, limit - 1)
    for topic, count in itertools.islice(counts.items(), keep):
        family.add_metric(f.row(*_STORAGE.values(), topic), count)
    if len(counts) > keep:
        _add_overflow(family, sum(itertools.islice(counts.values(), keep, None)))
    return family


def broker_families(snap: BrokerSnapshot, common: dict[str, str]) -> Iterator[Metric]:
    """Every family of one scrape (see the module docstring)."""
    f = _Families(common)
    yield from _traffic(snap, f)
    yield from _transactions(snap, f)
    yield from _pop_revive(snap, f)
    for family in itertools.chain(_consumers(snap, f), _broker(snap, f)):
        yield _capped(family, snap.series_limit)
