"""A push consumer's queue removals that meet each other, in virtual time against the embedded name server and broker
(real sockets on 127.0.0.1 port 0): an orderly queue a rebalance kept while its listener call ran (Java's
RebalancePushImpl.removeUnnecessaryMessageQueue, which keeps a queue whose consume lock it does not get within 1 s)
across a stop and restart or a reset; a reset (RESET_CONSUMER_CLIENT_OFFSET) that arrives while a pass takes or removes
its queue; a pass under way when the consumer stops (on an instance shared with other clients, which the stop does not
end). Java's processQueueTable is RebalanceImpl's only state: nothing of a removal may outlive the process queue it
was for; MQClientInstance.resetOffset resets the queues in the table after a 10 s pause (ours: after the pass under
way) and gives each up through removeUnnecessaryMessageQueue, which unlocks an orderly queue whose consume lock it
gets."""

from __future__ import annotations

import threading

import trio
import trio.testing

from broker.embedded import EmbeddedCluster
from client.config import ClientConfig
from client.consumer.listener import ConsumeOrderlyStatus
from client.consumer.push import PushConsumer
from client.instance import MQClientInstance
from client.message import MessageExt
from remoting.codec.bodies import ConsumeFromWhere, MessageQueue
from tests.client.helpers import HANG_GUARD, create_topic, lock_for_another_member, send_bodies, wait_until


async def _one_queue(cluster: EmbeddedCluster, topic: str) -> MessageQueue:
    await create_topic(cluster.namesrv_addr, topic, queues=1)
    return MessageQueue(topic, "broker-a", 0)


def _orderly(
    cluster: EmbeddedCluster, topic: str, release: trio.Event, instance: MQClientInstance | None = None
) -> tuple[PushConsumer, list[bytes]]:
    """An orderly consumer of ``topic`` (group ``cg-<topic>``, from its first offset; on ``instance`` if given) whose
    listener hangs on a message ``slow`` until ``release`` is set, and the bodies its listener saw; stopping waits 1 s
    for a listener call."""
    seen: list[bytes] = []

    async def listener(msgs: list[MessageExt]) -> ConsumeOrderlyStatus:
        seen.extend(m.body for m in msgs)
        if msgs[0].body == b"slow":
            await release.wait()
        return ConsumeOrderlyStatus.SUCCESS

    first = ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET
    consumer = PushConsumer(
        f"cg-{topic}", cluster.namesrv_addr, instance=instance, consume_from_where=first, await_termination=1
    )
    consumer.subscribe(topic)
    consumer.register_message_listener_orderly(listener)
    return consumer, seen


async def _keep_while_consuming(
    cluster: EmbeddedCluster, consumer: PushConsumer, topic: str, seen: list[bytes]
) -> None:
    """Make ``consumer`` keep its queue of ``topic`` as a removal does while a listener call on it runs: send ``slow``,
    and while the listener hangs on it unsubscribe and rebalance (the removal waits 1 s for the call, then keeps the
    queue and its lock for a later pass)."""
    await send_bodies(cluster.namesrv_addr, topic, [b"slow"])
    await wait_until(lambda: b"slow" in seen)
    consumer.unsubscribe(topic)
    await consumer.do_rebalance()
    assert MessageQueue(topic, "broker-a", 0) in consumer.rebalance.process_queues  # kept


async def _stays_owned(consumer: PushConsumer, mq: MessageQueue) -> None:
    """Past the 20 s rebalance timer (the allocation never changes), ``mq`` still has the process queue it has now."""
    pq = consumer.rebalance.process_queues[mq]
    await trio.sleep(30)
    now = consumer.rebalance.process_queues.get(mq)
    assert now is pq and not pq.dropped, "a later pass dropped and retook the queue this member owns"


async def test_a_restarted_orderly_consumer_does_not_drop_a_queue_kept_by_its_last_run(
    embedded_cluster: EmbeddedCluster, autojump_clock: trio.testing.MockClock
) -> None:
    """A stop cleared the process queues but not the rebalance's set of queues kept while their listener call ran: a
    pass of the restarted consumer took that stale entry for a removal to finish and dropped the queue it owns (a
    single member) again: in-flight messages dropped, the lock given up, the queue taken again."""
    mq = await _one_queue(embedded_cluster, "KeptRestart")
    release = trio.Event()
    consumer, seen = _orderly(embedded_cluster, "KeptRestart", release)
    async with consumer:
        await _keep_while_consuming(embedded_cluster, consumer, "KeptRestart", seen)
    release.set()  # the call was cancelled by the stop; the message stays uncommitted

    consumer.subscribe("KeptRestart")
    async with consumer:
        await wait_until(lambda: seen.count(b"slow") == 2)  # consumed again: nothing committed it
        await _stays_owned(consumer, mq)


async def test_a_reset_of_a_kept_queue_does_not_make_a_later_pass_drop_it_again(
    embedded_cluster: EmbeddedCluster, autojump_clock: trio.testing.MockClock
) -> None:
    """A reset dropped a kept queue from the table but left it among the kept ones: once the queue was this member's
    again, a later pass took that stale entry for a removal to finish and dropped the queue it owns once more."""
    mq = await _one_queue(embedded_cluster, "ResetKept")
    release = trio.Event()
    consumer, seen = _orderly(embedded_cluster, "ResetKept", release)
    async with consumer:
        await _keep_while_consuming(embedded_cluster, consumer, "ResetKept", seen)
        await consumer.reset_offset("ResetKept", {mq: 0})
        release.set()
        await trio.sleep(2)
        consumer.subscribe("ResetKept")
        await wait_until(lambda: mq in consumer.rebalance.process_queues)
        await _stays_owned(consumer, mq)


async def _given_up(cluster: EmbeddedCluster, consumer: PushConsumer, mq: MessageQueue) -> None:
    """``consumer`` dropped ``mq`` and another member of its group gets the queue's broker lock now."""
    assert mq not in consumer.rebalance.process_queues
    assert await lock_for_another_member(cluster.broker_addr, consumer.group, mq), (
        "the queue's broker lock is still held by a consumer that dropped it"
    )


async def test_a_reset_gives_up_the_broker_lock_of_an_orderly_queue_it_drops(
    embedded_cluster: EmbeddedCluster, autojump_clock: trio.testing.MockClock
) -> None:
    """A reset dropped an orderly queue without unlocking it: when the queue is no longer this member's by the next
    pass (here: unsubscribed; as when another member joins), nothing gave the lock up until it expired (60 s), and
    the queue's new owner could not consume it meanwhile."""
    mq = await _one_queue(embedded_cluster, "ResetUnlock")
    release = trio.Event()
    release.set()
    consumer, _ = _orderly(embedded_cluster, "ResetUnlock", release)
    async with consumer:
        await wait_until(lambda: mq in consumer.rebalance.process_queues)
        consumer.unsubscribe("ResetUnlock")
        await consumer.reset_offset("ResetUnlock", {mq: 0})
        await consumer.do_rebalance()
        await _given_up(embedded_cluster, consumer, mq)


async def test_a_reset_that_meets_an_orderly_removal_still_gives_the_queue_lock_up(
    embedded_cluster: EmbeddedCluster, autojump_clock: trio.testing.MockClock
) -> None:
    """A reset that arrived while a rebalance removed the queue (waiting up to 1 s for its listener call) took it out
    of the table; the removal, finding it gone once the call ended, returned without unlocking either."""
    mq = await _one_queue(embedded_cluster, "ResetRemoval")
    release = trio.Event()
    consumer, seen = _orderly(embedded_cluster, "ResetRemoval", release)
    async with consumer:
        await send_bodies(embedded_cluster.namesrv_addr, "ResetRemoval", [b"slow"])
        await wait_until(lambda: b"slow" in seen)
        pq = consumer.rebalance.process_queues[mq]
        consumer.unsubscribe("ResetRemoval")  # the queue is no longer this member's (as when another member joins)
        async with trio.open_nursery() as nursery:
            nursery.start_soon(consumer.do_rebalance)
            await wait_until(lambda: pq.dropped)  # the removal waits for the listener call
            release.set()  # the call ends within the removal's 1 s wait...
            await consumer.reset_offset("ResetRemoval", {mq: 0})  # ...and a reset for the queue arrives meanwhile
        await _given_up(embedded_cluster, consumer, mq)


async def test_a_reset_that_arrives_while_a_rebalance_takes_the_queue_is_not_lost(
    embedded_cluster: EmbeddedCluster, autojump_clock: trio.testing.MockClock
) -> None:
    """A reset skipped every queue not in the table when it arrived: a pass that was taking the queue (it asked for
    the consumer ids or the start offset, and puts the process queue in the table after) then started it from the
    broker's old offset, and the reset was lost. It now waits for the pass and resets the queue the pass took."""
    mq = await _one_queue(embedded_cluster, "ResetRace")
    seen: list[bytes] = []

    async def listener(msgs: list[MessageExt]) -> ConsumeOrderlyStatus:
        seen.extend(m.body for m in msgs)
        return ConsumeOrderlyStatus.SUCCESS

    def consumer() -> PushConsumer:
        c = PushConsumer(
            "cg-reset-race",
            embedded_cluster.namesrv_addr,
            consume_from_where=ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET,
        )
        c.subscribe("ResetRace")
        c.register_message_listener_orderly(listener)
        return c

    await send_bodies(embedded_cluster.namesrv_addr, "ResetRace", [b"m0", b"m1", b"m2"])
    async with consumer():
        await wait_until(lambda: len(seen) == 3)
    seen.clear()  # offset 3 committed

    again = consumer()
    hit: list[bool] = []

    async def reset_during_the_first_pass() -> None:
        # the group is registered (its first heartbeat went out) and its first pass runs, the queue not taken yet
        while not again.stopping:
            if again.rebalance._lock.locked() and mq not in again.rebalance.process_queues:
                hit.append(True)
                await again.reset_offset("ResetRace", {mq: 0})
                return
            await trio.lowlevel.checkpoint()

    async with trio.open_nursery() as nursery:
        nursery.start_soon(reset_during_the_first_pass)
        async with again:
            await trio.sleep(30)
    assert hit, "the reset was not sent during the first pass"
    assert seen == [b"m0", b"m1", b"m2"], f"the reset to offset 0 was lost: {seen}"


def _pass_waits_for_the_call(consumer: PushConsumer, mq: MessageQueue, name: str | None) -> bool:
    """Whether the pass task ``name`` (None: any pass) holds the rebalance lock and waits for the listener call on
    ``mq`` (its 1 s wait before it removes the queue)."""
    turn = consumer.consume_service._turns[mq]  # type: ignore[union-attr]
    owner = consumer.rebalance._lock.statistics().owner
    named = owner is not None and (name is None or owner.name == name)
    return named and turn._lock.statistics().tasks_waiting == 1


def _no_pass_under_way(consumer: PushConsumer) -> bool:
    """Whether no pass holds or waits for the rebalance lock: the next one to take it reads the subscriptions as they
    are then (a pass woken before, say by the broker's NOTIFY_CONSUMER_IDS_CHANGED for the group's changed
    subscriptions, may otherwise already wait for the lock, and read them first)."""
    stats = consumer.rebalance._lock.statistics()
    return stats.owner is None and stats.tasks_waiting == 0


async def test_a_pass_that_outlives_a_stop_leaves_no_queue_the_restarted_consumer_never_pulls(
    embedded_cluster: EmbeddedCluster, autojump_clock: trio.testing.MockClock
) -> None:
    """A stop forgot the queues without waiting for the pass under way (here: waiting its 1 s for a kept orderly
    queue's listener call, on an instance shared with other clients, whose passes a consumer's stop does not end),
    which went on afterwards and put the next topic's queue in the table (marked dropped: the consumer was stopping).
    Restarted, the consumer counted that queue as owned and never pulled it. Now the stop forgets its queues after the
    pass, which takes none once the stop began."""
    ns = embedded_cluster.namesrv_addr
    qa, qb = await _one_queue(embedded_cluster, "StaleA"), await _one_queue(embedded_cluster, "StaleB")
    release = threading.Event()
    seen: list[bytes] = []

    def listener(msgs: list[MessageExt]) -> ConsumeOrderlyStatus:
        seen.extend(m.body for m in msgs)
        if msgs[0].body == b"slow":
            release.wait(HANG_GUARD)
        return ConsumeOrderlyStatus.SUCCESS

    instance = MQClientInstance(ClientConfig(namesrv_addr=ns))
    consumer = PushConsumer(
        "cg-stale",
        instance=instance,
        consume_from_where=ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET,
        await_termination=0.1,
    )
    consumer.subscribe("StaleA")
    consumer.register_message_listener_orderly(listener)
    try:
        async with instance:
            async with trio.open_nursery() as nursery, consumer:
                await _keep_while_consuming(embedded_cluster, consumer, "StaleA", seen)
                # Passes may be under way (one the broker's notification woke, the quick retries of incomplete ones)
                await wait_until(lambda: _no_pass_under_way(consumer))
                consumer.subscribe("StaleA")
                consumer.subscribe("StaleB")  # after StaleA: a pass removes the kept queue, then takes StaleB's
                nursery.start_soon(consumer.do_rebalance, name="pass-across-the-stop")
                # Ours or the instance's (one it woke since): either began after the subscriptions changed.
                await wait_until(lambda: _pass_waits_for_the_call(consumer, qa, None))
                assert qb not in consumer.rebalance.process_queues
                # stopped while the pass waits for the call, which the stop abandons
            release.set()
            async with consumer:  # restarted: rebalances from scratch
                await send_bodies(ns, "StaleB", [b"b0"])
                with trio.move_on_after(30):
                    await wait_until(lambda: b"b0" in seen)
                stale = sorted(str(mq) for mq, pq in consumer.rebalance.process_queues.items() if pq.dropped)
                assert b"b0" in seen, f"the restarted consumer never pulled {qb}; dropped queues in its table: {stale}"
    finally:
        release.set()


async def test_a_pass_that_outlives_a_stop_does_not_lock_a_queue_for_the_stopped_consumer(
    embedded_cluster: EmbeddedCluster, autojump_clock: trio.testing.MockClock
) -> None:
    """CLUSTERING: the passes under way when the consumer stopped (one removing a kept queue, one queued behind it
    since the resubscription woke the instance's rebalance) went on after the stop had unlocked its queues, and the
    second took the queue again, broker lock included: another member could not consume it until the lock expired
    (60 s). A pass takes no queue once the stop began."""
    mq = await _one_queue(embedded_cluster, "LateLock")
    release = trio.Event()
    instance = MQClientInstance(ClientConfig(namesrv_addr=embedded_cluster.namesrv_addr))
    consumer, seen = _orderly(embedded_cluster, "LateLock", release, instance)
    async with instance:
        async with trio.open_nursery() as nursery, consumer:
            await _keep_while_consuming(embedded_cluster, consumer, "LateLock", seen)
            consumer.subscribe("LateLock")  # allocated again: the pass finishes the removal, then takes it
            nursery.start_soon(consumer.do_rebalance, name="late-pass")
            await wait_until(lambda: _pass_waits_for_the_call(consumer, mq, "late-pass"))
        assert await lock_for_another_member(embedded_cluster.broker_addr, consumer.group, mq), (
            "a pass that went on after the stop locked the queue for the stopped consumer"
        )
