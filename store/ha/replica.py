"""The slave store's write side: the master's CommitLog bytes appended raw at the master's offsets, then dispatched
into ConsumeQueues and the index from what the records themselves hold (RocketMQ's ``appendToCommitLog`` and
``ReputMessageService`` on a slave).

Frames end anywhere, so the CommitLog may end inside a record: :meth:`ReplicaLog.dispatch` walks whole records from
the dispatched offset and stops before a partial one, which is dispatched when its last bytes arrive. A segment's
end-of-file blank moves the walk to the next segment once the whole segment has arrived. Each record goes through
:meth:`MessageStore.redispatch` (the ConsumeQueue entry at the record's queue id and queue offset, the index keys,
the next queue offset), exactly as recovery re-dispatches, so queues and index match the master's; the index
entries of a pass go in runs (:class:`~store.index.IndexRuns`: one topic and store time each, as a master's burst
arrives), the same bytes for less work.

Ours, not RocketMQ's: dispatched messages also call the store's arrival listener, so held pulls on a slave wake at
once (RocketMQ's slave leaves them to the hold service's 5 s check).

The flush service checkpoints only the dispatched offset (:attr:`ReplicaLog.dispatched`), so recovery after a kill
starts at a record boundary and truncates a torn tail; the slave then reports its recovered end and the master
resends from there.

Errors: :class:`~store.errors.OffsetMismatchError` for a frame not at the log's end. A record that does not
validate stops the dispatch (logged once, :attr:`ReplicaLog.stalled`) rather than skipping bytes.
"""

from __future__ import annotations

import logging
import struct
from typing import TYPE_CHECKING, Final

from remoting.codec.errors import MessageDecodeError
from remoting.codec.message import BLANK_MAGIC, read_record_meta
from store.errors import OffsetMismatchError
from store.index import IndexRuns

if TYPE_CHECKING:
    from store.message_store import MessageStore

log = logging.getLogger(__name__)

_HEAD: Final = struct.Struct(">iI")


class ReplicaLog:
    """Owned by a slave's :class:`~store.message_store.MessageStore` (created by ``load`` after recovery, when
    everything in the log is dispatched). On the Trio thread, like every append."""

    def __init__(self, store: MessageStore) -> None:
        self.store = store
        self.dispatched = store.commitlog.max_offset
        self.stalled: str | None = None

    @property
    def max_offset(self) -> int:
        """The CommitLog's end: what the slave reports."""
        return self.store.commitlog.max_offset

    @property
    def empty(self) -> bool:
        """No data yet: the first frame may start anywhere."""
        return self.store.commitlog.is_empty()

    def append(self, offset: int, data: bytes, *, dispatch: bool = True) -> int:
        """Append the master's bytes at ``offset`` (a heartbeat's empty body only checks the offset) and, unless told
        not to (the HA client dispatches after reporting), dispatch the records they complete. Returns the new max
        offset. Raises OffsetMismatchError."""
        commitlog = self.store.commitlog
        if not data:
            if offset != commitlog.max_offset and not self.empty:
                raise OffsetMismatchError(f"master is at {offset}, slave at {commitlog.max_offset}")
            return commitlog.max_offset
        was_empty = self.empty
        commitlog.append_raw(offset, data)
        if was_empty:
            self.dispatched = offset
        if dispatch:
            self.dispatch()
        return commitlog.max_offset

    def dispatch(self) -> int:
        """Dispatch every whole record from :attr:`dispatched` on; returns how many."""
        index = self.store.index
        runs = IndexRuns(index) if index is not None else None
        try:
            count, self.dispatched = self._dispatch_from(self.dispatched, runs)
        finally:
            if runs is not None:
                runs.flush()
        return count

    def _dispatch_from(self, pos: int, runs: IndexRuns | None) -> tuple[int, int]:
        store = self.store
        queue = store.commitlog.queue
        listener = store.arrival_listener
        count = 0
        while self.stalled is None:
            mf = queue.find(pos)
            if mf is None:
                break
            rel = pos - mf.file_from_offset
            if mf.wrote_position - rel < _HEAD.size:
                break
            size, magic = _HEAD.unpack_from(mf.view, rel)
            if magic == BLANK_MAGIC:
                if mf.wrote_position < mf.file_size:
                    break  # the rest of the segment is still on its way
                pos = mf.end_offset
                continue
            if size <= 0 or rel + size > mf.wrote_position:
                if size <= 0 or rel + size > mf.file_size:
                    self._stall(pos, f"record size {size}")
                break
            try:
                meta = read_record_meta(mf.view, rel)
            except MessageDecodeError as exc:
                self._stall(pos, str(exc))
                break
            if meta.phy_offset != pos:
                self._stall(pos, f"record claims offset {meta.phy_offset}")
                break
            tags = store.redispatch(meta, runs)
            store.commitlog.last_store_timestamp = meta.store_timestamp
            if listener is not None and tags is not None:
                listener(meta.topic, meta.queue_id, meta.queue_offset, tags, meta.properties.decode("utf-8", "replace"))
            pos += size
            count += 1
        return count, pos

    def _stall(self, pos: int, why: str) -> None:
        self.stalled = f"invalid record at {pos}: {why}"
        log.error("replica dispatch stopped: %s (a restart's recovery truncates the log there)", self.stalled)
