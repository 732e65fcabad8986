"""Requests brokers push to a client (Java's ``ClientRemotingProcessor``), answered for the instance's groups:

- NOTIFY_CONSUMER_IDS_CHANGED (40): wake the rebalance at once;
- CHECK_TRANSACTION_STATE (39): hand the half message to the producer of its ``PGROUP``;
- GET_CONSUMER_RUNNING_INFO (307): a JSON body describing the consumer (subscriptions, queues, offsets), with the
  stacks of this process's threads when the request's ``jstackEnable`` asks for them;
- CONSUME_MESSAGE_DIRECTLY (309): run the consumer's listener on the message in the body, answer the result;
- RESET_CONSUMER_CLIENT_OFFSET (220): move the consumer's offsets to the ones in the body;
- GET_CONSUMER_STATUS_FROM_CLIENT (221): the group's offsets of a topic (empty for a group this client lacks);
- PUSH_REPLY_MESSAGE_TO_CLIENT (326): a reply to one of this client's requests (client/request_reply.py).

Unknown codes get REQUEST_CODE_NOT_SUPPORTED with Java's remark; a group this client does not have gets SYSTEM_ERROR
naming it.
"""

from __future__ import annotations

import logging
import sys
import threading
from typing import TYPE_CHECKING

import orjson

from client.request_reply import reply_from_push
from remoting.codec.bodies import MessageQueue
from remoting.codec.bodies.admin import dumps_mq_map, loads_fastjson
from remoting.codec.bodies.ops import ConsumerStatusBody
from remoting.codec.codes import RequestCode, ResponseCode
from remoting.codec.command import RemotingCommand
from remoting.codec.errors import CodecError
from remoting.codec.headers import (
    ConsumeMessageDirectlyResultRequestHeader,
    GetConsumerRunningInfoRequestHeader,
    GetConsumerStatusRequestHeader,
    NotifyConsumerIdsChangedRequestHeader,
    ResetOffsetRequestHeader,
)
from remoting.codec.headers.ops import ReplyMessageRequestHeader
from remoting.codec.message import decode_record
from remoting.dispatch import not_supported_remark
from remoting.processor import RequestContext

if TYPE_CHECKING:
    from client.instance import MQClientInstance

log = logging.getLogger(__name__)


def parse_reset_offset_body(body: bytes | memoryview) -> dict[MessageQueue, int]:
    """ResetOffsetBody ``{"offsetTable": {MessageQueue: offset}}`` in fastjson's object-key form. Raises
    :class:`~remoting.codec.errors.CodecError` on another shape."""
    root = loads_fastjson(body)
    table = root.get("offsetTable") if isinstance(root, dict) else None
    if not isinstance(table, dict):
        raise CodecError("ResetOffsetBody lacks an offsetTable object")
    try:
        return {mq: int(offset) for mq, offset in table.items() if isinstance(mq, MessageQueue)}
    except (TypeError, ValueError) as exc:
        raise CodecError(f"bad offsetTable entry: {exc}") from None


def encode_running_info(info: dict[str, object]) -> bytes:
    """Java's ConsumerRunningInfo JSON: ``mqTable`` (``{MessageQueue: ProcessQueueInfo}``) in fastjson's object-key
    form, everything else standard JSON, so Java's admin tools can read it."""
    table = info.get("mqTable")
    rest = {k: v for k, v in info.items() if k != "mqTable"}
    rest.setdefault("statusTable", {})
    body = orjson.dumps(rest, option=orjson.OPT_SORT_KEYS)
    if not isinstance(table, dict) or not table:
        return body[:-1] + b',"mqTable":{}}'
    return body[:-1] + b',"mqTable":' + dumps_mq_map(table) + b"}"


def thread_stacks() -> str:
    """Every thread's stack as UtilAll.jstack lists Java's (common/src/main/java/org/apache/rocketmq/common/
    UtilAll.java, which ClientRemotingProcessor.getConsumerRunningInfo answers a ``jstackEnable`` request with): a
    ``name TID: id STATE: RUNNABLE`` line, then one line per frame, innermost first, each behind the thread's name
    padded to 40, and an empty line. A frame reads ``module.function(file:line)``, as a StackTraceElement."""
    frames = sys._current_frames()
    out: list[str] = []
    for thread in threading.enumerate():
        frame = frames.get(thread.ident or -1)
        if frame is None:
            continue
        name = thread.name
        out.append(f"{name:<40}TID: {thread.ident} STATE: RUNNABLE\n")
        while frame is not None:
            code = frame.f_code
            where = f"{frame.f_globals.get('__name__', '?')}.{code.co_qualname}"
            out.append(f"{name:<40}{where}({code.co_filename.rsplit('/', 1)[-1]}:{frame.f_lineno})\n")
            frame = frame.f_back
        out.append("\n")
    return "".join(out)


class ClientRequestHandler:
    """The :class:`~remoting.processor.Processor` of a client instance's connections."""

    def __init__(self, instance: MQClientInstance) -> None:
        self.instance = instance

    async def process(self, ctx: RequestContext, request: RemotingCommand) -> RemotingCommand | None:
        code = request.code
        if code == RequestCode.NOTIFY_CONSUMER_IDS_CHANGED:
            header = NotifyConsumerIdsChangedRequestHeader.from_ext_fields(request.ext_fields)
            log.debug("consumer ids of %s changed: rebalance", header.consumer_group)
            self.instance.wake_rebalance()
            return None
        if code == RequestCode.CHECK_TRANSACTION_STATE:
            return await self._check_transaction(ctx, request)
        if code == RequestCode.GET_CONSUMER_RUNNING_INFO:
            info_header = GetConsumerRunningInfoRequestHeader.from_ext_fields(request.ext_fields)
            info = self.instance.consumer_running_info(info_header.consumer_group)
            if info is None:
                return _no_group(request, info_header.consumer_group)
            if info_header.jstack_enable:
                info["jstack"] = thread_stacks()
            return request.response(ResponseCode.SUCCESS, body=encode_running_info(info))
        if code == RequestCode.CONSUME_MESSAGE_DIRECTLY:
            direct = ConsumeMessageDirectlyResultRequestHeader.from_ext_fields(request.ext_fields)
            consumer = self.instance.consumers.get(direct.consumer_group)
            if consumer is None:
                return _no_group(request, direct.consumer_group)
            result = await consumer.consume_directly(decode_record(request.body), direct.broker_name)
            return request.response(ResponseCode.SUCCESS, body=orjson.dumps(result))
        if code == RequestCode.PUSH_REPLY_MESSAGE_TO_CLIENT:
            return self._reply(request)
        if code == RequestCode.GET_CONSUMER_STATUS_FROM_CLIENT:
            status = GetConsumerStatusRequestHeader.from_ext_fields(request.ext_fields)
            consumer = self.instance.consumers.get(status.group)
            table = {} if consumer is None else consumer.offset_store.snapshot(status.topic)
            return request.response(ResponseCode.SUCCESS, body=ConsumerStatusBody(table).encode())
        if code == RequestCode.RESET_CONSUMER_CLIENT_OFFSET:
            reset = ResetOffsetRequestHeader.from_ext_fields(request.ext_fields)
            consumer = self.instance.consumers.get(reset.group)
            if consumer is None:
                return _no_group(request, reset.group)
            await consumer.reset_offset(reset.topic, parse_reset_offset_body(request.body))
            return request.response(ResponseCode.SUCCESS)
        # NettyRemotingAbstract.processRequestCommand's answer: the Java client has no processor for the code.
        return request.response(ResponseCode.REQUEST_CODE_NOT_SUPPORTED, not_supported_remark(code))

    def _reply(self, request: RemotingCommand) -> RemotingCommand:
        """PUSH_REPLY_MESSAGE_TO_CLIENT (326): complete the waiting request (client/request_reply.py). Java answers
        SUCCESS also for a reply no request waits for (it is dropped), SYSTEM_ERROR when it cannot be read."""
        try:
            header = ReplyMessageRequestHeader.from_ext_fields(request.ext_fields)
            reply = reply_from_push(header, bytes(request.body))
        except (CodecError, ValueError) as exc:
            log.warning("bad reply message: %s", exc)
            return request.response(ResponseCode.SYSTEM_ERROR, "process reply message fail")
        if not self.instance.replies.complete(reply):
            log.warning("reply %s matches no waiting request: dropped", reply.properties.get("CORRELATION_ID"))
        return request.response(ResponseCode.SUCCESS)

    async def _check_transaction(self, ctx: RequestContext, request: RemotingCommand) -> RemotingCommand | None:
        msg = decode_record(request.body)
        group = msg.properties.get("PGROUP", "")
        producer = self.instance.producers.get(group)
        if producer is None:
            log.warning("CHECK_TRANSACTION_STATE for unknown producer group %r", group)
            return None
        host, port = ctx.remote_address
        await producer.check_transaction_state(f"{host}:{port}", msg, request)
        return None


def _no_group(request: RemotingCommand, group: str) -> RemotingCommand:
    return request.response(ResponseCode.SYSTEM_ERROR, f"the consumer group {group!r} is not online in this client")
