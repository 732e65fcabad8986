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
from remoting.codec.bodies.stats import BrokerStatsData
from remoting.codec.codes import RequestCode, ResponseCode
from remoting.codec.command import request
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
