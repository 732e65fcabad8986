"""4.x and 5.x clients on one broker, both directions: our 4.x Python client (remoting) and the official 5.x client
(gRPC) share topics; tags, keys, properties, compressed bodies, delay and transactions cross over; ``mqadmin``'s
connection queries list the 5.x clients."""

from __future__ import annotations

import sys
import time
from typing import Any

import pytest
import trio

from client import (
    Admin,
    ConsumeConcurrentlyStatus,
    LocalTransactionState,
    Message,
    MessageExt,
    Producer,
    PushConsumer,
    TransactionProducer,
)
from tests.proxy.cluster import GrpcCluster
from tests.proxy.official import CommitAll, drain, make_message, start_consumer, start_producer

pytestmark = pytest.mark.timeout(180)

BIG = bytes(range(256)) * 40  # 10 KiB: the 4.x producer compresses bodies over 4 KiB


async def test_4x_producer_to_5x_simple_consumer(grpc_cluster: GrpcCluster) -> None:
    namesrv = grpc_cluster.namesrv_addr
    async with Admin(namesrv) as admin:
        await admin.create_topic("Up", read_queue_nums=4, write_queue_nums=4)
    consumer = await trio.to_thread.run_sync(lambda: start_consumer(grpc_cluster.endpoint, "G5-up", "Up"))
    sent: dict[bytes, Any] = {}
    async with Producer("P4-up", namesrv) as producer:
        for body, msg in [
            (b"plain", Message("Up", b"plain", tags="TagA", keys=["k1", "k2"], properties={"color": "red"})),
            (BIG, Message("Up", BIG, tags="Big")),
            (b"delayed", Message("Up", b"delayed", delay_level=2)),  # 5 s
        ]:
            sent[body] = await producer.send(msg)
    sent_at = time.monotonic()

    def commit(msg: Message, arg: object) -> LocalTransactionState:
        return LocalTransactionState.COMMIT_MESSAGE

    async with TransactionProducer(
        "P4-tx", namesrv, execute_local_transaction=commit, check_local_transaction=lambda m: commit(m, None)
    ) as tx:
        sent[b"in-tx"] = (await tx.send_message_in_transaction(Message("Up", b"in-tx", tags="Tx"))).send_result
    got = await trio.to_thread.run_sync(lambda: drain(consumer, 4, within=30))
    delayed_after = time.monotonic() - sent_at
    await trio.to_thread.run_sync(consumer.shutdown)
    by_body = {m.body: m for m in got}
    assert set(by_body) == set(sent)
    for body, result in sent.items():
        assert by_body[body].message_id == result.msg_id  # the 4.x UNIQ_KEY
        assert not by_body[body].corrupted
    plain = by_body[b"plain"]
    assert (plain.tag, plain.keys, plain.properties) == ("TagA", {"k1", "k2"}, {"color": "red"})
    assert by_body[BIG].tag == "Big" and by_body[b"in-tx"].tag == "Tx"
    assert delayed_after >= 4.0


async def test_5x_producer_to_4x_push_consumer_and_5x_group_side_by_side(grpc_cluster: GrpcCluster) -> None:
    namesrv = grpc_cluster.namesrv_addr
    async with Admin(namesrv) as admin:
        await admin.create_topic("Down", read_queue_nums=4, write_queue_nums=4)
    received: list[MessageExt] = []
    enough = trio.Event()

    async def on_messages(msgs: list[MessageExt]) -> ConsumeConcurrentlyStatus:
        received.extend(msgs)
        if len(received) >= 4:
            enough.set()
        return ConsumeConcurrentlyStatus.CONSUME_SUCCESS

    push = PushConsumer("G4-down", namesrv)
    push.subscribe("Down", "*")
    push.register_message_listener(on_messages)

    def produce() -> tuple[dict[bytes, str], Any, Any]:
        producer = start_producer(grpc_cluster.endpoint, ["Down"], CommitAll())
        ids = {
            b"tagged": producer.send(make_message("Down", b"tagged", tag="TagA", keys="k9")).message_id,
            b"grouped": producer.send(make_message("Down", b"grouped", tag="TagB", group="g-1")).message_id,
            b"delayed": producer.send(make_message("Down", b"delayed", deliver_at=int(time.time()) + 2)).message_id,
        }
        tx = producer.begin_transaction()
        ids[b"in-tx"] = producer.send(make_message("Down", b"in-tx"), tx).message_id
        tx.commit()
        other = start_consumer(grpc_cluster.endpoint, "G5-down", "Down")
        return ids, producer, other

    async with push:
        await trio.sleep(1)  # the push consumer's first rebalance
        ids, producer, other = await trio.to_thread.run_sync(produce)
        with trio.fail_after(30):
            await enough.wait()
        async with Admin(namesrv) as admin:
            consumers = await admin.consumer_connection("G5-down")
            producers = await admin.producer_connection("Down", "Down")
        argv = [sys.executable, "-m", "client.mqadmin", "consumerConnection", "-g", "G5-down", "-n", namesrv, "--json"]
        shown = await trio.run_process(argv, capture_stdout=True, capture_stderr=True)
        side = await trio.to_thread.run_sync(lambda: drain(other, 4, within=30))
        await trio.to_thread.run_sync(other.shutdown)
        await trio.to_thread.run_sync(producer.shutdown)
    by_body = {m.body: m for m in received}
    assert set(by_body) == set(ids)
    for body, message_id in ids.items():
        assert by_body[body].properties["UNIQ_KEY"] == message_id
    assert by_body[b"tagged"].tags == "TagA" and by_body[b"tagged"].keys == ["k9"]
    assert by_body[b"grouped"].properties["__SHARDINGKEY"] == "g-1"
    assert sorted(m.body for m in side) == sorted(ids)  # the 5.x group gets its own copy
    assert [c.language for c in consumers.connection_set] == ["PYTHON"]
    [listed] = consumers.connection_set
    assert listed.client_id in shown.stdout.decode() and "PYTHON" in shown.stdout.decode()
    assert any(c.language == "PYTHON" for c in producers.connection_set)


async def test_a_4x_batch_wakes_a_5x_receive_parked_in_its_long_poll(grpc_cluster: GrpcCluster) -> None:
    """The store tells a batch's arrivals only for queues something waits on: a pop parked in its long poll counts,
    so the batch ends the poll instead of its 20 s await duration."""
    namesrv = grpc_cluster.namesrv_addr
    async with Admin(namesrv) as admin:
        await admin.create_topic("Parked", read_queue_nums=1, write_queue_nums=1)
    consumer = await trio.to_thread.run_sync(
        lambda: start_consumer(grpc_cluster.endpoint, "G5-parked", "Parked", await_duration=20)
    )
    outcome: dict[str, Any] = {}

    def receive() -> None:
        started = time.monotonic()
        outcome["got"] = consumer.receive(16, 30)
        outcome["waited"] = time.monotonic() - started

    async with trio.open_nursery() as nursery:
        nursery.start_soon(trio.to_thread.run_sync, receive)
        await trio.sleep(3)  # the receive is parked in its long poll
        async with Producer("P4-parked", namesrv) as producer:
            await producer.send_batch([Message("Parked", b"b%d" % i) for i in range(3)])
    await trio.to_thread.run_sync(consumer.shutdown)
    assert sorted(m.body for m in outcome["got"]) == [b"b0", b"b1", b"b2"]
    assert outcome["waited"] < 15  # woken by the batch, not by the end of the 20 s poll
