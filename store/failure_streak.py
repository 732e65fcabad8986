"""Logging a failure that repeats once per streak: :class:`FailureStreak` remembers whether the last attempt of
something retried (a segment's sync, the index's and the checkpoint's, a DLedger flush) failed, so its owner logs the
first failure of a streak and the success that ends it, not every attempt: a dead disk fails every periodic flush and
every group commit, and a traceback per attempt would fill the log as fast as sends arrive.

The owner keeps its own log messages and calls it from one thread at a time (the flush's); it raises nothing.
"""

from __future__ import annotations


class FailureStreak:
    """Whether the last attempt failed. ``failed()`` and ``succeeded()`` record an attempt's outcome and say whether
    it is the one to log: the first failure of a streak, the success that ends one."""

    __slots__ = ("failing",)

    def __init__(self) -> None:
        self.failing = False

    def failed(self) -> bool:
        """Record a failure; ``True`` when it starts a streak (log it)."""
        first = not self.failing
        self.failing = True
        return first

    def succeeded(self) -> bool:
        """Record a success; ``True`` when it ends a streak (log the recovery)."""
        ended = self.failing
        self.failing = False
        return ended
