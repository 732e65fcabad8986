"""DLedger's file store: entries in ``data/``, 32-byte index records in ``index/``, the ``checkpoint`` and the
``currterm`` file, under ``<storeBaseDir>/dledger-<selfId>/`` (docs/protocol.md#15-dledger-files), as
``DLedgerMmapFileStore.java`` of DLedger 0.3.1.2 lays them out.

:class:`FileLedger` is the :class:`~dledger.ledger.Ledger` the broker runs: segments are the store's
:class:`~store.mapped_file.MappedFileQueue` (files named by their 20-digit start offset), entries are written through
the mapping on the Trio thread and never cross a data segment (a blank ``[-1][remaining]`` ends a full one). Flushing
is split: :meth:`FileLedger.flush_plan` on the Trio thread, :meth:`FileLedger.flush_planned` (``fdatasync``) in a
worker thread. A truncation erases the cut tail and syncs it at once, so a power loss never brings stale entries back;
segments it removes are unlinked at once and unmapped by the next flush (a flush thread may still hold them), and a
flush in flight across it records nothing durable (:meth:`FileLedger.flushed`, ``MappedFile.cut``).

Retention (:meth:`FileLedger.delete_expired`) removes the oldest segments and moves the begin index; a TRUNCATE to an
entry this log cannot continue to (it ends before the leader's first entry) starts the log afresh there, its first
segment opening with a blank up to the entry's position (DLedger's ``rebuildWithPos``).

Recovery (:meth:`FileLedger.load`, blocking) follows DLedger's: it starts from the third segment from the end (walking
back while a segment's first entry disagrees with its index record), checks each entry (magic, size, ``pos`` equal to
where it lies, contiguous indexes, terms never going down), rewrites index records that disagree (each at
``index * 32``, in whichever index segment holds it, synced before the log serves; when no segment leads up to it, the
first ones lost, the index starts afresh at it, as DLedger's ``rebuildWithPos``), and ends the log at the first bad
entry: data and index are cut there and erased, unless that is more than a segment before the last one's start
(DLedger exits there, asking for a manual check: the load raises :class:`~store.errors.StoreCorruptError`, nothing
cut). Index segments wholly before the first entry go (a kill between retention's data and index unlinks leaves
them; DLedger's ``reviseLedgerBeginIndex``). The committed index comes back from ``checkpoint`` (clamped to the
end). Entries this store writes as leader carry ``bodyCrc`` (the field DLedger 0.3.1.2 leaves 0) and the header is
written after the body, so a torn tail fails the scan; entries with ``bodyCrc`` 0 are taken on their structure alone,
as DLedger does. :class:`FileTermStore` keeps ``currTerm`` and ``voteLeader`` durable (tmp file,
fsync, rename).

Errors: :class:`~dledger.ledger.LedgerError` (DISK_ERROR) for an append that does not land where it must; ``OSError``
from the file system propagates, a full disk included: data segments take all their blocks when made, index segments
(sparse) take theirs ahead of the records (``MappedFile.reserve``), and the recovery erases past the end only the
pages that hold records (``MappedFile.zero_from``), so a full disk is ENOSPC, never a SIGBUS at a write through the
mapping (tests/store/test_full_disk_mmap.py). Every append (a leader's batch:
:meth:`FileLedger.append_as_leader`, its single send: :meth:`FileLedger.append_record_as_leader`, a follower's entry:
:meth:`FileLedger.append_as_follower`) is written whole or not at all: what a failed one wrote is erased again
(DLedger 0.3.1.2 keeps it: a follower whose index segment could not be made then refuses the leader's every push of
that entry, its data end past the entry's ``pos``).
A truncation (:meth:`FileLedger.truncate`) that fails leaves the log cut and consistent: ending right before the
leader's entry when that entry could not be written, its end term and flushed index those of the entry it ends at.
"""

from __future__ import annotations

import contextlib
import logging
import os
import struct
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Final

from dledger.codes import ResponseCode
from dledger.config import DLedgerConfig
from dledger.entry import (
    BLANK_HEADER_SIZE,
    CURRENT_MAGIC,
    HEAD_LAYOUT,
    HEADER_SIZE,
    INDEX_LAYOUT,
    INDEX_UNIT_SIZE,
    MIN_BLANK_LEN,
    Entry,
    EntryDecodeError,
    IndexRecord,
    blank,
    blank_header,
    blank_length,
    decode_entry,
    decode_header,
    decode_index,
    index_record_of,
    is_blank,
    pack_header_into,
    place,
)
from dledger.ledger import BodyFill, LedgerError
from dledger.native import entries_module
from remoting.codec.crc import body_crc
from remoting.codec.message import MessageRecord
from remoting.codec.record_batch import RecordEncoder
from store.errors import StoreCorruptError
from store.mapped_file import MappedFile, MappedFileQueue
from store.metadata_files import replace_atomically

log = logging.getLogger(__name__)
#: dledger/_entries.c (None: the Python twin); tests/dledger/test_native_entries.py proves both write the same bytes
_native = entries_module()

CHECKPOINT_FILE = "checkpoint"
#: The body of a mixed store's first entry: where its classic records end (written by dledger/commitlog_store.py's
#: ``DLedgerMessageStore._open_with_marker``; :meth:`FileLedger.truncate` reads it).
MARKER: Final = struct.Struct(">q")
#: ``(last index, segments to sync, segments to unmap after, truncations so far)``: :meth:`FileLedger.flush_plan`
FlushPlan = tuple[int, list[MappedFile], list[MappedFile], int]
#: ``(begin index, end index, end term, data end)`` before an append: :meth:`FileLedger._undo_appends`
Tail = tuple[int, int, int, int]
TERM_FILE = "currterm"
#: DLedger's ``localEntryBuffer``: a leader encodes each entry, header included, into these 4 MiB before writing it
#: (``DLedgerMmapFileStore.appendAsLeader``), so a larger one overflows it with nothing written.
ENTRY_BUFFER_SIZE: Final = 4 * 1024 * 1024


def read_properties(path: Path) -> dict[str, str]:
    """``key=value`` lines (DLedger writes them with ``IOUtils.properties2String``); missing file: empty."""
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return {}
    out = {}
    for line in text.splitlines():
        key, sep, value = line.partition("=")
        if sep and not key.startswith("#"):
            out[key.strip()] = value.strip()
    return out


def write_properties(path: Path, values: dict[str, object]) -> None:
    """Durably replace ``path`` with ``key=value`` lines, keeping the previous content as ``.bak`` as DLedger does."""
    path.parent.mkdir(parents=True, exist_ok=True)
    bak = path.with_name(path.name + ".bak")
    with contextlib.suppress(FileNotFoundError):
        replace_atomically(bak, path.read_bytes(), bak.with_name(bak.name + ".tmp"))
    data = "".join(f"{k}={v}\n" for k, v in values.items()).encode()
    replace_atomically(path, data, path.with_name(path.name + ".tmp"))


def _leading_blank(mf: MappedFile) -> int:
    """Where the first entry of a log's first segment lies: after the blank a rebuilt log starts with, else 0."""
    length = blank_length(mf.view, 0)
    return length if 0 < length < mf.file_size else 0


def _end_with_blank(mf: MappedFile) -> None:
    """Close a full data segment: the blank that fills the rest of it."""
    mf.buf[mf.wrote_position : mf.file_size] = blank(mf.file_size - mf.wrote_position)
    mf.wrote_position = mf.file_size


def _log_other_copy(own: Entry | None, leader: Entry) -> None:
    """A mixed store's first entry (its :data:`MARKER`: where its classic records end) replaced by the leader's: the
    members started from different classic copies, which nothing else shows."""

    def records_end(marker: Entry | None) -> int | None:
        return MARKER.unpack(marker.body)[0] if marker is not None and len(marker.body) == MARKER.size else None

    log.error("this member's classic CommitLog is not the leader's copy: its records end at %s, the leader's at %s "
              "(below the DLedger log, the members' classic messages differ)", records_end(own),
              records_end(leader))  # fmt: skip


class FileTermStore:
    """``currterm``: ``currTerm=N`` and ``voteLeader=ID`` (empty for none). Saves are synchronous and durable."""

    def __init__(self, directory: Path) -> None:
        self.path = directory / TERM_FILE

    def load(self) -> tuple[int, str | None]:
        props = read_properties(self.path)
        try:
            term = int(props.get("currTerm", "0"))
        except ValueError:
            term = 0
        return term, props.get("voteLeader") or None

    def save(self, term: int, vote_for: str | None) -> None:
        write_properties(self.path, {"currTerm": term, "voteLeader": vote_for or ""})


class FileLedger:
    """See the module docstring. Owned by one DLedger server on the Trio thread."""

    def __init__(self, config: DLedgerConfig) -> None:
        self.config = config
        self.directory = config.default_path
        self.data = MappedFileQueue(config.data_dirs, config.mapped_file_size_for_entry_data)
        # Sparse, as DLedger's DefaultMmapFile leaves it: 160 MB of 32-byte records per member by default, mostly
        # empty. Its blocks are taken ahead of the records (MappedFile.reserve), so a full disk fails an append.
        self.index = MappedFileQueue(config.index_path, config.mapped_file_size_for_entry_index, preallocate=False)
        self._begin = -1
        self._end = -1
        self._end_term = -1
        self._committed = -1
        #: end of the last committed entry (RocketMQ reads and dispatches below it); -1 when nothing is committed
        self.committed_pos = -1
        self._flushed = -1
        self._retired: list[MappedFile] = []
        #: truncations so far: a flush planned before one claims nothing (its plan's end may name entries written
        #: again since, unsynced)
        self._truncations = 0
        #: a mixed store's classic end (below it, offsets are classic records): see :meth:`_rebuild_at`; 0 otherwise
        self.rebuild_floor = 0
        #: DLedger's ``isDiskFull``, set by each retention pass (dledger/retention.py): a follower takes no entry
        self.disk_full = False

    # ---- the Ledger protocol -------------------------------------------------------------------------------------

    @property
    def begin_index(self) -> int:
        return self._begin

    @property
    def end_index(self) -> int:
        return self._end

    @property
    def end_term(self) -> int:
        return self._end_term

    @property
    def committed_index(self) -> int:
        return self._committed

    @property
    def flushed_index(self) -> int:
        return self._flushed

    @property
    def write_pos(self) -> int:
        return self.data.max_offset

    def get(self, index: int) -> Entry | None:
        if not self._begin <= index <= self._end or index < 0:
            return None
        record = self.index_record(index)
        if record is None:
            return None
        mf = self.data.find(record.pos)
        if mf is None:
            return None
        try:
            entry = decode_entry(mf.view, record.pos - mf.file_from_offset)
        except EntryDecodeError:
            return None
        return entry if entry.pos == record.pos and entry.index == index else None

    def body_at(self, index: int) -> tuple[memoryview, int, int] | None:
        """Where the body of the entry at ``index`` lies in its data segment's mapping: ``(view, offset, length)``,
        without copying it; None when the index or the entry there is not readable."""
        found = self._pos_size(index)
        if found is None:
            return None
        pos, size = found
        data = self.data.find(pos)
        rel = pos - data.file_from_offset if data is not None else 0
        if data is None or size < HEADER_SIZE or rel + size > data.wrote_position:
            return None
        if HEAD_LAYOUT.unpack_from(data.view, rel) != (CURRENT_MAGIC, size):
            return None
        return data.view, rel + HEADER_SIZE, size - HEADER_SIZE

    def segment_at(self, index: int) -> tuple[memoryview, int, int, int] | None:
        """Where the entry at ``index`` starts: ``(its data segment's mapping, the entry's offset in it, the
        segment's start offset, the segment's written end in it)``, for a scan of the entries from there on; None
        when the index is not readable."""
        found = self._pos_size(index)
        data = self.data.find(found[0]) if found is not None else None
        if found is None or data is None:
            return None
        return data.view, found[0] - data.file_from_offset, data.file_from_offset, data.wrote_position

    def _pos_size(self, index: int) -> tuple[int, int] | None:
        """``(pos, size)`` of the entry at ``index`` from its index record; None outside the log or unwritten."""
        if not self._begin <= index <= self._end or index < 0:
            return None
        at = index * INDEX_UNIT_SIZE
        mf = self.index.find(at)
        if mf is None or at - mf.file_from_offset + INDEX_UNIT_SIZE > mf.wrote_position:
            return None
        _, pos, size, _, _ = INDEX_LAYOUT.unpack_from(mf.view, at - mf.file_from_offset)
        return pos, size

    def index_record(self, index: int) -> IndexRecord | None:
        at = index * INDEX_UNIT_SIZE
        mf = self.index.find(at)
        if mf is None or at - mf.file_from_offset + INDEX_UNIT_SIZE > mf.wrote_position:
            return None
        return decode_index(mf.view, at - mf.file_from_offset)

    def append_as_leader(self, term: int, bodies: Sequence[tuple[int, BodyFill]]) -> list[Entry]:
        """All of ``bodies`` or nothing: each entry is checked to fit a data segment and DLedger's entry buffer
        (:meth:`_check_leader_entry`) before any is written, and a write that fails anyway (a body of another size
        than announced: LedgerError, DISK_ERROR; a segment that cannot be made: OSError) is taken back
        (:meth:`_undo_appends`) before the error propagates, so the core's refusal means no entry is in the log."""
        for size, _ in bodies:
            self._check_leader_entry(HEADER_SIZE + size)
        with self._whole_or_nothing():
            return [self._append_filled(term, size, fill) for size, fill in bodies]

    def _append_filled(self, term: int, size: int, fill: BodyFill) -> Entry:
        pos = self._reserve(HEADER_SIZE + size)
        data = fill(pos)
        entry = Entry(self._end + 1, term, pos, data, CURRENT_MAGIC, body_crc=body_crc(data) if data else 0)
        if len(entry.body) != size:
            raise LedgerError(ResponseCode.DISK_ERROR, f"body of {len(entry.body)} bytes, {size} announced")
        self._write(entry)
        return entry

    @contextlib.contextmanager
    def _whole_or_nothing(self) -> Iterator[None]:
        """Around an append (a leader's or a follower's): when it raises, what it wrote is taken back
        (:meth:`_undo_appends`) before the error propagates."""
        tail = self._begin, self._end, self._end_term, self.write_pos
        try:
            yield
        except BaseException:
            self._undo_appends(tail)
            raise

    def _undo_appends(self, tail: Tail) -> None:
        """Take back what a failed append wrote past ``tail`` (entries, an entry's data with no index record, index
        records, the blank that closed a segment, a segment it started), erased and synced as a truncation's cut tail
        is. Not a truncation for a flush in flight: planned before the append, it names no entry past ``tail`` and
        keeps its claim (the segments' own flushed positions, dropped by the cut, are synced again)."""
        begin, end, end_term, write_pos = tail
        if self._end == end and self.write_pos == write_pos:
            return
        self._cut_data(write_pos)
        self._cut_index((end + 1) * INDEX_UNIT_SIZE)
        self._begin, self._end, self._end_term = begin, end, end_term
        self._sync_tails()

    def append_record_as_leader(self, term: int, encode: RecordEncoder, queue_offset: int, clock: Callable[[], int],
                                max_body: int, record: MessageRecord) -> Entry:  # fmt: skip
        """Append one entry whose body is ``record``, encoded by ``encode`` (:func:`~remoting.codec.record_batch.
        encode_record_into`) straight into the entry's place in the mapping, its physical offset the entry's ``pos``
        plus the header: the bytes :meth:`append_as_leader` writes for a ``fill`` that writes the same record
        (tests/dledger/test_file_store.py), without the record's bytes built first and copied. Written whole or not
        at all, as :meth:`append_as_leader`'s batch: a record no segment holds raises LedgerError (DISK_ERROR) with
        nothing written; ``encode``'s errors and a data or index segment that cannot be made (OSError) propagate
        with what was written taken back (:meth:`_undo_appends`: the blank that closed the last segment, the
        entry's data)."""
        tail = self._begin, self._end, self._end_term, self.write_pos  # not _whole_or_nothing: 1 us per send less
        try:
            return self._append_record(term, encode, queue_offset, clock, max_body, record)
        except BaseException:
            self._undo_appends(tail)
            raise

    def _append_record(self, term: int, encode: RecordEncoder, queue_offset: int, clock: Callable[[], int],
                       max_body: int, record: MessageRecord) -> Entry:  # fmt: skip
        """:meth:`append_record_as_leader`'s write, leaving what it wrote when it raises."""
        file_size = self.config.mapped_file_size_for_entry_data
        mf = self._data_segment()
        at = mf.wrote_position
        cap = ENTRY_BUFFER_SIZE - HEADER_SIZE
        room = file_size - at - HEADER_SIZE - MIN_BLANK_LEN  # place(): an entry leaves room for a blank after it
        written = encode(mf.buf, at + HEADER_SIZE, max(min(room, cap), 0), mf.file_from_offset + at + HEADER_SIZE,
                         queue_offset, clock, max_body, record)[0]  # fmt: skip
        if written < 0:
            self._check_leader_entry(HEADER_SIZE - written)  # it fits an empty segment, so this one is not empty
            _end_with_blank(mf)
            mf = self._data_segment()
            at = 0
            written = encode(mf.buf, HEADER_SIZE, min(file_size - HEADER_SIZE - MIN_BLANK_LEN, cap),
                             mf.file_from_offset + HEADER_SIZE, queue_offset, clock, max_body, record)[0]  # fmt: skip
            if written < 0:
                raise LedgerError(ResponseCode.DISK_ERROR, f"{-written} bytes asked for once more on a fresh file")
        end = at + HEADER_SIZE + written
        body = mf.buf[at + HEADER_SIZE : end]
        if _native is not None:
            return self._seal(mf, at, end, term, body)
        entry = Entry(self._end + 1, term, mf.file_from_offset + at, body, CURRENT_MAGIC, body_crc=body_crc(body))
        pack_header_into(mf.buf, at, entry)  # after the body, as _write does
        mf.wrote_position = end
        self._write(entry, data=False)
        return entry

    def _seal(self, mf: MappedFile, at: int, end: int, term: int, body: bytes) -> Entry:
        """:meth:`_append_record`'s header and index record in one C call (``seal_entry``): the same bytes."""
        assert _native is not None
        index, pos = self._end + 1, mf.file_from_offset + at
        mf.wrote_position = end  # first, as the Python way: a failed index segment's undo erases the entry
        rel = index * INDEX_UNIT_SIZE
        segment = self._index_segment(rel)
        rel -= segment.file_from_offset
        if rel + INDEX_UNIT_SIZE > segment.reserved:
            segment.reserve(rel + INDEX_UNIT_SIZE)
        crc: int = _native.seal_entry(mf.buf, at, end, index, term, pos, segment.buf, rel)
        if segment.wrote_position < rel + INDEX_UNIT_SIZE:
            segment.wrote_position = rel + INDEX_UNIT_SIZE
        self._end, self._end_term = index, term
        if self._begin == -1:
            self._begin = index
        return Entry(index, term, pos, body, CURRENT_MAGIC, body_crc=crc)

    def append_as_follower(self, entry: Entry) -> None:
        """Write the leader's ``entry`` as the next one, at its ``pos``. Written whole or not at all, as a leader's
        append: an entry that is not next (LedgerError, INCONSISTENT_INDEX) or would land elsewhere (DISK_ERROR) is
        refused with nothing written; a data or index segment that cannot be made (OSError) propagates with what was
        written taken back (:meth:`_undo_appends`), so the leader's next push of the entry lands. While
        :attr:`disk_full`, every entry is refused (LedgerError, DISK_FULL), as DLedger's ``appendAsFollower``."""
        if self.disk_full:
            raise LedgerError(ResponseCode.DISK_FULL, f"entry {entry.index}: the disk is full")
        if entry.index != self._end + 1:
            raise LedgerError(ResponseCode.INCONSISTENT_INDEX, f"{entry.index} != {self._end + 1}")
        tail = self._begin, self._end, self._end_term, self.write_pos  # _whole_or_nothing, inlined on this hot path
        try:
            pos = self._reserve(entry.size, entry.pos)
            if pos != entry.pos:
                raise LedgerError(ResponseCode.DISK_ERROR, f"pos {entry.pos} != {pos}")
            self._write(entry)
        except BaseException:
            self._undo_appends(tail)
            raise

    def append_run_as_follower(self, entries: tuple[Entry, ...] | list[Entry]) -> None:
        """:meth:`append_as_follower` for each of ``entries`` in order: the run that fits the current data and index
        segments written in one C call (``write_entries``, dledger/_entries.c), each entry it stops at (not next, a
        new segment, a blank, the index's reserve) here; the same bytes and the same errors either way."""
        done = 0
        while done < len(entries):
            if _native is not None and not self.disk_full:
                done += self._write_run(entries, done)
                if done == len(entries):
                    return
            self.append_as_follower(entries[done])
            done += 1

    def _write_run(self, entries: tuple[Entry, ...] | list[Entry], start: int) -> int:
        """Write ``entries[start:]`` into the current segments in C while each is next and fits; returns how many."""
        data, nxt = self.data.last(), self._end + 1
        index = self.index.find(nxt * INDEX_UNIT_SIZE) if data is not None else None
        if data is None or index is None:
            return 0
        assert _native is not None
        written: int
        end: int
        written, end = _native.write_entries(
            entries, start, nxt, data.buf, data.file_from_offset, data.wrote_position,
            data.file_size - MIN_BLANK_LEN, index.buf, index.file_from_offset, min(index.reserved, index.file_size),
        )  # fmt: skip
        if written:
            last = entries[start + written - 1]
            data.wrote_position = end
            index_end = (last.index + 1) * INDEX_UNIT_SIZE - index.file_from_offset
            index.wrote_position = max(index.wrote_position, index_end)
            self._end, self._end_term = last.index, last.term
            if self._begin == -1:
                self._begin = entries[start].index
        return written

    def truncate(self, entry: Entry) -> int:
        """Make the leader's ``entry`` the last one: kept when this log holds it (what follows is cut; its index record
        is rewritten in place, so no file is made), else written where the cut leaves the log. Synced at once. A
        write that fails (OSError: a segment that cannot be made; LedgerError) leaves the log ending right before
        ``entry``, cut and consistent (end term, flushed index); a sync that fails leaves it truncated, not yet
        durably (a power loss may bring back the tail it cut, never answered for). Either error propagates."""
        keep = self.get(entry.index) == entry
        if not keep and entry.index == 0 and self.rebuild_floor:
            _log_other_copy(self.get(0), entry)
        if not keep and not self._continues(entry):
            return self._rebuild_at(entry)
        cut = entry.end_pos if keep else entry.pos
        if cut > self.write_pos:
            raise LedgerError(ResponseCode.DISK_ERROR, f"truncate to {cut}, data ends at {self.write_pos}")
        self._truncations += 1
        last = entry.index if keep else entry.index - 1
        self._cut_data(cut)
        self._cut_index((last + 1) * INDEX_UNIT_SIZE)
        self._end_at_entry(last)
        with self._whole_or_nothing():
            self._write(entry, data=not keep)
        self._sync_tails()
        return entry.index

    def _end_at_entry(self, last: int) -> None:
        """A truncation's cut leaves the log ending at entry ``last`` (empty when it is before the first): the end
        term is that entry's, and the flushed index goes no further."""
        record = self.index_record(last) if 0 <= self._begin <= last else None
        if record is None:
            self._begin = self._end = self._end_term = -1
        else:
            self._end, self._end_term = last, record.term
        self._flushed = min(self._flushed, self._end)

    def _continues(self, entry: Entry) -> bool:
        """Whether ``entry`` can replace this log's tail at its index: the index is in the log or just after it, and
        its position in the data this log holds."""
        begin = max(self._begin, 0)
        return begin <= entry.index <= self._end + 1 and self.data.min_offset <= entry.pos <= self.write_pos

    def _rebuild_at(self, entry: Entry) -> int:
        """Start the log afresh with ``entry`` (DLedger's ``rebuildWithPos``): the leader's log no longer holds what
        this one would continue from (a member new or away while the leader's oldest segments were deleted). Every
        segment goes; the data segment holding ``entry.pos`` starts with a blank up to it, so positions stay the
        leader's. Synced at once, as a truncation is. In a mixed store (:attr:`rebuild_floor` set) only past the
        classic end and at an entry after the first (the leader deleted entries, so its classic part is gone too);
        otherwise the leader's log and this one started from different classic copies: refused (LedgerError,
        DISK_ERROR, logged) with nothing changed."""
        floor = self.rebuild_floor
        if floor and (entry.pos < floor or entry.index == 0):
            log.error("dledger entry %d at %d: not rebuilt there, this store's classic CommitLog ends at %d (a member "
                      "of a mixed group must start from the same copy of the classic store)", entry.index, entry.pos,
                      floor)  # fmt: skip
            raise LedgerError(ResponseCode.DISK_ERROR, f"entry {entry.index} at {entry.pos}, classic end {floor}")
        self._truncations += 1
        for queue in (self.data, self.index):
            while queue.files:
                self._drop(queue.files.pop())
        self._begin = self._end = self._end_term = self._flushed = -1
        with self._whole_or_nothing():
            self._open_at(entry.pos)
            self._write(entry)
        self._flushed = entry.index - 1
        self._sync_tails()
        return entry.index

    def start_at(self, pos: int) -> None:
        """Have an empty log's first entry written at ``pos`` (a mixed CommitLog's DLedger part starts where the
        classic one ends: DLedgerCommitLog's ``dLedgerFileList.getLastMappedFile(dividedCommitlogOffset)``). Durable
        at once: the first data segment is created, opening with a blank up to ``pos`` when ``pos`` is not a segment
        start. Raises LedgerError (DISK_ERROR) on a log that holds data already."""
        if self.data.files or self._end >= 0:
            raise LedgerError(ResponseCode.DISK_ERROR, f"the log holds data: it cannot start at {pos}")
        mf = self._open_at(pos)
        mf.flush()

    @property
    def data_start(self) -> int:
        """Where the first data segment's first entry lies (or would): after a leading blank; -1 with no segment."""
        files = self.data.files
        return files[0].file_from_offset + _leading_blank(files[0]) if files else -1

    def _open_at(self, pos: int) -> MappedFile:
        """The first data segment of an empty log, made so that its next entry goes at ``pos``: the segment holding
        it, with a blank before it (a fresh segment is zeros: the blank's header is all it needs)."""
        lead = pos % self.config.mapped_file_size_for_entry_data
        if 0 < lead < MIN_BLANK_LEN:
            raise LedgerError(ResponseCode.DISK_ERROR, f"entry at {pos}: no room for a blank before it")
        mf = self.data.roll(pos - lead)
        if lead:
            mf.buf[0:BLANK_HEADER_SIZE] = blank_header(lead)
            mf.wrote_position = lead
        return mf

    def delete_expired(self, expire_before_ms: int, below: int, *, force: bool = False, limit: int = 10) -> int:
        """Delete the oldest data segments, never the last, as DLedger's ``deleteExpiredFileByTime``: each one wholly
        before position ``below`` (ours: the caller's committed, flushed and dispatched end) and last modified before
        ``expire_before_ms`` (any age with ``force``), at most ``limit``, stopping at the first that is not. The first
        entry left becomes the begin index and the index segments wholly before it go too. Files are unlinked now
        and unmapped by the next flush. Returns how many data segments went."""
        files = self.data.files
        deleted = 0
        while deleted < limit and len(files) > 1:
            first = files[0]
            if first.end_offset > below or (not force and first.mtime_ms() > expire_before_ms):
                break
            self._drop(files.pop(0))
            deleted += 1
        if deleted:
            self._begin = decode_header(files[0].view, 0).index
            self._drop_index_below_begin()
        return deleted

    def _drop_index_below_begin(self) -> None:
        """Unlink the index segments wholly before the first entry's record (DLedger's ``reviseLedgerBeginIndex``:
        ``indexFileList.resetOffset(ledgerBeginIndex * INDEX_UNIT_SIZE)``), after a deletion and at the load, which
        finds those a member killed between the data and the index unlinks left behind."""
        floor = self._begin * INDEX_UNIT_SIZE
        while len(self.index.files) > 1 and self.index.files[0].end_offset <= floor:
            self._drop(self.index.files.pop(0))

    def set_committed(self, index: int) -> None:
        record = self.index_record(index) if index >= 0 else None
        self._committed = index
        self.committed_pos = -1 if record is None else record.pos + record.size

    # ---- writing -------------------------------------------------------------------------------------------------

    def _reserve(self, size: int, expected: int | None = None) -> int:
        """The position of the next entry of ``size`` bytes, writing the blank that ends a full segment."""
        self._check_fits(size)
        pos, filler = place(self.write_pos, size, self.config.mapped_file_size_for_entry_data)
        if expected is not None and pos != expected:
            return pos
        if filler:
            mf = self.data.last()
            assert mf is not None
            _end_with_blank(mf)
        return pos

    def _check_leader_entry(self, size: int) -> None:
        """Raise LedgerError for a leader's entry of ``size`` bytes: UNKNOWN past :data:`ENTRY_BUFFER_SIZE` (DLedger's
        buffer overflows: no DLedgerException, no DLedger code), DISK_ERROR when no data segment holds it."""
        if size > ENTRY_BUFFER_SIZE:
            raise LedgerError(ResponseCode.UNKNOWN, f"an entry of {size} bytes exceeds the {ENTRY_BUFFER_SIZE}-byte "
                              "entry buffer")  # fmt: skip
        self._check_fits(size)

    def _check_fits(self, size: int) -> None:
        """Raise LedgerError (DISK_ERROR) for an entry of ``size`` bytes that no data segment holds with a blank."""
        file_size = self.config.mapped_file_size_for_entry_data
        if size + MIN_BLANK_LEN > file_size:
            raise LedgerError(ResponseCode.DISK_ERROR, f"an entry of {size} bytes does not fit a {file_size}-byte file")

    def _data_segment(self) -> MappedFile:
        """The data segment the next entry goes in: the last one, or a new one when it is full (or none exists)."""
        mf = self.data.last()
        if mf is None or mf.wrote_position == mf.file_size:
            mf = self.data.roll(self.data.next_start())
        return mf

    def _write(self, entry: Entry, *, data: bool = True) -> None:
        if data:
            mf = self._data_segment()
            at = entry.pos - mf.file_from_offset
            if at != mf.wrote_position:
                raise LedgerError(ResponseCode.DISK_ERROR, f"entry at {entry.pos}, data ends at {self.write_pos}")
            # The body before the header: a process killed mid-copy leaves no header, so recovery ends the log there.
            mf.buf[at + HEADER_SIZE : at + entry.size] = entry.body
            pack_header_into(mf.buf, at, entry)
            mf.wrote_position = at + entry.size
        self._write_index_fields(entry.magic, entry.pos, entry.size, entry.index, entry.term)
        self._end, self._end_term = entry.index, entry.term
        if self._begin == -1:
            self._begin = entry.index

    def _write_index(self, record: IndexRecord) -> MappedFile:
        return self._write_index_fields(record.magic, record.pos, record.size, record.index, record.term)

    def _write_index_fields(self, magic: int, pos: int, size: int, index: int, term: int) -> MappedFile:
        """Write the index record of entry ``index`` at ``index * 32``, in the segment that holds it (recovery
        rewrites records of earlier segments too); returns that segment."""
        at = index * INDEX_UNIT_SIZE
        mf = self._index_segment(at)
        rel = at - mf.file_from_offset
        if rel + INDEX_UNIT_SIZE > mf.reserved:
            mf.reserve(rel + INDEX_UNIT_SIZE)  # sparse: blocks first, or a full disk is a SIGBUS at the write
        INDEX_LAYOUT.pack_into(mf.buf, rel, magic, pos, size, index, term)
        if mf.wrote_position < rel + INDEX_UNIT_SIZE:
            mf.wrote_position = rel + INDEX_UNIT_SIZE
        return mf

    def _index_segment(self, at: int) -> MappedFile:
        """The index segment holding byte ``at``: an existing one, or a new one when ``at`` lies in the segment just
        after the last (or there is none). Raises LedgerError (DISK_ERROR) for ``at`` before the first segment or
        past the next one: a record is never written anywhere else (recovery starts the index afresh first:
        :meth:`_rewrite_index`)."""
        mf = self.index.find(at)
        if mf is not None:
            return mf
        start = at - at % self.index.file_size
        if at >= 0 and (not self.index.files or start == self.index.next_start()):
            return self.index.roll(start)
        raise LedgerError(ResponseCode.DISK_ERROR, f"index record at {at}, index segments span "
                          f"{self.index.min_offset}..{self.index.next_start()}")  # fmt: skip

    def _cut_data(self, offset: int) -> None:
        self._cut(self.data, offset)

    def _cut_index(self, offset: int) -> None:
        self._cut(self.index, offset)

    def _cut(self, queue: MappedFileQueue, offset: int) -> None:
        """End ``queue`` at ``offset``: later segments go, the last one's written bytes past it are erased. Only up to
        what was written: nothing lies beyond (preallocated zeros, erased by the recovery and by every cut), and
        reading a whole 1 GiB segment would block the loop for seconds."""
        self._retire(queue, offset)
        last = queue.last()
        if last is not None:
            rel = max(0, offset - last.file_from_offset)
            last.zero_from(rel, last.wrote_position)
            last.cut(rel)

    def _retire(self, queue: MappedFileQueue, offset: int) -> None:
        """Unlink the segments that start at or after ``offset``; they are unmapped by the next flush."""
        while queue.files and queue.files[-1].file_from_offset >= offset and len(queue.files) > 1:
            self._drop(queue.files.pop())

    def _drop(self, mf: MappedFile) -> None:
        """Unlink a segment taken out of its queue; the next flush unmaps it (a flush thread may still hold it). A
        file that cannot be unlinked is logged and left behind, out of the log all the same."""
        self._retired.append(mf)
        try:
            mf.path.unlink()
        except FileNotFoundError:
            pass
        except OSError as exc:
            log.error("dledger segment %s left behind, not unlinked: %s", mf.path, exc)

    def _sync_tails(self) -> None:
        """Make a truncation durable now (rare: only a follower that disagreed with a new leader)."""
        for queue in (self.data, self.index):
            last = queue.last()
            if last is not None and last.fd >= 0:
                os.fdatasync(last.fd)

    # ---- flushing and the checkpoint -------------------------------------------------------------------------------

    def flush_plan(self) -> FlushPlan:
        """On the Trio thread: the index that will be durable, the segments to sync, those to unmap after, and the
        truncations so far."""
        files = self.data.flush_snapshot() + self.index.flush_snapshot()
        retired, self._retired = self._retired, []
        return self._end, files, retired, self._truncations

    @staticmethod
    def flush_planned(plan: FlushPlan) -> None:
        """In a worker thread: ``fdatasync`` the planned segments, then unmap the retired ones (also when a sync
        raises OSError, which propagates: the next plan takes the segments not synced)."""
        _, files, retired, _ = plan
        try:
            for mf in files:
                mf.flush()
        finally:
            for mf in retired:
                mf.close()

    def flushed(self, plan: FlushPlan) -> None:
        """Back on the Trio thread: entries up to the plan's end are durable, unless a truncation came meanwhile (the
        entries at those indexes may have been written again since; the next flush covers them)."""
        if plan[3] == self._truncations:
            self._flushed = max(self._flushed, min(plan[0], self._end))

    def flush_all(self) -> None:
        """Plan, flush and record in one go (blocking; shutdown and tests)."""
        plan = self.flush_plan()
        self.flush_planned(plan)
        self.flushed(plan)

    def persist_checkpoint(self) -> None:
        """``checkpoint``: ``endIndex`` and ``committedIndex`` (blocking)."""
        write_properties(self.directory / CHECKPOINT_FILE, {"endIndex": self._end, "committedIndex": self._committed})

    # ---- recovery ---------------------------------------------------------------------------------------------------

    def load(self) -> None:
        """Map the files and recover (see the module docstring). Blocking."""
        self.directory.mkdir(parents=True, exist_ok=True)
        self.data.load()
        self.index.load()
        if not self.data.files:
            self.index.truncate_to(0)
            self._flushed = -1
            return
        first = self.data.files[0]
        lead = _leading_blank(first)
        try:
            self._begin = decode_header(first.view, lead).index
        except EntryDecodeError:
            self._begin = -1
        start = self._recovery_start()
        self._scan(start, lead)
        if self._begin >= 0:
            self._drop_index_below_begin()
        self._flushed = self._end
        props = read_properties(self.directory / CHECKPOINT_FILE)
        try:
            committed = int(props.get("committedIndex", "-1"))
        except ValueError:
            committed = -1
        if committed > self._end:
            committed = self._end
        if self._begin > 0 and self._begin <= self._end:
            # Entries before the first went by retention, which takes only committed ones (a segment always ends
            # with a blank, so the entry after it was committed too), or by a rebuild at the leader's first entry,
            # committed for the same reason: the first entry is committed even when the checkpoint (every 3 s)
            # predates the deletion or the rebuild.
            committed = max(committed, self._begin)
        if committed >= self._begin and self._end >= 0:
            self.set_committed(committed)

    def _recovery_start(self) -> int:
        """The data segment to scan from: the third from the end, or earlier while its first entry disagrees with
        its index record."""
        files = self.data.files
        at = max(0, len(files) - 3)
        while at > 0:
            mf = files[at]
            try:
                header = decode_header(mf.view, 0)
            except EntryDecodeError:
                at -= 1
                continue
            record = self.index_record(header.index) if header.index >= 0 else None
            if record is not None and record.pos == mf.file_from_offset and record.term == header.term:
                break
            at -= 1
        return at

    def _scan(self, start: int, lead: int) -> None:
        """Check the entries from segment ``start`` on; ``lead``: where the first segment's first entry lies."""
        files = self.data.files
        rewritten: dict[int, MappedFile] = {}  # index segments by start
        end_pos = files[start].file_from_offset + (lead if start == 0 else 0)
        expected_index = -1
        last_term = -1
        if start > 0:
            header = decode_header(files[start].view, 0)
            expected_index = header.index
            previous = self.index_record(header.index - 1) if header.index > 0 else None
            last_term = previous.term if previous is not None else -1
        for mf in files[start:]:
            pos = lead if mf is files[0] else 0
            while pos < mf.file_size:
                if is_blank(mf.view, pos):
                    end_pos = mf.end_offset
                    break
                try:
                    entry = decode_entry(mf.view, pos)
                except EntryDecodeError:
                    return self._end_at(end_pos, expected_index, rewritten)
                absolute = mf.file_from_offset + pos
                good = entry.pos == absolute and entry.term >= last_term and pos + entry.size <= mf.file_size
                good = good and (entry.body_crc == 0 or entry.body_crc == body_crc(entry.body))
                good = good and (expected_index == -1 or entry.index == expected_index) and entry.index >= 0
                if not good:
                    return self._end_at(end_pos, expected_index, rewritten)
                record = index_record_of(entry)
                if self.index_record(entry.index) != record:
                    segment = self._rewrite_index(record)
                    rewritten[segment.file_from_offset] = segment
                expected_index, last_term = entry.index + 1, entry.term
                end_pos = absolute + entry.size
                self._end, self._end_term = entry.index, entry.term
                pos += entry.size
        self._end_at(end_pos, expected_index, rewritten)

    def _rewrite_index(self, record: IndexRecord) -> MappedFile:
        """Recovery: write ``record`` again at ``index * 32``; returns its segment. When neither an index segment
        nor the one after the last holds that offset (the first segments lost, or stale ones left before the log's
        first entry), every index segment goes and the index starts afresh at the segment holding it, as DLedger's
        recover does (``truncateOffset`` at the record, then ``rebuildWithPos``); the records after it are written
        again as the scan reaches them."""
        at = record.index * INDEX_UNIT_SIZE
        if self.index.find(at) is None and at - at % self.index.file_size != self.index.next_start():
            log.warning("dledger index record %d at %d: no index segment leads up to it (they span %d..%d), the "
                        "index is rebuilt from the data", record.index, at, self.index.min_offset,
                        self.index.next_start())  # fmt: skip
            while self.index.files:
                self._drop(self.index.files.pop())
        return self._write_index(record)

    def _end_at(self, end_pos: int, next_index: int, rewritten: dict[int, MappedFile]) -> None:
        """End the recovered log at ``end_pos`` (data) and ``next_index`` (index), erasing what follows, and sync
        the index segments whose records the scan rewrote (load marks every segment flushed: no flush would). Raises
        StoreCorruptError, nothing cut, when ``end_pos`` lies more than a segment before the last one's start."""
        last = self.data.files[-1]
        if last.file_from_offset - end_pos > last.file_size:
            raise StoreCorruptError(f"dledger recovery would end the log at {end_pos}, more than a segment before "
                                    f"the last one ({last.path}): check the data files manually")  # fmt: skip
        self.data.truncate_to(end_pos)
        self.index.truncate_to(max(0, next_index) * INDEX_UNIT_SIZE)
        for segment in rewritten.values():
            if segment.fd >= 0:  # not removed by the truncation
                os.fdatasync(segment.fd)
        if self._end < self._begin:
            self._begin = self._end = self._end_term = -1

    def close(self) -> None:
        self.data.close()
        self.index.close()
        for mf in self._retired:
            mf.close()
        self._retired.clear()
