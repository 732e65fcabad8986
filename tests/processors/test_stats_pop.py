"""Pops count in the pull statistics as RocketMQ 5.3.3 counts them (virtual time).

5.3.3's PopMessageProcessor (broker/src/main/java/org/apache/rocketmq/broker/processor/PopMessageProcessor.java
``popMsgFromQueue``) adds what each queue's read found to GROUP_GET_NUMS / GROUP_GET_SIZE (key ``topic@group``) and
BROKER_GET_NUMS, and reads through DefaultMessageStore.getMessage, which counts the found read and its messages in
the store's totals (``getFoundTps``, ``getTransferedTps``, ``msgGetTotalTodayNow``): so ``mqadmin statsAll`` and
GET_CONSUME_STATS' ``consumeTps`` see a pop group's consumption as a pull group's.
"""

from __future__ import annotations

import trio
import trio.testing

from broker.context import BrokerState, config_dir_of
from broker.pop import PopService
from broker.stats import GROUP_GET_NUMS, GROUP_GET_SIZE
from broker.timer.service import TimerMessageService
from processors.send import SendMessageProcessor
from processors.stats import StatsProcessor
from remoting.codec.bodies.stats import BrokerStatsData
from remoting.codec.codes import RequestCode, ResponseCode
from remoting.codec.command import request
from remoting.processor import RequestContext
from store.metadata_files import TopicConfig
from tests.processors.conftest import TOPIC, send_request


async def test_popped_messages_count_as_the_groups_gets(
    broker: BrokerState, peer_ctx: RequestContext, autojump_clock: trio.testing.MockClock
) -> None:
    broker.topics.update_topic(TopicConfig(TOPIC, 1, 1))
    send, stats = SendMessageProcessor(broker), StatsProcessor(broker)
    pop = PopService(broker, TimerMessageService(broker.store, config_dir_of(broker.config)).rewrite)
    async with trio.open_nursery() as nursery:
        await nursery.start(broker.stats.run)
        await trio.sleep(0.5)
        for i in range(3):
            answer = await send.process(peer_ctx, send_request(body=b"m%d" % i))
            assert answer is not None and answer.code == ResponseCode.SUCCESS
        popped = pop.pop("pop_group", TOPIC, 32, 30_000, None)
        assert len(popped) == 3
        await trio.sleep(10)
        nursery.cancel_scope.cancel()
    sums = {}
    for name in (GROUP_GET_NUMS, GROUP_GET_SIZE):
        view = await stats.process(
            peer_ctx,
            request(RequestCode.VIEW_BROKER_STATS_DATA, {"statsName": name, "statsKey": f"{TOPIC}@pop_group"}),
        )
        assert view is not None
        assert view.code == ResponseCode.SUCCESS, f"{name} after a pop: {view.remark}"
        sums[name] = BrokerStatsData.decode(view.body).stats_minute.sum
    assert sums[GROUP_GET_NUMS] == 3
    assert sums[GROUP_GET_SIZE] == sum(p.message.store_size for p in popped)  # the records' bytes
    assert broker.stats.runtime_entries()["msgGetTotalTodayNow"] == "3"
