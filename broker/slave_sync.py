"""``SlaveSynchronize``: a slave copies its master's metadata, as RocketMQ's ``SlaveSynchronize`` does: first after 3 s,
then every 10 s at a fixed rate (a slow round does not push the next ones back; a DLedger member that becomes a follower
starts that schedule again), four requests with RocketMQ's codes (and two more, the last below), each skipped while the
master's address is unknown (the registration hands it over: ``masterAddr`` of the REGISTER_BROKER answer) or is the
slave's own.

- topics: GET_ALL_TOPIC_CONFIG (21); the table is replaced, with its data version, when the version differs.
  RocketMQ asks the master's VIP channel (``port - 2``) for this one; we ask its main port, as for the others: a
  master may have no fast channel (a listen port of 0, or ``port - 2`` taken), and then whatever else holds
  ``port - 2`` would answer, another broker with its own table even (the admin pool serves both ports alike);
- consumer offsets: GET_ALL_CONSUMER_OFFSET (43); merged, each ``topic@group`` of the master replacing the slave's,
  and saved to ``consumerOffset.json`` at once;
- delay offsets: GET_ALL_DELAY_OFFSET (45); the delay schedule's progress replaced and saved to ``delayOffset.json``;
- subscription groups: GET_ALL_SUBSCRIPTIONGROUP_CONFIG (201); replaced when the data version differs;
- with a timer service, its progress: GET_TIMER_CHECK_POINT (60, RocketMQ 5's ``syncTimerCheckPoint``), written to
  ``timerCheck.json`` for the next start, over whatever it held, an unreadable file included
  (:meth:`~broker.timer.service.TimerMessageService.adopt_checkpoint`); a master that does not know the code (a 4.x
  broker) answers REQUEST_CODE_NOT_SUPPORTED, logged once; then its counts: GET_TIMER_METRICS (61, 5.3.3's
  ``syncTimerMetrics``), taken when their data version differs, for the slave's own GET_TIMER_METRICS answer
  (:meth:`~broker.timer.service.TimerMessageService.adopt_metrics`);
- ours, not RocketMQ's: the master's ``commitLogMaxOffset`` from GET_BROKER_RUNTIME_INFO (28), for the slave's own
  lag in its runtime info (:meth:`~store.ha.service.HAService.note_master_offset`; the HA stream alone shows the
  master's end only as far as it has sent it).

Bodies are the config files' JSON (docs/protocol.md#67-config-files). A step that fails (no answer, an error code, a
body that does not decode, or anything it raises: a bug) is logged and skipped until the next round; the others
still run, and the slave keeps what it has (RocketMQ's steps each catch ``Exception``). The requests are not signed,
as RocketMQ's ``BrokerOuterAPI`` without a client RPC hook: a master with ``aclEnable`` answers them only when its
``globalWhiteRemoteAddresses`` match this broker's address (an ACL refusal is logged with that hint). A round stops,
and an answer still on its way is dropped, once the broker is no longer a slave of the round's master (a DLedger
member that became the leader, or learned another master: :meth:`SlaveSynchronize._follows`).
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Final, TypeVar

import trio

from broker.context import BrokerState
from broker.schedule import ScheduleMessageService
from broker.timer.service import TimerMessageService
from remoting.client import RemotingClient
from remoting.codec.bodies import KVTable
from remoting.codec.bodies.timer_checkpoint import TimerCheckpointBody
from remoting.codec.codes import RequestCode, ResponseCode
from remoting.codec.command import request
from remoting.codec.errors import CodecError
from remoting.errors import RemotingError
from store.metadata_files import (
    ConfigFileError,
    decode_consumer_offsets,
    decode_delay_offsets,
    decode_subscription_groups,
    decode_topics,
)

log = logging.getLogger(__name__)

T = TypeVar("T")
FIRST_DELAY: Final = 3.0
INTERVAL: Final = 10.0
TIMEOUT: Final = 3.0
ACL_HINT: Final = " (the master's ACL refused it: list this broker's address in its globalWhiteRemoteAddresses)"


def _commit_log_max_offset(body: bytes) -> int:
    """``commitLogMaxOffset`` of a runtime-info body; raises ConfigFileError when it has none."""
    try:
        return int(KVTable.decode(body).table["commitLogMaxOffset"])
    except (CodecError, KeyError, ValueError) as exc:
        raise ConfigFileError(f"runtime info without a commitLogMaxOffset: {exc!r}") from exc


class SlaveSynchronize:
    """See the module docstring. ``master_addr`` is set by the registration (``None``: skip every step)."""

    def __init__(
        self,
        broker: BrokerState,
        client: RemotingClient,
        schedule: ScheduleMessageService,
        *,
        timer: TimerMessageService | None = None,
        interval: float = INTERVAL,
        first_delay: float = FIRST_DELAY,
    ) -> None:
        self.broker = broker
        self.client = client
        self.schedule = schedule
        self.timer = timer
        self._timer_unsupported = False
        self.master_addr: str | None = None
        self.interval = interval
        self.first_delay = first_delay
        self.rounds = 0
        #: Trio time at which the last complete round began: what this slave knows is at least that recent.
        self.last_round_started: float | None = None
        #: the wait for the next round; its deadline is when that round is due
        self._next = trio.CancelScope()

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        """Rounds at a fixed rate, as RocketMQ's ``BrokerController.handleSlaveSynchronize``
        (broker/src/main/java/org/apache/rocketmq/broker/BrokerController.java) schedules ``syncAll`` with
        ``scheduleAtFixedRate``: ``first_delay`` after start, then every ``interval`` from there, whatever a round
        took; a round longer than the interval is followed at once by the next, never overlapped. :meth:`restart`
        starts the schedule again."""
        task_status.started()
        self._next.deadline = trio.current_time() + self.first_delay
        while True:
            with self._next:
                await trio.sleep_forever()
            self._next = trio.CancelScope(deadline=self._next.deadline + self.interval)
            await self.sync_all()

    def restart(self) -> None:
        """Schedule the rounds again: the next one ``first_delay`` from now, then every ``interval``, as a DLedger
        member's ``changeToSlave`` does (``BrokerController.handleSlaveSynchronize`` cancels the schedule and makes
        a new one). A round under way goes on (it stops at its next step once the master's address changed)."""
        self._next.deadline = trio.current_time() + self.first_delay

    async def sync_all(self) -> None:
        """One round of the steps (each skipped without a master address, or while this broker is not a slave:
        a DLedger member that became the master stops syncing, as RocketMQ's changeToMaster does). A step that
        raises is logged and the next one runs, as each of RocketMQ's ``syncXxx`` catches ``Exception``."""
        addr = self.master_addr
        if not addr or addr == self.broker.broker_addr or not self._follows(addr):
            return
        started = trio.current_time()
        steps = (self._sync_topics, self._sync_offsets, self._sync_delay_offsets, self._sync_groups, self._sync_timer,
                 self._sync_master_offset)  # fmt: skip
        for step in steps:
            if not self._follows(addr):
                log.info("slave sync: %s is no longer this broker's master: the round stops", addr)
                return
            try:
                await step(addr)
            except Exception:  # whatever a step raises must not end the slave broker
                log.exception("slave sync: %s from %s failed", step.__name__.lstrip("_"), addr)
        self.rounds += 1
        self.last_round_started = started

    def _follows(self, addr: str) -> bool:
        """This broker is still a slave of ``addr``. RocketMQ's ``SlaveSynchronize``
        (broker/src/main/java/org/apache/rocketmq/broker/slave/SlaveSynchronize.java) reads ``masterAddr`` again at
        each step, and a DLedger member's ``changeToMaster`` / ``changeToSlave`` set it to null first
        (``BrokerController.handleSlaveSynchronize``): a round under way when the member became the leader copies
        nothing more, so the old leader's tables (consumer offsets, the revive queue's progress among them) never
        overwrite what was committed to the new one. Ours, also checked when an answer arrives: one in flight at
        the change is dropped too."""
        return self.master_addr == addr and self.broker.config.broker_role == "SLAVE"

    async def _sync_topics(self, addr: str) -> None:
        topics = await self._fetch(addr, RequestCode.GET_ALL_TOPIC_CONFIG, decode_topics)
        if topics is not None and self.broker.topics.replace_all(topics):
            log.info("slave synchronized topics from %s: version %s", addr, topics.data_version)

    async def _sync_offsets(self, addr: str) -> None:
        """Merged, then saved at once, as RocketMQ's ``SlaveSynchronize.syncConsumerOffset``
        (broker/src/main/java/org/apache/rocketmq/broker/slave/SlaveSynchronize.java) persists right after its
        ``putAll``: a slave killed before its periodic flush restarts with the master's offsets. A round that
        changed nothing writes nothing."""
        offsets = await self._fetch(addr, RequestCode.GET_ALL_CONSUMER_OFFSET, decode_consumer_offsets)
        if offsets is not None and self.broker.offsets.merge(offsets):
            try:
                await self.broker.offsets.persist()
            except OSError:
                log.exception("slave sync: saving consumerOffset.json failed")

    async def _sync_delay_offsets(self, addr: str) -> None:
        delays = await self._fetch(addr, RequestCode.GET_ALL_DELAY_OFFSET, decode_delay_offsets)
        if delays is not None:
            self.schedule.adopt_offsets(delays)
            try:
                await self.schedule.persist()
            except OSError:
                log.exception("slave sync: saving delayOffset.json failed")

    async def _sync_groups(self, addr: str) -> None:
        groups = await self._fetch(addr, RequestCode.GET_ALL_SUBSCRIPTIONGROUP_CONFIG, decode_subscription_groups)
        if groups is not None and self.broker.groups.replace_all(groups):
            log.info("slave synchronized subscription groups from %s: version %s", addr, groups.data_version)

    async def _sync_master_offset(self, addr: str) -> None:
        master_max = await self._fetch(addr, RequestCode.GET_BROKER_RUNTIME_INFO, _commit_log_max_offset)
        if master_max is not None:
            self.broker.store.ha.note_master_offset(master_max)

    async def _sync_timer(self, addr: str) -> None:
        """With a timer service, unless the master said it has none."""
        timer = self.timer
        if timer is None or self._timer_unsupported:
            return
        try:
            response = await self.client.invoke(addr, request(RequestCode.GET_TIMER_CHECK_POINT), TIMEOUT)
        except RemotingError as exc:
            log.warning("slave sync: request %d to %s failed: %s", RequestCode.GET_TIMER_CHECK_POINT, addr, exc)
            return
        if not self._follows(addr):
            return
        if response.code == ResponseCode.REQUEST_CODE_NOT_SUPPORTED:
            log.info("slave sync: %s has no timer checkpoint (not a RocketMQ 5 broker); not asked again", addr)
            self._timer_unsupported = True
            return
        if response.code != ResponseCode.SUCCESS:
            log.debug("slave sync: timer checkpoint of %s: %d %s", addr, response.code, response.remark)
            return
        try:
            body = TimerCheckpointBody.decode(bytes(response.body or b""))
            await timer.adopt_checkpoint(body.master_timer_queue_offset, body.last_read_time_ms)
        except (CodecError, OSError) as exc:
            log.warning("slave sync: timer checkpoint of %s not adopted: %s", addr, exc)
        await self._sync_timer_metrics(addr, timer)

    async def _sync_timer_metrics(self, addr: str, timer: TimerMessageService) -> None:
        """The master's timer counts (RocketMQ 5.3.3's ``syncTimerMetrics``); a master whose timer is off (SYSTEM_ERROR)
        is skipped, logged."""
        body = await self._fetch(addr, RequestCode.GET_TIMER_METRICS, bytes)
        if body is None:
            return
        try:
            timer.adopt_metrics(body)
        except (ValueError, KeyError, TypeError) as exc:
            log.warning("slave sync: timer metrics of %s not adopted: %s", addr, exc)

    async def _fetch(self, addr: str, code: int, decode: Callable[[bytes], T]) -> T | None:
        """One request's decoded body, or ``None`` (logged) when it failed."""
        try:
            response = await self.client.invoke(addr, request(code), TIMEOUT)
        except RemotingError as exc:
            log.warning("slave sync: request %d to %s failed: %s", code, addr, exc)
            return None
        if not self._follows(addr):
            log.info("slave sync: the answer of %s to request %d came after it stopped being the master", addr, code)
            return None
        if response.code != ResponseCode.SUCCESS:
            remark = response.remark or ""
            hint = ACL_HINT if "AclException" in remark else ""
            log.warning("slave sync: request %d to %s answered %d %s%s", code, addr, response.code, remark, hint)
            return None
        try:
            return decode(bytes(response.body or b""))
        except ConfigFileError as exc:
            log.warning("slave sync: request %d to %s: %s", code, addr, exc)
            return None
