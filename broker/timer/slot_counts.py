"""Per-slot counts of the timer wheel with prefix sums in O(log n) (a Fenwick tree), so the ``/metrics`` figures
of how many timers are due in each period ahead (``rocketmq_timer_message_snapshot``) cost a few dozen steps on
the Trio thread instead of a scan of the wheel's 604,800 slots.

Ownership: one :class:`~broker.timer.wheel.TimerWheel`, on the Trio thread (built in the load's worker thread).
"""

from __future__ import annotations

from array import array
from collections.abc import Iterable


class SlotCounts:
    """One signed integer per slot index with :meth:`prefix` sums; all zero at first. The tree (8 bytes a slot, 4.8 MB
    for 604,800) is allocated at the first non-zero value, so an idle broker's empty wheel costs no RAM."""

    def __init__(self, size: int) -> None:
        self.size = size
        self._tree: array[int] | None = None

    @classmethod
    def of(cls, size: int, values: Iterable[tuple[int, int]]) -> SlotCounts:
        """Counts holding each ``(index, value)`` given (an index at most once), built in O(size)."""
        counts = cls(size)
        given = [(index, value) for index, value in values if value]
        if not given:
            return counts
        tree = counts._tree = array("q", bytes(8 * size))
        for index, value in given:
            tree[index] = value
        for i in range(1, size + 1):
            up = i + (i & -i)
            if up <= size:
                tree[up - 1] += tree[i - 1]
        return counts

    def value(self, index: int) -> int:
        return self.prefix(index + 1) - self.prefix(index)

    def set(self, index: int, value: int) -> None:
        tree = self._tree
        if tree is None:
            if not value:
                return
            tree = self._tree = array("q", bytes(8 * self.size))
        delta = value - self.value(index)
        i = index + 1
        while delta and i <= self.size:
            tree[i - 1] += delta
            i += i & -i

    def prefix(self, end: int) -> int:
        """The sum of the values at indexes ``[0, end)``."""
        tree, total, i = self._tree, 0, end
        if tree is None:
            return 0
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
