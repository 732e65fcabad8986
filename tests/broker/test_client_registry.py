"""ClientRegistry: heartbeat registration rules, unregister, closed connections and the 120 s expiry (virtual time)."""

from __future__ import annotations

import sys
from collections.abc import Callable
from types import FrameType

import trio
import trio.testing

from broker.client_registry import ClientRegistry
from remoting.codec.bodies import ConsumeFromWhere, ConsumeType, MessageModel, SubscriptionData
from remoting.codec.codes import LanguageCode
from remoting.connection import Connection

PUSH = ConsumeType.CONSUME_PASSIVELY
CLUSTERING = MessageModel.CLUSTERING
LAST = ConsumeFromWhere.CONSUME_FROM_LAST_OFFSET


def connection(port: int) -> Connection:
    stream, _peer = trio.testing.memory_stream_pair()
    return Connection(stream, ("10.0.0.1", port), ("127.0.0.1", 10911))


def register(registry: ClientRegistry, conn: Connection, client_id: str, *subs: SubscriptionData) -> bool:
    info = registry.channel_info(conn, client_id, LanguageCode.JAVA, 409)
    return registry.register_consumer("g", info, PUSH, CLUSTERING, LAST, subs or (SubscriptionData("T"),))


async def test_a_new_channel_or_topic_is_a_change_but_a_repeat_heartbeat_is_not() -> None:
    registry = ClientRegistry()
    a, b = connection(1), connection(2)
    assert register(registry, a, "c1")
    assert not register(registry, a, "c1")
    assert register(registry, b, "c2")
    assert sorted(registry.consumer_ids("g")) == ["c1", "c2"]
    # A larger subVersion replaces the subscription without counting as a change.
    assert not register(registry, a, "c1", SubscriptionData("T", "TagA", ("TagA",), sub_version=5))
    found = registry.find_subscription("g", "T")
    assert found is not None and found.sub_string == "TagA"
    assert not register(registry, a, "c1", SubscriptionData("T", "TagB", ("TagB",), sub_version=4))
    found = registry.find_subscription("g", "T")
    assert found is not None and found.sub_string == "TagA"
    # A topic added or dropped is a change.
    assert register(registry, a, "c1", SubscriptionData("T", sub_version=6), SubscriptionData("U"))
    assert register(registry, a, "c1", SubscriptionData("U"))
    assert registry.find_subscription("g", "T") is None
    group = registry.consumer_group("g")
    assert group is not None and (group.consume_type, group.message_model) == (PUSH, CLUSTERING)


async def test_unregister_and_closed_connections_remove_members_and_empty_groups() -> None:
    registry = ClientRegistry()
    a, b = connection(1), connection(2)
    register(registry, a, "c1")
    register(registry, b, "c2")
    registry.register_producer("pg", registry.channel_info(a, "c1"))
    assert registry.unregister_consumer("g", b)
    assert not registry.unregister_consumer("g", b)
    assert registry.consumer_ids("g") == ["c1"]
    registry.connection_closed(a)
    assert registry.consumer_group("g") is None
    assert registry.producer_connections("pg") == []
    assert registry.consumer_ids("g") == []


async def test_channels_silent_for_120_s_are_dropped_and_closed(autojump_clock: trio.testing.MockClock) -> None:
    registry = ClientRegistry(channel_expired_timeout=120.0)
    quiet, chatty = connection(1), connection(2)
    async with trio.open_nursery() as nursery:
        await nursery.start(registry.run)
        register(registry, quiet, "quiet")
        register(registry, chatty, "chatty")
        registry.register_producer("pg", registry.channel_info(quiet, "quiet"))
        for _ in range(4):
            await trio.sleep(30)
            register(registry, chatty, "chatty")
        assert sorted(registry.consumer_ids("g")) == ["chatty", "quiet"]
        # Expired after 120 s, noticed by the scan at 130 s.
        await trio.sleep(11)
        assert registry.consumer_ids("g") == ["chatty"]
        assert quiet.closed and not chatty.closed
        assert registry.producer_connections("pg") == []
        nursery.cancel_scope.cancel()


async def test_changes_queue_notifications_only_for_groups_with_members_left() -> None:
    registry = ClientRegistry()
    a, b = connection(1), connection(2)
    async with trio.open_nursery() as nursery:
        await nursery.start(registry.run)
        sent = []
        register(registry, a, "c1")  # notifies a
        for change in (lambda: register(registry, b, "c2"), lambda: registry.unregister_consumer("g", b)):
            await trio.testing.wait_all_tasks_blocked()
            sent.append(registry.notifications_sent)
            change()  # notifies a and b, then a
        await trio.testing.wait_all_tasks_blocked()
        registry.unregister_consumer("g", a)  # group gone: nobody to notify
        await trio.testing.wait_all_tasks_blocked()
        assert sent == [1, 3] and registry.notifications_sent == 4
        nursery.cancel_scope.cancel()


async def test_notification_can_be_disabled_for_the_broker_or_per_call() -> None:
    registry = ClientRegistry(notify_enabled=False)
    async with trio.open_nursery() as nursery:
        await nursery.start(registry.run)
        register(registry, connection(1), "c1")
        await trio.testing.wait_all_tasks_blocked()
        assert registry.notifications_sent == 0
        nursery.cancel_scope.cancel()
    registry = ClientRegistry()
    info = registry.channel_info(connection(2), "c2")
    assert registry.register_consumer("g", info, PUSH, CLUSTERING, LAST, (), notify=False)


async def test_a_burst_of_changes_notifies_each_member_once_not_once_per_change() -> None:
    # Heartbeats handled in one scheduler turn (a broker restart brings a whole group back at once) must not queue a
    # notification per join: 200 joins cost 200 frames, not 200 * 201 / 2 = 20100 (RocketMQ 5's
    # DefaultConsumerIdsChangeListener drops a group's pending notification when a newer change supersedes it).
    registry = ClientRegistry()
    members = [connection(port) for port in range(1, 201)]
    async with trio.open_nursery() as nursery:
        await nursery.start(registry.run)
        for port, conn in enumerate(members, 1):
            register(registry, conn, f"c{port}")
        await trio.testing.wait_all_tasks_blocked()
        assert registry.notifications_sent == len(members)
        # A later change still reaches every member left, once.
        registry.connection_closed(members[0])
        await trio.testing.wait_all_tasks_blocked()
        assert registry.notifications_sent == len(members) + len(members) - 1
        nursery.cancel_scope.cancel()


def lines_run(call: Callable[[], object]) -> int:
    """How many Python lines ``call`` executes (a deterministic measure of its cost, unlike a timing)."""
    count = 0

    def tracer(frame: FrameType, event: str, arg: object) -> Callable[..., object]:
        nonlocal count
        if event == "line":
            count += 1
        return tracer

    sys.settrace(tracer)
    try:
        call()
    finally:
        sys.settrace(None)
    return count


async def test_finding_a_requesters_channel_costs_the_same_among_ten_or_thousands_of_producers() -> None:
    """Each reply (SEND_REPLY_MESSAGE) looks up the requester's channel by client id: RocketMQ's
    ProducerManager.findChannel reads a client-id map (broker/src/main/java/org/apache/rocketmq/broker/client/
    ProducerManager.java clientChannelTable); scanning every producer connection per reply made a broker with
    thousands of producers spend its reply pool on the scan."""
    costs = []
    for producers in (10, 3000):
        registry = ClientRegistry()
        for i in range(producers):
            registry.register_producer(f"pg{i % 50}", registry.channel_info(connection(i), f"c{i}"))
        found = registry.find_producer_channel("c5")
        assert found is not None and found.client_id == "c5"
        costs.append(lines_run(lambda registry=registry: registry.find_producer_channel("c5")))
    assert costs[0] == costs[1]


async def test_a_requesters_channel_follows_its_connections(autojump_clock: trio.testing.MockClock) -> None:
    """The most recently heartbeated open connection of the client id; gone once unregistered, closed or expired."""
    registry = ClientRegistry()
    a, b = connection(1), connection(2)
    registry.register_producer("pg", registry.channel_info(a, "c1"))
    await trio.sleep(1)
    registry.register_producer("other", registry.channel_info(b, "c1"))
    found = registry.find_producer_channel("c1")
    assert found is not None and found.connection is b
    registry.connection_closed(b)
    found = registry.find_producer_channel("c1")
    assert found is not None and found.connection is a
    assert registry.unregister_producer("pg", a)
    assert registry.find_producer_channel("c1") is None
    registry.register_producer("pg", registry.channel_info(a, "c1"))
    await trio.sleep(121)
    assert registry.scan_not_active_channels() == 1
    assert registry.find_producer_channel("c1") is None


async def test_a_subscription_a_pop_recorded_is_found_until_10_minutes_after_the_last(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """ConsumerManager.compensateSubscribeData / findSubscriptionData / removeExpireConsumerGroupInfo (5.3.3): what a
    pop recorded is found when no heartbeat subscribes the topic, and forgotten by the scan once older than
    ``subscriptionExpiredTimeout``; a group subscribing something skips the other topics (``not_subscribed``)."""
    registry = ClientRegistry(subscription_expired_timeout=600.0)
    async with trio.open_nursery() as nursery:
        await nursery.start(registry.run)
        registry.compensate_subscription("g", "Popped", SubscriptionData("Popped", "TagA", ("TagA",)))
        register(registry, connection(1), "c1")  # subscribes T
        found = registry.find_subscription("g", "Popped")
        assert found is not None and found.sub_string == "TagA"
        assert (registry.not_subscribed("g", "Popped"), registry.not_subscribed("g", "Other")) == (False, True)
        await trio.sleep(590)
        registry.compensate_subscription("g", "Popped", SubscriptionData("Popped"))  # a later pop renews it
        await trio.sleep(590)
        assert registry.find_subscription("g", "Popped") is not None
        await trio.sleep(30)
        assert registry.find_subscription("g", "Popped") is None
        nursery.cancel_scope.cancel()
