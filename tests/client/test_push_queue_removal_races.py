"""A push consumer's queue removals that meet each other, in virtual time against the embedded name server and broker
(real sockets on 127.0.0.1 port 0): an orderly queue a rebalance kept while its listener call ran (Java's
RebalancePushImpl.removeUnnecessaryMessageQueue, which keeps a queue whose consume lock it does not get within 1 s)
across a stop and restart. Java's processQueueTable is RebalanceImpl's only state: nothing of a removal may outlive the
process queue it was for."""

from __future__ import annotations

import trio
import trio.testing

from broker.embedded import EmbeddedCluster
from client.consumer.listener import ConsumeOrderlyStatus
from client.consumer.push import PushConsumer
from client.message import MessageExt
from remoting.codec.bodies import ConsumeFromWhere, MessageQueue
from tests.client.helpers import create_topic, send_bodies, wait_until


async def _one_queue(cluster: EmbeddedCluster, topic: str) -> MessageQueue:
    await create_topic(cluster.namesrv_addr, topic, queues=1)
    return MessageQueue(topic, "broker-a", 0)


def _orderly(cluster: EmbeddedCluster, group: str, topic: str, seen: list[bytes], release: trio.Event) -> PushConsumer:
    """An orderly consumer of ``topic`` (from its first offset) whose listener hangs on a message ``slow`` until
    ``release`` is set; stopping waits 1 s for a listener call."""

    async def listener(msgs: list[MessageExt]) -> ConsumeOrderlyStatus:
        seen.extend(m.body for m in msgs)
        if msgs[0].body == b"slow":
            await release.wait()
        return ConsumeOrderlyStatus.SUCCESS

    first = ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET
    consumer = PushConsumer(group, cluster.namesrv_addr, consume_from_where=first, await_termination=1)
    consumer.subscribe(topic)
    consumer.register_message_listener_orderly(listener)
    return consumer


async def _keep_while_consuming(consumer: PushConsumer, topic: str, seen: list[bytes]) -> None:
    """Make ``consumer`` keep its queue of ``topic`` as a removal does while a listener call on it runs: unsubscribe
    while the listener hangs on ``slow`` and rebalance (the removal waits 1 s for the call, then keeps the queue and its
    lock for a later pass)."""
    await wait_until(lambda: b"slow" in seen)
    consumer.unsubscribe(topic)
    await consumer.do_rebalance()


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
    seen: list[bytes] = []
    release = trio.Event()
    consumer = _orderly(embedded_cluster, "cg-kept-restart", "KeptRestart", seen, release)
    async with consumer:
        await send_bodies(embedded_cluster.namesrv_addr, "KeptRestart", [b"slow"])
        await _keep_while_consuming(consumer, "KeptRestart", seen)
        assert mq in consumer.rebalance.process_queues  # kept (its listener call still runs)
    release.set()  # the call was cancelled by the stop; the message stays uncommitted

    consumer.subscribe("KeptRestart")
    async with consumer:
        await wait_until(lambda: seen.count(b"slow") == 2)  # consumed again: nothing committed it
        await _stays_owned(consumer, mq)
