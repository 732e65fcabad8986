"""IndexFile: one file of the hash index from message keys to CommitLog offsets, byte for byte as RocketMQ's
(docs/protocol.md#64-indexfile). :class:`~store.index.IndexService` owns the set of files, their names, rolling and
thread rules.

Layout of one file (big-endian): a 40-byte header (beginTimestamp, endTimestamp, beginPhyOffset, endPhyOffset: int64;
hashSlotCount, indexCount: int32), ``max_hash_slots`` int32 slots, then ``max_index_num`` 20-byte entries (keyHash
int32, phyOffset int64, timeDiff int32 in seconds from beginTimestamp, prev entry number int32). A slot holds the
number of the newest entry whose key hashes to it; entries chain to older ones through ``prev``. Entry numbers start
at 1 (0 means "none"), so a file holds ``max_index_num - 1`` entries before the service rolls to a new one.

A file is memory-mapped for its whole life and its header is rewritten in the mapping after every entry, so the page
cache always holds a consistent file; :meth:`IndexFile.flush` makes it durable.

A file is sparse, as RocketMQ's (420 MB at the default geometry, filled over hours), but never written where it has
no blocks: on a full disk that is a SIGBUS, which kills the process (the JVM turns it into an InternalError at the
write). The header and slots take theirs at creation, the entries theirs ahead of the puts, ``RESERVE_CHUNK`` at a
time (:func:`~store.mapped_file.reserve_blocks`), so a full disk is ENOSPC: from :meth:`IndexFile.create`, or from a
put before it writes anything.

endTimestamp is the store time of the last entry written, as Java's ``IndexFile.putKey`` sets it: after the wall clock
stepped back it is below beginTimestamp. Such a header is valid (Java's ``IndexHeader.load`` checks nothing);
:meth:`IndexFile.time_overlaps` takes the file's span as the smaller to the larger of the two.

Errors: a file of the wrong size, or whose header counts or offsets no writer produces, raises
:class:`IndexFileCorruptError` from :meth:`IndexFile.open`; a corrupt chain inside a file only ends a lookup early, it
never raises or loops; a full disk raises ``OSError`` (ENOSPC) from :meth:`IndexFile.create` and from the puts.
"""

from __future__ import annotations

import mmap
import os
import struct
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Final

from remoting.codec.message_properties import java_hash, java_hash_joined, java_hashes_joined
from remoting.codec.record_scan import index_put_hashed
from store.errors import StoreCorruptError
from store.mapped_file import RESERVE_CHUNK, first_hole, reserve_blocks

HEADER_SIZE: Final = 40
HASH_SLOT_SIZE: Final = 4
INDEX_ENTRY_SIZE: Final = 20
INVALID_INDEX: Final = 0
_INT_MAX: Final = 0x7FFFFFFF
#: Index entries a lookup walks between two chances for other work (:meth:`IndexFile.select_steps`): about a
#: millisecond.
SELECT_STEP: Final = 1024

_HEADER: Final = struct.Struct(">qqqqii")
_ENTRY: Final = struct.Struct(">iqii")
_SLOT: Final = struct.Struct(">i")
_HASHED: Final = struct.Struct(">iq")


class IndexFileCorruptError(StoreCorruptError):
    """An index file is truncated, has another geometry than configured, or its header holds impossible counts or
    offsets."""

    def __init__(self, path: Path, reason: str) -> None:
        super().__init__(f"index file {path}: {reason}")
        self.path = path


def index_key_hash(key: str) -> int:
    """abs(Java ``String.hashCode``) of the index key, 0 when abs overflows (MIN_INT), as Java's IndexFile does."""
    h = abs(java_hash(key))
    return 0 if h > _INT_MAX else h


def topic_key_hash(topic: str, key: str) -> int:
    """:func:`index_key_hash` of ``topic#key``, the topic's share of the hash cached."""
    h = abs(java_hash_joined(topic + "#", key))
    return 0 if h > _INT_MAX else h


def topic_key_hashes(topic: str, keys: list[str]) -> list[int]:
    """:func:`topic_key_hash` of each key (a batch's keys: see :func:`java_hashes_joined`)."""
    return [0 if h > _INT_MAX else h for h in map(abs, java_hashes_joined(topic + "#", keys))]


def index_file_size(max_hash_slots: int, max_index_num: int) -> int:
    return HEADER_SIZE + max_hash_slots * HASH_SLOT_SIZE + max_index_num * INDEX_ENTRY_SIZE


class IndexFile:
    """One mapped index file. Use :meth:`create` or :meth:`open`; :meth:`close` unmaps it."""

    def __init__(self, path: Path, max_hash_slots: int, max_index_num: int, mm: mmap.mmap, reserved: int = 0) -> None:
        self.path = path
        self.max_hash_slots = max_hash_slots
        self.max_index_num = max_index_num
        self._mm = mm
        self._entries_at = HEADER_SIZE + max_hash_slots * HASH_SLOT_SIZE
        #: the bytes from the start that have blocks (:meth:`_reserve_for`); a file opened starts at its first hole
        self._reserved = reserved
        header: tuple[int, ...] = _HEADER.unpack_from(mm, 0)
        self.begin_timestamp, self.end_timestamp, self.begin_phy_offset, self.end_phy_offset = header[:4]
        self.hash_slot_count = header[4]
        # Java keeps indexCount 0 on disk until the first flush and reads it back as 1.
        self.index_count = max(header[5], 1)
        self.dirty = False

    @classmethod
    def create(cls, path: Path, max_hash_slots: int, max_index_num: int) -> IndexFile:
        """A new, empty file. It appears under its final name only once sized and headed (rename), so a crash
        during creation leaves no truncated file behind. Its header, slots and first entries take their blocks
        first: a full disk raises ENOSPC, the half-made file removed."""
        size = index_file_size(max_hash_slots, max_index_num)
        reserved = min(size, HEADER_SIZE + max_hash_slots * HASH_SLOT_SIZE + RESERVE_CHUNK)
        creating = path.with_name(path.name + ".creating")
        try:
            with open(creating, "w+b") as f:
                f.truncate(size)
                reserve_blocks(f.fileno(), 0, reserved, path)
                mm = mmap.mmap(f.fileno(), size)
        except OSError:
            creating.unlink(missing_ok=True)
            raise
        _HEADER.pack_into(mm, 0, 0, 0, 0, 0, 0, 1)
        os.replace(creating, path)
        return cls(path, max_hash_slots, max_index_num, mm, reserved)

    @classmethod
    def open(cls, path: Path, max_hash_slots: int, max_index_num: int) -> IndexFile:
        """Map an existing file, checking its size and header counts and offsets (not its times: see the module
        docstring); raises :class:`IndexFileCorruptError`."""
        size = index_file_size(max_hash_slots, max_index_num)
        actual = path.stat().st_size
        if actual != size:
            raise IndexFileCorruptError(path, f"size {actual}, expected {size} for this slot/entry geometry")
        with open(path, "r+b") as f:
            mm = mmap.mmap(f.fileno(), size)
            reserved = first_hole(f.fileno(), size)
        _, _, begin_phy, end_phy, slot_count, index_count = header = _HEADER.unpack_from(mm, 0)
        counts_ok = 0 <= index_count <= max_index_num and 0 <= slot_count <= max_hash_slots
        if not (counts_ok and 0 <= begin_phy <= end_phy):
            mm.close()
            raise IndexFileCorruptError(path, f"impossible header {header}")
        return cls(path, max_hash_slots, max_index_num, mm, reserved)

    @property
    def is_full(self) -> bool:
        return self.index_count >= self.max_index_num

    @property
    def is_empty(self) -> bool:
        return self.index_count <= 1

    def put_entries(
        self, entries: Sequence[tuple[int, int]], store_timestamp: int, timestamps: Sequence[int] | None = None
    ) -> int:
        """Add ``(key hash, phy offset)`` entries (offsets non-decreasing, one store time: a message or a batch):
        :meth:`put_packed` of them packed. ``timestamps`` gives each entry its own store time instead (a DLedger
        member's dispatch run, :meth:`_put_timed`): the bytes of one put per entry, still with one header rewrite."""
        if timestamps is not None:
            return self._put_timed(entries, timestamps)
        return self.put_packed(b"".join(_HASHED.pack(h, phy) for h, phy in entries), store_timestamp)

    def put_packed(self, packed: bytes, store_timestamp: int) -> int:
        """Add entries packed as ``keyHash int32 | phyOffset int64`` (big-endian; offsets non-decreasing, one store
        time), each at the head of its slot's chain (:func:`~remoting.codec.record_scan.index_put_hashed`, in C),
        then rewrite the header once. Returns how many were written: fewer than given when the file fills up."""
        if not packed or self.is_full:
            return 0
        self._reserve_for(len(packed) // _HASHED.size)
        if not self.is_empty:
            return self._put_run(packed, store_timestamp, self._time_diff(store_timestamp))
        # The file's first entry sets its begin offset and time, which the entries after it count from.
        time_diff = self._time_diff(store_timestamp)
        self.begin_phy_offset = _HASHED.unpack_from(packed)[1]
        self.begin_timestamp = store_timestamp
        first = self._put_run(packed[: _HASHED.size], store_timestamp, time_diff)
        return first + self._put_run(packed[_HASHED.size :], store_timestamp, 0)

    def _time_diff(self, store_timestamp: int) -> int:
        """Seconds from the file's begin time (0 before it has one), as the entries hold them."""
        diff_s = (store_timestamp - self.begin_timestamp) // 1000
        return min(max(diff_s, 0), _INT_MAX) if self.begin_timestamp > 0 else 0

    def _put_run(self, packed: bytes, store_timestamp: int, time_diff: int) -> int:
        if not packed:
            return 0
        start = self.index_count
        number, added = index_put_hashed(self._mm, packed, start, self.max_index_num, self.max_hash_slots,
                                         self._entries_at, time_diff)  # fmt: skip
        if number == start:
            return 0
        self.index_count = number
        self.hash_slot_count += added
        self.end_phy_offset = _HASHED.unpack_from(packed, (number - start - 1) * _HASHED.size)[1]
        self.end_timestamp = store_timestamp
        self._write_header()
        return number - start

    def _put_timed(self, entries: Sequence[tuple[int, int]], timestamps: Sequence[int]) -> int:
        """:meth:`put_entries` with a store time per entry, each entry's time diff from the file's begin time."""
        self._reserve_for(len(entries))
        mm = self._mm
        slots = self.max_hash_slots
        entries_at = self._entries_at
        start = number = self.index_count
        slot_count = self.hash_slot_count
        begin = self.begin_timestamp
        stamp = begin
        for key_hash, phy_offset in entries[: self.max_index_num - number]:
            stamp = timestamps[number - start]
            time_diff = min(max((stamp - begin) // 1000, 0), _INT_MAX) if begin > 0 else 0
            slot_pos = HEADER_SIZE + key_hash % slots * HASH_SLOT_SIZE
            prev = _SLOT.unpack_from(mm, slot_pos)[0]
            if prev <= INVALID_INDEX or prev >= number:
                prev = INVALID_INDEX
                slot_count += 1
            _ENTRY.pack_into(mm, entries_at + number * INDEX_ENTRY_SIZE, key_hash, phy_offset, time_diff, prev)
            _SLOT.pack_into(mm, slot_pos, number)
            if number == 1:
                self.begin_phy_offset = phy_offset
                begin = self.begin_timestamp = stamp
            number += 1
        if number == start:
            return 0
        self.index_count = number
        self.hash_slot_count = slot_count
        self.end_phy_offset = entries[number - start - 1][1]
        self.end_timestamp = stamp
        self._write_header()
        return number - start

    def _reserve_for(self, count: int) -> None:
        """Give the file blocks for ``count`` more entries (and everything before them) before they are written, a
        chunk ahead; a full disk raises ENOSPC with nothing written."""
        end = self._entries_at + (self.index_count + count) * INDEX_ENTRY_SIZE
        if end > self._reserved:
            self._reserve_to(end)

    def _reserve_to(self, end: int) -> None:
        target = min(index_file_size(self.max_hash_slots, self.max_index_num), end + RESERVE_CHUNK)
        if target <= self._reserved:
            return  # the whole file has its blocks (a put of more entries than it holds: they are not written)
        fd = os.open(self.path, os.O_RDWR)
        try:
            reserve_blocks(fd, self._reserved, target - self._reserved, self.path)
        finally:
            os.close(fd)
        self._reserved = target

    def time_overlaps(self, begin_ms: int, end_ms: int) -> bool:
        """Whether [begin_ms, end_ms] overlaps this file's span (Java's isTimeMatched), from the smaller to the larger
        of beginTimestamp and endTimestamp (endTimestamp is below after the clock stepped back)."""
        first, last = sorted((self.begin_timestamp, self.end_timestamp))
        return (begin_ms < first and end_ms > last) or first <= begin_ms <= last or first <= end_ms <= last

    def select(self, key_hash: int, out: list[int], max_num: int, begin_ms: int, end_ms: int) -> None:
        """Append to ``out`` the offsets of entries with ``key_hash`` stored within [begin_ms, end_ms], newest first,
        until ``out`` holds ``max_num``. Walks one slot chain; stops at its end, at a broken link or once the chain is
        older than ``begin_ms``."""
        for _ in self.select_steps(key_hash, out, max_num, begin_ms, end_ms):
            pass

    def select_steps(self, key_hash: int, out: list[int], max_num: int, begin_ms: int, end_ms: int) -> Iterator[None]:
        """:meth:`select`, yielding after every :data:`SELECT_STEP` entries walked so that the caller can let other
        work run: the chain of a key shared by many messages holds that many entries. Entries are never changed once
        written, so the walk may resume after puts; a file unmapped meanwhile (retention deleted it) ends it."""
        if self.is_empty:
            return
        mm = self._mm
        try:
            (number,) = _SLOT.unpack_from(mm, HEADER_SIZE + (key_hash % self.max_hash_slots) * HASH_SLOT_SIZE)
            walked = 0
            while INVALID_INDEX < number < self.index_count and len(out) < max_num:
                hash_read, phy_offset, time_diff, prev = _ENTRY.unpack_from(
                    mm, self._entries_at + number * INDEX_ENTRY_SIZE
                )
                if time_diff < 0:
                    break
                time_read = self.begin_timestamp + time_diff * 1000
                if hash_read == key_hash and begin_ms <= time_read <= end_ms:
                    out.append(phy_offset)
                # Entries only ever link to older (smaller) numbers; anything else is corruption and would loop.
                if time_read < begin_ms or prev >= number:
                    break
                number = prev
                walked += 1
                if walked == SELECT_STEP:
                    walked = 0
                    yield
        except ValueError:  # "mmap closed or invalid": the file was deleted while the walk was suspended
            return

    def entries_of_last(self, phy_offset: int) -> int:
        """How many of the newest entries point at ``phy_offset``: the keys of the message that ends the file."""
        return self._run_of(phy_offset, range(self.index_count - 1, 0, -1))

    def entries_of_first(self, phy_offset: int) -> int:
        """How many of the oldest entries point at ``phy_offset``: the keys of the message that starts the file."""
        return self._run_of(phy_offset, range(1, self.index_count))

    def _run_of(self, phy_offset: int, numbers: range) -> int:
        count = 0
        for number in numbers:
            if _ENTRY.unpack_from(self._mm, self._entries_at + number * INDEX_ENTRY_SIZE)[1] != phy_offset:
                break
            count += 1
        return count

    def truncate_after(self, phy_offset: int) -> None:
        """Forget every entry whose offset is >= ``phy_offset``, restoring the slots they displaced. Entries are
        written in CommitLog order, so they form a suffix of the file and undoing them newest-first is exact. It
        writes only into pages that hold data (the entries undone, their slots, the header), so never into a hole."""
        mm = self._mm
        while not self.is_empty:
            number = self.index_count - 1
            pos = self._entries_at + number * INDEX_ENTRY_SIZE
            key_hash, entry_offset, _, prev = _ENTRY.unpack_from(mm, pos)
            if entry_offset < phy_offset:
                break
            slot_pos = HEADER_SIZE + (key_hash % self.max_hash_slots) * HASH_SLOT_SIZE
            if _SLOT.unpack_from(mm, slot_pos)[0] == number:
                _SLOT.pack_into(mm, slot_pos, prev)
                if prev == INVALID_INDEX:
                    self.hash_slot_count = max(self.hash_slot_count - 1, 0)
            _ENTRY.pack_into(mm, pos, 0, 0, 0, 0)
            self.index_count = number
        if self.is_empty:
            self.begin_timestamp = self.end_timestamp = self.begin_phy_offset = self.end_phy_offset = 0
        else:
            _, self.end_phy_offset, time_diff, _ = _ENTRY.unpack_from(
                mm, self._entries_at + (self.index_count - 1) * INDEX_ENTRY_SIZE
            )
            # Store times are kept in seconds from begin; this is the same time lookups reconstruct.
            self.end_timestamp = self.begin_timestamp + time_diff * 1000
        self._write_header()

    def flush(self) -> None:
        """Make the mapped pages durable. fdatasync of the file, not ``mmap.flush``: CPython 3.11's msync holds the
        GIL for the whole disk sync, stalling the event loop every flush interval; on Linux the page cache tracks
        writes through a shared mapping, so syncing the file covers them."""
        if not self._mm.closed:
            fd = os.open(self.path, os.O_RDONLY)
            try:
                os.fdatasync(fd)
            finally:
                os.close(fd)

    def rename(self, path: Path) -> None:
        """Move the file to ``path`` (replacing any file there), mapped as it is."""
        os.replace(self.path, path)
        self.path = path

    def close(self) -> None:
        if not self._mm.closed:
            self._mm.close()

    def destroy(self) -> None:
        self.close()
        self.path.unlink(missing_ok=True)

    def _write_header(self) -> None:
        times_and_offsets = (self.begin_timestamp, self.end_timestamp, self.begin_phy_offset, self.end_phy_offset)
        _HEADER.pack_into(self._mm, 0, *times_and_offsets, self.hash_slot_count, self.index_count)
        self.dirty = True
