"""Outstanding invocations on a :class:`~remoting.connection.Connection`: :class:`ResponseFuture` (a task waits for
it) and :class:`CallbackFuture` (a function is called with the outcome, no task at all).

Both are completed exactly once, by whoever removes them from the connection's pending table first: the reader (a
response), the expiry sweeper (a timeout: neither response nor error) or close (an error). Cancelling the task
waiting on a ResponseFuture is always safe: it just stops waiting. (Parking the task with ``trio.lowlevel`` instead
of an event measured no faster.)
"""

from __future__ import annotations

import logging
from collections.abc import Callable

from remoting.codec.command import RemotingCommand
from remoting.errors import RemotingError, RemotingTimeoutError
from remoting.primitives import Event

log = logging.getLogger(__name__)

#: What a :class:`CallbackFuture` calls: the response, or the error (a timeout is a ``RemotingTimeoutError``).
OutcomeCallback = Callable[[RemotingCommand | RemotingError], object]


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


class CallbackFuture:
    """An invocation whose outcome goes to ``callback``, called synchronously by whoever completes it (the reader,
    the sweeper or close), once. The callback must not block; an exception it raises is logged and dropped, so it
    cannot break the connection's reader. ``code``, ``address`` and ``timeout`` name the request in a timeout error.
    """

    __slots__ = ("_address", "_callback", "_code", "_timeout", "deadline", "done")

    def __init__(
        self, deadline: float, callback: OutcomeCallback, code: int, address: tuple[str, int], timeout: float
    ) -> None:
        self.deadline = deadline
        self.done = False
        self._callback = callback
        self._code = code
        self._address = address
        self._timeout = timeout

    def complete(self, response: RemotingCommand | None = None, error: RemotingError | None = None) -> None:
        """Call the callback with the response, the error or (neither: a timeout) a ``RemotingTimeoutError``.
        Later calls are ignored."""
        if self.done:
            return
        self.done = True
        outcome: RemotingCommand | RemotingError
        if response is not None:
            outcome = response
        elif error is not None:
            outcome = error
        else:
            outcome = RemotingTimeoutError(
                f"no response to request code {self._code} from {self._address} in {self._timeout}s"
            )
        try:
            self._callback(outcome)
        except Exception:
            log.exception("invocation callback %r failed", self._callback)
