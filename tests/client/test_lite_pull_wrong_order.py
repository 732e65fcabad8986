"""What a lite pull consumer says when called in the wrong order, in Java's words
(client/src/main/java/org/apache/rocketmq/client/impl/consumer/DefaultLitePullConsumerImpl.java, 4.9.8:
``checkServiceState`` and ``seek``)."""

from __future__ import annotations

import re
from collections.abc import Awaitable, Callable

import pytest

from client.consumer.lite_pull import LitePullConsumer
from client.errors import ClientStateError, MQClientError
from remoting.codec.bodies import MessageQueue
from tests.client.helpers import create_topic, send_bodies
from tests.threaded_cluster import ThreadedCluster

pytestmark = pytest.mark.anyio

NOT_RUNNING = f"^{re.escape('The consumer not running, please start it first.')}$"


def _calls_needing_a_running_consumer(
    consumer: LitePullConsumer, mq: MessageQueue
) -> list[Callable[[], Awaitable[object]]]:
    return [
        lambda: consumer.poll(0),
        lambda: consumer.committed(mq),
        lambda: consumer.fetch_message_queues(mq.topic),
        lambda: consumer.offset_for_timestamp(mq, 0),
        lambda: consumer.seek_to_begin(mq),
        lambda: consumer.seek_to_end(mq),
    ]


async def test_calls_needing_a_running_consumer_say_it_is_not_running(cluster: ThreadedCluster) -> None:
    """Java's poll, committed, fetchMessageQueues, offsetForTimestamp and seekToBegin/End throw
    IllegalStateException("The consumer not running, please start it first.") before the start and after the
    shutdown; ours said "no route info" (the client instance was not started) or read a stale offset."""
    await create_topic(cluster.namesrv_addr, "LiteNotRunning", queues=1)
    consumer = LitePullConsumer("lite-not-running", cluster.namesrv_addr)
    mq = MessageQueue("LiteNotRunning", "broker-a", 0)
    for call in _calls_needing_a_running_consumer(consumer, mq):
        with pytest.raises(ClientStateError, match=NOT_RUNNING):
            await call()
    async with consumer:
        await consumer.assign([mq])
        await consumer.commit({mq: 0})
    for call in _calls_needing_a_running_consumer(consumer, mq):
        with pytest.raises(ClientStateError, match=NOT_RUNNING):
            await call()


async def test_a_refused_seek_says_why_in_javas_words(cluster: ThreadedCluster) -> None:
    await create_topic(cluster.namesrv_addr, "LiteSeekWords", queues=1)
    await send_bodies(cluster.namesrv_addr, "LiteSeekWords", [b"a", b"b"])
    async with LitePullConsumer("lite-seek-words", cluster.namesrv_addr) as consumer:
        await consumer.subscribe("LiteSeekWords")
        [mq] = consumer.assignment()
        stranger = MessageQueue("LiteSeekWords", "broker-a", 7)
        expected = "The message queue is not in assigned list, may be rebalancing, message queue: "
        expected += "MessageQueue [topic=LiteSeekWords, brokerName=broker-a, queueId=7]"
        with pytest.raises(MQClientError, match=f"^{re.escape(expected)}$"):
            await consumer.seek(stranger, 0)
        illegal = "Seek offset illegal, seek offset = 9, min offset = 0, max offset = 2"
        with pytest.raises(MQClientError, match=f"^{re.escape(illegal)}$"):
            await consumer.seek(mq, 9)
    async with LitePullConsumer("lite-seek-words-assign", cluster.namesrv_addr) as consumer:
        await consumer.assign([mq])
        expected = "The message queue is not in assigned list, message queue: "
        expected += "MessageQueue [topic=LiteSeekWords, brokerName=broker-a, queueId=7]"
        with pytest.raises(MQClientError, match=f"^{re.escape(expected)}$"):
            await consumer.seek(stranger, 0)


async def test_mixing_subscribe_and_assign_is_refused_in_javas_words(cluster: ThreadedCluster) -> None:
    """Java's ``setSubscriptionType`` throws IllegalStateException("Subscribe and assign are mutually exclusive.")
    for an assign after a subscribe and, wrapped, for a subscribe after an assign; ours said "subscribe() and
    assign() cannot be mixed"."""
    await create_topic(cluster.namesrv_addr, "LiteMixedModes", queues=1)
    mq = MessageQueue("LiteMixedModes", "broker-a", 0)
    exclusive = f"^{re.escape('Subscribe and assign are mutually exclusive.')}$"
    async with LitePullConsumer("lite-mixed-assign", cluster.namesrv_addr) as consumer:
        await consumer.assign([mq])
        with pytest.raises(ClientStateError, match=exclusive):
            await consumer.subscribe("LiteMixedModes")
    async with LitePullConsumer("lite-mixed-subscribe", cluster.namesrv_addr) as consumer:
        await consumer.subscribe("LiteMixedModes")
        with pytest.raises(ClientStateError, match=exclusive):
            await consumer.assign([mq])
    stopped = LitePullConsumer("lite-mixed-stopped", cluster.namesrv_addr)
    stopped.set_assignment([mq])
    with pytest.raises(ClientStateError, match=exclusive):
        stopped.set_subscription("LiteMixedModes")


async def test_offsets_of_a_queue_on_an_unknown_broker_are_refused_in_javas_words(cluster: ThreadedCluster) -> None:
    """Java's ``MQAdminImpl.searchOffset`` / ``minOffset`` / ``maxOffset`` (behind offsetForTimestamp and
    seekToBegin/End) read the topic's route again for a broker they do not know (a failed read is only logged) and
    then throw "The broker[<name>] not exist"; ours said "no address for broker ..." or, for a topic without a route,
    raised the route error."""
    await create_topic(cluster.namesrv_addr, "LiteUnknownBroker", queues=1)
    async with LitePullConsumer("lite-unknown-broker", cluster.namesrv_addr) as consumer:
        for mq in (MessageQueue("LiteUnknownBroker", "broker-zz", 0), MessageQueue("NoSuchTopicHere", "broker-zz", 0)):
            not_exist = f"^{re.escape('The broker[broker-zz] not exist')}$"
            with pytest.raises(MQClientError, match=not_exist):
                await consumer.offset_for_timestamp(mq, 0)
            with pytest.raises(MQClientError, match=not_exist):
                await consumer.seek_to_end(mq)


async def test_committed_of_a_queue_whose_offset_cannot_be_read_says_so_in_javas_words(
    cluster: ThreadedCluster,
) -> None:
    """Java's ``committed`` throws MQClientException "Fetch consume offset from broker exception" when the offset
    store cannot ask a broker (``RemoteBrokerOffsetStore.readOffset`` answers -2: an unknown broker, no route);
    ours raised the store's own error ("broker ... has no address", or the route error)."""
    await create_topic(cluster.namesrv_addr, "LiteCommittedUnknown", queues=1)
    async with LitePullConsumer("lite-committed-unknown", cluster.namesrv_addr) as consumer:
        for mq in (MessageQueue("LiteCommittedUnknown", "broker-zz", 0), MessageQueue("NoSuchTopicAt", "broker-zz", 0)):
            with pytest.raises(MQClientError) as refused:
                await consumer.committed(mq)
            assert str(refused.value) == "Fetch consume offset from broker exception"
            assert refused.value.__cause__ is not None
