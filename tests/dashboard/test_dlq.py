"""The DLQ endpoints (rocketmq-dashboard's "DLQ Message" tab) over a real socket against the embedded cluster: a
group's dead letters by time, resent to an online consumer of the group one by one, and exported as a workbook."""

from __future__ import annotations

import io

from openpyxl import load_workbook

from client import (
    ConsumeConcurrentlyStatus,
    ConsumeFromWhere,
    Message,
    MessageExt,
    Producer,
    PushConsumer,
    SendResult,
    api,
)
from client.consumer.consume import retry_copy_properties
from dashboard.dlq import EXPORT_COLUMNS, XLSX
from remoting.codec.message_properties import PROPERTY_DELAY
from tests.client.helpers import create_topic, wait_until
from tests.dashboard.conftest import Dash

TOPIC = "DlqPageTopic"
GROUP = "dlq-page-cg"


async def _kill(dash: Dash, bodies: list[bytes]) -> list[SendResult]:
    """Send ``bodies`` and send each back for GROUP straight to its DLQ (delay level -1), as a consumer that gives
    up on a message does."""
    admin = dash.admin
    await create_topic(dash.cluster.namesrv_addr, TOPIC, queues=1)
    async with Producer("dlq-page-pg", dash.cluster.namesrv_addr) as producer:
        sent = [await producer.send(Message(TOPIC, body, keys=f"k{i}")) for i, body in enumerate(bodies)]
    for result in sent:
        msg = await admin.query_msg_by_id(result.offset_msg_id)
        remoting, timeout = admin.instance.remoting, admin.instance.config.rpc_timeout
        await api.consumer_send_msg_back(
            remoting, dash.cluster.broker_addr, msg, GROUP, -1, 16, timeout, result.offset_msg_id
        )
    return sent


async def test_a_group_without_dead_letters_has_an_empty_list(dash: Dash) -> None:
    """rocketmq-dashboard answers an empty page when %DLQ%<group> does not exist (TOPIC_NOT_EXIST)."""
    assert await dash.get("/api/dlq?group=never-failed") == {
        "topic": "%DLQ%never-failed",
        "messages": [],
        "truncated": False,
    }
    await dash.get("/api/dlq", 400)  # no group


async def test_dead_letters_are_listed_resent_to_the_group_and_exported(dash: Dash) -> None:
    sent = await _kill(dash, [b"first dead", "second dead \u2713".encode()])
    listed = await dash.get(f"/api/dlq?group={GROUP}")
    rows = listed["messages"]
    assert [r["originMsgId"] for r in rows] == [s.offset_msg_id for s in sent]
    assert {r["topic"] for r in rows} == {f"%DLQ%{GROUP}"} and {r["originTopic"] for r in rows} == {TOPIC}
    assert [r["keys"] for r in rows] == ["k0", "k1"] and [r["msgId"] for r in rows] == [s.msg_id for s in sent]

    received: list[bytes] = []

    async def listener(msgs: list[MessageExt]) -> ConsumeConcurrentlyStatus:
        received.extend(m.body for m in msgs)
        return ConsumeConcurrentlyStatus.CONSUME_SUCCESS

    consumer = PushConsumer(
        GROUP, dash.cluster.namesrv_addr, consume_from_where=ConsumeFromWhere.CONSUME_FROM_LAST_OFFSET
    )
    consumer.subscribe(TOPIC, "*")
    consumer.register_message_listener(listener)
    async with consumer:
        origin = [r["originMsgId"] for r in rows]
        answer = await dash.post("/api/dlq/resend", {"group": GROUP, "originMsgIds": [origin[1], "0A00", origin[0]]})
        results = answer["results"]
        assert [r["originMsgId"] for r in results] == [origin[1], "0A00", origin[0]]
        assert [r.get("consumeResult") for r in results] == ["CR_SUCCESS", None, "CR_SUCCESS"]
        assert results[0]["clientId"] == consumer.instance.client_id
        assert "no message" in results[1]["error"]["message"]  # one bad id does not stop the others
        # The new group also consumes the originals from offset 0 (a 4.9 broker answers 0 for a group without an
        # offset while the queue's first message is in memory): each body twice, once resent.
        await wait_until(lambda: len(received) == 4)
        assert sorted(received) == sorted([b"first dead", "second dead \u2713".encode()] * 2)
    offline = await dash.post("/api/dlq/resend", {"group": GROUP, "originMsgIds": [origin[0]]})
    assert offline["results"][0]["error"]["code"] == 206  # CONSUMER_NOT_ONLINE, the broker's answer

    response = await dash.http.post(
        "/api/dlq/export/batch", json={"group": GROUP, "msgIds": [rows[1]["msgId"], "nope"]}
    )
    assert response.status_code == 200 and response.headers["content-type"] == XLSX
    assert 'filename="dlqs.xlsx"' in response.headers["content-disposition"]
    sheet = load_workbook(io.BytesIO(response.content)).active
    assert sheet is not None and sheet.title == "dlqs"  # DlqMessageController.batchExportDlqMessage's names
    header, good, bad = (list(row) for row in sheet.iter_rows(values_only=True))
    assert tuple(header) == EXPORT_COLUMNS
    record = dict(zip(EXPORT_COLUMNS, good, strict=True))
    assert record["topic"] == f"%DLQ%{GROUP}" and record["msgId"] == sent[1].msg_id
    assert record["messageBody"] == "second dead \u2713" and record["reconsumeTimes"] == 1
    assert f"ORIGIN_MESSAGE_ID={sent[1].offset_msg_id}" in record["properties"]
    assert f"RETRY_TOPIC={TOPIC}" in record["properties"] and isinstance(record["bodyCRC"], int)
    assert bad[1] == "nope" and bad[9]  # a message that cannot be read: its id and why


async def test_dlq_requests_without_ids_are_refused(dash: Dash) -> None:
    refused = await dash.post("/api/dlq/resend", {"group": GROUP, "originMsgIds": []}, 400)
    assert "originMsgIds" in refused["error"]["message"]
    await dash.post("/api/dlq/resend", {"group": GROUP, "messages": [{"originTopic": TOPIC}]}, 400)
    await dash.post("/api/dlq/export", {"group": GROUP, "msgIds": "not-a-list"}, 400)
    await dash.post("/api/dlq/export", {"msgIds": ["x"]}, 400)


async def test_a_dead_letter_whose_origin_is_a_producers_id_is_resent(dash: Dash) -> None:
    """A consumer whose send-back fails sends a copy to %RETRY%<group> itself, with ORIGIN_MESSAGE_ID the message's
    own msgId (the producer's UNIQ_KEY: DefaultMQPushConsumerImpl.sendMessageBack); that copy's dead letter keeps it.
    rocketmq-dashboard resends it as any other (dlqMessage.js sends RETRY_TOPIC and ORIGIN_MESSAGE_ID,
    DefaultMQAdminExtImpl.consumeMessageDirectly looks the message up in that topic): the original is consumed."""
    admin = dash.admin
    remoting, timeout = admin.instance.remoting, admin.instance.config.rpc_timeout
    await create_topic(dash.cluster.namesrv_addr, TOPIC, queues=1)
    async with Producer("dlq-uniq-pg", dash.cluster.namesrv_addr) as producer:
        sent = await producer.send(Message(TOPIC, b"sent back by the client"))
        original = await admin.query_msg_by_id(sent.offset_msg_id)
        properties = retry_copy_properties(original, sent.msg_id)
        del properties[PROPERTY_DELAY]
        copy = await producer.send(Message(f"%RETRY%{GROUP}", original.body, properties=properties))
    retry_msg = await admin.query_msg_by_id(copy.offset_msg_id)
    await api.consumer_send_msg_back(remoting, dash.cluster.broker_addr, retry_msg, GROUP, -1, 16, timeout, sent.msg_id)
    [row] = (await dash.get(f"/api/dlq?group={GROUP}"))["messages"]
    assert (row["originMsgId"], row["originTopic"]) == (sent.msg_id, TOPIC)

    received: list[bytes] = []

    async def listener(msgs: list[MessageExt]) -> ConsumeConcurrentlyStatus:
        received.extend(m.body for m in msgs if m.msg_id == sent.msg_id and m.reconsume_times == 0)
        return ConsumeConcurrentlyStatus.CONSUME_SUCCESS

    consumer = PushConsumer(
        GROUP, dash.cluster.namesrv_addr, consume_from_where=ConsumeFromWhere.CONSUME_FROM_LAST_OFFSET
    )
    consumer.subscribe(TOPIC, "*")
    consumer.register_message_listener(listener)
    async with consumer:
        wanted = [{"originMsgId": row["originMsgId"], "originTopic": row["originTopic"]}]
        [result] = (await dash.post("/api/dlq/resend", {"group": GROUP, "messages": wanted}))["results"]
        assert result.get("consumeResult") == "CR_SUCCESS", result
        assert result["originMsgId"] == sent.msg_id


async def test_a_binary_dead_letter_is_exported_with_its_control_characters_escaped(dash: Dash) -> None:
    """XML 1.0 has no place for most control characters, and openpyxl refused a body holding them, failing the whole
    export (500). They are written as OOXML's _xHHHH_ escapes, as Apache POI writes them (rocketmq-dashboard)."""
    [sent] = await _kill(dash, [b"\x00\x01bin\x7f"])
    response = await dash.http.post("/api/dlq/export", json={"group": GROUP, "msgIds": [sent.offset_msg_id]})
    assert response.status_code == 200, response.text
    assert 'filename="dlq.xlsx"' in response.headers["content-disposition"]  # exportDlqMessage's file and sheet
    sheet = load_workbook(io.BytesIO(response.content)).active
    assert sheet is not None and sheet.title == "dlq"
    _, row = (list(r) for r in sheet.iter_rows(values_only=True))
    assert dict(zip(EXPORT_COLUMNS, row, strict=True))["messageBody"] == "_x0000__x0001_bin\x7f"


async def test_a_single_export_of_a_missing_dead_letter_is_an_error_not_a_workbook(dash: Dash) -> None:
    """rocketmq-dashboard's ``exportDlqMessage.do`` answers "Failed to query message by Id" when ``viewMessage``
    fails: no workbook. Only the batch export lists a message it cannot read as a row."""
    await _kill(dash, [b"dead"])
    response = await dash.http.post("/api/dlq/export", json={"group": GROUP, "msgIds": ["nope"]})
    assert response.status_code == 404, response.status_code
    assert "nope" in response.json()["error"]["message"]
