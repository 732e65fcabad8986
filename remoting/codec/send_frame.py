"""The producer's send path, per message: the SEND_MESSAGE_V2 request frame and the SendResult of its response
(:mod:`client.send_request`, :mod:`client.async_send`; Java's ``MQClientAPIImpl.sendMessage`` and
``processSendResponse``).

:func:`send_frame` ``(code, opaque, head, queue_id, tail, broker_json, body, version)`` is
``encode_json_request_ext(code, opaque, b'{%b%d%b,"n":%b}' % (head, queue_id, tail, broker_json), body)`` byte for
byte, with ``version`` the header's ``version``: the send's fields stay encoded around the queue id
(:class:`client.send_request.PreparedSend`), so a frame is one write of its parts. Ints must fit in 64 bits and the
frame in 2 GiB.

:func:`send_result_json` ``(fields, statuses, cls, uniq_id, topic, broker_name)`` reads a send response's parsed JSON
header (``orjson.loads`` of it) into ``cls(status, uniq_id, msgId, topic, broker_name, queueId, queueOffset,
MSG_REGION, TRACE_ON != "false", recallHandle)`` (the producer's ``SendResult``), or returns None unless the general
path would read it the same way: ``code`` an int that ``statuses`` maps to a status, ``extFields`` a dict,
``version`` (absent: 0) an int in int32, ``language`` a str, ``msgId``, ``queueId`` and ``queueOffset`` strs (the
two numbers as ``int()`` reads them), ``MSG_REGION`` a non-empty str (a broker that sends none leaves the answer to
the general path, which puts Java's default region in), ``TRACE_ON`` and ``recallHandle`` absent, null or strs.
Never raises for JSON input.

Both run in C (``remoting.codec._speedups``) when the extension is built; otherwise, or with
``ROCKETRIO_PURE_PYTHON=1``, the Python below. Both give equal values for every input
(tests/codec/test_send_frame.py). The C reader fills ``cls``'s slots directly when they are plain object slots, as
the attrs frozen ``__init__`` of ``SendResult`` would (no validators, no converters); else it calls ``cls``.
"""

from __future__ import annotations

import struct
from collections.abc import Callable
from typing import Any, Final, TypeVar

from remoting.codec.native import native_module

__all__ = ["NATIVE", "send_frame", "send_result_json"]

_HEAD: Final = struct.Struct(">ii")
_INT32: Final = range(-(1 << 31), 1 << 31)
_HEADER: Final = (
    b'{"code":%d,"extFields":{%b%d%b,"n":%b},"flag":0,"language":"PYTHON","opaque":%d,'
    b'"serializeTypeCurrentRPC":"JSON","version":%d}'
)

R = TypeVar("R")


def _py_send_frame(
    code: int, opaque: int, head: bytes, queue_id: int, tail: bytes, broker_json: bytes, body: bytes, version: int, /
) -> bytes:
    header = _HEADER % (code, head, queue_id, tail, broker_json, opaque, version)
    size = len(header)
    return b"".join((_HEAD.pack(4 + size + len(body), size), header, body))


def _py_send_result_json(
    fields: dict[str, Any],
    statuses: dict[int, object],
    cls: Callable[..., R],
    uniq_id: str,
    topic: str,
    broker_name: str,
    /,
) -> R | None:
    code = fields.get("code")
    status = statuses.get(code) if type(code) is int else None
    ext = fields.get("extFields")
    if status is None or type(ext) is not dict:
        return None
    version = fields.get("version", 0)
    if type(version) is not int or version not in _INT32 or type(fields.get("language")) is not str:
        return None
    get = ext.get
    msg_id, queue_id, queue_offset = get("msgId"), get("queueId"), get("queueOffset")
    region, trace_on, recall = get("MSG_REGION"), get("TRACE_ON"), get("recallHandle")
    if (
        type(msg_id) is not str
        or type(queue_id) is not str
        or type(queue_offset) is not str
        or type(region) is not str
        or not region
        or (trace_on is not None and type(trace_on) is not str)
        or (recall is not None and type(recall) is not str)
    ):
        return None
    try:
        queue, offset = int(queue_id), int(queue_offset)
    except ValueError:
        return None
    return cls(status, uniq_id, msg_id, topic, broker_name, queue, offset, region, trace_on != "false", recall)


_speedups: Final = native_module()
_native_frame: Final[Callable[..., bytes] | None] = getattr(_speedups, "send_frame", None)
_native_result: Final[Callable[..., Any] | None] = getattr(_speedups, "send_result_json", None)
#: Whether the C functions are in use.
NATIVE: Final = _native_frame is not None and _native_result is not None
#: See the module docstring.
send_frame: Final[Callable[[int, int, bytes, int, bytes, bytes, bytes, int], bytes]] = (
    _native_frame if _native_frame is not None and _native_result is not None else _py_send_frame
)
#: See the module docstring.
send_result_json: Final[Callable[..., Any]] = (
    _native_result if _native_frame is not None and _native_result is not None else _py_send_result_json
)
