"""Replication's transfer rates: the bytes of the last whole second, as RocketMQ's ``FlowMonitor``
(store/src/main/java/org/apache/rocketmq/store/ha/FlowMonitor.java) counts them for ``mqadmin haStatus``.

The hot paths only grow their byte totals (:attr:`HAConnection.sent_bytes <store.ha.master.HAConnection.sent_bytes>`,
:attr:`HAClient.received_bytes <store.ha.slave.HAClient.received_bytes>`); :func:`sample_every_second`, a task of each
master connection and of each slave session, samples them into a :class:`ByteRate`, so a broker without replication
wakes for none. These count the CommitLog bytes only (ours): 5.3.3's master counts just the 12-byte frame headers it
writes (``DefaultHAConnection.transferData`` adds no body write), its slave every byte it reads.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Final

import trio

#: The sampling period (s): RocketMQ's ``FlowMonitor`` second.
RATE_PERIOD: Final = 1.0


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


async def sample_every_second(rate: ByteRate, total: Callable[[], int]) -> None:
    """Sample ``total()`` into ``rate`` every :data:`RATE_PERIOD` until cancelled."""
    while True:
        await trio.sleep(RATE_PERIOD)
        rate.sample(total())
