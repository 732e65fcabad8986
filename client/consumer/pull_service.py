"""The push consumer's pull loop (Java's ``PullMessageService`` + the pull half of ``DefaultMQPushConsumerImpl``):
one task per owned queue long-polls the queue's broker and hands what it gets to the consume service.

Flow control: the loop waits (50 ms steps) while the queue's process queue holds more than ``pull_threshold_for_queue``
messages or more whole MiB of bodies than ``pull_threshold_size_for_queue`` (as Java compares), or, for concurrent
consumption, while the offsets in flight span more than ``consume_concurrently_max_span`` (2000), warning the first
time and every 1000th time after with Java's text ("... so do flow control, ..."). With ``pull_interval``
set, the next pull after one that found messages waits that long (Java's ``pullInterval``; not when the tag filter
dropped them all). After a failed pull it waits the consumer's ``pull_time_delay_when_exception`` (1 s; after a
FLOW_CONTROL answer 20 ms; after a SUBSCRIPTION_NOT_EXIST / SUBSCRIPTION_NOT_LATEST answer, the first of a run, not at
all: it sends that broker a heartbeat and pulls again), without asking for the route again (see
:mod:`client.consumer.pull_target`), and that again and again while an orderly CLUSTERING queue's lock is lost
(another member holds it).
While the consumer is suspended it waits 1 s at a time. Each turn of the loop, a wait included, stamps the process
queue's ``last_pull_time``, as Java's ``pullMessage`` does on every call. A pull posts the subscription (the
SUBSCRIPTION bit) only with ``post_subscription_when_pull``, as Java's ``postSubscriptionWhenPull``: otherwise the
broker serves it with the group's heartbeat subscription (its ``subVersion`` and ``expressionType`` are sent), and
refuses it for a BROADCASTING group whose config forbids broadcast. When the consumer has an offset, a pull commits
it (the commit bit), unless it goes to a slave. Which broker of
the queue's group is pulled
(the master, a slave it suggests, a slave while the master is gone) is :mod:`client.consumer.pull_target`'s choice.

An illegal offset (PULL_OFFSET_MOVED) drops the process queue and ends the loop; 10 s later the broker's suggestion is
stored and persisted (also when a rebalance took the queue away meanwhile, for its next owner) and the process
queue removed, so the next rebalance takes the queue afresh (Java's OFFSET_ILLEGAL case): a new process queue, whose
commits follow what it consumes, not the old one's highest offset.

Statistics (:mod:`client.consumer.stats`, as Java's pull callback): a FOUND pull records its round trip (from the
send, a long poll's hold included) as pull RT, and its messages left after the tag filter, when there are any, as
pull TPS when they are handed over.

A FOUND response's body is decoded and handed to the consume service right after the next pull is sent (from the
response's ``nextBeginOffset``), so the broker serves that pull while this process decodes: the two processes work
side by side instead of in turn. When those messages could take the process queue over a threshold, they are handed
over first and the thresholds decide with them counted, so the queue never holds more than Java's would (threshold
plus one pull). A body that fails to decode, or an error before the next pull is sent (no broker address), sends
the loop back to the offset of the pull whose messages were not handed over (after the error wait), as if that pull
had failed; the response to a pull sent meanwhile is dropped. A record that decodes but whose compressed body does
not inflate fails the same way on every pull: :func:`client.api.pulled_messages` ends the list before it (as Java's
``MessageDecoder.decodes``), and the loop goes on from the response's ``nextBeginOffset``.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

import anyio
import attrs

from client import api
from client.consumer.allocate import java_queue_string
from client.consumer.process_queue import FlowControl, ProcessQueue, over_size_threshold
from client.consumer.pull_target import PullTargets
from client.consumer.subscription import tag_filter
from client.errors import MQBrokerError
from remoting.codec.bodies import MessageModel, MessageQueue
from remoting.codec.codes import ResponseCode
from remoting.codec.command import RemotingCommand
from remoting.errors import RemotingError

if TYPE_CHECKING:
    from client.consumer.push import PushConsumer

log = logging.getLogger(__name__)

PULL_FLAG_COMMIT_OFFSET = 0x1
PULL_FLAG_SUSPEND = 0x2
PULL_FLAG_SUBSCRIPTION = 0x4
#: Broker hold time for a long poll, and the client's timeout for it (Java: 15 s and 30 s).
BROKER_SUSPEND_MAX = 15.0
PULL_TIMEOUT = 30.0
SUSPEND_MILLIS = str(int(BROKER_SUSPEND_MAX * 1000))
#: The lite pull's wait after a failed start-offset lookup (Java's ``PULL_TIME_DELAY_MILLS_ON_EXCEPTION``, 3 s); the
#: push consumer's after a failure is its ``pull_time_delay_when_exception``.
PULL_DELAY_ON_ERROR = 3.0
#: Wait while flow control holds pulling back (Java's ``PULL_TIME_DELAY_MILLS_WHEN_CACHE_FLOW_CONTROL``, 50 ms).
PULL_DELAY_FLOW_CONTROL = 0.05
#: Wait after a pull the broker answered with FLOW_CONTROL (Java's ``PULL_TIME_DELAY_MILLS_WHEN_BROKER_FLOW_CONTROL``,
#: 20 ms, in client/src/main/java/org/apache/rocketmq/client/impl/consumer/DefaultMQPushConsumerImpl.java).
PULL_DELAY_BROKER_FLOW_CONTROL = 0.02
#: Wait of a paused consumer's pull loop (``PushConsumer.suspend``; Java: 1 s), and of a lite pull consumer's paused
#: queue (``PULL_TIME_DELAY_MILLS_WHEN_PAUSE``, DefaultLitePullConsumerImpl.java).
PULL_DELAY_WHEN_SUSPEND = 1.0
_CURED_BY_HEARTBEAT = frozenset({ResponseCode.SUBSCRIPTION_NOT_EXIST, ResponseCode.SUBSCRIPTION_NOT_LATEST})
#: Wait between an illegal offset and the fix of the queue's offset (Java: 10 s).
OFFSET_ILLEGAL_FIX_DELAY = 10.0


class PullService:
    """Pull loops of one push consumer, one per owned queue. See the module docstring."""

    def __init__(self, consumer: PushConsumer) -> None:
        self.consumer = consumer
        self._scopes: dict[MessageQueue, anyio.CancelScope] = {}
        self.targets = PullTargets(consumer.instance)
        self.flow_control = FlowControl(log)

    def stop(self, mq: MessageQueue) -> None:
        """Cancel the loop of ``mq`` (its process queue is already marked dropped)."""
        scope = self._scopes.pop(mq, None)
        self.targets.forget(mq)
        if scope is not None:
            scope.cancel()

    def _flow_controlled(self, mq: MessageQueue, pq: ProcessQueue, next_offset: int) -> bool:
        """Whether ``pq`` holds too many messages, bytes or (concurrent) too wide a span of offsets to pull now,
        warned of as Java warns (:class:`~client.consumer.process_queue.FlowControl`)."""
        c = self.consumer
        span = None if c.orderly else c.consume_concurrently_max_span
        request = _PullRequest(c.group, mq, next_offset)
        return self.flow_control.held(pq, c.pull_threshold_for_queue, c.pull_threshold_size_for_queue, span, request)

    def _lock_lost(self, pq: ProcessQueue) -> bool:
        """Whether ``pq`` is an orderly CLUSTERING queue whose broker lock the last renewal did not get: not pulled
        until it is locked again (``client/src/main/java/org/apache/rocketmq/client/impl/consumer/
        DefaultMQPushConsumerImpl.java``'s ``pullMessage`` puts such a pull off by ``pullTimeDelayMillsWhenException``,
        "not locked in broker")."""
        c = self.consumer
        return c.orderly and c.rebalance.locks_queues and not pq.locked

    def _could_overflow(self, pq: ProcessQueue, found: _Found | None) -> bool:
        """Whether ``found``'s messages, not yet in ``pq``, could take it over a flow-control threshold (at most
        ``pull_batch_size`` messages, its body's bytes, offsets up to its ``nextBeginOffset``)."""
        if found is None:
            return False
        c = self.consumer
        if pq.msg_count + c.pull_batch_size > c.pull_threshold_for_queue:
            return True
        if over_size_threshold(pq.msg_size + len(found.body), c.pull_threshold_size_for_queue):
            return True
        if c.orderly:
            return False
        last = found.head.next_begin_offset - 1
        span = pq.max_span + last - pq.queue_offset_max if pq.has_messages() else last - found.offset
        return span > c.consume_concurrently_max_span

    async def pull_loop(self, mq: MessageQueue, pq: ProcessQueue, offset: int) -> None:
        """Long-poll ``mq`` from ``offset`` until the queue is dropped or the consumer stops."""
        c = self.consumer
        with anyio.CancelScope() as scope:
            self._scopes[mq] = scope
            next_offset = offset
            found: _Found | None = None
            healed = False  # a heartbeat went to the broker since the last pull it served
            while not pq.dropped and not c.stopping:
                # Every turn counts as a pull, flow-controlled, paused or put off as it may be: Java's pullMessage
                # (client/src/main/java/org/apache/rocketmq/client/impl/consumer/DefaultMQPushConsumerImpl.java) sets
                # lastPullTimestamp before its checks, so only a queue whose loop ended looks idle to the rebalance.
                pq.last_pull_time = anyio.current_time()
                try:
                    if c.paused:  # suspend(): DefaultMQPushConsumerImpl.pullMessage puts the pull off by 1 s
                        self._deliver(mq, pq, found)
                        found = None
                        await anyio.sleep(PULL_DELAY_WHEN_SUSPEND)
                        continue
                    if self._could_overflow(pq, found):
                        self._deliver(mq, pq, found)  # counted before deciding, as Java puts each pull's messages
                        found = None
                    if self._flow_controlled(mq, pq, next_offset):
                        self._deliver(mq, pq, found)
                        found = None
                        await anyio.sleep(PULL_DELAY_FLOW_CONTROL)
                        continue
                    if self._lock_lost(pq):
                        self._deliver(mq, pq, found)
                        found = None
                        await anyio.sleep(c.pull_time_delay_when_exception)
                        continue
                    next_offset, found = await self._pull_once(mq, pq, next_offset, found)
                    healed = False
                    if found is not None and c.pull_interval > 0:
                        # DefaultMQPushConsumerImpl.pullMessage (client/src/main/java/org/apache/rocketmq/client/impl/
                        # consumer/): a FOUND pull's messages go to the consume service and the queue's next pull
                        # waits pullInterval; a FOUND whose messages the tag filter all dropped pulls again at once.
                        delivered = self._deliver(mq, pq, found)
                        found = None
                        if delivered:
                            await anyio.sleep(c.pull_interval)
                except Exception as exc:
                    if isinstance(exc, _PullAgain):
                        next_offset = exc.offset
                    found = None
                    log.info("pull from %s at %d failed: %s", mq, next_offset, exc)
                    if isinstance(exc, MQBrokerError) and exc.code == ResponseCode.FLOW_CONTROL:
                        # The broker is busy, not gone: its route stands and the pull goes again soon
                        # (DefaultMQPushConsumerImpl.pullMessage's onException).
                        await anyio.sleep(PULL_DELAY_BROKER_FLOW_CONTROL)
                        continue
                    lost_at = _lost_subscription(exc)
                    if lost_at is not None and not healed:
                        # Served from the heartbeat's subscription (no postSubscriptionWhenPull), which this broker
                        # lost (a restart) or has not taken yet (a newer subVersion racing its heartbeat): Java waits
                        # 1 s, and again until its next 30 s heartbeat; one heartbeat now and the pull goes again.
                        healed = True
                        await c.instance.heartbeat_now(lost_at)
                        continue
                    # Only made again later: the route stands until the instance's poll re-reads it, as Java's
                    # onException (a failing queue must not ask the name server every second).
                    await anyio.sleep(c.pull_time_delay_when_exception)
        if self._scopes.get(mq) is scope:
            del self._scopes[mq]

    async def _pull_once(
        self, mq: MessageQueue, pq: ProcessQueue, offset: int, found: _Found | None
    ) -> tuple[int, _Found | None]:
        """Send the pull at ``offset``, hand ``found`` (the previous pull's messages) over while it is served, and
        return the next offset with this pull's messages, if it found any."""
        c = self.consumer
        sub = c.rebalance.subscriptions.get(mq.topic)
        if sub is None:
            self._deliver(mq, pq, found)
            await anyio.sleep(c.pull_time_delay_when_exception)
            return offset, None
        try:
            addr, is_slave = await self.targets.address(mq)
        except Exception as exc:
            if found is None:
                raise
            raise _PullAgain(found.offset, exc) from exc  # found's messages were not handed over: pull them again
        commit = 0
        if c.message_model is MessageModel.CLUSTERING and not is_slave:  # a slave ignores commits: Java clears the bit
            commit = c.offset_store.read_memory(mq) or 0
        sys_flag = PULL_FLAG_SUSPEND | (PULL_FLAG_COMMIT_OFFSET if commit > 0 else 0)
        # The PullMessageRequestHeader fields as a plain dict: this is the pull hot path.
        fields = {
            "consumerGroup": c.group,
            "topic": mq.topic,
            "queueId": str(mq.queue_id),
            "queueOffset": str(offset),
            "maxMsgNums": str(c.pull_batch_size),
            "sysFlag": str(sys_flag),
            "commitOffset": str(commit),
            "suspendTimeoutMillis": SUSPEND_MILLIS,
            "subVersion": str(sub.sub_version),
            "expressionType": sub.expression_type,
        }
        if c.post_subscription_when_pull:
            fields["sysFlag"] = str(sys_flag | PULL_FLAG_SUBSCRIPTION)
            fields["subscription"] = sub.sub_string
        pq.last_pull_time = sent = anyio.current_time()
        reply = _Reply()
        c.instance.remoting.invoke_callback(addr, api.pull_request(fields), PULL_TIMEOUT, reply.set, plain=True)
        self._deliver(mq, pq, found)  # while the broker serves the pull just sent
        status, head = api.read_pull_response(await reply.wait(), addr)
        self.targets.suggest(mq, head.suggest_which_broker_id)
        if pq.dropped:
            return offset, None
        if status is api.PullStatus.OFFSET_ILLEGAL:
            log.warning("offset %d of %s is illegal, moving to %d", offset, mq, head.next_begin_offset)
            pq.dropped = True
            c.background_tasks.start_soon(self._fix_offset_later, mq, pq, head.next_begin_offset)
            return head.next_begin_offset, None
        if status is api.PullStatus.FOUND:
            now = anyio.current_time()
            c.instance.consumer_stats.topic(c.group, mq.topic, now).pulled(now, round((now - sent) * 1000))
            return head.next_begin_offset, _Found(offset, reply.body, head, tag_filter(sub))
        if not pq.has_messages() and pq.msg_count == 0:
            # Nothing in flight: everything up to the next offset is consumed (Java's correctTagsOffset).
            c.offset_store.update(mq, head.next_begin_offset, increase_only=True)
        return head.next_begin_offset, None

    async def _fix_offset_later(self, mq: MessageQueue, pq: ProcessQueue, offset: int) -> None:
        """After an illegal offset: store and persist ``offset``, remove ``pq`` and rebalance, which takes the queue
        again from ``offset``. When a rebalance removed ``pq`` meanwhile the offset is still stored, for the queue's
        next owner (as Java); when it took the queue again, that process queue's own pulls decide. A failed persist
        is logged."""
        c = self.consumer
        await anyio.sleep(OFFSET_ILLEGAL_FIX_DELAY)
        if c.rebalance.process_queues.get(mq) not in (pq, None):
            return
        c.offset_store.update(mq, offset)
        try:
            await c.offset_store.persist(mq)
        except Exception as exc:
            log.warning("persisting the fixed offset %d of %s failed: %s", offset, mq, exc)
        await c.rebalance.remove_process_queue(mq, pq)
        c.instance.wake_rebalance()

    def _deliver(self, mq: MessageQueue, pq: ProcessQueue, found: _Found | None) -> bool:
        """Decode ``found`` and hand its messages to the process queue and the consume service (nothing when the
        queue was dropped); whether any were handed over. Raises :class:`_PullAgain` for a body that does not
        decode."""
        if found is None or pq.dropped:
            return False
        c = self.consumer
        try:
            messages = api.pulled_messages(found.body, found.head, found.tags)
        except Exception as exc:
            raise _PullAgain(found.offset, exc) from exc
        if messages:
            now = anyio.current_time()
            c.instance.consumer_stats.topic(c.group, mq.topic, now).pulled_messages(now, len(messages))
            pq.put_messages(messages)
            assert c.consume_service is not None
            c.consume_service.submit(mq, pq, messages)
            return True
        if not pq.has_messages() and pq.msg_count == 0:
            c.offset_store.update(mq, found.head.next_begin_offset, increase_only=True)
        return False


@attrs.frozen(slots=True)
class _Found:
    """A FOUND pull's undecoded messages: ``offset`` is where that pull started."""

    offset: int
    body: bytes | memoryview
    head: api.PullHead
    tags: frozenset[str] | None


class _PullAgain(Exception):
    """The messages of the pull at ``offset`` were not handed over (``cause``): pull from there again."""

    def __init__(self, offset: int, cause: Exception) -> None:
        super().__init__(f"pull at {offset} to be made again: {cause}")
        self.offset = offset


class _Reply:
    """The outcome of one pull sent with ``invoke_callback``: :meth:`set` is the callback, :meth:`wait` returns
    the response or raises the remoting error."""

    __slots__ = ("_event", "_outcome")

    def __init__(self) -> None:
        self._event = anyio.Event()
        self._outcome: RemotingCommand | RemotingError | None = None

    @property
    def body(self) -> bytes | memoryview:
        return self._outcome.body if isinstance(self._outcome, RemotingCommand) else b""

    def set(self, outcome: RemotingCommand | RemotingError) -> None:
        self._outcome = outcome
        self._event.set()

    async def wait(self) -> RemotingCommand:
        await self._event.wait()
        outcome = self._outcome
        if isinstance(outcome, RemotingCommand):
            return outcome
        assert outcome is not None
        raise outcome


def _lost_subscription(exc: Exception) -> str | None:
    """The broker that refused a pull because it lacks the group's subscription of the topic (SUBSCRIPTION_NOT_EXIST)
    or has an older one (SUBSCRIPTION_NOT_LATEST), which a heartbeat to it cures; ``None`` for any other failure."""
    if isinstance(exc, MQBrokerError) and exc.code in _CURED_BY_HEARTBEAT:
        return exc.address
    return None


@attrs.frozen(slots=True)
class _PullRequest:
    """What a flow-control warning names: Java's ``PullRequest``, formatted only when logged."""

    group: str
    mq: MessageQueue
    next_offset: int

    def __str__(self) -> str:
        queue = java_queue_string(self.mq)
        return f"PullRequest [consumerGroup={self.group}, messageQueue={queue}, nextOffset={self.next_offset}]"
