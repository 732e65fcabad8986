"""Messages between the gRPC form (``apache.rocketmq.v2.Message``) and the stored 4.x form: the field-to-property
mapping of RocketMQ's proxy (proxy/src/main/java/org/apache/rocketmq/proxy/grpc/v2/common/GrpcConverter.java and
producer/SendMessageActivity.java), docs/grpc.md#message-mapping.

Sending: ``message_id`` -> ``UNIQ_KEY``, ``tag`` -> ``TAGS``, ``keys`` -> ``KEYS`` (space-joined), ``message_group`` ->
``__SHARDINGKEY``, ``delivery_timestamp`` -> ``TIMER_DELIVER_MS``, TRANSACTION -> ``TRAN_MSG`` (+ the prepared sysFlag),
``trace_context`` -> ``TRACE_CONTEXT`` (unless empty), ``delivery_attempt`` -> ``RECONSUME_TIME`` (the stored message's
``reconsumeTimes`` stays 0 but on a retry topic), ``born_host`` -> ``__BORNHOST`` (the caller's address when blank),
``born_timestamp`` -> ``BORN_TIMESTAMP``, ``PGROUP`` = the topic (5.x producers have no group). Receiving: the
reverse, plus the MD5 body digest, the receipt handle, the delivery attempt (``reconsumeTimes + 1``) and
``dead_letter_queue`` (from ``DLQ_ORIGIN_TOPIC`` and ``DLQ_ORIGIN_MESSAGE_ID``, when both are stored). Properties
named in RocketMQ's ``STRING_HASH_SET`` are system properties: a send carrying one as a user property is refused by
the caller, and a delivered message leaves them out of its user properties (:data:`RESERVED`).
"""

from __future__ import annotations

import hashlib
from typing import Any, Final

from broker.pop import ReceiptHandle
from proxy.common import UNKNOWN_PEER, is_blank
from proxy.pb import definition, service
from remoting.codec.message import MessageExt
from remoting.codec.topics import RETRY_GROUP_TOPIC_PREFIX

__all__ = ["RESERVED", "grpc_message", "recovery_command", "send_properties", "born_ms", "send_reconsume_times"]

#: RocketMQ 5.3.3's MessageConst.STRING_HASH_SET (common/src/main/java/org/apache/rocketmq/common/message/
#: MessageConst.java): the names SendMessageActivity.buildMessageProperty refuses as user properties and
#: GrpcConverter.buildUserAttributes leaves out of a delivered message's. Other MessageConst names (__SHARDINGKEY,
#: TRACE_CONTEXT, INNER_NUM, CHECK_IMMUNITY_TIME_IN_SECONDS, ...) are taken on send and delivered as user properties
#: too (beside message_group, trace_context), as RocketMQ's proxy does.
RESERVED: Final = frozenset(
    [
        "KEYS",
        "TAGS",
        "WAIT",
        "DELAY",
        "RETRY_TOPIC",
        "REAL_TOPIC",
        "REAL_QID",
        "TRAN_MSG",
        "PGROUP",
        "MIN_OFFSET",
        "MAX_OFFSET",
        "BUYER_ID",
        "ORIGIN_MESSAGE_ID",
        "TRANSFER_FLAG",
        "CORRECTION_FLAG",
        "MQ2_FLAG",
        "RECONSUME_TIME",
        "MSG_REGION",
        "TRACE_ON",
        "UNIQ_KEY",
        "EXTEND_UNIQ_INFO",
        "MAX_RECONSUME_TIMES",
        "CONSUME_START_TIME",
        "TRAN_PREPARED_QUEUE_OFFSET",
        "INSTANCE_ID",
        "CORRELATION_ID",
        "REPLY_TO_CLIENT",
        "TTL",
        "ARRIVE_TIME",
        "PUSH_REPLY_TIME",
        "CLUSTER",
        "MSG_TYPE",
        "POP_CK",
        "POP_CK_OFFSET",
        "1ST_POP_TIME",
        "INNER_MULTI_QUEUE_OFFSET",
        "TIMER_DELAY_SEC",
        "TIMER_DELIVER_MS",
        "__BORNHOST",
        "BORN_TIMESTAMP",
        "TIMER_ENQUEUE_MS",
        "TIMER_DEQUEUE_MS",
        "TIMER_ROLL_TIMES",
        "TIMER_OUT_MS",
        "TIMER_DEL_UNIQKEY",
        "TIMER_DELAY_LEVEL",
        "TIMER_DELAY_MS",
        "DLQ_ORIGIN_TOPIC",
        "DLQ_ORIGIN_MESSAGE_ID",
        "DUP_INFO",
        "__CRC32#",
    ]
)
SYSFLAG_COMPRESSED: Final = 0x1
SYSFLAG_TRANSACTION_PREPARED: Final = 0x4
#: google.protobuf.Timestamp's valid seconds (protobuf-java's Timestamps.isValid): 0001-01-01 to 9999-12-31.
_TIMESTAMP_SECONDS: Final = (-62_135_596_800, 253_402_300_799)
_MT = definition.MessageType
#: Enum values read per message, looked up once (each attribute access of a protobuf enum wrapper costs a call).
_TRANSACTION: Final = int(_MT.TRANSACTION)
_DELAY: Final = int(_MT.DELAY)
_FIFO: Final = int(_MT.FIFO)
_NORMAL: Final = int(_MT.NORMAL)
_MD5: Final = int(definition.DigestType.MD5)
_GZIP: Final = int(definition.Encoding.GZIP)
_IDENTITY: Final = int(definition.Encoding.IDENTITY)


def send_properties(msg: Any, topic: str, peer: tuple[str, int] = UNKNOWN_PEER) -> dict[str, str]:
    """The stored properties of a gRPC message being sent by ``peer`` (user properties first, then the mapped
    fields)."""
    sp = msg.system_properties
    props = dict(msg.user_properties)
    # SendMessageActivity takes an empty key; its pair is stored but MessageDecoder.string2messageProperties
    # (common/src/main/java/org/apache/rocketmq/common/message/MessageDecoder.java) drops it on every read.
    props.pop("", None)
    props["UNIQ_KEY"] = sp.message_id
    if sp.HasField("tag"):
        props["TAGS"] = sp.tag
    if sp.keys:
        props["KEYS"] = " ".join(sp.keys)
    if sp.message_group:
        props["__SHARDINGKEY"] = sp.message_group
    if sp.HasField("delivery_timestamp"):
        props["TIMER_DELIVER_MS"] = str(sp.delivery_timestamp.ToMilliseconds())
    if sp.message_type == _TRANSACTION:
        props["TRAN_MSG"] = "true"
        if sp.HasField("orphaned_transaction_recovery_duration"):
            props["CHECK_IMMUNITY_TIME_IN_SECONDS"] = str(sp.orphaned_transaction_recovery_duration.seconds)
    if sp.trace_context:  # SendMessageActivity skips an empty one
        props["TRACE_CONTEXT"] = sp.trace_context
    born_host = _born_host(sp.born_host, peer)
    if born_host:
        props["__BORNHOST"] = born_host
    born = born_ms(sp.born_timestamp)
    if born is not None:
        props["BORN_TIMESTAMP"] = str(born)
    if not topic.startswith(RETRY_GROUP_TOPIC_PREFIX):  # a retry topic's goes into the header: send_reconsume_times
        props["RECONSUME_TIME"] = str(sp.delivery_attempt)
    props["PGROUP"] = topic
    props["WAIT"] = "true"
    return props


def _born_host(sent: str, peer: tuple[str, int]) -> str:
    """buildMessageProperty's __BORNHOST: the client's born host, or when blank the caller's address as
    HeaderInterceptor writes it (Guava's HostAndPort: ``host:port``, ``[v6]:port``); none when that is not known."""
    if not is_blank(sent):
        return str(sent)
    if peer == UNKNOWN_PEER:
        return ""
    host, port = peer
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"


def born_ms(stamp: Any) -> int | None:
    """A born time in epoch milliseconds (``Timestamp.ToMilliseconds``, without its call), or None when protobuf-java's
    ``Timestamps.isValid`` refuses it: seconds outside 0001-01-01 to 9999-12-31, nanos outside a second."""
    seconds, nanos = int(stamp.seconds), int(stamp.nanos)
    if _TIMESTAMP_SECONDS[0] <= seconds <= _TIMESTAMP_SECONDS[1] and 0 <= nanos < 1_000_000_000:
        return seconds * 1000 + nanos // 1_000_000
    return None


def send_reconsume_times(msg: Any, topic: str) -> int:
    """The send header's ``reconsumeTimes`` (ProducerProcessor.buildSendMessageRequestHeader): 0, the broker's count
    of earlier deliveries of a new message, except for a retry topic, whose is the message's ``delivery_attempt``."""
    return int(msg.system_properties.delivery_attempt) if topic.startswith(RETRY_GROUP_TOPIC_PREFIX) else 0


def _message_type(props: dict[str, str]) -> int:
    if props.get("TRAN_MSG") == "true":
        return _TRANSACTION
    if "TIMER_DELIVER_MS" in props or "TIMER_OUT_MS" in props or "DELAY" in props or "TIMER_DELAY_SEC" in props:
        return _DELAY
    if "__SHARDINGKEY" in props:
        return _FIFO
    return _NORMAL


#: google.protobuf.Timestamp's range (0001-01-01 to 9999-12-31T23:59:59.999): a stored time outside it (a 4.x
#: producer's TIMER_OUT_MS or born time is not checked) is clamped rather than failing the whole receive.
_TIMESTAMP_MS: Final = (-62_135_596_800_000, 253_402_300_799_999)


def _timestamp(field: Any, ms: int) -> None:
    field.FromMilliseconds(min(max(ms, _TIMESTAMP_MS[0]), _TIMESTAMP_MS[1]))


def grpc_message(
    msg: MessageExt, topic: str, handle: ReceiptHandle | None = None, attempt: int = 1, namespace: str = ""
) -> Any:
    """A stored message as a 5.x client receives it, under ``topic`` (the original topic of retry copies)."""
    props = msg.properties
    out = definition.Message()
    out.topic.name = topic
    out.topic.resource_namespace = namespace
    body = bytes(msg.body)
    out.body = body
    for key, value in props.items():
        if key not in RESERVED:
            out.user_properties[key] = value
    sp = out.system_properties
    sp.message_id = props.get("UNIQ_KEY") or msg.msg_id
    if "TAGS" in props:
        sp.tag = props["TAGS"]
    sp.keys.extend(k for k in props.get("KEYS", "").split(" ") if k)
    sp.body_digest.type = _MD5
    sp.body_digest.checksum = hashlib.md5(body).hexdigest().upper()
    compressed = msg.sys_flag & SYSFLAG_COMPRESSED
    sp.body_encoding = _GZIP if compressed else _IDENTITY
    sp.message_type = _message_type(props)
    _timestamp(sp.born_timestamp, msg.born_timestamp)
    sp.born_host = props.get("__BORNHOST") or msg.born_host[0]
    _timestamp(sp.store_timestamp, msg.store_timestamp)
    sp.store_host = f"{msg.store_host[0]}:{msg.store_host[1]}"
    # The producer's time first, as RocketMQ 5.3's GrpcConverter: the timer's TIMER_OUT_MS is floored to its precision.
    deliver = props.get("TIMER_DELIVER_MS") or props.get("TIMER_OUT_MS")
    if deliver and deliver.isdigit():
        _timestamp(sp.delivery_timestamp, int(deliver))
    if "__SHARDINGKEY" in props:
        sp.message_group = props["__SHARDINGKEY"]
    if "TRACE_CONTEXT" in props:
        sp.trace_context = props["TRACE_CONTEXT"]
    sp.queue_id = msg.queue_id
    sp.queue_offset = msg.queue_offset
    sp.delivery_attempt = attempt
    origin_topic, origin_id = props.get("DLQ_ORIGIN_TOPIC"), props.get("DLQ_ORIGIN_MESSAGE_ID")
    if origin_topic is not None and origin_id is not None:  # GrpcConverter: both, or no dead_letter_queue
        sp.dead_letter_queue.topic = origin_topic
        sp.dead_letter_queue.message_id = origin_id
    if handle is not None:
        sp.receipt_handle = handle.encode()
        sp.invisible_duration.FromMilliseconds(handle.invisible_time)
    return out


def recovery_command(half: MessageExt, transaction_id: str) -> Any:
    """The Telemetry command asking a producer to resolve an orphaned transaction."""
    command = service.TelemetryCommand()
    recover = command.recover_orphaned_transaction_command
    recover.message.CopyFrom(grpc_message(half, half.topic))
    recover.transaction_id = transaction_id
    return command
