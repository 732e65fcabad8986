"""The timer's on-disk structures: :class:`TimerLog` (append-only entries) and :class:`TimerWheel` (one slot per
``precision`` ms, ``slots`` of them), after RocketMQ 5's timerlog / timerwheel.

A timer log entry (32 bytes, big-endian) is ``prev int64 | phy_offset int64 | size int32 | flags int32 |
deliver_ms int64``: the CommitLog record of a parked timer message, its delivery time, and the log position of the
previous entry of the same slot (-1 for none). ``flags`` bit 2 (:data:`FLAG_DELETE`, RocketMQ's ``MAGIC_DELETE``)
marks a recall's delete marker; bit 1 (:data:`FLAG_ROLL`, RocketMQ's ``MAGIC_ROLL``) an entry filed at the end of the
roll window rather than at its delivery time (then ``deliver_ms`` holds that roll time). A wheel slot (24 bytes) is
``slot_ms int64 | last int64 | count int32 | flags int32``: the slot's start time, the log position of its newest
entry, how many entries it holds and, in ``flags``, whether one of them is a due delete marker (:data:`FLAG_DELETE`)
plus :data:`MARKER_UNIT` per delete marker filed in it (so :attr:`Slot.num` is RocketMQ's count, a wheel written
before counts none). A slot whose
``slot_ms`` differs from the time asked for is empty (stale slots from an earlier turn of the wheel read as empty, so
a fresh zero-filled wheel needs no initialisation). Each slot is a linked list walked from its newest entry back.

The wheel has :data:`WHEEL_SLOTS` slots by default whatever the precision, as RocketMQ 5.3's (``TIMER_WHEEL_TTL_DAY``
days of seconds: 7 days at ``timerPrecisionMs`` 1000, 16.8 hours at our default 100), and a precision is one of
:data:`PRECISIONS` (:func:`snap_precision_ms`, as ``MessageStoreConfig.setTimerPrecisionMs``).

Neither structure holds messages in RAM: pending timers cost 32 bytes of log (page cache) each and nothing else.
The wheel keeps its slots' counts in RAM (:class:`~broker.timer.slot_counts.SlotCounts`, 8 bytes a slot: 4.8 MB at
604,800, from its first timer on) for the ``/metrics`` figures of timers due per period ahead.

Ownership: one :class:`~broker.timer.timer_store.TimerStore` owns both, on the Trio thread; ``flush`` is blocking
(``msync``) and meant for a worker thread. Errors: ``OSError`` from the file system; a wheel file of the wrong size
raises :class:`~store.errors.StoreCorruptError`.
"""

from __future__ import annotations

import os
import struct
from array import array
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Final, NamedTuple

from broker.timer.slot_counts import SlotCounts
from store.mapped_file import MappedFile, MappedFileQueue, reserve_blocks, segment_paths

LOG_ENTRY: Final = struct.Struct(">qqiiq")
LOG_UNIT: Final = LOG_ENTRY.size
SLOT: Final = struct.Struct(">qqii")
SLOT_UNIT: Final = SLOT.size
NO_ENTRY: Final = -1
#: A log entry's flag: the record is a delete marker (``TIMER_DEL_UNIQKEY``), not a message to deliver.
FLAG_DELETE: Final = 1 << 2
#: A log entry's flag: due at ``deliver_ms``, the record is written again to the timer topic (rolled), not delivered.
FLAG_ROLL: Final = 1 << 1
#: A slot's flags count the delete markers filed in it (rolled ones too) in units of this, above the flag bits.
MARKER_UNIT: Final = 1 << 8
#: RocketMQ 5.3's TimerMessageStore.TIMER_WHEEL_TTL_DAY: the wheel's default slot count is that many days of seconds.
TIMER_WHEEL_TTL_DAY: Final = 7
WHEEL_SLOTS: Final = TIMER_WHEEL_TTL_DAY * 24 * 3600
#: The slot widths RocketMQ 5.3 accepts (``MessageStoreConfig.setTimerPrecisionMs`` snaps any other value down).
PRECISIONS: Final = (100, 200, 500, 1000)
_BLOCK: Final = 1024
#: Slots copied at a time by a scan (96 KiB).
_CHUNK: Final = 4 * _BLOCK
_ZEROS: Final = bytes(_BLOCK * 4)


def snap_precision_ms(value: int) -> int:
    """``value`` snapped down to one of :data:`PRECISIONS` (below 100: 100), as RocketMQ's setter."""
    return max([p for p in PRECISIONS if p <= value], default=PRECISIONS[0])


def stored_slots(path: Path) -> int | None:
    """How many slots the wheel file at ``path`` holds, ``None`` when there is none."""
    try:
        return os.stat(path).st_size // SLOT_UNIT
    except FileNotFoundError:
        return None


def stored_segment_size(directory: Path) -> int | None:
    """The size of the log segments under ``directory`` (the largest, should they differ), ``None`` without any."""
    return max((path.stat().st_size for path in segment_paths(directory)), default=None)


class LogEntry(NamedTuple):
    pos: int
    prev: int
    phy_offset: int
    size: int
    deliver_ms: int
    flags: int = 0


class Slot(NamedTuple):
    slot_ms: int
    last: int
    #: log entries linked into the slot (messages and delete markers)
    entries: int
    #: FLAG_DELETE when a due delete marker is among them, plus MARKER_UNIT per delete marker
    flags: int = 0

    @property
    def num(self) -> int:
        """RocketMQ 5.3.3's slot count (``TimerWheel.getNum``): its entries less its delete markers, as
        ``TimerMessageStore.doEnqueue`` takes one off the count for a marker where it adds one for a message."""
        return self.entries - 2 * (self.flags // MARKER_UNIT)


class TimerLog:
    """Append-only 32-byte entries in segments of ``file_size`` bytes (a multiple of 32) under ``directory``."""

    def __init__(self, directory: Path, file_size: int) -> None:
        if file_size % LOG_UNIT:
            raise ValueError(f"timer log segment size {file_size} is not a multiple of {LOG_UNIT}")
        self.queue = MappedFileQueue(directory, file_size)

    def load(self, end: int) -> None:
        """Map the existing segments; ``end`` (from the checkpoint) is where the next entry goes. Blocking."""
        self.queue.load()
        self.queue.truncate_to(end, erase=False)

    @property
    def end(self) -> int:
        return self.queue.max_offset

    @property
    def min_offset(self) -> int:
        return self.queue.min_offset

    def append(self, prev: int, phy_offset: int, size: int, deliver_ms: int, flags: int = 0) -> int:
        """Write one entry; returns its position."""
        queue = self.queue
        mf = queue.last()
        if mf is None or mf.free < LOG_UNIT:
            if mf is not None:
                mf.wrote_position = mf.file_size
            mf = queue.roll(queue.next_start())
        pos = mf.file_from_offset + mf.wrote_position
        LOG_ENTRY.pack_into(mf.buf, mf.wrote_position, prev, phy_offset, size, flags, deliver_ms)
        mf.wrote_position += LOG_UNIT
        return pos

    def read(self, pos: int) -> LogEntry | None:
        """The entry at ``pos``, or ``None`` when its segment was deleted or it lies past the end."""
        if pos < 0 or pos >= self.end:
            return None
        mf = self.queue.find(pos)
        if mf is None:
            return None
        prev, phy, size, flags, deliver_ms = LOG_ENTRY.unpack_from(mf.buf, pos - mf.file_from_offset)
        return LogEntry(pos, prev, phy, size, deliver_ms, flags)

    def walk(self, pos: int) -> Iterator[LogEntry]:
        """Entries from ``pos`` back along the ``prev`` links."""
        while pos != NO_ENTRY:
            entry = self.read(pos)
            if entry is None:
                return
            yield entry
            pos = entry.prev

    def delete_segments_before(self, offset: int) -> int:
        """Delete whole segments that end at or before ``offset`` (never the last). Returns how many."""
        queue = self.queue
        count = 0
        while len(queue.files) > 1 and queue.files[0].end_offset <= offset:
            count += queue.delete_first(1)
        return count

    def flush(self) -> None:
        for mf in self.queue.flush_snapshot():
            mf.flush()

    def close(self) -> None:
        self.queue.close()


class TimerWheel:
    """``slots`` slots of ``precision`` ms in one mapped file; slot of time ``t`` is ``(t // precision) % slots``."""

    def __init__(self, path: Path, slots: int, precision_ms: int) -> None:
        # Two slots at least: a timer rolled on from the slot being walked must land in another slot.
        if slots < 2 or precision_ms <= 0:
            raise ValueError("the timer wheel needs at least two slots and a positive precision")
        self.slots = slots
        self.precision_ms = precision_ms
        self.path = path
        self._file: MappedFile | None = None
        #: Each slot's :attr:`Slot.num` while its owner counts it (from :meth:`count_from`, through :meth:`put`, until
        #: :meth:`retire`): the figures of :meth:`entries_ahead` without a scan.
        self._counts = SlotCounts(0)

    @property
    def span_ms(self) -> int:
        """How far ahead the wheel reaches; later timers are parked in its last slot and rolled on."""
        return self.slots * self.precision_ms

    def load(self) -> None:
        """Map (creating) the wheel file. Blocking; StoreCorruptError when its size does not match ``slots``.

        Every slot may be written, so the file takes all its blocks first: one a Java broker made is sparse
        (RocketMQ 5.x's TimerWheel sizes it with ``setLength``), and a slot written into a hole on a full disk would
        be a SIGBUS. A disk without them raises ``OSError`` (ENOSPC) here; only the holes are asked for
        (:func:`~store.mapped_file.reserve_blocks`), so a wheel that has them costs microseconds and loads on a nearly
        full disk."""
        self.path.parent.mkdir(parents=True, exist_ok=True)
        mf = MappedFile(self.path, 0, self.slots * SLOT_UNIT)
        try:
            reserve_blocks(mf.fd, 0, mf.file_size, mf.path)
        except OSError:
            mf.close()
            raise
        mf.wrote_position = mf.file_size
        self._file = mf
        self._counts = SlotCounts(self.slots)

    def _buf(self) -> MappedFile:
        if self._file is None:
            raise RuntimeError("the timer wheel is not loaded")
        return self._file

    def slot_time(self, ms: int) -> int:
        return ms - ms % self.precision_ms

    def get(self, slot_ms: int) -> Slot:
        """The slot starting at ``slot_ms``; an empty slot (count 0, last -1) when it holds another turn's data."""
        mf = self._buf()
        stored_ms, last, entries, flags = SLOT.unpack_from(mf.buf, self._index(slot_ms) * SLOT_UNIT)
        if stored_ms != slot_ms:
            return Slot(slot_ms, NO_ENTRY, 0)
        return Slot(slot_ms, last, entries, flags)

    def put(self, slot: Slot) -> None:
        buf, at = self._buf().buf, self._index(slot.slot_ms) * SLOT_UNIT
        SLOT.pack_into(buf, at, slot.slot_ms, slot.last, slot.entries, slot.flags)
        self._counts.set(self._index(slot.slot_ms), slot.num)

    def retire(self, slot_ms: int) -> None:
        """The owner's walk has passed the slot at ``slot_ms``: it no longer counts ahead (its data stays)."""
        self._counts.set(self._index(slot_ms), 0)

    def count_from(self, from_ms: int) -> int:
        """Count the slots from ``from_ms``'s on (the owner's ``readMs``) for :meth:`entries_ahead`, after a load of a
        wheel with data; returns their sum, as :meth:`entries_from`. Blocking: scans the wheel once."""
        start = self.slot_time(from_ms)
        counted = ((index, slot.num) for index, slot in self.filled() if slot.slot_ms >= start)
        self._counts = SlotCounts.of(self.slots, counted)
        return self.counted_total()

    def counted_total(self) -> int:
        """The sum of the counted slots' :attr:`Slot.num` (RocketMQ's ``TimerWheel.getAllNum``)."""
        return self._counts.prefix(self.slots)

    def _counted(self, first: int, count: int) -> Iterator[int]:
        """The indexes in ``[first, first + count)`` (no wrap) whose slot has a non-zero count, ascending; found at C
        speed (a wheel of 604,800 slots is too large to unpack slot by slot): zero blocks of the count column are
        skipped by comparison. The wheel is copied :data:`_CHUNK` slots at a time, as the caller reads on, so a search
        that stops at the first hit (:meth:`next_non_empty`) costs its distance, not the whole range: the timer's
        catch-up after downtime searches once per filled slot on the Trio thread."""
        end = first + count
        for at in range(first, end, _CHUNK):
            raw = array("i")
            with memoryview(self._buf().buf) as view:
                raw.frombytes(view[at * SLOT_UNIT : min(at + _CHUNK, end) * SLOT_UNIT])
            counts = raw[4::6]  # the count field of each slot, in file byte order (zero either way)
            for block in range(0, len(counts), _BLOCK):
                part = counts[block : block + _BLOCK]
                if part.tobytes() != _ZEROS[: len(part) * 4]:
                    yield from (at + block + i for i, n in enumerate(part) if n)

    def _counted_ahead(self, start_ms: int, limit_slots: int) -> Iterator[tuple[int, int, Slot]]:
        """``(slots ahead, index, slot)`` of each slot with a non-zero count among the ``limit_slots`` (one turn at
        most) from the slot of ``start_ms`` on, nearest first; a slot may hold another turn's entries."""
        buf, slots = self._buf().buf, self.slots
        first, todo = self._index(start_ms), min(limit_slots, slots)
        done = 0
        while done < todo:
            run = min(todo - done, slots - first)
            for index in self._counted(first, run):
                yield done + index - first, index, Slot(*SLOT.unpack_from(buf, index * SLOT_UNIT))
            done, first = done + run, 0

    def next_non_empty(self, from_ms: int, limit_slots: int) -> int | None:
        """The first slot time in ``[from_ms, from_ms + limit_slots * precision)`` holding entries, else ``None``."""
        start = self.slot_time(from_ms)
        for ahead, _index, slot in self._counted_ahead(start, limit_slots):
            if slot.slot_ms == start + ahead * self.precision_ms and slot.entries:
                return slot.slot_ms
        return None

    def entries_ahead(self, from_ms: int, bounds_ms: Sequence[int], counted_from_ms: int) -> list[int]:
        """The :attr:`Slot.num` of the slots from ``from_ms``'s on, summed per period: the i-th from
        ``bounds_ms[i - 1]`` (0 for the first) up to ``bounds_ms[i]`` ahead (RocketMQ 5.3.3's
        ``rocketmq_timer_message_snapshot``, DefaultStoreMetricsManager). Slots beyond one turn of the wheel hold
        nothing; slots before ``counted_from_ms`` (the owner's ``readMs``: walked) count none. From the kept counts
        (:meth:`count_from`, :meth:`put`, :meth:`retire`): O(log slots) per bound, whatever the wheel holds."""
        start, prec = self.slot_time(from_ms), self.precision_ms
        since = self.slot_time(counted_from_ms)
        first, end = max(start, since), min(start, since) + self.span_ms  # the counted slots ahead: [first, end)
        cumulative = []
        for bound in bounds_ms:
            stop = min(start + -(-bound // prec) * prec, end)
            cumulative.append(self._counts.circular(self._index(first), (stop - first) // prec) if stop > first else 0)
        return [total - below for total, below in zip(cumulative, [0, *cumulative[:-1]], strict=True)]

    def entries_from(self, from_ms: int) -> int:
        """The sum of :attr:`Slot.num` over the slots from ``from_ms``'s on (RocketMQ 5's ``TimerWheel.getAllNum``):
        every filled slot lies within one turn from there, earlier turns' slots are stale."""
        start = self.slot_time(from_ms)
        return sum(slot.num for _, slot in self.filled() if slot.slot_ms >= start)

    def filled(self) -> Iterator[tuple[int, Slot]]:
        """``(index, slot)`` of every slot with entries, whatever turn it belongs to."""
        buf = self._buf().buf
        for index in self._counted(0, self.slots):
            yield index, Slot(*SLOT.unpack_from(buf, index * SLOT_UNIT))

    def _index(self, slot_ms: int) -> int:
        return (slot_ms // self.precision_ms) % self.slots

    def flush(self) -> None:
        mf = self._buf()
        mf.flushed_position = 0  # the wheel is rewritten in place: flush all of it
        mf.flush()

    def close(self) -> None:
        if self._file is not None:
            self._file.close()
            self._file = None
