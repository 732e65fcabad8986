"""Transactional messages with check-back (docs/protocol.md#78-transactions): the half/op topic bridge and the check
service.

- :class:`TransactionalMessageBridge` (:mod:`processors.transaction_bridge`, shared with END_TRANSACTION): half-message
  lookup, commit/op/renewal/discard appends and the check progress kept as ``CID_RMQ_SYS_TRANS`` offsets;
- :class:`TransactionCheckService` (:mod:`.check`): every ``transactionCheckInterval`` asks a live producer of the
  group about half messages older than ``transactionTimeOut``, discarding them after ``transactionCheckMax`` checks.

END_TRANSACTION itself is served by :class:`processors.end_transaction.EndTransactionProcessor`.
"""

from broker.transaction.check import CheckRound, TransactionCheckService
from processors.transaction_bridge import TRANS_SYS_GROUP, TransactionalMessageBridge

__all__ = ["TRANS_SYS_GROUP", "CheckRound", "TransactionCheckService", "TransactionalMessageBridge"]
