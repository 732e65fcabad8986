"""GET_TIMER_CHECK_POINT (60, RocketMQ 5's ``AdminBrokerProcessor.getTimerCheckPoint``): the timer's confirmed
progress, which a slave's sync copies (:mod:`broker.slave_sync`) so that a DLedger follower that becomes the leader
resumes the timer near where the old leader was (:class:`~broker.timer.service.TimerMessageService`).

The answer is SUCCESS with the 56-byte checkpoint body (``lastReadTimeMs`` = the confirmed read time,
``lastTimerQueueOffset`` = ``masterTimerQueueOffset`` = the confirmed filing offset), or SYSTEM_ERROR "The checkpoint
is null" while the timer does not run (a slave), as Java answers without a checkpoint.

GET_TIMER_METRICS (61, ``AdminBrokerProcessor.getTimerMetrics``): SUCCESS with the timer's per-topic counts as
TimerMetrics' JSON (:meth:`~broker.timer.service.TimerMessageService.metrics_body`), or SYSTEM_ERROR "The timer
message store is null" when ``timerWheelEnable`` was false at the timer's start.
"""

from __future__ import annotations

from typing import Final

from broker.timer.service import TimerMessageService
from remoting.codec.bodies.timer_checkpoint import TimerCheckpointBody
from remoting.codec.codes import RequestCode, ResponseCode
from remoting.codec.command import RemotingCommand
from remoting.processor import RequestContext

__all__ = ["TimerCheckpointProcessor"]


class TimerCheckpointProcessor:
    """Serves :attr:`REQUEST_CODES` from ``timer`` on the admin pool."""

    REQUEST_CODES: Final = (RequestCode.GET_TIMER_CHECK_POINT, RequestCode.GET_TIMER_METRICS)

    def __init__(self, timer: TimerMessageService) -> None:
        self.timer = timer

    async def process(self, ctx: RequestContext, request: RemotingCommand) -> RemotingCommand | None:
        if request.code == RequestCode.GET_TIMER_METRICS:
            metrics = self.timer.metrics_body()
            if metrics is None:
                return request.response(ResponseCode.SYSTEM_ERROR, "The timer message store is null")
            return request.response(ResponseCode.SUCCESS, body=metrics)
        checkpoint = self.timer.export_checkpoint()
        if checkpoint is None:
            return request.response(ResponseCode.SYSTEM_ERROR, "The checkpoint is null")
        offset, read_ms = checkpoint
        body = TimerCheckpointBody(read_ms, self.timer.timers.log.end, offset, offset)
        return request.response(ResponseCode.SUCCESS, body=body.encode())
