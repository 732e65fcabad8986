"""``flushCommitLogTimed`` (RocketMQ 4.9.8's CommitLog.FlushRealTimeService): true sleeps the whole
``flushIntervalCommitLog`` between rounds; false waits on the append wake-up (``waitForRunning(interval)``, woken by
each ASYNC_FLUSH put), so a round starts as appends arrive, still bounded by ``flushCommitLogLeastPages``.

Under a frozen Trio clock with real files: time only moves when a test jumps it, so a flush that happens while it
stands still was started by an append, never by a timer; the flush calls are counted by ``FlushService.rounds``
(rounds that synced something)."""

from __future__ import annotations

import math
from pathlib import Path

import attrs
import trio
import trio.testing

from store.mapped_file import PAGE_SIZE
from store.message_store import MessageStore
from store.store_config import FlushDiskType
from tests.store.store_helpers import message, open_store

#: No thorough round, no ConsumeQueue round inside a test's window.
NEVER = 600_000


async def _settled(store: MessageStore) -> None:
    """Until every task waits and no disk thread of the store runs (a sync under way has been answered)."""
    while True:
        await trio.testing.wait_all_tasks_blocked()
        if store.disk_limiter.borrowed_tokens == 0:
            await trio.testing.wait_all_tasks_blocked()
            if store.disk_limiter.borrowed_tokens == 0:
                return


def _append_pages(store: MessageStore, pages: int) -> None:
    """Append 1000-byte messages until ``pages`` more 4 KiB pages of the CommitLog are written."""
    goal = (store.max_phy_offset // PAGE_SIZE + pages) * PAGE_SIZE
    while store.max_phy_offset < goal:
        store.append(message(body=bytes(1000)))


def _untimed_store(tmp_path: Path, **overrides: object) -> MessageStore:
    settings: dict[str, object] = {
        "mapped_file_size_commit_log": 1 << 20,
        "flush_commit_log_timed": False,
        "flush_commit_log_thorough_interval": NEVER,
        "flush_interval_consume_queue": NEVER,
    }
    settings.update(overrides)
    return open_store(tmp_path, **settings)


async def _past_the_first_round(store: MessageStore, clock: trio.testing.MockClock) -> None:
    """The first round is thorough (Java's ``lastFlushTimestamp`` starts at 0): let it pass on an empty log."""
    clock.jump(store.config.flush_interval_commit_log / 1000)
    await _settled(store)


async def test_untimed_flush_syncs_each_append_that_makes_the_least_pages_at_once(
    tmp_path: Path, autojump_clock: trio.testing.MockClock
) -> None:
    """flushCommitLogTimed=false: every append wakes the loop, and each wake-up round syncs what reaches 4 unsynced
    pages with no time passing (one flush per such append); appends under 4 pages wake it but sync nothing."""
    autojump_clock.autojump_threshold = math.inf
    store = _untimed_store(tmp_path)
    async with trio.open_nursery() as nursery:
        await nursery.start(store.run)
        await _past_the_first_round(store, autojump_clock)
        flush = store.flush_service
        start, rounds = trio.current_time(), flush.rounds
        for step in range(1, 4):
            _append_pages(store, 3)
            await _settled(store)
            assert store.flush_watermark < store.max_phy_offset  # under the least pages: woken, nothing synced
            _append_pages(store, 1)
            await _settled(store)
            assert store.flush_watermark == store.max_phy_offset
            assert flush.rounds == rounds + step
        assert trio.current_time() == start  # no round was started by the clock
        nursery.cancel_scope.cancel()


async def test_timed_flush_waits_the_interval_whatever_the_appends(
    tmp_path: Path, autojump_clock: trio.testing.MockClock
) -> None:
    """flushCommitLogTimed=true (the default): the loop sleeps the whole interval, appends wake nothing; 4 unsynced
    pages are synced by the round after ``flushIntervalCommitLog``."""
    autojump_clock.autojump_threshold = math.inf
    store = _untimed_store(tmp_path, flush_commit_log_timed=True)
    async with trio.open_nursery() as nursery:
        await nursery.start(store.run)
        await _past_the_first_round(store, autojump_clock)
        rounds = store.flush_service.rounds
        _append_pages(store, 8)
        await _settled(store)
        assert store.flush_watermark == 0
        autojump_clock.jump(store.config.flush_interval_commit_log / 1000)
        await _settled(store)
        assert store.flush_watermark == store.max_phy_offset
        assert store.flush_service.rounds == rounds + 1
        nursery.cancel_scope.cancel()


async def test_untimed_flush_still_runs_its_rounds_every_interval_without_appends(
    tmp_path: Path, autojump_clock: trio.testing.MockClock
) -> None:
    """``waitForRunning(interval)`` times out: with no append a round still comes every interval, so a small write
    is synced once the thorough interval passed, and a setting changed at run time (timed again) applies."""
    autojump_clock.autojump_threshold = math.inf
    store = _untimed_store(tmp_path, flush_commit_log_thorough_interval=2_000)
    async with trio.open_nursery() as nursery:
        await nursery.start(store.run)
        await _past_the_first_round(store, autojump_clock)
        store.append(message(body=b"small"))
        await _settled(store)
        assert store.flush_watermark == 0  # woken, under the least pages
        for _ in range(4):  # rounds at 1.0, 1.5, 2.0 and 2.5 s: the last one is thorough
            autojump_clock.jump(0.5)
            await _settled(store)
        assert store.flush_watermark == store.max_phy_offset
        store.config = attrs.evolve(store.config, flush_commit_log_timed=True)
        autojump_clock.jump(0.5)  # the untimed wait under way ends; the loop sleeps from now on
        await _settled(store)
        _append_pages(store, 4)
        await _settled(store)
        assert store.flush_watermark < store.max_phy_offset
        autojump_clock.jump(0.5)
        await _settled(store)
        assert store.flush_watermark == store.max_phy_offset
        nursery.cancel_scope.cancel()


async def test_untimed_flush_leaves_the_sync_flush_idle_round_its_append_hook(
    tmp_path: Path, autojump_clock: trio.testing.MockClock
) -> None:
    """Java runs no FlushRealTimeService under SYNC_FLUSH: the setting changes nothing there, and the group
    commit's idle round (which listens on the same append hook) still syncs a send nobody waits for."""
    store = open_store(tmp_path, flush_disk_type=FlushDiskType.SYNC_FLUSH, mapped_file_size_commit_log=1 << 20,
                       flush_commit_log_timed=False, flush_commit_log_thorough_interval=NEVER,
                       flush_interval_consume_queue=NEVER)  # fmt: skip
    async with trio.open_nursery() as nursery:
        await nursery.start(store.run)
        autojump_clock.autojump_threshold = math.inf
        await _past_the_first_round(store, autojump_clock)
        store.append(message(body=b"no wait"))
        await _settled(store)
        assert store.flush_watermark == 0
        autojump_clock.jump(0.01)  # the group commit's 10 ms idle round
        await _settled(store)
        async with store.disk_lock:  # its sync (on the group commit's own thread) ends first
            assert store.flush_watermark == store.max_phy_offset
        nursery.cancel_scope.cancel()
