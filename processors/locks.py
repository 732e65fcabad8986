"""LOCK_BATCH_MQ (41) and UNLOCK_BATCH_MQ (42): queue locks for orderly consumers
(docs/protocol.md#311-queue-lock-requests).

Lock answers SUCCESS with ``{"lockOKMQSet": [...]}``: the queues the caller holds after the request (newly locked or
refreshed). Unlock answers SUCCESS (no answer when sent oneway) and releases only the caller's locks. The semantics
live in :class:`~broker.rebalance_locks.RebalanceLockManager`. A body that does not decode answers SYSTEM_ERROR.
"""

from __future__ import annotations

from typing import Final

from processors.context import BrokerContext
from remoting.codec.bodies import LockBatchRequestBody, LockBatchResponseBody, UnlockBatchRequestBody
from remoting.codec.codes import RequestCode, ResponseCode
from remoting.codec.command import RemotingCommand
from remoting.codec.errors import CodecError
from remoting.dispatch import not_supported_remark
from remoting.processor import RequestContext

REQUEST_CODES: Final = (RequestCode.LOCK_BATCH_MQ, RequestCode.UNLOCK_BATCH_MQ)


class LockBatchProcessor:
    """Serves :data:`REQUEST_CODES` against the broker's rebalance lock manager."""

    REQUEST_CODES = REQUEST_CODES

    def __init__(self, broker: BrokerContext) -> None:
        self.broker = broker

    async def process(self, ctx: RequestContext, request: RemotingCommand) -> RemotingCommand | None:
        locks = self.broker.locks
        try:
            if request.code == RequestCode.LOCK_BATCH_MQ:
                body = LockBatchRequestBody.decode(request.body)
                granted = locks.try_lock_batch(body.consumer_group, body.mq_set, body.client_id)
                return request.response(ResponseCode.SUCCESS, body=LockBatchResponseBody(frozenset(granted)).encode())
            if request.code == RequestCode.UNLOCK_BATCH_MQ:
                body = UnlockBatchRequestBody.decode(request.body)
                locks.unlock_batch(body.consumer_group, body.mq_set, body.client_id)
                return request.response(ResponseCode.SUCCESS)
        except CodecError as exc:
            return request.response(ResponseCode.SYSTEM_ERROR, str(exc))
        return request.response(ResponseCode.REQUEST_CODE_NOT_SUPPORTED, not_supported_remark(request.code))
