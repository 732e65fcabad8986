"""Rate-limited log lines, for refusals a hostile peer can trigger at will (bad signatures, too many connections).

:class:`RateLimitedLog` writes at most ``burst`` lines per ``period`` seconds and counts the rest; the next line
written says how many were suppressed since the last one, so nothing is lost silently and a flood cannot fill the
disk or slow the reader tasks down with logging.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable


class RateLimitedLog:
    """See the module docstring. ``clock`` is injectable for tests (seconds, monotonic)."""

    def __init__(
        self,
        logger: logging.Logger,
        *,
        period: float = 10.0,
        burst: int = 20,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._log = logger
        self._period = period
        self._burst = burst
        self._clock = clock
        self._window_start = -float("inf")
        self._written = 0
        self.suppressed = 0

    def warning(self, message: str, *args: object) -> bool:
        """Log ``message % args`` at WARNING unless this window's budget is spent; True when written."""
        now = self._clock()
        if now - self._window_start >= self._period:
            self._window_start = now
            self._written = 0
        if self._written >= self._burst:
            self.suppressed += 1
            return False
        self._written += 1
        if self.suppressed:
            message += " (%d similar lines suppressed before this one)"
            args = (*args, self.suppressed)
            self.suppressed = 0
        self._log.warning(message, *args)
        return True
