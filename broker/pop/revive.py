"""``ReviveService``: redelivers popped messages nobody acknowledged in time (RocketMQ's PopReviveService,
broker/src/main/java/org/apache/rocketmq/broker/processor/PopReviveService.java).

It reads the revive queue (``rmq_sys_REVIVE_LOG_<cluster>`` queue 0) in order every ``reviveInterval`` ms (1000). ACK
records arrive as soon as a consumer acknowledges; CK records arrive only when the timer wheel delivers them, about when
the handle expires (see :mod:`broker.pop.service`), so an ack sent in the handle's last moments, or just past them, may
come after its CK. A CK read is therefore held, as PopReviveService.consumeReviveMessage and mergeAndRevive hold it,
until the revive queue's time (the latest store time read, moved on by the clock once the queue is read to its end) is
more than ``PopAckConstants.ackTimeInterval + SECOND`` (2 s) past its handle's expiry (its ``reviveTime``); CKs are
revived in queue order, the first not yet due stopping the rest. The cost: a message nobody acked comes back about 2 s
after its handle expired, plus up to one interval (Java's the same window). A CK names every message of one pop of one
queue: an ACK read before it is revived cancels its message, every other message of the CK is copied to the retry topic,
however many attempts it had (the gRPC receive moves one whose attempts are used up to the DLQ, as RocketMQ's proxy
does). A CK whose topic (a pop retry topic's origin) was deleted, or whose group is gone, is skipped, as RocketMQ's
mergeAndRevive skips it; so is a message its queue no longer holds at its offset (RocketMQ reads it by topic, queue and
offset): the queue's topic deleted (even if created again under its name) or the message removed by retention.

Progress is the consumer offset of group ``CID_RMQ_SYS_REVIVE_GROUP`` on that queue, committed at the oldest ACK still
waiting for its CK or the oldest CK held, whichever comes first, so a restart re-reads those ACKs and CKs (Java's revive
offset stops before its first CK not revived). How far CKs were revived is committed too, as group
``CID_RMQ_SYS_REVIVE_CK_GROUP``'s offset, never past a held CK: a CK read again below it is held as any other but only
meets its ACKs, it is not revived twice (an ACK of a handle invisible for hours held the revive offset back that long,
and a restart redelivered every CK revived meanwhile; RocketMQ's AckMessageProcessor parks the ACK until the handle's
visible time like the CK, so its revive offset is never held back by it). A crash between the two commits may still
redeliver a message twice, never lose one. An ACK is forgotten once its CK cannot come any more: a CK due more than a
minute after it has been read (the timer delivers CKs in the order they are due). Measured on the CKs read, not on the
clock: after a restart the timer delivers the overdue CKs only after the ACKs were read again, and a clock-based rule
forgot those ACKs first and redelivered acknowledged messages. An ACK due further past its own store time than the timer
can have parked a CK is dropped at once: no pop made its handle. That reach is the largest ``timerMaxDelaySec`` seen
since the start, never below RocketMQ's default of 3 days: a CK parked under a larger limit stays parked when the
setting is lowered (at runtime the timer keeps the limit it started with; across a restart what it parked stays). A
record that does not decode is logged and skipped. A CK read again above the CK progress after it was revived (the
same CK put twice: its first put timed out but landed) revives nothing (:meth:`ReviveService._twin`).
A retry copy the store refuses for good (MESSAGE_ILLEGAL: a group and topic whose retry topic name is too long) goes to
the DLQ instead through :meth:`PopService.dead_letter` (the broker's send-back: a group without retry queues stores
nothing), or is logged and dropped when that is refused too (ours: RocketMQ writes the CK again and again); any other
refusal is retried at the next interval from the message it stopped at.
"""

from __future__ import annotations

import logging
from collections import deque
from typing import Final

import attrs
import orjson
import trio

from broker.pop.service import ACK_TAG, ACK_TIME_INTERVAL_MS, CK_GRACE_MS, CK_TAG, PopService
from broker.stats.pop_revive import ACK, CK
from processors.common import RequestRejected
from remoting.codec.codes import ResponseCode
from remoting.codec.errors import MessageDecodeError
from remoting.codec.message import MessageExt, decode_record
from remoting.codec.topics import pop_normal_topic
from store.errors import MessageIllegalError, PutRefusedError
from store.results import PutStatus

__all__ = ["REVIVE_CK_GROUP", "REVIVE_GROUP", "ReviveService"]

log = logging.getLogger(__name__)

REVIVE_GROUP: Final = "CID_RMQ_SYS_REVIVE_GROUP"
#: Ours: its offset on the revive queue is how far CKs were revived (module docstring).
REVIVE_CK_GROUP: Final = "CID_RMQ_SYS_REVIVE_CK_GROUP"
_BATCH: Final = 32
#: PopReviveService revives a CK once the revive queue's time is this far past its ``reviveTime``:
#: ``PopAckConstants.ackTimeInterval + PopAckConstants.SECOND``.
_REVIVE_WINDOW_MS: Final = ACK_TIME_INTERVAL_MS + 1000
_FORGET_ACK_AFTER_MS: Final = 60_000
#: The least reach of a CK past its ACK: RocketMQ's default ``timerMaxDelaySec`` (MessageStoreConfig), so a CK parked
#: under it still meets its ACK after the setting is lowered, also across a restart.
_MIN_CK_REACH_MS: Final = 3 * 24 * 3600 * 1000

#: group, topic, queue, queue offset, pop time, invisible time. The invisible time keeps apart the CK a change of
#: invisibility writes in the millisecond of the pop (a broken receive stream's nack) from the pop's own CK.
_Key = tuple[str, str, int, int, int, int]


@attrs.define(eq=False)
class _HeldCk:
    """A CK read and not yet revived (PopReviveService's map of PopCheckPoints)."""

    offset: int  # in the revive queue
    revive_ms: int  # when its handle expires: PopCheckPoint.reviveTime
    group: str
    topic: str
    pop_time: int
    keys: list[_Key]
    phys: list[int]
    replay: bool  # read again below the CK progress: it only meets its ACKs
    done: int = 0  # messages through: a refusal part-way resumes after them


class ReviveService:
    """The revive loop of one broker's :class:`PopService`; ``nursery.start(service.run)``."""

    def __init__(self, pop: PopService, interval_ms: int | None = None) -> None:
        self.pop = pop
        self._interval_ms = interval_ms
        self._acked: dict[_Key, tuple[int, int]] = {}  # key -> (revive offset, due ms)
        self.revived = 0
        self._position = 0
        self._held: deque[_HeldCk] = deque()
        #: the revive queue's time: the latest store time read, or the clock once the queue is read to its end
        self._queue_ms = 0
        #: the latest due time of the CKs read: an ACK due a minute before it has lost its CK
        self._ck_horizon = 0
        #: how far past its ACK a CK can be due: the largest timerMaxDelaySec seen, from the one the timer started with
        #: (:meth:`_ck_can_come`)
        self._ck_reach_ms = max(_MIN_CK_REACH_MS, pop.broker.config.timer_max_delay_sec * 1000)
        #: the CKs revived, by their messages' keys, with when they were due: a twin (the same CK put again) revives
        #: nothing (:meth:`_twin`)
        self._revived_cks: dict[tuple[_Key, ...], int] = {}
        self._running = False
        self._ended = trio.Event()
        #: after each round: the revive time of the oldest CK it left held, else the clock (5.3.3's
        #: ``currentReviveMessageTimestamp``); 0 before the first round
        self._round_ms = 0

    @property
    def running(self) -> bool:
        return self._running

    @property
    def interval(self) -> float:
        """Seconds before the next round: ``interval_ms`` when given, else the broker's ``reviveInterval``, read at
        each round as PopReviveService.run reads it (a negative one waits for nothing, as its ``waitForRunning``)."""
        ms = self.pop.broker.config.revive_interval if self._interval_ms is None else self._interval_ms
        return max(0, ms) / 1000

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        """Revive every ``interval`` seconds, save the pop service's FIFO state after its changes and run its FIFO
        lock timer (:meth:`PopService.run_lock_timer`) and its CK retries (:meth:`PopService.run_held_cks`), until
        cancelled. One loop per service: a run started while
        another runs (the broker's own, started with it, and the gRPC front door's,
        :meth:`BrokerController.pop_service`) reports started at once and takes over when that one ends."""
        if self._running:
            task_status.started()
            task_status = trio.TASK_STATUS_IGNORED
            while self._running:
                await self._ended.wait()
        self._running, self._ended = True, trio.Event()
        try:
            async with trio.open_nursery() as nursery:
                await nursery.start(self.pop.fifo_persister.run)
                await nursery.start(self.pop.run_lock_timer)
                await nursery.start(self.pop.run_held_cks)
                task_status.started()
                await self._revive_forever()
        finally:
            self._running = False
            self._ended.set()

    async def _revive_forever(self) -> None:
        while True:
            await trio.sleep(self.interval)
            if self.pop.broker.config.broker_role == "SLAVE":
                # Only a master revives (5.3.3's PopReviveService skips its rounds while ``shouldRunPopRevive`` is off,
                # broker/src/main/java/org/apache/rocketmq/broker/processor/PopReviveService.java): a slave or a
                # DLedger member that stepped down would only have its appends refused. What it read is forgotten: the
                # leader meanwhile revives those CKs, and leading again this one reads from the committed offsets.
                self._forget_read()
                continue
            try:
                while self.revive_once():
                    await trio.lowlevel.checkpoint()
                self._round_ms = self._held[0].revive_ms if self._held else self.pop.now_ms()
            except (PutRefusedError, RequestRejected) as exc:  # RequestRejected: NO_PERMISSION only (_redeliver)
                log.warning("revive: append refused (%s); retrying", exc)
            except Exception:
                log.exception("revive round failed")

    def gauges(self) -> tuple[int, int]:
        """(records, ms) the revive is behind: the revive queue's max offset - the revive offset, and, while more
        than one record is behind, the time since the last round's :attr:`_round_ms`; (0, 0) before the first round.
        5.3.3's PopReviveService ``getReviveBehindMessages`` and ``getReviveBehindMillis``, which PopMetricsManager
        exports per revive queue (ours has one)."""
        if self._round_ms <= 0:
            return 0, 0
        broker, topic = self.pop.broker, self.pop.revive_topic
        behind = max(
            0, broker.store.max_offset_in_queue(topic, 0) - max(0, broker.offsets.query(REVIVE_GROUP, topic, 0))
        )
        return behind, max(0, self.pop.now_ms() - self._round_ms) if behind > 1 else 0

    def _forget_read(self) -> None:
        """Drop the CKs held and the ACKs waiting: the next round reads again from the committed offsets (5.3.3
        builds its map anew every round)."""
        self._held.clear()
        self._acked.clear()
        self._position = self._queue_ms = self._ck_horizon = 0

    def revive_once(self) -> bool:
        """Read one batch of the revive queue, revive the CKs held past the window and commit; True when there may
        be more. A refusal (raised) part-way through a CK resumes after its last message through."""
        broker, topic = self.pop.broker, self.pop.revive_topic
        revived_to = broker.offsets.query(REVIVE_CK_GROUP, topic, 0)
        more = self._read_batch(revived_to)
        if not more:  # read to its end: the queue's time is the clock's (PopReviveService moves endTime on)
            self._queue_ms = max(self._queue_ms, self.pop.now_ms())
        while self._held and self._queue_ms - self._held[0].revive_ms > _REVIVE_WINDOW_MS:
            self._revive(self._held[0])
            self._held.popleft()
        self._forget_stale()
        # ACKs and CKs are kept in the order they were read, which is revive-queue order: the first is the oldest.
        held = self._held[0].offset if self._held else self._position
        oldest = next(iter(self._acked.values()))[0] if self._acked else self._position
        broker.offsets.commit(REVIVE_GROUP, topic, 0, min(oldest, held, self._position))
        if min(held, self._position) > revived_to:
            broker.offsets.commit(REVIVE_CK_GROUP, topic, 0, min(held, self._position))
        return more

    def _read_batch(self, revived_to: int) -> bool:
        """Read the next batch of the revive queue into the held CKs and waiting ACKs; True when it was full."""
        broker, topic = self.pop.broker, self.pop.revive_topic
        offset = broker.offsets.query(REVIVE_GROUP, topic, 0)
        offset = max(offset, broker.store.min_offset_in_queue(topic, 0))
        position = max(offset, self._position)
        if position >= broker.store.max_offset_in_queue(topic, 0):
            return False
        result = broker.store.get(topic, 0, position, _BATCH)
        # Counted as 5.3.3's PopReviveService.getMessage counts its store read (incGroupGetNums under REVIVE_GROUP).
        size = sum(len(raw) for raw in result.messages)
        broker.stats.record_internal_read(REVIVE_GROUP, topic, len(result.messages), size)
        for raw in result.messages:
            try:
                record = decode_record(raw)
                self._handle(record, replay=record.queue_offset < revived_to)
            except (MessageDecodeError, ValueError, KeyError, TypeError):
                log.exception("revive: skipping a malformed record")
            else:
                self._queue_ms = max(self._queue_ms, record.store_timestamp)
        self._position = max(result.next_begin_offset, position)
        return len(result.messages) >= _BATCH

    def _handle(self, record: MessageExt, *, replay: bool = False) -> None:
        """Keep one record of the revive queue: an ACK until its CK is revived, a CK until the window passed it (a CK
        read again, ``replay``: below the CK progress, then only meets its ACKs)."""
        body = orjson.loads(record.body)
        group, topic, qid, pop_time = body["c"], body["t"], int(body["q"]), int(body["pt"])
        invisible, tag = int(body["it"]), record.tags
        if not isinstance(group, str) or not isinstance(topic, str):
            raise TypeError(f"a revive record whose group or topic is not a string: {group!r}, {topic!r}")
        if tag in (ACK_TAG, CK_TAG) and not replay:  # PopReviveService.consumeReviveMessage
            self.pop.broker.stats.pop_revive.got(group, topic, record.queue_id, ACK if tag == ACK_TAG else CK)
        if tag == ACK_TAG:
            key = (group, topic, qid, int(body["ao"]), pop_time, invisible)
            due = pop_time + invisible + CK_GRACE_MS
            if self._ck_can_come(due, record.store_timestamp):
                self._acked[key] = (record.queue_offset, due)
        elif tag == CK_TAG:
            self._ck_horizon = max(self._ck_horizon, pop_time + invisible + CK_GRACE_MS)
            # A CK names every message of one pop of one queue (a single offset in records written before that).
            offsets, phys = body["ao"], body["po"]
            if not isinstance(offsets, list):
                offsets, phys = [offsets], [phys]
            if len(offsets) != len(phys):
                raise ValueError("a CK whose offset lists differ in length")
            keys = [(group, topic, qid, int(offset), pop_time, invisible) for offset in offsets]
            held = _HeldCk(record.queue_offset, pop_time + invisible, group, topic, pop_time, keys, [*map(int, phys)],
                           replay)  # fmt: skip
            self._held.append(held)

    def _revive(self, ck: _HeldCk) -> None:
        """PopReviveService.mergeAndRevive of one CK past the window: copy each message no ACK met to the retry
        topic, then drop the ACKs it met (only once the whole CK is through: a refusal part-way resumes at it). A
        message that cannot be read back (its record damaged) is logged and skipped, as a malformed record is: kept,
        it would stop every later CK."""
        if not ck.replay and not self._twin(ck) and self._revivable(ck.group, ck.topic):
            for i in range(ck.done, len(ck.keys)):
                key, phy = ck.keys[i], ck.phys[i]
                if key not in self._acked and self._still_queued(ck.topic, key[2], key[3], phy):
                    try:
                        # reviveRetry: a stored copy is out of the in-flight count
                        if self._redeliver(ck.group, ck.topic, phy, ck.pop_time):
                            self.pop.inflight.done(ck.topic, ck.group, key[2], ck.pop_time)
                    except (MessageDecodeError, ValueError, KeyError, TypeError):
                        log.exception("revive: message at %d of group %s cannot be read back: skipped", phy, ck.group)
                ck.done = i + 1
        for key in ck.keys:
            self._acked.pop(key, None)
        self._revived_cks[tuple(ck.keys)] = ck.revive_ms

    def _twin(self, ck: _HeldCk) -> bool:
        """Whether ``ck`` was revived already: the same CK put again (a put that timed out, a DLedger entry committed
        past WAIT_QUORUM_ACK_TIMEOUT, landed after all; 5.3.3's PopBufferMergeService puts such a CK again too). The
        ACKs its twin met count for it, as PopReviveService.consumeReviveMessage keys CKs by mergeKey, so twins read in
        one round are one; ours spans rounds while the twin is remembered (:meth:`_forget_stale`)."""
        if tuple(ck.keys) not in self._revived_cks:
            return False
        log.info("revive: a checkpoint of group %s on %s put twice: revived once", ck.group, ck.topic)
        return True

    def _ck_can_come(self, due: int, acked_at: int) -> bool:
        """Whether an ACK stored at ``acked_at`` can still meet its CK, due at ``due``: the timer parks a CK at most
        ``timerMaxDelaySec`` past its pop (or change of invisibility), which came before the ACK, and its handle's
        visible time (the ACK's ``due`` less :data:`CK_GRACE_MS`) :data:`ACK_TIME_INTERVAL_MS` past that
        (:meth:`PopService._ck_deliver_ms`). Measured against the
        largest limit seen, never below RocketMQ's default (:data:`_MIN_CK_REACH_MS`): lowering the setting leaves the
        CKs parked under the old one parked. An ACK of a handle no pop made (a pop time or invisible time forged far
        ahead) is logged and dropped: kept, it would never be forgotten and hold the revive progress at it for good
        (RocketMQ's timer refuses such an ACK)."""
        self._ck_reach_ms = max(self._ck_reach_ms, self.pop.broker.config.timer_max_delay_sec * 1000)
        if due - acked_at <= self._ck_reach_ms + ACK_TIME_INTERVAL_MS + CK_GRACE_MS:
            return True
        log.warning("revive: an ACK due at %d, stored at %d, can meet no checkpoint: dropped", due, acked_at)
        return False

    def _revivable(self, group: str, topic: str) -> bool:
        """PopReviveService.mergeAndRevive's checks of a CK: the topic it was popped for (a pop retry topic's origin)
        still exists and its group is known (auto-created when allowed). A CK failing them is skipped, logged: a
        deleted topic's messages come back neither in a retry topic nor in a topic created again under its name
        (one created again before the CK came due passes here: :meth:`_still_queued` stops it)."""
        broker = self.pop.broker
        origin = pop_normal_topic(group, topic)
        if origin not in broker.topics:
            log.warning("revive: topic %s of a checkpoint of group %s is gone: skipped", origin, group)
            return False
        if broker.groups.find(group) is None:
            log.warning("revive: group %s of a checkpoint on %s is gone: skipped", group, topic)
            return False
        return True

    def _still_queued(self, topic: str, qid: int, offset: int, phy_offset: int) -> bool:
        """Whether the queue of the CK still holds its message at ``offset``: RocketMQ reads the message to revive by
        topic, queue and offset (PopReviveService.getBizMessage), not by CommitLog offset, which outlives the queue.
        Not so, logged, once retention removed it or its topic was deleted (a topic created again under its name
        holds nothing or another message there; a deleted pop retry topic is not created again by its CK)."""
        if self.pop.broker.store.commit_log_offset_at(topic, qid, offset) == phy_offset:
            return True
        log.warning("revive: message %d of %s queue %d is no longer in its queue: skipped", offset, topic, qid)
        return False

    def _redeliver(self, group: str, topic: str, phy_offset: int, pop_time: int) -> bool:
        """Copy the message at ``phy_offset`` of ``group``'s CK on ``topic`` to the group's pop retry topic (or,
        refused there, its DLQ), counted with its put status (PopMetricsManager ``incPopReviveRetryMessageCount``);
        whether the retry copy was stored."""
        store = self.pop.broker.store
        raw = store.look_message_by_offset(phy_offset)
        self.pop.broker.stats.record_store_read(0 if raw is None else 1)  # 5.3.3's getBizMessage reads it so
        if raw is None:
            log.warning("revive: message at %d of group %s is gone", phy_offset, group)
            return False
        msg = decode_record(raw)
        counts = self.pop.broker.stats.pop_revive
        try:
            store.append(self.pop.retry_copy(group, msg, pop_time))
        except PutRefusedError as exc:
            counts.retried(group, topic, exc.put_status)
            if not isinstance(exc, MessageIllegalError):
                raise
            try:
                self.pop.dead_letter(group, phy_offset, msg.topic)
            except (MessageIllegalError, RequestRejected) as refused:
                if isinstance(refused, RequestRejected) and refused.code == ResponseCode.NO_PERMISSION:
                    raise  # the broker takes no writes for now (a drain): retried a second later
                log.error("revive: message at %d of group %s refused by the store (%s) and by the DLQ send-back (%s): "
                          "dropped", phy_offset, group, exc, refused)  # fmt: skip
                return False
            log.warning("revive: message at %d of group %s refused (%s): sent to the DLQ", phy_offset, group, exc)
            self.revived += 1
            return False
        counts.retried(group, topic, PutStatus.PUT_OK.name)
        self.revived += 1
        return True

    def _forget_stale(self) -> None:
        """Drop the oldest ACKs, and the oldest CKs revived, while a CK due a minute after them was read (from the
        front only: one pass per batch): a twin CK is due when its first is."""
        horizon = self._ck_horizon
        revived = self._revived_cks
        while revived and next(iter(revived.values())) + _FORGET_ACK_AFTER_MS < horizon:
            del revived[next(iter(revived))]
        acked = self._acked
        while acked:
            key, (_, due) = next(iter(acked.items()))
            if due + _FORGET_ACK_AFTER_MS >= horizon:
                return
            del acked[key]
