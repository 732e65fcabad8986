"""Helpers shared by the semantics tests: virtual store time and topic creation through the admin client."""

from __future__ import annotations

import time
from collections.abc import Callable

import attrs
import trio

from broker.embedded import EmbeddedCluster
from client.admin import Admin


def use_virtual_store_clock(cluster: EmbeddedCluster, clock: Callable[[], int] | None = None) -> Callable[[], int]:
    """Make the broker's store time follow Trio's (virtual) clock; returns the clock to re-apply after a restart."""
    if clock is None:
        base = time.time() - trio.current_time()

        def clock() -> int:
            return int((base + trio.current_time()) * 1000)

    controller = cluster.controller
    store = controller.context.store
    store.config = attrs.evolve(store.config, now_ms=clock)
    # Services that already computed a wait with the previous clock re-check with this one.
    controller.timer.notify()
    for level in controller.schedule.levels:
        controller.schedule.notify(level)
    return clock


async def create_topic(cluster: EmbeddedCluster, topic: str, queues: int = 1) -> None:
    async with Admin(cluster.namesrv_addr) as admin:
        await admin.create_topic(topic, read_queue_nums=queues, write_queue_nums=queues)
