"""END_TRANSACTION (37): :class:`EndTransactionProcessor` commits or rolls back a half message
(docs/protocol.md#78-transactions, docs/protocol.md#310-transaction-headers). Java clients send it oneway; answered
only when it is not.

Checks, in Java's order and with its remarks (each failure is SYSTEM_ERROR): the half message at
``commitLogOffset`` exists (ours: and lives in ``RMQ_SYS_TRANS_HALF_TOPIC``, so a commit cannot re-publish an ordinary
message), its ``PGROUP`` equals ``producerGroup``, its queue offset equals ``tranStateTableOffset``. Then:

- commit (8): append the real message (:meth:`TransactionalMessageBridge.put_commit_message`; one carrying ``DELAY``
  goes to the delay-level schedule through the bridge's ``delay_rewrite`` seam, step 10 of
  docs/protocol.md#75-send-checks), then the op message;
- rollback (12): the op message only, so the half message never becomes visible;
- either is answered once the store's put waits are over, as 4.9.8's ``sendFinalMessage`` and ``putOpMessage`` go
  through the store's synchronous ``putMessage``: in DLedger mode a majority's acknowledgement, on a classic
  SYNC_FLUSH / SYNC_MASTER broker the flush / the slave (the final message keeps the half's ``WAIT``; the op message
  has ``WAIT`` false, as ``TransactionalMessageBridge.makeOpMessageInner`` sets it, so it waits only for DLedger's
  majority, which ignores ``WAIT``). The final message's status is the answer as ``sendFinalMessage`` maps it
  (:data:`_FINAL_ANSWERS`: FLUSH_DISK_TIMEOUT, FLUSH_SLAVE_TIMEOUT, SLAVE_NOT_AVAILABLE are SUCCESS;
  OS_PAGECACHE_BUSY, e.g. DLedger's quorum timeout, SYSTEM_ERROR "OS page cache busy, please try another
  machine"). Ours: the op message is appended right behind the final one, before the wait, where Java writes it only
  once that put returned OK. Both live in one log in order, so the op is kept only if the final message is; and a
  final message whose wait failed but which a majority holds later (DLedger) is not committed a second time by the
  check-back Java's order would lead to;
- a transaction whose op message is already in the check window (a second answer) is acknowledged, not redone; so
  is one the check service scanned past, unless it was discarded (moved to ``TRANS_CHECK_MAX_TIME_TOPIC``) and not
  ended since: Java leaves the half message in place, so a late COMMIT of it still publishes it, once;
- unknown (0): nothing, and no response even to a non-oneway request (Java returns null); any other value fails the
  header's check (``EndTransactionRequestHeader.checkFields``): SYSTEM_ERROR, before the role is looked at.

A slave answers SLAVE_NOT_AVAILABLE without a remark (the reason is logged). A DLedger member that just became the
leader waits until its check service rebuilt the bridge's view (``TransactionalMessageBridge.view_current``) first.
Each outcome but a producer's own COMMIT is logged as a warning with the request's remark (the exception that left
a transaction pending), as 4.9.8's ``processRequest`` logs it.
``rejectTransactionMessage`` refuses new half messages (the send processor) but not their end, as in RocketMQ's
``EndTransactionProcessor``: a transaction accepted earlier can still finish.
A final message the store refuses (disk full, shut down, not writable) is answered as ``sendFinalMessage`` maps its
put status (SERVICE_NOT_AVAILABLE "Service not available now.", MESSAGE_ILLEGAL, SYSTEM_ERROR), no op message
written; an op message it refuses is logged and the answer stays the final message's (SUCCESS for a rollback), as
4.9.8 ignores ``deletePrepareMessage``'s result: the check asks the producer again. The reason is logged. The
processor is stateless between requests.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Final

from processors.common import RequestRejected, parse_header
from processors.transaction_bridge import (
    PROPERTY_PRODUCER_GROUP,
    PROPERTY_REAL_TOPIC,
    TransactionalMessageBridge,
    origin_of,
)
from remoting.codec.codes import RequestCode, ResponseCode
from remoting.codec.command import RemotingCommand
from remoting.codec.headers.transaction import (
    TRANSACTION_COMMIT_TYPE,
    TRANSACTION_NOT_TYPE,
    TRANSACTION_ROLLBACK_TYPE,
    EndTransactionRequestHeader,
)
from remoting.codec.message import MessageExt
from remoting.processor import RequestContext
from store.errors import PutRefusedError
from store.results import PutStatus

if TYPE_CHECKING:
    from processors.context import BrokerContext

__all__ = ["EndTransactionProcessor"]

log = logging.getLogger(__name__)

_SLAVE: Final = "SLAVE"
_KINDS: Final = (TRANSACTION_NOT_TYPE, TRANSACTION_COMMIT_TYPE, TRANSACTION_ROLLBACK_TYPE)
_KIND_WRONG: Final = (
    "org.apache.rocketmq.remoting.exception.RemotingCommandException: commitOrRollback field wrong, "
    "org.apache.rocketmq.common.protocol.header.EndTransactionRequestHeader.checkFields("
    "EndTransactionRequestHeader.java:60)"
)
#: broker/src/main/java/org/apache/rocketmq/broker/processor/EndTransactionProcessor.java ``sendFinalMessage``: the
#: final message's put status as END_TRANSACTION's code and remark (statuses known only at append time are raised).
_FINAL_ANSWERS: Final = {
    PutStatus.PUT_OK: (ResponseCode.SUCCESS, None),
    PutStatus.FLUSH_DISK_TIMEOUT: (ResponseCode.SUCCESS, None),
    PutStatus.FLUSH_SLAVE_TIMEOUT: (ResponseCode.SUCCESS, None),
    PutStatus.SLAVE_NOT_AVAILABLE: (ResponseCode.SUCCESS, None),
    PutStatus.SERVICE_NOT_AVAILABLE: (ResponseCode.SERVICE_NOT_AVAILABLE, "Service not available now."),
    PutStatus.OS_PAGECACHE_BUSY: (ResponseCode.SYSTEM_ERROR, "OS page cache busy, please try another machine"),
    PutStatus.UNKNOWN_ERROR: (ResponseCode.SYSTEM_ERROR, "UNKNOWN_ERROR"),
}
_UNKNOWN_DEFAULT: Final = (ResponseCode.SYSTEM_ERROR, "UNKNOWN_ERROR DEFAULT")
#: The warning 4.9.8's EndTransactionProcessor.processRequest logs for an outcome, by whether a check brought it, with
#: the producer's address, the header and the remark (a local transaction's exception); a producer's own COMMIT: none.
_END_WARNINGS: Final = {
    (True, TRANSACTION_NOT_TYPE): "Check producer[%s] transaction state, but it's pending status. RequestHeader: %s",
    (True, TRANSACTION_COMMIT_TYPE): "Check producer[%s] transaction state, the producer commit the message. "
    "RequestHeader: %s",
    (True, TRANSACTION_ROLLBACK_TYPE): "Check producer[%s] transaction state, the producer rollback the message. "
    "RequestHeader: %s",
    (False, TRANSACTION_NOT_TYPE): "The producer[%s] end transaction in sending message, and it's pending status. "
    "RequestHeader: %s",
    (False, TRANSACTION_ROLLBACK_TYPE): "The producer[%s] end transaction in sending message, rollback the message. "
    "RequestHeader: %s",
}


class EndTransactionProcessor:
    """Serves END_TRANSACTION against ``broker.store`` through a :class:`TransactionalMessageBridge`."""

    REQUEST_CODES: Final = (RequestCode.END_TRANSACTION,)

    def __init__(self, broker: BrokerContext, bridge: TransactionalMessageBridge | None = None) -> None:
        self.broker = broker
        self.bridge = bridge or TransactionalMessageBridge(broker)

    async def process(self, ctx: RequestContext, request: RemotingCommand) -> RemotingCommand | None:
        try:
            header = _parsed_header(request)
        except RequestRejected as rejected:
            return self._refused(ctx, request, rejected)
        while True:
            if self.broker.config.broker_role == _SLAVE:
                # SLAVE_NOT_AVAILABLE with no remark, the reason only logged (EndTransactionProcessor.processRequest).
                log.warning("END_TRANSACTION from %s refused: this broker is a slave", ctx.remote_address)
                return None if request.is_oneway else request.response(ResponseCode.SLAVE_NOT_AVAILABLE)
            if self.bridge.view_current:
                break
            # Ours: a DLedger member that just became the leader answers from the check service's view once it has
            # rebuilt it from the log (the op messages, the copies left to scan), not from what it saw when it last
            # led (RocketMQ keeps no such view: broker/src/main/java/org/apache/rocketmq/broker/processor/
            # EndTransactionProcessor.java publishes every COMMIT whose half it finds).
            await self.bridge.view_changed()
        _log_end(ctx, request, header)
        try:
            answer = await self._end(request, header)
        except RequestRejected as rejected:
            return self._refused(ctx, request, rejected)
        return None if request.is_oneway else answer

    @staticmethod
    def _refused(ctx: RequestContext, request: RemotingCommand, rejected: RequestRejected) -> RemotingCommand | None:
        if request.is_oneway:
            log.warning("END_TRANSACTION from %s refused: %s", ctx.remote_address, rejected.remark)
            return None
        return rejected.to_response(request)

    async def _end(self, request: RemotingCommand, header: EndTransactionRequestHeader) -> RemotingCommand | None:
        kind = header.commit_or_rollback
        if kind == TRANSACTION_NOT_TYPE:
            # Unknown outcome: the check service will ask the producer later. No response even to a request that
            # waits for one: 4.9.8's EndTransactionProcessor.processRequest returns null for TRANSACTION_NOT_TYPE
            # (broker/src/main/java/org/apache/rocketmq/broker/processor/EndTransactionProcessor.java).
            return None
        half = self._verified_half(header)
        if origin_of(half) in self.bridge.resolved or self.bridge.ended_before(half):
            log.info("transaction %s of %s already ended: acknowledged again", header.msg_id, header.producer_group)
            return request.response(ResponseCode.SUCCESS)
        final = None
        if kind == TRANSACTION_COMMIT_TYPE:
            try:
                final = self.bridge.put_commit_message(half, TRANSACTION_COMMIT_TYPE)
            except PutRefusedError as exc:
                log.warning("transaction %s of %s: the committed message's put was refused: %s", header.msg_id,
                            header.producer_group, exc)  # fmt: skip
                return request.response(*_refusal_answer(exc, self.broker.store.config.max_message_size))
        op_end = self._put_op(half, header)
        status = await self._settled(final.end_offset if final is not None else None, _waits(half), op_end)
        code, remark = _FINAL_ANSWERS.get(status, _UNKNOWN_DEFAULT)
        if code != ResponseCode.SUCCESS:
            log.warning("transaction %s of %s: the committed message's put ended %s", header.msg_id,
                        header.producer_group, status.value)  # fmt: skip
        else:
            self._count_end(half, committed=final is not None)
        return request.response(code, remark)

    def _count_end(self, half: MessageExt, committed: bool) -> None:
        """``/metrics``' commit or rollback of the half's real topic, as 5.3.3's ``processRequest`` counts them: a
        commit once its message is stored (with its finish latency from the half's born time), a rollback once its
        half was verified (the op message's put is not looked at); either is one half message fewer."""
        topic = half.properties.get(PROPERTY_REAL_TOPIC) or half.topic
        ends, now_ms = self.broker.stats.transactions, self.broker.store.config.now_ms()
        if committed:
            ends.commit(topic, half.born_timestamp, now_ms)
        else:
            ends.rollback(topic)
        self.broker.half_messages.add(topic, -1, now_ms)

    def _put_op(self, half: MessageExt, header: EndTransactionRequestHeader) -> int | None:
        """Append the op message; its end offset, or ``None`` when the store refused it (logged): 4.9.8's
        ``deletePrepareMessage`` result is ignored, the answer is the final message's (SUCCESS for a rollback), and
        the check asks the producer again."""
        try:
            return self.bridge.put_op_message(half).end_offset
        except PutRefusedError as exc:
            log.warning("transaction %s of %s: the op message was not written (%s); it will be checked again",
                        header.msg_id, header.producer_group, exc)  # fmt: skip
            return None

    async def _settled(self, final_end: int | None, final_wait: bool, op_end: int | None) -> PutStatus:
        """The store's put waits of the final message (none on a rollback) and of the op message (none when it was
        refused), side by side as their puts would be; the final message's status (PUT_OK on a rollback: Java
        ignores the op's)."""
        # broker/src/main/java/org/apache/rocketmq/broker/transaction/queue/TransactionalMessageBridge.java
        # makeOpMessageInner: setWaitStoreMsgOK(false), so the op waits for no flush and no slave (DLedger's
        # majority, whatever WAIT, still).
        puts = [] if final_end is None else [(final_end, final_wait)]
        if op_end is not None:
            puts.append((op_end, False))
        if not puts:
            return PutStatus.PUT_OK
        statuses = await self.broker.store.put_waits.statuses(puts)
        return statuses[0] if final_end is not None else PutStatus.PUT_OK

    def _verified_half(self, header: EndTransactionRequestHeader) -> MessageExt:
        half = self.bridge.look_half(header.commit_log_offset)
        if half is None:
            raise RequestRejected(ResponseCode.SYSTEM_ERROR, "Find prepared transaction message failed")
        if half.properties.get(PROPERTY_PRODUCER_GROUP) != header.producer_group:
            raise RequestRejected(ResponseCode.SYSTEM_ERROR, "The producer group wrong")
        if half.queue_offset != header.tran_state_table_offset:
            raise RequestRejected(ResponseCode.SYSTEM_ERROR, "The transaction state table offset wrong")
        if half.commit_log_offset != header.commit_log_offset:
            raise RequestRejected(ResponseCode.SYSTEM_ERROR, "The commit log offset wrong")
        if not self.bridge.is_half_entry(header.tran_state_table_offset, header.commit_log_offset):
            # Ours: every field above comes from the record's own bytes, which a message body can forge (RocketMQ
            # 4.9.8 checks no more): its commit would publish anything to any topic.
            raise RequestRejected(ResponseCode.SYSTEM_ERROR, "Find prepared transaction message failed")
        return half


def _log_end(ctx: RequestContext, request: RemotingCommand, header: EndTransactionRequestHeader) -> None:
    """The warning of :data:`_END_WARNINGS` for this outcome, with the request's remark: where an operator reads why a
    transaction stays pending (the producer's or its check's exception)."""
    text = _END_WARNINGS.get((header.from_transaction_check, header.commit_or_rollback))
    if text is not None:
        addr = ctx.remote_address
        shown = f"{addr[0]}:{addr[1]}" if isinstance(addr, tuple) and len(addr) == 2 else str(addr)
        log.warning(text + " Remark: %s", shown, header, request.remark)


def _parsed_header(request: RemotingCommand) -> EndTransactionRequestHeader:
    """The request's header, checked as 4.9.8's ``decodeCommandCustomHeader`` does before the processor looks at the
    broker's role: a ``commitOrRollback`` other than 0, 8 or 12 fails ``EndTransactionRequestHeader.checkFields``,
    answered SYSTEM_ERROR with the exception's simple description (``NettyRemotingAbstract``,
    common/src/main/java/org/apache/rocketmq/common/protocol/header/EndTransactionRequestHeader.java)."""
    header = parse_header(EndTransactionRequestHeader, request)
    if header.commit_or_rollback not in _KINDS:
        raise RequestRejected(ResponseCode.SYSTEM_ERROR, _KIND_WRONG)
    return header


def _refusal_answer(exc: PutRefusedError, max_size: int) -> tuple[ResponseCode, str | None]:
    """The code and remark of a final message the store refused, as ``sendFinalMessage`` maps its put status."""
    status = exc.put_status
    if status in ("MESSAGE_ILLEGAL", "PROPERTIES_SIZE_EXCEEDED"):
        return ResponseCode.MESSAGE_ILLEGAL, (
            "The message is illegal, maybe msg body or properties length not matched. "
            f"msg body length limit {max_size}B, msg properties length limit 32KB."
        )
    if status == "CREATE_MAPPED_FILE_FAILED":
        return ResponseCode.SYSTEM_ERROR, "Create mapped file failed."
    member = PutStatus.__members__.get(status)
    return _UNKNOWN_DEFAULT if member is None else _FINAL_ANSWERS.get(member, _UNKNOWN_DEFAULT)


def _waits(half: MessageExt) -> bool:
    """The half message's ``WAIT`` as the committed copy keeps it (Message.isWaitStoreMsgOK: absent is true)."""
    raw = half.properties.get("WAIT")
    return raw is None or raw.lower() == "true"
