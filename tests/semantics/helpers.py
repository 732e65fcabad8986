"""Helpers shared by the semantics tests: virtual store time and topic creation through the admin client."""

from __future__ import annotations

import time
from collections.abc import Callable

import attrs
import trio

from broker.embedded import EmbeddedCluster
from client.admin import Admin
from remoting.codec.message import MessageRecord


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


async def deliver_delayed(cluster: EmbeddedCluster, topic: str, level: int, count: int) -> None:
    """The master's schedule delivers ``count`` messages of delay ``level`` to ``topic`` (its progress is then
    ``{level: count}``); the store's time follows Trio's clock from here on."""
    use_virtual_store_clock(cluster)
    controller = cluster.controller
    for i in range(count):
        controller.context.store.append(controller.schedule.rewrite(MessageRecord(topic, f"d{i}".encode()), level))
    while controller.schedule.offsets.get(level, 0) < count:
        await trio.sleep(0.5)
