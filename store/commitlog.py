"""The CommitLog: every message of every topic, appended to mapped segments (docs/protocol.md#62-commitlog-segments) in
the record layout of docs/protocol.md#51-record-layout.

Appends are synchronous and never await: the record is packed straight into the mapped segment (the broker's
"append lock" is simply the Trio thread). When a record does not fit in the rest of a segment, an end-of-file blank
is written and the record goes to the next segment; a batch always moves as a whole. Reads return zero-copy
``memoryview`` slices of the mapping, valid until the segment is deleted by retention.

The replica seam is :meth:`CommitLog.append_encoded`: already-encoded records (and blanks) appended at a given
physical offset, validated record by record, returning their metadata for dispatch. Replication (store/ha/) uses
the raw pair: :meth:`CommitLog.read_from` on the master hands out byte ranges, :meth:`CommitLog.append_raw` on the
slave copies them at the same offsets, records split across frames included.

Errors: :class:`~store.errors.MessageIllegalError` for a record that cannot fit in any segment,
:class:`~store.errors.OffsetMismatchError` for a replica append at the wrong offset,
:class:`~remoting.codec.errors.MessageDecodeError` for a replica chunk holding an invalid record.
"""

from __future__ import annotations

import struct
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Final, TypeVar

from remoting.codec.errors import MessageDecodeError
from remoting.codec.message import (
    BLANK_MAGIC,
    PreparedMessage,
    RecordMeta,
    encode_records,
    read_record_meta,
    record_magic,
    write_blank,
    write_record,
)
from store.errors import CreateMappedFileError, MessageIllegalError, OffsetMismatchError
from store.mapped_file import MappedFile, MappedFileQueue
from store.store_paths import SegmentDirs

#: ``encode(buf, pos, room, phy_offset, first_queue_offset, clock, max_body, batch[, entries])`` -> ``(total or
#: -needed, packed ConsumeQueue entries, store timestamp)`` (:meth:`CommitLog.append_with`)
T = TypeVar("T")
#: An encoder's result: ``(total, packed ConsumeQueue entries or, for one record, its tags code, store time)``.
SegmentEncoder = Callable[..., tuple[int, T, int]]
#: A record must leave room for the 8-byte end-of-file blank after it.
END_FILE_MIN_BLANK_LENGTH: Final = 8
_SIZE: Final = struct.Struct(">i")


class CommitLog:
    """Owns the CommitLog segments. ``on_roll`` is called (on the Trio thread) each time a new segment is started,
    so an allocation service can prepare the following one in the background.

    Slotted: ``MessageStore.append``'s C path (store/_appender.c) reads ``queue`` and sets ``last_store_timestamp``
    by slot."""

    __slots__ = ("file_size", "last_store_timestamp", "on_roll", "queue")

    def __init__(
        self, directory: Path | SegmentDirs, file_size: int, on_roll: Callable[[], None] | None = None
    ) -> None:
        self.queue = MappedFileQueue(directory, file_size)
        self.file_size = file_size
        self.on_roll = on_roll
        #: Store timestamp of the last appended record (checkpointed as physicMsgTimestamp once flushed).
        self.last_store_timestamp = 0

    @property
    def max_offset(self) -> int:
        """The CommitLog's end as readers and ``commitLogMaxOffset`` see it (RocketMQ's ``getMaxOffset``): every
        append here; in DLedger mode only what a majority holds (``dledger.commitlog_store.LedgerCommitLog``)."""
        return self.queue.max_offset

    @property
    def write_end(self) -> int:
        """Where the next append goes: past every append, in DLedger mode those not committed yet too."""
        return self.queue.max_offset

    @property
    def min_offset(self) -> int:
        return self.queue.min_offset

    def check_fits(self, size: int) -> None:
        if size + END_FILE_MIN_BLANK_LENGTH > self.file_size:
            raise MessageIllegalError(f"record of {size} bytes does not fit in a {self.file_size}-byte segment")

    def _writable(self, size: int) -> MappedFile:
        """The segment to write ``size`` bytes into, writing the blank and rolling when the current one is full."""
        mf = self.queue.last()
        if mf is None:
            mf = self._roll(self.queue.next_start())
        elif mf.free < size + END_FILE_MIN_BLANK_LENGTH:
            if mf.free >= END_FILE_MIN_BLANK_LENGTH:
                write_blank(mf.buf, mf.wrote_position, mf.free)
            mf.wrote_position = mf.file_size
            mf = self._roll(mf.end_offset)
        return mf

    def _roll(self, start: int) -> MappedFile:
        try:
            mf = self.queue.roll(start)
        except OSError as exc:
            raise CreateMappedFileError(f"create mapped file failed, server is busy or broken: {exc}") from exc
        if self.on_roll is not None:
            self.on_roll()
        return mf

    def append(self, prepared: PreparedMessage, queue_offset: int, store_timestamp: int) -> int:
        """Append one record; returns its physical offset. The caller checked :meth:`check_fits`."""
        files = self.queue.files
        mf = files[-1] if files else None
        if mf is None or mf.file_size - mf.wrote_position < prepared.size + END_FILE_MIN_BLANK_LENGTH:
            mf = self._writable(prepared.size)
        pos = mf.wrote_position
        phy = mf.file_from_offset + pos
        write_record(mf.buf, pos, prepared, queue_offset, phy, store_timestamp)
        mf.wrote_position = pos + prepared.size
        self.last_store_timestamp = store_timestamp
        return phy

    def append_batch(self, prepared: list[PreparedMessage], first_queue_offset: int, store_timestamp: int) -> int:
        """Append records contiguously in one segment, with queue offsets counting up from ``first_queue_offset``;
        returns the first physical offset."""
        total = sum(p.size for p in prepared)
        mf = self._writable(total)
        pos = mf.wrote_position
        first = mf.file_from_offset + pos
        mf.buf[pos : pos + total] = encode_records(prepared, first_queue_offset, first, store_timestamp)
        mf.wrote_position = pos + total
        self.last_store_timestamp = store_timestamp
        return first

    def append_with(self, encode: SegmentEncoder[T], first_queue_offset: int, clock: Callable[[], int], max_body: int,
                    batch: object, entries: object = None) -> tuple[int, int, T, int]:  # fmt: skip
        """Append what an encoder of :mod:`remoting.codec.record_batch` writes itself:
        ``encode(buf, pos, room, phy_offset, first_queue_offset, clock, max_body, batch)`` (``encode_records_into``,
        ``batch`` its records; ``encode_record_into``, ``batch`` one record and ``first_queue_offset`` its own), or
        with ``entries`` ``encode(..., max_body, batch, entries)`` (``encode_entries_into``, ``batch`` its template).
        Its arguments are passed on as they are, not bound in a closure (a function object and a frame per batch)
        nor spread from ``*args`` (2 % of a 128 B batch). Called on the current segment, and when it reports
        ``-total`` (no room, nothing written) once more on a fresh segment, after :meth:`check_fits` and the
        end-of-file blank.

        Returns ``(first physical offset, total, packed ConsumeQueue entries, store timestamp)``; for a single record
        the third is its tags code. ``encode``'s errors propagate with nothing written; :class:`MessageIllegalError`
        when the batch fits no segment."""
        files = self.queue.files
        mf = files[-1] if files else self._roll(self.queue.next_start())
        rolled = False
        while True:
            pos = mf.wrote_position
            buf, room, phy = mf.buf, mf.file_size - pos - END_FILE_MIN_BLANK_LENGTH, mf.file_from_offset + pos
            if entries is None:
                total, packed, store_ts = encode(buf, pos, room, phy, first_queue_offset, clock, max_body, batch)
            else:
                total, packed, store_ts = encode(buf, pos, room, phy, first_queue_offset, clock, max_body, batch,
                                                 entries)  # fmt: skip
            if total >= 0:
                break
            if rolled:
                raise AssertionError(f"a {-total}-byte batch does not fit a fresh segment")
            self.check_fits(-total)
            mf = self._writable(-total)
            rolled = True
        mf.wrote_position = pos + total
        self.last_store_timestamp = store_ts
        return phy, total, packed, store_ts

    def append_encoded(self, phy_offset: int, data: bytes | memoryview) -> list[RecordMeta]:
        """Replica seam: append whole encoded records/blanks that the master wrote at ``phy_offset``.

        Each record is validated (magic, lengths, CRC, and its own physical offset field) before it is copied.
        Returns the metadata of the records (not blanks) for dispatch. Nothing after an invalid record is written.
        """
        if phy_offset != self.write_end:
            raise OffsetMismatchError(f"replica append at {phy_offset}, CommitLog ends at {self.write_end}")
        view = memoryview(data)
        metas: list[RecordMeta] = []
        pos = 0
        while pos < len(view):
            if record_magic(view, pos) == BLANK_MAGIC:
                mf = self.queue.last()
                free = _SIZE.unpack_from(view, pos)[0]
                if mf is None or free != mf.free:
                    raise MessageDecodeError(f"blank at {phy_offset + pos} does not end the segment")
                write_blank(mf.buf, mf.wrote_position, free)
                mf.wrote_position = mf.file_size
                self._roll(mf.end_offset)
                pos += free
                continue
            meta = read_record_meta(view, pos, check_crc=True)
            mf = self._writable(meta.size)
            if meta.phy_offset != mf.file_from_offset + mf.wrote_position:
                raise MessageDecodeError(f"record claims offset {meta.phy_offset}, expected {self.write_end}")
            mf.buf[mf.wrote_position : mf.wrote_position + meta.size] = view[pos : pos + meta.size]
            mf.wrote_position += meta.size
            self.last_store_timestamp = meta.store_timestamp
            metas.append(meta)
            pos += meta.size
        return metas

    def append_raw(self, phy_offset: int, data: bytes | memoryview) -> None:
        """Slave side of replication: copy ``data`` verbatim at ``phy_offset``, which must be the log's end, whatever
        it holds (records, a record's first or last bytes, a segment's end-of-file blank), rolling to the next
        segment where the current one is full. A log with no data yet starts wherever the master's first frame
        does, in the segment holding that offset. Raises :class:`OffsetMismatchError` anywhere else."""
        if phy_offset != self.write_end:
            if not self.is_empty():
                raise OffsetMismatchError(f"replica append at {phy_offset}, CommitLog ends at {self.write_end}")
            self._restart_at(phy_offset)
        view = memoryview(data)
        pos, total = 0, len(view)
        while pos < total:
            mf = self.queue.files[-1] if self.queue.files else self._roll(self.queue.next_start())
            if mf.wrote_position >= mf.file_size:
                mf = self._roll(mf.end_offset)
            start = mf.wrote_position
            count = min(mf.file_size - start, total - pos)
            mf.buf[start : start + count] = view[pos : pos + count]
            mf.wrote_position = start + count
            pos += count

    def is_empty(self) -> bool:
        """No data written yet (no segment, or one untouched segment)."""
        files = self.queue.files
        return not files or (len(files) == 1 and files[0].wrote_position == 0)

    def _restart_at(self, phy_offset: int) -> None:
        """Drop the empty segment (if any) and start the log at ``phy_offset`` (zeros before it in its segment)."""
        while self.queue.files:
            self.queue.files.pop().destroy()
        mf = self._roll(phy_offset - phy_offset % self.file_size)
        mf.wrote_position = phy_offset - mf.file_from_offset

    def read_from(self, phy_offset: int, max_size: int) -> memoryview | None:
        """Master side of replication: up to ``max_size`` written bytes from ``phy_offset``, never past the end of
        the segment holding it (RocketMQ's ``getData``); ``None`` when nothing is written there yet or the segment
        was deleted."""
        mf = self.queue.find(phy_offset)
        if mf is None:
            return None
        pos = phy_offset - mf.file_from_offset
        end = min(mf.wrote_position, pos + max_size)
        if end <= pos:
            return None
        return mf.view[pos:end]

    def read(self, phy_offset: int, size: int) -> memoryview | None:
        """Zero-copy slice of ``size`` bytes at ``phy_offset``; ``None`` if deleted, unwritten or crossing a segment."""
        mf = self.queue.find(phy_offset)
        if mf is None:
            return None
        pos = phy_offset - mf.file_from_offset
        if pos + size > mf.wrote_position or size <= 0:
            return None
        return mf.view[pos : pos + size]

    def segment_at(self, phy_offset: int) -> tuple[memoryview, int, int] | None:
        """The segment holding ``phy_offset`` as ``(view, its first CommitLog offset, bytes written in it)``, or
        ``None`` when deleted or not yet created: a reader of many records (a pull) slices them from the view itself,
        as :meth:`read` would, within the written bytes."""
        mf = self.queue.find(phy_offset)
        if mf is None:
            return None
        return mf.view, mf.file_from_offset, mf.wrote_position

    def read_record(self, phy_offset: int) -> memoryview | None:
        """The whole record starting at ``phy_offset`` (size read from the record itself)."""
        mf = self.queue.find(phy_offset)
        if mf is None:
            return None
        pos = phy_offset - mf.file_from_offset
        if pos + 8 > mf.wrote_position:
            return None
        size = _SIZE.unpack_from(mf.view, pos)[0]
        if size <= 0 or pos + size > mf.wrote_position or record_magic(mf.view, pos) == BLANK_MAGIC:
            return None
        return mf.view[pos : pos + size]

    def store_timestamp_at(self, phy_offset: int, size: int) -> int | None:
        """Store timestamp of the record at ``phy_offset`` (``None`` if gone)."""
        record = self.read(phy_offset, size)
        if record is None:
            return None
        try:
            return read_record_meta(record).store_timestamp
        except MessageDecodeError:
            return None

    def scan(self, start: int, check_crc: bool) -> Iterator[tuple[int, RecordMeta | None]]:
        """Walk valid records from ``start`` (a record boundary), yielding ``(offset_after, meta)``; blanks yield
        ``(next segment start, None)``. Stops silently at the first invalid or stale record (recovery)."""
        offset = start
        while True:
            mf = self.queue.find(offset)
            if mf is None:
                return
            pos = offset - mf.file_from_offset
            try:
                if record_magic(mf.view, pos) == BLANK_MAGIC:
                    if _SIZE.unpack_from(mf.view, pos)[0] != mf.file_size - pos:
                        return
                    offset = mf.end_offset
                    yield offset, None
                    continue
                meta = read_record_meta(mf.view, pos, check_crc)
            except MessageDecodeError:
                return
            if meta.phy_offset != offset or pos + meta.size + END_FILE_MIN_BLANK_LENGTH > mf.file_size:
                return
            offset += meta.size
            yield offset, meta

    def truncate_to(self, offset: int, erase: bool = True) -> None:
        """Recovery: ``offset`` becomes the end; later segments are deleted and, with ``erase``, later bytes in the
        last segment are zeroed (after a crash they may hold stale records)."""
        self.queue.truncate_to(offset, erase)

    def close(self) -> None:
        self.queue.close()
