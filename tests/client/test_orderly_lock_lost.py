"""An orderly push consumer whose broker lock on a queue was lost (another member holds it) neither consumes nor
pulls that queue until it holds the lock again, as 4.9.8's ``ConsumeMessageOrderlyService.ConsumeRequest.run`` checks
``isLocked() && !isLockExpired()`` on the consume thread before each batch and ``DefaultMQPushConsumerImpl
.pullMessage`` puts off the pull of a queue not locked (virtual time, the cluster in the test's loop).

The other member is a client id that takes the queue's lock with LOCK_BATCH_MQ once the consumer's lock is gone (an
UNLOCK_BATCH_MQ in the consumer's name, as a broker restart or an expiry would lose it); the consumer learns it at its
next 20 s lock renewal."""

from __future__ import annotations

from collections.abc import Awaitable, Callable

import pytest
import trio

from broker.embedded import EmbeddedCluster
from client import api
from client.admin import Admin
from client.consumer.listener import ConsumeOrderlyStatus
from client.consumer.process_queue import ProcessQueue
from client.consumer.push import PushConsumer
from client.message import Message, MessageExt
from client.producer import Producer
from remoting.codec.bodies import LockBatchRequestBody, MessageModel, MessageQueue
from remoting.codec.codes import RequestCode
from remoting.codec.command import RemotingCommand
from remoting.processor import RequestContext

RIVAL = "10.9.9.9@rival"

OrderlyListener = Callable[[list[MessageExt]], Awaitable[ConsumeOrderlyStatus]]


async def _create(cluster: EmbeddedCluster, topic: str, queues: int) -> None:
    async with Admin(cluster.namesrv_addr) as admin:
        await admin.create_topic(topic, read_queue_nums=queues, write_queue_nums=queues)


async def _rival_takes(consumer: PushConsumer, cluster: EmbeddedCluster, mq: MessageQueue) -> None:
    """The consumer's lock on ``mq`` is lost and another member of its group takes it."""
    remoting, group = consumer.instance.remoting, consumer.group
    mine = LockBatchRequestBody(consumer_group=group, client_id=consumer.instance.client_id, mq_set=frozenset({mq}))
    await api.unlock_batch_mq(remoting, cluster.broker_addr, mine, 3.0)
    rival = LockBatchRequestBody(consumer_group=group, client_id=RIVAL, mq_set=frozenset({mq}))
    assert await api.lock_batch_mq(remoting, cluster.broker_addr, rival, 3.0) == frozenset({mq})


async def _rival_gives_back(consumer: PushConsumer, cluster: EmbeddedCluster, mq: MessageQueue) -> None:
    rival = LockBatchRequestBody(consumer_group=consumer.group, client_id=RIVAL, mq_set=frozenset({mq}))
    await api.unlock_batch_mq(consumer.instance.remoting, cluster.broker_addr, rival, 3.0)


def _orderly(cluster: EmbeddedCluster, group: str, topic: str, listener: OrderlyListener) -> PushConsumer:
    consumer = PushConsumer(group, cluster.namesrv_addr)
    consumer.subscribe(topic)
    consumer.register_message_listener_orderly(listener)
    return consumer


async def _until(condition: object, limit: float = 120.0) -> None:
    with trio.fail_after(limit):
        while not condition():  # type: ignore[operator]
            await trio.sleep(0.1)


async def test_a_batch_waiting_for_a_consume_slot_is_not_consumed_once_its_lock_is_lost(
    embedded_cluster: EmbeddedCluster, autojump_clock: trio.testing.MockClock
) -> None:
    """One consume slot, held by a call on queue 0: queue 1's batch waits for it. Meanwhile queue 1's lock goes to
    another member. Java checks the lock once a consume thread runs the batch; ours checked it before waiting for the
    slot and then called the listener while the other member consumed the queue."""
    await _create(embedded_cluster, "LostLock", 2)
    release = trio.Event()
    seen: list[bytes] = []

    async def listener(msgs: list[MessageExt]) -> ConsumeOrderlyStatus:
        if msgs[0].queue_id == 0:
            await release.wait()
        seen.extend(m.body for m in msgs)
        return ConsumeOrderlyStatus.SUCCESS

    consumer = PushConsumer("cg-lostlock", embedded_cluster.namesrv_addr, consume_thread_min=1, consume_thread_max=1)
    consumer.subscribe("LostLock")
    consumer.register_message_listener_orderly(listener)
    q0, q1 = MessageQueue("LostLock", "broker-a", 0), MessageQueue("LostLock", "broker-a", 1)
    async with consumer, Producer("pg", embedded_cluster.namesrv_addr) as producer:
        await producer.send(Message("LostLock", b"q0"), queue=q0)
        await _until(lambda: consumer.consume_service.calling(q0))  # type: ignore[union-attr]
        await producer.send(Message("LostLock", b"q1"), queue=q1)
        pq1 = consumer.rebalance.process_queues[q1]
        await _until(lambda: pq1.msg_count == 1 and not pq1.has_messages())  # taken, waiting for the slot
        await _rival_takes(consumer, embedded_cluster, q1)
        await trio.sleep(21)  # the lock renewal learns the lock is gone
        assert not pq1.locked
        release.set()
        await trio.sleep(5)
        assert b"q1" not in seen, "queue 1 was consumed while another member held its lock"
        await _rival_gives_back(consumer, embedded_cluster, q1)
        await _until(lambda: b"q1" in seen)  # taken again once the lock is free
    assert seen == [b"q0", b"q1"]


async def test_a_queue_whose_lock_is_lost_is_not_pulled_until_it_is_locked_again(
    embedded_cluster: EmbeddedCluster, autojump_clock: trio.testing.MockClock
) -> None:
    """Java puts off the pull of an orderly queue not locked by 3 s, again and again ("pull message later because not
    locked in broker"); ours pulled on, filling the process queue with what the member holding the lock consumes and
    committing its own stale offset with each pull."""
    await _create(embedded_cluster, "LostPull", 1)
    seen: list[bytes] = []

    async def listener(msgs: list[MessageExt]) -> ConsumeOrderlyStatus:
        seen.extend(m.body for m in msgs)
        return ConsumeOrderlyStatus.SUCCESS

    consumer = _orderly(embedded_cluster, "cg-lostpull", "LostPull", listener)
    mq = MessageQueue("LostPull", "broker-a", 0)
    async with consumer, Producer("pg", embedded_cluster.namesrv_addr) as producer:
        pq = consumer.rebalance.process_queues[mq]
        await _rival_takes(consumer, embedded_cluster, mq)
        await trio.sleep(21)  # the lock renewal learns the lock is gone
        assert not pq.locked
        await trio.sleep(20)  # the long poll under way when it did has ended (15 s)
        for i in range(3):
            await producer.send(Message("LostPull", f"m{i}".encode()), queue=mq)
        await trio.sleep(10)
        assert pq.msg_count == 0, f"{pq.msg_count} message(s) pulled while another member held the lock"
        assert seen == []
        await _rival_gives_back(consumer, embedded_cluster, mq)
        await _until(lambda: len(seen) == 3)  # the next renewal locks it again, and the pulls go on
    assert seen == [b"m0", b"m1", b"m2"]


class _LockRequests:
    """The broker's LOCK_BATCH_MQ as registered, the virtual time of each request naming ``client_id`` recorded."""

    def __init__(self, cluster: EmbeddedCluster, client_id: str) -> None:
        dispatcher = cluster.controller.dispatcher
        self.served, pool = dispatcher._table[int(RequestCode.LOCK_BATCH_MQ)]
        self.client_id = client_id.encode()
        self.times: list[float] = []
        dispatcher.register(RequestCode.LOCK_BATCH_MQ, self, pool)

    async def process(self, ctx: RequestContext, request: RemotingCommand) -> RemotingCommand | None:
        if self.client_id in bytes(request.body):
            self.times.append(trio.current_time())
        return await self.served.process(ctx, request)


async def test_a_refused_lock_is_asked_for_again_after_3_s(
    embedded_cluster: EmbeddedCluster, autojump_clock: trio.testing.MockClock
) -> None:
    """4.9.8's ``ConsumeMessageOrderlyService.tryLockLaterAndReconsume`` resubmits a queue whose lock the broker refused
    3 s later (``submitConsumeRequestLater(..., 3000)``), whose ``ConsumeRequest.run`` asks again 100 ms on: about
    one LOCK_BATCH_MQ every 3.1 s, and the 20 s renewal's. Ours asked every second."""
    await _create(embedded_cluster, "LockAgain", 1)
    release = trio.Event()
    seen: list[bytes] = []

    async def listener(msgs: list[MessageExt]) -> ConsumeOrderlyStatus:
        if not seen:
            await release.wait()
        seen.extend(m.body for m in msgs)
        return ConsumeOrderlyStatus.SUCCESS

    consumer = _orderly(embedded_cluster, "cg-lockagain", "LockAgain", listener)
    mq = MessageQueue("LockAgain", "broker-a", 0)
    async with consumer, Producer("pg", embedded_cluster.namesrv_addr) as producer:
        requests = _LockRequests(embedded_cluster, consumer.instance.client_id)
        for i in range(2):
            await producer.send(Message("LockAgain", f"m{i}".encode()), queue=mq)
        pq = consumer.rebalance.process_queues[mq]
        await _until(lambda: pq.msg_count == 2)  # m0 in the listener, m1 waiting
        await _rival_takes(consumer, embedded_cluster, mq)
        await trio.sleep(21)  # the lock renewal learns the lock is gone
        assert not pq.locked
        release.set()
        start = trio.current_time()
        await trio.sleep(31)
        asked = [t for t in requests.times if t >= start]
        await _rival_gives_back(consumer, embedded_cluster, mq)
        await _until(lambda: len(seen) == 2)
    # 31 s: ten retries 3.1 s apart and the renewals at most
    assert len(asked) <= 12, f"{len(asked)} LOCK_BATCH_MQ in 31 s: {asked}"
    assert seen == [b"m0", b"m1"]


async def test_the_first_lock_renewal_comes_a_second_after_the_start(
    embedded_cluster: EmbeddedCluster, autojump_clock: trio.testing.MockClock
) -> None:
    """4.9.8's ``ConsumeMessageOrderlyService.start`` schedules ``lockMQPeriodically`` at an initial delay of 1000 ms,
    then every ``REBALANCE_LOCK_INTERVAL`` (20 s), from the consumer's start: a lock lost right after the start is
    known within a second. Ours renewed the locks first 20 s after the start's rebalance."""
    await _create(embedded_cluster, "LockEarly", 1)

    async def listener(msgs: list[MessageExt]) -> ConsumeOrderlyStatus:
        return ConsumeOrderlyStatus.SUCCESS

    consumer = _orderly(embedded_cluster, "cg-lockearly", "LockEarly", listener)
    requests = _LockRequests(embedded_cluster, consumer.instance.client_id)
    began = trio.current_time()
    async with consumer:
        taken = len(requests.times)  # the rebalance's, taking the queues
        await trio.sleep(30)
    renewals = [round(t - began, 1) for t in requests.times[taken:]]
    assert renewals == [1.0, 21.0], renewals


async def test_the_lock_interval_and_lifetime_are_read_from_the_environment_as_javas_system_properties(
    embedded_cluster: EmbeddedCluster, autojump_clock: trio.testing.MockClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    """4.9.8's ``ProcessQueue`` reads ``rocketmq.client.rebalance.lockInterval`` (20000) and
    ``rocketmq.client.rebalance.lockMaxLiveTime`` (30000) from the system properties, as this client reads Java's
    system properties from the environment (``ROCKETMQ_CLIENT_REBALANCE_LOCK_INTERVAL``,
    ``ROCKETMQ_CLIENT_REBALANCE_LOCK_MAX_LIVE_TIME``): a broker whose locks live less than 60 s needs them shorter,
    else a lock expires at the broker between two renewals while the client still consumes under it. Ours were
    constants."""
    monkeypatch.setenv("ROCKETMQ_CLIENT_REBALANCE_LOCK_INTERVAL", "5000")
    monkeypatch.setenv("ROCKETMQ_CLIENT_REBALANCE_LOCK_MAX_LIVE_TIME", "3000")
    await _create(embedded_cluster, "LockTuned", 1)

    async def listener(msgs: list[MessageExt]) -> ConsumeOrderlyStatus:
        return ConsumeOrderlyStatus.SUCCESS

    consumer = _orderly(embedded_cluster, "cg-locktuned", "LockTuned", listener)
    requests = _LockRequests(embedded_cluster, consumer.instance.client_id)
    began = trio.current_time()
    async with consumer:
        taken = len(requests.times)
        await trio.sleep(18)
    renewals = [round(t - began, 1) for t in requests.times[taken:]]
    assert renewals == [1.0, 6.0, 11.0, 16.0], renewals
    locked = ProcessQueue.created_at(0.0)
    assert not locked.lock_expired(3.0, consumer.lock_max_live)
    assert locked.lock_expired(3.1, consumer.lock_max_live)


async def _listener(msgs: list[MessageExt]) -> ConsumeOrderlyStatus:
    return ConsumeOrderlyStatus.SUCCESS


@pytest.mark.parametrize("interval", ["0", "-20000"])
async def test_a_lock_interval_not_above_0_fails_an_orderly_consumers_start(
    embedded_cluster: EmbeddedCluster, autojump_clock: trio.testing.MockClock, monkeypatch: pytest.MonkeyPatch,
    interval: str,
) -> None:  # fmt: skip
    """4.9.8's ``ConsumeMessageOrderlyService.start`` renews the locks with ``scheduleAtFixedRate``, which throws
    IllegalArgumentException for a period not above 0, so the consumer does not start. Ours started and renewed the
    locks in a loop that never waited (9,050 LOCK_BATCH_MQ in 3 s). A BROADCASTING one renews nothing (``start``
    schedules the renewal in CLUSTERING only) and starts."""
    monkeypatch.setenv("ROCKETMQ_CLIENT_REBALANCE_LOCK_INTERVAL", interval)
    await _create(embedded_cluster, "LockZero", 1)
    consumer = _orderly(embedded_cluster, "cg-lockzero", "LockZero", _listener)
    requests = _LockRequests(embedded_cluster, consumer.instance.client_id)
    with pytest.raises(ValueError, match="ROCKETMQ_CLIENT_REBALANCE_LOCK_INTERVAL"):
        async with consumer:
            await trio.sleep(3)
    assert requests.times == []
    broadcasting = PushConsumer("cg-lockzero-b", embedded_cluster.namesrv_addr, message_model=MessageModel.BROADCASTING)
    broadcasting.subscribe("LockZero")
    broadcasting.register_message_listener_orderly(_listener)
    async with broadcasting:
        await trio.sleep(1)


@pytest.mark.parametrize(
    ("name", "value"),
    [
        ("ROCKETMQ_CLIENT_REBALANCE_LOCK_INTERVAL", " 5000 "),
        ("ROCKETMQ_CLIENT_REBALANCE_LOCK_MAX_LIVE_TIME", "5_000"),
        ("ROCKETMQ_CLIENT_UNLOCK_DELAY_TIME_MILLS", "5000.0"),
        ("ROCKETMQ_CLIENT_PULL_PULL_MAX_IDLE_TIME", "9223372036854775808"),
    ],
)
async def test_a_timing_javas_long_parse_long_refuses_fails_the_start_naming_it(
    embedded_cluster: EmbeddedCluster, autojump_clock: trio.testing.MockClock, monkeypatch: pytest.MonkeyPatch,
    name: str, value: str,
) -> None:  # fmt: skip
    """Java reads these system properties with ``Long.parseLong``, which refuses blanks around the digits, ``_``
    between them, a fraction and a value past a long, failing the class that reads them (ProcessQueue,
    RebalancePushImpl). Ours read them with ``int()``, which takes the first two, and its error did not say which
    variable was wrong."""
    monkeypatch.setenv(name, value)
    await _create(embedded_cluster, "LockParse", 1)
    with pytest.raises(ValueError, match=name):
        async with _orderly(embedded_cluster, "cg-lockparse", "LockParse", _listener):
            pass


async def test_the_lock_timings_are_read_once_at_the_start(
    embedded_cluster: EmbeddedCluster, autojump_clock: trio.testing.MockClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Java's ProcessQueue and RebalancePushImpl read their timings once, into static finals: a property changed
    later changes nothing. Ours read ``lockMaxLiveTime`` again before each orderly batch, so a value changed after
    the start (here, to one that does not parse) reached a running consumer."""
    monkeypatch.setenv("ROCKETMQ_CLIENT_REBALANCE_LOCK_MAX_LIVE_TIME", "30000")
    await _create(embedded_cluster, "LockOnce", 1)
    seen: list[bytes] = []

    async def listener(msgs: list[MessageExt]) -> ConsumeOrderlyStatus:
        seen.extend(m.body for m in msgs)
        return ConsumeOrderlyStatus.SUCCESS

    async with _orderly(embedded_cluster, "cg-lockonce", "LockOnce", listener):
        await trio.sleep(2)
        monkeypatch.setenv("ROCKETMQ_CLIENT_REBALANCE_LOCK_MAX_LIVE_TIME", "later")
        async with Producer("pg-lockonce", embedded_cluster.namesrv_addr) as producer:
            await producer.send(Message("LockOnce", b"after"))
        await _until(lambda: seen == [b"after"], 30)
