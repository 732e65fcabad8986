"""``TimerStore``: the durable timer's synchronous core (timer messages: RocketMQ 5's ``TIMER_*`` properties,
docs/protocol.md#56-special-properties).

Flow: the send path parks a timer message in ``rmq_sys_wheel_timer`` queue 0 (``REAL_TOPIC``/``REAL_QID`` and
``TIMER_OUT_MS`` = delivery time as properties). :meth:`TimerStore.enqueue` reads that queue from ``enqueueOffset``
and files each message into the wheel: one :class:`~broker.timer.wheel.TimerLog` entry linked into the slot of its
delivery time. :meth:`TimerStore.dequeue` walks every slot whose time has fully passed, oldest
entry first (so messages due together go out in the order they were filed, as in RocketMQ 5), appends each due
message to its real topic and queue and advances ``readMs``. Messages already due when filed are delivered at once,
stamped ``TIMER_ENQUEUE_MS`` Long.MAX_VALUE (never in the wheel, as RocketMQ 5.3.3 marks them).
So a message is delivered no earlier than its time and at most one ``precision`` (plus the loop's wake-up) later.

Roll (RocketMQ 5.3's ``needRoll`` / ``MAGIC_ROLL``): a record whose delivery time lies a roll window
(``timerRollWindowSlot`` slots, at most the wheel's size less :data:`TIMER_BLANK_SLOTS`) or more after its store
time (its *base*) is filed flagged (:data:`~broker.timer.wheel.FLAG_ROLL`) at base + window (base + half the window
when less than a third of a window would be left). When that slot is walked the record is written again to the timer
queue, a new CommitLog record with every property plus ``TIMER_ROLL_TIMES`` (+1), ``TIMER_ENQUEUE_MS`` (the old
record's store time), ``TIMER_DEQUEUE_MS`` and ``TIMER_ROLL_FROM`` (the old record's queue offset, ours, dropped on
delivery), and filed again from there. So no record the timer still needs is older than the window: retention
(``fileReservedTime`` longer than the window) never removes a pending timer. Delete markers roll the same way. The
roll time is a function of the record and the window it was filed with alone, which the crash rebuild relies on:
the checkpoint keeps the window of each range of queue offsets (``rollWindows``), so a ``timerRollWindowSlot``
changed between runs applies to the records filed from then on (a rebuild that worked out an older record's roll time
with a lowered window took it for rolled and dropped it). A record filed beyond the wheel's
reach otherwise (``readMs`` lagging behind its base) is parked in the reach's last slot and filed again in place when
that slot comes due.

Exactness: each delivery moves the walk position (or ``readMs``) in the same synchronous step as its append, and each
filing moves ``enqueueOffset`` with its log entry, so a clean shutdown (:meth:`save_checkpoint` with ``clean``) loses
and repeats nothing (also one written mid-slot by the previous version, which walked a slot newest entry first:
see :class:`TimerCheckpoint`). After a crash the checkpoint is not clean: wheel and log are rebuilt from the timer
queue, skipping the messages that were due before the checkpoint's ``readMs``; deliveries made after that checkpoint
are repeated (at least once, like RocketMQ). Of a rolled timer's copies the rebuild files exactly one: a record
filed before the checkpoint whose roll time lies before its ``readMs`` was rolled (its copy is in the queue) and is
skipped; so is a record of which a copy lies in the queue (it rolled after the checkpoint), whose newest copy is
filed instead, so no timer is ever rolled twice (two crashes in a row then file a single copy too).

Recall (RocketMQ 5.3's delete markers, ``store/src/main/java/org/apache/rocketmq/store/timer/TimerMessageStore.java``):
a timer message carrying ``TIMER_DEL_UNIQKEY`` (``<real topic>+<UNIQ_KEY>``, written by the recall processor) is a
delete marker. It is filed flagged (:data:`~broker.timer.wheel.FLAG_DELETE`, on its log entry and its slot) at its
``TIMER_OUT_MS`` - 1, the time of the message it deletes (a recall handle carries that time + 1), and never counted
as pending nor delivered. Before a flagged slot is walked, its due markers' keys are collected; a message of that
slot whose key is among them is dropped instead of delivered (``recalled``). Markers roll on like messages, live in
the timer log (a clean restart keeps them) and in the timer queue (a crash rebuild files them again).

Confirmed progress (:meth:`TimerStore.confirmed`): the ``(enqueueOffset, readMs)`` pair whose deliveries all end at
or below the store's ``confirmed_offset`` (in DLedger mode: held by a majority). It is what a slave copies
(GET_TIMER_CHECK_POINT) and what a rebuild may skip by, so a leader change repeats deliveries but never skips one.

Nothing per message is held in RAM; the checkpoint (``config/timerCheck.json``) holds offsets, counters and one
number per log segment (the last slot time it feeds, so a segment is deleted once the wheel has passed it).

Ownership: one instance per broker, used on the Trio thread only; :meth:`load`, :meth:`flush` and checkpoint I/O are
blocking. Store refusals (:class:`~store.errors.PutRefusedError`) propagate out of :meth:`dequeue`/:meth:`enqueue`
with the position left on the refused message, so the caller just retries later; at the third refusal in a row of
one put it is logged and dropped unless :attr:`TimerStore.retry_until_success` (RocketMQ 5.3.3's
TimerDequeuePutMessageService with ``timerEnableRetryUntilSuccess`` false, its default). A delivery refused for good
(MESSAGE_ILLEGAL) is logged and dropped at once, as it would hold back every later timer.
"""

from __future__ import annotations

import bisect
import logging
import shutil
from array import array
from collections import deque
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, Final, NamedTuple

import attrs
import orjson

from broker.broker_config import TIMER_LOG_FILE_SIZE
from broker.stats.histograms import CappedHistogram
from broker.timer.wheel import (
    FLAG_DELETE,
    FLAG_ROLL,
    MARKER_UNIT,
    NO_ENTRY,
    PRECISIONS,
    WHEEL_SLOTS,
    Slot,
    TimerLog,
    TimerWheel,
    snap_precision_ms,
    stored_segment_size,
    stored_slots,
)
from remoting.codec.errors import MessageDecodeError
from remoting.codec.message import decode_record, read_record_meta
from remoting.codec.message_properties import find_property
from remoting.codec.record_copy import raw_properties, record_from_stored
from remoting.codec.record_decode import MessageExt
from remoting.codec.topics import TIMER_TOPIC
from store.errors import MessageIllegalError, PutRefusedError
from store.message_store import MessageStore
from store.metadata_files import ConfigFile, ConfigFileError

__all__ = [
    "PROPERTY_TIMER_DELAY_MS",
    "PROPERTY_TIMER_DELAY_SEC",
    "PROPERTY_TIMER_DEL_UNIQKEY",
    "PROPERTY_TIMER_DELIVER_MS",
    "PROPERTY_TIMER_OUT_MS",
    "PROPERTY_TIMER_ROLL_FROM",
    "PROPERTY_TIMER_ROLL_TIMES",
    "SET_LATENCY_BUCKETS_S",
    "TIMER_BLANK_SLOTS",
    "TIMER_ROLL_WINDOW_SLOT",
    "TIMER_TOPIC",
    "TimerCheckpoint",
    "TimerStore",
    "latency_seconds",
]

log = logging.getLogger(__name__)

PROPERTY_TIMER_DELIVER_MS: Final = "TIMER_DELIVER_MS"
PROPERTY_TIMER_DELAY_SEC: Final = "TIMER_DELAY_SEC"
PROPERTY_TIMER_DELAY_MS: Final = "TIMER_DELAY_MS"
PROPERTY_TIMER_OUT_MS: Final = "TIMER_OUT_MS"
PROPERTY_TIMER_DEL_UNIQKEY: Final = "TIMER_DEL_UNIQKEY"
PROPERTY_TIMER_ENQUEUE_MS: Final = "TIMER_ENQUEUE_MS"
PROPERTY_TIMER_DEQUEUE_MS: Final = "TIMER_DEQUEUE_MS"
PROPERTY_TIMER_ROLL_TIMES: Final = "TIMER_ROLL_TIMES"
#: Ours: on a rolled copy, the queue offset of the record it was rolled from (the crash rebuild's link).
PROPERTY_TIMER_ROLL_FROM: Final = "TIMER_ROLL_FROM"
#: Timer-queue entries :meth:`TimerStore.find_copies` judges between two yields.
_COPIES_STEP: Final = 256
_STAMPS: Final = frozenset({PROPERTY_TIMER_ENQUEUE_MS, PROPERTY_TIMER_DEQUEUE_MS, PROPERTY_TIMER_ROLL_FROM})
_ROLL_STAMPS: Final = _STAMPS | {PROPERTY_TIMER_ROLL_TIMES}
#: RocketMQ 5.3's MessageStoreConfig.timerRollWindowSlot default (two days of 1 s slots).
TIMER_ROLL_WINDOW_SLOT: Final = 3600 * 24 * 2
#: RocketMQ 5.3's TimerMessageStore.TIMER_BLANK_SLOTS: the roll window leaves this much of the wheel free.
TIMER_BLANK_SLOTS: Final = 60
#: The ``TIMER_ENQUEUE_MS`` of a message delivered at its filing, its time passed (never in the wheel): Long.MAX_VALUE,
#: as RocketMQ 5.3.3's ``TimerEnqueuePutService.putMessageToTimerWheel`` marks it.
NEVER_ENQUEUED: Final = 2**63 - 1
#: RocketMQ 5.3.3's DefaultStoreMetricsManager.getMetricsView: the buckets (s) of ``rocketmq_delay_message_latency``.
SET_LATENCY_BUCKETS_S: Final = (60, 600, 3600, 12 * 3600, 24 * 3600, 3 * 24 * 3600)
#: RocketMQ 5.3.3's TimerDequeuePutMessageService: a put refused this many times in a row is dropped unless
#: ``timerEnableRetryUntilSuccess``.
PUT_ATTEMPTS: Final = 3


def latency_seconds(ahead_ms: int) -> int | None:
    """``ahead_ms`` in whole seconds as a Java long division truncates it (toward zero: -500 ms is 0), or ``None`` for
    a negative result, which OpenTelemetry's histogram drops (``rocketmq_delay_message_latency``)."""
    seconds = -(-ahead_ms // 1000) if ahead_ms < 0 else ahead_ms // 1000
    return seconds if seconds >= 0 else None


class _Timer(NamedTuple):
    """What filing needs from a timer-queue record: the time to file at (a delete marker's ``TIMER_OUT_MS`` - 1),
    flags, its store time (its roll base) and, for a rolled copy, the queue offset and store time (``TIMER_ROLL_FROM``,
    ``TIMER_ENQUEUE_MS``) of the record it was rolled from (else -1)."""

    time_ms: int
    flags: int
    stored_ms: int
    roll_from: int = -1
    previous_ms: int = -1
    #: its ``REAL_TOPIC`` (the per-topic count of :attr:`TimerStore.timing`)
    topic: str = ""
    #: its born time (``rocketmq_delay_message_latency``)
    born_ms: int = 0


@attrs.frozen
class TimerCheckpoint:
    """``config/timerCheck.json``. ``segments`` maps a log segment's start to the last slot time it feeds.
    An interrupted walk of the slot at ``readMs`` resumes, oldest entry first, at its first entry at or above
    ``walk_pos`` (``walkFrom``) and ends with ``walk_to`` (``walkTo``), or with the slot's newest entry when that is
    NO_ENTRY. A previous version's ``walkPos`` (it walked a slot newest first: the newer entries were delivered)
    converts exactly: from the slot's oldest entry to that position (see :func:`_decode`)."""

    enqueue_offset: int = 0
    read_ms: int = 0
    walk_pos: int = NO_ENTRY
    walk_to: int = NO_ENTRY
    log_end: int = 0
    pending: int = 0
    clean: bool = False
    segments: dict[int, int] = attrs.field(factory=dict)
    #: ``(first queue offset, roll window in slots, precision ms)``, oldest first: the window each record was filed
    #: with (``rollWindows``; see :meth:`TimerStore.window_at`). Empty: the configured one for every record. A
    #: precision of 0 (a previous version's pair) means the checkpoint's.
    windows: tuple[tuple[int, int, int], ...] = ()
    #: The shape wheel and log were written with (``precisionMs``, ``wheelSlots``); 0: not recorded (a previous
    #: version's checkpoint: :meth:`TimerStore.load` reads the shape from the wheel file).
    precision_ms: int = 0
    wheel_slots: int = 0
    #: A crash rebuild still under way (``rebuild``): ``(skip below offset, skip due before ms, rebuild end)``, so a
    #: clean stop in its middle resumes it rather than filing the rest of the queue as new.
    rebuild: tuple[int, int, int] | None = None
    #: ``timingCount``: per real topic, ``(timer messages pending, when that last changed)`` (see
    #: :attr:`TimerStore.timing`); only a clean checkpoint's is read. ``None``: missing (a previous version's file)
    #: or unreadable, so the load counts the wheel's pending entries again (:meth:`TimerStore.find_copies`).
    timing: dict[str, tuple[int, int]] | None = attrs.field(factory=dict)


def roll_window_slots(configured: int, wheel_slots: int) -> int:
    """The roll window in slots: ``timerRollWindowSlot``, or the wheel's size less :data:`TIMER_BLANK_SLOTS` when it
    is larger or below 2 (RocketMQ 5.3's TimerMessageStore constructor; on a wheel of fewer than 240 slots, a test's,
    the blank is a quarter of it)."""
    limit = wheel_slots - min(TIMER_BLANK_SLOTS, wheel_slots // 4)
    return limit if configured > limit or configured < 2 else configured


def resolved_windows(cp: TimerCheckpoint, precision: int) -> tuple[tuple[int, int, int], ...]:
    """``cp``'s windows, a previous version's unrecorded precision read as its own or else ``precision``."""
    return _resolved(cp.windows, cp.precision_ms or precision)


def _resolved(windows: tuple[tuple[int, int, int], ...], precision: int) -> tuple[tuple[int, int, int], ...]:
    """``windows`` with a previous version's unrecorded precision (0) read as ``precision``."""
    return tuple((offset, slots, prec or precision) for offset, slots, prec in windows)


def _live_entries(wheel: TimerWheel, timer_log: TimerLog, cp: TimerCheckpoint) -> array[int]:
    """``deliver_ms, phy_offset, size, flags`` (flattened) of each entry still to process in ``wheel`` as of the
    clean checkpoint ``cp``: the slots from ``readMs`` on, by time, each oldest entry first; of the slot at ``readMs``
    only the rest of an interrupted walk (``walkFrom`` .. ``walkTo``). An entry whose log segment is gone is skipped,
    logged, as the walk would."""
    live: array[int] = array("q")
    for slot in sorted((slot for _, slot in wheel.filled() if slot.slot_ms >= cp.read_ms), key=lambda s: s.slot_ms):
        walking = slot.slot_ms == cp.read_ms and cp.walk_pos != NO_ENTRY
        chain = list(timer_log.walk(cp.walk_to if walking and cp.walk_to != NO_ENTRY else slot.last))
        for entry in reversed(chain):
            if walking and entry.pos < cp.walk_pos:
                continue
            live.extend((entry.deliver_ms, entry.phy_offset, entry.size, entry.flags))
        if chain and chain[-1].prev != NO_ENTRY:
            log.warning(
                "timer: entries of slot %d before log position %d are gone; skipped", slot.slot_ms, chain[-1].pos
            )
    return live


def _encode(cp: TimerCheckpoint) -> bytes:
    return orjson.dumps(
        {
            "enqueueOffset": cp.enqueue_offset,
            "readMs": cp.read_ms,
            "walkFrom": cp.walk_pos,
            "walkTo": cp.walk_to,
            "logEnd": cp.log_end,
            "pending": cp.pending,
            "clean": cp.clean,
            "segments": {str(k): v for k, v in sorted(cp.segments.items())},
            "rollWindows": [list(w) for w in cp.windows],
            "precisionMs": cp.precision_ms,
            "wheelSlots": cp.wheel_slots,
            **({} if cp.rebuild is None else {"rebuild": list(cp.rebuild)}),
            "timingCount": {topic: list(metric) for topic, metric in sorted((cp.timing or {}).items())},
            "timingMarkers": 1,  # the counts take one off per pending delete marker (see _timing_of)
        },
        option=orjson.OPT_INDENT_2,
    )


def _decode(data: bytes) -> TimerCheckpoint:
    try:
        root: Any = orjson.loads(data)
        walk_pos, walk_to = _walk_of(root)
        return TimerCheckpoint(
            enqueue_offset=int(root["enqueueOffset"]),
            read_ms=int(root["readMs"]),
            walk_pos=walk_pos,
            walk_to=walk_to,
            log_end=int(root["logEnd"]),
            pending=int(root["pending"]),
            clean=bool(root.get("clean", False)),
            segments={int(k): int(v) for k, v in dict(root.get("segments", {})).items()},
            windows=tuple((int(w[0]), int(w[1]), int(w[2]) if len(w) > 2 else 0) for w in root.get("rollWindows", ())),
            precision_ms=int(root.get("precisionMs", 0)),
            wheel_slots=int(root.get("wheelSlots", 0)),
            rebuild=None if root.get("rebuild") is None else _triple(root["rebuild"]),
            timing=_timing_of(root),
        )
    except (orjson.JSONDecodeError, KeyError, TypeError, ValueError, AttributeError) as exc:
        raise ConfigFileError(f"timerCheck.json: {exc}") from exc


def _timing_of(root: Any) -> dict[str, tuple[int, int]] | None:
    """The checkpoint's ``timingCount``, or ``None`` when it is missing or unreadable: metrics only, so a bad one never
    makes the timer's own checkpoint unreadable (RocketMQ keeps them in a file of their own, ``timermetrics``). Also
    ``None`` without ``timingMarkers``: a version whose counts did not take a pending delete marker's message off, which
    this one gives back at the marker's slot (:meth:`TimerStore._marker_done`), so they are counted again."""
    if "timingCount" not in root or "timingMarkers" not in root:
        return None
    try:
        return {str(t): (int(m[0]), int(m[1])) for t, m in dict(root["timingCount"]).items()}
    except (KeyError, TypeError, ValueError, IndexError, AttributeError) as exc:
        log.warning("timer: timingCount of timerCheck.json unreadable (%s); counting the wheel again", exc)
        return None


def _filed_before(offset: int, rebuild: tuple[int, int, int] | None) -> int:
    """Below which queue offset the records were filed by an earlier run (their saved roll windows apply): a clean
    checkpoint's ``enqueueOffset``, or, in the middle of a crash rebuild, the crash's offset when higher (the rebuild
    reads the queue again from its start; what it has not judged yet was filed by the crashed run)."""
    return offset if rebuild is None else max(offset, rebuild[0])


def _bump(counts: dict[str, int], key: str) -> None:
    counts[key] = counts.get(key, 0) + 1


def _triple(value: Any) -> tuple[int, int, int]:
    first, second, third = (int(v) for v in value)
    return first, second, third


def _walk_of(root: Any) -> tuple[int, int]:
    """``(walkFrom, walkTo)`` of a checkpoint. The previous version's ``walkPos`` was the next entry of a walk from
    the slot's newest entry back, so what is left is that entry and the older ones: from the oldest (0: the first
    entry at or above it) to ``walkPos``."""
    if "walkFrom" in root:
        return int(root["walkFrom"]), int(root.get("walkTo", NO_ENTRY))
    legacy = int(root.get("walkPos", NO_ENTRY))
    return (NO_ENTRY, NO_ENTRY) if legacy == NO_ENTRY else (0, legacy)


class TimerStore:
    """Wheel, log and checkpoint under ``<storeRoot>/timer`` and ``<config_dir>/timerCheck.json``; see the module
    docstring. ``precision_ms`` is the slot width (snapped to one of RocketMQ's, :func:`snap_precision_ms`), ``slots``
    the wheel size, ``log_file_size`` the log segment size. Wheel and log of another shape (an earlier precision,
    wheel size or log segment size) are migrated at a clean start (:meth:`_migrate`)."""

    def __init__(
        self,
        store: MessageStore,
        config_dir: Path,
        *,
        precision_ms: int = 100,
        slots: int = WHEEL_SLOTS,
        log_file_size: int = TIMER_LOG_FILE_SIZE,
        roll_window_slot: int = TIMER_ROLL_WINDOW_SLOT,
        series_limit: int = 50_000,
    ) -> None:
        self.store = store
        self.root = Path(store.root) / "timer"
        precision_ms = snap_precision_ms(precision_ms)
        self.wheel = TimerWheel(self.root / "timerwheel", slots, precision_ms)
        self.log = TimerLog(self.root / "timerlog", log_file_size)
        self.checkpoint_file = ConfigFile(config_dir / "timerCheck.json", _encode, _decode)
        self.precision_ms = precision_ms
        self.roll_window_slots = roll_window_slots(roll_window_slot, slots)
        #: The window each queue offset range was (or is) filed with: ``(first offset, slots)``, oldest first.
        self._windows: list[tuple[int, int, int]] = []
        self.enqueue_offset = 0
        #: Called with the topic, queue id and queue offset of each message the timer delivered or rolled (the
        #: broker's ``/metrics`` statistics: :meth:`~broker.stats.manager.BrokerStatsManager.record_timer_put`).
        self.on_put: Callable[[str, int, int], None] | None = None
        self.read_ms = 0
        #: The log position of the next entry to process in the slot at ``readMs`` (slots go out oldest entry first),
        #: NO_ENTRY while no slot walk is under way.
        self.walk_pos = NO_ENTRY
        #: The last log position that walk processes (its slot's newer entries went out before an upgrade, see
        #: :class:`TimerCheckpoint`); NO_ENTRY: up to the slot's newest entry.
        self.walk_to = NO_ENTRY
        #: The positions of the slot being walked (see :meth:`_slot_positions`) and that slot's time.
        self._walk: array[int] = array("q")
        self._walk_ms = -1
        self.pending = 0
        #: The :attr:`~broker.timer.wheel.Slot.num` (messages less delete markers) of the wheel's slots from ``readMs``
        #: on (RocketMQ 5.3's ``TimerWheel.getAllNum(currReadTimeMs)``, the runtime info's ``timerCongestNum``), kept
        #: as entries are filed and slots walked: summing it over the wheel (604,800 slots) took the Trio thread
        #: 30-100 ms per GET_BROKER_RUNTIME_INFO.
        self.congest_num = 0
        #: Queue entries filed into the wheel, messages delivered and entries rolled on, since this instance started.
        self.filed = 0
        self.delivered = 0
        self.rolled = 0
        #: Messages dropped by a delete marker (recalled), since this instance started.
        self.recalled = 0
        #: Per real topic, since this instance started: records filed, and messages delivered or rolled on (RocketMQ
        #: 5.3's ``rocketmq_timer_enqueue_total`` / ``rocketmq_timer_dequeue_total``).
        self.enqueued_by_topic: dict[str, int] = {}
        self.dequeued_by_topic: dict[str, int] = {}
        #: Per real topic, since this instance started: each record read for filing, how many seconds after its born
        #: time it is due (RocketMQ 5.3.3's ``rocketmq_delay_message_latency``; :meth:`_record_set_latency`).
        self.set_latency: CappedHistogram[str] = CappedHistogram(SET_LATENCY_BUCKETS_S, series_limit)
        #: Per real topic, ``[timer messages filed and not delivered yet, when that last changed]``: RocketMQ 5.3's
        #: TimerMetrics ``timingCount`` (GET_TIMER_METRICS), kept in the clean checkpoint; a crash rebuild counts
        #: what it files again. A message whose record is gone at its delivery stays counted (as in Java); a delete
        #: marker takes one off its topic from its filing until its slot is walked (as ``addMetric`` in Java).
        self.timing: dict[str, list[int]] = {}
        #: ``[changes of timing since this instance started, when the last was]``: TimerMetrics' ``dataVersion``.
        self.timing_version = [0, 0]
        #: ``(when, store time)`` of the last timer-queue record read for filing (RocketMQ 5.3's
        #: ``lastEnqueueButExpiredTime`` / ``lastEnqueueButExpiredStoreTime``); ``(0, 0)`` before the first.
        self.last_filing = (0, 0)
        #: The delete keys of the slot at ``_deletes_ms`` (collected before it is walked).
        self._deletes: frozenset[str] = frozenset()
        self._deletes_ms = -1
        self._segments: dict[int, int] = {}
        # Crash rebuild: queue entries below this offset that were due before this time were delivered already.
        self._skip_below_offset = 0
        self._skip_due_before = 0
        #: Crash rebuild: the timer queue's end at load; copies rolled by the previous run lie below it.
        self._rebuild_end = 0
        #: Crash rebuild: the queue offset of each record the skip rules do not judge rolled of which a copy lies
        #: below ``_rebuild_end`` (so it was rolled), mapped to its newest such copy (see :meth:`find_copies`).
        self._copies: dict[int, int] = {}
        #: Set by a load that left a crash rebuild to judge: :meth:`find_copies` has work to do.
        self._copies_due = False
        #: Set by a clean load without per-topic counts: the pending entries (as :func:`_live_entries`) to count.
        self._recount: array[int] | None = None
        self._last_end = 0
        #: ``(end of the last delivery, enqueueOffset, readMs)`` after each filing or delivery pass, until confirmed.
        self._marks: deque[tuple[int, int, int]] = deque()
        self._confirmed = (0, 0)
        #: Whether a put the store keeps refusing is retried until taken (``timerEnableRetryUntilSuccess``, read at
        #: each refusal); false: dropped at the :data:`PUT_ATTEMPTS`-th refusal in a row.
        self.retry_until_success: Callable[[], bool] = lambda: False
        #: Refusals in a row of the put under way (one entry's: the caller retries it until it is put or dropped).
        self._refusals = 0

    # ---- life cycle (blocking) -----------------------------------------------------------------------------

    def load(self, now_ms: int | None = None, *, defer_copies: bool = False) -> None:
        """Open wheel and log. A clean checkpoint resumes exactly; otherwise both are rebuilt from the timer queue
        (see the module docstring); without any checkpoint the wheel starts at ``now_ms`` (read from the store's
        clock when not given: pass it when calling from a worker thread). Raises ConfigFileError /
        StoreCorruptError / OSError. With ``defer_copies`` it reads no message of the store (so it may run in a
        worker thread): the caller then runs :meth:`find_copies` on the Trio thread before the first filing."""
        self._load(now_ms)
        if not defer_copies:
            for _ in self.find_copies():
                pass

    def _load(self, now_ms: int | None) -> None:
        cp = self.checkpoint_file.load()
        if cp is not None and cp.clean:
            slots, precision = self._stored_shape(cp)
            log_size = stored_segment_size(self.log.queue.directory) or self.log.queue.file_size
            windows = _resolved(cp.windows, precision)
            if (slots, precision, log_size) != (self.wheel.slots, self.precision_ms, self.log.queue.file_size):
                self._migrate(cp, (slots, precision, log_size), windows)
                return
            self.log.load(cp.log_end)
            self.wheel.load()
            self.enqueue_offset, self.read_ms = cp.enqueue_offset, cp.read_ms
            self.congest_num = self.wheel.count_from(self.read_ms)  # once, in the load's worker thread
            self.walk_pos, self.walk_to = cp.walk_pos, cp.walk_to
            self.pending, self._segments = cp.pending, dict(cp.segments)
            self._take_timing(cp, lambda: _live_entries(self.wheel, self.log, cp))
            self._use_windows(windows, _filed_before(self.enqueue_offset, cp.rebuild))
            self._resume_rebuild(cp.rebuild)
            self._confirmed = self._progress()
            return
        shutil.rmtree(self.root, ignore_errors=True)
        self.log.load(0)
        self.wheel.load()
        if cp is not None:
            log.warning("timer: unclean shutdown; rebuilding the wheel from %s", TIMER_TOPIC)
            below, before = cp.enqueue_offset, cp.read_ms
            if cp.rebuild is not None and cp.rebuild[0] > below:
                # A crash in the middle of a crash rebuild: its saved progress is the rebuild's own (the queue is
                # read again from its start), below the first crash's; the first crash's skip rules still hold (its
                # read time has not moved: nothing is delivered before the queue is filed), else every timer
                # delivered before that crash from the rebuild's progress on goes out again. RocketMQ 5.3 resumes
                # from its checkpoint whatever happened in between
                # (store/src/main/java/org/apache/rocketmq/store/timer/TimerMessageStore.java, ``recover``).
                below, before = cp.rebuild[0], cp.rebuild[1]
            self._skip_below_offset, self._skip_due_before = below, before
            # A slot of this wheel: the checkpoint's may be another precision's (changed since the crash), and an
            # unaligned read time sends the rest of its slot out at once, early.
            self.read_ms = self.wheel.slot_time(before)
            self._rebuild_end = self.store.max_offset_in_queue(TIMER_TOPIC, 0)
            self._use_windows(_resolved(cp.windows, cp.precision_ms or self.precision_ms), below)
            self._copies_due = True
        else:
            self.read_ms = self.wheel.slot_time(self.store.config.now_ms() if now_ms is None else now_ms)
            self._use_windows((), 0)
        self._confirmed = self._progress()

    def _stored_shape(self, cp: TimerCheckpoint) -> tuple[int, int]:
        """``(slots, precision)`` wheel and log were written with: the checkpoint's, else (a previous version's
        checkpoint) the wheel file's size and the precision its filled slots and ``readMs`` agree with (this one's
        first, then RocketMQ's; the previous default, 100, when none does)."""
        if cp.wheel_slots and cp.precision_ms:
            return cp.wheel_slots, cp.precision_ms
        slots = stored_slots(self.wheel.path)
        if slots is None or slots < 2:
            return self.wheel.slots, self.precision_ms
        wheel = TimerWheel(self.wheel.path, slots, PRECISIONS[0])
        wheel.load()
        try:
            sample = [slot for _, slot in zip(range(64), wheel.filled(), strict=False)]
        finally:
            wheel.close()
        for precision in (self.precision_ms, *PRECISIONS):
            if cp.read_ms % precision == 0 and all(
                s.slot_ms % precision == 0 and (s.slot_ms // precision) % slots == i for i, s in sample
            ):
                return slots, precision
        return slots, PRECISIONS[0]

    def _migrate(
        self, cp: TimerCheckpoint, shape: tuple[int, int, int], windows: tuple[tuple[int, int, int], ...]
    ) -> None:
        """A clean start over a wheel and log of another ``shape`` (slots, precision, log segment size; RocketMQ's
        MappedFileQueue.load refuses segments of another size, so its broker does not start after
        ``mappedFileSizeTimerLog`` changed: ours moves them): the entries still pending (those of the slots from
        ``readMs`` on, less what an interrupted walk delivered) are read from the old wheel and log, which are then
        replaced by new ones holding the same entries filed at the same times (a roll or delete marker keeps its
        flags), so no timer is lost or delivered twice. ``readMs`` moves down to the new precision's slot; until the
        walk passes the old ``readMs``, the progress confirmed (and saved unclean) stays the old one, as a crash
        rebuild's (:meth:`_progress`): the lower slot made a crash, or a slave promoted with the copied progress,
        deliver again the timers due from that slot to the old read time. Before the old files go, an unclean
        checkpoint of the clean one's progress is saved: a crash in the middle rebuilds from the timer queue,
        repeating at most what an interrupted walk of the read slot delivered, skipping nothing. Blocking."""
        slots, precision, log_size = shape
        log.warning(
            "timer: wheel of %d slots of %d ms, log in %d-byte segments found, %d of %d ms in %d-byte segments "
            "configured; migrating its pending entries",
            slots,
            precision,
            log_size,
            self.wheel.slots,
            self.precision_ms,
            self.log.queue.file_size,
        )
        old_wheel = TimerWheel(self.wheel.path, slots, precision)
        old_log = TimerLog(self.log.queue.directory, log_size)
        old_wheel.load()
        try:
            old_log.load(cp.log_end)
            live = _live_entries(old_wheel, old_log, cp)
        finally:
            old_wheel.close()
            old_log.close()
        read_ms = self.wheel.slot_time(cp.read_ms)
        # The rebuild after a crash reads on from the slot of this time in its wheel, skipping what was due before it.
        self.save_checkpoint(
            TimerCheckpoint(enqueue_offset=cp.enqueue_offset, read_ms=cp.read_ms, windows=windows, rebuild=cp.rebuild)
        )
        shutil.rmtree(self.root, ignore_errors=True)
        self.log.load(0)
        self.wheel.load()
        self.enqueue_offset, self.read_ms, self.pending = cp.enqueue_offset, read_ms, cp.pending
        self._take_timing(cp, lambda: live)
        for at in range(0, len(live), 4):
            self.file(live[at], live[at + 1], live[at + 2], live[at + 3])
        self._use_windows(windows, _filed_before(self.enqueue_offset, cp.rebuild))
        if read_ms < cp.read_ms:  # a coarser slot: the old read time stays the progress until walked past
            self._skip_below_offset, self._skip_due_before = cp.enqueue_offset, cp.read_ms
            self._rebuild_end = cp.enqueue_offset
        self._resume_rebuild(cp.rebuild)
        self._confirmed = self._progress()

    def _take_timing(self, cp: TimerCheckpoint, live: Callable[[], array[int]]) -> None:
        """The clean checkpoint's per-topic counts; without them (a previous version's file, or unreadable) and with
        timers pending, ``live()``'s entries are counted again by :meth:`find_copies`, which reads their records."""
        if cp.timing is not None:
            self.timing = {topic: list(metric) for topic, metric in cp.timing.items()}
        else:  # even without pending messages: a pending delete marker is counted too
            self._recount = live()

    def _resume_rebuild(self, rebuild: tuple[int, int, int] | None) -> None:
        """Carry on a crash rebuild a clean stop interrupted (:attr:`TimerCheckpoint.rebuild`)."""
        if rebuild is not None:
            self._skip_below_offset, self._skip_due_before, self._rebuild_end = rebuild
            self._copies_due = True

    def find_copies(self) -> Iterator[None]:
        """Before a crash rebuild files the timer queue: note each rolled copy below ``_rebuild_end`` whose original
        the skip rules do not judge rolled (it rolled after the checkpoint), newest copy per original. The rebuild
        then skips such an original and files its newest copy instead: a copy in the queue proves the roll, so the
        original is never rolled a second time (before, it was filed again and rolled into a second copy, and a
        later crash, judging the original rolled, filed both copies: two deliveries), as a roll of RocketMQ 5.3's
        (store/src/main/java/org/apache/rocketmq/store/timer/TimerMessageStore.java, ``MAGIC_ROLL``) is written once.
        Reads the queue from where the rebuild stands (copies lie after their original); holds one entry per roll
        made after the checkpoint. A generator yielding every :data:`_COPIES_STEP` entries, run to its end on the
        Trio thread (the service lets its other tasks run at each yield), as the store's readers are: it read the
        store from the load's worker thread, while retention took segments out of the store and unmapped them
        (a lookup racing that reads another segment's bytes or a released view). Nothing to do unless a
        :meth:`load` left a rebuild to judge. First, when the load found no per-topic counts, it counts the pending
        entries' real topics (:meth:`_count_again`)."""
        yield from self._count_again()
        if not self._copies_due:
            return
        self._copies_due, self._copies = False, {}
        below, before = self._skip_below_offset, self._skip_due_before
        offset = self.enqueue_offset
        while offset < self._rebuild_end:
            cq = self.store.consume_queues.get((TIMER_TOPIC, 0))  # looked up again after each yield
            if cq is None:
                return
            offset = max(offset, cq.min_offset)
            stop = min(offset + _COPIES_STEP, self._rebuild_end)
            while offset < stop:
                entry = cq.entry(offset)
                if entry is None:
                    return
                timer = self._timer_of(entry[0], entry[1])
                if timer is not None and timer.roll_from >= 0:
                    previous_ms, _ = self.roll_target(timer.time_ms, timer.previous_ms, self.window_at(timer.roll_from))
                    if not (timer.roll_from < below and previous_ms < before):
                        self._copies[timer.roll_from] = offset
                offset += 1
            yield

    def _count_again(self) -> Iterator[None]:
        """:attr:`timing` from the records of the entries a clean load left in ``_recount`` (a delete marker takes
        one off, as at filing), yielding every :data:`_COPIES_STEP` entries."""
        live, self._recount = self._recount, None
        if live is None:
            return
        for at in range(0, len(live), 4):
            timer = self._timer_of(live[at + 1], live[at + 2])
            if timer is not None and not self._marker_given_back(live[at], live[at + 3]):
                self._count(timer.topic, -1 if live[at + 3] & FLAG_DELETE else 1)
            if at // 4 % _COPIES_STEP == _COPIES_STEP - 1:
                yield

    def _marker_given_back(self, deliver_ms: int, flags: int) -> bool:
        """Whether an entry is a due marker of the slot whose walk was interrupted (its count given back at the
        walk's start, see :meth:`_deletes_of_slot`)."""
        due = flags & (FLAG_DELETE | FLAG_ROLL) == FLAG_DELETE
        return due and self.walk_pos != NO_ENTRY and self.wheel.slot_time(deliver_ms) == self.read_ms

    def _rebuild_state(self) -> tuple[int, int, int] | None:
        """The crash rebuild's skip rules while it has queue entries left to judge or its read time has not reached
        the crash's (see :meth:`_progress`), else ``None``."""
        below, before, end = self._skip_below_offset, self._skip_due_before, self._rebuild_end
        return (below, before, end) if self.enqueue_offset < max(below, end) or self.read_ms < before else None

    def _use_windows(self, saved: tuple[tuple[int, int, int], ...], start: int) -> None:
        self._windows = list(self.windows_from(saved, start))

    def windows_from(self, saved: tuple[tuple[int, int, int], ...], start: int) -> tuple[tuple[int, int, int], ...]:
        """The saved windows of the records below ``start`` (filed by earlier runs, which a crash rebuild files
        again with them) and the configured one from ``start`` on; entries no retained record needs are dropped."""
        low = self.store.min_offset_in_queue(TIMER_TOPIC, 0)
        kept = [w for w in saved if w[0] < start]
        while len(kept) > 1 and kept[1][0] <= low:
            del kept[0]
        if not kept or kept[-1][1:] != (self.roll_window_slots, self.precision_ms):
            kept.append((start, self.roll_window_slots, self.precision_ms))
        return tuple(kept)

    @property
    def windows(self) -> tuple[tuple[int, int, int], ...]:
        """The checkpoint's ``rollWindows`` (:class:`TimerCheckpoint`)."""
        return tuple(self._windows)

    def window_at(self, offset: int) -> tuple[int, int]:
        """The roll window (slots, slot width) of the timer-queue record at ``offset``: the one it was filed with. A
        changed ``timerRollWindowSlot`` or precision applies to records filed from then on, so the crash rebuild,
        which infers from a record's roll time whether it was rolled, never reads an older record's with the new
        window."""
        windows = self._windows
        i = bisect.bisect_right(windows, (offset, 1 << 62)) - 1
        if not windows:
            return self.roll_window_slots, self.precision_ms
        _, slots, precision = windows[max(i, 0)]
        return slots, precision

    def confirmed(self) -> tuple[int, int]:
        """``(enqueueOffset, readMs)`` as of the last pass whose deliveries the store confirms (module docstring)."""
        confirmed, marks = self.store.confirmed_offset, self._marks
        while marks and marks[0][0] <= confirmed:
            _, offset, read_ms = marks.popleft()
            self._confirmed = (offset, read_ms)
        return self._confirmed

    @property
    def all_confirmed(self) -> bool:
        self.confirmed()
        return not self._marks

    def _progress(self) -> tuple[int, int]:
        """``(enqueueOffset, readMs)`` as progress to confirm. A crash rebuild reads the queue again from its start, so
        its own offset lies below the crash's progress, which still holds (nothing is delivered before the rebuild
        passes it): an unclean checkpoint or a slave (GET_TIMER_CHECK_POINT, RocketMQ 5.3's ``syncTimerCheckPoint`` in
        broker/src/main/java/org/apache/rocketmq/broker/slave/SlaveSynchronize.java) taking the rebuild's offset would
        deliver again what was delivered before the crash from there on. The crash's read time goes with it: the
        rebuild's is that time's slot, lower when the precision is coarser since the crash, and the timers due in
        between, delivered before the crash, would go out again. So the crash's progress holds until the rebuild has
        judged the queue up to its offset and walked past its read time (a rebuild that filed the queue but has not
        walked its first, coarser slot yet confirmed its own offset with that slot: the same timers went out again);
        what the rebuild delivered before then is repeated after another crash, as any delivery after the last
        confirmed progress (RocketMQ 5.3's ``recover`` reads on from the checkpoint's offset and read time,
        store/src/main/java/org/apache/rocketmq/store/timer/TimerMessageStore.java)."""
        below, before = self._skip_below_offset, self._skip_due_before
        if self.read_ms < before or (self.enqueue_offset < below and self.read_ms <= before):
            return below, before
        return self.enqueue_offset, self.read_ms

    def _mark(self) -> None:
        offset, read_ms = self._progress()
        mark = (self._last_end, offset, read_ms)
        if not self._marks or self._marks[-1] != mark:
            self._marks.append(mark)

    def checkpoint(self, clean: bool) -> TimerCheckpoint:
        """The current state (taken on the Trio thread; save it with :meth:`save_checkpoint`). An unclean one carries
        the confirmed progress: only the rebuild after a crash reads it."""
        if not clean:
            offset, read_ms = self.confirmed()
            return TimerCheckpoint(
                offset,
                read_ms,
                NO_ENTRY,
                NO_ENTRY,
                self.log.end,
                self.pending,
                False,
                dict(self._segments),
                self.windows,
                self.precision_ms,
                self.wheel.slots,
                self._rebuild_state(),
            )
        return TimerCheckpoint(
            self.enqueue_offset,
            self.read_ms,
            self.walk_pos,
            self.walk_to,
            self.log.end,
            self.pending,
            clean,
            dict(self._segments),
            self.windows,
            self.precision_ms,
            self.wheel.slots,
            self._rebuild_state(),
            {topic: (metric[0], metric[1]) for topic, metric in self.timing.items()},
        )

    def save_checkpoint(self, cp: TimerCheckpoint) -> None:
        self.checkpoint_file.save(cp)

    def flush(self) -> None:
        self.log.flush()
        self.wheel.flush()

    def close(self) -> None:
        self.log.close()
        self.wheel.close()

    # ---- filing --------------------------------------------------------------------------------------------

    def enqueue(self, budget: int) -> int:
        """File up to ``budget`` new messages of the timer queue; returns how many queue entries were consumed."""
        cq = self.store.consume_queues.get((TIMER_TOPIC, 0))
        if cq is None:
            return 0
        done = 0
        offset = max(self.enqueue_offset, cq.min_offset)
        while done < budget:
            entry = cq.entry(offset)
            if entry is None:
                break
            phy, size, _tags = entry
            timer = self._timer_of(phy, size)
            if timer is not None:
                self.last_filing = (self.store.config.now_ms(), timer.stored_ms)
                self._record_set_latency(timer)
            if timer is not None and not self._rebuilt_away(offset, timer):
                file_ms, roll = self.roll_target(timer.time_ms, timer.stored_ms, self.window_at(offset))
                flags = timer.flags | (FLAG_ROLL if roll else 0)
                counted = not flags & FLAG_DELETE
                self.pending += counted
                self._count(timer.topic, 1 if counted else -1)  # a marker takes its message off at once
                try:
                    self.file(file_ms, phy, size, flags)
                except BaseException:
                    self.pending -= counted
                    self._count(timer.topic, -1 if counted else 1)
                    raise
                self.filed += 1
                _bump(self.enqueued_by_topic, timer.topic)
            offset += 1
            self.enqueue_offset = offset
            done += 1
        self.enqueue_offset = offset
        self._mark()
        return done

    def _record_set_latency(self, timer: _Timer) -> None:
        """Record how far ahead of its born time ``timer`` is due, in whole seconds (Java's long division: a delete
        marker's ``TIMER_OUT_MS`` as stored, one more than its message's), under its real topic: RocketMQ 5.3.3's
        ``TimerMessageStore.enqueue`` records it for every record it reads; OpenTelemetry's histogram drops a
        negative value (a producer clock a second or more ahead of the broker's)."""
        seconds = latency_seconds(timer.time_ms + (1 if timer.flags & FLAG_DELETE else 0) - timer.born_ms)
        if seconds is not None:
            latency = self.set_latency
            latency.add(latency.row(timer.topic), seconds)

    def roll_target(self, time_ms: int, base_ms: int, window: tuple[int, int]) -> tuple[int, bool]:
        """Where a record stored at ``base_ms`` and due at ``time_ms`` is filed with a roll window of ``window``
        (slots, slot width): ``(time_ms, False)``, or its roll time and ``True`` when that lies a roll window or more
        after the base (RocketMQ 5.3's ``doEnqueue``)."""
        slots, prec = window
        left = time_ms - base_ms - slots * prec
        if left < 0:
            return time_ms, False
        if left < slots // 3 * prec:  # too little left for a full window: roll at half, leaving room for the next
            return base_ms + max(slots // 2, 1) * prec, True
        return base_ms + slots * prec, True

    def _rebuilt_away(self, offset: int, timer: _Timer) -> bool:
        """Whether a crash rebuild skips the queue entry at ``offset`` (module docstring): delivered or rolled before
        the checkpoint, rolled after it (a copy of it is in the queue, :meth:`find_copies`), or an older copy of an
        original of which a newer one is in the queue (a previous version's rebuild rolled it twice)."""
        # ``before`` is a read time of the wheel that ran (a slot of its precision), so a record was rolled iff its
        # roll time lies before it: its slot in this wheel, of a coarser precision since, may lie before it unrolled.
        below, before = self._skip_below_offset, self._skip_due_before
        copies = self._copies
        if offset < self._rebuild_end and (offset in copies or copies.get(timer.roll_from, offset) != offset):
            return True
        if offset >= below:
            return False
        target_ms, roll = self.roll_target(timer.time_ms, timer.stored_ms, self.window_at(offset))
        return target_ms < before if roll else timer.time_ms < before

    def _timer_of(self, phy: int, size: int) -> _Timer | None:
        """What filing needs from a timer-queue record (:class:`_Timer`); ``None`` for one without a readable time."""
        view = self.store.look_message_by_offset(phy, size)
        try:
            meta = None if view is None else read_record_meta(view)
            props = None if meta is None else meta.properties
            raw = None if props is None else find_property(props, b"TIMER_OUT_MS")
            if meta is None or props is None or raw is None:
                return None
            deleting = find_property(props, b"TIMER_DEL_UNIQKEY") is not None
            rolled_from = find_property(props, b"TIMER_ROLL_FROM")
            enqueued = find_property(props, b"TIMER_ENQUEUE_MS")
            time_ms = int(raw) - 1 if deleting else int(raw)
            flags = FLAG_DELETE if deleting else 0
            real = find_property(props, b"REAL_TOPIC")
            topic = "" if real is None else bytes(real).decode("utf-8", errors="replace")
            born = meta.born_timestamp
            if rolled_from is None or enqueued is None:
                return _Timer(time_ms, flags, meta.store_timestamp, topic=topic, born_ms=born)
            return _Timer(time_ms, flags, meta.store_timestamp, int(rolled_from), int(enqueued), topic, born)
        except (MessageDecodeError, ValueError):
            log.warning("timer: message at %d has no readable %s; dropped", phy, PROPERTY_TIMER_OUT_MS)
            return None

    def file(self, deliver_ms: int, phy: int, size: int, flags: int = 0) -> None:
        """Put one pending message (already counted in ``pending``) or delete marker (``flags``, never counted) in
        the wheel at ``deliver_ms`` (with :data:`FLAG_ROLL`: its roll time), or deliver (a marker: apply or drop;
        a roll: roll) it at once when its slot has been (or is being) walked."""
        slot_ms = self.wheel.slot_time(deliver_ms)
        if slot_ms < self.read_ms or (slot_ms == self.read_ms and self.walk_pos != NO_ENTRY):
            if flags & FLAG_ROLL:
                self._roll(phy, size, flags)
            elif flags & FLAG_DELETE:
                self._late_marker(slot_ms, phy, size)
            else:  # never in the wheel: RocketMQ 5.3.3's putMessageToTimerWheel marks it so
                deletes = self._deletes if slot_ms == self._deletes_ms else frozenset()
                self._deliver(phy, size, deletes, NEVER_ENQUEUED)
            return
        last_slot = self.read_ms + self.wheel.span_ms - self.precision_ms
        slot = self.wheel.get(min(slot_ms, last_slot))
        pos = self.log.append(slot.last, phy, size, deliver_ms, flags)
        due_marker = flags & FLAG_DELETE if not flags & FLAG_ROLL else 0
        marker = MARKER_UNIT if flags & FLAG_DELETE else 0  # counted in the slot: its num takes one off for it
        self.wheel.put(Slot(slot.slot_ms, pos, slot.entries + 1, (slot.flags | due_marker) + marker))
        self.congest_num += -1 if marker else 1
        segment = pos - pos % self.log.queue.file_size
        if self._segments.get(segment, -1) < slot.slot_ms:
            self._segments[segment] = slot.slot_ms

    # ---- delivery ------------------------------------------------------------------------------------------

    def dequeue(self, now_ms: int, budget: int, lookahead_slots: int = 600) -> float | None:
        """Deliver the slots that have fully passed by ``now_ms`` (up to ``budget`` messages). Returns seconds until
        the next check: 0 when the budget ran out or a slot rolled records (call :meth:`enqueue` to file the copies,
        then this again), ``None`` when nothing is pending."""
        try:
            return self._dequeue(now_ms, budget, lookahead_slots)
        finally:
            self._mark()

    def _dequeue(self, now_ms: int, budget: int, lookahead_slots: int) -> float | None:
        prec = self.precision_ms
        done = 0
        while self.read_ms + prec <= now_ms:
            if self.walk_pos == NO_ENTRY and not self.wheel.get(self.read_ms).entries:
                self._skip_empty(now_ms)
                continue
            if done >= budget:
                return 0.0
            rolled = self.rolled
            done += self._walk_slot(budget - done)
            if self.walk_pos != NO_ENTRY:
                return 0.0
            self.congest_num -= self.wheel.get(self.read_ms).num
            self.wheel.retire(self.read_ms)
            self.read_ms += prec
            self._delete_passed_segments()
            if self.rolled != rolled:  # file the copies before walking on: a marker and its message stay together
                return 0.0
        if not self.pending:
            return None
        nxt = self.wheel.next_non_empty(self.read_ms, lookahead_slots)
        due = (nxt if nxt is not None else self.read_ms + lookahead_slots * prec) + prec
        return max(due - now_ms, 1) / 1000

    def _walk_slot(self, budget: int) -> int:
        """Process up to ``budget`` entries of the slot at ``readMs`` from ``walk_pos`` on, oldest first (RocketMQ's
        dequeue walks a slot back from its newest entry but ``addFirst``s each onto its stack, so a slot goes out in
        filing order): file again what lies beyond the reach, roll what is flagged, deliver the rest. ``walk_pos`` is
        left on the next entry, or NO_ENTRY once the slot is done. Returns how many entries were processed."""
        positions = self._slot_positions()
        self._deletes_of_slot(fresh=self.walk_pos == NO_ENTRY)
        i = 0 if self.walk_pos == NO_ENTRY else bisect.bisect_left(positions, self.walk_pos)
        done = 0
        while i < len(positions) and done < budget:
            self.walk_pos = positions[i]
            entry = self.log.read(positions[i])
            if entry is None:
                log.warning("timer: log entry %d of slot %d is gone; skipped", positions[i], self.read_ms)
            elif self.wheel.slot_time(entry.deliver_ms) > self.read_ms:  # parked beyond the reach: file again
                self.file(entry.deliver_ms, entry.phy_offset, entry.size, entry.flags)
            elif entry.flags & FLAG_ROLL:
                self._roll(entry.phy_offset, entry.size, entry.flags)
            elif not entry.flags & FLAG_DELETE:  # a due marker did its work in _deletes_of_slot
                self._deliver(entry.phy_offset, entry.size, self._deletes)
            done += 1
            i += 1
        if i < len(positions):
            self.walk_pos = positions[i]
        else:
            self.walk_pos, self.walk_to, self._walk, self._walk_ms = NO_ENTRY, NO_ENTRY, array("q"), -1
        return done

    def _slot_positions(self) -> array[int]:
        """The log positions of the slot at ``readMs`` up to ``walk_to``, oldest (lowest) first; collected once per
        slot walk (again when a walk resumes after a restart). A chain cut by a lost log entry keeps the entries after
        the cut."""
        if self._walk_ms != self.read_ms:
            positions: array[int] = array("q")
            pos = self.wheel.get(self.read_ms).last if self.walk_to == NO_ENTRY else self.walk_to
            while pos != NO_ENTRY:
                entry = self.log.read(pos)
                if entry is None:
                    log.warning("timer: log entry %d is gone; older entries of slot %d skipped", pos, self.read_ms)
                    break
                positions.append(pos)
                pos = entry.prev
            positions.reverse()
            self._walk, self._walk_ms = positions, self.read_ms
        return self._walk

    def _deletes_of_slot(self, *, fresh: bool) -> None:
        """Collect the delete keys of the due markers in the slot at ``readMs`` into ``_deletes`` (once per slot,
        again when a walk resumes after a restart); empty unless the slot is flagged. A ``fresh`` walk gives back the
        count each marker took off at filing: the message it deletes is taken off when dropped, as any other."""
        if self._deletes_ms == self.read_ms:
            return
        slot = self.wheel.get(self.read_ms)
        keys: set[str] = set()
        if slot.flags & FLAG_DELETE:
            for entry in self.log.walk(slot.last):
                due = entry.flags & (FLAG_DELETE | FLAG_ROLL) == FLAG_DELETE
                if due and self.wheel.slot_time(entry.deliver_ms) == self.read_ms:
                    key = self._delete_key_of(entry.phy_offset, entry.size)
                    if key is not None:
                        keys.add(key)
                        self._marker_done(key, fresh)
        self._deletes, self._deletes_ms = frozenset(keys), self.read_ms

    def _marker_done(self, key: str, restore: bool = True) -> None:
        """Give back the count the marker of ``key`` (``<real topic>+<UNIQ_KEY>``) took off its topic at filing
        (RocketMQ 5.3.3's dequeue adds it back for a marker that deleted nothing: ``avoidDeleteLose``)."""
        topic = key.partition("+")[0]
        if restore and topic in self.timing:
            self._count(topic, 1)

    def _delete_key_of(self, phy: int, size: int) -> str | None:
        view = self.store.look_message_by_offset(phy, size)
        try:
            raw = None if view is None else find_property(read_record_meta(view).properties, b"TIMER_DEL_UNIQKEY")
        except MessageDecodeError:
            raw = None
        if raw is None:
            log.warning("timer: delete marker at %d is gone or unreadable; ignored", phy)
            return None
        return bytes(raw).decode("utf-8", errors="replace")

    def _late_marker(self, slot_ms: int, phy: int, size: int) -> None:
        """A marker filed after its slot's walk began: it still deletes what that walk has not reached yet."""
        key = self._delete_key_of(phy, size)
        if key is not None:
            self._marker_done(key)  # the count it took off at filing, given back as at its slot's walk
            if slot_ms == self.read_ms and self._deletes_ms == slot_ms:
                self._deletes = self._deletes | {key}
                return
        log.warning("timer: delete marker at %d came after its slot %d was walked; ignored", phy, slot_ms)

    def _skip_empty(self, now_ms: int) -> None:
        """Move ``readMs`` over empty slots: to the next filled slot that has passed, else to ``now``'s slot."""
        prec = self.precision_ms
        passed = (now_ms - self.read_ms) // prec
        nxt = self.wheel.next_non_empty(self.read_ms, min(passed, self.wheel.slots))
        # Every filed slot lies within one turn of the wheel from readMs, so scanning min(passed, slots) slots
        # finds any that has passed.
        self.read_ms = self.read_ms + passed * prec if nxt is None else nxt

    def _delete_passed_segments(self) -> None:
        segments = self._segments
        if len(segments) < 2:
            return
        last_start = self.log.queue.next_start() - self.log.queue.file_size
        for start in sorted(segments):
            if start >= last_start or segments[start] >= self.read_ms:
                break
            self.log.delete_segments_before(start + self.log.queue.file_size)
            del segments[start]

    def _count(self, topic: str, delta: int) -> None:
        """Add ``delta`` to ``topic``'s count in :attr:`timing` (as ``TimerMetrics.addAndGet``, with no floor: a
        roll takes one off until its copy is filed; a topic not counted, deleted since its timers were filed, is not
        listed again by a decrease)."""
        if not delta or not topic or (delta < 0 and topic not in self.timing):
            return
        now = self.store.config.now_ms()
        metric = self.timing.setdefault(topic, [0, now])
        metric[0], metric[1] = metric[0] + delta, now
        self.timing_version[0] += 1
        self.timing_version[1] = now

    def _uncount(self, phy: int) -> int:
        """Take the message at ``phy`` off ``pending``; returns 1, or 0 (logged) when ``pending`` is already 0: a
        checkpoint that undercounts must not drive it negative."""
        if self.pending > 0:
            self.pending -= 1
            return 1
        log.warning("timer: message at %d was not counted as pending; pending left at 0", phy)
        return 0

    def _read(self, phy: int, size: int) -> MessageExt | None:
        """The parked record at ``phy``; ``None`` (logged) when retention removed it or it does not decode."""
        view = self.store.look_message_by_offset(phy, size)
        try:
            msg = None if view is None else decode_record(view)
        except MessageDecodeError:
            msg = None
        if msg is None:
            log.warning("timer: message at %d is gone or unreadable; dropped", phy)
        return msg

    def _roll(self, phy: int, size: int, flags: int) -> None:
        """Write the parked record at ``phy`` (a message, already counted in ``pending``, or a delete marker) again
        to the timer queue with the roll properties (module docstring); :meth:`enqueue` files the copy. A refusal for
        good (MESSAGE_ILLEGAL) drops it, logged; other store errors propagate with nothing changed."""
        store = self.store
        marker = bool(flags & FLAG_DELETE)
        counted = 0 if marker else self._uncount(phy)
        msg = self._read(phy, size)
        if msg is None:
            return
        topic = msg.properties.get("REAL_TOPIC", "")
        metric = 1 if marker else -counted  # a marker gives back its count until its copy is filed
        self._count(topic, metric)
        try:
            times = int(msg.properties.get(PROPERTY_TIMER_ROLL_TIMES, "0")) + 1
        except ValueError:
            times = 1
        stamps = {
            PROPERTY_TIMER_ROLL_TIMES: times,
            PROPERTY_TIMER_ENQUEUE_MS: msg.store_timestamp,
            PROPERTY_TIMER_DEQUEUE_MS: store.config.now_ms(),
            PROPERTY_TIMER_ROLL_FROM: msg.queue_offset,
        }
        kept = raw_properties(msg, _ROLL_STAMPS)
        added = "\x02".join(f"{k}\x01{v}" for k, v in stamps.items())
        try:
            record = record_from_stored(msg, TIMER_TOPIC, 0, f"{kept}\x02{added}" if kept else added, store.store_host)
            appended = store.append(record)
            self._last_end = appended.end_offset
        except (ValueError, MessageIllegalError) as exc:  # for good: retrying would hold back every later timer
            log.error("timer: message at %d cannot be rolled (%s); dropped", phy, exc)
            self._refusals = 0
            return
        except BaseException as exc:
            if isinstance(exc, PutRefusedError) and self._given_up(exc, topic, phy):
                return
            self.pending += counted  # not rolled: the caller retries this entry
            self._count(topic, -metric)
            raise
        self._refusals = 0
        self.rolled += 1
        _bump(self.dequeued_by_topic, topic)
        if self.on_put is not None:
            self.on_put(TIMER_TOPIC, 0, appended.queue_offset)

    def _deliver(self, phy: int, size: int, deletes: frozenset[str], enqueued_ms: int | None = None) -> None:
        """Append one due message to its real topic and queue, unless its ``<real topic>+<UNIQ_KEY>`` is in
        ``deletes`` (recalled: dropped). Its ``TIMER_ENQUEUE_MS`` is ``enqueued_ms``, by default the parked copy's
        store time."""
        store = self.store
        counted = self._uncount(phy)
        msg = self._read(phy, size)
        if msg is None:
            return
        real_topic = msg.properties.get("REAL_TOPIC")
        try:
            real_qid = int(msg.properties.get("REAL_QID", ""))
        except ValueError:
            real_qid = -1
        self._count(real_topic or "", -counted)
        if not real_topic or real_qid < 0:
            log.warning("timer: message at %d has no real topic/queue; dropped", phy)
            return
        uniq_key = msg.properties.get("UNIQ_KEY")
        if deletes and uniq_key is not None and f"{real_topic}+{uniq_key}" in deletes:
            self.recalled += 1
            return
        # As TimerMessageStore.convert: every property kept (TIMER_OUT_MS, REAL_*, TIMER_ROLL_TIMES and the
        # producer's TIMER_* too), stamped with when it was parked (the parked copy's store time) and when delivered.
        enqueued = msg.store_timestamp if enqueued_ms is None else enqueued_ms
        dequeued = store.config.now_ms()
        stamps = f"{PROPERTY_TIMER_ENQUEUE_MS}\x01{enqueued}\x02{PROPERTY_TIMER_DEQUEUE_MS}\x01{dequeued}"
        kept = raw_properties(msg, _STAMPS)
        props = f"{kept}\x02{stamps}" if kept else stamps
        try:
            record = record_from_stored(msg, real_topic, real_qid, props, store.store_host)
        except ValueError as exc:
            log.warning("timer: message at %d cannot be rebuilt (%s); dropped", phy, exc)
            return
        try:
            appended = store.append(record)
            self._last_end = appended.end_offset
        except MessageIllegalError as exc:  # for good: retrying it would hold back every later timer
            log.error("timer: message at %d refused by the store (%s); dropped", phy, exc)
            self._refusals = 0
            return
        except BaseException as exc:
            if isinstance(exc, PutRefusedError) and self._given_up(exc, real_topic, phy):
                return
            self.pending += counted  # not delivered: the caller retries this message
            self._count(real_topic, counted)
            raise
        self._refusals = 0
        self.delivered += 1
        _bump(self.dequeued_by_topic, real_topic)
        if self.on_put is not None:
            self.on_put(real_topic, real_qid, appended.queue_offset)

    def _given_up(self, exc: PutRefusedError, topic: str, phy: int) -> bool:
        """Count a refusal worth retrying of the put of the record at ``phy`` (for ``topic``): True, logged as RocketMQ
        5.3.3's TimerDequeuePutMessageService logs it, when it is the :data:`PUT_ATTEMPTS`-th in a row and
        :attr:`retry_until_success` is off (the caller drops the record); else False (the caller retries it)."""
        self._refusals += 1
        refusals = self._refusals
        if refusals < PUT_ATTEMPTS or self.retry_until_success():
            log.warning("Retrying to process message. Retry count: %d, Msg: %s at %d (%s)", refusals, topic, phy, exc)
            return False
        self._refusals = 0
        log.error("Message processing failed after %d retries. Msg: %s at %d (%s)", refusals, topic, phy, exc)
        return True
