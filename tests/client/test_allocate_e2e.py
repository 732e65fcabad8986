"""A group of our consumers on the embedded broker splits a topic's queues exactly as each allocation strategy says:
every member owns its strategy's share for the group's ids, and each message reaches the owner of its queue. The
topic lives on ``broker-a`` and on ``IDC1@broker-b`` (a machine-room style broker name)."""

from __future__ import annotations

import contextlib
from collections.abc import Callable

import anyio
import pytest

from client.consumer.allocate import (
    AllocateMachineRoomNearby,
    AllocateMessageQueueAveragely,
    AllocateMessageQueueByConfig,
    AllocateMessageQueueByMachineRoom,
    AllocateStrategy,
    resolve_strategy,
)
from client.consumer.listener import ConsumeConcurrentlyStatus
from client.consumer.lite_pull import LitePullConsumer
from client.consumer.push import PushConsumer
from client.message import Message, MessageExt
from client.producer import Producer
from remoting.codec.bodies import MessageQueue
from tests.client.helpers import topic_on_two_brokers, wait_until
from tests.threaded_cluster import ThreadedCluster

pytestmark = pytest.mark.anyio

BROKER_B = "IDC1@broker-b"


class _Rooms:
    """``IDC1@...`` brokers are in IDC1, the rest in IDC2; members by a table filled once their ids are known."""

    def __init__(self) -> None:
        self.consumers: dict[str, str] = {}

    def broker_deploy_in(self, message_queue: MessageQueue) -> str:
        return "IDC1" if message_queue.broker_name.startswith("IDC1@") else "IDC2"

    def consumer_deploy_in(self, client_id: str) -> str:
        return self.consumers[client_id]


def _owned(consumer: PushConsumer | LitePullConsumer, topic: str) -> set[MessageQueue]:
    return {mq for mq in consumer.rebalance.process_queues if mq.topic == topic}


async def _two_broker_topic(cluster: ThreadedCluster, topic: str) -> tuple[list[MessageQueue], Callable[[], None]]:
    _, stop_b = await topic_on_two_brokers(cluster, topic, queues=4, name=BROKER_B)
    return [MessageQueue(topic, b, q) for b in ("broker-a", BROKER_B) for q in range(4)], stop_b


@pytest.mark.parametrize("kind", ["AVG", "AVG_BY_CIRCLE", "CONSISTENT_HASH", "MACHINE_ROOM", "MACHINE_ROOM_NEARBY"])
async def test_push_consumers_split_queues_as_their_strategy_says(cluster: ThreadedCluster, kind: str) -> None:
    topic, group = f"Alloc{kind.replace('_', '')}", f"cg-alloc-{kind.lower()}"
    mqs, stop_b = await _two_broker_topic(cluster, topic)
    rooms = _Rooms()
    strategy: AllocateStrategy | str = {
        "MACHINE_ROOM": AllocateMessageQueueByMachineRoom({"IDC1"}),
        "MACHINE_ROOM_NEARBY": AllocateMachineRoomNearby(AllocateMessageQueueAveragely(), rooms),
    }.get(kind, kind)
    got: list[list[MessageExt]] = [[], [], []]

    def recorder(into: list[MessageExt]):  # type: ignore[no-untyped-def]
        async def listener(msgs: list[MessageExt]) -> ConsumeConcurrentlyStatus:
            into.extend(msgs)
            return ConsumeConcurrentlyStatus.CONSUME_SUCCESS

        return listener

    members = [PushConsumer(group, cluster.namesrv_addr, allocate_strategy=strategy) for _ in range(3)]
    cids = [m.instance.client_id for m in members]
    # Two members in IDC1 (beside IDC1@broker-b), one in IDC2 (beside broker-a).
    rooms.consumers.update(zip(cids, ["IDC1", "IDC1", "IDC2"], strict=True))
    reference = resolve_strategy(strategy)
    expected = [set(reference(group, cid, mqs, cids)) for cid in cids]
    assert set().union(*expected) == (
        set(mqs) if kind != "MACHINE_ROOM" else {mq for mq in mqs if mq.broker_name == BROKER_B}
    )
    try:
        async with Producer("pg", cluster.namesrv_addr) as producer, contextlib.AsyncExitStack() as stack:
            for member, into in zip(members, got, strict=True):
                member.subscribe(topic)
                member.register_message_listener(recorder(into))
                await stack.enter_async_context(member)
            await wait_until(lambda: [_owned(m, topic) for m in members] == expected)
            assert members[0].allocate_message_queue_strategy.get_name() == reference.get_name()  # type: ignore[attr-defined]
            for mq in mqs:
                await producer.send(Message(topic, f"{mq.broker_name}:{mq.queue_id}".encode()), queue=mq)
            owned_queues = set().union(*expected)
            await wait_until(lambda: sum(len(g) for g in got) == len(owned_queues))
            for into, share in zip(got, expected, strict=True):
                assert {m.body.decode() for m in into} == {f"{mq.broker_name}:{mq.queue_id}" for mq in share}
    finally:
        await anyio.to_thread.run_sync(stop_b)


async def test_by_config_members_own_their_configured_queues_and_a_failing_strategy_keeps_them(
    cluster: ThreadedCluster,
) -> None:
    """A configured queue of another topic or beyond the readable ones is not taken; a strategy that raises leaves
    the owned queues as they are (Java's ``rebalanceByTopic`` returns)."""
    topic, group = "AllocConfig", "cg-alloc-config"
    mqs, stop_b = await _two_broker_topic(cluster, topic)
    strays = [MessageQueue("Elsewhere", "broker-a", 0), MessageQueue(topic, "broker-a", 9)]
    configs = [mqs[:3] + strays, mqs[3:]]
    members = [
        PushConsumer(group, cluster.namesrv_addr, allocate_strategy=AllocateMessageQueueByConfig(c)) for c in configs
    ]

    async def listener(msgs: list[MessageExt]) -> ConsumeConcurrentlyStatus:
        return ConsumeConcurrentlyStatus.CONSUME_SUCCESS

    try:
        async with contextlib.AsyncExitStack() as stack:
            for member in members:
                member.subscribe(topic)
                member.register_message_listener(listener)
                await stack.enter_async_context(member)
            await wait_until(lambda: [_owned(m, topic) for m in members] == [set(mqs[:3]), set(mqs[3:])])
            assert not any(mq.topic == "Elsewhere" for mq in members[0].rebalance.process_queues)

            def broken(group: str, cid: str, mq_all: object, cid_all: object) -> list[MessageQueue]:
                raise ValueError("no answer")

            members[0].allocate_message_queue_strategy = broken
            await members[0].rebalance.do_rebalance()
            assert _owned(members[0], topic) == set(mqs[:3])
    finally:
        await anyio.to_thread.run_sync(stop_b)


async def test_lite_pull_consumers_take_a_strategy_by_its_name(cluster: ThreadedCluster) -> None:
    topic, group = "AllocLite", "cg-alloc-lite"
    mqs, stop_b = await _two_broker_topic(cluster, topic)
    members = [
        LitePullConsumer(group, cluster.namesrv_addr, allocate_strategy="CONSISTENT_HASH", auto_commit=False)
        for _ in range(2)
    ]
    cids = [m.instance.client_id for m in members]
    reference = resolve_strategy("CONSISTENT_HASH")
    expected = [set(reference(group, cid, mqs, cids)) for cid in cids]
    try:
        async with contextlib.AsyncExitStack() as stack:
            for member in members:
                await stack.enter_async_context(member)
                await member.subscribe(topic)
            await wait_until(lambda: [_owned(m, topic) for m in members] == expected)
    finally:
        await anyio.to_thread.run_sync(stop_b)
