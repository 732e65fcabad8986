"""``TransactionCheckService``: asks producers about half messages nobody ended (RocketMQ's
``TransactionalMessageCheckService`` and ``TransactionalMessageServiceImpl.check``), docs/protocol.md#78-transactions.

Every ``transactionCheckInterval`` (60 s) a round runs in two phases:

1. **Scan** (yielding every ``_YIELD_EVERY`` half or op messages read, so other requests are served while a big
   backlog is walked, as RocketMQ's check runs on its own thread): read the op messages beyond the op progress, then
   the half messages beyond the half progress, in order. A half message whose origin has an op message (also one
   END_TRANSACTION wrote while the scan ran) is done. One that
   was already checked ``transactionCheckMax`` (15) times (one never checked is checked once, whatever the setting),
   or is older than ``fileReservedTime``, is moved to
   ``TRANS_CHECK_MAX_TIME_TOPIC`` and logged (discarded). One younger than its own ``CHECK_IMMUNITY_TIME_IN_SECONDS``
   is re-appended with ``TRANSACTION_CHECK_TIMES`` + 1 and not checked (4.9.8 counts its immune rounds too, so a long
   immunity may reach ``transactionCheckMax`` first). One without it younger than ``transactionTimeOut`` (6 s, since
   its **born** time) stops the scan: later ones are younger still. Every other one is re-appended with
   ``TRANSACTION_CHECK_TIMES`` + 1 and queued for a check. A scan that has run a minute (``_MAX_ROUND_MS``, 4.9.8's
   ``MAX_PROCESS_TIME_LIMIT``, on the round's clock) stops at the half message it reached. Then both progress offsets
   are committed: the half offset past the scanned messages, the op offset past every op message whose transaction
   has no copy left to scan. The progress is committed only once the store confirms the renewed copies
   (``confirmed_offset``: at once on a plain store, when a majority holds them in DLedger mode, as 4.9.8's check
   waits for each put), so a leader change never skips a half message; when they are not confirmed within
   ``_CONFIRM_WAIT`` the progress stays and the next round scans the same messages again. The bridge's view that
   END_TRANSACTION consults (the op messages in the window, the origins left to scan) changes in the same step as the
   progress, never while the round waits: a repeated COMMIT is acknowledged, not stored again, however it interleaves.
2. **Ask**: CHECK_TRANSACTION_STATE (39, oneway) for each renewed copy to **one** live channel of its ``PGROUP``:
   from the round-robin pick on, the first whose connection is writable (``ProducerManager.getAvailableChannel``
   prefers an ``isActive() && isWritable()`` channel: a remoting producer not congested, a 5.x producer whose
   Telemetry stream is open), header as docs/protocol.md#310-transaction-headers, body the copy re-encoded with its
   real topic and queue. None writable (a producer slow to read): queued, without waiting, to the last live one
   looked at, as ``getAvailableChannel`` falls back to ``lastActiveChannel``. No live channel: logged and skipped (the
   copy was renewed, so the count still grows). Send errors are logged.

The producer answers with END_TRANSACTION naming the renewed copy (see :mod:`processors.end_transaction`).

Clock: "now" is read afresh for each round and for each half message the scan reaches, from the store's clock (the
wall clock unless the store's ``now_ms`` is injected; tests under ``autojump_clock`` make it follow virtual time), as
Java reads ``System.currentTimeMillis()`` for each message's age: one that turns old enough during a long round is
checked in that round. A store that
refuses the scan's appends (disk full, page cache busy) ends the scan at that half message, the progress made kept;
other errors in a round are logged and the next round tries again; nothing escapes :meth:`run` but cancellation.
"""

from __future__ import annotations

import itertools
import logging
from collections.abc import Callable
from typing import Final

import attrs
import trio

from broker.context import BrokerState
from processors.client_channels import ClientChannelInfo
from processors.transaction_bridge import (
    PROPERTY_CHECK_IMMUNITY_TIME,
    PROPERTY_PRODUCER_GROUP,
    PROPERTY_REAL_QID,
    PROPERTY_REAL_TOPIC,
    PROPERTY_TRANSACTION_CHECK_TIMES,
    OpMessage,
    TransactionalMessageBridge,
    origin_of,
)
from remoting.codec.codes import RequestCode
from remoting.codec.command import request
from remoting.codec.headers.transaction import CheckTransactionStateRequestHeader
from remoting.codec.message import MessageExt, MessageRecord, encode_record
from remoting.codec.message_properties import PROPERTY_UNIQ_KEY, encode_properties
from remoting.codec.msgid import offset_msg_id, pack_socket_address
from remoting.codec.topics import TRANS_HALF_TOPIC
from remoting.errors import RemotingError
from store.errors import PutRefusedError
from store.results import AppendResult

#: Longest wait for a producer's backlog to drain after a check was queued to it (a oneway send's 3 s timeout).
_CHECK_SEND_WAIT: Final = 3.0

__all__ = ["CheckRound", "TransactionCheckService"]

log = logging.getLogger(__name__)

#: Half messages scanned (and checks sent) between two checkpoints, so a round over a big backlog never holds up the
#: broker's other requests for its whole length (RocketMQ's check runs on its own thread).
_YIELD_EVERY: Final = 64

#: How long a round scans before it stops where it is and commits its progress (4.9.8's ``MAX_PROCESS_TIME_LIMIT``).
_MAX_ROUND_MS: Final = 60_000

#: How long a round waits for the store to confirm its renewed copies, and how often it looks.
_CONFIRM_WAIT: Final = 10.0
_CONFIRM_POLL: Final = 0.01


@attrs.frozen
class CheckRound:
    """What one round did: half messages sent a check, discarded, and found already ended."""

    checked: int = 0
    discarded: int = 0
    resolved: int = 0


class TransactionCheckService:
    """Owns the check loop of one broker; :meth:`run` it in the broker's nursery. See the module docstring."""

    def __init__(
        self,
        broker: BrokerState,
        bridge: TransactionalMessageBridge,
        *,
        now_ms: Callable[[], int] | None = None,
    ) -> None:
        self.broker = broker
        self.bridge = bridge
        self._now_ms = now_ms
        self._round_robin = itertools.count()
        self.rounds = 0

    # ---- settings (read per round: the broker config object may be replaced) ---------------------------------

    @property
    def check_interval(self) -> float:
        """Seconds between rounds (``transactionCheckInterval``). Zero or less runs the rounds back to back: the
        service's ``waitForRunning`` returns at once for such a wait
        (``common/src/main/java/org/apache/rocketmq/common/ServiceThread.java``), where a negative sleep would raise
        out of the service and stop the broker."""
        return max(0.0, self.broker.config.transaction_check_interval / 1000)

    def now_ms(self) -> int:
        """The time a round measures half messages' ages against, read afresh each time: the injected clock, else
        the store's (``now_ms``, the wall clock), as 4.9.8's ``check`` reads ``System.currentTimeMillis()`` per
        round and per message (``broker/src/main/java/org/apache/rocketmq/broker/transaction/queue/
        TransactionalMessageServiceImpl.java``): a clock step (NTP, a suspended host) counts from the next look on."""
        if self._now_ms is not None:
            return self._now_ms()
        return self.broker.store.config.now_ms()

    def _discarded(self, half: MessageExt) -> None:
        """One half message fewer for ``rocketmq_half_messages``, as 5.3.3's DefaultTransactionalMessageCheckListener
        ``resolveDiscardMsg`` takes one away once the half is moved to ``TRANS_CHECK_MAX_TIME_TOPIC``."""
        topic = half.properties.get(PROPERTY_REAL_TOPIC) or half.topic
        self.broker.half_messages.add(topic, -1, self.now_ms())

    # ---- loop ------------------------------------------------------------------------------------------------

    async def run(
        self, *, view_rebuilt: bool = False, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED
    ) -> None:
        """:meth:`rebuild_view` (unless the caller did: ``view_rebuilt``), then run a round every interval until
        cancelled."""
        if not view_rebuilt:
            await self.rebuild_view()
        task_status.started()
        while True:
            await trio.sleep(self.check_interval)
            try:
                await self.check_once()
            except Exception:
                log.exception("transaction check round failed; retrying in %.0f s", self.check_interval)

    async def rebuild_view(self) -> None:
        """Rebuild the bridge's resolved set from the op topic (after a restart it must not wait for the first
        round) and forget the live origins of an earlier round. In DLedger mode a member does this each time it
        becomes the leader, with the progress it copied from the leader before: origins its own last round left live
        may have been ended and scanned past since (4.9.8's ``changeToMaster`` in
        ``broker/src/main/java/org/apache/rocketmq/broker/BrokerController.java`` starts the check service, which
        keeps nothing between rounds but the two consume offsets). END_TRANSACTION waits for this rebuilt view after
        a role change (:meth:`~TransactionalMessageBridge.forget_view`), and for nothing else: the role services call
        this before they load the schedule and the timer."""
        bridge = self.bridge
        token = bridge.view_token()
        bridge.live_origins = None  # until this run's first round: read from the half queue past the progress
        # The read yields as a round's does (the window holds every op message since the oldest live transaction:
        # a new DLedger leader must keep answering, its followers' heartbeats too). An op message END_TRANSACTION
        # writes meanwhile lies past the window, so it is kept from what the bridge recorded.
        recorded = dict(bridge.resolved)
        ops = await self._read_ops(bridge.op_progress(), bridge.op_max_offset())
        resolved = {op.origin: op.op_offset for op in ops}
        for origin, op_offset in bridge.resolved.items():
            if recorded.get(origin) != op_offset:
                resolved.setdefault(origin, op_offset)
        bridge.resolved = resolved
        bridge.view_rebuilt(token)  # END_TRANSACTION waited for this view since the role changed

    async def check_once(self) -> CheckRound:
        """One round now (both phases). A store refusing the scan's appends ends the scan there, with its progress
        kept; other store errors raise; send errors are only logged."""
        self.bridge.ensure_topic(TRANS_HALF_TOPIC)  # operators see the backlog (topicStatus), as in 4.9.8
        to_check, outcome, progress, end = await self._scan(self.now_ms())
        if await self._confirmed(end):
            self._advance(*progress)
        else:
            log.warning("transaction check: renewed half messages not confirmed; the next round scans them again")
        self.rounds += 1
        for n, copy in enumerate(to_check, 1):
            await self._send_check(copy)
            if n % _YIELD_EVERY == 0:  # a send without a live producer does not yield
                await trio.lowlevel.checkpoint()
        if outcome.checked or outcome.discarded:
            log.info("transaction check round %d: %s", self.rounds, outcome)
        return outcome

    # ---- phase 1: scan ---------------------------------------------------------------------------------------

    async def _confirmed(self, end: int) -> bool:
        store = self.broker.store
        with trio.move_on_after(_CONFIRM_WAIT):
            while store.confirmed_offset < end:
                await trio.sleep(_CONFIRM_POLL)
            return True
        return False

    def _advance(self, position: int, op_position: int, live: set[int], ops: list[OpMessage], ops_end: int) -> None:
        """Commit the round's progress and, in the same step (nothing awaits between), the bridge's view that
        END_TRANSACTION consults with it: :attr:`~TransactionalMessageBridge.live_origins` and the op messages from
        ``op_position`` on as :attr:`~TransactionalMessageBridge.resolved`, with every op END_TRANSACTION wrote since
        the scan (the bridge recorded them; in DLedger mode one a majority does not hold yet is not in the op queue).
        Applied before the progress, a view that drops a transaction's op message would let a repeated COMMIT store
        it again while the progress still says its half message is unscanned: 4.9.8's check stores the half offset
        and the op offset it reached together (``updateConsumeOffset`` at the end of
        ``broker/src/main/java/org/apache/rocketmq/broker/transaction/queue/TransactionalMessageServiceImpl.java``
        ``check``), and an unconfirmed round keeps both, with the view that matches them. ``ops`` are the op messages
        the scan read, up to ``ops_end``: only those written since are read here, so each op message is read once per
        round, as 4.9.8's check pulls the op queue once per round (``fillOpRemoveMap``)."""
        bridge = self.bridge
        resolved = {op.origin: op.op_offset for op in ops if op.op_offset >= op_position}
        since = bridge.read_ops(ops_end, bridge.op_max_offset(), counted=True)
        resolved.update((op.origin, op.op_offset) for op in since)
        for origin, op_offset in bridge.resolved.items():
            if op_offset >= op_position:
                resolved.setdefault(origin, op_offset)
        bridge.commit_progress(position, op_position)
        bridge.live_origins = live
        bridge.resolved = resolved

    async def _scan(
        self, now: int
    ) -> tuple[list[MessageExt], CheckRound, tuple[int, int, set[int], list[OpMessage], int], int]:
        bridge, config = self.bridge, self.broker.config
        timeout = config.transaction_time_out
        check_max = config.transaction_check_max
        reserved_ms = config.file_reserved_time * 3_600_000
        half_start, op_start = bridge.half_progress(), bridge.op_progress()
        half_end, op_end = bridge.half_max_offset(), bridge.op_max_offset()
        ops = await self._read_ops(op_start, op_end)
        resolved = {op.origin for op in ops}
        renewed: list[AppendResult] = []
        renewed_origins: set[int] = set()  # a DLedger leader's queue shows its copies only once a majority holds them
        checked = discarded = done = 0
        position = half_start
        for n, half in enumerate(bridge.iter_queue(TRANS_HALF_TOPIC, half_start, half_end, counted=True), 1):
            looked_at = self.now_ms()  # per half message, as 4.9.8's check reads the clock for each one's age
            if looked_at - now > _MAX_ROUND_MS:
                log.info("transaction check reached %d ms at half offset %d: the next round goes on from there",
                         _MAX_ROUND_MS, half.queue_offset)  # fmt: skip
                break
            if n % _YIELD_EVERY == 0:
                await trio.lowlevel.checkpoint()
            age, origin = looked_at - half.born_timestamp, origin_of(half)
            if origin in resolved or origin in bridge.resolved:  # the latter: ended during the scan
                done += 1
            else:
                try:
                    if _checked_enough(half, check_max) or age > reserved_ms:
                        bridge.put_discarded(half)
                        discarded += 1
                        self._discarded(half)
                        log.warning(
                            "half message %s of group %s discarded after %d checks (age %d ms): moved to %s",
                            half.properties.get(PROPERTY_UNIQ_KEY, half.msg_id),
                            half.properties.get(PROPERTY_PRODUCER_GROUP),
                            _check_times(half),
                            age,
                            "TRANS_CHECK_MAX_TIME_TOPIC",
                        )
                    elif _immune(half, age, timeout):
                        # Renewed, not checked, but counted: 4.9.8's needDiscard raised the count before.
                        bridge.renew_half(half, _check_times(half) + 1)
                        renewed_origins.add(origin)
                    elif 0 <= age < timeout and PROPERTY_CHECK_IMMUNITY_TIME not in half.properties:
                        break  # with the property, past its immunity: checked, as 4.9.8's checkImmunityTime
                    else:
                        renewed.append(bridge.renew_half(half, _check_times(half) + 1))
                        renewed_origins.add(origin)
                        checked += 1
                except PutRefusedError as exc:
                    # The store refuses appends (disk full, page cache busy): stop here and keep the progress
                    # made, as 4.9.8's check stores the half offset it reached when putBackHalfMsgQueue fails
                    # (broker/src/main/java/org/apache/rocketmq/broker/transaction/queue/
                    # TransactionalMessageServiceImpl.java check): the next round starts at this half message.
                    log.warning("transaction check stopped at half offset %d: %s", half.queue_offset, exc)
                    break
            position = half.queue_offset + 1
        else:
            position = max(position, half_end)
        end = self.broker.store.commitlog.write_end  # past every append of the scan (renewed, discarded copies)
        # The transactions with a copy left to scan: past the progress in the half queue, and every one renewed now
        # (4.9.8's putBackHalfMsgQueue waits for the put of its copy; ours is not in the queue before the store
        # confirms it, and END_TRANSACTION naming an older copy must still commit it). Both reads below yield as the
        # scan does (thousands of renewed copies, an op message per transaction ended since the last round): a half
        # message sent meanwhile lies past the bound and the new progress alike, an op message written meanwhile
        # past ``op_position``, so neither changes what the round commits.
        live = set(renewed_origins)
        left = bridge.iter_queue(TRANS_HALF_TOPIC, position, bridge.half_max_offset(), counted=True)
        for n, half in enumerate(left, 1):
            if n % _YIELD_EVERY == 0:
                await trio.lowlevel.checkpoint()
            live.add(origin_of(half))
        ops_end = max(op_end, bridge.op_max_offset())
        ops += await self._read_ops(op_end, ops_end)  # with those END_TRANSACTION wrote meanwhile, read once
        op_position = next((op.op_offset for op in ops if op.origin in live), op_end)
        copies = [c for c in (bridge.look_half(r.phy_offset) for r in renewed) if c is not None]
        return copies, CheckRound(checked, discarded, done), (position, op_position, live, ops, ops_end), end

    async def _read_ops(self, start: int, end: int) -> list[OpMessage]:
        """The bridge's op messages of ``[start, end)``, yielding every ``_YIELD_EVERY`` of them (~45 µs each)."""
        ops = []
        for n, op in enumerate(self.bridge.iter_ops(start, end, counted=True), 1):
            if n % _YIELD_EVERY == 0:
                await trio.lowlevel.checkpoint()
            ops.append(op)
        return ops

    # ---- phase 2: ask a producer ----------------------------------------------------------------------------

    async def _send_check(self, copy: MessageExt) -> None:
        group = copy.properties.get(PROPERTY_PRODUCER_GROUP, "")
        channels = [c for c in self.broker.clients.producer_connections(group) if not c.connection.closed]
        uniq = copy.properties.get(PROPERTY_UNIQ_KEY)
        if not channels:
            log.warning("no live producer of group %r to check transaction %s: skipped this round", group, uniq)
            return
        channel, writable = _available_channel(channels, next(self._round_robin))
        wait = _CHECK_SEND_WAIT
        if not writable:
            # No producer reads (its outbox over the high-water mark) or has its stream: 4.9.8's getAvailableChannel
            # falls back to the last active channel it looked at and queues the check there, for the producer to
            # answer once it catches up. Queued without waiting: a wait would hold up this round's other checks.
            log.info("transaction check of %s queued to %s: no producer of %r is writable", uniq, channel.client_id,
                     group)  # fmt: skip
            wait = 0.0
        header = CheckTransactionStateRequestHeader(
            tran_state_table_offset=copy.queue_offset,
            commit_log_offset=copy.commit_log_offset,
            msg_id=uniq,
            transaction_id=uniq,
            offset_msg_id=offset_msg_id(self.broker.store_host, copy.commit_log_offset),
        )
        command = request(RequestCode.CHECK_TRANSACTION_STATE, header.to_ext_fields(), check_body(copy), oneway=True)
        try:  # a 5.x client's channel turns it into a Telemetry command
            await channel.connection.invoke_oneway(command, wait)
        except RemotingError as exc:
            log.warning("transaction check of %s to %s failed: %s", uniq, channel.client_id, exc)


def _available_channel(channels: list[ClientChannelInfo], start: int) -> tuple[ClientChannelInfo, bool]:
    """The first of the live ``channels`` from index ``start`` (mod their number) whose connection is
    :attr:`~remoting.connection.Connection.writable`, and ``True``; when none is, the last one looked at, and
    ``False``: ``getAvailableChannel`` in
    ``broker/src/main/java/org/apache/rocketmq/broker/client/ProducerManager.java`` returns its ``lastActiveChannel``
    then, rather than no channel."""
    for step in range(len(channels)):
        channel = channels[(start + step) % len(channels)]
        if channel.connection.writable:
            return channel, True
    return channels[(start + len(channels) - 1) % len(channels)], False


def check_body(copy: MessageExt) -> bytes:
    """The CHECK_TRANSACTION_STATE body: the half copy in the stored-record format with its real topic and queue."""
    props = dict(copy.properties)
    topic = props.get(PROPERTY_REAL_TOPIC) or copy.topic
    try:
        queue_id = int(props.get(PROPERTY_REAL_QID, "0"))
    except ValueError:
        queue_id = 0
    try:
        born_host = pack_socket_address(*copy.born_host)
    except ValueError:  # not an IP literal: fall back to the store host rather than fail the round
        born_host = copy.store_host_packed
    record = MessageRecord(
        topic=topic,
        body=copy.body,
        queue_id=queue_id,
        flag=copy.flag,
        properties=encode_properties(props),
        sys_flag=copy.sys_flag,
        born_timestamp=copy.born_timestamp,
        born_host=born_host,
        store_host=copy.store_host_packed,
        reconsume_times=copy.reconsume_times,
        prepared_transaction_offset=copy.prepared_transaction_offset,
    )
    return encode_record(record, copy.queue_offset, copy.commit_log_offset, copy.store_timestamp)


def _check_times(half: MessageExt) -> int:
    try:
        return int(half.properties.get(PROPERTY_TRANSACTION_CHECK_TIMES, "0"))
    except ValueError:
        return 0


def _checked_enough(half: MessageExt, check_max: int) -> bool:
    """Whether ``half`` was checked ``transactionCheckMax`` times already. As ``needDiscard`` in
    ``broker/src/main/java/org/apache/rocketmq/broker/transaction/queue/TransactionalMessageServiceImpl.java``, a half
    message without ``TRANSACTION_CHECK_TIMES`` (never checked) is never discarded for its count, so even a
    ``transactionCheckMax`` of 0 or less checks it once."""
    if PROPERTY_TRANSACTION_CHECK_TIMES not in half.properties:
        return False
    return _check_times(half) >= check_max


def _immune(half: MessageExt, age: int, timeout: int) -> bool:
    """Whether ``half`` has its own ``CHECK_IMMUNITY_TIME_IN_SECONDS`` and is younger than it: 4.9.8's check renews
    such a half message (``checkPrepareQueueOffset``, ``putImmunityMsgBackToHalfQueue``) rather than ending the scan."""
    return PROPERTY_CHECK_IMMUNITY_TIME in half.properties and age < _immunity_ms(half, timeout)


def _immunity_ms(half: MessageExt, timeout: int) -> int:
    """``CHECK_IMMUNITY_TIME_IN_SECONDS`` in ms; ``transactionTimeOut`` when absent, -1 or no number, as
    ``getImmunityTime`` in
    ``broker/src/main/java/org/apache/rocketmq/broker/transaction/queue/TransactionalMessageServiceImpl.java`` (its
    ``getLong`` makes -1 of what it cannot parse)."""
    raw = half.properties.get(PROPERTY_CHECK_IMMUNITY_TIME)
    if raw is None:
        return timeout
    try:
        seconds = int(raw)
    except ValueError:
        return timeout
    return timeout if seconds == -1 else seconds * 1000
