"""The virtual clock of the suite's ``autojump_clock`` fixture (tests/conftest.py).

Trio's ``MockClock(autojump_threshold=0)`` jumps to the next deadline as soon as every task waits, also while a task
waits on a worker thread (``trio.to_thread``: a segment's unmap and unlink, a flush, a file save). The thread's real
milliseconds then become virtual seconds: each jump wakes a periodic task (a 100 ms pass), which waits again, and the
clock jumps again, hundreds of virtual seconds per real second on a loaded machine. A test that bounds a wait in
virtual time then fails by how slow the machine's threads were, not by what the code did.

:func:`thread_patient_clock` holds the clock while a worker thread of the run is busy, polling every millisecond of
real time, so file work takes no virtual time. A thread that is still busy after :data:`PATIENCE_S` of real time is
taken to wait on something virtual time brings (a test blocking a thread until a timer fires, a servicer's asyncio
loop in a thread waiting on the Trio side): the clock jumps then, and is held again only for a thread
beyond those (a pool's idle workers count among them). It counts threads, it does not know them: should a waiter
end while a file-work thread is busy, the clock moves on during that thread's work, as Trio's own would.
"""

from __future__ import annotations

import time
from typing import Final

import trio
import trio.testing

#: How often, in real seconds, a held clock looks again whether the worker threads are done.
POLL_S: Final = 0.001
#: Real seconds a held clock waits for a worker thread before it jumps all the same.
PATIENCE_S: Final = 0.25


def thread_patient_clock() -> trio.testing.MockClock:
    """A ``MockClock`` that autojumps (threshold 0 unless a test sets another) only once no ``trio.to_thread``
    worker of the run is busy, or one has been for :data:`PATIENCE_S` of real time. (``MockClock`` is final: the
    run loop's autojump hook of this one instance is replaced.)"""
    clock = trio.testing.MockClock(autojump_threshold=0)
    clock._autojump = _ThreadPatience(clock).autojump  # type: ignore[method-assign]
    return clock


class _ThreadPatience(trio.abc.Instrument):
    """The autojump hook of one clock: jumps as ``MockClock`` does, unless worker threads hold it still. While it
    holds the clock it is also an instrument of the run, so the clock is let go in the task step in which the
    thread's task took its result, not a poll later."""

    def __init__(self, clock: trio.testing.MockClock) -> None:
        self._clock = clock
        self._jump = clock._autojump
        #: The threshold a held clock goes back to (the test's own), ``None`` while not held.
        self._held_threshold: float | None = None
        self._held_since = 0.0
        self._polling = POLL_S
        #: Threads taken to wait on virtual time (busy when the patience ran out): the clock is held only for more.
        self._waiting_threads = 0

    def autojump(self) -> None:
        threads = trio.testing.active_thread_count()
        self._waiting_threads = min(self._waiting_threads, threads)  # a waiter ended, or a thread it was taken for
        if threads > self._waiting_threads:
            if not self._patience_spent():
                return
            self._waiting_threads = threads  # taken to wait on virtual time, as long as that many are busy
        self._release()
        self._jump()

    def _patience_spent(self) -> bool:
        """Whether the clock has been held for :data:`PATIENCE_S`; starts holding it (the runner then wakes every
        :data:`POLL_S` to look again) when it was not."""
        now = time.perf_counter()
        if self._held_threshold is None:
            self._held_threshold, self._held_since = self._clock.autojump_threshold, now
            self._clock.autojump_threshold = self._polling = max(self._held_threshold, POLL_S)
            trio.lowlevel.add_instrument(self)
        return now - self._held_since >= PATIENCE_S

    def after_task_step(self, task: trio.lowlevel.Task) -> None:
        if trio.testing.active_thread_count() <= self._waiting_threads:
            self._release()

    def _release(self) -> None:
        if self._held_threshold is not None:
            trio.lowlevel.remove_instrument(self)
            threshold, self._held_threshold = self._held_threshold, None
            if self._clock.autojump_threshold == self._polling:  # not set by the test meanwhile
                self._clock.autojump_threshold = threshold
