"""The official 5.x Python client (``rocketmq-python-client``) against ``mqbroker --enable-proxy``: send, receive,
ack, filters, invisibility, redelivery, DLQ, FIFO order, delay and transactions (docs/grpc.md)."""

from __future__ import annotations

import threading
import time
from typing import Any

import pytest
import trio
from rocketmq import ClientConfiguration, ConsumeResult, Credentials, FilterExpression, MessageListener, PushConsumer
from rocketmq.v5.exception import BadRequestException

from client import Admin
from client.errors import MQBrokerError
from client.message import Message
from client.producer import Producer
from remoting.codec.bodies.broker_metadata import SubscriptionGroupConfig
from remoting.codec.codes import ResponseCode
from tests.proxy.cluster import GrpcCluster
from tests.proxy.official import CommitAll, drain, make_message, start_consumer, start_producer

pytestmark = pytest.mark.timeout(180)


async def create_topic(cluster: GrpcCluster, topic: str, queues: int = 4) -> None:
    async with Admin(cluster.namesrv_addr) as admin:
        await admin.create_topic(topic, read_queue_nums=queues, write_queue_nums=queues)


async def create_group(cluster: GrpcCluster, group: str, *, retry_max_times: int = 16, orderly: bool = False) -> None:
    config = SubscriptionGroupConfig(group, retry_max_times=retry_max_times, consume_message_orderly=orderly)
    async with Admin(cluster.namesrv_addr) as admin:
        await admin.create_subscription_group(config)


def _send_and_receive(endpoint: str) -> dict[str, Any]:
    producer = start_producer(endpoint, ["T1"])
    receipts = [
        producer.send(make_message("T1", b"hello-a", tag="TagA", keys="k1", properties={"p1": "v1", "p2": "v2"})),
        producer.send(make_message("T1", b"hello-b", tag="TagB")),
    ]
    tag_b = start_consumer(endpoint, "G-tagb", "T1", "TagB")
    only_b = drain(tag_b, 1)
    everything = start_consumer(endpoint, "G-all", "T1")
    both = drain(everything, 2)
    started = time.monotonic()
    empty = everything.receive(16, 15)
    waited = time.monotonic() - started
    for client in (tag_b, everything, producer):
        client.shutdown()
    return {"receipts": receipts, "only_b": only_b, "both": both, "empty": empty, "waited": waited}


async def test_send_receive_ack_and_tag_filter(grpc_cluster: GrpcCluster) -> None:
    await create_topic(grpc_cluster, "T1")
    out = await trio.to_thread.run_sync(_send_and_receive, grpc_cluster.endpoint)
    ids = [r.message_id for r in out["receipts"]]
    assert all(len(i) == 34 and i.startswith("01") for i in ids)
    assert [m.body for m in out["only_b"]] == [b"hello-b"]
    by_body = {m.body: m for m in out["both"]}
    assert set(by_body) == {b"hello-a", b"hello-b"}
    a = by_body[b"hello-a"]
    assert (a.message_id, a.tag, a.keys, a.delivery_attempt) == (ids[0], "TagA", {"k1"}, 1)
    assert a.properties == {"p1": "v1", "p2": "v2"}
    assert not a.corrupted and a.receipt_handle
    assert out["empty"] == []
    assert out["waited"] >= 4.0  # a long poll of await_duration (5 s), not an immediate empty answer


def _sql92(endpoint: str) -> dict[str, Any]:
    producer = start_producer(endpoint, ["TSql"])
    for body, region in ((b"to-eu", "eu"), (b"to-us", "us"), (b"to-eu-2", "eu")):
        producer.send(make_message("TSql", body, tag="T", properties={"region": region}))
    eu = start_consumer(endpoint, "G-sql", "TSql", "region = 'eu' AND TAGS = 'T'", sql=True)
    got = drain(eu, 2)
    more = eu.receive(32, 30)
    # RocketMQ 5's string operators (SelectorParser.jj since 5.1.3)
    not_us = start_consumer(endpoint, "G-sql-5", "TSql", "region NOT STARTSWITH 'u' AND TAGS CONTAINS 'T'", sql=True)
    got_5x = drain(not_us, 2)
    broken = start_consumer(endpoint, "G-sql-bad", "TSql", "region = = 'eu'", sql=True)
    try:
        broken.receive(32, 30)
        refused = "accepted"
    except BadRequestException as exc:
        refused = str(exc)
    for client in (eu, not_us, broken, producer):
        client.shutdown()
    return {
        "got": sorted(m.body for m in got),
        "more": more,
        "refused": refused,
        "got_5x": sorted(m.body for m in got_5x),
    }


async def test_sql92_filter_on_receive(grpc_cluster: GrpcCluster) -> None:
    await create_topic(grpc_cluster, "TSql", queues=2)
    out = await trio.to_thread.run_sync(_sql92, grpc_cluster.endpoint)
    assert out["got"] == out["got_5x"] == [b"to-eu", b"to-eu-2"]
    assert out["more"] == []
    assert "40010" in out["refused"] or "FILTER" in out["refused"].upper(), out["refused"]


def _redeliver(endpoint: str) -> dict[str, Any]:
    producer = start_producer(endpoint, ["T2"])
    sent = producer.send(make_message("T2", b"late"))
    consumer = start_consumer(endpoint, "G-redo", "T2", await_duration=5)
    first = drain(consumer, 1, invisible=2, ack=False)
    stale_handle_msg = first[0]
    second = drain(consumer, 1, invisible=2, ack=False)
    try:
        consumer.ack(stale_handle_msg)
        stale_ack = "accepted"
    except BadRequestException:
        stale_ack = "refused"
    try:
        consumer.receive(1, 13 * 3600)  # beyond the 12 h maximum
        short = "accepted"
    except BadRequestException:
        short = "refused"
    msg = second[0]
    consumer.change_invisible_duration(msg, 6)
    early = consumer.receive(16, 2)  # must not see it again: it is invisible for 6 s now
    consumer.ack(msg)
    after_ack = consumer.receive(16, 2)
    consumer.shutdown()
    producer.shutdown()
    return {"sent": sent, "first": first, "second": second, "stale_ack": stale_ack, "short": short,
            "early": early, "after_ack": after_ack}  # fmt: skip


async def test_timeout_redelivers_with_attempt_two_and_change_invisible(grpc_cluster: GrpcCluster) -> None:
    await create_topic(grpc_cluster, "T2")
    out = await trio.to_thread.run_sync(_redeliver, grpc_cluster.endpoint)
    first, second = out["first"][0], out["second"][0]
    assert first.message_id == second.message_id == out["sent"].message_id
    assert (first.delivery_attempt, second.delivery_attempt) == (1, 2)
    assert out["stale_ack"] == "refused"  # INVALID_RECEIPT_HANDLE: that handle expired
    assert out["short"] == "refused"  # ILLEGAL_INVISIBLE_TIME
    assert out["early"] == [] and out["after_ack"] == []


def _until_dlq(endpoint: str) -> dict[str, Any]:
    producer = start_producer(endpoint, ["T3"])
    sent = producer.send(make_message("T3", b"poison", tag="bad"))
    consumer = start_consumer(endpoint, "G-dlq", "T3", await_duration=5)
    attempts = [m.delivery_attempt for m in drain(consumer, 4, invisible=1, ack=False, within=20)]
    dead = start_consumer(endpoint, "G-dlq-reader", "%DLQ%G-dlq")
    in_dlq = drain(dead, 1, within=15)
    for client in (consumer, dead, producer):
        client.shutdown()
    return {"sent": sent, "attempts": attempts, "in_dlq": in_dlq}


async def test_unacknowledged_message_reaches_the_dlq_after_max_attempts(grpc_cluster: GrpcCluster) -> None:
    await create_topic(grpc_cluster, "T3")
    await create_group(grpc_cluster, "G-dlq", retry_max_times=2)
    out = await trio.to_thread.run_sync(_until_dlq, grpc_cluster.endpoint)
    assert out["attempts"] == [1, 2, 3]
    [dead] = out["in_dlq"]
    assert (dead.message_id, dead.body, dead.tag) == (out["sent"].message_id, b"poison", "bad")


def _fifo(endpoint: str) -> dict[str, Any]:
    producer = start_producer(endpoint, ["T4"])
    for i in range(10):
        producer.send(make_message("T4", f"{'ab'[i % 2]}-{i}".encode(), group=f"order-{'ab'[i % 2]}"))
    consumer = start_consumer(endpoint, "G-fifo", "T4", await_duration=5)
    first = consumer.receive(32, 10)
    blocked = consumer.receive(32, 10)  # every queue holding a group has a batch in flight
    for msg in first:
        consumer.ack(msg)
    rest = drain(consumer, 10 - len(first), invisible=10)
    consumer.shutdown()
    producer.shutdown()
    return {"first": first, "blocked": blocked, "rest": rest}


async def test_fifo_groups_come_in_order_one_batch_per_queue(grpc_cluster: GrpcCluster) -> None:
    await create_topic(grpc_cluster, "T4")
    await create_group(grpc_cluster, "G-fifo", orderly=True)
    out = await trio.to_thread.run_sync(_fifo, grpc_cluster.endpoint)
    assert out["first"] and out["blocked"] == []
    received = out["first"] + out["rest"]
    for group in "ab":
        bodies = [m.body.decode() for m in received if m.message_group == f"order-{group}"]
        assert bodies == [f"{group}-{i}" for i in range(10) if "ab"[i % 2] == group]


def _delay(endpoint: str) -> dict[str, Any]:
    producer = start_producer(endpoint, ["T5"])
    deliver_at = int(time.time()) + 4
    producer.send(make_message("T5", b"later", deliver_at=deliver_at))
    try:
        producer.send(make_message("T5", b"much later", deliver_at=int(time.time()) + 2 * 86400))
        far = "accepted"
    except BadRequestException:
        far = "refused"
    consumer = start_consumer(endpoint, "G-delay", "T5", await_duration=5)
    started = time.monotonic()
    got = drain(consumer, 1, within=20)
    took = time.monotonic() - started
    consumer.shutdown()
    producer.shutdown()
    return {"got": got, "took": took, "far": far, "deliver_at": deliver_at}


async def test_delay_message_is_held_until_its_delivery_time(grpc_cluster: GrpcCluster) -> None:
    await create_topic(grpc_cluster, "T5")
    out = await trio.to_thread.run_sync(_delay, grpc_cluster.endpoint)
    [msg] = out["got"]
    assert msg.body == b"later" and msg.delivery_timestamp == out["deliver_at"] * 1000
    assert out["took"] >= 2.0
    assert out["far"] == "refused"  # ILLEGAL_DELIVERY_TIME


def _transactions(endpoint: str) -> dict[str, Any]:
    checker = CommitAll()
    producer = start_producer(endpoint, ["T6"], checker)
    committed = producer.begin_transaction()
    ok = producer.send(make_message("T6", b"commit-me"), committed)
    committed.commit()
    rolled = producer.begin_transaction()
    producer.send(make_message("T6", b"roll-me-back"), rolled)
    rolled.rollback()
    orphan = producer.begin_transaction()
    left = producer.send(make_message("T6", b"orphan", tag="tx"), orphan)  # neither committed nor rolled back
    consumer = start_consumer(endpoint, "G-tx", "T6", await_duration=5)
    got = drain(consumer, 2, within=30)
    got += consumer.receive(16, 10)
    consumer.shutdown()
    producer.shutdown()
    return {"ok": ok, "left": left, "got": got, "checked": checker.checked}


async def test_transactions_commit_rollback_and_orphan_recovery_over_telemetry(grpc_cluster: GrpcCluster) -> None:
    await create_topic(grpc_cluster, "T6")
    out = await trio.to_thread.run_sync(_transactions, grpc_cluster.endpoint)
    assert sorted(m.body for m in out["got"]) == [b"commit-me", b"orphan"]
    assert out["checked"][0] == (out["left"].message_id, "T6", b"orphan")


class _FailOnce(MessageListener):
    def __init__(self) -> None:
        self.seen: list[tuple[bytes, int]] = []
        self.lock = threading.Lock()

    def consume(self, message: Any) -> ConsumeResult:
        with self.lock:
            self.seen.append((message.body, message.delivery_attempt))
        return (
            ConsumeResult.FAILURE
            if message.body == b"fail-once" and message.delivery_attempt == 1
            else ConsumeResult.SUCCESS
        )


def _push(endpoint: str) -> list[tuple[bytes, int]]:
    producer = start_producer(endpoint, ["T7"])
    listener = _FailOnce()
    subscription = {"T7": FilterExpression()}
    consumer = PushConsumer(ClientConfiguration(endpoint, Credentials()), "G-push", listener, subscription)
    consumer.startup()
    producer.send(make_message("T7", b"ok"))
    producer.send(make_message("T7", b"fail-once"))
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline and len(listener.seen) < 3:
        time.sleep(0.2)
    consumer.shutdown()
    producer.shutdown()
    return sorted(listener.seen)


async def test_push_consumer_gets_assignments_and_a_failure_is_redelivered(grpc_cluster: GrpcCluster) -> None:
    await create_topic(grpc_cluster, "T7")
    seen = await trio.to_thread.run_sync(_push, grpc_cluster.endpoint)
    assert seen == [(b"fail-once", 1), (b"fail-once", 2), (b"ok", 1)]


async def test_admin_requests_relayed_to_the_official_client_end_with_the_relay_timeout(
    grpc_cluster: GrpcCluster,
) -> None:
    """``mqadmin consumerStatus -s`` and the dashboard's resend to an official 5.x push consumer: the broker relays
    them over its Telemetry stream (a PrintThreadStackTraceCommand, a VerifyMessageCommand), which
    rocketmq-python-client 5.1.2 does not answer (it reads only Settings and transaction recoveries), so each ends as
    RocketMQ 5.3.3's GrpcChannelManager.scanExpireResultFuture ends it: SYSTEM_BUSY "call remote timeout", after
    ``grpcProxyRelayRequestTimeoutInSeconds``, not CONSUME_MSG_TIMEOUT after the broker's 10 s."""
    await create_topic(grpc_cluster, "T-relay")
    listener = _FailOnce()
    config = ClientConfiguration(grpc_cluster.endpoint, Credentials())
    consumer = PushConsumer(config, "G-relay", listener, {"T-relay": FilterExpression()})
    await trio.to_thread.run_sync(consumer.startup)
    try:
        async with Producer("pg-relay", grpc_cluster.namesrv_addr) as producer:
            sent = await producer.send(Message("T-relay", b"resend me"))
        async with Admin(grpc_cluster.namesrv_addr) as admin:
            [client] = (await admin.consumer_connection("G-relay")).connection_set
            with pytest.raises(MQBrokerError) as stacks:
                await admin.consumer_running_info("G-relay", client.client_id, jstack=True)
            with pytest.raises(MQBrokerError) as resend:
                await admin.consume_message_directly("G-relay", client.client_id, sent.offset_msg_id)
    finally:
        await trio.to_thread.run_sync(consumer.shutdown)
    assert (stacks.value.code, stacks.value.remark) == (ResponseCode.SYSTEM_BUSY, "call remote timeout")
    assert (resend.value.code, resend.value.remark) == (ResponseCode.SYSTEM_BUSY, "call remote timeout")
