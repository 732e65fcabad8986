"""The member's hand-off of blocking work (its flushes) to a worker thread (dledger/handoff.py): the result or the
error comes back, the work runs off the Trio thread, and a cancelled caller still waits for it (as
``trio.to_thread.run_sync`` does by default: a flush is never left running behind its task)."""

from __future__ import annotations

import threading

import pytest
import trio
import trio.testing

from dledger import handoff


async def test_the_work_runs_in_another_thread_and_its_result_comes_back() -> None:
    result, ident = await handoff.run_in_thread(lambda a, b: (a + b, threading.get_ident()), 2, 3)
    assert result == 5
    assert ident != threading.get_ident()


async def test_the_works_error_is_raised_in_the_caller() -> None:
    def fail() -> None:
        raise OSError(5, "EIO")

    with pytest.raises(OSError, match="EIO"):
        await handoff.run_in_thread(fail)


async def test_a_cancelled_caller_waits_for_the_work_to_finish() -> None:
    started, release, finished = threading.Event(), threading.Event(), []

    def work() -> int:
        started.set()
        release.wait(30)
        finished.append(True)
        return 7

    scope = trio.CancelScope()

    async def cancel_then_release() -> None:
        await trio.to_thread.run_sync(started.wait)
        scope.cancel()
        await trio.testing.wait_all_tasks_blocked()
        assert finished == []
        release.set()

    async with trio.open_nursery() as nursery:
        nursery.start_soon(cancel_then_release)
        with scope:
            assert await handoff.run_in_thread(work) == 7
            assert finished == [True]
            await trio.sleep(0)
        assert scope.cancelled_caught


async def test_a_caller_already_cancelled_runs_no_work() -> None:
    """As ``trio.to_thread.run_sync``'s checkpoint before it starts: a cancelled scope raises ``Cancelled`` at once
    and the work never runs (a review found it ran: one more flush in a member shutting down)."""
    ran = []
    with trio.CancelScope() as scope:
        scope.cancel()
        await handoff.run_in_thread(ran.append, 1)
    assert scope.cancelled_caught
    assert ran == []
