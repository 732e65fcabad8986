"""The per-queue stats items QUEUE_PUT_NUMS, QUEUE_PUT_SIZE, QUEUE_GET_NUMS, QUEUE_GET_SIZE and the settings that
drive them, on a real broker over the wire.

RocketMQ 4.9.8's BrokerStatsManager (store/src/main/java/org/apache/rocketmq/store/stats/BrokerStatsManager.java)
creates the four item sets only with ``enableQueueStat``, the broker's ``enableDetailStat`` (on by default,
broker/src/main/java/org/apache/rocketmq/broker/BrokerController.java), which also keys GROUP_GET_LATENCY by
``queueId@topic@group`` (``topic@group`` without it). SendMessageProcessor counts a message stored in a delay level's
queue of ``SCHEDULE_TOPIC_XXXX`` under ``SCHEDULE_TOPIC_XXXX@<queueId>`` and ScheduleMessageService's delivery of it
(with ``enableScheduleMessageStats``, on by default) under ``SCHEDULE_TOPIC_XXXX@<queueId>@SCHEDULE_CONSUMER`` and
GROUP_GET_NUMS ``SCHEDULE_TOPIC_XXXX@SCHEDULE_CONSUMER``. AdminBrokerProcessor drops a deleted topic's or group's
items only with ``autoDeleteUnusedStats`` (off by default).
"""

from __future__ import annotations

from pathlib import Path

import pytest
import trio

from broker.embedded import EmbeddedCluster
from client import Message, Producer
from client.admin import Admin
from client.errors import MQBrokerError
from remoting.codec.bodies import MessageQueue
from remoting.codec.codes import ResponseCode
from tests.conftest import SMALL_STORE

SCHEDULE_KEY_PUT = "SCHEDULE_TOPIC_XXXX@0"  # delay level 1's queue
SCHEDULE_KEY_GET = "SCHEDULE_TOPIC_XXXX@0@SCHEDULE_CONSUMER"


async def _not_exist(admin: Admin, addr: str, name: str, key: str) -> None:
    with pytest.raises(MQBrokerError) as refused:
        await admin.view_broker_stats_data(addr, name, key)
    assert refused.value.code == ResponseCode.SYSTEM_ERROR
    assert refused.value.remark == f"The stats <{name}> <{key}> not exist"


async def _exists(admin: Admin, addr: str, name: str, key: str) -> bool:
    try:
        await admin.view_broker_stats_data(addr, name, key)
    except MQBrokerError:
        return False
    return True


async def test_a_delayed_send_and_its_delivery_count_in_the_queue_items(tmp_path: Path) -> None:
    async with EmbeddedCluster(tmp_path / "cluster", **SMALL_STORE) as cluster:
        stats = cluster.controller.context.stats
        addr = cluster.broker_addr
        async with Admin(cluster.namesrv_addr) as admin, Producer("delayed_pg", cluster.namesrv_addr) as producer:
            for name, key in (
                ("QUEUE_PUT_NUMS", SCHEDULE_KEY_PUT),
                ("QUEUE_PUT_SIZE", SCHEDULE_KEY_PUT),
                ("QUEUE_GET_NUMS", SCHEDULE_KEY_GET),
                ("QUEUE_GET_SIZE", SCHEDULE_KEY_GET),
            ):
                await _not_exist(admin, addr, name, key)
            await producer.send(Message("Delayed", b"later", delay_level=1))
            await producer.send(Message("Plain", b"now"))
            # The send created the delay queue's put items (one message, its stored bytes); a plain send none.
            for name in ("QUEUE_PUT_NUMS", "QUEUE_PUT_SIZE"):
                await admin.view_broker_stats_data(addr, name, SCHEDULE_KEY_PUT)
            await _not_exist(admin, addr, "QUEUE_PUT_NUMS", "Plain@0")
            put_nums = stats.item("QUEUE_PUT_NUMS", SCHEDULE_KEY_PUT)
            put_size = stats.item("QUEUE_PUT_SIZE", SCHEDULE_KEY_PUT)
            topic_size = stats.item("TOPIC_PUT_SIZE", "SCHEDULE_TOPIC_XXXX")
            assert put_nums is not None and put_size is not None and topic_size is not None
            assert (put_nums.value, put_nums.times) == (1, 1)
            assert put_size.value == topic_size.value > 0
            # Its delivery a second later counts as SCHEDULE_CONSUMER's get of the delay queue.
            with trio.fail_after(20):
                while not await _exists(admin, addr, "QUEUE_GET_NUMS", SCHEDULE_KEY_GET):
                    await trio.sleep(0.1)
            await admin.view_broker_stats_data(addr, "QUEUE_GET_SIZE", SCHEDULE_KEY_GET)
            await admin.view_broker_stats_data(addr, "GROUP_GET_NUMS", "SCHEDULE_TOPIC_XXXX@SCHEDULE_CONSUMER")
            get_nums = stats.item("QUEUE_GET_NUMS", SCHEDULE_KEY_GET)
            get_size = stats.item("QUEUE_GET_SIZE", SCHEDULE_KEY_GET)
            group_nums = stats.item("GROUP_GET_NUMS", "SCHEDULE_TOPIC_XXXX@SCHEDULE_CONSUMER")
            assert get_nums is not None and get_size is not None and group_nums is not None
            assert (get_nums.value, get_nums.times, group_nums.value) == (1, 1, 1)
            assert get_size.value > 0


async def test_without_enable_detail_stat_there_are_no_queue_items_and_latency_is_per_group(tmp_path: Path) -> None:
    async with EmbeddedCluster(tmp_path / "cluster", enable_detail_stat=False, **SMALL_STORE) as cluster:
        addr = cluster.broker_addr
        async with Admin(cluster.namesrv_addr) as admin, Producer("detail_pg", cluster.namesrv_addr) as producer:
            sent = await producer.send(Message("Detail", b"m"))
            await producer.send(Message("Detail", b"later", delay_level=1))
            mq = MessageQueue(topic="Detail", broker_name=sent.broker_name, queue_id=sent.queue_id)
            pulled = await admin.pull(mq, 0, 32, group="detail_cg")
            assert pulled.messages
            await admin.view_broker_stats_data(addr, "GROUP_GET_LATENCY", "Detail@detail_cg")
            await _not_exist(admin, addr, "GROUP_GET_LATENCY", f"{sent.queue_id}@Detail@detail_cg")
            await _not_exist(admin, addr, "QUEUE_PUT_NUMS", SCHEDULE_KEY_PUT)
            await _not_exist(admin, addr, "QUEUE_PUT_SIZE", SCHEDULE_KEY_PUT)
            with trio.fail_after(20):  # the delivery counts in GROUP_GET_NUMS only
                while not await _exists(admin, addr, "GROUP_GET_NUMS", "SCHEDULE_TOPIC_XXXX@SCHEDULE_CONSUMER"):
                    await trio.sleep(0.1)
            await _not_exist(admin, addr, "QUEUE_GET_NUMS", SCHEDULE_KEY_GET)
            await _not_exist(admin, addr, "QUEUE_GET_SIZE", SCHEDULE_KEY_GET)


async def _send_and_pull(admin: Admin, producer: Producer, topic: str, group: str) -> MessageQueue:
    sent = await producer.send(Message(topic, b"m"))
    mq = MessageQueue(topic=topic, broker_name=sent.broker_name, queue_id=sent.queue_id)
    assert (await admin.pull(mq, 0, 32, group=group)).messages
    return mq


@pytest.mark.parametrize("auto_delete", [False, True])
async def test_a_deleted_topic_or_groups_items_go_only_with_auto_delete_unused_stats(
    tmp_path: Path, auto_delete: bool
) -> None:
    """AdminBrokerProcessor ``deleteTopic`` / ``deleteSubscriptionGroup`` call ``onTopicDeleted`` /
    ``onGroupDeleted`` only when ``autoDeleteUnusedStats`` is on: by default the items stay."""
    async with EmbeddedCluster(tmp_path / "cluster", auto_delete_unused_stats=auto_delete, **SMALL_STORE) as cluster:
        addr = cluster.broker_addr
        async with Admin(cluster.namesrv_addr) as admin, Producer("del_pg", cluster.namesrv_addr) as producer:
            mq = await _send_and_pull(admin, producer, "Gone", "gone_cg")
            await _send_and_pull(admin, producer, "Kept", "left_cg")
            topic_items = (
                ("TOPIC_PUT_NUMS", "Gone"),
                ("TOPIC_PUT_SIZE", "Gone"),
                ("GROUP_GET_NUMS", "Gone@gone_cg"),
                ("GROUP_GET_SIZE", "Gone@gone_cg"),
                ("GROUP_GET_LATENCY", f"{mq.queue_id}@Gone@gone_cg"),
            )
            group_items = (
                ("GROUP_GET_NUMS", "Kept@left_cg"),
                ("GROUP_GET_SIZE", "Kept@left_cg"),
            )
            for name, key in topic_items + group_items:
                await admin.view_broker_stats_data(addr, name, key)
            await admin.delete_topic_in_brokers("Gone", [addr])
            await admin.delete_subscription_group("left_cg", broker_addr=addr)
            for name, key in topic_items + group_items:
                if auto_delete:
                    await _not_exist(admin, addr, name, key)
                else:
                    await admin.view_broker_stats_data(addr, name, key)
            await admin.view_broker_stats_data(addr, "TOPIC_PUT_NUMS", "Kept")


async def test_without_enable_schedule_message_stats_a_delivery_counts_in_no_item(tmp_path: Path) -> None:
    """ScheduleMessageService ``PutResultProcess.onSuccess`` counts a delivery (SCHEDULE_CONSUMER's gets, the real
    topic's TOPIC_PUT_NUMS / TOPIC_PUT_SIZE, BROKER_PUT_NUMS) only with ``enableScheduleMessageStats``: without it
    the delivered message is in the store's totals alone."""
    async with EmbeddedCluster(tmp_path / "cluster", enable_schedule_message_stats=False, **SMALL_STORE) as cluster:
        addr, ctx = cluster.broker_addr, cluster.controller.context
        async with Admin(cluster.namesrv_addr) as admin, Producer("quiet_pg", cluster.namesrv_addr) as producer:
            await producer.send(Message("Quiet", b"later", delay_level=1))
            broker_put = ctx.stats.item("BROKER_PUT_NUMS", ctx.config.broker_cluster_name)
            assert broker_put is not None and broker_put.value == 1
            with trio.fail_after(20):
                while not any(ctx.store.max_offset_in_queue("Quiet", q) for q in range(8)):
                    await trio.sleep(0.1)
            await trio.sleep(1.5)  # the sampler has looked at the delivered message
            assert ctx.stats.runtime_entries()["msgPutTotalTodayNow"] == "2"
            for name, key in (
                ("TOPIC_PUT_NUMS", "Quiet"),
                ("TOPIC_PUT_SIZE", "Quiet"),
                ("GROUP_GET_NUMS", "SCHEDULE_TOPIC_XXXX@SCHEDULE_CONSUMER"),
                ("QUEUE_GET_NUMS", SCHEDULE_KEY_GET),
            ):
                await _not_exist(admin, addr, name, key)
            assert broker_put.value == 1
