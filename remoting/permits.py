"""Client-wide limits on requests in flight: RocketMQ's ``semaphoreAsync`` and ``semaphoreOneway``
(remoting/src/main/java/org/apache/rocketmq/remoting/netty/NettyRemotingAbstract.java), sized by
``clientAsyncSemaphoreValue`` and ``clientOnewaySemaphoreValue`` (65535 each, ``NettySystemConfig``).

Who owns what: a :class:`~remoting.client.RemotingClient` owns one :class:`Permits` of each kind. An async invocation
(a callback or a caller's own future) takes its permit when its connection registers it and gives it back when the
connection completes it (response, timeout or close), as Java's ``ResponseFuture`` releases once; a oneway takes one
for as long as its write is under way. When none is free the caller waits up to its own timeout; then the invocation
fails with :class:`~remoting.errors.RemotingTimeoutError` carrying Java's ``tryAcquire semaphore timeout`` message, or,
given no time at all, :class:`~remoting.errors.RemotingTooMuchRequestError` ("invoke too fast"). Single-threaded
(one event loop), so no lock.
"""

from __future__ import annotations

import collections

import anyio

from remoting.errors import RemotingTimeoutError, RemotingTooMuchRequestError

__all__ = ["DEFAULT_PERMITS", "Permits"]

#: ``NettySystemConfig.CLIENT_ASYNC_SEMAPHORE_VALUE`` and ``CLIENT_ONEWAY_SEMAPHORE_VALUE``.
DEFAULT_PERMITS = 65535


class Permits:
    """A counting semaphore without a lock: ``used`` of ``limit`` permits are taken; waiters are woken in order."""

    __slots__ = ("_waiters", "kind", "limit", "used")

    def __init__(self, kind: str, limit: int = DEFAULT_PERMITS) -> None:
        if limit < 1:
            raise ValueError(f"{kind} permits must be at least 1, got {limit}")
        self.kind = kind  # "invokeAsyncImpl" or "invokeOnewayImpl", as Java's messages name them
        self.limit = limit
        self.used = 0
        self._waiters: collections.deque[anyio.Event] = collections.deque()

    @property
    def available(self) -> bool:
        """A permit is free and nobody waits for one (a newcomer does not overtake a waiter: Java's fair semaphore)."""
        return self.used < self.limit and not self._waiters

    def try_acquire(self) -> bool:
        if self.used < self.limit and not self._waiters:
            self.used += 1
            return True
        return False

    def release(self) -> None:
        self.used -= 1
        if self._waiters:
            self._waiters[0].set()

    async def acquire(self, timeout: float) -> None:
        """Take a permit, waiting at most ``timeout`` seconds. Raises as the module docstring says."""
        if self.try_acquire():
            return
        if timeout <= 0:
            raise RemotingTooMuchRequestError(f"{self.kind} invoke too fast")
        event = anyio.Event()
        self._waiters.append(event)
        try:
            with anyio.move_on_after(timeout):
                # First come, first served, as Java's fair Semaphore (NettyRemotingAbstract's semaphoreAsync and
                # semaphoreOneway): only the longest waiter takes a free permit, so one given back to a woken waiter
                # that has not run yet is not taken by a request that came to wait after it.
                while self.used >= self.limit or self._waiters[0] is not event:
                    await event.wait()
                    if self.used >= self.limit or self._waiters[0] is not event:
                        event = self._rearm(event)
                self.used += 1
                return
            raise RemotingTimeoutError(
                f"{self.kind} tryAcquire semaphore timeout, {round(timeout * 1000)}ms, waiting thread nums: "
                f"{len(self._waiters) - 1} {self._value_name} {self.limit - self.used}"
            )
        finally:
            self._waiters.remove(event)
            if self._waiters and self.used < self.limit:
                self._waiters[0].set()

    def _rearm(self, event: anyio.Event) -> anyio.Event:
        fresh = anyio.Event()
        self._waiters[self._waiters.index(event)] = fresh
        return fresh

    @property
    def _value_name(self) -> str:
        return "semaphoreAsyncValue:" if self.kind == "invokeAsyncImpl" else "semaphoreOnewayValue:"
