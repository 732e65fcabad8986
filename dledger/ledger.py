"""The log a member keeps, as the Raft core sees it: :class:`Ledger`, and :class:`MemoryLedger` for tests and the
simulator. The file-backed ledger is :class:`dledger.file_store.FileLedger`.

Indexes count from 0 and are contiguous from ``begin_index`` to ``end_index`` (-1 when empty). Every entry has a
``pos``: where its bytes start in the data files, identical on every member (a follower refuses an entry whose
``pos`` is not where its own data ends). ``flushed_index`` is the last entry known durable; ``sync_before_ack`` in
the core waits for it.

A ledger never checks terms or roles: the core does before calling it. Writes raise :class:`LedgerError` with the
DLedger response code that describes the failure (INCONSISTENT_INDEX, DISK_ERROR, ...).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Protocol

from dledger.codes import ResponseCode
from dledger.entry import CURRENT_MAGIC, Entry, place

#: ``fill(pos) -> body``: the body of an entry that will start at ``pos`` (RocketMQ stamps the message's physical
#: offset, ``pos + 48``, into it).
BodyFill = Callable[[int], bytes]
#: ``write(term) -> entries``: a caller that appends the leader's entries to the ledger itself (the broker's store
#: writes a record straight into the entry's place: :meth:`dledger.file_store.FileLedger.append_record_as_leader`);
#: raises LedgerError, or its own error with nothing written.
LeaderWrite = Callable[[int], list[Entry]]
#: What a leader's append takes: one ``(body size, fill)`` per entry, or a :data:`LeaderWrite`.
Bodies = Sequence[tuple[int, BodyFill]] | LeaderWrite


class LedgerError(Exception):
    def __init__(self, code: ResponseCode, detail: str = "") -> None:
        super().__init__(f"{code.name}: {detail}" if detail else code.name)
        self.code = code


class Ledger(Protocol):
    @property
    def begin_index(self) -> int: ...

    @property
    def end_index(self) -> int: ...

    @property
    def end_term(self) -> int: ...

    @property
    def committed_index(self) -> int: ...

    @property
    def flushed_index(self) -> int: ...

    @property
    def write_pos(self) -> int:
        """Where the data written ends (DLedger's ``getMaxWrotePosition``), read without reading an entry."""

    def get(self, index: int) -> Entry | None:
        """The entry at ``index``, or None outside ``begin_index..end_index``."""

    def append_as_leader(self, term: int, bodies: Sequence[tuple[int, BodyFill]]) -> list[Entry]:
        """Append one entry per ``(body size, fill)`` at the next indexes, in ``term``: all of them, or none when it
        raises (LedgerError, or a ``fill``'s error)."""

    def append_as_follower(self, entry: Entry) -> None:
        """Append the leader's ``entry`` (index end+1, at its ``pos``). Raises LedgerError."""

    def append_run_as_follower(self, entries: tuple[Entry, ...] | list[Entry]) -> None:
        """:meth:`append_as_follower` for each of ``entries`` in order (those before one that raises stay)."""

    def truncate(self, entry: Entry) -> int:
        """Make ``entry`` the last one: keep it if equal, else cut at its ``pos`` and write it. Returns its index."""

    def set_committed(self, index: int) -> None:
        """Record the committed index (the core has checked it is within the ledger and not going back)."""


class MemoryLedger:
    """A :class:`Ledger` in memory with DLedger's positions (``segment_size`` gives the blanks at segment ends).

    ``durable`` is how many entries survive a power loss (:meth:`flush` advances it); :meth:`crash` keeps what a
    process crash keeps (everything written) or, with ``lose_unsynced``, what a power loss keeps."""

    def __init__(self, segment_size: int = 4096) -> None:
        self.segment_size = segment_size
        self.entries: list[Entry] = []
        self.durable = 0
        self._committed = -1
        self.durable_committed = -1

    @property
    def begin_index(self) -> int:
        return 0 if self.entries else -1

    @property
    def end_index(self) -> int:
        return len(self.entries) - 1

    @property
    def end_term(self) -> int:
        return self.entries[-1].term if self.entries else -1

    @property
    def committed_index(self) -> int:
        return self._committed

    @property
    def flushed_index(self) -> int:
        return self.durable - 1

    @property
    def end_pos(self) -> int:
        return self.entries[-1].end_pos if self.entries else 0

    @property
    def write_pos(self) -> int:
        return self.end_pos

    def get(self, index: int) -> Entry | None:
        return self.entries[index] if 0 <= index < len(self.entries) else None

    def append_as_leader(self, term: int, bodies: Sequence[tuple[int, BodyFill]]) -> list[Entry]:
        out: list[Entry] = []
        end = self.end_pos
        for size, fill in bodies:
            pos, _ = place(end, 48 + size, self.segment_size)
            out.append(Entry(len(self.entries) + len(out), term, pos, fill(pos), CURRENT_MAGIC))
            end = out[-1].end_pos
        self.entries.extend(out)  # all or nothing, as the file store's
        return out

    def append_as_follower(self, entry: Entry) -> None:
        if entry.index != len(self.entries):
            raise LedgerError(ResponseCode.INCONSISTENT_INDEX, f"{entry.index} != {len(self.entries)}")
        pos, _ = place(self.end_pos, entry.size, self.segment_size)
        if pos != entry.pos:
            raise LedgerError(ResponseCode.DISK_ERROR, f"pos {entry.pos} != {pos}")
        self.entries.append(entry)

    def append_run_as_follower(self, entries: tuple[Entry, ...] | list[Entry]) -> None:
        for entry in entries:
            self.append_as_follower(entry)

    def truncate(self, entry: Entry) -> int:
        existing = self.get(entry.index)
        if existing != entry:
            del self.entries[entry.index :]
            pos, _ = place(self.end_pos, entry.size, self.segment_size)
            if pos != entry.pos or entry.index != len(self.entries):
                raise LedgerError(ResponseCode.DISK_ERROR, f"truncate at {entry.index}/{entry.pos}")
            self.entries.append(entry)
        del self.entries[entry.index + 1 :]
        # Truncation is written through (the file store erases and syncs the cut tail before answering).
        self.durable = min(self.durable, entry.index) if existing != entry else min(self.durable, entry.index + 1)
        return entry.index

    def set_committed(self, index: int) -> None:
        self._committed = index

    def flush(self, upto: int | None = None) -> None:
        """Make entries up to index ``upto`` (all by default) durable, and the committed index with them."""
        target = len(self.entries) if upto is None else min(len(self.entries), upto + 1)
        self.durable = max(self.durable, target)
        self.durable_committed = min(self._committed, self.durable - 1)

    def crash(self, lose_unsynced: bool) -> None:
        """What a restart finds: everything (process crash) or only the durable prefix (power loss)."""
        if lose_unsynced:
            del self.entries[self.durable :]
        self.durable = len(self.entries)
        self._committed = min(self.durable_committed if lose_unsynced else self._committed, len(self.entries) - 1)
