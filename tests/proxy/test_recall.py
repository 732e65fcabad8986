"""RecallMessage end to end with the official 5.x client (``Producer.recall_message``) against ``mqbroker
--enable-proxy --recallMessageEnable true``: a delay message's receipt carries a recall handle and a normal one's none;
a recalled message reaches neither a 5.x nor a 4.x consumer, while a later one of the same topic does; a handle that
does not decode, names another broker, has passed or is used on a topic of another type is answered as RocketMQ
5.3's proxy answers it; a recall holds across a kill -9 of the broker. Real processes, wall-clock delays of seconds;
the recalled message's absence is judged when a later message of the same one-queue topic has arrived (the timer
delivers in time order, so the recalled one would have come first), never by a timeout."""

from __future__ import annotations

import time
from typing import Any

import pytest
import trio
from rocketmq.v5.exception import ClientException

from client import Admin, ConsumeConcurrentlyStatus, MessageExt, PushConsumer
from proxy.common import Code
from remoting.codec.recall_handle import decode_recall_handle, encode_recall_handle
from tests.e2e.harness import kill_all
from tests.proxy.cluster import GrpcCluster
from tests.proxy.official import make_message, start_consumer, start_producer

pytestmark = pytest.mark.timeout(240)


@pytest.fixture
async def recall_cluster(tmp_path: Any, nursery: trio.Nursery) -> Any:
    cluster = GrpcCluster(tmp_path / "cluster", ["--recallMessageEnable", "true"])
    try:
        await cluster.start(nursery)
        yield cluster
    finally:
        await kill_all()


def _attempt(fn: Any) -> tuple[Any, str]:
    """``("ok", result)`` or the 5.x status code and text the client raised with."""
    try:
        return "ok", fn()
    except ClientException as exc:
        return exc.code, str(exc)


def _receive_until(consumer: Any, last: bytes, within: float = 40.0) -> list[bytes]:
    """Bodies received (and acknowledged) until ``last`` came or ``within`` seconds passed."""
    got: list[bytes] = []
    deadline = time.monotonic() + within
    while last not in got and time.monotonic() < deadline:
        for msg in consumer.receive(32, 30):
            got.append(msg.body)
            consumer.ack(msg)
    return got


def _send_recall_receive(endpoint: str) -> dict[str, Any]:
    producer = start_producer(endpoint, ["TDelay", "TNormal"])
    consumer = start_consumer(endpoint, "G5-recall", "TDelay", await_duration=5)
    out: dict[str, Any] = {"normal": producer.send(make_message("TNormal", b"normal")).recall_handle}
    now = int(time.time())
    gone = producer.send(make_message("TDelay", b"gone", deliver_at=now + 3))
    last = producer.send(make_message("TDelay", b"last", deliver_at=now + 4))
    out["gone"], out["last"] = (gone.message_id, gone.recall_handle), (last.message_id, last.recall_handle)
    out["recalled"] = _attempt(lambda: producer.recall_message("TDelay", gone.recall_handle))
    in_a_minute = str(int(time.time() * 1000) + 60_000)
    out["garbage"] = _attempt(lambda: producer.recall_message("TDelay", "not a handle"))
    out["empty"] = _attempt(lambda: producer.recall_message("TDelay", ""))
    foreign = encode_recall_handle("TDelay", "broker-elsewhere", in_a_minute, last.message_id)
    out["foreign"] = _attempt(lambda: producer.recall_message("TDelay", foreign))
    out["normal_topic"] = _attempt(lambda: producer.recall_message("TNormal", last.recall_handle))
    out["received"] = _receive_until(consumer, b"last")
    out["passed"] = _attempt(lambda: producer.recall_message("TDelay", last.recall_handle))
    consumer.shutdown()
    producer.shutdown()
    return out


async def test_a_recalled_delay_message_reaches_no_consumer(recall_cluster: GrpcCluster) -> None:
    namesrv = recall_cluster.namesrv_addr
    async with Admin(namesrv) as admin:
        await admin.create_topic("TDelay", read_queue_nums=1, write_queue_nums=1, attributes="+message.type=DELAY")
        await admin.create_topic("TNormal", read_queue_nums=2, write_queue_nums=2, attributes="+message.type=NORMAL")
    legacy: list[bytes] = []
    last_arrived = trio.Event()

    async def on_messages(msgs: list[MessageExt]) -> ConsumeConcurrentlyStatus:
        legacy.extend(m.body for m in msgs)
        if b"last" in legacy:
            last_arrived.set()
        return ConsumeConcurrentlyStatus.CONSUME_SUCCESS

    push = PushConsumer("G4-recall", namesrv)
    push.subscribe("TDelay", "*")
    push.register_message_listener(on_messages)
    async with push:
        await trio.sleep(1)  # the push consumer's first rebalance
        out = await trio.to_thread.run_sync(_send_recall_receive, recall_cluster.endpoint)
        with trio.fail_after(30):
            await last_arrived.wait()

    assert out["normal"] is None  # a normal message's receipt has no handle
    gone_id, gone_handle = out["gone"]
    topic, broker, timestamp, message_id = decode_recall_handle(gone_handle)
    assert (topic, message_id) == ("TDelay", gone_id) and broker.startswith("broker-") and int(timestamp) > 0
    assert out["recalled"] == ("ok", gone_id)
    assert out["received"] == [b"last"]  # the 5.x group
    assert legacy == [b"last"]  # the 4.x group
    internal = Code.INTERNAL_SERVER_ERROR
    for case, text in (
        ("garbage", "recall handle is invalid"),
        ("empty", "recall handle is invalid"),
        ("foreign", "recall failed, broker service not available"),
        ("passed", "recall failed, timestamp invalid"),
    ):
        assert out[case][0] == internal and text in out[case][1], (case, out[case])
    code, text = out["normal_topic"]
    assert code == Code.MESSAGE_PROPERTY_CONFLICT_WITH_TYPE, out["normal_topic"]
    assert "the expected type is NORMAL, but actual type is DELAY" in text


def _send_and_recall(endpoint: str, delay: int) -> dict[str, Any]:
    producer = start_producer(endpoint, ["TCrash"])
    now = int(time.time())
    gone = producer.send(make_message("TCrash", b"gone", deliver_at=now + delay))
    producer.send(make_message("TCrash", b"last", deliver_at=now + delay + 1))
    recalled = _attempt(lambda: producer.recall_message("TCrash", gone.recall_handle))
    producer.shutdown()
    return {"recalled": recalled, "gone": gone.message_id, "deliver_at": now + delay}


def _after_restart(endpoint: str) -> list[bytes]:
    consumer = start_consumer(endpoint, "G5-crash", "TCrash", await_duration=5)
    got = _receive_until(consumer, b"last", within=90)
    consumer.shutdown()
    return got


async def test_a_recall_holds_across_kill_9(recall_cluster: GrpcCluster, nursery: trio.Nursery) -> None:
    async with Admin(recall_cluster.namesrv_addr) as admin:
        await admin.create_topic("TCrash", read_queue_nums=1, write_queue_nums=1)
    out = await trio.to_thread.run_sync(_send_and_recall, recall_cluster.endpoint, 30)
    assert out["recalled"] == ("ok", out["gone"])
    await trio.sleep(1.0)
    await recall_cluster.kill_broker()
    await recall_cluster.start_broker(nursery)
    # The broker must be back before the message's time for the rebuilt wheel to file the marker with it.
    assert time.time() < out["deliver_at"] - 1
    got = await trio.to_thread.run_sync(_after_restart, recall_cluster.endpoint)
    assert got == [b"last"]
