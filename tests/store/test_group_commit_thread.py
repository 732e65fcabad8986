"""The group commit's own flusher thread: it makes the same bytes durable as an inline flush, logs a sync the disk
fails and hands any other flush error back to the Trio task, keeps working after either, and never lets a cancelled
caller go while it still uses the files."""

from __future__ import annotations

import errno
import threading
from pathlib import Path
from typing import Any, cast

import pytest
import trio

from store.failure_streak import FailureStreak
from store.mapped_file import MappedFile
from store.services import _SyncThread
from store.store_config import FlushDiskType
from tests.store.store_helpers import message, open_store


class _Segment:
    """What flush_segments reads of a segment besides its ``flush``: each fake keeps its own failure streak."""

    def __init__(self) -> None:
        self.sync_streak = FailureStreak()


class _DiskGone(_Segment):
    """A segment whose sync fails, as on a failing disk (the real MappedFile.flush raises the same OSError)."""

    path = Path("disk-gone")
    flushed_position = 0

    def flush(self) -> int:
        raise OSError(errno.EIO, "disk gone")


class _Broken(_Segment):
    """A segment whose flush fails with a bug, not a disk error."""

    def flush(self) -> int:
        raise RuntimeError("flush bug")


class _SlowDisk(_Segment):
    """A segment whose sync takes until the test lets it finish."""

    def __init__(self) -> None:
        super().__init__()
        self.started = threading.Event()
        self.release = threading.Event()
        self.done = False

    def flush(self) -> int:
        self.started.set()
        self.release.wait(10)
        self.done = True
        return 0


def _files(*items: Any) -> list[MappedFile]:
    return cast(list[MappedFile], list(items))


async def test_thread_flushes_the_same_bytes_as_an_inline_flush(tmp_path: Path) -> None:
    mf = MappedFile(tmp_path / "00000000000000000000", 0, 1 << 16)
    mf.buf[0:5] = b"hello"
    mf.wrote_position = 5
    thread = _SyncThread()
    try:
        await thread.sync([mf])
    finally:
        thread.close()
    assert mf.flushed_position == 5
    mf.close()
    assert (tmp_path / "00000000000000000000").read_bytes()[:5] == b"hello"


async def test_a_disk_error_is_logged_another_error_reaches_the_caller_and_the_thread_keeps_working(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """A failed sync is logged and ends the run (MappedFile.flush catches it: store/src/main/java/org/apache/rocketmq/
    store/MappedFile.java); any other error of a flush is the caller's to see."""
    thread = _SyncThread()
    try:
        await thread.sync(_files(_DiskGone()))
        assert thread.syncs == 0
        assert "Error occurred when force data to disk" in caplog.text
        with pytest.raises(RuntimeError, match="flush bug"):
            await thread.sync(_files(_Broken()))
        slow = _SlowDisk()
        slow.release.set()
        await thread.sync(_files(slow))
        assert slow.done
    finally:
        thread.close()


async def test_cancelling_a_sync_waits_for_the_thread_to_finish_with_the_files() -> None:
    thread = _SyncThread()
    slow = _SlowDisk()
    scope = trio.CancelScope()
    returned: list[bool] = []

    async def sync() -> None:
        with scope:
            await thread.sync(_files(slow))
            await trio.lowlevel.checkpoint()
        returned.append(slow.done)

    try:
        async with trio.open_nursery() as nursery:
            nursery.start_soon(sync)
            await trio.to_thread.run_sync(slow.started.wait)
            scope.cancel()
            await trio.sleep(0.05)  # room for a wrong early return
            assert not returned  # still syncing: the caller has not been let go
            slow.release.set()
        assert returned == [True] and scope.cancelled_caught
    finally:
        slow.release.set()
        thread.close()


async def test_group_commit_acks_only_synced_records(tmp_path: Path) -> None:
    store = open_store(tmp_path, flush_disk_type=FlushDiskType.SYNC_FLUSH)
    ends: list[int] = []
    async with trio.open_nursery() as nursery:
        await nursery.start(store.run)

        async def writer() -> None:
            for _ in range(20):
                result = await store.put(message())
                assert store.flush_watermark >= result.append.end_offset
                ends.append(result.append.end_offset)

        async with trio.open_nursery() as writers:
            for _ in range(8):
                writers.start_soon(writer)
        nursery.cancel_scope.cancel()
    assert len(ends) == 160 and max(ends) == store.max_phy_offset


async def test_a_run_starts_each_next_sync_on_the_thread_without_the_trio_loop() -> None:
    """While ``more()`` holds, the thread syncs again as soon as a sync ends: three syncs happen while the Trio
    thread is blocked outside the loop, and the run then reports idle."""
    thread = _SyncThread()
    flushed: list[int] = []
    third = threading.Event()

    class _Counted(_Segment):
        def flush(self) -> int:
            flushed.append(1)
            if len(flushed) == 3:
                third.set()
            return 0

    try:
        thread.begin(lambda: _files(_Counted()), lambda: len(flushed) < 3)
        assert third.wait(10)  # the Trio thread blocks here: no task of the loop runs meanwhile
        while await thread.wait():
            pass
        assert len(flushed) == 3 and thread.syncs == 3 and not thread.busy
    finally:
        thread.close()


async def test_the_trio_task_learns_of_a_sync_while_the_next_one_runs() -> None:
    """Each finished sync signals the task at once: it can answer the first sync's waiters while the second sync is
    still under way (the run goes on, :meth:`wait` says busy)."""
    thread = _SyncThread()
    first, second = _SlowDisk(), _SlowDisk()
    first.release.set()
    snapshots = iter([[first], [second]])
    try:
        thread.begin(lambda: _files(*next(snapshots, [])), lambda: not second.started.is_set())
        with trio.fail_after(10):
            assert await thread.wait()  # busy: the second sync runs
        assert first.done
        await trio.to_thread.run_sync(second.started.wait)
        assert not second.done
        second.release.set()
        with trio.fail_after(10):
            while await thread.wait():
                pass
        assert second.done and thread.syncs == 2
    finally:
        first.release.set()
        second.release.set()
        thread.close()


async def test_stop_ends_a_run_after_the_sync_under_way() -> None:
    thread = _SyncThread()
    slow = _SlowDisk()
    try:
        thread.begin(lambda: _files(slow), lambda: True)  # would sync forever
        await trio.to_thread.run_sync(slow.started.wait)
        thread.stop()
        slow.release.set()
        with trio.fail_after(10):
            while await thread.wait():
                pass
        assert not thread.busy and thread.syncs >= 1
    finally:
        slow.release.set()
        thread.close()
