"""Auto-renewed invisibility for push consumers (RocketMQ's proxy/src/main/java/org/apache/rocketmq/proxy/service/
receipt/DefaultReceiptHandleManager.java).

A push consumer receives with ``auto_renew`` and no invisible time; its listener may run longer than the 60 s the
message is first hidden for. :class:`RenewTable` keeps each handle it handed out, by ``(client id, group, message id,
handle)`` (as RocketMQ's ReceiptHandleGroup: a send the client retried is stored twice under one message id), and a
loop every ``renewSchedulePeriodMillis`` extends the ones due within ``renewAheadTimeMillis`` by the next renew step
(1 m, 3 m, 5 m, 10 m, 30 m, then 1 h each time). After ``renewMaxTimeMillis`` of renewing it stops and makes the
message visible after the group's retry delay for its attempt; when the client is gone its messages become visible
after ``invisibleTimeMillisWhenClear``, and so do all of them when the proxy stops. Ack, ChangeInvisibleDuration
and ForwardMessageToDeadLetterQueue :meth:`~RenewTable.take` the entry and act on the latest handle, since the client
still holds the first one.

The table lives on the Trio thread. A renewal's new handle is adopted only once its change of invisibility landed
(:meth:`PopService.change_landed`: in DLedger mode its new CK committed by a quorum), as startRenewMessage adopts
only an OK answer. A renewal refused by the pop service (the handle expired, the topic is gone) drops the entry; one
the store refuses (a full disk, the timer's limit) or that did not land keeps the old handle for the next scan, up to
``maxRenewRetryTimes`` failures in a row (then it is dropped, as DefaultReceiptHandleManager does), and a release it
refuses is logged (the message becomes visible when its handle says); nothing here raises. While a renewal waits
for its change, the entry is locked as ReceiptHandleGroup locks a handle: an ack, change or forward of it waits
(:meth:`~RenewTable.settled`), a release or a nack is done once the renewal is over, on the handle it left.
"""

from __future__ import annotations

import logging
from typing import Final

import attrs
import trio

from broker.pop import AckOutcome, PopService, ReceiptHandle
from processors.client_channels import ClientChannelInfo
from processors.common import RequestRejected
from proxy.config import ProxyConfig
from proxy.sessions import GrpcClientChannel, SessionTable
from remoting.codec.bodies.broker_metadata import SubscriptionGroupConfig
from remoting.ratelog import RateLimitedLog
from store.errors import PutRefusedError

__all__ = ["RENEW_STEPS_MS", "RenewTable"]

#: RocketMQ's RenewStrategyPolicy: the invisible time of the n-th renewal, the last one repeated.
RENEW_STEPS_MS: Final = (60_000, 180_000, 300_000, 600_000, 1_800_000, 3_600_000)
#: Ours: handles kept at most; beyond it a receive is not renewed (it keeps its first invisible time).
MAX_HELD: Final = 100_000
#: client id, group, message id, and the handle the client was given
_Key = tuple[str, str, str, str]

log = logging.getLogger(__name__)
_refusals = RateLimitedLog(log)


@attrs.define
class _Held:
    topic: str
    handle: ReceiptHandle
    received_ms: int
    attempt: int
    renewals: int = 0
    #: renewals refused in a row (reset by one that succeeds)
    retries: int = 0
    #: set while a renewal waits for its change to land (ReceiptHandleGroup.HandleData's lock)
    renewing: trio.Event | None = None
    #: the new handle of the renewal in flight
    pending: ReceiptHandle | None = None
    #: the invisible time of a release asked for while a renewal was in flight, done once it is over
    release_ms: int | None = None


def _retry_delay_ms(group: SubscriptionGroupConfig | None, attempt: int) -> int:
    """The group's retry delay after delivery ``attempt``: its groupRetryPolicy's nextDelayDuration of the message's
    reconsumeTimes (``attempt - 1``), as DefaultReceiptHandleManager takes it; the default CustomizedRetryPolicy reads
    its table at reconsumeTimes + 2 (10 s after the first)."""
    policy = (group or SubscriptionGroupConfig("")).retry_policy
    return policy.next_delay_ms(attempt - 1)


def _adopt(held: _Held, renewed: ReceiptHandle) -> None:
    held.handle, held.renewals, held.retries = renewed, held.renewals + 1, 0


class RenewTable:
    """The handles of auto-renew receives still in the client's hands. See the module docstring."""

    def __init__(self, pop: PopService, sessions: SessionTable, config: ProxyConfig) -> None:
        self.pop = pop
        self.sessions = sessions
        self.config = config
        self.held: dict[_Key, _Held] = {}
        sessions.broker.clients.consumer_unregister_listeners.append(self._consumer_unregistered)

    def add(self, client_id: str, group: str, topic: str, message_id: str, handle: ReceiptHandle, attempt: int) -> None:
        if len(self.held) < MAX_HELD:
            held = _Held(topic, handle, self.pop.now_ms(), attempt)
            self.held[(client_id, group, message_id, handle.encode())] = held

    def take(self, client_id: str, group: str, message_id: str, handle_text: str) -> str:
        """The handle to act on for what the client sent: the latest renewal of ``handle_text`` when this table holds
        it (and it forgets it), else ``handle_text`` itself. Await :meth:`settled` first: a renewal in flight has not
        decided which handle that is."""
        held = self.held.pop((client_id, group, message_id, handle_text), None)
        return handle_text if held is None else held.handle.encode()

    async def settled(self, client_id: str, group: str, handles: list[tuple[str, str]]) -> None:
        """Wait until no renewal of these ``(message id, handle)`` is in flight, as an ack, a change or a forward
        waits for ReceiptHandleGroup's per-handle lock in removeReceiptHandle (proxy/src/main/java/org/apache/
        rocketmq/proxy/common/ReceiptHandleGroup.java): at most :data:`~broker.pop.service.CHANGE_WAIT_S` each."""
        while (renewing := self._renewing(client_id, group, handles)) is not None:
            await renewing.wait()

    def _renewing(self, client_id: str, group: str, handles: list[tuple[str, str]]) -> trio.Event | None:
        for message_id, text in handles:
            held = self.held.get((client_id, group, message_id, text))
            if held is not None and held.renewing is not None:
                return held.renewing
        return None

    def nack(self, client_id: str, group: str, message_id: str, handle_text: str, invisible_ms: int) -> str | None:
        """The handle to make visible after ``invisible_ms`` for what the client was sent (as :meth:`take`), or
        ``None`` when a renewal of it is in flight: the renewal makes the handle it leaves visible so, once over."""
        held = self.held.get((client_id, group, message_id, handle_text))
        if held is not None and held.renewing is not None:
            held.release_ms = invisible_ms
            return None
        return self.take(client_id, group, message_id, handle_text)

    def release_group(self, client_id: str, group: str) -> None:
        """The consumer ``client_id`` of ``group`` unregistered (NotifyClientTermination): its handles of that group
        are released now, visible after ``invisibleTimeMillisWhenClear``, as DefaultReceiptHandleManager's
        CLIENT_UNREGISTER listener clears its ReceiptHandleGroup at once (proxy/src/main/java/org/apache/rocketmq/
        proxy/service/receipt/DefaultReceiptHandleManager.java)."""
        for key, held in list(self.held.items()):
            if key[0] == client_id and key[1] == group:
                self._release(key, held, self.config.invisible_time_millis_when_clear)

    def _consumer_unregistered(self, group: str, info: ClientChannelInfo) -> None:
        """The client registry dropped a consumer from ``group`` (NotifyClientTermination, its registration expired
        after channelExpiredTimeout without a heartbeat): a gRPC client's handles of that group are released now, as
        DefaultReceiptHandleManager's CLIENT_UNREGISTER listener clears the (channel, group)'s ReceiptHandleGroup at
        once (proxy/src/main/java/org/apache/rocketmq/proxy/service/receipt/DefaultReceiptHandleManager.java), not
        at the next renew scan."""
        if isinstance(info.connection, GrpcClientChannel):
            self.release_group(info.client_id, group)

    def _offline(self, client_id: str) -> bool:
        session = self.sessions.sessions.get(client_id)
        return session is None or session.channel is None or session.channel.closed

    async def scan(self) -> None:
        """One pass: renew what is due, release what a gone client held, stop what was renewed long enough. Returns
        once the renewals it started landed or failed (each waits in a task of its own, as DefaultReceiptHandleManager
        hands each to its renewal workers)."""
        config, now = self.config, self.pop.now_ms()
        async with trio.open_nursery() as nursery:
            for key, held in list(self.held.items()):
                client_id, group, _, _ = key
                if held.renewing is not None:
                    continue  # its renewal from an earlier scan still waits (the handle is locked)
                if self._offline(client_id):
                    self._release(key, held, config.invisible_time_millis_when_clear)
                elif held.handle.visible_at - now > config.renew_ahead_time_millis:
                    continue
                elif held.retries >= config.max_renew_retry_times:
                    # DefaultReceiptHandleManager.startRenewMessage: given up, visible when its handle says
                    _refusals.warning("renewing %s of %s given up after %d failures", held.topic, group, held.retries)
                    del self.held[key]
                elif now - held.received_ms >= config.renew_max_time_millis:
                    self._release(key, held, _retry_delay_ms(self.pop.broker.groups.get(group), held.attempt))
                elif (ends := self._renew(key, held)) is not None:
                    nursery.start_soon(self._land, key, held, ends)

    def _renew(self, key: _Key, held: _Held) -> list[int] | None:
        """Write the renewal of ``held`` (its next step), locking the entry when the store waits for its puts; the
        CommitLog ends to wait for, or ``None`` when adopted already or refused (a store's refusal counts a retry,
        the pop service's drops the entry)."""
        group = key[1]
        step = RENEW_STEPS_MS[min(held.renewals, len(RENEW_STEPS_MS) - 1)]
        try:
            with self.pop.writes() as ends:
                outcome, renewed = self.pop.change_invisible(group, held.topic, held.handle, step)
        except (PutRefusedError, RequestRejected) as exc:
            _refusals.warning("renewing %s of %s refused, trying again: %s", held.topic, group, exc)
            held.retries += 1
            return None
        if outcome is not AckOutcome.OK or renewed is None:
            del self.held[key]
            return None
        if not self.pop.broker.store.waits_for_put(True):
            # landed already (ASYNC_FLUSH, ASYNC_MASTER): adopted in this step, never locked, so an ack served
            # synchronously (MessagingActivity.now_unless_waiting) cannot find it locked
            _adopt(held, renewed)
            return None
        held.renewing, held.pending = trio.Event(), renewed
        return ends

    async def _land(self, key: _Key, held: _Held, ends: list[int]) -> None:
        """Adopt ``held``'s renewal once its change landed; keep the old handle (a retry counted) when it did not,
        as startRenewMessage does with an answer that is not OK. Then unlock the entry, and do the release asked for
        meanwhile. Cancelled (the proxy stops), the new handle is adopted: :meth:`clear_all` releases that one."""
        assert held.renewing is not None and held.pending is not None
        landed = False
        try:
            landed = await self.pop.change_landed(ends)
        except trio.Cancelled:
            landed = True
            raise
        finally:
            if landed:
                _adopt(held, held.pending)
            else:
                _refusals.warning("renewing %s of %s did not land, trying again", held.topic, key[1])
                held.retries += 1
            held.pending = None
            held.renewing.set()
            held.renewing = None
            if held.release_ms is not None and self.held.get(key) is held:
                self._release(key, held, held.release_ms)

    def _release(self, key: _Key, held: _Held, invisible_ms: int) -> None:
        if held.renewing is not None:  # done by the renewal in flight, on the handle it leaves
            held.release_ms = invisible_ms
            return
        del self.held[key]
        try:
            self.pop.change_invisible(key[1], held.topic, held.handle, invisible_ms)
        except (PutRefusedError, RequestRejected) as exc:
            _refusals.warning("releasing %s of %s refused (visible when its handle says): %s", held.topic, key[1], exc)

    def clear_all(self) -> None:
        """Release every handle held, visible again after ``invisibleTimeMillisWhenClear``: the proxy stops, and
        the messages it renews must not stay invisible for their last renewal (DefaultReceiptHandleManager's shutdown
        runs clearAllHandle, proxy/src/main/java/org/apache/rocketmq/proxy/service/receipt/
        DefaultReceiptHandleManager.java). Best effort: a store already closed refuses it, and the message is visible
        when its handle says."""
        for key, held in list(self.held.items()):
            try:
                self._release(key, held, self.config.invisible_time_millis_when_clear)
            except Exception:  # the broker is stopping too: nothing may escape a shutdown
                log.warning("releasing %s of %s at shutdown failed", held.topic, key[1], exc_info=True)
        self.held.clear()

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        """Scan every ``renewSchedulePeriodMillis`` until cancelled, then :meth:`clear_all` (synchronously, before
        the broker's store, which stops after the front, is closed)."""
        task_status.started()
        try:
            while True:
                await trio.sleep(self.config.renew_schedule_period_millis / 1000)
                await self.scan()
        finally:
            self.clear_all()
