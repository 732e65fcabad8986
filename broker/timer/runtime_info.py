"""The admin view of delayed and timer messages: GET_BROKER_RUNTIME_INFO (28) answered by the admin processor, with
Java's ``scheduleMessageOffset_<level>`` entries (``"<delivered offset>,<max offset>"``, for the levels of the offset
table) and the timer's figures added to its table: RocketMQ 5.3's ``timerReadBehind`` (seconds),
``timerOffsetBehind``, ``timerCongestNum``, ``timerEnqueueTps`` and ``timerDequeueTps``, and ours,
``timerPendingCount``, ``timerDeliveredCount`` and ``timerRolledCount``. ``mqadmin brokerStatus`` /
:meth:`client.admin.Admin.broker_status` show them.

A wrapper rather than an edit of the admin processor: it owns no state, and an answer that is not SUCCESS (or whose
body does not decode) is passed through unchanged.
"""

from __future__ import annotations

from broker.schedule import ScheduleMessageService
from broker.timer.service import TimerMessageService
from remoting.codec.bodies import KVTable
from remoting.codec.codes import ResponseCode
from remoting.codec.command import RemotingCommand
from remoting.codec.errors import CodecError
from remoting.codec.topics import SCHEDULE_TOPIC
from remoting.processor import Processor, RequestContext

__all__ = ["RuntimeInfoProcessor"]


class RuntimeInfoProcessor:
    """Serves GET_BROKER_RUNTIME_INFO through ``admin`` and adds the delay and timer entries."""

    def __init__(self, admin: Processor, schedule: ScheduleMessageService, timer: TimerMessageService) -> None:
        self.admin = admin
        self.schedule = schedule
        self.timer = timer

    async def process(self, ctx: RequestContext, request: RemotingCommand) -> RemotingCommand | None:
        response = await self.admin.process(ctx, request)
        if response is None or response.code != ResponseCode.SUCCESS or not response.body:
            return response
        try:
            table = KVTable.decode(response.body).table
        except CodecError:
            return response
        table.update(self.entries())
        return request.response(
            ResponseCode.SUCCESS, response.remark, dict(response.ext_fields), KVTable(table).encode()
        )

    def entries(self) -> dict[str, str]:
        schedule = self.schedule
        entries = {}
        # The levels of the offset table only (delivered or read from delayOffset.json, configured or not): 4.9.8's
        # ScheduleMessageService.buildRunningStats (store/src/main/java/org/apache/rocketmq/store/schedule/
        # ScheduleMessageService.java).
        for level, offset in sorted(schedule.offsets.items()):
            max_offset = schedule.store.max_offset_in_queue(SCHEDULE_TOPIC, level - 1)
            entries[f"scheduleMessageOffset_{level}"] = f"{offset},{max_offset}"
        entries.update(self.timer.stats())
        return entries
