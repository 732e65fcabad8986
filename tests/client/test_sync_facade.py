"""The blocking facade from plain synchronous code: no event loop in the test, only the facade's own thread."""

from __future__ import annotations

import subprocess
import sys
import threading
from pathlib import Path

import anyio
import pytest

from client import ConsumeConcurrentlyStatus, ConsumeOrderlyStatus, Message, MessageExt
from client.config import ClientConfig
from client.errors import MessageValidationError, MQBrokerError
from client.request_reply import create_reply_message
from client.sync import Admin, LitePullConsumer, Producer, PushConsumer
from remoting.codec.bodies import ConsumeFromWhere, MessageQueue
from tests.client.helpers import HANG_GUARD, create_topic
from tests.conftest import SMALL_STORE
from tests.threaded_cluster import ThreadedCluster


def test_blocking_producer_and_push_consumer_work_from_plain_code(cluster: ThreadedCluster) -> None:
    with Admin(cluster.namesrv_addr) as admin:
        admin.create_topic("SyncTopic", read_queue_nums=2, write_queue_nums=2)
        anyio.run(create_topic, cluster.namesrv_addr, "SyncTopic", 2)  # waits until the name server routes it
        assert "SyncTopic" in admin.topic_list()
    with Producer("sync-pg", cluster.namesrv_addr) as producer:
        results = [producer.send(Message("SyncTopic", f"s{i}".encode())) for i in range(10)]
        producer.send_oneway(Message("SyncTopic", b"oneway"))
    assert {r.queue_id for r in results} == {0, 1}

    received: list[bytes] = []
    all_there = threading.Event()

    def listener(msgs: list[MessageExt]) -> ConsumeConcurrentlyStatus:
        received.extend(m.body for m in msgs)
        if len(received) >= 11:
            all_there.set()
        return ConsumeConcurrentlyStatus.CONSUME_SUCCESS

    consumer = PushConsumer("sync-cg", cluster.namesrv_addr)
    consumer.subscribe("SyncTopic")
    consumer.register_message_listener(listener)
    consumer.start()
    try:
        assert all_there.wait(HANG_GUARD)
    finally:
        consumer.shutdown()
    assert sorted(received) == sorted([f"s{i}".encode() for i in range(10)] + [b"oneway"])


def test_blocking_lite_pull_consumer_polls_what_was_sent(cluster: ThreadedCluster) -> None:
    with Admin(cluster.namesrv_addr) as admin:
        admin.create_topic("SyncLite", read_queue_nums=1, write_queue_nums=1)
    anyio.run(create_topic, cluster.namesrv_addr, "SyncLite", 1)
    with Producer("sync-pg", cluster.namesrv_addr) as producer:
        for i in range(5):
            producer.send(Message("SyncLite", f"l{i}".encode()))
    with LitePullConsumer("sync-lite", cluster.namesrv_addr) as consumer:
        consumer.assign(consumer.fetch_message_queues("SyncLite"))
        got: list[bytes] = []
        for _ in range(50):
            got.extend(m.body for m in consumer.poll(timeout=1.0))
            if len(got) >= 5:
                break
        consumer.commit()
        [mq] = consumer.fetch_message_queues("SyncLite")
        assert consumer.committed(mq) == 5
        consumer.commit({mq: 3})
        assert consumer.committed(mq) == 3
        consumer.commit([mq])
        consumer.unsubscribe("SyncLite")
        assert consumer.consumer.assignment() == set()
    assert got == [f"l{i}".encode() for i in range(5)]
    with Admin(cluster.namesrv_addr) as admin:
        progress = admin.consumer_progress("sync-lite", "SyncLite")  # forwarded by name to the async Admin
    assert [(w.broker_offset, w.consumer_offset) for w in progress.values()] == [(5, 5)]


SCRIPT = """
import sys, threading
from client import ConsumeConcurrentlyStatus, Message
from client.sync import Producer, PushConsumer

namesrv = sys.argv[1]
with Producer("script-pg", namesrv) as producer:
    result = producer.send(Message("ScriptTopic", b"from a script"))
got = threading.Event()

def on_messages(msgs):
    print("received", msgs[0].body.decode(), flush=True)
    got.set()
    return ConsumeConcurrentlyStatus.CONSUME_SUCCESS

consumer = PushConsumer("script-cg", namesrv)
consumer.subscribe("ScriptTopic")
consumer.register_message_listener(on_messages)
with consumer:
    got.wait(60)
print("sent", result.send_status.name)
"""


def test_a_blocking_lite_pull_consumers_queue_listener_runs_in_a_thread_and_may_seek(cluster: ThreadedCluster) -> None:
    """A plain ``MessageQueueListener`` given to the facade runs in a worker thread, so it may call the consumer's
    blocking methods (Java runs it on the rebalance thread; the usual reason to pass one is to ``seek`` the queues it
    was given). Run on the background loop's thread, every facade call raised RuntimeError there."""
    anyio.run(create_topic, cluster.namesrv_addr, "SyncLiteListener", 2)
    errors: list[BaseException] = []
    seeked: list[MessageQueue] = []
    done = threading.Event()

    def listener(topic: str, mq_all: set[MessageQueue], mq_divided: set[MessageQueue]) -> None:
        try:
            for mq in sorted(mq_divided):
                consumer.seek(mq, 0)
                seeked.append(mq)
        except BaseException as exc:
            errors.append(exc)
            raise
        finally:
            done.set()

    with LitePullConsumer("sync-lite-listener", cluster.namesrv_addr) as consumer:
        consumer.subscribe("SyncLiteListener", "*", listener=listener)
        assert done.wait(HANG_GUARD)
    assert errors == [] and len(seeked) == 2


def test_a_blocking_orderly_consumer_restarted_on_a_new_loop_takes_the_queue_its_abandoned_thread_leaves(
    cluster: ThreadedCluster,
) -> None:
    """A stop past ``await_termination`` abandons a blocked plain orderly listener's thread, which keeps the queue's
    turn until it returns. The facade restarts the consumer on a new event loop (the old one ended with the stop): the
    thread's return must still hand the turn to the new loop, so the queue is consumed again (its message came back
    uncommitted), once."""
    anyio.run(create_topic, cluster.namesrv_addr, "SyncAbandon", 1)
    with Producer("sync-pg", cluster.namesrv_addr) as producer:
        producer.send(Message("SyncAbandon", b"slow"))
    entered, release, again = threading.Event(), threading.Event(), threading.Event()
    calls: list[bytes] = []

    def listener(msgs: list[MessageExt]) -> ConsumeOrderlyStatus:
        calls.extend(m.body for m in msgs)
        if len(calls) == 1:
            entered.set()
            release.wait(HANG_GUARD)
        else:
            again.set()
        return ConsumeOrderlyStatus.SUCCESS

    first = ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET
    # Trio: a client instance restarted on a new asyncio loop trips over its wake-up events of the old one.
    consumer = PushConsumer(
        "sync-abandon", cluster.namesrv_addr, backend="trio", consume_from_where=first, await_termination=0.2
    )
    consumer.subscribe("SyncAbandon")
    consumer.register_message_listener_orderly(listener)
    try:
        with consumer:
            assert entered.wait(HANG_GUARD)
        with consumer:
            release.set()
            assert again.wait(HANG_GUARD), "the restarted consumer never consumed the queue the abandoned thread left"
    finally:
        release.set()
    assert calls == [b"slow", b"slow"]


def test_blocking_facade_runs_in_a_plain_python_script(cluster: ThreadedCluster) -> None:
    anyio.run(create_topic, cluster.namesrv_addr, "ScriptTopic", 1)
    done = subprocess.run(
        [sys.executable, "-c", SCRIPT, cluster.namesrv_addr],
        capture_output=True,
        text=True,
        timeout=HANG_GUARD,
        cwd=Path(__file__).parent.parent.parent,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == ["received from a script", "sent SEND_OK"]


def test_blocking_request_and_request_async_get_their_replies(cluster: ThreadedCluster) -> None:
    with Admin(cluster.namesrv_addr) as admin:
        admin.create_topic("SyncRequests", read_queue_nums=1, write_queue_nums=1)
    anyio.run(create_topic, cluster.namesrv_addr, "SyncRequests", 1)
    with Producer("sync-replier-pg", cluster.namesrv_addr) as replier:

        def answer(msgs: list[MessageExt]) -> ConsumeConcurrentlyStatus:
            for m in msgs:
                replier.send(create_reply_message(m, b"re:" + m.body))
            return ConsumeConcurrentlyStatus.CONSUME_SUCCESS

        consumer = PushConsumer("sync-replier-cg", cluster.namesrv_addr)
        consumer.subscribe("SyncRequests")
        consumer.register_message_listener(answer)
        with consumer, Producer("sync-requester-pg", cluster.namesrv_addr) as requester:
            reply = requester.request(Message("SyncRequests", b"one"), HANG_GUARD)
            outcomes: list[MessageExt | Exception] = []
            came = threading.Event()

            def callback(outcome: MessageExt | Exception) -> None:
                outcomes.append(outcome)
                came.set()

            requester.request_async(Message("SyncRequests", b"two"), callback, HANG_GUARD)
            assert came.wait(HANG_GUARD)
    assert reply.body == b"re:one"
    assert [o.body if isinstance(o, MessageExt) else o for o in outcomes] == [b"re:two"]


#: One admin account and no address white list: every request must be signed.
ADMIN_ONLY_ACL = """\
globalWhiteRemoteAddresses:
accounts:
  - accessKey: sync-admin
    secretKey: sync-secret-key
    whiteRemoteAddress:
    admin: true
"""


def test_the_blocking_admin_signs_with_a_client_config(tmp_path: Path) -> None:
    """``client.sync.Admin(..., config=ClientConfig(access_key=..., secret_key=...))`` signs, as the async Admin and
    the other blocking clients do; it took no config, so it could not work against a cluster with ACL on."""
    home = tmp_path / "rocketmq-home"
    (home / "conf").mkdir(parents=True)
    (home / "conf" / "plain_acl.yml").write_text(ADMIN_ONLY_ACL)
    cluster = ThreadedCluster(tmp_path / "cluster", acl_enable=True, rocketmq_home=str(home), **SMALL_STORE).start()
    try:
        with Admin(cluster.namesrv_addr) as unsigned, pytest.raises(MQBrokerError, match="No accessKey"):
            unsigned.create_topic("SyncSignedTopic", broker_addr=cluster.broker_addr)
        config = ClientConfig(access_key="sync-admin", secret_key="sync-secret-key")
        with Admin(cluster.namesrv_addr, config=config) as admin:
            admin.create_topic("SyncSignedTopic", broker_addr=cluster.broker_addr)
    finally:
        cluster.stop()


def test_a_blocking_consumer_s_plain_listener_sends_a_message_back_and_lists_queues(cluster: ThreadedCluster) -> None:
    """``send_message_back`` and ``fetch_subscribe_message_queues`` of the facade, the first from the worker thread a
    plain listener runs in."""
    anyio.run(create_topic, cluster.namesrv_addr, "SyncSendBack", 1)
    with Producer("sync-pg", cluster.namesrv_addr) as producer:
        producer.send(Message("SyncSendBack", b"back"))
    came_back = threading.Event()
    consumer = PushConsumer("sync-cg-send-back", cluster.namesrv_addr)

    def listener(msgs: list[MessageExt]) -> ConsumeConcurrentlyStatus:
        for msg in msgs:
            if msg.reconsume_times:
                came_back.set()
            else:
                consumer.send_message_back(msg, 1)
        return ConsumeConcurrentlyStatus.CONSUME_SUCCESS

    consumer.subscribe("SyncSendBack")
    consumer.register_message_listener(listener)
    consumer.start()
    try:
        assert consumer.fetch_subscribe_message_queues("SyncSendBack") == [MessageQueue("SyncSendBack", "broker-a", 0)]
        assert came_back.wait(HANG_GUARD)
    finally:
        consumer.shutdown()


def test_a_setting_written_on_the_blocking_facade_reaches_the_wrapped_client(cluster: ThreadedCluster) -> None:
    """Java's ``DefaultMQProducer.setMaxMessageSize`` (and the other setters) change the producer itself; the facade
    only forwarded reads, so ``facade.max_message_size = 10`` set an attribute of the facade and the producer kept its
    4 MiB. Writes of the wrapped object's public attributes now go to it, before or after the start."""
    producer = Producer("pg-sync-settings", cluster.namesrv_addr)
    producer.default_topic_queue_nums = 2
    with producer:
        producer.max_message_size = 10
        producer.compress_msg_body_over_howmuch = 5
        assert (producer.producer.max_message_size, producer.producer.compress_msg_body_over_howmuch) == (10, 5)
        assert producer.producer.default_topic_queue_nums == 2
        assert "max_message_size" not in vars(producer)
        with pytest.raises(MessageValidationError):
            producer.send(Message("SyncSettings", b"x" * 11))
