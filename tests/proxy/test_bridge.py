"""``TrioBridge`` between a real asyncio loop on its own thread and this test's Trio run: answers reach the right
callers, errors and cancellation cross it, and overlapping calls share their wake-ups."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
import trio

from proxy.bridge import BridgeClosed, TrioBridge


async def _on_loop(coro_fn: Any) -> Any:
    """Run ``coro_fn()`` on a fresh asyncio loop in a worker thread (as grpcio's server thread runs)."""
    return await trio.to_thread.run_sync(asyncio.run, coro_fn())


async def test_overlapping_calls_get_their_own_answers_and_share_wake_ups(nursery: trio.Nursery) -> None:
    bridge = TrioBridge(nursery)
    on_trio: list[int] = []

    def work(i: int) -> int:
        on_trio.append(i)
        return i * i

    async def slow(i: int) -> int:
        await trio.sleep(0)
        return -i

    async def callers() -> tuple[list[int], int, list[int]]:
        synchronous = list(await asyncio.gather(*(bridge.call_sync(work, i) for i in range(100))))
        wakeups = bridge.answer_wakeups
        tasks = list(await asyncio.gather(*(bridge.call(slow, i) for i in range(100))))
        return synchronous, wakeups, tasks

    synchronous, sync_wakeups, tasks = await _on_loop(callers)
    assert synchronous == [i * i for i in range(100)] and tasks == [-i for i in range(100)]
    assert sorted(on_trio) == list(range(100))
    # Each batch of 100 calls is issued in one loop step: far fewer hand-offs than calls. The 100 synchronous answers
    # are queued in one drain on the Trio thread, so they share wake-ups too (the tasks' answers come one by one, and
    # how many of those share depends on how the OS schedules the two threads: not asserted).
    assert bridge.handoffs < 40
    assert sync_wakeups < 20


async def test_errors_cross_and_a_cancelled_caller_cancels_the_trio_task(nursery: trio.Nursery) -> None:
    bridge = TrioBridge(nursery)
    started, ended = trio.Event(), trio.Event()

    def boom() -> None:
        raise ValueError("boom")

    async def forever() -> None:
        started.set()
        try:
            await trio.sleep_forever()
        finally:
            ended.set()

    async def caller() -> str:
        with pytest.raises(ValueError, match="boom"):
            await bridge.call_sync(boom)
        task = asyncio.ensure_future(bridge.call(forever))
        await asyncio.sleep(0.05)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        return "done"

    assert await _on_loop(caller) == "done"
    with trio.fail_after(5):
        await ended.wait()
    assert started.is_set()


async def test_call_now_or_later_starts_the_task_only_when_now_answers_none(nursery: trio.Nursery) -> None:
    bridge = TrioBridge(nursery)
    tasks: list[int] = []

    def now(i: int) -> str | None:
        if i == 2:
            raise KeyError("two")
        return f"now {i}" if i % 2 else None

    async def later(i: int) -> str:
        tasks.append(i)
        await trio.sleep(0)
        return f"later {i}"

    async def callers() -> list[str]:
        answers = await asyncio.gather(*[bridge.call_now_or_later(now, later, i) for i in (0, 1, 3, 4)])
        with pytest.raises(KeyError):
            await bridge.call_now_or_later(now, later, 2)
        return list(answers)

    assert await _on_loop(callers) == ["later 0", "now 1", "now 3", "later 4"]
    assert sorted(tasks) == [0, 4]


async def test_a_closed_bridge_refuses_calls(nursery: trio.Nursery) -> None:
    bridge = TrioBridge(nursery)
    bridge.closed = True

    async def caller() -> None:
        with pytest.raises(BridgeClosed):
            await bridge.call_sync(int, "1")

    await _on_loop(caller)
