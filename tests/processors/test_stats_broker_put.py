"""BROKER_PUT_NUMS counts no "times", so its avgpt reads 0 as RocketMQ's (found by a review; it read 1.0 before).

RocketMQ 4.9.8 (store/src/main/java/org/apache/rocketmq/store/stats/BrokerStatsManager.java incBrokerPutNums) adds
only to the item's value (``getAndCreateStatsItem(clusterName).getValue().add(n)``), never to its times, so
VIEW_BROKER_STATS_DATA of BROKER_PUT_NUMS answers avgpt 0.0 in every window (as for BROKER_GET_NUMS, incBrokerGetNums).
"""

from __future__ import annotations

import trio
import trio.testing

from broker.context import BrokerState, config_dir_of
from broker.schedule import ScheduleMessageService
from broker.stats import BROKER_GET_NUMS, BROKER_PUT_NUMS, TOPIC_PUT_NUMS, TOPIC_PUT_SIZE
from processors.admin import AdminBrokerProcessor
from processors.pull import PullMessageProcessor
from processors.send import SendMessageProcessor
from processors.send_back import ConsumerSendMsgBackProcessor
from processors.stats import StatsProcessor
from remoting.codec.bodies.stats import BrokerStatsData
from remoting.codec.codes import RequestCode, ResponseCode
from remoting.codec.command import RemotingCommand, request
from remoting.codec.msgid import decode_offset_msg_id
from remoting.codec.topics import SCHEDULE_TOPIC
from remoting.processor import RequestContext
from store.metadata_files import TopicConfig
from tests.processors.conftest import pull_request, send_request


async def test_broker_put_nums_has_no_times_as_in_rocketmq(
    broker: BrokerState, peer_ctx: RequestContext, autojump_clock: trio.testing.MockClock
) -> None:
    send, pull, stats = SendMessageProcessor(broker), PullMessageProcessor(broker), StatsProcessor(broker)
    async with trio.open_nursery() as nursery:
        await nursery.start(broker.stats.run)
        await trio.sleep(0.5)
        for _ in range(5):
            answer = await send.process(peer_ctx, send_request())
            assert answer is not None and answer.code == ResponseCode.SUCCESS
        found = await pull.process(peer_ctx, pull_request(sys_flag=0x4))  # creates BROKER_GET_NUMS
        assert found is not None and found.code == ResponseCode.SUCCESS
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


async def test_broker_get_nums_does_not_exist_before_the_first_pull(
    broker: BrokerState, peer_ctx: RequestContext, autojump_clock: trio.testing.MockClock
) -> None:
    """4.9.8's incBrokerGetNums creates the BROKER_GET_NUMS item with the first pull that found messages
    (``getAndCreateStatsItem``), so before it VIEW_BROKER_STATS_DATA answers "not exist", as for any other item."""
    send, pull, stats = SendMessageProcessor(broker), PullMessageProcessor(broker), StatsProcessor(broker)
    key = broker.config.broker_cluster_name
    fields = {"statsName": BROKER_GET_NUMS, "statsKey": key}
    async with trio.open_nursery() as nursery:
        await nursery.start(broker.stats.run)
        await trio.sleep(0.5)
        answer = await send.process(peer_ctx, send_request())
        assert answer is not None and answer.code == ResponseCode.SUCCESS
        await trio.sleep(10)
        before = await stats.process(peer_ctx, request(RequestCode.VIEW_BROKER_STATS_DATA, fields))
        assert before is not None
        assert (before.code, before.remark) == (
            ResponseCode.SYSTEM_ERROR,
            f"The stats <{BROKER_GET_NUMS}> <{key}> not exist",
        ), "BROKER_GET_NUMS before any pull"
        found = await pull.process(peer_ctx, pull_request(sys_flag=0x4))
        assert found is not None and found.code == ResponseCode.SUCCESS
        after = await stats.process(peer_ctx, request(RequestCode.VIEW_BROKER_STATS_DATA, fields))
        assert after is not None and after.code == ResponseCode.SUCCESS, "BROKER_GET_NUMS right after a pull"
        await trio.sleep(10)
        nursery.cancel_scope.cancel()
    view = await stats.process(peer_ctx, request(RequestCode.VIEW_BROKER_STATS_DATA, fields))
    assert view is not None and view.code == ResponseCode.SUCCESS
    assert BrokerStatsData.decode(view.body).stats_minute.sum == 1


async def test_a_send_back_counts_as_4_9_8_counts_it(
    broker: BrokerState, peer_ctx: RequestContext, autojump_clock: trio.testing.MockClock
) -> None:
    """4.9.8's consumer send-back (broker/src/main/java/org/apache/rocketmq/broker/processor/SendMessageProcessor.java
    ``asyncConsumerSendMsgBack``) counts TOPIC_PUT_NUMS / TOPIC_PUT_SIZE only when the copy went to
    ``SCHEDULE_TOPIC_XXXX`` (a retry), never a copy moved to the DLQ, and never BROKER_PUT_NUMS."""
    send, stats = SendMessageProcessor(broker), StatsProcessor(broker)
    back = ConsumerSendMsgBackProcessor(
        broker, ScheduleMessageService(broker.store, config_dir_of(broker.config)).rewrite
    )
    group = "sendback_group"
    async with trio.open_nursery() as nursery:
        await nursery.start(broker.stats.run)
        await trio.sleep(0.5)
        offsets = []
        for _ in range(2):
            sent = await send.process(peer_ctx, send_request())
            assert sent is not None and sent.code == ResponseCode.SUCCESS
            offsets.append(decode_offset_msg_id(sent.ext_fields["msgId"]).phy_offset)
        for offset, level in zip(offsets, ("0", "-1"), strict=True):  # a retry, then a copy to the DLQ
            fields = {"offset": str(offset), "group": group, "delayLevel": level}
            answer = await back.process(peer_ctx, request(RequestCode.CONSUMER_SEND_MSG_BACK, fields))
            assert answer is not None and answer.code == ResponseCode.SUCCESS
        assert broker.store.max_offset_in_queue(f"%DLQ%{group}", 0) == 1
        await trio.sleep(10)
        nursery.cancel_scope.cancel()

    async def view(name: str, key: str) -> RemotingCommand:
        answer = await stats.process(
            peer_ctx, request(RequestCode.VIEW_BROKER_STATS_DATA, {"statsName": name, "statsKey": key})
        )
        assert answer is not None
        return answer

    scheduled = await view(TOPIC_PUT_NUMS, SCHEDULE_TOPIC)
    assert scheduled.code == ResponseCode.SUCCESS
    assert BrokerStatsData.decode(scheduled.body).stats_minute.sum == 1, "the retry's copy"
    for name in (TOPIC_PUT_NUMS, TOPIC_PUT_SIZE):
        dlq = await view(name, f"%DLQ%{group}")
        assert (dlq.code, dlq.remark) == (ResponseCode.SYSTEM_ERROR, f"The stats <{name}> <%DLQ%{group}> not exist")
    total = await view(BROKER_PUT_NUMS, broker.config.broker_cluster_name)
    assert total.code == ResponseCode.SUCCESS
    assert BrokerStatsData.decode(total.body).stats_minute.sum == 2, "BROKER_PUT_NUMS: the 2 sends only"


async def test_a_send_just_before_its_topic_is_deleted_still_counts(
    broker: BrokerState, peer_ctx: RequestContext
) -> None:
    """Puts are read from the ConsumeQueues when sampling (once a second). A message acknowledged to a topic that
    DELETE_TOPIC_IN_BROKER then removes before the next sample was counted nowhere: the deletion dropped the queues
    before the statistics read them. RocketMQ 4.9.8 counts it at the send
    (broker/src/main/java/org/apache/rocketmq/broker/processor/SendMessageProcessor.java ``handlePutMessageResult``:
    TOPIC_PUT_NUMS, BROKER_PUT_NUMS; StoreStatsService's put total at the store's put), and 5.3.3 in
    ``rocketmq_messages_in_total`` there too, which the deletion leaves as it is."""
    broker.stats.start_counting()
    broker.topics.update_topic(TopicConfig("Doomed", 1, 1))
    answer = await SendMessageProcessor(broker).process(peer_ctx, send_request("Doomed"))
    assert answer is not None and answer.code == ResponseCode.SUCCESS
    deletion = request(RequestCode.DELETE_TOPIC_IN_BROKER, {"topic": "Doomed"})
    answer = await AdminBrokerProcessor(broker).process(peer_ctx, deletion)
    assert answer is not None and answer.code == ResponseCode.SUCCESS
    entries = broker.stats.runtime_entries()
    assert (entries["msgPutTotalTodayNow"], entries["putMessageTimesTotal"]) == ("1", "1")
    item = broker.stats.item(BROKER_PUT_NUMS, broker.config.broker_cluster_name)
    assert item is not None and item.value == 1
    assert broker.stats.incoming.get("Doomed", (0, 0))[0] == 1
