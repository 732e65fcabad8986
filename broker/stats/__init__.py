"""Throughput statistics (RocketMQ's ``BrokerStatsManager`` and ``StoreStatsService``): :mod:`broker.stats.item`
(sampled counters per key), :mod:`broker.stats.store_stats` (the store's per-second rates),
:mod:`broker.stats.latency` (the put latency distribution), :mod:`broker.stats.puts` (puts read from the store) and
:mod:`broker.stats.manager` (the broker's statistics and their sampling task)."""

from broker.stats.manager import (
    BROKER_GET_NUMS,
    BROKER_PUT_NUMS,
    GROUP_GET_LATENCY,
    GROUP_GET_NUMS,
    GROUP_GET_SIZE,
    QUEUE_GET_NUMS,
    QUEUE_GET_SIZE,
    QUEUE_PUT_NUMS,
    QUEUE_PUT_SIZE,
    SCHEDULE_CONSUMER_GROUP,
    SNDBCK_PUT_NUMS,
    TOPIC_PUT_NUMS,
    TOPIC_PUT_SIZE,
    BrokerStatsManager,
    stats_key,
)

__all__ = [
    "BROKER_GET_NUMS",
    "BROKER_PUT_NUMS",
    "GROUP_GET_LATENCY",
    "GROUP_GET_NUMS",
    "GROUP_GET_SIZE",
    "QUEUE_GET_NUMS",
    "QUEUE_GET_SIZE",
    "QUEUE_PUT_NUMS",
    "QUEUE_PUT_SIZE",
    "SCHEDULE_CONSUMER_GROUP",
    "SNDBCK_PUT_NUMS",
    "TOPIC_PUT_NUMS",
    "TOPIC_PUT_SIZE",
    "BrokerStatsManager",
    "stats_key",
]
