"""``MessageStore``: the store facade processors use. It composes the CommitLog, the ConsumeQueues, the optional
IndexService, the checkpoint and the background services.

Life cycle and ownership: ``MessageStore(config)`` then :meth:`MessageStore.load` (blocking: takes the ``lock``
file, runs recovery, lets go of both when it fails; call it through ``trio.to_thread.run_sync`` when the log is large),
then ``await nursery.start(store.run)`` which starts the flush / group-commit / allocation / retention services and,
when cancelled, flushes everything, writes the checkpoint, deletes ``abort`` and unmaps. :meth:`close` does the same
synchronously for callers without a nursery. Everything runs on one Trio thread; only disk work goes to threads.

Writes: :meth:`append` / :meth:`append_batch` are synchronous and never await; they assign queue offsets and the
store time, write the record(s), dispatch ConsumeQueue and index entries and call the arrival listener. With the C
extensions built, ``store.append`` and ``store.append_batch`` are bound to ``store._appender.Appender``'s
(store/_appender.c), which do the same for the usual message or batch in one call and hand every other one to the
Python method; the store's ``config``, ``index``, ``arrival_listener``, ``disk_full_reason`` and shutdown are
mirrored into it by their setters.
:meth:`put` / :meth:`put_batch` add the SYNC_FLUSH wait (group commit) and report FLUSH_DISK_TIMEOUT.
Refused writes raise :class:`~store.errors.PutRefusedError` subclasses (``put_status`` names the RocketMQ status)
with nothing written: the ConsumeQueue file a put's entries need is made before its record is written, and deleted
again when the record is refused (:meth:`MessageStore._queue_with_room`).
The replica seam is :meth:`append_encoded`.

The put lock (RocketMQ's ``putMessageLock`` and ``beginTimeInLock``) is the Trio thread: an append never awaits, so
nothing runs while one holds it and no request can see it held, as Java's send threads do. Each append is timed
instead (in C when bound there, else by a wrapper) and one that held the thread longer than
``osPageCacheBusyTimeOutMills`` makes the store page-cache busy afterwards for as long as Java would have seen it busy
(the hold past the limit), on the Trio clock (:meth:`MessageStore.is_os_page_cache_busy`): the broker then answers
sends SYSTEM_BUSY ``[REJECTREQUEST]`` and drains its send queue with ``[PCBUSY_CLEAN_QUEUE]``, as
``BrokerFastFailure`` does while a put holds the lock.

Reads (pulls, lookups by offset or key, queue offsets and times) are inherited from :class:`store.reads.StoreReads`.
"""

from __future__ import annotations

import logging
import struct
import time
import types
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Final, TypeVar

import trio

from remoting.codec.message import (
    SYSFLAG_TRANSACTION_MASK,
    SYSFLAG_TRANSACTION_PREPARED,
    SYSFLAG_TRANSACTION_ROLLBACK,
    MessageEncodeError,
    MessageRecord,
    PreparedMessage,
    PropertiesTooLongError,
    RecordMeta,
    prepare_batch,
    prepare_message,
    read_record_meta,
)
from remoting.codec.message_properties import find_property, index_keys_of_raw, tags_code, tags_code_of_raw
from remoting.codec.record_batch import NATIVE, encode_entries_into, encode_record_into, encode_records_into
from remoting.codec.record_scan import CQ_RUN, CqRun, Scan, scan_records
from remoting.codec.record_scan import NATIVE as SCAN_NATIVE
from store.checkpoint import Checkpoint, StoreLock, delete_abort_file
from store.commitlog import CommitLog
from store.consume_queue import CQ_STORE_UNIT_SIZE, ENTRY, ConsumeQueue, Room
from store.errors import (
    CreateMappedFileError,
    MessageIllegalError,
    PropertiesSizeExceededError,
    PutRefusedError,
    ServiceNotAvailableError,
)
from store.failure_streak import FailureStreak
from store.get_message import in_memory_limit
from store.ha.replica import ReplicaLog
from store.ha.service import HAService
from store.index import IndexRuns, IndexService
from store.mapped_file import MappedFile, flush_segments
from store.multi_dispatch import MultiDispatch, topic_allows_lmq, unstamp, unstamped
from store.put_waits import PutWaits
from store.reads import IndexLike, StoreReads
from store.recovery import keyed_records, recover
from store.results import AppendResult, PutResult, PutStatus, phy_offsets_of_packed
from store.services import AllocateService, FlushService, GroupCommitService, RetentionService
from store.store_config import BrokerRole, FlushDiskType, StoreConfig, parse_delay_levels, wall_clock_ms
from store.topic_cleanup import delete_topic_queues

if TYPE_CHECKING:
    from store._appender import Appender

log = logging.getLogger(__name__)

_A = TypeVar("_A")

SCHEDULE_TOPIC: Final = "SCHEDULE_TOPIC_XXXX"
_SIZE: Final = struct.Struct(">i")
#: Stored messages whose index keys wait at most before they are written in one go (:meth:`MessageStore._index_one`).
INDEX_BATCH: Final = 256
#: Records whose missing keys one drain indexes at most (:meth:`MessageStore._catch_up_index`): about 60 ms of the
#: broker's thread at 7 µs a record; the next drains (flushes, index reads, every ``INDEX_BATCH`` sends) go on.
INDEX_CATCH_UP_RECORDS: Final = 8192

#: callback(topic, queue_id, logical_offset, tags_code, properties): the new message's consume-queue offset (the
#: queue's max offset is now ``logical_offset + 1``) and its raw properties string. Called synchronously inside the
#: append, after the record is stored: it must be cheap and must not raise (wake tasks, do not await).
ArrivalListener = Callable[[str, int, int, int, str], None]
#: Whether a pull waits on ``(topic, queue_id)``: a slave's dispatch calls the listener for the records of a queue
#: only then (``None``: always).
ArrivalInterest = Callable[[str, int], bool]
#: callback(topic, queue_id): the queue's ConsumeQueue was destroyed (its topic deleted, or every message of it
#: expired); a queue of that name starts again at offset 0. Called on the Trio thread; must not raise.
QueueDropListener = Callable[[str, int], None]
#: (CommitLog end, store time of its last record, segments to flush)
FlushPlan = tuple[int, int, list[MappedFile]]


class MessageStore(StoreReads):
    def __init__(self, config: StoreConfig, index: IndexLike | None = None, store_host: bytes | None = None) -> None:
        self._config = config
        self.root = config.store_path_root_dir
        self.store_host = store_host or bytes([127, 0, 0, 1, 0, 0, 0x2A, 0x9F])
        self.commitlog = CommitLog(config.commit_log_dirs, config.mapped_file_size_commit_log, self._on_roll)
        self.consume_queues: dict[tuple[str, int], ConsumeQueue] = {}
        self.queue_offsets: dict[tuple[str, int], int] = {}
        self._appender = self._bind_appender()
        self._index = index
        self._indexer: IndexLike | None = None  # set by _mirror
        #: (topic, properties, phy offset, store time) of stored messages not indexed yet (see :meth:`_index_one`).
        self._index_pending: list[tuple[str, str, int, int]] = []
        #: The CommitLog offset from which stored messages' keys are missing from the index since an index write
        #: failed (:meth:`_guard_index`), ``None`` while it is whole.
        self._unindexed_from: int | None = None
        self._arrival_listener: ArrivalListener | None = None
        self._on_append: Callable[[], None] | None = None  # see call_after_next_append
        self.arrival_interest: ArrivalInterest | None = None
        #: Told of each destroyed ConsumeQueue (:mod:`store.topic_cleanup`, :mod:`store.maintenance`).
        self.queue_drop_listeners: list[QueueDropListener] = []
        #: ``INNER_MULTI_DISPATCH`` and LMQ queues (store/multi_dispatch.py), used with ``enableMultiDispatch``.
        self.multi_dispatch = MultiDispatch(self)
        #: queue key -> [first, end) queue offset ranges of appends whose send was answered as failed while their
        #: entries stay and may still reach the ConsumeQueue (a DLedger leader's quorum timeout): no puts
        #: (:mod:`broker.stats.puts`). Empty outside DLedger mode.
        self.unacknowledged: dict[tuple[str, int], list[tuple[int, int]]] = {}
        self._disk_full_reason: str | None = None
        self._metadata_sync = FailureStreak()  # whether the index's or the checkpoint's last sync failed (logged once)
        self._shut = False
        #: Until when (Trio clock, or monotonic outside Trio) the store is page-cache busy; 0.0: not busy.
        self._busy_until = 0.0
        self._mirror()
        self.checkpoint: Checkpoint | None = None
        self.abnormal_recovery = False
        self.recovery_start = 0  # where the last recovery's CommitLog scan began (the checkpoint, or its segment)
        self.disk_limiter = trio.CapacityLimiter(config.disk_io_threads)
        self.disk_lock = trio.Lock()
        self._delay_levels = parse_delay_levels(config.message_delay_level)
        self._memory_limit = in_memory_limit(config.access_message_in_memory_max_ratio)
        self._lock: StoreLock | None = None
        self._released = False
        self.flush_service = FlushService(self)
        self.group_commit = GroupCommitService(self)
        self.allocate_service = AllocateService(self)
        self.retention = RetentionService(self)
        #: Replication (store/ha/): the HA service on every role; the raw append path on a slave, once loaded.
        self.ha = HAService(self)
        self.replica: ReplicaLog | None = None
        self.put_waits = PutWaits(self)

    def _bind_appender(self) -> Appender | None:
        """The C append path bound as ``self.append`` and ``self.append_batch`` (None without the extension, or when a
        subclass overrides either: then the class's own, timed by :meth:`_timed`)."""
        cls = type(self)
        overridden = cls.append is not MessageStore.append or cls.append_batch is not MessageStore.append_batch
        # enableMultiDispatch: every single put takes the Python path, which stamps and dispatches the listed queues.
        if overridden or _APPENDER is None or self.config.enable_multi_dispatch:
            # Timed here as the C path times itself: the pure-Python build, and a store with appends of its own (the
            # DLedger commit log times its lock too: store/.../dledger/DLedgerCommitLog.java beginTimeInDledgerLock,
            # the getBeginTimeInLock that DefaultMessageStore.isOSPageCacheBusy reads).
            single_py, batch_py = cls.append, cls.append_batch
            self.append = self._timed(types.MethodType(single_py, self))  # type: ignore[method-assign,assignment]
            self.append_batch = self._timed(types.MethodType(batch_py, self))  # type: ignore[method-assign,assignment]
            return None
        config = self.config
        clock = None if config.now_ms is wall_clock_ms else config.now_ms
        single, batch = types.MethodType(MessageStore.append, self), types.MethodType(MessageStore.append_batch, self)
        appender = _APPENDER(self.commitlog, self.queue_offsets, self.consume_queues, single, batch, clock,
                             config.max_message_size)  # fmt: skip
        self.append = appender.append  # type: ignore[method-assign,assignment]
        self.append_batch = appender.append_batch  # type: ignore[method-assign,assignment]
        return appender

    @property
    def config(self) -> StoreConfig:
        return self._config

    @config.setter
    def config(self, config: StoreConfig) -> None:
        """A new config (tests swap in a virtual clock) also rebinds the C append path to its clock and limits. The
        keys of messages stored while ``messageIndexEnable`` was on are written before it goes off."""
        if self._index_behind and not config.message_index_enable:
            self._drain_index()
        self._config = config
        self._memory_limit = in_memory_limit(config.access_message_in_memory_max_ratio)
        self._appender = self._bind_appender()
        self._mirror()

    def _mirror(self) -> None:
        """Copy what the C append path checks into it (see the module docstring), and note whether new keys are
        indexed: ``messageIndexEnable`` gates only that (DefaultMessageStore.java CommitLogDispatcherBuildIndex)."""
        self._indexer = self._index if self._config.message_index_enable else None
        appender = self._appender
        if appender is not None:
            appender.on_slow = self._held_too_long
            appender.on_append = None if self._on_append is None else self.announce_append
            appender.busy_limit_ns = self._config.os_page_cache_busy_time_out_mills * 1_000_000
            appender.writable = self._write_refusal() is None
            appender.listener = self._arrival_listener
            appender.indexer = self._index_one if self._indexer is not None else None
            appender.batch_notifier = self._notify_packed if self._notified() else None

    def _timed(self, append: Callable[[_A], AppendResult]) -> Callable[[_A], AppendResult]:
        """``append`` timed as the C path times it (the pure-Python build, a subclass's own appends):
        :meth:`_held_too_long` after an append that held the put lock past ``osPageCacheBusyTimeOutMills``."""

        def timed(arg: _A) -> AppendResult:
            begin = time.monotonic_ns()
            try:
                result = append(arg)
            finally:
                held = time.monotonic_ns() - begin
                if held > self._config.os_page_cache_busy_time_out_mills * 1_000_000:
                    self._held_too_long(held)
            if self._on_append is not None:
                self.announce_append()
            return result

        return timed

    def call_after_next_append(self, hook: Callable[[], None] | None) -> None:
        """Call ``hook()`` once, after the next append that stores something, whichever path it takes (the C append
        or the Python one, a batch, a slave's replicated bytes: :meth:`announce_append`); ``None`` cancels. The
        SYNC_FLUSH group commit's idle round listens so (:meth:`store.services.GroupCommitService._idle_rounds`):
        one-shot, so an append pays one test while nobody listens. A store whose subclass overrides ``append``
        (DLedger's, which runs no group commit) announces through :meth:`_timed`, after an append that stored."""
        self._on_append = hook
        if self._appender is not None:  # the C path calls announce_append (its one-shot copy), which clears both
            self._appender.on_append = None if hook is None else self.announce_append

    def announce_append(self) -> None:
        """Call the hook of :meth:`call_after_next_append` (once): the Python append paths outside the C one."""
        hook = self._on_append
        if hook is not None:
            self.call_after_next_append(None)
            hook()

    def _held_too_long(self, held_ns: int) -> None:
        """An append held the put lock ``held_ns`` ns, past ``osPageCacheBusyTimeOutMills``: busy from now for the
        hold past the limit, the time Java's ``isOSPageCacheBusy`` would have answered true while it held it."""
        limit_ms = self._config.os_page_cache_busy_time_out_mills
        log.warning("[NOTIFYME]putMessage in lock cost time(ms)=%d, busy for the %d ms past the %d ms limit",
                    held_ns // 1_000_000, held_ns // 1_000_000 - limit_ms, limit_ms)  # fmt: skip
        self._busy_until = max(self._busy_until, _loop_now() + held_ns / 1e9 - limit_ms / 1000)

    def is_os_page_cache_busy(self) -> bool:
        """Whether the store is page-cache busy (DefaultMessageStore.isOSPageCacheBusy; see the module docstring):
        cheap when it is not (one attribute)."""
        until = self._busy_until
        if not until:
            return False
        if _loop_now() < until:
            return True
        self._busy_until = 0.0
        return False

    @property
    def index(self) -> IndexLike | None:
        """The index, with every stored message's keys in it (pending ones are written first): on the Trio
        thread only, or with no appends running. Loaded even with ``messageIndexEnable=false``
        (store/src/main/java/org/apache/rocketmq/store/DefaultMessageStore.java load): still queried and expired."""
        if self._index_behind:
            self._drain_index()
        return self._index

    @index.setter
    def index(self, index: IndexLike | None) -> None:
        if self._index_behind:
            self._drain_index()
        self._index = index
        self._mirror()

    @property
    def indexer(self) -> IndexLike | None:
        """:attr:`index` when new keys go into it, ``None`` with ``messageIndexEnable=false``."""
        return self.index if self._indexer is not None else None

    @property
    def arrival_listener(self) -> ArrivalListener | None:
        return self._arrival_listener

    @arrival_listener.setter
    def arrival_listener(self, listener: ArrivalListener | None) -> None:
        self._arrival_listener = listener
        self._mirror()

    @property
    def disk_full_reason(self) -> str | None:
        """Why writes are refused (SERVICE_NOT_AVAILABLE), set by the retention service above the critical ratio."""
        return self._disk_full_reason

    @disk_full_reason.setter
    def disk_full_reason(self, reason: str | None) -> None:
        self._disk_full_reason = reason
        self._mirror()

    @property
    def _closed(self) -> bool:
        """Shut down: appends are refused."""
        return self._shut

    @_closed.setter
    def _closed(self, closed: bool) -> None:
        self._shut = closed
        self._mirror()

    # ---- life cycle ----------------------------------------------------------------------------------------

    def load(self) -> None:
        """Lock the store, then recover (see :mod:`store.recovery`). Blocking. On any failure (or interrupt) what it
        took is let go again (:meth:`abandon`: the lock, the mapped files) before the error propagates, so the store
        can be loaded again in this process."""
        try:
            self.open_files()
            recover(self)
            if self.config.is_slave:
                # A slave's log starts wherever the master's first frame does: no segment is made ahead of it.
                self.replica = ReplicaLog(self)
            elif not self.commitlog.queue.files:
                # The first segment is made now rather than on the first append, warmed up when configured.
                first = self.commitlog.queue.roll(0)
                if self.config.warm_mapped_file_enable:
                    first.warm_up(self.config.flush_disk_type is FlushDiskType.SYNC_FLUSH)
        except BaseException:
            self.abandon()
            raise

    def open_files(self) -> None:
        """Lock the store and open the index and the checkpoint (the first half of :meth:`load`). Blocking."""
        self.root.mkdir(parents=True, exist_ok=True)
        self._lock = StoreLock(self.root / "lock")
        if self.index is None:
            self.index = _open_index(self.config)
        self.checkpoint = Checkpoint(self.root / "checkpoint")

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        """The store's services; cancel to shut down (flush, checkpoint, delete ``abort``, unmap). Stop the
        callers (processors) first: appends after shutdown raise ServiceNotAvailableError."""
        try:
            async with trio.open_nursery() as nursery:
                await nursery.start(self.flush_service.run)
                if self.config.flush_disk_type is FlushDiskType.SYNC_FLUSH:
                    await nursery.start(self.group_commit.run)
                await nursery.start(self.allocate_service.run)
                await nursery.start(self.retention.run)
                await nursery.start(self.ha.run)
                task_status.started()
        finally:
            self._closed = True  # refuse appends from here on, on the Trio thread, before the final flush
            with trio.CancelScope(shield=True):
                await trio.to_thread.run_sync(self.close, limiter=self.disk_limiter)

    def close(self) -> None:
        """Flush everything, write the checkpoint, delete ``abort`` (not while the disk is full), unmap and unlock.
        Idempotent; blocking."""
        self._closed = True
        if self._released or self.checkpoint is None:
            return
        # Kept after a failed sync or a stop with the disk full (DefaultMessageStore.shutdown deletes it only while
        # RunningFlags.isWriteable, which a full disk clears): the next start recovers as after a crash.
        if self.flush_all_blocking() and self._disk_full_reason is None:
            delete_abort_file(self.root)
        self.abandon()

    def abandon(self) -> None:
        """Unmap and unlock without flushing, checkpointing or deleting ``abort``. Tests use it to simulate a crash:
        written data stays in the page cache, exactly what a SIGKILL leaves behind."""
        self._closed = self._released = True
        self.commitlog.close()
        for cq in self.consume_queues.values():
            cq.close()
        self._index_pending.clear()  # keys not yet indexed die with the process; recovery re-dispatches them
        if self._index is not None:
            self._index.close()
        if self.checkpoint is not None:
            self.checkpoint.close()
        if self._lock is not None:
            self._lock.release()

    @property
    def confirmed_offset(self) -> int:
        """The CommitLog end up to which appends are final (here: everything appended; in DLedger mode what a
        majority holds). Services that advance a progress offset past their own appends publish only progress whose
        appends end at or below it."""
        return self.commitlog.max_offset

    def dispatch_behind_bytes(self) -> int:
        """RocketMQ's ``dispatchBehindBytes``: CommitLog bytes below its end not yet dispatched into the ConsumeQueues
        and the index. 0 on a master (its appends dispatch in the same call); a slave's replicated bytes its
        dispatcher has not reached."""
        return 0 if self.replica is None else self.commitlog.max_offset - self.replica.dispatched

    def flush_plan(self) -> FlushPlan:
        """On the Trio thread, between appends: the CommitLog end whose records are all dispatched, and the dirty
        segments. Taking it here (not in the flush thread) keeps the checkpoint from covering a half-dispatched
        append."""
        if self._index_behind:
            self._drain_index()  # the checkpoint must not cover a message whose keys are not in the index
        files = self.commitlog.queue.flush_snapshot()
        for cq in self.consume_queues.values():
            files.extend(cq.queue.flush_snapshot())
        # A slave's log may end inside a record: only the dispatched part is a checkpoint.
        end = self.commitlog.max_offset if self.replica is None else self.replica.dispatched
        if self._unindexed_from is not None:  # keys the index could not take: recovery indexes them after a crash
            end = min(end, self._unindexed_from)
        return end, self.commitlog.last_store_timestamp, files

    def commit_log_flush_snapshot(self) -> list[MappedFile]:
        """The CommitLog segments with unsynced bytes, in order, for the periodic CommitLog flush
        (:class:`~store.services.FlushService`)."""
        return self.commitlog.queue.flush_snapshot()

    def queue_flush_snapshots(self) -> list[list[MappedFile]]:
        """Each ConsumeQueue's segments with unsynced bytes, in order, one list per queue that has any, for the
        periodic ConsumeQueue flush."""
        return [files for cq in self.consume_queues.values() if (files := cq.queue.flush_snapshot())]

    def flush_planned(self, plan: FlushPlan) -> bool:
        """Flush the planned segments and the index, then advance the checkpoint to the plan's end (blocking; run
        under ``disk_lock`` in a worker thread). ``False`` when the disk failed a sync: logged, the checkpoint left
        where it was, the next flush tries again (MappedFile.flush catches a failed force and the flush services go
        on: store/src/main/java/org/apache/rocketmq/store/MappedFile.java)."""
        assert self.checkpoint is not None
        end, ts, files = plan
        if not flush_segments(files):
            return False
        cp = self.checkpoint
        try:
            if self._index is not None:  # not self.index: this thread must not write pending entries
                self._index.flush()
            if ts:
                cp.physic_msg_timestamp = cp.logics_msg_timestamp = cp.index_msg_timestamp = ts
            cp.safe_offset = end
            cp.flush()
        except OSError:
            if self._metadata_sync.failed():  # once per streak, as flush_segments logs a failing file
                log.exception("Error occurred when force data to disk: the index or the checkpoint")
            return False
        if self._metadata_sync.succeeded():
            log.warning("force data to disk of the index and the checkpoint succeeded again")
        return True

    def flush_all_blocking(self) -> bool:
        """Plan and flush in one go, for callers with no concurrent appends (shutdown, tests); ``False`` when the
        disk failed a sync (logged)."""
        return self.flush_planned(self.flush_plan())

    def _on_roll(self) -> None:
        self.allocate_service.wake()

    # ---- writes --------------------------------------------------------------------------------------------

    def _write_refusal(self) -> str | None:
        """Why appends are refused (SERVICE_NOT_AVAILABLE), or ``None``."""
        if self._shut:
            return "message store is shut down"
        if self._config.broker_role is BrokerRole.SLAVE:
            return "broker role is slave, so putMessage is forbidden"
        return self._disk_full_reason

    def check_writable(self) -> None:
        """Raise :class:`ServiceNotAvailableError` when the store takes no appends for its state (shut down, slave,
        disk full), as DefaultMessageStore.checkStoreStatus, which putMessages runs before any check of the messages
        (store/src/main/java/org/apache/rocketmq/store/DefaultMessageStore.java)."""
        self._check_writable()

    def _check_writable(self) -> None:
        reason = self._write_refusal()
        if reason is not None:
            raise ServiceNotAvailableError(reason)

    def _queue_with_room(self, topic: str, queue_id: int, first: int, count: int) -> tuple[ConsumeQueue, Room | None]:
        """The queue's ConsumeQueue with the files for entries ``first`` .. ``first + count - 1`` made
        (:meth:`ConsumeQueue.make_room`), before their records go to the CommitLog; the caller gives the room back
        (:func:`_give_back`) when it does not write them after all. A file that cannot be made refuses the put with
        :class:`CreateMappedFileError` and nothing written: a record without its entry would leave a hole in the
        queue, and its recovery ends the queue at the first hole (ConsumeQueue.recover), losing every later message."""
        cq = self.consume_queues.get((topic, queue_id)) or self.consume_queue(topic, queue_id)
        try:
            return cq, cq.make_room(first, count)
        except OSError as exc:
            raise CreateMappedFileError(f"create consume queue file failed, server is busy or broken: {exc}") from exc

    def _prepare(self, msg: MessageRecord) -> PreparedMessage:
        if len(msg.body) > self.config.max_message_size:
            raise MessageIllegalError(f"message body {len(msg.body)} bytes exceeds {self.config.max_message_size}")
        try:
            return prepare_message(msg)
        except MessageEncodeError as exc:
            raise put_refusal(exc) from exc

    def _tags_code(self, prepared: PreparedMessage, queue_id: int, store_ts: int) -> int:
        props = prepared.properties
        if prepared.message.topic == SCHEDULE_TOPIC:
            level = find_property(props, b"DELAY")
            try:
                delay = self._delay_levels.get(int(level) if level else queue_id + 1, 0)
            except ValueError:
                delay = 0
            return store_ts + delay
        return tags_code_of_raw(props)

    def _dispatch(self, topic: str, queue_id: int, sys_flag: int, queue_offset: int, phy: int, size: int,
                  properties: bytes, tags_code: int, store_ts: int,
                  index: IndexRuns | None = None) -> None:  # fmt: skip
        tx = sys_flag & SYSFLAG_TRANSACTION_MASK
        if tx != SYSFLAG_TRANSACTION_PREPARED and tx != SYSFLAG_TRANSACTION_ROLLBACK:
            cq = self.consume_queues.get((topic, queue_id)) or self.consume_queue(topic, queue_id)
            cq.put(queue_offset, phy, size, tags_code)
        indexer = self._indexer
        if indexer is not None and tx != SYSFLAG_TRANSACTION_ROLLBACK:
            keys = index_keys_of_raw(properties)
            if keys:
                if self._index_behind:
                    self._drain_index()  # offsets in order: the index skips a put below its newest offset
                if index is not None:  # recovery's and a replica's runs: their failures are theirs
                    index.put(topic, keys, phy, store_ts)
                else:
                    self._guard_index(phy, lambda: indexer.put(topic, keys, phy, store_ts))

    def append(self, msg: MessageRecord) -> AppendResult:
        """Append one message (no flush wait). Raises PutRefusedError subclasses; nothing is written then."""
        if self._closed or self.disk_full_reason is not None or self._config.is_slave:
            self._check_writable()
        topic = msg.topic
        if topic == SCHEDULE_TOPIC:
            return self._append_scheduled(msg)
        multi = None
        if self._config.enable_multi_dispatch:
            wrapped = self.multi_dispatch.wrap(msg)
            if wrapped is not None:
                msg, multi = wrapped
            else:  # not stamped: no sender's INNER_MULTI_QUEUE_OFFSET stored either (a blank list)
                msg = unstamp(msg)
        # Fields read once, before the clock runs (it is Python code): what is indexed, announced and returned is
        # what the record holds even if a frozen field is rebound meanwhile.
        queue_id, properties, store_host = msg.queue_id, msg.properties, msg.store_host
        key = (topic, queue_id)
        tx = msg.sys_flag & SYSFLAG_TRANSACTION_MASK
        has_entry = tx != SYSFLAG_TRANSACTION_PREPARED and tx != SYSFLAG_TRANSACTION_ROLLBACK
        queue_offset = self.queue_offsets.get(key, 0) if has_entry else 0
        cq, room = self._queue_with_room(topic, queue_id, queue_offset, 1) if has_entry else (None, None)
        try:
            phy, size, tags, store_ts = self.commitlog.append_with(
                encode_record_into, queue_offset, self.config.now_ms, self.config.max_message_size, msg)  # fmt: skip
        except BaseException as exc:
            _give_back(room)
            if isinstance(exc, MessageEncodeError):
                raise put_refusal(exc) from exc
            raise
        if cq is not None:
            self.queue_offsets[cq.key] = queue_offset + 1
            cq.put(queue_offset, phy, size, tags)
            if multi is not None:
                self.multi_dispatch.dispatch(multi, phy, size, tags, properties)
        if self._indexer is not None and tx != SYSFLAG_TRANSACTION_ROLLBACK:
            self._index_one(topic, properties, phy, store_ts)
        if has_entry and self._arrival_listener is not None:
            self._arrival_listener(topic, queue_id, queue_offset, tags, properties)
        return AppendResult(phy, size, queue_offset, store_ts, None, store_host)

    def _notified(self) -> bool:
        """Whether an append must tell the index or the arrival listener about each message."""
        return self._indexer is not None or self._arrival_listener is not None

    def _index_one(self, topic: str, properties: str, phy: int, store_ts: int) -> None:
        """Note one stored message for the index (by its ``KEYS`` and ``UNIQ_KEY``; the index is set). The keys are
        written ``INDEX_BATCH`` messages at a time, a run of one topic and store time per ``put_batch`` (one hash
        call and one header rewrite per run), and before anything reads the index (:attr:`index`) or a flush is
        planned: off the single send's path, as Java's index is built by its dispatcher, with the same bytes."""
        pending = self._index_pending
        pending.append((topic, properties, phy, store_ts))
        if len(pending) >= INDEX_BATCH:
            self._drain_index()

    @property
    def _index_behind(self) -> bool:
        """Whether stored messages' keys wait for the index: pending, or missing since a write failed."""
        return bool(self._index_pending) or self._unindexed_from is not None

    def _drain_index(self) -> None:
        """Write the pending keys, or those missing since an index write failed (:meth:`_catch_up_index`, which
        covers the pending ones: they are in the CommitLog too)."""
        pending, self._index_pending = self._index_pending, []
        index = self._indexer
        if index is None:
            self._unindexed_from = None  # RocketMQ's dispatch, retrying, indexes nothing once the index is off
        elif self._unindexed_from is not None:
            self._catch_up_index(index, self._unindexed_from)
        elif pending:
            self._guard_index(pending[0][2], lambda: self._write_pending(index, pending))

    def _write_pending(self, index: IndexLike, pending: list[tuple[str, str, int, int]]) -> None:
        done = self._index_scanned(index, pending) if SCAN_NATIVE else 0
        if done < len(pending):
            self._write_index(index, pending[done:] if done else pending)

    def _guard_index(self, first_phy: int, write: Callable[[], object]) -> None:
        """Run ``write``, an index write for stored messages from ``first_phy`` on; skipped while keys are missing
        (:meth:`_catch_up_index` reads them from the CommitLog). One that fails (an index file that cannot be made:
        EMFILE, ENOSPC) is logged and never fails the append, whose messages are stored: RocketMQ builds the index
        after the put is answered and tries the message again until its keys go in
        (store/src/main/java/org/apache/rocketmq/store/DefaultMessageStore.java ``ReputMessageService.doReput``;
        ``IndexService.getAndCreateLastIndexFile`` throws)."""
        if self._unindexed_from is not None:
            return
        try:
            write()
        except Exception as exc:
            self._index_failed(first_phy, exc)

    def _index_failed(self, first_phy: int, exc: Exception) -> None:
        """Note the keys missing: from ``first_phy``, or from the message of the index's newest entry when the
        failed write got past it (its other keys may be missing)."""
        index = self._index
        newest = 0 if index is None else index.last_update_phy_offset
        if self._unindexed_from is None:
            log.error("index: the keys of the messages from CommitLog offset %d on cannot be written (%s); they are "
                      "indexed once they can", max(first_phy, newest), exc)  # fmt: skip
        self._unindexed_from = max(first_phy, newest)

    def _catch_up_index(self, index: IndexLike, start: int) -> None:
        """Index the keys of the records from ``start`` (:meth:`_index_failed`) on, read from the CommitLog, the index
        first cut back to ``start`` so that no message is indexed twice or in part: at most
        :data:`INDEX_CATCH_UP_RECORDS` keyed records a call, the next drain going on from the record after them (the
        index is incomplete meanwhile, as RocketMQ's while its dispatch is behind). Still failing, it is tried again
        at the next drain (logged once, when the keys first went missing)."""
        resume = None
        try:
            index.truncate_after(start)
            runs = IndexRuns(index)
            limit = INDEX_CATCH_UP_RECORDS
            for n, (topic, keys, phy, store_ts) in enumerate(keyed_records(self, start, self.commitlog.max_offset)):
                if n == limit:
                    resume = phy
                    break
                runs.put(topic, keys, phy, store_ts)
            runs.flush()
        except Exception as exc:
            self._index_failed(start, exc)
            return
        self._unindexed_from = resume
        if resume is None:
            log.warning("index: the keys of the messages missing are indexed again (the last run from CommitLog "
                        "offset %d)", start)  # fmt: skip

    def _index_scanned(self, index: IndexLike, pending: list[tuple[str, str, int, int]]) -> int:
        """Index the records of ``pending`` (offsets increasing) through the record scan, segment by segment (keys
        hashed in C, :meth:`IndexService.put_hashed`); how many, from the first, it took. A segment's scan counts
        only when the records it walked are exactly pending ones (no record of another path lies between them);
        it stops at the first record the scan does not take, and the caller writes the rest from their texts. The
        entries are those of :meth:`_write_index` over the same records (tests/store/test_index_deferred.py)."""
        done, queue = 0, self.commitlog.queue
        while done < len(pending):
            first = pending[done][2]
            segment = queue.find(first)
            if segment is None:
                break
            base = segment.file_from_offset
            stop = base + segment.wrote_position
            last = done
            while last + 1 < len(pending) and pending[last + 1][2] < stop:
                last += 1
            at = pending[last][2] - base
            limit = at + _SIZE.unpack_from(segment.view, at)[0]
            end, count, _ts, _cq, runs = scan_records(segment.view, first - base, limit, base, True)
            taken, end = done + count, base + end
            if (
                not count
                or taken > len(pending)
                or pending[taken - 1][2] >= end
                or (taken < len(pending) and pending[taken][2] < end)
            ):
                break  # the first is not plain, or another path's record lies among them: their texts
            for run_ts, hashed in runs:
                index.put_hashed(hashed, run_ts)
            done = taken
            if taken <= last:
                break
        return done

    @staticmethod
    def _write_index(index: IndexLike, pending: list[tuple[str, str, int, int]]) -> None:
        runs = IndexRuns(index)
        for topic, properties, phy, store_ts in pending:
            keys = index_keys_of_raw(properties.encode())
            if keys:
                runs.put(topic, keys, phy, store_ts)
        runs.flush()

    def _append_scheduled(self, msg: MessageRecord) -> AppendResult:
        """:meth:`append` for ``SCHEDULE_TOPIC_XXXX``, whose tags code is the delivery time (the Python encoder)."""
        prepared = self._prepare(msg)
        size = prepared.size
        commitlog = self.commitlog
        if size + 8 > commitlog.file_size:
            commitlog.check_fits(size)
        topic, queue_id = msg.topic, msg.queue_id
        key = (topic, queue_id)
        tx = prepared.sys_flag & SYSFLAG_TRANSACTION_MASK
        has_entry = tx != SYSFLAG_TRANSACTION_PREPARED and tx != SYSFLAG_TRANSACTION_ROLLBACK
        queue_offset = self.queue_offsets.get(key, 0) if has_entry else 0
        store_ts = self.config.now_ms()
        cq, room = self._queue_with_room(topic, queue_id, queue_offset, 1) if has_entry else (None, None)
        try:
            phy = commitlog.append(prepared, queue_offset, store_ts)
        except BaseException:
            _give_back(room)
            raise
        if cq is not None:
            self.queue_offsets[cq.key] = queue_offset + 1
        tags = self._tags_code(prepared, queue_id, store_ts)
        self._dispatch(topic, queue_id, prepared.sys_flag, queue_offset, phy, size, prepared.properties, tags, store_ts)
        if has_entry and self.arrival_listener is not None:
            self.arrival_listener(topic, queue_id, queue_offset, tags, msg.properties)
        return AppendResult(phy, size, queue_offset, store_ts, None, msg.store_host)

    def append_batch(self, msgs: Sequence[MessageRecord]) -> AppendResult:
        """Append messages of one topic and queue contiguously, with consecutive queue offsets.

        Dispatched as a whole: one ConsumeQueue write for the batch, then the index and arrival listener per message
        (each record is stored before any listener runs)."""
        if self._closed or self.disk_full_reason is not None or self._config.is_slave:
            self._check_writable()
        if not msgs:
            raise MessageIllegalError("empty batch")
        if self._config.enable_multi_dispatch:  # a batch is not stamped: store no sender's INNER_MULTI_QUEUE_OFFSET
            msgs = [unstamp(m) for m in msgs]
        head = msgs[0]
        topic, queue_id = head.topic, head.queue_id
        if topic != SCHEDULE_TOPIC:
            first = self.queue_offsets.get((topic, queue_id), 0)
            config = self.config
            # Read before the clock runs (Python code that may rebind fields or empty the list), as append does.
            texts = [m.properties for m in msgs] if self._notified() else None
            store_host = head.store_host
            cq, room = self._queue_with_room(topic, queue_id, first, len(msgs))
            try:
                written = self.commitlog.append_with(encode_records_into, first, config.now_ms,
                                                     config.max_message_size, msgs)  # fmt: skip
            except BaseException as exc:
                _give_back(room)
                if isinstance(exc, MessageEncodeError):
                    raise put_refusal(exc) from exc
                raise
            return self._dispatch_packed(cq, first, written, texts, store_host)
        if any(m.topic != topic or m.queue_id != queue_id for m in msgs):
            raise MessageIllegalError("a batch must target one topic and queue")
        return self._append_prepared(topic, queue_id, [self._prepare(m) for m in msgs], head.store_host)

    def append_entries(self, template: MessageRecord, entries: Sequence[tuple[bytes, str, int]]) -> AppendResult:
        """:meth:`append_batch` of one message per ``(body, properties, flag)`` entry, every other field taken from
        ``template`` (the broker's batch send: no :class:`MessageRecord` per message). Same records, same errors.
        Announced as the bound appends are (:meth:`announce_append`): a ``WAIT=false`` batch is synced by the
        SYNC_FLUSH group commit's idle ``flush(0)`` too (store/src/main/java/org/apache/rocketmq/store/
        CommitLog.java, GroupCommitService.doCommit)."""
        # Timed as the C path and _timed time the other appends: putMessages' lock counts for osPageCacheBusy too
        # (store/src/main/java/org/apache/rocketmq/store/CommitLog.java asyncPutMessages sets beginTimeInLock).
        begin = time.monotonic_ns()
        try:
            result = self._append_entries(template, entries)
        finally:
            held = time.monotonic_ns() - begin
            if held > self._config.os_page_cache_busy_time_out_mills * 1_000_000:
                self._held_too_long(held)
        if self._on_append is not None:
            self.announce_append()
        return result

    def _append_entries(self, template: MessageRecord, entries: Sequence[tuple[bytes, str, int]]) -> AppendResult:
        if self._closed or self.disk_full_reason is not None or self._config.is_slave:
            self._check_writable()
        if not entries:
            raise MessageIllegalError("empty batch")
        if self._config.enable_multi_dispatch:  # as append_batch
            entries = [(body, unstamped(props), flag) for body, props, flag in entries]
        topic, queue_id = template.topic, template.queue_id
        if topic != SCHEDULE_TOPIC:
            first = self.queue_offsets.get((topic, queue_id), 0)
            config = self.config
            texts = [e[1] for e in entries] if self._notified() else None  # before the clock, as append_batch
            cq, room = self._queue_with_room(topic, queue_id, first, len(entries))
            try:
                written = self.commitlog.append_with(encode_entries_into, first, config.now_ms,
                                                     config.max_message_size, template, entries)  # fmt: skip
            except BaseException as exc:
                _give_back(room)
                if isinstance(exc, MessageEncodeError):
                    raise put_refusal(exc) from exc
                raise
            return self._dispatch_packed(cq, first, written, texts, template.store_host)
        try:
            prepared = prepare_batch(template, entries, self.config.max_message_size)
        except MessageEncodeError as exc:
            raise put_refusal(exc) from exc
        return self._append_prepared(topic, queue_id, prepared, template.store_host)

    def _dispatch_packed(self, cq: ConsumeQueue, first: int, written: tuple[int, int, bytes, int],
                         texts: list[str] | None, store_host: bytes) -> AppendResult:  # fmt: skip
        """Dispatch a batch :meth:`CommitLog.append_with` wrote (the caller maps its errors and made room in ``cq``
        first): its packed ConsumeQueue entries in one write, then the index keys and the arrival listener (which need
        each message's properties ``texts``) per message. The result keeps the packed entries for its
        ``phy_offsets``."""
        phy, total, packed, store_ts = written
        count = len(packed) // CQ_STORE_UNIT_SIZE
        self.queue_offsets[cq.key] = first + count
        cq.put_packed(first, packed)
        if texts is not None:
            self._notify_packed(cq.topic, cq.queue_id, first, packed, texts, store_ts)
        return AppendResult(phy, total, first, store_ts, packed, store_host)

    def _notify_packed(self, topic: str, queue_id: int, first: int, packed: bytes, texts: list[str],
                       store_ts: int) -> None:  # fmt: skip
        """Index a stored batch (from its written records: :meth:`_index_written`) and call the arrival listener per
        message with its properties ``texts``, unless :attr:`arrival_interest` says nothing waits on the queue; the C
        batch path calls it too when the store has an index or a listener."""
        index = self.indexer
        if index is not None:
            first_phy = ENTRY.unpack_from(packed)[0]
            self._guard_index(first_phy, lambda: self._index_written(index, topic, packed, texts, store_ts))
        listener = self._arrival_listener
        interest = self.arrival_interest
        if listener is not None and (interest is None or interest(topic, queue_id)):
            entries = ENTRY.iter_unpack(packed)
            for qoff, (text, (_phy, _size, tags)) in enumerate(zip(texts, entries, strict=True), first):
                listener(topic, queue_id, qoff, tags, text)

    def _index_written(self, index: IndexLike, topic: str, packed: bytes, texts: list[str], store_ts: int) -> None:
        """Index a batch from the records just written (``packed`` their ConsumeQueue entries, all in one segment):
        :func:`~remoting.codec.record_scan.scan_records` hashes the keys of its plain records in one call (in C)
        and :meth:`IndexService.put_hashed` writes them; from the first record the scan does not take (a
        transaction flag, a non-ASCII key or tag) on, the keys of ``texts`` go through ``put_batch``. The entries
        are those of ``put_batch`` over every message, in the same order (tests/store/test_batch_index.py)."""
        first_phy = ENTRY.unpack_from(packed)[0]
        done = 0
        segment = self.commitlog.queue.find(first_phy)
        if segment is not None:
            base = segment.file_from_offset
            last_phy, last_size, _tags = ENTRY.unpack_from(packed, len(packed) - CQ_STORE_UNIT_SIZE)
            _end, done, _ts, _cq, runs = scan_records(segment.view, first_phy - base, last_phy + last_size - base,
                                                      base, True)  # fmt: skip
            for run_ts, hashed in runs:
                index.put_hashed(hashed, run_ts)
        if done < len(texts):  # the rest from the first record the scan left: its physical offsets only now
            phys = phy_offsets_of_packed(packed)
            keyed = [(index_keys_of_raw(texts[i].encode()), phys[i]) for i in range(done, len(texts))]
            index.put_batch(topic, keyed, store_ts)

    def _append_prepared(
        self, topic: str, queue_id: int, prepared: list[PreparedMessage], store_host: bytes
    ) -> AppendResult:
        total = sum(p.size for p in prepared)
        self.commitlog.check_fits(total)
        first = self.queue_offsets.get((topic, queue_id), 0)
        store_ts = self.config.now_ms()
        cq, room = self._queue_with_room(topic, queue_id, first, len(prepared))
        try:
            phy = self.commitlog.append_batch(prepared, first, store_ts)
        except BaseException:
            _give_back(room)
            raise
        self.queue_offsets[cq.key] = first + len(prepared)
        entries = []
        pos = phy
        scheduled = topic == SCHEDULE_TOPIC
        for p in prepared:
            tags = self._tags_code(p, queue_id, store_ts) if scheduled else tags_code_of_raw(p.properties)
            entries.append((pos, p.size, tags))
            pos += p.size
        cq.put_batch(first, entries)
        index = self.indexer
        if index is not None:
            keyed = [(index_keys_of_raw(p.properties), e[0]) for p, e in zip(prepared, entries, strict=True)]
            self._guard_index(phy, lambda: index.put_batch(topic, keyed, store_ts))
        listener = self.arrival_listener
        if listener is not None:
            for qoff, (p, (_phy, _size, tags)) in enumerate(zip(prepared, entries, strict=True), first):
                listener(topic, queue_id, qoff, tags, p.text)
        return AppendResult(phy, total, first, store_ts, tuple(e[0] for e in entries), store_host)

    def append_encoded(self, phy_offset: int, data: bytes | memoryview) -> int:
        """Replica seam: append records the master encoded, at ``phy_offset`` (must be our end), dispatching each
        as the master did. Returns the new CommitLog end. Errors: OffsetMismatchError, MessageDecodeError."""
        for meta in self.commitlog.append_encoded(phy_offset, data):
            self.redispatch(meta)
        self.announce_append()
        return self.commitlog.max_offset

    def redispatch(self, meta: RecordMeta, index: IndexRuns | None = None) -> int | None:
        """Dispatch a record read back from the CommitLog (recovery, replica) into ConsumeQueue and index (through
        ``index``'s runs when given: the caller flushes them). Returns its tags code when it got a ConsumeQueue
        entry, else ``None`` (a prepared or rolled-back transaction)."""
        if meta.topic == SCHEDULE_TOPIC:
            level = find_property(meta.properties, b"DELAY")
            number = int(level) if level and level.isdigit() else meta.queue_id + 1
            tags = meta.store_timestamp + self._delay_levels.get(number, 0)
        else:
            raw = find_property(meta.properties, b"TAGS")
            tags = tags_code(raw.decode("utf-8", "replace") if raw else None)
        self._dispatch(meta.topic, meta.queue_id, meta.sys_flag, meta.queue_offset, meta.phy_offset, meta.size,
                       meta.properties, tags, meta.store_timestamp, index)  # fmt: skip
        tx = meta.sys_flag & SYSFLAG_TRANSACTION_MASK
        if tx not in (SYSFLAG_TRANSACTION_PREPARED, SYSFLAG_TRANSACTION_ROLLBACK):
            cq = self.consume_queue(meta.topic, meta.queue_id)  # its end, not the record's claim (ConsumeQueue.put)
            if cq.max_offset > self.queue_offsets.get(cq.key, 0):
                self.queue_offsets[cq.key] = cq.max_offset
            # Not a record of a topic whose append stamps nothing (topic_allows_lmq): a SCHEDULE_TOPIC_XXXX one a
            # send-back copied from a stored LMQ message holds that message's offsets.
            if self._config.enable_multi_dispatch and topic_allows_lmq(meta.topic):
                self.multi_dispatch.redispatch(meta.properties, meta.queue_id, meta.phy_offset, meta.size, tags)
            return tags
        return None

    def redispatch_run(self, topic: str, queue_id: int, first: int, packed: bytes) -> None:
        """A replica's run of records of one queue (:mod:`remoting.codec.record_scan`): their ConsumeQueue entries
        ``first``, ``first + 1``, ... already packed, then the queue's next offset; what :meth:`redispatch` does for
        each of them (the caller writes their index entries)."""
        cq = self.consume_queues.get((topic, queue_id)) or self.consume_queue(topic, queue_id)
        cq.put_packed(first, packed)
        if cq.max_offset > self.queue_offsets.get(cq.key, 0):
            self.queue_offsets[cq.key] = cq.max_offset

    def dispatch_scanned(self, view: memoryview, base: int, scan: Scan) -> None:
        """Dispatch what :func:`~remoting.codec.record_scan.scan_records` found in ``view`` (the mapping the records
        lie in, ``base`` its CommitLog offset): each run's ConsumeQueue entries (:meth:`redispatch_run`), the index
        entries, the last store time, and the arrival listener for the records whose queue a pull waits on (a
        replica's dispatch, a DLedger member's)."""
        _end, _count, last_ts, cq_runs, index_runs = scan
        for topic, queue_id, first, packed in cq_runs:
            self.redispatch_run(topic, queue_id, first, packed)
        index = self.indexer
        if index is not None:
            for store_ts, hashed in index_runs:
                index.put_hashed(hashed, store_ts)
        if cq_runs:
            self.commitlog.last_store_timestamp = last_ts
            self._notify_runs(view, base, cq_runs)

    def _notify_runs(self, view: memoryview, base: int, cq_runs: list[CqRun]) -> None:
        listener = self._arrival_listener
        if listener is None:
            return
        interest = self.arrival_interest
        for topic, queue_id, first, packed in cq_runs:
            if interest is not None and not interest(topic, queue_id):
                continue
            for qoff, (phy, _size, tags) in enumerate(CQ_RUN.iter_unpack(packed), first):
                properties = read_record_meta(view, phy - base).properties
                listener(topic, queue_id, qoff, tags, properties.decode("utf-8", "replace"))

    async def put(self, msg: MessageRecord, *, wait_flush: bool = True) -> PutResult:
        """:meth:`append`, then the waits of :mod:`store.put_waits` (SYNC_FLUSH, SYNC_MASTER) when ``wait_flush``
        (the message's ``WAIT``)."""
        result = self.append(msg)
        return PutResult(await self.put_waits.status(result.end_offset, wait_flush), result)

    async def put_batch(self, msgs: Sequence[MessageRecord], *, wait_flush: bool = True) -> PutResult:
        result = self.append_batch(msgs)
        return PutResult(await self.put_waits.status(result.end_offset, wait_flush), result)

    def waits_for_put(self, wait: bool) -> bool:
        """Whether a put with this ``WAIT`` setting waits for anything (:mod:`store.put_waits`): SYNC_FLUSH or
        SYNC_MASTER, and ``WAIT`` true."""
        config = self._config
        return wait and (
            config.flush_disk_type is FlushDiskType.SYNC_FLUSH or config.broker_role is BrokerRole.SYNC_MASTER
        )

    def waits_for_flush(self, wait_flush: bool) -> bool:
        """Whether a put with this ``WAIT`` setting waits for the group commit (SYNC_FLUSH and ``WAIT`` true)."""
        return wait_flush and self.config.flush_disk_type is FlushDiskType.SYNC_FLUSH

    async def flush_status(self, end_offset: int, wait_flush: bool) -> PutStatus:
        """PUT_OK once the bytes below ``end_offset`` are synced (at once unless :meth:`waits_for_flush`), or
        FLUSH_DISK_TIMEOUT after ``syncFlushTimeout``. The second half of :meth:`put`, for callers that append first
        and wait elsewhere."""
        if not self.waits_for_flush(wait_flush):
            return PutStatus.PUT_OK
        flushed = await self.group_commit.wait_flushed(end_offset, self.config.sync_flush_timeout / 1000)
        return PutStatus.PUT_OK if flushed else PutStatus.FLUSH_DISK_TIMEOUT

    def notify_flushed(self, end_offset: int, callback: Callable[[bool], None]) -> bool:
        """:meth:`flush_status` as a callback, for a put that :meth:`waits_for_flush`: ``callback(True)`` (PUT_OK)
        once the bytes below ``end_offset`` are synced, ``callback(False)`` (FLUSH_DISK_TIMEOUT) after
        ``syncFlushTimeout`` or when the store stops, run on the Trio thread. ``False`` (nothing registered) when the
        group commit is not running: await :meth:`flush_status` instead."""
        return self.group_commit.notify_flushed(end_offset, self.config.sync_flush_timeout / 1000, callback)

    # ---- topics ------------------------------------------------------------------------------------------

    async def delete_topic(self, topic: str, in_use: Callable[[str], bool] | None = None) -> int:
        """Destroy the topic's ConsumeQueues and next offsets (DELETE_TOPIC_IN_BROKER) unless ``in_use`` finds it in
        use again once the disk lock is held: :func:`~store.topic_cleanup.delete_topic_queues`."""
        return await delete_topic_queues(self, topic, in_use)

    def notify_queue_dropped(self, topic: str, queue_id: int) -> None:
        """Tell the :attr:`queue_drop_listeners` that the queue's ConsumeQueue is gone."""
        for listener in self.queue_drop_listeners:
            listener(topic, queue_id)

    def runtime_entries(self) -> dict[str, str]:
        """Extra GET_BROKER_RUNTIME_INFO keys of a store kind (none here; the DLedger store's Raft state)."""
        return {}


def _native_appender() -> type[Appender] | None:
    """store._appender's ``Appender`` when the C extensions are in use (not built, or ``ROCKETRIO_PURE_PYTHON=1``:
    None)."""
    if not NATIVE:
        return None
    try:
        from store._appender import Appender
    except ImportError:
        return None
    return Appender


_APPENDER: Final = _native_appender()


def _give_back(room: Room | None) -> None:
    """The ConsumeQueue files made for a put that was not written after all (:meth:`Room.give_back`) go again."""
    if room is not None:
        room.give_back()


def _loop_now() -> float:
    """The Trio clock (virtual under a test clock), or the monotonic clock outside a Trio run."""
    try:
        return trio.current_time()
    except RuntimeError:
        return time.monotonic()


def put_refusal(exc: MessageEncodeError) -> PutRefusedError:
    """The store's refusal for an encoder error: PROPERTIES_SIZE_EXCEEDED for oversized properties, MESSAGE_ILLEGAL
    for the rest (an oversized body, a bad topic or host, a mixed batch)."""
    if isinstance(exc, PropertiesTooLongError):
        return PropertiesSizeExceededError(str(exc))
    return MessageIllegalError(str(exc))


def _open_index(config: StoreConfig) -> IndexLike:
    """Open the key index; files it cannot use are deleted, the others kept, and recovery indexes what the deleted
    ones covered again (:func:`~store.recovery.refill_index`)."""
    index = IndexService(config.store_path_root_dir, config.max_hash_slot_num, config.max_index_num)
    index.load()
    return index
