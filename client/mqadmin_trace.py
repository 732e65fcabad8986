"""``mqadmin queryMsgTraceById`` (alias ``QueryMsgTraceById``), as RocketMQ 4.9.8's
``tools/src/main/java/org/apache/rocketmq/tools/command/message/QueryMsgTraceByIdSubCommand.java``: the trace
messages indexed under the message id in the trace topic (QUERY_MESSAGE, 64 at most, or ``-c``, stored between
``-b`` and ``-e``: 5.3.3's options), decoded, printed as the Pub rows, then the consume rows per consumer group (the
groups in the iteration order of Java's ``HashMap``); none indexed fails the command ("query message by key
finished, but no message.", as Java's queryMessage).

Beyond Java: the EndTransaction records of a transactional message are printed too (a third table), and without
``-t`` the command also reads the topics the C++ client writes its traces to (``rmq_sys_TRACE_DATA_<region>``, found
in the name server's topic list), so one command shows a message's whole path whatever client traced it.
"""

from __future__ import annotations

from typing import Any

import click

from client.admin import Admin
from client.errors import MQClientError
from client.mqadmin_support import JAVA_INT, JAVA_LONG, Output, common, format_date, java_hash_set, run_job
from client.trace.codec import CPP_TRACE_TOPIC_PREFIX, TRACE_TOPIC, TraceType
from client.trace.view import TraceView, trace_views
from remoting.codec.message import MessageExt

__all__ = ["COMMANDS"]

_FMT = "%-10s %-20s %-20s %-20s %-10s %-10s%n"
_TX = "%-10s %-20s %-20s %-20s %-18s %-10s%n"


async def find_traces(admin: Admin, msg_id: str, topic: str | None) -> list[TraceView]:
    """The trace of ``msg_id`` from ``topic`` (default: RMQ_SYS_TRACE_TOPIC and the C++ client's trace topics)."""
    return trace_views(msg_id, await find_trace_messages(admin, msg_id, topic))


async def find_trace_messages(
    admin: Admin, msg_id: str, topic: str | None, *, max_num: int = 64, begin_ms: int = 0, end_ms: int | None = None
) -> list[MessageExt]:
    """The trace messages indexed under ``msg_id`` in ``topic`` (default: as :func:`find_traces`), at most
    ``max_num`` per topic and broker, stored from ``begin_ms`` to ``end_ms`` (none: no end)."""
    if topic:
        topics = [topic]
    else:
        known = await admin.topic_list()
        topics = [TRACE_TOPIC, *sorted(t for t in known if t.startswith(CPP_TRACE_TOPIC_PREFIX))]
    found = []
    for name in topics:
        try:
            # Java ends the range at its own clock; open-ended, a broker clock ahead of ours hides nothing.
            found.extend(await admin.query_msg_by_key(name, msg_id, max_num=max_num, begin_ms=begin_ms, end_ms=end_ms))
        except Exception:
            if topic:  # the topic asked for must answer; the defaults may simply not exist
                raise
    return found


def print_trace(out: Output, views: list[TraceView]) -> None:
    """Pub rows, consume rows per group, EndTransaction rows (see the module docstring)."""
    by_group: dict[str, list[TraceView]] = {}
    for v in views:
        r = v.record
        if r.type is TraceType.Pub:
            out.header(_FMT, "#Type", "#ProducerGroup", "#ClientHost", "#SendTime", "#CostTimes", "#Status")
            out.row(_FMT, "Pub", r.group, v.client_host, format_date(r.timestamp), f"{r.cost_time}ms", v.status)
            out.line("\n")
        elif r.type is TraceType.SubAfter:
            by_group.setdefault(r.group or "null", []).append(v)
    # QueryMsgTraceByIdSubCommand.printMessageTrace keeps the groups in a HashMap<String, List<TraceView>>(16) and
    # prints them in its iteration order (tools/src/main/java/org/apache/rocketmq/tools/command/message/
    # QueryMsgTraceByIdSubCommand.java), not sorted.
    for group in java_hash_set(list(by_group)):
        out.header(_FMT, "#Type", "#ConsumerGroup", "#ClientHost", "#ConsumerTime", "#CostTimes", "#Status")
        for v in by_group[group]:
            r = v.record
            out.row(_FMT, "Sub", group, v.client_host, format_date(r.timestamp), f"{r.cost_time}ms", v.status)
        out.line("\n")
    ends = [v for v in views if v.record.type is TraceType.EndTransaction]
    if ends:
        out.header(_TX, "#Type", "#ProducerGroup", "#ClientHost", "#EndTime", "#TransactionState", "#FromCheck")
        for v in ends:
            r = v.record
            out.row(_TX, "EndTx", r.group, v.client_host, format_date(r.timestamp), r.transaction_state,
                    r.from_transaction_check)  # fmt: skip
        out.line("\n")


@click.command("queryMsgTraceById", help="query a message trace")
@common
@click.option("-i", "--msgId", "msg_id", required=True, help="Message Id")
@click.option("-t", "--traceTopic", "trace_topic", help="The name value of message trace topic")
# RocketMQ 5.3.3's options (tools/src/main/java/org/apache/rocketmq/tools/command/message/
# QueryMsgTraceByIdSubCommand.java), handed to queryMessage: 4.9.8 asked for 64 from 0 to its clock.
@click.option("-b", "--beginTimestamp", "begin", type=JAVA_LONG, default=0, help="Begin timestamp(ms). default:0")
@click.option("-e", "--endTimestamp", "end", type=JAVA_LONG, help="End timestamp(ms). default:Long.MAX_VALUE")
@click.option("-c", "--maxNum", "max_num", type=JAVA_INT, default=64, help="The maximum number of messages returned")
def query_msg_trace_by_id(ctx: click.Context, **o: Any) -> None:
    async def job(admin: Admin, out: Output) -> None:
        found = await find_trace_messages(
            admin, o["msg_id"], o["trace_topic"] or None, max_num=o["max_num"], begin_ms=o["begin"], end_ms=o["end"]
        )
        if not found:
            # MQAdminImpl.queryMessage throws NO_MESSAGE when nothing is indexed under the key, failing the command
            # (client/src/main/java/org/apache/rocketmq/client/impl/MQAdminImpl.java).
            raise MQClientError("query message by key finished, but no message.")
        views = trace_views(o["msg_id"], found)
        print_trace(out, views)
        out.field("records", [{"type": v.record.type.value, "group": v.record.group, "clientHost": v.client_host,
                               "timestamp": v.record.timestamp, "costTime": v.record.cost_time, "status": v.status,
                               "transactionState": v.record.transaction_state} for v in views])  # fmt: skip

    run_job(ctx, job)


#: The commands :mod:`client.mqadmin` registers.
COMMANDS = (query_msg_trace_by_id,)
