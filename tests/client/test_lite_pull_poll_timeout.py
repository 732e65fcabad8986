"""``poll()`` without a timeout waits the consumer's ``poll_timeout`` (Java's ``pollTimeoutMillis``, 5 s:
client/src/main/java/org/apache/rocketmq/client/consumer/DefaultLitePullConsumer.java, 4.9.8, ``poll()`` polls with
``getPollTimeoutMillis()``); a queue held by flow control is logged as Java logs it. Virtual time against the
embedded name server and broker."""

from __future__ import annotations

import pytest
import trio
import trio.testing

from broker.embedded import EmbeddedCluster
from client.admin import Admin
from client.consumer.lite_pull import LitePullConsumer
from client.message import Message
from client.producer import Producer
from remoting.codec.bodies import MessageQueue


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


async def test_a_lite_pull_queue_held_by_flow_control_is_logged_as_java_logs_it(
    embedded_cluster: EmbeddedCluster, autojump_clock: trio.testing.MockClock, caplog: pytest.LogCaptureFixture
) -> None:
    """DefaultLitePullConsumerImpl's PullTaskImpl.run warns the first time and every 1000th time a queue's pull is
    put off by its cached message count (``queueFlowControlTimes++ % 1000 == 0``), with the threshold, the cached
    offsets, count and size."""
    async with Admin(embedded_cluster.namesrv_addr) as admin:
        await admin.create_topic("LiteFlowLog", read_queue_nums=1, write_queue_nums=1)
    async with Producer("lite-flow-log-pg", embedded_cluster.namesrv_addr) as producer:
        for i in range(10):
            await producer.send(Message("LiteFlowLog", b"m%d" % i))
    options = {"pull_batch_size": 1, "pull_threshold_for_queue": 3}
    with caplog.at_level("WARNING", logger="client.consumer.lite_pull_worker"):
        async with LitePullConsumer("lite-flow-log", embedded_cluster.namesrv_addr, **options) as consumer:
            await consumer.assign(await consumer.fetch_message_queues("LiteFlowLog"))
            await consumer.seek_to_begin(MessageQueue("LiteFlowLog", "broker-a", 0))
            await trio.sleep(30)  # some 600 flow controls, nothing polled
    lines = [r.getMessage() for r in caplog.records if "so do flow control" in r.getMessage()]
    assert lines == [
        "The cached message count exceeds the threshold 3, so do flow control, minOffset=0, maxOffset=3, count=4, "
        "size=0 MiB, flowControlTimes=1"
    ]
