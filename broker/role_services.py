"""``RoleServices``: the services only a master runs (the delay-level schedule, the timer, the transaction
check-back), started when the broker is or becomes a master and stopped when it becomes a slave, as RocketMQ
4.9.8's ``BrokerController.changeToMaster`` / ``changeToSlave``
(``broker/src/main/java/org/apache/rocketmq/broker/BrokerController.java``: ``handleScheduleMessageService``,
``startProcessorByHa`` / ``shutdownProcessorByHa``) do for a DLedger member
(``broker/.../dledger/DLedgerRoleChangeHandler.java``).

The role is read from the broker's live config (``brokerRole``); :meth:`RoleServices.role_changed` (called by
:func:`broker.dledger_mode.follow_roles` after each change) makes :meth:`RoleServices.run` compare it with what
runs and start or stop the three services (a member that stepped down and led again before the comparison: stopped
and started again). Stopping cancels them and waits until they have saved their progress
(``delayOffset.json``, ``timerCheck.json``); starting reloads it, so a new leader resumes from what the slave sync
last copied. A classic broker's role never changes: a master runs them for its life, a slave never does.

On a slave the schedule's offsets are loaded once (the admin view and GET_ALL_DELAY_OFFSET read them). A service
that fails to start (an unreadable progress file: ConfigFileError, StoreCorruptError, OSError) fails :meth:`run`,
and with it the broker, loudly, at start or at a role change alike.
"""

from __future__ import annotations

import functools
import logging

import trio

from broker.context import BrokerState
from broker.schedule import ScheduleMessageService
from broker.timer.service import TimerMessageService
from broker.transaction import TransactionCheckService

__all__ = ["RoleServices"]

log = logging.getLogger(__name__)


class RoleServices:
    """Runs ``schedule``, ``timer`` and ``transaction_check`` while ``broker`` is a master; see the module
    docstring. ``starts`` counts the times they were started (tests, logs)."""

    def __init__(
        self,
        broker: BrokerState,
        schedule: ScheduleMessageService,
        timer: TimerMessageService,
        transaction_check: TransactionCheckService,
    ) -> None:
        self.broker = broker
        self.schedule = schedule
        self.timer = timer
        self.transaction_check = transaction_check
        self.starts = 0
        self._changed = trio.Event()
        self._running: tuple[trio.CancelScope, trio.Event] | None = None

    @property
    def running(self) -> bool:
        return self._running is not None

    def role_changed(self) -> None:
        """The broker's role changed: reconcile. Never blocks. END_TRANSACTION waits from now until the transaction
        check service has rebuilt its view for the new role (a member that leads again would otherwise answer from
        what it saw when it last led: a COMMIT of a transaction another leader renewed since acknowledged and not
        stored, or a repeated one another leader already stored committed twice)."""
        self.transaction_check.bridge.forget_view()
        self._changed.set()

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        async with trio.open_nursery() as nursery:
            try:
                if self._is_master():
                    await self._start(nursery)
                else:
                    await trio.to_thread.run_sync(self.schedule.load)
                task_status.started()
                while True:
                    await self._changed.wait()
                    self._changed = trio.Event()
                    if self._is_master() and self._running is None:
                        await self._start(nursery)
                    elif not self._is_master() and self._running is not None:
                        await self._stop()
                    elif self._is_master() and not self.transaction_check.bridge.view_current:
                        # It stepped down and led again before this loop looked: start afresh from what it copied
                        # as a follower, as changeToSlave then changeToMaster would
                        # (broker/src/main/java/org/apache/rocketmq/broker/BrokerController.java).
                        await self._stop()
                        await self._start(nursery)
            finally:
                if self._running is not None:
                    self._running[0].cancel()

    def _is_master(self) -> bool:
        return self.broker.config.broker_role != "SLAVE"

    async def _start(self, nursery: trio.Nursery) -> None:
        scope, done = trio.CancelScope(), trio.Event()
        await nursery.start(self._services, scope, done)
        self._running = (scope, done)
        self.starts += 1
        log.info("broker %s: schedule, timer and transaction check started", self.broker.config.broker_name)

    async def _stop(self) -> None:
        assert self._running is not None
        scope, done = self._running
        self._running = None
        scope.cancel()
        await done.wait()
        log.info("broker %s: schedule, timer and transaction check stopped", self.broker.config.broker_name)

    async def _services(
        self,
        scope: trio.CancelScope,
        done: trio.Event,
        *,
        task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED,
    ) -> None:
        try:
            with scope:
                async with trio.open_nursery() as nursery:
                    # The check service's view first: END_TRANSACTION waits for it after a role change (and for
                    # nothing else), so it must not wait for the schedule's and the timer's loads too (a crash
                    # rebuild of a big timer backlog). 4.9.8's changeToMaster starts the check thread without
                    # waiting for it or for anything else (broker/src/main/java/org/apache/rocketmq/broker/
                    # BrokerController.java startProcessorByHa), and its EndTransactionProcessor waits for nothing.
                    # Its rounds start last, as before, once the schedule and the timer run.
                    await self.transaction_check.rebuild_view()
                    await nursery.start(self.schedule.run)
                    await nursery.start(self.timer.run)
                    await nursery.start(functools.partial(self.transaction_check.run, view_rebuilt=True))
                    task_status.started()
        finally:
            done.set()
