"""The push consumer's requests against RocketMQ 4.9.8's client, in virtual time (autojump clock, the embedded cluster
in the same loop): offset queries wait 5 s for the broker (RemoteBrokerOffsetStore)."""

from __future__ import annotations

import trio

from broker.embedded import EmbeddedCluster
from client.consumer.listener import ConsumeConcurrentlyStatus
from client.consumer.push import PushConsumer
from client.message import Message, MessageExt
from client.producer import Producer
from remoting.codec.bodies import ConsumeFromWhere
from remoting.codec.codes import RequestCode
from remoting.codec.command import RemotingCommand
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


def _consumer(cluster: EmbeddedCluster, group: str, topic: str) -> PushConsumer:
    consumer = PushConsumer(group, cluster.namesrv_addr, consume_from_where=ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET)
    consumer.subscribe(topic)
    return consumer


async def test_an_offset_query_answered_within_5_s_lets_the_queue_be_consumed(
    embedded_cluster: EmbeddedCluster, autojump_clock: trio.testing.MockClock
) -> None:
    """4.9.8's RemoteBrokerOffsetStore.fetchConsumeOffsetFromBroker gives QUERY_CONSUMER_OFFSET 5 s (``1000 * 5``).
    Ours gave it the 3 s of ``rpc_timeout``: a broker answering after 4 s timed out every rebalance's query, so the
    queue was never taken and its messages never consumed."""
    use_virtual_store_clock(embedded_cluster)
    _Late(embedded_cluster, RequestCode.QUERY_CONSUMER_OFFSET, 4.0)
    await create_topic(embedded_cluster, "LateOffset")
    async with Producer("pg-late-offset", embedded_cluster.namesrv_addr) as producer:
        await producer.send(Message("LateOffset", b"m"))
    seen: list[bytes] = []

    async def listener(msgs: list[MessageExt]) -> ConsumeConcurrentlyStatus:
        seen.extend(m.body for m in msgs)
        return ConsumeConcurrentlyStatus.CONSUME_SUCCESS

    consumer = _consumer(embedded_cluster, "cg-late-offset", "LateOffset")
    consumer.register_message_listener(listener)
    async with consumer:
        await trio.sleep(90)
    assert seen == [b"m"]
