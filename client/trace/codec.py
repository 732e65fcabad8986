"""Message-trace records in RocketMQ's text encoding (docs/protocol.md#717-message-trace), as Java 4.9.8's
``client/src/main/java/org/apache/rocketmq/client/trace/TraceDataEncoder.java`` writes and reads them: fields joined
by 0x01, each record ended by 0x02, nulls written as ``null``.

- ``Pub``: timeStamp, regionId, groupName, topic, msgId, tags, keys, storeHost, bodyLength, costTime, msgType
  (ordinal), offsetMsgId, success;
- ``SubBefore``: timeStamp, regionId, groupName, requestId, msgId, retryTimes, keys;
- ``SubAfter``: requestId, msgId, costTime, success, keys, contextCode, timeStamp, groupName;
- ``EndTransaction``: timeStamp, regionId, groupName, topic, msgId, tags, keys, storeHost, msgType, transactionId,
  transactionState, fromTransactionCheck;
- ``Recall`` (5.3.3's encoder): timeStamp, regionId, groupName, topic, msgId, success.

:func:`decode_trace_data` also reads the shorter records older Java clients and the C++ client (2.x) write: ``Pub``
with 12 fields (a success, as Java's decoder and rocketmq-dashboard's ``MsgTraceDecodeUtil`` read it) or 13,
``SubAfter`` with 6 (no group, no time; the C++ client writes ``dKey`` for empty keys), and the ``SubAfter`` a client
with ``AccessChannel.CLOUD`` writes: 7 fields ended by 0x01, no 0x02, so the batch's next record follows in the same
chunk (Java's decoder parses that record's type name as the time and fails; ours starts the next record there). It
stops at nothing: a record it cannot read is skipped, never raised, because a trace topic is shared by every client.
"""

from __future__ import annotations

import enum
from collections.abc import Iterable, Iterator, Sequence
from typing import Final

import attrs

from remoting.codec.message_properties import find_text_property

__all__ = [
    "CONTENT_SPLITOR",
    "FIELD_SPLITOR",
    "TRACE_TOPIC",
    "MessageType",
    "TraceRecord",
    "TraceType",
    "decode_trace_data",
    "encode_fields",
    "encode_record",
    "find_text_property",
    "trace_keys",
]

CONTENT_SPLITOR: Final = "\x01"
FIELD_SPLITOR: Final = "\x02"
#: The default trace topic (Java's ``TopicValidator.RMQ_SYS_TRACE_TOPIC``).
TRACE_TOPIC: Final = "RMQ_SYS_TRACE_TOPIC"
#: Topics the C++ client (2.x) writes its traces to: this prefix plus the region id.
CPP_TRACE_TOPIC_PREFIX: Final = "rmq_sys_TRACE_DATA_"


class TraceType(enum.Enum):
    Pub = "Pub"
    SubBefore = "SubBefore"
    SubAfter = "SubAfter"
    EndTransaction = "EndTransaction"
    #: RocketMQ 5.3.3: a recalled timer message (``DefaultRecallMessageTraceHook``)
    Recall = "Recall"


class MessageType(enum.IntEnum):
    """Java's ``MessageType`` ordinals."""

    Normal_Msg = 0
    Trans_Msg_Half = 1
    Trans_msg_Commit = 2
    Delay_Msg = 3


@attrs.frozen
class TraceRecord:
    """One trace record; fields a record type does not carry keep their defaults."""

    type: TraceType
    timestamp: int = 0
    region_id: str | None = ""
    group: str | None = None
    topic: str = ""
    msg_id: str = ""
    tags: str | None = None
    keys: str | None = None
    store_host: str = ""
    body_length: int = 0
    cost_time: int = 0
    msg_type: MessageType = MessageType.Normal_Msg
    offset_msg_id: str | None = None
    success: bool = True
    request_id: str = ""
    retry_times: int = 0
    context_code: int = 0
    client_host: str | None = None
    transaction_id: str | None = None
    transaction_state: str | None = None
    from_transaction_check: bool = False


def _text(value: object) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def encode_fields(fields: Sequence[object]) -> str:
    """One record's text from its fields in encoding order (the type name first), 0x02 included."""
    return CONTENT_SPLITOR.join(map(_text, fields)) + FIELD_SPLITOR


def encode_record(r: TraceRecord) -> str:
    """One record's text, 0x02 included."""
    if r.type is TraceType.Pub:
        fields: tuple[object, ...] = (
            r.type.value, r.timestamp, r.region_id, r.group, r.topic, r.msg_id, r.tags, r.keys, r.store_host,
            r.body_length, r.cost_time, int(r.msg_type), r.offset_msg_id, r.success,
        )  # fmt: skip
    elif r.type is TraceType.SubBefore:
        fields = (r.type.value, r.timestamp, r.region_id, r.group, r.request_id, r.msg_id, r.retry_times, r.keys)
    elif r.type is TraceType.SubAfter:
        fields = (
            r.type.value, r.request_id, r.msg_id, r.cost_time, r.success, r.keys, r.context_code, r.timestamp, r.group,
        )  # fmt: skip
    elif r.type is TraceType.Recall:
        fields = (r.type.value, r.timestamp, r.region_id, r.group, r.topic, r.msg_id, r.success)
    else:
        fields = (
            r.type.value, r.timestamp, r.region_id, r.group, r.topic, r.msg_id, r.tags, r.keys, r.store_host,
            int(r.msg_type), r.transaction_id, r.transaction_state, r.from_transaction_check,
        )  # fmt: skip
    return encode_fields(fields)


def trace_keys(records: Iterable[TraceRecord]) -> list[str]:
    """The ``KEYS`` of a trace message: every record's msgId and the traced message's own keys, deduplicated (Java's
    ``TraceTransferBean.transKey`` set), so ``QUERY_MESSAGE`` by msgId finds the batch."""
    keys: dict[str, None] = {}
    for r in records:
        keys[r.msg_id] = None
        if r.keys:
            keys.update(dict.fromkeys(k for k in r.keys.split(" ") if k))
    return list(keys)


def _null(value: str) -> str | None:
    return None if value == "null" else value


def _int(value: str) -> int:
    try:
        return int(value)
    except ValueError:
        return 0


def _bool(value: str) -> bool:
    return value.lower() == "true"


def _msg_type(value: str) -> MessageType:
    number = _int(value)
    return MessageType(number) if 0 <= number < len(MessageType) else MessageType.Normal_Msg


def _pub(f: list[str]) -> TraceRecord | None:
    """12 fields (no offsetMsgId, no success: a success, as Java's TraceContext defaults), 13 (no offsetMsgId), 14,
    or 15 and more (the client host after them), as 4.9.8's decoderFromTraceDataString reads them."""
    if len(f) < 12:
        return None
    offset_msg_id, success = (None, f[12] if len(f) == 13 else "true") if len(f) < 14 else (f[12], f[13])
    return TraceRecord(
        TraceType.Pub, _int(f[1]), f[2], _null(f[3]), f[4], f[5], _null(f[6]), _null(f[7]), f[8], _int(f[9]),
        _int(f[10]), _msg_type(f[11]), _null(offset_msg_id) if offset_msg_id else None, _bool(success),
        client_host=f[14] if len(f) >= 15 else None,
    )  # fmt: skip


def _sub_before(f: list[str]) -> TraceRecord | None:
    if len(f) < 8:
        return None
    return TraceRecord(
        TraceType.SubBefore, _int(f[1]), f[2], _null(f[3]), request_id=f[4], msg_id=f[5], retry_times=_int(f[6]),
        keys=_null(f[7]),
    )  # fmt: skip


def _sub_after(f: list[str]) -> TraceRecord | None:
    if len(f) < 6:
        return None
    return TraceRecord(
        TraceType.SubAfter,
        _int(f[7]) if len(f) >= 9 else 0,
        group=_null(f[8]) if len(f) >= 9 else None,
        request_id=f[1],
        msg_id=f[2],
        cost_time=_int(f[3]),
        success=_bool(f[4]),
        keys=_null(f[5]),
        context_code=_int(f[6]) if len(f) >= 7 and f[6] else 0,
    )


def _end_transaction(f: list[str]) -> TraceRecord | None:
    if len(f) < 13:
        return None
    return TraceRecord(
        TraceType.EndTransaction, _int(f[1]), f[2], _null(f[3]), f[4], f[5], _null(f[6]), _null(f[7]), f[8],
        msg_type=_msg_type(f[9]), transaction_id=_null(f[10]), transaction_state=f[11],
        from_transaction_check=_bool(f[12]),
    )  # fmt: skip


def _recall(f: list[str]) -> TraceRecord | None:
    if len(f) < 7:
        return None
    return TraceRecord(TraceType.Recall, _int(f[1]), f[2], _null(f[3]), f[4], f[5], success=_bool(f[6]))


_DECODERS: Final = {
    TraceType.Pub.value: _pub,
    TraceType.SubBefore.value: _sub_before,
    TraceType.SubAfter.value: _sub_after,
    TraceType.EndTransaction.value: _end_transaction,
    TraceType.Recall.value: _recall,
}


def _chunk_records(fields: list[str]) -> Iterator[TraceRecord]:
    """The records of one 0x02-ended chunk: one, or more when CLOUD ``SubAfter`` records (ended by 0x01 after their
    context code) run into the records after them; a type name where the time would be starts the next record."""
    while fields:
        rest: list[str] = []
        if fields[0] == TraceType.SubAfter.value and len(fields) > 7 and fields[7] in _DECODERS:
            fields, rest = fields[:7], fields[7:]
        decode = _DECODERS.get(fields[0])
        record = None if decode is None else decode(fields)
        if record is not None:
            yield record
        fields = rest


def decode_trace_data(text: str) -> list[TraceRecord]:
    """Every record of a trace message's body (see the module docstring); unreadable records are skipped."""
    return [record for raw in text.split(FIELD_SPLITOR) for record in _chunk_records(raw.split(CONTENT_SPLITOR))]
