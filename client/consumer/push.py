"""The push consumer (Java's ``DefaultMQPushConsumer``): rebalance, a long-polling pull loop per owned queue with flow
control, concurrent or orderly consumption, send-back on failure and offset commits.

Usage::

    async def on_messages(msgs: list[MessageExt]) -> ConsumeConcurrentlyStatus:
        ...
        return ConsumeConcurrentlyStatus.CONSUME_SUCCESS

    consumer = PushConsumer("my-group", namesrv_addr="127.0.0.1:9876")
    consumer.subscribe("TopicTest", "TagA || TagB")
    consumer.register_message_listener(on_messages)           # or register_message_listener_orderly(...)
    async with consumer:
        await anyio.sleep_forever()

Lifecycle: entering the block starts the client instance (unless one was passed in), asks one broker of its topic to
check each SQL92 subscription (CHECK_CLIENT_CONFIG, as Java's ``checkClientInBroker``: a refusal fails the start with
:class:`~client.errors.MQBrokerError` carrying the broker's code and remark; an unreachable broker is only logged),
sends a heartbeat and runs a first rebalance; leaving it stops pulling, lets in-flight listener calls finish (up to
``await_termination`` seconds; then they are cancelled, a plain listener's thread abandoned, and their messages stay
uncommitted; a suspended orderly queue is not waited for), commits offsets (CLUSTERING: UPDATE_CONSUMER_OFFSET;
BROADCASTING: the local file), unlocks orderly queues (but one an abandoned thread still consumes), unregisters from the
brokers and, once a rebalance pass under way ended (it takes no queue once the stop began), forgets its queues: a
restart rebalances from scratch. Timers (rebalance 20 s, offset persist 5 s, heartbeat, route refresh) run in the
instance; the orderly lock renewal (1 s after the start, then every 20 s) and, for concurrent consumption, the
clean-up of listener calls that overran ``consume_timeout`` (every ``consume_timeout`` minutes) run here.
"""

from __future__ import annotations

import logging
import os
import time
from collections.abc import Sequence
from types import TracebackType
from typing import Any, Final, Self

import anyio
import anyio.abc
import attrs

from client.config import ClientConfig
from client.consumer.allocate import AllocateStrategy, allocate_average
from client.consumer.client_check import check_sql92_subscriptions
from client.consumer.consume import (
    ConcurrentConsumeService,
    OrderlyConsumeService,
    reset_retry_topic,
    send_back_or_raise,
)
from client.consumer.hooks import ConsumeMessageHook
from client.consumer.listener import (
    ConsumeConcurrentlyContext,
    ConsumeConcurrentlyStatus,
    ConsumeOrderlyContext,
    ConsumeOrderlyStatus,
    MessageListener,
    PlainListener,
    bind_context,
    exception_simple_desc,
    listener_status,
    run_listener,
    takes_context,
)
from client.consumer.offset_store import OffsetStore, RemoteBrokerOffsetStore, offset_store_for
from client.consumer.process_queue import LOCK_INTERVAL, LOCK_MAX_LIVE, ProcessQueue, lock_interval, lock_max_live
from client.consumer.pull_service import PullService
from client.consumer.queue_listing import fetch_subscribe_message_queues
from client.consumer.rebalance import PULL_MAX_IDLE_TIME, Rebalance, pull_max_idle_time, unlock_delay
from client.consumer.subscription import build_subscription, retry_topic
from client.errors import ClientStateError, MQClientError
from client.instance import MQClientInstance, new_instance
from client.message import uncompressed
from client.namespace import resolve_namespace, unwrap, wrap
from client.send_request import check_consumer_group
from client.trace.dispatcher import TraceDispatcher
from remoting.codec.bodies import (
    EXPRESSION_TAG,
    ConsumeFromWhere,
    ConsumerData,
    ConsumeType,
    MessageModel,
    MessageQueue,
)
from remoting.codec.bodies.admin import (
    PROP_CONSUME_ORDERLY,
    PROP_CONSUMER_START_TIMESTAMP,
    PROP_THREADPOOL_CORE_SIZE,
)
from remoting.codec.message import MessageExt

log = logging.getLogger(__name__)

#: CONSUME_MESSAGE_DIRECTLY's ``consumeResult`` per status (Java's ``CMResult``, as the two services'
#: ``consumeMessageDirectly`` set it); any other status is CR_LATER.
_DIRECT_RESULTS: Final = {
    ConsumeConcurrentlyStatus.CONSUME_SUCCESS: "CR_SUCCESS",
    ConsumeOrderlyStatus.SUCCESS: "CR_SUCCESS",
    ConsumeOrderlyStatus.COMMIT: "CR_COMMIT",
    ConsumeOrderlyStatus.ROLLBACK: "CR_ROLLBACK",
}

#: Retry delay of a rebalance that left queues out (a lock held by the previous owner, who releases it on its own
#: rebalance), instead of the 20 s timer.
REBALANCE_RETRY_DELAY = 1.0
REBALANCE_QUICK_RETRIES = 10
#: The first renewal's delay from the start (``ConsumeMessageOrderlyService.start``'s initial delay, 1000 ms).
LOCK_FIRST_RENEW_DELAY = 1.0


class PushConsumer:
    """See the module docstring. Thresholds as in Java (the topic-wide ones, -1 by default, replace the per-queue ones
    with their share of the owned queues after each rebalance that changed them); times in seconds, but
    ``consume_timeout`` in minutes (Java's ``consumeTimeout``, 15; a concurrent consumer's start refuses one not above
    0 with ValueError, as Java's); ``pull_interval`` (Java's ``pullInterval`` in ms,
    at most 65.535 s) pauses a queue's pulls after each one that found messages. ``max_reconsume_times`` -1 (Java's
    default) means 16 for concurrent consumption and no limit for orderly consumption. ``allocate_strategy`` (Java's
    ``allocateMessageQueueStrategy``, :data:`~client.consumer.allocate.allocate_average` by default) is a strategy of
    :mod:`client.consumer.allocate` or the name of a settings-free one (``"AVG"``, ``"AVG_BY_CIRCLE"``,
    ``"CONSISTENT_HASH"``). ``post_subscription_when_pull`` (Java's ``postSubscriptionWhenPull``, off) sends the
    subscription with each pull; without it the broker serves pulls with the group's heartbeat subscription."""

    def __init__(
        self,
        group: str,
        namesrv_addr: str | Sequence[str] | None = None,
        *,
        instance: MQClientInstance | None = None,
        config: ClientConfig | None = None,
        message_model: MessageModel = MessageModel.CLUSTERING,
        consume_from_where: ConsumeFromWhere = ConsumeFromWhere.CONSUME_FROM_LAST_OFFSET,
        consume_timestamp_ms: int | None = None,
        allocate_strategy: AllocateStrategy | str = allocate_average,
        consume_thread_min: int = 20,
        consume_thread_max: int = 20,
        consume_message_batch_max_size: int = 1,
        pull_batch_size: int = 32,
        pull_threshold_for_queue: int = 1000,
        pull_threshold_size_for_queue_mib: int = 100,
        pull_threshold_for_topic: int = -1,
        pull_threshold_size_for_topic_mib: int = -1,
        consume_concurrently_max_span: int = 2000,
        pull_interval: float = 0.0,
        pull_time_delay_when_exception: float = 1.0,
        max_reconsume_times: int = -1,
        consume_timeout: float = 15.0,
        suspend_current_queue_time: float = 1.0,
        offset_store_dir: str | os.PathLike[str] | None = None,
        await_termination: float = 30.0,
        enable_msg_trace: bool = False,
        customized_trace_topic: str | None = None,
        namespace: str | None = None,
        post_subscription_when_pull: bool = False,
    ) -> None:
        self.instance, self._own_instance = (
            (instance, False) if instance is not None else (new_instance(config, namesrv_addr), True)
        )
        #: Topics and the group are ``namespace%name`` on the wire, the listener sees the topics without it
        #: (:mod:`client.namespace`); None or blank: the
        #: config's (:func:`client.namespace.resolve_namespace`).
        self.namespace = resolve_namespace(namespace, self.instance.config.resolved_namespace)
        self._group = group = wrap(self.namespace, group)
        self._message_model = message_model
        self.consume_message_batch_max_size = consume_message_batch_max_size
        self.pull_batch_size = pull_batch_size
        self.pull_threshold_for_queue = pull_threshold_for_queue
        self.pull_threshold_size_for_queue = pull_threshold_size_for_queue_mib * 1024 * 1024
        self.pull_threshold_for_topic = pull_threshold_for_topic
        self.pull_threshold_size_for_topic_mib = pull_threshold_size_for_topic_mib
        #: The per-queue thresholds as set, while a topic-wide one's split replaces them (restored at a restart).
        self._queue_thresholds: tuple[int, int] | None = None
        self.consume_concurrently_max_span = consume_concurrently_max_span
        #: Pause after a pull that found messages before the queue's next pull (Java's ``pullInterval``, 0).
        self.pull_interval = pull_interval
        #: Wait after a failed pull (or one put off: no broker lock, no subscription) before the queue's next: Java's
        #: ``pullTimeDelayMillsWhenException``, which DefaultMQPushConsumerImpl takes from ClientConfig (1000 ms).
        self.pull_time_delay_when_exception = pull_time_delay_when_exception
        #: Java's ``consumeThreadMin``, the consume executor's core size: over its unbounded queue no more threads
        #: run, so it bounds the listener calls at once; ``consume_thread_max`` is only checked, as Java's.
        self.consume_thread_min = consume_thread_min
        self.consume_thread_max = consume_thread_max
        self.max_reconsume_times = max_reconsume_times
        self.consume_timeout = consume_timeout
        #: how often an orderly consumer renews its locks and how long one counts, read at its start
        #: (:func:`lock_interval`, :func:`lock_max_live`), as ProcessQueue's static finals are read once
        self._lock_interval = LOCK_INTERVAL
        self.lock_max_live = LOCK_MAX_LIVE
        self.suspend_current_queue_time = suspend_current_queue_time
        self.await_termination = await_termination
        self.post_subscription_when_pull = post_subscription_when_pull
        self.consume_from_where = consume_from_where
        self.limiter = anyio.CapacityLimiter(max(1, consume_thread_min))
        callback_threads = self.instance.config.client_callback_executor_threads
        #: Bounds the listener calls of :meth:`consume_directly`, apart from the consume slots.
        self.direct_limiter = anyio.CapacityLimiter(callback_threads if callback_threads > 0 else 4)
        #: Wall-clock ms of construction (Java's ``consumerStartTimestamp``), shown in the running info.
        self.start_timestamp_ms = time.time_ns() // 1_000_000
        self.offset_store: OffsetStore = offset_store_for(self.instance, group, message_model, offset_store_dir)
        self.rebalance = Rebalance(
            self.instance,
            group,
            self,
            self.offset_store,
            message_model=message_model,
            strategy=allocate_strategy,
            consume_from_where=consume_from_where,
            consume_timestamp_ms=consume_timestamp_ms,
            pull_max_idle=PULL_MAX_IDLE_TIME,
        )
        self.rebalance.on_changed = self._allocation_changed
        self._listener: MessageListener | None = None
        self._listener_takes_context = False
        self.consume_service: ConcurrentConsumeService | OrderlyConsumeService | None = None
        self._consume_tasks: anyio.abc.TaskGroup | None = None
        self._background: anyio.abc.TaskGroup | None = None
        self.pull_service = PullService(self)
        self.stopping = False
        #: Set by :meth:`suspend`: no pull and no rebalance until :meth:`resume` (Java's ``pause``).
        self.paused = False
        self._started = False
        self._retry_pending = False
        self._quick_retries = 0
        #: Message trace (client/trace/): SubBefore/SubAfter records of every listener call, when switched on.
        self.trace: TraceDispatcher | None = None
        if enable_msg_trace:
            self.trace = TraceDispatcher(
                self.instance, unwrap(self.namespace, group), "CONSUME", customized_trace_topic
            )
        #: Hooks told of every listener call (:mod:`client.consumer.hooks`).
        self.consume_hooks: list[ConsumeMessageHook] = []

    # -- configuration ---------------------------------------------------------------------------------------------

    @property
    def group(self) -> str:
        return self._group

    @property
    def message_model(self) -> MessageModel:
        return self._message_model

    @property
    def allocate_message_queue_strategy(self) -> AllocateStrategy:
        """The queue allocation strategy (Java's ``allocateMessageQueueStrategy``); set, it takes effect at the next
        rebalance. A name (``"AVG"``, ``"AVG_BY_CIRCLE"``, ``"CONSISTENT_HASH"``) sets a new one of that kind."""
        return self.rebalance.strategy

    @allocate_message_queue_strategy.setter
    def allocate_message_queue_strategy(self, strategy: AllocateStrategy | str) -> None:
        self.rebalance.strategy = strategy

    @property
    def orderly(self) -> bool:
        return isinstance(self.consume_service, OrderlyConsumeService)

    def subscribe(self, topic: str, expression: str = "*", expression_type: str = EXPRESSION_TAG) -> None:
        """Subscribe to ``topic`` with a tag expression (``"*"``, ``"A || B"``) or, with ``expression_type="SQL92"``,
        an SQL92 filter. May be called while running: the next heartbeat and rebalance pick it up."""
        topic = wrap(self.namespace, topic)
        self.rebalance.subscriptions[topic] = build_subscription(topic, expression, expression_type)
        if self._started and self._background is not None:
            # As Java: brokers hear of the new subscription at once, then the rebalance picks up its queues.
            self._background.start_soon(self._announce_subscription, topic)

    async def _announce_subscription(self, topic: str) -> None:
        try:
            await self.instance.fetch_route(topic, wait_greeting=True)
        except Exception as exc:
            log.info("consumer %s: %s", self._group, exc)
        await self.instance.send_heartbeat_to_all_brokers()
        self.instance.wake_rebalance()

    def unsubscribe(self, topic: str) -> None:
        self.rebalance.subscriptions.pop(wrap(self.namespace, topic), None)

    def register_message_listener(self, listener: MessageListener) -> None:
        """Concurrent consumption: ``listener(msgs)``, or ``listener(msgs, context)`` with a
        :class:`~client.consumer.listener.ConsumeConcurrentlyContext`, returns a :class:`ConsumeConcurrentlyStatus`."""
        self._set_listener(listener)
        self.consume_service = ConcurrentConsumeService(self)

    def register_message_listener_orderly(self, listener: MessageListener) -> None:
        """Orderly consumption: ``listener(msgs)``, or ``listener(msgs, context)`` with a
        :class:`~client.consumer.listener.ConsumeOrderlyContext`, returns a :class:`ConsumeOrderlyStatus`; one queue at
        a time."""
        self._set_listener(listener)
        self.consume_service = OrderlyConsumeService(self)
        self.rebalance.orderly = True

    def suspend(self) -> None:
        """Stop pulling until :meth:`resume`, as Java's ``suspend()`` sets ``pause``
        (``client/src/main/java/org/apache/rocketmq/client/impl/consumer/DefaultMQPushConsumerImpl.java``): each
        queue's pulls are put off a second at a time (``PULL_TIME_DELAY_MILLS_WHEN_SUSPEND``) and rebalancing stops;
        a pull already sent, and what is already pulled, is still consumed. Also before the start (it starts
        paused)."""
        self.paused = True
        log.info("suspend this consumer, %s", self._group)

    def resume(self) -> None:
        """Pull again (within a second) and rebalance at once, as Java's ``resume()``."""
        self.paused = False
        log.info("resume this consumer, %s", self._group)
        if self._started and not self.stopping:
            self.instance.wake_rebalance()

    async def fetch_subscribe_message_queues(self, topic: str) -> list[MessageQueue]:
        """Every readable queue of ``topic`` in the name server's route, named without the namespace, as Java's public
        ``DefaultMQPushConsumer.fetchSubscribeMessageQueues``: no route, no readable queue or any other failure raises
        :class:`MQClientError` "Can not find Message Queue for this topic, <topic>" with the FAQ hint, the failure as
        its cause (``MQAdminImpl.fetchSubscribeMessageQueues``; see :mod:`client.consumer.queue_listing`)."""
        if not self._started:
            raise ClientStateError(f"push consumer {self._group!r} is not running")
        return await fetch_subscribe_message_queues(self.instance, self.namespace, topic)

    async def send_message_back(self, msg: MessageExt, delay_level: int, broker_name: str | None = None) -> None:
        """Return ``msg`` (as a listener got it) to the broker, to come back through the group's retry topic after
        ``delay_level``'s delay (0: the broker's, 3 + its reconsume times; -1: the DLQ), as Java's public
        ``DefaultMQPushConsumer.sendMessageBack(msg, delayLevel[, brokerName])``: CONSUMER_SEND_MSG_BACK to the master
        of ``broker_name`` or, without one, to the host that stored ``msg``; when that fails, a copy sent to the retry
        topic. Raises when that fails too (:class:`~client.errors.MQClientError` or ``RemotingError``)."""
        if not self._started:
            raise ClientStateError(f"push consumer {self._group!r} is not running")
        msg = attrs.evolve(msg, topic=wrap(self.namespace, msg.topic))  # Java's withNamespace(msg.getTopic())
        await send_back_or_raise(self, msg, broker_name, delay_level)

    def register_consume_message_hook(self, hook: ConsumeMessageHook) -> None:
        """Tell ``hook`` of every listener call, before and after (Java's ``registerConsumeMessageHook``,
        ``client/src/main/java/org/apache/rocketmq/client/impl/consumer/DefaultMQPushConsumerImpl.java``; run by
        ConsumeMessageConcurrentlyService and ConsumeMessageOrderlyService): see :mod:`client.consumer.hooks`. A
        call skipped before it started (its queue dropped) is told of neither; CONSUME_MESSAGE_DIRECTLY runs none."""
        self.consume_hooks.append(hook)

    def _set_listener(self, listener: MessageListener) -> None:
        self._listener, self._listener_takes_context = listener, takes_context(listener)

    @property
    def listener(self) -> MessageListener:
        assert self._listener is not None
        return self._listener

    def bound_listener(self, context: ConsumeConcurrentlyContext | ConsumeOrderlyContext) -> PlainListener:
        """The listener, to be called with the messages alone: with ``context`` too if it takes one."""
        return bind_context(self.listener, context, self._listener_takes_context)

    @property
    def consume_tasks(self) -> anyio.abc.TaskGroup:
        if self._consume_tasks is None:
            raise ClientStateError(f"push consumer {self._group!r} is not running")
        return self._consume_tasks

    @property
    def background_tasks(self) -> anyio.abc.TaskGroup:
        if self._background is None:
            raise ClientStateError(f"push consumer {self._group!r} is not running")
        return self._background

    # -- lifecycle -------------------------------------------------------------------------------------------------

    async def __aenter__(self) -> Self:
        if self._background is not None or self._consume_tasks is not None:
            # DefaultMQPushConsumerImpl.start (client/src/main/java/org/apache/rocketmq/client/impl/consumer/
            # DefaultMQPushConsumerImpl.java) throws on any state but CREATE_JUST and changes nothing: the clean-up of
            # a failed start below would stop the running consumer.
            raise ClientStateError(f"push consumer {self._group!r} is running already: maybe started once")
        check_consumer_group(self._group)  # DefaultMQPushConsumerImpl.checkConfig
        if self._queue_thresholds is not None:
            # A last run's split is not a setting: a restart checks the per-queue values as set (a share may exceed
            # checkConfig's per-queue ranges) and splits again.
            self.pull_threshold_for_queue, self.pull_threshold_size_for_queue = self._queue_thresholds
            self._queue_thresholds = None
        self._check_ranges()
        self.limiter.total_tokens = self.consume_thread_min  # the executor is made at start, with the core size
        if self.consume_service is None:
            raise ClientStateError("register a message listener before starting the consumer")
        if isinstance(self.consume_service, ConcurrentConsumeService) and not self.consume_timeout > 0:
            # ConsumeMessageConcurrentlyService.start schedules cleanExpireMsg every consumeTimeout minutes
            # (scheduleAtFixedRate, which refuses a period not above 0): here the clean-up would spin.
            raise ValueError(f"consumeTimeout must be above 0 minutes to consume concurrently: {self.consume_timeout}")
        # The timings Java reads from system properties, read once at each start: a bad one fails it, as Java's
        # Long.parseLong fails ProcessQueue's class load.
        self.rebalance.pull_max_idle = pull_max_idle_time()
        if self.orderly:
            self._lock_interval = lock_interval()
            self.lock_max_live = lock_max_live()
            self.rebalance.unlock_delay_time = unlock_delay()
            self._check_lock_interval()
        self.stopping = False
        began = anyio.current_time()
        # A retry pending when the last run stopped died with its task group: this run schedules its own.
        self._retry_pending, self._quick_retries = False, 0
        if self._message_model is MessageModel.CLUSTERING:
            retry = retry_topic(self._group)
            self.rebalance.subscriptions.setdefault(retry, build_subscription(retry, "*"))
        if self._own_instance:
            await self.instance.__aenter__()
        try:
            self._consume_tasks = anyio.create_task_group()
            await self._consume_tasks.__aenter__()
            self._background = anyio.create_task_group()
            await self._background.__aenter__()
            self.instance.register_consumer(self)
            await self.offset_store.load()
            self._started = True
            if self.trace is not None:
                await self.trace.start()
            for topic in list(self.rebalance.subscriptions):
                try:
                    await self.instance.fetch_route(topic, wait_greeting=True)
                except Exception as exc:
                    log.info("consumer %s: %s", self._group, exc)
            await self._check_client_in_brokers()
            await self.instance.send_heartbeat_to_all_brokers()
            await self.do_rebalance()
            if self.orderly and self._message_model is MessageModel.CLUSTERING:
                self._background.start_soon(self._renew_locks, began + LOCK_FIRST_RENEW_DELAY)
            if isinstance(self.consume_service, ConcurrentConsumeService):
                self._background.start_soon(self.consume_service.clean_expired_loop)
        except BaseException:
            await self._stop()
            raise
        return self

    def _check_ranges(self) -> None:
        """The ranges ``DefaultMQPushConsumerImpl.checkConfig`` holds the settings to
        (``client/src/main/java/org/apache/rocketmq/client/impl/consumer/DefaultMQPushConsumerImpl.java``), with its
        messages; raises :class:`~client.errors.MQClientError`. The topic-wide thresholds may also be -1 (off)."""
        size_mib = self.pull_threshold_size_for_queue // (1024 * 1024)
        checks: list[tuple[str, int, int, int]] = [
            ("consumeThreadMin", self.consume_thread_min, 1, 1000),
            ("consumeThreadMax", self.consume_thread_max, 1, 1000),
            ("consumeConcurrentlyMaxSpan", self.consume_concurrently_max_span, 1, 65535),
            ("pullThresholdForQueue", self.pull_threshold_for_queue, 1, 65535),
            ("pullThresholdSizeForQueue", size_mib, 1, 1024),
            ("consumeMessageBatchMaxSize", self.consume_message_batch_max_size, 1, 1024),
            ("pullBatchSize", self.pull_batch_size, 1, 1024),
            ("pullInterval", round(self.pull_interval * 1000), 0, 65535),
        ]
        if self.pull_threshold_for_topic != -1:
            checks.append(("pullThresholdForTopic", self.pull_threshold_for_topic, 1, 6553500))
        if self.pull_threshold_size_for_topic_mib != -1:
            checks.append(("pullThresholdSizeForTopic", self.pull_threshold_size_for_topic_mib, 1, 102400))
        for name, value, low, high in checks:
            if not low <= value <= high:
                raise MQClientError(f"{name} Out of range [{low}, {high}]")
        low, high = self.consume_thread_min, self.consume_thread_max
        if low > high:
            raise MQClientError(f"consumeThreadMin ({low}) is larger than consumeThreadMax ({high})")

    async def _check_client_in_brokers(self) -> None:
        """CHECK_CLIENT_CONFIG for every SQL92 subscription (:mod:`client.consumer.client_check`)."""
        await check_sql92_subscriptions(self.instance, self._group, list(self.rebalance.subscriptions.values()))

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self._stop()

    async def _stop(self) -> None:
        self.stopping = True
        if isinstance(self.consume_service, OrderlyConsumeService):
            self.consume_service.end_pauses()  # a suspended queue is not waited for
        background, self._background = self._background, None
        consume, self._consume_tasks = self._consume_tasks, None
        try:
            try:
                if background is not None:
                    background.cancel_scope.cancel()
                    await background.__aexit__(None, None, None)
                if consume is not None:
                    # In-flight listener calls finish; only a listener that overruns await_termination is cancelled.
                    consume.cancel_scope.deadline = anyio.current_time() + self.await_termination
                    await consume.__aexit__(None, None, None)
            finally:  # even when a task failed: the last offsets and the goodbye still go out
                if self._started:
                    with anyio.CancelScope(shield=True):
                        if self.trace is not None:
                            await self.trace.stop()
                        await self.persist_offsets()
                        await self._unlock_idle_queues()
                        await self.instance.unregister(consumer_group=self._group)
        finally:
            self._started = False
            self.offset_store.close()
            # A restart rebalances from scratch and reads the offsets committed above.
            with anyio.CancelScope(shield=True):
                await self.rebalance.drop_all()
            if self._own_instance:
                await self.instance.__aexit__(None, None, None)

    async def _unlock_idle_queues(self) -> None:
        """At a stop, give up the broker locks of the orderly queues no listener call runs on. A queue whose abandoned
        plain listener's thread still runs keeps its lock until it expires, so no other member consumes it beside
        that thread (Java unlocks every queue)."""
        service = self.consume_service
        if isinstance(service, OrderlyConsumeService) and self.rebalance.locks_queues:  # BROADCASTING locked none
            await self.rebalance.unlock([mq for mq in self.rebalance.process_queues if not service.calling(mq)])

    # -- ConsumerInner -------------------------------------------------------------------------------------------------

    @property
    def consume_type(self) -> ConsumeType:
        return ConsumeType.CONSUME_PASSIVELY

    def consumer_data(self) -> ConsumerData:
        return ConsumerData(
            group_name=self._group,
            consume_type=self.consume_type,
            message_model=self._message_model,
            consume_from_where=self.consume_from_where,
            subscription_data_set=tuple(sub for _, sub in sorted(self.rebalance.subscriptions.items())),
        )

    def subscribed_topics(self) -> set[str]:
        return set(self.rebalance.subscriptions)

    async def do_rebalance(self) -> None:
        if self.stopping or self.paused:  # DefaultMQPushConsumerImpl.doRebalance: nothing while paused
            return
        await self.rebalance.do_rebalance()
        if not self.rebalance.incomplete:
            self._quick_retries = 0
        elif not self._retry_pending and self._background is not None and self._quick_retries < REBALANCE_QUICK_RETRIES:
            # A topic that stays unroutable falls back to the 20 s timer after a few quick tries.
            self._quick_retries += 1
            self._retry_pending = True
            self._background.start_soon(self._rebalance_soon)

    async def _allocation_changed(self, topic: str, mq_all: set[MessageQueue], allocated: set[MessageQueue]) -> None:
        """A pass changed the owned queues of ``topic``, as RebalancePushImpl.messageQueueChanged
        (``client/src/main/java/org/apache/rocketmq/client/impl/consumer/RebalancePushImpl.java``): a topic-wide
        threshold (``pull_threshold_for_topic``, ``pull_threshold_size_for_topic_mib``; -1: off) is split evenly over
        every owned queue (at least 1 message or 1 MiB each) and becomes the per-queue one; every broker hears the
        group's heartbeat at once, so one that restarted (a fresh client table) knows the group before its queues'
        pulls reach it, with the topic's subscription stamped with a newer ``subVersion`` (now in ms, at least one
        more than before), so the broker keeps this member's. A restart starts from the per-queue values as set."""
        sub = self.rebalance.subscriptions.get(topic)
        if sub is not None:
            version = max(time.time_ns() // 1_000_000, sub.sub_version + 1)
            self.rebalance.subscriptions[topic] = attrs.evolve(sub, sub_version=version)
        owned = len(self.rebalance.process_queues)
        topic_wide = self.pull_threshold_for_topic != -1 or self.pull_threshold_size_for_topic_mib != -1
        if owned and topic_wide and self._queue_thresholds is None:
            self._queue_thresholds = (self.pull_threshold_for_queue, self.pull_threshold_size_for_queue)
        if owned:
            if self.pull_threshold_for_topic != -1:
                self.pull_threshold_for_queue = max(1, self.pull_threshold_for_topic // owned)
            if self.pull_threshold_size_for_topic_mib != -1:
                self.pull_threshold_size_for_queue = (
                    max(1, self.pull_threshold_size_for_topic_mib // owned) * 1024 * 1024
                )
        await self.instance.send_heartbeat_to_all_brokers()

    async def _rebalance_soon(self) -> None:
        await anyio.sleep(REBALANCE_RETRY_DELAY)
        self._retry_pending = False
        self.instance.wake_rebalance()

    async def persist_offsets(self) -> None:
        """The timer's and the shutdown's persist of the owned queues' offsets (Java's ``persistConsumerOffset``);
        the broker-kept store then forgets the offsets of queues no longer owned
        (:meth:`~client.consumer.offset_store.RemoteBrokerOffsetStore.retain`)."""
        await self.offset_store.persist_all(list(self.rebalance.process_queues))
        if isinstance(self.offset_store, RemoteBrokerOffsetStore):
            self.offset_store.retain(self.rebalance.process_queues)  # owned now: a pass may have taken one meanwhile

    def running_info(self) -> dict[str, Any]:
        """Java's ``DefaultMQPushConsumerImpl.consumerRunningInfo``: the settings Java lists under their field names
        (``MixAll.object2Properties``), the orderly flag, the consume concurrency and the start time, and each owned
        queue's ``ProcessQueueInfo`` and each subscribed topic's ``ConsumeStatus`` (:mod:`client.consumer.stats`; the
        retry topic's too, as Java lists every subscription)."""
        now, now_ms = anyio.current_time(), round(time.time() * 1000)
        stats = self.instance.consumer_stats
        return {
            "properties": {
                "consumerGroup": self._group,
                "messageModel": self._message_model.name,
                "consumeFromWhere": self.consume_from_where.name,
                "consumeThreadMin": str(self.consume_thread_min),
                "consumeThreadMax": str(self.consume_thread_max),
                "consumeMessageBatchMaxSize": str(self.consume_message_batch_max_size),
                "pullBatchSize": str(self.pull_batch_size),
                "consumeConcurrentlyMaxSpan": str(self.consume_concurrently_max_span),
                "pullThresholdForQueue": str(self.pull_threshold_for_queue),
                "pullThresholdSizeForQueue": str(self.pull_threshold_size_for_queue // (1024 * 1024)),
                "pullThresholdForTopic": str(self.pull_threshold_for_topic),
                "pullThresholdSizeForTopic": str(self.pull_threshold_size_for_topic_mib),
                "pullInterval": str(round(self.pull_interval * 1000)),
                "pullTimeDelayMillsWhenException": str(round(self.pull_time_delay_when_exception * 1000)),
                "maxReconsumeTimes": str(self.max_reconsume_times),
                "consumeTimeout": f"{self.consume_timeout:g}",
                "suspendCurrentQueueTimeMillis": str(round(self.suspend_current_queue_time * 1000)),
                PROP_CONSUME_ORDERLY: str(self.orderly).lower(),
                PROP_THREADPOOL_CORE_SIZE: str(int(self.limiter.total_tokens)),
                PROP_CONSUMER_START_TIMESTAMP: str(self.start_timestamp_ms),
            },
            "subscriptionSet": [sub.to_json() for sub in self.rebalance.subscriptions.values()],
            "mqTable": {
                mq: pq.info(self.offset_store.read_memory(mq) or 0, now, now_ms)
                for mq, pq in self.rebalance.process_queues.items()
            },
            "statusTable": {topic: stats.status(self._group, topic, now) for topic in self.rebalance.subscriptions},
        }

    async def consume_directly(self, msg: MessageExt, broker_name: str | None) -> dict[str, object]:
        """CONSUME_MESSAGE_DIRECTLY (Java's ``consumeMessageDirectly``): the listener gets ``msg`` as a delivery shows
        it (a retry message under its original topic); CR_SUCCESS, CR_LATER, CR_RETURN_NULL for ``None``, or
        CR_THROW_EXCEPTION with the exception in the remark. The call takes no consume slot, so it is answered while
        every consume thread is busy, but one of :attr:`direct_limiter`: Java runs it on the remoting thread that took
        the request, one of the ``clientCallbackExecutorThreads`` of NettyRemotingClient's public executor."""
        started = anyio.current_time()
        remark: str | None = None
        mq = MessageQueue(msg.topic, broker_name or "", msg.queue_id)
        context = ConsumeOrderlyContext(mq) if self.orderly else ConsumeConcurrentlyContext(mq)
        try:
            shown = [reset_retry_topic(uncompressed(msg), self._group, self.namespace)]
            result = await run_listener(self.bound_listener(context), shown, self.direct_limiter)
        except Exception as exc:
            log.warning(
                "consumer %s: the listener failed on %s consumed directly", self._group, msg.msg_id, exc_info=True
            )
            outcome, remark = "CR_THROW_EXCEPTION", exception_simple_desc(exc)
        else:
            outcome = "CR_RETURN_NULL" if result is None else self._direct_outcome(result)
        return {
            "order": self.orderly,
            "autoCommit": not isinstance(context, ConsumeOrderlyContext) or context.auto_commit,
            "consumeResult": outcome,
            "remark": remark,
            "spentTimeMills": int((anyio.current_time() - started) * 1000),
        }

    def _direct_outcome(self, result: object) -> str:
        """CONSUME_MESSAGE_DIRECTLY's ``consumeResult`` for a listener's non-``None`` result."""
        later = (
            ConsumeOrderlyStatus.SUSPEND_CURRENT_QUEUE_A_MOMENT
            if self.orderly
            else ConsumeConcurrentlyStatus.RECONSUME_LATER
        )
        return _DIRECT_RESULTS.get(listener_status(result, later), "CR_LATER")

    async def reset_offset(self, topic: str, offsets: dict[MessageQueue, int]) -> None:
        """RESET_CONSUMER_CLIENT_OFFSET: :meth:`Rebalance.reset` (the owned queues of ``topic`` listed in ``offsets``
        are dropped, their new offsets persisted), then a rebalance, which takes them again from there."""
        await self.rebalance.reset(topic, offsets)
        self.instance.wake_rebalance()

    # -- RebalanceOwner ------------------------------------------------------------------------------------------------

    @property
    def taking_queues(self) -> bool:
        return not self.stopping and self._background is not None

    def on_queue_added(self, mq: MessageQueue, pq: ProcessQueue, offset: int) -> None:
        self.offset_store.update(mq, offset)
        self.background_tasks.start_soon(self.pull_service.pull_loop, mq, pq, offset)

    async def on_queue_removed(self, mq: MessageQueue, pq: ProcessQueue) -> None:
        self.pull_service.stop(mq)

    async def consume_idle(self, mq: MessageQueue, timeout: float) -> bool:
        service = self.consume_service
        return await service.idle(mq, timeout) if isinstance(service, OrderlyConsumeService) else True

    # -- pulling -------------------------------------------------------------------------------------------------------

    def _check_lock_interval(self) -> None:
        """Refuse a lock interval not above 0 in CLUSTERING: ConsumeMessageOrderlyService.start renews the locks with
        ``scheduleAtFixedRate``, which throws for such a period; here the renewals would never wait."""
        if self._message_model is MessageModel.CLUSTERING and not self._lock_interval > 0:
            raise ValueError(
                "ROCKETMQ_CLIENT_REBALANCE_LOCK_INTERVAL must be above 0 ms for an orderly consumer in CLUSTERING: "
                f"{self._lock_interval * 1000:g}"
            )

    async def _renew_locks(self, first: float) -> None:
        """Renew the locks at the clock's ``first``, then every :func:`~client.consumer.process_queue.lock_interval`
        (at a fixed rate, as ``scheduleAtFixedRate``: a late renewal does not delay the next)."""
        due, interval = first, self._lock_interval
        while True:
            await anyio.sleep_until(due)
            await self.rebalance.lock_all()
            due += interval
