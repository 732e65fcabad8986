"""The pace of a DLedger store's retention tasks against RocketMQ 4.9.8's (DefaultMessageStore.addScheduleTask runs
cleanFilesPeriodically in DLedger mode too) and DLedger 0.3.1.2's CleanSpaceService, under virtual time, on real
files. Each failed before its fix."""

from __future__ import annotations

import logging
from pathlib import Path

import attrs
import pytest
import trio
import trio.testing

from dledger.commitlog_store import DLedgerMessageStore
from tests.dledger.test_retention import Disk, age, keyed_records, keyed_store, member_store


async def test_an_unreadable_delete_when_is_logged_once_every_200_ms(
    tmp_path: Path, autojump_clock: trio.testing.MockClock, caplog: pytest.LogCaptureFixture
) -> None:
    """CleanSpaceService.doWork (dledger/.../store/file/DLedgerMmapFileStore.java) catches the failure of a pass,
    logs it and sleeps 200 ms (``DLedgerUtils.sleep(200)``) instead of its ``waitForRunning(100)``: a deleteWhen
    Integer.parseInt cannot read is logged 5 times a second, not 10. Set at the start: DLedger's copy of deleteWhen
    is renewed only by a CleanCommitLogService pass, which such a value fails first."""
    store = keyed_store(tmp_path, disk_usage_ratio=Disk(0.5), delete_when="abc")
    caplog.set_level(logging.INFO, logger="dledger.retention")
    async with trio.open_nursery() as nursery:
        nursery.start_soon(store.retention.run)
        await trio.sleep(10.05)
        nursery.cancel_scope.cancel()
    store.close()
    errors = [r for r in caplog.records if "CleanSpaceService" in r.getMessage()]
    assert 48 <= len(errors) <= 52


async def test_queue_and_index_files_below_the_log_wait_for_the_pass_a_minute_after_the_start(
    tmp_path: Path, autojump_clock: trio.testing.MockClock
) -> None:
    """In DLedger mode CleanConsumeQueueService runs in cleanFilesPeriodically, a minute after the start and then
    every cleanResourceInterval (DefaultMessageStore.java addScheduleTask), not in DLedger's 100 ms pass: a member
    restarted with queue files below its log's first entry keeps them for that minute."""
    store = keyed_store(tmp_path)
    while len(store.index.files) < 3 or len(store.ledger.data.files) < 3:  # type: ignore[union-attr]
        keyed_records(store, 8)
    keyed_records(store, 40, size=300)
    ledger = store.ledger
    assert ledger.delete_expired(0, ledger.committed_pos, force=True) > 0  # killed before the queue files went
    store.close()
    cq_first = tmp_path / "consumequeue" / "TopicTest" / "0" / f"{0:020d}"
    again = keyed_store(tmp_path, disk_usage_ratio=Disk(0.1), delete_when="99")
    try:
        async with trio.open_nursery() as nursery:
            nursery.start_soon(again.retention.run)
            files = again.consume_queues["TopicTest", 0].queue.files
            count = len(files)
            await trio.sleep(59)
            assert len(files) == count and cq_first.exists(), "went before cleanFilesPeriodically's first run"
            await trio.sleep(1.5)
            assert len(files) < count  # taken out at 60 s; unlinked in a disk thread, while virtual time runs on
            with trio.fail_after(600):
                while cq_first.exists():
                    await trio.sleep(1)
            nursery.cancel_scope.cancel()
    finally:
        again.close()


async def test_a_spike_above_90_percent_is_refused_by_dledger_alone_and_ends_with_it(
    tmp_path: Path, autojump_clock: trio.testing.MockClock
) -> None:
    """Above 0.90 DLedger's own flag refuses writes from its next 100 ms pass and lets them in again at the first
    pass at or below it (CleanSpaceService's isNeedForbiddenWrite); the store's flag is set by the 10 s disk check
    and CleanCommitLogService's passes alone (DefaultMessageStore.java isSpaceFull, isSpaceToDelete), every 10 s.
    A spike between two of those leaves it unset: ours set it in the 100 ms pass and kept refusing sends at 88 %
    until the next 10 s check."""
    store = member_store(tmp_path)
    disk = Disk(0.5)
    store.config = attrs.evolve(store.config, disk_usage_ratio=disk, delete_when="99")
    store.delete_expired_entries = lambda _expire_before, *, force, limit: 0  # type: ignore[method-assign]
    async with trio.open_nursery() as nursery:
        nursery.start_soon(store.retention.run)
        await trio.sleep(2.05)  # past the disk check at 1 s; the next is at 11 s
        disk.ratio = 0.95
        await trio.sleep(0.3)
        assert store.ledger.disk_full
        disk.ratio = 0.88
        await trio.sleep(0.3)
        assert not store.ledger.disk_full
        assert store.disk_full_reason is None
        nursery.cancel_scope.cancel()
    store.close()


def aged_store(root: Path, hours: float) -> DLedgerMessageStore:
    """A single member (deleteWhen 99: no hour is due) whose entry segments were last modified ``hours`` ago."""
    store = keyed_store(root, delete_when="99")
    while len(store.ledger.data.files) < 4:
        keyed_records(store, 8, size=300)
    for mf in store.ledger.data.files:
        age(mf.path, hours)
    return store


async def test_a_file_reserved_time_update_reaches_dledger_at_the_next_clean_commit_log_pass_due(
    tmp_path: Path, autojump_clock: trio.testing.MockClock
) -> None:
    """DLedger's CleanSpaceService reads its own copy of the settings, which DLedgerCommitLog's constructor fills and
    its refreshConfig renews only when CleanCommitLogService's pass is due (store/src/main/java/org/apache/rocketmq/
    store/dledger/DLedgerCommitLog.java deleteExpiredFile): an UPDATE_BROKER_CONFIG of fileReservedTime=1 made after
    the start, the disk at 80 % (past diskMaxUsedSpaceRatio 75), takes the segments 10 h old at the first pass, a
    minute after the start, not in DLedger's next 100 ms pass."""
    store = aged_store(tmp_path, 10)
    count = len(store.ledger.data.files)
    store.config = attrs.evolve(store.config, disk_usage_ratio=Disk(0.80), file_reserved_time=1)
    before, after = await segments_after(store, 59, 1.5)
    assert before == count, "DLedger went by fileReservedTime before its settings were refreshed"
    assert after < count


async def test_a_disk_max_used_space_ratio_update_never_reaches_dledger_s_pass(
    tmp_path: Path, autojump_clock: trio.testing.MockClock
) -> None:
    """DLedgerCommitLog copies diskMaxUsedSpaceRatio into DLedger's diskSpaceRatioToCheckExpired in its constructor
    alone (refreshConfig renews deleteWhen, fileReservedHours and enableDiskForceClean): lowered to 50 after the
    start, the disk at 60 %, CleanCommitLogService's passes are due but DLedger deletes no entry segment, however
    old, until the broker restarts."""
    store = aged_store(tmp_path, 1000)
    count = len(store.ledger.data.files)
    store.config = attrs.evolve(store.config, disk_usage_ratio=Disk(0.60), disk_max_used_space_ratio=50)
    assert await segments_after(store, 120) == [count]


async def segments_after(store: DLedgerMessageStore, *waits: float) -> list[int]:
    """How many entry segments ``store`` has after each of ``waits`` seconds of its retention, run from now; the
    store is closed after."""
    counts = []
    async with trio.open_nursery() as nursery:
        nursery.start_soon(store.retention.run)
        for wait in waits:
            await trio.sleep(wait)
            counts.append(len(store.ledger.data.files))
        nursery.cancel_scope.cancel()
    store.close()
    return counts
