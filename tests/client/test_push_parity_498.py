"""The push consumer's requests against RocketMQ 4.9.8's client, in virtual time (autojump clock, the embedded cluster
in the same loop): offset queries wait 5 s for the broker (RemoteBrokerOffsetStore), the retry copy sent after a
failed send-back is born when the inner producer sends it (DefaultMQProducerImpl.sendKernelImpl), and pulls post the
subscription only when asked to (DefaultMQPushConsumerImpl.pullMessage's ``postSubscriptionWhenPull``)."""

from __future__ import annotations

from typing import Any

import pytest
import trio

from broker.embedded import EmbeddedCluster
from client.admin import Admin
from client.config import ClientConfig
from client.consumer import consume
from client.consumer.listener import ConsumeConcurrentlyStatus
from client.consumer.pull_service import PULL_FLAG_SUBSCRIPTION
from client.consumer.push import PushConsumer
from client.message import Message, MessageExt
from client.producer import Producer
from remoting.codec.bodies import ConsumeFromWhere, MessageModel
from remoting.codec.bodies.broker_metadata import SubscriptionGroupConfig
from remoting.codec.codes import RequestCode, ResponseCode
from remoting.codec.command import RemotingCommand
from remoting.codec.message import decode_record
from remoting.processor import RequestContext
from tests.semantics.helpers import create_topic, use_virtual_store_clock


class _Late:
    """The broker's processor of ``code`` answering ``delay`` seconds late (a busy broker)."""

    def __init__(self, cluster: EmbeddedCluster, code: int, delay: float) -> None:
        dispatcher = cluster.controller.dispatcher
        self.served, pool = dispatcher._table[int(code)]
        self.delay = delay
        dispatcher.register(code, self, pool)

    async def process(self, ctx: RequestContext, request: RemotingCommand) -> RemotingCommand | None:
        await trio.sleep(self.delay)
        return await self.served.process(ctx, request)


class _Refused:
    """The broker refusing every CONSUMER_SEND_MSG_BACK with SYSTEM_ERROR."""

    def __init__(self, cluster: EmbeddedCluster) -> None:
        dispatcher = cluster.controller.dispatcher
        _, pool = dispatcher._table[int(RequestCode.CONSUMER_SEND_MSG_BACK)]
        dispatcher.register(RequestCode.CONSUMER_SEND_MSG_BACK, self, pool)

    async def process(self, ctx: RequestContext, request: RemotingCommand) -> RemotingCommand | None:
        return request.response(ResponseCode.SYSTEM_ERROR, "refused by the test")


def _consumer(cluster: EmbeddedCluster, group: str, topic: str, **options: Any) -> PushConsumer:
    consumer = PushConsumer(
        group, cluster.namesrv_addr, consume_from_where=ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET, **options
    )
    consumer.subscribe(topic)
    return consumer


async def _send_one(cluster: EmbeddedCluster, topic: str) -> None:
    """Create ``topic`` (one queue) and send it the message ``m``."""
    await create_topic(cluster, topic)
    async with Producer(f"pg-{topic}", cluster.namesrv_addr) as producer:
        await producer.send(Message(topic, b"m"))


async def _consume_for(cluster: EmbeddedCluster, group: str, topic: str, seconds: float, **options: Any) -> list[bytes]:
    """The bodies a consumer of ``topic`` (``options`` its settings) gets in ``seconds``."""
    seen: list[bytes] = []

    async def listener(msgs: list[MessageExt]) -> ConsumeConcurrentlyStatus:
        seen.extend(m.body for m in msgs)
        return ConsumeConcurrentlyStatus.CONSUME_SUCCESS

    consumer = _consumer(cluster, group, topic, **options)
    consumer.register_message_listener(listener)
    async with consumer:
        await trio.sleep(seconds)
    return seen


async def test_an_offset_query_answered_within_5_s_lets_the_queue_be_consumed(
    embedded_cluster: EmbeddedCluster, autojump_clock: trio.testing.MockClock
) -> None:
    """4.9.8's RemoteBrokerOffsetStore.fetchConsumeOffsetFromBroker gives QUERY_CONSUMER_OFFSET 5 s (``1000 * 5``).
    Ours gave it the 3 s of ``rpc_timeout``: a broker answering after 4 s timed out every rebalance's query, so the
    queue was never taken and its messages never consumed."""
    use_virtual_store_clock(embedded_cluster)
    _Late(embedded_cluster, RequestCode.QUERY_CONSUMER_OFFSET, 4.0)
    await _send_one(embedded_cluster, "LateOffset")
    assert await _consume_for(embedded_cluster, "cg-late-offset", "LateOffset", 90) == [b"m"]


async def test_a_retry_copy_after_a_refused_send_back_is_born_when_sent(
    embedded_cluster: EmbeddedCluster, autojump_clock: trio.testing.MockClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    """4.9.8's DefaultMQPushConsumerImpl.sendMessageBack, when CONSUMER_SEND_MSG_BACK fails, sends a new Message to
    ``%RETRY%<group>`` through the inner producer, whose sendKernelImpl stamps ``bornTimestamp`` with the current
    time. Ours kept the original message's born timestamp on the copy."""
    use_virtual_store_clock(embedded_cluster)
    _Refused(embedded_cluster)
    copy_born = 4_000_000_000_000  # the client's wall clock when the copy is sent
    monkeypatch.setattr(consume, "_now_ms", lambda: copy_born, raising=False)
    await _send_one(embedded_cluster, "BornCopy")
    store = embedded_cluster.controller.context.store
    consumer = _consumer(embedded_cluster, "cg-born-copy", "BornCopy")
    consumer.register_message_listener(lambda msgs: ConsumeConcurrentlyStatus.RECONSUME_LATER)
    async with consumer:
        with trio.fail_after(60):
            while store.max_offset_in_queue("%RETRY%cg-born-copy", 0) < 1:
                await trio.sleep(1)
    [original] = [decode_record(view) for view in store.get("BornCopy", 0, 0, 1).messages]
    [copy] = [decode_record(view) for view in store.get("%RETRY%cg-born-copy", 0, 0, 1).messages]
    assert original.born_timestamp != copy_born
    assert copy.born_timestamp == copy_born


class _PullFlags:
    """The broker's PULL_MESSAGE as registered, each request's sysFlag and whether it carried a subscription
    recorded."""

    def __init__(self, cluster: EmbeddedCluster) -> None:
        dispatcher = cluster.controller.dispatcher
        self.served, pool = dispatcher._table[int(RequestCode.PULL_MESSAGE)]
        self.seen: list[tuple[int, bool]] = []
        dispatcher.register(RequestCode.PULL_MESSAGE, self, pool)

    async def process(self, ctx: RequestContext, request: RemotingCommand) -> RemotingCommand | None:
        fields = request.ext_fields
        self.seen.append((int(fields["sysFlag"]), "subscription" in fields))
        return await self.served.process(ctx, request)


async def test_a_broadcasting_consumer_of_a_group_refused_broadcast_consumes_nothing(
    embedded_cluster: EmbeddedCluster, autojump_clock: trio.testing.MockClock
) -> None:
    """4.9.8's DefaultMQPushConsumerImpl.pullMessage posts the subscription only with ``postSubscriptionWhenPull``
    (false by default): its pulls carry no SUBSCRIPTION flag, so PullMessageProcessor serves them with the group's
    heartbeat subscription and refuses them (NO_PERMISSION) for a BROADCASTING group whose config has
    ``consumeBroadcastEnable=false``. Ours posted it on every pull, which skips that check."""
    use_virtual_store_clock(embedded_cluster)
    flags = _PullFlags(embedded_cluster)
    async with Admin(embedded_cluster.namesrv_addr) as admin:
        config = SubscriptionGroupConfig("cg-no-broadcast", consume_broadcast_enable=False)
        await admin.create_subscription_group(config, broker_addr=embedded_cluster.broker_addr)
    await _send_one(embedded_cluster, "NoBroadcast")
    broadcasting = MessageModel.BROADCASTING
    seen = await _consume_for(embedded_cluster, "cg-no-broadcast", "NoBroadcast", 30, message_model=broadcasting)
    assert flags.seen, "no pull reached the broker"
    assert all(flag & PULL_FLAG_SUBSCRIPTION == 0 and not posted for flag, posted in flags.seen), flags.seen
    assert seen == []


async def test_post_subscription_when_pull_posts_it_with_its_flag(
    embedded_cluster: EmbeddedCluster, autojump_clock: trio.testing.MockClock
) -> None:
    """With ``postSubscriptionWhenPull`` (``post_subscription_when_pull``) each pull carries the subscription and the
    SUBSCRIPTION flag, as 4.9.8's pullMessage then passes ``subExpression`` to PullAPIWrapper.pullKernelImpl."""
    use_virtual_store_clock(embedded_cluster)
    flags = _PullFlags(embedded_cluster)
    await _send_one(embedded_cluster, "PostSub")
    seen = await _consume_for(embedded_cluster, "cg-post-sub", "PostSub", 30, post_subscription_when_pull=True)
    assert flags.seen and all(flag & PULL_FLAG_SUBSCRIPTION and posted for flag, posted in flags.seen), flags.seen
    assert seen == [b"m"]


async def test_a_pull_refused_for_a_subscription_the_broker_lost_heartbeats_and_pulls_again_at_once(
    embedded_cluster: EmbeddedCluster, autojump_clock: trio.testing.MockClock
) -> None:
    """Without ``postSubscriptionWhenPull`` a pull is served with the group's heartbeat subscription, so a broker that
    lost it (a restart's empty registry, a pull racing the heartbeat that announces a newer ``subVersion``) answers
    SUBSCRIPTION_NOT_EXIST / SUBSCRIPTION_NOT_LATEST. Java then waits 3 s and asks again until its next 30 s
    heartbeat; ours heartbeats that broker and pulls again at once, so the queue is consumed without that wait."""
    use_virtual_store_clock(embedded_cluster)
    got: list[tuple[bytes, float]] = []

    async def listener(msgs: list[MessageExt]) -> ConsumeConcurrentlyStatus:
        got.extend((m.body, trio.current_time()) for m in msgs)
        return ConsumeConcurrentlyStatus.CONSUME_SUCCESS

    await _send_one(embedded_cluster, "Healed")
    consumer = _consumer(embedded_cluster, "cg-healed", "Healed")
    consumer.register_message_listener(listener)
    # A producer of its own instance: one sharing the consumer's would heartbeat the group back in when it greets.
    own = ClientConfig(instance_name="healed-producer")
    producer = Producer("pg-healed", embedded_cluster.namesrv_addr, config=own)
    async with consumer, producer:
        with trio.fail_after(30):
            while not got:
                await trio.sleep(0.1)
        await trio.sleep(5)  # past the instance's first timed heartbeat (1 s after its start; then every 30 s)
        clients = embedded_cluster.controller.context.clients  # the registry as a broker restart leaves it
        group = clients.consumer_group("cg-healed")
        assert group is not None
        for connection in list(group.channels):
            clients.unregister_consumer("cg-healed", connection)
        assert clients.consumer_group("cg-healed") is None
        sent_at = trio.current_time()
        await producer.send(Message("Healed", b"after"))
        with trio.fail_after(60):
            while len(got) < 2:
                await trio.sleep(0.01)
    assert got[1][0] == b"after"
    assert got[1][1] - sent_at < 1, got
