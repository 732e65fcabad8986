"""Popped messages in flight per (topic, group, queue): RocketMQ 5.3.3's PopInflightMessageCounter
(broker/src/main/java/org/apache/rocketmq/broker/processor/PopInflightMessageCounter.java), read by the pop lag of
``/metrics`` (:mod:`broker.metrics.lag`).

A pop adds what it handed out of a queue (an orderly pop first forgets the queue's count: its batch replaces the one
before); an ack, and a revive's copy of a message to the pop retry topic, take one off (not below 0), unless the pop
was before this broker started, as Java keeps the count in memory and skips pops older than ``shouldStartTime``. An
admin's offset reset forgets the queue's count, a deleted topic or group its counts. Counts are under the topic the
message lies in: the pop retry topic for a redelivery. Trio thread only.
"""

from __future__ import annotations

from collections.abc import Callable

#: where a group's next pop of a queue reads (group, topic, queue id) -> offset; -1: none known
PopOffset = Callable[[str, str, int], int]


def _no_pop_offset(group: str, topic: str, queue_id: int) -> int:
    return -1


class PopInflight:
    """The counts, and the pop service's view of where pops read (:meth:`attach`)."""

    def __init__(self) -> None:
        #: (topic, group) -> queue id -> popped messages neither acked nor revived
        self.counts: dict[tuple[str, str], dict[int, int]] = {}
        #: pops before this time (epoch ms) are not counted down (Java's ``shouldStartTime``)
        self.since_ms = 0
        self.pop_offset: PopOffset = _no_pop_offset

    def attach(self, pop_offset: PopOffset, since_ms: int) -> None:
        """The pop service reads ``pop_offset`` (its committed offset or past its held moves), started at
        ``since_ms``."""
        self.pop_offset = pop_offset
        self.since_ms = since_ms

    def add(self, topic: str, group: str, queue_id: int, count: int) -> None:
        if count > 0:
            queues = self.counts.setdefault((topic, group), {})
            queues[queue_id] = queues.get(queue_id, 0) + count

    def done(self, topic: str, group: str, queue_id: int, pop_time: int, count: int = 1) -> None:
        """``count`` messages of a pop at ``pop_time`` were acked or revived."""
        queues = self.counts.get((topic, group))
        if pop_time < self.since_ms or queues is None or queue_id not in queues:
            return
        left = queues[queue_id] - count
        if left > 0:
            queues[queue_id] = left
            return
        del queues[queue_id]
        if not queues:
            del self.counts[(topic, group)]

    def get(self, topic: str, group: str, queue_id: int) -> int:
        return self.counts.get((topic, group), {}).get(queue_id, 0)

    def clear(self, topic: str, group: str, queue_id: int) -> None:
        queues = self.counts.get((topic, group))
        if queues is not None:
            queues.pop(queue_id, None)
            if not queues:
                del self.counts[(topic, group)]

    def forget(self, keep: Callable[[str, str], bool]) -> None:
        """Drop the counts of the (topic, group) pairs ``keep`` refuses (a deleted topic or group)."""
        for key in [key for key in self.counts if not keep(*key)]:
            del self.counts[key]
