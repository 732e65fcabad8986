"""The message page's per-group track (``client.message_track``, Java's ``messageTrackDetail``) over real sockets
on the embedded cluster: a group whose tag filter skipped the message, and a group with no consumer online."""

from __future__ import annotations

from typing import Any

import anyio

from client import ConsumeConcurrentlyStatus, ConsumeFromWhere, Message, MessageExt, Producer, PushConsumer
from client.config import ClientConfig
from client.errors import MQBrokerError
from tests.client.helpers import HANG_GUARD, create_topic, wait_until
from tests.dashboard.conftest import Dash


def _consumer(namesrv: str, group: str, topic: str, expression: str, received: list[MessageExt]) -> PushConsumer:
    """A push consumer from the first offset that commits every 0.1 s, appending what it gets to ``received``."""

    async def listener(msgs: list[MessageExt]) -> ConsumeConcurrentlyStatus:
        received.extend(msgs)
        return ConsumeConcurrentlyStatus.CONSUME_SUCCESS

    config = ClientConfig(namesrv_addr=namesrv, persist_consumer_offset_interval=0.1)
    consumer = PushConsumer(group, config=config, consume_from_where=ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET)
    consumer.subscribe(topic, expression)
    consumer.register_message_listener(listener)
    return consumer


def _track(shown: dict[str, Any], group: str) -> dict[str, Any]:
    """The track of ``group`` on the message page's answer ``shown``."""
    [track] = [c for c in shown["consumers"] if c["group"] == group]
    return track


async def test_a_message_the_groups_tag_filter_skipped_is_consumed_but_filtered(dash: Dash) -> None:
    """As RocketMQ's ``messageTrackDetail`` (what rocketmq-dashboard's message page shows per group): a group whose
    offset is past the message but whose subscription does not take the message's tag is CONSUMED_BUT_FILTERED (its
    consumer never saw the message), not CONSUMED."""
    namesrv = dash.cluster.namesrv_addr
    await create_topic(namesrv, "FilterTopic", queues=1)
    received: list[MessageExt] = []
    async with _consumer(namesrv, "filter-cg", "FilterTopic", "TagA", received), Producer("filter-pg", namesrv) as p:
        skipped = await p.send(Message("FilterTopic", b"not for filter-cg", tags="TagB"))
        await p.send(Message("FilterTopic", b"for filter-cg", tags="TagA"))
        await wait_until(lambda: [m.body for m in received] == [b"for filter-cg"])
        with anyio.fail_after(HANG_GUARD):  # the group's offset is committed past the skipped message
            while True:
                shown = await dash.get(f"/api/message?topic=FilterTopic&id={skipped.msg_id}")
                track = _track(shown, "filter-cg")
                if track["consumerOffset"] is not None and track["consumerOffset"] > shown["queueOffset"]:
                    break
                await anyio.sleep(0.05)
    assert track["state"] == "CONSUMED_BUT_FILTERED", track


async def test_a_group_without_online_consumers_is_not_online_in_the_message_track(dash: Dash) -> None:
    """A group whose consumers are all gone (the broker's CONSUMER_NOT_ONLINE) is NOT_ONLINE whatever its offset,
    as ``messageTrackDetail``, which asks for the group's connection before its offsets; the refusal is shown."""
    namesrv = dash.cluster.namesrv_addr
    await create_topic(namesrv, "GoneTopic", queues=1)
    received: list[MessageExt] = []
    async with Producer("gone-pg", namesrv) as producer:
        sent = await producer.send(Message("GoneTopic", b"x"))
    async with _consumer(namesrv, "gone-cg", "GoneTopic", "*", received):
        await wait_until(lambda: len(received) == 1)
    with anyio.fail_after(HANG_GUARD):  # the consumer's unregistration reaches the broker
        while True:
            try:
                await dash.admin.consumer_connection("gone-cg")
            except MQBrokerError:
                break
            await anyio.sleep(0.05)
    track = _track(await dash.get(f"/api/message?topic=GoneTopic&id={sent.msg_id}"), "gone-cg")
    assert track["state"] == "NOT_ONLINE" and track["error"].startswith("CODE:206 "), track
