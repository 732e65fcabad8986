"""The second half of a send: append the record(s), then answer, for :class:`~processors.send.SendMessageProcessor`.

An ASYNC_FLUSH send on an ASYNC_MASTER (or one with ``WAIT=false``) is answered PUT_OK at once by the send-pool
worker. A SYNC_FLUSH or SYNC_MASTER send registers a callback with the store's put waits (:mod:`store.put_waits`:
the group commit and the slaves' acknowledgements) and frees the worker: when the sync covering it completes and a
slave has it, the release pass calls the callback on the Trio thread, which builds the response (PUT_OK, or
FLUSH_DISK_TIMEOUT, FLUSH_SLAVE_TIMEOUT, SLAVE_NOT_AVAILABLE) and writes it with ``Connection.send_nowait``. No
task per put: that task (spawn, scheduling, its own ``send``) was ~7 % of the broker's samples under SYNC_FLUSH
64x1. Only when the connection is congested is the write handed to the put-future
service's nursery, which can wait for the writer to drain.

A oneway send is never answered (its callback only times it); a response for a connection that closed meanwhile
is dropped with a debug log. The records are stored whatever happens to the answer.

Each put's latency (append, plus the flush and replication waits under SYNC_FLUSH / SYNC_MASTER), oneway or not,
goes to the broker's put latency statistics (:mod:`broker.stats.latency`), as 4.9.8's
``DefaultMessageStore.asyncPutMessage`` times every put: two clock reads per send request; a put the store refuses
counts as a failed one, unless it refused it for its state (shut down, slave, disk full: SERVICE_NOT_AVAILABLE) or
for what Java's ``checkMessage`` refuses (a topic over 127 characters, properties over 32767 characters), which Java
checks before it counts.
"""

from __future__ import annotations

import logging
import math
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Final, TypeVar

from processors.common import RequestRejected
from processors.put_future import PutFutureService
from remoting.codec.codes import ResponseCode
from remoting.codec.command import RemotingCommand
from remoting.codec.message import MessageRecord
from remoting.codec.msgid import offset_msg_id
from remoting.connection import Connection
from remoting.errors import RemotingConnectError
from remoting.processor import RequestContext
from store.errors import PutRefusedError, ServiceNotAvailableError, StoreError
from store.results import AppendResult, PutStatus

if TYPE_CHECKING:
    from processors.context import BrokerContext
    from store.message_store import MessageStore

__all__ = ["SendAnswers", "checked_before_counting", "illegal_remark"]

log = logging.getLogger(__name__)
_T = TypeVar("_T")
#: Java's checkMessage limits in ``String.length()`` units, UTF-16 code units (``Byte.MAX_VALUE``, ``Short.MAX_VALUE``).
_MAX_TOPIC_CHARS: Final = 127
_MAX_PROPERTIES_CHARS: Final = 32767

_PUT_STATUS_CODES: Final = {
    PutStatus.PUT_OK: ResponseCode.SUCCESS,
    PutStatus.FLUSH_DISK_TIMEOUT: ResponseCode.FLUSH_DISK_TIMEOUT,
    PutStatus.FLUSH_SLAVE_TIMEOUT: ResponseCode.FLUSH_SLAVE_TIMEOUT,
    PutStatus.SLAVE_NOT_AVAILABLE: ResponseCode.SLAVE_NOT_AVAILABLE,
}
#: A failed status's remark where it is not the status's name (broker/src/main/java/org/apache/rocketmq/broker/
#: processor/SendMessageProcessor.java handlePutMessageResult): a DLedger send the quorum did not acknowledge in time.
_PUT_STATUS_REMARKS: Final = {
    PutStatus.OS_PAGECACHE_BUSY: "[PC_SYNCHRONIZED]broker busy, start flow control for a while"
}

#: SendMessageProcessor's remark for a put refused past ``maxLmqConsumeQueueNum`` (store/multi_dispatch.py).
LMQ_EXCEEDED_REMARK: Final = (
    "[LMQ_CONSUME_QUEUE_NUM_EXCEEDED]broker config enableLmq and enableMultiDispatch, lmq consumeQueue num exceed "
    "maxLmqConsumeQueueNum config num, default limit 2w."
)


class SendAnswers:
    """Owned by one :class:`~processors.send.SendMessageProcessor`; ``put_futures`` (optional) hosts the writes to
    congested connections."""

    def __init__(self, broker: BrokerContext, put_futures: PutFutureService | None) -> None:
        self.broker = broker
        self.put_futures = put_futures

    async def store(
        self,
        ctx: RequestContext,
        request: RemotingCommand,
        queue_id: int,
        wait: bool,
        append: Callable[[_T], AppendResult],
        what: _T,
        base_fields: dict[str, str],
        on_status: Callable[[PutStatus], None] | None = None,
    ) -> RemotingCommand | None:
        """Append ``what``, then the response, or ``None`` when the group commit's callback answers later (see the
        module docstring); ``on_status`` is told the put's outcome first (not a refused append). Raises
        :class:`RequestRejected` when the store refuses the append."""
        started = time.perf_counter_ns()
        stats = self.broker.stats
        try:
            appended = append(what)
        except ServiceNotAvailableError as exc:
            # The store's status check (shut down, slave, disk full) refuses before anything is timed or counted,
            # as 4.9.8's store/src/main/java/org/apache/rocketmq/store/DefaultMessageStore.java asyncPutMessage.
            raise self.refused(exc) from None
        except PutRefusedError as exc:
            if not checked_before_counting(what):
                stats.record_put_failed()
            raise self.refused(exc) from None
        store = self.broker.store
        latency = stats.put_latency
        if not store.waits_for_put(wait):
            # The common ASYNC_FLUSH / ASYNC_MASTER case answers PUT_OK without awaiting anything: one coroutine
            # less per send.
            latency.record(time.perf_counter_ns() - started)
            if on_status is not None:
                on_status(PutStatus.PUT_OK)
            return answer(request, PutStatus.PUT_OK, appended, queue_id, base_fields)
        oneway = request.is_oneway
        waits = store.put_waits
        if not waits.can_notify(wait):
            status = await waits.status(appended.end_offset, wait)
            latency.record(time.perf_counter_ns() - started)
            if on_status is not None:
                on_status(status)
            return None if oneway else answer(request, status, appended, queue_id, base_fields)
        connection = ctx.connection
        opaque = request.opaque

        def answered(status: PutStatus) -> None:
            latency.record(time.perf_counter_ns() - started)
            if on_status is not None:
                on_status(status)
            if not oneway:
                self.write(connection, answer(request, status, appended, queue_id, base_fields), opaque)

        now = waits.notify(appended.end_offset, wait, answered)
        if now is None:
            return None
        latency.record(time.perf_counter_ns() - started)
        if on_status is not None:
            on_status(now)
        return None if oneway else answer(request, now, appended, queue_id, base_fields)

    def write(self, connection: Connection, response: RemotingCommand, opaque: int) -> None:
        futures = self.put_futures
        if connection.congested and futures is not None and futures.submit(_send, connection, response, opaque):
            return
        try:
            connection.send_nowait(response)
        except RemotingConnectError:
            log.debug("send response to opaque %d dropped: connection closed", opaque)

    def refused(self, exc: StoreError) -> RequestRejected:
        """The rejection for a store refusal (MESSAGE_ILLEGAL / SERVICE_NOT_AVAILABLE / SYSTEM_ERROR)."""
        status = getattr(exc, "put_status", "UNKNOWN_ERROR")
        if status in ("MESSAGE_ILLEGAL", "PROPERTIES_SIZE_EXCEEDED"):
            log.debug("put refused as %s: %s", status, exc)
            return RequestRejected(
                ResponseCode.MESSAGE_ILLEGAL, illegal_remark(self.broker.store.config.max_message_size)
            )
        if status == "SERVICE_NOT_AVAILABLE":  # SendMessageProcessor's text, then which of the reasons it is
            return RequestRejected(
                ResponseCode.SERVICE_NOT_AVAILABLE,
                "service not available now. It may be caused by one of the following reasons: the broker's disk is "
                f"full [{disk_util(self.broker.store)}], messages are put to the slave, message store has been shut "
                f"down, etc. ({exc})",
            )
        if status == "OS_PAGECACHE_BUSY":  # SendMessageProcessor's text (a DLedger append its server refused)
            return RequestRejected(ResponseCode.SYSTEM_ERROR, _PUT_STATUS_REMARKS[PutStatus.OS_PAGECACHE_BUSY])
        if status == "LMQ_CONSUME_QUEUE_NUM_EXCEEDED":  # SendMessageProcessor's text
            return RequestRejected(ResponseCode.SYSTEM_ERROR, LMQ_EXCEEDED_REMARK)
        if status == "CREATE_MAPPED_FILE_FAILED":  # SendMessageProcessor's text
            return RequestRejected(ResponseCode.SYSTEM_ERROR, "create mapped file failed, server is busy or broken.")
        return RequestRejected(ResponseCode.SYSTEM_ERROR, f"{status}: {exc}")


async def _send(connection: Connection, response: RemotingCommand, opaque: int) -> None:
    """A response to a congested connection: waits for the writer to drain, as a send-pool worker would."""
    try:
        await connection.send(response)
    except RemotingConnectError:
        log.debug("send response to opaque %d dropped: connection closed", opaque)


def answer(
    request: RemotingCommand, status: PutStatus, appended: AppendResult, queue_id: int, base_fields: dict[str, str]
) -> RemotingCommand:
    """The response to an appended send (the status and the append it describes, as Java's PutMessageResult): for
    the "sendOK" statuses (stored) its msgId, queueId and queueOffset and no remark, else SYSTEM_ERROR without them
    (SendMessageProcessor.handlePutMessageResult)."""
    code = _PUT_STATUS_CODES.get(status)
    if code is None:
        remark = _PUT_STATUS_REMARKS.get(status, status.value)
        return request.response(ResponseCode.SYSTEM_ERROR, remark, dict(base_fields))
    fields = dict(base_fields)
    if appended.count == 1:
        fields["msgId"] = offset_msg_id(appended.store_host, appended.phy_offset)
    else:
        fields["msgId"] = appended.msg_id
    fields["queueId"] = str(queue_id)
    fields["queueOffset"] = str(appended.queue_offset)
    return request.response(code, None, fields)


def checked_before_counting(what: object) -> bool:
    """Whether ``what`` is a message 4.9.8's ``checkMessage`` refuses (MESSAGE_ILLEGAL) before
    store/src/main/java/org/apache/rocketmq/store/DefaultMessageStore.java ``asyncPutMessage`` counts a failed put: a
    topic over 127 characters or properties over 32767 characters, counted as ``String.length()`` counts them, in
    UTF-16 code units. Properties within 32767 units whose UTF-8 passes 32767 bytes reach the CommitLog's encoder
    (PROPERTIES_SIZE_EXCEEDED), whose refusal counts."""
    return isinstance(what, MessageRecord) and (
        len(what.topic) > _MAX_TOPIC_CHARS or _java_length(what.properties) > _MAX_PROPERTIES_CHARS
    )


def _java_length(text: str) -> int:
    """Java's ``String.length()``: UTF-16 code units, two for a character outside the Basic Multilingual Plane."""
    if text.isascii():
        return len(text)
    return len(text.encode("utf-16-le", "surrogatepass")) // 2


def illegal_remark(max_size: int) -> str:
    """The remark of a MESSAGE_ILLEGAL or PROPERTIES_SIZE_EXCEEDED put, the limit in bytes, as
    broker/src/main/java/org/apache/rocketmq/broker/processor/SendMessageProcessor.java handlePutMessageResult (4.9.8
    and 5.3.3) formats it; the store's reason is logged, not answered."""
    return (
        "the message is illegal, maybe msg body or properties length not matched. "
        f"msg body length limit {max_size}B, msg properties length limit 32KB."
    )


def disk_util(store: MessageStore) -> str:
    """The used disk ratios 4.9.8's SERVICE_NOT_AVAILABLE remark names, ``CL:  0.96 CQ:  0.50 INDEX:  0.96``: the
    least used of the CommitLog's directories, the ConsumeQueues' and the index's, each rounded up to a percent, -1
    for a directory that does not exist (broker/src/main/java/org/apache/rocketmq/broker/processor/
    SendMessageProcessor.java diskUtil, common/src/main/java/org/apache/rocketmq/common/UtilAll.java
    getDiskPartitionSpaceUsedPercent)."""
    config = store.config

    def used(path: Path) -> float:
        try:
            if not path.exists():
                return -1.0
            ratio = config.disk_usage_ratio(path)
        except OSError:
            return -1.0
        return math.ceil(round(ratio * 100, 6)) / 100

    physic = min([used(directory) for directory in store.commitlog.queue.dirs.writable], default=-1.0)
    return f"CL: {physic:5.2f} CQ: {used(config.consume_queue_dir):5.2f} INDEX: {used(config.index_dir):5.2f}"
