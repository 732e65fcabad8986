"""``ResponseFuture``: one outstanding invocation on a :class:`~remoting.connection.Connection`.

Completed exactly once, by whoever removes it from the connection's pending table first: the reader (a response),
the expiry sweeper (a timeout: neither response nor error) or close (an error). Cancelling the waiting task is always
safe: it just stops waiting. (Parking the task with ``trio.lowlevel`` instead of an event measured no faster.)
"""

from __future__ import annotations

from remoting.codec.command import RemotingCommand
from remoting.errors import RemotingError
from remoting.primitives import Event


class ResponseFuture:
    __slots__ = ("_event", "deadline", "done", "error", "response")

    def __init__(self, deadline: float, event: Event) -> None:
        self.deadline = deadline
        self.response: RemotingCommand | None = None
        self.error: RemotingError | None = None
        self.done = False
        self._event = event

    def complete(self, response: RemotingCommand | None = None, error: RemotingError | None = None) -> None:
        """Record the outcome and wake the waiter. Later calls are ignored."""
        if self.done:
            return
        self.done = True
        self.response = response
        self.error = error
        self._event.set()

    async def wait(self) -> None:
        """Until :meth:`complete` is called (returns at once if it was)."""
        await self._event.wait()
