"""The Charts page's data, sampled by the dashboard itself every ``sample_interval`` seconds (rocketmq-dashboard's
collector runs every minute), kept for the day in memory and in that day's files (:mod:`dashboard.history`, in
rocketmq-dashboard's format: a past day is read from them, and today's samples survive a restart).

Per broker (``brokerName:brokerId``): a line ``"<ms>,<tps>,<put>,<get>"``: ``tps`` is rocketmq-dashboard's, the mean
of the three windows of the runtime info's ``getTotalTps`` (get requests per second); ``put`` and ``get``, the ones
charted, its ``putTps`` and ``getTransferedTps`` (5.x's ``getTransferredTps``), the 10-second rates. A reader of
rocketmq-dashboard's format reads the first two fields.
Per topic (NORMAL topics only): the put rate is the growth of the sum of its queues' max offsets (GET_TOPIC_STATS_INFO)
divided by the time between two samples, so a topic's first sample has no point; the get rate is the messages its
groups actually pulled per second over the broker's last minute: the ``consumeTps`` of each group's consume stats
(one GET_BROKER_CONSUME_STATS per master), which is the broker's GROUP_GET_NUMS statistic of ``topic@group``, the one
rocketmq-dashboard charts. Committed offsets are not used: moving them (a reset, skipping a backlog) pulls nothing.
A topic's line is Java's ``"<ms>,<inTps>,<inCount>,<outTps>,<outCount>"``; the counts are the messages put and got
since the day's first sample (Java asks each master for the last 24 hours' TOPIC_PUT_NUMS and GROUP_GET_NUMS).

Ownership: :meth:`Sampler.run` runs in the app's task group until cancelled. A sample that fails for one broker or
topic (no answer, or a reply that does not decode) skips it; a sample that fails as a whole (no name server) is
logged and retried at the next tick. Elapsed time comes from the event loop's clock (virtual in tests), the points'
timestamps from the wall clock.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from typing import Any

import anyio
import attrs

from client.admin import BROKER_FAILURES, Admin
from dashboard.cluster import first_rate, get_rate
from dashboard.history import DayFiles, Lines, day_of
from dashboard.topics import topic_kind

log = logging.getLogger(__name__)

PAST_DAYS_KEPT = 4
"""Past days' lines kept in memory, by day and file (a page of a past day asks for both files, then a topic's)."""


@attrs.define
class Sampler:
    """See the module docstring. ``wall_ms`` gives the points' timestamps and so the day they are filed under."""

    admin: Admin
    files: DayFiles
    interval: float = 60.0
    concurrency: int = 16
    wall_ms: Callable[[], int] = attrs.field(default=lambda: int(time.time() * 1000))
    day: str | None = None
    brokers: Lines = attrs.field(factory=dict)
    topics: Lines = attrs.field(factory=dict)
    samples: int = 0
    last_duration: float = 0.0
    _totals: dict[str, tuple[float, int]] = attrs.field(factory=dict)
    _counts: dict[str, tuple[int, int]] = attrs.field(factory=dict)
    _past: dict[tuple[str, str], Lines] = attrs.field(factory=dict)

    async def run(self) -> None:
        while True:
            try:
                await self.sample_once()
            except BROKER_FAILURES as exc:
                log.warning("chart sample failed: %s", exc)
            await anyio.sleep(self.interval)

    def today(self) -> str:
        return day_of(self.wall_ms())

    async def sample_once(self) -> None:
        """One sample of every broker and topic, added to today's lines and written to today's files."""
        started = anyio.current_time()
        now_ms = self.wall_ms()
        day = day_of(now_ms)
        if day != self.day:
            await self._open_day(day)
        await self._sample_brokers(now_ms)
        await self._sample_topics(now_ms)
        try:
            await anyio.to_thread.run_sync(self.files.write, day, self.brokers, self.topics)
        except OSError as exc:
            log.warning("chart history of %s not written: %s", day, exc)
        self.samples += 1
        self.last_duration = anyio.current_time() - started

    async def _open_day(self, day: str) -> None:
        """Start ``day`` from its files (a restart keeps its samples; a new day has none), as Java's ``saveData``
        empties its maps when the day changes and ``writeFile`` merges a day's file into them."""
        self.brokers, self.topics = await anyio.to_thread.run_sync(self.files.open_day, day)
        self._counts = {topic: _counts_of(lines[-1]) for topic, lines in self.topics.items() if lines}
        self.day = day

    async def broker_lines(self, day: str) -> Lines:
        """A day's broker lines: today's from memory, another day's from its file."""
        return self.brokers if day == self.day else await self._past_lines(day, self.files.read_brokers)

    async def topic_lines(self, day: str) -> Lines:
        """A day's topic lines: today's from memory, another day's from its file."""
        return self.topics if day == self.day else await self._past_lines(day, self.files.read_topics)

    async def _past_lines(self, day: str, read: Callable[[str], Lines]) -> Lines:
        """``read(day)`` in a worker thread; a day before today is kept (its file no longer changes), the last
        ``PAST_DAYS_KEPT`` of them."""
        key = (day, read.__name__)
        if (kept := self._past.pop(key, None)) is not None:
            self._past[key] = kept
            return kept
        lines = await anyio.to_thread.run_sync(read, day)
        if day < self.today():
            self._past[key] = lines
            while len(self._past) > PAST_DAYS_KEPT:
                del self._past[next(iter(self._past))]
        return lines

    async def _sample_brokers(self, now_ms: int) -> None:
        info = await self.admin.cluster_info()
        for name, bd in sorted(info.broker_addr_table.items()):
            for broker_id, addr in sorted(bd.broker_addrs.items()):
                try:
                    runtime = await self.admin.broker_status(addr)
                except BROKER_FAILURES:
                    continue
                rates = (average_rate(runtime.get("getTotalTps")), first_rate(runtime.get("putTps")), get_rate(runtime))
                line = ",".join([str(now_ms), *(f"{rate:.5f}" for rate in rates)])
                self.brokers.setdefault(f"{name}:{broker_id}", []).append(line)

    async def _pull_rates(self) -> dict[str, float]:
        """Messages pulled per second by topic, summed over its groups and masters (GROUP_GET_NUMS, last minute)."""
        rates: dict[str, float] = {}
        for addr in await self.admin.master_addresses():
            try:
                stats = await self.admin.broker_consume_stats(addr)
            except BROKER_FAILURES:
                continue
            for _, per_topic in stats.consume_stats_list:
                for s in per_topic:
                    topic = next((mq.topic for mq in s.offset_table), None)
                    if topic is not None:
                        rates[topic] = rates.get(topic, 0.0) + s.consume_tps
        return rates

    async def _sample_topics(self, now_ms: int) -> None:
        info = await self.admin.cluster_info()
        own = frozenset(info.cluster_addr_table) | frozenset(info.broker_addr_table)
        topics = [t for t in await self.admin.topic_list() if topic_kind(t, own) == "NORMAL"]
        pulled = await self._pull_rates()
        limiter = anyio.CapacityLimiter(self.concurrency)
        stored: dict[str, int] = {}

        async def total(topic: str) -> None:
            async with limiter:
                try:
                    status = await self.admin.topic_status(topic)
                except BROKER_FAILURES:
                    return
            stored[topic] = sum(o.max_offset for o in status.values())

        async with anyio.create_task_group() as tg:
            for topic in topics:
                tg.start_soon(total, topic)
        now = anyio.current_time()
        for topic, put_total in stored.items():
            previous = self._totals.get(topic)
            self._totals[topic] = (now, put_total)
            if previous is None or now <= previous[0]:
                continue
            self._add_topic_line(
                topic, now_ms, max(0, put_total - previous[1]), now - previous[0], pulled.get(topic, 0.0)
            )
        for gone in set(self._totals) - set(stored):
            del self._totals[gone]

    def _add_topic_line(self, topic: str, now_ms: int, put: int, elapsed: float, get_tps: float) -> None:
        """Java's topic line: the rates and the messages put and got today (ours: since the day's first sample)."""
        put_count, get_count = self._counts.get(topic, (0, 0))
        put_count, get_count = put_count + put, get_count + round(get_tps * elapsed)
        self._counts[topic] = (put_count, get_count)
        line = f"{now_ms},{put / elapsed:.5f},{put_count},{get_tps:.5f},{get_count}"
        self.topics.setdefault(topic, []).append(line)


def average_rate(text: object) -> float:
    """The mean of a runtime rate's windows (``"<10 s> <1 min> <10 min>"``), as Java's ``collectBroker``."""
    try:
        rates = [float(part) for part in str(text).split()]
    except ValueError:
        return 0.0
    return sum(rates) / len(rates) if rates else 0.0


def _counts_of(line: str) -> tuple[int, int]:
    fields = line.split(",")
    try:
        return int(fields[2]), int(fields[4])
    except (IndexError, ValueError):
        return 0, 0


def _field(fields: list[str], index: int) -> float | None:
    try:
        return round(float(fields[index]), 3)
    except (IndexError, ValueError):
        return None


def _series(lines: list[str], put: int, get: int) -> dict[str, list[Any]]:
    rows = [line.split(",") for line in lines]
    rows = [fields for fields in rows if fields[0].isdigit()]
    return {
        "t": [int(fields[0]) for fields in rows],
        "put": [_field(fields, put) for fields in rows],
        "get": [_field(fields, get) for fields in rows],
    }


def broker_series(brokers: Lines) -> dict[str, dict[str, list[Any]]]:
    """Put and get TPS by broker (a line written by rocketmq-dashboard itself has neither: its rate is requests)."""
    return {name: _series(lines, 2, 3) for name, lines in sorted(brokers.items())}


def topic_series(topics: Lines, topic: str) -> dict[str, list[Any]] | None:
    lines = topics.get(topic)
    return None if lines is None else _series(lines, 1, 3)


def busiest_topics(topics: Lines, limit: int = 10) -> list[dict[str, Any]]:
    """Topics by their latest put plus get rate, busiest first."""
    latest = []
    for name, lines in topics.items():
        series = _series(lines[-1:], 1, 3)
        if series["t"]:
            latest.append((name, series["put"][0] or 0.0, series["get"][0] or 0.0))
    latest.sort(key=lambda item: (-(item[1] + item[2]), item[0]))
    return [{"topic": name, "put": put, "get": get} for name, put, get in latest[:limit]]
