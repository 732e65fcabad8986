"""The group commit's callback waiters (``notify_flushed``): released in offset order by the sync that covers them,
FLUSH_DISK_TIMEOUT (``False``) for those it does not cover once ``syncFlushTimeout`` passes (virtual time), and the
awaitable ``flush_status`` built on the same list gives the same answers."""

from __future__ import annotations

import math
import threading
import time
from collections.abc import Callable
from pathlib import Path

import pytest
import trio
import trio.testing

from store import services
from store.mapped_file import MappedFile
from store.results import PutStatus
from store.store_config import FlushDiskType
from tests.store.store_helpers import message, open_store


async def test_callbacks_are_released_in_offset_order_once_durable(tmp_path: Path) -> None:
    store = open_store(tmp_path, flush_disk_type=FlushDiskType.SYNC_FLUSH, flush_interval_commit_log=600_000)
    released: list[tuple[int, bool, int]] = []
    async with trio.open_nursery() as nursery:
        await nursery.start(store.run)
        ends = []
        async with store.disk_lock:  # no sync can start: every waiter is registered before the first one
            for i in range(10):
                end = store.append(message(body=b"m%d" % i)).end_offset
                ends.append(end)

                def done(ok: bool, end: int = end) -> None:
                    released.append((end, ok, store.flush_watermark))

                assert store.notify_flushed(end, done)
        while len(released) < len(ends):
            await trio.sleep(0.001)
        nursery.cancel_scope.cancel()
    assert [end for end, _, _ in released] == ends
    assert all(ok and watermark >= end for end, ok, watermark in released)


async def test_a_mix_of_covered_and_uncovered_waiters(tmp_path: Path, autojump_clock: trio.testing.MockClock) -> None:
    store = open_store(tmp_path, flush_disk_type=FlushDiskType.SYNC_FLUSH, sync_flush_timeout=3000)
    released: list[tuple[str, bool, float]] = []

    def waiter(name: str) -> Callable[[bool], None]:
        return lambda ok: released.append((name, ok, trio.current_time()))

    async with trio.open_nursery() as nursery:
        await nursery.start(store.run)
        autojump_clock.autojump_threshold = math.inf  # a real sync takes real time: no jumping past its deadline
        first = store.append(message()).end_offset
        assert store.notify_flushed(first, waiter("first"))
        assert await store.flush_status(first, True) is PutStatus.PUT_OK
        assert [(name, ok) for name, ok, _ in released] == [("first", True)]
        autojump_clock.autojump_threshold = 0
        async with store.disk_lock:  # a disk that never completes the next sync
            start = trio.current_time()
            second = store.append(message()).end_offset
            assert store.notify_flushed(second, waiter("second"))
            assert store.notify_flushed(first, waiter("already durable"))
            assert await store.flush_status(second, True) is PutStatus.FLUSH_DISK_TIMEOUT
            assert [(name, ok) for name, ok, _ in released[1:]] == [("second", False), ("already durable", False)]
            assert all(at - start >= 3.0 for _, _, at in released[1:])
        while store.flush_watermark < second:
            await trio.sleep(0.001)
        nursery.cancel_scope.cancel()
    assert len(released) == 3  # each callback runs exactly once


async def test_a_failing_callback_does_not_stop_the_others(tmp_path: Path) -> None:
    store = open_store(tmp_path, flush_disk_type=FlushDiskType.SYNC_FLUSH)
    released: list[bool] = []

    def broken(ok: bool) -> None:
        raise RuntimeError("owner bug")

    async with trio.open_nursery() as nursery:
        await nursery.start(store.run)
        end = store.append(message()).end_offset
        assert store.notify_flushed(end, broken)
        assert store.notify_flushed(end, released.append)
        assert await store.flush_status(end, True) is PutStatus.PUT_OK
        nursery.cancel_scope.cancel()
    assert released == [True]


async def test_shutdown_answers_pending_callbacks_false_and_registration_needs_the_service(tmp_path: Path) -> None:
    store = open_store(tmp_path, flush_disk_type=FlushDiskType.SYNC_FLUSH)
    released: list[bool] = []
    end = store.append(message()).end_offset
    assert not store.notify_flushed(end, released.append)
    async with trio.open_nursery() as nursery:
        await nursery.start(store.run)
        async with store.disk_lock:
            assert store.notify_flushed(end + 1_000_000, released.append)
            nursery.cancel_scope.cancel()
    assert released == [False]


@pytest.mark.timeout(30)  # without the guard the service spins and virtual time never reaches the deadline
async def test_a_waiter_past_the_appended_end_times_out_without_the_service_spinning(
    tmp_path: Path, autojump_clock: trio.testing.MockClock
) -> None:
    store = open_store(tmp_path, flush_disk_type=FlushDiskType.SYNC_FLUSH, sync_flush_timeout=3000)
    released: list[tuple[bool, float]] = []
    async with trio.open_nursery() as nursery:
        await nursery.start(store.run)
        autojump_clock.autojump_threshold = math.inf  # the real sync below takes real time
        end = store.append(message()).end_offset
        assert await store.flush_status(end, True) is PutStatus.PUT_OK
        autojump_clock.autojump_threshold = 0
        start = trio.current_time()
        assert store.notify_flushed(end + 4096, lambda ok: released.append((ok, trio.current_time())))
        while not released:
            await trio.sleep(0.5)
        nursery.cancel_scope.cancel()
    [(ok, at)] = released
    assert not ok and at - start >= 3.0


async def test_poll_answers_a_finished_syncs_waiters_before_the_service_task_runs(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The send path's ``poll()``: once the flusher has signalled a finished sync, the waiters it covered are
    answered inside the caller's own step (a reader busy with a burst), before the group commit's task is scheduled;
    with nothing finished it answers nobody."""
    store = open_store(tmp_path, flush_disk_type=FlushDiskType.SYNC_FLUSH, flush_interval_commit_log=600_000)
    released: list[bool] = []
    # The flusher thread's syncs wait for the test's go: a sync ending before the group commit's task is blocked on
    # its signal would be answered by that task, not by poll().
    go = threading.Event()
    real_flush = services._flush_files

    def gated_flush(files: list[MappedFile]) -> int:
        go.wait(30)
        return real_flush(files)

    monkeypatch.setattr(services, "_flush_files", gated_flush)
    async with trio.open_nursery() as nursery:
        await nursery.start(store.run)
        group_commit = store.group_commit
        thread = group_commit._thread
        assert thread is not None
        end = store.append(message()).end_offset
        async with store.disk_lock:  # the run cannot start yet
            assert store.notify_flushed(end, released.append)
            await trio.testing.wait_all_tasks_blocked()
            group_commit.poll()
            assert released == []  # no sync ended: nothing to answer
        await trio.testing.wait_all_tasks_blocked()  # the run has begun: the task awaits the flusher's signal
        # From here on this task never yields, so no other task runs: only poll() can answer.
        go.set()
        for _ in range(10_000):  # a hang guard, not a timing
            if thread.fresh:
                break
            time.sleep(0.001)  # blocks the Trio thread; the flusher thread syncs meanwhile
        assert thread.fresh and store.flush_watermark >= end
        assert released == []
        group_commit.poll()
        assert released == [True]
        nursery.cancel_scope.cancel()
