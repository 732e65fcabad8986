"""Flush services: group commit under SYNC_FLUSH, FLUSH_DISK_TIMEOUT, the periodic ASYNC_FLUSH timer (virtual time),
segment preallocation, and shutdown by cancellation."""

from __future__ import annotations

from pathlib import Path

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
        assert store.flush_watermark == store.max_phy_offset
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
