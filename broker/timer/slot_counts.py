"""Per-slot counts of the timer wheel with prefix sums in O(log n) (a Fenwick tree), so the ``/metrics`` figures
of how many timers are due in each period ahead (``rocketmq_timer_message_snapshot``) cost a few dozen steps on
the Trio thread instead of a scan of the wheel's 604,800 slots.

Ownership: one :class:`~broker.timer.wheel.TimerWheel`, on the Trio thread (built in the load's worker thread).
"""

from __future__ import annotations

from array import array
from collections.abc import Iterable


class SlotCounts:
    """One signed integer per slot index with :meth:`prefix` sums; all zero at first."""

    def __init__(self, size: int) -> None:
        self.size = size
        self._values = array("q", bytes(8 * size))
        self._tree = array("q", bytes(8 * size))

    @classmethod
    def of(cls, size: int, values: Iterable[tuple[int, int]]) -> SlotCounts:
        """Counts holding each ``(index, value)`` given (an index at most once), built in O(size)."""
        counts = cls(size)
        for index, value in values:
            counts._values[index] = value
        tree = counts._tree = array("q", counts._values)
        for i in range(1, size + 1):
            up = i + (i & -i)
            if up <= size:
                tree[up - 1] += tree[i - 1]
        return counts

    def set(self, index: int, value: int) -> None:
        delta = value - self._values[index]
        if not delta:
            return
        self._values[index] = value
        tree, i = self._tree, index + 1
        while i <= self.size:
            tree[i - 1] += delta
            i += i & -i

    def prefix(self, end: int) -> int:
        """The sum of the values at indexes ``[0, end)``."""
        tree, total, i = self._tree, 0, end
        while i > 0:
            total += tree[i - 1]
            i &= i - 1
        return total

    def circular(self, first: int, count: int) -> int:
        """The sum of ``count`` values (at most :attr:`size`) from index ``first`` on, wrapping past the end."""
        end = first + count
        if end <= self.size:
            return self.prefix(end) - self.prefix(first)
        return self.prefix(self.size) - self.prefix(first) + self.prefix(end - self.size)
