"""``TrioBridge``: lets coroutines on the gRPC thread's asyncio loop run functions on the broker's Trio thread.

grpcio's asyncio server runs in a thread of its own (:mod:`proxy.server`); everything it serves is computed on the
Trio thread, where the broker's state lives. :meth:`TrioBridge.call` (awaited on the asyncio loop) starts the
function as a task in the bridge's Trio nursery with ``TrioToken.run_sync_soon`` and resolves an asyncio future
with ``loop.call_soon_threadsafe``: two cross-thread wake-ups per call, no worker thread. Cancelling the awaiting
coroutine (a gRPC deadline, a client cancel) cancels the Trio task. Errors raised on the Trio side are raised to the
caller; ``BridgeClosed`` when the Trio side has stopped.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

import outcome
import trio

__all__ = ["BridgeClosed", "TrioBridge"]

T = TypeVar("T")


class BridgeClosed(RuntimeError):
    """The Trio side is gone (the broker is shutting down)."""


class TrioBridge:
    """Owned by :class:`proxy.server.GrpcServer`; built on the Trio thread with the nursery calls run in."""

    def __init__(self, nursery: trio.Nursery) -> None:
        self._token = trio.lowlevel.current_trio_token()
        self._nursery = nursery
        self.closed = False

    async def call(self, fn: Callable[..., Awaitable[T]], *args: Any) -> T:
        """Run ``await fn(*args)`` on the Trio thread and return its result (asyncio side)."""
        if self.closed:
            raise BridgeClosed("the broker is shutting down")
        loop = asyncio.get_running_loop()
        future: asyncio.Future[outcome.Outcome[T]] = loop.create_future()
        scope = trio.CancelScope()

        async def task() -> None:
            with scope:
                result = await outcome.acapture(fn, *args)
                # Cancelled: the caller went away (this call's scope) or the broker is stopping (the bridge's).
                cancelled = isinstance(result, outcome.Error) and isinstance(result.error, trio.Cancelled)
                answer = outcome.Error(BridgeClosed("cancelled")) if cancelled else result
                with contextlib.suppress(RuntimeError):  # the asyncio loop is closed: nobody waits any more
                    loop.call_soon_threadsafe(_resolve, future, answer)
                if cancelled:
                    result.unwrap()  # the cancellation goes on to the scope that asked for it

        def refuse() -> None:
            loop.call_soon_threadsafe(_resolve, future, outcome.Error(BridgeClosed("the broker is shutting down")))

        try:
            self._token.run_sync_soon(self._start, task, refuse)
        except trio.RunFinishedError:
            raise BridgeClosed("the broker has stopped") from None
        try:
            return (await future).unwrap()
        except asyncio.CancelledError:
            with contextlib.suppress(trio.RunFinishedError):  # the Trio side is gone: nothing left to cancel
                self._token.run_sync_soon(scope.cancel)
            raise

    async def call_sync(self, fn: Callable[..., T], *args: Any) -> T:
        """Run the synchronous ``fn(*args)`` on the Trio thread and return its result (asyncio side): no Trio task
        is started, so it cannot be cancelled half-way and costs about half of :meth:`call`."""
        if self.closed:
            raise BridgeClosed("the broker is shutting down")
        loop = asyncio.get_running_loop()
        future: asyncio.Future[outcome.Outcome[T]] = loop.create_future()

        def run() -> None:
            result = outcome.capture(fn, *args) if not self.closed else outcome.Error(BridgeClosed("shutting down"))
            with contextlib.suppress(RuntimeError):  # the asyncio loop is closed: nobody waits any more
                loop.call_soon_threadsafe(_resolve, future, result)

        try:
            self._token.run_sync_soon(run)
        except trio.RunFinishedError:
            raise BridgeClosed("the broker has stopped") from None
        return (await future).unwrap()

    def call_soon(self, fn: Callable[..., object], *args: Any) -> None:
        """Run the synchronous ``fn(*args)`` on the Trio thread, not waiting for it (fire and forget)."""
        if not self.closed:
            self._token.run_sync_soon(fn, *args)

    def _start(self, task: Callable[[], Awaitable[None]], refuse: Callable[[], None]) -> None:
        if self.closed:
            refuse()
            return
        self._nursery.start_soon(task)


def _resolve(future: asyncio.Future[outcome.Outcome[T]], result: outcome.Outcome[T]) -> None:
    if not future.done():
        future.set_result(result)
