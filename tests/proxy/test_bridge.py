"""``TrioBridge`` between a real asyncio loop on its own thread and this test's Trio run: answers reach the right
callers, errors and cancellation cross it, and overlapping calls share their wake-ups."""

from __future__ import annotations

import asyncio
import threading
from typing import Any

import pytest
import trio

from proxy.bridge import BridgeClosed, TrioBridge


async def _on_loop(coro_fn: Any) -> Any:
    """Run ``coro_fn()`` on a fresh asyncio loop in a worker thread (as grpcio's server thread runs)."""
    return await trio.to_thread.run_sync(asyncio.run, coro_fn())


async def test_overlapping_calls_get_their_own_answers_and_share_wake_ups(nursery: trio.Nursery) -> None:
    """Sharing made deterministic: the Trio thread is held inside its first job while the 200 calls are queued, and
    the asyncio loop is held while their answers are queued, so each side needs one wake-up for all of them (two if
    the other side was already draining, or the last answer lands just after the loop was let go)."""
    bridge = TrioBridge(nursery)
    on_trio: list[int] = []
    calls_queued, tasks_done = threading.Event(), threading.Event()
    finished = 0

    def work(i: int) -> int:
        on_trio.append(i)
        return i * i

    async def slow(i: int) -> int:
        nonlocal finished
        await trio.sleep(0)
        finished += 1
        if finished == 100:
            tasks_done.set()
        return -i

    async def callers() -> list[int]:
        held = asyncio.ensure_future(bridge.call_sync(calls_queued.wait, 10))
        await asyncio.sleep(0)  # the holding job is submitted
        calls = [asyncio.ensure_future(bridge.call_sync(work, i)) for i in range(100)]
        calls += [asyncio.ensure_future(bridge.call(slow, i)) for i in range(100)]
        await asyncio.sleep(0)  # each call ran to its submission
        calls_queued.set()
        tasks_done.wait(10)  # holds this loop while the Trio side answers
        assert await held
        return list(await asyncio.gather(*calls))

    answers = await _on_loop(callers)
    assert answers == [i * i for i in range(100)] + [-i for i in range(100)]
    assert sorted(on_trio) == list(range(100))
    assert bridge.handoffs <= 2
    assert bridge.answer_wakeups <= 2


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
