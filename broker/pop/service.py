"""``PopService``: pop, ack and change of invisibility for one broker (RocketMQ 5's PopMessageProcessor,
AckMessageProcessor and ChangeInvisibleTimeProcessor, broker/src/main/java/org/apache/rocketmq/broker/processor/).

Ownership: the broker builds one and runs :meth:`PopService.run` (the revive loop of :mod:`broker.pop.revive`); the
gRPC front door calls :meth:`pop`, :meth:`ack`, :meth:`change_invisible` and :meth:`wait_arrival` on the Trio thread.
It registers :meth:`forget_queue` with the store's queue-drop listeners.

Durability (docs/grpc.md#pop-consumption):

* **Normal pops** move the group's consumer offset past what they hand out (the offset table 4.x pulls share) and
  write one checkpoint (CK) per message into the revive topic ``rmq_sys_REVIVE_LOG_<cluster>`` as a **timer message**
  due when its invisibility ends: the timer wheel (``broker/timer/``) keeps it on disk across restarts and delivers it
  into the revive queue at that time. An ack writes an ACK record into the revive queue at once; a change of
  invisibility writes a new CK and acks the old one. The revive loop pairs them: a CK with no ACK before it is
  redelivered through the V1 retry topic ``%RETRY%<group>_<topic>`` with ``reconsumeTimes + 1``, however many
  attempts it had (RocketMQ's PopReviveService writes no DLQ).
* **Orderly (FIFO) pops** keep the consumer offset at the first unacknowledged message and hand out nothing more from
  that queue while a popped message is invisible; after the invisible time the same messages come again with the attempt
  raised, however many (RocketMQ's order info counts them likewise). A pop repeating the attempt id of the delivery in
  flight (a client that lost its answer) gets that delivery again, at the same attempts, and replaces it: what of it
  the retry did not take again is no longer in flight. Acks advance the offset and wake a receive of the group
  waiting on the topic once the queue is free (RocketMQ's AckMessageProcessor.ackOrderly), and so does the end of the
  batch's invisible time (one receive, by :meth:`PopService.run_lock_timer`, which the revive loop runs). That state
  (the pop time and its attempt id, invisible times, attempt counts) is saved after each change to
  ``config/popFifoState.json`` (:mod:`broker.pop.fifo_state`) and read back at start. It only speaks of the queue's own
  messages: a destroyed ConsumeQueue (topic deleted, messages expired) takes its state along, a topic gone at start
  drops its state, a state whose offsets the queue holds at other CommitLog offsets (the topic created again meanwhile)
  is dropped at the next pop or ack, and so are offsets past the queue's end or below its start; a message still in
  flight keeps its queue blocked though retention removed it.
* **Dead letters**: :meth:`PopService.dead_letter` is what the gRPC receive calls for a message whose attempts are
  used up (RocketMQ's proxy forwards it from ConsumerProcessor.popMessage): the broker's send-back with delay level
  -1 (:mod:`processors.send_back`), so its checks and its DLQ copy are the ForwardMessageToDeadLetterQueue RPC's.
* **A group without an offset** starts where PopMessageProcessor.getInitOffset does and commits that start.
* **Tags** are matched on the consume queue's tags codes, then on the tag itself, since codes collide (Java's "Aa"
  and "BB"; RocketMQ's proxy re-checks it in PopMessageResultFilterImpl): what either skips counts as consumed, and
  the pop reads on past what the tag check dropped.

Errors: the append path's ``PutRefusedError`` (disk full, store shutting down) propagates to the caller.
"""

from __future__ import annotations

import bisect
import contextlib
import enum
import functools
import heapq
import itertools
import logging
import math
from collections import deque
from collections.abc import Callable, Iterable, Iterator
from typing import Final, TypeVar

import attrs
import orjson
import trio

from broker.context import BrokerState, config_dir_of
from broker.persistence import ConfigPersister
from broker.pop.fifo_state import UNKNOWN_POP_TIME, FifoQueue, FifoTable, fifo_state_file
from broker.pop.receipt import (
    FIFO_REVIVE_QID,
    TOPIC_TYPE_NORMAL,
    TOPIC_TYPE_RETRY,
    ReceiptHandle,
)
from broker.schedule import PROPERTY_REAL_QID, PROPERTY_REAL_TOPIC
from broker.stats.pop_revive import ACK as REVIVE_ACK
from broker.stats.pop_revive import CK as REVIVE_CK
from broker.timer.timer_store import PROPERTY_TIMER_DELIVER_MS
from processors.common import RequestRejected
from processors.filter import Sql92Filter
from processors.pull import SQL92_EVALUATION_BUDGET, build_subscription
from processors.send_back import PROPERTY_RETRY_TOPIC, ConsumerSendMsgBackProcessor, dead_letter_header
from remoting.codec.bodies.heartbeat import EXPRESSION_TAG, SUB_ALL
from remoting.codec.codes import ResponseCode
from remoting.codec.message import MessageExt, MessageRecord, decode_record
from remoting.codec.message_properties import encode_properties, java_string_hash
from remoting.codec.record_copy import record_from_stored
from remoting.codec.topics import RETRY_GROUP_TOPIC_PREFIX, pop_retry_topic
from store.errors import PutRefusedError
from store.get_message import PropertyFilter, TagFilter
from store.metadata_files import PERM_READ
from store.results import AppendResult, PutStatus

__all__ = ["AckOutcome", "PopService", "Popped", "revive_topic"]

log = logging.getLogger(__name__)

_T = TypeVar("_T")

#: Most messages one pop hands out (RocketMQ's PopMessageProcessor limit).
MAX_POP_NUMS: Final = 32
#: Tags of the revive topic's records (common/src/main/java/org/apache/rocketmq/common/PopAckConstants.java).
CK_TAG: Final = "ck"
ACK_TAG: Final = "ack"
#: Ours: a CK is due this long after the handle expires, so an ack accepted just before expiry is always in the revive
#: queue ahead of its CK (the timer wheel delivers on slot boundaries).
CK_GRACE_MS: Final = 500
#: PopAckConstants.ackTimeInterval: 5.3.3 writes a CK due this long before its handle expires, which the timer's
#: ``timerMaxDelaySec`` bounds (:meth:`PopService._ck_deliver_ms`); the revive loop holds a CK until the revive queue
#: is this + 1 s past its handle's expiry (:mod:`broker.pop.revive`).
ACK_TIME_INTERVAL_MS: Final = 1000
#: Turn counters (:meth:`PopService.pop`) kept before the first sweep of those of gone groups and topics, and most
#: kept after a sweep (ours; RocketMQ's PopLongPollingService bounds its maps at popPollingMapSize, 100000).
_TURNS_SWEEP_MIN: Final = 1024
_TURNS_MAX: Final = 100_000
#: Reads of one queue in one pop while the tag check drops messages (ours: a bound on the work of one pop over a run
#: of colliding tags; past it the pop hands out what it found).
_TAG_CHECK_READS: Final = 32
#: ConsumeInitMode (common/src/main/java/org/apache/rocketmq/common/constant/ConsumeInitMode.java): where a group
#: without an offset starts a queue, its first entry or (the gRPC receive's) its last.
CONSUME_INIT_MIN: Final = 0
CONSUME_INIT_MAX: Final = 1
#: The pop time of a message's first checkpoint, on its retry copies (common/.../message/MessageConst.java).
PROPERTY_FIRST_POP_TIME: Final = "1ST_POP_TIME"
#: Left out of a retry copy (a dead letter is the send-back's copy: :meth:`PopService.dead_letter`).
_COPY_DROPS: Final = frozenset({PROPERTY_REAL_TOPIC, PROPERTY_REAL_QID})
#: How long ChangeInvisibleTimeProcessor.processRequest waits for its CK and ACK puts before answering SYSTEM_ERROR
#: (``responseFuture.get(3000, MILLISECONDS)``, ``appendCkAsync`` and ``appendAckAsync`` being false).
CHANGE_WAIT_S: Final = 3.0
#: How often a pop's CK that was not stored is put again (5.3.3's PopBufferMergeService.scan puts a just-offset CK
#: again at each scan, every ``popCkStayBufferTimeOut``-bounded 5 ms; ours: a second, each put waiting for its own
#: outcome, up to ``maxWaitAckTimeMs`` in DLedger mode).
CK_RETRY_S: Final = 1.0
#: How long (seconds, on Trio's clock) a queue's held moves outlive its last pop before they are dropped, uncommitted
#: (5.3.3's PopBufferMergeService.scanGarbage drops an offset queue whose last CK's pop time is older than
#: ``minute5``): a CK whose put never ends would otherwise keep the queue's offset where it is for good.
HOLD_STALE_S: Final = 5 * 60.0
#: The put statuses 5.3.3's pop processors take for a stored ACK or CK (AckMessageProcessor.handlePutMessageResult,
#: ChangeInvisibleTimeProcessor.appendCheckPointThenAckOrigin, PopBufferMergeService.handleCkMessagePutResult).
STORED: Final = frozenset(
    {PutStatus.PUT_OK, PutStatus.FLUSH_DISK_TIMEOUT, PutStatus.FLUSH_SLAVE_TIMEOUT, PutStatus.SLAVE_NOT_AVAILABLE}
)


def revive_topic(cluster: str) -> str:
    return f"rmq_sys_REVIVE_LOG_{cluster}"


class AckOutcome(enum.Enum):
    OK = "OK"
    #: nothing done: the FIFO message was acknowledged already, or the handle is of its earlier delivery (RocketMQ's
    #: ackOrderly answers both SUCCESS)
    STALE = "STALE"
    EXPIRED = "EXPIRED"  # the handle's invisible time has passed: the message is (or will be) redelivered
    NOT_FOUND = "NOT_FOUND"  # the handle names no queue or offset of this broker


@attrs.frozen(slots=True)
class _Filter:
    """What one pop takes: a tag of ``tags`` (``None``: any) and what ``properties`` (SQL92) passes. The store skips
    on tags codes (``codes``); :meth:`keeps` checks the tag itself on what it read."""

    tags: frozenset[str] | None
    properties: PropertyFilter | None
    codes: TagFilter | None = attrs.field(init=False)
    #: How many candidates one read shows ``properties``: a compiled SQL92 filter's share of the pull path's
    #: evaluation budget (:data:`processors.pull.SQL92_EVALUATION_BUDGET`), so one read of a heavy filter costs the
    #: event loop a bounded time; ``None`` (any filter else): no bound.
    max_filtered: int | None = attrs.field(init=False)
    #: What one evaluation of ``properties`` costs (a compiled SQL92 filter's cost, else 1).
    cost: int = attrs.field(init=False)

    @codes.default
    def _codes(self) -> TagFilter | None:
        return None if self.tags is None else frozenset(map(java_string_hash, self.tags)).__contains__

    @max_filtered.default
    def _max_filtered(self) -> int | None:
        owner = getattr(self.properties, "__self__", None)  # Sql92Filter.matches_raw, as the receive path passes it
        return max(1, SQL92_EVALUATION_BUDGET // owner.cost) if isinstance(owner, Sql92Filter) else None

    @cost.default
    def _cost(self) -> int:
        owner = getattr(self.properties, "__self__", None)
        return owner.cost if isinstance(owner, Sql92Filter) else 1

    def keeps(self, msg: MessageExt) -> bool:
        return self.tags is None or msg.tags in self.tags

    def check(self, arrival: tuple[int, str], left: int) -> tuple[bool, int]:
        """Whether an arriving message (its tags code and raw properties) may be one this filter takes (what the
        store's read checks; a colliding tags code passes, as Java's isMatchedByConsumeQueue passes it), and what is
        left of the arrival's evaluation budget ``left`` after: an SQL92 check costing more than is left is skipped
        and passes, a spurious wake-up (the receive pops, finds nothing and waits again)."""
        if self.codes is not None and not self.codes(arrival[0]):
            return False, left
        if self.properties is None or self.cost > left:
            return True, left
        return self.properties(memoryview(arrival[1].encode())), left - self.cost


#: A receive's filter as :class:`PopService` files its wait: its tags and its SQL92 filter.
_FilterKey = tuple[frozenset[str] | None, PropertyFilter | None]
#: where a receive waits on a topic: the queue it pops (-1: all) and whether it is a NOTIFICATION (which waits and
#: is counted apart from the pops: NotificationProcessor has a PopLongPollingService of its own)
_Slot = tuple[int, bool]


@attrs.frozen(slots=True)
class Popped:
    """One handed-out message: the stored message, its handle and its delivery attempt (1 for the first)."""

    message: MessageExt
    handle: ReceiptHandle
    attempt: int


@attrs.define(eq=False)
class _HeldMove:
    """A pop's move of its queue's offset to ``next_offset``, committed once it and every earlier move of the queue are
    stored: 5.3.3's PopCheckPointWrapper of ``addCkJustOffset`` (``ckStored``) or, with nothing to store (the read
    found nothing the filter took), of ``addCkMock``. ``end``: the CommitLog end of its CK's put in flight, -1 when
    that put failed and the CK is to be put again. ``popped_at``: when the pop was (Trio's clock). ``put``: the
    outcome of its CK's latest put (:meth:`PopService._watch`)."""

    key: tuple[str, str, int]
    next_offset: int
    ck: MessageRecord | None
    popped_at: float
    end: int = -1
    stored: bool = False
    put: _CkPut | None = None


@attrs.define(eq=False)
class _CkPut:
    """The outcome of one put of a held move's CK, once the store knows it (``done``)."""

    end: int
    status: PutStatus = PutStatus.UNKNOWN_ERROR
    done: trio.Event = attrs.Factory(trio.Event)


class PopService:
    """Pop bookkeeping of one broker; see the module docstring. ``timer_rewrite`` is the timer service's send seam
    (``TimerMessageService.rewrite``), which parks a CK until it is due."""

    def __init__(self, broker: BrokerState, timer_rewrite: Callable[[MessageRecord], MessageRecord]) -> None:
        self.broker = broker
        self._timer_rewrite = timer_rewrite
        self.fifo_persister = ConfigPersister(fifo_state_file(config_dir_of(broker.config)), self._fifo_snapshot)
        # Order info of a topic or group deleted meanwhile is dropped (:meth:`_fifo_live`).
        loaded = self.fifo_persister.load() or {}
        self._fifo: FifoTable = {key: state for key, state in loaded.items() if self._fifo_live(key, state)}
        broker.store.queue_drop_listeners.append(self.forget_queue)
        #: pops of each (group, topic) so far (where the next starts); swept when it reaches ``_turns_sweep_at``
        self._turns: dict[tuple[str, str], int] = {}
        #: Whether the last :meth:`pop` moved a queue's offset on and left entries of it unread (RocketMQ's
        #: ``restNum > 0``): a receive that got nothing then pops again at once rather than waiting for an arrival.
        #: An orderly pop sets it only for a queue it moved on (one in flight is not read, so never moved on).
        self.read_on = False
        #: Where the last orderly :meth:`pop`'s read of each queue it handed messages out of ended (the read's
        #: ``nextBeginOffset``, past what its filter skipped): the queue's ``restNum`` share is what lies past it.
        self.read_ends: dict[int, int] = {}
        #: Whether the last :meth:`pop` read the group's pop retry topic (first, or after the topic left it short):
        #: its queues count in ``restNum`` then, as popMsgFromQueue adds every queue it visits.
        self.retry_read = False
        self._turns_sweep_at = _TURNS_SWEEP_MIN
        #: receives waiting for an arrival, by topic, then group, then slot (:data:`_Slot`), then filter
        #: (:attr:`_Poll.key`), in the order they are due (:attr:`_Poll.order`; an entry goes with the last);
        #: ``_poll_seq`` numbers them in the order they came
        self._arrivals: dict[str, dict[str, dict[_Slot, dict[_FilterKey, list[_Poll]]]]] = {}
        self._poll_seq = itertools.count()
        #: receives parked for long polling by (notification, group, topic, queue id), and in all by kind (:meth:`park`)
        self._parked: dict[tuple[bool, str, str, int], int] = {}
        self._parked_total = {False: 0, True: 0}
        #: when each FIFO queue with a batch in flight is free again (store ms), and a heap of those times (entries a
        #: later change replaced stay until due): ConsumerOrderInfoLockManager's timers, run by :meth:`run_lock_timer`
        self._lock_free: dict[tuple[str, str, int], int] = {}
        self._lock_heap: list[tuple[int, tuple[str, str, int]]] = []
        self._lock_timer_moved = trio.Event()
        for key, state in self._fifo.items():  # ConsumerOrderInfoLockManager.recover
            self._schedule_lock_free(key, state)
        self._send_back = ConsumerSendMsgBackProcessor(broker)
        #: Called (then dropped) when the first receive waits: the broker chains :meth:`notify_arrival` into the
        #: store's arrival listener then, so appends pay nothing for pops while none waits.
        self.arrival_hook: Callable[[], None] | None = None
        #: Where :meth:`writes` collects the CommitLog end of each ACK and CK record written (``None``: nowhere).
        self._writes: list[int] | None = None
        #: Offset moves of pops whose CKs are not stored yet, in order, by (group, topic, queue id), and those with a
        #: put in flight by its CommitLog end (only when the store waits for puts: DLedger mode, SYNC_FLUSH,
        #: SYNC_MASTER); 5.3.3's PopBufferMergeService ``commitOffsets``.
        self._held: dict[tuple[str, str, int], deque[_HeldMove]] = {}
        self._held_puts: dict[int, _HeldMove] = {}
        #: popped messages neither acked nor revived (5.3.3's PopInflightMessageCounter), for the pop lag
        self.inflight = broker.stats.pop_inflight
        self.inflight.attach(self._pop_offset, self.now_ms())

    @property
    def revive_topic(self) -> str:
        return revive_topic(self.broker.config.broker_cluster_name)

    def now_ms(self) -> int:
        return self.broker.store.config.now_ms()

    def max_attempts(self, group: str) -> int:
        """Deliveries before the DLQ: the group's ``retryMaxTimes`` + 1 (17 by default)."""
        config = self.broker.groups.get(group)
        return (16 if config is None else config.retry_max_times) + 1

    # ---- long polling ---------------------------------------------------------------------------------------

    def waiting(self, topic: str, queue_id: int) -> bool:
        """Whether a pop waits for messages of ``topic`` (the store's arrival interest, with the hold service's)."""
        return topic in self._arrivals

    def notify_arrival(self, topic: str, queue_id: int, offset: int, tags_code: int, properties: str = "") -> None:
        """The store's arrival listener (chained by the broker): wake one pop of each group waiting on ``topic``
        whose filter the message matches; every ``popLongPollingForceNotifyInterval``-th message of a queue (800 by
        default, 0 or less: none) wakes one whatever its filter, as PopLongPollingService.notifyMessageArriving
        forces one when the queue offset + 1 it is handed is a multiple of it (broker/src/main/java/org/apache/
        rocketmq/broker/longpolling/PopLongPollingService.java). Never raises."""
        interval = self.broker.config.pop_long_polling_force_notify_interval
        force = interval > 0 and (offset + 1) % interval == 0
        self._wake(topic, queue_id, None if force else (tags_code, properties))

    def _wake(self, topic: str, queue_id: int, arrival: tuple[int, str] | None) -> None:
        """For each group waiting on ``topic``, wake a pop of queue -1 (the proxy's receives and the remoting pops of
        all queues) and one of ``queue_id``, and so a NOTIFICATION of each (:meth:`_wake_slot`), as
        PopLongPollingService.notifyMessageArriving wakes, for each group polling the topic, one request of its
        topic@group@-1 key and one of the arrival's queue, and NotificationProcessor's own polling service does so
        for the notifications. Each slot's pick: :meth:`_wake_slot`."""
        groups = self._arrivals.get(topic)
        if groups is None:
            return
        left = SQL92_EVALUATION_BUDGET
        queues = (-1,) if queue_id < 0 else (-1, queue_id)
        for name in list(groups):
            for slot in itertools.product(queues, (False, True)):
                left = self._wake_slot(topic, name, slot, arrival, left)[1]

    def _wake_slot(
        self, topic: str, group: str, slot: _Slot, arrival: tuple[int, str] | None, left: int = SQL92_EVALUATION_BUDGET
    ) -> tuple[bool, int]:
        """Wake the receive of ``group`` in ``slot`` due first on ``topic`` among those whose filter
        matches ``arrival`` (the message's tags code and properties; ``None``: no message, an ack or a freed FIFO
        queue, which any receive takes), and take it off its topics at once, so the next arrival wakes the next one;
        whether one was woken, and the SQL92 budget ``left``. PopLongPollingService.notifyMessageArriving polls one
        request off its key's queue, and puts a request whose filter does not match the message back unwoken
        (messageFilter.isMatchedByConsumeQueue on the tags code, then isMatchedByCommitLog on the properties; broker/
        src/main/java/org/apache/rocketmq/broker/longpolling/PopLongPollingService.java). Java checks the filter of
        the key's first request only, once per arrival; ours checks that of the receive due first of each filter the
        slot's receives use, once each (one filter, unless its clients subscribe inconsistently), and wakes the one
        due first of those that match: not the filter of every parked receive, which cost N evaluations per arrival
        inside the store's append with N parked. Due first is PopRequest.COMPARATOR's order, which the key's
        ConcurrentSkipListSet keeps: the end of its polling window (``bornTime + pollTime``), then the first come. Not
        every receive on the topic: with N parked, one
        message cost N reads, N - 1 of them empty; nor one the message does not match: it read the store for
        nothing. One arrival's SQL92 checks spend at most the pull path's evaluation budget
        (:data:`processors.pull.SQL92_EVALUATION_BUDGET`; Java checks on its reput thread, ours inside the append, on
        the loop every client shares): a receive past it is woken unchecked, pops, finds nothing and waits again.
        NOTIFICATIONs go the other way, due last first: NotificationProcessor builds its PopLongPollingService with
        ``notifyLast``, which wakes the request due last (``pollLast``)."""
        by_filter = self._arrivals.get(topic, {}).get(group, {}).get(slot)
        poll: _Poll | None = None
        gone: list[_Poll] = []
        due_last = slot[1]
        for waiters in (by_filter or {}).values():
            first = _first_alive(reversed(waiters) if due_last else waiters, gone)
            if first is None or (poll is not None and (first.order <= poll.order) == due_last):
                continue
            matched = True
            if arrival is not None:
                matched, left = first.filter.check(arrival, left)
            if matched:
                poll = first
        for ended in gone:  # their clients left: ended now, their polling slots freed
            self._unfile(ended)
            ended.event.set()
        if poll is None:
            return False, left
        self._unfile(poll)
        poll.woken_on, poll.woken_by = (topic, slot), arrival
        poll.event.set()
        return True, left

    def _unfile(self, poll: _Poll) -> None:
        for topic, slot in poll.filed:
            groups = self._arrivals.get(topic)
            by_slot = None if groups is None else groups.get(poll.group)
            by_filter = None if by_slot is None else by_slot.get(slot)
            waiters = None if by_filter is None else by_filter.get(poll.key)
            if groups is None or by_slot is None or by_filter is None or waiters is None:
                continue
            _drop(waiters, poll)
            if not waiters:
                del by_filter[poll.key]
                if not by_filter:
                    del by_slot[slot]
                    if not by_slot:
                        del groups[poll.group]
                        if not groups:
                            del self._arrivals[topic]

    async def wait_arrival(
        self,
        topics: list[str],
        timeout: float,
        group: str = "",
        tags: frozenset[str] | None = None,
        property_filter: PropertyFilter | None = None,
        *,
        queue_id: int = -1,
        notification: bool = False,
        alive: Callable[[], bool] = lambda: True,
    ) -> None:
        """Return when an arrival on one of ``topics`` that the receive's filter (``tags`` and ``property_filter``, as
        :meth:`pop` takes them) matches wakes this receive of ``group`` (:meth:`_wake`: per group and arrival, one
        receive of queue -1 and one of the arrival's queue; ``queue_id`` is the queue of ``topics[0]`` it pops, the
        other topics, the retry topic, it reads whole; a ``notification`` waits apart from the pops) or after
        ``timeout`` seconds; a receive cancelled once a wake chose it (before or after the wake) raises Cancelled and
        the wake goes to the next receive of its slot; so it does while ``alive()`` says its client left, and the
        receive returns unwoken (PopLongPollingService.pollRemotingCommands passes over a request whose channel is no
        longer active). The last waiter of a topic to leave drops its entries, so topics waited on once are not kept
        for good (RocketMQ's PopLongPollingService removes a topic's polling queue once it is empty and cleans those of
        topics that are gone)."""
        if self.arrival_hook is not None:
            hook, self.arrival_hook = self.arrival_hook, None
            hook()
        filed: dict[str, _Slot] = {}
        for i, topic in enumerate(topics):
            filed.setdefault(topic, (max(queue_id, -1) if i == 0 else -1, notification))
        due = self.now_ms() + round(min(timeout, 1e12) * 1000)  # its bornTime + pollTime (PopRequest's expired)
        poll = _Poll(group, tuple(filed.items()), _Filter(tags, property_filter), next(self._poll_seq), due, alive)
        for topic, slot in poll.filed:
            by_slot = self._arrivals.setdefault(topic, {}).setdefault(group, {})
            bisect.insort(by_slot.setdefault(slot, {}).setdefault(poll.key, []), poll, key=_order)
        try:
            with trio.move_on_after(timeout):
                await poll.event.wait()
            if poll.woken_on is not None and trio.current_effective_deadline() == -math.inf:
                # Woken, but cancelled (its client gone) before it ran: it would pop for a caller that never sees
                # the messages. PopLongPollingService.wakeUp runs no request whose channel is no longer active.
                await trio.lowlevel.checkpoint()  # raises Cancelled
        except BaseException:
            # Cancelled (its client gone) after a wake chose it: the wake goes to the group's next receive, as
            # PopLongPollingService.pollRemotingCommands skips a request whose channel is no longer active
            # (broker/src/main/java/org/apache/rocketmq/broker/longpolling/PopLongPollingService.java).
            if poll.woken_on is not None:
                topic, slot = poll.woken_on
                self._wake_slot(topic, group, slot, poll.woken_by)
            raise
        finally:
            self._unfile(poll)

    def park(self, group: str, topic: str, queue_id: int = -1, *, notification: bool = False) -> bool:
        """Count one receive of ``group`` on ``topic`` (queue ``queue_id``, -1: all) parked for long polling
        (:meth:`unpark` when it leaves); False, nothing counted, when full: ``maxPopPollingSize`` parked in all, or
        more than ``popPollingSize`` on the key, as PopLongPollingService.polling answers POLLING_FULL
        (broker/src/main/java/org/apache/rocketmq/broker/longpolling/PopLongPollingService.java; its key is topic,
        group and queue id; the proxy's receives pop queue -1). NOTIFICATIONs are counted apart from the pops, in
        NotificationProcessor's own PopLongPollingService."""
        config, key = self.broker.config, (notification, group, topic, max(queue_id, -1))
        parked = self._parked.get(key, 0)
        if self._parked_total[notification] >= config.max_pop_polling_size or parked > config.pop_polling_size:
            return False
        self._parked[key] = parked + 1
        self._parked_total[notification] += 1
        return True

    def unpark(self, group: str, topic: str, queue_id: int = -1, *, notification: bool = False) -> None:
        key = (notification, group, topic, max(queue_id, -1))
        left = self._parked[key] - 1
        if left:
            self._parked[key] = left
        else:
            del self._parked[key]
        self._parked_total[notification] -= 1

    def parked(self, group: str, topic: str, queue_id: int = -1) -> int:
        """Pops parked on the key (POLLING_INFO's ``pollingNum``: PollingInfoProcessor reads PopMessageProcessor's
        polling service, not NotificationProcessor's)."""
        return self._parked.get((False, group, topic, max(queue_id, -1)), 0)

    def peek(self, group: str, topic: str, queue_id: int, max_nums: int) -> tuple[list[memoryview | bytes], int]:
        """PEEK_MESSAGE (5.3.3's PeekMessageProcessor.peekMsgFromQueue): up to ``max_nums`` stored records of
        ``topic`` (``queue_id`` ≥ 0: that queue) then of the group's pop retry topic, each queue read from the group's
        offset (without one, the queue's start); no checkpoint, nothing committed. Also the entries left past the
        offsets of every queue visited (``restNum``)."""
        store = self.broker.store
        records: list[memoryview | bytes] = []
        rest = 0
        for source, only in ((topic, queue_id), (pop_retry_topic(group, topic), -1)):
            config = self.broker.topics.get(source)
            count = 0 if config is None else config.read_queue_nums
            for qid in [only] if only >= 0 else range(count):
                left = self.rest_of(group, source, qid)
                rest += left
                if len(records) < max_nums and left:
                    offset = store.max_offset_in_queue(source, qid) - left
                    records += store.get(source, qid, offset, max_nums - len(records)).messages
        return records, rest

    def fifo_blocked(self, group: str, topic: str, qid: int) -> bool:
        """Whether an orderly queue of ``group`` has a message in flight."""
        state = self._fifo.get((group, topic, qid))
        return state is not None and _fifo_blocked(state, self.now_ms())

    def rest_of(self, group: str, topic: str, qid: int) -> int:
        """The entries of the queue past ``group``'s offset (without one, all it holds): ``restNum``'s share of it."""
        store = self.broker.store
        offset = max(self._pop_offset(group, topic, qid), store.min_offset_in_queue(topic, qid))
        return max(store.max_offset_in_queue(topic, qid) - offset, 0)

    def _schedule_lock_free(self, key: tuple[str, str, int], state: FifoQueue) -> None:
        """Set the queue's timer to when its batch in flight is visible again (none while nothing is in flight), as
        ConsumerOrderInfoManager's update, commitAndNext and updateNextVisibleTime call ConsumerOrderInfoLockManager
        .updateLockFreeTimestamp (broker/src/main/java/org/apache/rocketmq/broker/offset/
        ConsumerOrderInfoLockManager.java)."""
        now = self.now_ms()
        free_at = max((until for until in state.invisible_until.values() if until > now), default=None)
        if free_at is None:
            self._lock_free.pop(key, None)
            return
        if self._lock_free.get(key) == free_at:
            return
        heap = self._lock_heap
        if not heap or free_at < heap[0][0]:
            self._lock_timer_moved.set()
        self._lock_free[key] = free_at
        heapq.heappush(heap, (free_at, key))
        if len(heap) > 2 * len(self._lock_free) + 64:  # mostly replaced entries: keep what is still due
            self._lock_heap = [(at, k) for k, at in self._lock_free.items()]
            heapq.heapify(self._lock_heap)

    def _lock_freed(self, group: str, topic: str, qid: int) -> None:
        """A FIFO queue of ``group`` is free (its batch acked, or visible again): wake one pop of the group waiting
        on ``topic`` if the queue holds messages past the group's offset, of queue -1, else of ``qid``, and a
        NOTIFICATION of each, as ConsumerOrderInfoLockManager.notifyLockIsFree calls PopMessageProcessor
        .notifyLongPollingRequestIfNeed, which wakes one request of the group's queue -1 key, else one of the queue's,
        then NotificationProcessor.notifyMessageArriving (broker/src/main/java/org/apache/rocketmq/broker/processor/
        PopMessageProcessor.java). One pop, not every one of the group: the others would read the store for nothing."""
        state = self._fifo.get((group, topic, qid))
        if state is None or _fifo_blocked(state, self.now_ms()):
            return
        if self.broker.store.max_offset_in_queue(topic, qid) > self.broker.offsets.query(group, topic, qid):
            if not self._wake_slot(topic, group, (-1, False), None)[0]:
                self._wake_slot(topic, group, (qid, False), None)
            for slot in ((-1, True), (qid, True)):
                self._wake_slot(topic, group, slot, None)

    async def run_lock_timer(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        """Until cancelled: when a FIFO queue's batch in flight is visible again, :meth:`_lock_freed` unless
        ``enableNotifyAfterPopOrderLockRelease`` is off when the time comes (RocketMQ's ConsumerOrderInfoLockManager
        timer, whose task checks the setting when it runs). Run by the revive loop."""
        task_status.started()
        while True:
            now = self.now_ms()
            heap = self._lock_heap
            while heap and heap[0][0] <= now:
                at, key = heapq.heappop(heap)
                if self._lock_free.get(key) == at:
                    del self._lock_free[key]
                    if self.broker.config.enable_notify_after_pop_order_lock_release:
                        self._lock_freed(*key)
            self._lock_timer_moved = trio.Event()
            with trio.move_on_after((heap[0][0] - now) / 1000 if heap else math.inf):
                await self._lock_timer_moved.wait()

    # ---- pop ------------------------------------------------------------------------------------------------

    def pop(
        self,
        group: str,
        topic: str,
        max_nums: int,
        invisible_ms: int,
        tags: frozenset[str] | None,
        *,
        fifo: bool = False,
        property_filter: PropertyFilter | None = None,
        attempt_id: str | None = None,
        queue_id: int = -1,
        peer: str = "",
        init_mode: int = CONSUME_INIT_MAX,
        expression: tuple[str, str] = ("", EXPRESSION_TAG),
    ) -> list[Popped]:
        """Hand out up to ``max_nums`` (≤ 32) visible messages of ``topic`` to ``group`` for ``invisible_ms``.
        Normal pops read the topic's readable queues and the group's retry topic, orderly pops only the topic; each
        pop of a group on a topic starts one queue further (RocketMQ starts at a random one). Only messages with a tag
        of ``tags`` (``None``: any) and that ``property_filter`` (a SQL92 expression over the raw properties) passes
        are taken; what they skip counts as consumed. An orderly pop with the ``attempt_id`` of a queue's delivery in
        flight gets that delivery again (:meth:`FifoQueue.retried_by`) and replaces it
        (:meth:`FifoQueue.replace_delivery`). ``queue_id`` ≥ 0 reads that queue of ``topic`` only (the retry topic's
        all the same, as PopMessageProcessor does for a remoting pop of one queue). ``init_mode``
        :data:`CONSUME_INIT_MIN` starts the queues the group has no offset for at their first entry, else
        :func:`_init_offset` says where. ``expression`` (the expression and its type) is recorded as the group's
        subscription (:meth:`compensate`). Raises ``RequestRejected`` as :meth:`check_pop` says."""
        self.check_pop(group, topic, max_nums, queue_id, peer)
        self.compensate(group, topic, *expression)
        if init_mode == CONSUME_INIT_MIN:
            self._init_at_min(group, topic, queue_id)
        now = self.now_ms()
        out = self._pop_sources(
            group, topic, max_nums, invisible_ms, tags, now, fifo, property_filter, attempt_id, queue_id
        )
        if out:  # PopMessageProcessor answering SUCCESS by heap (transferMsgByHeap): incGroupGetLatency
            self.broker.stats.record_pop_latency(group, topic, self.now_ms() - now)
        return out

    def _pop_sources(
        self,
        group: str,
        topic: str,
        max_nums: int,
        invisible_ms: int,
        tags: frozenset[str] | None,
        now: int,
        fifo: bool,
        property_filter: PropertyFilter | None,
        attempt_id: str | None,
        queue_id: int = -1,
    ) -> list[Popped]:
        """:meth:`pop`'s reads, its checks passed, at ``now``."""
        max_nums = max(1, min(max_nums, MAX_POP_NUMS))
        turn = self._turns.get((group, topic), 0)
        if not turn and len(self._turns) >= self._turns_sweep_at:
            self._sweep_turns()
        self._turns[(group, topic)] = turn + 1
        filters = _Filter(tags, property_filter)
        out: list[Popped] = []
        self.read_on = False
        self.read_ends = {}
        self.retry_read = False
        sources = [(topic, TOPIC_TYPE_NORMAL)]
        retry = pop_retry_topic(group, topic)
        if not fifo and retry in self.broker.topics:
            first = _retry_first(turn, self.broker.config.pop_from_retry_probability)
            sources.insert(0 if first else 1, (retry, TOPIC_TYPE_RETRY))
        for source, topic_type in sources:
            queues = self.broker.topics.get(source)
            count = 0 if queues is None else queues.read_queue_nums
            only = queue_id >= 0 and topic_type == TOPIC_TYPE_NORMAL
            self.retry_read |= topic_type == TOPIC_TYPE_RETRY and len(out) < max_nums
            for qid in [queue_id] if only else [(turn + i) % count for i in range(count)]:
                if len(out) >= max_nums:
                    return out
                want = max_nums - len(out)
                if fifo:
                    out += self._pop_fifo(group, source, qid, want, invisible_ms, filters, now, attempt_id)
                else:
                    retry_of = topic if source != topic else None
                    out += self._pop_queue(group, source, topic_type, qid, want, invisible_ms, filters, now, retry_of)
        return out

    def has_message(self, group: str, topic: str, queue_id: int = -1, attempt_id: str | None = None, *,
                    fifo: bool = False) -> bool:  # fmt: skip
        """Whether a pop of ``group`` could find something: a queue of ``topic`` (``queue_id`` ≥ 0: that one) or of
        the group's pop retry topic holding entries past the group's offset (without one, the queue's start); an
        orderly queue whose batch is in flight does not count unless ``attempt_id`` retries it. Reads and commits
        nothing: 5.3.3's NotificationProcessor.hasMsgFromTopic / hasMsgFromQueue (broker/src/main/java/org/apache/
        rocketmq/broker/processor/NotificationProcessor.java)."""
        now = self.now_ms()
        for source, only in ((topic, queue_id), (pop_retry_topic(group, topic), -1)):
            config = self.broker.topics.get(source)
            count = 0 if config is None else config.read_queue_nums
            for qid in [only] if only >= 0 else range(count):
                state = self._fifo.get((group, topic, qid)) if fifo and source == topic else None
                if state is not None and not state.retried_by(attempt_id) and _fifo_blocked(state, now):
                    continue
                if self.rest_of(group, source, qid):
                    return True
        return False

    def _sweep_turns(self) -> None:
        """Drop the turn counters of groups and topics that are gone (RocketMQ's PopLongPollingService
        .cleanUnusedResource cleans its per topic and group maps so), and all of them when that leaves too many (they
        only say which queue a pop starts at; RocketMQ picks it at random). The next sweep comes when the table has
        doubled: a broker serving short-lived groups or topics keeps at most twice what is live."""
        topics, groups = self.broker.topics, self.broker.groups
        self._turns = {key: n for key, n in self._turns.items() if key[1] in topics and groups.get(key[0]) is not None}
        if len(self._turns) >= _TURNS_MAX:
            self._turns.clear()
        self._turns_sweep_at = max(_TURNS_SWEEP_MIN, 2 * len(self._turns))

    def check_pop(self, group: str, topic: str, max_nums: int = 0, queue_id: int = -1, peer: str = "") -> None:
        """PopMessageProcessor.processRequest's checks, in its order: the broker readable (an operator draining reads
        with ``brokerPermission``), at most 32 messages asked for, the timer enabled (``timerWheelEnable``), the topic
        known and readable, the queue one of its read queues (``queue_id`` < 0: all), the group known (auto-created
        when allowed) and consuming (``consumeEnable``). Raises ``RequestRejected`` with RocketMQ's code and remark
        (``peer``: the remoting client's address, Java's ``channel.remoteAddress()``)."""
        broker = self.broker
        if not broker.config.broker_permission & PERM_READ:
            raise RequestRejected(
                ResponseCode.NO_PERMISSION, f"the broker[{broker.config.broker_ip1}] pop message is forbidden"
            )
        if max_nums > MAX_POP_NUMS:
            raise RequestRejected(
                ResponseCode.INVALID_PARAMETER,
                f"the broker[{broker.config.broker_ip1}] pop message's num is greater than 32",
            )
        if not broker.config.timer_wheel_enable:  # a pop's checkpoint waits in the timer, which does not run
            raise RequestRejected(
                ResponseCode.SYSTEM_ERROR,
                f"the broker[{broker.config.broker_ip1}] pop message is forbidden because timerWheelEnable is false",
            )
        config = broker.topics.get(topic)
        if config is None:
            raise RequestRejected(ResponseCode.TOPIC_NOT_EXIST, f"topic[{topic}] not exist, apply first please!")
        if not config.perm & PERM_READ:
            raise RequestRejected(ResponseCode.NO_PERMISSION, f"the topic[{topic}] peeking message is forbidden")
        if queue_id >= config.read_queue_nums:
            raise RequestRejected(
                ResponseCode.INVALID_PARAMETER,
                f"queueId[{queue_id}] is illegal, topic:[{topic}] topicConfig.readQueueNums:[{config.read_queue_nums}] "
                f"consumer:[{peer}]",
            )
        group_config = broker.groups.find(group)
        if group_config is None:
            raise RequestRejected(
                ResponseCode.SUBSCRIPTION_GROUP_NOT_EXIST, f"subscription group [{group}] does not exist"
            )
        if not group_config.consume_enable:
            raise RequestRejected(ResponseCode.NO_PERMISSION, f"subscription group no permission, {group}")

    def compensate(self, group: str, topic: str, expression: str, kind: str) -> None:
        """PopMessageProcessor.processRequest after its checks: the pop's subscription of the topic (FilterAPI.build
        of its expression, ``*`` TAG without one) and ``*`` of its pop retry topic go to the client registry's
        compensation table (ConsumerManager.compensateSubscribeData), what ``consumerProgress`` and ``queryCq`` find
        for a group without them in its heartbeats. An expression the build refuses records nothing."""
        if not expression:
            expression, kind = SUB_ALL, EXPRESSION_TAG
        if self._record_subscription(group, topic, expression, kind):
            self._record_subscription(group, pop_retry_topic(group, topic), SUB_ALL, kind)

    def _record_subscription(self, group: str, topic: str, expression: str, kind: str) -> bool:
        """Record ``expression`` as the group's subscription of ``topic``; the one recorded already when unchanged
        (only its time refreshed, so its version does not run ahead of the clock pop after pop). False when the
        build refuses the expression."""
        clients = self.broker.clients
        known = clients.compensated(group, topic)
        if known is None or known.sub_string != expression or known.expression_type != kind:
            try:
                known = build_subscription(topic, expression, kind)
            except ValueError:
                return False
        clients.compensate_subscription(group, topic, known)
        return True

    def _init_at_min(self, group: str, topic: str, queue_id: int) -> None:
        """Commit the first entry of each queue (``queue_id`` ≥ 0: that one) the group has no offset for, where
        PopMessageProcessor.getInitOffset starts ConsumeInitMode.MIN (and commits, ``init``)."""
        config = self.broker.topics.get(topic)
        store, offsets = self.broker.store, self.broker.offsets
        for qid in [queue_id] if queue_id >= 0 else range(0 if config is None else config.read_queue_nums):
            if offsets.query(group, topic, qid) < 0:
                offsets.commit(group, topic, qid, store.min_offset_in_queue(topic, qid))

    def _start_offset(self, group: str, topic: str, qid: int) -> int:
        """Where the group's next pop of the queue reads: its committed offset, within the queue. Without one it
        starts where :func:`_init_offset` says and commits that start (PopMessageProcessor.getInitOffset with
        ``init``), so the next pop goes on from there rather than from the queue's end again. One past the queue's
        end (the queue lost its tail: recreated, or truncated by recovery) is committed back to the end, as
        RocketMQ's popMsgFromQueue commits the next begin offset of OFFSET_OVERFLOW_BADLY."""
        store, offsets = self.broker.store, self.broker.offsets
        committed = offsets.query(group, topic, qid)
        low, high = store.min_offset_in_queue(topic, qid), store.max_offset_in_queue(topic, qid)
        if committed < 0:
            committed = _init_offset(topic, low, high)
            offsets.commit(group, topic, qid, committed)
        elif committed > high:
            offsets.commit(group, topic, qid, high)
            committed = high
        return max(committed, low)

    def _commit_min_if_passed(self, group: str, topic: str, qid: int, start: int) -> None:
        """Commit the queue's min offset when the group's committed offset lies below it (retention deleted what it
        pointed at) and the pop reads from that min, as 5.3.3's PopMessageProcessor.popMsgFromQueue commits the next
        begin offset of OFFSET_TOO_SMALL, found or not: the group's lag then counts no deleted message."""
        low = self.broker.store.min_offset_in_queue(topic, qid)
        offsets = self.broker.offsets
        if start == low and 0 <= offsets.query(group, topic, qid) < low:
            offsets.commit(group, topic, qid, low)

    def _read(
        self, group: str, topic: str, qid: int, offset: int, want: int, filters: _Filter, retry_of: str | None = None
    ) -> tuple[list[MessageExt], int]:
        """Up to ``want`` messages ``filters`` takes from ``offset`` on, and the offset after everything read. While
        the tag check drops what the tags codes let through, it reads on (at most :data:`_TAG_CHECK_READS` times):
        a pop that moved past colliding tags hands out the match behind them instead of nothing, which would make
        its receive wait out its polling window (RocketMQ's proxy answers such a pop at once and its client pops
        again). Each read records how far behind the CommitLog head it was, as a pull's does: 5.3.3's
        PopMessageProcessor reads through DefaultMessageStore.getMessageAsync with the group, which records it
        (recordDiskFallBehindSize) for BrokerController.protectBroker. ``retry_of``: ``topic`` is the group's pop retry
        topic of that topic (see :meth:`BrokerStatsManager.record_pop_read`)."""
        messages: list[MessageExt] = []
        stats = self.broker.stats
        for _ in range(_TAG_CHECK_READS):
            result = self.broker.store.get(
                topic,
                qid,
                offset,
                want - len(messages),
                tag_filter=filters.codes,
                property_filter=filters.properties,
                max_filtered=filters.max_filtered,
            )
            if result.fall_behind >= 0:
                stats.record_fall_behind(group, topic, qid, result.fall_behind)
            read = list(map(decode_record, result.messages))
            kept = [m for m in read if filters.keeps(m)]
            stats.record_pop_read(group, topic, len(kept), sum(m.store_size for m in kept), retry_of=retry_of)
            messages += kept
            offset = max(result.next_begin_offset, offset)
            if len(kept) == len(read) or len(messages) >= want:
                break
        return messages, offset

    def _pop_queue(
        self,
        group: str,
        topic: str,
        topic_type: int,
        qid: int,
        want: int,
        invisible_ms: int,
        filters: _Filter,
        now: int,
        retry_of: str | None = None,
    ) -> list[Popped]:
        reset = self._take_reset((group, topic, qid))
        start = self._start_offset(group, topic, qid) if reset is None else reset
        if held := self._held.get((group, topic, qid)):
            start = max(start, held[-1].next_offset)
        if reset is None:
            self._commit_min_if_passed(group, topic, qid, start)
        messages, next_offset = self._read(group, topic, qid, start, want, filters, retry_of)
        broker_name = self.broker.config.broker_name
        popped = [
            Popped(msg, ReceiptHandle(start, now, invisible_ms, 0, topic_type, broker_name, qid, msg.queue_offset,
                                      msg.commit_log_offset), msg.reconsume_times + 1)
            for msg in messages
        ]  # fmt: skip
        # The CK first: a refused one (a full disk, the timer's limit) leaves the offset where it was.
        ck = self._write_ck(group, topic, [p.handle for p in popped]) if popped else None
        self.inflight.add(topic, group, qid, len(popped))
        if next_offset != start:
            self._move_on((group, topic, qid), next_offset, ck)
            self._note_rest(topic, qid, next_offset)
        return popped

    def _pop_offset(self, group: str, topic: str, qid: int) -> int:
        """Where the group's next pop of the queue reads: the greater of its committed offset and where its held moves
        (:meth:`_move_on`) end, as 5.3.3's PopMessageProcessor.getPopOffset takes the greater of the buffer's latest
        offset and the committed one (an offset committed past the held moves, by an offline reset, is taken)."""
        committed = self.broker.offsets.query(group, topic, qid)
        held = self._held.get((group, topic, qid))
        return max(committed, held[-1].next_offset) if held else committed

    def _move_on(self, key: tuple[str, str, int], next_offset: int, ck: tuple[MessageRecord, int] | None) -> None:
        """Commit a pop's move of its queue's offset, at once unless the store waits for puts; then only once its CK
        (``ck``: the record and its CommitLog end) and every earlier move's are stored, as 5.3.3's
        PopBufferMergeService.scanCommitOffset commits: a follower that copies the offsets never has one past a CK
        the quorum did not commit."""
        if not self.broker.store.waits_for_put(True):
            self.broker.offsets.commit(*key, next_offset)
            return
        if ck is None and key not in self._held:
            self.broker.offsets.commit(*key, next_offset)
            return
        now = trio.current_time()
        if ck is None:
            move = _HeldMove(key, next_offset, None, now, stored=True)
        else:
            move = _HeldMove(key, next_offset, ck[0], now, end=ck[1])
        self._held.setdefault(key, deque()).append(move)
        if ck is not None:
            self._watch(move)

    def _watch(self, move: _HeldMove) -> None:
        """Settle ``move`` once its CK put's outcome is known, whether or not anyone still waits for it (the pop may
        have failed on a later queue, or its client gone): 5.3.3's PopBufferMergeService.putCkToStore settles each
        CK from its put's future (handleCkMessagePutResult). A store run without its services syncs inline, and
        :meth:`landed` settles the move instead."""
        self._held_puts[move.end] = move
        waits = self.broker.store.put_waits
        if not waits.can_notify(True):
            return
        put = move.put = _CkPut(move.end)
        now = waits.notify(put.end, True, functools.partial(self._put_done, move, put))
        if now is not None:
            self._put_done(move, put, now)

    def _put_done(self, move: _HeldMove, put: _CkPut, status: PutStatus) -> None:
        put.status = status
        put.done.set()
        if self._held_puts.get(put.end) is move:  # else dropped meanwhile (:meth:`_drop_held`)
            self._settle([put.end], [status])

    def _settle(self, ends: list[int], statuses: list[PutStatus]) -> None:
        """Note the outcome of held moves' CK puts among ``ends``; commit what is stored in order."""
        for end, status in zip(ends, statuses, strict=True):
            move = self._held_puts.pop(end, None)
            if move is None:
                continue
            if status in STORED:
                move.stored = True
                self._commit_held(move.key)
            else:
                move.end = -1  # put again by run_held_cks, as PopBufferMergeService.scan does

    def _take_reset(self, key: tuple[str, str, int]) -> int | None:
        """An admin's reset of the queue waiting for this pop (:meth:`ConsumerOffsetManager.assign_reset`), which wins
        over the queue's held moves: they are dropped and the reset committed, as 5.3.3's PopMessageProcessor.
        resetPopOffset takes it (queryThenEraseResetOffset) and clears them (PopBufferMergeService.
        clearOffsetQueue) before getPopOffset would read past them."""
        offset = self.broker.offsets.take_reset(*key)
        if offset is not None:
            self._drop_held(key)
            self.broker.offsets.commit(*key, offset)
        return offset

    def _drop_held(self, key: tuple[str, str, int]) -> None:
        """Forget the queue's held moves, uncommitted: the outcome of a CK put still in flight moves nothing."""
        for move in self._held.pop(key, ()):
            if self._held_puts.get(move.end) is move:
                del self._held_puts[move.end]

    def _commit_held(self, key: tuple[str, str, int]) -> None:
        """Commit the queue's stored moves at its head, unless an admin reset of it waits for the next pop: then the
        moves are dropped and the reset stays committed (5.3.3 commits them over the reset, which its next pop takes
        back; ours keeps the committed offset the reset's meanwhile)."""
        if self.broker.offsets.has_reset(*key):
            self._drop_held(key)
            return
        moves = self._held.get(key)
        upto = -1
        while moves and moves[0].stored:
            upto = moves.popleft().next_offset
        if upto >= 0:
            self.broker.offsets.commit(*key, upto)
        if not moves:
            self._held.pop(key, None)

    async def run_held_cks(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        """Until cancelled, every :data:`CK_RETRY_S`: drop stale held moves (:meth:`_drop_stale_holds`) and put again
        each held move's CK whose put failed, until stored; a slave forgets its held moves (their CKs may be truncated;
        the offsets it copies from its master rule), as 5.3.3's PopBufferMergeService.run clears its buffer and offset
        queues while not a master. Run by the revive loop."""
        task_status.started()
        while True:
            await trio.sleep(CK_RETRY_S)
            if self.broker.config.broker_role == "SLAVE":
                self._held.clear()
                self._held_puts.clear()
            else:
                self._drop_stale_holds()
                await self._put_failed_cks()

    def buffer_sizes(self) -> tuple[int, int]:
        """The held offset moves, and those of them with a CK (5.3.3's PopBufferMergeService ``getOffsetTotalSize``
        and ``getBufferedCKSize``: its buffer holds a pop's CK until stored and its offset committed)."""
        moves = [move for held in self._held.values() for move in held]
        return len(moves), sum(move.ck is not None for move in moves)

    def _drop_stale_holds(self) -> None:
        """Drop the held moves of a queue not popped for :data:`HOLD_STALE_S`, and of a group gone, as 5.3.3's
        PopBufferMergeService.scanGarbage does (logged): its next pop reads from its committed offset."""
        now = trio.current_time()
        for key, moves in list(self._held.items()):
            idle = now - moves[-1].popped_at
            if idle > HOLD_STALE_S or self.broker.groups.get(key[0]) is None:
                log.info("pop: held offset moves of %s dropped: last pop %.0f s ago", key, idle)
                self._drop_held(key)

    async def _put_failed_cks(self) -> None:
        failed = [m for moves in self._held.values() for m in moves if not m.stored and m.end < 0]
        ends = []
        for move in failed:
            assert move.ck is not None
            try:
                move.end = self._counted_put(move.ck, move.key[0], move.key[1], REVIVE_CK).end_offset
            except PutRefusedError:
                continue
            self._watch(move)
            ends.append(move.end)
        await self.landed(ends, "ck")

    def _note_rest(self, topic: str, qid: int, next_offset: int) -> None:
        """A read that moved on from its start and stopped short of the queue's end leaves entries to read
        (:attr:`read_on`), as 5.3.3's PopMessageProcessor counts ``restNum`` and, when its pop found nothing, wakes it
        at once (notifyMessageArriving; broker/src/main/java/org/apache/rocketmq/broker/processor/
        PopMessageProcessor.java)."""
        if next_offset < self.broker.store.max_offset_in_queue(topic, qid):
            self.read_on = True

    def _pop_fifo(
        self,
        group: str,
        topic: str,
        qid: int,
        want: int,
        invisible_ms: int,
        filters: _Filter,
        now: int,
        attempt_id: str | None,
    ) -> list[Popped]:
        self._take_fifo_reset((group, topic, qid))
        start = self._start_offset(group, topic, qid)
        state = self._fifo_queue(group, topic, qid, now)
        retried = state.retried_by(attempt_id)
        if not retried and _fifo_blocked(state, now):
            return []  # one batch of a queue in flight at a time: order is kept per queue
        self._commit_min_if_passed(group, topic, qid, start)
        self.inflight.clear(topic, group, qid)  # PopMessageProcessor.popMsgFromQueue: this batch replaces it
        # A delivery is known by its pop time: a later one never shares an earlier one's (an invisible time of 0).
        pop_time = max(now, state.pop_time + 1)
        messages, next_offset = self._read(group, topic, qid, start, want, filters)
        state.stored_at.update((m.queue_offset, m.commit_log_offset) for m in messages)
        # Offsets the filter skipped count as consumed (RocketMQ acks a message that does not match silently).
        returned = {m.queue_offset for m in messages}
        end = messages[-1].queue_offset + 1 if messages else next_offset
        state.acked.update(o for o in range(start, end) if o not in returned)
        popped = []
        for msg in messages:
            offset = msg.queue_offset
            if offset in state.acked:
                continue
            attempt = state.attempts.get(offset, 0) + (0 if retried and offset in state.attempts else 1)
            state.attempts[offset] = attempt
            state.invisible_until[offset] = pop_time + invisible_ms
            handle = ReceiptHandle(
                start, pop_time, invisible_ms, FIFO_REVIVE_QID, TOPIC_TYPE_NORMAL, self.broker.config.broker_name, qid,
                offset, msg.commit_log_offset,
            )  # fmt: skip
            popped.append(Popped(msg, handle, attempt))
        if popped:
            self.inflight.add(topic, group, qid, len(popped))
            self.read_ends[qid] = next_offset
            if retried:
                state.replace_delivery({p.handle.offset for p in popped})
            state.pop_time, state.attempt_id = pop_time, attempt_id
            self._schedule_lock_free((group, topic, qid), state)
        self._fifo_advance(group, topic, qid, state)
        if not popped and (committed := self.broker.offsets.query(group, topic, qid)) > start:
            self._note_rest(topic, qid, committed)  # 5.3.3 counts an unblocked order queue's restNum too
        if popped or returned or end != start:
            self.fifo_persister.mark_dirty()
        return popped

    def _take_fifo_reset(self, key: tuple[str, str, int]) -> None:
        """Take an admin's reset of the queue (:meth:`_take_reset`) and forget the queue's FIFO state with it, so the
        batch in flight no longer blocks the queue, as 5.3.3's resetPopOffset clears the order info
        (ConsumerOrderInfoManager.clearBlock) for an orderly pop too."""
        if self._take_reset(key) is not None and self._fifo.pop(key, None) is not None:
            self.fifo_persister.mark_dirty()

    def _fifo_queue(self, group: str, topic: str, qid: int, now: int) -> FifoQueue:
        """The queue's FIFO state, none if it was written for another queue of that name (deleted and created again
        while no pop service heard of it: its offsets hold other messages), and without what speaks of offsets the
        queue no longer has (expired and no longer in flight, or a tail recovery truncated), which would block the
        queue or hand its new messages an old attempt or skip them as acknowledged."""
        store = self.broker.store
        state = self._fifo.get((group, topic, qid))
        if state is None or not state.is_of(lambda offset: store.commit_log_offset_at(topic, qid, offset)):
            if state is not None:
                self.fifo_persister.mark_dirty()
            state = self._fifo[(group, topic, qid)] = FifoQueue()
        low, high = store.min_offset_in_queue(topic, qid), store.max_offset_in_queue(topic, qid)
        if state.keep_within(low, high, now):
            self.fifo_persister.mark_dirty()
        return state

    def forget_queue(self, topic: str, queue_id: int) -> None:
        """The store's queue-drop listener: the queue's FIFO state of every group goes with its ConsumeQueue (a
        topic deleted, or every message of the queue expired), so a queue created again under its name starts
        afresh (RocketMQ's ConsumerOrderInfoManager.autoClean drops the order info of a topic that is gone); so do
        its held offset moves (PopBufferMergeService.scanGarbage drops those of a topic gone), whose CKs stored later
        would commit an offset of the old queue into the new one."""
        keys = [key for key in self._fifo if key[1:] == (topic, queue_id)]
        for key in keys:
            del self._fifo[key]
        if keys:
            self.fifo_persister.mark_dirty()
        for key in [key for key in self._held if key[1:] == (topic, queue_id)]:
            self._drop_held(key)

    def _fifo_snapshot(self) -> FifoTable:
        """What the persister saves, after dropping what :meth:`_fifo_live` says is dead (RocketMQ cleans its order
        info when it saves it too)."""
        for key in [key for key, state in self._fifo.items() if not self._fifo_live(key, state)]:
            del self._fifo[key]
        return {key: q.copy() for key, q in self._fifo.items()}

    def _fifo_live(self, key: tuple[str, str, int], state: FifoQueue) -> bool:
        """Whether a queue's FIFO state is worth keeping: ConsumerOrderInfoManager.autoClean
        (broker/src/main/java/org/apache/rocketmq/broker/offset/ConsumerOrderInfoManager.java) drops the order info of
        a topic or group that no longer exists, of a queue past the topic's read queues and an empty one; kept, a
        deleted group's state stayed in memory and on disk for good and blocked the group created again."""
        group, topic, qid = key
        config = self.broker.topics.get(topic)
        if config is None or qid >= config.read_queue_nums or self.broker.groups.get(group) is None:
            return False
        return bool(state.invisible_until or state.attempts or state.acked)

    @staticmethod
    def _fifo_done(state: FifoQueue, offset: int) -> None:
        state.invisible_until.pop(offset, None)
        state.attempts.pop(offset, None)
        state.acked.add(offset)

    def _fifo_advance(self, group: str, topic: str, qid: int, state: FifoQueue) -> None:
        """Commit the offset past every consumed offset at the queue's head, unless an admin's reset of the queue
        waits for the next pop, as 5.3.3's AckMessageProcessor.ackOrderly commits only without ``hasOffsetReset``
        (the pop forgets this state when it takes the reset)."""
        if self.broker.offsets.has_reset(group, topic, qid):
            return
        start = self._start_offset(group, topic, qid)
        committed = state.advance(start)
        if committed != start:
            self.broker.offsets.commit(group, topic, qid, committed)

    # ---- ack and change of invisibility ---------------------------------------------------------------------

    def ack(self, group: str, topic: str, handle: ReceiptHandle, *, refuse_expired: bool = True) -> AckOutcome:
        """Acknowledge one popped message. Expired handles are refused (RocketMQ's proxy check) unless
        ``refuse_expired`` is false: the remoting ack writes its ACK all the same, so one come before the revive reached
        the CK still cancels it (5.3.3's AckMessageProcessor.appendAck checks no invisible time)."""
        now = self.now_ms()
        if refuse_expired and handle.expired(now):
            return AckOutcome.EXPIRED
        real = handle.real_topic(group, topic)
        if real not in self.broker.topics or not self._in_queue(real, handle, past_end=True):
            return AckOutcome.NOT_FOUND
        if handle.fifo:
            return self._ack_fifo(group, real, handle, now)
        self._write_ack(group, real, handle)
        self.inflight.done(real, group, handle.queue_id, handle.pop_time)  # AckMessageProcessor.handlePutMessageResult
        return AckOutcome.OK

    def _in_queue(self, topic: str, handle: ReceiptHandle, *, past_end: bool) -> bool:
        """Whether the handle's offset lies within its queue: ``[min, max]`` for an ack (AckMessageProcessor), ``[min,
        max)`` for a change of invisibility (ChangeInvisibleTimeProcessor, broker/src/main/java/org/apache/rocketmq/
        broker/processor/); both answer NO_MESSAGE otherwise and write no ACK or CK for a message that is not there.
        Ours: a FIFO handle below the queue's start still acts (its in-flight message, removed by retention, frees
        its queue rather than block it until the invisible time ends)."""
        store, qid = self.broker.store, handle.queue_id
        high = store.max_offset_in_queue(topic, qid) + (1 if past_end else 0)
        low = 0 if handle.fifo else store.min_offset_in_queue(topic, qid)
        return low <= handle.offset < high

    def _ack_fifo(self, group: str, topic: str, handle: ReceiptHandle, now: int) -> AckOutcome:
        """RocketMQ's AckMessageProcessor.ackOrderly: the latest delivery's handle acks its message, and a queue it
        unblocks wakes a receive of the group waiting on the topic; a message acknowledged already, or a handle of an
        earlier delivery, is STALE; an offset never handed out is NOT_FOUND. With no delivery of the queue known (the
        state lost in a kill -9) the handle's message is acknowledged, as ConsumerOrderInfoManager.commitAndNext does
        without order info, if the queue still holds it (else STALE); unlike Java's, which commits past it, the
        unacknowledged messages before it stay (they come again). While an admin's reset of the queue waits, the ack
        marks nothing: the reset's pop starts the queue afresh (resetPopOffset, ConsumerOrderInfoManager.update), and
        a saved mark would skip the message after a restart lost the reset."""
        qid, offset = handle.queue_id, handle.offset
        state = self._fifo_queue(group, topic, qid, now)
        if offset < self.broker.offsets.query(group, topic, qid) or offset in state.acked:
            return AckOutcome.STALE
        if not state.invisible_until:
            if self.broker.store.commit_log_offset_at(topic, qid, offset) != handle.commit_log_offset:
                return AckOutcome.STALE
        elif offset not in state.invisible_until:
            return AckOutcome.NOT_FOUND
        elif not _current_fifo_delivery(state, handle):
            return AckOutcome.STALE
        if not self.broker.offsets.has_reset(group, topic, qid):  # the reset's pop forgets this state, marks and all
            self._fifo_done(state, offset)
            self._fifo_advance(group, topic, qid, state)
            self.fifo_persister.mark_dirty()
        self._schedule_lock_free((group, topic, qid), state)
        self._lock_freed(group, topic, qid)  # AckMessageProcessor.ackOrderly: free, it wakes one pop of the group
        self.inflight.done(topic, group, qid, handle.pop_time)
        return AckOutcome.OK

    def change_invisible(
        self, group: str, topic: str, handle: ReceiptHandle, invisible_ms: int, *, refuse_expired: bool = True
    ) -> tuple[AckOutcome, ReceiptHandle | None]:
        """Make the message invisible for ``invisible_ms`` from now; the new handle replaces the old one. An expired
        handle is refused unless ``refuse_expired`` is false, as for :meth:`ack` (5.3.3's
        ChangeInvisibleTimeProcessor writes the new CK and acks the old whatever the invisible time)."""
        now = self.now_ms()
        if refuse_expired and handle.expired(now):
            return AckOutcome.EXPIRED, None
        real = handle.real_topic(group, topic)
        if real not in self.broker.topics or not self._in_queue(real, handle, past_end=False):
            return AckOutcome.NOT_FOUND, None
        if handle.fifo:
            return self._change_fifo(group, real, handle, now, now + invisible_ms)
        renewed = attrs.evolve(handle, pop_time=now, invisible_time=invisible_ms)
        self._write_ck(group, real, [renewed])
        self._write_ack(group, real, handle)
        return AckOutcome.OK, renewed

    def _change_fifo(
        self, group: str, topic: str, handle: ReceiptHandle, now: int, visible_at: int
    ) -> tuple[AckOutcome, ReceiptHandle]:
        """ChangeInvisibleTimeProcessor.processChangeInvisibleTimeForOrder: the latest delivery's message stays
        invisible until ``visible_at``. The pop time stays, so every handle of this delivery still acks it. For a
        message acknowledged already or a handle of no delivery in flight nothing changes (STALE); Java answers
        SUCCESS and the new handle both ways."""
        renewed = attrs.evolve(handle, invisible_time=visible_at - handle.pop_time)
        state = self._fifo_queue(group, topic, handle.queue_id, now)
        if not _current_fifo_delivery(state, handle):
            return AckOutcome.STALE, renewed
        state.invisible_until[handle.offset] = visible_at
        self.fifo_persister.mark_dirty()
        self._schedule_lock_free((group, topic, handle.queue_id), state)  # updateNextVisibleTime's
        if self.broker.config.enable_notify_after_pop_order_lock_release:
            self._lock_freed(group, topic, handle.queue_id)  # visible at once: the timer would fire now
        return AckOutcome.OK, renewed

    # ---- records of the revive topic ------------------------------------------------------------------------

    def _revive_record(self, tag: str, body: dict[str, object], deliver_ms: int | None) -> MessageRecord:
        topics = self.broker.topics
        name = self.revive_topic
        if name not in topics:
            topics.create_topic_in_send_back_process(name, 1)
        props = (
            f"TAGS\x01{tag}" if deliver_ms is None else f"TAGS\x01{tag}\x02{PROPERTY_TIMER_DELIVER_MS}\x01{deliver_ms}"
        )
        return MessageRecord(name, orjson.dumps(body), 0, 0, props, 0, self.now_ms(), store_host=self.broker.store_host)

    def _write_ck(self, group: str, topic: str, handles: list[ReceiptHandle]) -> tuple[MessageRecord, int]:
        """One CK for the handles of one pop of one queue (they share the queue, pop time and invisible time):
        ``ao`` and ``po`` list each message's queue and CommitLog offsets (RocketMQ's PopCheckPoint keeps one per pop
        and queue too, with a bit map)."""
        first = handles[0]
        body = {"c": group, "t": topic, "q": first.queue_id, "so": first.start_offset,
                "ao": [h.offset for h in handles], "pt": first.pop_time, "it": first.invisible_time,
                "po": [h.commit_log_offset for h in handles]}  # fmt: skip
        record = self._timer_rewrite(self._revive_record(CK_TAG, body, self._ck_deliver_ms(first.visible_at)))
        appended = self._append(record, group, topic, REVIVE_CK)
        # In the store totals only: 5.3.3's appendCheckPoint puts it through the EscapeBridge, which counts nothing.
        self.broker.stats.record_uncounted_put(record.topic, record.queue_id, appended.queue_offset)
        return record, appended.end_offset

    def _ck_deliver_ms(self, visible_at: int) -> int:
        """When the CK of a handle visible again at ``visible_at`` is due: :data:`CK_GRACE_MS` after, but no later than
        the timer takes (``timerMaxDelaySec`` from now) while 5.3.3's, due :data:`ACK_TIME_INTERVAL_MS` before it, is
        taken (then up to that second early, as Java's always is: PopMessageProcessor.buildCkMsg,
        ChangeInvisibleTimeProcessor); else Java's time, which the timer refuses as HookUtils.transformTimerMessage
        does."""
        java = visible_at - ACK_TIME_INTERVAL_MS
        limit = self.now_ms() + self.broker.config.timer_max_delay_sec * 1000
        return java if java > limit else min(visible_at + CK_GRACE_MS, limit)

    def _write_ack(self, group: str, topic: str, handle: ReceiptHandle) -> None:
        body = {"c": group, "t": topic, "q": handle.queue_id, "ao": handle.offset, "pt": handle.pop_time,
                "it": handle.invisible_time}  # fmt: skip
        record = self._revive_record(ACK_TAG, body, None)
        appended = self._append(record, group, topic, REVIVE_ACK)
        # In the store totals only: 5.3.3's AckMessageProcessor.appendAck puts it through the EscapeBridge
        # (putMessageToSpecificQueue), which counts nothing.
        self.broker.stats.record_uncounted_put(record.topic, record.queue_id, appended.queue_offset)

    def _append(self, record: MessageRecord, group: str, topic: str, kind: str) -> AppendResult:
        """Put a ``kind`` record of ``group`` on ``topic`` into the revive topic, counted for ``/metrics``."""
        appended = self._counted_put(record, group, topic, kind)
        if self._writes is not None:
            self._writes.append(appended.end_offset)
        return appended

    def _counted_put(self, record: MessageRecord, group: str, topic: str, kind: str) -> AppendResult:
        """Append ``record``, counted with its status (PopMetricsManager ``incPopRevivePutCount``)."""
        try:
            appended = self.broker.store.append(record)
        except PutRefusedError as exc:
            self.broker.stats.pop_revive.put(group, topic, kind, exc.put_status)
            raise
        self.broker.stats.pop_revive.put(group, topic, kind, PutStatus.PUT_OK.name)
        return appended

    # ---- the outcome of the records written -----------------------------------------------------------------

    @contextlib.contextmanager
    def writes(self) -> Iterator[list[int]]:
        """Collect the CommitLog end offsets of the ACK and CK records the calls inside write, in order (a change of
        invisibility: its CK, then its ACK), for :meth:`landed`. Only synchronous calls go inside."""
        ends: list[int] = []
        self._writes = ends
        try:
            yield ends
        finally:
            self._writes = None

    async def written(self, kind: str, write: Callable[[], _T]) -> _T:
        """``write()`` (synchronous: it writes ``kind`` records, "ack" or "ck"), returned once they landed
        (:meth:`writes`, then :meth:`landed`); what it raises is raised before anything is waited for."""
        with self.writes() as ends:
            result = write()
        await self.landed(ends, kind)
        return result

    async def landed(self, ends: list[int], kind: str) -> list[PutStatus]:
        """The put status of each ``kind`` ("ack", "ck") record :meth:`writes` collected, once the store knows it: in
        DLedger mode once its entry is committed by a quorum or failed (DLedgerCommitLog.asyncPutMessage), with
        SYNC_FLUSH or SYNC_MASTER after the flush or the slave (5.3.3's ACK and CK records wait, being of ``WAIT``
        true), else PUT_OK at once, without suspending. One that did not land is logged, as 5.3.3's
        AckMessageProcessor.handlePutMessageResult ("put ack msg error") and PopBufferMergeService.
        handleCkMessagePutResult ("put ck to store fail") do; their requests are answered all the same. A held
        move's CK is waited for through its own registration (:meth:`_watch`), which settles the move: a wait
        cancelled (its client gone) leaves the outcome to it rather than failing the put."""
        store = self.broker.store
        if not ends or not store.waits_for_put(True):
            return [PutStatus.PUT_OK] * len(ends)
        watched = {end: put for end in ends if (put := self._watched_put(end)) is not None}
        others = [end for end in ends if end not in watched]
        found = [PutStatus.UNKNOWN_ERROR] * len(others)  # cancelled: an inline held move's CK is put again
        try:
            found = await store.put_waits.statuses([(end, True) for end in others])
        finally:
            self._settle(others, found)
        for put in watched.values():
            await put.done.wait()
        outcomes = dict(zip(others, found, strict=True))
        statuses = [watched[end].status if end in watched else outcomes[end] for end in ends]
        for status in statuses:
            if status not in STORED:
                log.error("put %s msg error: %s", kind, status.name)
        return statuses

    def _watched_put(self, end: int) -> _CkPut | None:
        """The put ending at ``end`` of a held move's CK that :meth:`_watch` settles, if any."""
        move = self._held_puts.get(end)
        put = None if move is None else move.put
        return put if put is not None and put.end == end else None

    async def change_landed(self, ends: list[int]) -> bool:
        """Whether a change of invisibility's new CK (``ends[0]``; none for a FIFO message) landed, then its old CK's
        ACK (``ends[1]``), within :data:`CHANGE_WAIT_S`, waited for in that order as 5.3.3's
        ChangeInvisibleTimeProcessor.appendCheckPointThenAckOrigin puts them: a CK whose put is not PUT_OK (nor a
        flush or slave timeout) answers SYSTEM_ERROR, and so does processRequest when both puts took longer; the
        ACK failing is only logged."""
        if not ends:
            return True
        with trio.move_on_after(CHANGE_WAIT_S):
            if (await self.landed(ends[:1], "ck"))[0] not in STORED:
                return False
            await self.landed(ends[1:], "ack")
            return True
        log.error("append checkpoint or ack origin failed: no outcome in %.0f s", CHANGE_WAIT_S)
        return False

    # ---- redelivery and dead letters ------------------------------------------------------------------------

    def original_topic(self, group: str, msg: MessageExt) -> str:
        """The topic ``group``'s consumers know a stored message by: its original topic when it lies in the group's pop
        retry topic, else the topic it lies in (a DLQ read as a topic stays the DLQ: its copies name their original
        topic too, and an ack naming that one would never meet the DLQ pop's CK)."""
        origin = msg.properties.get(PROPERTY_RETRY_TOPIC)
        return origin if origin and msg.topic == pop_retry_topic(group, origin) else msg.topic

    def retry_copy(self, group: str, msg: MessageExt, pop_time: int) -> MessageRecord:
        """``msg`` again, one attempt later, for the pop retry topic (PopReviveService.reviveRetry: however many
        attempts it had; the receive moves one whose attempts are used up to the DLQ). ``pop_time``: its checkpoint's,
        stamped as ``1ST_POP_TIME`` on a first copy and kept by later ones, as reviveRetry does. Born on the broker
        (reviveRetry's ``setBornHost(getStoreHost())``), at the message's born time."""
        origin = self.original_topic(group, msg)
        retry = pop_retry_topic(group, origin)
        if retry not in self.broker.topics:
            self.broker.topics.create_topic_in_send_back_process(retry, 1)
            self._init_retry_offset(group, retry)
        extra = {PROPERTY_RETRY_TOPIC: origin}
        if msg.reconsume_times == 0 or PROPERTY_FIRST_POP_TIME not in msg.properties:
            extra[PROPERTY_FIRST_POP_TIME] = str(pop_time)
        return attrs.evolve(self._copy(msg, retry, extra, msg.reconsume_times + 1), born_host=self.broker.store_host)

    def _init_retry_offset(self, group: str, retry: str) -> None:
        """Commit offset 0 of the pop retry topic the revive just created, unless the group has one:
        PopReviveService.addRetryTopicIfNotExist's ``initPopRetryOffset``, so its lag counts the copies from the
        first (the group's pop of it would start there anyway)."""
        if self.broker.offsets.query(group, retry, 0) < 0:
            self.broker.offsets.commit(group, retry, 0, 0)

    def dead_letter(self, group: str, commit_log_offset: int, origin_topic: str, message_id: str | None = None) -> None:
        """Move the message at ``commit_log_offset`` into ``%DLQ%<group>`` as RocketMQ's proxy does
        (ProducerProcessor.forwardMessageToDeadLetterQueue): the broker's send-back with delay level -1, its checks
        and its DLQ copy, appended without waiting for the flush. A group without retry queues stores nothing.
        Raises ``RequestRejected`` with the send-back's refusal (a broker that takes no writes) and the store's
        ``PutRefusedError``; nothing is stored then."""
        self._send_back.send_back_now(dead_letter_header(group, commit_log_offset, origin_topic, message_id))

    def _copy(self, msg: MessageExt, topic: str, extra: dict[str, str], reconsume: int) -> MessageRecord:
        """``msg``'s properties but REAL_TOPIC and REAL_QID, plus ``extra``. ``TIMER_OUT_MS`` stays
        (PopReviveService.reviveRetry ``putAll``s every property): a copy re-sent to its topic is not parked again."""
        props = {k: v for k, v in msg.properties.items() if k not in _COPY_DROPS}
        props.update(extra)
        return record_from_stored(msg, topic, 0, encode_properties(props), self.broker.store_host, reconsume)


@attrs.define(eq=False)
class _Poll:
    """One receive waiting for an arrival (a PopRequest parked in PopLongPollingService): its group, the topics it
    is filed under with its slot on each, its filter, its place in the order receives parked, the event its wake
    sets, and the topic and slot it was woken on and the arrival (tags code and properties; ``None``: no message)
    that woke it."""

    group: str
    filed: tuple[tuple[str, _Slot], ...]
    filter: _Filter
    seq: int
    #: when its polling window ends (store ms)
    due: int
    #: whether its client is still there to answer
    alive: Callable[[], bool]
    event: trio.Event = attrs.Factory(trio.Event)
    woken_on: tuple[str, _Slot] | None = None
    woken_by: tuple[int, str] | None = None

    @property
    def order(self) -> tuple[int, int]:
        """Where it stands among the receives of its key: PopRequest.COMPARATOR's, due first, then the first come."""
        return self.due, self.seq

    @property
    def key(self) -> _FilterKey:
        """What its filter is filed under: receives of one expression share it (the proxy compiles an SQL92
        expression once, :func:`processors.filter.cache.compile_sql92`)."""
        return self.filter.tags, self.filter.properties


def _init_offset(topic: str, low: int, high: int) -> int:
    """Where a group without a committed offset starts a queue ``[low, high)``, as PopMessageProcessor.getInitOffset
    with the proxy's ConsumeInitMode.MAX: a retry topic at its start; any other at 0 while the queue still begins
    there (ours: Java asks whether offset 0 is still in memory), else at its last message ("pop last one, then commit
    offset")."""
    if topic.startswith(RETRY_GROUP_TOPIC_PREFIX) or low == 0:
        return low
    return max(high - 1, 0)


def _retry_first(turn: int, percent: int) -> bool:
    """Whether pop ``turn`` of a group on a topic reads the retry topic first: ``percent`` of the pops (the
    ``popFromRetryProbability`` setting), spread evenly from the first on; RocketMQ draws ``random.nextInt(100) <
    popFromRetryProbability`` for each pop."""
    percent = min(max(percent, 0), 100)
    return -(-(turn + 1) * percent // 100) > -(-turn * percent // 100)


def _order(poll: _Poll) -> tuple[int, int]:
    return poll.order


def _drop(waiters: list[_Poll], poll: _Poll) -> None:
    """Take ``poll`` out of ``waiters`` (kept in :attr:`_Poll.order`), if there."""
    i = bisect.bisect_left(waiters, poll.order, key=_order)
    if i < len(waiters) and waiters[i] is poll:
        del waiters[i]


def _first_alive(waiters: Iterable[_Poll], gone: list[_Poll]) -> _Poll | None:
    """The first of ``waiters`` whose client is still there; those before it go to ``gone``."""
    for poll in waiters:
        if poll.alive():
            return poll
        gone.append(poll)
    return None


def _fifo_blocked(state: FifoQueue, now: int) -> bool:
    """Whether a message of the queue is in flight (RocketMQ's ConsumerOrderInfoManager.checkBlock)."""
    return any(until > now for until in state.invisible_until.values())


def _current_fifo_delivery(state: FifoQueue, handle: ReceiptHandle) -> bool:
    """Whether ``handle`` is of the latest delivery of its FIFO message: in flight, popped at the time the queue
    holds (a handle of an earlier delivery would act on another consumer's; RocketMQ compares the pop time with the
    queue's order info too). A queue whose pop time was not saved knows its delivery by the visible time."""
    until = state.invisible_until.get(handle.offset)
    if until is None:
        return False
    return until == handle.visible_at if state.pop_time == UNKNOWN_POP_TIME else handle.pop_time == state.pop_time
