"""``TrioBridge``: lets coroutines on the gRPC thread's asyncio loop run functions on the broker's Trio thread.

grpcio's asyncio server runs in a thread of its own (:mod:`proxy.server`); everything it serves is computed on the
Trio thread, where the broker's state lives. Work goes to the Trio thread through a queue drained by one
``TrioToken.run_sync_soon`` callback, and answers come back through a queue drained by one
``loop.call_soon_threadsafe`` callback: a wake-up (a socket write, the costly part of a hand-off) is only sent when
the other side has no drain pending, so calls that overlap share their wake-ups instead of paying two each.
:meth:`TrioBridge.call` starts the function as a task in the bridge's Trio nursery; :meth:`TrioBridge.call_sync`
runs a synchronous function inside the drain (no task); :meth:`TrioBridge.call_now_or_later` tries a synchronous
function first and starts the task only when it answers ``None``. Cancelling the awaiting coroutine (a gRPC deadline,
a client cancel) cancels the Trio task; a value answered as the caller went away goes to its ``unclaimed``
(:meth:`TrioBridge.call_now_or_later`) rather than nowhere. Errors raised on the Trio side are raised to the caller;
``BridgeClosed`` when the Trio side has stopped.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import functools
import logging
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

import outcome
import trio

__all__ = ["BridgeClosed", "TrioBridge"]

log = logging.getLogger(__name__)

T = TypeVar("T")
#: an answer, with what takes its value back when its caller has gone (``unclaimed`` of :meth:`call_now_or_later`)
_Answer = tuple["asyncio.Future[Any]", outcome.Outcome[Any], "Callable[[Any], object] | None"]


class BridgeClosed(RuntimeError):
    """The Trio side is gone (the broker is shutting down)."""


class TrioBridge:
    """Owned by :class:`proxy.server.GrpcServer`; built on the Trio thread with the nursery calls run in. One asyncio
    loop (the gRPC thread's) calls it. ``handoffs`` and ``answer_wakeups`` count the wake-ups sent each way."""

    def __init__(self, nursery: trio.Nursery) -> None:
        self._token = trio.lowlevel.current_trio_token()
        self._nursery = nursery
        self.closed = False
        self._loop: asyncio.AbstractEventLoop | None = None
        # Jobs for the Trio thread (appended on the asyncio thread) and answers for the loop (appended on the Trio
        # thread); each flag says a drain is scheduled, so the next item needs no wake-up of its own.
        self._jobs: collections.deque[Callable[[], object]] = collections.deque()
        self._jobs_scheduled = False
        self._answers: collections.deque[_Answer] = collections.deque()
        self._answers_scheduled = False
        self.handoffs = 0
        self.answer_wakeups = 0

    async def call(self, fn: Callable[..., Awaitable[T]], *args: Any) -> T:
        """Run ``await fn(*args)`` on the Trio thread and return its result (asyncio side)."""
        return await self.call_now_or_later(_not_now, fn, *args)

    async def call_now_or_later(
        self,
        now: Callable[..., T | None],
        later: Callable[..., Awaitable[T]],
        *args: Any,
        unclaimed: Callable[[T], object] | None = None,
    ) -> T:
        """Run the synchronous ``now(*args)`` on the Trio thread; when it answers ``None`` (it would have to wait),
        run ``await later(*args)`` there as :meth:`call` does, in the same hand-off (asyncio side). A value answered
        after the caller was cancelled (or as it was) goes to ``unclaimed`` on the Trio thread instead of being
        dropped: a receive's messages are given back, as RocketMQ's proxy nacks what it cannot write."""
        future = self._future()
        scope = trio.CancelScope()
        task = self._task(future, scope, later, args, unclaimed)

        def run() -> None:
            if self.closed:
                self._answer(future, outcome.Error(BridgeClosed("the broker is shutting down")))
                return
            result = outcome.capture(now, *args)
            if isinstance(result, outcome.Value) and result.value is None:
                self._nursery.start_soon(task)
            else:
                self._answer(future, result, unclaimed)

        return await self._wait(future, scope, run, unclaimed)  # type: ignore[no-any-return]

    def _task(
        self,
        future: asyncio.Future[outcome.Outcome[Any]],
        scope: trio.CancelScope,
        fn: Callable[..., Awaitable[Any]],
        args: tuple[Any, ...],
        unclaimed: Callable[[Any], object] | None = None,
    ) -> Callable[[], Awaitable[None]]:
        """The Trio task of a :meth:`call`: runs ``fn`` inside ``scope`` and answers ``future``."""

        async def task() -> None:
            with scope:
                result = await outcome.acapture(fn, *args)
                # Cancelled: the caller went away (this call's scope) or the broker is stopping (the bridge's).
                cancelled = isinstance(result, outcome.Error) and isinstance(result.error, trio.Cancelled)
                self._answer(future, outcome.Error(BridgeClosed("cancelled")) if cancelled else result, unclaimed)
                if cancelled:
                    result.unwrap()  # the cancellation goes on to the scope that asked for it

        return task

    async def _wait(
        self,
        future: asyncio.Future[outcome.Outcome[Any]],
        scope: trio.CancelScope,
        job: Callable[[], object],
        unclaimed: Callable[[Any], object] | None = None,
    ) -> Any:
        """Submit ``job`` and await its answer; a cancelled caller cancels ``scope`` on the Trio side (an answer that
        came just before goes to ``unclaimed``; one still on its way, :meth:`_resolve_answers`)."""
        self._submit(job)
        try:
            return (await future).unwrap()
        except asyncio.CancelledError:
            if unclaimed is not None and future.done() and not future.cancelled():
                self._give_back(future.result(), unclaimed)
            with contextlib.suppress(BridgeClosed):  # the Trio side is gone: nothing left to cancel
                self._submit(scope.cancel)
            raise

    async def call_sync(self, fn: Callable[..., T], *args: Any) -> T:
        """Run the synchronous ``fn(*args)`` on the Trio thread and return its result (asyncio side): no Trio task
        is started, so it cannot be cancelled half-way and costs about half of :meth:`call`."""
        future = self._future()

        def run() -> None:
            result = outcome.capture(fn, *args) if not self.closed else outcome.Error(BridgeClosed("shutting down"))
            self._answer(future, result)

        self._submit(run)
        return (await future).unwrap()  # type: ignore[no-any-return]

    def call_soon(self, fn: Callable[..., object], *args: Any) -> None:
        """Run the synchronous ``fn(*args)`` on the Trio thread, not waiting for it (fire and forget)."""
        if not self.closed:
            with contextlib.suppress(BridgeClosed):
                self._submit(functools.partial(fn, *args))

    # ---- asyncio side ---------------------------------------------------------------------------------------

    def _future(self) -> asyncio.Future[outcome.Outcome[Any]]:
        if self.closed:
            raise BridgeClosed("the broker is shutting down")
        loop = self._loop
        if loop is None:
            loop = self._loop = asyncio.get_running_loop()
        return loop.create_future()

    def _submit(self, job: Callable[[], object]) -> None:
        """Queue ``job`` for the Trio thread, waking it unless a drain is already scheduled."""
        self._jobs.append(job)
        if self._jobs_scheduled:
            return
        self._jobs_scheduled = True
        self.handoffs += 1
        try:
            self._token.run_sync_soon(self._run_jobs)
        except trio.RunFinishedError:
            self._jobs.clear()
            self._jobs_scheduled = False
            raise BridgeClosed("the broker has stopped") from None

    def _resolve_answers(self) -> None:
        self._answers_scheduled = False  # first: an answer queued from now on schedules another drain
        answers = self._answers
        while answers:
            future, result, unclaimed = answers.popleft()
            if not future.done():
                future.set_result(result)
            elif unclaimed is not None:  # its caller was cancelled meanwhile
                self._give_back(result, unclaimed)

    def _give_back(self, result: outcome.Outcome[Any], unclaimed: Callable[[Any], object]) -> None:
        if isinstance(result, outcome.Value):
            self.call_soon(unclaimed, result.value)

    # ---- Trio side ------------------------------------------------------------------------------------------

    def _run_jobs(self) -> None:
        self._jobs_scheduled = False  # first: a job queued from now on schedules another drain
        jobs = self._jobs
        while jobs:
            job = jobs.popleft()
            try:
                job()
            except Exception:  # a job's own errors go to its caller; this is a bug, and must not stop the drain
                log.exception("bridge job failed")

    def _answer(
        self,
        future: asyncio.Future[outcome.Outcome[Any]],
        result: outcome.Outcome[Any],
        unclaimed: Callable[[Any], object] | None = None,
    ) -> None:
        self._answers.append((future, result, unclaimed))
        if self._answers_scheduled or self._loop is None:
            return
        self._answers_scheduled = True
        self.answer_wakeups += 1
        with contextlib.suppress(RuntimeError):  # the asyncio loop is closed: nobody waits any more
            self._loop.call_soon_threadsafe(self._resolve_answers)


def _not_now(*args: Any) -> None:
    """The synchronous attempt of :meth:`TrioBridge.call`: none, go to the task."""
    return None
