"""Broker protection from slow consumers: RocketMQ's ``BrokerController.protectBroker``
(broker/src/main/java/org/apache/rocketmq/broker/BrokerController.java), run every 3 minutes from 3 minutes after the
start. With ``disableConsumeIfConsumerReadSlowly``, a group whose last pull of some queue read entries more than
``consumerFallbehindThreshold`` CommitLog bytes behind the head (the pull processor records it per queue, as
DefaultMessageStore.getMessage's recordDiskFallBehindSize) gets ``consumeEnable`` false: its pulls answer
NO_PERMISSION until an admin enables it again (UPDATE_AND_CREATE_SUBSCRIPTIONGROUP)."""

from __future__ import annotations

import logging
from typing import Final

import trio

from broker.context import BrokerState

__all__ = ["PROTECT_INTERVAL", "BrokerProtection"]

log = logging.getLogger(__name__)

#: Seconds between two rounds (and before the first), Java's fixed 3 minutes.
PROTECT_INTERVAL: Final = 180.0


class BrokerProtection:
    def __init__(self, broker: BrokerState, interval: float = PROTECT_INTERVAL) -> None:
        self.broker = broker
        self.interval = interval

    def protect(self) -> list[str]:
        """One round; returns the groups disabled."""
        config = self.broker.config
        if not config.disable_consume_if_consumer_read_slowly:
            return []
        disabled: list[str] = []
        for (group, _topic, _queue_id), behind in list(self.broker.stats.fall_behind.items()):
            if behind > config.consumer_fallbehind_threshold:
                log.info("[PROTECT_BROKER] the consumer[%s] consume slowly, %d bytes, disable it", group, behind)
                self.broker.groups.disable_consume(group)
                disabled.append(group)
        return disabled

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        task_status.started()
        while True:
            await trio.sleep(self.interval)
            self.protect()
