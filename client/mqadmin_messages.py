"""``mqadmin`` commands for single messages, with RocketMQ's names and flags: ``queryMsgById``, ``queryMsgByKey``,
``queryMsgByOffset``, ``sendMessage`` and ``consumeMessage``. :mod:`client.mqadmin` adds them to its command group.
Output and errors as in :mod:`client.mqadmin`.
"""

from __future__ import annotations

from typing import Any

import click

from client.admin import Admin
from client.message import Message
from client.mqadmin_support import MSG_COLUMNS, Output, common, msg_row, run_job
from client.producer import Producer
from remoting.codec.bodies import MessageQueue

__all__ = ["COMMANDS"]


@click.command("queryMsgById")
@common
@click.option("-i", "--msgId", "msg_id", required=True, help="offset message id")
def query_msg_by_id(ctx: click.Context, **o: Any) -> None:
    """A message by its offset msgId."""

    async def job(admin: Admin, out: Output) -> None:
        m = await admin.query_msg_by_id(o["msg_id"])
        out.table("Message", MSG_COLUMNS, [msg_row(m)], {"properties": m.properties} if out.as_json else None)

    run_job(ctx, job)


@click.command("queryMsgByKey")
@common
@click.option("-t", "--topic", required=True)
@click.option("-k", "--msgKey", "key", required=True)
def query_msg_by_key(ctx: click.Context, **o: Any) -> None:
    """Messages of a topic by key."""

    async def job(admin: Admin, out: Output) -> None:
        out.table(
            f"Key {o['key']}", MSG_COLUMNS, [msg_row(m) for m in await admin.query_msg_by_key(o["topic"], o["key"])]
        )

    run_job(ctx, job)


@click.command("queryMsgByOffset")
@common
@click.option("-t", "--topic", required=True)
@click.option("-b", "--brokerName", "broker", required=True)
@click.option("-i", "--queueId", "queue_id", type=int, required=True)
@click.option("-o", "--offset", type=int, required=True)
def query_msg_by_offset(ctx: click.Context, **o: Any) -> None:
    """The message at a queue offset."""

    async def job(admin: Admin, out: Output) -> None:
        msgs = await admin.query_msg_by_offset(MessageQueue(o["topic"], o["broker"], o["queue_id"]), o["offset"])
        out.table("Message", MSG_COLUMNS, [msg_row(m) for m in msgs])

    run_job(ctx, job)


@click.command("sendMessage")
@common
@click.option("-t", "--topic", required=True)
@click.option("-p", "--body", required=True)
@click.option("-k", "--key", "keys")
@click.option("-c", "--tags")
@click.option("-b", "--broker")
@click.option("-i", "--qid", type=int)
def send_message(ctx: click.Context, **o: Any) -> None:
    """Send one message."""

    async def job(admin: Admin, out: Output) -> None:
        async with Producer("TOOLS_PRODUCER", admin.instance.config.namesrv_addr) as producer:
            queue = MessageQueue(o["topic"], o["broker"], o["qid"]) if o["broker"] and o["qid"] is not None else None
            r = await producer.send(
                Message(o["topic"], o["body"].encode(), tags=o["tags"], keys=o["keys"]), queue=queue
            )
        out.table(
            "Sent",
            ["Broker Name", "Queue Id", "Queue Offset", "Send Status", "MsgId", "OffsetMsgId"],
            [[r.broker_name, r.queue_id, r.queue_offset, r.send_status.name, r.msg_id, r.offset_msg_id]],
        )

    run_job(ctx, job)


@click.command("consumeMessage")
@common
@click.option("-t", "--topic", required=True)
@click.option("-b", "--brokerName", "broker")
@click.option("-i", "--queueId", "queue_id", type=int)
@click.option("-o", "--offset", type=int, default=0, show_default=True)
@click.option("-c", "--messageNumber", "count", type=int, default=128, show_default=True)
def consume_message(ctx: click.Context, **o: Any) -> None:
    """Read messages from a topic's queues (no offsets committed)."""

    async def job(admin: Admin, out: Output) -> None:
        route = await admin.topic_route(o["topic"])
        queues = [
            MessageQueue(o["topic"], qd.broker_name, q) for qd in route.queue_datas for q in range(qd.read_queue_nums)
        ]
        queues = [
            mq for mq in queues if (o["broker"] in (None, mq.broker_name)) and (o["queue_id"] in (None, mq.queue_id))
        ]
        rows: list[list[Any]] = []
        for mq in sorted(queues):
            if len(rows) < o["count"]:
                msgs = await admin.query_msg_by_offset(mq, o["offset"], min(32, o["count"] - len(rows)))
                rows.extend(msg_row(m) for m in msgs)
        out.table(f"Messages of {o['topic']}", MSG_COLUMNS, rows)

    run_job(ctx, job)


COMMANDS = (query_msg_by_id, query_msg_by_key, query_msg_by_offset, send_message, consume_message)
