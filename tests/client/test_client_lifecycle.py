"""Starting and stopping clients as RocketMQ 4.9.8's do (client/src/main/java/org/apache/rocketmq/client/impl/consumer/
DefaultMQPushConsumerImpl.java, DefaultLitePullConsumerImpl.java ``start``): a second start of a running client fails
and leaves the running one as it was."""

from __future__ import annotations

import pytest
import trio
import trio.testing

from broker.embedded import EmbeddedCluster
from client.config import ClientConfig
from client.consumer.listener import ConsumeConcurrentlyStatus
from client.consumer.lite_pull import LitePullConsumer
from client.consumer.push import PushConsumer
from client.errors import ClientStateError
from client.instance import MQClientInstance
from client.message import MessageExt
from remoting.codec.bodies import ConsumeFromWhere
from tests.client.helpers import create_topic, poll_until, send_bodies, wait_until


async def test_a_second_start_of_a_running_push_consumer_fails_and_leaves_it_consuming(
    embedded_cluster: EmbeddedCluster, autojump_clock: trio.testing.MockClock
) -> None:
    """Java's ``DefaultMQPushConsumerImpl.start`` on a RUNNING consumer throws "The PushConsumer service state not OK,
    maybe started once" and changes nothing. Before: on a shared instance the second start replaced the running
    consumer's task groups, failed to register the group again, and its clean-up stopped and unregistered the
    running consumer, which consumed nothing more."""
    ns = embedded_cluster.namesrv_addr
    await create_topic(ns, "SecondStart", queues=1)
    got: list[bytes] = []

    def listener(msgs: list[MessageExt]) -> ConsumeConcurrentlyStatus:
        got.extend(m.body for m in msgs)
        return ConsumeConcurrentlyStatus.CONSUME_SUCCESS

    instance = MQClientInstance(ClientConfig(namesrv_addr=ns))
    consumer = PushConsumer(
        "cg-second-start",
        instance=instance,
        consume_from_where=ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET,
        await_termination=1,
    )
    consumer.subscribe("SecondStart")
    consumer.register_message_listener(listener)
    async with instance, consumer:
        await send_bodies(ns, "SecondStart", [b"before"])
        await wait_until(lambda: got == [b"before"])
        with pytest.raises(ClientStateError):
            async with consumer:
                pass
        assert "cg-second-start" in instance.consumers
        await send_bodies(ns, "SecondStart", [b"after"])
        await wait_until(lambda: got == [b"before", b"after"])


async def test_a_second_start_of_a_running_lite_pull_consumer_fails_and_leaves_it_pulling(
    embedded_cluster: EmbeddedCluster, autojump_clock: trio.testing.MockClock
) -> None:
    """Java's ``DefaultLitePullConsumerImpl.start`` on a RUNNING consumer throws "The PullConsumer service state not
    OK, maybe started once" and changes nothing. Before: on a shared instance the second start replaced the running
    consumer's task group and its clean-up stopped and unregistered the running consumer."""
    ns = embedded_cluster.namesrv_addr
    await create_topic(ns, "SecondStartLite", queues=1)
    instance = MQClientInstance(ClientConfig(namesrv_addr=ns))
    consumer = LitePullConsumer(
        "cg-second-start-lite", instance=instance, consume_from_where=ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET
    )
    async with instance, consumer:
        await consumer.subscribe("SecondStartLite")
        await send_bodies(ns, "SecondStartLite", [b"before"])
        assert [m.body for m in await poll_until(consumer, 1)] == [b"before"]
        with pytest.raises(ClientStateError):
            async with consumer:
                pass
        assert "cg-second-start-lite" in instance.consumers
        await send_bodies(ns, "SecondStartLite", [b"after"])
        assert [m.body for m in await poll_until(consumer, 1)] == [b"after"]
