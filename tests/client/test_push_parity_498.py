"""The push consumer's requests against RocketMQ 4.9.8's client, in virtual time (autojump clock, the embedded cluster
in the same loop): offset queries wait 5 s for the broker (RemoteBrokerOffsetStore), and the retry copy sent after a
failed send-back is born when the inner producer sends it (DefaultMQProducerImpl.sendKernelImpl)."""

from __future__ import annotations

import pytest
import trio

from broker.embedded import EmbeddedCluster
from client.consumer import consume
from client.consumer.listener import ConsumeConcurrentlyStatus
from client.consumer.push import PushConsumer
from client.message import Message, MessageExt
from client.producer import Producer
from remoting.codec.bodies import ConsumeFromWhere
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
    await create_topic(embedded_cluster, "BornCopy")
    async with Producer("pg-born-copy", embedded_cluster.namesrv_addr) as producer:
        await producer.send(Message("BornCopy", b"m"))
    calls: list[int] = []

    async def listener(msgs: list[MessageExt]) -> ConsumeConcurrentlyStatus:
        calls.append(msgs[0].born_timestamp)
        return ConsumeConcurrentlyStatus.RECONSUME_LATER

    consumer = _consumer(embedded_cluster, "cg-born-copy", "BornCopy")
    consumer.register_message_listener(listener)
    async with consumer:
        with trio.fail_after(60):
            while embedded_cluster.controller.context.store.max_offset_in_queue("%RETRY%cg-born-copy", 0) < 1:
                await trio.sleep(1)
    store = embedded_cluster.controller.context.store
    [copy] = [decode_record(view) for view in store.get("%RETRY%cg-born-copy", 0, 0, 1).messages]
    assert calls[0] != copy_born
    assert copy.born_timestamp == copy_born
