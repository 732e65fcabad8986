"""``ProcessQueue``: the messages pulled from one queue and not yet consumed (Java's ``ProcessQueue``).

It keeps messages by queue offset, counts them and their body bytes (the pull loop stops pulling above the
consumer's thresholds) and tells which offset may be committed: the smallest offset still in flight, or one past the
highest offset seen when nothing is. For orderly consumption it hands out messages in offset order
(:meth:`take_messages`) and holds them until :meth:`commit` or :meth:`make_messages_to_consume_again`. For concurrent
consumption it keeps when each held message's listener call started, so the consumer can send back the head message
once its call overran ``consume_timeout`` (:meth:`expired_head`, Java's ``cleanExpiredMsg``).

Not thread-safe; it lives on one event loop. ``dropped`` is set when rebalance takes the queue away: the pull loop
and consumers check it and stop.
"""

from __future__ import annotations

import bisect
import logging
import os
import re

import attrs

from remoting.codec.message import MessageExt

#: How long a broker queue lock stays valid on the client, by default (Java's ``REBALANCE_LOCK_MAX_LIVE_TIME``, 30 s).
LOCK_MAX_LIVE = 30.0
#: How often an orderly consumer renews its queue locks, by default (Java's ``REBALANCE_LOCK_INTERVAL``, 20 s).
LOCK_INTERVAL = 20.0


#: What ``Long.parseLong`` takes: an optional sign, then decimal digits (no blank, no ``_``)
_JAVA_LONG = re.compile(r"[+-]?\d+")


def java_property_seconds(name: str, default: float) -> float:
    """Seconds from the environment variable ``name`` in ms, else ``default``: a Java client's system property read as
    this client reads them (``rocketmq.client.rebalance.lockMaxLiveTime`` is
    ``ROCKETMQ_CLIENT_REBALANCE_LOCK_MAX_LIVE_TIME``). Raises ValueError naming ``name`` for a value Java's
    ``Long.parseLong`` refuses (blanks, ``_``, a fraction, past a long), as it fails the class that reads it."""
    value = os.environ.get(name)
    if value is None:
        return default
    if _JAVA_LONG.fullmatch(value) is None or not -(2**63) <= int(value) < 2**63:
        raise ValueError(f"{name}={value!r} is not a Java long (milliseconds)")
    return int(value) / 1000


def lock_max_live() -> float:
    """How long a queue lock stays valid on the client: ``ROCKETMQ_CLIENT_REBALANCE_LOCK_MAX_LIVE_TIME`` ms, else
    :data:`LOCK_MAX_LIVE` (``client/src/main/java/org/apache/rocketmq/client/impl/consumer/ProcessQueue.java`` reads
    ``rocketmq.client.rebalance.lockMaxLiveTime``)."""
    return java_property_seconds("ROCKETMQ_CLIENT_REBALANCE_LOCK_MAX_LIVE_TIME", LOCK_MAX_LIVE)


def lock_interval() -> float:
    """How often the queue locks are renewed: ``ROCKETMQ_CLIENT_REBALANCE_LOCK_INTERVAL`` ms, else
    :data:`LOCK_INTERVAL` (ProcessQueue.java reads ``rocketmq.client.rebalance.lockInterval``)."""
    return java_property_seconds("ROCKETMQ_CLIENT_REBALANCE_LOCK_INTERVAL", LOCK_INTERVAL)


MIB = 1024 * 1024


def over_size_threshold(size: int, threshold: int) -> bool:
    """Whether ``size`` body bytes are over a consumer's ``pullThresholdSizeForQueue`` of ``threshold`` bytes (a whole
    number of MiB), compared in whole MiB as Java's pull tasks do (``msgSize / (1024 * 1024) > threshold``:
    ``DefaultMQPushConsumerImpl.pullMessage``, ``DefaultLitePullConsumerImpl``'s ``PullTaskImpl.run``, in
    client/src/main/java/org/apache/rocketmq/client/impl/consumer/), so a threshold of N MiB holds up to N + 1 MiB."""
    return size // MIB > threshold // MIB


@attrs.define(slots=True)
class FlowControl:
    """A consumer's flow control over its process queues, with Java's warnings: the first time and every 1000th time
    after a pull is put off by a queue's cached count or size (``queueFlowControlTimes``), and apart by its span
    (``queueMaxSpanFlowControlTimes``), as client/src/main/java/org/apache/rocketmq/client/impl/consumer/
    DefaultMQPushConsumerImpl.java ``pullMessage`` and DefaultLitePullConsumerImpl.java ``PullTaskImpl.run`` log
    them (the lite pull consumer's text capitalized, ``capital``)."""

    log: logging.Logger
    capital: bool = False
    cached_times: int = 0
    span_times: int = 0

    def held(self, pq: ProcessQueue, count: int, size: int, span: int | None, request: object = None) -> bool:
        """Whether ``pq`` is over ``count`` messages, ``size`` bytes (compared in MiB) or, unless None, a ``span`` of
        offsets; ``request``, when given, is the pull request the warning names."""
        if pq.msg_count > count:
            what = f"the cached message count exceeds the threshold {count}"
        elif over_size_threshold(pq.msg_size, size):
            what = f"the cached message size exceeds the threshold {size // MIB} MiB"
        elif span is not None and pq.max_span > span:
            self.span_times += 1
            if self.span_times % 1000 == 1:
                head = (
                    f"the queue's messages, span too long, so do flow control, {self._held(pq)}, maxSpan={pq.max_span}"
                )
                self._warn(head, request, self.span_times)
            return True
        else:
            return False
        self.cached_times += 1
        if self.cached_times % 1000 == 1:
            held = self._held(pq)
            head = f"{what}, so do flow control, {held}, count={pq.msg_count}, size={pq.msg_size // MIB} MiB"
            self._warn(head, request, self.cached_times)
        return True

    @staticmethod
    def _held(pq: ProcessQueue) -> str:
        low, high = pq.offset_bounds or (None, None)
        return f"minOffset={low}, maxOffset={high}"

    def _warn(self, head: str, request: object, times: int) -> None:
        if self.capital:
            head = head[0].upper() + head[1:]
        pulled = "" if request is None else f", pullRequest={request}"
        self.log.warning("%s%s, flowControlTimes=%d", head, pulled, times)


@attrs.define(slots=True, eq=False)
class ProcessQueue:
    """See the module docstring. Times are on the event loop clock (seconds)."""

    _offsets: list[int] = attrs.field(factory=list)  # sorted offsets of ``_messages``
    _messages: dict[int, MessageExt] = attrs.field(factory=dict)
    _consuming: dict[int, MessageExt] = attrs.field(factory=dict)  # orderly: taken, not committed
    _started: dict[int, float] = attrs.field(factory=dict)  # concurrent: offset -> when its listener call started
    msg_count: int = 0
    msg_size: int = 0
    queue_offset_max: int = -1
    dropped: bool = False
    locked: bool = False
    last_lock_time: float = 0.0
    last_pull_time: float = 0.0
    last_consume_time: float = 0.0
    #: Removals that kept this orderly queue because its listener call ran on (Java's ``tryUnlockTimes``, raised by
    #: ``client/src/main/java/org/apache/rocketmq/client/impl/consumer/RebalancePushImpl.java``'s
    #: ``removeUnnecessaryMessageQueue``); ``mqadmin consumerStatus`` reports "unlock N times, still failed".
    try_unlock_times: int = 0

    @classmethod
    def created_at(cls, now: float) -> ProcessQueue:
        """A queue whose lock, pull and consume times start at ``now``, as Java's constructor sets them."""
        return cls(last_lock_time=now, last_pull_time=now, last_consume_time=now)

    def put_messages(self, msgs: list[MessageExt]) -> None:
        """Add pulled messages (duplicates of offsets already held are ignored)."""
        # Locals, one counter update per batch, and an append for the usual ascending offset: put_messages was
        # 2.8 % of consumer samples at pullBatchSize 256.
        held, consuming, offsets = self._messages, self._consuming, self._offsets
        count = size = 0
        top = self.queue_offset_max
        for msg in msgs:
            off = msg.queue_offset
            if off in held or off in consuming:
                continue
            held[off] = msg
            if offsets and off < offsets[-1]:
                bisect.insort(offsets, off)
            else:
                offsets.append(off)
            count += 1
            size += len(msg.body)
            if off > top:
                top = off
        self.msg_count += count
        self.msg_size += size
        self.queue_offset_max = top

    def _forget(self, msg: MessageExt) -> None:
        self.msg_count -= 1
        self.msg_size -= len(msg.body)

    def remove_messages(self, msgs: list[MessageExt]) -> int:
        """Concurrent mode: drop consumed messages; returns the offset to commit, or -1 if nothing was held."""
        if not self._messages and not self._consuming:
            return -1
        held_messages, offsets, started = self._messages, self._offsets, self._started
        count = size = 0
        for msg in msgs:
            held = held_messages.pop(msg.queue_offset, None)
            if held is not None:
                started.pop(msg.queue_offset, None)
                del offsets[bisect.bisect_left(offsets, msg.queue_offset)]
                count += 1
                size += len(held.body)
        self.msg_count -= count
        self.msg_size -= size
        return self._offsets[0] if self._offsets else self.queue_offset_max + 1

    def mark_consume_started(self, msgs: list[MessageExt], now: float) -> None:
        """Concurrent mode: the listener call of ``msgs`` starts at ``now`` (Java's ``CONSUME_START_TIME``)."""
        for msg in msgs:
            if msg.queue_offset in self._messages:
                self._started[msg.queue_offset] = now

    def replace_messages(self, msgs: list[MessageExt]) -> None:
        """Concurrent mode: hold ``msgs`` instead of the messages of the same offsets held (a copy with a new
        ``reconsume_times``); offsets not held are ignored."""
        held = self._messages
        for msg in msgs:
            if msg.queue_offset in held:
                held[msg.queue_offset] = msg

    def expired_head(self, now: float, timeout: float) -> MessageExt | None:
        """Concurrent mode: the message of the smallest offset held when its listener call started more than
        ``timeout`` before ``now``, else None."""
        if not self._offsets:
            return None
        head = self._offsets[0]
        started = self._started.get(head)
        return self._messages[head] if started is not None and now - started > timeout else None

    @property
    def offset_bounds(self) -> tuple[int, int] | None:
        """The smallest and largest offset held, None when empty (Java's ``msgTreeMap`` firstKey and lastKey)."""
        return (self._offsets[0], self._offsets[-1]) if self._offsets else None

    @property
    def max_span(self) -> int:
        """Distance between the smallest and largest offset held (Java's ``getMaxSpan``)."""
        return self._offsets[-1] - self._offsets[0] if self._offsets else 0

    def take_messages(self, batch_size: int) -> list[MessageExt]:
        """Orderly mode: the next ``batch_size`` messages in offset order, moved to the consuming set."""
        taken: list[MessageExt] = []
        while self._offsets and len(taken) < batch_size:
            off = self._offsets.pop(0)
            msg = self._messages.pop(off)
            self._consuming[off] = msg
            taken.append(msg)
        return taken

    def commit(self) -> int:
        """Orderly mode: the taken messages are done; returns the offset to commit (-1 if none were taken)."""
        if not self._consuming:
            return -1
        offset = max(self._consuming) + 1
        for msg in self._consuming.values():
            self._forget(msg)
        self._consuming.clear()
        return offset

    def make_messages_to_consume_again(self, msgs: list[MessageExt]) -> None:
        """Orderly mode: put taken messages back so they are handed out again first."""
        for msg in msgs:
            if self._consuming.pop(msg.queue_offset, None) is not None:
                self._messages[msg.queue_offset] = msg
                bisect.insort(self._offsets, msg.queue_offset)

    def rollback(self) -> None:
        """Orderly mode: put every taken message back (Java's ``rollback``: a context without auto-commit)."""
        self.make_messages_to_consume_again(list(self._consuming.values()))

    def has_messages(self) -> bool:
        return bool(self._offsets)

    def clear(self) -> None:
        self._offsets.clear()
        self._messages.clear()
        self._consuming.clear()
        self._started.clear()
        self.msg_count = 0
        self.msg_size = 0

    def lock_expired(self, now: float, max_live: float) -> bool:
        """Whether the lock was last granted over ``max_live`` (the consumer's :func:`lock_max_live`) before ``now``."""
        return now - self.last_lock_time > max_live

    def info(self, commit_offset: int, now: float, now_ms: int) -> dict[str, int | bool]:
        """Java's ``ProcessQueueInfo`` (``fillProcessQueueInfo``) with ``commit_offset``, as in running info: its
        times in wall-clock ms, converted from the loop clock where ``now`` (loop) is ``now_ms`` (wall)."""

        def wall_ms(t: float) -> int:
            return now_ms - round((now - t) * 1000)

        cached, consuming = self._offsets, sorted(self._consuming) if self._consuming else []
        return {
            "commitOffset": commit_offset,
            "cachedMsgMinOffset": cached[0] if cached else 0,
            "cachedMsgMaxOffset": cached[-1] if cached else 0,
            "cachedMsgCount": len(cached),
            "cachedMsgSizeInMiB": self.msg_size // (1024 * 1024),
            "transactionMsgMinOffset": consuming[0] if consuming else 0,
            "transactionMsgMaxOffset": consuming[-1] if consuming else 0,
            "transactionMsgCount": len(consuming),
            "locked": self.locked,
            "tryUnlockTimes": self.try_unlock_times,
            "lastLockTimestamp": wall_ms(self.last_lock_time),
            "droped": self.dropped,
            "lastPullTimestamp": wall_ms(self.last_pull_time),
            "lastConsumeTimestamp": wall_ms(self.last_consume_time),
        }
