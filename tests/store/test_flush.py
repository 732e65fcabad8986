"""Flush services: group commit under SYNC_FLUSH, FLUSH_DISK_TIMEOUT, the periodic ASYNC_FLUSH timer (virtual time),
segment preallocation, and shutdown by cancellation."""

from __future__ import annotations

import errno
import math
import os
from pathlib import Path

import pytest
import trio
import trio.testing

from store.results import PutStatus
from store.store_config import FlushDiskType
from tests.store.store_helpers import message, open_store


async def test_group_commit_releases_many_concurrent_writers_with_few_syncs(tmp_path: Path) -> None:
    # No periodic flush during the test: only group commits make the writes durable here.
    store = open_store(
        tmp_path,
        flush_disk_type=FlushDiskType.SYNC_FLUSH,
        mapped_file_size_commit_log=1 << 20,
        flush_interval_commit_log=600_000,
    )
    writers = 64
    statuses: list[PutStatus] = []
    async with trio.open_nursery() as nursery:
        await nursery.start(store.run)

        async def writer(i: int) -> None:
            result = await store.put(message(body=b"x" * 100, queue_id=i % 4))
            assert store.flush_watermark >= result.append.end_offset
            statuses.append(result.status)

        async with trio.open_nursery() as writers_nursery:
            for i in range(writers):
                writers_nursery.start_soon(writer, i)
        nursery.cancel_scope.cancel()
    assert statuses == [PutStatus.PUT_OK] * writers
    # Every writer registered before the first sync finished, so a handful of syncs covered all 64.
    assert 1 <= store.group_commit.rounds <= 4


async def test_sync_flush_wait_times_out_with_flush_disk_timeout(
    tmp_path: Path, autojump_clock: trio.testing.MockClock
) -> None:
    store = open_store(tmp_path, flush_disk_type=FlushDiskType.SYNC_FLUSH, sync_flush_timeout=5000)
    async with trio.open_nursery() as nursery:
        await nursery.start(store.run)
        async with store.disk_lock:  # a disk that never completes the sync
            start = trio.current_time()
            result = await store.put(message())
            assert result.status is PutStatus.FLUSH_DISK_TIMEOUT
            assert trio.current_time() - start >= 5.0
        # Once the disk answers, the pending group commit makes the record durable.
        while store.flush_watermark < result.append.end_offset:
            await trio.sleep(0.001)
        nursery.cancel_scope.cancel()


async def test_put_without_waiting_returns_at_once_under_sync_flush(tmp_path: Path) -> None:
    store = open_store(tmp_path, flush_disk_type=FlushDiskType.SYNC_FLUSH)
    async with trio.open_nursery() as nursery:
        await nursery.start(store.run)
        async with store.disk_lock:
            result = await store.put(message(), wait_flush=False)
        assert result.status is PutStatus.PUT_OK
        nursery.cancel_scope.cancel()


async def test_async_flush_runs_every_flush_interval(tmp_path: Path, autojump_clock: trio.testing.MockClock) -> None:
    store = open_store(tmp_path, flush_interval_commit_log=500)
    async with trio.open_nursery() as nursery:
        await nursery.start(store.run)
        result = await store.put(message())
        assert result.status is PutStatus.PUT_OK
        start = trio.current_time()
        assert store.flush_watermark == 0
        while store.flush_service.rounds == 0:
            await trio.sleep(0.01)
        assert trio.current_time() - start >= 0.49
        assert store.flush_watermark == store.max_phy_offset  # the first round is thorough (Java's starts at 0)
        # The checkpoint moves in the ConsumeQueue flush's thorough round, the first at flushIntervalConsumeQueue.
        while store.flush_service.checkpoints == 0:
            await trio.sleep(0.01)
        assert trio.current_time() - start >= 0.99
        assert store.checkpoint is not None and store.checkpoint.safe_offset == store.max_phy_offset
        nursery.cancel_scope.cancel()


async def test_next_segment_is_preallocated_in_the_background(tmp_path: Path) -> None:
    store = open_store(tmp_path, mapped_file_size_commit_log=4096, warm_mapped_file_enable=True)
    async with trio.open_nursery() as nursery:
        await nursery.start(store.run)
        while store.commitlog.queue.last() is None or store.commitlog.queue.last().file_from_offset == 0:
            store.append(message(body=bytes(500)))
        while store.allocate_service.allocated == 0:
            await trio.sleep(0.001)
        spare = store.commitlog.queue.spare
        assert spare is not None and spare.file_from_offset == 8192
        while store.commitlog.queue.last().file_from_offset == 4096:
            store.append(message(body=bytes(500)))
        assert store.commitlog.queue.last() is spare
        nursery.cancel_scope.cancel()
    assert not list((tmp_path / "commitlog").glob("*.alloc"))


async def test_cancelling_the_store_flushes_checkpoints_and_removes_abort(tmp_path: Path) -> None:
    store = open_store(tmp_path)
    async with trio.open_nursery() as nursery:
        await nursery.start(store.run)
        assert (tmp_path / "abort").exists()
        await store.put(message())
        nursery.cancel_scope.cancel()
    assert not (tmp_path / "abort").exists()
    reopened = open_store(tmp_path)
    assert not reopened.abnormal_recovery
    assert reopened.max_offset_in_queue("TopicTest", 0) == 1
    reopened.close()


def _failing_disk(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """Every ``fdatasync`` fails with EIO (a disk error) until the test undoes the patch; returns the attempts."""
    attempts: list[int] = []

    def fdatasync(fd: int) -> None:
        attempts.append(fd)
        raise OSError(errno.EIO, os.strerror(errno.EIO))

    monkeypatch.setattr(os, "fdatasync", fdatasync)
    return attempts


async def test_a_failing_fdatasync_times_out_sync_flush_sends_and_a_later_flush_catches_up(
    tmp_path: Path, autojump_clock: trio.testing.MockClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    """MappedFile.flush (store/src/main/java/org/apache/rocketmq/store/MappedFile.java) catches a failed force, logs
    "Error occurred when force data to disk." and goes on: the group commit and the periodic flush keep running, the
    send whose bytes were not synced gets FLUSH_DISK_TIMEOUT, and once the disk answers again a sync covers it."""
    store = open_store(tmp_path, flush_disk_type=FlushDiskType.SYNC_FLUSH, sync_flush_timeout=5000)
    async with trio.open_nursery() as nursery:
        await nursery.start(store.run)
        attempts = _failing_disk(monkeypatch)
        failed = await store.put(message(body=b"unsynced"))
        assert failed.status is PutStatus.FLUSH_DISK_TIMEOUT
        while not attempts:  # the syncs (the group commit's, the periodic flush's) fail
            await trio.sleep(0.5)
        assert store.flush_watermark < failed.append.end_offset
        assert store.checkpoint is not None and store.checkpoint.safe_offset < failed.append.end_offset
        monkeypatch.undo()
        autojump_clock.autojump_threshold = math.inf  # real syncs from here on: no virtual timeout meanwhile
        ok = await store.put(message(body=b"synced"))
        assert ok.status is PutStatus.PUT_OK
        assert store.flush_watermark >= ok.append.end_offset > failed.append.end_offset
        nursery.cancel_scope.cancel()
    reopened = open_store(tmp_path)
    assert reopened.max_offset_in_queue("TopicTest", 0) == 2
    reopened.close()


async def test_a_failing_fdatasync_under_async_flush_keeps_the_store_running(
    tmp_path: Path, autojump_clock: trio.testing.MockClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    """ASYNC_FLUSH's periodic flush logs a failed sync and tries again at the next interval (CommitLog.java
    FlushRealTimeService over MappedFile.flush), rather than ending the store: writes go on, nothing counts as
    durable, and the first flush that succeeds makes everything durable and moves the checkpoint."""
    store = open_store(tmp_path, flush_interval_commit_log=500)
    async with trio.open_nursery() as nursery:
        await nursery.start(store.run)
        attempts = _failing_disk(monkeypatch)
        first = await store.put(message())
        while len(attempts) < 3:
            await trio.sleep(0.5)
        second = await store.put(message())
        assert first.status is second.status is PutStatus.PUT_OK
        assert store.flush_watermark == 0
        assert store.checkpoint is not None and store.checkpoint.safe_offset == 0
        monkeypatch.undo()
        while store.checkpoint.safe_offset < second.append.end_offset:
            await trio.sleep(0.5)
        assert store.flush_watermark == store.max_phy_offset
        nursery.cancel_scope.cancel()


async def test_a_disk_that_keeps_failing_is_logged_once_until_a_sync_succeeds(
    tmp_path: Path,
    autojump_clock: trio.testing.MockClock,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    """A dead disk fails every periodic flush (every 500 ms) and every group commit: one traceback per streak, not one
    per attempt, or the log fills as fast as the sends come; the sync that succeeds again says so."""
    store = open_store(tmp_path, flush_interval_commit_log=500)
    async with trio.open_nursery() as nursery:
        await nursery.start(store.run)
        attempts = _failing_disk(monkeypatch)
        put = await store.put(message())
        while len(attempts) < 5:
            await trio.sleep(0.5)
        monkeypatch.undo()
        while store.checkpoint is not None and store.checkpoint.safe_offset < put.append.end_offset:
            await trio.sleep(0.5)
        nursery.cancel_scope.cancel()
    errors = [r for r in caplog.records if r.getMessage().startswith("Error occurred when force data to disk")]
    assert len(errors) == 1, [r.getMessage() for r in errors]
    assert any("succeeded again" in r.getMessage() for r in caplog.records)
