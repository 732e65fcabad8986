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
from broker.embedded import EmbeddedCluster
from broker.pop import AckOutcome, PopService
from broker.pop.revive import REVIVE_GROUP
from broker.stats import (
    BROKER_PUT_NUMS,
    GROUP_GET_LATENCY,
    GROUP_GET_NUMS,
    GROUP_GET_SIZE,
    TOPIC_PUT_NUMS,
    TOPIC_PUT_SIZE,
)
from broker.timer.service import TimerMessageService
from client import Message, Producer
from client.admin import Admin
from processors.send import SendMessageProcessor
from processors.stats import StatsProcessor
from remoting.codec.bodies.stats import BrokerStatsData
from remoting.codec.codes import RequestCode, ResponseCode
from remoting.codec.command import request
from remoting.codec.topics import TIMER_TOPIC, pop_retry_topic
from remoting.processor import RequestContext
from store.metadata_files import TopicConfig
from tests.processors.conftest import TOPIC, send_request
from tests.semantics.helpers import create_topic, use_virtual_store_clock


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


async def test_a_pop_that_found_messages_counts_its_latency(
    broker: BrokerState, peer_ctx: RequestContext, autojump_clock: trio.testing.MockClock
) -> None:
    """5.3.3's PopMessageProcessor answers a pop that found messages with ``incGroupGetLatency(group, topic,
    queueId, now - begin)`` (its heap transfer, the default ``transferMsgByHeap``); the proxy's receive pops with
    the broker-acting queue id -1 (proxy/src/main/java/org/apache/rocketmq/proxy/service/route/
    MessageQueueSelector.java), so the GROUP_GET_LATENCY item ``-1@topic@group`` exists after it, and not before."""
    broker.topics.update_topic(TopicConfig(TOPIC, 1, 1))
    send, stats = SendMessageProcessor(broker), StatsProcessor(broker)
    pop = PopService(broker, TimerMessageService(broker.store, config_dir_of(broker.config)).rewrite)
    fields = {"statsName": GROUP_GET_LATENCY, "statsKey": f"-1@{TOPIC}@pop_group"}
    async with trio.open_nursery() as nursery:
        await nursery.start(broker.stats.run)
        await trio.sleep(0.5)
        assert pop.pop("pop_group", TOPIC, 32, 30_000, None) == []
        missed = await stats.process(peer_ctx, request(RequestCode.VIEW_BROKER_STATS_DATA, fields))
        assert missed is not None and missed.code == ResponseCode.SYSTEM_ERROR, "a pop that found nothing"
        for i in range(2):
            answer = await send.process(peer_ctx, send_request(body=b"m%d" % i))
            assert answer is not None and answer.code == ResponseCode.SUCCESS
        assert len(pop.pop("pop_group", TOPIC, 32, 30_000, None)) == 2
        await trio.sleep(10)
        nursery.cancel_scope.cancel()
    view = await stats.process(peer_ctx, request(RequestCode.VIEW_BROKER_STATS_DATA, fields))
    assert view is not None
    assert view.code == ResponseCode.SUCCESS, f"GROUP_GET_LATENCY after a pop: {view.remark}"
    assert broker.stats.sets[GROUP_GET_LATENCY].get(f"-1@{TOPIC}@pop_group").times == 1  # one pop answered


async def test_a_pops_checkpoint_counts_in_no_put_item(
    broker: BrokerState, peer_ctx: RequestContext, autojump_clock: trio.testing.MockClock
) -> None:
    """5.3.3's PopMessageProcessor ``appendCheckPoint`` stores the CK (a timer message, parked in
    ``rmq_sys_wheel_timer``) through the EscapeBridge, which counts no TOPIC_PUT_NUMS / TOPIC_PUT_SIZE /
    BROKER_PUT_NUMS (broker/src/main/java/org/apache/rocketmq/broker/failover/EscapeBridge.java): only the sends
    count, while the store totals take the CK."""
    broker.topics.update_topic(TopicConfig(TOPIC, 1, 1))
    send, stats = SendMessageProcessor(broker), StatsProcessor(broker)
    pop = PopService(broker, TimerMessageService(broker.store, config_dir_of(broker.config)).rewrite)
    async with trio.open_nursery() as nursery:
        await nursery.start(broker.stats.run)
        await trio.sleep(0.5)
        for i in range(3):
            answer = await send.process(peer_ctx, send_request(body=b"m%d" % i))
            assert answer is not None and answer.code == ResponseCode.SUCCESS
        assert len(pop.pop("pop_group", TOPIC, 32, 60_000, None)) == 3
        await trio.sleep(10)  # the CK is due after a minute: still parked in the timer
        nursery.cancel_scope.cancel()
    assert broker.store.max_offset_in_queue(TIMER_TOPIC, 0) == 1
    assert broker.stats.runtime_entries()["msgPutTotalTodayNow"] == "4"  # 3 sends and the CK
    for name in (TOPIC_PUT_NUMS, TOPIC_PUT_SIZE):
        view = await stats.process(
            peer_ctx, request(RequestCode.VIEW_BROKER_STATS_DATA, {"statsName": name, "statsKey": TIMER_TOPIC})
        )
        assert view is not None
        assert (view.code, view.remark) == (ResponseCode.SYSTEM_ERROR, f"The stats <{name}> <{TIMER_TOPIC}> not exist")
    fields = {"statsName": BROKER_PUT_NUMS, "statsKey": broker.config.broker_cluster_name}
    total = await stats.process(peer_ctx, request(RequestCode.VIEW_BROKER_STATS_DATA, fields))
    assert total is not None and total.code == ResponseCode.SUCCESS
    assert BrokerStatsData.decode(total.body).stats_minute.sum == 3, "BROKER_PUT_NUMS: the 3 sends only"


async def test_an_acks_revive_record_counts_in_no_put_item(
    broker: BrokerState, peer_ctx: RequestContext, autojump_clock: trio.testing.MockClock
) -> None:
    """5.3.3's AckMessageProcessor ``appendAck`` stores the ACK in the revive topic through the EscapeBridge
    (``putMessageToSpecificQueue``), which counts no TOPIC_PUT_NUMS / TOPIC_PUT_SIZE / BROKER_PUT_NUMS
    (broker/src/main/java/org/apache/rocketmq/broker/failover/EscapeBridge.java): only the send counts, while the
    store totals take the ACK (and the CK, parked in the timer)."""
    broker.topics.update_topic(TopicConfig(TOPIC, 1, 1))
    send, stats = SendMessageProcessor(broker), StatsProcessor(broker)
    pop = PopService(broker, TimerMessageService(broker.store, config_dir_of(broker.config)).rewrite)
    async with trio.open_nursery() as nursery:
        await nursery.start(broker.stats.run)
        await trio.sleep(0.5)
        answer = await send.process(peer_ctx, send_request(body=b"m"))
        assert answer is not None and answer.code == ResponseCode.SUCCESS
        (popped,) = pop.pop("pop_group", TOPIC, 32, 60_000, None)
        assert pop.ack("pop_group", TOPIC, popped.handle) is AckOutcome.OK
        await trio.sleep(10)
        nursery.cancel_scope.cancel()
    assert broker.store.max_offset_in_queue(pop.revive_topic, 0) == 1  # the ACK
    assert broker.stats.runtime_entries()["msgPutTotalTodayNow"] == "3"  # the send, the CK and the ACK
    for name in (TOPIC_PUT_NUMS, TOPIC_PUT_SIZE):
        fields = {"statsName": name, "statsKey": pop.revive_topic}
        view = await stats.process(peer_ctx, request(RequestCode.VIEW_BROKER_STATS_DATA, fields))
        assert view is not None
        assert (view.code, view.remark) == (
            ResponseCode.SYSTEM_ERROR,
            f"The stats <{name}> <{pop.revive_topic}> not exist",
        )
    fields = {"statsName": BROKER_PUT_NUMS, "statsKey": broker.config.broker_cluster_name}
    total = await stats.process(peer_ctx, request(RequestCode.VIEW_BROKER_STATS_DATA, fields))
    assert total is not None and total.code == ResponseCode.SUCCESS
    assert BrokerStatsData.decode(total.body).stats_minute.sum == 1, "BROKER_PUT_NUMS: the send only"


async def test_the_revive_services_reads_count_as_the_revive_groups_gets(
    embedded_cluster: EmbeddedCluster, autojump_clock: trio.testing.MockClock
) -> None:
    """5.3.3's PopReviveService ``getMessage`` (broker/src/main/java/org/apache/rocketmq/broker/processor/
    PopReviveService.java) reads the revive topic through DefaultMessageStore.getMessage and counts what it finds
    with ``incGroupGetNums`` / ``incGroupGetSize`` / ``incBrokerGetNums`` under ``CID_RMQ_SYS_REVIVE_GROUP``."""
    use_virtual_store_clock(embedded_cluster)
    await create_topic(embedded_cluster, "RevivedStats")
    async with Producer("revive_stats_pg", embedded_cluster.namesrv_addr) as producer:
        await producer.send(Message("RevivedStats", b"m"))
    controller = embedded_cluster.controller
    pop = PopService(controller.context, controller.timer.rewrite)
    assert len(pop.pop("pop_group", "RevivedStats", 32, 5_000, None)) == 1
    await trio.sleep(15)  # the timer puts the CK into the revive queue when due, the broker's revive loop reads it
    key = f"{pop.revive_topic}@{REVIVE_GROUP}"
    async with Admin(embedded_cluster.namesrv_addr) as admin:
        view = await admin.view_broker_stats_data(embedded_cluster.broker_addr, GROUP_GET_NUMS, key)
    assert view.sum_24_hours() >= 1  # the pop's checkpoint


async def test_reading_back_a_revived_message_counts_as_a_store_read(
    embedded_cluster: EmbeddedCluster, autojump_clock: trio.testing.MockClock
) -> None:
    """5.3.3's PopReviveService ``getBizMessage`` reads the message to revive through EscapeBridge
    ``getMessageAsync``, a DefaultMessageStore.getMessage of one message (broker/src/main/java/org/apache/rocketmq/
    broker/failover/EscapeBridge.java): a found read with one message transferred (``getFoundTps``,
    ``getTransferedTps``, ``msgGetTotalTodayNow``), in no group item."""
    use_virtual_store_clock(embedded_cluster)
    await create_topic(embedded_cluster, "RevivedRead")
    async with Producer("revive_read_pg", embedded_cluster.namesrv_addr) as producer:
        await producer.send(Message("RevivedRead", b"m"))
    controller = embedded_cluster.controller
    pop = PopService(controller.context, controller.timer.rewrite)
    assert len(pop.pop("pop_group", "RevivedRead", 32, 5_000, None)) == 1
    await trio.sleep(15)  # the CK comes due, the broker's revive loop reads it and revives the message
    retry = pop_retry_topic("pop_group", "RevivedRead")
    assert controller.context.store.max_offset_in_queue(retry, 0) == 1  # revived
    async with Admin(embedded_cluster.namesrv_addr) as admin:
        status = await admin.broker_status(embedded_cluster.broker_addr)
    assert status["msgGetTotalTodayNow"] == "3"  # the pop, the revive's read of the CK, the revived message
