"""Replication's transfer rates: the bytes of the last whole second, as RocketMQ's ``FlowMonitor``
(store/src/main/java/org/apache/rocketmq/store/ha/FlowMonitor.java) counts them for ``mqadmin haStatus``.

The hot paths only grow their byte totals (:attr:`HAConnection.sent_bytes <store.ha.master.HAConnection.sent_bytes>`,
:attr:`HAClient.received_bytes <store.ha.slave.HAClient.received_bytes>`); :class:`~store.ha.service.HAService` samples
them once a second into a :class:`ByteRate`. Java's monitor counts every byte written or read, frame headers included;
these count the CommitLog bytes only (ours).
"""

from __future__ import annotations


class ByteRate:
    """``per_second``: how much a total grew between the last two samples (0 before the second)."""

    __slots__ = ("_mark", "per_second")

    def __init__(self, total: int = 0) -> None:
        self._mark = total
        self.per_second = 0

    def sample(self, total: int) -> None:
        """Take the total at the end of a second."""
        self.per_second = total - self._mark
        self._mark = total
