"""Lite pull consumer: subscribe and assign, poll (also without waiting), auto and manual commit, seek replay, seek to
begin and end, a restart."""

from __future__ import annotations

import anyio
import pytest

from client.consumer.lite_pull import LitePullConsumer
from client.errors import ClientStateError, MQClientError
from remoting.codec.bodies import ConsumeFromWhere
from tests.client.helpers import create_topic, poll_until, send_bodies, wait_until
from tests.threaded_cluster import ThreadedCluster

pytestmark = pytest.mark.anyio

FIRST = ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET


async def test_subscribed_lite_consumer_polls_everything_sent(cluster: ThreadedCluster) -> None:
    await create_topic(cluster.namesrv_addr, "LiteSub", queues=4)
    bodies = [f"m{i}".encode() for i in range(30)]
    await send_bodies(cluster.namesrv_addr, "LiteSub", bodies)
    async with LitePullConsumer("lite-sub", cluster.namesrv_addr) as consumer:
        await consumer.subscribe("LiteSub")
        assert {mq.queue_id for mq in consumer.assignment() if mq.topic == "LiteSub"} == {0, 1, 2, 3}
        got = await poll_until(consumer, 30)
        with pytest.raises(ClientStateError):
            await consumer.assign(await consumer.fetch_message_queues("LiteSub"))
    assert sorted(m.body for m in got) == sorted(bodies)


async def test_seek_replays_and_seek_to_end_skips(cluster: ThreadedCluster) -> None:
    await create_topic(cluster.namesrv_addr, "LiteSeek", queues=1)
    await send_bodies(cluster.namesrv_addr, "LiteSeek", [f"s{i}".encode() for i in range(10)])
    async with LitePullConsumer("lite-seek", cluster.namesrv_addr) as consumer:
        [mq] = await consumer.fetch_message_queues("LiteSeek")
        await consumer.assign([mq])
        first = await poll_until(consumer, 10)
        await consumer.seek(mq, 4)
        replay = await poll_until(consumer, 6)
        await consumer.seek_to_begin(mq)
        again = await poll_until(consumer, 10)
        await consumer.seek_to_end(mq)
        assert await consumer.poll(timeout=0.2) == []
        with pytest.raises(MQClientError):
            await consumer.seek(mq, 11)
    assert [m.body for m in first] == [f"s{i}".encode() for i in range(10)]
    assert [m.body for m in replay] == [f"s{i}".encode() for i in range(4, 10)]
    assert [m.queue_offset for m in again] == list(range(10))


async def test_manual_commit_is_what_a_new_consumer_resumes_from(cluster: ThreadedCluster) -> None:
    await create_topic(cluster.namesrv_addr, "LiteCommit", queues=1)
    await send_bodies(cluster.namesrv_addr, "LiteCommit", [f"c{i}".encode() for i in range(10)])
    async with LitePullConsumer("lite-commit", cluster.namesrv_addr, auto_commit=False, pull_batch_size=5) as consumer:
        [mq] = await consumer.fetch_message_queues("LiteCommit")
        await consumer.assign([mq])
        batch = await consumer.poll(timeout=10)
        assert [m.body for m in batch] == [f"c{i}".encode() for i in range(5)]
        await consumer.commit()
        assert await consumer.committed(mq) == 5
    async with LitePullConsumer("lite-commit", cluster.namesrv_addr) as consumer:
        await consumer.assign([mq])
        rest = await poll_until(consumer, 5)
    assert [m.body for m in rest] == [f"c{i}".encode() for i in range(5, 10)]


async def test_auto_commit_persists_at_shutdown_what_a_later_poll_committed(cluster: ThreadedCluster) -> None:
    """A poll once ``auto_commit_interval`` passed commits what the earlier polls returned (Java's
    ``maybeAutoCommit``), and the shutdown writes it."""
    await create_topic(cluster.namesrv_addr, "LiteAuto", queues=1)
    await send_bodies(cluster.namesrv_addr, "LiteAuto", [f"a{i}".encode() for i in range(6)])
    async with LitePullConsumer("lite-auto", cluster.namesrv_addr, auto_commit_interval=1.0) as consumer:
        [mq] = await consumer.fetch_message_queues("LiteAuto")
        await consumer.assign([mq])
        assert len(await poll_until(consumer, 6)) == 6
        await anyio.sleep(1.0)
        assert await consumer.poll(timeout=0) == []
    async with LitePullConsumer("lite-auto", cluster.namesrv_addr) as consumer:
        assert await consumer.committed(mq) == 6


async def test_paused_queues_are_not_pulled_until_resumed(cluster: ThreadedCluster) -> None:
    await create_topic(cluster.namesrv_addr, "LitePause", queues=1)
    async with LitePullConsumer("lite-pause", cluster.namesrv_addr) as consumer:
        [mq] = await consumer.fetch_message_queues("LitePause")
        await consumer.assign([mq])
        consumer.pause([mq])  # assigned: Java's AssignedMessageQueue.pause ignores a queue not assigned
        await send_bodies(cluster.namesrv_addr, "LitePause", [b"p0", b"p1"])
        assert await consumer.poll(timeout=0.3) == []
        consumer.resume([mq])
        got = await poll_until(consumer, 2)
        first = got[0]
        assert await consumer.offset_for_timestamp(mq, first.store_timestamp) in (0, 1)
    assert [m.body for m in got] == [b"p0", b"p1"]


async def test_the_buffer_is_bounded_by_body_size_and_in_all(cluster: ThreadedCluster) -> None:
    """DefaultLitePullConsumer's flow control: a queue stops pulling past ``pull_threshold_size_for_queue_mib`` of
    bodies (large messages used to fill it up to 1,000 of them) and every queue past ``pull_threshold_for_all``
    buffered messages; polling takes it on again. The size is compared in whole MiB, as Java's ``msgSize / (1024 *
    1024) > pullThresholdSizeForQueue``: 1 MiB holds less than 2 MiB before the last pull."""
    await create_topic(cluster.namesrv_addr, "LiteBig", queues=1)
    await send_bodies(cluster.namesrv_addr, "LiteBig", [bytes([i]) * 64 * 1024 for i in range(40)])  # 2.5 MiB
    async with LitePullConsumer("lite-big", cluster.namesrv_addr, pull_batch_size=4,
                                pull_threshold_size_for_queue_mib=1) as consumer:  # fmt: skip
        await consumer.subscribe("LiteBig")
        await wait_until(lambda: any(s.pq.msg_count for s in consumer._queues.values()))
        await anyio.sleep(2)  # would have pulled everything by now
        [state] = consumer._queues.values()
        assert state.pq.msg_size <= 2 * 1024 * 1024 + 4 * 64 * 1024
        got = await poll_until(consumer, 40)
    assert sorted(m.body[0] for m in got) == list(range(40))
    await create_topic(cluster.namesrv_addr, "LiteAll", queues=4)
    await send_bodies(cluster.namesrv_addr, "LiteAll", [f"a{i}".encode() for i in range(100)])
    async with LitePullConsumer("lite-all", cluster.namesrv_addr, pull_batch_size=4,
                                pull_threshold_for_all=10) as consumer:  # fmt: skip
        await consumer.subscribe("LiteAll")
        await wait_until(lambda: any(s.pq.msg_count for s in consumer._queues.values()))
        await anyio.sleep(2)
        assert sum(s.pq.msg_count for s in consumer._queues.values()) <= 10 + 4 * 4
        assert len(await poll_until(consumer, 100)) == 100


async def test_poll_with_a_zero_timeout_returns_what_is_buffered(cluster: ThreadedCluster) -> None:
    """Java's poll(0) takes the head of consumeRequestCache without waiting (``BlockingQueue.poll(0, ms)``)."""
    await create_topic(cluster.namesrv_addr, "LitePollZero", queues=1)
    await send_bodies(cluster.namesrv_addr, "LitePollZero", [f"z{i}".encode() for i in range(4)])
    async with LitePullConsumer("lite-poll-zero", cluster.namesrv_addr, consume_from_where=FIRST) as consumer:
        await consumer.assign(await consumer.fetch_message_queues("LitePollZero"))
        await wait_until(lambda: any(s.pq.msg_count == 4 for s in consumer._queues.values()))  # buffered
        got = await consumer.poll(timeout=0)
    assert [m.queue_offset for m in got] == [0, 1, 2, 3]


async def test_a_restarted_lite_pull_consumer_pulls_its_subscription_again(cluster: ThreadedCluster) -> None:
    """A stop kept the process queues and queue states of the last run, their pull tasks gone: restarted, the consumer
    counted every queue of its subscription as owned and never pulled one again. Now the stop forgets them and the
    restart rebalances its subscriptions at once, from the offsets the stop persisted."""
    await create_topic(cluster.namesrv_addr, "LiteRestart", queues=1)
    await send_bodies(cluster.namesrv_addr, "LiteRestart", [b"m0"])
    consumer = LitePullConsumer("lite-restart", cluster.namesrv_addr, consume_from_where=FIRST)
    async with consumer:
        await consumer.subscribe("LiteRestart")
        assert [m.body for m in await poll_until(consumer, 1)] == [b"m0"]
        await consumer.commit(persist=False)
    await send_bodies(cluster.namesrv_addr, "LiteRestart", [b"m1"])
    async with consumer:  # its subscription stays
        got = await poll_until(consumer, 1)
    assert [m.body for m in got] == [b"m1"], "the restarted lite pull consumer never pulled its queue again"


async def test_a_restarted_lite_pull_consumer_pulls_its_assigned_queues_again(cluster: ThreadedCluster) -> None:
    """In assign mode a restart pulls the queues assigned at the stop again, from the offsets the stop committed (Java
    starts the assigned queues' pull tasks after the start, ``operateAfterRunning``)."""
    await create_topic(cluster.namesrv_addr, "LiteRestartAssign", queues=1)
    await send_bodies(cluster.namesrv_addr, "LiteRestartAssign", [b"a0"])
    consumer = LitePullConsumer("lite-restart-assign", cluster.namesrv_addr, consume_from_where=FIRST)
    async with consumer:
        mqs = await consumer.fetch_message_queues("LiteRestartAssign")
        await consumer.assign(mqs)
        assert [m.body for m in await poll_until(consumer, 1)] == [b"a0"]
        await consumer.commit(persist=False)
    await send_bodies(cluster.namesrv_addr, "LiteRestartAssign", [b"a1"])
    async with consumer:
        assert consumer.assignment() == set(mqs)
        got = await poll_until(consumer, 1)
    assert [m.body for m in got] == [b"a1"]


async def test_assign_after_unsubscribing_every_topic_is_still_refused(cluster: ThreadedCluster) -> None:
    """Java's subscription type never goes back to NONE: once subscribe ran, assign refuses even when unsubscribe
    removed every topic (DefaultLitePullConsumerImpl.setSubscriptionType)."""
    await create_topic(cluster.namesrv_addr, "LiteUnsubAssign", queues=2)
    async with LitePullConsumer("lite-unsub-assign", cluster.namesrv_addr) as consumer:
        await consumer.subscribe("LiteUnsubAssign")
        await consumer.unsubscribe("LiteUnsubAssign")
        mqs = await consumer.fetch_message_queues("LiteUnsubAssign")
        with pytest.raises(ClientStateError):
            await consumer.assign(mqs)
        assert consumer.assignment() == set()


async def test_subscribe_to_an_empty_topic_is_refused_and_not_kept(cluster: ThreadedCluster) -> None:
    """Java's DefaultLitePullConsumerImpl.subscribe throws for a null or empty topic ("Topic can not be null or
    empty.") before it keeps anything or takes the subscribe mode: assign still works afterwards."""
    await create_topic(cluster.namesrv_addr, "LiteEmptySub", queues=1)
    async with LitePullConsumer("lite-empty-sub", cluster.namesrv_addr) as consumer:
        with pytest.raises(ValueError, match="Topic can not be null or empty"):
            await consumer.subscribe("")
        assert consumer.subscribed_topics() == set()
        await consumer.assign(await consumer.fetch_message_queues("LiteEmptySub"))


@pytest.mark.parametrize(("expression", "expression_type"), [("||", "TAG"), ("", "SQL92")])
async def test_a_subscribe_that_fails_on_its_expression_still_refuses_assign(
    cluster: ThreadedCluster, expression: str, expression_type: str
) -> None:
    """Java's DefaultLitePullConsumerImpl.subscribe calls setSubscriptionType(SUBSCRIBE) before FilterAPI builds the
    subscription, so a subscribe whose expression fails to build ("subString split error", "Expression can't be
    null!") keeps nothing but has taken the subscribe mode: a later assign is refused."""
    await create_topic(cluster.namesrv_addr, "LiteBadExprAssign", queues=1)
    async with LitePullConsumer("lite-bad-expr-assign", cluster.namesrv_addr) as consumer:
        with pytest.raises(ValueError):
            await consumer.subscribe("LiteBadExprAssign", expression, expression_type)
        assert consumer.subscribed_topics() == set()
        mqs = await consumer.fetch_message_queues("LiteBadExprAssign")
        with pytest.raises(ClientStateError):
            await consumer.assign(mqs)
        assert consumer.assignment() == set()
