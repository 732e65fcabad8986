"""Transaction headers (docs/protocol.md#310-transaction-headers): END_TRANSACTION (producer -> broker) and
CHECK_TRANSACTION_STATE (broker -> producer)."""

from __future__ import annotations

import attrs

from remoting.codec.codes import RequestCode
from remoting.codec.headers.base import Header, wire

#: ``commitOrRollback`` values: the transaction bits of the message sysFlag (docs/protocol.md#52-message-sysflag).
TRANSACTION_NOT_TYPE = 0
TRANSACTION_PREPARED_TYPE = 0x4
TRANSACTION_COMMIT_TYPE = 0x8
TRANSACTION_ROLLBACK_TYPE = 0xC


@attrs.frozen(slots=True)
class EndTransactionRequestHeader(Header):
    """END_TRANSACTION (37), usually oneway. ``commit_or_rollback``: 0 unknown (ignored), 8 commit, 12 rollback.

    ``tran_state_table_offset`` is the half message's queue offset, ``commit_log_offset`` its physical offset and
    ``msg_id`` its UNIQ_KEY. The ``remark`` of the command may carry the local transaction's exception text.
    """

    REQUEST_CODES = (RequestCode.END_TRANSACTION,)

    producer_group: str = attrs.field(metadata=wire("producerGroup"))
    tran_state_table_offset: int = attrs.field(metadata=wire("tranStateTableOffset"))
    commit_log_offset: int = attrs.field(metadata=wire("commitLogOffset"))
    commit_or_rollback: int = attrs.field(metadata=wire("commitOrRollback", int32=True))
    msg_id: str = attrs.field(metadata=wire("msgId"))
    from_transaction_check: bool = attrs.field(default=False, metadata=wire("fromTransactionCheck"))
    transaction_id: str | None = attrs.field(default=None, metadata=wire("transactionId"))
    bname: str | None = attrs.field(default=None, metadata=wire("bname"))


@attrs.frozen(slots=True)
class CheckTransactionStateRequestHeader(Header):
    """CHECK_TRANSACTION_STATE (39), broker -> producer, oneway; the body is the half message re-encoded."""

    REQUEST_CODES = (RequestCode.CHECK_TRANSACTION_STATE,)

    tran_state_table_offset: int = attrs.field(metadata=wire("tranStateTableOffset"))
    commit_log_offset: int = attrs.field(metadata=wire("commitLogOffset"))
    msg_id: str | None = attrs.field(default=None, metadata=wire("msgId"))
    transaction_id: str | None = attrs.field(default=None, metadata=wire("transactionId"))
    offset_msg_id: str | None = attrs.field(default=None, metadata=wire("offsetMsgId"))
    bname: str | None = attrs.field(default=None, metadata=wire("bname"))
