"""The client's timers in virtual time (Trio's autojump clock, cluster in the same loop): heartbeats keep a consumer
registered, routes refresh every 30 s, offsets are committed every 5 s, the 20 s rebalance finds late topics and an
incomplete rebalance is retried after 1 s, also by a restarted consumer."""

from __future__ import annotations

import trio

from broker.embedded import EmbeddedCluster
from client import api
from client.admin import Admin
from client.consumer.listener import ConsumeConcurrentlyStatus, ConsumeOrderlyStatus
from client.consumer.push import PushConsumer
from client.message import Message, MessageExt
from client.producer import Producer
from remoting.codec.bodies import ConsumeFromWhere, LockBatchRequestBody, MessageQueue


def _consumer(
    cluster: EmbeddedCluster,
    group: str,
    topic: str,
    seen: list[MessageExt],
    consume_from_where: ConsumeFromWhere = ConsumeFromWhere.CONSUME_FROM_LAST_OFFSET,
) -> PushConsumer:
    async def listener(msgs: list[MessageExt]) -> ConsumeConcurrentlyStatus:
        seen.extend(msgs)
        return ConsumeConcurrentlyStatus.CONSUME_SUCCESS

    consumer = PushConsumer(group, cluster.namesrv_addr, consume_from_where=consume_from_where)
    consumer.subscribe(topic)
    consumer.register_message_listener(listener)
    return consumer


async def _create(cluster: EmbeddedCluster, topic: str, queues: int) -> None:
    async with Admin(cluster.namesrv_addr) as admin:
        await admin.create_topic(topic, read_queue_nums=queues, write_queue_nums=queues)


async def test_heartbeats_keep_a_consumer_registered_past_the_channel_expiry(
    embedded_cluster: EmbeddedCluster, autojump_clock: trio.testing.MockClock
) -> None:
    await _create(embedded_cluster, "Beat", 2)
    seen: list[MessageExt] = []
    async with _consumer(embedded_cluster, "cg-beat", "Beat", seen) as consumer:
        await trio.sleep(300)  # the broker drops clients silent for 120 s
        ids = await api.get_consumer_id_list(consumer.instance.remoting, embedded_cluster.broker_addr, "cg-beat", 3.0)
    assert ids == [consumer.instance.client_id]


async def test_routes_refresh_every_30_seconds(
    embedded_cluster: EmbeddedCluster, autojump_clock: trio.testing.MockClock
) -> None:
    await _create(embedded_cluster, "Grow", 2)
    async with Producer("pg", embedded_cluster.namesrv_addr) as producer:
        await trio.sleep(1)  # past the first refresh, 10 ms after the start (MQClientInstance.startScheduledTask)
        await producer.send(Message("Grow", b"x"))
        await _create(embedded_cluster, "Grow", 6)
        await trio.sleep(10)
        assert len((await producer.publish_info("Grow")).message_queues) == 2
        await trio.sleep(25)
        assert len((await producer.publish_info("Grow")).message_queues) == 6


async def test_offsets_are_committed_every_5_seconds_while_running(
    embedded_cluster: EmbeddedCluster, autojump_clock: trio.testing.MockClock
) -> None:
    await _create(embedded_cluster, "Commit", 1)
    seen: list[MessageExt] = []
    async with Producer("pg", embedded_cluster.namesrv_addr) as producer:
        for i in range(10):
            await producer.send(Message("Commit", f"{i}".encode()))
    async with _consumer(embedded_cluster, "cg-commit", "Commit", seen) as consumer:
        while len(seen) < 10:
            await trio.sleep(0.1)
        await trio.sleep(6)
        stored = await api.query_consumer_offset(
            consumer.instance.remoting,
            embedded_cluster.broker_addr,
            "cg-commit",
            MessageQueue("Commit", "broker-a", 0),
            3.0,
        )
    assert stored == 10


async def test_the_20_second_rebalance_picks_up_a_topic_created_after_start(
    embedded_cluster: EmbeddedCluster, autojump_clock: trio.testing.MockClock
) -> None:
    seen: list[MessageExt] = []
    async with _consumer(embedded_cluster, "cg-late", "Late", seen) as consumer:
        await trio.sleep(15)  # past the quick retries of a failed rebalance (10 x 1 s)
        assert not [mq for mq in consumer.rebalance.process_queues if mq.topic == "Late"]
        await _create(embedded_cluster, "Late", 2)
        async with Producer("pg", embedded_cluster.namesrv_addr) as producer:
            await producer.send(Message("Late", b"late"))
        assert not [mq for mq in consumer.rebalance.process_queues if mq.topic == "Late"]
        await trio.sleep(21)
        assert {mq.queue_id for mq in consumer.rebalance.process_queues if mq.topic == "Late"} == {0, 1}
        while not seen:
            await trio.sleep(0.1)
    assert [m.body for m in seen] == [b"late"]


async def test_a_restarted_consumer_still_retries_an_incomplete_rebalance_soon(
    embedded_cluster: EmbeddedCluster, autojump_clock: trio.testing.MockClock
) -> None:
    """A rebalance that left a topic out (not created yet) is retried after 1 s instead of the 20 s timer. A consumer
    stopped while such a retry was pending used to keep it marked pending, so after a restart no quick retry was
    scheduled again: a topic created 2 s after the restart was only picked up by the 20 s timer."""
    seen: list[MessageExt] = []
    consumer = _consumer(embedded_cluster, "cg-later", "Later", seen, ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET)
    async with consumer:
        pass  # the first rebalance left "Later" out: a quick retry was scheduled, and is cancelled by the stop
    async with consumer:
        await trio.sleep(2)
        await _create(embedded_cluster, "Later", 1)
        async with Producer("pg-later", embedded_cluster.namesrv_addr) as producer:
            await producer.send(Message("Later", b"x"))
        created = trio.current_time()
        with trio.fail_after(60):
            while not seen:
                await trio.sleep(0.1)
        took = trio.current_time() - created
    assert took < 5, f"the restarted consumer took {took:.0f} s to pick up the new topic (the 20 s timer)"


async def test_pulling_pauses_while_the_process_queue_is_over_its_threshold(
    embedded_cluster: EmbeddedCluster, autojump_clock: trio.testing.MockClock
) -> None:
    await _create(embedded_cluster, "Flow", 1)
    release = trio.Event()

    async def listener(msgs: list[MessageExt]) -> ConsumeConcurrentlyStatus:
        await release.wait()
        return ConsumeConcurrentlyStatus.CONSUME_SUCCESS

    async with Producer("pg", embedded_cluster.namesrv_addr) as producer:
        await producer.send_batch([Message("Flow", f"{i}".encode()) for i in range(100)])
    consumer = PushConsumer("cg-flow", embedded_cluster.namesrv_addr, pull_batch_size=4, pull_threshold_for_queue=8)
    consumer.subscribe("Flow")
    consumer.register_message_listener(listener)
    async with consumer:
        [pq] = [pq for mq, pq in consumer.rebalance.process_queues.items() if mq.topic == "Flow"]
        await trio.sleep(10)
        held = pq.msg_count
        release.set()
        while pq.msg_count or consumer.offset_store.read_memory(MessageQueue("Flow", "broker-a", 0)) != 100:
            await trio.sleep(0.1)
    assert 8 < held <= 8 + 4


async def test_orderly_queue_locks_are_renewed_past_the_brokers_60_second_expiry(
    embedded_cluster: EmbeddedCluster, autojump_clock: trio.testing.MockClock
) -> None:
    await _create(embedded_cluster, "Locked", 1)

    async def listener(msgs: list[MessageExt]) -> ConsumeOrderlyStatus:
        return ConsumeOrderlyStatus.SUCCESS

    consumer = PushConsumer("cg-locked", embedded_cluster.namesrv_addr)
    consumer.subscribe("Locked")
    consumer.register_message_listener_orderly(listener)
    mq = MessageQueue("Locked", "broker-a", 0)
    async with consumer:
        assert consumer.rebalance.process_queues[mq].locked
        await trio.sleep(150)
        rival = LockBatchRequestBody(consumer_group="cg-locked", client_id="10.9.9.9@rival", mq_set=frozenset({mq}))
        granted = await api.lock_batch_mq(consumer.instance.remoting, embedded_cluster.broker_addr, rival, 3.0)
        assert granted == frozenset()
        assert consumer.rebalance.process_queues[mq].locked
