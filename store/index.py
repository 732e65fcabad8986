"""IndexService: all hash index files of a store (docs/protocol.md#64-indexfile), rolling, querying, truncating and
expiring them.

One file's layout and its reads and writes are :class:`~store.index_file.IndexFile`'s; the names callers import from
here (``IndexFileCorruptError``, ``HEADER_SIZE``, ``index_file_size``, ``index_key_hash`` ...) are re-exported.

Files live in ``<root>/index/`` named by creation time (``yyyyMMddHHmmssSSS``, local time, as Java names them) and are
memory-mapped for their whole life. The header is rewritten in the mapping after every entry, so the page cache
always holds a consistent file; :meth:`IndexService.flush` makes it durable.

Ownership and threads: one owner (the store's dispatch path) calls ``put``, ``query``, ``truncate_after``,
``delete_expired``, ``load``, ``gaps``, ``refill`` and ``close``; ``flush`` may run in a worker thread
(``trio.to_thread``) concurrently with ``put`` but not with the calls that unmap files (``truncate_after``,
``delete_expired``, ``close``).

Errors: ``load`` deletes a file :meth:`IndexFile.open` refuses (:class:`IndexFileCorruptError`: wrong size, impossible
counts or offsets) and keeps the others, as Java's ``IndexService.load`` loads each file on its own; the CommitLog
range the deleted file covered is a gap (:meth:`IndexService.gaps`) whose keys a classic store's recovery indexes
again (:meth:`IndexService.refill`, store/recovery.py; a DLedger store's load leaves them unindexed). The gap is
recorded on disk before the file goes and forgotten only once the refill is flushed (:mod:`store.index_gaps`), so a
crash before the refill ends leads to the refill on the next start. A corrupt chain inside a file only ends a lookup
early, it never raises or loops.
"""

from __future__ import annotations

import bisect
import logging
import struct
import threading
import time
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Final

from store.index_file import (
    HASH_SLOT_SIZE,
    HEADER_SIZE,
    INDEX_ENTRY_SIZE,
    INVALID_INDEX,
    IndexFile,
    IndexFileCorruptError,
    index_file_size,
    index_key_hash,
    topic_key_hash,
    topic_key_hashes,
)
from store.index_gaps import (
    commit_refill,
    is_index_file_name,
    read_dropped,
    record_dropped,
    refill_path,
    settle_refills,
)

if TYPE_CHECKING:
    from store.reads import IndexLike

_HASHED: Final = struct.Struct(">iq")

log = logging.getLogger(__name__)

__all__ = [
    "HASH_SLOT_SIZE",
    "HEADER_SIZE",
    "INDEX_ENTRY_SIZE",
    "INVALID_INDEX",
    "IndexFile",
    "IndexFileCorruptError",
    "IndexGap",
    "IndexRuns",
    "IndexService",
    "index_file_epoch_ms",
    "index_file_name",
    "index_file_size",
    "index_key_hash",
    "topic_key_hash",
    "topic_key_hashes",
]


def index_file_name(epoch_ms: int) -> str:
    """Java's index file name: local time ``yyyyMMddHHmmssSSS``."""
    return time.strftime("%Y%m%d%H%M%S", time.localtime(epoch_ms // 1000)) + f"{epoch_ms % 1000:03d}"


def index_file_epoch_ms(name: str) -> int:
    """The epoch milliseconds an index file's name (:func:`index_file_name`) stands for."""
    return int(time.mktime(time.strptime(name[:14], "%Y%m%d%H%M%S"))) * 1000 + int(name[14:])


def _name_after(name: str) -> str:
    """The file name of the first millisecond after ``name``'s whose name sorts after it."""
    epoch_ms = index_file_epoch_ms(name) + 1
    while index_file_name(epoch_ms) <= name:
        epoch_ms += 1
    return index_file_name(epoch_ms)


@dataclass(frozen=True, slots=True)
class IndexGap:
    """CommitLog messages whose keys were in index files :meth:`IndexService.load` deleted: those from ``after``
    (the last message indexed before them, whose later keys may have been in them; -1 for none) through ``before``
    (the first indexed after them, whose first keys may have been in them; ``None``: none is, up to the log's end),
    both included: ``put`` rolls to a new file between two keys of one message. ``name`` is the first deleted file's
    and ``limit`` the next kept file's (``None``: none): the refilled files are named from ``name`` on, below
    ``limit``."""

    after: int
    before: int | None
    name: str
    limit: str | None


class IndexService:
    """All index files of a store, newest last. See the module docstring for threads and errors.

    The key indexed for a message is ``topic + "#" + key`` for its UNIQ_KEY and each KEYS token (the caller passes
    them). ``query`` does not cap ``max_num``: the broker clamps it to ``maxMsgsNumBatch`` (64) as Java does.
    """

    def __init__(self, root: Path, max_hash_slots: int = 5_000_000, max_index_num: int = 20_000_000) -> None:
        if max_hash_slots <= 0 or max_index_num <= 1:
            raise ValueError("an index needs at least one hash slot and two entry numbers")
        self.directory = root / "index"
        self.max_hash_slots = max_hash_slots
        self.max_index_num = max_index_num
        self._files: list[IndexFile] = []
        self._dropped: list[str] = []  # names of the files load deleted, until refilled (as recorded on disk)
        self._lock = threading.Lock()
        self._last_flushed_timestamp = 0

    @property
    def files(self) -> list[IndexFile]:  # a snapshot, oldest first
        with self._lock:
            return list(self._files)

    @property
    def last_update_timestamp(self) -> int:
        """Store time of the newest indexed message (0 when nothing is indexed)."""
        last = self._last_non_empty()
        return last.end_timestamp if last else 0

    @property
    def last_update_phy_offset(self) -> int:
        """CommitLog offset of the newest indexed message (0 when nothing is indexed)."""
        last = self._last_non_empty()
        return last.end_phy_offset if last else 0

    @property
    def last_flushed_timestamp(self) -> int:
        """Store time of the newest message whose entries the last :meth:`flush` made durable (checkpoint field)."""
        return self._last_flushed_timestamp

    def load(self) -> None:
        """Open the files already in ``<root>/index/``. One :meth:`IndexFile.open` refuses is logged, recorded and
        deleted, the rest kept: what it covered is a gap (:meth:`gaps`) until :meth:`refill`, this start or a later
        one (gaps recorded before are gaps still; what a refill cut short wrote is deleted). Any other error (I/O)
        raises, with the files opened before it closed again."""
        self.close()
        self.directory.mkdir(parents=True, exist_ok=True)
        for leftover in self.directory.glob("*.creating"):
            leftover.unlink()
        dropped = read_dropped(self.directory)
        names = sorted(p.name for p in self.directory.iterdir() if is_index_file_name(p.name))
        files, unusable = self._open_files(settle_refills(self.directory, dropped, names), dropped)
        if unusable:
            record_dropped(self.directory, dropped.union(unusable))  # before the deletes: the gap outlives a crash
            for name in unusable:
                (self.directory / name).unlink()
        with self._lock:
            self._files = files
        self._dropped = sorted(dropped.union(unusable))
        last = self._last_non_empty()
        self._last_flushed_timestamp = last.end_timestamp if last else 0

    def _open_files(self, names: list[str], dropped: set[str]) -> tuple[list[IndexFile], list[str]]:
        """Map the files ``names``; returns them and the names of those unusable: refused by :meth:`IndexFile.open`
        (logged), or recorded as deleted already (a crash came before the delete)."""
        files: list[IndexFile] = []
        unusable: list[str] = []
        try:
            for name in names:
                if name in dropped:
                    unusable.append(name)
                    continue
                try:
                    files.append(IndexFile.open(self.directory / name, self.max_hash_slots, self.max_index_num))
                except IndexFileCorruptError as exc:
                    log.warning("%s: deleted, its keys are missing until recovery re-indexes them", exc)
                    unusable.append(name)
        except BaseException:
            for f in files:
                f.close()
            raise
        return files, unusable

    def gaps(self) -> list[IndexGap]:
        """The CommitLog ranges whose index files :meth:`load` deleted and :meth:`refill` has not refilled, oldest
        first; neighbouring deleted files make one gap. Bounded by the files kept now (call after
        :meth:`truncate_after`)."""
        files = self.files
        names = [f.path.name for f in files]
        gaps: list[IndexGap] = []
        for name in self._dropped:
            at = bisect.bisect(names, name)
            kept_before = [f for f in files[:at] if not f.is_empty]
            kept_after = files[at:]
            limit = names[at] if kept_after else None
            if gaps and gaps[-1].limit == limit:
                continue
            after = kept_before[-1].end_phy_offset if kept_before else -1
            before = next((f.begin_phy_offset for f in kept_after if not f.is_empty), None)
            gaps.append(IndexGap(after, before, name, limit))
        return gaps

    def refill(self, gap: IndexGap, messages: Iterable[tuple[str, list[str], int, int]]) -> int:
        """Index the gap's messages, ``(topic, keys, phy_offset, store_timestamp)`` in CommitLog order, into new files
        in the deleted ones' place (named from ``gap.name`` on, below ``gap.limit``), then close the gap: the files
        are flushed, the gap leaves the record on disk, the files take their names and join the others (the steps of
        :mod:`store.index_gaps`). Returns how many entries were written: fewer than the keys given only when the
        names below ``gap.limit`` run out (the deleted files held fewer keys than the log gives now), logged. An error
        raises with the gap still recorded: the next :meth:`load` deletes what was written and it is a gap again."""
        files, written = self._write_refill(gap, self._not_kept(gap, messages))
        left = [n for n in self._dropped if not (n >= gap.name and (gap.limit is None or n < gap.limit))]
        commit_refill(self.directory, left, files)
        self._dropped = left
        with self._lock:
            for file in files:
                bisect.insort(self._files, file, key=lambda f: f.path.name)
        return written

    def _not_kept(
        self, gap: IndexGap, messages: Iterable[tuple[str, list[str], int, int]]
    ) -> Iterator[tuple[str, list[str], int, int]]:
        """``messages`` less the keys of the gap's bounding messages the kept files still hold: the first keys of the
        message at ``gap.after`` end the file before the gap, the last keys of the one at ``gap.before`` start the
        file after it. Each key is then indexed once, as RocketMQ indexes it, and a query answers every entry."""
        names = [f.path.name for f in self.files]
        at = bisect.bisect(names, gap.name)
        before = next((f for f in reversed(self.files[:at]) if not f.is_empty), None)
        after = next((f for f in self.files[at:] if not f.is_empty), None)
        head = 0 if before is None else before.entries_of_last(gap.after)
        tail = 0 if after is None or gap.before is None else after.entries_of_first(gap.before)
        for topic, keys, phy, store_timestamp in messages:
            if phy == gap.after:
                keys = keys[head:]
            if phy == gap.before:
                keys = keys[: len(keys) - tail]
            if keys:
                yield topic, keys, phy, store_timestamp

    def _write_refill(
        self, gap: IndexGap, messages: Iterable[tuple[str, list[str], int, int]]
    ) -> tuple[list[IndexFile], int]:
        """:meth:`refill`'s files, ``<name>.refill`` (not in the service yet), and how many entries they hold."""
        files: list[IndexFile] = []
        name = gap.name
        written = 0
        for topic, keys, phy_offset, store_timestamp in messages:
            entries = [(h, phy_offset) for h in topic_key_hashes(topic, keys)]
            while entries:
                if not files or files[-1].is_full:
                    name = _name_after(name) if files else name
                    if gap.limit is not None and name >= gap.limit:
                        log.warning("index gap from %s: no file name left below %s; later keys not indexed",
                                    gap.name, gap.limit)  # fmt: skip
                        return files, written
                    path = refill_path(self.directory, name)
                    files.append(IndexFile.create(path, self.max_hash_slots, self.max_index_num))
                count = files[-1].put_entries(entries, store_timestamp)
                entries, written = entries[count:], written + count
        return files, written

    def put(self, topic: str, keys: Iterable[str], phy_offset: int, store_timestamp: int) -> None:
        """Index one message under ``topic#key`` for each non-empty key, rolling to a new file when one fills up.

        A message at or below the newest indexed offset is skipped, so re-dispatching the CommitLog tail after
        recovery does not index a message twice."""
        if phy_offset > self._indexed_up_to():
            self._write([(topic_key_hash(topic, key), phy_offset) for key in keys if key], store_timestamp)

    def put_batch(self, topic: str, messages: Iterable[tuple[Iterable[str], int]], store_timestamp: int) -> None:
        """:meth:`put` for each ``(keys, phy_offset)`` of a batch stored at one time, offsets increasing: the same
        entries, with one header rewrite per batch instead of per message."""
        floor = self._indexed_up_to()
        keyed = [(k, phy) for keys, phy in messages if phy > floor for k in keys if k]
        hashes = topic_key_hashes(topic, [k for k, _ in keyed])
        self._write(list(zip(hashes, [phy for _, phy in keyed], strict=True)), store_timestamp)

    def put_hashed(self, packed: bytes, store_timestamp: int) -> None:
        """Entries already hashed (a replica's scan: 12 bytes each, ``keyHash int32 | phyOffset int64`` big-endian,
        offsets non-decreasing, one store time): what :meth:`put_batch` writes for the keys they were hashed from,
        with the same skip of offsets already indexed."""
        floor = self._indexed_up_to()
        if packed and _HASHED.unpack_from(packed)[1] <= floor:
            packed = b"".join(_HASHED.pack(h, phy) for h, phy in _HASHED.iter_unpack(packed) if phy > floor)
        while packed:
            packed = packed[self._writable_file().put_packed(packed, store_timestamp) * _HASHED.size :]

    def put_timed(self, topic: str, messages: Iterable[tuple[Iterable[str], int, int]]) -> None:
        """:meth:`put` for each ``(keys, phy_offset, store_timestamp)`` of a run of one topic whose store times
        differ, offsets increasing: the same entries, with one header rewrite per file written."""
        floor = self._indexed_up_to()
        keyed = [(k, phy, ts) for keys, phy, ts in messages if phy > floor for k in keys if k]
        hashes = topic_key_hashes(topic, [k for k, _, _ in keyed])
        entries = [(h, phy) for h, (_, phy, _) in zip(hashes, keyed, strict=True)]
        stamps = [ts for _, _, ts in keyed]
        while entries:
            written = self._writable_file().put_entries(entries, stamps[-1], stamps)
            entries, stamps = entries[written:], stamps[written:]

    def _indexed_up_to(self) -> int:
        """The newest indexed CommitLog offset (-1 when nothing is indexed)."""
        # Only the owner thread mutates the file list, so it reads it without the lock on this hot path.
        last = self._files[-1] if self._files else None
        if last is None or last.is_empty:
            last = self._last_non_empty()
        return -1 if last is None else last.end_phy_offset

    def _write(self, entries: list[tuple[int, int]], store_timestamp: int) -> None:
        """Append ``(key hash, phy offset)`` entries, rolling to a new file whenever one fills up."""
        while entries:
            entries = entries[self._writable_file().put_entries(entries, store_timestamp) :]

    def query(self, topic: str, key: str, max_num: int, begin_ms: int, end_ms: int) -> list[int]:
        """CommitLog offsets of messages indexed under ``topic#key`` and stored within [begin_ms, end_ms], newest
        first, at most ``max_num``. Hash collisions are returned too: callers re-check the keys of the records."""
        out: list[int] = []
        for _ in self.query_steps(topic, key, max_num, begin_ms, end_ms, out):
            pass
        return out

    def query_steps(
        self, topic: str, key: str, max_num: int, begin_ms: int, end_ms: int, out: list[int]
    ) -> Iterator[None]:
        """:meth:`query` into ``out``, yielding every :data:`~store.index_file.SELECT_STEP` entries walked
        (:meth:`IndexFile.select_steps`), so that an owner on an event loop lets other work run between steps, as
        RocketMQ walks the chains on its query pool's threads; puts may run between steps."""
        if max_num <= 0:
            return
        key_hash = index_key_hash(topic + "#" + key)
        for file in reversed(self.files):
            if file.is_empty:
                continue
            if file.time_overlaps(begin_ms, end_ms):
                yield from file.select_steps(key_hash, out, max_num, begin_ms, end_ms)
            if file.begin_timestamp < begin_ms or len(out) >= max_num:
                break

    def truncate_after(self, phy_offset: int) -> None:
        """Recovery: forget entries pointing at or beyond ``phy_offset``; files holding only such entries go away."""
        for file in reversed(self.files):
            if file.is_empty:
                continue
            if file.begin_phy_offset >= phy_offset:
                self._remove(file)
                continue
            if file.end_phy_offset >= phy_offset:
                file.truncate_after(phy_offset)
            break

    def delete_expired(self, min_phy_offset: int) -> int:
        """Retention: delete files whose every entry points below ``min_phy_offset`` (the CommitLog's new minimum),
        never the newest file. Returns how many were deleted."""
        expired = self.take_expired(min_phy_offset)
        for file in expired:
            file.destroy()
        return len(expired)

    def take_expired(self, min_phy_offset: int) -> list[IndexFile]:
        """:meth:`delete_expired`, the files taken out of the service but not destroyed: the caller destroys them
        (``IndexFile.destroy``, in a worker thread)."""
        expired = [f for f in self.files[:-1] if f.end_phy_offset < min_phy_offset]
        with self._lock:
            for file in expired:
                self._files.remove(file)
        return expired

    def flush(self) -> None:
        """Make every entry written so far durable (msync) and advance :attr:`last_flushed_timestamp`."""
        timestamp = self.last_update_timestamp
        for file in self.files:
            if file.dirty:
                file.dirty = False
                try:
                    file.flush()
                except BaseException:
                    file.dirty = True  # the next flush tries it again
                    raise
        self._last_flushed_timestamp = max(self._last_flushed_timestamp, timestamp)

    def close(self) -> None:
        """Flush and unmap every file. The service can be :meth:`load`-ed again afterwards."""
        self.flush()
        with self._lock:
            files, self._files = self._files, []
        for file in files:
            file.close()

    def _last_non_empty(self) -> IndexFile | None:
        with self._lock:
            return next((f for f in reversed(self._files) if not f.is_empty), None)

    def _writable_file(self) -> IndexFile:
        last = self._files[-1] if self._files else None
        if last is not None and not last.is_full:
            return last
        # The full file stays dirty until the next flush: an msync here would stall the dispatch path.
        self.directory.mkdir(parents=True, exist_ok=True)
        file = IndexFile.create(self._new_file_path(last), self.max_hash_slots, self.max_index_num)
        with self._lock:
            self._files.append(file)
        return file

    def _new_file_path(self, last: IndexFile | None) -> Path:
        # Names must sort in creation order and never collide, even for two rolls within one millisecond or after
        # the clock stepped back: then the name is the newest file's time plus one millisecond.
        # A new file never takes or precedes the name of a file whose gap is still recorded: load deletes such a
        # file, and a refill needs the names after it.
        name = index_file_name(time.time_ns() // 1_000_000)
        floor = max([*self._dropped, last.path.name] if last is not None else self._dropped, default=None)
        if floor is not None and name <= floor:
            name = _name_after(floor)
        while (self.directory / name).exists():
            name = _name_after(name)
        return self.directory / name

    def _remove(self, file: IndexFile) -> None:
        with self._lock:
            self._files.remove(file)
        file.destroy()


class IndexRuns:
    """Puts deferred and written in runs: consecutive puts of one topic and one store time go through
    :meth:`IndexService.put_batch`, the same entries and header as one :meth:`~IndexService.put` each, with the keys
    hashed together and one header rewrite per run. The store's deferred index keys go through one per drain
    (a slave's dispatch writes the scan's hashed entries with :meth:`IndexService.put_hashed` instead); :meth:`flush`
    after the last put. With ``timed`` a run is one
    topic whatever the store times (:meth:`IndexService.put_timed`): a DLedger member's commit-time dispatch, whose
    records each carry their own store time."""

    __slots__ = ("_index", "_run", "_timed", "_topic", "_ts")

    def __init__(self, index: IndexLike, *, timed: bool = False) -> None:
        self._index = index
        self._run: list[tuple[Iterable[str], int, int]] = []
        self._topic = ""
        self._ts = -1
        self._timed = timed

    def put(self, topic: str, keys: Iterable[str], phy_offset: int, store_timestamp: int) -> None:
        if topic != self._topic or (store_timestamp != self._ts and not self._timed):
            self.flush()
            self._topic = topic
        self._ts = store_timestamp
        self._run.append((keys, phy_offset, store_timestamp))

    def flush(self) -> None:
        """Write the pending run."""
        if self._run:
            run, self._run = self._run, []
            first = run[0][2]
            if self._timed and any(ts != first for _, _, ts in run):
                self._index.put_timed(self._topic, run)
            else:
                self._index.put_batch(self._topic, [(keys, phy) for keys, phy, _ in run], first)
