"""``TransactionalMessageBridge``: the half/op message bookkeeping of RocketMQ transactions over the message store
(RocketMQ's ``TransactionalMessageBridge``), docs/protocol.md#78-transactions.

Half messages live in ``RMQ_SYS_TRANS_HALF_TOPIC`` queue 0 (the send processor puts them there with ``REAL_TOPIC`` /
``REAL_QID``). Resolving one writes an **op message** to ``RMQ_SYS_TRANS_OP_HALF_TOPIC`` queue 0: tag ``d``, body the
half message's queue offset as decimal text, as Java writes it. Ours also carries ``TRAN_PREPARED_QUEUE_OFFSET``: the
*origin* of the half message, i.e. the queue offset of the first copy. A check-back re-appends a half message (a new
copy with ``TRANSACTION_CHECK_TIMES`` incremented and ``TRAN_PREPARED_QUEUE_OFFSET`` naming the origin), so an answer
that names an older copy still resolves the live one: a transaction commits at most once however late its answer.

Progress of the check service is the internal group ``CID_RMQ_SYS_TRANS``'s offsets on both topics, kept in
``consumerOffset.json`` like any consumer's: after a restart everything is recovered from the two topics.

A committed message that carries ``DELAY`` goes through the delay-level schedule (step 10 of
docs/protocol.md#75-send-checks, as Java's ``CommitLog.putMessage`` rewrites COMMIT-type messages):
:meth:`TransactionalMessageBridge.put_commit_message` applies the ``delay_rewrite`` seam (the controller's
``ScheduleMessageService.rewrite``) before appending; one with a ``TIMER_*`` time the ``timer_rewrite`` seam (RocketMQ
5's HookUtils.handleScheduleMessage parks COMMIT-type messages in the timer). Without the seams the message is
appended to its real topic at once.

Everything here is synchronous (store appends and reads never await), so a caller can read ops, scan halves and
append renewals without an END_TRANSACTION interleaving. Store refusals propagate as
:class:`~store.errors.PutRefusedError` subclasses.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Final

import trio

from processors.context import BrokerContext
from processors.send import DelayRewrite, TimerRewrite
from remoting.codec.errors import MessageDecodeError
from remoting.codec.message import (
    SYSFLAG_TRANSACTION_MASK,
    MessageExt,
    MessageRecord,
    decode_record,
)
from remoting.codec.message_properties import encode_properties
from remoting.codec.msgid import pack_socket_address
from remoting.codec.topics import TRANS_CHECK_MAX_TIME_TOPIC, TRANS_HALF_TOPIC, TRANS_OP_HALF_TOPIC
from store.results import AppendResult

__all__ = [
    "PROPERTY_CHECK_IMMUNITY_TIME",
    "PROPERTY_DELAY",
    "PROPERTY_PRODUCER_GROUP",
    "PROPERTY_TRANSACTION_CHECK_TIMES",
    "PROPERTY_TRAN_PREPARED_QUEUE_OFFSET",
    "TRANS_SYS_GROUP",
    "DelayRewrite",
    "OpMessage",
    "TransactionalMessageBridge",
    "delay_level_of",
    "origin_of",
]

#: The internal consumer group whose offsets record the check service's progress.
TRANS_SYS_GROUP: Final = "CID_RMQ_SYS_TRANS"
PROPERTY_PRODUCER_GROUP: Final = "PGROUP"
PROPERTY_TRANSACTION_PREPARED: Final = "TRAN_MSG"
PROPERTY_REAL_TOPIC: Final = "REAL_TOPIC"
PROPERTY_REAL_QID: Final = "REAL_QID"
PROPERTY_TRAN_PREPARED_QUEUE_OFFSET: Final = "TRAN_PREPARED_QUEUE_OFFSET"
PROPERTY_TRANSACTION_CHECK_TIMES: Final = "TRANSACTION_CHECK_TIMES"
PROPERTY_CHECK_IMMUNITY_TIME: Final = "CHECK_IMMUNITY_TIME_IN_SECONDS"
#: Ours, on a copy moved to ``TRANS_CHECK_MAX_TIME_TOPIC``: the op queue's end when it was discarded.
PROPERTY_DISCARD_OP_OFFSET: Final = "TRAN_DISCARD_OP_OFFSET"
#: Java's ``TransactionalMessageUtil.REMOVETAG``.
OP_TAG: Final = "d"
PROPERTY_DELAY: Final = "DELAY"
_HALF_QUEUE: Final = 0
_READ_BATCH: Final = 32


def origin_of(half: MessageExt) -> int:
    """The queue offset of a half message's first copy (its own offset unless it is a check-back renewal)."""
    raw = half.properties.get(PROPERTY_TRAN_PREPARED_QUEUE_OFFSET)
    if raw is not None:
        try:
            return int(raw)
        except ValueError:
            pass
    return half.queue_offset


def delay_level_of(props: dict[str, str]) -> int:
    """The ``DELAY`` property as a level; 0 when absent or not a number (the send path ignores those too)."""
    try:
        return int(props.get(PROPERTY_DELAY, "0"))
    except ValueError:
        return 0


class OpMessage:
    """One op message read back: its own queue offset and the half origin it resolves."""

    __slots__ = ("op_offset", "origin")

    def __init__(self, op_offset: int, origin: int) -> None:
        self.op_offset = op_offset
        self.origin = origin


class TransactionalMessageBridge:
    """Reads and writes the half and op topics of one broker. Owns no state beyond the context it is given.

    ``delay_rewrite`` and ``timer_rewrite`` are the seams applied to committed messages that carry ``DELAY`` or a
    ``TIMER_*`` time (see the module docstring); the controller passes its schedule's and timer's ``rewrite``."""

    def __init__(
        self,
        broker: BrokerContext,
        delay_rewrite: DelayRewrite | None = None,
        timer_rewrite: TimerRewrite | None = None,
    ) -> None:
        self.broker = broker
        self.delay_rewrite = delay_rewrite
        self.timer_rewrite = timer_rewrite
        #: Origins with an op message in the check service's window (origin -> op queue offset): END_TRANSACTION
        #: consults it so a second answer for the same transaction (e.g. a check-back answer racing the producer's
        #: own commit) is acknowledged without committing twice. Rebuilt from the op topic by every check round, when
        #: it commits its progress.
        self.resolved: dict[int, int] = {}
        #: Origins with a copy past the half progress, as the last check round found them, or as
        #: :meth:`ended_before` read them once before a round ran (None until either): what it reads instead of the
        #: half queue.
        self.live_origins: set[int] | None = None
        #: The discarded transactions read from ``TRANS_CHECK_MAX_TIME_TOPIC`` so far (origin -> the op queue's end
        #: when its latest copy was discarded), and the topic offset read up to: see :meth:`discarded_unended`.
        self._discarded: dict[int, int] = {}
        self._discarded_read = 0
        #: The discarded transactions an op message was written for since their discard, and the op queue offset
        #: read up to for them (None: not read yet): each op message is read once, not once per late answer.
        self._discarded_ended: set[int] = set()
        self._discard_ops_read: int | None = None
        #: Set while :attr:`resolved` and :attr:`live_origins` belong to the current role: a DLedger role change
        #: clears it (:meth:`forget_view`) until the check service rebuilt them (:meth:`view_rebuilt`).
        self._view = trio.Event()
        self._view.set()

    # ---- the view END_TRANSACTION consults, per role ----------------------------------------------------------

    @property
    def view_current(self) -> bool:
        return self._view.is_set()

    def forget_view(self) -> None:
        """The broker's role changed (DLedger): :attr:`resolved` and :attr:`live_origins` are what this member saw
        when it last led; as a follower its log gained another leader's op messages and renewed copies, and its
        progress moved. Until the check service rebuilt them (:meth:`view_rebuilt`), END_TRANSACTION waits
        (:meth:`view_changed`); its waiters are woken to look at the role again."""
        previous, self._view = self._view, trio.Event()
        self.live_origins = None
        self._discarded_ended, self._discard_ops_read = set(), None  # the log may have been truncated meanwhile
        previous.set()

    def view_token(self) -> trio.Event:
        """Taken before the check service rebuilds the view, handed back to :meth:`view_rebuilt`."""
        return self._view

    def view_rebuilt(self, token: trio.Event) -> None:
        """The view rebuilt since ``token`` was taken is current, unless the role changed meanwhile (a view read
        partly before it is not: END_TRANSACTION keeps waiting, and the role services start the check afresh)."""
        token.set()

    async def view_changed(self) -> None:
        """Until :meth:`view_rebuilt` or the next :meth:`forget_view`."""
        await self._view.wait()

    # ---- lookups ---------------------------------------------------------------------------------------------

    def is_half_entry(self, queue_offset: int, commit_log_offset: int) -> bool:
        """Whether the half queue's entry at ``queue_offset`` is the record at ``commit_log_offset``: a record is a
        half message only when that queue names it (the bytes of one found by offset alone could be a forged record
        inside another message's body)."""
        cq = self.broker.store.consume_queues.get((TRANS_HALF_TOPIC, _HALF_QUEUE))
        entry = cq.entry(queue_offset) if cq is not None else None
        return entry is not None and entry[0] == commit_log_offset

    def look_half(self, commit_log_offset: int) -> MessageExt | None:
        """The record at ``commit_log_offset`` when it is a half message, else ``None`` (gone, or not a record)."""
        view = self.broker.store.look_message_by_offset(commit_log_offset)
        if view is None:
            return None
        try:
            msg = decode_record(view)
        except MessageDecodeError:
            return None
        return msg if msg.topic == TRANS_HALF_TOPIC else None

    def iter_queue(self, topic: str, start: int, end: int, *, counted: bool = False) -> Iterator[MessageExt]:
        """Decoded records of ``topic`` queue 0 from logical ``start`` up to ``end`` (exclusive), in order; offsets
        whose data retention removed are skipped. ``counted``: each read counts in the statistics as
        ``CID_RMQ_SYS_TRANS``'s, as the check service's reads do in Java (TransactionalMessageBridge
        ``getHalfMessage`` / ``getOpMessage``)."""
        store = self.broker.store
        offset = max(start, store.min_offset_in_queue(topic, _HALF_QUEUE))
        while offset < end:
            result = store.get(topic, _HALF_QUEUE, offset, min(_READ_BATCH, end - offset))
            if counted:
                size = sum(len(view) for view in result.messages)
                self.broker.stats.record_internal_read(TRANS_SYS_GROUP, topic, len(result.messages), size)
            if not result.messages:
                if result.next_begin_offset <= offset:
                    return
                offset = result.next_begin_offset
                continue
            for view, queue_offset in zip(result.messages, result.queue_offsets, strict=True):
                if queue_offset >= end:
                    return
                try:
                    yield decode_record(view)
                except MessageDecodeError:
                    continue
            offset = result.next_begin_offset

    def read_ops(self, start: int, end: int, *, counted: bool = False) -> list[OpMessage]:
        """Op messages of ``[start, end)``; a record that is not one of ours (bad body) is skipped. ``counted``: as
        :meth:`iter_queue`'s."""
        return list(self.iter_ops(start, end, counted=counted))

    def iter_ops(self, start: int, end: int, *, counted: bool = False) -> Iterator[OpMessage]:
        """:meth:`read_ops` one at a time (a caller may yield between them)."""
        for msg in self.iter_queue(TRANS_OP_HALF_TOPIC, start, end, counted=counted):
            raw = msg.properties.get(PROPERTY_TRAN_PREPARED_QUEUE_OFFSET) or msg.body.decode("ascii", "replace")
            try:
                yield OpMessage(msg.queue_offset, int(raw))
            except ValueError:
                continue

    def ended_before(self, half: MessageExt) -> bool:
        """Whether the check service scanned past this copy and no copy of its transaction is left to scan: it was
        resolved (its op message since left :attr:`resolved`'s window), or discarded and ended since. A copy it
        renewed is not: the renewal lies past the progress. Until a check round ran, the origins left past the
        progress are read from the half queue once and kept in :attr:`live_origins` for every later answer (each
        answer reading the whole backlog again made a burst of late answers after a restart cost one full scan
        each). Kept, they stay right until the next round replaces them: only a round renews a copy or moves the
        progress; a half message sent since is its own origin, past the progress, never that of a copy below it."""
        progress = self.half_progress()
        if half.queue_offset >= progress:
            return False
        origin = origin_of(half)
        if self.live_origins is None:
            half_end = self.half_max_offset()
            self.live_origins = {origin_of(h) for h in self.iter_queue(TRANS_HALF_TOPIC, progress, half_end)}
        return origin not in self.live_origins and not self.discarded_unended(origin)

    def discarded_unended(self, origin: int) -> bool:
        """Whether the transaction ``origin`` was discarded (a copy moved to ``TRANS_CHECK_MAX_TIME_TOPIC``) and no op
        message was written for it since. Discarding writes no op message and leaves the half message where it is,
        so 4.9.8's EndTransactionProcessor still publishes a late COMMIT of it (``commitMessage`` reads the half by
        offset; broker/src/main/java/org/apache/rocketmq/broker/processor/EndTransactionProcessor.java,
        broker/src/main/java/org/apache/rocketmq/broker/transaction/queue/DefaultTransactionalMessageCheckListener.java
        ``resolveDiscardMsg``). Read from the log (the discarded copy records the origin and the op queue's end at
        that time), so it holds across a restart; only a late answer below the check progress gets here. The topic
        is read incrementally (:meth:`_read_discarded`), and so is the op queue (:meth:`_read_discard_ends`)."""
        self._read_discarded()
        if origin not in self._discarded:
            return False
        self._read_discard_ends()
        return origin not in self._discarded_ended

    def _read_discard_ends(self) -> None:
        """Bring :attr:`_discarded_ended` up to the op queue's end, reading only the op messages written since the
        last look: each late answer read the op queue from its discard on, a burst of them over a long op queue one
        full read each (4.9.8's EndTransactionProcessor reads no op message; its check reads each once per round,
        broker/src/main/java/org/apache/rocketmq/broker/transaction/queue/TransactionalMessageServiceImpl.java
        ``fillOpRemoveMap``). A queue shorter than what was read is read again from the earliest discard."""
        end = self.op_max_offset()
        start = self._discard_ops_read
        if start is None or end < start:
            self._discarded_ended = set()
            start = min(self._discarded.values(), default=end)
        self._note_discard_ends(start, end)

    def _note_discard_ends(self, start: int, end: int) -> None:
        discarded, ended = self._discarded, self._discarded_ended
        for op in self.iter_ops(start, end):
            op_start = discarded.get(op.origin)
            if op_start is not None and op.op_offset >= op_start:
                ended.add(op.origin)
        self._discard_ops_read = end

    def _read_discarded(self) -> None:
        """Bring :attr:`_discarded` up to the end of ``TRANS_CHECK_MAX_TIME_TOPIC``, reading only what was appended
        since the last look (each late answer read the whole topic, which only grows); a topic shorter than what
        was read (deleted and created again) is read from its start. A discard found after the op queue was read past
        its op offset has that part read again for it (once per batch of new discards)."""
        end = self.broker.store.max_offset_in_queue(TRANS_CHECK_MAX_TIME_TOPIC, _HALF_QUEUE)
        if end < self._discarded_read:
            self._discarded, self._discarded_read = {}, 0
            self._discarded_ended, self._discard_ops_read = set(), None
        ops_read, reread = self._discard_ops_read, None
        for discarded in self.iter_queue(TRANS_CHECK_MAX_TIME_TOPIC, self._discarded_read, end):
            props = discarded.properties
            try:
                origin = int(props.get(PROPERTY_TRAN_PREPARED_QUEUE_OFFSET, ""))
            except ValueError:
                continue
            try:
                op_start = int(props.get(PROPERTY_DISCARD_OP_OFFSET, "0"))
            except ValueError:
                op_start = 0
            self._discarded[origin] = op_start
            self._discarded_ended.discard(origin)
            if ops_read is not None and op_start < ops_read:
                reread = op_start if reread is None else min(reread, op_start)
        self._discarded_read = max(self._discarded_read, end)
        if ops_read is not None and reread is not None:
            self._note_discard_ends(reread, ops_read)

    def half_max_offset(self) -> int:
        return self.broker.store.max_offset_in_queue(TRANS_HALF_TOPIC, _HALF_QUEUE)

    def op_max_offset(self) -> int:
        return self.broker.store.max_offset_in_queue(TRANS_OP_HALF_TOPIC, _HALF_QUEUE)

    # ---- progress (CID_RMQ_SYS_TRANS offsets) ----------------------------------------------------------------

    def half_progress(self) -> int:
        return self._progress(TRANS_HALF_TOPIC)

    def op_progress(self) -> int:
        return self._progress(TRANS_OP_HALF_TOPIC)

    def _progress(self, topic: str) -> int:
        committed = self.broker.offsets.query(TRANS_SYS_GROUP, topic, _HALF_QUEUE)
        return max(committed, self.broker.store.min_offset_in_queue(topic, _HALF_QUEUE))

    def correct_progress(self) -> None:
        """At start, after the store's recovery: progress saved past a queue's recovered end (a crash lost the
        CommitLog tail, ``consumerOffset.json`` kept the offsets) goes back to that end. Else a new transaction's
        half, written at an offset below it, would count as scanned and ended, and its COMMIT store nothing.
        (RocketMQ's check moves such an offset back lazily, from the pull's nextBeginOffset.)"""
        store, offsets = self.broker.store, self.broker.offsets
        for topic in (TRANS_HALF_TOPIC, TRANS_OP_HALF_TOPIC):
            end = store.max_offset_in_queue(topic, _HALF_QUEUE)
            if offsets.query(TRANS_SYS_GROUP, topic, _HALF_QUEUE) > end:
                offsets.commit(TRANS_SYS_GROUP, topic, _HALF_QUEUE, end)

    def commit_progress(self, half_offset: int, op_offset: int) -> None:
        offsets = self.broker.offsets
        offsets.commit(TRANS_SYS_GROUP, TRANS_HALF_TOPIC, _HALF_QUEUE, half_offset)
        offsets.commit(TRANS_SYS_GROUP, TRANS_OP_HALF_TOPIC, _HALF_QUEUE, op_offset)

    # ---- writes ----------------------------------------------------------------------------------------------

    def put_commit_message(self, half: MessageExt, commit_type: int) -> AppendResult:
        """Append the real message of a committed half message: real topic and queue restored, the transaction bits
        set to ``commit_type`` and the prepared-transaction offset set to the half message's physical offset. It
        keeps the half message's properties, ``TRAN_MSG=true`` and ``REAL_*`` included (4.9.8's
        EndTransactionProcessor builds the properties string before it clears those from the map), unless
        ``DELAY`` > 0 sends it through ``delay_rewrite`` or a future ``TIMER_*`` time through ``timer_rewrite``:
        those rebuild the string from the cleared map, as the store's rewrites do. The store dispatches it to the real
        queue, or the schedule or the timer delivers it when due. Raises RequestRejected for a malformed timer
        time."""
        props = dict(half.properties)
        topic = props.pop(PROPERTY_REAL_TOPIC, "") or half.topic
        try:
            queue_id = int(props.pop(PROPERTY_REAL_QID, "0"))
        except ValueError:
            queue_id = 0
        props.pop(PROPERTY_TRANSACTION_PREPARED, None)
        sys_flag = (half.sys_flag & ~SYSFLAG_TRANSACTION_MASK) | commit_type
        record = self._parked(self._record(half, topic, queue_id, props, sys_flag), props)
        if record is None:
            record = self._record(half, topic, queue_id, dict(half.properties), sys_flag)
        return self._uncounted(record)

    def _uncounted(self, record: MessageRecord) -> AppendResult:
        """Append ``record`` as a put the statistics count in the store totals only: 4.9.8 stores a committed message
        (broker/src/main/java/org/apache/rocketmq/broker/processor/EndTransactionProcessor.java ``sendFinalMessage``)
        and a renewed half message (broker/src/main/java/org/apache/rocketmq/broker/transaction/queue/
        TransactionalMessageBridge.java ``putMessage``) with a plain store put, no ``incTopicPutNums``."""
        appended = self.broker.store.append(record)
        self.broker.stats.record_uncounted_put(record.topic, record.queue_id, appended.queue_offset)
        return appended

    def _parked(self, record: MessageRecord, props: dict[str, str]) -> MessageRecord | None:
        """``record`` as the delay schedule or the timer parks it when its ``props`` ask for a delay, else ``None``
        (a seam that leaves a record returns it unchanged)."""
        level = delay_level_of(props)
        if level > 0 and self.delay_rewrite is not None:
            parked = self.delay_rewrite(record, level)
        elif self.timer_rewrite is not None and any(key.startswith("TIMER_") for key in props):
            parked = self.timer_rewrite(record)
        else:
            return None
        return None if parked is record else parked

    def put_op_message(self, half: MessageExt) -> AppendResult:
        """Record that ``half`` (and every copy of its origin) is resolved."""
        props = {
            "TAGS": OP_TAG,
            PROPERTY_TRAN_PREPARED_QUEUE_OFFSET: str(origin_of(half)),
            "CLUSTER": self.broker.config.broker_cluster_name,
        }
        origin = origin_of(half)
        record = MessageRecord(
            topic=TRANS_OP_HALF_TOPIC,
            body=str(half.queue_offset).encode(),
            queue_id=_HALF_QUEUE,
            properties=encode_properties(props),
            born_timestamp=half.store_timestamp,
            born_host=self.broker.store_host,
            store_host=self.broker.store_host,
        )
        result = self.broker.store.append(record)
        self.resolved[origin] = result.queue_offset
        return result

    def renew_half(self, half: MessageExt, check_times: int) -> AppendResult:
        """Re-append ``half`` at the end of the half queue with ``TRANSACTION_CHECK_TIMES`` = ``check_times`` and its
        origin recorded; born time and everything else are kept, so its age keeps counting from the first send."""
        props = dict(half.properties)
        props[PROPERTY_TRANSACTION_CHECK_TIMES] = str(check_times)
        props[PROPERTY_TRAN_PREPARED_QUEUE_OFFSET] = str(origin_of(half))
        return self._uncounted(self._record(half, TRANS_HALF_TOPIC, _HALF_QUEUE, props, half.sys_flag))

    def ensure_topic(self, topic: str) -> None:
        """Create ``topic`` (one read-write queue, registered with the name servers) unless it exists: the half topic
        at each check round, as 4.9.8's ``fetchMessageQueues`` / ``selectTopicConfig`` does
        (``createTopicInSendMessageBackMethod``), and the discard topic (``createTopicOfTranCheckMaxTime``), both in
        broker/src/main/java/org/apache/rocketmq/broker/topic/TopicConfigManager.java."""
        self.broker.topics.create_topic_in_send_back_process(topic, 1)

    def put_discarded(self, half: MessageExt) -> AppendResult:
        """Move a half message that exhausted its checks to ``TRANS_CHECK_MAX_TIME_TOPIC`` (created on first use,
        one read-write queue, as Java does) where operators can inspect it. The half message stays: a late COMMIT
        still publishes it (:meth:`discarded_unended`)."""
        self.ensure_topic(TRANS_CHECK_MAX_TIME_TOPIC)
        props = dict(half.properties)
        # Ours: what discarded_unended reads back (the transaction, and where its later op messages can start).
        props[PROPERTY_TRAN_PREPARED_QUEUE_OFFSET] = str(origin_of(half))
        props[PROPERTY_DISCARD_OP_OFFSET] = str(self.op_max_offset())
        record = self._record(half, TRANS_CHECK_MAX_TIME_TOPIC, 0, props, half.sys_flag)
        return self.broker.store.append(record)

    def _record(
        self, half: MessageExt, topic: str, queue_id: int, props: dict[str, str], sys_flag: int
    ) -> MessageRecord:
        try:
            born = pack_socket_address(*half.born_host)
        except ValueError:
            born = self.broker.store_host
        return MessageRecord(
            topic=topic,
            body=half.body,
            queue_id=queue_id,
            flag=half.flag,
            properties=encode_properties(props),
            sys_flag=sys_flag,
            born_timestamp=half.born_timestamp,
            born_host=born,
            store_host=self.broker.store_host,
            reconsume_times=half.reconsume_times,
            prepared_transaction_offset=half.commit_log_offset if topic != TRANS_HALF_TOPIC else 0,
        )
