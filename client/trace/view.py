"""One message's trace as ``mqadmin queryMsgTraceById`` shows it (Java's ``TraceView``): the records of trace
messages found by the message's id, decoded, kept only when they are about that id.

Beyond Java's view: a consume record without its group and time (``SubAfter`` as the C++ client writes it) takes
them from the ``SubBefore`` record with the same request id, so every client's consumption is listed by group.
"""

from __future__ import annotations

from collections.abc import Iterable

import attrs

from client.trace.codec import TraceRecord, TraceType, decode_trace_data
from remoting.codec.message import MessageExt

__all__ = ["TraceView", "trace_views"]


@attrs.frozen
class TraceView:
    """A record plus the IP of the host that sent the trace message carrying it (Java's ``clientHost``, the carrier's
    ``getBornHostString()``: no port)."""

    record: TraceRecord
    client_host: str

    @property
    def status(self) -> str:
        return "success" if self.record.success else "failed"


def trace_views(msg_id: str, trace_messages: Iterable[MessageExt]) -> list[TraceView]:
    """The records about ``msg_id`` in ``trace_messages`` (bodies that do not decode are skipped), oldest first."""
    views: list[TraceView] = []
    for message in trace_messages:
        host = message.born_host[0]
        for record in decode_trace_data(message.body.decode("utf-8", "replace")):
            if record.msg_id == msg_id:
                views.append(TraceView(record, host))
    before = {v.record.request_id: v.record for v in views if v.record.type is TraceType.SubBefore}
    filled = []
    for view in views:
        r = view.record
        if r.type is TraceType.SubAfter and r.group is None and r.request_id in before:
            origin = before[r.request_id]
            view = attrs.evolve(
                view, record=attrs.evolve(r, group=origin.group, timestamp=r.timestamp or origin.timestamp)
            )
        filled.append(view)
    return sorted(filled, key=lambda v: v.record.timestamp)
