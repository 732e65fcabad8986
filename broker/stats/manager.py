"""``BrokerStatsManager``: the broker's throughput statistics (RocketMQ's ``BrokerStatsManager``, ``BrokerStats`` and
``StoreStatsService``), read by GET_BROKER_RUNTIME_INFO, VIEW_BROKER_STATS_DATA, GET_CONSUME_STATS and
GET_BROKER_CONSUME_STATS.

Statistics kept, with Java's names and keys:

- ``TOPIC_PUT_NUMS`` / ``TOPIC_PUT_SIZE`` (key ``topic``) and ``BROKER_PUT_NUMS`` (key: the cluster name): messages
  and bytes stored while a master (a slave's replicated messages count in the store totals only);
- ``GROUP_GET_NUMS`` / ``GROUP_GET_SIZE`` (key ``topic@group``) and ``BROKER_GET_NUMS``: messages and bytes pulled;
  ``GROUP_GET_LATENCY`` (key ``queueId@topic@group`` with ``enableDetailStat``, ``topic@group`` without): whole
  milliseconds per found pull; ``SNDBCK_PUT_NUMS`` (key ``topic@group``, the message's original topic): send-backs;
- with ``enableDetailStat`` (the default), ``QUEUE_PUT_NUMS`` / ``QUEUE_PUT_SIZE`` (key ``topic@queueId``) and
  ``QUEUE_GET_NUMS`` / ``QUEUE_GET_SIZE`` (key ``topic@queueId@group``), for the delay levels' queues only, as Java
  (see :class:`BrokerStatsManager`);
- the store rates ``putTps``, ``getFoundTps``, ``getMissTps``, ``getTotalTps``, ``getTransferedTps``
  (:mod:`broker.stats.store_stats`), the ``msgPutTotal*`` / ``msgGetTotal*`` day totals, the put latency
  distribution (:mod:`broker.stats.latency`), the put totals and the longest pull.

For ``/metrics`` it also keeps, per group, the next offset of each queue's last pull, found or not (RocketMQ 5's
``commitPullOffset`` of every pull's ``nextBeginOffset``: inflight and ready messages), the messages moved to a DLQ
per (group, original topic), and the messages and bytes stored while the broker is a master (``incoming``: a
slave's puts are replicated ones, which RocketMQ 5 does not count as incoming; :meth:`BrokerStatsManager.set_replica`
follows a DLedger role change).

Cost on the hot path: a pull calls :meth:`BrokerStatsManager.record_get` or :meth:`~BrokerStatsManager.record_miss`
(a few integer additions and two or three dict lookups); a send records its latency (:mod:`broker.stats.latency`).
Puts are not counted per message but read from the store's ConsumeQueues when sampling (:mod:`broker.stats.puts`;
ours: Java counts in the send processor). So put counts include every stored message (sends, retries, delayed
deliveries) but those Java stores without counting, which count in the store totals only: the broker's
OffsetMovedEvents, transaction op messages and discarded half messages (:data:`_UNCOUNTED_PUT_TOPICS`), pop
checkpoints and ACKs, committed and renewed transaction messages (:meth:`BrokerStatsManager.record_uncounted_put`) and
send-backs (:meth:`BrokerStatsManager.record_send_back_put`).
``times`` of a put item equals its message count, except that a batch send counts one
(:meth:`BrokerStatsManager.record_batch_put`, as Java's per-request count). Messages recovered at start are not
counted as puts.

Ownership: the controller starts :meth:`BrokerStatsManager.run` with ``nursery.start``; it samples once a second
(store rates, broker totals), every 10 s / 10 min / 1 h (the item windows of :mod:`broker.stats.item`) and rolls
the day totals at local midnight, until cancelled. Trio's clock drives sampling (virtual time in tests); the wall
clock only decides the day. Nothing here raises.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Final

import trio

from broker.stats.item import StatsItem, StatsItemSet, StatsSnapshot
from broker.stats.latency import PutLatencyStats
from broker.stats.message_sizes import MessageSizes
from broker.stats.pop_inflight import PopInflight
from broker.stats.pop_revive import PopReviveCounts
from broker.stats.puts import NOT_INCOMING, StorePuts
from broker.stats.store_stats import StoreStats
from broker.stats.transactions import TransactionEnds
from remoting.codec.java_format import java_double
from remoting.codec.topics import (
    OFFSET_MOVED_EVENT,
    SCHEDULE_TOPIC,
    TRANS_CHECK_MAX_TIME_TOPIC,
    TRANS_OP_HALF_TOPIC,
    is_retry_or_dlq_topic,
)
from remoting.rpc_metrics import DEFAULT_CARDINALITY_LIMIT
from store.multi_dispatch import LMQ_PREFIX

if TYPE_CHECKING:
    from store.message_store import MessageStore

TOPIC_PUT_NUMS: Final = "TOPIC_PUT_NUMS"
TOPIC_PUT_SIZE: Final = "TOPIC_PUT_SIZE"
GROUP_GET_NUMS: Final = "GROUP_GET_NUMS"
GROUP_GET_SIZE: Final = "GROUP_GET_SIZE"
GROUP_GET_LATENCY: Final = "GROUP_GET_LATENCY"
QUEUE_PUT_NUMS: Final = "QUEUE_PUT_NUMS"
QUEUE_PUT_SIZE: Final = "QUEUE_PUT_SIZE"
QUEUE_GET_NUMS: Final = "QUEUE_GET_NUMS"
QUEUE_GET_SIZE: Final = "QUEUE_GET_SIZE"
#: The group ScheduleMessageService's deliveries count under (MixAll.SCHEDULE_CONSUMER_GROUP).
SCHEDULE_CONSUMER_GROUP: Final = "SCHEDULE_CONSUMER"
SNDBCK_PUT_NUMS: Final = "SNDBCK_PUT_NUMS"
BROKER_PUT_NUMS: Final = "BROKER_PUT_NUMS"
BROKER_GET_NUMS: Final = "BROKER_GET_NUMS"
_ITEM_SETS: Final = (
    TOPIC_PUT_NUMS, TOPIC_PUT_SIZE, GROUP_GET_NUMS, GROUP_GET_SIZE, GROUP_GET_LATENCY, SNDBCK_PUT_NUMS,
    BROKER_PUT_NUMS, BROKER_GET_NUMS,
)  # fmt: skip
#: The per-queue item sets, kept only with ``enableDetailStat`` (BrokerStatsManager's ``enableQueueStat``).
_QUEUE_SETS: Final = (QUEUE_PUT_NUMS, QUEUE_PUT_SIZE, QUEUE_GET_NUMS, QUEUE_GET_SIZE)

_PUT_SETS: Final = frozenset({TOPIC_PUT_NUMS, TOPIC_PUT_SIZE, BROKER_PUT_NUMS, QUEUE_PUT_NUMS, QUEUE_PUT_SIZE})
#: Topics only the broker itself writes to with a plain store put, which counts in the store totals but in no put
#: item (no client may send to them, TopicValidator's not-allowed-send set): the OffsetMovedEvent
#: (broker/src/main/java/org/apache/rocketmq/broker/processor/PullMessageProcessor.java ``generateOffsetMovedEvent``
#: calls ``getMessageStore().putMessage`` and no ``incTopicPutNums``) and a half message whose checks ran out
#: (broker/src/main/java/org/apache/rocketmq/broker/transaction/queue/DefaultTransactionalMessageCheckListener.java
#: ``resolveDiscardMsg``, the same) and a transaction's op message (4.9.8's
#: broker/src/main/java/org/apache/rocketmq/broker/transaction/queue/TransactionalMessageBridge.java ``writeOp``).
_UNCOUNTED_PUT_TOPICS: Final = frozenset({OFFSET_MOVED_EVENT, TRANS_CHECK_MAX_TIME_TOPIC, TRANS_OP_HALF_TOPIC})
_SECONDS_PER_ITEM_SAMPLE: Final = 10
_SECONDS_PER_HOUR_SAMPLE: Final = 600
_SECONDS_PER_DAY_SAMPLE: Final = 3600
#: Java's StoreStatsService swaps its put latency buckets once a minute.
_SECONDS_PER_LATENCY_WINDOW: Final = 60
_NS_PER_MS: Final = 1_000_000


def stats_key(topic: str, group: str) -> str:
    """Java's ``buildStatsKey(topic, group)``."""
    return f"{topic}@{group}"


#: A ``/metrics`` outgoing label set: (topic, group, None) for pulls, (topic, group, is_retry) for pops.
OutKey = tuple[str, str, bool | None]


class GroupItems:
    """One (topic, group)'s pull statistics: the hot path's single lookup."""

    __slots__ = ("latency", "nums", "pull_offsets", "sizes")

    def __init__(self, nums: StatsItem, sizes: StatsItem, pull_offsets: dict[int, int]) -> None:
        self.nums = nums
        self.sizes = sizes
        #: queue id -> GROUP_GET_LATENCY item
        self.latency: dict[int, StatsItem] = {}
        #: queue id -> next offset after the queue's last pull: the pair's entry of the manager's ``pull_offsets``
        #: (the same dict, so a found pull updates it without another lookup)
        self.pull_offsets = pull_offsets


class BrokerStatsManager:
    """See the module docstring. ``store`` is read when sampling (its ``queue_offsets`` table, never mutated);
    ``replica`` says the broker starts as a slave; ``queue_stat`` is the broker's ``enableDetailStat``: 4.9.8's
    BrokerController hands it to BrokerStatsManager as ``enableQueueStat``
    (store/src/main/java/org/apache/rocketmq/store/stats/BrokerStatsManager.java), which then keeps the QUEUE_PUT_*
    and QUEUE_GET_* sets (none without it: VIEW_BROKER_STATS_DATA answers "not exist") and keys GROUP_GET_LATENCY
    ``queueId@topic@group`` (``topic@group`` without it).

    The per-queue items count as 4.9.8 counts them: QUEUE_PUT_NUMS / QUEUE_PUT_SIZE (``topic@queueId``) only for
    messages stored in a delay level's queue of ``SCHEDULE_TOPIC_XXXX`` (SendMessageProcessor's
    ``handlePutMessageResult`` and ``asyncConsumerSendMsgBack``; read from the store with the other puts, so a send
    costs nothing more; a committed transaction message parked there, one of :meth:`record_uncounted_put`'s, counts
    in none), QUEUE_GET_NUMS / QUEUE_GET_SIZE (``topic@queueId@group``) only for the schedule service's
    deliveries (:meth:`record_schedule_delivery`)."""

    def __init__(
        self,
        store: MessageStore,
        cluster_name: str,
        *,
        replica: bool = False,
        queue_stat: bool = True,
        wall_clock: Callable[[], float] = time.time,
        lmq: bool = False,
        series_limit: int = DEFAULT_CARDINALITY_LIMIT,
    ) -> None:
        self.store = store
        #: ``metricsOtelCardinalityLimit``: the /metrics counters kept past deletions (:attr:`incoming` with
        #: :attr:`incoming_typed`, :attr:`dlq_messages`) hold at most this many label sets - 1 each; what a new one
        #: would count goes to their overflow (:attr:`incoming_overflow`, :attr:`dlq_overflow`), as the OpenTelemetry
        #: views RocketMQ 5.3.3 sets this limit on (broker/src/main/java/org/apache/rocketmq/broker/metrics/
        #: BrokerMetricsManager.java ``registerMetricsView``): creating and deleting topics cannot grow them for ever.
        self.series_limit = series_limit
        #: ``enableLmq``: the pull, pop, send-back and fall-behind statistics of every ``%LMQ%`` topic and group are
        #: counted as ``%LMQ%`` (store/src/main/java/org/apache/rocketmq/store/stats/LmqBrokerStatsManager.java), so
        #: their items stay few however many LMQs clients use; pull offsets keep each queue's own.
        self.lmq = lmq
        self.cluster_name = cluster_name
        self.wall_clock = wall_clock
        self.store_stats = StoreStats()
        self.queue_stat = queue_stat
        self.sets = {name: StatsItemSet(name) for name in _ITEM_SETS + (_QUEUE_SETS if queue_stat else ())}
        #: Created by the first counted put, as incBrokerPutNums' getAndCreateStatsItem (never on a slave).
        self._broker_put: StatsItem | None = None
        #: Created once something was got, as incBrokerGetNums' getAndCreateStatsItem
        #: (store/src/main/java/org/apache/rocketmq/store/stats/BrokerStatsManager.java): "not exist" until then.
        self._broker_get: StatsItem | None = None
        #: (topic, group) -> its pull items: the hot path's lookup, no string building.
        self.group_items: dict[tuple[str, str], GroupItems] = {}
        #: (topic, group) -> queue id -> next offset after the queue's last pull
        self.pull_offsets: dict[tuple[str, str], dict[int, int]] = {}
        #: popped messages neither acked nor revived, and where pops read (the pop lag of ``/metrics``)
        self.pop_inflight = PopInflight()
        #: topic -> (messages, bytes) stored while a master (``/metrics``' incoming messages; never reset), those
        #: the broker put as another message type (:attr:`incoming_typed`) and retry and DLQ topics (as 5.3.3's send
        #: path) left out
        self.incoming: dict[str, tuple[int, int]] = {}
        #: (topic, message type) -> (messages, bytes) of :attr:`incoming` the broker fixed the type of
        #: (:meth:`record_delay_delivery`)
        self.incoming_typed: dict[tuple[str, str], tuple[int, int]] = {}
        #: (messages, bytes) of incoming label sets past :attr:`series_limit`
        self.incoming_overflow = (0, 0)
        self.replica = replica
        self._puts = StorePuts(store, frozenset({SCHEDULE_TOPIC}) if queue_stat else frozenset())
        self.put_latency = PutLatencyStats()
        #: commits, rollbacks and finish latencies of transactions (``/metrics``)
        self.transactions = TransactionEnds(series_limit)
        #: ``rocketmq_message_size``, recorded by the send paths
        self.message_sizes = MessageSizes(series_limit)
        #: the revive topic's puts and gets and the revive's retry copies (PopMetricsManager's counters)
        self.pop_revive = PopReviveCounts(series_limit)
        #: Every message and byte the store took, replicated ones included (StoreStatsService's put totals).
        self.put_total = 0
        self.put_size_total = 0
        self.put_failed = 0
        self.get_max_ms = 0
        #: (group, original topic) -> messages moved to the group's DLQ (never reset)
        self.dlq_messages: dict[tuple[str, str], int] = {}
        #: messages moved to a DLQ under label sets past :attr:`series_limit`
        self.dlq_overflow = 0
        #: (topic, group, is_retry) -> (messages, bytes) pops of ``group`` read from ``topic`` (is_retry false; they
        #: count in :attr:`group_items` too) or from its pop retry topic of ``topic`` (true): ``/metrics``' outgoing
        #: messages labelled ``is_retry``, apart from the pulls'
        self.pop_out: dict[tuple[str, str, bool], tuple[int, int]] = {}
        #: ``/metrics``' outgoing label sets, ``(topic, group, None)`` for pulls and ``(topic, group, is_retry)`` for
        #: pops, that have a series of their own: at most :attr:`series_limit` - 1, taken first come (at a scrape or
        #: a deletion); what any other counts goes to the overflow series, as RocketMQ 5.3.3's default counter view
        #: caps ``rocketmq_messages_out_total`` too
        self.out_series: set[OutKey] = set()
        #: outgoing label set -> (messages, bytes) its pair counted before :meth:`on_topic_deleted` /
        #: :meth:`on_group_deleted` dropped its items (``autoDeleteUnusedStats``): 5.3.3's counters keep them
        self.out_retired: dict[OutKey, tuple[int, int]] = {}
        #: (messages, bytes) of dropped outgoing label sets that had no series of their own
        self.out_overflow_retired = (0, 0)
        #: Java's BrokerStats: the put/get totals at the last two local midnights (0 until the first one passes).
        self.day_totals = {"put_yesterday": 0, "put_today": 0, "get_yesterday": 0, "get_today": 0}
        self._day: tuple[int, int] | None = None
        #: (group, topic, queue id) -> CommitLog bytes the queue's last pull was behind the head (Java's
        #: GROUP_GET_FALL_SIZE moment items, read by BrokerController.protectBroker)
        self.fall_behind: dict[tuple[str, str, int], int] = {}

    # ---- hot path ----------------------------------------------------------------------------------------------

    def record_miss(self, group: str, topic: str, queue_id: int, next_offset: int, elapsed_ns: int = 0) -> None:
        """A pull of ``queue_id`` that found nothing to deliver (parked ones included), ``elapsed_ns`` after it
        started; the queue's next pull starts at ``next_offset``."""
        self.store_stats.get_miss += 1
        offsets = self.pull_offsets.get((topic, group))
        if offsets is None:
            offsets = self.pull_offsets[(topic, group)] = {}
        offsets[queue_id] = next_offset
        ms = elapsed_ns // _NS_PER_MS
        if ms > self.get_max_ms:
            self.get_max_ms = ms

    def record_fall_behind(self, group: str, topic: str, queue_id: int, size: int) -> None:
        """A pull of ``queue_id`` read entries ``size`` CommitLog bytes behind the head (recordDiskFallBehindSize)."""
        group, topic = self._lmq_names(group, topic)
        self.fall_behind[(group, topic, queue_id)] = size

    def record_get(
        self, group: str, topic: str, queue_id: int, count: int, size: int, next_offset: int, elapsed_ns: int = 0
    ) -> None:
        """A pull of ``queue_id`` that delivered ``count`` messages of ``size`` bytes in all (the response body's
        length: summing the records' lengths here cost 1.4 us per 32-message pull, the body's length nothing),
        answered ``elapsed_ns`` after it started; the queue's next pull starts at ``next_offset``."""
        if self.lmq and (group.startswith(LMQ_PREFIX) or topic.startswith(LMQ_PREFIX)):
            self.pull_offsets.setdefault((topic, group), {})[queue_id] = next_offset
            group, topic = self._lmq_names(group, topic)
        store = self.store_stats
        store.get_found += 1
        store.get_transferred += count
        items = self.group_items.get((topic, group))
        if items is None:
            items = self._group_item(topic, group)
        nums, sizes = items.nums, items.sizes
        nums.value += count
        nums.times += 1
        sizes.value += size
        sizes.times += 1
        items.pull_offsets[queue_id] = next_offset
        latency = items.latency.get(queue_id)
        if latency is None:
            latency = items.latency[queue_id] = self.sets[GROUP_GET_LATENCY].get_or_create(
                f"{queue_id}@{topic}@{group}" if self.queue_stat else stats_key(topic, group)
            )
        ms = elapsed_ns // _NS_PER_MS
        latency.value += ms
        latency.times += 1
        if ms > self.get_max_ms:
            self.get_max_ms = ms

    def record_pop_read(self, group: str, topic: str, count: int, size: int, *, retry_of: str | None = None) -> None:
        """One read of a queue by a pop of ``group`` that handed out ``count`` messages of ``size`` bytes (0: it
        found nothing). As RocketMQ 5.3.3's PopMessageProcessor ``popMsgFromQueue``
        (broker/src/main/java/org/apache/rocketmq/broker/processor/PopMessageProcessor.java: incGroupGetNums,
        incGroupGetSize, incBrokerGetNums) and the store's count of the read (DefaultMessageStore.getMessage: found or
        missed, and the messages transferred). A pop's queue offsets are its own: the pull offsets stay as they are.
        The same method adds them to ``rocketmq_messages_out_total`` / ``rocketmq_throughput_out_total`` under the
        popped topic labelled ``is_retry``, a series apart from the pulls' (:attr:`pop_out`); ``retry_of``: ``topic``
        is the group's pop retry topic of that topic (``is_retry`` true)."""
        group, topic = self._lmq_names(group, topic)
        store = self.store_stats
        if count <= 0:
            store.get_miss += 1
            return
        key = (topic, group, False) if retry_of is None else (retry_of, group, True)
        before_count, before_size = self.pop_out.get(key, (0, 0))
        self.pop_out[key] = (before_count + count, before_size + size)
        store.get_found += 1
        store.get_transferred += count
        items = self.group_items.get((topic, group))
        if items is None:
            items = self._group_item(topic, group)
        items.nums.add(count)
        items.sizes.add(size)

    def record_store_read(self, count: int) -> None:
        """A store read of the broker's own that found ``count`` messages (0: none) and counts in no group item: the
        pop revive's read-back of the message to revive, RocketMQ 5.3.3's EscapeBridge ``getMessageAsync``
        (broker/src/main/java/org/apache/rocketmq/broker/failover/EscapeBridge.java), a DefaultMessageStore
        ``getMessage`` counted as found or missed, with its messages transferred."""
        store = self.store_stats
        if count <= 0:
            store.get_miss += 1
            return
        store.get_found += 1
        store.get_transferred += count

    def record_internal_read(self, group: str, topic: str, count: int, size: int) -> None:
        """One read of ``topic`` by the broker's own ``group`` (the transaction check's ``CID_RMQ_SYS_TRANS``, the pop
        revive service's ``CID_RMQ_SYS_REVIVE_GROUP``) that found ``count`` messages of ``size`` bytes (0: none).
        4.9.8's TransactionalMessageBridge ``getMessage`` (broker/src/main/java/org/apache/rocketmq/broker/
        transaction/queue/TransactionalMessageBridge.java) and 5.3.3's PopReviveService ``getMessage``
        (broker/src/main/java/org/apache/rocketmq/broker/processor/PopReviveService.java) are store reads (found or
        missed, the messages transferred) that count what they find with ``incGroupGetNums``, ``incGroupGetSize``
        and ``incBrokerGetNums``; no pull offset, no ``/metrics`` outgoing series here."""
        self.record_store_read(count)
        if count <= 0:
            return
        key = stats_key(topic, group)
        self.sets[GROUP_GET_NUMS].get_or_create(key).add(count)
        self.sets[GROUP_GET_SIZE].get_or_create(key).add(size)

    def record_pop_latency(self, group: str, topic: str, elapsed_ms: int) -> None:
        """A pop of ``group`` on ``topic`` handed out messages ``elapsed_ms`` after it started: RocketMQ 5.3.3's
        PopMessageProcessor answers it with ``incGroupGetLatency(group, topic, queueId, now - begin)``
        (broker/src/main/java/org/apache/rocketmq/broker/processor/PopMessageProcessor.java, transferMsgByHeap),
        once per pop, with the request's queue id: -1, the broker-acting queue the proxy pops with
        (proxy/src/main/java/org/apache/rocketmq/proxy/service/route/MessageQueueSelector.java). With ``enableLmq``
        the LMQ names count as ``%LMQ%``, as LmqBrokerStatsManager's ``incGroupGetLatency``
        (store/src/main/java/org/apache/rocketmq/store/stats/LmqBrokerStatsManager.java)."""
        group, topic = self._lmq_names(group, topic)
        key = f"-1@{topic}@{group}" if self.queue_stat else stats_key(topic, group)
        self.sets[GROUP_GET_LATENCY].get_or_create(key).add(max(0, elapsed_ms))

    def _group_item(self, topic: str, group: str) -> GroupItems:
        key = stats_key(topic, group)
        # The ``%LMQ%`` items of an LMQ broker: each LMQ's pull offsets were kept under its own names.
        collapsed = self.lmq and (topic.startswith(LMQ_PREFIX) or group.startswith(LMQ_PREFIX))
        items = GroupItems(
            self.sets[GROUP_GET_NUMS].get_or_create(key),
            self.sets[GROUP_GET_SIZE].get_or_create(key),
            {} if collapsed else self.pull_offsets.setdefault((topic, group), {}),
        )
        self.group_items[(topic, group)] = items
        return items

    def record_send_back(self, group: str, topic: str, to_dlq: bool) -> None:
        """A message of ``topic`` that ``group`` sent back was stored for retry (or, ``to_dlq``, in its DLQ)."""
        lmq_group, lmq_topic = self._lmq_names(group, topic)
        self.sets[SNDBCK_PUT_NUMS].get_or_create(stats_key(lmq_topic, lmq_group)).add(1)
        if to_dlq:
            self.record_dlq(group, topic)

    def _lmq_names(self, group: str, topic: str) -> tuple[str, str]:
        """``group`` and ``topic`` as an LMQ broker counts them: an ``%LMQ%`` name as ``%LMQ%``."""
        if not self.lmq:
            return group, topic
        return (
            LMQ_PREFIX if group.startswith(LMQ_PREFIX) else group,
            LMQ_PREFIX if topic.startswith(LMQ_PREFIX) else topic,
        )

    def record_schedule_delivery(self, queue_id: int, size: int) -> None:
        """The schedule service delivered a message of ``size`` bytes from ``SCHEDULE_TOPIC_XXXX``'s ``queue_id``:
        4.9.8's ScheduleMessageService ``PutResultProcess.onSuccess``
        (store/src/main/java/org/apache/rocketmq/store/schedule/ScheduleMessageService.java, with
        ``enableScheduleMessageStats``) counts it as SCHEDULE_CONSUMER's get, in QUEUE_GET_NUMS / QUEUE_GET_SIZE
        (``SCHEDULE_TOPIC_XXXX@queueId@SCHEDULE_CONSUMER``, with ``enableDetailStat``) and GROUP_GET_NUMS /
        GROUP_GET_SIZE (``SCHEDULE_TOPIC_XXXX@SCHEDULE_CONSUMER``); its put of the real topic counts with the other
        puts. Those group items are the pair's :attr:`group_items`, so ``/metrics`` exports them as outgoing messages
        of SCHEDULE_CONSUMER, as RocketMQ 5.3.3's ``onSuccess`` adds them to ``rocketmq_messages_out_total``
        (broker/src/main/java/org/apache/rocketmq/broker/schedule/ScheduleMessageService.java)."""
        items = self.group_items.get((SCHEDULE_TOPIC, SCHEDULE_CONSUMER_GROUP))
        if items is None:
            items = self._group_item(SCHEDULE_TOPIC, SCHEDULE_CONSUMER_GROUP)
        items.nums.add(1)
        items.sizes.add(size)
        if self.queue_stat:
            queue_key = f"{SCHEDULE_TOPIC}@{queue_id}@{SCHEDULE_CONSUMER_GROUP}"
            self.sets[QUEUE_GET_NUMS].get_or_create(queue_key).add(1)
            self.sets[QUEUE_GET_SIZE].get_or_create(queue_key).add(size)

    def record_delay_delivery(self, topic: str, queue_id: int, queue_offset: int) -> None:
        """The schedule service delivered a delay-level message to ``queue_offset`` of ``topic``'s ``queue_id``
        (counted, ``enableScheduleMessageStats`` on): RocketMQ 5.3.3's ScheduleMessageService
        ``PutResultProcess.onSuccess`` (broker/src/main/java/org/apache/rocketmq/broker/schedule/
        ScheduleMessageService.java) adds it to ``rocketmq_messages_in_total`` / ``rocketmq_throughput_in_total``
        under the real topic with ``message_type="delay"`` and its bytes, not as a normal message."""
        if not self.replica:
            self._puts.typed((topic, queue_id), queue_offset, "delay")

    def record_fifo_put(self, topic: str, queue_id: int, first: int, count: int = 1) -> None:
        """A send stored ``count`` messages carrying a sharding key (a 5.x message group) from ``first`` of
        ``topic``'s ``queue_id``: RocketMQ 5.3.3's ``BrokerMetricsManager.getMessageType`` labels them ``fifo`` in
        ``rocketmq_messages_in_total`` / ``rocketmq_throughput_in_total``, whatever the topic's order flag (a retry
        or DLQ topic's, which Java's send path does not count there, stay uncounted)."""
        if not self.replica and not is_retry_or_dlq_topic(topic):
            for offset in range(first, first + count):
                self._puts.typed((topic, queue_id), offset, "fifo")

    def record_typed_put(self, topic: str, queue_id: int, queue_offset: int, kind: str) -> None:
        """The broker stored a message labelled ``kind`` at ``queue_offset`` of ``topic``'s ``queue_id`` (a stored
        reply: 5.3.3's ReplyMessageProcessor ``handlePutMessageResult`` labels it with ``getMessageType``), counted so
        in ``rocketmq_messages_in_total`` / ``rocketmq_throughput_in_total``."""
        if not self.replica and not is_retry_or_dlq_topic(topic):
            self._puts.typed((topic, queue_id), queue_offset, kind)

    def record_timer_put(self, topic: str, queue_id: int, queue_offset: int) -> None:
        """The timer delivered (or rolled) a message to ``queue_offset`` of ``topic``'s ``queue_id``: RocketMQ 5.3.3's
        TimerMessageStore ``doPut`` (store/src/main/java/org/apache/rocketmq/store/timer/TimerMessageStore.java)
        counts it in the topic's put items and BROKER_PUT_NUMS, but not in ``rocketmq_messages_in_total`` /
        ``rocketmq_throughput_in_total``: its send counted it there already, under the timer topic."""
        if not self.replica:
            self._puts.typed((topic, queue_id), queue_offset, NOT_INCOMING)

    def record_dlq(self, group: str, topic: str) -> None:
        """One message of ``topic`` moved to a DLQ, labelled ``group`` (``rocketmq_send_to_dlq_messages_total``)."""
        dlq = self.dlq_messages
        before = dlq.get((group, topic))
        if before is None and len(dlq) >= self.series_limit - 1:
            self.dlq_overflow += 1
        else:
            dlq[(group, topic)] = (before or 0) + 1

    def record_batch_put(self, topic: str, queue_id: int, end: int, count: int) -> None:
        """A batch send appended ``count`` messages of ``topic`` to ``queue_id`` in one request, up to queue offset
        ``end``. The store's puts count one "time" per message (:meth:`count_puts`); Java's send path counts one per
        request with the batch's message count and written bytes as the value (broker/src/main/java/org/apache/
        rocketmq/broker/processor/SendMessageProcessor.java ``handlePutMessageResult``: ``incTopicPutNums(topic,
        msgNum, 1)``, ``incTopicPutSize(topic, wroteBytes)``), so avgpt reads messages and bytes per request: the
        extra times are taken back when the batch's messages are counted (never for a batch that never counts)."""
        if self.replica or count <= 1:
            return
        self._puts.batch((topic, queue_id), end, count)

    def record_send_back_put(self, topic: str, queue_id: int, queue_offset: int, to_dlq: bool) -> None:
        """A consumer send-back stored its copy at ``queue_offset`` of ``topic``'s ``queue_id``. 4.9.8's
        ``asyncConsumerSendMsgBack`` (broker/src/main/java/org/apache/rocketmq/broker/processor/
        SendMessageProcessor.java) counts it in TOPIC_PUT_NUMS / TOPIC_PUT_SIZE only when it went to
        ``SCHEDULE_TOPIC_XXXX`` (a retry; a copy ``to_dlq`` in no put item), and never in BROKER_PUT_NUMS. Nor is it
        an incoming message for ``/metrics``: RocketMQ 5.3.3's AbstractSendMessageProcessor ``consumerSendMsgBack``
        (broker/src/main/java/org/apache/rocketmq/broker/processor/AbstractSendMessageProcessor.java) adds nothing to
        ``rocketmq_messages_in_total``; a retry counts there when delivered (:meth:`record_delay_delivery`)."""
        if not self.replica:
            self._puts.own((topic, queue_id), queue_offset, not to_dlq)
            if not to_dlq:
                self._puts.typed((topic, queue_id), queue_offset, NOT_INCOMING)

    def record_uncounted_put(self, topic: str, queue_id: int, queue_offset: int) -> None:
        """The broker stored an entry of its own at ``queue_offset`` of ``topic``'s ``queue_id`` through a path that
        counts in no put item, only in the store totals: a pop's checkpoint or ACK, which RocketMQ 5.3.3's
        PopMessageProcessor ``appendCheckPoint`` and AckMessageProcessor ``appendAck`` store through the EscapeBridge
        (broker/src/main/java/org/apache/rocketmq/broker/failover/EscapeBridge.java, no ``incTopicPutNums``), and a
        committed or renewed transaction message (4.9.8's plain store puts: processors/transaction_bridge.py)."""
        if not self.replica:
            self._puts.own((topic, queue_id), queue_offset, False)

    def record_put_failed(self) -> None:
        """A put the store refused (Java's ``putMessageFailedTimes``)."""
        self.put_failed += 1

    # ---- reading -----------------------------------------------------------------------------------------------

    def item(self, stats_name: str, stats_key: str) -> StatsItem | None:
        """VIEW_BROKER_STATS_DATA's lookup; ``None`` for an unknown statistic or key. A put item not there yet is
        looked for again after counting the store's puts up to now: Java's send path creates a topic's items with
        its first message (broker/src/main/java/org/apache/rocketmq/broker/processor/SendMessageProcessor.java
        ``handlePutMessageResult``), so they exist as soon as the send was answered. An existing item is answered
        as it is (its windows read samples only): counting walks every queue of the store, which a scrape asking
        for each topic's items would pay once per topic."""
        stats = self.sets.get(stats_name)
        if stats is None:
            return None
        item = stats.get(stats_key)
        if item is None and stats_name in _PUT_SETS:
            self.count_puts()
            item = stats.get(stats_key)
        elif item is None and stats_name == BROKER_GET_NUMS:
            self._sync_broker_get()
            item = stats.get(stats_key)
        return item

    def _sync_broker_get(self) -> None:
        """BROKER_GET_NUMS' value: every message got so far (its item created by the first one)."""
        got = self.store_stats.get_transferred
        if self._broker_get is None:
            if not got:
                return
            self._broker_get = self.sets[BROKER_GET_NUMS].get_or_create(self.cluster_name)
        self._broker_get.value = got

    def pull_offset(self, group: str, topic: str, queue_id: int) -> int | None:
        """The next offset after ``group``'s last pull of the queue (RocketMQ 5's ``queryPullOffset`` table), or
        ``None`` before any pull."""
        return self.pull_offsets.get((topic, group), {}).get(queue_id)

    def tps_group_get_nums(self, group: str, topic: str) -> float:
        """Messages per second ``group`` pulled from ``topic`` over the last minute (GET_CONSUME_STATS' consumeTps)."""
        group, topic = self._lmq_names(group, topic)
        item = self.sets[GROUP_GET_NUMS].get(stats_key(topic, group))
        return (item.in_minute() if item is not None else StatsSnapshot()).tps

    def runtime_entries(self) -> dict[str, str]:
        """The GET_BROKER_RUNTIME_INFO keys owned here, in Java's formats: the store rates, the day totals (the
        ``TodayNow`` ones up to now, as 4.9.8's BrokerStats reads the live put and transferred counts), the put
        totals (``putMessageTimesTotal`` reads 1 while nothing was put, as Java's), the put latency distribution and
        the longest pull. ``dispatchMaxBuffer`` is 0 as in 4.9.8, where nothing sets it."""
        self.count_puts()
        entries = self.store_stats.runtime_entries()
        days = self.day_totals
        put_times = max(1, self.put_total)
        entries.update(
            {
                "msgPutTotalYesterdayMorning": str(days["put_yesterday"]),
                "msgPutTotalTodayMorning": str(days["put_today"]),
                "msgPutTotalTodayNow": str(self.put_total),
                "msgGetTotalYesterdayMorning": str(days["get_yesterday"]),
                "msgGetTotalTodayMorning": str(days["get_today"]),
                "msgGetTotalTodayNow": str(self.store_stats.get_transferred),
                "putMessageTimesTotal": str(put_times),
                "putMessageFailedTimes": str(self.put_failed),
                "putMessageSizeTotal": str(self.put_size_total),
                "putMessageAverageSize": java_double(self.put_size_total / put_times),
                "getMessageEntireTimeMax": str(self.get_max_ms),
                "dispatchMaxBuffer": "0",
            }
        )
        entries.update(self.put_latency.runtime_entries())
        return entries

    # ---- deletions ---------------------------------------------------------------------------------------------

    def on_topic_deleted(self, topic: str, *, drop_items: bool = True) -> None:
        """The topic's queues were deleted: its next messages count from zero in the store's view. ``drop_items``
        (the broker's ``autoDeleteUnusedStats``) also forgets its stats items as Java's ``onTopicDeleted``, which
        4.9.8's AdminBrokerProcessor ``deleteTopic`` and DefaultMessageStore ``cleanUnusedTopic`` call only then
        (broker/src/main/java/org/apache/rocketmq/broker/processor/AdminBrokerProcessor.java): without it they stay,
        and the topic's next messages add to them."""
        self.count_puts()  # what was stored before the deletion still counts in the broker's totals
        if drop_items:
            for name in (TOPIC_PUT_NUMS, TOPIC_PUT_SIZE):
                self.sets[name].delete_where(lambda key: key != topic)
            prefix, infix = topic + "@", "@" + topic + "@"
            for name in (GROUP_GET_NUMS, GROUP_GET_SIZE, SNDBCK_PUT_NUMS, *_QUEUE_SETS):
                if name in self.sets:  # QUEUE_* only with enableDetailStat
                    self.sets[name].delete_where(lambda key: not key.startswith(prefix))
            self.sets[GROUP_GET_LATENCY].delete_where(lambda key: infix not in key)
            self._retire_out(lambda pair: pair[0] == topic)
            for key in [k for k in self.fall_behind if k[1] == topic]:
                del self.fall_behind[key]
        self._forget_pull_offsets(lambda pair: pair[0] == topic)
        self.pop_inflight.forget(lambda counted, _: counted != topic)  # clearInFlightMessageNumByTopicName
        # ``incoming``, ``dlq_messages`` and what was counted out (:attr:`out_retired`) stay: RocketMQ 5.3.3 counts
        # them in OpenTelemetry counters (broker/src/main/java/org/apache/rocketmq/broker/metrics/
        # BrokerMetricsManager.java), which nothing resets.
        self._puts.forget(topic)

    def on_group_deleted(self, group: str, *, drop_items: bool = True) -> None:
        """The group was deleted: ``drop_items`` (``autoDeleteUnusedStats``) forgets its stats items as Java's
        ``onGroupDeleted``, which AdminBrokerProcessor ``deleteSubscriptionGroup`` calls only then."""
        if drop_items:
            suffix = "@" + group
            names = (GROUP_GET_NUMS, GROUP_GET_SIZE, SNDBCK_PUT_NUMS, GROUP_GET_LATENCY, QUEUE_GET_NUMS, QUEUE_GET_SIZE)
            for name in names:
                if name in self.sets:  # QUEUE_* only with enableDetailStat
                    self.sets[name].delete_where(lambda key: not key.endswith(suffix))
            self._retire_out(lambda pair: pair[1] == group)
            for key in [k for k in self.fall_behind if k[0] == group]:
                del self.fall_behind[key]
        self._forget_pull_offsets(lambda pair: pair[1] == group)  # ``dlq_messages`` stay (see on_topic_deleted)
        self.pop_inflight.forget(lambda _, counted: counted != group)  # clearInFlightMessageNumByGroupName

    def outgoing(self) -> tuple[dict[OutKey, tuple[int, int]], tuple[int, int]]:
        """``/metrics``' outgoing (messages, bytes) by label set (see :attr:`out_series`), what deleted pairs counted
        included, and the overflow series' (messages, bytes)."""
        series = dict(self.out_retired)
        overflow = self._count_out(series, self.out_overflow_retired, self.group_items, self.pop_out)
        return series, overflow

    def _count_out(
        self,
        series: dict[OutKey, tuple[int, int]],
        overflow: tuple[int, int],
        group_items: dict[tuple[str, str], GroupItems],
        pops: dict[tuple[str, str, bool], tuple[int, int]],
    ) -> tuple[int, int]:
        """Add the pulls (a pair's group items less its pops; retry and DLQ topics left out, as 5.3.3's pull path)
        and the pops to ``series``, those of label sets without a series of their own to ``overflow``, returned."""
        over_count, over_size = overflow
        counted: list[tuple[OutKey, int, int]] = []
        for (topic, group), items in group_items.items():
            if not is_retry_or_dlq_topic(topic):
                popped, popped_size = pops.get((topic, group, False), (0, 0))
                counted.append(((topic, group, None), items.nums.value - popped, items.sizes.value - popped_size))
        counted.extend((key, count, size) for key, (count, size) in pops.items())
        for key, count, size in counted:
            if count <= 0:
                continue
            if self._admit_out(key):
                before = series.get(key, (0, 0))
                series[key] = (before[0] + count, before[1] + size)
            else:
                over_count += count
                over_size += size
        return over_count, over_size

    def _admit_out(self, key: OutKey) -> bool:
        if key in self.out_series:
            return True
        if len(self.out_series) >= self.series_limit - 1:
            return False
        self.out_series.add(key)
        return True

    def _retire_out(self, match: Callable[[tuple[str, str]], bool]) -> None:
        """Drop the matching pairs' group items and pops, keeping what they counted out in :attr:`out_retired`."""
        gone = {pair: self.group_items.pop(pair) for pair in [p for p in self.group_items if match(p)]}
        pops = {key: self.pop_out.pop(key) for key in [k for k in self.pop_out if match(k[:2])]}
        self.out_overflow_retired = self._count_out(self.out_retired, self.out_overflow_retired, gone, pops)

    def _forget_pull_offsets(self, match: Callable[[tuple[str, str]], bool]) -> None:
        """Forget the pull offsets of the matching (topic, group) pairs; one whose pull items stay is emptied in
        place (its :class:`GroupItems` shares the dict)."""
        for pair in [p for p in self.pull_offsets if match(p)]:
            if pair in self.group_items:
                self.pull_offsets[pair].clear()
            else:
                del self.pull_offsets[pair]

    # ---- sampling ----------------------------------------------------------------------------------------------

    def start_counting(self) -> None:
        """Take the store's current contents as the baseline: only messages stored from now on count as puts."""
        self._puts.start()

    def count_puts(self) -> None:
        """Add what the store took since the last call to the put items and totals (sampling calls it every second;
        readers call it first to see puts up to now).

        A slave's replicated messages count in the store totals only (``msgPutTotalTodayNow``, ``putTps``...), as
        4.9.8's ``ReputMessageService`` on a SLAVE (store/src/main/java/org/apache/rocketmq/store/
        DefaultMessageStore.java); the TOPIC_PUT_* and BROKER_PUT_NUMS items are fed by the send path alone
        (SendMessageProcessor ``handlePutMessageResult``), which a slave never runs."""
        collected = self._puts.collect()
        if not collected:
            return
        replica = self.replica
        nums, sizes, incoming = self.sets[TOPIC_PUT_NUMS], self.sets[TOPIC_PUT_SIZE], self.incoming
        taken, typed_taken = self._puts.taken, self._puts.typed_taken
        added = added_bytes = sent = 0
        for topic, (count, size, times) in collected.items():
            added += count
            added_bytes += size
            if replica or topic in _UNCOUNTED_PUT_TOPICS:
                continue
            own = taken.get(topic) if taken else None
            if own is None:
                sent += count
            else:  # the broker's send-backs (record_send_back_put)
                sent += count - own[3]
                count, size, times = count - own[0], max(0, size - own[1]), times - own[2]
            if count <= 0:
                continue
            nums.get_or_create(topic).add(count, times)
            sizes.get_or_create(topic).add(size, times)
            typed = typed_taken.get(topic) if typed_taken else None
            if typed is not None:
                count, size = self._count_typed(topic, typed, count, size)
                if count <= 0:
                    continue
            if not is_retry_or_dlq_topic(topic):  # 5.3.3's send path counts none
                self._count_incoming(incoming, topic, count, size)
        queue_puts = self._puts.queue_puts
        if queue_puts and not replica:
            queue_nums, queue_sizes = self.sets[QUEUE_PUT_NUMS], self.sets[QUEUE_PUT_SIZE]
            for (topic, queue_id), (count, size, times) in queue_puts.items():
                key = f"{topic}@{queue_id}"
                queue_nums.get_or_create(key).add(count, times)
                queue_sizes.get_or_create(key).add(size, times)
        if sent > 0:
            if self._broker_put is None:
                self._broker_put = self.sets[BROKER_PUT_NUMS].get_or_create(self.cluster_name)
            self._broker_put.add(sent, 0)  # incBrokerPutNums adds to the value only: its avgpt stays 0
        self.put_total += added
        self.put_size_total += added_bytes
        self.store_stats.put_total = self.put_total

    def _count_typed(self, topic: str, typed: dict[str, tuple[int, int]], count: int, size: int) -> tuple[int, int]:
        """Add ``topic``'s typed puts to :attr:`incoming_typed`; the messages and bytes of ``count`` and ``size``
        left for :attr:`incoming`."""
        for kind, (kind_count, kind_size) in typed.items():
            if kind != NOT_INCOMING:
                self._count_incoming(self.incoming_typed, (topic, kind), kind_count, kind_size)
            count -= kind_count
            size -= kind_size
        return count, max(0, size)

    def _count_incoming(self, table: dict[Any, tuple[int, int]], key: Any, count: int, size: int) -> None:
        """Add to ``table[key]`` (:attr:`incoming` or :attr:`incoming_typed`), to :attr:`incoming_overflow` instead
        when the key is new and the two hold :attr:`series_limit` - 1 label sets already."""
        before = table.get(key)
        if before is None and len(self.incoming) + len(self.incoming_typed) >= self.series_limit - 1:
            before = self.incoming_overflow
            self.incoming_overflow = (before[0] + count, before[1] + size)
        else:
            before_count, before_size = before or (0, 0)
            table[key] = (before_count + count, before_size + size)

    def set_replica(self, replica: bool) -> None:
        """The broker became a slave (``replica``) or a master: what the store took until now counts under the
        previous role, what it takes from now on under the new one. The batches not counted yet are forgotten: a
        DLedger leader that lost its term failed their sends, which 4.9.8's ``handlePutMessageResult`` counts no call
        for, and their entries either commit as a slave's (no put items) or are truncated, their offsets taken by
        other sends (dledger/commitlog_store.py's role change)."""
        self.count_puts()
        if replica != self.replica:
            self._puts.forget_batches()
        self.replica = replica

    def sample_second(self, tick: int, now_ms: int) -> None:
        """One sampling round; ``tick`` counts seconds since :meth:`run` started (0 first)."""
        self.count_puts()
        self._sync_broker_get()  # for the item's windows, sampled below
        self.store_stats.sample(now_ms)
        if tick and tick % _SECONDS_PER_LATENCY_WINDOW == 0:
            self.put_latency.roll_window()
        if tick % _SECONDS_PER_ITEM_SAMPLE == 0:
            for stats in self.sets.values():
                for item in stats:
                    item.sample_seconds(now_ms)
        if tick % _SECONDS_PER_HOUR_SAMPLE == 0:
            for stats in self.sets.values():
                for item in stats:
                    item.sample_minutes(now_ms)
        if tick % _SECONDS_PER_DAY_SAMPLE == 0:
            for stats in self.sets.values():
                for item in stats:
                    item.sample_hour(now_ms)
        self._roll_day()

    def _roll_day(self) -> None:
        local = time.localtime(self.wall_clock())
        day = (local.tm_year, local.tm_yday)
        if self._day is not None and day != self._day:
            days = self.day_totals
            days["put_yesterday"], days["put_today"] = days["put_today"], self.put_total
            days["get_yesterday"], days["get_today"] = days["get_today"], self.store_stats.get_transferred
        self._day = day

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        """Sample once a second from now until cancelled (see the module docstring)."""
        self.start_counting()
        task_status.started()
        start = trio.current_time()
        tick = 0
        while True:
            self.sample_second(tick, int(trio.current_time() * 1000))
            tick += 1
            await trio.sleep_until(start + tick)
