"""ConsumeQueue: the per-(topic, queueId) index of 20-byte entries ``phyOffset int64 | size int32 | tagsCode int64``
(docs/protocol.md#63-consumequeue), entry *i* at byte ``i * 20`` of the queue's segment stream.

Offsets here are *logical* (entry numbers). ``min_offset`` is the first retained entry, ``max_offset`` the next one
to be written. A queue first created at a non-zero logical offset pads its first segment with filler entries
(``0, 0x7FFFFFFF, 0``) so positions stay ``i * 20``.

Ownership: one instance per queue, owned by the MessageStore on the Trio thread; flushing follows
:mod:`store.mapped_file`'s thread rules.
"""

from __future__ import annotations

import array
import bisect
import contextlib
import functools
import itertools
import logging
import struct
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Final

import attrs

from store.mapped_file import MappedFile, MappedFileQueue, destroy_segments, segment_name

CQ_STORE_UNIT_SIZE: Final = 20
FILLER_SIZE: Final = 0x7FFFFFFF
ENTRY: Final = struct.Struct(">qiq")
_FILLER: Final = ENTRY.pack(0, FILLER_SIZE, 0)

Entry = tuple[int, int, int]

log = logging.getLogger(__name__)


def names_a_directory(topic: str) -> bool:
    """Whether ``topic`` can name its queue directory (``consumequeue/<topic>/<queueId>``): not empty, ``.`` or
    ``..``, no path separator, no NUL. No send stores another (TopicValidator allows ``[%|a-zA-Z0-9_-]``); the store
    checks it again where a queue is made, so that no name reaching it by another way (a damaged record, a group
    created by an admin request) can write outside the queue directory."""
    return bool(topic) and topic not in (".", "..") and "/" not in topic and "\x00" not in topic


class ConsumeQueue:
    """One queue's entries. Slotted: store/_appender.c reads ``queue``, ``max_offset`` and ``key`` by slot.

    ``key`` is the ``(topic, queue_id)`` tuple the store files this queue and its next offset under, one object for
    both dicts, so the C append's lookups match it by identity rather than comparing tuples."""

    __slots__ = (
        "end_read",
        "entries_per_file",
        "file_size",
        "key",
        "max_offset",
        "min_offset",
        "queue",
        "queue_id",
        "restart_gapped",
        "retired",
        "topic",
    )

    def __init__(self, directory: Path, topic: str, queue_id: int, file_size: int) -> None:
        if file_size % CQ_STORE_UNIT_SIZE:
            raise ValueError(f"ConsumeQueue file size {file_size} is not a multiple of {CQ_STORE_UNIT_SIZE}")
        self.topic = topic
        self.queue_id = queue_id
        self.key = (topic, queue_id)
        self.queue = MappedFileQueue(directory, file_size)
        self.file_size = file_size
        self.entries_per_file = file_size // CQ_STORE_UNIT_SIZE
        self.min_offset = 0
        self.max_offset = 0
        #: Set once recovered, by a store whose entries may skip offsets (a DLedger follower rebuilt from the
        #: leader's first entry never had the ones in between): a write past the end of a queue with no live entry
        #: left starts it afresh there (:meth:`_restart`). Off elsewhere: a classic store's recovery writes into
        #: queues whose end it has not read yet.
        self.restart_gapped = False
        #: Whether :attr:`max_offset` is the queue's end: not between :meth:`load` of existing files and
        #: :meth:`recover`, while recovery rewrites entries in place.
        self.end_read = True
        #: segments a restart unlinked; a flush thread may still hold them, so they are unmapped under the store's
        #: disk lock (:meth:`close_retired`: the next flush plan, :meth:`delete_expired`) or by :meth:`close`
        self.retired: list[MappedFile] = []

    # ---- writing -------------------------------------------------------------------------------------------

    def _file_for(self, logical: int) -> MappedFile | None:
        pos = logical * CQ_STORE_UNIT_SIZE
        if not self.queue.files:
            start = pos - pos % self.file_size
            # A file already there is no longer this queue's: one retention took out and has yet to destroy in its
            # worker thread (the queue destroyed and sent to again meanwhile), or one it could not unlink. Its
            # entries must not come back, and its late destruction must not take the new file (MappedFile.destroy
            # unlinks only the file it maps), so the new file is a new inode.
            with contextlib.suppress(FileNotFoundError):
                (self.queue.dir_for(start) / segment_name(start)).unlink()
            mf = self.queue.roll(start)
            mf.buf[0 : pos - start] = _FILLER * ((pos - start) // CQ_STORE_UNIT_SIZE)
            self.min_offset = self.max_offset = logical
            return mf
        while pos >= self.queue.next_start():
            last = self.queue.last()
            if last is not None:
                last.wrote_position = last.file_size
            self.queue.roll(self.queue.next_start())
        return self.queue.find(pos)

    def make_room(self, first: int, count: int) -> Room | None:
        """Make the files that entries ``first`` .. ``first + count - 1`` go to, so that writing them cannot fail for
        want of one: the store calls it before it writes their records to the CommitLog. Returns ``None`` when they
        exist, else the :class:`Room` made, to give back if the put is refused after all. Raises ``OSError`` (EMFILE,
        ENOSPC) when a file cannot be made, the queue left as it was."""
        files = self.queue.files
        end = (first + count) * CQ_STORE_UNIT_SIZE
        if files and end <= files[-1].end_offset:
            return None
        room = Room(self, len(files), self.min_offset, self.max_offset)
        try:
            if not files:
                self._file_for(first)  # the queue's first file, fillers before ``first``
            while self.queue.next_start() < end:
                self.queue.roll(self.queue.next_start())
        except OSError:
            room.give_back()
            raise
        return room

    def put(self, logical: int, phy_offset: int, size: int, tags_code: int) -> None:
        """Write entry ``logical``. Re-writing an existing entry (recovery) overwrites it in place; with
        :attr:`restart_gapped`, a write past the end of a queue with no live entry restarts it (:meth:`_restart`); one
        past the end of a queue with files, or below the end for a message past the last one's, goes to the end
        (:meth:`_put_at_end`)."""
        if logical > self.max_offset and self.restart_gapped and self.min_offset >= self.max_offset:
            self._restart()
        elif self._misplaced(logical, phy_offset):
            self._put_at_end(logical, phy_offset, size, tags_code)
            return
        self._write(logical, phy_offset, size, tags_code)

    def _misplaced(self, logical: int, phy_offset: int) -> bool:
        """Whether entry ``logical`` has a damaged queue offset: past the end of a queue with files (while recovery
        reads the end, more than a segment past them), or below the end for a message past the last one's."""
        if logical < self.max_offset:
            return self._behind_end(phy_offset)
        files = self.queue.files
        if logical == self.max_offset or not files:
            return False
        return self.end_read or logical * CQ_STORE_UNIT_SIZE >= files[-1].end_offset + self.file_size

    def _write(self, logical: int, phy_offset: int, size: int, tags_code: int) -> None:
        """Write entry ``logical`` at its slot, making its file (fillers before it in a queue's first file)."""
        files = self.queue.files
        mf = files[-1] if files else None
        pos = logical * CQ_STORE_UNIT_SIZE
        if mf is not None and mf.file_from_offset <= pos < mf.file_from_offset + mf.file_size:
            pos -= mf.file_from_offset
        else:
            mf = self._file_for(logical)
            if mf is None:
                return  # below the retained range: the data it would index was deleted
            pos -= mf.file_from_offset
        ENTRY.pack_into(mf.buf, pos, phy_offset, size, tags_code)
        if pos + CQ_STORE_UNIT_SIZE > mf.wrote_position:
            mf.wrote_position = pos + CQ_STORE_UNIT_SIZE
        if logical >= self.max_offset:
            self.max_offset = logical + 1

    def _behind_end(self, phy_offset: int) -> bool:
        """Whether a message at ``phy_offset`` lies past the one the queue's last entry indexes: an entry for it
        below the end has a damaged queue offset, and must not overwrite the entry there."""
        last = self.entry(self.max_offset - 1)
        return last is not None and 0 < last[1] != FILLER_SIZE and phy_offset >= last[0] + last[1]

    def _put_at_end(self, logical: int, phy_offset: int, size: int, tags_code: int) -> None:
        """An entry whose queue offset is damaged (past the queue's end, or below it) goes to the queue's end, making
        at most its next segment, unless its message is already indexed (recovery dispatching it again):
        ConsumeQueue.putMessagePositionInfo appends at the last file's write position, never rewrites an entry, and
        logs the gap. Written at its slot, a near one left empty entries where recovery ends the queue; a far one
        made every segment up to it and ran the process out of descriptors."""
        last = self.queue.files[-1]
        end = max(self.max_offset, last.file_from_offset // CQ_STORE_UNIT_SIZE + _written_entries(last))
        if phy_offset + size <= self.physical_end_on_disk():
            log.warning("%s-%d: entry for offset %d (phy %d) already built, skipped", *self.key, logical, phy_offset)
            return
        log.error("[BUG]logic queue order maybe wrong, %s-%d: entry for offset %d written at the queue's end %d",
                  *self.key, logical, end)  # fmt: skip
        self._write(end, phy_offset, size, tags_code)

    def _restart(self) -> None:
        """Drop every segment (unlinked now, unmapped later: see :attr:`retired`): the write that follows starts a
        fresh segment at its offset, fillers before it in that segment only (:meth:`_file_for`), instead of the
        offsets in between written one by one."""
        for mf in self.queue.files:
            with contextlib.suppress(FileNotFoundError):
                mf.path.unlink()
            self.retired.append(mf)
        self.queue.files.clear()

    def put_batch(self, first: int, entries: list[Entry]) -> None:
        """Write entries ``first``, ``first + 1``, ... (one batch): a single ``pack_into`` when they all land in the
        newest segment (the common case), else entry by entry through :meth:`put`."""
        files = self.queue.files
        mf = files[-1] if files else None
        pos = first * CQ_STORE_UNIT_SIZE
        end = pos + len(entries) * CQ_STORE_UNIT_SIZE
        gap = first != self.max_offset
        if mf is None or gap or not mf.file_from_offset <= pos < end <= mf.end_offset:
            for logical, (phy, size, tags) in enumerate(entries, first):
                self.put(logical, phy, size, tags)
            return
        pos -= mf.file_from_offset
        _entries_struct(len(entries)).pack_into(mf.buf, pos, *itertools.chain.from_iterable(entries))
        if pos + len(entries) * CQ_STORE_UNIT_SIZE > mf.wrote_position:
            mf.wrote_position = pos + len(entries) * CQ_STORE_UNIT_SIZE
        if first + len(entries) > self.max_offset:
            self.max_offset = first + len(entries)

    def put_packed(self, first: int, data: bytes) -> None:
        """Write entries ``first``, ``first + 1``, ... already packed as the file holds them (``len(data)`` a
        multiple of 20, e.g. from :mod:`remoting.codec.record_batch`): one slice write when they all land in the
        newest segment, else entry by entry through :meth:`put`."""
        files = self.queue.files
        mf = files[-1] if files else None
        pos = first * CQ_STORE_UNIT_SIZE
        end = pos + len(data)
        gap = first != self.max_offset
        if mf is None or gap or not mf.file_from_offset <= pos < end <= mf.end_offset:
            for logical, (phy, size, tags) in enumerate(ENTRY.iter_unpack(data), first):
                self.put(logical, phy, size, tags)
            return
        pos -= mf.file_from_offset
        mf.buf[pos : pos + len(data)] = data
        if pos + len(data) > mf.wrote_position:
            mf.wrote_position = pos + len(data)
        count = len(data) // CQ_STORE_UNIT_SIZE
        if first + count > self.max_offset:
            self.max_offset = first + count

    # ---- reading -------------------------------------------------------------------------------------------

    def entry(self, logical: int) -> Entry | None:
        if not self.min_offset <= logical < self.max_offset:
            return None
        mf = self.queue.find(logical * CQ_STORE_UNIT_SIZE)
        if mf is None:
            return None
        phy, size, tags = ENTRY.unpack_from(mf.view, logical * CQ_STORE_UNIT_SIZE - mf.file_from_offset)
        return phy, size, tags

    def entries(self, start: int, max_count: int) -> list[Entry] | None:
        """Up to ``max_count`` entries from ``start``, only from the segment holding ``start`` (as Java reads one
        buffer per pull). ``None`` when that segment is gone (OFFSET_FOUND_NULL)."""
        found = self.iter_entries(start, max_count)
        return None if found is None else list(found)

    def iter_entries(self, start: int, max_count: int) -> Iterator[Entry] | None:
        """:meth:`entries` unpacked lazily, for a reader that stops early: a pull scans up to 800 entries but
        usually takes 32, and building the 800 tuples was a third of the broker's pull time. The iterator holds a
        view of the mapped segment: consume it (or drop it) before yielding to other tasks."""
        mf = self.queue.find(start * CQ_STORE_UNIT_SIZE)
        if mf is None:
            return None
        first = start * CQ_STORE_UNIT_SIZE - mf.file_from_offset
        end_logical = min(self.max_offset, start + max_count, (mf.end_offset // CQ_STORE_UNIT_SIZE))
        last = first + (end_logical - start) * CQ_STORE_UNIT_SIZE
        return ENTRY.iter_unpack(mf.view[first:last])

    def count_matching(
        self, start: int, end: int, matches: Callable[[int], bool], max_scan: int, max_matches: int
    ) -> tuple[int, int]:
        """(matched, scanned) entries of ``[start, end)`` whose tags code ``matches``, the scan stopping after
        ``max_scan`` entries, at the entry that makes more than ``max_matches`` match, or at a missing segment;
        entries below the queue's first are skipped. Reads the tags codes a chunk at a time (a 20,000-entry scan,
        the most a lag estimate makes, costs about 1.3 ms)."""
        matched = scanned = 0
        offset = max(start, self.min_offset)
        end = min(end, self.max_offset, offset + max_scan)
        while offset < end:
            mf = self.queue.find(offset * CQ_STORE_UNIT_SIZE)
            if mf is None:
                break
            first = offset * CQ_STORE_UNIT_SIZE - mf.file_from_offset
            stop = min(end, mf.end_offset // CQ_STORE_UNIT_SIZE)
            if stop <= offset:
                break
            for tags in _tags_codes(mf.view[first : first + (stop - offset) * CQ_STORE_UNIT_SIZE]):
                hits = list(map(matches, tags))
                found = sum(hits)
                if matched + found > max_matches:
                    for hit in hits:
                        scanned += 1
                        matched += hit
                        if matched > max_matches:
                            return matched, scanned
                matched += found
                scanned += len(hits)
            offset = stop
        return matched, scanned

    def sizes_total(self, start: int, end: int) -> int:
        """Sum of the record sizes of entries ``[start, end)`` that are still retained (statistics read it for the
        bytes stored since their last look). Reads whole segments' slices in C: no tuple per entry."""
        total = 0
        logical = max(start, self.min_offset)
        end = min(end, self.max_offset)
        while logical < end:
            mf = self.queue.find(logical * CQ_STORE_UNIT_SIZE)
            if mf is None:
                logical = self.next_file_start(logical)
                continue
            stop = min(end, mf.end_offset // CQ_STORE_UNIT_SIZE)
            total += sum(_entry_sizes(mf, logical, stop))
            logical = stop
        return total

    def sizes_within(self, ranges: list[tuple[int, int]]) -> int:
        """:meth:`sizes_total` summed over ``ranges`` (sorted, disjoint ``[start, end)`` pairs), reading each segment
        once for all of them: the statistics take the broker's own puts, often single entries between others' sends,
        out of the bytes stored every second."""
        total = 0
        if not ranges:
            return total
        logical = max(ranges[0][0], self.min_offset)
        end = min(ranges[-1][1], self.max_offset)
        while logical < end:
            mf = self.queue.find(logical * CQ_STORE_UNIT_SIZE)
            if mf is None:
                logical = self.next_file_start(logical)
                continue
            stop = min(end, mf.end_offset // CQ_STORE_UNIT_SIZE)
            low = bisect.bisect_right(ranges, logical, key=_range_end)  # the first range ending after ``logical``
            high = bisect.bisect_left(ranges, stop, key=_range_start)  # past the last one starting before ``stop``
            if low < high:
                first = max(logical, ranges[low][0])
                sizes = _entry_sizes(mf, first, stop)
                pieces = ranges[low:high]
                pieces[0] = (first, pieces[0][1])
                pieces[-1] = (pieces[-1][0], min(pieces[-1][1], stop))
                total += sum(map(sizes.__getitem__, [a - first for a, b in pieces if b - a == 1]))
                total += sum(sum(sizes[a - first : b - first]) for a, b in pieces if b - a > 1)
            logical = stop
        return total

    def next_file_start(self, logical: int) -> int:
        """The first logical offset of the segment after the one holding ``logical``."""
        return logical + self.entries_per_file - logical % self.entries_per_file

    def offset_by_time(
        self, timestamp: int, store_time: Callable[[int, int], int | None], boundary: str | None = None
    ) -> int:
        """4.9's answer without ``boundary``: the entry whose message store time equals ``timestamp``, else the closer
        neighbour; before all -> first entry, after all -> last entry, empty -> 0. With RocketMQ 5's ``LOWER`` or
        ``UPPER`` see :meth:`_bound_by_time` (docs/protocol.md#713-search-by-timestamp). ``store_time(phy, size)``
        reads the log."""
        high = self.max_offset - 1
        first_valid = self._first_with_message(store_time)
        upper = boundary is not None and boundary.upper() == "UPPER"
        if first_valid is None:
            if boundary is None:
                return 0
            # Every message gone: the last entry's store time (-1) reads as before any time (ConsumeQueue.java
            # binarySearchInQueueByTime), LOWER the max offset and UPPER the last entry, kept within the queue.
            return max(self.max_offset - 1 if upper else self.max_offset, self.min_offset, 0)
        if boundary is not None:
            return self._bound_by_time(timestamp, store_time, first_valid, upper)
        lo, hi = first_valid, high
        left: tuple[int, int] | None = None
        right: tuple[int, int] | None = None
        while lo <= hi:
            mid = (lo + hi) // 2
            e = self.entry(mid)
            ts = store_time(e[0], e[1]) if e is not None else None
            if ts is None:
                lo = mid + 1
                continue
            if ts == timestamp:
                return mid
            if ts < timestamp:
                left = (mid, ts)
                lo = mid + 1
            else:
                right = (mid, ts)
                hi = mid - 1
        if left is None:
            return right[0] if right is not None else first_valid
        if right is None:
            return left[0]
        return right[0] if abs(timestamp - left[1]) > abs(timestamp - right[1]) else left[0]

    def _first_with_message(self, store_time: Callable[[int, int], int | None]) -> int | None:
        """The first entry that is no filler and whose message is still in the CommitLog, ``None`` when there is none.
        Retention deletes the CommitLog from its start and fillers only pad a queue's start, so the entries without a
        message form a prefix: bisect it, as Java's search moves right past entries below the CommitLog's minimum
        (store/src/main/java/org/apache/rocketmq/store/ConsumeQueue.java getOffsetInQueueByTime). The queue's minimum
        trails the CommitLog's until CleanConsumeQueueService's next pass; walking that prefix entry by entry read
        every gone entry on the event loop."""
        lo, hi = self.min_offset, self.max_offset
        while lo < hi:
            mid = (lo + hi) // 2
            e = self.entry(mid)
            if e is None or e[1] == FILLER_SIZE or store_time(e[0], e[1]) is None:
                lo = mid + 1
            else:
                hi = mid
        return lo if lo < self.max_offset else None

    def _bound_by_time(
        self, timestamp: int, store_time: Callable[[int, int], int | None], first_valid: int, upper: bool
    ) -> int:
        """RocketMQ 5's boundaries (``ConsumeQueue.getOffsetInQueueByTime(timestamp, boundaryType)``): ``LOWER`` is
        the first entry stored at or after ``timestamp`` (the max offset when all are before it), ``UPPER`` the last
        one stored at or before it (when all are after it, the entry before the first whose message is left, at least
        the min offset: RocketMQ 5 keeps the answer within the queue's min and max offsets, store/src/main/java/org/
        apache/rocketmq/store/queue/ConsumeQueueStore.java getOffsetInQueueByTime). Store times grow along a queue."""
        lo, hi = first_valid, self.max_offset
        while lo < hi:  # the first entry past the boundary: time > timestamp (UPPER) or >= (LOWER)
            mid = (lo + hi) // 2
            e = self.entry(mid)
            ts = store_time(e[0], e[1]) if e is not None and e[1] != FILLER_SIZE else None
            if ts is None or ts < timestamp or (upper and ts == timestamp):
                lo = mid + 1
            else:
                hi = mid
        if not upper:
            return lo
        # Before every retained message: the entry just before the first one left, the last gone one Java's search
        # moved right past (its left neighbour, store/src/main/java/org/apache/rocketmq/store/ConsumeQueue.java
        # binarySearchInQueueByTime), or the min offset when nothing is gone (the 0 it answers, clamped).
        return max(lo - 1, self.min_offset)

    # ---- recovery and retention ----------------------------------------------------------------------------

    def load(self) -> None:
        self.queue.load()
        self.end_read = not self.queue.files

    def physical_end_on_disk(self) -> int:
        """Where the message of the last entry in the files ends in the CommitLog, -1 when they hold none; read
        before :meth:`recover` (Java's ``ConsumeQueue.getMaxPhysicOffset`` once the queue's files are recovered)."""
        for mf in reversed(self.queue.files):
            n = _written_entries(mf)
            if n > 0:
                phy, size, _tags = ENTRY.unpack_from(mf.view, (n - 1) * CQ_STORE_UNIT_SIZE)
                if 0 < size != FILLER_SIZE:
                    return int(phy + size)
        return -1

    def recover(self, commit_log_min: int, commit_log_end: int, erase: bool = True) -> None:
        """Find the last valid entry (size > 0 and its message below ``commit_log_end``), erase what follows it and
        set min/max. Written entries form a prefix of the stream and their physical offsets grow, so this is a
        C-speed search for the first all-zero entry plus a short walk back over entries past the log's end."""
        end_logical = self.queue.files[0].file_from_offset // CQ_STORE_UNIT_SIZE if self.queue.files else 0
        for mf in reversed(self.queue.files):
            base = mf.file_from_offset // CQ_STORE_UNIT_SIZE
            n = _written_entries(mf)
            while n > 0:
                phy, size, _tags = ENTRY.unpack_from(mf.view, (n - 1) * CQ_STORE_UNIT_SIZE)
                if size > 0 and (size == FILLER_SIZE or phy + size <= commit_log_end):
                    break
                n -= 1
            if n > 0:
                end_logical = base + n
                break
        self.queue.truncate_to(end_logical * CQ_STORE_UNIT_SIZE, erase)
        self.max_offset = end_logical
        self.end_read = True
        self._recompute_min(commit_log_min)
        for mf in self.queue.files[:-1]:
            mf.wrote_position = mf.flushed_position = mf.file_size

    def _recompute_min(self, commit_log_min: int) -> None:
        """The min offset: the first entry that is no filler and points at or above ``commit_log_min``, looked for
        segment by segment (the first holds it but after a DLedger follower's rebuild, whose fillers may fill it);
        the end when there is none. On the Trio thread at every retention pass that deleted CommitLog segments, for
        every queue: a queue whose min entry still holds data, or with nothing left, is not scanned, nor a segment
        whose last entry points below (physical offsets grow along a queue)."""
        if self.min_offset >= self.max_offset and self.queue.files:
            return
        if _live_at_or_above(self.entry(self.min_offset), commit_log_min):
            return
        for mf in self.queue.files:
            base = mf.file_from_offset // CQ_STORE_UNIT_SIZE
            limit = min(self.max_offset - base, self.entries_per_file)
            if limit <= 0 or not _live_at_or_above(
                ENTRY.unpack_from(mf.view, (limit - 1) * CQ_STORE_UNIT_SIZE), commit_log_min
            ):
                continue
            for i, entry in enumerate(ENTRY.iter_unpack(mf.view[: limit * CQ_STORE_UNIT_SIZE])):
                if _live_at_or_above(entry, commit_log_min):
                    self.min_offset = base + i
                    return
        self.min_offset = self.max_offset

    def delete_expired(self, commit_log_min: int) -> int:
        """Delete segments whose every entry points below ``commit_log_min`` (never the newest) and move the min
        offset up to the first entry that still has data. Returns the number of deleted segments."""
        taken = self.take_expired(commit_log_min)
        destroy_segments(taken)
        return len(taken)

    def take_expired(self, commit_log_min: int) -> list[MappedFile]:
        """:meth:`delete_expired`, the segments taken out of the queue but not destroyed: the caller destroys them
        (:func:`~store.mapped_file.destroy_segments`, in a worker thread)."""
        self.close_retired()
        taken: list[MappedFile] = []
        while len(self.queue.files) > 1:
            first = self.queue.files[0]
            phy, size, _ = ENTRY.unpack_from(first.view, first.file_size - CQ_STORE_UNIT_SIZE)
            if size > 0 and phy + (0 if size == FILLER_SIZE else size) <= commit_log_min:
                taken.extend(self.queue.take_first(1))
            else:
                break
        self._recompute_min(commit_log_min)
        return taken

    def close_retired(self) -> None:
        """Unmap the segments a restart unlinked. The caller holds the store's disk lock (no flush thread runs)."""
        retired, self.retired = self.retired, []
        for mf in retired:
            mf.close()

    def close(self) -> None:
        self.close_retired()
        self.queue.close()


@attrs.frozen
class Room:
    """The files :meth:`ConsumeQueue.make_room` made for one put, and the queue's offsets before it."""

    cq: ConsumeQueue
    kept: int
    min_offset: int
    max_offset: int

    def give_back(self) -> None:
        """Undo the room for a put refused after it: the files made are deleted, the offsets restored."""
        cq, files = self.cq, self.cq.queue.files
        while len(files) > self.kept:
            files.pop().destroy()
        cq.min_offset, cq.max_offset = self.min_offset, self.max_offset


#: The tags codes of this many consume-queue entries, unpacked at once (:func:`_tags_codes`).
_TAGS_CHUNK: Final = 1000
_TAGS_OF_CHUNK: Final = struct.Struct(">" + "12xq" * _TAGS_CHUNK)
_TAGS_OF_ONE: Final = struct.Struct(">12xq")


def _tags_codes(view: memoryview) -> Iterator[tuple[int, ...]]:
    """The tags codes of the whole entries in ``view``, in chunks of at most :data:`_TAGS_CHUNK`."""
    whole = len(view) - len(view) % _TAGS_OF_CHUNK.size
    for pos in range(0, whole, _TAGS_OF_CHUNK.size):
        yield _TAGS_OF_CHUNK.unpack_from(view, pos)
    rest = view[whole : len(view) - len(view) % CQ_STORE_UNIT_SIZE]
    if rest:
        yield tuple(tags for (tags,) in _TAGS_OF_ONE.iter_unpack(rest))


@functools.lru_cache(maxsize=128)
def _entries_struct(count: int) -> struct.Struct:
    """``count`` consecutive entries in one struct (big-endian: no padding between them)."""
    return struct.Struct(">" + "qiq" * count)


_ZERO_ENTRY: Final = bytes(CQ_STORE_UNIT_SIZE)


def _written_entries(mf: MappedFile) -> int:
    """Index of the first all-zero (never written) entry of a segment, or its entry count when it is full."""
    pos = 0
    while True:
        found = mf.buf.find(_ZERO_ENTRY, pos)
        if found < 0:
            return mf.file_size // CQ_STORE_UNIT_SIZE
        misalignment = found % CQ_STORE_UNIT_SIZE
        if misalignment == 0:
            return found // CQ_STORE_UNIT_SIZE
        # A zero run straddling two entries: the next candidate is the following entry boundary.
        pos = found + CQ_STORE_UNIT_SIZE - misalignment


def _live_at_or_above(entry: Entry | None, commit_log_min: int) -> bool:
    """Whether ``entry`` is no filler and its message lies at or above ``commit_log_min``."""
    return entry is not None and entry[1] > 0 and entry[1] != FILLER_SIZE and entry[0] >= commit_log_min


def _entry_sizes(mf: MappedFile, start: int, stop: int) -> array.array[int]:
    """The record sizes of entries ``[start, stop)``, all in segment ``mf``, read from its slice in C: an entry is
    five big-endian int32 words, the size the third (no tuple per entry)."""
    head = start * CQ_STORE_UNIT_SIZE - mf.file_from_offset
    words = array.array("i")
    words.frombytes(mf.view[head : head + (stop - start) * CQ_STORE_UNIT_SIZE])
    if sys.byteorder == "little":
        words.byteswap()
    return words[2::5]


def _range_start(pair: tuple[int, int]) -> int:
    return pair[0]


def _range_end(pair: tuple[int, int]) -> int:
    return pair[1]
