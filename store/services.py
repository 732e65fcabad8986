"""The store's background services, each a Trio task started with ``nursery.start`` and stopped by cancellation:

* :class:`FlushService`: the periodic flushes, as RocketMQ 4.9.8's FlushRealTimeService (the CommitLog every
  ``flush_interval_commit_log``, or at each append when not ``flush_commit_log_timed``, once
  ``flush_commit_log_least_pages`` pages are unsynced, everything every
  ``flush_commit_log_thorough_interval``) and FlushConsumeQueueService (the ConsumeQueues the same with their own
  settings; its thorough round syncs everything and writes the checkpoint). It also runs under SYNC_FLUSH to keep the
  queues and checkpoint moving.
* :class:`GroupCommitService`: SYNC_FLUSH. Producers register the offset they need durable; one ``fdatasync`` (on the
  service's own :class:`_SyncThread`) covers every waiter whose offset it reaches, and one release pass answers them
  (pass listeners then flush what the callbacks held back). Waiters that arrive during a sync are covered by the
  next one, which the thread starts as soon as that sync ends, while the Trio task answers. Bytes no waiter covers
  (``WAIT=false`` sends, the broker's own writes) are synced within 10 ms of their append, as Java's idle
  ``flush(0)``.
* :class:`AllocateService`: prepares (and optionally warms up) the next CommitLog segment after each roll, so appends
  rarely create files themselves.
* :class:`RetentionService`: a minute after the start, then every ``clean_resource_interval`` at a fixed rate, deletes
  expired segments at ``delete_when`` or when the disk is fuller than ``disk_max_used_space_ratio`` (clamped to
  10..95), young ones too above ``disk_space_clean_forcibly_ratio`` when ``clean_file_forcibly_enable``, and refuses
  writes above ``disk_space_warning_level_ratio`` (checked every 10 s from 1 s after the start, as well as by each
  pass) until a check finds the disk at or below it, or a pass at or below the forcible ratio.
  A segment goes only once the checkpoint covers it (a flush first when it does not yet), so recovery never starts
  past the checkpoint. Then the ConsumeQueue files below the CommitLog's minimum,
  ``delete_consume_queue_files_interval`` apart.

Blocking disk work runs in ``trio.to_thread.run_sync`` with the store's own limiter (the group commit's syncs on its
own thread instead), under the store's ``disk_lock`` so that a flush never races the deletion of the same segment;
retention takes the files it deletes out of their log under that lock and unmaps and unlinks them after it.
"""

from __future__ import annotations

import collections
import datetime
import functools
import logging
import math
import os
import sys
import threading
from collections.abc import Awaitable, Callable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Final

import trio

from remoting.codec.message_properties import java_parse_long
from store.mapped_file import (
    PAGE_SIZE,
    Destroyable,
    MappedFile,
    MappedFileQueue,
    destroy_segments,
    flush_segments,
    segment_name,
)
from store.store_config import FlushDiskType

if TYPE_CHECKING:
    from store.index_file import IndexFile
    from store.message_store import MessageStore

log = logging.getLogger(__name__)


def _flush_files(files: list[MappedFile]) -> bool:
    """Sync ``files``; ``False`` when one failed (logged, :func:`~store.mapped_file.flush_segments`)."""
    return flush_segments(files)


def able_to_flush(mf: MappedFile, least_pages: int) -> bool:
    """Whether a periodic round syncs ``mf`` (RocketMQ's ``MappedFile.isAbleToFlush``): it is full and not yet
    synced, or ``least_pages`` 4 KiB pages of it are unsynced (counted by page number, as Java does), or anything is
    unsynced when ``least_pages`` is 0."""
    wrote, flushed = mf.wrote_position, mf.flushed_position
    if wrote <= flushed:
        return False
    if wrote >= mf.file_size or least_pages <= 0:
        return True
    return wrote // PAGE_SIZE - flushed // PAGE_SIZE >= least_pages


def due_segments(dirty: list[MappedFile], least_pages: int) -> list[MappedFile]:
    """The leading segments of one log's unsynced ones (``flush_snapshot``, in order) a round syncs: up to the
    first that is not :func:`able_to_flush`, so a log's unsynced segments stay a suffix."""
    due = []
    for mf in dirty:
        if not able_to_flush(mf, least_pages):
            break
        due.append(mf)
    return due


class _Thorough:
    """When a round ignores its least pages: at least ``interval_ms`` after the last such round, the first round
    included (Java's ``lastFlushTimestamp`` starts at 0). Timed by the Trio clock."""

    def __init__(self) -> None:
        self._last = -math.inf

    def due(self, interval_ms: int) -> bool:
        now = trio.current_time()
        if now >= self._last + interval_ms / 1000:
            self._last = now
            return True
        return False


class FlushService:
    """The periodic flush, two loops as RocketMQ 4.9.8's two services (each reads its settings at every round, so
    UPDATE_BROKER_CONFIG applies at the next one):

    * the CommitLog's (``CommitLog.FlushRealTimeService``): every ``flushIntervalCommitLog`` ms it syncs the
      segments with ``flushCommitLogLeastPages`` (4) unsynced pages or full, and every unsynced byte when
      ``flushCommitLogThoroughInterval`` (10 s) has passed since its last thorough round. With
      ``flushCommitLogTimed=false`` a round starts at each append instead (at the latest after the interval:
      :class:`_AppendSignal`), so segments are synced as soon as appends make the least pages. Under SYNC_FLUSH (no
      FlushRealTimeService in Java) it syncs whatever is unsynced, a backstop only: the group commit's 10 ms idle
      round (:meth:`GroupCommitService._idle_rounds`, Java's idle ``flush(0)``) syncs those bytes first.
    * the ConsumeQueues' (``DefaultMessageStore.FlushConsumeQueueService``): every ``flushIntervalConsumeQueue`` ms
      the queue segments with ``flushConsumeQueueLeastPages`` (2) unsynced pages; its thorough round
      (``flushConsumeQueueThoroughInterval``, 60 s: Java writes the checkpoint only then) is :meth:`flush_locked`,
      everything (CommitLog, queues, index) then the checkpoint.

    A store shut down cleanly syncs everything whatever the least pages (``MessageStore.close``). What a power loss
    may take under ASYNC_FLUSH is therefore the CommitLog's unsynced tail (under 4 pages for up to 10 s, or up to
    500 ms of more); a killed process loses nothing (the page cache keeps it) and its recovery scans from the last
    checkpoint. A failed sync is logged (``flush_segments``) and tried again by a later round."""

    def __init__(self, store: MessageStore) -> None:
        self._store = store
        #: Rounds that synced something, of either loop.
        self.rounds = 0
        #: Thorough ConsumeQueue rounds that wrote the checkpoint.
        self.checkpoints = 0
        self._commit_log_thorough = _Thorough()
        self._queue_thorough = _Thorough()

    async def flush_once(self) -> None:
        async with self._store.disk_lock:
            await self.flush_locked()

    async def flush_locked(self) -> None:
        """Flush the CommitLog, the ConsumeQueues and the index, then advance the checkpoint to what they cover; the
        caller holds the store's disk lock (:meth:`flush_once`, the thorough ConsumeQueue round, and retention before
        it deletes past the checkpoint)."""
        store = self._store
        plan = store.flush_plan()
        await trio.to_thread.run_sync(store.flush_planned, plan, limiter=store.disk_limiter)
        self.rounds += 1
        self.checkpoints += 1

    async def _sync(self, files: Callable[[], list[MappedFile]]) -> None:
        """Sync the segments ``files()`` names, taken under the disk lock, in a worker thread; nothing when none."""
        store = self._store
        async with store.disk_lock:
            due = files()
            if due:
                await trio.to_thread.run_sync(_flush_files, due, limiter=store.disk_limiter)
                self.rounds += 1

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        task_status.started()
        async with trio.open_nursery() as nursery:
            nursery.start_soon(self._commit_log_loop)
            nursery.start_soon(self._queue_loop)

    async def _commit_log_loop(self) -> None:
        store = self._store
        appended = _AppendSignal(store)
        try:
            while True:
                config = store.config
                least = config.flush_commit_log_least_pages
                if self._commit_log_thorough.due(config.flush_commit_log_thorough_interval):
                    least = 0
                sync_flush = config.flush_disk_type is FlushDiskType.SYNC_FLUSH or store.group_commit.running
                if sync_flush:
                    least = 0
                interval = config.flush_interval_commit_log / 1000
                if config.flush_commit_log_timed or sync_flush:
                    appended.disarm()
                    await trio.sleep(interval)
                else:
                    await appended.wait(interval)
                await self._sync(functools.partial(_commit_log_segments_due, store, least))
        finally:
            appended.disarm()

    async def _queue_loop(self) -> None:
        store = self._store
        while True:
            config = store.config
            await trio.sleep(config.flush_interval_consume_queue / 1000)
            if self._queue_thorough.due(config.flush_consume_queue_thorough_interval):
                if self._behind():
                    await self.flush_once()
                continue
            least = config.flush_consume_queue_least_pages
            await self._sync(functools.partial(_queue_segments_due, store, least))

    def _behind(self) -> bool:
        """Whether a thorough round has anything to sync or a checkpoint to move."""
        store = self._store
        end = store.commitlog.max_offset
        cp = store.checkpoint
        return (
            store.commitlog.queue.flushed_offset < end
            or bool(store.queue_flush_snapshots())
            or (cp is not None and cp.safe_offset != end)
        )


class _AppendSignal:
    """The untimed CommitLog flush's wake-up (``flushCommitLogTimed=false``): Java's ``waitForRunning(interval)``,
    which ``CommitLog.submitFlushRequest`` wakes at every ASYNC_FLUSH put (store/src/main/java/org/apache/rocketmq/
    store/CommitLog.java FlushRealTimeService, common/.../ServiceThread.java). Listens through the store's one-shot
    append hook (:meth:`MessageStore.call_after_next_append`), which only the SYNC_FLUSH group commit uses otherwise,
    so it is armed under ASYNC_FLUSH only; an append while the round flushes wakes the next wait at once, as Java's
    ``hasNotified`` flag does. A DLedger store's sends wake it too, and its rounds find nothing to sync (the ledger
    syncs its own files; store/src/main/java/org/apache/rocketmq/store/dledger/DLedgerCommitLog.java starts no
    FlushRealTimeService)."""

    __slots__ = ("_armed", "_event", "_store")

    def __init__(self, store: MessageStore) -> None:
        self._store = store
        self._event = trio.Event()
        self._armed = False

    def _arm(self) -> None:
        self._event = trio.Event()
        self._store.call_after_next_append(self._event.set)
        self._armed = True

    async def wait(self, timeout: float) -> None:
        """Until an append since the last wait ended (at once when one came already) or ``timeout`` seconds."""
        if not self._armed:
            self._arm()
        if self._event.is_set():
            await trio.lowlevel.checkpoint()
        else:
            with trio.move_on_after(timeout):
                await self._event.wait()
        self._arm()

    def disarm(self) -> None:
        """Stop listening (the timed loop, or the service ending): appends then pay nothing."""
        if self._armed:
            self._armed = False
            self._store.call_after_next_append(None)


def _commit_log_segments_due(store: MessageStore, least_pages: int) -> list[MappedFile]:
    return due_segments(store.commit_log_flush_snapshot(), least_pages)


def _queue_segments_due(store: MessageStore, least_pages: int) -> list[MappedFile]:
    return [mf for dirty in store.queue_flush_snapshots() for mf in due_segments(dirty, least_pages)]


async def destroy_off_thread(files: Sequence[Destroyable], limiter: trio.CapacityLimiter) -> None:
    """Unmap and unlink files already taken out of their log, in a worker thread and outside the disk lock:
    unlinking a 1 GiB segment can take long, and on the Trio thread it stalled every connection (Java deletes on its
    CleanCommitLogService / CleanConsumeQueueService thread: store/src/main/java/org/apache/rocketmq/store/
    DefaultMessageStore.java). Nothing reaches them any more: a reader finds no segment there, a flush plan does not
    hold them, and a slice a reader still holds keeps its mapping alive until it is dropped (as Java keeps a
    referenced segment until it is released), so there is no reference to wait for
    (``destroyMapedFileIntervalForcibly`` has no grace to bound). Shielded: nothing else would ever close them."""
    if files:
        with trio.CancelScope(shield=True):
            await trio.to_thread.run_sync(destroy_segments, files, limiter=limiter)


def _signal_pair() -> tuple[int, int]:
    """A non-blocking (read end, write end) the flusher thread signals the Trio task through: one eventfd (Linux), or
    a pipe elsewhere. Both take the 8-byte writes of :data:`_ONE` and are drained by one read."""
    if hasattr(os, "eventfd"):
        fd = os.eventfd(0, os.EFD_NONBLOCK | os.EFD_CLOEXEC)
        return fd, fd
    read_end, write_end = os.pipe()
    os.set_blocking(read_end, False)
    os.set_blocking(write_end, False)
    return read_end, write_end


_ONE = (1).to_bytes(8, sys.byteorder)


def _no_more() -> bool:
    return False


class _SyncThread:
    """The group commit's own flusher: one OS thread for the service's lifetime. :meth:`begin` starts a run of
    syncs: each takes a snapshot of the segments with unflushed bytes and ``fdatasync``-s them; while the run may go
    on (:meth:`stop` not called) and ``more()`` says a waiter is past what is durable, the thread starts the next
    sync the moment the previous one ends, without waiting for the Trio loop (as RocketMQ's
    ``CommitLog.GroupCommitService`` commits again at once when requests arrived during a commit:
    ``ServiceThread.waitForRunning`` returns at once when notified meanwhile). After every sync it signals one file
    descriptor that the Trio task awaits (:meth:`wait`): the loop wakes once per finished sync, straight into that
    task, with no ``run_sync_soon`` hand-off. A sync the disk fails (an ``OSError``, logged) ends the run quietly;
    any other error of a flush ends it too and is raised by :meth:`wait`.

    Created and driven by one Trio task, which must not let the files go (unmap, delete) while :attr:`busy`."""

    def __init__(self) -> None:
        # Plain locks (C-level, unlike Semaphore's Python Condition, whose notify showed as ~7 % of the broker's
        # samples): ``_go`` is held while idle and released to start a run; ``_state`` orders the thread's "go on or
        # stop" decision against :meth:`stop`.
        self._go = threading.Lock()
        self._go.acquire()
        self._state = threading.Lock()
        self._read_fd, self._write_fd = _signal_pair()
        self._snapshot: Callable[[], list[MappedFile]] = list
        self._more: Callable[[], bool] = _no_more
        self._chain = False
        self._closed = False
        self._error: BaseException | None = None
        #: True from :meth:`begin` until the run's last sync has ended (set False before its last signal).
        self.busy = False
        #: Syncs performed (each may cover one or two segments).
        self.syncs = 0
        #: Set before every signal: a sync ended since the Trio side last looked (it clears it).
        self.fresh = False
        threading.Thread(target=self._loop, name="rocketrio-group-commit", daemon=True).start()

    def _loop(self) -> None:
        while True:
            self._go.acquire()
            if self._closed:
                return
            files = self._take_snapshot()
            while True:
                if files:
                    try:
                        synced = _flush_files(files)
                    except BaseException as exc:  # handed to the Trio task, which re-raises it
                        self._error = exc
                        files = []
                    else:
                        if synced:
                            self.syncs += 1
                        else:  # a disk error (logged): the run ends, its waiters time out unless a later run syncs
                            files = []
                with self._state:  # close() waits for the last signal of a run: the descriptor stays open for it
                    if not (files and self._chain and self._more()):
                        self.busy = False
                        self.fresh = True
                        self._signal()
                        break
                # The next snapshot before the signal: its write may hand the GIL to the Trio thread, and the
                # thread should then go straight into the next fdatasync when it gets it back.
                files = self._take_snapshot()
                self.fresh = True
                self._signal()

    def _take_snapshot(self) -> list[MappedFile]:
        try:
            return self._snapshot()
        except BaseException as exc:  # as a flush error: the run ends
            self._error = exc
            return []

    def _signal(self) -> None:
        try:  # noqa: SIM105 (a try is cheaper than suppress() on this path)
            os.write(self._write_fd, _ONE)
        except BlockingIOError:  # a pipe full of signals: the task is woken anyway
            pass

    def begin(self, snapshot: Callable[[], list[MappedFile]], more: Callable[[], bool] = _no_more) -> None:
        """Start a run (the thread is idle): sync what ``snapshot()`` returns, then again while ``more()``. Both are
        called on the flusher thread."""
        self._snapshot, self._more = snapshot, more
        self._chain = True
        self.busy = True
        self._go.release()

    def stop(self) -> None:
        """End the run after the sync under way (no effect when idle)."""
        with self._state:
            self._chain = False

    async def wait(self) -> bool:
        """Wait until the thread signals (one or more syncs ended); return :attr:`busy`. Raises what a flush raised
        (the run has ended then). Cancelled, it ends the run and returns (raising) only once the thread is idle:
        the files must stay mapped until it is done."""
        fd = self._read_fd
        try:
            await trio.lowlevel.wait_readable(fd)
        except trio.Cancelled:
            self.stop()
            with trio.CancelScope(shield=True):
                while self.busy:
                    await trio.lowlevel.wait_readable(fd)
                    self._drain()
            raise
        self._drain()
        busy = self.busy
        if not busy and self._error is not None:
            error, self._error = self._error, None
            raise error
        return busy

    def _drain(self) -> None:
        try:  # noqa: SIM105 (a try is cheaper than suppress() on this path)
            os.read(self._read_fd, 4096)
        except BlockingIOError:  # a signal already drained with an earlier one
            pass

    async def sync(self, files: list[MappedFile]) -> None:
        """Flush ``files`` on the thread (one sync, no run). Raises what the flush raised."""
        self.begin(lambda: files)
        while await self.wait():
            pass

    def close(self) -> None:
        """Let the thread exit (it is idle: the driving task waits until a run ends) and close the descriptors."""
        with self._state:
            self._closed = True
            os.close(self._read_fd)
            if self._write_fd != self._read_fd:
                os.close(self._write_fd)
        self._go.release()


class OffsetWaiter:
    """One registered put: its offset, its deadline and the callback that gets the answer (``None`` once released
    or given up). The group commit's and SYNC_MASTER's waits (store/ha/waiters.py) both use it."""

    __slots__ = ("callback", "deadline", "offset")

    def __init__(self, offset: int, deadline: float, callback: Callable[[bool], None]) -> None:
        self.offset = offset
        self.deadline = deadline
        self.callback: Callable[[bool], None] | None = callback


def release_waiter(waiter: OffsetWaiter, ok: bool) -> None:
    callback = waiter.callback
    if callback is not None:
        waiter.callback = None
        try:
            callback(ok)
        except Exception:  # a failing callback is its owner's bug; the other waiters still get their answer
            log.exception("put wait callback for offset %d failed", waiter.offset)


class WaiterQueue:
    """Waiters in offset order, which with one timeout is also deadline order, and :meth:`expire`, the sweeper that
    answers ``False`` to those whose deadline passed. The group commit's and SYNC_MASTER's waits both use one."""

    __slots__ = ("_sweeper_wakeup", "waiters")

    def __init__(self) -> None:
        self.waiters: collections.deque[OffsetWaiter] = collections.deque()
        self._sweeper_wakeup = trio.Event()

    def add(self, offset: int, timeout: float, callback: Callable[[bool], None]) -> None:
        waiters = self.waiters
        waiters.append(OffsetWaiter(offset, trio.current_time() + timeout, callback))
        if len(waiters) == 1:
            self._sweeper_wakeup.set()

    async def expire(self) -> None:
        """Until cancelled: release each waiter with ``False`` at its deadline."""
        waiters = self.waiters
        while True:
            if not waiters:
                self._sweeper_wakeup = trio.Event()
                await self._sweeper_wakeup.wait()
                continue
            await trio.sleep_until(waiters[0].deadline)
            now = trio.current_time()
            while waiters and waiters[0].deadline <= now:
                release_waiter(waiters.popleft(), False)


#: Seconds the group commit leaves bytes no waiter covers unsynced at most (GroupCommitService's
#: ``waitForRunning(10)``), see :meth:`GroupCommitService._idle_rounds`.
IDLE_ROUND: Final = 0.01


class GroupCommitService:
    """Waiters queue in append order, which is also offset order and (with the store's one timeout) deadline order,
    so both a sync and the timeout sweeper release them from the head of one deque: no per-put cancel scope.

    A waiter is a callback (:meth:`notify_flushed`) run on the Trio thread in the pass that releases it, so a
    SYNC_FLUSH send needs no task of its own; :meth:`wait_flushed` parks the calling task on the same list."""

    def __init__(self, store: MessageStore) -> None:
        self._store = store
        self._queue = WaiterQueue()
        self._waiters = self._queue.waiters
        self._wakeup = trio.Event()
        self._running = False
        #: Number of group syncs performed (each may sync one or two segments).
        self.rounds = 0
        #: True while a release pass runs: the callbacks of the waiters a sync covered, or a DLedger round of effects.
        self.releasing = False
        self._pass_listeners: list[Callable[[], None]] = []
        self._thread: _SyncThread | None = None
        self._ready: list[OffsetWaiter] = []  # covered by a sync, popped from the deque, not yet released

    def add_pass_listener(self, listener: Callable[[], None]) -> None:
        """Call ``listener()`` after every release pass (while :attr:`releasing` it was True), so that a callback
        can defer work to the pass's end: answers written to a connection in one write instead of one each. An
        exception it raises is logged."""
        self._pass_listeners.append(listener)

    def _release(self, ready: list[OffsetWaiter]) -> None:
        """Answer ``True`` to the waiters a sync covered, in offset order, then tell the pass listeners."""
        if not ready:
            return
        with self.release_pass():
            try:
                for waiter in ready:
                    release_waiter(waiter, True)
            finally:
                ready.clear()

    @contextmanager
    def release_pass(self) -> Iterator[None]:
        """A release pass: :attr:`releasing` inside, the pass listeners called at its end. A pass entered inside
        another is part of it (the outer one ends it)."""
        if self.releasing:
            yield
            return
        self.releasing = True
        try:
            yield
        finally:
            self.releasing = False
            for listener in self._pass_listeners:
                try:
                    listener()
                except Exception:  # its owner's bug; the next pass calls it again
                    log.exception("group commit pass listener failed")

    def _release_flushed(self) -> None:
        """One release pass over the waiters whose offset is durable now, in offset order: everything the syncs so
        far covered, including waiters that arrived during one and whose records it reached (a true group
        commit)."""
        flushed = self._store.commitlog.queue.flushed_offset
        waiters, ready = self._waiters, self._ready
        while waiters and waiters[0].offset <= flushed:
            ready.append(waiters.popleft())
        self._release(ready)

    def poll(self) -> None:
        """Answer now what the syncs ended since the last pass covered, instead of when this service's task next
        runs: the send path calls it before each request, so a reader busy with a burst of requests does not hold
        back the answers of a sync that ended meanwhile. Cheap when nothing ended (one attribute)."""
        thread = self._thread
        if thread is not None and thread.fresh and not self.releasing:
            thread.fresh = False
            self._release_flushed()

    @property
    def running(self) -> bool:
        """Whether :meth:`run` is serving waiters."""
        return self._running

    def notify_flushed(self, offset: int, timeout: float, callback: Callable[[bool], None]) -> bool:
        """Call ``callback(True)`` once the CommitLog is durable up to ``offset`` (in the pass after the sync that
        reached it, waiters released in offset order), or ``callback(False)`` after ``timeout`` seconds or when the
        service stops. Returns ``False``, registering nothing, when the service is not running (the caller waits
        with :meth:`wait_flushed` instead). The callback must not block; an exception it raises is logged."""
        if not self._running:
            return False
        self._queue.add(offset, timeout, callback)
        self._wakeup.set()
        return True

    async def wait_flushed(self, offset: int, timeout: float) -> bool:
        """Wait until the CommitLog is durable up to ``offset``; ``False`` after ``timeout`` seconds. Cancelling the
        wait leaves the record appended; the next sync still covers it."""
        store = self._store
        if store.commitlog.queue.flushed_offset >= offset:
            return True
        if not self._running:
            # No service (store used without run()): sync inline, still through the limiter.
            async with store.disk_lock:
                files = store.commitlog.queue.flush_snapshot()
                await trio.to_thread.run_sync(_flush_files, files, limiter=store.disk_limiter)
            return store.commitlog.queue.flushed_offset >= offset
        task = trio.lowlevel.current_task()
        answer: list[bool] = []

        def wake(ok: bool) -> None:
            answer.append(ok)
            trio.lowlevel.reschedule(task)

        self.notify_flushed(offset, timeout, wake)
        waiter = self._waiters[-1]

        def abort(_: object) -> trio.lowlevel.Abort:
            waiter.callback = None  # left in the deque; the next release pass drops it
            return trio.lowlevel.Abort.SUCCEEDED

        await trio.lowlevel.wait_task_rescheduled(abort)
        return answer[0]

    async def _idle_rounds(self) -> None:
        """Start a run at most :data:`IDLE_ROUND` seconds after an append when the CommitLog then holds bytes no sync
        covered yet: what no waiter asks for (``WAIT=false`` sends and batches, the broker's own writes: delay and
        timer re-puts, transaction half and op messages, pop checkpoints, send-backs, a slave's replicated bytes) is
        durable within about 10 ms, as RocketMQ's GroupCommitService waits at most 10 ms for a request and with none
        to serve still syncs everything appended (``waitForRunning(10)`` then ``doCommit``'s
        ``mappedFileQueue.flush(0)``; a ``WAIT=false`` send wakes it: store/src/main/java/org/apache/rocketmq/store/
        CommitLog.java). Java's thread wakes every 10 ms; this task sleeps until an append announces itself
        (:meth:`MessageStore.call_after_next_append`, one-shot: one call per round however many appends), so an idle
        store costs nothing and a send pays one test; a round that finds a failed sync's bytes still unsynced tries
        again 10 ms later, as Java's next ``flush(0)``."""
        store = self._store
        queue = store.commitlog.queue
        try:
            while True:
                appended = trio.Event()
                store.call_after_next_append(appended.set)
                if queue.flushed_offset >= queue.max_offset:
                    await appended.wait()
                await trio.sleep(IDLE_ROUND)
                if queue.flushed_offset < queue.max_offset:
                    self._wakeup.set()
        finally:
            store.call_after_next_append(None)

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        store = self._store
        queue = store.commitlog.queue
        waiters = self._waiters
        lock = store.disk_lock
        self._running = True
        thread = self._thread = _SyncThread()

        def more() -> bool:
            """On the flusher thread: a waiter is past what is durable, so the run goes on."""
            try:
                return waiters[-1].offset > queue.flushed_offset
            except IndexError:
                return False

        try:
            async with trio.open_nursery() as nursery:
                # Waiters past their deadline get FLUSH_DISK_TIMEOUT, even while a sync is stuck in its thread.
                nursery.start_soon(self._queue.expire)
                nursery.start_soon(self._idle_rounds)
                task_status.started()
                while True:
                    if not self._wakeup.is_set():  # set: a run at once, with no scheduler pass (the run yields)
                        await self._wakeup.wait()
                    self._wakeup = trio.Event()
                    try:
                        lock.acquire_nowait()  # no scheduler pass when nobody else holds it
                    except trio.WouldBlock:
                        await lock.acquire()
                    try:
                        # A run of syncs, each starting as the previous one ends while waiters are left; every
                        # signal of the thread wakes this task, which answers what the syncs so far covered (unless
                        # the send path's poll() did already) while the next sync runs. Another user of the lock
                        # (the periodic flush, retention) ends the run after the sync under way.
                        thread.begin(queue.flush_snapshot, more)
                        busy = True
                        while busy:
                            busy = await thread.wait()
                            if busy and lock.statistics().tasks_waiting:
                                thread.stop()
                            self.rounds = thread.syncs
                            thread.fresh = False
                            self._release_flushed()
                    finally:
                        lock.release()
                    if not waiters:
                        self._wakeup = trio.Event()  # set by the run's own waiters, all answered: no empty run
                    # A waiter past the appended end waits for the append (and its notify) that reaches it, or
                    # for its timeout: no busy loop.
        finally:
            self._thread = None
            thread.close()
            self._running = False
            self._release(self._ready)  # durable already
            # Shutting down: nobody will sync for them any more, so answer FLUSH_DISK_TIMEOUT rather than hang.
            while waiters:
                release_waiter(waiters.popleft(), False)


class AllocateService:
    def __init__(self, store: MessageStore) -> None:
        self._store = store
        self._wakeup = trio.Event()
        self.allocated = 0

    def wake(self) -> None:
        self._wakeup.set()

    def _make(self, start: int, directory: Path) -> MappedFile:
        queue = self._store.commitlog.queue
        directory.mkdir(parents=True, exist_ok=True)
        # Built under a temporary name so a half-made spare never looks like a segment after a crash.
        mf = MappedFile(directory / (segment_name(start) + ".alloc"), start, queue.file_size, queue.preallocate)
        if self._store.config.warm_mapped_file_enable:
            mf.warm_up(self._store.config.flush_disk_type is FlushDiskType.SYNC_FLUSH)
        return mf

    async def prepare_next(self) -> None:
        store = self._store
        queue = store.commitlog.queue
        start = queue.next_start()
        if queue.spare is not None and queue.spare.file_from_offset == start:
            return
        directory = queue.dir_for(start)
        try:
            mf = await trio.to_thread.run_sync(self._make, start, directory, limiter=store.disk_limiter)
        except OSError as exc:  # a full disk: no spare; the roll makes the segment itself, or refuses the put
            log.warning("preallocating CommitLog segment %d in %s failed: %s", start, directory, exc)
            return
        final = directory / segment_name(start)
        if queue.next_start() == start and queue.spare is None and not final.exists():
            os.rename(mf.path, final)
            mf.path = final
            queue.spare = mf
            self.allocated += 1
        else:
            mf.destroy()

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        task_status.started()
        while True:
            await self._wakeup.wait()
            self._wakeup = trio.Event()
            await self.prepare_next()


def is_delete_hour(delete_when: str, now_ms: int) -> bool:
    """Whether ``now_ms`` falls in one of ``deleteWhen``'s hours (``"04"``, or several as ``"03;04"``), read as
    4.9.8's ``UtilAll.isItTimeToDo`` (and DLedger's): the ``;`` parts (Java's String.split: trailing empty ones
    dropped) each read with Integer.parseInt, in turn, up to the first equal to the local hour. A part reached that
    is no int (``"abc"``, ``""``, ``" 04"``) raises ValueError, as Java's NumberFormatException: the caller's pass
    fails (:meth:`RetentionService._delete_segments`)."""
    hour = datetime.datetime.fromtimestamp(now_ms / 1000).hour
    parts = delete_when.split(";")
    while ";" in delete_when and parts and not parts[-1]:
        parts.pop()
    return any(java_parse_long(part, 32) == hour for part in parts)


def log_disk_ratio(ratio_of: Callable[[Path], float], queue: MappedFileQueue, force_clean: float) -> float | None:
    """A log's used disk ratio as RocketMQ reads it over several directories (``calcStorePathPhysicRatio``): the
    least used of its writable directories that exist, None when none does yet. Marks on ``queue`` those above
    ``force_clean`` as full, so its new segments go elsewhere."""
    ratios = {directory: ratio_of(directory) for directory in queue.dirs.writable if directory.is_dir()}
    queue.full = frozenset(directory for directory, ratio in ratios.items() if ratio > force_clean)
    return min(ratios.values(), default=None)


def _disk_full(ratio: float, warning: float) -> str:
    return f"disk full: used ratio {ratio:.2f} is above diskSpaceWarningLevelRatio {warning:.2f}, writes are refused"


#: The first retention pass's delay after the start, and the disk check's before it then between two (4.9.8).
FIRST_PASS_DELAY_S: Final = 60.0
DISK_CHECK_DELAY_S: Final = 1.0
DISK_CHECK_INTERVAL_S: Final = 10.0


def check_period(setting: str, interval_ms: int) -> None:
    """Refuse the period ``setting`` of 0 or less with ``ValueError``, as Java's ``scheduleAtFixedRate`` throws
    IllegalArgumentException for it and BrokerStartup exits: ``cleanResourceInterval`` (4.9.8 DefaultMessageStore's
    addScheduleTask), ``flushDelayOffsetInterval`` (ScheduleMessageService.start), ``flushConsumerOffsetInterval``
    (BrokerController.initialize)."""
    if interval_ms <= 0:
        raise ValueError(f"{setting} {interval_ms} is illegal: the period must be positive")


class RetentionService:
    def __init__(self, store: MessageStore) -> None:
        self._store = store
        self.deleted_files = 0
        #: Passes left that delete as if at ``deleteWhen`` time (DELETE_EXPIRED_COMMITLOG: store/maintenance.py).
        self.manual_delete_times = 0
        #: CommitLog minimum the ConsumeQueues and index were last cleaned below (Java's lastPhysicalMinOffset).
        self._cleaned_below = 0

    async def check_once(self) -> int:
        """One pass: update the disk-full flag, delete what is due, then drop the ConsumeQueue and index files below
        the CommitLog's minimum when it rose since the last look, whatever the hour (Java runs
        CleanConsumeQueueService after CleanCommitLogService every ``cleanResourceInterval``: store/src/main/java/
        org/apache/rocketmq/store/DefaultMessageStore.java cleanFilesPeriodically; after a start it may have risen
        while the broker was down). Returns the number of CommitLog files deleted. Either half that raises is
        logged and the other still runs, as Java's two services catch any Throwable of a pass: the next pass tries
        again."""
        deleted = await self._commit_log_pass()
        await self._queue_pass()
        return deleted

    async def _commit_log_pass(self) -> int:
        """CleanCommitLogService.run: :meth:`_delete_segments`, a failure logged (0 deleted)."""
        try:
            return await self._delete_segments()
        except Exception:
            log.warning("CleanCommitLogService service has exception.", exc_info=True)
            return 0

    async def _queue_pass(self) -> None:
        """CleanConsumeQueueService.run: :meth:`_clean_queues` below the log's minimum, a failure logged."""
        try:
            await self._clean_queues(self._store.commitlog.min_offset)
        except Exception:
            log.warning("CleanConsumeQueueService service has exception.", exc_info=True)

    def _mark_space_full(self) -> None:
        """The 10 s disk check (4.9.8 ``CleanCommitLogService.isSpaceFull``): the disk-full flag set when the
        CommitLog's disk is fuller than ``disk_space_warning_level_ratio``, cleared otherwise."""
        store = self._store
        warning = store.config.disk_space_warning_level_ratio
        ratio = self.physic_ratio()
        store.disk_full_reason = _disk_full(ratio, warning) if ratio is not None and ratio > warning else None

    def physic_ratio(self) -> float | None:
        """The used ratio of the CommitLog's disk as ``calcStorePathPhysicRatio`` reads it (:func:`log_disk_ratio`)."""
        config = self._store.config
        queue = self._store.commitlog.queue
        return log_disk_ratio(config.disk_usage_ratio, queue, config.disk_space_clean_forcibly_ratio)

    def logics_ratio(self) -> float:
        """The used ratio of ``getStorePathLogic``'s disk, ``<storePathRootDir>/consumequeue``; the root's while no
        ConsumeQueue made that directory yet (Java makes it at the start, where the root's disk holds it)."""
        config = self._store.config
        directory = config.consume_queue_dir
        return config.disk_usage_ratio(directory if directory.is_dir() else Path(config.store_path_root_dir))

    def _mark_disk(self) -> tuple[bool, bool]:
        """4.9.8 ``CleanCommitLogService.isSpaceToDelete`` (store/src/main/java/org/apache/rocketmq/store/
        DefaultMessageStore.java): the CommitLog's disk (:meth:`physic_ratio`, its full directories noted on the
        way) sets or clears the disk-full flag (:meth:`_mark_ratio`), and when it is past ``diskMaxUsedSpaceRatio``
        the pass is due at once; otherwise the ConsumeQueues' disk (:meth:`logics_ratio`) gets the same rules.
        Returns whether space is to be freed and whether a disk was past a forcible ratio (``cleanImmediately``).
        A log none of whose directories exists yet (a DLedger member before its first entry file) has no step: Java
        reads -1 for it, which clears the flag and frees space at once."""
        limit = self._store.config.disk_max_used_fraction
        physic = self.physic_ratio()
        clean = physic is not None and self._mark_ratio(physic)
        if physic is not None and physic > limit:
            return True, clean
        logics = self.logics_ratio()
        clean = self._mark_ratio(logics) or clean
        return logics > limit, clean

    def _mark_ratio(self, ratio: float) -> bool:
        """One disk's step of :meth:`_mark_disk`: the store full above the warning ratio, OK again only at or below
        the forcible one, the flag left as it was in between (the 10 s disk check clears it there:
        :meth:`_mark_space_full`). Returns whether ``ratio`` is above either (``cleanImmediately``)."""
        store = self._store
        warning = store.config.disk_space_warning_level_ratio
        forcibly = store.config.disk_space_clean_forcibly_ratio
        if ratio > warning:
            store.disk_full_reason = _disk_full(ratio, warning)
            return True
        if ratio > forcibly:
            return True
        store.disk_full_reason = None
        return False

    async def _delete_segments(self) -> int:
        """CleanCommitLogService's pass: the disk-full flag, then the CommitLog segments due."""
        store = self._store
        config = store.config
        # Asked first, as CleanCommitLogService.deleteExpiredFiles does: a deleteWhen it cannot parse fails the pass
        # before the disk is looked at (no flag set, nothing deleted, no manual round used).
        time_up = is_delete_hour(config.delete_when, config.now_ms())
        space_to_delete, clean = self._mark_disk()
        clean_at_once = config.clean_file_forcibly_enable and clean
        manual = self.manual_delete_times > 0
        if not (space_to_delete or time_up or manual):
            return 0
        if manual:
            self.manual_delete_times -= 1
        expire_before = config.now_ms() - config.file_reserved_time * 3_600_000
        queue = store.commitlog.queue
        deleted = 0
        # Never the newest segment, at most 10 per pass, deleteCommitLogFilesInterval apart, the disk lock let go
        # in between so flushes and group commits go on (store/src/main/java/org/apache/rocketmq/store/
        # MappedFileQueue.java deleteExpiredFileByTime). Each segment is taken out of the log under the lock and
        # unmapped and unlinked in a worker thread after it (:meth:`_destroy`); the pause starts once that returns,
        # as Java sleeps after MappedFile.destroy, so a slow unlink does not use it up. No pause after the last of
        # the segments older than the newest at the start, nor after the tenth, as Java's.
        candidates = min(len(queue.files) - 1, 10)
        while deleted < candidates:
            if deleted:
                await trio.sleep(config.delete_commit_log_files_interval / 1000)
            async with store.disk_lock:
                if len(queue.files) <= 1:
                    break
                first = queue.files[0]
                if not clean_at_once and first.mtime_ms() > expire_before:
                    break
                if not await self._checkpointed(first.end_offset):
                    break
                taken = queue.take_first(1)
                deleted += 1
                self.deleted_files += 1
            await self._destroy(taken)
        return deleted

    async def _destroy(self, files: Sequence[MappedFile | IndexFile]) -> None:
        await destroy_off_thread(files, self._store.disk_limiter)

    async def _checkpointed(self, end: int) -> bool:
        """Whether the checkpoint covers the CommitLog below ``end``, after a flush when it did not yet (the caller
        holds the disk lock). Recovery starts at the checkpoint or, when retention deleted past it, at the
        CommitLog's first record: the ConsumeQueue entries of the records deleted in between would never have been
        synced, and a power cut would leave a zeroed hole before the entries recovery writes again, where
        ConsumeQueue.recover ends the queue (its acknowledged messages lost, their offsets handed out again)."""
        checkpoint = self._store.checkpoint
        assert checkpoint is not None
        if checkpoint.safe_offset < end:
            await self._store.flush_service.flush_locked()
        return end <= checkpoint.safe_offset

    async def _clean_queues(self, min_phy: int) -> None:
        """CleanConsumeQueueService's pass: once the CommitLog's minimum rose past the last one seen, take each
        ConsumeQueue's files below it out of the store (under the disk lock, one queue at a time) and destroy them,
        pausing ``deleteConsumeQueueFilesInterval`` after each queue that lost files, then the index files below it,
        whether or not new keys are indexed (DefaultMessageStore.java CleanConsumeQueueService.deleteExpiredFiles).
        A queue destroyed meanwhile (its topic deleted) is skipped."""
        if min_phy <= self._cleaned_below:
            return
        self._cleaned_below = min_phy
        store = self._store
        for cq in list(store.consume_queues.values()):
            async with store.disk_lock:
                taken = cq.take_expired(min_phy) if store.consume_queues.get(cq.key) is cq else []
            await self._destroy(taken)
            interval = store.config.delete_consume_queue_files_interval
            if taken and interval > 0:
                await trio.sleep(interval / 1000)
        async with store.disk_lock:
            index_taken: list[MappedFile | IndexFile] = []
            if store.index is not None:
                index_taken.extend(store.index.take_expired(min_phy))
        await self._destroy(index_taken)

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        """The passes, the first a minute after the start, so a restart deletes nothing at once, then every
        ``clean_resource_interval`` at a fixed rate (:func:`at_fixed_rate`), and the disk check from 1 s on, every
        10 s, for the store's life (4.9.8 store/.../DefaultMessageStore.java addScheduleTask: cleanFilesPeriodically's
        scheduleAtFixedRate, isSpaceFull's schedule)."""
        task_status.started()
        async with trio.open_nursery() as nursery:
            nursery.start_soon(self._check_disk)
            await at_fixed_rate(self.check_once, FIRST_PASS_DELAY_S, self._interval)

    def _interval(self) -> float:
        """``cleanResourceInterval`` in seconds, read at each pass."""
        return self._store.config.clean_resource_interval / 1000

    async def _check_disk(self) -> None:
        await trio.sleep(DISK_CHECK_DELAY_S)
        while True:
            try:
                self._mark_space_full()
            except Exception:
                log.warning("Disk check has exception.", exc_info=True)
            await trio.sleep(DISK_CHECK_INTERVAL_S)


async def at_fixed_rate(
    job: Callable[[], Awaitable[object]], first_delay: float, interval: Callable[[], float]
) -> None:
    """Run ``job`` ``first_delay`` seconds from now, then every ``interval()`` from the time the last one was due,
    forever, as Java's ``scheduleAtFixedRate``: a run that outlasts it is followed at once by the next due, never
    overlapped. ``job`` handles its own errors (one that raises ends the loop)."""
    due = trio.current_time() + first_delay
    while True:
        await trio.sleep_until(due)
        await job()
        due += interval()
