"""One coroutine per client -> server request (Java's ``MQClientAPIImpl``): build the header, invoke, check the
response code, parse the answer.

Every function takes the :class:`~remoting.client.RemotingClient` and the target address. A response code other than
the ones the function documents raises :class:`~client.errors.MQBrokerError`; transport failures raise
:class:`~remoting.errors.RemotingError` unchanged. No state lives here.
"""

from __future__ import annotations

import enum
import logging
import zlib
from typing import Any, Final, NamedTuple

import attrs

from client import send_request
from client.errors import MQBrokerError
from client.message import (
    DEFAULT_TRACE_REGION_ID,
    PROPERTY_MAX_OFFSET,
    PROPERTY_MIN_OFFSET,
    SendResult,
    SendStatus,
    uncompressed,
)
from remoting.client import RemotingClient
from remoting.codec.bodies import (
    ConsumerListBody,
    HeartbeatData,
    LockBatchRequestBody,
    LockBatchResponseBody,
    MessageQueue,
    TopicRouteData,
)
from remoting.codec.codes import RequestCode, ResponseCode
from remoting.codec.command import RemotingCommand, next_opaque, request
from remoting.codec.headers import (
    ConsumerSendMsgBackRequestHeader,
    GetConsumerListByGroupRequestHeader,
    GetMaxOffsetRequestHeader,
    GetMinOffsetRequestHeader,
    GetRouteInfoRequestHeader,
    PullMessageRequestHeader,
    QueryConsumerOffsetRequestHeader,
    RecallMessageRequestHeader,
    SearchOffsetRequestHeader,
    UnregisterClientRequestHeader,
    UpdateConsumerOffsetRequestHeader,
)
from remoting.codec.message import SYSFLAG_COMPRESSED, MessageExt
from remoting.codec.pull_body import decode_records
from remoting.codec.send_frame import send_result_json as _send_result_json

log = logging.getLogger(__name__)

_SEND_STATUS = {
    ResponseCode.SUCCESS: SendStatus.SEND_OK,
    ResponseCode.FLUSH_DISK_TIMEOUT: SendStatus.FLUSH_DISK_TIMEOUT,
    ResponseCode.FLUSH_SLAVE_TIMEOUT: SendStatus.FLUSH_SLAVE_TIMEOUT,
    ResponseCode.SLAVE_NOT_AVAILABLE: SendStatus.SLAVE_NOT_AVAILABLE,
}


def _check(response: RemotingCommand, address: str, *ok: int) -> RemotingCommand:
    if response.code not in (ok or (ResponseCode.SUCCESS,)):
        raise MQBrokerError(response.code, response.remark, address)
    return response


async def get_topic_route(remoting: RemotingClient, namesrv: str, topic: str, timeout: float) -> TopicRouteData | None:
    """The route of ``topic`` from one name server; ``None`` when it answers TOPIC_NOT_EXIST."""
    cmd = request(RequestCode.GET_ROUTEINFO_BY_TOPIC, GetRouteInfoRequestHeader(topic=topic).to_ext_fields())
    response = await remoting.invoke(namesrv, cmd, timeout)
    if response.code == ResponseCode.TOPIC_NOT_EXIST:
        return None
    _check(response, namesrv)
    return TopicRouteData.decode(response.body)


async def send_message(
    remoting: RemotingClient,
    address: str,
    broker_name: str,
    fields: dict[str, str],
    body: bytes,
    timeout: float,
    *,
    uniq_id: str,
) -> SendResult:
    """SEND_MESSAGE_V2 with the V2 ``fields`` (SEND_BATCH_MESSAGE when ``m`` is ``true``); the stored result, or
    MQBrokerError for a refusal."""
    response = await remoting.invoke(address, send_command(fields, body), timeout)
    return send_result(response, address, broker_name, fields["b"], uniq_id)


async def send_prepared(
    remoting: RemotingClient,
    address: str,
    broker_name: str,
    prepared: send_request.PreparedSend,
    queue_id: int,
    timeout: float,
) -> SendResult:
    """:func:`send_message` of ``prepared`` on ``queue_id``: when the client writes plain JSON, the frame comes from
    the encoded fields and the result from the response's JSON header (:func:`send_result_json`); same outcomes."""
    topic, uniq_id = prepared.topic, prepared.msg_id
    if not remoting.writes_plain_json:
        fields = prepared.for_queue(queue_id, broker_name)
        return await send_message(remoting, address, broker_name, fields, prepared.body, timeout, uniq_id=uniq_id)

    def decode(fields: dict[str, Any], body: bytes) -> SendResult | None:
        return send_result_json(fields, address, broker_name, topic, uniq_id)

    opaque = next_opaque()
    frame = prepared.frame(opaque, queue_id, broker_name)
    outcome = await remoting.invoke_frame(address, opaque, prepared.code, frame, timeout, decode)
    if isinstance(outcome, SendResult):
        return outcome
    assert isinstance(outcome, RemotingCommand)
    return send_result(outcome, address, broker_name, topic, uniq_id)


def send_command(fields: dict[str, str], body: bytes, *, oneway: bool = False) -> RemotingCommand:
    """The request for a send with the V2 ``fields``: SEND_BATCH_MESSAGE when ``m`` is ``true``,
    SEND_REPLY_MESSAGE_V2 for a reply (``MSG_TYPE=reply``), else SEND_MESSAGE_V2."""
    return request(send_code(fields), fields, body, oneway=oneway)


def send_code(fields: dict[str, str]) -> int:
    """The request code of a send with the V2 ``fields`` (see :func:`send_command`)."""
    return send_request.send_code(fields)


def send_result(response: RemotingCommand, address: str, broker_name: str, topic: str, uniq_id: str) -> SendResult:
    """The SendResult of a send response; MQBrokerError for a non-stored code or a response lacking its fields."""
    status = _SEND_STATUS.get(response.code)  # type: ignore[call-overload]
    if status is None:
        raise MQBrokerError(response.code, response.remark, address)
    ext = response.ext_fields
    # The send hot path: three fields read directly rather than through the header class.
    try:
        offset_msg_id, queue_id, queue_offset = ext["msgId"], int(ext["queueId"]), int(ext["queueOffset"])
    except (KeyError, ValueError) as exc:
        raise MQBrokerError(response.code, f"send response without a valid {exc}", address) from None
    return SendResult(
        send_status=status,
        msg_id=uniq_id,
        offset_msg_id=offset_msg_id,
        topic=topic,
        broker_name=broker_name,
        queue_id=queue_id,
        queue_offset=queue_offset,
        region_id=ext.get("MSG_REGION") or DEFAULT_TRACE_REGION_ID,
        trace_on=ext.get("TRACE_ON") != "false",
        recall_handle=ext.get("recallHandle"),
    )


#: The response codes of a stored send and their SendStatus (the producer's result readers).
STATUS_BY_CODE: Final = {int(code): status for code, status in _SEND_STATUS.items()}


def send_result_json(
    fields: dict[str, Any], address: str, broker_name: str, topic: str, uniq_id: str
) -> SendResult | None:
    """:func:`send_result` of a response still as its parsed JSON header (the producer's hot path: no command), or
    ``None`` unless it is a stored send's answer the general path would read the same way (every field it reads a
    string, the header's ints ints); then the caller takes the command's path, which raises what it raises.
    Never raises. In C when the extension is built (:func:`remoting.codec.send_frame.send_result_json`)."""
    result: SendResult | None = _send_result_json(fields, STATUS_BY_CODE, SendResult, uniq_id, topic, broker_name)
    return result


async def recall_message(
    remoting: RemotingClient, address: str, header: RecallMessageRequestHeader, timeout: float
) -> str:
    """RECALL_MESSAGE (RocketMQ 5.3's ``MQClientAPIImpl.recallMessage``): the recalled message's id. Raises
    MQBrokerError with the broker's code and remark when it refuses."""
    cmd = request(RequestCode.RECALL_MESSAGE, header.to_ext_fields())
    response = _check(await remoting.invoke(address, cmd, timeout), address)
    return response.ext_fields.get("msgId", "")


async def send_message_oneway(
    remoting: RemotingClient, address: str, fields: dict[str, str], body: bytes, timeout: float
) -> None:
    await remoting.invoke_oneway(address, send_command(fields, body, oneway=True), timeout)


class PullStatus(enum.Enum):
    FOUND = "FOUND"
    NO_NEW_MSG = "NO_NEW_MSG"
    NO_MATCHED_MSG = "NO_MATCHED_MSG"
    OFFSET_ILLEGAL = "OFFSET_ILLEGAL"


_PULL_STATUS = {
    ResponseCode.SUCCESS: PullStatus.FOUND,
    ResponseCode.PULL_NOT_FOUND: PullStatus.NO_NEW_MSG,
    ResponseCode.PULL_RETRY_IMMEDIATELY: PullStatus.NO_MATCHED_MSG,
    ResponseCode.PULL_OFFSET_MOVED: PullStatus.OFFSET_ILLEGAL,
}


class PullHead(NamedTuple):
    """The four offset fields every pull response carries."""

    suggest_which_broker_id: int
    next_begin_offset: int
    min_offset: int
    max_offset: int


@attrs.frozen(slots=True)
class PullResult:
    """A pull's outcome. ``messages`` are decoded, inflated, tag-filtered and carry MIN/MAX_OFFSET properties."""

    status: PullStatus
    next_begin_offset: int
    min_offset: int
    max_offset: int
    suggest_which_broker_id: int
    messages: list[MessageExt] = attrs.field(factory=list)


def pull_request(fields: dict[str, str]) -> RemotingCommand:
    """PULL_MESSAGE with the PullMessageRequestHeader's extFields."""
    return request(RequestCode.PULL_MESSAGE, fields)


def read_pull_response(response: RemotingCommand, address: str) -> tuple[PullStatus, PullHead]:
    """A pull response's status and offsets, its body left undecoded (:func:`pulled_messages` decodes it). Codes
    other than 0/19/20/21 raise MQBrokerError, and so does a response lacking its offset fields."""
    status = _PULL_STATUS.get(response.code)  # type: ignore[call-overload]
    if status is None:
        raise MQBrokerError(response.code, response.remark, address)
    ext = response.ext_fields
    try:  # the pull hot path: the four fields read directly rather than through the header class
        head = PullHead(
            int(ext["suggestWhichBrokerId"]), int(ext["nextBeginOffset"]), int(ext["minOffset"]), int(ext["maxOffset"])
        )
    except (KeyError, ValueError) as exc:
        raise MQBrokerError(response.code, f"pull response without a valid {exc}", address) from None
    return status, head


def pulled_messages(body: bytes | memoryview, head: PullHead, tags: frozenset[str] | None) -> list[MessageExt]:
    """The messages of a FOUND pull's body: decoded, inflated (see :func:`_inflated`), filtered by ``tags`` (a
    subscription's tag set, ``None`` for ``*``; Java filters on the client after the broker's hash-code filter) and
    carrying MIN/MAX_OFFSET. A malformed body raises MessageDecodeError."""
    extra = {PROPERTY_MIN_OFFSET: str(head.min_offset), PROPERTY_MAX_OFFSET: str(head.max_offset)}
    messages = decode_records(body, extra, tags)
    if any(msg.sys_flag & SYSFLAG_COMPRESSED for msg in messages):  # rare: no per-message call otherwise
        messages = _inflated(messages)
    return messages


def _inflated(messages: list[MessageExt]) -> list[MessageExt]:
    """``messages`` with their zlib bodies inflated, up to the first that does not inflate: it and the ones after it
    are dropped with a warning, as Java's ``MessageDecoder.decodes`` stops at a record whose decode (which inflates)
    fails. Such a body fails on every pull: the puller goes on from the pull's ``nextBeginOffset``."""
    out: list[MessageExt] = []
    for msg in messages:
        try:
            out.append(uncompressed(msg))
        except zlib.error as exc:
            dropped = len(messages) - len(out)
            log.warning(
                "message %s (%s queue %d offset %d) does not inflate (%s): it and the %d after it in its pull are"
                " dropped",
                msg.msg_id,
                msg.topic,
                msg.queue_id,
                msg.queue_offset,
                exc,
                dropped - 1,
            )
            break
    return out


async def pull_message(
    remoting: RemotingClient,
    address: str,
    header: PullMessageRequestHeader | dict[str, str],
    timeout: float,
    tags: frozenset[str] | None = None,
) -> PullResult:
    """PULL_MESSAGE with ``header`` (or its extFields, as the pull loop builds them), read by
    :func:`read_pull_response` and :func:`pulled_messages` (which see for ``tags`` and the errors)."""
    fields = header if isinstance(header, dict) else header.to_ext_fields()
    response = await remoting.invoke(address, pull_request(fields), timeout)
    status, head = read_pull_response(response, address)
    messages = pulled_messages(response.body, head, tags) if status is PullStatus.FOUND else []
    return PullResult(
        status=status,
        next_begin_offset=head.next_begin_offset,
        min_offset=head.min_offset,
        max_offset=head.max_offset,
        suggest_which_broker_id=head.suggest_which_broker_id,
        messages=messages,
    )


async def query_consumer_offset(
    remoting: RemotingClient, address: str, group: str, mq: MessageQueue, timeout: float
) -> int | None:
    """The stored offset, or ``None`` on QUERY_NOT_FOUND (no offset yet)."""
    header = QueryConsumerOffsetRequestHeader(consumer_group=group, topic=mq.topic, queue_id=mq.queue_id)
    response = await remoting.invoke(
        address, request(RequestCode.QUERY_CONSUMER_OFFSET, header.to_ext_fields()), timeout
    )
    if response.code == ResponseCode.QUERY_NOT_FOUND:
        return None
    _check(response, address)
    return int(response.ext_fields["offset"])


async def update_consumer_offset_oneway(
    remoting: RemotingClient, address: str, group: str, mq: MessageQueue, offset: int, timeout: float
) -> None:
    header = UpdateConsumerOffsetRequestHeader(
        consumer_group=group, topic=mq.topic, queue_id=mq.queue_id, commit_offset=offset
    )
    await remoting.invoke_oneway(
        address, request(RequestCode.UPDATE_CONSUMER_OFFSET, header.to_ext_fields(), oneway=True), timeout
    )


async def update_consumer_offset(
    remoting: RemotingClient, address: str, group: str, mq: MessageQueue, offset: int, timeout: float
) -> None:
    header = UpdateConsumerOffsetRequestHeader(
        consumer_group=group, topic=mq.topic, queue_id=mq.queue_id, commit_offset=offset
    )
    cmd = request(RequestCode.UPDATE_CONSUMER_OFFSET, header.to_ext_fields())
    _check(await remoting.invoke(address, cmd, timeout), address)


async def get_max_offset(remoting: RemotingClient, address: str, mq: MessageQueue, timeout: float) -> int:
    header = GetMaxOffsetRequestHeader(topic=mq.topic, queue_id=mq.queue_id)
    response = await remoting.invoke(address, request(RequestCode.GET_MAX_OFFSET, header.to_ext_fields()), timeout)
    return int(_check(response, address).ext_fields["offset"])


async def get_min_offset(remoting: RemotingClient, address: str, mq: MessageQueue, timeout: float) -> int:
    header = GetMinOffsetRequestHeader(topic=mq.topic, queue_id=mq.queue_id)
    response = await remoting.invoke(address, request(RequestCode.GET_MIN_OFFSET, header.to_ext_fields()), timeout)
    return int(_check(response, address).ext_fields["offset"])


async def search_offset(
    remoting: RemotingClient, address: str, mq: MessageQueue, timestamp_ms: int, timeout: float,
    boundary: str | None = None,
) -> int:  # fmt: skip
    """SEARCH_OFFSET_BY_TIMESTAMP; ``boundary`` ``LOWER`` or ``UPPER`` asks RocketMQ 5's answer, None 4.9's."""
    header = SearchOffsetRequestHeader(
        topic=mq.topic, queue_id=mq.queue_id, timestamp=timestamp_ms, boundary_type=boundary
    )
    cmd = request(RequestCode.SEARCH_OFFSET_BY_TIMESTAMP, header.to_ext_fields())
    return int(_check(await remoting.invoke(address, cmd, timeout), address).ext_fields["offset"])


async def get_consumer_id_list(remoting: RemotingClient, address: str, group: str, timeout: float) -> list[str]:
    header = GetConsumerListByGroupRequestHeader(consumer_group=group)
    cmd = request(RequestCode.GET_CONSUMER_LIST_BY_GROUP, header.to_ext_fields())
    response = _check(await remoting.invoke(address, cmd, timeout), address)
    return ConsumerListBody.decode(response.body).consumer_id_list


async def send_heartbeat(remoting: RemotingClient, address: str, data: HeartbeatData, timeout: float) -> int:
    """HEART_BEAT; returns the broker's version from the response."""
    response = await remoting.invoke(address, request(RequestCode.HEART_BEAT, body=data.encode()), timeout)
    return _check(response, address).version


async def unregister_client(
    remoting: RemotingClient,
    address: str,
    client_id: str,
    timeout: float,
    *,
    producer_group: str | None = None,
    consumer_group: str | None = None,
) -> None:
    header = UnregisterClientRequestHeader(
        client_id=client_id, producer_group=producer_group, consumer_group=consumer_group
    )
    cmd = request(RequestCode.UNREGISTER_CLIENT, header.to_ext_fields())
    _check(await remoting.invoke(address, cmd, timeout), address)


async def lock_batch_mq(
    remoting: RemotingClient, address: str, body: LockBatchRequestBody, timeout: float
) -> frozenset[MessageQueue]:
    """LOCK_BATCH_MQ: the queues of ``body.mq_set`` this client now holds."""
    response = _check(
        await remoting.invoke(address, request(RequestCode.LOCK_BATCH_MQ, body=body.encode()), timeout), address
    )
    return LockBatchResponseBody.decode(response.body).lock_ok_mq_set


async def unlock_batch_mq(remoting: RemotingClient, address: str, body: LockBatchRequestBody, timeout: float) -> None:
    cmd = request(RequestCode.UNLOCK_BATCH_MQ, body=body.encode())
    _check(await remoting.invoke(address, cmd, timeout), address)


async def unlock_batch_mq_oneway(
    remoting: RemotingClient, address: str, body: LockBatchRequestBody, timeout: float
) -> None:
    """UNLOCK_BATCH_MQ sent one way (no answer awaited)."""
    await remoting.invoke_oneway(
        address, request(RequestCode.UNLOCK_BATCH_MQ, body=body.encode(), oneway=True), timeout
    )


async def consumer_send_msg_back(
    remoting: RemotingClient,
    address: str,
    msg: MessageExt,
    group: str,
    delay_level: int,
    max_reconsume_times: int,
    timeout: float,
    origin_msg_id: str,
    *,
    origin_topic: str | None = None,
    broker_name: str | None = None,
) -> None:
    """CONSUMER_SEND_MSG_BACK of ``msg``. 4.9.8's ``MQClientAPIImpl.consumerSendMessageBack`` sends ``originTopic``
    the topic the listener saw (``origin_topic``; ``msg.topic`` by default), ``originMsgId`` the client's msgId (the
    UNIQ_KEY when present) and ``bname`` the queue's broker (``broker_name``)."""
    header = ConsumerSendMsgBackRequestHeader(
        offset=msg.commit_log_offset,
        group=group,
        delay_level=delay_level,
        origin_msg_id=origin_msg_id,
        origin_topic=msg.topic if origin_topic is None else origin_topic,
        max_reconsume_times=max_reconsume_times,
        bname=broker_name,
    )
    cmd = request(RequestCode.CONSUMER_SEND_MSG_BACK, header.to_ext_fields())
    _check(await remoting.invoke(address, cmd, timeout), address)
