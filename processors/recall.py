"""RECALL_MESSAGE (370): :class:`RecallMessageProcessor` takes back a timer message before its time, as RocketMQ 5.3's
``broker/src/main/java/org/apache/rocketmq/broker/processor/RecallMessageProcessor.java``.

Checks, in Java's order and with its remarks: ``recallMessageEnable`` (NO_PERMISSION "recall failed, operation is
forbidden"), a slave (SLAVE_NOT_AVAILABLE), a broker without write permission unless
``allowRecallWhenBrokerNotWriteable`` (SERVICE_NOT_AVAILABLE), the topic exists (TOPIC_NOT_EXIST), the handle decodes
(:mod:`remoting.codec.recall_handle`), names this topic and this broker, and its time is still ahead by less than
``timerMaxDelaySec`` (each ILLEGAL_OPERATION). Then a delete marker is stored through the timer's send seam: a
message of the handle's topic with body ``0``, tag ``_RECALL_TAG_``, ``UNIQ_KEY`` = the handle's message id,
``TIMER_DEL_UNIQKEY`` = ``<topic>+<message id>`` and ``TIMER_DELIVER_MS`` = the handle's time, which the timer files
in the message's slot so that the message is dropped instead of delivered (``broker/timer/timer_store.py``).
SUCCESS answers ``msgId`` = the message id, also when no such message is pending (RocketMQ does not look for it);
under SYNC_FLUSH once the marker is flushed (a flush or replica timeout is still SUCCESS, as in Java). A refused
store append, or no timer, answers SYSTEM_ERROR "recall failed, execute error". Every response carries ``MSG_REGION``.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import TYPE_CHECKING, Final

from processors.common import RequestRejected, born_host, parse_header
from remoting.codec.codes import RequestCode, ResponseCode
from remoting.codec.command import RemotingCommand
from remoting.codec.headers.recall import RecallMessageRequestHeader
from remoting.codec.message import MessageRecord
from remoting.codec.message_properties import encode_properties
from remoting.codec.recall_handle import RecallHandle, RecallHandleError, decode_recall_handle, java_long_or
from remoting.codec.topics import TIMER_TOPIC
from remoting.processor import RequestContext
from store.errors import PutRefusedError
from store.metadata_files import PERM_WRITE

if TYPE_CHECKING:
    from processors.context import BrokerContext

__all__ = ["RECALL_TAG", "RecallMessageProcessor"]

log = logging.getLogger(__name__)

RECALL_TAG: Final = "_RECALL_TAG_"
_NOT_AVAILABLE: Final = "recall failed, broker service not available"
_EXECUTE_ERROR: Final = "recall failed, execute error"


class RecallMessageProcessor:
    """Serves RECALL_MESSAGE on ``broker``; ``timer_rewrite`` is the timer's send seam (``None``: no timer, every
    recall fails to execute). Stateless between requests."""

    REQUEST_CODES: Final = (RequestCode.RECALL_MESSAGE,)

    def __init__(self, broker: BrokerContext, timer_rewrite: Callable[[MessageRecord], MessageRecord] | None) -> None:
        self.broker = broker
        self.timer_rewrite = timer_rewrite

    async def process(self, ctx: RequestContext, request: RemotingCommand) -> RemotingCommand | None:
        fields = {"MSG_REGION": self.broker.config.region_id}
        try:
            header = parse_header(RecallMessageRequestHeader, request)
            self._check_broker()
            handle = self._check_handle(header)
            message_id = await self._store_marker(ctx, header, handle)
        except RequestRejected as rejected:
            return rejected.to_response(request, fields)
        fields["msgId"] = message_id
        return request.response(ResponseCode.SUCCESS, None, fields)

    def _check_broker(self) -> None:
        config = self.broker.config
        if not config.recall_message_enable:
            raise RequestRejected(ResponseCode.NO_PERMISSION, "recall failed, operation is forbidden")
        if config.broker_role == "SLAVE":
            raise RequestRejected(ResponseCode.SLAVE_NOT_AVAILABLE, _NOT_AVAILABLE)
        if not config.broker_permission & PERM_WRITE and not config.allow_recall_when_broker_not_writeable:
            raise RequestRejected(ResponseCode.SERVICE_NOT_AVAILABLE, _NOT_AVAILABLE)

    def _check_handle(self, header: RecallMessageRequestHeader) -> RecallHandle:
        if self.broker.topics.get(header.topic) is None:
            raise RequestRejected(ResponseCode.TOPIC_NOT_EXIST, f"recall failed, the topic[{header.topic}] not exist")
        try:
            handle = decode_recall_handle(header.recall_handle)
        except RecallHandleError as exc:
            raise RequestRejected(ResponseCode.ILLEGAL_OPERATION, str(exc)) from None
        if handle.topic != header.topic:
            raise RequestRejected(ResponseCode.ILLEGAL_OPERATION, "recall failed, topic not match")
        if handle.broker_name != self.broker.config.broker_name:
            raise RequestRejected(ResponseCode.ILLEGAL_OPERATION, _NOT_AVAILABLE)
        left = java_long_or(handle.timestamp, -1) - self.broker.store.config.now_ms()
        if left <= 0 or left >= self.broker.config.timer_max_delay_sec * 1000:
            raise RequestRejected(ResponseCode.ILLEGAL_OPERATION, "recall failed, timestamp invalid")
        return handle

    async def _store_marker(self, ctx: RequestContext, header: RecallMessageRequestHeader, handle: RecallHandle) -> str:
        """Append the delete marker (module docstring); returns the recalled message's id."""
        store = self.broker.store
        now = store.config.now_ms()
        props = {
            "TAGS": RECALL_TAG,
            "TIMER_DEL_UNIQKEY": f"{handle.topic}+{handle.message_id}",
            "UNIQ_KEY": handle.message_id,
            "TIMER_DELIVER_MS": handle.timestamp,
            "BORN_TIMESTAMP": str(now),
        }
        if header.producer_group is not None:
            props["PGROUP"] = header.producer_group
        record = MessageRecord(
            topic=handle.topic,
            body=b"0",
            queue_id=0,
            flag=0,
            properties=encode_properties(props),
            sys_flag=0,
            born_timestamp=now,
            born_host=born_host(ctx),
            store_host=self.broker.store_host,
            reconsume_times=0,
        )
        if self.timer_rewrite is None:
            raise RequestRejected(ResponseCode.SYSTEM_ERROR, _EXECUTE_ERROR)
        try:
            marker = self.timer_rewrite(record)
        except RequestRejected:  # its time passed meanwhile
            raise RequestRejected(ResponseCode.SYSTEM_ERROR, _EXECUTE_ERROR) from None
        if marker.topic != TIMER_TOPIC:
            raise RequestRejected(ResponseCode.SYSTEM_ERROR, _EXECUTE_ERROR)
        try:
            appended = store.append(marker)
        except PutRefusedError as exc:
            log.warning("recall of %s refused by the store: %s", handle.message_id, exc)
            raise RequestRejected(ResponseCode.SYSTEM_ERROR, _EXECUTE_ERROR) from None
        if store.waits_for_put(True):
            await store.put_waits.status(appended.end_offset, True)
        return handle.message_id
