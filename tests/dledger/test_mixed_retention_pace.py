"""The pace of a mixed store's retention (dledger/retention.py) against RocketMQ 4.9.8: its classic segments go in
CleanCommitLogService's pass, which DefaultMessageStore schedules a minute after the start and then every
``cleanResourceInterval`` in DLedger mode too (store/src/main/java/org/apache/rocketmq/store/DefaultMessageStore.java
addScheduleTask, cleanFilesPeriodically; DLedgerCommitLog.deleteExpiredFile), not in DLedger's 100 ms
CleanSpaceService. Real files, virtual time."""

from __future__ import annotations

import datetime
from pathlib import Path

import pytest
import trio
import trio.testing

from dledger import commitlog_store
from dledger.commitlog_store import DLedgerMessageStore
from store.maintenance import MAX_MANUAL_DELETE_FILE_TIMES
from store.mapped_file import destroy_segments
from store.services import FIRST_PASS_DELAY_S
from tests.dledger.test_mixed_commitlog import classic_store, dledger_store
from tests.dledger.test_retention import age
from tests.store.test_retention import Disk

#: MappedFileQueue.deleteExpiredFileByTime's DELETE_FILES_BATCH_MAX
BATCH = 10


async def destroy_inline(files: object, _limiter: object) -> None:
    """The taken files destroyed on the Trio thread: a worker thread would let the virtual clock jump meanwhile."""
    destroy_segments(files)  # type: ignore[arg-type]


def another_hour() -> str:
    """A ``deleteWhen`` hour twelve hours from now: no pass is due by the hour."""
    return f"{(datetime.datetime.now().hour + 12) % 24:02d}"


def expired_mixed_store(tmp_path: Path, messages: int) -> DLedgerMessageStore:
    """A DLedger store over a classic one of ``messages`` messages whose segments are all 80 h old (past a 72 h
    ``fileReservedTime``), no pass due by the hour or the disk, and a manual delete's 20 rounds to use."""
    classic, _ = classic_store(tmp_path, messages)
    classic.close()
    store = dledger_store(tmp_path, delete_when=another_hour(), file_reserved_time=72, disk_usage_ratio=Disk(0.1))
    for mf in store.commitlog.classic.queue.files:
        age(mf.path, 80)
    store.retention.manual_delete_times = MAX_MANUAL_DELETE_FILE_TIMES
    return store


async def test_a_manual_delete_in_a_mixed_store_lasts_twenty_clean_commit_log_passes(
    tmp_path: Path, autojump_clock: trio.testing.MockClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    """DELETE_EXPIRED_COMMITLOG sets CleanCommitLogService's manualDeleteFileSeveralTimes to 20, and each of its
    passes (the first a minute after the start, then every cleanResourceInterval) uses one and deletes at most 10
    expired classic segments: the manual delete reaches the classic segments over about 200 s. Ours ran the classic
    deletion in DLedger's 100 ms pass: the 20 rounds were used up within 2 s, 10 segments each."""
    monkeypatch.setattr(commitlog_store, "destroy_off_thread", destroy_inline)
    store = expired_mixed_store(tmp_path, 1000)
    interval = store.config.clean_resource_interval / 1000
    try:
        segments = store.classic_segments()
        assert segments > 3 * BATCH
        async with trio.open_nursery() as nursery:
            nursery.start_soon(store.retention.run)
            await trio.sleep(FIRST_PASS_DELAY_S - 1)
            assert (store.classic_segments(), store.retention.manual_delete_times) == (segments, 20)
            await trio.sleep(2)  # the first pass
            assert (store.classic_segments(), store.retention.manual_delete_times) == (segments - BATCH, 19)
            await trio.sleep(interval)
            assert (store.classic_segments(), store.retention.manual_delete_times) == (segments - 2 * BATCH, 18)
            await trio.sleep(17 * interval)
            assert store.retention.manual_delete_times == 1
            await trio.sleep(interval)
            assert store.retention.manual_delete_times == 0
            nursery.cancel_scope.cancel()
    finally:
        store.close()


async def test_a_mixed_stores_last_classic_segment_goes_in_a_pass_that_deleted_no_other(
    tmp_path: Path, autojump_clock: trio.testing.MockClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    """4.9.8's DLedgerCommitLog.deleteExpiredFile deletes the classic segments as the classic store does, the newest
    kept, and the last one only in a pass that deleted no other and found it alone (``count > 0 || size != 1``
    returns first): the classic part is gone one CleanCommitLogService pass after its older segments. Ours took the
    last one in the same pass."""
    monkeypatch.setattr(commitlog_store, "destroy_off_thread", destroy_inline)
    store = expired_mixed_store(tmp_path, 60)
    interval = store.config.clean_resource_interval / 1000
    try:
        assert 1 < store.classic_segments() < BATCH
        async with trio.open_nursery() as nursery:
            nursery.start_soon(store.retention.run)
            await trio.sleep(FIRST_PASS_DELAY_S + 1)  # the first pass
            assert store.classic_segments() == 1
            await trio.sleep(interval)
            assert store.classic_segments() == 0
            nursery.cancel_scope.cancel()
    finally:
        store.close()
