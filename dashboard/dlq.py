"""The DLQ page's data and actions, as rocketmq-dashboard's ``DlqMessageController`` and ``DlqMessageServiceImpl``
(src/main/java/org/apache/rocketmq/dashboard/service/impl/DlqMessageServiceImpl.java): a consumer group's
dead-letter messages (its ``%DLQ%<group>`` topic) stored in a time range, resending some of them to the group, and
exporting some of them as an Excel workbook.

- A group without a DLQ topic has no dead letters: an empty list, not an error (the topic is made only when the
  first message dies).
- Resending is rocketmq-dashboard's: CONSUME_MESSAGE_DIRECTLY of the original message (the DLQ copy's
  ``ORIGIN_MESSAGE_ID`` in its ``RETRY_TOPIC``: an offset msgId the broker set when the message was sent back, or the
  producer's msgId a client's own retry copy carries) to an online consumer of the group, whose listener consumes
  it again; nothing is stored. Each message is answered on its own: one that fails (its consumer offline, the
  original retained no longer) does not stop the others.
- The export has the columns of rocketmq-dashboard's ``DlqMessageExcelModel``: topic, msgId, bornHost,
  bornTimestamp, storeTimestamp, reconsumeTimes, properties, messageBody, bodyCRC, exception.
"""

from __future__ import annotations

import datetime
import io
from collections.abc import Sequence
from typing import Any

from openpyxl import Workbook
from openpyxl.cell.cell import ILLEGAL_CHARACTERS_RE

from client.admin import BROKER_FAILURES, Admin
from client.errors import MQBrokerError, TopicRouteNotFoundError
from client.message import PROPERTY_ORIGIN_MESSAGE_ID, PROPERTY_RETRY_TOPIC
from dashboard import messages
from remoting.codec.message import MessageExt
from remoting.codec.message_properties import PROPERTY_UNIQ_KEY
from remoting.codec.topics import dlq_topic

#: The workbook's columns, in DlqMessageExcelModel's order.
EXPORT_COLUMNS = (
    "topic",
    "msgId",
    "bornHost",
    "bornTimestamp",
    "storeTimestamp",
    "reconsumeTimes",
    "properties",
    "messageBody",
    "bodyCRC",
    "exception",
)
XLSX = "application/vnd.openxmlformats-officedocument.spreadsheetml.sheet"


async def by_time(admin: Admin, group: str, begin_ms: int, end_ms: int) -> dict[str, Any]:
    """The group's dead letters stored in ``[begin_ms, end_ms]`` (:func:`dashboard.messages.by_time`), each with the
    original topic and message id a resend needs; none when the group has no DLQ topic."""
    topic = dlq_topic(group)
    try:
        found = await messages.messages_by_time(admin, topic, begin_ms, end_ms)
    except TopicRouteNotFoundError as exc:
        if not exc.topic_not_exist:
            raise
        return {"topic": topic, "messages": [], "truncated": False}
    rows = [_row(msg) for msg in found["messages"]]
    return {"topic": topic, "messages": rows, "truncated": found["truncated"]}


def _row(msg: MessageExt) -> dict[str, Any]:
    return {
        **messages.summary(msg),
        "reconsumeTimes": msg.reconsume_times,
        "originTopic": msg.properties.get(PROPERTY_RETRY_TOPIC, ""),
        "originMsgId": msg.properties.get(PROPERTY_ORIGIN_MESSAGE_ID, ""),
    }


async def resend(
    admin: Admin, group: str, origins: Sequence[tuple[str, str | None]], client_id: str | None
) -> list[dict[str, Any]]:
    """Each original message (its ``ORIGIN_MESSAGE_ID`` and ``RETRY_TOPIC``, the topic ``None`` when unknown) handed
    to a consumer of ``group`` (:func:`dashboard.messages.resend`), one answer per message in order: the consumer's
    result, or ``error`` with what failed. The topic finds an original whose id is its producer's (a client's own
    retry copy, ``DefaultMQPushConsumerImpl.sendMessageBack``, carries that one), as rocketmq-dashboard's
    ``dlqMessage.js`` sends both."""
    results: list[dict[str, Any]] = []
    for msg_id, topic in origins:
        try:
            answer = await messages.resend(admin, group, msg_id, client_id, topic)
        except BROKER_FAILURES as exc:
            error: dict[str, Any] = {"message": str(exc) or type(exc).__name__}
            if isinstance(exc, MQBrokerError):
                error.update(code=exc.code, remark=exc.remark)
            results.append({"originMsgId": msg_id, "error": error})
        else:
            results.append({"originMsgId": msg_id, **answer})
    return results


async def export(
    admin: Admin, group: str, msg_ids: Sequence[str], *, strict: bool = False, name: str = "dlqs"
) -> bytes:
    """The dead letters ``msg_ids`` (ids as listed: the producer's or offset msgIds) as a workbook of one sheet,
    ``name`` (rocketmq-dashboard's ``dlqs`` for a batch, ``dlq`` for one message); a message that cannot be read is a
    row with its id and the error in ``exception`` (the batch export's way), or with ``strict`` its error propagates
    and no workbook is made, as rocketmq-dashboard's single ``exportDlqMessage.do`` fails with "Failed to query
    message by Id" (src/main/java/org/apache/rocketmq/dashboard/controller/DlqMessageController.java)."""
    book = Workbook()
    sheet = book.active
    assert sheet is not None  # a new workbook has its one sheet
    sheet.title = name
    sheet.append(EXPORT_COLUMNS)
    topic = dlq_topic(group)
    for msg_id in msg_ids:
        try:
            msg = await messages.find(admin, msg_id, topic)
        except BROKER_FAILURES as exc:
            if strict:
                raise
            sheet.append([topic, msg_id, "", "", "", None, "", "", None, str(exc)])
            continue
        sheet.append([_cell(value) for value in export_row(msg)])
    out = io.BytesIO()
    book.save(out)
    return out.getvalue()


def export_row(msg: MessageExt) -> list[Any]:
    """One message as DlqMessageExcelModel fills it: times as ``yyyy-MM-dd HH:mm:ss`` (local time), the properties
    as Java's ``Map.toString``, the body as UTF-8 (bytes that are not: U+FFFD)."""
    return [
        msg.topic,
        msg.properties.get(PROPERTY_UNIQ_KEY) or msg.msg_id,
        f"{msg.born_host[0]}:{msg.born_host[1]}",
        _local(msg.born_timestamp),
        _local(msg.store_timestamp),
        msg.reconsume_times,
        "{" + ", ".join(f"{k}={v}" for k, v in msg.properties.items()) + "}",
        msg.body.decode("utf-8", "replace"),
        msg.body_crc,
        "",
    ]


def _cell(value: Any) -> Any:
    """``value`` as a cell can hold it: the control characters XML 1.0 has no place for (a binary body's, say) written
    as OOXML's ``_xHHHH_`` escapes, which Excel shows as the character and Apache POI (rocketmq-dashboard's
    EasyExcel) writes too; openpyxl refuses them, which failed the whole export."""
    if not isinstance(value, str):
        return value
    return ILLEGAL_CHARACTERS_RE.sub(lambda m: f"_x{ord(m.group()):04X}_", value)


def _local(ms: int) -> str:
    return datetime.datetime.fromtimestamp(ms / 1000).strftime("%Y-%m-%d %H:%M:%S")
