"""``ScheduleMessageService``: delay levels (docs/protocol.md#77-delay-levels; ``delayOffset.json``:
docs/protocol.md#67-config-files).

Storage: :meth:`ScheduleMessageService.rewrite` is the send path's ``DelayRewrite`` seam. A message with ``DELAY=n``
(clamped to the highest level) is stored in ``SCHEDULE_TOPIC_XXXX`` queue ``n - 1`` with ``REAL_TOPIC``/``REAL_QID``
properties (``TIMER_DELIVER_MS``/``TIMER_DELAY_SEC``/``TIMER_DELAY_MS`` dropped: a delay level wins over them, as
RocketMQ 5 clears them); the store makes its consume-queue tags code the delivery time (store time + the level's delay).

Delivery: one loop per level reads its queue from the offset in ``delayOffset.json``. Every entry whose delivery time
is due is rebuilt (original topic and queue from ``REAL_TOPIC``/``REAL_QID``, every property kept, ``DELAY`` and the
``REAL_*`` ones included: 4.9.8's ``messageTimeup`` builds the properties string before it clears ``DELAY`` from the
map) and appended; the level's offset moves past it in the same synchronous step, so a
cancellation never separates the append from the offset. A level whose head is not due sleeps until it is (a delivery
time further away than now + the level's delay counts as now: delivered at once, as 4.9.8's
``correctDeliverTimestamp``); an empty level waits for :meth:`notify` (which
:meth:`rewrite` calls) or ``idle_poll`` seconds, whichever comes first. A refused append (store shut down, disk full)
is retried after 100 ms, as 4.9.8 does; other errors are logged and the level waits 10 s.

Durability: offsets are saved every ``flush_interval`` seconds (``flushDelayOffsetInterval``, 10 s) and once more at
shutdown, after the loops stopped. A master outside DLedger mode refuses to start with an interval of 0 or less
(:func:`store.services.check_period`); a DLedger leader runs without the periodic save then, as 4.9.8's changeToMaster
logs the schedule's failed ``scheduleAtFixedRate`` after its level tasks were scheduled. A clean restart neither loses
nor repeats a delivery; after a crash the deliveries of the last interval may be repeated (at least once, as in
RocketMQ).
What is saved, and what GET_ALL_DELAY_OFFSET hands a slave (:meth:`confirmed_offsets`), is the progress whose deliveries
end at or below the store's ``confirmed_offset``: in DLedger mode a delivery the leader appended but a majority does not
hold yet is not counted, so a leader change may repeat it but never skips it (4.9.8 gets the same by waiting for each
put).

Ownership: the service reads the store on the Trio thread and is the only writer of ``delayOffset.json``. It delivers
while :meth:`run` runs, which :mod:`broker.role_services` does on a master only (RocketMQ's
``handleScheduleMessageService``); every start reloads ``delayOffset.json``, as 4.9.8's ``start`` does, so a
DLedger member that becomes the leader resumes from what the slave sync last copied. Time is
``store.config.now_ms`` (the store's clock), so store times and due times always come from one clock.
"""

from __future__ import annotations

import logging
from collections import deque
from collections.abc import Callable
from pathlib import Path
from typing import Final

import trio

from broker.persistence import ConfigPersister
from remoting.codec.errors import MessageDecodeError
from remoting.codec.message import MessageRecord, decode_record
from remoting.codec.message_properties import with_properties
from remoting.codec.record_copy import raw_properties, record_from_stored
from remoting.codec.topics import SCHEDULE_TOPIC
from store.errors import MessageIllegalError, PutRefusedError
from store.message_store import MessageStore
from store.metadata_files import DelayOffsetTable, delay_offset_file
from store.results import AppendResult
from store.store_config import parse_delay_levels

__all__ = [
    "PROPERTY_DELAY",
    "PROPERTY_REAL_QID",
    "PROPERTY_REAL_TOPIC",
    "ScheduleMessageService",
]

log = logging.getLogger(__name__)

PROPERTY_DELAY: Final = "DELAY"
PROPERTY_REAL_TOPIC: Final = "REAL_TOPIC"
PROPERTY_REAL_QID: Final = "REAL_QID"
#: The timer properties a delay level overrides: RocketMQ 5's HookUtils.checkIfTimerMessage
#: (broker/src/main/java/org/apache/rocketmq/broker/util/HookUtils.java) clears them from a message with a delay level.
_TIMER_PROPERTIES: Final = frozenset({"TIMER_DELIVER_MS", "TIMER_DELAY_SEC", "TIMER_DELAY_MS"})
#: Deliveries per step before yielding to other tasks, so a backlog of due messages does not starve the broker.
_BATCH: Final = 256
_RETRY_AFTER_REFUSAL: Final = 0.1
_WAIT_AFTER_ERROR: Final = 10.0


class ScheduleMessageService:
    """Delay-level storage rewrite and delivery over ``store``; progress in ``config_dir/delayOffset.json``.

    Life cycle: ``await nursery.start(service.run)`` loads the offsets (blocking file read in a thread; raises
    ConfigFileError for an unreadable file) and starts the level loops; cancelling saves the offsets once more.
    """

    def __init__(
        self,
        store: MessageStore,
        config_dir: Path,
        *,
        delay_levels: str | None = None,
        flush_interval: float = 10.0,
        first_delay: float = 1.0,
        idle_poll: float = 60.0,
    ) -> None:
        self.store = store
        #: level (1-based) -> delay in ms; parsed once (raises ValueError for a bad unit).
        self.levels: dict[int, int] = parse_delay_levels(delay_levels or store.config.message_delay_level)
        self.max_level = max(self.levels, default=0)
        self.offsets: DelayOffsetTable = {}
        self.delivered = 0
        #: ``(end of the last delivery, level, offset)`` per move of a level not yet known to be confirmed.
        self._unconfirmed: deque[tuple[int, int, int]] = deque()
        self._confirmed: DelayOffsetTable = {}
        self._last_end = 0
        self._persister = ConfigPersister(delay_offset_file(config_dir), self._snapshot)
        self._flush_interval = flush_interval
        self._first_delay = first_delay
        self._idle_poll = idle_poll
        self._wakeups = {level: trio.Event() for level in self.levels}
        #: Called with a delivered message's level, topic, queue id and append (the broker's delivery statistics).
        self.on_delivered: Callable[[int, str, int, AppendResult], None] | None = None
        #: Whether :meth:`run` delivers (from its load until its final save): it owns the offsets then.
        self._running = False

    # ---- the send path's seam ------------------------------------------------------------------------------

    def rewrite(self, record: MessageRecord, level: int) -> MessageRecord:
        """The ``DelayRewrite`` seam: ``record`` moved to ``SCHEDULE_TOPIC_XXXX`` queue ``level - 1`` (level clamped
        to the highest), real topic and queue kept as properties, the ``TIMER_*`` times dropped (a delay level wins
        over them, so a delivered copy sent on is not parked in the timer). Wakes the level's loop (it runs after the
        append, since waking does not yield). A level <= 0 or no levels configured returns ``record`` unchanged."""
        if level <= 0 or not self.max_level:
            return record
        level = min(level, self.max_level)
        props = with_properties(
            record.properties,
            {
                PROPERTY_DELAY: str(level),
                PROPERTY_REAL_TOPIC: record.topic,
                PROPERTY_REAL_QID: str(record.queue_id),
            },
            _TIMER_PROPERTIES,
        )
        self.notify(level)
        return MessageRecord(
            topic=SCHEDULE_TOPIC,
            body=record.body,
            queue_id=level - 1,
            flag=record.flag,
            properties=props,
            sys_flag=record.sys_flag,
            born_timestamp=record.born_timestamp,
            born_host=record.born_host,
            store_host=record.store_host,
            reconsume_times=record.reconsume_times,
            prepared_transaction_offset=record.prepared_transaction_offset,
        )

    def notify(self, level: int) -> None:
        """A message was (or is about to be) appended to ``level``'s queue: re-check it. Never blocks."""
        event = self._wakeups.get(level)
        if event is not None:
            event.set()

    # ---- admin view ----------------------------------------------------------------------------------------

    def pending(self, level: int) -> int:
        """Messages of ``level`` stored but not delivered yet."""
        cq = self.store.consume_queues.get((SCHEDULE_TOPIC, level - 1))
        return 0 if cq is None else max(0, cq.max_offset - max(self.offsets.get(level, 0), cq.min_offset))

    def pending_total(self) -> int:
        return sum(self.pending(level) for level in self.levels)

    # ---- life cycle ----------------------------------------------------------------------------------------

    def load(self) -> None:
        """Read ``delayOffset.json`` (or its backup). Blocking; raises ConfigFileError."""
        table = self._persister.load()
        self._reset(self._within_queues(dict(table or {})))

    def _within_queues(self, offsets: DelayOffsetTable) -> DelayOffsetTable:
        """Each configured level's saved progress kept within its recovered queue (Java's correctDelayOffset):
        progress saved past a tail a crash lost would skip the messages written at those offsets after the restart.
        A queue with no files left starts at 0 (Java's findConsumeQueue makes an empty one). The progress of a level
        not configured now is kept as saved (and saved again), as 4.9.8's ``decode``/``encode`` keep the whole table
        (store/src/main/java/org/apache/rocketmq/store/schedule/ScheduleMessageService.java): a restart with fewer
        ``messageDelayLevel`` entries must not make those levels deliver their queues again once restored."""
        corrected = dict(offsets)
        for level, offset in offsets.items():
            if level not in self.levels:
                continue
            cq = self.store.consume_queues.get((SCHEDULE_TOPIC, level - 1))
            corrected[level] = 0 if cq is None else min(max(offset, cq.min_offset), cq.max_offset)
        return corrected

    def adopt_offsets(self, table: DelayOffsetTable) -> None:
        """A slave takes its master's delivery progress (SlaveSynchronize), saved with :meth:`persist`; a slave
        never delivers, so the table only matters once it becomes a master. Ignored while the schedule runs: a sync
        round that began before this DLedger member became the leader hands over a stale table, which would move
        the delivery back (repeats). 4.9.8's ``SlaveSynchronize.syncDelayOffset``
        (broker/src/main/java/org/apache/rocketmq/broker/slave/SlaveSynchronize.java) only writes the file there,
        which the running service's next persist overwrites."""
        if self._running:
            log.info("delay offsets from the master ignored: the schedule runs here")
            return
        self._reset(dict(table))  # every level, as load keeps them
        self._persister.mark_dirty()

    def _reset(self, offsets: DelayOffsetTable) -> None:
        self.offsets, self._confirmed = offsets, dict(offsets)
        self._unconfirmed.clear()

    def confirmed_offsets(self) -> DelayOffsetTable:
        """The progress whose deliveries are all confirmed by the store (see the module docstring)."""
        confirmed, marks = self.store.confirmed_offset, self._unconfirmed
        while marks and marks[0][0] <= confirmed:
            _, level, offset = marks.popleft()
            self._confirmed[level] = offset
        return dict(self._confirmed)

    def _snapshot(self) -> DelayOffsetTable:
        return self.confirmed_offsets()

    async def persist(self) -> None:
        """Save the offsets now (worker thread). Raises ``OSError``."""
        await self._persister.persist()

    async def wait_saved(self) -> None:
        """Return once the offsets as of now are in ``delayOffset.json`` (after the next periodic save at most)."""
        await self._persister.wait_saved()

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        await trio.to_thread.run_sync(self.load)
        self._running = True
        try:
            async with trio.open_nursery() as nursery:
                for level in self.levels:
                    nursery.start_soon(self._run_level, level)
                nursery.start_soon(self._flush_loop)
                task_status.started()
                await trio.sleep_forever()
        finally:
            with trio.CancelScope(shield=True):
                try:
                    await self.persist()
                except OSError:
                    log.exception("final save of delayOffset.json failed")
                finally:
                    self._running = False

    async def _flush_loop(self) -> None:
        if self._flush_interval <= 0:
            log.error(
                "flushDelayOffsetInterval %s ms is illegal: delay offsets are saved at the stop only",
                round(self._flush_interval * 1000),
            )
            return
        while True:
            await trio.sleep(self._flush_interval)
            if self._persister.dirty or self._unconfirmed:
                try:
                    await self.persist()
                except OSError:
                    log.exception("saving delayOffset.json failed; retrying in %.0f s", self._flush_interval)

    async def _run_level(self, level: int) -> None:
        await trio.sleep(self._first_delay)
        while True:
            self._wakeups[level] = trio.Event()
            try:
                wait = self.deliver_due(level)
            except PutRefusedError as exc:
                log.warning("delay level %d: delivery refused (%s); retrying", level, exc)
                wait = _RETRY_AFTER_REFUSAL
            except Exception:
                log.exception("delay level %d: delivery failed", level)
                wait = _WAIT_AFTER_ERROR
            if wait is None:
                with trio.move_on_after(self._idle_poll):
                    await self._wakeups[level].wait()
            elif wait > 0:
                await trio.sleep(wait)
            else:
                await trio.lowlevel.checkpoint()

    def deliver_due(self, level: int) -> float | None:
        """Deliver up to a batch of ``level``'s due messages (synchronously). Returns seconds until the head is due,
        0 when more may be due now, ``None`` when the queue is drained. Raises PutRefusedError from the store (the
        offset stays on the refused message), except MESSAGE_ILLEGAL, a refusal for good: that message is logged
        and skipped."""
        store = self.store
        cq = store.consume_queues.get((SCHEDULE_TOPIC, level - 1))
        if cq is None:
            return None
        offset = max(self.offsets.get(level, 0), cq.min_offset)
        delay = self.levels[level]
        for _ in range(_BATCH):
            entry = cq.entry(offset)
            if entry is None:
                self._moved_over(level, offset)
                return None
            phy, size, due = entry
            now = store.config.now_ms()
            if due > now + delay:  # Java's correctDeliverTimestamp: a time past the level's delay is delivered now
                due = now
            if due > now:
                self._moved_over(level, offset)
                return (due - now) / 1000
            self._deliver_one(level, phy, size)
            offset += 1
            self._advance(level, offset)
        return 0.0

    def _moved_over(self, level: int, offset: int) -> None:
        """Nothing delivered, the head at ``offset`` (past a queue's removed start): recorded for a level in the
        offset table only. 4.9.8's DeliverDelayedMessageTimerTask puts a level into its offsetTable only when it
        delivers (``updateOffset``; store/src/main/java/org/apache/rocketmq/store/schedule/
        ScheduleMessageService.java), and the runtime info lists the table's levels alone; every check starts at the
        queue's minimum offset anyway."""
        if level in self.offsets:
            self._advance(level, offset)

    def _advance(self, level: int, offset: int) -> None:
        if self.offsets.get(level) != offset:
            self.offsets[level] = offset
            self._unconfirmed.append((self._last_end, level, offset))
            self._persister.mark_dirty()

    def _deliver_one(self, level: int, phy: int, size: int) -> None:
        store = self.store
        view = store.look_message_by_offset(phy, size)
        if view is None:
            log.warning("delay level %d: message at %d is gone; skipped", level, phy)
            return
        try:
            msg = decode_record(view)
        except MessageDecodeError as exc:
            log.warning("delay level %d: message at %d does not decode (%s); skipped", level, phy, exc)
            return
        real_topic = msg.properties.get(PROPERTY_REAL_TOPIC)
        try:
            real_qid = int(msg.properties.get(PROPERTY_REAL_QID, ""))
        except ValueError:
            real_qid = -1
        if not real_topic or real_qid < 0:
            log.warning("delay level %d: message at %d has no real topic/queue; skipped", level, phy)
            return
        props = raw_properties(msg)
        try:
            record = record_from_stored(msg, real_topic, real_qid, props, store.store_host)
        except ValueError as exc:
            log.warning("delay level %d: message at %d cannot be rebuilt (%s); skipped", level, phy, exc)
            return
        try:
            appended = store.append(record)
        except MessageIllegalError as exc:  # for good (a retry topic name too long): retrying would block the level
            log.error("delay level %d: message at %d refused by the store (%s); skipped", level, phy, exc)
            return
        self._last_end = appended.end_offset
        self.delivered += 1
        if self.on_delivered is not None:
            self.on_delivered(level, real_topic, real_qid, appended)
