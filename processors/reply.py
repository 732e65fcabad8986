"""Request-reply on the broker (docs/protocol.md#716-request-reply): SEND_REPLY_MESSAGE (324, the V1 send header) and
SEND_REPLY_MESSAGE_V2 (325, the V2 letters), as RocketMQ 4.9.8's ``ReplyMessageProcessor``
(``broker/src/main/java/org/apache/rocketmq/broker/processor/ReplyMessageProcessor.java``).

A replier sends its reply to ``<cluster>_REPLY_TOPIC`` with the request's ``CORRELATION_ID``, ``REPLY_TO_CLIENT``
and ``MSG_TYPE=reply``. The broker runs the send checks (topic, permissions, queue id), then pushes the reply at
once with PUSH_REPLY_MESSAGE_TO_CLIENT (326) to the connection of the producer whose client id is
``REPLY_TO_CLIENT`` (known from its heartbeats), adding ``PUSH_REPLY_TIME``, and waits up to 10 s for the
requester's answer. With ``storeReplyMessageEnable`` (on by default) the reply is also stored, after the push and as
the store takes a send: a delay level parks it in ``SCHEDULE_TOPIC_XXXX``, a timer time in the timer topic. It is
stored with sysFlag 0 (Java never sets it; the push carries the request's): a compressed body is kept unflagged.

The response is Java's: SUCCESS with ``msgId "0"``, the queue and offset 0 when the push worked (the stored message's
offset msgId and queue offset replace them when it was stored); SYSTEM_ERROR with Java's remark when the requester is
unknown, gone or failed, even though the message may have been stored. Every response carries ``MSG_REGION`` and
``TRACE_ON``. Check failures answer as a send does (:mod:`processors.send`).
"""

from __future__ import annotations

import functools
import logging
import time
from typing import TYPE_CHECKING, Final

import attrs

from processors.common import RequestRejected, born_host
from processors.send import SendMessageProcessor, number_format_remark
from processors.send_answer import checked_before_counting
from processors.send_properties import java_int, message_type
from remoting.codec.codes import RequestCode, ResponseCode
from remoting.codec.command import RemotingCommand, request
from remoting.codec.errors import HeaderFieldError
from remoting.codec.headers.ops import ReplyMessageRequestHeader
from remoting.codec.headers.send import SendMessageRequestHeader, parse_send_request_header
from remoting.codec.message import MessageRecord
from remoting.codec.message_properties import decode_properties, with_properties
from remoting.codec.msgid import offset_msg_id
from remoting.errors import RemotingError
from remoting.processor import RequestContext
from store.errors import PutRefusedError, ServiceNotAvailableError, StoreError

if TYPE_CHECKING:
    from store.results import AppendResult

__all__ = ["PUSH_REPLY_TIMEOUT", "ReplyMessageProcessor"]

log = logging.getLogger(__name__)

#: How long the broker waits for the requester to take a pushed reply (Java's ``Broker2Client.callClient``).
PUSH_REPLY_TIMEOUT: Final = 10.0
PROPERTY_REPLY_TO_CLIENT: Final = "REPLY_TO_CLIENT"
PROPERTY_PUSH_REPLY_TIME: Final = "PUSH_REPLY_TIME"
PROPERTY_DELAY: Final = "DELAY"


class ReplyMessageProcessor(SendMessageProcessor):
    """Serves 324 and 325 on the reply pool; the send checks are :class:`SendMessageProcessor`'s. Whether replies
    are stored is ``storeReplyMessageEnable``, read per request (UPDATE_BROKER_CONFIG can change it)."""

    REQUEST_CODES: Final = (RequestCode.SEND_REPLY_MESSAGE, RequestCode.SEND_REPLY_MESSAGE_V2)

    async def process(self, ctx: RequestContext, request: RemotingCommand) -> RemotingCommand | None:
        self.adopt_config()
        base = dict(self.base_fields)
        if request.code not in self.REQUEST_CODES:
            return request.response(
                ResponseCode.REQUEST_CODE_NOT_SUPPORTED, f" request type {request.code} not supported"
            )
        if (refused := self.not_yet_accepting(request)) is not None:
            return refused
        send_code = (
            RequestCode.SEND_MESSAGE if request.code == RequestCode.SEND_REPLY_MESSAGE else RequestCode.SEND_MESSAGE_V2
        )
        try:
            header = parse_send_request_header(send_code, request.ext_fields)
            _, queue_id = self._check_topic(ctx, header)
        except HeaderFieldError as exc:
            return request.response(ResponseCode.SYSTEM_ERROR, str(exc), base)
        except RequestRejected as rejected:
            return rejected.to_response(request, base)
        record = MessageRecord(
            header.topic,
            request.body,
            queue_id,
            header.flag,
            header.properties or "",
            0,  # the stored sysFlag (see the module docstring)
            header.born_timestamp,
            born_host(ctx),
            self.broker.store_host,
            header.reconsume_times or 0,
        )
        remark, pushed_properties = await self._push(ctx, header, record)
        if remark is None:
            response = request.response(
                ResponseCode.SUCCESS, None, {**base, "msgId": "0", "queueId": str(queue_id), "queueOffset": "0"}
            )
        else:
            response = request.response(ResponseCode.SYSTEM_ERROR, remark, base)
        if self.broker.config.store_reply_message_enable:
            try:
                parked = self._parked(record, pushed_properties)
            except RequestRejected as escaped:  # Java's exception answer: no MSG_REGION nor TRACE_ON
                return escaped.to_response(request)
            if parked is not None:
                self._store(parked, response, queue_id, message_type(decode_properties(record.properties)))
        return response

    def _parked(self, record: MessageRecord, pushed_properties: str | None) -> MessageRecord | None:
        """The reply as the store takes it: moved to ``SCHEDULE_TOPIC_XXXX`` by a delay level, else to the timer topic
        by a ``TIMER_*`` time (4.9.8's CommitLog.asyncPutMessage, 5.3.3's HookUtils.handleScheduleMessage; a reply's
        sysFlag is never a transaction's there). ``None`` when the timer refuses it (Java only logs that put result).
        A ``DELAY`` that is no int raises RequestRejected: Java's NumberFormatException escapes the processor. A parked
        reply takes the properties it was pushed with (``pushed_properties``, with PUSH_REPLY_TIME), as the store
        writes a parked message's properties again from the map pushReplyMessage added the push time to; one stored at
        once keeps the request's."""
        raw = decode_properties(record.properties).get(PROPERTY_DELAY)
        level = java_int(raw) if raw else 0
        if level is None:
            raise RequestRejected(ResponseCode.SYSTEM_ERROR, number_format_remark(str(raw)))
        mapped = record if pushed_properties is None else attrs.evolve(record, properties=pushed_properties)
        if level > 0 and self.delay_rewrite is not None:
            return self.delay_rewrite(mapped, level)
        if self.timer_rewrite is None:
            return record
        try:
            parked = self.timer_rewrite(mapped)
        except RequestRejected as refused:
            log.warning("reply to %s not stored: %s", record.topic, refused)
            return None
        return record if parked is mapped else parked

    async def _push(
        self, ctx: RequestContext, header: SendMessageRequestHeader, record: MessageRecord
    ) -> tuple[str | None, str | None]:
        """PUSH_REPLY_MESSAGE_TO_CLIENT to the requester: Java's remark (``None`` when it took the reply) and the
        properties pushed (with PUSH_REPLY_TIME; ``None`` when the requester was not found and nothing was pushed)."""
        sender = decode_properties(record.properties).get(PROPERTY_REPLY_TO_CLIENT)
        if sender is None:
            return f"reply message properties[{PROPERTY_REPLY_TO_CLIENT}] is null", None
        channel = self.broker.clients.find_producer_channel(sender)
        if channel is None:
            return f"push reply message fail, channel of <{sender}> not found.", None
        properties = with_properties(record.properties, {PROPERTY_PUSH_REPLY_TIME: str(int(time.time() * 1000))})
        host, port = ctx.remote_address[:2]
        push_header = ReplyMessageRequestHeader(
            producer_group=header.producer_group,
            topic=header.topic,
            default_topic=header.default_topic,
            default_topic_queue_nums=header.default_topic_queue_nums,
            queue_id=header.queue_id,
            sys_flag=header.sys_flag,
            born_timestamp=header.born_timestamp,
            flag=header.flag,
            born_host=f"{host}:{port}",
            store_host=self.broker.broker_addr,
            store_timestamp=int(time.time() * 1000),
            properties=properties,
            reconsume_times=header.reconsume_times,
            unit_mode=header.unit_mode,
        )
        push = request(RequestCode.PUSH_REPLY_MESSAGE_TO_CLIENT, push_header.to_ext_fields(), bytes(record.body))
        try:
            answer = await channel.connection.invoke(push, PUSH_REPLY_TIMEOUT)
        except RemotingError as exc:
            log.warning("push reply to %s failed: %s", sender, exc)
            return f"push reply message to {sender}fail.", properties
        return None if answer.code == ResponseCode.SUCCESS else f"push reply message to {sender}fail.", properties

    def _typed_append(self, kind: str, record: MessageRecord) -> AppendResult:
        """Append the reply, counted as ``kind`` in ``rocketmq_messages_in_total`` unless ``normal``."""
        appended = self.broker.store.append(record)
        if kind != "normal":
            self.broker.stats.record_typed_put(record.topic, record.queue_id, appended.queue_offset, kind)
        return appended

    def _store(self, record: MessageRecord, response: RemotingCommand, queue_id: int, kind: str) -> None:
        """Store the reply (``record``, parked when delayed); a stored reply's offset msgId and queue offset go into the
        response, with the queue it was sent to, and its code stays. A put the store refuses counts as failed as a
        send's does (DefaultMessageStore.asyncPutMessage counts the refusals of the CommitLog, not those of its status
        and message checks). A stored reply's size is recorded for ``rocketmq_message_size`` under the topic it is
        stored in, labelled ``kind`` (5.3.3's ReplyMessageProcessor ``handlePutMessageResult`` with
        ``BrokerMetricsManager.getMessageType`` of the request: transaction, fifo, delay, normal)."""
        try:
            appended = self._sized_append(functools.partial(self._typed_append, kind), kind, record)
        except StoreError as exc:
            log.warning("storing reply to %s failed: %s", record.topic, exc)
            counted = isinstance(exc, PutRefusedError) and not isinstance(exc, ServiceNotAvailableError)
            if counted and not checked_before_counting(record):
                self.broker.stats.record_put_failed()
            return
        response.ext_fields["msgId"] = offset_msg_id(appended.store_host, appended.phy_offset)
        response.ext_fields["queueOffset"] = str(appended.queue_offset)
        response.ext_fields["queueId"] = str(queue_id)
