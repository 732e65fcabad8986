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


def one_queue_reset(
    broker: BrokerContext, header: ResetOffsetRequestHeader
) -> dict[MessageQueue, int] | tuple[ResponseCode, str]:
    """RocketMQ 5's reset of the one queue ``header.queue_id`` names (``resetOffsetInner``): its ``offset`` when
    given (within the queue's min and max + 1), else the first one stored at ``timestamp`` (negative: the max
    offset), committed and kept for the group's next pop of the queue (``assignResetOffset``). Returns the
    one-queue table, or the error code and remark."""
    topic, group, queue_id = header.topic, header.group, header.queue_id or 0
    if broker.config.broker_role == "SLAVE":
        return ResponseCode.SYSTEM_ERROR, "Can not reset offset in slave broker"
    if broker.topics.get(topic) is None:
        return ResponseCode.TOPIC_NOT_EXIST, f"Topic {topic} does not exist"
    if broker.groups.get(group) is None:
        return ResponseCode.SUBSCRIPTION_GROUP_NOT_EXIST, f"Group {group} does not exist"
    store = broker.store
    offset = header.offset
    if offset is not None and offset != -1:
        low, high = store.min_offset_in_queue(topic, queue_id), store.max_offset_in_queue(topic, queue_id)
        if (low >= 0 and offset < low) or offset > high + 1:
            return ResponseCode.SYSTEM_ERROR, f"Target offset {offset} not in consume queue range [{low}-{high}]"
    elif header.timestamp < 0:
        offset = store.max_offset_in_queue(topic, queue_id)
    else:
        offset = store.offset_in_queue_by_time(topic, queue_id, header.timestamp, "LOWER")
    broker.offsets.assign_reset(group, topic, queue_id, offset)
    return {MessageQueue(topic, broker.config.broker_name, queue_id): offset}


async def reset_offset(broker: BrokerContext, admin: RemotingCommand) -> RemotingCommand:
    """INVOKE_BROKER_TO_RESET_OFFSET: compute the table and push RESET_CONSUMER_CLIENT_OFFSET (220, oneway, body
    ``{"offsetTable": {MessageQueue: offset}}``) to every online consumer of the group, which apply and commit it.
    An admin request sent as ``LanguageCode.CPP`` (``mqadmin resetOffsetByTime -c``) pushes the C++ client's form
    instead, ``{"offsetTable": [MessageQueueForC]}`` (``AdminBrokerProcessor.resetOffset`` and
    ``broker/src/main/java/org/apache/rocketmq/broker/client/net/Broker2Client.java``); the admin's answer is the map
    either way.

    A request naming one queue (RocketMQ 5's ``queueId`` >= 0) resets and commits that queue alone
    (:func:`one_queue_reset`), online consumers or not, and tells the online ones of it, where RocketMQ 5's broker
    has their next pull answer from there.

    The push is queued without waiting, behind whatever a member has not read yet, as Java's ``invokeOneway`` writes
    without blocking (its 5 s bounds only the oneway permit): a consumer that stopped reading gets it if it resumes
    and never holds up the answer."""
    header = ResetOffsetRequestHeader.from_ext_fields(admin.ext_fields)
    one_queue = header.queue_id is not None and header.queue_id >= 0
    table = one_queue_reset(broker, header) if one_queue else reset_offset_table(broker, header)
    if isinstance(table, str):
        return admin.response(ResponseCode.SYSTEM_ERROR, table)
    if isinstance(table, tuple):
        return admin.response(*table)
    group_info = broker.clients.consumer_group(header.group)
    if not one_queue and (group_info is None or not group_info.channels):
        remark = (
            f"Consumer not online, so can not reset offset, Group: {header.group} Topic: {header.topic}"
            f" Timestamp: {header.timestamp}"
        )
        return admin.response(ResponseCode.CONSUMER_NOT_ONLINE, remark)
    body = b'{"offsetTable":' + dumps_mq_map(table) + b"}"
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
