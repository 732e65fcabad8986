"""``TimerMessageService``: timer messages (delivery at an arbitrary time, RocketMQ 5's ``TIMER_*`` properties) on
the broker, around the synchronous :class:`~broker.timer.timer_store.TimerStore`.

Send path (:meth:`TimerMessageService.rewrite`, the send processor's ``TimerRewrite`` seam): a message carrying
``TIMER_DELIVER_MS`` (absolute, ms), ``TIMER_DELAY_SEC`` or ``TIMER_DELAY_MS`` (relative to its arrival) whose time lies
in the future is stored in ``rmq_sys_wheel_timer`` queue 0 with ``REAL_TOPIC``, ``REAL_QID`` and ``TIMER_OUT_MS`` (the
delivery time floored to the precision, one precision earlier for an exact multiple, as RocketMQ 5.3); a time already
past is stored as a normal message, and so is a message that already carries ``TIMER_OUT_MS`` (one a timer delivered,
re-sent with its properties: RocketMQ 5.3's ``HookUtils.checkIfTimerMessage``). A malformed value or a delay beyond
``timerMaxDelaySec`` (3 days) is refused with MESSAGE_ILLEGAL, and so is a recall's delete marker
(``TIMER_DEL_UNIQKEY``) whose time has passed (RocketMQ 5.3's ``HookUtils.transformTimerMessage``). While the timer
runs, a message whose delivery slot counts more than ``timerCongestNumEachSlot`` (its messages less its delete markers,
as Java's slot ``num``) is refused with SYSTEM_ERROR (WHEEL_TIMER_FLOW_CONTROL): at random between once and twice that
many, always from twice (RocketMQ 5.3's ``TimerMessageStore.isReject``); the producer retries.

Service: one loop files new timer messages into the wheel and delivers due slots, sleeping until the next filled slot
is due or a new timer message arrives (:meth:`notify`), a second at most: each wake-up moves the read time over the
empty slots that have passed (RocketMQ 5's ``moveReadTime``), so ``timerReadBehind`` stays current while idle. It
delivers only once every stored timer message is filed, so a delete marker stored before its slot is due is in the
wheel before that slot is walked (a recall answered successfully holds on a classic broker; in DLedger mode the marker
reaches the timer only at commit, so one committed after its slot was walked is late and ignored, though its recall
was answered SUCCESS, as in RocketMQ on a flush or replica timeout). ``timerStopEnqueue`` stops the filing and
``timerStopDequeue`` the walk (the read time stays), each read every round as RocketMQ 5.3's ``TimerMessageStore``
``enqueue``/``dequeue`` read them; with only the filing stopped the walk goes on, as Java's TimerDequeueGetService
does not wait for the filing, so a delete marker stored meanwhile is late for its slot. The checkpoint is saved
every ``flush_interval`` seconds and, after wheel and log are flushed, once more at shutdown marked clean; see
``timer_store`` for what a crash costs.
Runs on a master only (:mod:`broker.role_services` starts and stops it with the role, as RocketMQ 5's
``changeScheduleServiceStatus`` switches the timer's dequeue); every start opens the wheel afresh from
``timerCheck.json``. A refused store append is retried after half a slot (500 ms x precision / 1 s, as RocketMQ
5.3.3's TimerDequeuePutMessageService), dropped at its third refusal in a row unless ``retry_until_success``
(``timerEnableRetryUntilSuccess``); other errors are logged and retried after 10 s. :meth:`stats` is the admin view
(pending count, progress and the rates of the last 10 s).

Failover (DLedger mode): a follower does not run the timer; its slave sync copies the leader's confirmed
``(enqueueOffset, readMs)`` (GET_TIMER_CHECK_POINT, as RocketMQ 5's ``SlaveSynchronize.syncTimerCheckPoint``) into
an unclean ``timerCheck.json`` (:meth:`adopt_checkpoint`). When it becomes the leader the timer rebuilds its wheel
from the replicated timer queue, skipping what the copied progress says was delivered: deliveries made after the
last copy are repeated, none is skipped. A leader stepping down with deliveries a majority does not hold yet saves
the confirmed progress unclean, for the same reason.
"""

from __future__ import annotations

import functools
import logging
import random
from collections import deque
from collections.abc import Callable
from pathlib import Path
from typing import Final, NamedTuple

import orjson
import trio

from broker.broker_config import TIMER_LOG_FILE_SIZE
from broker.timer.timer_store import (
    PROPERTY_TIMER_DEL_UNIQKEY,
    PROPERTY_TIMER_DELAY_MS,
    PROPERTY_TIMER_DELAY_SEC,
    PROPERTY_TIMER_DELIVER_MS,
    PROPERTY_TIMER_OUT_MS,
    PROPERTY_TIMER_ROLL_FROM,
    TIMER_ROLL_WINDOW_SLOT,
    TIMER_TOPIC,
    TimerCheckpoint,
    TimerStore,
    resolved_windows,
)
from broker.timer.wheel import WHEEL_SLOTS
from processors.common import RequestRejected
from remoting.codec.codes import ResponseCode
from remoting.codec.message import MessageRecord
from remoting.codec.message_properties import decode_properties, java_long_wrap, java_parse_long, with_properties
from store.errors import PutRefusedError
from store.message_store import MessageStore
from store.metadata_files import ConfigFileError

__all__ = ["TIMER_DIST_S", "TimerFigures", "TimerMessageService"]

log = logging.getLogger(__name__)
#: Properties only the broker's timer writes: a producer's would make a crash rebuild take its message for a rolled
#: copy (``TIMER_ROLL_FROM``) and skip it.
_BROKER_ONLY: Final = frozenset({PROPERTY_TIMER_ROLL_FROM})

_BUDGET: Final = 2048
#: RocketMQ 5.3.3's TimerDequeuePutMessageService: a refused put is tried again after ``500 ms x precision / 1 s``.
_RETRY_AFTER_REFUSAL: Final = 0.5
_WAIT_AFTER_ERROR: Final = 10.0
_TPS_WINDOW_MS: Final = 10_000
#: RocketMQ 5.3.3's ``TimerMetrics.timerDist``: the periods ahead (seconds) of ``rocketmq_timer_message_snapshot``.
TIMER_DIST_S: Final = (5, 60, 300, 900, 3600, 14400, 28800, 86400)


class TimerFigures(NamedTuple):
    """What ``/metrics`` shows of the timer (:meth:`TimerMessageService.gauges`)."""

    #: timer-queue entries not filed yet, ms from the store time of the last message filed to now (within 2 s of that
    #: filing, else 0), the wheel's entries from the read time on, and the read time's lag in seconds
    #: (``getDequeueBehind``, under a milliseconds unit); zeros but the first while the timer does not run
    lags: tuple[int, int, int, int]
    #: real topic -> timer messages pending (``rocketmq_timing_messages``)
    timing: dict[str, int]
    #: real topic -> filings and dequeues (deliveries and rolls) since the timer started
    enqueued: dict[str, int]
    dequeued: dict[str, int]
    #: bound (s) of each period of :data:`TIMER_DIST_S` -> the wheel's entries that far ahead
    #: (``rocketmq_timer_message_snapshot``); zeros while the timer does not run
    snapshot: dict[int, int]
    #: real topic (``None``: the overflow) -> bucket counts and sum of ``rocketmq_delay_message_latency`` (seconds,
    #: :data:`~broker.timer.timer_store.SET_LATENCY_BUCKETS_S`) since the timer started
    set_latency: dict[str | None, tuple[list[int], int]]


def _flag(setting: bool | Callable[[], bool]) -> bool:
    return setting() if callable(setting) else setting


class _Tps:
    """Filings and dequeues (deliveries and rolls) per second over the last 10 s: RocketMQ 5's perf counters
    ``enqueue_put`` / ``dequeue_put`` read as their last 10 s window's rate (``getLastTps``). The timer loop samples
    the counters at most once a second; a reading compares the counters with the oldest sample of the window."""

    def __init__(self) -> None:
        self._samples: deque[tuple[int, int, int]] = deque()

    def sample(self, now_ms: int, timers: TimerStore) -> None:
        samples = self._samples
        if samples and now_ms - samples[-1][0] < 1000:
            return
        samples.append((now_ms, timers.filed, timers.delivered + timers.rolled))
        while now_ms - samples[0][0] > _TPS_WINDOW_MS:
            samples.popleft()

    def rates(self, now_ms: int, timers: TimerStore) -> tuple[float, float]:
        if not self._samples or now_ms <= self._samples[0][0]:
            return 0.0, 0.0
        then, filed, dequeued = self._samples[0]
        span_s = (now_ms - then) / 1000
        return (timers.filed - filed) / span_s, (timers.delivered + timers.rolled - dequeued) / span_s


class TimerMessageService:
    """The durable timer of one broker; ``nursery.start(service.run)`` loads it (raising ConfigFileError,
    StoreCorruptError or OSError for unusable files) and runs it until cancelled."""

    def __init__(
        self,
        store: MessageStore,
        config_dir: Path,
        *,
        precision_ms: int = 100,
        wheel_slots: int = WHEEL_SLOTS,
        log_file_size: int = TIMER_LOG_FILE_SIZE,
        roll_window_slot: int = TIMER_ROLL_WINDOW_SLOT,
        max_delay_sec: int | Callable[[], int] = 3 * 24 * 3600,
        congest_num_each_slot: int | Callable[[], int] = 2**31 - 1,
        flush_interval: float | Callable[[], float] = 1.0,
        max_sleep: float = 1.0,
        stop_enqueue: bool | Callable[[], bool] = False,
        stop_dequeue: bool | Callable[[], bool] = False,
        retry_until_success: bool | Callable[[], bool] = False,
        enabled: bool | Callable[[], bool] = True,
        series_limit: int = 50_000,
    ) -> None:
        self.store = store
        self._config_dir = config_dir
        self._wheel = (precision_ms, wheel_slots, log_file_size, roll_window_slot)
        #: ``metricsOtelCardinalityLimit``: the label sets of ``rocketmq_delay_message_latency`` kept
        self._series_limit = series_limit
        #: Called with the topic, queue id and queue offset of each message delivered or rolled (``TimerStore.on_put``)
        self.on_put: Callable[[str, int, int], None] | None = None
        self.timers = self._new_timer_store()
        self._max_delay_sec = max_delay_sec
        self._congest_num = congest_num_each_slot
        self._random = random.Random()
        self._flush_interval = flush_interval
        self._max_sleep = max_sleep
        self._stop_enqueue = stop_enqueue
        self._stop_dequeue = stop_dequeue
        self._retry_until_success = retry_until_success
        self._enabled = enabled
        #: Whether the last start found the timer enabled (it runs): a timer turned on later runs from the next start.
        self._started_enabled = _flag(enabled)
        self._tps = _Tps()
        self._wakeup = trio.Event()
        self._loaded = False
        self._file_lock = trio.Lock()

    @property
    def max_delay_ms(self) -> int:
        """The longest accepted delay, read per message: ``max_delay_sec`` may be a callable over the live broker
        config, as RocketMQ 5's ``HookUtils.transformTimerMessage``
        (broker/src/main/java/org/apache/rocketmq/broker/util/HookUtils.java) reads ``timerMaxDelaySec`` from the
        MessageStoreConfig that ``updateBrokerConfig`` changes in place."""
        limit = self._max_delay_sec
        return (limit() if callable(limit) else limit) * 1000

    def _new_timer_store(self) -> TimerStore:
        precision_ms, slots, log_file_size, roll_window_slot = self._wheel
        timers = TimerStore(
            self.store,
            self._config_dir,
            precision_ms=precision_ms,
            slots=slots,
            log_file_size=log_file_size,
            roll_window_slot=roll_window_slot,
            series_limit=self._series_limit,
        )
        timers.on_put = self._on_put
        timers.retry_until_success = lambda: _flag(self._retry_until_success)
        return timers

    def _on_put(self, topic: str, queue_id: int, queue_offset: int) -> None:
        if self.on_put is not None:
            self.on_put(topic, queue_id, queue_offset)

    # ---- the send path's seam ------------------------------------------------------------------------------

    def rewrite(self, record: MessageRecord) -> MessageRecord:
        """``record`` parked in the timer topic when it carries a future ``TIMER_*`` time, else unchanged.
        Raises RequestRejected (MESSAGE_ILLEGAL) for a malformed time or one beyond the maximum delay, and
        (SYSTEM_ERROR) for any ``TIMER_*`` time while ``timerWheelEnable`` is false or was at the timer's start."""
        props = decode_properties(record.properties)
        if record.topic == TIMER_TOPIC or PROPERTY_TIMER_OUT_MS in props:
            return record  # HookUtils.checkIfTimerMessage's double check: parked or delivered by a timer already
        timed = (PROPERTY_TIMER_DELAY_SEC, PROPERTY_TIMER_DELAY_MS, PROPERTY_TIMER_DELIVER_MS)
        if not (_flag(self._enabled) and self._started_enabled) and any(key in props for key in timed):
            # Whatever its time: RocketMQ 5.3's HookUtils.handleScheduleMessage answers WHEEL_TIMER_NOT_ENABLE before
            # reading it, which SendMessageProcessor / EndTransactionProcessor answer SYSTEM_ERROR with this remark
            # (broker/src/main/java/org/apache/rocketmq/broker/util/HookUtils.java).
            raise RequestRejected(
                ResponseCode.SYSTEM_ERROR,
                f"accurate timer message is not enabled, timerWheelEnable is {str(_flag(self._enabled)).lower()}",
            )
        now = self.store.config.now_ms()
        try:
            # RocketMQ 5's HookUtils.transformTimerMessage (broker/src/main/java/org/apache/rocketmq/broker/util/
            # HookUtils.java): a delay before an absolute time, each read with Long.parseLong and summed in Java longs
            # (a delay that overflows wraps to a time before now: no timer, stored at once).
            if PROPERTY_TIMER_DELAY_SEC in props:
                deliver_ms = java_long_wrap(
                    now + java_long_wrap(java_parse_long(props[PROPERTY_TIMER_DELAY_SEC]) * 1000)
                )
            elif PROPERTY_TIMER_DELAY_MS in props:
                deliver_ms = java_long_wrap(now + java_parse_long(props[PROPERTY_TIMER_DELAY_MS]))
            elif PROPERTY_TIMER_DELIVER_MS in props:
                deliver_ms = java_parse_long(props[PROPERTY_TIMER_DELIVER_MS])
            else:
                return record
        except ValueError:
            raise RequestRejected(ResponseCode.MESSAGE_ILLEGAL, self._illegal()) from None
        if deliver_ms <= now and PROPERTY_TIMER_DEL_UNIQKEY in props:
            raise RequestRejected(ResponseCode.MESSAGE_ILLEGAL, self._illegal())
        if deliver_ms <= now:
            return record
        if deliver_ms - now > self.max_delay_ms:
            raise RequestRejected(ResponseCode.MESSAGE_ILLEGAL, self._illegal())
        if PROPERTY_TIMER_DEL_UNIQKEY in props:
            # A delete marker keeps its raw time, its message's TIMER_OUT_MS + 1 (the recall handle's): the timer
            # files it at that time - 1, in its message's slot, whether that message was parked floored or not.
            out_ms, slot_ms = deliver_ms, deliver_ms - 1
        else:
            out_ms = slot_ms = self._floored(deliver_ms)
        self._check_congestion(slot_ms)
        stored = with_properties(
            record.properties,
            {"REAL_TOPIC": record.topic, "REAL_QID": str(record.queue_id), PROPERTY_TIMER_OUT_MS: str(out_ms)},
            drop=_BROKER_ONLY,
        )
        self.notify()
        return MessageRecord(
            topic=TIMER_TOPIC,
            body=record.body,
            queue_id=0,
            flag=record.flag,
            properties=stored,
            sys_flag=record.sys_flag,
            born_timestamp=record.born_timestamp,
            born_host=record.born_host,
            store_host=record.store_host,
            reconsume_times=record.reconsume_times,
        )

    def _floored(self, deliver_ms: int) -> int:
        """The TIMER_OUT_MS of a message due at ``deliver_ms``: floored to the precision, one precision earlier for
        an exact multiple, so its slot is walked as soon as its time has come (RocketMQ 5.3's
        HookUtils.transformTimerMessage, broker/src/main/java/org/apache/rocketmq/broker/util/HookUtils.java)."""
        precision = self.timers.precision_ms
        if deliver_ms % precision == 0:
            return deliver_ms - precision
        return deliver_ms - deliver_ms % precision

    def _check_congestion(self, deliver_ms: int) -> None:
        """Raise RequestRejected (SYSTEM_ERROR) when the slot of ``deliver_ms`` is congested (module docstring); the
        limit is read per message, so ``updateBrokerConfig`` applies at once. Nothing is checked while the timer does
        not run (its wheel is not open)."""
        limit = self._congest_num() if callable(self._congest_num) else self._congest_num
        if not self._loaded:
            return
        wheel = self.timers.wheel
        congest = wheel.get(wheel.slot_time(deliver_ms)).num
        if congest <= limit:
            return
        if congest < 2 * limit and self._random.randrange(1000) <= 1000 * (congest - limit) / (limit + 0.1):
            return
        raise RequestRejected(
            ResponseCode.SYSTEM_ERROR,
            f"timer message is under flow control, max num limit is {2 * limit} or the current value is greater "
            f"than {limit} and less than {2 * limit}, trigger random flow control",
        )

    def _illegal(self) -> str:
        """The one remark of every WHEEL_TIMER_MSG_ILLEGAL (a malformed time, a delay beyond the maximum, a past
        delete marker): RocketMQ 5.3's SendMessageProcessor / EndTransactionProcessor
        (broker/src/main/java/org/apache/rocketmq/broker/processor/SendMessageProcessor.java)."""
        return (
            f"timer message illegal, the delay time should not be bigger than the max delay {self.max_delay_ms}ms; "
            "or if set del msg, the delay time should be bigger than the current time"
        )

    def notify(self) -> None:
        """A timer message was (or is about to be) stored: file it promptly. Never blocks."""
        self._wakeup.set()

    # ---- admin view ----------------------------------------------------------------------------------------

    def stats(self) -> dict[str, str]:
        """Pending timers and progress, as strings for the broker's runtime-info table: RocketMQ 5.3's keys
        (AdminBrokerProcessor.prepareRuntimeInfo; ``timerReadBehind`` in seconds; zeros while the timer does not run)
        and ours (pending, delivered and rolled counts). While ``timerWheelEnable`` is false, RocketMQ's keys are
        zeros whatever the timer holds, as AdminBrokerProcessor.prepareRuntimeInfo answers then
        (broker/src/main/java/org/apache/rocketmq/broker/processor/AdminBrokerProcessor.java)."""
        timers = self.timers
        behind = self._offset_behind()
        enabled = _flag(self._enabled)
        running = self._loaded and enabled
        now = self.store.config.now_ms()
        read_behind_ms = max(0, now - timers.read_ms) if running else 0
        enqueue_tps, dequeue_tps = self._tps.rates(now, timers) if running else (0.0, 0.0)
        return {
            "timerPendingCount": str(timers.pending + behind),
            "timerOffsetBehind": str(behind if enabled else 0),
            "timerReadBehind": str(read_behind_ms // 1000),
            "timerCongestNum": str(timers.congest_num if running else 0),
            "timerEnqueueTps": str(enqueue_tps),
            "timerDequeueTps": str(dequeue_tps),
            "timerDeliveredCount": str(timers.delivered),
            "timerRolledCount": str(timers.rolled),
        }

    def gauges(self) -> TimerFigures | None:
        """RocketMQ 5.3.3's timer figures of ``/metrics`` (store/src/main/java/org/apache/rocketmq/store/metrics/
        DefaultStoreMetricsManager.java, from TimerMessageStore; see :class:`TimerFigures`). ``None`` when the timer
        was disabled at its start: Java registers none then."""
        if not self._started_enabled:
            return None
        timers, now = self.timers, self.store.config.now_ms()
        timing = {topic: max(0, metric[0]) for topic, metric in timers.timing.items()}
        lags = (self._offset_behind(), 0, 0, 0)
        ahead = [0] * len(TIMER_DIST_S)
        if self._loaded and _flag(self._enabled):
            filed_at, stored_ms = timers.last_filing
            enqueue_ms = max(0, now - stored_ms) if now - filed_at < 2000 else 0
            lags = (lags[0], enqueue_ms, timers.congest_num, max(0, now - timers.read_ms) // 1000)
            bounds = [bound * 1000 for bound in TIMER_DIST_S]
            ahead = timers.wheel.entries_ahead(now, bounds, counted_from_ms=timers.read_ms)
        snapshot = dict(zip(TIMER_DIST_S, ahead, strict=True))
        counts = dict(timers.enqueued_by_topic), dict(timers.dequeued_by_topic)
        return TimerFigures(lags, timing, *counts, snapshot, timers.set_latency.figures())

    def metrics_body(self) -> bytes | None:
        """GET_TIMER_METRICS' body, RocketMQ 5.3's TimerMetrics JSON: its ``dataVersion`` and, per real topic, the
        ``count`` of timer messages filed and not delivered yet (0 for a passing negative: rolls and markers move
        it back and forth) and the ``timeStamp`` of its last change; ``None``
        when the timer was disabled at its start (Java has no TimerMessageStore then)."""
        if not self._started_enabled:
            return None
        timers = self.timers
        counter, changed = timers.timing_version
        version = {"counter": counter, "stateVersion": 0, "timestamp": changed or self.store.config.now_ms()}
        timing = {topic: {"count": max(0, n), "timeStamp": at} for topic, (n, at) in timers.timing.items()}
        return orjson.dumps({"dataVersion": version, "timingCount": timing})

    def forget_topic(self, topic: str) -> None:
        """Drop ``topic``'s count of pending timers, as RocketMQ 5.3.3's deleteTopicInBroker calls
        ``TimerMetrics.removeTimingCount``; its timers still pending are delivered unlisted."""
        self.timers.timing.pop(topic, None)

    def _offset_behind(self) -> int:
        """Timer-queue entries not filed into the wheel yet."""
        cq = self.store.consume_queues.get((TIMER_TOPIC, 0))
        return 0 if cq is None else max(0, cq.max_offset - self.timers.enqueue_offset)

    @property
    def pending(self) -> int:
        """Timer messages stored and not delivered yet (filed or still to be filed)."""
        return int(self.stats()["timerPendingCount"])

    # ---- life cycle ----------------------------------------------------------------------------------------

    # ---- failover (see the module docstring) ----------------------------------------------------------------

    def export_checkpoint(self) -> tuple[int, int] | None:
        """The confirmed ``(enqueueOffset, readMs)`` while the timer runs, else ``None`` (nothing to copy)."""
        return self.timers.confirmed() if self._loaded else None

    async def adopt_checkpoint(self, enqueue_offset: int, read_ms: int) -> None:
        """A follower takes its leader's progress, saved unclean (in a worker thread) so the next start rebuilds from
        it, over whatever the file held (an unreadable one is logged and replaced, as RocketMQ 5's
        ``SlaveSynchronize.syncTimerCheckPoint`` overwrites the slave's checkpoint); does nothing while the timer
        runs (it owns the file then). Raises ``OSError``."""
        async with self._file_lock:  # never while a start reads the file
            if not self._loaded:
                await trio.to_thread.run_sync(self._adopt, enqueue_offset, read_ms)

    def adopt_metrics(self, body: bytes) -> bool:
        """A slave takes its master's GET_TIMER_METRICS body (counts and data version) when its version differs, as
        RocketMQ 5.3.3's ``SlaveSynchronize.syncTimerMetrics``; kept in memory only (a start counts afresh), never
        while the timer runs. Returns whether it was taken; raises ``ValueError`` (or a subclass) for a bad body."""
        root = orjson.loads(body)
        version = root["dataVersion"]
        taken = [int(version["counter"]), int(version["timestamp"])]
        timing = {str(t): [int(m["count"]), int(m["timeStamp"])] for t, m in dict(root["timingCount"]).items()}
        if self._loaded or taken == self.timers.timing_version:
            return False
        self.timers.timing, self.timers.timing_version = timing, taken
        return True

    def _adopt(self, enqueue_offset: int, read_ms: int) -> None:
        """The adopted checkpoint keeps the roll windows the file held for the records below the leader's offset (this
        member filed them while it led, or adopted them so) and the configured one from there on: the rebuild when it
        leads judges each record by the window it was filed with (see ``TimerStore.window_at``)."""
        timers, held = self.timers, self._held_checkpoint()
        saved = () if held is None else resolved_windows(held, timers.precision_ms)
        adopted = TimerCheckpoint(
            enqueue_offset=enqueue_offset, read_ms=read_ms, windows=timers.windows_from(saved, enqueue_offset)
        )
        if held is None or (held.enqueue_offset, held.read_ms, held.clean, held.windows) != (
            adopted.enqueue_offset,
            adopted.read_ms,
            adopted.clean,
            adopted.windows,
        ):  # skip writing an identical file
            timers.save_checkpoint(adopted)

    def _held_checkpoint(self) -> TimerCheckpoint | None:
        """The file there, ``None`` when there is none or it does not load."""
        try:
            return self.timers.checkpoint_file.load()
        except ConfigFileError as exc:
            log.warning("timer: replacing the unreadable checkpoint with the master's: %s", exc)
            return None

    # ---- life cycle ----------------------------------------------------------------------------------------

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        self._started_enabled = _flag(self._enabled)
        if not self._started_enabled:
            # timerWheelEnable=false: RocketMQ 5.3's BrokerController creates no TimerMessageStore
            # (broker/src/main/java/org/apache/rocketmq/broker/BrokerController.java); the wheel is not opened.
            log.info("timer: timerWheelEnable is false; the timer does not run")
            task_status.started()
            await trio.sleep_forever()
        timers = self.timers = self._new_timer_store()
        self._tps = _Tps()
        async with self._file_lock:
            # Files in a worker thread; the store's messages (a crash rebuild's search for rolled copies) on the Trio
            # thread, as every reader of the store: retention unmaps its segments meanwhile.
            await trio.to_thread.run_sync(functools.partial(timers.load, self.store.config.now_ms(), defer_copies=True))
            try:
                for _ in timers.find_copies():
                    await trio.lowlevel.checkpoint()
            except BaseException:
                timers.close()
                raise
            self._loaded = True
        try:
            # Until the clean save at shutdown, a crash must be detectable: mark the checkpoint unclean first.
            await trio.to_thread.run_sync(timers.save_checkpoint, timers.checkpoint(False))
            async with trio.open_nursery() as nursery:
                nursery.start_soon(self._flush_loop)
                nursery.start_soon(self._timer_loop)
                task_status.started()
        finally:
            with trio.CancelScope(shield=True):
                all_confirmed, confirmed = timers.all_confirmed, timers.confirmed()
                async with self._file_lock:
                    self._loaded = False
                    await trio.to_thread.run_sync(self._close, timers, all_confirmed, confirmed)

    @staticmethod
    def _close(timers: TimerStore, all_confirmed: bool, confirmed: tuple[int, int]) -> None:
        if all_confirmed:
            cp = timers.checkpoint(True)
        else:  # some deliveries may still be truncated: the next start rebuilds from the confirmed progress
            cp = TimerCheckpoint(enqueue_offset=confirmed[0], read_ms=confirmed[1], windows=timers.windows)
        try:
            timers.flush()
            timers.save_checkpoint(cp)
        except OSError:
            log.exception("timer: final flush or checkpoint failed (the next start rebuilds the wheel)")
        finally:
            timers.close()

    async def _flush_loop(self) -> None:
        while True:
            # Read before each wait (a callable over the live broker config): RocketMQ 5.3's TimerFlushService reads
            # timerFlushIntervalMs from the MessageStoreConfig updateBrokerConfig changes in place
            # (store/src/main/java/org/apache/rocketmq/store/timer/TimerMessageStore.java).
            interval = self._flush_interval
            await trio.sleep(max(0.0, interval() if callable(interval) else interval))
            try:
                await trio.to_thread.run_sync(self.timers.save_checkpoint, self.timers.checkpoint(False))
            except OSError:
                log.exception("timer: saving the checkpoint failed")

    async def _timer_loop(self) -> None:
        timers = self.timers
        while True:
            self._wakeup = trio.Event()
            self._tps.sample(self.store.config.now_ms(), timers)
            try:
                # timerStopEnqueue / timerStopDequeue, read each round: RocketMQ 5.3's TimerMessageStore ``enqueue``
                # and ``dequeue`` return at once while set
                # (store/src/main/java/org/apache/rocketmq/store/timer/TimerMessageStore.java).
                filed = 0 if _flag(self._stop_enqueue) else timers.enqueue(_BUDGET)
                # Deliver only once everything stored is filed (a delete marker must be in its slot before the walk),
                # unless timerStopEnqueue holds the filing.
                if filed >= _BUDGET:
                    due: float | None = 0.0
                elif _flag(self._stop_dequeue):
                    due = None  # readMs stays: the slots go out once turned off
                else:
                    due = timers.dequeue(self.store.config.now_ms(), _BUDGET)
                wait = self._max_sleep if due is None else min(due, self._max_sleep)
            except PutRefusedError:  # logged by the timer store, which drops the put at its third refusal
                wait = timers.precision_ms * _RETRY_AFTER_REFUSAL / 1000
            except Exception:
                log.exception("timer: filing or delivery failed")
                wait = _WAIT_AFTER_ERROR
            if wait == 0:
                await trio.lowlevel.checkpoint()
                continue
            with trio.move_on_after(wait):
                await self._wakeup.wait()
