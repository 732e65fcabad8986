"""Retention of a DLedger member's entry files: DLedger 0.3.1.2's ``CleanSpaceService``
(``store/file/DLedgerMmapFileStore.java``) with the settings RocketMQ 4.9.8's ``DLedgerCommitLog`` gives it, run
for one :class:`~dledger.commitlog_store.DLedgerMessageStore` on the Trio thread.

Every 100 ms a pass reads how full the disk is, as the larger of the store root's and the data directory's used
ratio (``storePathRootDir`` and ``storePathDLedgerCommitLog``: DLedger's ``storeBaseDir`` and ``getDataStorePath``;
:meth:`LedgerRetention.ledger_ratio`), then:

- above 0.90 (DLedger's ``diskSpaceRatioToForceClean`` 0.85 + 0.05) DLedger's own flag is set until a pass finds it
  at 0.90 or below: a follower refuses the leader's entries (``appendAsFollower``'s ``DISK_FULL``, answered 406) and
  a leader its writes (``appendAsLeader``'s ``DISK_FULL``; SERVICE_NOT_AVAILABLE to a producer, as the store's other
  refusals). The store's own flag is not this pass's: RocketMQ's CleanCommitLogService, which reads the DLedger data
  path and the ConsumeQueue directory (``getStorePathPhysic``, ``getStorePathLogic``; no store root), sets it above
  ``diskSpaceWarningLevelRatio`` and clears it at 0.85 or below (``diskSpaceCleanForciblyRatio``) in its passes every
  ``cleanResourceInterval``, and the store's disk check, every 10 s, sets it above that ratio and clears it at or
  below (its ``isSpaceFull``, which reads the data path alone);
- a pass that fails (a ``deleteWhen`` Integer.parseInt cannot read) is logged and the next one runs 200 ms later
  (CleanSpaceService's ``DLedgerUtils.sleep(200)``), after the flag was set;
- in one of ``deleteWhen``'s hours, or above ``diskMaxUsedSpaceRatio``, it deletes data segments last modified more
  than ``fileReservedTime`` + 1 hours ago (DLedgerCommitLog's ``+ 1``; never under an hour), oldest first, up to 10
  100 ms apart (none after the last; the disk lock let go in between), stopping at the first younger one, and above
  0.85 whatever their age unless ``cleanFileForciblyEnable`` is false (DLedger's ``enableDiskForceClean``).
  ``diskMaxUsedSpaceRatio`` is clamped to 10..95. The newest segment always stays. These settings are DLedger's
  copies (:class:`LedgerSettings`): taken at the start and renewed by each CleanCommitLogService pass due once no
  classic segment is left (DLedgerCommitLog's ``refreshConfig``), ``diskMaxUsedSpaceRatio``'s at the start alone
  (its constructor).

Ours: a segment goes only once every entry in it is committed, flushed and dispatched to the ConsumeQueues, so
retention never takes an entry the group may still need or a message the queues do not index yet (DLedger deletes by
age alone). Deleting moves the ledger's begin index (a follower whose log ends before it is rebuilt from the leader's
first entry: :meth:`~dledger.file_store.FileLedger.truncate`). The ConsumeQueues and the index file drop what points
below the new first entry in RocketMQ's cleanFilesPeriodically (a minute after the start, then every
``cleanResourceInterval`` at a fixed rate, after CleanCommitLogService's pass), one queue at a time
``deleteConsumeQueueFilesInterval`` apart, as the classic store's retention does
(:class:`store.services.RetentionService`), whatever the hour, once the log's first entry rose since the last look
(0 after a start), as CleanConsumeQueueService does with DLedgerCommitLog's ``getMinOffset``: it also takes files
left by a member killed before it unlinked them, or below segments removed by hand.
A manual ``DELETE_EXPIRED_COMMITLOG`` does not reach these files, as in RocketMQ (DLedgerCommitLog's
``deleteExpiredFile`` only refreshes DLedger's settings).

A mixed store (a classic CommitLog taken over: :class:`~dledger.commitlog_store.MixedCommitLog`) deletes its classic
segments first, and no entry file while one is left (DLedgerCommitLog's ``disableDeleteDledger``): in RocketMQ's
CleanCommitLogService passes, which DefaultMessageStore runs in DLedger mode too (a minute after the start, then every
``cleanResourceInterval`` at a fixed rate), by the classic rules (``fileReservedTime`` hours, any age above
``diskSpaceCleanForciblyRatio`` unless ``cleanFileForciblyEnable`` is false, a manual ``DELETE_EXPIRED_COMMITLOG``,
whose 20 rounds are one a pass), up to 10 a pass ``deleteCommitLogFilesInterval`` apart, the newest kept; the last
classic segment, once old enough, in a pass that deleted no other and found it alone. DLedger's own deletion runs
again from the next such pass due that finds none left (DLedgerCommitLog's ``refreshConfig``).
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import TYPE_CHECKING, Final, NamedTuple

import trio

from store.services import FIRST_PASS_DELAY_S, RetentionService, at_fixed_rate, is_delete_hour, log_disk_ratio

if TYPE_CHECKING:
    from collections.abc import Sequence

    from dledger.commitlog_store import DLedgerMessageStore
    from store.index_file import IndexFile
    from store.mapped_file import MappedFile
    from store.store_config import StoreConfig

log = logging.getLogger(__name__)

HOUR_MS: Final = 3_600_000
#: DLedger's ``diskSpaceRatioToForceClean`` and its disk-full ratio (force clean + 0.05, at most 0.95).
FORCE_CLEAN_RATIO: Final = 0.85
DISK_FULL_RATIO: Final = min(FORCE_CLEAN_RATIO + 0.05, 0.95)
#: ``MmapFileList.DELETE_FILES_BATCH_MAX``
DELETE_FILES_BATCH_MAX: Final = 10
#: CleanSpaceService's ``deleteFilesInterval`` (the 100 it passes to ``deleteExpiredFileByTime``)
DELETE_FILES_INTERVAL_S: Final = 0.1
#: CleanSpaceService's ``waitForRunning(100)``, and its ``DLedgerUtils.sleep(200)`` after a pass that failed
PASS_INTERVAL_S: Final = 0.1
ERROR_PAUSE_S: Final = 0.2


class LedgerSettings(NamedTuple):
    """DLedger's copy of RocketMQ's retention settings, which its pass goes by (DLedgerCommitLog's ``dLedgerConfig``:
    ``deleteWhen``, ``fileReservedHours`` = ``fileReservedTime`` + 1, ``enableDiskForceClean`` =
    ``cleanFileForciblyEnable``)."""

    delete_when: str
    reserved_hours: int
    force_clean: bool

    @classmethod
    def of(cls, config: StoreConfig) -> LedgerSettings:
        return cls(config.delete_when, config.file_reserved_time + 1, config.clean_file_forcibly_enable)


class LedgerRetention(RetentionService):
    """Owned by one DLedger store in place of the classic :class:`~store.services.RetentionService`, whose
    interface it keeps (a manual delete's rounds are used by CleanCommitLogService's passes, 10 s apart); ``run`` is
    its task, :meth:`check_once` one pass of each: :meth:`_delete_segments` (CleanCommitLogService's),
    :meth:`_ledger_pass` (DLedger's), then the ConsumeQueue and index files below the log's first entry."""

    _store: DLedgerMessageStore
    #: DLedger's own deletion held off (DLedgerCommitLog's disableDeleteDledger) or let run (its refreshConfig), as
    #: the last CleanCommitLogService pass due found classic segments or none; ``None`` until the first look.
    _entries_held: bool | None = None

    def __init__(self, store: DLedgerMessageStore) -> None:
        super().__init__(store)
        #: DLedger's settings as DLedgerCommitLog's constructor copies them; renewed by each CleanCommitLogService pass
        #: due that finds no classic segment (refreshConfig), so an UPDATE_BROKER_CONFIG reaches DLedger's pass then.
        self._settings = LedgerSettings.of(store.config)
        #: ``diskSpaceRatioToCheckExpired``: diskMaxUsedSpaceRatio as the constructor read it, never renewed.
        self._check_expired_ratio = store.config.disk_max_used_fraction

    def ledger_ratio(self) -> float:
        """The used ratio DLedger's pass goes by: the store root's (its ``storeBaseDir``) or the data directory's,
        the fuller (CleanSpaceService's ``storeBaseRatio`` and ``dataRatio``)."""
        config = self._store.config
        return max(config.disk_usage_ratio(Path(config.store_path_root_dir)), self.physic_ratio() or 0.0)

    def physic_ratio(self) -> float | None:
        """The data directory's used ratio: RocketMQ's CleanCommitLogService and 10 s disk check read it too
        (:meth:`_mark_disk`, before the ConsumeQueues' disk), as 4.9.8's ``getStorePathPhysic`` is the DLedger
        data path in DLedger mode."""
        return log_disk_ratio(self._store.config.disk_usage_ratio, self._store.ledger.data, FORCE_CLEAN_RATIO)

    async def check_once(self) -> int:
        """One CleanCommitLogService pass (:meth:`_delete_segments`), one of DLedger's (:meth:`_ledger_pass`), then
        the ConsumeQueue and index files below the log's first entry. Returns how many segments went."""
        deleted = await self._commit_log_pass()
        deleted += (await self._ledger_pass())[0]
        await self._queue_pass()
        return deleted

    async def _delete_segments(self) -> int:
        """RocketMQ's CleanCommitLogService over a DLedger store (DLedgerCommitLog.deleteExpiredFile): ``deleteWhen``
        read first (one it cannot read raises: the pass fails), then the store's disk-full flag set above
        ``diskSpaceWarningLevelRatio`` and cleared at or below ``diskSpaceCleanForciblyRatio`` (isSpaceToDelete);
        when due (a ``deleteWhen`` hour, ``diskMaxUsedSpaceRatio`` passed, or a manual round left, one used), a mixed
        store's expired classic segments go by the classic rules and DLedger's own deletion is held off; with none
        left it is let run again (DLedger's settings refreshed). Returns how many went."""
        store = self._store
        config = store.config
        time_up = is_delete_hour(config.delete_when, config.now_ms())
        space_to_delete, clean = self._mark_disk()
        manual = self.manual_delete_times > 0
        if not (time_up or space_to_delete or manual):
            return 0
        if manual:
            self.manual_delete_times -= 1
        self._entries_held = store.classic_segments() > 0
        if not self._entries_held:
            self._settings = LedgerSettings.of(config)  # DLedgerCommitLog's refreshConfig
            return 0
        expire_before = config.now_ms() - config.file_reserved_time * HOUR_MS
        force = config.clean_file_forcibly_enable and clean
        interval = config.delete_commit_log_files_interval / 1000
        deleted = await self._delete_loop(True, expire_before, force, interval)
        if deleted or store.classic_segments() != 1:
            return deleted
        # DLedgerCommitLog.deleteExpiredFile: the last classic segment, in a pass that deleted no other.
        return await self._delete_loop(True, expire_before, force, interval, keep_last=False)

    async def _ledger_pass(self) -> tuple[int, float]:
        """One CleanSpaceService.doWork (:meth:`_clean_space`): how many entry files went and the pause before the
        next, ``waitForRunning(100)``, or 200 ms after a failure, which is logged (its ``DLedgerUtils.sleep(200)``)."""
        try:
            return await self._clean_space(), PASS_INTERVAL_S
        except Exception:
            log.info("Error in CleanSpaceService", exc_info=True)
            return 0, ERROR_PAUSE_S

    async def _clean_space(self) -> int:
        """DLedger's CleanSpaceService pass: its disk-full flag (the store's is the 10 s passes'), then the entry
        files due (see the module docstring), none while classic segments are left or CleanCommitLogService holds
        them off. A ``deleteWhen`` it cannot read raises, after the flag. Returns how many went."""
        store = self._store
        config = store.config
        ratio = self.ledger_ratio()
        # DLedger's own flag, set and cleared by each pass (CleanSpaceService's isNeedForbiddenWrite): it refuses a
        # follower's entries and the leader's writes, so a follower on a fuller disk than the leader's does not
        # fill it up.
        store.ledger.disk_full = ratio > DISK_FULL_RATIO
        if self._entries_held is None:  # DLedgerCommitLog's recover: held off in a mixed store
            self._entries_held = store.classic_segments() > 0
        if self._entries_held or store.classic_segments():
            return 0
        settings = self._settings
        time_up = is_delete_hour(settings.delete_when, config.now_ms())  # before the disk checks, as doWork
        if not (time_up or ratio > self._check_expired_ratio):
            return 0
        expire_before = config.now_ms() - max(settings.reserved_hours * HOUR_MS, HOUR_MS)
        force = settings.force_clean and ratio > FORCE_CLEAN_RATIO
        return await self._delete_loop(False, expire_before, force, DELETE_FILES_INTERVAL_S)

    async def _delete_loop(
        self, classic: bool, expire_before: int, force: bool, interval: float, keep_last: bool = True
    ) -> int:
        """Up to 10 classic segments or entry files, oldest first, ``interval`` apart, the newest kept (a classic one
        too unless not ``keep_last``). Returns how many went."""
        store = self._store
        deleted = 0
        # One segment at a time, ``interval`` apart, the disk lock let go in between so flushes go on (MmapFileList
        # and MappedFileQueue .deleteExpiredFileByTime sleep deleteFilesInterval between two deletions, none after
        # the last file they may take: the one before the newest). Each is taken out under the lock, the files it
        # frees destroyed after it (DLedgerMessageStore.destroy_taken).
        left = (store.classic_segments() if classic else len(store.ledger.data.files)) - int(keep_last)
        while deleted < DELETE_FILES_BATCH_MAX:
            if deleted:
                if deleted >= left:
                    break
                await trio.sleep(interval)
            async with store.disk_lock:
                if classic:
                    gone = store.delete_expired_classic(expire_before, force=force, limit=1, keep_last=keep_last)
                    count = len(gone)
                else:
                    gone = []
                    count = store.delete_expired_entries(expire_before, force=force, limit=1)
            # Unmapped and unlinked in a worker thread once the lock is let go, so flushes go on; the pause starts
            # when that returns, as MmapFileList.deleteExpiredFileByTime sleeps after MmapFile.destroy.
            await store.destroy_taken(gone)
            if not count:
                break
            deleted += count
            self.deleted_files += count
        return deleted

    async def _destroy(self, files: Sequence[MappedFile | IndexFile]) -> None:
        """The files the pass's second half took, through the store (:meth:`~dledger.commitlog_store
        .DLedgerMessageStore.destroy_taken`: a file that cannot be unlinked is logged, the pass goes on)."""
        await self._store.destroy_taken(files)

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        """The store's 10 s disk check, cleanFilesPeriodically (CleanCommitLogService's pass, then the ConsumeQueue
        and index files below the log: a minute after the start, then every ``cleanResourceInterval`` at a fixed
        rate, as DefaultMessageStore schedules them in DLedger mode too) and, from the start, DLedger's pass every
        100 ms (200 ms after one that failed), for the store's life."""
        task_status.started()
        async with trio.open_nursery() as nursery:
            nursery.start_soon(self._check_disk)
            nursery.start_soon(at_fixed_rate, super().check_once, FIRST_PASS_DELAY_S, self._interval)
            while True:
                _, pause = await self._ledger_pass()
                await trio.sleep(pause)
