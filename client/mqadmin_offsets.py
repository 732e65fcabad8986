"""``mqadmin`` offset commands, as RocketMQ 4.9.8's ``tools/.../command/offset/`` and ``queue/``:
``resetOffsetByTime``, ``skipAccumulatedMessage``, ``cloneGroupOffset`` and ``queryCq``. Options, required options and
printed lines are Java's; :mod:`client.mqadmin` registers them.

``resetOffsetByTime`` and ``skipAccumulatedMessage`` ask the brokers to reset the online consumers
(INVOKE_BROKER_TO_RESET_OFFSET); for a group with no consumer online (CONSUMER_NOT_ONLINE) they fall back to Java's
"old" way (:func:`client.offset_reset.reset_offline`): each queue's offset at the time (SEARCH_OFFSET_BY_TIMESTAMP, or
GET_MAX_OFFSET for ``now``/skip) written with UPDATE_CONSUMER_OFFSET, kept at the committed offset unless ``-f``
(default true) or it moves back. ``resetOffsetByTime -b -q [-o]`` (RocketMQ 5.3.3's options) resets one queue of one
broker instead, which the broker holds for the group's next pull or pop.
``cloneGroupOffset`` writes the source group's committed offsets of the topic to the destination group with
UPDATE_CONSUMER_OFFSET, as Java's tool does (Java's also copies other topics on the same brokers; here only ``-t``);
a source group without any offsets fails the command, as Java's.
"""

from __future__ import annotations

import time
from typing import Any

import click

from client.admin import Admin
from client.errors import MQBrokerError, MQClientError
from client.mqadmin_support import (
    JAVA_INT,
    JAVA_LONG,
    NO_CONSUME_STATS,
    JavaSet,
    Output,
    common,
    fastjson_pretty,
    java_bool,
    java_hash_set,
    java_put_all_order,
    java_text,
    parse_time_arg,
    run_job,
)
from client.offset_reset import Rollback, reset_offline
from client.route import master_address
from remoting.codec.bodies import MessageQueue
from remoting.codec.codes import RequestCode, ResponseCode
from remoting.codec.java_hash_order import java_hash_map_order

__all__ = ["COMMANDS"]

_RESET = "%-40s  %-40s  %-40s%n"
_RESET_ROW = "%-40.32s  %-40d  %-40d%n"
_OLD = "%-20s  %-20s  %-20s  %-20s  %-20s  %-20s%n"
_OLD_ROW = "%-20.32s  %-20d  %-20d  %-20d  %-20d  %-20d%n"


def _print_old(out: Output, stats: list[Rollback]) -> None:
    out.header(
        _OLD, "#brokerName", "#queueId", "#brokerOffset", "#consumerOffset", "#timestampOffset", "#rollbackOffset"
    )
    for s in stats:
        out.row(_OLD_ROW, s.mq.broker_name, s.mq.queue_id, s.broker_offset, s.consumer_offset, s.timestamp_offset,
                s.rollback_offset)  # fmt: skip


def _print_reset(out: Output, answers: list[dict[MessageQueue, int]]) -> None:
    """The brokers' answers as ResetOffsetByTimeCommand and SkipAccumulationSubCommand print them: the entries of
    the HashMap DefaultMQAdminExtImpl.resetOffsetByTimestamp ``putAll``s them into, in its order
    (:func:`java_put_all_order`; tools/src/main/java/org/apache/rocketmq/tools/command/offset/
    ResetOffsetByTimeCommand.java)."""
    table = {mq: offset for answer in answers for mq, offset in answer.items()}
    out.header(_RESET, "#brokerName", "#queueId", "#offset")
    for mq in java_put_all_order([list(answer) for answer in answers]):
        out.row(_RESET_ROW, mq.broker_name, mq.queue_id, table[mq])


@click.command("resetOffsetByTime", help="Reset consumer offset by timestamp(without client restart).")
@common
@click.option("-g", "--group", required=True, help="set the consumer group")
@click.option("-t", "--topic", required=True, help="set the topic")
@click.option(
    "-s", "--timestamp", required=True, help="set the timestamp[now|currentTimeMillis|yyyy-MM-dd#HH:mm:ss:SSS]"
)
@click.option("-f", "--force", help="set the force rollback by timestamp switch[true|false]")
@click.option("-c", "--cplus", is_flag=True, help="reset c++ client offset")
@click.option("-b", "--broker", help="broker addr")
@click.option("-q", "--queue", "queue_id", type=JAVA_INT, help="queue id")
@click.option("-o", "--offset", type=JAVA_LONG, help="Expect queue offset, not support old version broker")
def reset_offset_by_time(ctx: click.Context, **o: Any) -> None:
    text = o["timestamp"]
    force = java_bool(o["force"], True)

    async def job(admin: Admin, out: Output) -> None:
        timestamp = -1 if text == "now" else parse_time_arg(text)  # in the job: a bad time fails the command
        group, topic = o["group"], o["topic"]
        if o["broker"] is not None and o["queue_id"] is not None and o["queue_id"] >= 0:
            await _reset_one_queue(admin, out, o, text, timestamp)
            return
        try:
            table = await admin.reset_offset_by_time_per_broker(group, topic, timestamp, force=force, cpp=o["cplus"])
        except MQBrokerError as exc:
            if exc.code != ResponseCode.CONSUMER_NOT_ONLINE:
                raise
            stats = await reset_offline(admin, group, topic, timestamp, force)
            out.line("rollback consumer offset by specified consumerGroup[%s], topic[%s], force[%s], "
                     "timestamp(string)[%s], timestamp(long)[%s]%n", group, topic, force, text, timestamp)  # fmt: skip
            _print_old(out, stats)
            return
        out.line("rollback consumer offset by specified group[%s], topic[%s], force[%s], timestamp(string)[%s], "
                 "timestamp(long)[%s]%n", group, topic, force, text, timestamp)  # fmt: skip
        _print_reset(out, table)

    run_job(ctx, job)


async def _reset_one_queue(admin: Admin, out: Output, o: dict[str, Any], text: str, timestamp: int) -> None:
    """RocketMQ 5.3.3's ``resetOffsetByTime -b -q [-o]``: the queue's offset at the time (``now``: the current time
    in ms, printed as such) unless ``-o`` gives it, committed and reset on that broker
    (:meth:`Admin.reset_offset_by_queue_id`); 5.3.3 skips the reset when the offset is 0 (ours resets to 0 too)."""
    broker, queue_id = o["broker"], o["queue_id"]
    when = int(time.time() * 1000) if text == "now" else timestamp
    out.line("start reset consumer offset by specified, group[%s], topic[%s], queueId[%s], broker[%s], "
             "timestamp(string)[%s], timestamp(long)[%s]%n", o["group"], o["topic"], queue_id, broker, text,
             when)  # fmt: skip
    offset = o["offset"]
    if offset is None:
        mq = MessageQueue(o["topic"], "", queue_id)
        offset = await admin.queue_offset(broker, mq, RequestCode.SEARCH_OFFSET_BY_TIMESTAMP, when)
    out.line("reset consumer offset to %d%n", offset)
    if offset >= 0:
        await admin.reset_offset_by_queue_id(broker, o["group"], o["topic"], queue_id, offset)


@click.command("skipAccumulatedMessage", help="Skip all messages that are accumulated (not consumed) currently")
@common
@click.option("-g", "--group", required=True, help="set the consumer group")
@click.option("-t", "--topic", required=True, help="set the topic")
@click.option("-f", "--force", help="set the force rollback by timestamp switch[true|false]")
def skip_accumulated_message(ctx: click.Context, **o: Any) -> None:
    force = java_bool(o["force"], True)

    async def job(admin: Admin, out: Output) -> None:
        group, topic = o["group"], o["topic"]
        try:
            table = await admin.reset_offset_by_time_per_broker(group, topic, -1, force=force)
        except MQBrokerError as exc:
            if exc.code != ResponseCode.CONSUMER_NOT_ONLINE:
                raise
            _print_old(out, await reset_offline(admin, group, topic, -1, force))
            return
        _print_reset(out, table)

    run_job(ctx, job)


@click.command("cloneGroupOffset", help="clone offset from other group.")
@common
@click.option("-s", "--srcGroup", "src", required=True, help="set source consumer group")
@click.option("-d", "--destGroup", "dest", required=True, help="set destination consumer group")
@click.option("-t", "--topic", required=True, help="set the topic")
@click.option("-o", "--offline", help="the group or the topic is offline")
def clone_group_offset(ctx: click.Context, **o: Any) -> None:
    async def job(admin: Admin, out: Output) -> None:
        src, dest, topic = o["src"], o["dest"], o["topic"]
        # Java reads the source with examineConsumeStats(srcGroup), which fails on a group without offsets
        # (tools/src/main/java/org/apache/rocketmq/tools/command/offset/CloneGroupOffsetCommand.java).
        stats = (await admin.consume_stats(src)).offset_table
        if not stats:
            raise MQClientError(NO_CONSUME_STATS)
        progress = {mq: w for mq, w in stats.items() if mq.topic == topic}
        if progress:
            route = await admin.topic_route(topic)
            for mq, w in sorted(progress.items()):
                addr = master_address(route, mq.broker_name)
                if addr is not None and w.consumer_offset >= 0:
                    await admin.update_consumer_offset(addr, dest, mq, w.consumer_offset)
        out.line("clone group offset success. srcGroup[%s], destGroup=[%s], topic[%s]", src, dest, topic)

    run_job(ctx, job)


@click.command("queryCq", help="Query cq command.")
@common
@click.option("-t", "--topic", required=True, help="topic name")
@click.option("-q", "--queue", "queue_id", type=JAVA_INT, required=True, help="queue num, ie. 1")
@click.option("-i", "--index", type=JAVA_LONG, required=True, help="start queue index.")
@click.option("-c", "--count", type=JAVA_INT, default=10, help="how many.")
@click.option("-b", "--broker", help="broker addr.")
@click.option("-g", "--consumer", help="consumer group.")
def query_cq(ctx: click.Context, **o: Any) -> None:
    async def job(admin: Admin, out: Output) -> None:
        topic = o["topic"]
        broker = o["broker"] or ""
        if not broker:
            route = await admin.topic_route(topic)
            if not route.broker_datas:
                raise ValueError("No topic route data!")
            broker = route.broker_datas[0].broker_addrs.get(0, "")
        body = await admin.query_consume_queue(broker, topic, o["queue_id"], o["index"], o["count"], o["consumer"])
        if body.subscription_data is not None:
            # Java: JSON.toJSONString(subscriptionData, true), the sets in their HashSet order
            # (tools/src/main/java/org/apache/rocketmq/tools/command/queue/QueryConsumeQueueCommand.java).
            sub = body.subscription_data
            codes = list(dict.fromkeys(sub.code_set))
            fields = {**sub.to_json(), "tagsSet": JavaSet(java_hash_set(sub.tags_set)),
                      "codeSet": JavaSet(codes[i] for i in java_hash_map_order(codes))}  # fmt: skip
            text = fastjson_pretty(fields)
            out.line("Subscription data: \n%s\n", text)
            out.line("======================================\n")
        if body.filter_data is not None:
            out.line("Filter data: \n%s\n", body.filter_data)
            out.line("======================================\n")
        out.line("Queue data: \nmax: %d, min: %d\n", body.max_queue_index, body.min_queue_index)
        out.line("======================================\n")
        for i, q in enumerate(body.queue_data or (), o["index"]):
            # ConsumeQueueData.toString() concatenates the fields, an absent one as Java's null
            # (common/src/main/java/org/apache/rocketmq/common/protocol/body/ConsumeQueueData.java).
            ext, bit_map, msg = (java_text(v) for v in (q.extend_data_json, q.bit_map, q.msg))
            text = (f"ConsumeQueueData{{physicOffset={q.physic_offset}, physicSize={q.physic_size}, "
                    f"tagsCode={q.tags_code}, extendDataJson='{ext}', bitMap='{bit_map}', "
                    f"eval={java_text(q.eval)}, msg='{msg}'}}")  # fmt: skip
            out.entry(f"idx: {i}\n{text}\n======================================\n", idx=i, **q.to_json())

    run_job(ctx, job)


#: The commands :mod:`client.mqadmin` registers.
COMMANDS = (reset_offset_by_time, skip_accumulated_message, clone_group_offset, query_cq)
