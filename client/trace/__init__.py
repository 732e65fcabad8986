"""Message trace (docs/protocol.md#717-message-trace): the record encoding (:mod:`client.trace.codec`), the
background dispatcher producers and consumers feed when ``enable_msg_trace`` is on (:mod:`client.trace.dispatcher`),
and the per-message view ``mqadmin queryMsgTraceById`` prints (:mod:`client.trace.view`)."""

from client.trace.codec import TRACE_TOPIC, MessageType, TraceRecord, TraceType, decode_trace_data, encode_record
from client.trace.dispatcher import TraceDispatcher

__all__ = [
    "TRACE_TOPIC",
    "MessageType",
    "TraceDispatcher",
    "TraceRecord",
    "TraceType",
    "decode_trace_data",
    "encode_record",
]
