"""Throughput statistics (RocketMQ's ``BrokerStatsManager`` and ``StoreStatsService``): :mod:`broker.stats.item`
(sampled counters per key), :mod:`broker.stats.store_stats` (the store's per-second rates) and
:mod:`broker.stats.manager` (the broker's statistics and their sampling task)."""

from broker.stats.manager import (
    BROKER_GET_NUMS,
    BROKER_PUT_NUMS,
    GROUP_GET_NUMS,
    GROUP_GET_SIZE,
    TOPIC_PUT_NUMS,
    BrokerStatsManager,
    stats_key,
)

__all__ = [
    "BROKER_GET_NUMS",
    "BROKER_PUT_NUMS",
    "GROUP_GET_NUMS",
    "GROUP_GET_SIZE",
    "TOPIC_PUT_NUMS",
    "BrokerStatsManager",
    "stats_key",
]
