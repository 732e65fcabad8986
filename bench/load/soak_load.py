"""The soak's load: producers on connections that come and go, paced senders, and the ledger of what was acknowledged
and what was consumed.

Ownership: one soak run owns one :class:`ChurningPool`, one :class:`Ledger` and the sender tasks; all of them run in
one Trio thread. A failed send is counted (``LoadStats.fail``) and the load goes on; a producer that cannot start is
retried by its slot after a pause, so the pool shrinks for a moment rather than the run ending.
"""

from __future__ import annotations

import os
import random
from collections import Counter

import trio

from bench.load.stats import LoadStats
from client import ClientConfig, Message, Producer, SendStatus

#: Pause before a slot retries a producer that failed to start.
RETRY_PAUSE = 0.5


class Ledger:
    """One byte per sequence number for "acknowledged" and for "consumed"; ``outstanding`` is acknowledged and not
    (yet) consumed, kept in O(1) whichever of the two events comes first."""

    def __init__(self) -> None:
        self._acked = bytearray()
        self._consumed = bytearray()
        self._next = 0
        self.acked = 0
        self.consumed = 0
        self.duplicates = 0
        self.outstanding = 0

    def new(self) -> int:
        seq = self._next
        self._next += 1
        return seq

    @staticmethod
    def _grow(bits: bytearray, seq: int) -> None:
        if seq >= len(bits):
            bits.extend(bytes(max(seq + 1 - len(bits), 1 << 16)))

    def ack(self, seq: int) -> None:
        self._grow(self._acked, seq)
        self._grow(self._consumed, seq)
        if not self._acked[seq]:
            self._acked[seq] = 1
            self.acked += 1
            if not self._consumed[seq]:
                self.outstanding += 1

    def consume(self, seq: int) -> None:
        """A delivered message; a redelivery (at-least-once) counts as a duplicate."""
        self._grow(self._acked, seq)
        self._grow(self._consumed, seq)
        if self._consumed[seq]:
            self.duplicates += 1
            return
        self._consumed[seq] = 1
        self.consumed += 1
        if self._acked[seq]:
            self.outstanding -= 1


def body_of(seq: int, size: int) -> bytes:
    """A message body carrying its sequence number in its first 8 bytes, padded to ``size``."""
    return seq.to_bytes(8, "big") + b"s" * max(0, size - 8)


def seq_of(body: bytes) -> int:
    return int.from_bytes(body[:8], "big")


class Pacer:
    """Hands out send slots ``1 / rate`` apart. Slots missed while every sender was busy (or the event loop late) are
    still handed out, at once, for up to ``slack`` seconds' worth: without that, each late wake-up would lower the
    rate for good; beyond it the schedule restarts from now (no unbounded burst after a stall)."""

    def __init__(self, rate: float | None, slack: float = 1.0) -> None:
        self.interval = 0.0 if not rate else 1.0 / rate
        self.slack = slack
        self._next = 0.0

    async def wait(self) -> float:
        """Wait for the next slot and return its time (trio clock): when the message was due, where its latency
        starts, so that the time it waited behind a stalled broker counts too (no coordinated omission). Unpaced:
        now."""
        now = trio.current_time()
        if not self.interval:
            await trio.lowlevel.checkpoint()
            return now
        slot = max(self._next, now - self.slack)
        self._next = slot + self.interval
        if slot > now:
            await trio.sleep_until(slot)
        else:
            await trio.lowlevel.checkpoint()
        return slot


class ChurningPool:
    """``size`` producers, each with its own client instance (so its own connections to the name server and the
    broker), each closed after a random lifetime in ``lifetimes`` and replaced by a new one."""

    def __init__(self, namesrv: str, group: str, size: int, lifetimes: tuple[float, float], seed: int = 0) -> None:
        self.namesrv = namesrv
        self.group = group
        self.size = size
        self.lifetimes = lifetimes
        self.rng = random.Random(seed)
        self.live: list[Producer] = []
        self.inflight: Counter[int] = Counter()
        self.opened = 0
        self.closed = 0
        self.start_failures = 0
        self._serial = 0
        self._ready = trio.Event()

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        """Keep the pool full until cancelled (each producer is closed on the way out); started once every slot has
        opened its first producer."""
        async with trio.open_nursery() as nursery:
            for slot in range(self.size):
                nursery.start_soon(self._slot, slot)
            while self.opened < self.size:
                await trio.sleep(0.05)
            task_status.started()

    async def _slot(self, slot: int) -> None:
        first = True
        while True:
            self._serial += 1
            config = ClientConfig(self.namesrv, instance_name=f"soak_{os.getpid()}_{slot}_{self._serial}")
            try:
                producer = Producer(self.group, self.namesrv, config=config)
                async with producer:
                    self.live.append(producer)
                    self.opened += 1
                    lo, hi = self.lifetimes
                    # the first generation's lifetimes are spread over the whole range so that closes do not bunch
                    await trio.sleep(self.rng.uniform(0 if first else lo, hi))
                    first = False
                    self.live.remove(producer)
                    while self.inflight[id(producer)]:
                        await trio.sleep(0.01)
                    del self.inflight[id(producer)]
            except Exception:  # a refused start: try again shortly
                self.start_failures += 1
                await trio.sleep(RETRY_PAUSE)
                continue
            self.closed += 1

    def pick(self) -> Producer | None:
        return self.rng.choice(self.live) if self.live else None


async def sender(
    topic: str, size: int, pool: ChurningPool, ledger: Ledger, pacer: Pacer, stats: LoadStats, until: float
) -> None:
    """Send paced messages through the pool's producers until ``until`` (trio clock). A latency runs from the
    message's slot (:meth:`Pacer.wait`) to its acknowledgement: a sender held up by a slow send makes the next
    messages late, and that lateness is part of what they saw."""
    while trio.current_time() < until:
        due = await pacer.wait()
        producer = pool.pick()
        if producer is None:
            await trio.sleep(0.01)
            continue
        seq = ledger.new()
        key = id(producer)
        pool.inflight[key] += 1
        try:
            result = await producer.send(Message(topic, body_of(seq, size), tags="soak"))
        except Exception as exc:  # counted; the soak goes on
            stats.fail(exc)
        else:
            if result.send_status is SendStatus.SEND_OK:
                ledger.ack(seq)
                stats.record((trio.current_time() - due) * 1000)
            else:
                stats.fail(str(result.send_status))
        finally:
            pool.inflight[key] -= 1
