"""BROKER_PUT_NUMS counts no "times", so its avgpt reads 0 as RocketMQ's (found by a review; it read 1.0 before).

RocketMQ 4.9.8 (store/src/main/java/org/apache/rocketmq/store/stats/BrokerStatsManager.java incBrokerPutNums) adds
only to the item's value (``getAndCreateStatsItem(clusterName).getValue().add(n)``), never to its times, so
VIEW_BROKER_STATS_DATA of BROKER_PUT_NUMS answers avgpt 0.0 in every window (as for BROKER_GET_NUMS, incBrokerGetNums).
"""

from __future__ import annotations

import trio
import trio.testing

from broker.context import BrokerState
from broker.stats import BROKER_GET_NUMS, BROKER_PUT_NUMS
from processors.send import SendMessageProcessor
from processors.stats import StatsProcessor
from remoting.codec.bodies.stats import BrokerStatsData
from remoting.codec.codes import RequestCode, ResponseCode
from remoting.codec.command import request
from remoting.processor import RequestContext
from tests.processors.conftest import send_request


async def test_broker_put_nums_has_no_times_as_in_rocketmq(
    broker: BrokerState, peer_ctx: RequestContext, autojump_clock: trio.testing.MockClock
) -> None:
    send, stats = SendMessageProcessor(broker), StatsProcessor(broker)
    async with trio.open_nursery() as nursery:
        await nursery.start(broker.stats.run)
        await trio.sleep(0.5)
        for _ in range(5):
            answer = await send.process(peer_ctx, send_request())
            assert answer is not None and answer.code == ResponseCode.SUCCESS
        await trio.sleep(10)
        nursery.cancel_scope.cancel()
    key = broker.config.broker_cluster_name
    views = {}
    for name in (BROKER_PUT_NUMS, BROKER_GET_NUMS):
        view = await stats.process(
            peer_ctx, request(RequestCode.VIEW_BROKER_STATS_DATA, {"statsName": name, "statsKey": key})
        )
        assert view is not None and view.code == ResponseCode.SUCCESS
        views[name] = BrokerStatsData.decode(view.body).stats_minute
    put = views[BROKER_PUT_NUMS]
    assert put.sum == 5
    assert put.avgpt == 0.0, f"BROKER_PUT_NUMS minute avgpt {put.avgpt}: RocketMQ never adds times to it (0.0)"
