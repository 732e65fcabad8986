"""Consumer lag, inflight and ready messages per (group, topic), RocketMQ 5.3.3's ``ConsumerLagCalculator``
(broker/src/main/java/org/apache/rocketmq/broker/metrics/ConsumerLagCalculator.java): computed from offsets at
scrape time, on the Trio thread.

For every online consumer group that has a subscription group config (Java walks that table: a group not
auto-created or deleted is left out) and each topic it subscribes to (retry topics skipped, topics without a config
or without read and write permission left to the broker skipped), summed over the topic's write queues:

- lag = the queue's max offset - the committed offset (a queue never committed counts as caught up), and the store
  time of the first unconsumed message (0 when none);
- inflight = the pull offset (the next offset after the group's last pull of the queue, found or not: RocketMQ 5's
  ``commitPullOffset``) - the committed offset (0 before a pull), and the store time of the first message not
  pulled yet;
- ready = the queue's max offset - that pull offset (the committed offset before a pull).

A group known from its pops only (no consumer connection: the client registry's compensation table, which Java's
``processAllGroup`` falls back to and whose consume type PopMessageProcessor sets CONSUME_POP) gets pop lag for each
topic it popped, from the pop offset (where its next pop reads: the committed offset, or past the pop service's held
moves, as Java's ``PopBufferMergeService.getLatestOffset``) and the in-flight count
(:class:`~broker.stats.pop_inflight.PopInflight`): lag = past the pop offset + in flight (its latency from the
message in flight count entries before the pop offset), inflight = in flight (its latency from the message at the
pop offset), ready = past the pop offset; and the same again over the group's pop retry topic of the topic, labelled
``is_retry`` (zeros while that topic does not exist). An online group is never a pop one here, as in Java, where
no client heartbeats CONSUME_POP (a gRPC client's proxy registers it as CONSUME_ACTIVELY or CONSUME_PASSIVELY).

For a TAG subscription other than ``*`` each of those counts is the messages of the range whose tags code the group
takes, estimated from the ConsumeQueue as 5.3.3's ``calculateMessageCount`` with ``estimateAccumulation`` (on by
default) does (:meth:`~store.reads.StoreReads.estimate_message_count`: at most 20,000 entries scanned per range).
Ours: the estimates run on the event loop (Java scans on a metrics thread of its own, at no cost to requests), so one
scrape scans about :data:`SCAN_BUDGET` + :data:`FLOOR_BUDGET` entries at most, however many ranges lag: up to Java's
20,000 per range while :data:`SCAN_BUDGET` lasts, then :data:`SCAN_FLOOR` per range while :data:`FLOOR_BUDGET` lasts;
then a range is not scanned but estimated from the share of matching messages seen in the same group's ranges of the
topic, else in every range this scrape scanned, else counted whole.

Nothing here raises; a message time that cannot be read counts as 0 (no latency reported for that queue).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING

import attrs

from processors.pull import tag_filter_of
from remoting.codec.bodies.heartbeat import EXPRESSION_TAG
from remoting.codec.topics import RETRY_GROUP_TOPIC_PREFIX, pop_retry_topic
from store.get_message import TagFilter
from store.metadata_files import TopicConfig
from store.reads import ESTIMATE_MAX_SCAN

if TYPE_CHECKING:
    from broker.context import BrokerState

_READ_WRITE = 4 | 2
#: Consume-queue entries one scrape scans for tag estimates at Java's 20,000 per range (about 50 ms); then
#: :data:`SCAN_FLOOR` per range for :data:`FLOOR_BUDGET` entries in all (about 10 ms); then none.
SCAN_BUDGET = 250_000
SCAN_FLOOR = 1_000
FLOOR_BUDGET = 50_000


@attrs.define
class _Share:
    """Messages a group takes among the ranges scanned: ``found`` of ``span``."""

    found: int = 0
    span: int = 0

    def add(self, found: int, span: int) -> None:
        self.found += found
        self.span += span

    def of(self, span: int) -> int | None:
        """``span`` messages at this share; ``None`` before any range was scanned."""
        return self.found * span // self.span if self.span else None


@attrs.define
class _ScanBudget:
    """One scrape's scanning (see the module docstring); ``seen``: the share over every range scanned."""

    left: int = attrs.field(factory=lambda: SCAN_BUDGET)
    floor_left: int = attrs.field(factory=lambda: FLOOR_BUDGET)
    seen: _Share = attrs.field(factory=_Share)

    def take(self, start: int, end: int) -> int:
        """The entries a range may scan: Java's maximum while the budget lasts, then :data:`SCAN_FLOOR` while the
        floor's budget lasts, then 0."""
        span = end - start
        if self.left > 0:
            scan = min(ESTIMATE_MAX_SCAN, max(SCAN_FLOOR, self.left))
            self.left -= min(span, scan)
        elif self.floor_left > 0:
            scan = SCAN_FLOOR
            self.floor_left -= min(span, scan)
        else:
            return 0
        return scan


@attrs.frozen
class GroupLag:
    group: str
    topic: str
    lag: int
    earliest_unconsumed_ms: int
    inflight: int
    earliest_unpulled_ms: int
    ready: int
    #: the series of the group's pop retry topic of ``topic`` (``is_retry="true"``)
    retry: bool = False


def _earliest(current: int, candidate: int | None) -> int:
    if not candidate:
        return current
    return candidate if current == 0 else min(current, candidate)


def _tag_filter(state: BrokerState, group: str, topic: str) -> TagFilter | None:
    """The group's TAG filter of ``topic`` (``None``: it takes every message), which ConsumerLagCalculator
    ``calculateMessageCount`` counts with when ``estimateAccumulation`` is on (RocketMQ 5.3.3's default): SQL92
    subscriptions count every message, as Java's consume-queue check passes them all without a filter bit map. A
    group known from its pops only has the subscriptions they recorded (``*`` for its pop retry topic)."""
    subscription = state.clients.find_subscription(group, topic)
    if subscription is None or subscription.expression_type.upper() != EXPRESSION_TAG:
        return None
    return tag_filter_of(subscription)


#: Counts the messages of a queue's range ``[start, end)`` the group takes: (queue id, start, end) -> messages
_Count = Callable[[int, int, int], int]


def _counter(state: BrokerState, group: str, topic: str, budget: _ScanBudget) -> _Count:
    """A :data:`_Count` for ``group`` on ``topic``: whole ranges, or its TAG filter's estimates (see the module
    docstring), each range counted once (lag and ready share theirs while nothing is in flight)."""
    store = state.store
    matches = _tag_filter(state, group, topic)
    counted: dict[tuple[int, int, int], int] = {}
    share = _Share()

    def estimate(queue_id: int, start: int, end: int, matches: TagFilter) -> int:
        span = end - start
        scan = budget.take(start, end)
        if not scan:
            return next((n for n in (share.of(span), budget.seen.of(span)) if n is not None), span)
        found = store.estimate_message_count(topic, queue_id, start, end, matches, scan)
        share.add(found, span)
        budget.seen.add(found, span)
        return found

    def count(queue_id: int, start: int, end: int) -> int:
        if end <= start:
            return 0
        if matches is None:
            return end - start
        key = (queue_id, start, end)
        found = counted.get(key)
        if found is None:
            found = counted[key] = estimate(queue_id, start, end, matches)
        return found

    return count


def _topic_lag(state: BrokerState, group: str, topic: str, queues: int, budget: _ScanBudget) -> GroupLag:
    store, offsets = state.store, state.offsets
    pulled = state.stats.pull_offsets.get((topic, group), {})
    count = _counter(state, group, topic, budget)
    lag = inflight = ready = 0
    unconsumed = unpulled = 0
    for queue_id in range(queues):
        broker_offset = max(0, store.max_offset_in_queue(topic, queue_id))
        committed = offsets.query(group, topic, queue_id)
        if committed < 0:
            committed = broker_offset
        if broker_offset > committed:
            lag += count(queue_id, committed, broker_offset)
            unconsumed = _earliest(unconsumed, store.message_store_timestamp(topic, queue_id, committed))
        pull = pulled.get(queue_id, committed)
        if pull > committed:
            inflight += count(queue_id, committed, pull)
        if broker_offset > pull:
            ready += count(queue_id, pull, broker_offset)
            unpulled = _earliest(unpulled, store.message_store_timestamp(topic, queue_id, pull))
    return GroupLag(group, topic, lag, unconsumed, inflight, unpulled, ready)


def _pop_lag(state: BrokerState, group: str, topic: str, source: str, queues: int, budget: _ScanBudget) -> GroupLag:
    """``group``'s pop lag of ``source`` (``topic`` or its pop retry topic), reported under ``topic``: per queue, the
    messages past the pop offset plus those in flight (ConsumerLagCalculator ``getConsumerLagStats`` with
    ``isPop``), the oldest of those, the in-flight count and the store time at the pop offset
    (``getInFlightMsgStats``), and the messages past the pop offset (``getAvailableMsgCount``)."""
    store, inflight_counts = state.store, state.stats.pop_inflight
    count = _counter(state, group, source, budget)
    lag = inflight = ready = 0
    unconsumed = unpulled = 0
    for queue_id in range(queues):
        broker_offset = max(0, store.max_offset_in_queue(source, queue_id))
        pop_offset = inflight_counts.pop_offset(group, source, queue_id)
        if pop_offset < 0:
            pop_offset = broker_offset
        in_flight = inflight_counts.get(source, group, queue_id)
        past = count(queue_id, pop_offset, broker_offset)
        lag += past + in_flight
        inflight += in_flight
        ready += past
        if in_flight or past:
            oldest = store.message_store_timestamp(source, queue_id, max(0, pop_offset - in_flight))
            unconsumed = _earliest(unconsumed, oldest)
        if past:
            unpulled = _earliest(unpulled, store.message_store_timestamp(source, queue_id, pop_offset))
    return GroupLag(group, topic, lag, unconsumed, inflight, unpulled, ready, source != topic)


def _readable_config(state: BrokerState, topic: str) -> TopicConfig | None:
    """``topic``'s config when the broker may read or write it (ConsumerLagCalculator ``processAllGroup``)."""
    config = state.topics.get(topic)
    if config is None or not config.perm & state.config.broker_permission & _READ_WRITE:
        return None
    return config


def _groups(state: BrokerState) -> Iterator[tuple[str, list[str], bool]]:
    """(group, subscribed topics, pops): every online group (none pops, as no client heartbeats CONSUME_POP), then
    those known from their pops only, the compensation table ``getConsumerGroupInfo(group, true)`` falls back to,
    whose type PopMessageProcessor sets CONSUME_POP (``compensateBasicConsumerInfo``)."""
    clients = state.clients
    for group, info in clients.consumer_groups.items():
        yield group, list(info.subscriptions), False
    for group, topics in clients.compensated_groups().items():
        yield group, topics, True


def group_lags(state: BrokerState) -> Iterator[GroupLag]:
    """One :class:`GroupLag` per online group and subscribed topic, two for a group known from its pops (see the
    module docstring)."""
    budget = _ScanBudget()
    for group, topics, pops in _groups(state):
        # broker/src/main/java/org/apache/rocketmq/broker/metrics/ConsumerLagCalculator.java ``processAllGroup``
        # walks the subscription group table: a group without a config (not auto-created, or deleted) has no lag.
        if state.groups.get(group) is None:
            continue
        for topic in topics:
            config = None if topic.startswith(RETRY_GROUP_TOPIC_PREFIX) else _readable_config(state, topic)
            if config is None:
                continue
            if not pops:
                yield _topic_lag(state, group, topic, config.write_queue_nums, budget)
                continue
            yield _pop_lag(state, group, topic, topic, config.write_queue_nums, budget)
            yield _retry_lag(state, group, topic, budget)


def _retry_lag(state: BrokerState, group: str, topic: str, budget: _ScanBudget) -> GroupLag:
    """The ``is_retry`` series of a popping group: its pop retry topic's pop lag, zeros without that topic (Java
    then reads no topic: a lag of 0, and a latency of now - ``Long.MAX_VALUE``, which we leave at 0)."""
    retry = pop_retry_topic(group, topic)
    config = _readable_config(state, retry)
    if config is None:
        return GroupLag(group, topic, 0, 0, 0, 0, 0, retry=True)
    return _pop_lag(state, group, topic, retry, config.write_queue_nums, budget)
