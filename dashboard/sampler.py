"""The Charts page's data, sampled by the dashboard itself every ``sample_interval`` seconds (rocketmq-dashboard's
collector runs every minute) and kept for ``history`` seconds, in memory.

Per broker: the put and get rates of its runtime info (``putTps``, ``getTransferedTps`` or 5.x's ``getTransferredTps``:
the 10-second rates).
Per topic (NORMAL topics only): the put rate is the growth of the sum of its queues' max offsets (GET_TOPIC_STATS_INFO)
divided by the time between two samples, so a topic's first sample has no point; the get rate is the messages its
groups actually pulled per second over the broker's last minute: the ``consumeTps`` of each group's consume stats
(one GET_BROKER_CONSUME_STATS per master), which is the broker's GROUP_GET_NUMS statistic of ``topic@group``, the one
rocketmq-dashboard charts. Committed offsets are not used: moving them (a reset, skipping a backlog) pulls nothing.

Ownership: :meth:`Sampler.run` runs in the app's task group until cancelled. A sample that fails for one broker or
topic (no answer, or a reply that does not decode) skips it; a sample that fails as a whole (no name server) is
logged and retried at the next tick. Elapsed time comes from the event loop's clock (virtual in tests), the points'
timestamps from the wall clock.
"""

from __future__ import annotations

import logging
import time
from collections import deque
from collections.abc import Callable
from typing import Any

import anyio
import attrs

from client.admin import BROKER_FAILURES, Admin
from dashboard.cluster import first_rate, get_rate
from dashboard.topics import topic_kind

log = logging.getLogger(__name__)


@attrs.define
class Series:
    """Points ``(wall time ms, put per second, get per second)``, oldest first."""

    points: deque[tuple[int, float, float]] = attrs.field(factory=deque)

    def add(self, point: tuple[int, float, float]) -> None:
        self.points.append(point)

    def prune(self, oldest_ms: int) -> None:
        while self.points and self.points[0][0] < oldest_ms:
            self.points.popleft()

    def to_json(self) -> dict[str, list[Any]]:
        return {
            "t": [p[0] for p in self.points],
            "put": [round(p[1], 3) for p in self.points],
            "get": [round(p[2], 3) for p in self.points],
        }


@attrs.define
class Sampler:
    """See the module docstring. ``wall_ms`` gives the points' timestamps."""

    admin: Admin
    interval: float = 60.0
    history: float = 3600.0
    concurrency: int = 16
    wall_ms: Callable[[], int] = attrs.field(default=lambda: int(time.time() * 1000))
    brokers: dict[str, Series] = attrs.field(factory=dict)
    topics: dict[str, Series] = attrs.field(factory=dict)
    samples: int = 0
    last_duration: float = 0.0
    _totals: dict[str, tuple[float, int]] = attrs.field(factory=dict)

    async def run(self) -> None:
        while True:
            try:
                await self.sample_once()
            except BROKER_FAILURES as exc:
                log.warning("chart sample failed: %s", exc)
            await anyio.sleep(self.interval)

    async def sample_once(self) -> None:
        """One sample of every broker and topic."""
        started = anyio.current_time()
        now_ms = self.wall_ms()
        oldest = now_ms - int(self.history * 1000)
        await self._sample_brokers(now_ms)
        await self._sample_topics(now_ms)
        for table in (self.brokers, self.topics):
            for series in table.values():
                series.prune(oldest)
            for name in [n for n, s in table.items() if not s.points]:
                del table[name]
        self.samples += 1
        self.last_duration = anyio.current_time() - started

    async def _sample_brokers(self, now_ms: int) -> None:
        info = await self.admin.cluster_info()
        for name, bd in sorted(info.broker_addr_table.items()):
            for broker_id, addr in sorted(bd.broker_addrs.items()):
                try:
                    runtime = await self.admin.broker_status(addr)
                except BROKER_FAILURES:
                    continue
                point = (now_ms, first_rate(runtime.get("putTps")), get_rate(runtime))
                self.brokers.setdefault(f"{name}/{broker_id}", Series()).add(point)

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
            put = max(0, put_total - previous[1]) / (now - previous[0])
            self.topics.setdefault(topic, Series()).add((now_ms, put, pulled.get(topic, 0.0)))
        for gone in set(self._totals) - set(stored):
            del self._totals[gone]

    def broker_series(self) -> dict[str, dict[str, list[Any]]]:
        return {name: s.to_json() for name, s in sorted(self.brokers.items())}

    def topic_series(self, topic: str) -> dict[str, list[Any]] | None:
        series = self.topics.get(topic)
        return None if series is None else series.to_json()

    def busiest_topics(self, limit: int = 10) -> list[dict[str, Any]]:
        """Topics by their latest put plus get rate, busiest first."""
        latest = [(name, s.points[-1]) for name, s in self.topics.items() if s.points]
        latest.sort(key=lambda item: (-(item[1][1] + item[1][2]), item[0]))
        return [{"topic": name, "put": round(p[1], 3), "get": round(p[2], 3)} for name, p in latest[:limit]]
