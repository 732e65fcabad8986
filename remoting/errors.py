"""Typed transport errors. Codec errors live in :mod:`remoting.codec.errors`; these are about sockets and time.

Every error a caller of :class:`~remoting.client.RemotingClient` or :meth:`~remoting.connection.Connection.invoke`
sees is a :class:`RemotingError`, so "the RPC did not complete" is one ``except`` clause.
"""

from __future__ import annotations


def sole_exception(exc: BaseException) -> BaseException:
    """``exc`` with the exception groups of one member each taken off (Trio nurseries wrap a task's failure in them),
    so a caller can see what failed; a group of several stays as it is."""
    while isinstance(exc, BaseExceptionGroup) and len(exc.exceptions) == 1:
        exc = exc.exceptions[0]
    return exc


class RemotingError(Exception):
    """Base of every transport failure."""


class RemotingConnectError(RemotingError):
    """The connection could not be opened, or it closed while a request was outstanding or about to be written.

    RocketMQ's ``RemotingConnectException`` and ``RemotingSendRequestException`` both map here. When the connection
    drops with the request outstanding, the peer may or may not have processed it; the caller decides whether to
    retry.
    """


class RemotingClosedError(RemotingConnectError):
    """A write or an invocation was attempted on a connection that is already closed."""


class RemotingTimeoutError(RemotingError):
    """No response arrived within the invocation's timeout (or the connect timeout elapsed).

    The connection stays open: a late response is dropped when it arrives, as RocketMQ does.
    """


class RemotingTooMuchRequestError(RemotingError):
    """No permit for an async or oneway request and no time left to wait for one (RocketMQ's
    ``RemotingTooMuchRequestException``, :mod:`remoting.permits`)."""
