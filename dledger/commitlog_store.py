"""``DLedgerMessageStore``: the broker's message store with its CommitLog kept in a DLedger log
(docs/architecture.md#dledger), as RocketMQ 4.9.8's
``store/src/main/java/org/apache/rocketmq/store/dledger/DLedgerCommitLog.java`` does.

Who owns what:

- the :class:`~dledger.server.DLedgerServer` (run by :meth:`DLedgerMessageStore.run`) owns the entry and index files
  under ``<storePathRootDir>/dledger-<dLegerSelfId>/``; each entry's body is one RocketMQ record, and the record's
  physical offset is the entry's ``pos`` plus the 48-byte entry header (DLedgerCommitLog's append hook), so the
  entry data files *are* the CommitLog: :class:`LedgerCommitLog` reads records straight from their mapping, and its
  ``max_offset`` is the committed end (what ``commitLogMaxOffset`` shows), its ``write_end`` the ledger's;
- this store owns the ConsumeQueues and the index file, dispatched from committed entries only
  (:meth:`DLedgerMessageStore._dispatch_committed`, on every commit, in index order; a file that cannot be made
  stalls it at its entry, tried again every :data:`DISPATCH_RETRY_S`), and the queue offsets a leader hands out.

Writes: only a leader whose log is fully committed and dispatched takes them (:attr:`DLedgerMessageStore.writable`;
DLedgerRoleChangeHandler waits for the same before it turns the broker into a master). :meth:`append` encodes the
record into a new entry and returns at once; the send's answer waits for the quorum through ``put_waits``
(:mod:`dledger.commit_waits`: PUT_OK once committed, a failure status, answered SYSTEM_ERROR, when the leader lost its
term or ``maxWaitAckTimeMs`` passed), never SEND_OK for an entry that is not committed. Each round of the node's
effects runs as the group commit's release pass, so the send fast path's SEND_OK answers one commit releases leave
in one write per connection, as a SYNC_FLUSH group commit's do. An append on a member that does not take
writes raises :class:`~store.errors.ServiceNotAvailableError` (a follower's answer: SERVICE_NOT_AVAILABLE, as
DefaultMessageStore answers on a slave); one the DLedger server refuses (a leadership transfer, a full pending queue,
an entry no data file holds) :class:`~store.errors.PageCacheBusyError`, DLedgerCommitLog's OS_PAGECACHE_BUSY, but an
entry past DLedger's 4 MiB entry buffer UNKNOWN_ERROR (a :class:`~store.errors.PutRefusedError`), as there.

Recovery: the DLedger files recover themselves (:meth:`~dledger.file_store.FileLedger.load`); ConsumeQueue entries
past the log's write end are dropped and the entries they still cover count as committed whatever the checkpoint
says (:meth:`DLedgerMessageStore._commit_what_was_dispatched`), and committed entries are dispatched again from the
first one the ConsumeQueues do not cover (re-dispatching is idempotent).

Retention: :class:`~dledger.retention.LedgerRetention` deletes expired entry segments (:meth:`delete_expired_entries`)
and what the ConsumeQueues and the index file hold below them. A follower whose log was rebuilt from the leader's
first entry (the older ones deleted on the leader) dispatches on from there (:meth:`_skip_to_begin`), its queues
with no live entry left restarting at their next offset.

A store holding a classic CommitLog becomes a mixed one (:class:`MixedCommitLog`, :meth:`DLedgerMessageStore
._load_classic`): the classic log stays readable below its end, where the DLedger log starts (with a marker entry:
:meth:`DLedgerMessageStore._open_with_marker`), and retention deletes its segments first.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable, Sequence
from typing import Final

import attrs
import trio

from dledger.codes import ResponseCode, Role
from dledger.commit_waits import CommitWaits
from dledger.config import DLedgerConfig
from dledger.effects import AppendDone, RoleChanged
from dledger.entry import HEADER_SIZE, Entry
from dledger.file_store import MARKER, FileLedger
from dledger.retention import DELETE_FILES_BATCH_MAX, DISK_FULL_RATIO, LedgerRetention
from dledger.server import DLedgerServer
from remoting.codec.errors import MessageDecodeError, MessageEncodeError
from remoting.codec.message import (
    SYSFLAG_TRANSACTION_MASK,
    SYSFLAG_TRANSACTION_PREPARED,
    SYSFLAG_TRANSACTION_ROLLBACK,
    MessageRecord,
    PreparedMessage,
    read_record_meta,
    write_blank,
    write_record,
)
from remoting.codec.record_batch import encode_record_into
from remoting.codec.record_scan import scan_records
from store.checkpoint import create_abort_file
from store.commitlog import CommitLog
from store.consume_queue import FILLER_SIZE
from store.errors import (
    MessageIllegalError,
    PageCacheBusyError,
    PutRefusedError,
    ServiceNotAvailableError,
    StoreError,
)
from store.index import IndexRuns
from store.mapped_file import Destroyable, MappedFile, destroy_segments, segment_paths
from store.message_store import FlushPlan, MessageStore, put_refusal
from store.multi_dispatch import unstamp
from store.recovery import load_consume_queues, recover
from store.results import AppendResult, PutResult
from store.services import destroy_off_thread
from store.store_config import StoreConfig

log = logging.getLogger(__name__)

#: An append's outcome that leaves its entries in the log, answered as failed: the quorum did not acknowledge them
#: in time (dledger/quorum.py; LEADER_PENDING_FULL refuses an append before it is written, and a role change, which
#: may truncate the entries, clears what was kept instead).
_UNACKNOWLEDGED: Final = frozenset({ResponseCode.WAIT_QUORUM_ACK_TIMEOUT})

#: ``(broker role, term)`` -> None: "SYNC_MASTER" once the leader may take writes, "SLAVE" otherwise.
RoleListener = Callable[[str, int], None]
#: the refusal while DLedger's own disk-full flag is set (dledger/retention.py)
_DLEDGER_DISK_FULL: Final = (f"disk full: the store root or the DLedger data directory is above DLedger's "
                             f"{DISK_FULL_RATIO:.2f} used ratio")  # fmt: skip
#: seconds between tries of a dispatch a ConsumeQueue file stopped (ConsumeQueue.putMessagePositionInfoWrapper sleeps
#: one second between its tries)
DISPATCH_RETRY_S: Final = 1.0


class LedgerCommitLog(CommitLog):
    """The CommitLog's read side over the DLedger data files (the same mapping the ledger writes through)."""

    __slots__ = ("floor", "ledger")

    def __init__(self, ledger: FileLedger, floor: int = 0) -> None:  # no super(): the ledger owns the files
        self.ledger = ledger
        #: below it nothing can be uncommitted: where the log started at load (entries deleted or skipped before),
        #: a mixed store's classic end, which stays when the classic part goes (set by the store)
        self.floor = floor
        self.queue = ledger.data
        self.file_size = ledger.data.file_size
        self.on_roll = None
        self.last_store_timestamp = 0

    @property
    def min_offset(self) -> int:
        """Where the log's first entry lies, past a rebuilt log's leading blank (DLedger's ``MmapFileList
        .getMinOffset``: the first segment's start plus its start position); the data's start when empty."""
        ledger = self.ledger
        record = ledger.index_record(ledger.begin_index) if ledger.begin_index >= 0 else None
        return self.queue.min_offset if record is None else record.pos

    @property
    def max_offset(self) -> int:
        """The end of the committed entries (DLedgerCommitLog.getMaxOffset: ``getCommittedPos``; with none the log's
        start), at least :attr:`floor`: what reads, pulls and ``commitLogMaxOffset`` see. Entries past it may still be
        truncated; appends go on at :attr:`write_end`. Read from state, not the files (the store's last flush plan
        asks after the ledger closed them)."""
        return max(self.ledger.committed_pos, self.floor)

    def truncate_to(self, offset: int, erase: bool = True) -> None:
        raise RuntimeError("the DLedger log is truncated by the ledger only")

    def close(self) -> None:
        """The ledger unmaps its files when its server stops."""


class MixedCommitLog(LedgerCommitLog):
    """RocketMQ's mixed CommitLog (DLedgerCommitLog's ``dividedCommitlogOffset``): the classic CommitLog of the store
    DLedger mode took over, sealed and read-only, below ``divided``, and the DLedger log from ``divided`` on. Reads
    go to the one holding the offset; retention deletes the classic segments first
    (:meth:`DLedgerMessageStore.delete_expired_classic`)."""

    __slots__ = ("classic", "divided")

    def __init__(self, ledger: FileLedger, classic: CommitLog, divided: int) -> None:
        super().__init__(ledger, divided)
        self.classic = classic
        self.divided = divided

    @property
    def min_offset(self) -> int:
        """The classic log's first offset while it has segments (DLedgerCommitLog.getMinOffset)."""
        files = self.classic.queue.files
        return files[0].file_from_offset if files else super().min_offset

    def read(self, phy_offset: int, size: int) -> memoryview | None:
        if phy_offset < self.divided:
            return self.classic.read(phy_offset, size)
        return super().read(phy_offset, size)

    def read_record(self, phy_offset: int) -> memoryview | None:
        if phy_offset < self.divided:
            return self.classic.read_record(phy_offset)
        return super().read_record(phy_offset)

    def segment_at(self, phy_offset: int) -> tuple[memoryview, int, int] | None:
        if phy_offset < self.divided:
            return self.classic.segment_at(phy_offset)
        return super().segment_at(phy_offset)

    def close(self) -> None:
        """The classic segments (the ledger unmaps its own)."""
        self.classic.close()


class DLedgerMessageStore(MessageStore):
    def __init__(self, config: StoreConfig, dledger: DLedgerConfig, store_host: bytes | None = None) -> None:
        super().__init__(config, store_host=store_host)
        self.server = DLedgerServer(dledger)
        self.commitlog = LedgerCommitLog(self.server.ledger)
        self.dispatched_index = -1
        #: where the DLedger log starts in a mixed store (:class:`MixedCommitLog`), 0 otherwise
        self.divided_offset = 0
        self.writable = False
        self.role_listeners: list[RoleListener] = []
        #: the DLedger role of the change the listeners hear about (a "SLAVE" is a FOLLOWER's or a CANDIDATE's)
        self.raft_role: Role | None = None
        #: the sends waiting for their entry to commit (the send processor waits through ``put_waits``)
        self.commit_waits = CommitWaits()
        #: last entry index of an append that takes queue offsets -> (queue key, first offset, end offset), until
        #: the append's outcome (:meth:`_append_done`)
        self._appended: dict[int, tuple[tuple[str, int], int, int]] = {}
        #: set to have a follower's committed entries dispatched (None until :meth:`run` starts the task)
        self._dispatch_wanted: trio.Event | None = None
        #: set when a dispatch stopped at a file it could not make (:meth:`_retry_stalled_dispatch` tries again)
        self._dispatch_stalled = trio.Event()
        #: ConsumeQueue and index files taken out of the store under the disk lock (:meth:`_drop_below`), destroyed
        #: by the next :meth:`destroy_taken` once the lock is let go
        self._dropped: list[Destroyable] = []
        self.put_waits = self.commit_waits
        self.server.commit_listeners.append(self._on_commit)
        self.server.role_listeners.append(self._on_role)
        self.server.effects_scope = self.group_commit.release_pass
        self.retention = LedgerRetention(self)

    @property
    def ledger(self) -> FileLedger:
        return self.server.ledger

    # ---- life cycle ----------------------------------------------------------------------------------------------

    def load(self) -> None:
        """Lock, recover the DLedger files (and a classic CommitLog the store holds: :meth:`_load_classic`), then the
        ConsumeQueues up to the committed position. Blocking. Raises :class:`ClassicCommitLogError` when the DLedger
        log does not start where the classic one ends. On any failure what it took is let go again (the lock, the
        store's and the ledger's mapped files) before the error propagates, as :meth:`MessageStore.load` does."""
        try:
            self.open_files()
            self.server.load()
            if not self._load_classic():
                self.abnormal_recovery = create_abort_file(self.root)
                load_consume_queues(self)
            self._recover_queues()
        except BaseException:
            self.abandon()
            self.ledger.close()
            raise

    def _recover_queues(self) -> None:
        """The ConsumeQueues recovered up to the committed end and their queue offsets set, then the committed entries
        past what they cover dispatched."""
        commitlog = self.commitlog
        assert isinstance(commitlog, LedgerCommitLog)  # the classic one only while _take_over recovers it
        commitlog.floor = max(self.divided_offset, commitlog.min_offset, 0)
        self._commit_what_was_dispatched()
        committed_end = commitlog.max_offset
        covered = 0
        for (topic, queue_id), cq in list(self.consume_queues.items()):
            cq.recover(self.commitlog.min_offset, committed_end, erase=True)
            cq.restart_gapped = True
            last = cq.entry(cq.max_offset - 1) if cq.max_offset else None
            if last is not None and last[1] != FILLER_SIZE:
                covered = max(covered, last[0] + last[1])
            if cq.max_offset:
                self.queue_offsets[cq.key] = cq.max_offset
            else:
                self.queue_offsets.pop((topic, queue_id), None)
        self.dispatched_index = self._first_uncovered(covered) - 1
        self._dispatch_committed()

    def _load_classic(self) -> bool:
        """A store that holds a classic CommitLog (``commitlog/``: a classic broker's store, taken over in place, as
        RocketMQ's guide to upgrading a cluster to DLedger has it) becomes a mixed one, as DLedgerCommitLog.recover
        makes it. The first time (no DLedger data file yet) the classic log is recovered as a classic broker would
        (:func:`~store.recovery.recover`: its tail dispatched into the ConsumeQueues and the index, which it loads),
        sealed with the end-of-file blank and the DLedger log started at its last segment's end; later loads only map
        it. Returns whether the classic recovery ran."""
        config = self.config
        if not any(segment_paths(directory) for directory in config.commit_log_dirs.every()):
            return False
        classic = CommitLog(config.commit_log_dirs, config.mapped_file_size_commit_log)
        first_time = not self.ledger.data.files
        records_end = None
        try:
            if first_time:
                records_end = self._take_over(classic)
            else:
                self._map_classic(classic)
        except BaseException:
            classic.close()  # not the store's CommitLog yet: abandon would not unmap it
            raise
        self._open_with_marker(records_end)
        return first_time

    def _open_with_marker(self, records_end: int | None = None) -> None:
        """A mixed store's DLedger log opens with an entry of its own (ours; RocketMQ's starts empty): index 0, term
        0, at the classic end, synced, its body the classic records' end (:data:`~dledger.file_store.MARKER`: where
        the last classic record ends, before the seal's blank; read back from the last segment when not given).
        Members started from the same copy write the same one, so their logs agree on it, and a copy that ends
        elsewhere shows when the leader's marker replaces its own (:meth:`~dledger.file_store.FileLedger.truncate`
        logs it). It also puts them ahead of a member started empty, which then cannot win the first election and
        lead a log starting at 0 that they could not follow (no leader would ever commit). Dispatch skips it
        (:meth:`_dispatch_general`)."""
        ledger, commitlog = self.ledger, self.commitlog
        if ledger.end_index >= 0 or not isinstance(commitlog, MixedCommitLog):
            return
        end = _records_end(commitlog.classic) if records_end is None else records_end
        ledger.append_as_leader(0, [(MARKER.size, lambda _pos: MARKER.pack(end))])
        ledger.flush_all()

    def _mix(self, classic: CommitLog, divided: int) -> None:
        self.divided_offset = self.ledger.rebuild_floor = divided
        self.commitlog = MixedCommitLog(self.ledger, classic, divided)

    def _take_over(self, classic: CommitLog) -> int:
        """The first load of a mixed store: the classic recovery, the seal, what recovery dispatched made durable
        with a checkpoint at the classic end (the DLedger data file that follows marks the take-over done: no later
        load recovers the classic log again), then the DLedger log started at that end. Returns where the classic
        records end (before the seal's blank)."""
        own, self.commitlog = self.commitlog, classic
        try:
            recover(self)
        finally:
            self.commitlog = own
        last = classic.queue.last()
        records_end = classic.max_offset
        if last is not None and last.wrote_position >= last.file_size:  # ended by the classic broker's own blank
            records_end = _records_end(classic)  # where it lies, as a lost marker is rewritten
        divided = _seal(classic)
        self._mix(classic, divided)
        self.flush_all_blocking()
        self.ledger.start_at(divided)
        log.warning("classic CommitLog taken over: its records end at %d, the DLedger log starts at %d", records_end,
                    divided)  # fmt: skip
        return records_end

    def _map_classic(self, classic: CommitLog) -> None:
        """A later load: the sealed classic segments mapped, the DLedger log starting at their end. A log rebuilt
        from a leader's first entry past that end (the leader had deleted entries, so its classic part was gone):
        the classic segments are deleted and the store is a plain DLedger one. Raises :class:`ClassicCommitLogError`
        for a log starting anywhere else (the two overlap, or a data file was lost)."""
        classic.queue.load()
        divided, start = classic.max_offset, self.ledger.data_start
        if start != divided and not (start > divided and self.ledger.begin_index > 0):
            classic.close()
            raise ClassicCommitLogError(
                f"{classic.queue.directory} ends at {divided} but the DLedger log in {self.ledger.config.data_path} "
                f"starts at {start}: they are not one mixed CommitLog"
            )
        self._mix(classic, divided)
        if start != divided:
            destroy_segments(self._unmix("the DLedger log was rebuilt past it"))

    def _unmix(self, why: str) -> list[MappedFile]:
        """The store stops being mixed: its classic segments go (deleted by retention, or past use because the log was
        rebuilt from a leader's first entry after them). Returns them, for the caller to destroy (unmap and unlink:
        milliseconds a segment, in a worker thread)."""
        commitlog = self.commitlog
        assert isinstance(commitlog, MixedCommitLog)
        files = commitlog.classic.queue.files[:]
        commitlog.classic.queue.files.clear()
        self.commitlog = LedgerCommitLog(self.ledger, commitlog.floor)
        self.commitlog.last_store_timestamp = commitlog.last_store_timestamp
        self.divided_offset = self.ledger.rebuild_floor = 0
        log.warning("classic CommitLog %s: %s", commitlog.classic.queue.directory, why)
        return files

    def _commit_what_was_dispatched(self) -> None:
        """Only committed entries are dispatched, so the entries the ConsumeQueues point at up to the log's write
        end were committed, whatever the ``checkpoint`` says: it is written every ``checkPointInterval`` and predates
        the last commits of a member that was killed. The queues are cut at the write end, as RocketMQ cuts them
        (store/src/main/java/org/apache/rocketmq/store/dledger/DLedgerCommitLog.java ``recover``), and the
        committed index raised to the last entry they cover: a restarted member serves what it had served (cut at
        the stale committed end, acknowledged messages left its queues, also with no leader back to commit them)."""
        ledger = self.ledger
        write_end, covered = ledger.write_pos, 0
        for cq in self.consume_queues.values():
            cq.recover(self.commitlog.min_offset, write_end, erase=True)
            last = cq.entry(cq.max_offset - 1) if cq.max_offset else None
            if last is not None and last[1] != FILLER_SIZE:
                covered = max(covered, last[0] + last[1])
        if covered <= self.commitlog.max_offset:
            return
        lo, hi = ledger.committed_index + 1, ledger.end_index
        while lo <= hi:  # the entry whose record ends at ``covered`` (positions grow with the index)
            mid = (lo + hi) // 2
            record = ledger.index_record(mid)
            if record is None:
                return
            end = record.pos + record.size
            if end == covered:
                log.info("dledger entry %d was dispatched before the restart: committed (the checkpoint had %d)",
                         mid, ledger.committed_index)  # fmt: skip
                ledger.set_committed(mid)
                return
            if end < covered:
                lo = mid + 1
            else:
                hi = mid - 1

    def _first_uncovered(self, covered: int) -> int:
        """The first entry whose record ends past ``covered`` (binary search over the index records)."""
        ledger = self.ledger
        lo, hi = max(ledger.begin_index, 0), ledger.committed_index + 1
        while lo < hi:
            mid = (lo + hi) // 2
            record = ledger.index_record(mid)
            if record is not None and record.pos + record.size <= covered:
                lo = mid + 1
            else:
                hi = mid
        return lo

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        """The DLedger server and the ConsumeQueue flush; cancel to stop (the ledger and the queues flush)."""
        try:
            async with trio.open_nursery() as nursery:
                self._dispatch_wanted = trio.Event()  # before the server: its first commits are heard
                await nursery.start(self.server.run)
                await nursery.start(self.flush_service.run)
                await nursery.start(self.retention.run)
                nursery.start_soon(self._dispatch_soon)
                nursery.start_soon(self._retry_stalled_dispatch)
                task_status.started()
        finally:
            self._closed = True
            self.writable = False
            self._dispatch_wanted = None
            self.commit_waits.fail_all()
            with trio.CancelScope(shield=True):
                await trio.to_thread.run_sync(self.close, limiter=self.disk_limiter)

    def close(self) -> None:
        """The store's close, then the DLedger files when no DLedger server holds them: a broker whose start failed
        after the load never ran one, and only a running server closes them as it stops (DLedgerCommitLog.shutdown
        stops the DLedger server whatever got started: store/src/main/java/org/apache/rocketmq/store/dledger/
        DLedgerCommitLog.java). Idempotent; blocking."""
        super().close()
        dropped, self._dropped = self._dropped, []
        destroy_segments(dropped)  # taken out by a pass cancelled before it destroyed them
        if not self.server.running:
            self.ledger.close()

    def commit_log_flush_snapshot(self) -> list[MappedFile]:
        """Nothing: the ledger syncs its own files (its ``flushFileInterval``)."""
        return []

    def flush_plan(self) -> FlushPlan:
        """ConsumeQueue segments only (the ledger flushes its own files); the checkpoint's end is what is
        dispatched."""
        files = []
        for cq in self.consume_queues.values():
            if cq.retired:  # under the disk lock, no flush thread running: unlinked segments can go
                cq.close_retired()
            files.extend(cq.queue.flush_snapshot())
        return self.commitlog.max_offset, self.commitlog.last_store_timestamp, files

    # ---- dispatch ------------------------------------------------------------------------------------------------

    def _on_commit(self, _index: int) -> None:
        """A leader dispatches at once (a client that saw SEND_OK may read the message next); a follower leaves it
        to :meth:`_dispatch_soon`, so the commits of every push its reader takes in one pass dispatch as one run."""
        if self._dispatch_wanted is not None and self.server.running and self.server.node.member.is_follower:
            self._dispatch_wanted.set()
            return
        self._dispatch_committed()
        self._check_writable_leader()

    async def _dispatch_soon(self) -> None:
        """A follower's commit-time dispatch, one scheduler pass after the commits that asked for it (first, under
        the disk lock, the skip past a rebuilt log's missing entries: :meth:`_skip_to_begin`)."""
        while self._dispatch_wanted is not None:
            await self._dispatch_wanted.wait()
            self._dispatch_wanted = trio.Event()
            if self._log_skipped():
                async with self.disk_lock:
                    gone = self._skip_to_begin()
                await self.destroy_taken(gone)
            self._dispatch_committed()
            self._check_writable_leader()

    async def _retry_stalled_dispatch(self) -> None:
        """Ask for the dispatch again :data:`DISPATCH_RETRY_S` after it stalled, until it gets through (RocketMQ's
        dispatcher retries the entry too): the commits the quorum acknowledged meanwhile reach the queues then."""
        while self._dispatch_wanted is not None:
            await self._dispatch_stalled.wait()
            await trio.sleep(DISPATCH_RETRY_S)
            self._dispatch_stalled = trio.Event()
            if self._dispatch_wanted is not None:
                self._dispatch_wanted.set()

    def _dispatch_committed(self) -> None:
        """Dispatch the committed entries not yet dispatched (:meth:`_dispatch_until`), in index order. A
        ConsumeQueue or index file that cannot be made (``OSError``: EMFILE, ENOSPC) stalls the dispatch, logged:
        :attr:`dispatched_index` stays below the entry, which is dispatched again (what it wrote already rewritten
        in place) :data:`DISPATCH_RETRY_S` later, not on every commit meanwhile; the log, the commits and the sends'
        answers go on."""
        ledger = self.ledger
        target = ledger.committed_index
        if self.dispatched_index >= target or self._dispatch_stalled.is_set():
            return
        if self._log_skipped():  # a follower's, rebuilt: _dispatch_soon skips under the disk lock first
            if self._dispatch_wanted is not None:
                self._dispatch_wanted.set()
            return
        try:
            self._dispatch_until(target)
        except OSError as exc:
            log.error("dledger entry %d: dispatch failed (%s); trying again in %.0f s", self.dispatched_index + 1,
                      exc, DISPATCH_RETRY_S)  # fmt: skip
            self._dispatch_stalled.set()

    def _dispatch_until(self, target: int) -> None:
        """Dispatch the entries up to ``target``: runs of plain records walked in place by the record scan
        (:func:`~remoting.codec.record_scan.scan_records` over the entries, C when built: one ConsumeQueue write per
        run of a queue, the index entries hashed in it), as a classic slave's dispatch does (store/ha/replica.py);
        any other record (a transaction's half or rollback, a delayed one, non-ASCII keys) on the general path, one
        at a time. An unreadable entry stops the dispatch (logged); ``OSError`` from a file passes through."""
        ledger = self.ledger
        index = self.indexer
        while self.dispatched_index < target:
            at = ledger.segment_at(self.dispatched_index + 1)
            if at is None:
                log.error("dledger entry %d is committed but unreadable; dispatch stops", self.dispatched_index + 1)
                return
            view, rel, base, written = at
            limit = min(written, ledger.committed_pos - base)
            scan = scan_records(view, rel, limit, base, index is not None, True)
            if scan[1]:  # entries walked
                self.dispatch_scanned(view, base, scan)
                self.dispatched_index += scan[1]
                continue
            if not self._dispatch_general(self.dispatched_index + 1):
                return
            self.dispatched_index += 1

    def dispatch_behind_bytes(self) -> int:
        """Committed bytes not dispatched yet (DLedgerCommitLog: the committed position less the dispatcher's): a
        follower's until its next dispatch pass, any member's behind an entry it cannot read."""
        ledger = self.ledger
        at = self.dispatched_index
        record = ledger.index_record(at) if at >= max(ledger.begin_index, 0) else None
        dispatched = record.pos + record.size if record is not None else max(ledger.data_start, 0)
        return max(0, self.commitlog.max_offset - dispatched)

    def _log_skipped(self) -> bool:
        """Whether the log now starts after entries never dispatched here (it was rebuilt from the leader's first
        entry; the ones before are gone from the group)."""
        return self.dispatched_index + 1 < self.ledger.begin_index

    def _skip_to_begin(self) -> list[MappedFile]:
        """Dispatch goes on from the log's first entry, after the queues and the index file drop what points below
        it; a queue left with no live entry restarts at its next offset (``ConsumeQueue.restart_gapped``). A mixed
        store's classic part goes too (the leader deleted entries, so it had none left): its segments are returned
        for the caller to destroy with the queue and index files (:meth:`destroy_taken`, after the disk lock). Under
        the disk lock."""
        if not self._log_skipped():
            return []
        gone = self._unmix("the DLedger log was rebuilt past it") if self.divided_offset else []
        self._drop_below(self.commitlog.min_offset)
        for cq in self.consume_queues.values():
            cq.restart_gapped = True
        log.warning("dledger log starts at entry %d: entries %d.. were deleted before this member had them",
                    self.ledger.begin_index, self.dispatched_index + 1)  # fmt: skip
        self.dispatched_index = self.ledger.begin_index - 1
        return gone

    def _drop_below(self, min_phy: int) -> None:
        """Take the ConsumeQueue and index files wholly below ``min_phy`` out of the store, under the disk lock; the
        next :meth:`destroy_taken` unmaps and unlinks them in a worker thread once the lock is let go (an index file
        is 420 MB: RocketMQ deletes them on its CleanConsumeQueueService thread, store/src/main/java/org/apache/
        rocketmq/store/DefaultMessageStore.java, as the classic store's retention does in store/services.py)."""
        for cq in list(self.consume_queues.values()):
            self._dropped.extend(cq.take_expired(min_phy))
        if self.index is not None:
            self._dropped.extend(self.index.take_expired(min_phy))

    def delete_expired_entries(self, expire_before_ms: int, *, force: bool, limit: int = DELETE_FILES_BATCH_MAX) -> int:
        """Retention's deletion (dledger/retention.py; the caller holds the disk lock): at most ``limit`` data
        segments wholly below what is committed, flushed and dispatched (unlinked now, unmapped by the ledger's next
        flush: :meth:`~dledger.file_store.FileLedger.delete_expired`). The ConsumeQueue and index files below the
        log's new first entry go in the pass's second half, one queue at a time ``deleteConsumeQueueFilesInterval``
        apart (:meth:`~store.services.RetentionService.check_once`: RocketMQ's DLedger broker cleans them with
        DefaultMessageStore's CleanConsumeQueueService, store/src/main/java/org/apache/rocketmq/store/
        DefaultMessageStore.java). Returns the number of data segments deleted."""
        ledger = self.ledger
        settled = min(ledger.committed_index, ledger.flushed_index, self.dispatched_index)
        record = ledger.index_record(settled) if settled >= max(ledger.begin_index, 0) else None
        below = -1 if record is None else record.pos + record.size
        return ledger.delete_expired(expire_before_ms, below, force=force, limit=limit)

    async def destroy_taken(self, files: Sequence[Destroyable] = ()) -> None:
        """Destroy ``files`` (segments taken out of their queue) and the ConsumeQueue and index files
        :meth:`_drop_below` took (:func:`~store.mapped_file.destroy_segments`) in a worker thread, shielded: nothing
        else would ever close them. Called after letting go of the disk lock, so flushes go on meanwhile."""
        files = [*files, *self._dropped]
        self._dropped = []
        await destroy_off_thread(files, self.disk_limiter)

    def classic_segments(self) -> int:
        """How many segments a mixed store's classic CommitLog still has (0: none, or not a mixed store)."""
        commitlog = self.commitlog
        return len(commitlog.classic.queue.files) if isinstance(commitlog, MixedCommitLog) else 0

    def delete_expired_classic(
        self, expire_before_ms: int, *, force: bool, limit: int = DELETE_FILES_BATCH_MAX, keep_last: bool = True
    ) -> list[MappedFile]:
        """Retention of a mixed store's classic segments (dledger/retention.py; the caller holds the disk lock):
        oldest first, last modified before ``expire_before_ms`` (any age with ``force``), at most ``limit``, the last
        one kept unless ``keep_last`` is false (DLedgerCommitLog.deleteExpiredFile takes it apart); what the
        ConsumeQueues and the index file hold below the first offset left goes in the pass's second half, as after
        :meth:`delete_expired_entries`. Returns the segments taken out, for the caller to destroy
        (:meth:`destroy_taken`, after the disk lock)."""
        commitlog = self.commitlog
        if not isinstance(commitlog, MixedCommitLog):
            return []
        files = commitlog.classic.queue.files
        kept = 1 if keep_last else 0
        gone: list[MappedFile] = []
        while len(files) > kept and len(gone) < limit and (force or files[0].mtime_ms() <= expire_before_ms):
            gone.append(files.pop(0))
        if not files:
            self._unmix("every segment deleted by retention")  # none left in it
        return gone

    def _dispatch_general(self, number: int) -> bool:
        """The entry ``number`` on the general path (a record the scan does not take). False when it is unreadable
        (logged)."""
        at = self.ledger.body_at(number)
        if at is None:
            log.error("dledger entry %d is committed but unreadable; dispatch stops", number)
            return False
        if at[2] and at[2] != MARKER.size:  # a record is never as short as the mixed store's marker
            index = self.indexer
            runs = IndexRuns(index, timed=True) if index is not None else None
            try:
                self._dispatch_record(at[0], at[1], runs)
            finally:
                if runs is not None:
                    runs.flush()
        return True

    def _dispatch_record(self, view: memoryview, at: int, runs: IndexRuns | None) -> None:
        try:
            meta = read_record_meta(view, at)
        except MessageDecodeError as exc:
            log.error("dledger entry holds no valid record: %s", exc)
            return
        tags = self.redispatch(meta, runs)
        self.commitlog.last_store_timestamp = meta.store_timestamp
        listener = self.arrival_listener
        if listener is not None and tags is not None:
            listener(meta.topic, meta.queue_id, meta.queue_offset, tags, meta.properties.decode("utf-8", "replace"))

    # ---- roles ---------------------------------------------------------------------------------------------------

    def _on_role(self, change: RoleChanged) -> None:
        self.writable = False
        self._appended.clear()
        self.unacknowledged.clear()  # a lost term's entries may be truncated and their offsets reused
        self.commit_waits.fail_all()
        self.raft_role = change.role
        if change.role is not Role.LEADER:
            self._tell("SLAVE", change.term)
        else:
            self._check_writable_leader()

    def _check_writable_leader(self) -> None:
        """A leader takes writes once everything in its log is committed and dispatched; the queue offsets are then
        rebuilt from the ConsumeQueues (DLedgerRoleChangeHandler's wait, then recoverTopicQueueTable)."""
        if self.writable or not self.server.running:
            return
        node, ledger = self.server.node, self.ledger
        if node.member.role is not Role.LEADER or ledger.committed_index != ledger.end_index:
            return
        if self.dispatched_index != ledger.committed_index:
            return
        self.queue_offsets.clear()
        for cq in self.consume_queues.values():
            if cq.max_offset:
                self.queue_offsets[cq.key] = cq.max_offset
        self.writable = True
        self._tell("SYNC_MASTER", node.member.curr_term)

    def _tell(self, role: str, term: int) -> None:
        for listener in self.role_listeners:
            listener(role, term)

    # ---- writes --------------------------------------------------------------------------------------------------

    def check_writable(self) -> None:
        """The base's, and no writes unless this broker is the DLedger leader taking them."""
        self._check_leader()

    def _check_leader(self) -> None:
        """The store's refusals, then the leader's, then DLedger's own disk-full flag (``appendAsLeader``'s
        DISK_FULL), which reads the store root too: RocketMQ's 10 s disk check reads only the data directory and may
        clear the store's flag meanwhile."""
        if self._closed or self.disk_full_reason is not None:
            self._check_writable()
        if not self.writable:
            raise ServiceNotAvailableError("this broker is not the DLedger leader")
        if self.ledger.disk_full:
            raise ServiceNotAvailableError(_DLEDGER_DISK_FULL)

    def append(self, msg: MessageRecord) -> AppendResult:
        """One entry holding ``msg``'s record, encoded straight into the entry's place in the data file
        (:meth:`~dledger.file_store.FileLedger.append_record_as_leader`: in C when built, no record built first).
        With ``enableMultiDispatch`` it is stored without a sender's ``INNER_MULTI_QUEUE_OFFSET``: this store does not
        stamp one (store/src/main/java/org/apache/rocketmq/store/dledger/DLedgerCommitLog.java does, through
        ``MultiDispatch.wrapMultiDispatch``), and a committed entry is dispatched as recovery does, so a stored one
        would place LMQ entries at offsets the sender chose."""
        self._check_leader()
        if self.config.enable_multi_dispatch:
            msg = unstamp(msg)
        topic, queue_id, store_host = msg.topic, msg.queue_id, msg.store_host
        counted = _takes_queue_offset(msg.sys_flag)
        key = self.consume_queue(topic, queue_id).key if counted else None  # a topic it refuses: before the append
        queue_offset = self.queue_offsets.get((topic, queue_id), 0) if counted else 0
        store_ts = self.config.now_ms()
        ledger, max_body = self.ledger, self.config.max_message_size

        def write(term: int) -> list[Entry]:
            return [ledger.append_record_as_leader(term, encode_record_into, queue_offset, lambda: store_ts, max_body,
                                                   msg)]  # fmt: skip

        try:
            code, entries = self.server.append(write, self._append_done)
        except MessageEncodeError as exc:
            raise put_refusal(exc) from exc
        if code != ResponseCode.SUCCESS:
            raise _refused(code)
        entry = entries[0]
        if key is not None:
            self.queue_offsets[key] = queue_offset + 1
            self._appended[entry.index] = (key, queue_offset, queue_offset + 1)
        self.commit_waits.register(entry.index, entry.end_pos)
        return AppendResult(entry.pos + HEADER_SIZE, len(entry.body), queue_offset, store_ts, None, store_host)

    def append_batch(self, msgs: Sequence[MessageRecord]) -> AppendResult:
        self._check_leader()
        if not msgs:
            raise MessageIllegalError("empty batch")
        if self.config.enable_multi_dispatch:
            msgs = [unstamp(m) for m in msgs]
        head = msgs[0]
        if any(m.topic != head.topic or m.queue_id != head.queue_id for m in msgs):
            raise MessageIllegalError("a batch must target one topic and queue")
        return self._append_prepared_entries(head.store_host, [self._prepare(m) for m in msgs])

    def append_entries(self, template: MessageRecord, entries: Sequence[tuple[bytes, str, int]]) -> AppendResult:
        msgs = [attrs.evolve(template, body=body, properties=props, flag=flag) for body, props, flag in entries]
        return self.append_batch(msgs)

    def _append_prepared_entries(self, store_host: bytes, prepared: list[PreparedMessage]) -> AppendResult:
        """One entry per record, queue offsets handed out now (the CQ gets them on commit)."""
        head = prepared[0].message
        key = self.consume_queue(head.topic, head.queue_id).key
        counted = _takes_queue_offset(prepared[0].sys_flag)
        first = self.queue_offsets.get(key, 0) if counted else 0
        store_ts = self.config.now_ms()
        bodies = [(p.size, _filler(p, first + i if counted else 0, store_ts)) for i, p in enumerate(prepared)]
        code, entries = self.server.append(bodies, self._append_done)
        if code != ResponseCode.SUCCESS:
            raise _refused(code)
        if counted:
            self.queue_offsets[key] = first + len(prepared)
            self._appended[entries[-1].index] = (key, first, first + len(prepared))
        phys = tuple(e.pos + HEADER_SIZE for e in entries)
        end = entries[-1].end_pos
        self.commit_waits.register(entries[-1].index, end)
        size = end - phys[0]
        return AppendResult(phys[0], size, first, store_ts, phys if len(phys) > 1 else None, store_host)

    def _append_done(self, result: AppendDone) -> None:
        """An append's outcome: its waiting send is told (:class:`CommitWaits`). An append the quorum did not
        acknowledge in time stays in the log and commits once the followers are back, but 4.9.8 counts a put only
        on its own PUT_OK (store/src/main/java/org/apache/rocketmq/store/dledger/DLedgerCommitLog.java
        ``asyncPutMessage``): its queue offsets are kept in :attr:`unacknowledged` for the put statistics."""
        appended = self._appended.pop(result.index, None)
        if appended is not None and result.code in _UNACKNOWLEDGED:
            key, first, end = appended
            ranges = self.unacknowledged.setdefault(key, [])
            if ranges and ranges[-1][1] == first:
                ranges[-1] = (ranges[-1][0], end)  # a run of timed-out sends: one range
            else:
                ranges.append((first, end))
        self.commit_waits.done(result)

    def waits_for_put(self, wait: bool) -> bool:
        """Every send waits for the quorum, whatever its ``WAIT`` (DLedgerCommitLog waits for the append future)."""
        return True

    async def put(self, msg: MessageRecord, *, wait_flush: bool = True) -> PutResult:
        result = self.append(msg)
        return PutResult(await self.put_waits.status(result.end_offset, wait_flush), result)

    async def put_batch(self, msgs: Sequence[MessageRecord], *, wait_flush: bool = True) -> PutResult:
        result = self.append_batch(msgs)
        return PutResult(await self.put_waits.status(result.end_offset, wait_flush), result)

    def earliest_store_time(self) -> int:
        """Store time of the first committed record (the data files start with an entry header, not a record), or
        of a mixed store's first classic record. Every entry ahead of it is skipped, however many: each election
        appends an empty one, and a group restarted often before its first send has any number of them (RocketMQ's
        ``DefaultMessageStore.getEarliestMessageTime`` reads the first message,
        store/src/main/java/org/apache/rocketmq/store/DefaultMessageStore.java; a record is never as short as an
        empty entry or the marker, so the walk stops at the first one)."""
        if self.classic_segments():
            return super().earliest_store_time()
        ledger = self.ledger
        for index in range(max(ledger.begin_index, 0), ledger.committed_index + 1):
            entry = ledger.get(index)
            if entry is not None and len(entry.body) > MARKER.size:  # no new leader's empty entry, no marker
                try:
                    return read_record_meta(entry.body).store_timestamp
                except MessageDecodeError:
                    return -1
        return -1

    def status(self) -> dict[str, object]:
        """The Raft state: term, role, leader, the ledger's indexes, on a leader each peer's match index."""
        return {**self.server.status(), "dispatchedIndex": self.dispatched_index, "writable": self.writable}

    def runtime_entries(self) -> dict[str, str]:
        """The Raft state as GET_BROKER_RUNTIME_INFO keys (``mqadmin brokerStatus``, ``clusterList``; ours)."""
        status = self.status()
        marks = status.get("peerWatermarks") or {}
        assert isinstance(marks, dict)
        return {
            "dLedgerGroup": self.server.config.group,
            "dLedgerSelfId": self.server.config.self_id,
            "dLedgerRole": str(status["role"]),
            "dLedgerTerm": str(status.get("term", -1)),
            "dLedgerLeaderId": str(status.get("leaderId") or ""),
            "dLedgerBeginIndex": str(status.get("ledgerBeginIndex", -1)),
            "dLedgerEndIndex": str(status.get("ledgerEndIndex", -1)),
            "dLedgerCommittedIndex": str(status.get("committedIndex", -1)),
            "dLedgerDispatchedIndex": str(self.dispatched_index),
            "dLedgerPeerWatermarks": ",".join(f"{peer}:{index}" for peer, index in sorted(marks.items())),
        }


class ClassicCommitLogError(StoreError):
    """A store whose classic CommitLog and DLedger log do not make one mixed CommitLog."""


def _seal(classic: CommitLog) -> int:
    """End a recovered classic log for good: the end-of-file blank after its last record unless one is there
    (DLedgerCommitLog.recover's ``needWriteMagicCode``), every segment synced (a killed classic broker may have left
    records in the page cache only, and no later load scans them again). Returns its end, where the DLedger log
    starts (``dividedCommitlogOffset``)."""
    last = classic.queue.last()
    if last is None:  # recovery keeps the segment holding the log's end
        raise ClassicCommitLogError(f"{classic.queue.directory} has no segment left after recovery")
    if last.wrote_position < last.file_size:
        write_blank(last.buf, last.wrote_position, last.file_size - last.wrote_position)
        last.wrote_position = last.file_size
    for mf in classic.queue.files:
        if mf.fd >= 0:
            os.fdatasync(mf.fd)
    return last.end_offset


def _records_end(classic: CommitLog) -> int:
    """Where the last record of a sealed classic log ends: the seal's blank, found by walking its last segment."""
    last = classic.queue.last()
    end = 0 if last is None else last.file_from_offset
    for offset, meta in classic.scan(end, False):
        if meta is None:
            break
        end = offset
    return end


def _refused(code: int) -> PutRefusedError:
    """An append the DLedger server refused with ``code``, nothing written: DLedgerCommitLog's OS_PAGECACHE_BUSY for
    every such refusal (DLedgerServer.handleAppend answers them with position -1; store/src/main/java/org/apache/
    rocketmq/store/dledger/DLedgerCommitLog.java asyncPutMessage / asyncPutMessages), answered SYSTEM_ERROR; UNKNOWN
    (-1, an entry past DLedger's 4 MiB entry buffer, which handleAppend throws on) is the UNKNOWN_ERROR its ``catch``
    answers."""
    if code == ResponseCode.UNKNOWN:
        return PutRefusedError(f"DLedger could not encode the entry: code {code}")
    return PageCacheBusyError(f"DLedger refused the append: code {code}")


def _takes_queue_offset(sys_flag: int) -> bool:
    """Whether a record with ``sys_flag`` gets a queue offset: not a transaction's prepared half or rollback."""
    tx = sys_flag & SYSFLAG_TRANSACTION_MASK
    return tx != SYSFLAG_TRANSACTION_PREPARED and tx != SYSFLAG_TRANSACTION_ROLLBACK


def _filler(prepared: PreparedMessage, queue_offset: int, store_ts: int) -> Callable[[int], bytes]:
    def fill(pos: int) -> bytes:
        buf = bytearray(prepared.size)
        write_record(buf, 0, prepared, queue_offset, pos + HEADER_SIZE, store_ts)
        return bytes(buf)

    return fill
