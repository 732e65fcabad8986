"""Mapped segments: :class:`MappedFile` (one memory-mapped file, preallocated or sparse) and
:class:`MappedFileQueue` (the ordered segments of one log, named by their 20-digit start offset).

Ownership and threads: a queue and its files belong to one owner (the CommitLog or one ConsumeQueue) on the Trio
thread. Appends write through the mmap on that thread. ``flush`` (``fdatasync``), preallocation and warm-up are
blocking and meant for a worker thread; they only read positions that the Trio thread publishes with
single attribute stores. Deleting or truncating files is decided on the Trio thread while the owner's disk lock is
held, so it never races a flush of the same file; retention takes the segments out of their queue there and unmaps
and unlinks them in a worker thread afterwards (:meth:`MappedFileQueue.take_first`, :func:`destroy_segments`).

Full disks: a write through a mapping into a page that has no block behind it, on a disk with none left, is a SIGBUS
that kills the process (the JVM turns it into an InternalError at the write, so RocketMQ's and DLedger's sparse
mapped files fail the write instead). So no file here is written where it holds no blocks: a preallocated segment
takes all of them at creation (:func:`reserve_blocks`), and the one a load ends its log in the rest of them (a Java
broker's are sparse: :meth:`MappedFileQueue.truncate_to`), a sparse one takes them ahead of its writes,
:data:`RESERVE_CHUNK` at a time (:meth:`MappedFile.reserve`), and a full disk is ENOSPC there, before anything is
written. Only the holes of a range take blocks (:func:`file_holes`): XFS refuses a range larger than the free space
even where its blocks are allocated, so a store made here loads on a nearly full disk. Erasing
(:meth:`MappedFile.zero_from`) writes only pages that hold data and skips the holes unread: reading a tmpfs hole
through a mapping takes a page too. What still faults on a full tmpfs is a read of a hole in a file a Java broker
left sparse (an index file's hash slots): those are not given blocks ahead of their reads.

Errors: ``OSError`` from the file system propagates (ENOSPC at a segment's creation removes the half-made file); a
segment with the wrong size or a gap between segment names raises :class:`~store.errors.StoreCorruptError`.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import logging
import mmap
import os
import struct
import threading
from collections.abc import Iterable
from pathlib import Path
from typing import Final, Protocol

from store.errors import StoreCorruptError
from store.failure_streak import FailureStreak
from store.store_paths import SegmentDirs

log = logging.getLogger(__name__)

PAGE_SIZE: Final = 4096
#: Held while a segment's end moves back (:meth:`MappedFile.cut`, :meth:`MappedFileQueue.truncate_to`) and while a
#: flush records its position, so a flush that saw no cut cannot record after one lands.
_CUT_LOCK: Final = threading.Lock()
_ZERO_CHUNK: Final = bytes(1 << 20)


#: posix_fallocate's answers for "this file system cannot": only then is a sparse segment made instead.
_NO_FALLOCATE: Final = frozenset({errno.EOPNOTSUPP, errno.ENOTSUP, errno.EINVAL, errno.ENOSYS})
#: The blocks a sparse file takes at a time ahead of its writes (:meth:`MappedFile.reserve`): one ``fallocate`` per
#: 8192 DLedger index records or 13107 index file entries.
RESERVE_CHUNK: Final = 256 * 1024
#: FS_IOC_FIEMAP (linux/fs.h: _IOWR('f', 11, struct fiemap)), the request and its extent records, asked 64 at a time
_FS_IOC_FIEMAP: Final = 0xC020660B
_FIEMAP_HEAD: Final = struct.Struct("=QQIIII")
_FIEMAP_EXTENT: Final = struct.Struct("=QQQQQIIII")
_FIEMAP_EXTENT_LAST: Final = 1
_FIEMAP_BATCH: Final = 64


def reserve_blocks(fd: int, offset: int, length: int, path: Path) -> None:
    """Give the file ``fd`` (at ``path``) blocks for ``[offset, offset + length)`` (extending it if shorter), so that
    writes through a mapping there never fault for want of one. Only its holes are asked for (:func:`file_holes`):
    XFS's ``fallocate`` fails with ENOSPC when the disk has less free space than the range, even where its blocks are
    allocated, so a range that has them costs nothing and never fails. A full disk raises ``OSError`` (ENOSPC, naming
    ``path``); a file system that cannot preallocate (tmpfs on old kernels, overlay) is left as it is, sparse."""
    for start, end in file_holes(fd, offset, offset + length):
        try:
            os.posix_fallocate(fd, start, end - start)
        except OSError as exc:
            if exc.errno not in _NO_FALLOCATE:
                raise OSError(exc.errno, exc.strerror, str(path)) from exc


def file_holes(fd: int, start: int, end: int) -> list[tuple[int, int]]:
    """The ranges of ``[start, end)`` that the file ``fd`` has no blocks for, past its end included: the gaps between
    its extents (FIEMAP, where unwritten, preallocated ones count as blocks), else its holes as ``SEEK_HOLE`` sees them
    (tmpfs), else (no ``SEEK_HOLE``, or one that reports no hole in a sparse file) the whole range."""
    size = os.fstat(fd).st_size
    inside = min(end, size)
    holes: list[tuple[int, int]] = []
    if start < inside:
        try:
            holes = _gaps(_extents(fd, start, inside), start, inside)
        except OSError:
            try:
                holes = _seek_holes(fd, start, inside)
            except OSError:
                holes = [(start, inside)]
            if not holes and _sparse(fd, size):  # generic lseek: SEEK_HOLE says "the end" for any file
                holes = [(start, inside)]
    if end > max(start, size):
        holes.append((max(start, size), end))
    return holes


def first_hole(fd: int, size: int) -> int:
    """Where the file ``fd`` of ``size`` bytes may first have no block (``SEEK_HOLE``: on XFS and ext4 an unwritten,
    preallocated range counts as a hole, so this may be early, never late); 0 where the file system cannot tell (no
    ``SEEK_HOLE``, or one that reports none in a sparse file)."""
    try:
        hole = os.lseek(fd, 0, os.SEEK_HOLE)
    except OSError:
        return 0
    return 0 if hole >= size and _sparse(fd, size) else min(size, hole)


def _sparse(fd: int, size: int) -> bool:
    """Whether the file has fewer blocks than bytes: a file system without its own ``SEEK_HOLE`` (NFSv3, 9p, FUSE)
    gets Linux's generic lseek, which reports no hole in a sparse file."""
    return os.fstat(fd).st_blocks * 512 < size


def _extents(fd: int, start: int, end: int) -> list[tuple[int, int]]:
    """The extents of ``[start, end)`` with blocks (or a delayed allocation), by ``FS_IOC_FIEMAP``; ``OSError`` where
    the file system has no FIEMAP (tmpfs)."""
    found: list[tuple[int, int]] = []
    request = bytearray(_FIEMAP_HEAD.size + _FIEMAP_BATCH * _FIEMAP_EXTENT.size)
    pos = start
    while pos < end:
        _FIEMAP_HEAD.pack_into(request, 0, pos, end - pos, 0, 0, _FIEMAP_BATCH, 0)
        fcntl.ioctl(fd, _FS_IOC_FIEMAP, request)
        count = _FIEMAP_HEAD.unpack_from(request)[3]
        records = request[_FIEMAP_HEAD.size : _FIEMAP_HEAD.size + count * _FIEMAP_EXTENT.size]
        batch = [(at, at + length, flags) for at, _, length, _, _, flags, *_ in _FIEMAP_EXTENT.iter_unpack(records)]
        found += [(at, stop) for at, stop, _ in batch]
        if count < _FIEMAP_BATCH or batch[-1][2] & _FIEMAP_EXTENT_LAST:
            break
        pos = found[-1][1]
    return found


def _gaps(extents: list[tuple[int, int]], start: int, end: int) -> list[tuple[int, int]]:
    """The parts of ``[start, end)`` outside ``extents`` (sorted)."""
    gaps: list[tuple[int, int]] = []
    pos = start
    for lo, hi in extents:
        if lo > pos:
            gaps.append((pos, min(lo, end)))
        pos = max(pos, hi)
    if pos < end:
        gaps.append((pos, end))
    return [(lo, hi) for lo, hi in gaps if lo < hi]


def _seek_holes(fd: int, start: int, end: int) -> list[tuple[int, int]]:
    """The holes of ``[start, end)`` (within the file) by ``SEEK_HOLE``/``SEEK_DATA``; ``OSError`` where the file
    system cannot tell."""
    holes: list[tuple[int, int]] = []
    pos = start
    while pos < end:
        hole = os.lseek(fd, pos, os.SEEK_HOLE)
        if hole >= end:
            break
        try:
            pos = os.lseek(fd, hole, os.SEEK_DATA)
        except OSError as exc:
            if exc.errno != errno.ENXIO:  # ENXIO: no data after the hole
                raise
            pos = end
        holes.append((hole, min(pos, end)))
    return holes


def _data_ranges(fd: int, start: int, end: int) -> list[tuple[int, int]]:
    """The parts of ``[start, end)`` outside the file's holes as ``SEEK_HOLE`` sees them (an unwritten, preallocated
    range is one: it reads as zeros); the whole range where the file system cannot tell."""
    try:
        return _gaps(_seek_holes(fd, start, end), start, end)
    except OSError:
        return [(start, end)] if start < end else []


def _unlink_quietly(path: Path) -> None:
    with contextlib.suppress(OSError):
        path.unlink()


def segment_name(offset: int) -> str:
    """The 20-digit, zero-padded file name of the segment starting at ``offset``."""
    return f"{offset:020d}"


def segment_paths(directory: Path) -> list[Path]:
    """The segment files in ``directory`` (named by :func:`segment_name`), by offset; none when it is missing."""
    if not directory.is_dir():
        return []
    return sorted(p for p in directory.iterdir() if p.name.isdigit() and len(p.name) == 20)


def flush_segments(files: list[MappedFile]) -> bool:
    """Flush ``files`` in order (blocking); ``False`` at the first one whose sync fails, which is logged and left
    unflushed with every file after it (a log's unflushed segments stay a suffix). A disk error does not end the
    caller: store/src/main/java/org/apache/rocketmq/store/MappedFile.java flush catches a failed force, logs "Error
    occurred when force data to disk." and goes on. Unlike Java, the flushed position does not move past bytes that
    were not synced, so a SYNC_FLUSH send waiting for them gets FLUSH_DISK_TIMEOUT; the next sync that succeeds counts
    them durable (as Java does; on Linux a page whose write-back failed is marked clean, so it may be lost even so).
    A failing file is logged once until one of its syncs succeeds: a dead disk fails every periodic flush and every
    group commit, and a traceback per attempt would fill the log as fast as sends arrive."""
    for mf in files:
        try:
            mf.flush()
        except OSError:
            if mf.sync_streak.failed():
                log.exception("Error occurred when force data to disk: %s", mf.path)
            return False
        if mf.sync_streak.succeeded():
            log.warning("force data to disk of %s succeeded again", mf.path)
    return True


class Destroyable(Protocol):
    """A file taken out of its log that unmaps and unlinks itself: a :class:`MappedFile`, an index file."""

    path: Path

    def destroy(self) -> None: ...


def destroy_segments(files: Iterable[Destroyable]) -> None:
    """Unmap and unlink segments (or index files) already taken out of their queue (blocking: milliseconds a large
    segment, so callers on the Trio thread run it in a worker thread). A file that cannot be unlinked (EACCES, EROFS,
    EIO) is logged and left behind, unmapped and out of its log all the same, and the others go on: store/src/main/
    java/org/apache/rocketmq/store/MappedFile.java destroy logs a delete that failed and returns, so the clean
    services never stop on one."""
    for mf in files:
        try:
            mf.destroy()
        except OSError as exc:
            log.error("%s left behind, not deleted (%s): delete it by hand before the next start", mf.path, exc)


class MappedFile:
    """One segment. ``wrote_position`` is the bytes appended, ``flushed_position`` the bytes known durable."""

    __slots__ = ("buf", "cuts", "fd", "file_from_offset", "file_size", "flushed_position", "path", "reserved",
                 "sync_streak", "view", "wrote_position")  # fmt: skip

    def __init__(self, path: Path, file_from_offset: int, file_size: int, preallocate: bool = True) -> None:
        self.path = path
        self.file_from_offset = file_from_offset
        self.file_size = file_size
        #: the bytes from the start that have blocks: all of a preallocated segment; a sparse one's grow ahead of its
        #: writes (:meth:`reserve`; one loaded from disk starts at its first hole)
        self.reserved = file_size
        self.fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            existing = os.fstat(self.fd).st_size
            if not preallocate:
                self.reserved = first_hole(self.fd, existing)
            if existing == 0 and not preallocate:
                os.ftruncate(self.fd, file_size)  # sparse: blocks are taken ahead of the writes (reserve)
            elif existing == 0:
                try:
                    reserve_blocks(self.fd, 0, file_size, path)
                except OSError:
                    _unlink_quietly(path)  # ENOSPC (a full disk, maybe one directory of several)
                    raise
                os.ftruncate(self.fd, file_size)  # a file system that cannot preallocate: sparse, still works
            elif existing != file_size:
                raise StoreCorruptError(f"segment {path} is {existing} bytes, expected {file_size}")
            self.buf = mmap.mmap(self.fd, file_size)
        except BaseException:
            os.close(self.fd)
            raise
        self.view = memoryview(self.buf)
        self.wrote_position = 0
        self.flushed_position = 0
        #: how many times :meth:`cut` moved the end back (a flush that was in flight across one records nothing)
        self.cuts = 0
        #: whether the last sync failed (logged once until one succeeds: :func:`flush_segments`)
        self.sync_streak = FailureStreak()

    @property
    def end_offset(self) -> int:
        """Absolute offset just past this segment."""
        return self.file_from_offset + self.file_size

    @property
    def free(self) -> int:
        return self.file_size - self.wrote_position

    def reserve(self, end: int) -> None:
        """Give a sparse segment blocks up to ``end`` and :data:`RESERVE_CHUNK` past it before a write there (its
        owner calls it when ``end`` passes :attr:`reserved`): a full disk raises ``OSError`` (ENOSPC) here, before
        anything is written, where the write would have been a SIGBUS. Only the holes take blocks
        (:func:`reserve_blocks`), so the range from a loaded segment's first hole costs nothing where it has them."""
        target = min(self.file_size, end + RESERVE_CHUNK)
        if target > self.reserved:
            reserve_blocks(self.fd, self.reserved, target - self.reserved, self.path)
            self.reserved = target

    def warm_up(self, write_back: bool) -> None:
        """Prefault every page so appends never fault (blocking; run in a thread on a fresh segment).

        With ``write_back`` (SYNC_FLUSH, as Java's warmMappedFile forces then) the zeroed pages are synced now, or the
        first group commit's fdatasync would write the whole segment. The price: written-back pages are
        write-protected again, so each takes a cheap fault on its first append; under ASYNC_FLUSH they stay dirty and
        the first periodic flush writes them in the background instead (4 KiB batch appends: 1.2 vs 2.4 us CPU)."""
        with contextlib.suppress(AttributeError, OSError):
            self.buf.madvise(mmap.MADV_WILLNEED)
        buf = self.buf
        for pos in range(0, self.file_size, PAGE_SIZE):
            buf[pos] = 0
        if write_back:
            os.fdatasync(self.fd)

    def cut(self, pos: int) -> None:
        """End the written data at ``pos`` (on the owner's thread; the caller erases what lay after it). A flush in
        flight meanwhile does not record its position: it may have synced the bytes before the cut, not those written
        after it at the same place."""
        with _CUT_LOCK:
            self.cuts += 1
            self.wrote_position = pos
            self.flushed_position = min(self.flushed_position, pos)

    def flush(self) -> int:
        """Make everything written so far durable (blocking). Returns the new flushed position (unchanged when
        :meth:`cut` ran meanwhile)."""
        target, cuts = self.wrote_position, self.cuts
        if target > self.flushed_position and self.fd >= 0:  # a closed (deleted) segment has nothing to sync
            # fdatasync, not mmap.flush: CPython's msync holds the GIL for the whole disk sync, stalling the Trio
            # thread (SYNC_FLUSH 64x1: ~35 % of the broker's samples). On Linux msync(MS_SYNC) of a MAP_SHARED file is
            # vfs_fsync_range(datasync=1) of that range, and the page cache tracks writes through the mapping, so
            # fdatasync makes the same bytes durable. It also writes back any other dirty page of the file, which is
            # why a warmed-up spare is synced once before it goes live (AllocateService).
            os.fdatasync(self.fd)
            with _CUT_LOCK:
                if self.cuts == cuts:
                    self.flushed_position = target
        return self.flushed_position

    def zero_from(self, pos: int, end: int | None = None) -> None:
        """Erase stale bytes from ``pos`` to ``end`` (default: the segment's end; recovery), writing only the pages
        that are not zero: a hole is never written (a SIGBUS on a full disk), nor read where the file system tells
        one apart (``SEEK_DATA``; reading a tmpfs hole takes a page), and a zero page is not dirtied."""
        end = self.file_size if end is None else min(end, self.file_size)
        for start, stop in _data_ranges(self.fd, pos, end):
            self._zero_pages(start, stop)

    def _zero_pages(self, pos: int, end: int) -> None:
        """Zero the pages of ``[pos, end)`` that are not, a 1 MiB chunk compared at a time, then its pages (the
        kernel's: a write faults a whole page in, 64 KiB on some arm64 and ppc64le kernels)."""
        while pos < end:
            stop = min(end, pos + len(_ZERO_CHUNK))
            if self.view[pos:stop] != _ZERO_CHUNK[: stop - pos]:
                page = pos
                while page < stop:
                    page_end = min(stop, page - page % mmap.PAGESIZE + mmap.PAGESIZE)
                    if self.view[page:page_end] != _ZERO_CHUNK[: page_end - page]:
                        self.buf[page:page_end] = _ZERO_CHUNK[: page_end - page]
                    page = page_end
            pos = stop

    def close(self) -> None:
        """Unmap and close. Readers may still hold slices: the mapping then lives until the last slice is dropped."""
        self.view.release()
        with contextlib.suppress(BufferError):
            self.buf.close()
        fd, self.fd = self.fd, -1  # idempotent: a second close must not close a reused fd number
        if fd >= 0:
            with contextlib.suppress(OSError):
                os.close(fd)

    def destroy(self) -> None:
        """Unlink the file this segment maps, then unmap and close it. Retention destroys segments taken out of
        their queue later, in a worker thread (store/services.py), and a queue destroyed and sent to again
        meanwhile makes its first file at a taken one's path: only the file still ours goes, while it is open so
        that its inode cannot be another's (RocketMQ's destroy deletes a file before its queue lets it go:
        store/src/main/java/org/apache/rocketmq/store/MappedFileQueue.java deleteExpiredFileByOffset). A failed
        unlink raises, the segment closed all the same."""
        try:
            if self.fd >= 0:
                mine, there = os.fstat(self.fd), os.stat(self.path)
                if (mine.st_dev, mine.st_ino) != (there.st_dev, there.st_ino):
                    return  # a new file at this path: ours was unlinked already
            self.path.unlink()
        except FileNotFoundError:
            pass
        finally:
            self.close()

    def mtime_ms(self) -> int:
        """The file's last modification time, 0 when it is gone (removed by hand: retention then drops it as
        expired), as Java's ``File.lastModified()`` reads it in MappedFile.getLastModifiedTimestamp
        (store/src/main/java/org/apache/rocketmq/store/MappedFile.java)."""
        try:
            return os.stat(self.path).st_mtime_ns // 1_000_000
        except FileNotFoundError:
            return 0


class MappedFileQueue:
    """The segments of one log, contiguous by offset, in one directory or spread over several
    (:class:`~store.store_paths.SegmentDirs`). Not thread-safe (see module docstring).
    Slotted, as store/_appender.c reads ``files`` by slot; ``files`` is only ever changed in place."""

    __slots__ = ("directory", "dirs", "file_size", "files", "full", "preallocate", "spare")

    def __init__(self, directory: Path | SegmentDirs, file_size: int, preallocate: bool = True) -> None:
        self.dirs = directory if isinstance(directory, SegmentDirs) else SegmentDirs.of(directory)
        #: the first directory (a single-path log's only one)
        self.directory = self.dirs.primary
        #: the directories whose disk retention found fuller than the force-clean ratio: new segments avoid them
        self.full: frozenset[Path] = frozenset()
        self.file_size = file_size
        #: New segments take all their blocks at creation (ENOSPC then, not a SIGBUS on a later write); False leaves
        #: them sparse, for large segments that mostly stay empty.
        self.preallocate = preallocate
        self.files: list[MappedFile] = []
        #: A segment made ahead of time by a background allocation, taken by the next roll.
        self.spare: MappedFile | None = None

    def segment_paths(self) -> list[Path]:
        """The segment files in every directory, by offset. Raises StoreCorruptError when two directories hold a
        segment of the same name."""
        found: dict[str, Path] = {}
        for directory in self.dirs.every():
            for path in segment_paths(directory):
                if path.name in found:
                    raise StoreCorruptError(f"segment {path.name} is both in {found[path.name].parent} and {directory}")
                found[path.name] = path
        return [found[name] for name in sorted(found)]

    def dir_for(self, start: int) -> Path:
        """The directory a new segment starting at ``start`` goes to."""
        return self.dirs.for_segment(start, self.file_size, self.full)

    def load(self) -> None:
        """Map every existing segment, marked full; recovery then sets the real end with :meth:`truncate_to`.

        A hole between segments is refused (StoreCorruptError), naming the segments before it: retention takes files
        out of the log before it unlinks them and goes on past one it could not unlink (EACCES, EIO:
        :func:`destroy_segments`), which leaves such a hole, and so does a disk of a multi-path store that is not
        mounted. Loading on from after the hole would serve the second case without that disk's data and let
        retention drop the queue entries below it, so the operator decides: delete the files left behind, or mount
        the disk.

        An empty segment before the newest is refused too (StoreCorruptError), as 4.9.8's MappedFileQueue.load refuses
        any file whose length is not the segment size: taken as unwritten, it would end a recovery scan and the
        segments after it would be deleted. Only the newest may be empty (a kill before it was sized), as 5.3.3's
        MappedFileQueue.doLoad forgives (store/src/main/java/org/apache/rocketmq/store/MappedFileQueue.java)."""
        paths = self.segment_paths()
        for path in paths:
            start = int(path.name)
            if path is not paths[-1] and path.stat().st_size == 0:
                raise StoreCorruptError(f"segment {path} is empty but segments follow it; restore it or remove them")
            if self.files and self.files[-1].end_offset != start:
                before = ", ".join(str(mf.path) for mf in self.files)
                raise StoreCorruptError(
                    f"gap before segment {path}: the segments before it ({before}) are not followed by the next one; "
                    "if retention could not delete them, delete them by hand; if a store path is not mounted, mount it"
                )
            if start % self.file_size:
                raise StoreCorruptError(f"segment {path} does not start at a multiple of {self.file_size}")
            mf = MappedFile(path, start, self.file_size, self.preallocate)
            mf.wrote_position = mf.flushed_position = self.file_size
            self.files.append(mf)

    @property
    def min_offset(self) -> int:
        return self.files[0].file_from_offset if self.files else 0

    @property
    def max_offset(self) -> int:
        """Absolute end of written data."""
        if not self.files:
            return 0
        last = self.files[-1]
        return last.file_from_offset + last.wrote_position

    @property
    def flushed_offset(self) -> int:
        """Absolute offset up to which every segment is durable."""
        # Flushes go in order, so unflushed segments form a suffix: walk back from the newest.
        result = self.max_offset
        for mf in reversed(self.files):
            if mf.flushed_position < mf.wrote_position:
                result = mf.file_from_offset + mf.flushed_position
            elif mf.wrote_position:
                break
        return result

    def last(self) -> MappedFile | None:
        return self.files[-1] if self.files else None

    def find(self, offset: int) -> MappedFile | None:
        """The segment holding absolute ``offset``, or ``None`` when it was deleted or is not yet created."""
        if not self.files:
            return None
        index = (offset - self.files[0].file_from_offset) // self.file_size
        if 0 <= index < len(self.files):
            return self.files[index]
        return None

    def make_file(self, start: int) -> MappedFile:
        """Create and map the segment starting at ``start`` (blocking: allocation, optional warm-up by caller)."""
        directory = self.dir_for(start)
        directory.mkdir(parents=True, exist_ok=True)
        return MappedFile(directory / segment_name(start), start, self.file_size, self.preallocate)

    def roll(self, start: int) -> MappedFile:
        """Append the segment starting at ``start``, using the preallocated spare when it matches."""
        spare, self.spare = self.spare, None
        if spare is not None and spare.file_from_offset == start:
            mf = spare
        else:
            if spare is not None:
                # A stale spare's name may now belong to a live segment: unlink only one lying ahead of the log.
                if spare.file_from_offset > start:
                    spare.destroy()
                else:
                    spare.close()
            mf = self.make_file(start)
        self.files.append(mf)
        return mf

    def next_start(self) -> int:
        last = self.last()
        return 0 if last is None else last.end_offset

    def truncate_to(self, offset: int, erase: bool = True) -> None:
        """Make ``offset`` the end: later segments are deleted and, with ``erase``, the segment holding it is zeroed
        past it. A clean shutdown wrote nothing past the end, so recovery skips the erase then.

        In a preallocating queue the segment holding the end takes blocks for the rest of it first: one loaded from
        disk may be sparse (a Java broker's: RocketMQ's MappedFile maps a segment without preallocating it), and an
        append into one of its holes on a full disk would be a SIGBUS. A disk without those blocks raises ``OSError``
        (ENOSPC) here, before that segment is erased or its end moved. Only its holes are asked for
        (:func:`reserve_blocks`): a segment that has its blocks, as every one made here, costs microseconds and loads
        on a nearly full disk, as a Java broker's does."""
        while self.files and self.files[-1].file_from_offset > offset:
            self.files.pop().destroy()
        if not self.files:
            return
        last = self.files[-1]
        pos = offset - last.file_from_offset
        if pos >= last.file_size:
            pos = last.file_size
        else:
            if self.preallocate:
                reserve_blocks(last.fd, pos, last.file_size - pos, last.path)
            if erase:
                last.zero_from(pos)
        with _CUT_LOCK:  # a flush in flight records no position (MappedFile.cut)
            last.cuts += 1
            last.wrote_position = last.flushed_position = pos

    def take_first(self, count: int) -> list[MappedFile]:
        """Take up to ``count`` oldest segments out of the queue, never the last one, for the caller to destroy
        (:func:`destroy_segments`, in a worker thread: unlinking a 1 GiB file can take long)."""
        taken: list[MappedFile] = []
        while len(taken) < count and len(self.files) > 1:
            taken.append(self.files.pop(0))
        return taken

    def delete_first(self, count: int) -> int:
        """Delete up to ``count`` oldest segments, never the last one. Returns how many were deleted."""
        taken = self.take_first(count)
        destroy_segments(taken)
        return len(taken)

    def flush_snapshot(self) -> list[MappedFile]:
        """Segments with unflushed data, captured on the Trio thread before a flush in a worker thread."""
        return [mf for mf in self.files if mf.flushed_position < mf.wrote_position]

    def close(self) -> None:
        for mf in self.files:
            mf.close()
        if self.spare is not None:
            self.spare.close()
            self.spare = None
