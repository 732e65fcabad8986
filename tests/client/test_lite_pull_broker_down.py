"""Lite pull consumer with one of two brokers down, as Java's DefaultLitePullConsumerImpl: a commit still commits
the other broker's offsets and the shutdown does not raise; an assigned queue whose broker is down is consumed once
the broker is back."""

from __future__ import annotations

import anyio
import pytest

from client.config import ClientConfig
from client.consumer.lite_pull import LitePullConsumer
from client.message import MessageExt
from remoting.codec.bodies import ConsumeFromWhere
from tests.client.helpers import HANG_GUARD, fill_queues, topic_on_two_brokers
from tests.threaded_cluster import ThreadedCluster

pytestmark = pytest.mark.anyio

FIRST = ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET


async def test_a_broker_down_does_not_stop_the_other_brokers_offsets_being_committed(cluster: ThreadedCluster) -> None:
    """Java's persistConsumerOffset / RemoteBrokerOffsetStore.persistAll log a failure per queue and go on: with
    broker-a gone, broker-b's committed offsets are still written at shutdown, and leaving ``async with`` does not
    raise (nor skip UNREGISTER_CLIENT)."""
    await topic_on_two_brokers(cluster, "LiteOneDown")
    mq_a, mq_b = await fill_queues(cluster.namesrv_addr, "LiteOneDown", per_queue=3)
    assert (mq_a.broker_name, mq_b.broker_name) == ("broker-a", "broker-b")
    config = ClientConfig(persist_consumer_offset_interval=3600.0)  # only the shutdown commit
    raised: BaseException | None = None
    try:
        async with LitePullConsumer("lite-one-down", cluster.namesrv_addr, config=config,
                                    consume_from_where=FIRST) as consumer:  # fmt: skip
            await consumer.assign([mq_a, mq_b])
            got: list[MessageExt] = []
            with anyio.fail_after(HANG_GUARD):
                while len(got) < 6:
                    got.extend(await consumer.poll(timeout=0.3))
            await consumer.commit(persist=False)  # the shutdown writes it
            await anyio.to_thread.run_sync(cluster.stop_broker)
    except Exception as exc:  # what a user would see at shutdown
        raised = exc
    async with LitePullConsumer("lite-one-down", cluster.namesrv_addr) as reader:  # the group's next member
        committed_b = await reader.committed(mq_b)
    assert committed_b == 3, f"broker-b's offset not committed ({committed_b}); shutdown raised {raised!r}"
    assert raised is None, f"the consumer's shutdown raised {raised!r}"


async def test_an_assigned_queue_whose_broker_is_down_is_taken_once_it_is_back(cluster: ThreadedCluster) -> None:
    """Java's assign() takes every queue at once (``assignment()`` lists them) and its pull task computes the start
    offset again after each failure, so the queue is consumed once its broker answers."""
    await topic_on_two_brokers(cluster, "LiteDownAtAssign")
    mq_a, mq_b = await fill_queues(cluster.namesrv_addr, "LiteDownAtAssign", per_queue=2)
    await anyio.to_thread.run_sync(cluster.stop_broker)  # broker-a
    async with LitePullConsumer("lite-down-assign", cluster.namesrv_addr, consume_from_where=FIRST) as consumer:
        await consumer.assign([mq_a, mq_b])
        assert consumer.assignment() == {mq_a, mq_b}
        await anyio.to_thread.run_sync(cluster.call, cluster.cluster.start_broker)  # type: ignore[union-attr]
        got: list[MessageExt] = []
        with anyio.move_on_after(HANG_GUARD):
            while not any(m.body.startswith(b"broker-a") for m in got):
                got.extend(await consumer.poll(timeout=0.3))
    assert any(m.body.startswith(b"broker-a") for m in got), "broker-a's queue was never consumed"


async def test_a_rebalance_pass_queued_behind_assign_keeps_the_assigned_queues(cluster: ThreadedCluster) -> None:
    """The consumer's start wakes a rebalance pass; one that was called before ``assign()`` switched to assign mode
    and runs after it (both wait for the rebalance's lock) must not rebalance the assigned topic as a subscription:
    Java's assign never enters ``subscriptionInner``. With broker-a down that pass dropped broker-a's queue (the
    route lists broker-b only), and it was never pulled again once broker-a was back."""
    await topic_on_two_brokers(cluster, "LiteAssignRace")
    mq_a, mq_b = await fill_queues(cluster.namesrv_addr, "LiteAssignRace", per_queue=1)
    await anyio.to_thread.run_sync(cluster.stop_broker)  # broker-a
    async with LitePullConsumer("lite-assign-race", cluster.namesrv_addr, consume_from_where=FIRST) as consumer:
        lock = consumer.rebalance.serialised()

        async def waiting(count: int) -> None:
            with anyio.fail_after(HANG_GUARD):
                while lock.statistics().tasks_waiting < count:
                    await anyio.sleep(0.01)

        async with anyio.create_task_group() as tg, lock:
            tg.start_soon(consumer.assign, [mq_a, mq_b])
            await waiting(1)
            tg.start_soon(consumer.do_rebalance)  # assign mode not taken yet: this pass goes for the lock
            await waiting(2)
        assert consumer.assignment() == {mq_a, mq_b}
