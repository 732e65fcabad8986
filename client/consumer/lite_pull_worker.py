"""The pull side of :class:`~client.consumer.lite_pull.LitePullConsumer`: one task per assigned queue long-polls
the broker and hands each non-empty result to the consumer's buffer as a :class:`Batch` (traced as it is pulled when
the consumer has message trace on).
A queue assigned without a start offset (assign mode) has it computed by its pull task first, as Java's
``PullTaskImpl.nextPullOffset``: a broker that does not answer is asked again after ``PULL_DELAY_ON_ERROR`` (3 s).

:class:`LitePullWorker` is the consumer's base class; the consumer owns the queue states, the buffer stream and the
task group, and starts :meth:`LitePullWorker._pull_loop` per queue. A failed pull is logged and retried after
the consumer's ``pull_time_delay_when_exception`` (1 s), one the broker answered FLOW_CONTROL after 20 ms; a full
queue waits ``PULL_DELAY_FLOW_CONTROL`` (50 ms), warned of as Java warns (the first time and every 1000th after), a
paused one 1 s. A pull asks the broker to hold it
``broker_suspend_max_time`` (20 s) and waits ``consumer_timeout_when_suspend`` (30 s) for the answer.
The loop ends when the queue's process queue is dropped or its cancel scope (``QueueState.scope``) is cancelled.

Statistics (:mod:`client.consumer.stats`): a FOUND pull records its round trip as pull RT and its messages, when the
tag filter left any, as pull TPS, as the push consumer's pull loop does (Java's lite pull consumer records none).
"""

from __future__ import annotations

import logging

import anyio
import attrs
from anyio.streams.memory import MemoryObjectSendStream

from client import api
from client.consumer.hooks import ConsumeMessageContext, ConsumeMessageHook, run_after, run_before
from client.consumer.listener import ConsumeConcurrentlyStatus
from client.consumer.process_queue import FlowControl, ProcessQueue
from client.consumer.pull_service import (
    PULL_DELAY_BROKER_FLOW_CONTROL,
    PULL_DELAY_FLOW_CONTROL,
    PULL_DELAY_ON_ERROR,
    PULL_DELAY_WHEN_SUSPEND,
    PULL_FLAG_SUBSCRIPTION,
    PULL_FLAG_SUSPEND,
)
from client.consumer.pull_target import PullTargets
from client.consumer.rebalance import Rebalance
from client.consumer.subscription import build_subscription, tag_filter
from client.errors import MQBrokerError
from client.instance import MQClientInstance
from client.namespace import strip_namespace
from client.trace.dispatcher import TraceDispatcher
from remoting.codec.bodies import MessageQueue
from remoting.codec.codes import ResponseCode
from remoting.codec.headers import PullMessageRequestHeader
from remoting.codec.message import MessageExt

# The consumer's logger name, as before the pull loop moved here.
log = logging.getLogger("client.consumer.lite_pull")

PULL_FLAG_LITE_PULL = 0x10


@attrs.define(slots=True, eq=False)
class QueueState:
    """One ownership of an assigned queue: its process queue, next pull offset (``None`` until the pull task
    computed it) and pull task's scope. A seek or a queue taken again gets a new one, so a batch pulled under
    another is recognised by identity."""

    pq: ProcessQueue
    next_offset: int | None
    consumed_offset: int | None = None
    scope: anyio.CancelScope | None = None


@attrs.frozen(slots=True)
class Batch:
    """One pull result waiting for ``poll``; stale unless ``state`` is still the queue's current one (Java skips
    a ConsumeRequest whose ProcessQueue is dropped)."""

    mq: MessageQueue
    state: QueueState
    messages: list[MessageExt]


class LitePullWorker:
    """Per-queue pull loops of :class:`~client.consumer.lite_pull.LitePullConsumer`; the attributes below are set by
    its constructor."""

    _group: str
    namespace: str | None
    instance: MQClientInstance
    rebalance: Rebalance
    pull_batch_size: int
    pull_threshold_for_queue: int
    pull_threshold_size_for_queue: int
    pull_threshold_for_all: int
    consume_max_span: int
    pull_time_delay_when_exception: float
    broker_suspend_max_time: float
    consumer_timeout_when_suspend: float
    _queues: dict[MessageQueue, QueueState]
    _paused: set[MessageQueue]
    _send: MemoryObjectSendStream[Batch]
    _targets: PullTargets
    trace: TraceDispatcher | None
    consume_hooks: list[ConsumeMessageHook]
    #: Pulls put off by the requests not yet polled (Java's ``consumeRequestFlowControlTimes``); by a queue's own
    #: cache: ``_flow_control``.
    _request_flow_controls: int = 0
    _flow_control: FlowControl

    async def _pull_loop(self, mq: MessageQueue, state: QueueState) -> None:
        with anyio.CancelScope() as scope:
            state.scope = scope
            while not state.pq.dropped:
                if mq in self._paused:  # PullTaskImpl.run: PULL_TIME_DELAY_MILLS_WHEN_PAUSE
                    await anyio.sleep(PULL_DELAY_WHEN_SUSPEND)
                    continue
                if self._full(state):
                    await anyio.sleep(PULL_DELAY_FLOW_CONTROL)
                    continue
                try:
                    await self._pull_once(mq, state)
                except Exception as exc:
                    log.info("lite pull from %s at %s failed: %s", mq, state.next_offset, exc)
                    if isinstance(exc, MQBrokerError) and exc.code == ResponseCode.FLOW_CONTROL:
                        # PullTaskImpl.run's PULL_TIME_DELAY_MILLS_WHEN_BROKER_FLOW_CONTROL: busy, not gone.
                        await anyio.sleep(PULL_DELAY_BROKER_FLOW_CONTROL)
                        continue
                    # PullTaskImpl.run (client/src/main/java/org/apache/rocketmq/client/impl/consumer/
                    # DefaultLitePullConsumerImpl.java): a failed nextPullOffset waits
                    # PULL_TIME_DELAY_MILLS_ON_EXCEPTION (3 s), a failed pull the consumer's
                    # pullTimeDelayMillsWhenException (1000 ms by default).
                    offset_unknown = state.next_offset is None
                    await anyio.sleep(PULL_DELAY_ON_ERROR if offset_unknown else self.pull_time_delay_when_exception)

    def _full(self, state: QueueState) -> bool:
        """DefaultLitePullConsumer's flow control: the queue's buffer by count, body size and span of its offsets
        (``consumeMaxSpan``), all queues' by the pulls not yet polled, each counted as ``pull_batch_size`` messages
        (``consumeRequestCache.size() * pullBatchSize``, ``PullTaskImpl.run`` in
        client/src/main/java/org/apache/rocketmq/client/impl/consumer/DefaultLitePullConsumerImpl.java), which warns
        the first time and every 1000th time after each kind of flow control."""
        buffered = self._send.statistics().current_buffer_used
        if buffered * self.pull_batch_size > self.pull_threshold_for_all:
            self._request_flow_controls += 1
            if self._request_flow_controls % 1000 == 1:
                log.warning(
                    "The consume request count exceeds threshold %d, so do flow control, consume request count=%d, "
                    "flowControlTimes=%d",
                    self.pull_threshold_for_all, buffered, self._request_flow_controls,
                )  # fmt: skip
            return True
        limits = self.pull_threshold_for_queue, self.pull_threshold_size_for_queue, self.consume_max_span
        return self._flow_control.held(state.pq, *limits)

    def _trace_pulled(self, mq: MessageQueue, msgs: list[MessageExt]) -> None:
        """Java's ``pullSyncImpl`` hooks: SubBefore and at once a successful SubAfter (context code 0) for every
        pulled batch, whether or not its queue is dropped meanwhile; the registered hooks likewise, before and
        after with ``CONSUME_SUCCESS``."""
        if self.trace is not None and msgs:
            begun = self.trace.consume_before(strip_namespace(self._group), msgs)
            if begun is not None:
                self.trace.consume_after(begun, True, 0)
        if self.consume_hooks and msgs:
            context = ConsumeMessageContext(self._group, mq, msgs, namespace=self.namespace)
            run_before(self.consume_hooks, context)
            context.status, context.success = ConsumeConcurrentlyStatus.CONSUME_SUCCESS.name, True
            run_after(self.consume_hooks, context)

    async def _pull_once(self, mq: MessageQueue, state: QueueState) -> None:
        offset = state.next_offset
        if offset is None:
            offset = state.next_offset = await self.rebalance.compute_pull_from_where(mq)
        sub = self.rebalance.subscriptions.get(mq.topic) or build_subscription(mq.topic)
        addr, _is_slave = await self._targets.address(mq)
        header = PullMessageRequestHeader(
            consumer_group=self._group,
            topic=mq.topic,
            queue_id=mq.queue_id,
            queue_offset=offset,
            max_msg_nums=self.pull_batch_size,
            sys_flag=PULL_FLAG_SUSPEND | PULL_FLAG_SUBSCRIPTION | PULL_FLAG_LITE_PULL,
            commit_offset=0,
            suspend_timeout_millis=round(self.broker_suspend_max_time * 1000),
            sub_version=sub.sub_version,
            subscription=sub.sub_string,
            expression_type=sub.expression_type,
        )
        sent = anyio.current_time()
        timeout, remoting = self.consumer_timeout_when_suspend, self.instance.remoting
        result = await api.pull_message(remoting, addr, header, timeout, tag_filter(sub))
        if result.status is api.PullStatus.FOUND:
            now = anyio.current_time()
            stats = self.instance.consumer_stats.topic(self._group, mq.topic, now)
            stats.pulled(now, round((now - sent) * 1000))
            if result.messages:
                stats.pulled_messages(now, len(result.messages))
        self._trace_pulled(mq, result.messages)
        self._targets.suggest(mq, result.suggest_which_broker_id)
        if state.pq.dropped:
            return
        state.next_offset = result.next_begin_offset
        if result.messages:
            state.pq.put_messages(result.messages)
            self._send.send_nowait(Batch(mq, state, result.messages))
        elif result.status is api.PullStatus.OFFSET_ILLEGAL:
            log.warning("offset of %s is illegal, moving to %d", mq, result.next_begin_offset)
