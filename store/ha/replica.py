"""The slave store's write side: the master's CommitLog bytes appended raw at the master's offsets, then dispatched
into ConsumeQueues and the index from what the records themselves hold (RocketMQ's ``appendToCommitLog`` and
``ReputMessageService`` on a slave).

Frames end anywhere, so the CommitLog may end inside a record: :meth:`ReplicaLog.dispatch` walks whole records from
the dispatched offset and stops before a partial one, which is dispatched when its last bytes arrive. A segment's
end-of-file blank moves the walk to the next segment once the whole segment has arrived. The walk is one call of
:func:`~remoting.codec.record_scan.scan_records` (C) over what arrived: each run of records of one queue becomes one
ConsumeQueue write (:meth:`MessageStore.redispatch_run`) and the index entries come hashed, a run per store time
(:meth:`IndexService.put_hashed`); a record the scan does not take (a transaction's prepare or rollback, a delay
level, non-ASCII keys or tags, a blank, anything that does not validate) goes through
:meth:`MessageStore.redispatch`, exactly as recovery re-dispatches. Either way queues and index match the master's
byte for byte.

With ``enableMultiDispatch`` every record goes through :meth:`MessageStore.redispatch`, which also writes the entries
of the queues its ``INNER_MULTI_DISPATCH`` lists (store/multi_dispatch.py).

Ours, not RocketMQ's: dispatched messages also call the store's arrival listener when a pull waits on their queue
(the store's ``arrival_interest``), so held pulls on a slave wake at once (RocketMQ's slave leaves them to the hold
service's 5 s check).

The flush service checkpoints only the dispatched offset (:attr:`ReplicaLog.dispatched`), so recovery after a kill
starts at a record boundary and truncates a torn tail; the slave then reports its recovered end and the master
resends from there.

Errors: :class:`~store.errors.OffsetMismatchError` for a frame not at the log's end, or, where the log ends at a
record boundary, one whose bytes do not start a record there (:meth:`ReplicaLog.append`: a diverged master); a
session starts at such a boundary (:meth:`ReplicaLog.drop_partial_tail` cuts a partial record back). A
record that does not validate stops the dispatch (logged once, :attr:`ReplicaLog.stalled`) rather than skipping
bytes.
"""

from __future__ import annotations

import logging
import struct
from typing import TYPE_CHECKING, Final

from remoting.codec.errors import MessageDecodeError
from remoting.codec.message import BLANK_MAGIC, read_record_meta
from remoting.codec.record_scan import scan_records
from store.errors import OffsetMismatchError
from store.ha.frames import starts_record

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
        if not was_empty and offset == self.dispatched == commitlog.max_offset:
            self._check_record_start(offset, data)
        commitlog.append_raw(offset, data)
        self.store.announce_append()
        if was_empty:
            self.dispatched = offset
        if dispatch:
            self.dispatch()
        return commitlog.max_offset

    def drop_partial_tail(self) -> int:
        """Before a session's first report: cut the log back to :attr:`dispatched` when it ends past it, inside a
        record (a session that ended mid-record; its records are dispatched first), unless the dispatch is stalled.
        The report is then a record boundary of this log, so the new session's first bytes are checked
        (:meth:`_check_record_start`): a master whose log is not this one's (it recovered with less, then grew past
        the partial record) would otherwise complete that record with the middle of one of its own, and the slave's
        next report would acknowledge it. A restart's recovery truncates such a tail the same way; the master sends
        the record again. Ours: RocketMQ's ``HAClient``
        (store/src/main/java/org/apache/rocketmq/store/ha/HAService.java) reports its log's end as it is. Returns the
        bytes cut."""
        if self.empty or self.stalled is not None:
            return 0
        self.dispatch()
        end, last = self.store.commitlog.max_offset, self.store.commitlog.queue.last()
        # A partial record (or blank) lies in the last segment: the master never sends past a segment's end first.
        if self.stalled is not None or last is None or not last.file_from_offset <= self.dispatched < end:
            return 0
        rel = self.dispatched - last.file_from_offset
        last.zero_from(rel, last.wrote_position)
        last.cut(rel)  # a flush in flight keeps the bytes before rel to flush (MappedFile.cut)
        return end - self.dispatched

    def _check_record_start(self, offset: int, data: bytes) -> None:
        """This log ends at a record boundary (everything in it is dispatched), so the master's bytes at ``offset``
        must start a record stored there or the segment's blank (:func:`~store.ha.frames.starts_record`). Otherwise
        the master's log is not this one's (a recovered master that lost its tail, then grew past this slave's end):
        raise OffsetMismatchError rather than append half a record of its after this log's own history. Ours:
        RocketMQ's ``HAClient.dispatchReadRequest`` (store/src/main/java/org/apache/rocketmq/store/ha/HAService.java)
        checks only the frame's offset."""
        if not starts_record(data, offset, self.store.commitlog.file_size):
            raise OffsetMismatchError(
                f"the master's bytes at {offset} do not start a record there: its log is not this slave's "
                "(a master that lost its tail in a recovery?); this slave must be seeded again"
            )

    def dispatch(self) -> int:
        """Dispatch every whole record from :attr:`dispatched` on; returns how many."""
        count, self.dispatched = self._dispatch_from(self.dispatched)
        return count

    def _dispatch_from(self, pos: int) -> tuple[int, int]:
        """Plain records in runs (:func:`~remoting.codec.record_scan.scan_records`), each other record on its own
        (:meth:`_dispatch_one`), until a partial record, a segment still arriving or a stall."""
        store = self.store
        queue = store.commitlog.queue
        index = store.indexer
        count = 0
        while self.stalled is None:
            mf = queue.find(pos)
            if mf is None:
                break
            base = mf.file_from_offset
            if not store.config.enable_multi_dispatch:  # its records list queues the scan does not dispatch
                scan = scan_records(mf.view, pos - base, mf.wrote_position, base, index is not None)
                end, scanned = scan[0], scan[1]
                if scanned:
                    store.dispatch_scanned(mf.view, base, scan)
                    pos = base + end
                    count += scanned
            step = self._dispatch_one(pos)
            if step is None:
                break
            pos, dispatched = step
            count += dispatched
        return count, pos

    def _dispatch_one(self, pos: int) -> tuple[int, int] | None:
        """Dispatch the record at ``pos`` on the general path (:meth:`MessageStore.redispatch`); returns where the
        next one starts and 1, or past a complete segment's blank the next segment and 0; ``None`` when the record
        has not wholly arrived or does not validate (then :attr:`stalled` says why)."""
        store = self.store
        mf = store.commitlog.queue.find(pos)
        if mf is None:
            return None
        rel = pos - mf.file_from_offset
        if mf.wrote_position - rel < _HEAD.size:
            return None
        size, magic = _HEAD.unpack_from(mf.view, rel)
        if magic == BLANK_MAGIC:
            # the rest of the segment may still be on its way
            return (mf.end_offset, 0) if mf.wrote_position >= mf.file_size else None
        if size <= 0 or rel + size > mf.wrote_position:
            if size <= 0 or rel + size > mf.file_size:
                self._stall(pos, f"record size {size}")
            return None
        try:
            meta = read_record_meta(mf.view, rel)
        except MessageDecodeError as exc:
            self._stall(pos, str(exc))
            return None
        if meta.phy_offset != pos:
            self._stall(pos, f"record claims offset {meta.phy_offset}")
            return None
        tags = store.redispatch(meta)
        store.commitlog.last_store_timestamp = meta.store_timestamp
        listener = store.arrival_listener
        if listener is not None and tags is not None:
            listener(meta.topic, meta.queue_id, meta.queue_offset, tags, meta.properties.decode("utf-8", "replace"))
        return pos + size, 1

    def _stall(self, pos: int, why: str) -> None:
        self.stalled = f"invalid record at {pos}: {why}"
        log.error("replica dispatch stopped: %s (a restart's recovery truncates the log there)", self.stalled)
