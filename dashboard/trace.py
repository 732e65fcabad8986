"""A message's trace for the Messages page: the producer's send and each group's consumption, as
``mqadmin queryMsgTraceById`` prints them.

The decoding of trace records belongs to the client (``client.mqadmin_trace.find_traces``, over ``client.trace``).
This module looks that function up when the app starts (:func:`default_finder`) and, on a client without it, serves
``{"available": false, "reason": ...}`` so the page says why there is no trace instead of failing. A test or an
embedding can pass any :data:`TraceFinder` to :func:`dashboard.app.create_app`.
"""

from __future__ import annotations

import importlib
from collections.abc import Awaitable, Callable
from typing import Any, Final

from client.admin import Admin

#: ``(admin, msg_id) -> records``: each record a dict with the keys of :func:`record_row`.
TraceFinder = Callable[[Admin, str], Awaitable[list[dict[str, Any]]]]

UNAVAILABLE = "this rocketrio client has no message-trace decoder (client.mqadmin_trace.find_traces)"


#: The record types whose message type a row names (rocketmq-dashboard's ``MessageTraceView`` names the ``TraceBean``'s,
#: which only a Pub or an EndTransaction record sets).
_TYPED: Final = frozenset({"Pub", "EndTransaction"})


def record_row(view: Any) -> dict[str, Any]:
    """One of the client's trace views (a record and the host that sent it) as the page's row, with the fields of
    rocketmq-dashboard's ``MessageTraceView.decodeFromTraceTransData`` (``msgType``, ``offSetMsgId``, ``requestId``,
    ``retryTimes``, ``transactionId``, ``fromTransactionCheck``)."""
    r = view.record
    kind = getattr(r.type, "value", str(r.type))
    return {
        "type": kind,
        "msgId": r.msg_id,
        "msgType": getattr(r.msg_type, "name", None) if kind in _TYPED else None,
        "offSetMsgId": r.offset_msg_id,
        "requestId": r.request_id or None,
        "retryTimes": r.retry_times,
        "transactionId": r.transaction_id,
        "fromTransactionCheck": r.from_transaction_check,
        "group": r.group,
        "clientHost": view.client_host,
        "timestamp": r.timestamp,
        "costTime": r.cost_time,
        "status": view.status,
        "topic": r.topic,
        "tags": r.tags,
        "keys": r.keys,
        "storeHost": r.store_host,
        "transactionState": r.transaction_state,
    }


def default_finder(trace_topic: str | None = None) -> TraceFinder | None:
    """The client's trace lookup in ``trace_topic`` (default: the client's default trace topics) wrapped as a
    :data:`TraceFinder`, or ``None`` when the client has none."""
    try:
        module = importlib.import_module("client.mqadmin_trace")
    except ImportError:
        return None
    find_traces = getattr(module, "find_traces", None)
    if find_traces is None:
        return None

    async def finder(admin: Admin, msg_id: str) -> list[dict[str, Any]]:
        return [record_row(v) for v in await find_traces(admin, msg_id, trace_topic or None)]

    return finder


async def trace_of(finder: TraceFinder | None, admin: Admin, msg_id: str) -> dict[str, Any]:
    """The page's trace answer for ``msg_id``."""
    if finder is None:
        return {"available": False, "reason": UNAVAILABLE, "records": []}
    records = sorted(await finder(admin, msg_id), key=lambda r: r.get("timestamp") or 0)
    return {"available": True, "reason": None, "records": records}
