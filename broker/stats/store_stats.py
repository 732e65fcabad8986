"""The store-level rates of GET_BROKER_RUNTIME_INFO (Java's ``StoreStatsService``): ``putTps``, ``getFoundTps``,
``getMissTps``, ``getTotalTps`` and ``getTransferedTps``, each as three rates over the last 10, 60 and 600 seconds
(``"12.5 11.0 3.2"``).

Counters are plain ints the owner bumps (``get_found``, ``get_miss``, ``get_transferred``) or sets (``put_total``);
:meth:`StoreStats.sample` records them once a second (the owner's background task), keeping 601 samples as Java
does. A window not filled yet is read over the samples it has (ours: Java leaves the field empty until it is full),
and reads 0.0 before the second sample. Times are milliseconds of the owner's clock. Nothing here raises.
"""

from __future__ import annotations

import collections
from typing import Final

#: Seconds each rate looks back, in the order the runtime info prints them.
WINDOWS: Final = (10, 60, 600)
_MAX_SAMPLES: Final = 600 + 1

#: (timestamp ms, put total, found, miss, transferred)
_Sample = tuple[int, int, int, int, int]
_PUT, _FOUND, _MISS, _TRANSFERRED = 1, 2, 3, 4


class StoreStats:
    def __init__(self) -> None:
        self.put_total = 0
        self.get_found = 0
        self.get_miss = 0
        self.get_transferred = 0
        self._samples: collections.deque[_Sample] = collections.deque(maxlen=_MAX_SAMPLES)

    def sample(self, now_ms: int) -> None:
        self._samples.append((now_ms, self.put_total, self.get_found, self.get_miss, self.get_transferred))

    def tps(self, field: int, seconds: int) -> float:
        samples = self._samples
        if len(samples) < 2:
            return 0.0
        last = samples[-1]
        first = samples[-1 - seconds] if len(samples) > seconds else samples[0]
        span = last[0] - first[0]
        return (last[field] - first[field]) * 1000.0 / span if span > 0 else 0.0

    def _rates(self, *fields: int) -> str:
        return " ".join(str(sum(self.tps(f, seconds) for f in fields)) for seconds in WINDOWS)

    def runtime_entries(self) -> dict[str, str]:
        """The runtime-info keys this service owns."""
        return {
            "putTps": self._rates(_PUT),
            "getFoundTps": self._rates(_FOUND),
            "getMissTps": self._rates(_MISS),
            "getTotalTps": self._rates(_FOUND, _MISS),
            "getTransferedTps": self._rates(_TRANSFERRED),
        }
