"""The ``checkpoint`` file (docs/protocol.md#65-checkpoint) and the ``abort`` / ``lock`` markers
(docs/protocol.md#66-abort-and-lock-files-and-recovery).

Checkpoint layout: 4096 bytes, int64 ``physicMsgTimestamp`` @0, ``logicsMsgTimestamp`` @8, ``indexMsgTimestamp`` @16
as in 4.9.8, plus rocketrio's ``safe_offset`` @24: the CommitLog offset below which every record, its ConsumeQueue
entry and its index entries are durable. Recovery re-scans only from there, so its cost follows the unflushed tail.
(5.x reads @24 as its master-flushed offset, which has the same meaning on a master.)

Writes go through the mapping; :meth:`Checkpoint.flush` is blocking (run it in a thread). The file's page takes its
block when it is opened (a full disk: ``OSError``, ENOSPC, there), never at a write through the mapping, where a
missing block is a SIGBUS.
"""

from __future__ import annotations

import contextlib
import fcntl
import mmap
import os
import struct
from pathlib import Path
from typing import Final

from store.errors import StoreError
from store.mapped_file import reserve_blocks

CHECKPOINT_SIZE: Final = 4096
_FIELDS: Final = struct.Struct(">qqqq")


class StoreLockedError(StoreError):
    """Another process holds the store's ``lock`` file."""


class Checkpoint:
    physic_msg_timestamp: int
    logics_msg_timestamp: int
    index_msg_timestamp: int
    #: the CommitLog offset below which every record and its queue and index entries are durable
    safe_offset: int

    def __init__(self, path: Path) -> None:
        self.path = path
        # The fd stays open for fdatasync (see flush).
        self._fd = fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            if os.fstat(fd).st_size < CHECKPOINT_SIZE:
                os.ftruncate(fd, CHECKPOINT_SIZE)
            # Its page takes a block now (a full disk: ENOSPC here), not at the first write: a SIGBUS then.
            reserve_blocks(fd, 0, CHECKPOINT_SIZE, path)
            self._map = mmap.mmap(fd, CHECKPOINT_SIZE)
        except BaseException:
            os.close(fd)
            raise
        (
            self.physic_msg_timestamp,
            self.logics_msg_timestamp,
            self.index_msg_timestamp,
            self.safe_offset,
        ) = _FIELDS.unpack_from(self._map, 0)

    @property
    def min_timestamp(self) -> int:
        """Java's abnormal-recovery bound: min(physic, logics) - 3 s."""
        return max(0, min(int(self.physic_msg_timestamp), int(self.logics_msg_timestamp)) - 3000)

    def write(self) -> None:
        _FIELDS.pack_into(
            self._map,
            0,
            self.physic_msg_timestamp,
            self.logics_msg_timestamp,
            self.index_msg_timestamp,
            self.safe_offset,
        )

    def flush(self) -> None:
        """Write the fields and make them durable (blocking; ``OSError`` propagates)."""
        self.write()
        # fdatasync rather than mmap.flush, whose msync holds the GIL and so stalls the Trio thread (same pages).
        os.fdatasync(self._fd)

    def close(self) -> None:
        """Unmap and close the fd; idempotent (a second call must not close a reused fd number)."""
        with contextlib.suppress(BufferError, ValueError):
            self._map.close()
        fd, self._fd = self._fd, -1
        if fd >= 0:
            with contextlib.suppress(OSError):
                os.close(fd)


#: (st_dev, st_ino) of the ``lock`` files this process holds: a POSIX lock is per process, and closing any fd of
#: the file drops it, so a second open in this process is refused before it opens the file.
_HELD: set[tuple[int, int]] = set()


class StoreLock:
    """An exclusive lock on ``<root>/lock`` for the life of the store; the kernel drops it if we crash.

    Both a BSD ``flock`` and RocketMQ's POSIX record lock on byte 0: DefaultMessageStore.start takes
    ``lockFile.getChannel().tryLock(0, 1, false)`` (store/src/main/java/org/apache/rocketmq/store/
    DefaultMessageStore.java), so a Java broker and ours refuse each other's store.
    """

    def __init__(self, path: Path) -> None:
        with contextlib.suppress(FileNotFoundError):
            if _key(os.stat(path)) in _HELD:
                raise _locked(path)
        self._fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(self._fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            fcntl.lockf(self._fd, fcntl.LOCK_EX | fcntl.LOCK_NB, 1, 0)
        except OSError as exc:
            os.close(self._fd)
            if isinstance(exc, BlockingIOError | PermissionError):  # EAGAIN, or EACCES from some fcntl systems
                raise _locked(path) from exc
            raise
        self._key = _key(os.fstat(self._fd))
        _HELD.add(self._key)

    def release(self) -> None:
        """Drop both locks and close the file; idempotent."""
        fd, self._fd = self._fd, -1
        if fd < 0:
            return
        _HELD.discard(self._key)
        with contextlib.suppress(OSError):
            os.close(fd)  # drops the flock (the only fd of its open file) and the POSIX lock


def _key(stat: os.stat_result) -> tuple[int, int]:
    return stat.st_dev, stat.st_ino


def _locked(path: Path) -> StoreLockedError:
    return StoreLockedError(f"store {path.parent} is in use by another process")


def create_abort_file(root: Path) -> bool:
    """Create ``abort``; returns whether it already existed (the previous run did not shut down cleanly)."""
    path = root / "abort"
    existed = path.exists()
    path.touch()
    return existed


def delete_abort_file(root: Path) -> None:
    with contextlib.suppress(FileNotFoundError):
        (root / "abort").unlink()
