"""``BrokerStatsManager``: the broker's throughput statistics (RocketMQ's ``BrokerStatsManager``, ``BrokerStats`` and
``StoreStatsService``), read by GET_BROKER_RUNTIME_INFO, VIEW_BROKER_STATS_DATA, GET_CONSUME_STATS and
GET_BROKER_CONSUME_STATS.

Statistics kept, with Java's names and keys:

- ``TOPIC_PUT_NUMS`` (key ``topic``) and ``BROKER_PUT_NUMS`` (key: the cluster name): messages stored;
- ``GROUP_GET_NUMS`` / ``GROUP_GET_SIZE`` (key ``topic@group``) and ``BROKER_GET_NUMS``: messages and bytes pulled;
- the store rates ``putTps``, ``getFoundTps``, ``getMissTps``, ``getTotalTps``, ``getTransferedTps``
  (:mod:`broker.stats.store_stats`) and the ``msgPutTotal*`` / ``msgGetTotal*`` day totals.

Cost on the hot path: a pull calls :meth:`BrokerStatsManager.record_get` or :meth:`~BrokerStatsManager.record_miss`
(a few integer additions, 0.1-0.3 us); a send costs
nothing, because puts are not counted per message but read from the store's next-queue-offset table when sampling
(ours: Java counts in the send processor). So put counts include every stored message (sends, retries, delayed
deliveries, transaction commits); ``times`` of a put item equals its ``value`` (the number of send requests is not
known), and ``TOPIC_PUT_SIZE`` is not kept. Messages recovered at start are not counted as puts.

Ownership: the controller starts :meth:`BrokerStatsManager.run` with ``nursery.start``; it samples once a second
(store rates, broker totals), every 10 s / 10 min / 1 h (the item windows of :mod:`broker.stats.item`) and rolls
the day totals at local midnight, until cancelled. Trio's clock drives sampling (virtual time in tests); the wall
clock only decides the day. Nothing here raises.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Final

import trio

from broker.stats.item import StatsItem, StatsItemSet, StatsSnapshot
from broker.stats.store_stats import StoreStats

if TYPE_CHECKING:
    from store.message_store import MessageStore

TOPIC_PUT_NUMS: Final = "TOPIC_PUT_NUMS"
GROUP_GET_NUMS: Final = "GROUP_GET_NUMS"
GROUP_GET_SIZE: Final = "GROUP_GET_SIZE"
BROKER_PUT_NUMS: Final = "BROKER_PUT_NUMS"
BROKER_GET_NUMS: Final = "BROKER_GET_NUMS"

_SECONDS_PER_ITEM_SAMPLE: Final = 10
_SECONDS_PER_HOUR_SAMPLE: Final = 600
_SECONDS_PER_DAY_SAMPLE: Final = 3600


def stats_key(topic: str, group: str) -> str:
    """Java's ``buildStatsKey(topic, group)``."""
    return f"{topic}@{group}"


class BrokerStatsManager:
    """See the module docstring. ``store`` is read when sampling (its ``queue_offsets`` table, never mutated)."""

    def __init__(self, store: MessageStore, cluster_name: str, *, wall_clock: Callable[[], float] = time.time) -> None:
        self.store = store
        self.cluster_name = cluster_name
        self.wall_clock = wall_clock
        self.store_stats = StoreStats()
        self.sets = {name: StatsItemSet(name) for name in (TOPIC_PUT_NUMS, GROUP_GET_NUMS, GROUP_GET_SIZE)}
        self.sets[BROKER_PUT_NUMS] = StatsItemSet(BROKER_PUT_NUMS)
        self.sets[BROKER_GET_NUMS] = StatsItemSet(BROKER_GET_NUMS)
        self._broker_put = self.sets[BROKER_PUT_NUMS].get_or_create(cluster_name)
        self._broker_get = self.sets[BROKER_GET_NUMS].get_or_create(cluster_name)
        #: (topic, group) -> (GROUP_GET_NUMS item, GROUP_GET_SIZE item): the hot path's lookup, no string building.
        self._group_items: dict[tuple[str, str], tuple[StatsItem, StatsItem]] = {}
        #: Per-topic stored-message totals at the last sample, to turn the store's offsets into puts.
        self._topic_seen: dict[str, int] = {}
        #: Java's BrokerStats: the put/get totals at the last two local midnights (0 until the first one passes).
        self.day_totals = {"put_yesterday": 0, "put_today": 0, "get_yesterday": 0, "get_today": 0}
        self._day: tuple[int, int] | None = None

    # ---- hot path ----------------------------------------------------------------------------------------------

    def record_miss(self) -> None:
        """A pull that found nothing to deliver."""
        self.store_stats.get_miss += 1

    def record_get(self, group: str, topic: str, count: int, size: int) -> None:
        """A pull that delivered ``count`` messages of ``size`` bytes in all (the response body's length: summing
        the records' lengths here cost 1.4 us per 32-message pull, the body's length nothing)."""
        store = self.store_stats
        store.get_found += 1
        store.get_transferred += count
        items = self._group_items.get((topic, group))
        if items is None:
            items = self._group_item(topic, group)
        nums, sizes = items
        nums.value += count
        nums.times += 1
        sizes.value += size
        sizes.times += 1

    def _group_item(self, topic: str, group: str) -> tuple[StatsItem, StatsItem]:
        key = stats_key(topic, group)
        items = (self.sets[GROUP_GET_NUMS].get_or_create(key), self.sets[GROUP_GET_SIZE].get_or_create(key))
        self._group_items[(topic, group)] = items
        return items

    # ---- reading -----------------------------------------------------------------------------------------------

    def item(self, stats_name: str, stats_key: str) -> StatsItem | None:
        """VIEW_BROKER_STATS_DATA's lookup; ``None`` for an unknown statistic or key."""
        stats = self.sets.get(stats_name)
        return None if stats is None else stats.get(stats_key)

    def tps_group_get_nums(self, group: str, topic: str) -> float:
        """Messages per second ``group`` pulled from ``topic`` over the last minute (GET_CONSUME_STATS' consumeTps)."""
        item = self.sets[GROUP_GET_NUMS].get(stats_key(topic, group))
        return (item.in_minute() if item is not None else StatsSnapshot()).tps

    def runtime_entries(self) -> dict[str, str]:
        """The GET_BROKER_RUNTIME_INFO keys owned here: the store rates and the day totals."""
        entries = self.store_stats.runtime_entries()
        days = self.day_totals
        entries.update(
            {
                "msgPutTotalYesterdayMorning": str(days["put_yesterday"]),
                "msgPutTotalTodayMorning": str(days["put_today"]),
                "msgPutTotalTodayNow": str(self._broker_put.value),
                "msgGetTotalYesterdayMorning": str(days["get_yesterday"]),
                "msgGetTotalTodayMorning": str(days["get_today"]),
                "msgGetTotalTodayNow": str(self._broker_get.value),
                "putMessageTimesTotal": str(self._broker_put.value),
            }
        )
        return entries

    # ---- deletions ---------------------------------------------------------------------------------------------

    def on_topic_deleted(self, topic: str) -> None:
        """Forget the topic's items (Java's ``onTopicDeleted``); its next messages count from zero."""
        self.sets[TOPIC_PUT_NUMS].delete_where(lambda key: key != topic)
        prefix = topic + "@"
        for name in (GROUP_GET_NUMS, GROUP_GET_SIZE):
            self.sets[name].delete_where(lambda key: not key.startswith(prefix))
        for pair in [p for p in self._group_items if p[0] == topic]:
            del self._group_items[pair]

    def on_group_deleted(self, group: str) -> None:
        """Forget the group's items (Java's ``onGroupDeleted``)."""
        suffix = "@" + group
        for name in (GROUP_GET_NUMS, GROUP_GET_SIZE):
            self.sets[name].delete_where(lambda key: not key.endswith(suffix))
        for pair in [p for p in self._group_items if p[1] == group]:
            del self._group_items[pair]

    # ---- sampling ----------------------------------------------------------------------------------------------

    def _topic_totals(self) -> dict[str, int]:
        totals: dict[str, int] = {}
        for (topic, _), offset in self.store.queue_offsets.items():
            totals[topic] = totals.get(topic, 0) + offset
        return totals

    def start_counting(self) -> None:
        """Take the store's current contents as the baseline: only messages stored from now on count as puts."""
        self._topic_seen = self._topic_totals()

    def _count_puts(self) -> None:
        """Turn growth of the store's per-topic totals since the last call into puts. A total that shrank (the topic
        was deleted, maybe re-created) restarts from its new value."""
        seen = self._topic_seen
        items = self.sets[TOPIC_PUT_NUMS]
        totals = self._topic_totals()
        added = 0
        for topic, total in totals.items():
            before = seen.get(topic, 0)
            grown = total - before if total >= before else total
            if grown:
                items.get_or_create(topic).add(grown, grown)
                added += grown
        self._topic_seen = totals
        self._broker_put.add(added, added)
        self.store_stats.put_total = self._broker_put.value

    def sample_second(self, tick: int, now_ms: int) -> None:
        """One sampling round; ``tick`` counts seconds since :meth:`run` started (0 first)."""
        self._count_puts()
        self._broker_get.value = self.store_stats.get_transferred
        self.store_stats.sample(now_ms)
        if tick % _SECONDS_PER_ITEM_SAMPLE == 0:
            for stats in self.sets.values():
                for item in stats:
                    item.sample_seconds(now_ms)
        if tick % _SECONDS_PER_HOUR_SAMPLE == 0:
            for stats in self.sets.values():
                for item in stats:
                    item.sample_minutes(now_ms)
        if tick % _SECONDS_PER_DAY_SAMPLE == 0:
            for stats in self.sets.values():
                for item in stats:
                    item.sample_hour(now_ms)
        self._roll_day()

    def _roll_day(self) -> None:
        local = time.localtime(self.wall_clock())
        day = (local.tm_year, local.tm_yday)
        if self._day is not None and day != self._day:
            days = self.day_totals
            days["put_yesterday"], days["put_today"] = days["put_today"], self._broker_put.value
            days["get_yesterday"], days["get_today"] = days["get_today"], self._broker_get.value
        self._day = day

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        """Sample once a second from now until cancelled (see the module docstring)."""
        self.start_counting()
        task_status.started()
        start = trio.current_time()
        tick = 0
        while True:
            self.sample_second(tick, int(trio.current_time() * 1000))
            tick += 1
            await trio.sleep_until(start + tick)
