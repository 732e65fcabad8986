"""TOPIC_PUT_NUMS / TOPIC_PUT_SIZE items as VIEW_BROKER_STATS_DATA answers them after real sends (virtual time).

RocketMQ 4.9.8's SendMessageProcessor ``handlePutMessageResult``
(broker/src/main/java/org/apache/rocketmq/broker/processor/SendMessageProcessor.java) creates a topic's put items
in the send itself (``StatsItemSet.getAndCreateStatsItem``), so a VIEW_BROKER_STATS_DATA right after the send
answers SUCCESS (all zero until the item's first sample), never "not exist".
"""

from __future__ import annotations

import trio
import trio.testing

from broker.context import BrokerState
from broker.stats import TOPIC_PUT_NUMS, TOPIC_PUT_SIZE
from processors.send import SendMessageProcessor
from processors.stats import StatsProcessor
from remoting.codec.batch_body import BatchEntry, encode_batch_body
from remoting.codec.bodies.stats import BrokerStatsData
from remoting.codec.codes import RequestCode, ResponseCode
from remoting.codec.command import RemotingCommand, request
from remoting.processor import RequestContext
from tests.processors.conftest import TOPIC, send_request


async def test_a_topics_put_items_exist_as_soon_as_it_was_sent_to(
    broker: BrokerState, peer_ctx: RequestContext, autojump_clock: trio.testing.MockClock
) -> None:
    send, stats = SendMessageProcessor(broker), StatsProcessor(broker)
    async with trio.open_nursery() as nursery:
        await nursery.start(broker.stats.run)
        await trio.sleep(0.5)  # between two of the sampler's ticks
        answer = await send.process(peer_ctx, send_request())
        assert answer is not None and answer.code == ResponseCode.SUCCESS
        for name in (TOPIC_PUT_NUMS, TOPIC_PUT_SIZE):
            view = await stats.process(
                peer_ctx, request(RequestCode.VIEW_BROKER_STATS_DATA, {"statsName": name, "statsKey": TOPIC})
            )
            assert view is not None
            assert view.code == ResponseCode.SUCCESS, f"{name} right after a send: {view.code} {view.remark}"
            data = BrokerStatsData.decode(view.body)
            assert (data.stats_minute.sum, data.stats_hour.sum, data.stats_day.sum) == (0, 0, 0)
        nursery.cancel_scope.cancel()


async def test_a_batch_send_counts_as_one_call_of_its_messages(
    broker: BrokerState, peer_ctx: RequestContext, autojump_clock: trio.testing.MockClock
) -> None:
    """handlePutMessageResult adds a batch's message count to TOPIC_PUT_NUMS and its written bytes to TOPIC_PUT_SIZE
    with one "time" for the request (``incTopicPutNums(topic, msgNum, 1)``, ``incTopicPutSize(topic, wroteBytes)``),
    so avgpt reads messages and bytes per send request."""
    send, stats = SendMessageProcessor(broker), StatsProcessor(broker)
    entries = [BatchEntry(f"m{i}".encode()) for i in range(4)]
    batch = send_request(code=RequestCode.SEND_BATCH_MESSAGE, batch="true")
    body = encode_batch_body(entries)
    batch = RemotingCommand(code=batch.code, opaque=batch.opaque, ext_fields=batch.ext_fields, body=body)
    async with trio.open_nursery() as nursery:
        await nursery.start(broker.stats.run)
        await trio.sleep(0.5)
        for req in (batch, send_request()):
            answer = await send.process(peer_ctx, req)
            assert answer is not None and answer.code == ResponseCode.SUCCESS
        await trio.sleep(10)
        nursery.cancel_scope.cancel()
    minutes = {}
    for name in (TOPIC_PUT_NUMS, TOPIC_PUT_SIZE):
        view = await stats.process(
            peer_ctx, request(RequestCode.VIEW_BROKER_STATS_DATA, {"statsName": name, "statsKey": TOPIC})
        )
        assert view is not None and view.code == ResponseCode.SUCCESS
        minutes[name] = BrokerStatsData.decode(view.body).stats_minute
    nums, sizes = minutes[TOPIC_PUT_NUMS], minutes[TOPIC_PUT_SIZE]
    assert (nums.sum, nums.avgpt) == (5, 2.5), "5 messages in 2 send requests"
    assert sizes.sum == broker.store.commitlog.max_offset
    assert sizes.avgpt == sizes.sum / 2, f"TOPIC_PUT_SIZE avgpt {sizes.avgpt}: bytes per send request"
