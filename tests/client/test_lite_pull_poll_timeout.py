"""``poll()`` without a timeout waits the consumer's ``poll_timeout`` (Java's ``pollTimeoutMillis``, 5 s:
client/src/main/java/org/apache/rocketmq/client/consumer/DefaultLitePullConsumer.java, 4.9.8, ``poll()`` polls with
``getPollTimeoutMillis()``). Virtual time against the embedded name server and broker."""

from __future__ import annotations

import trio
import trio.testing

from broker.embedded import EmbeddedCluster
from client.admin import Admin
from client.consumer.lite_pull import LitePullConsumer


async def test_poll_without_a_timeout_waits_the_consumers_poll_timeout(
    embedded_cluster: EmbeddedCluster, autojump_clock: trio.testing.MockClock
) -> None:
    async with Admin(embedded_cluster.namesrv_addr) as admin:
        await admin.create_topic("PollTimeoutEmpty", read_queue_nums=1, write_queue_nums=1)
    async with LitePullConsumer("lite-poll-timeout", embedded_cluster.namesrv_addr, poll_timeout=12.0) as consumer:
        assert consumer.running_info()["properties"]["pollTimeoutMillis"] == "12000"
        await consumer.assign(await consumer.fetch_message_queues("PollTimeoutEmpty"))
        began = trio.current_time()
        assert await consumer.poll() == []
        assert trio.current_time() - began == 12.0
    async with LitePullConsumer("lite-poll-default", embedded_cluster.namesrv_addr) as consumer:
        assert consumer.poll_timeout == 5.0
        await consumer.assign(await consumer.fetch_message_queues("PollTimeoutEmpty"))
        began = trio.current_time()
        assert await consumer.poll() == []
        assert trio.current_time() - began == 5.0
