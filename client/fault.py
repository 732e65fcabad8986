"""Latency fault avoidance (Java's ``MQFaultStrategy`` + ``LatencyFaultToleranceImpl``).

After every send the producer reports the broker and how long the attempt took. A slow or failed broker becomes
unavailable for a duration picked from :data:`LATENCY_MAX` / :data:`NOT_AVAILABLE_DURATION` (the defaults of the
producer's ``latency_max`` / ``not_available_duration``): e.g. 550 ms or more keeps it out for 30 s, a failure (picked
as if it took 30 s) for 10 minutes; the latency recorded is the real one either
way. Times come from the caller's clock (seconds), so tests can drive it in virtual time. Only used when
``send_latency_fault_enable`` is on, as in Java.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Sequence
from typing import Final

import attrs

#: Latency thresholds (ms) and the matching unavailable durations (ms), Java's defaults.
LATENCY_MAX: Final = (50, 100, 550, 1000, 2000, 3000, 15000)
NOT_AVAILABLE_DURATION: Final = (0, 0, 30000, 60000, 120000, 180000, 600000)
#: The latency a failed attempt's unavailable duration is picked for (Java: ``isolation ? 30000 : latency``).
FAILURE_LATENCY_MS: Final = 30000


@attrs.define(slots=True)
class FaultItem:
    broker_name: str
    current_latency_ms: int
    start_timestamp: float  # seconds on the caller's clock when the broker becomes available again

    def available(self, now: float) -> bool:
        return now >= self.start_timestamp


class LatencyFaultTolerance:
    """Which brokers to avoid. ``clock`` returns seconds (``anyio.current_time`` in the producer). ``latency_max`` and
    ``not_available_duration`` (ms, paired by index) are MQFaultStrategy's tables, Java's defaults unless given
    (settable, as ``setLatencyMax`` / ``setNotAvailableDuration``)."""

    def __init__(
        self,
        clock: Callable[[], float],
        latency_max: Sequence[int] = LATENCY_MAX,
        not_available_duration: Sequence[int] = NOT_AVAILABLE_DURATION,
    ) -> None:
        self._clock = clock
        self._items: dict[str, FaultItem] = {}
        self.latency_max: Sequence[int] = latency_max
        self.not_available_duration: Sequence[int] = not_available_duration

    def update(self, broker_name: str, latency_ms: int, not_available_ms: int) -> None:
        until = self._clock() + not_available_ms / 1000
        self._items[broker_name] = FaultItem(broker_name, latency_ms, until)

    def is_available(self, broker_name: str) -> bool:
        item = self._items.get(broker_name)
        return item is None or item.available(self._clock())

    def remove(self, broker_name: str) -> None:
        self._items.pop(broker_name, None)

    def pick_one_at_least(self) -> str | None:
        """A broker to try when all are unavailable: one of the better half by (availability, latency, time)."""
        if not self._items:
            return None
        now = self._clock()
        ranked = sorted(
            self._items.values(),
            key=lambda it: (not it.available(now), it.current_latency_ms, it.start_timestamp),
        )
        half = max(1, len(ranked) // 2)
        return random.choice(ranked[:half]).broker_name

    def report(self, broker_name: str, latency_ms: int, failed: bool) -> None:
        """Record one attempt and its latency; the unavailable duration follows from the latency, or from
        :data:`FAILURE_LATENCY_MS` for a failure (Java's ``MQFaultStrategy.updateFaultItem``)."""
        duration = not_available_for(
            FAILURE_LATENCY_MS if failed else latency_ms, self.latency_max, self.not_available_duration
        )
        self.update(broker_name, latency_ms, duration)


def not_available_for(
    latency_ms: int, latency_max: Sequence[int] = LATENCY_MAX, durations: Sequence[int] = NOT_AVAILABLE_DURATION
) -> int:
    """MQFaultStrategy.computeNotAvailableDuration: the duration of the highest threshold ``latency_ms`` reaches (a
    threshold without a duration at its index is ignored; Java's lookup would fail there)."""
    for threshold, duration in reversed(list(zip(latency_max, durations, strict=False))):
        if latency_ms >= threshold:
            return duration
    return 0
