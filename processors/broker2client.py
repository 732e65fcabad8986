"""Broker-to-client calls that admin requests trigger (RocketMQ's ``Broker2Client``): offset resets pushed to
consumers, and admin requests forwarded to one consumer (GET_CONSUMER_RUNNING_INFO 307, CONSUME_MESSAGE_DIRECTLY 309).

They run over the connection the client opened (a server-side :class:`~remoting.connection.Connection` invokes the
client like any peer). Each function takes the admin request and returns the response for the admin tool; client
failures become error responses, never exceptions: an offline client is SYSTEM_ERROR with Java's remark, a client
that does not answer in time (or stopped reading its socket) CONSUME_MSG_TIMEOUT (AdminBrokerProcessor.callConsumer).
CONSUME_MESSAGE_DIRECTLY is forwarded with the broker's ``brokerName`` added, as Java adds it.
"""

from __future__ import annotations

import logging
from typing import Final

import orjson

from processors.client_channels import ConsumerGroupInfo
from processors.context import BrokerContext
from remoting.codec.bodies import MessageQueue
from remoting.codec.bodies.admin import dumps_mq_map
from remoting.codec.codes import LanguageCode, RequestCode, ResponseCode
from remoting.codec.command import RemotingCommand, request
from remoting.codec.errors import MessageDecodeError
from remoting.codec.headers import (
    ConsumeMessageDirectlyResultRequestHeader,
    GetConsumerRunningInfoRequestHeader,
    ResetOffsetRequestHeader,
)
from remoting.codec.msgid import decode_offset_msg_id
from remoting.errors import RemotingError, RemotingTimeoutError

log = logging.getLogger(__name__)

#: How long a forwarded admin request may take on the client: Broker2Client.callClient's ``invokeSync(channel,
#: request, 10000)``. Admin tools wait longer (Java's DefaultMQAdminExtImpl 3 x 5 s), so this answer reaches them.
FORWARD_TIMEOUT: Final = 10.0


def reset_offset_table(broker: BrokerContext, header: ResetOffsetRequestHeader) -> dict[MessageQueue, int] | str:
    """Java's reset rule per write queue: the offset at ``timestamp`` (-1: the max offset), kept at the committed
    offset unless ``isForce`` or the target is smaller. Returns the table, or the error remark."""
    topic, group = header.topic, header.group
    config = broker.topics.get(topic)
    if config is None:
        return f"[reset-offset] reset offset failed, no topic in this broker. topic={topic}"
    table: dict[MessageQueue, int] = {}
    for queue_id in range(config.write_queue_nums):
        committed = broker.offsets.query(group, topic, queue_id)
        if committed == -1:
            return f"THe consumer group <{group}> not exist"
        if header.timestamp == -1:
            target = broker.store.max_offset_in_queue(topic, queue_id)
        else:
            target = max(0, broker.store.offset_in_queue_by_time(topic, queue_id, header.timestamp))
        mq = MessageQueue(topic, broker.config.broker_name, queue_id)
        table[mq] = target if header.is_force or target < committed else committed
    return table


def server_side_reset(
    broker: BrokerContext, header: ResetOffsetRequestHeader
) -> dict[MessageQueue, int] | tuple[ResponseCode, str]:
    """RocketMQ 5.3.3's reset on the broker (``AdminBrokerProcessor.resetOffsetInner``): the queue
    ``header.queue_id`` names (>= 0) at its ``offset`` when given (within the queue's min and max + 1), else every
    read queue; a queue without an offset goes to the first message stored at ``timestamp`` (negative: the max
    offset). Each is committed and, with ``useServerSideResetOffset``, kept for the group's next pull or pop of it
    (``assignResetOffset``); without it (ours: a one-queue request) nothing is held, as Java builds no pending reset
    then. Returns the table, or the error code and remark."""
    topic, group = header.topic, header.group
    if broker.config.broker_role == "SLAVE":
        return ResponseCode.SYSTEM_ERROR, "Can not reset offset in slave broker"
    config = broker.topics.get(topic)
    if config is None:
        return ResponseCode.TOPIC_NOT_EXIST, f"Topic {topic} does not exist"
    if broker.groups.get(group) is None:
        return ResponseCode.SUBSCRIPTION_GROUP_NOT_EXIST, f"Group {group} does not exist"
    one_queue = header.queue_id is not None and header.queue_id >= 0
    offsets = _one_queue_target(broker, header) if one_queue else _targets(broker, header, config.read_queue_nums)
    if isinstance(offsets, tuple):
        return offsets
    if not offsets:
        return ResponseCode.SYSTEM_ERROR, "No queues to reset."
    hold = broker.offsets.assign_reset if broker.config.use_server_side_reset_offset else broker.offsets.commit
    for queue_id, offset in offsets.items():
        hold(group, topic, queue_id, offset)
        broker.stats.pop_inflight.clear(topic, group, queue_id)  # 5.3.3's AdminBrokerProcessor resetOffsetInner
    return {MessageQueue(topic, broker.config.broker_name, queue_id): offset for queue_id, offset in offsets.items()}


def _one_queue_target(
    broker: BrokerContext, header: ResetOffsetRequestHeader
) -> dict[int, int] | tuple[ResponseCode, str]:
    """``{queueId: offset}`` for the queue the header names: its ``offset`` if given and within the queue's range,
    else the one at ``timestamp``; or the error."""
    topic, queue_id, offset = header.topic, header.queue_id or 0, header.offset
    if offset is None or offset == -1:
        return _targets(broker, header, 0, [queue_id])
    low, high = broker.store.min_offset_in_queue(topic, queue_id), broker.store.max_offset_in_queue(topic, queue_id)
    if (low >= 0 and offset < low) or offset > high + 1:
        return ResponseCode.SYSTEM_ERROR, f"Target offset {offset} not in consume queue range [{low}-{high}]"
    return {queue_id: offset}


def _targets(
    broker: BrokerContext, header: ResetOffsetRequestHeader, queue_nums: int, queue_ids: list[int] | None = None
) -> dict[int, int]:
    """``{queueId: offset}`` at ``header.timestamp`` (negative: the max offset) for ``queue_ids``, by default the
    first ``queue_nums`` queues (``searchOffsetByTimestamp``)."""
    store, topic, timestamp = broker.store, header.topic, header.timestamp
    return {
        queue_id: store.max_offset_in_queue(topic, queue_id)
        if timestamp < 0
        else store.offset_in_queue_by_time(topic, queue_id, timestamp, "LOWER")
        for queue_id in (range(queue_nums) if queue_ids is None else queue_ids)
    }


async def reset_offset(broker: BrokerContext, admin: RemotingCommand) -> RemotingCommand:
    """INVOKE_BROKER_TO_RESET_OFFSET. With ``useServerSideResetOffset`` (RocketMQ 5.3.3's default) the broker resets
    the queues itself (:func:`server_side_reset`), online consumers or not, and tells none of them: each consumer's
    next pull of a queue is answered PULL_OFFSET_MOVED to the reset offset, its next pop reads from there, and its
    commits of the queue are ignored until then (``AdminBrokerProcessor.resetOffset``).

    Otherwise RocketMQ 4.9.8's way: compute the table and push RESET_CONSUMER_CLIENT_OFFSET (220, oneway, body
    ``{"offsetTable": {MessageQueue: offset}}``) to every online consumer of the group, which apply and commit it.
    An admin request sent as ``LanguageCode.CPP`` (``mqadmin resetOffsetByTime -c``) pushes the C++ client's form
    instead, ``{"offsetTable": [MessageQueueForC]}`` (``AdminBrokerProcessor.resetOffset`` and
    ``broker/src/main/java/org/apache/rocketmq/broker/client/net/Broker2Client.java``); the admin's answer is the map
    either way. A request naming one queue (RocketMQ 5's ``queueId`` >= 0) is committed on the broker all the same,
    held for no pull (ours: 5.3.3 then resets every queue the 4.9.8 way), and the online consumers are told of it.

    The push is queued without waiting, behind whatever a member has not read yet, as Java's ``invokeOneway`` writes
    without blocking (its 5 s bounds only the oneway permit): a consumer that stopped reading gets it if it resumes
    and never holds up the answer."""
    header = ResetOffsetRequestHeader.from_ext_fields(admin.ext_fields)
    server_side = broker.config.use_server_side_reset_offset
    one_queue = header.queue_id is not None and header.queue_id >= 0
    table = server_side_reset(broker, header) if server_side or one_queue else reset_offset_table(broker, header)
    if isinstance(table, str):
        return admin.response(ResponseCode.SYSTEM_ERROR, table)
    if isinstance(table, tuple):
        return admin.response(*table)
    body = b'{"offsetTable":' + dumps_mq_map(table) + b"}"
    if server_side:
        log.info("reset offset of %s@%s on the broker: %s", header.topic, header.group, body)
        return admin.response(ResponseCode.SUCCESS, body=body)
    group_info = broker.clients.consumer_group(header.group)
    if not one_queue and (group_info is None or not group_info.channels):
        remark = (
            f"Consumer not online, so can not reset offset, Group: {header.group} Topic: {header.topic}"
            f" Timestamp: {header.timestamp}"
        )
        return admin.response(ResponseCode.CONSUMER_NOT_ONLINE, remark)
    pushed = _offset_list_for_c(table) if admin.language == LanguageCode.CPP else body
    fields = ResetOffsetRequestHeader(header.topic, header.group, header.timestamp, header.is_force).to_ext_fields()
    _push_to_all(group_info, request(RequestCode.RESET_CONSUMER_CLIENT_OFFSET, fields, pushed, oneway=True))
    return admin.response(ResponseCode.SUCCESS, body=body)


def _push_to_all(group_info: ConsumerGroupInfo | None, push: RemotingCommand) -> None:
    """Queue the oneway ``push`` to every online member of the group (none when ``group_info`` is ``None``)."""
    for conn in list(group_info.channels) if group_info is not None else []:
        try:
            conn.send_nowait(push)
        except RemotingError as exc:
            log.warning("reset offset push to %s failed: %s", conn, exc)


def _offset_list_for_c(table: dict[MessageQueue, int]) -> bytes:
    """Java's ``ResetOffsetBodyForC``: the offsets as a list of ``MessageQueueForC`` (fields in fastjson's order)."""
    entries = [
        {"brokerName": mq.broker_name, "offset": offset, "queueId": mq.queue_id, "topic": mq.topic}
        for mq, offset in table.items()
    ]
    return orjson.dumps({"offsetTable": entries})


async def forward_to_consumer(
    broker: BrokerContext, admin: RemotingCommand, group: str, client_id: str, body: bytes | memoryview
) -> RemotingCommand:
    """Send ``admin``'s code, fields and ``body`` to the consumer ``client_id`` of ``group`` and relay its answer."""
    channel = broker.clients.find_consumer_channel(group, client_id)
    if channel is None or channel.connection.closed:
        return admin.response(ResponseCode.SYSTEM_ERROR, f"The Consumer <{group}> <{client_id}> not online")
    fields = dict(admin.ext_fields)
    if admin.code == RequestCode.CONSUME_MESSAGE_DIRECTLY:  # the client builds its listener's queue from it
        fields["brokerName"] = broker.config.broker_name
    forwarded = request(admin.code, fields, body)
    try:
        answer = await channel.connection.invoke(forwarded, FORWARD_TIMEOUT)
    except RemotingTimeoutError as exc:
        return admin.response(ResponseCode.CONSUME_MSG_TIMEOUT, f"consumer <{group}> <{client_id}> Timeout: {exc}")
    except RemotingError as exc:
        return admin.response(ResponseCode.SYSTEM_ERROR, f"invoke consumer <{group}> <{client_id}> Exception: {exc}")
    return admin.response(answer.code, answer.remark, dict(answer.ext_fields), answer.body)


async def consumer_running_info(broker: BrokerContext, admin: RemotingCommand) -> RemotingCommand:
    """GET_CONSUMER_RUNNING_INFO (307): the client's own ConsumerRunningInfo, relayed as is."""
    header = GetConsumerRunningInfoRequestHeader.from_ext_fields(admin.ext_fields)
    return await forward_to_consumer(broker, admin, header.consumer_group, header.client_id, b"")


async def consume_message_directly(broker: BrokerContext, admin: RemotingCommand) -> RemotingCommand:
    """CONSUME_MESSAGE_DIRECTLY (309): the stored record of ``msgId`` is attached as the body for the client."""
    header = ConsumeMessageDirectlyResultRequestHeader.from_ext_fields(admin.ext_fields)
    if not header.msg_id or not header.client_id:
        return admin.response(ResponseCode.SYSTEM_ERROR, "msgId and clientId are required")
    try:
        offset = decode_offset_msg_id(header.msg_id).phy_offset
    except MessageDecodeError as exc:
        return admin.response(ResponseCode.SYSTEM_ERROR, f"bad msgId {header.msg_id}: {exc}")
    record = broker.store.look_message_by_offset(offset)
    if record is None:
        return admin.response(ResponseCode.SYSTEM_ERROR, f"can not find message by the offset, {offset}")
    return await forward_to_consumer(broker, admin, header.consumer_group, header.client_id, bytes(record))
