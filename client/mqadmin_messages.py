"""``mqadmin`` message commands, as RocketMQ 4.9.8's ``tools/src/main/java/org/apache/rocketmq/tools/command/message/``:
``queryMsgById``, ``queryMsgByKey``, ``queryMsgByUniqueKey``, ``queryMsgByOffset``, ``printMsg``, ``printMsgByQueue``,
``sendMessage``, ``consumeMessage`` and ``checkMsgSendRT``. Options, required options and printed lines are Java's
(the message detail block, ``MSGID: ... BODY: ...`` lines, the send tables); :mod:`client.mqadmin` registers them.

The detail block writes the body to ``/tmp/rocketmq/msgbodys/<msgId>`` and ends with each consuming group's track
(:func:`client.message_track.message_track_detail`, Java's ``messageTrackDetail``).
"""

from __future__ import annotations

import math
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import click

from client.admin import BROKER_FAILURES, Admin
from client.admin_ops import TOOLS_CONSUMER_GROUP
from client.errors import FAQ_HINT, MQClientError, TopicRouteNotFoundError
from client.message import Message, MessageExt, uniq_msg_id
from client.message_track import TrackTypeNullError, message_track_detail
from client.mqadmin_cluster import send_result_text
from client.mqadmin_support import (
    JAVA_INT,
    JAVA_LONG,
    Output,
    broker_may_fail,
    common,
    format_ts,
    java_bool,
    java_hash_set,
    java_properties_text,
    java_subscribe_queues,
    java_text,
    message_text,
    parse_time_arg,
    run_job,
)
from client.producer import Producer
from remoting.codec.bodies import MessageQueue
from remoting.codec.codes import RequestCode
from remoting.codec.java_format import java_fixed
from remoting.codec.msgid import nearly_time_from_id

__all__ = ["COMMANDS", "print_message_detail"]

BODY_DIR = Path("/tmp/rocketmq/msgbodys")

#: MQAdminImpl.queryMessage's MQClientException (NO_MESSAGE) when no broker has a match, failing queryMsgByKey and
#: queryMsgByUniqueKey (client/src/main/java/org/apache/rocketmq/client/impl/MQAdminImpl.java).
NO_MESSAGE = "query message by key finished, but no message."


def direct_result_text(result: dict[str, object]) -> str:
    """Java's ``ConsumeMessageDirectlyResult.toString()``."""
    keys = ("order", "autoCommit", "consumeResult", "remark", "spentTimeMills")
    return "ConsumeMessageDirectlyResult [" + ", ".join(f"{k}={java_text(result.get(k))}" for k in keys) + "]"


async def print_message_detail(
    admin: Admin, out: Output, msg: MessageExt, index: int = 0, offset_id: bool = True
) -> None:
    """Java's ``QueryMsgByIdSubCommand.printMsg`` (``offset_id`` adds the OffsetID line) then the tracks."""
    BODY_DIR.mkdir(parents=True, exist_ok=True)
    name = uniq_msg_id(msg) + (f"_{index}" if index else "")
    body_path = BODY_DIR / name
    body_path.write_bytes(msg.body)
    s, d = "%-20s %s%n", "%-20s %d%n"
    if offset_id:
        out.line(s, "OffsetID:", msg.msg_id)
    out.line(s, "Topic:", msg.topic)
    out.line(s, "Tags:", f"[{java_text(msg.tags)}]")
    out.line(s, "Keys:", f"[{java_text(msg.properties.get('KEYS'))}]")
    out.line(d, "Queue ID:", msg.queue_id)
    out.line(d, "Queue Offset:", msg.queue_offset)
    out.line(d, "CommitLog Offset:", msg.commit_log_offset)
    out.line(d, "Reconsume Times:", msg.reconsume_times)
    out.line(s, "Born Timestamp:", format_ts(msg.born_timestamp))
    out.line(s, "Store Timestamp:", format_ts(msg.store_timestamp))
    out.line(s, "Born Host:", f"{msg.born_host[0]}:{msg.born_host[1]}")
    out.line(s, "Store Host:", f"{msg.store_host[0]}:{msg.store_host[1]}")
    out.line(d, "System Flag:", msg.sys_flag)
    out.line(s, "Properties:", java_properties_text(msg.properties))
    out.line(s, "Message Body Path:", str(body_path))
    out.doc.setdefault("messages", []).append(
        {
            "OffsetID": msg.msg_id,
            "MsgId": uniq_msg_id(msg),
            "Topic": msg.topic,
            "Tags": msg.tags,
            "Keys": msg.keys,
            "QueueId": msg.queue_id,
            "QueueOffset": msg.queue_offset,
            "Properties": msg.properties,
            "Body": msg.body.decode("utf-8", "replace"),
            "BodyPath": str(body_path),
        }
    )
    try:
        tracks = await message_track_detail(admin, msg)
    except TrackTypeNullError as exc:  # Java's stack trace starts with the exception's class
        click.echo(str(exc), err=True)
        return
    except BROKER_FAILURES as exc:  # Java prints the stack trace; the message detail above stands
        click.echo(f"message track failed: {exc}", err=True)
        return
    if not tracks:
        out.line("%n%nWARN: No Consumer")
        return
    out.line("%n%n")
    for track in tracks:
        out.line("%s", str(track))


@click.command("queryMsgById", help="Query Message by Id")
@common
@click.option("-i", "--msgId", "msg_id", required=True, help="Message Id")
@click.option("-g", "--consumerGroup", "group", help="consumer group name")
@click.option("-d", "--clientId", "client_id", help="The consumer's client id")
@click.option("-s", "--sendMessage", "resend", help="resend message")
@click.option("-u", "--unitName", "unit", help="unit name")
def query_msg_by_id(ctx: click.Context, **o: Any) -> None:
    ids = [i.strip() for i in o["msg_id"].split(",") if i.strip()]

    async def job(admin: Admin, out: Output) -> None:
        # Java's pushMsg and sendMsg catch each id's failure (printStackTrace) and go on to the next id
        # (tools/src/main/java/org/apache/rocketmq/tools/command/message/QueryMsgByIdSubCommand.java).
        if o["group"] and o["client_id"]:
            for msg_id in ids:
                with broker_may_fail(msg_id):
                    result = await admin.consume_message_directly(o["group"], o["client_id"], msg_id)
                    out.line("%s", direct_result_text(result))
        elif o["resend"] is not None:
            if java_bool(o["resend"]):
                async with Producer("ReSendMsgById", instance=admin.instance) as producer:
                    for msg_id in ids:
                        with broker_may_fail(msg_id):
                            msg = await admin.query_msg_by_id(msg_id)
                            out.line("prepare resend msg. originalMsgId=%s", msg_id)
                            again = Message(msg.topic, msg.body, properties=dict(msg.properties), flag=msg.flag)
                            out.line("%s", send_result_text(await producer.send(again)))
        else:
            for msg_id in ids:
                await print_message_detail(admin, out, await admin.query_msg_by_id(msg_id))

    run_job(ctx, job)


@click.command("queryMsgByKey", help="Query Message by Key")
@common
@click.option("-t", "--topic", required=True, help="topic name")
@click.option("-k", "--msgKey", "key", required=True, help="Message Key")
def query_msg_by_key(ctx: click.Context, **o: Any) -> None:
    async def job(admin: Admin, out: Output) -> None:
        msgs = await admin.query_msg_by_key(o["topic"], o["key"], max_num=64)
        if not msgs:
            raise MQClientError(NO_MESSAGE)
        out.header("%-50s %4s %40s%n", "#Message ID", "#QID", "#Offset")
        for m in msgs:
            out.row("%-50s %4d %40d%n", uniq_msg_id(m), m.queue_id, m.queue_offset)

    run_job(ctx, job)


@click.command("queryMsgByUniqueKey", help="Query Message by Unique key")
@common
@click.option("-i", "--msgId", "msg_id", required=True, help="Message Id")
@click.option("-g", "--consumerGroup", "group", help="consumer group name")
@click.option("-d", "--clientId", "client_id", help="The consumer's client id")
@click.option("-t", "--topic", required=True, help="The topic of msg")
@click.option("-a", "--showAll", "show_all", is_flag=True, help="Print all message, the limit is 32")
def query_msg_by_unique_key(ctx: click.Context, **o: Any) -> None:
    async def job(admin: Admin, out: Output) -> None:
        topic, msg_id = o["topic"], o["msg_id"]
        if o["group"] and o["client_id"]:
            msg = await _view_message(admin, topic, msg_id)
            result = await admin.consume_message_directly(o["group"], o["client_id"], msg.msg_id)
            out.line("%s", direct_result_text(result))
            return
        msgs = await admin.query_msg_by_unique_key(topic, msg_id)
        if not msgs:
            raise MQClientError(NO_MESSAGE)
        for i, msg in enumerate(msgs if o["show_all"] else msgs[:1]):
            await print_message_detail(admin, out, msg, i, offset_id=False)

    run_job(ctx, job)


async def _view_message(admin: Admin, topic: str, msg_id: str) -> MessageExt:
    """Java's ``DefaultMQAdminExtImpl.viewMessage(topic, msgId)``: an offset msgId is viewed at its broker; any other
    id, or one whose view fails, is queried as a unique key of ``topic`` from a second before the time in it
    (``MQAdminImpl.queryMessageByUniqKey(topic, uniqKey)``; MQClientError NO_MESSAGE when none has it)."""
    try:
        return await admin.query_msg_by_id(msg_id)
    except BROKER_FAILURES:
        pass
    made = nearly_time_from_id(msg_id)
    msgs = await admin.query_msg_by_unique_key(topic, msg_id, begin_ms=0 if made is None else made - 1000)
    if not msgs:
        raise MQClientError(NO_MESSAGE)
    return msgs[0]


@click.command("queryMsgByOffset", help="Query Message by offset")
@common
@click.option("-t", "--topic", required=True, help="topic name")
@click.option("-b", "--brokerName", "broker", required=True, help="Broker Name")
@click.option("-i", "--queueId", "queue_id", type=JAVA_INT, required=True, help="Queue Id")
@click.option("-o", "--offset", type=JAVA_LONG, required=True, help="Queue Offset")
def query_msg_by_offset(ctx: click.Context, **o: Any) -> None:
    async def job(admin: Admin, out: Output) -> None:
        mq = MessageQueue(o["topic"], o["broker"], o["queue_id"])
        result = await admin.pull(mq, o["offset"], 1)
        if result.messages:
            await print_message_detail(admin, out, result.messages[0])

    run_job(ctx, job)


def print_messages(out: Output, mq: MessageQueue, msgs: list[MessageExt], charset: str, body: bool) -> None:
    """Java's ``printMessage``: ``MSGID: <id> <MessageExt> BODY: <body>`` per message pulled from ``mq``. A charset
    Python does not know leaves the message out (said on stderr) and the command goes on, as printMessage catches
    ``new String(body, charsetName)``'s UnsupportedEncodingException per message (tools/src/main/java/org/apache/
    rocketmq/tools/command/message/PrintMessageSubCommand.java, PrintMessageByQueueCommand.java)."""
    for m in msgs:
        try:
            text = m.body.decode(charset, "replace") if body else "NOT PRINT BODY"
        except LookupError:
            click.echo(f"java.io.UnsupportedEncodingException: {charset}", err=True)
            continue
        line = f"MSGID: {uniq_msg_id(m)} {message_text(m, mq.broker_name)} BODY: {text}\n"
        out.entry(line, MSGID=uniq_msg_id(m), QueueId=m.queue_id, QueueOffset=m.queue_offset, Tags=m.tags,
                  Keys=" ".join(m.keys), BODY=text)  # fmt: skip


async def _range(admin: Admin, mq: MessageQueue, begin: str | None, end: str | None) -> tuple[int, int]:
    """A queue's [min, max) offsets, narrowed by ``-b``/``-e`` (or ``-s``/``-e``) times as Java's tools do."""
    master = await _master_of(admin, mq)
    low = await admin.queue_offset(master, mq, RequestCode.GET_MIN_OFFSET)
    high = await admin.queue_offset(master, mq, RequestCode.GET_MAX_OFFSET)
    if begin:
        low = await admin.queue_offset(master, mq, RequestCode.SEARCH_OFFSET_BY_TIMESTAMP, parse_time_arg(begin))
    if end:
        high = await admin.queue_offset(master, mq, RequestCode.SEARCH_OFFSET_BY_TIMESTAMP, parse_time_arg(end))
    return low, high


async def _master_of(admin: Admin, mq: MessageQueue) -> str:
    """The master of ``mq``'s broker in its topic's route (Java's ``MQAdminImpl.minOffset`` /
    ``findBrokerAddressInPublish``); MQClientError "The broker[...] not exist" when the route has none."""
    brokers = (await admin.topic_route(mq.topic)).broker_datas
    master = next((bd.master_addr for bd in brokers if bd.broker_name == mq.broker_name), None)
    if master is None:
        raise MQClientError(f"The broker[{mq.broker_name}] not exist")
    return master


def mq_text(mq: MessageQueue) -> str:
    return f"MessageQueue [topic={mq.topic}, brokerName={mq.broker_name}, queueId={mq.queue_id}]"


async def readable_queues(admin: Admin, topic: str) -> list[MessageQueue]:
    """``fetchSubscribeMessageQueues(topic)`` of printMsg and consumeMessage: the readable queues in Java's
    ``HashSet`` order (:func:`java_subscribe_queues`); none is MQAdminImpl's MQClientException (client/src/main/
    java/org/apache/rocketmq/client/impl/MQAdminImpl.java)."""
    not_found = f"Can not find Message Queue for this topic, {topic}{FAQ_HINT}"
    try:
        route = await admin.topic_route(topic)
    except TopicRouteNotFoundError as exc:  # Java wraps the lookup's failure, its stack trace naming the cause
        raise MQClientError(f"{not_found}\nCaused by: {exc}") from exc
    queues = java_subscribe_queues(topic, route)
    if not queues:  # thrown inside Java's try, so wrapped as the lookup's failures are
        raise MQClientError(
            f"{not_found}\nCaused by: Can not find Message Queue for this topic, {topic} Namesrv return empty"
        )
    return queues


@click.command("printMsg", help="Print Message Detail")
@common
@click.option("-t", "--topic", required=True, help="topic name")
@click.option("-c", "--charsetName", "charset", default="UTF-8", help="CharsetName(eg: UTF-8,GBK)")
@click.option("-s", "--subExpression", "expression", default="*", help="Subscribe Expression(eg: TagA || TagB)")
@click.option("-b", "--beginTimestamp", "begin", help="Begin timestamp[currentTimeMillis|yyyy-MM-dd#HH:mm:ss:SSS]")
@click.option("-e", "--endTimestamp", "end", help="End timestamp[currentTimeMillis|yyyy-MM-dd#HH:mm:ss:SSS]")
@click.option("-d", "--printBody", "body", help="print body")
def print_msg(ctx: click.Context, **o: Any) -> None:
    async def job(admin: Admin, out: Output) -> None:
        for mq in await readable_queues(admin, o["topic"]):
            low, high = await _range(admin, mq, o["begin"], o["end"])
            out.line("minOffset=%s, maxOffset=%s, %s%n", low, high, mq_text(mq))
            offset = low
            while offset < high:
                try:
                    result = await admin.pull(mq, offset, 32, o["expression"])
                except BROKER_FAILURES as exc:  # Java prints the stack trace and goes on with the next queue
                    click.echo(f"mqadmin: {exc}", err=True)
                    break
                offset = result.next_begin_offset
                if result.status.value == "FOUND":
                    print_messages(out, mq, result.messages, o["charset"], java_bool(o["body"], True))
                elif result.status.value == "NO_MATCHED_MSG":
                    out.line("%s no matched msg. status=%s, offset=%s%n", mq_text(mq), result.status.value, offset)
                else:
                    out.line("%s print msg finished. status=%s, offset=%s%n", mq_text(mq), result.status.value, offset)
                    break
            out.line("--------------------------------------------------------\n")

    run_job(ctx, job)


@click.command("printMsgByQueue", help="Print Message Detail")
@common
@click.option("-t", "--topic", required=True, help="topic name")
@click.option("-a", "--brokerName", "broker", required=True, help="broker name")
@click.option("-i", "--queueId", "queue_id", type=JAVA_INT, required=True, help="queue id")
@click.option("-c", "--charsetName", "charset", default="UTF-8", help="CharsetName(eg: UTF-8,GBK)")
@click.option("-s", "--subExpression", "expression", default="*", help="Subscribe Expression(eg: TagA || TagB)")
@click.option("-b", "--beginTimestamp", "begin", help="Begin timestamp[currentTimeMillis|yyyy-MM-dd#HH:mm:ss:SSS]")
@click.option("-e", "--endTimestamp", "end", help="End timestamp[currentTimeMillis|yyyy-MM-dd#HH:mm:ss:SSS]")
@click.option("-p", "--printMsg", "print_msgs", help="print msg. eg: true | false(default)")
@click.option("-d", "--printBody", "body", help="print body. eg: true | false(default)")
@click.option("-f", "--calculate", help="calculate by tag. eg: true | false(default)")
def print_msg_by_queue(ctx: click.Context, **o: Any) -> None:
    async def job(admin: Admin, out: Output) -> None:
        mq = MessageQueue(o["topic"], o["broker"], o["queue_id"])
        low, high = await _range(admin, mq, o["begin"], o["end"])
        counts: dict[str, int] = {}
        offset = low
        while offset < high:
            try:
                result = await admin.pull(mq, offset, 32, o["expression"])
            except BROKER_FAILURES as exc:
                # PrintMessageByQueueCommand (tools/src/main/java/org/apache/rocketmq/tools/command/message/) prints
                # the stack trace, leaves the loop and still prints the counts by tag: the command does not fail.
                click.echo(f"mqadmin: {exc}", err=True)
                break
            offset = result.next_begin_offset
            if result.status.value != "FOUND":
                break
            for m in result.messages:
                if m.tags and m.tags.strip():
                    counts[m.tags] = counts.get(m.tags, 0) + 1
            if java_bool(o["print_msgs"]):
                print_messages(out, mq, result.messages, o["charset"], java_bool(o["body"]))
        if java_bool(o["calculate"]):
            # printCalculateByTag: a stable sort by count of the HashMap of counts, ties in its order.
            for tag in sorted(java_hash_set(list(counts)), key=lambda t: -counts[t]):
                out.entry(f"Tag: {tag:<30} Count: {counts[tag]}\n", Tag=tag, Count=counts[tag])

    run_job(ctx, job)


@click.command("sendMessage", help="Send a message")
@common
@click.option("-t", "--topic", required=True, help="Topic name")
@click.option("-p", "--body", required=True, help="UTF-8 string format of the message body")
@click.option("-k", "--key", "keys", help="Message keys")
@click.option("-c", "--tags", help="Message tags")
@click.option("-b", "--broker", help="Send message to target broker")
@click.option("-i", "--qid", help="Send message to target queue")
@click.option("-m", "--msgTraceEnable", "trace", help="Message Trace Enable, Default: false")
def send_message(ctx: click.Context, **o: Any) -> None:
    # Java checks -b before it parses -i with Integer.parseInt (tools/src/main/java/org/apache/rocketmq/tools/
    # command/message/SendMessageCommand.java): without -b, -i is never read.
    if o["qid"] is not None and not o["broker"]:
        click.echo("Broker name must be set if the queue is chosen!", nl=False)
        return
    if o["qid"] is not None:
        param = next(p for p in ctx.command.params if p.name == "qid")
        o["qid"] = JAVA_INT.convert(o["qid"], param, ctx)

    async def job(admin: Admin, out: Output) -> None:
        topic = o["topic"]
        msg = Message(topic, o["body"].encode(), tags=o["tags"], keys=o["keys"])
        # Java sends to the given queue only when queueId > -1 (tools/src/main/java/org/apache/rocketmq/tools/
        # command/message/SendMessageCommand.java); else the producer chooses, -b unused.
        qid = o["qid"]
        queue = MessageQueue(topic, o["broker"], qid) if o["broker"] and qid is not None and qid > -1 else None
        group = str(int(time.time() * 1000))
        async with Producer(group, instance=admin.instance, enable_msg_trace=java_bool(o["trace"])) as producer:
            r = await producer.send(msg, queue=queue)
        out.header("%-32s  %-4s  %-20s    %s%n", "#Broker Name", "#QID", "#Send Result", "#MsgId")
        out.row("%-32s  %-4s  %-20s    %s%n", r.broker_name, r.queue_id, r.send_status.name, r.msg_id)
        out.field("OffsetMsgId", r.offset_msg_id)
        out.field("QueueOffset", r.queue_offset)

    run_job(ctx, job)


@click.command("consumeMessage", help="Consume message")
@common
@click.option("-t", "--topic", required=True, help="Topic name")
@click.option("-b", "--brokerName", "broker", help="Broker name")
@click.option("-i", "--queueId", "queue_id", type=JAVA_INT, help="Queue Id")
@click.option("-o", "--offset", type=JAVA_LONG, help="Queue offset")
@click.option("-g", "--consumerGroup", "group", help="Consumer group name")
@click.option("-s", "--beginTimestamp", "begin", help="Begin timestamp[currentTimeMillis|yyyy-MM-dd#HH:mm:ss:SSS]")
@click.option("-e", "--endTimestamp", "end", help="End timestamp[currentTimeMillis|yyyy-MM-dd#HH:mm:ss:SSS]")
@click.option("-c", "--MessageNumber", "count", type=JAVA_LONG, default=128, help="Number of message to be consumed")
def consume_message(ctx: click.Context, **o: Any) -> None:
    async def job(admin: Admin, out: Output) -> None:
        problem = _consume_message_problem(o)  # inside the job: a malformed time fails the command, as Java's parse
        if problem:
            out.line("%s", problem)
            return
        # ConsumeMessageCommand sets -g as its pull consumer's group before starting it (TOOLS_CONSUMER otherwise).
        group = o["group"].strip() if o["group"] else TOOLS_CONSUMER_GROUP
        # executeDefault and executeByCondition catch what reading the queues throws (printStackTrace): the command
        # ends normally (tools/src/main/java/org/apache/rocketmq/tools/command/message/ConsumeMessageCommand.java).
        with broker_may_fail(o["topic"]):
            if o["queue_id"] is None:
                await _consume_default(admin, out, o, group)
            else:
                await _consume_by_queue(admin, out, o, group)

    run_job(ctx, job)


def _bound(text: str | None) -> str | None:
    """consumeMessage's ``-s``/``-e``: a time of 0 or less bounds nothing, as Java searches an offset only for
    ``timeValueBegin > 0`` / ``timeValueEnd > 0`` (ConsumeMessageCommand.java)."""
    return text if text and parse_time_arg(text) > 0 else None


async def _consume_default(admin: Admin, out: Output, o: dict[str, Any], group: str) -> None:
    """Java's ``executeDefault``: up to ``-c`` messages over the topic's queues, oldest first in each."""
    left = o["count"]
    for mq in await readable_queues(admin, o["topic"]):
        if left == 0:
            return
        low, high = await _range(admin, mq, _bound(o["begin"]), _bound(o["end"]))
        if high - low > left:
            out.line("The older %d message of the %d queue will be provided\n", left, mq.queue_id)
            high, left = low + left - 1, 0
        else:
            left = left - (high - low) - 1
        await _pull_range(admin, out, mq, low, high, group)


async def _consume_by_queue(admin: Admin, out: Output, o: dict[str, Any], group: str) -> None:
    """Java's ``executeByCondition``: up to ``-c`` messages of one queue from ``-o`` on."""
    mq = MessageQueue(o["topic"], o["broker"], o["queue_id"])
    low, high = await _range(admin, mq, _bound(o["begin"]), _bound(o["end"]))
    start = o["offset"] or 0
    if start > high:
        out.line("%s no matched msg, offset=%s\n", mq_text(mq), start)
        return
    low = max(low, start)
    if high - low > o["count"]:
        out.line("The oldler %d message will be provided\n", o["count"])
        high = low + o["count"] - 1
    await _pull_range(admin, out, mq, low, high, group)


def _consume_message_problem(o: dict[str, Any]) -> str | None:
    """Java's argument checks of ``consumeMessage``, in its order and words; a malformed ``-s``/``-e`` time is a
    ValueError."""
    if o["count"] <= 0:
        return "Please input a positive messageNumber!"
    if o["queue_id"] is not None and not o["broker"]:
        return "Please set the brokerName before queueId!"
    if o["offset"] is not None and o["queue_id"] is None:
        return "Please set queueId before offset!"
    now = int(time.time() * 1000)
    begin = parse_time_arg(o["begin"]) if o["begin"] else 0
    if begin > now:
        return "Please set the beginTimestamp before now!"
    if not o["end"]:
        return None
    end = parse_time_arg(o["end"])
    if end > now:
        return "Please set the endTimestamp before now!"
    if begin > end:
        return "Please make sure that the beginTimestamp is less than or equal to the endTimestamp"
    return None


async def _pull_range(admin: Admin, out: Output, mq: MessageQueue, low: int, high: int, group: str) -> None:
    """Java's ``pullMessageByQueue``: offsets ``low`` to ``high`` inclusive, pulled as ``group`` and printed with
    their bodies; a pull that fails is printed on stderr and ends the queue, not the command
    (tools/src/main/java/org/apache/rocketmq/tools/command/message/ConsumeMessageCommand.java)."""
    offset = low
    while offset <= high:
        try:
            result = await admin.pull(mq, offset, max(1, high - offset + 1), group=group)
        except BROKER_FAILURES as exc:
            click.echo(f"mqadmin: {exc}", err=True)
            return
        offset = result.next_begin_offset
        if result.status.value == "FOUND":
            out.line("Consume ok\n")
            print_messages(out, mq, result.messages, "UTF-8", True)
        elif result.status.value == "NO_MATCHED_MSG":
            out.line("%s no matched msg. status=%s, offset=%s\n", mq_text(mq), result.status.value, offset)
        else:
            out.line("%s print msg finished. status=%s, offset=%s\n", mq_text(mq), result.status.value, offset)
            break


@click.command("checkMsgSendRT", help="check message send response time")
@common
@click.option("-t", "--topic", required=True, help="topic name")
@click.option("-a", "--amount", type=JAVA_LONG, default=100, help="message amount | default 100")
@click.option("-s", "--size", type=JAVA_LONG, default=128, help="message size | default 128 Byte")
def check_msg_send_rt(ctx: click.Context, **o: Any) -> None:
    async def job(admin: Admin, out: Output) -> None:
        topic, amount = o["topic"], o["amount"]
        out.header("%-32s  %-4s  %-20s    %s%n", "#Broker Name", "#QID", "#Send Result", "#RT")
        total = 0
        # Java's fields the selector sets (tools/src/main/java/org/apache/rocketmq/tools/command/message/
        # CheckMsgSendRTCommand.java): "" and 0 until a queue is chosen, a failed send printing the last chosen.
        chosen = ("", 0)

        def pick(mqs: Sequence[MessageQueue], msg: Message, arg: object) -> MessageQueue:
            nonlocal chosen
            mq = mqs[int(str(arg)) % len(mqs)]  # Java's selector: the i-th send to queue i mod n
            chosen = (mq.broker_name, mq.queue_id)
            return mq

        async with Producer(str(int(time.time() * 1000)), instance=admin.instance) as producer:
            for i in range(amount):
                start = time.monotonic()
                try:
                    await producer.send(Message(topic, b"a" * o["size"]), selector=pick, arg=i)
                    ok = True
                except Exception:
                    ok = False
                rt = int((time.monotonic() - start) * 1000)
                total += rt if i else 0
                out.row("%-32s  %-4s  %-20s    %s%n", *chosen, ok, rt)
        # Java's double division: one send is 0.0 / 0, printed NaN by String.format("%.2f").
        out.line("Avg RT: %s%n", java_fixed(total / (amount - 1) if amount != 1 else math.nan, 2))

    run_job(ctx, job)


#: The commands :mod:`client.mqadmin` registers.
COMMANDS = (
    query_msg_by_id,
    query_msg_by_key,
    query_msg_by_unique_key,
    query_msg_by_offset,
    print_msg,
    print_msg_by_queue,
    send_message,
    consume_message,
    check_msg_send_rt,
)
