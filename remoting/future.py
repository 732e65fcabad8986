"""Outstanding invocations on a :class:`~remoting.connection.Connection`: :class:`ResponseFuture` (a task waits for
it), :class:`CallbackFuture` (a function is called with the outcome, no task at all), or any :class:`Invocation` a
caller brings (the producer's async send is its own, :mod:`client.async_send`).

A response with a JSON header is first offered to :meth:`Invocation.complete_json` as the parsed header: an
invocation that can take its answer from the fields (a send's result) skips the command; one that declines (False,
having done nothing) gets the command through :meth:`Invocation.complete`.

Both are completed exactly once, by whoever removes them from the connection's pending table first: the reader (a
response), the expiry sweeper (a timeout: neither response nor error) or close (an error). Cancelling the task
waiting on a ResponseFuture is always safe: it just stops waiting. (Parking the task with ``trio.lowlevel`` instead
of an event measured no faster.)
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from typing import Any, Protocol

from remoting.codec.command import RemotingCommand
from remoting.errors import RemotingError, RemotingTimeoutError
from remoting.primitives import Event

log = logging.getLogger(__name__)

#: What a :class:`CallbackFuture` calls: the response, or the error (a timeout is a ``RemotingTimeoutError``).
OutcomeCallback = Callable[[RemotingCommand | RemotingError], object]


#: Turns a response's parsed JSON header (and body) into the caller's value, or ``None`` to decline; never raises.
JsonDecoder = Callable[[dict[str, Any], bytes], object | None]


class Invocation(Protocol):
    """What a connection's pending table holds: completed once, by whoever removes it from the table (the reader,
    the expiry sweeper at ``deadline``, or close). What its ``complete`` or ``complete_json`` raises is logged by the
    connection and goes no further (a ``complete_json`` that raises counts as having taken the answer)."""

    deadline: float

    def complete(self, response: RemotingCommand | None = None, error: RemotingError | None = None) -> None:
        """The response, the error, or neither (the deadline passed)."""

    def complete_json(self, fields: dict[str, Any], body: bytes) -> bool:
        """Take the response from its parsed JSON header; False (having done nothing) to get it as a command."""


class ResponseFuture:
    """``decode``, if given, is offered the response's JSON header first; what it returns becomes :attr:`value`
    (and :attr:`response` stays ``None``)."""

    __slots__ = ("_decode", "_event", "deadline", "done", "error", "response", "value")

    def __init__(self, deadline: float, event: Event, decode: JsonDecoder | None = None) -> None:
        self.deadline = deadline
        self.response: RemotingCommand | None = None
        self.error: RemotingError | None = None
        self.value: object | None = None
        self.done = False
        self._event = event
        self._decode = decode

    def complete_json(self, fields: dict[str, Any], body: bytes) -> bool:
        decode = self._decode
        if decode is None or self.done:
            return False
        value = decode(fields, body)
        if value is None:
            return False
        self.done = True
        self.value = value
        self._event.set()
        return True

    def complete(self, response: RemotingCommand | None = None, error: RemotingError | None = None) -> None:
        """Record the outcome and wake the waiter. Later calls are ignored."""
        if self.done:
            return
        self.done = True
        self.response = response
        self.error = error
        self._event.set()

    def wait(self) -> Awaitable[None]:
        """Until :meth:`complete` is called (returns at once if it was). The event's own wait, not a coroutine
        around it: one frame less on every switch of the waiting task."""
        return self._event.wait()


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

    def complete_json(self, fields: dict[str, Any], body: bytes) -> bool:
        return False

    def complete(self, response: RemotingCommand | None = None, error: RemotingError | None = None) -> None:
        """Call the callback with the response, the error or (neither: a timeout) a ``RemotingTimeoutError``.
        Later calls are ignored."""
        if self.done:
            return
        self.done = True
        outcome = outcome_of(response, error, self._code, self._address, self._timeout)
        try:
            self._callback(outcome)
        except Exception:
            log.exception("invocation callback %r failed", self._callback)


def outcome_of(
    response: RemotingCommand | None, error: RemotingError | None, code: int, address: object, timeout: float
) -> RemotingCommand | RemotingError:
    """What :meth:`Invocation.complete`'s arguments mean: the response, the error, or (neither) a
    ``RemotingTimeoutError`` naming the request ``code``, the peer's ``address`` and the ``timeout``."""
    if response is not None:
        return response
    if error is not None:
        return error
    return RemotingTimeoutError(f"no response to request code {code} from {address} in {timeout}s")
