"""The message page's trace against real trace records: a producer and a consumer with message trace on write them
into the trace topic through the embedded broker, and ``/api/message/trace`` shows them through the client's trace
lookup (``client.mqadmin_trace``), from the default trace topics or the one ``rocketmq.config.msgTrackTopicName``
names."""

from __future__ import annotations

from typing import Any

import anyio
import trio

from broker.embedded import EmbeddedCluster
from client import ConsumeConcurrentlyStatus, Message, MessageExt, Producer, PushConsumer
from tests.client.helpers import HANG_GUARD, create_topic
from tests.dashboard.conftest import Dash, open_dash


async def _trace_with(dash: Dash, msg_id: str, want: set[str]) -> list[dict[str, Any]]:
    """The trace rows of ``msg_id`` once they hold every type in ``want`` (trace records are written in batches)."""
    with anyio.fail_after(HANG_GUARD):
        while True:
            response = await dash.http.get(f"/api/message/trace?id={msg_id}")
            # Before the first batch the trace topic has no route: the page shows that error until it does.
            if response.status_code == 200:
                records: list[dict[str, Any]] = response.json()["records"]
                if {r["type"] for r in records} >= want:
                    return records
            await anyio.sleep(0.1)


async def test_a_traced_message_shows_its_send_and_its_consumption(dash: Dash) -> None:
    assert dash.app.state.trace_finder is not None
    namesrv = dash.cluster.namesrv_addr
    await create_topic(namesrv, "TracedPageTopic", queues=1)
    consumed = anyio.Event()

    async def listener(msgs: list[MessageExt]) -> ConsumeConcurrentlyStatus:
        consumed.set()
        return ConsumeConcurrentlyStatus.CONSUME_SUCCESS

    consumer = PushConsumer("traced-page-cg", namesrv, enable_msg_trace=True)
    consumer.subscribe("TracedPageTopic", "*")
    consumer.register_message_listener(listener)
    async with consumer, Producer("traced-page-pg", namesrv, enable_msg_trace=True) as producer:
        sent = await producer.send(Message("TracedPageTopic", b"traced", tags="TagT", keys="order-7"))
        with anyio.fail_after(HANG_GUARD):
            await consumed.wait()
        records = await _trace_with(dash, sent.msg_id, {"Pub", "SubAfter"})
    pub = next(r for r in records if r["type"] == "Pub")
    after = next(r for r in records if r["type"] == "SubAfter")
    assert (pub["group"], pub["topic"], pub["tags"], pub["keys"]) == (
        "traced-page-pg",
        "TracedPageTopic",
        "TagT",
        "order-7",
    )
    assert pub["storeHost"] == dash.cluster.broker_addr and pub["status"] == "success"
    assert (after["group"], after["status"]) == ("traced-page-cg", "success")
    assert [r["timestamp"] for r in records] == sorted(r["timestamp"] for r in records)


async def test_a_trace_in_the_configured_trace_topic(embedded_cluster: EmbeddedCluster, nursery: trio.Nursery) -> None:
    namesrv = embedded_cluster.namesrv_addr
    await create_topic(namesrv, "OwnTraceTopic", queues=1)
    producer = Producer("own-trace-pg", namesrv, enable_msg_trace=True, customized_trace_topic="MyTraceTopic")
    async with producer:
        sent = await producer.send(Message("OwnTraceTopic", b"traced", keys="order-8"))
        async for dash in open_dash(embedded_cluster, nursery, msg_track_topic_name="MyTraceTopic"):
            [pub] = await _trace_with(dash, sent.msg_id, {"Pub"})
            assert (pub["group"], pub["keys"]) == ("own-trace-pg", "order-8")
        async for dash in open_dash(embedded_cluster, nursery):  # the default trace topics do not hold it
            assert (await dash.get(f"/api/message/trace?id={sent.msg_id}"))["records"] == []


async def test_a_trace_in_the_trace_topic_the_request_names(dash: Dash) -> None:
    """rocketmq-dashboard's ``viewMessageTraceGraph.query`` takes the trace topic with each request (``traceTopic``,
    its trace page's topic pick): a trace written to a producer's own trace topic shows without restarting the
    dashboard with ``msgTrackTopicName``."""
    namesrv = dash.cluster.namesrv_addr
    await create_topic(namesrv, "PickedTraceSource", queues=1)
    producer = Producer("picked-trace-pg", namesrv, enable_msg_trace=True, customized_trace_topic="PickedTraceTopic")
    async with producer:
        sent = await producer.send(Message("PickedTraceSource", b"traced", keys="order-10"))
        [pub] = await _trace_with(dash, f"{sent.msg_id}&traceTopic=PickedTraceTopic", {"Pub"})
    assert (pub["group"], pub["keys"], pub["topic"]) == ("picked-trace-pg", "order-10", "PickedTraceSource")
    assert (await dash.get(f"/api/message/trace?id={sent.msg_id}"))["records"] == []  # not in the default topics


async def test_a_test_message_sent_with_trace_on_has_its_send_traced(dash: Dash) -> None:
    """The Topics page's test message with "enable message trace" (rocketmq-dashboard's ``traceEnabled``, its
    ``TopicServiceImpl.sendTopicMessageRequest`` building the producer with trace on) writes a Pub record to the trace
    topic, the producer's group ``SELF_TEST_P_GROUP``; without it there is none."""
    await create_topic(dash.cluster.namesrv_addr, "TracedTestTopic", queues=1)
    body = {"topic": "TracedTestTopic", "body": "traced", "keys": "order-9"}
    sent = await dash.post("/api/topic/message", {**body, "traceEnabled": True})
    [pub] = await _trace_with(dash, sent["msgId"], {"Pub"})
    assert (pub["topic"], pub["keys"], pub["status"]) == ("TracedTestTopic", "order-9", "success")
    assert pub["group"] == "SELF_TEST_P_GROUP"  # MixAll.SELF_TEST_PRODUCER_GROUP, as the dashboard's producer
    untraced = await dash.post("/api/topic/message", {**body, "traceEnabled": False})
    assert (await dash.get(f"/api/message/trace?id={untraced['msgId']}"))["records"] == []


def test_trace_rows_carry_the_fields_rocketmq_dashboard_shows() -> None:
    """rocketmq-dashboard's ``MessageTraceView.decodeFromTraceTransData`` gives each row the record's message type
    (its name, null for consume records), offset message id, request id, retry times, transaction id and whether
    the end came from a check-back, which its trace dialog shows (``MessageTraceDetailViewDialog``); our rows lacked
    them, so a retried consumption and a transaction's id could not be told from the page."""
    from client.trace.view import trace_views
    from dashboard.trace import record_row
    from remoting.codec.message import MessageExt as Ext
    from tests.client.test_trace import JAVA_END, JAVA_PUB, JAVA_SUB_AFTER

    a = "\x01"
    before = a.join(["SubBefore", "1700000000010", "null", "CG", "REQ1", "MSGID1", "3", "k1 k2"]) + "\x02"
    end = JAVA_END.replace("MSGID2", "MSGID1").replace(a + "false\x02", a + "true\x02")
    body = (JAVA_PUB + before + JAVA_SUB_AFTER + end).encode()
    carrier = Ext(0, 0, 0, 0, 0, 0, 0, 0, ("10.9.9.9", 4242), 0, ("127.0.0.1", 1), 0, 0, body, "T", {}, b"")
    rows = {r["type"]: r for r in map(record_row, trace_views("MSGID1", [carrier]))}
    fields = ("msgId", "msgType", "offSetMsgId", "requestId", "retryTimes", "transactionId", "fromTransactionCheck")
    assert [tuple(rows[t].get(f) for f in fields) for t in ("Pub", "SubBefore", "SubAfter", "EndTransaction")] == [
        ("MSGID1", "Normal_Msg", "OFFSETID1", None, 0, None, False),
        ("MSGID1", None, None, "REQ1", 3, None, False),
        ("MSGID1", None, None, "REQ1", 0, None, False),
        ("MSGID1", "Trans_msg_Commit", None, None, 0, "MSGID1", True),
    ]
