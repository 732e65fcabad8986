"""The suite's ``autojump_clock`` (tests/virtual_clock.py): virtual time stands still while a worker thread works."""

from __future__ import annotations

import math
import time

import trio
import trio.testing

from tests.virtual_clock import PATIENCE_S


async def _tick(ticks: list[float]) -> None:
    """A periodic task, as the store's passes are: it would let a plain autojump clock race while a thread works."""
    while True:
        await trio.sleep(0.1)
        ticks.append(trio.current_time())


async def test_virtual_time_does_not_pass_while_a_worker_thread_works(autojump_clock: trio.testing.MockClock) -> None:
    """With Trio's own clock, a 10 ms thread beside a 100 ms periodic task let a hundred virtual passes run."""
    ticks: list[float] = []
    async with trio.open_nursery() as nursery:
        nursery.start_soon(_tick, ticks)
        await trio.sleep(0.35)
        before = trio.current_time()
        await trio.to_thread.run_sync(time.sleep, 0.01)
        assert trio.current_time() == before
        nursery.cancel_scope.cancel()
    assert len(ticks) == 3


async def test_a_thread_waiting_on_virtual_time_gets_it_after_the_patience(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """A thread that waits for something a virtual timer brings is not held forever: the clock jumps once the
    thread has been busy for the patience, in real time."""
    fired = trio.Event()

    async def timer() -> None:
        await trio.sleep(5)
        fired.set()

    started = time.perf_counter()
    async with trio.open_nursery() as nursery:
        nursery.start_soon(timer)
        await trio.to_thread.run_sync(trio.from_thread.run, fired.wait)
    assert time.perf_counter() - started >= PATIENCE_S
    assert trio.current_time() == 5


async def test_a_threshold_the_test_sets_is_kept(autojump_clock: trio.testing.MockClock) -> None:
    """A test that turns autojump off (or slows it) keeps its setting across the clock's holds."""
    await trio.to_thread.run_sync(time.sleep, 0.01)
    autojump_clock.autojump_threshold = math.inf
    with trio.move_on_after(1):
        await trio.to_thread.run_sync(time.sleep, 0.01)
    assert autojump_clock.autojump_threshold == math.inf
    autojump_clock.autojump_threshold = 0
    await trio.to_thread.run_sync(time.sleep, 0.01)
    await trio.sleep(10)
    assert autojump_clock.autojump_threshold == 0
