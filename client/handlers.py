"""Requests brokers push to a client (Java's ``ClientRemotingProcessor``), answered for the instance's groups:

- NOTIFY_CONSUMER_IDS_CHANGED (40): wake the rebalance at once;
- CHECK_TRANSACTION_STATE (39): hand the half message to the producer of its ``PGROUP``;
- GET_CONSUMER_RUNNING_INFO (307): a JSON body describing the consumer (subscriptions, queues, offsets);
- CONSUME_MESSAGE_DIRECTLY (309): run the consumer's listener on the message in the body, answer the result;
- RESET_CONSUMER_CLIENT_OFFSET (220): move the consumer's offsets to the ones in the body.

Unknown codes get REQUEST_CODE_NOT_SUPPORTED; a group this client does not have gets SYSTEM_ERROR naming it.
"""

from __future__ import annotations

import json
import logging
import re
from typing import TYPE_CHECKING

import orjson

from remoting.codec.bodies import MessageQueue
from remoting.codec.codes import RequestCode, ResponseCode
from remoting.codec.command import RemotingCommand
from remoting.codec.errors import CodecError
from remoting.codec.headers import (
    ConsumeMessageDirectlyResultRequestHeader,
    GetConsumerRunningInfoRequestHeader,
    NotifyConsumerIdsChangedRequestHeader,
    ResetOffsetRequestHeader,
)
from remoting.codec.message import decode_record
from remoting.processor import RequestContext

if TYPE_CHECKING:
    from client.instance import MQClientInstance

log = logging.getLogger(__name__)

# fastjson writes Map<MessageQueue, Long> with object keys: {{"brokerName":"b","queueId":0,"topic":"t"}:12, ...}.
_MQ_ENTRY = re.compile(r"(\{[^{}]*\})\s*:\s*(-?\d+)")


def parse_reset_offset_body(body: bytes | memoryview) -> dict[MessageQueue, int]:
    """ResetOffsetBody ``{"offsetTable": {MessageQueue: offset}}`` in fastjson's object-key form. Raises
    :class:`~remoting.codec.errors.CodecError` when no entry can be read from a non-empty table."""
    text = bytes(body).decode("utf-8", "replace")
    table: dict[MessageQueue, int] = {}
    for key, offset in _MQ_ENTRY.findall(text):
        try:
            table[MessageQueue.from_json(json.loads(key))] = int(offset)
        except (ValueError, CodecError) as exc:
            raise CodecError(f"bad offsetTable entry {key!r}: {exc}") from exc
    return table


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
            consumer = self.instance.consumers.get(info_header.consumer_group)
            if consumer is None:
                return _no_group(request, info_header.consumer_group)
            return request.response(ResponseCode.SUCCESS, body=orjson.dumps(consumer.running_info()))
        if code == RequestCode.CONSUME_MESSAGE_DIRECTLY:
            direct = ConsumeMessageDirectlyResultRequestHeader.from_ext_fields(request.ext_fields)
            consumer = self.instance.consumers.get(direct.consumer_group)
            if consumer is None:
                return _no_group(request, direct.consumer_group)
            result = await consumer.consume_directly(decode_record(request.body), direct.broker_name)
            return request.response(ResponseCode.SUCCESS, body=orjson.dumps(result))
        if code == RequestCode.RESET_CONSUMER_CLIENT_OFFSET:
            reset = ResetOffsetRequestHeader.from_ext_fields(request.ext_fields)
            consumer = self.instance.consumers.get(reset.group)
            if consumer is None:
                return _no_group(request, reset.group)
            await consumer.reset_offset(reset.topic, parse_reset_offset_body(request.body))
            return request.response(ResponseCode.SUCCESS)
        return request.response(ResponseCode.REQUEST_CODE_NOT_SUPPORTED, f"client does not support code {code}")

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
