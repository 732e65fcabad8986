"""The lite pull consumer (Java's ``DefaultLitePullConsumer``): the application calls :meth:`poll` instead of
registering a listener.

Usage::

    async with LitePullConsumer("my-group", namesrv_addr="127.0.0.1:9876") as consumer:
        await consumer.subscribe("TopicTest")            # group rebalance decides the queues
        # or: consumer.assign(await consumer.fetch_message_queues("TopicTest"))
        msgs = await consumer.poll(timeout=5.0)          # [] when nothing arrived in time
        await consumer.seek(mq, 0)                       # replay; also seek_to_begin / seek_to_end
        await consumer.commit()                          # with auto_commit=False; or commit({mq: offset})

A background task per queue pulls (long polling) into a buffer bounded per queue (``pull_threshold_for_queue``
messages, ``pull_threshold_size_for_queue_mib`` MiB of bodies, ``consume_max_span`` offsets between its first and
last buffered message) and in all (``pull_threshold_for_all`` messages, each pull not yet polled counted as
``pull_batch_size`` of them), as DefaultLitePullConsumer's flow control;
``poll`` hands out one buffered batch, waiting ``poll_timeout`` (5 s, Java's ``pollTimeoutMillis``) unless given a
timeout. A failed pull is made again after ``pull_time_delay_when_exception`` (1 s,
Java's ``pullTimeDelayMillsWhenException``). A pull is held by the broker up to ``broker_suspend_max_time`` (20 s) and
waited for ``consumer_timeout_when_suspend`` (30 s, not below the hold), Java's ``brokerSuspendMaxTimeMillis`` and
``consumerTimeoutMillisWhenSuspend``. With ``auto_commit`` (the default) a ``poll`` first commits what the
earlier polls returned, at most every ``auto_commit_interval`` (5 s), as Java's ``maybeAutoCommit``: the batch the
application is processing is not committed until it polls again, so a crash (or an error leaving the block) gets it
delivered again, never skipped. Otherwise :meth:`commit` commits. Committed offsets
are written every ``persist_consumer_offset_interval`` (5 s) and at shutdown, or at once by ``commit`` (a broker that
fails is logged, the others' offsets still go out) unless it is given ``persist=False``.
BROADCASTING consumers (``message_model``) take every queue and keep their offsets in a local file, as push
consumers do (:func:`~client.consumer.offset_store.offset_store_for`). :meth:`unsubscribe` drops a topic's queues.
A listener registered with :meth:`register_topic_message_queue_change_listener` hears of a topic's queue set
changing (checked every ``topic_metadata_check_interval``, 30 s, first 10 s after start); one given to
:meth:`subscribe` hears of this member's share of a topic changing after a rebalance. An SQL92 subscription is
checked with a broker of its topic first (CHECK_CLIENT_CONFIG, :mod:`client.consumer.client_check`): a refused one
fails :meth:`subscribe` (or a restart) with the broker's answer and is not kept.

With ``enable_msg_trace`` (and ``customized_trace_topic``) every pulled batch is traced at once, as Java's
``DefaultLitePullConsumerImpl.pullSyncImpl`` runs the consume hooks: SubBefore, then a successful SubAfter (context
code 0), so the records say when the messages were fetched, not when the application handled them.

Leaving the block stops the pull tasks, writes the committed offsets (not what the last polls returned: Java's
shutdown runs ``persistConsumerOffset`` only) and forgets the queues and what is buffered; entering it again takes up
the subscriptions (a rebalance at once) or the assigned queues from the committed offsets.

``seek`` discards what is buffered for the queue and restarts its pull at the new offset; it commits nothing (the
next auto-commit or ``commit`` does, as Java's). Each ownership of a
queue (taken, seeked, taken again) has its own ``QueueState``: a buffered batch is handed out only while its state
is still the queue's. The per-queue pull task is
:class:`~client.consumer.lite_pull_worker.LitePullWorker`'s.
"""

from __future__ import annotations

import inspect
import logging
import math
import os
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from types import TracebackType
from typing import Any, Self

import anyio
import anyio.abc
import anyio.lowlevel
import attrs

from client import api
from client.config import ClientConfig
from client.consumer.allocate import AllocateStrategy, allocate_average, java_queue_string
from client.consumer.client_check import check_sql92_subscriptions
from client.consumer.hooks import ConsumeMessageHook
from client.consumer.lite_pull_worker import Batch, LitePullWorker, QueueState
from client.consumer.offset_store import OffsetStore, RemoteBrokerOffsetStore, offset_store_for
from client.consumer.process_queue import FlowControl, ProcessQueue
from client.consumer.pull_target import PullTargets
from client.consumer.queue_listing import fetch_subscribe_message_queues
from client.consumer.rebalance import Rebalance
from client.consumer.subscription import build_subscription
from client.errors import ClientStateError, MQBrokerError, MQClientError, TopicRouteNotFoundError
from client.instance import MQClientInstance, new_instance
from client.namespace import resolve_namespace, unwrap, wrap, wrap_queue, wrap_queues
from client.send_request import check_consumer_group
from client.trace.dispatcher import TraceDispatcher
from remoting.codec.bodies import (
    EXPRESSION_TAG,
    ConsumeFromWhere,
    ConsumerData,
    ConsumeType,
    MessageModel,
    MessageQueue,
    SubscriptionData,
)
from remoting.codec.bodies.admin import PROP_CONSUMER_START_TIMESTAMP
from remoting.codec.message import MessageExt

log = logging.getLogger(__name__)

#: Called with a topic and its new set of queues (Java's ``TopicMessageQueueChangeListener.onChanged``); what it
#: returns is awaited when awaitable (a coroutine function), else ignored.
TopicQueuesListener = Callable[[str, set[MessageQueue]], object]
#: Called with a topic, its readable queues and the ones now allocated to this member after a rebalance changed them
#: (Java's ``MessageQueueListener.messageQueueChanged``); awaited when awaitable.
MessageQueueListener = Callable[[str, set[MessageQueue], set[MessageQueue]], object]
#: What a call needing a running consumer raises before the start and after the stop (Java's
#: ``NOT_RUNNING_EXCEPTION_MESSAGE``).
NOT_RUNNING = "The consumer not running, please start it first."
#: What subscribe after assign, or assign after subscribe, raises (Java's ``SUBSCRIPTION_CONFLICT_EXCEPTION_MESSAGE``).
SUBSCRIPTION_CONFLICT = "Subscribe and assign are mutually exclusive."
_Listener = MessageQueueListener | None
#: First check of the registered topics' queues after start (Java: 10 s).
TOPIC_METADATA_FIRST_CHECK = 10.0
#: The shortest auto-commit interval (Java's ``MIN_AUTOCOMMIT_INTERVAL_MILLIS``).
MIN_AUTO_COMMIT_INTERVAL = 1.0
#: The consume-from-where values a lite pull consumer takes (Java's ``DefaultLitePullConsumer.setConsumeFromWhere``
#: refuses the deprecated ones, which its rebalance would never start a queue with).
LITE_PULL_CONSUME_FROM = frozenset(
    {
        ConsumeFromWhere.CONSUME_FROM_LAST_OFFSET,
        ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET,
        ConsumeFromWhere.CONSUME_FROM_TIMESTAMP,
    }
)


class LitePullConsumer(LitePullWorker):
    """See the module docstring. ``allocate_strategy`` as :class:`~client.consumer.push.PushConsumer`'s: subscribe
    mode only (assign mode allocates nothing)."""

    def __init__(
        self,
        group: str,
        namesrv_addr: str | Sequence[str] | None = None,
        *,
        instance: MQClientInstance | None = None,
        config: ClientConfig | None = None,
        auto_commit: bool = True,
        auto_commit_interval: float = 5.0,
        pull_batch_size: int = 10,
        pull_threshold_for_queue: int = 1000,
        pull_threshold_size_for_queue_mib: int = 100,
        pull_threshold_for_all: int = 10_000,
        consume_max_span: int = 2000,
        consume_from_where: ConsumeFromWhere = ConsumeFromWhere.CONSUME_FROM_LAST_OFFSET,
        consume_timestamp_ms: int | None = None,
        allocate_strategy: AllocateStrategy | str = allocate_average,
        message_model: MessageModel = MessageModel.CLUSTERING,
        offset_store_dir: str | os.PathLike[str] | None = None,
        topic_metadata_check_interval: float = 30.0,
        pull_time_delay_when_exception: float = 1.0,
        broker_suspend_max_time: float = 20.0,
        consumer_timeout_when_suspend: float = 30.0,
        poll_timeout: float = 5.0,
        enable_msg_trace: bool = False,
        customized_trace_topic: str | None = None,
        namespace: str | None = None,
    ) -> None:
        if consume_from_where not in LITE_PULL_CONSUME_FROM:
            raise ValueError(
                f"Invalid ConsumeFromWhere Value {consume_from_where.name}: a lite pull consumer takes "
                "CONSUME_FROM_LAST_OFFSET, CONSUME_FROM_FIRST_OFFSET or CONSUME_FROM_TIMESTAMP"
            )
        if auto_commit_interval < MIN_AUTO_COMMIT_INTERVAL:
            raise ValueError(f"auto_commit_interval must be at least {MIN_AUTO_COMMIT_INTERVAL} s")
        if consumer_timeout_when_suspend < broker_suspend_max_time:  # DefaultLitePullConsumerImpl.checkConfig
            raise ValueError(
                "Long polling mode, the consumer consumer_timeout_when_suspend must greater than "
                "broker_suspend_max_time"
            )
        self.instance, self._own_instance = (
            (instance, False) if instance is not None else (new_instance(config, namesrv_addr), True)
        )
        #: Topics and the group are ``namespace%name`` on the wire (:mod:`client.namespace`): the methods take and
        #: :meth:`fetch_message_queues` / :meth:`poll` give names without it; None or blank: the
        #: config's (:func:`client.namespace.resolve_namespace`).
        self.namespace = resolve_namespace(namespace, self.instance.config.resolved_namespace)
        self._group = group = wrap(self.namespace, group)
        self.auto_commit = auto_commit
        self.auto_commit_interval = auto_commit_interval
        #: When ``poll`` commits next (loop time; Java's ``nextAutoCommitDeadline``, -1 at first: the first poll).
        self._next_auto_commit = -math.inf
        self.pull_batch_size = pull_batch_size
        self.pull_threshold_for_queue = pull_threshold_for_queue
        self.pull_threshold_size_for_queue = pull_threshold_size_for_queue_mib * 1024 * 1024
        self.pull_threshold_for_all = pull_threshold_for_all
        self.consume_max_span = consume_max_span
        #: Wait after a failed pull before the queue's next (Java's ``pullTimeDelayMillsWhenException``, 1000 ms).
        self.pull_time_delay_when_exception = pull_time_delay_when_exception
        #: How long a pull asks the broker to hold it when nothing is there, and waits for its answer (Java's
        #: ``brokerSuspendMaxTimeMillis``, 20000, and ``consumerTimeoutMillisWhenSuspend``, 30000).
        self.broker_suspend_max_time = broker_suspend_max_time
        self.consumer_timeout_when_suspend = consumer_timeout_when_suspend
        #: What :meth:`poll` waits when given no timeout (Java's ``pollTimeoutMillis``, 5000 ms).
        self.poll_timeout = poll_timeout
        self.consume_from_where = consume_from_where
        self._targets = PullTargets(self.instance)
        self._flow_control = FlowControl(log, capital=True)  # DefaultLitePullConsumerImpl's warnings are capitalized
        self._message_model = message_model
        self.offset_store: OffsetStore = offset_store_for(self.instance, group, message_model, offset_store_dir)
        self.rebalance = Rebalance(
            self.instance,
            group,
            self,
            self.offset_store,
            message_model=message_model,
            memory_first=True,
            strategy=allocate_strategy,
            consume_from_where=consume_from_where,
            consume_timestamp_ms=consume_timestamp_ms,
        )
        self.rebalance.on_changed = self._allocation_changed
        self._allocation_listeners: dict[str, MessageQueueListener] = {}
        #: Set by the first subscribe past its topic and mode checks (even one whose expression or SQL92 check then
        #: fails) and never cleared, not even when unsubscribe removes every topic: Java's
        #: subscription type leaves NONE once and for all (DefaultLitePullConsumerImpl.setSubscriptionType,
        #: client/src/main/java/org/apache/rocketmq/client/impl/consumer/DefaultLitePullConsumerImpl.java).
        self._subscribed_mode = False
        self._queues: dict[MessageQueue, QueueState] = {}
        #: While stopped, the queues of :meth:`assignment`: owned at the stop, or given to an assign since (also one
        #: made while the stop was under way, ``_assigned_in_stop``); in assign mode the start pulls them.
        self._assigned_at_stop: set[MessageQueue] = set()
        self._assigned_in_stop = False
        self._paused: set[MessageQueue] = set()
        self._send, self._receive = anyio.create_memory_object_stream[Batch](math.inf)
        self._tasks: anyio.abc.TaskGroup | None = None
        self._started = False
        self.topic_metadata_check_interval = topic_metadata_check_interval
        self._queue_listeners: dict[str, TopicQueuesListener] = {}
        self._known_queues: dict[str, set[MessageQueue]] = {}
        #: Wall-clock ms of construction (Java's ``consumerStartTimestamp``), shown in the running info.
        self.start_timestamp_ms = time.time_ns() // 1_000_000
        #: Message trace (client/trace/): SubBefore/SubAfter records of every pulled batch, when switched on.
        self.trace: TraceDispatcher | None = None
        if enable_msg_trace:
            self.trace = TraceDispatcher(
                self.instance, unwrap(self.namespace, group), "CONSUME", customized_trace_topic
            )
        #: Hooks told of every pulled batch (:mod:`client.consumer.hooks`).
        self.consume_hooks: list[ConsumeMessageHook] = []

    def register_consume_message_hook(self, hook: ConsumeMessageHook) -> None:
        """Tell ``hook`` of every pulled batch, as consumed at once: before, then after with ``CONSUME_SUCCESS``
        (Java's ``registerConsumeMessageHook``, run by ``pullSyncImpl`` in
        ``client/src/main/java/org/apache/rocketmq/client/impl/consumer/DefaultLitePullConsumerImpl.java``); see
        :mod:`client.consumer.hooks`. A pull that found no message is not told (Java's hooks get an empty list)."""
        self.consume_hooks.append(hook)

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
    def consume_type(self) -> ConsumeType:
        return ConsumeType.CONSUME_ACTIVELY

    # -- lifecycle -----------------------------------------------------------------------------------------------------

    async def __aenter__(self) -> Self:
        if self._tasks is not None:
            # DefaultLitePullConsumerImpl.start (client/src/main/java/org/apache/rocketmq/client/impl/consumer/
            # DefaultLitePullConsumerImpl.java) throws on any state but CREATE_JUST and changes nothing: the clean-up
            # of a failed start below would stop the running consumer.
            raise ClientStateError(f"lite pull consumer {self._group!r} is running already: maybe started once")
        check_consumer_group(self._group)  # DefaultLitePullConsumerImpl.checkConfig
        if self._own_instance:
            await self.instance.__aenter__()
        try:
            self._tasks = anyio.create_task_group()
            await self._tasks.__aenter__()
            self.instance.register_consumer(self)
            await self.offset_store.load()
            self._next_auto_commit = -math.inf  # a restart may run on another event loop, with another clock
            self._started = True
            if self.trace is not None:
                await self.trace.start()
            for topic in list(self._queue_listeners):
                await self._remember_queues(topic)
            self._tasks.start_soon(self._watch_topic_queues)
            await self._resume()
        except BaseException:
            await self._stop()
            raise
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self._stop()

    async def _resume(self) -> None:
        """What a start takes up (Java's ``operateAfterRunning``): in assign mode the queues assigned while stopped
        (before the first start, or at the last stop) whose topic was not unsubscribed since, their routes looked up
        first, each pull task computing its start offset; else the subscriptions, with a heartbeat and a rebalance as
        :meth:`subscribe` does."""
        if self._assigned_manually:
            kept = sorted(mq for mq in self._assigned_at_stop if mq.topic in self.rebalance.subscriptions)
            await self._look_up_routes({mq.topic for mq in kept})
            for mq in kept:
                self._start(mq, self.rebalance.own(mq), None)
        elif self.rebalance.subscriptions:
            for topic in list(self.rebalance.subscriptions):
                try:
                    await self.instance.fetch_route(topic, wait_greeting=True)
                except Exception as exc:
                    log.info("consumer %s: %s", self._group, exc)
            await check_sql92_subscriptions(self.instance, self._group, list(self.rebalance.subscriptions.values()))
            await self.instance.send_heartbeat_to_all_brokers()
            await self.rebalance.do_rebalance()

    async def _stop(self) -> None:
        """Stop the pull tasks, persist the offsets and unregister; then forget the queues (their pull tasks are
        gone) and what is buffered, once a rebalance pass under way ended: a restart takes them up afresh from the
        persisted offsets (:meth:`_resume`). Subscriptions, the assignment, paused queues and listeners stay."""
        tasks, self._tasks = self._tasks, None
        self._assigned_in_stop = False
        try:
            if tasks is not None:
                tasks.cancel_scope.cancel()
                await tasks.__aexit__(None, None, None)
            if self._started:
                with anyio.CancelScope(shield=True):
                    if self.trace is not None:
                        await self.trace.stop()
                    await self.persist_offsets()
                    await self.instance.unregister(consumer_group=self._group)
        finally:
            self._started = False
            self.offset_store.close()
            with anyio.CancelScope(shield=True):
                await self._forget_queues()
            if self._own_instance:
                await self.instance.__aexit__(None, None, None)

    async def _forget_queues(self) -> None:
        """Forget the queues and buffered batches of the run that ended (see :meth:`_stop`), keeping the queues owned
        for :meth:`assignment` unless an assign during the stop gave others."""
        if not self._assigned_in_stop:
            self._assigned_at_stop = set(self._queues)
        await self.rebalance.drop_all()
        self._queues.clear()
        while True:
            try:
                self._receive.receive_nowait()
            except anyio.WouldBlock:
                return

    def _check_started(self) -> anyio.abc.TaskGroup:
        if self._tasks is None:
            # DefaultLitePullConsumerImpl.checkServiceState's words (a consumer is started with `async with`).
            raise ClientStateError(NOT_RUNNING)
        return self._tasks

    # -- subscribe / assign --------------------------------------------------------------------------------------------

    async def subscribe(
        self,
        topic: str,
        expression: str = "*",
        expression_type: str = EXPRESSION_TAG,
        listener: MessageQueueListener | None = None,
    ) -> None:
        """Join the group's rebalance for ``topic`` (cannot be mixed with :meth:`assign`); before the start (or after
        a stop) it is kept for the start (:meth:`set_subscription`), as Java's examples subscribe before ``start``.
        ``listener`` is called with the topic, its readable queues and the ones allocated to this member each time a
        rebalance changes them, after their pull tasks started or stopped (Java's ``subscribe(topic, subExpression,
        MessageQueueListener)``); ours is kept per topic, where Java keeps one for the consumer and a later plain
        ``subscribe`` replaces it. A topic without a route yet is subscribed all the same
        (DefaultLitePullConsumerImpl.subscribe,
        client/src/main/java/org/apache/rocketmq/client/impl/consumer/DefaultLitePullConsumerImpl.java): its queues are
        taken once it is made; an SQL92 subscription refused by a broker of its topic raises and is not kept. An empty
        ``topic`` raises ``ValueError`` ("Topic can not be null or empty.") and changes nothing; past that check the
        consumer is in subscribe mode for good, even when the expression then fails (``ValueError``) or is refused,
        as Java's ``setSubscriptionType`` runs before ``FilterAPI.build``."""
        if self._tasks is None:
            self.set_subscription(topic, expression, expression_type, listener=listener)
            return
        topic, subscription = self._subscription_of(topic, expression, expression_type)
        try:
            await self.instance.fetch_route(topic, wait_greeting=True)
        except TopicRouteNotFoundError as exc:
            # Java's subscribe keeps it (updateTopicRouteInfoFromNameServer only logs): the route refresh and the
            # rebalance take its queues up once it exists; without a route there is no broker to check it with.
            log.info("consumer %s: %s", self._group, exc)
        await check_sql92_subscriptions(self.instance, self._group, [subscription])
        async with self.rebalance.serialised():
            # Checked again where assign() takes its mode: one may have run while this call awaited the brokers.
            # Java's subscribe and assign are synchronized and setSubscriptionType refuses the other mode
            # (client/src/main/java/org/apache/rocketmq/client/impl/consumer/DefaultLitePullConsumerImpl.java).
            if self._assigned_manually:
                raise ClientStateError(SUBSCRIPTION_CONFLICT)
            self.rebalance.subscriptions[topic] = subscription
        self._set_allocation_listener(topic, listener)
        await self.instance.send_heartbeat_to_all_brokers()
        await self.rebalance.do_rebalance()

    def set_subscription(
        self, topic: str, expression: str = "*", expression_type: str = EXPRESSION_TAG, *, listener: _Listener = None
    ) -> None:
        """:meth:`subscribe` while stopped (before the start): kept for the start, which checks an SQL92 expression
        with a broker, sends the heartbeat and rebalances (Java's ``subscribe`` before ``start``)."""
        if self._tasks is not None:
            raise ClientStateError(f"lite pull consumer {self._group!r} is running: use subscribe()")
        topic, subscription = self._subscription_of(topic, expression, expression_type)
        self.rebalance.subscriptions[topic] = subscription
        self._set_allocation_listener(topic, listener)

    def _subscription_of(self, topic: str, expression: str, expression_type: str) -> tuple[str, SubscriptionData]:
        """``subscribe``'s checks and its topic (as on the wire) and subscription."""
        if not topic:  # checked before setSubscriptionType, as DefaultLitePullConsumerImpl.subscribe
            raise ValueError("Topic can not be null or empty.")
        if self._assigned_manually:
            raise ClientStateError(SUBSCRIPTION_CONFLICT)
        # Taken before the expression is built or checked: Java's subscribe calls setSubscriptionType(SUBSCRIBE)
        # before FilterAPI.build, so a subscribe that then fails still refuses every later assign
        # (client/src/main/java/org/apache/rocketmq/client/impl/consumer/DefaultLitePullConsumerImpl.java).
        self._subscribed_mode = True
        topic = wrap(self.namespace, topic)
        return topic, build_subscription(topic, expression, expression_type)

    def _set_allocation_listener(self, topic: str, listener: MessageQueueListener | None) -> None:
        if listener is None:
            self._allocation_listeners.pop(topic, None)
        else:
            self._allocation_listeners[topic] = listener

    async def unsubscribe(self, topic: str) -> None:
        """Stop consuming ``topic`` (Java's ``unsubscribe``): its subscription goes, its queues are dropped as a
        rebalance drops them (their offsets persisted, what is buffered no longer polled), in assign mode too, and the
        brokers hear of it with a heartbeat. Before the start, only the subscription and the topic's queues in
        :meth:`assignment` go."""
        topic = wrap(self.namespace, topic)
        self.rebalance.subscriptions.pop(topic, None)
        self._allocation_listeners.pop(topic, None)
        self._assigned_at_stop = {mq for mq in self._assigned_at_stop if mq.topic != topic}
        if not self._started:
            return
        await self.rebalance.drop_topic(topic)
        await self.instance.send_heartbeat_to_all_brokers()

    async def fetch_message_queues(self, topic: str) -> list[MessageQueue]:
        """Every readable queue of ``topic``, named without the namespace (Java's parseSubscribeMessageQueues). No
        route, no readable queue or any other failure raises :class:`MQClientError` "Can not find Message Queue for
        this topic, <topic>" with the FAQ hint, the failure as its cause, as ``MQAdminImpl.fetchSubscribeMessageQueues``
        (client/src/main/java/org/apache/rocketmq/client/impl/MQAdminImpl.java) wraps them all."""
        self._check_started()
        return await fetch_subscribe_message_queues(self.instance, self.namespace, topic)

    async def assign(self, mqs: Iterable[MessageQueue], expression: str = "*") -> None:
        """Consume exactly ``mqs`` (no rebalance); before the start (or after a stop) they are kept for the start
        (:meth:`set_assignment`). Each queue's pull task computes its start offset (from the
        broker, else consume-from-where), and again after a failure, so a queue whose broker is down now is
        consumed once the broker is back (Java's ``PullTaskImpl.nextPullOffset``). ``expression`` filters the pulls
        of the topics of ``mqs`` from then on, replacing an earlier call's (Java's ``setSubExpressionForAssign``, the
        last call per topic wins; a queue's batches pulled before stay buffered). Calls that overlap take effect
        one after the other (the last one's queues are owned), under the rebalance's lock, as Java's synchronized
        ``DefaultLitePullConsumerImpl.assign``
        (client/src/main/java/org/apache/rocketmq/client/impl/consumer/DefaultLitePullConsumerImpl.java). No queues
        at all raise ``ValueError`` and leave the assignment as it was, as Java's ``assign`` refuses an empty
        collection (:meth:`unsubscribe` drops a topic's queues). Once :meth:`subscribe` ran, assign is refused for
        good, even after every topic was unsubscribed (Java's subscription type never resets). A topic without a
        route, or no name server answering, does not fail it (a silent one holds it up for one request timeout, whatever
        the number of topics): the queues are pulled once the route is known."""
        if self._tasks is None:
            self.set_assignment(mqs, expression)
            return
        wanted, by_topic = self._assignment_of(mqs)
        # Java's assign asks no name server: the pull tasks look the broker up before each try
        # (client/src/main/java/org/apache/rocketmq/client/impl/consumer/DefaultLitePullConsumerImpl.java), so a
        # name server down now only delays the pulls, as a missing route does. Ours looks the routes up (the pull
        # tasks then find their brokers greeted) all at once: a silent name server is waited out once, not per topic.
        await self._look_up_routes(by_topic)
        async with self.rebalance.serialised():
            if self._subscribed_mode and not self._assigned_manually:
                raise ClientStateError(SUBSCRIPTION_CONFLICT)
            if self._tasks is None:  # stopped meanwhile: kept for the next start, as one made after the stop
                self._keep_for_start(wanted, by_topic, expression)
                return
            self._take_assign_mode(by_topic, expression)
            for topic in {mq.topic for mq in self.rebalance.process_queues} | set(by_topic):
                await self.rebalance.remove_unallocated(topic, by_topic.get(topic, set()))
            for mq in sorted(wanted - set(self.rebalance.process_queues)):
                self._start(mq, self.rebalance.own(mq), None)

    def set_assignment(self, mqs: Iterable[MessageQueue], expression: str = "*") -> None:
        """:meth:`assign` while stopped (before the start): the start pulls these queues (Java's ``assign`` before
        ``start``, taken up by ``operateAfterRunning``)."""
        if self._tasks is not None:
            raise ClientStateError(f"lite pull consumer {self._group!r} is running: use assign()")
        self._keep_for_start(*self._assignment_of(mqs), expression)

    def _keep_for_start(
        self, wanted: set[MessageQueue], by_topic: Mapping[str, set[MessageQueue]], expression: str
    ) -> None:
        self._take_assign_mode(by_topic, expression)
        self._assigned_at_stop, self._assigned_in_stop = wanted, True

    def _assignment_of(self, mqs: Iterable[MessageQueue]) -> tuple[set[MessageQueue], dict[str, set[MessageQueue]]]:
        """``assign``'s checks; its queues (as on the wire), also by topic."""
        if self._subscribed_mode and not self._assigned_manually:
            raise ClientStateError(SUBSCRIPTION_CONFLICT)
        wanted = set(wrap_queues(self.namespace, mqs))
        if not wanted:
            raise ValueError("Message queues can not be null or empty.")
        by_topic: dict[str, set[MessageQueue]] = {}
        for mq in wanted:
            by_topic.setdefault(mq.topic, set()).add(mq)
        return wanted, by_topic

    def _take_assign_mode(self, by_topic: Mapping[str, set[MessageQueue]], expression: str) -> None:
        self.rebalance.assigned_by_owner = True
        for topic in by_topic:  # the latest expression of a topic wins, as setSubExpressionForAssign's
            sub, held = build_subscription(topic, expression), self.rebalance.subscriptions.get(topic)
            if held is None or held.sub_string != sub.sub_string:
                self.rebalance.subscriptions[topic] = sub

    async def _look_up_routes(self, topics: Iterable[str]) -> None:
        async with anyio.create_task_group() as lookups:
            for topic in topics:
                lookups.start_soon(self._look_up_route, topic)

    async def _look_up_route(self, topic: str) -> None:
        try:
            await self.instance.route(topic, wait_greeting=True)
        except Exception as exc:
            log.info("consumer %s: %s", self._group, exc)

    @property
    def _assigned_manually(self) -> bool:
        return self.rebalance.assigned_by_owner

    def assignment(self) -> set[MessageQueue]:
        """The queues owned, or while stopped those the start takes up in assign mode (before the first start: the
        assigned ones; after a stop: those owned then, or assigned since), as Java's ``assignedMessageQueue``."""
        return set(self._queues) if self._tasks is not None else set(self._assigned_at_stop)

    # -- ConsumerInner ---------------------------------------------------------------------------------------------

    def consumer_data(self) -> ConsumerData:
        subs: tuple[SubscriptionData, ...] = tuple(sub for _, sub in sorted(self.rebalance.subscriptions.items()))
        return ConsumerData(
            group_name=self._group,
            consume_type=self.consume_type,
            message_model=self._message_model,
            consume_from_where=self.consume_from_where,
            subscription_data_set=() if self._assigned_manually else subs,
        )

    def subscribed_topics(self) -> set[str]:
        return set(self.rebalance.subscriptions)

    async def do_rebalance(self) -> None:
        if not self._assigned_manually and self._tasks is not None:
            await self.rebalance.do_rebalance()

    async def persist_offsets(self) -> None:
        """The timer's and the shutdown's persist (Java's ``persistConsumerOffset``): the offset in memory of every
        assigned queue, i.e. what was committed (by ``poll``'s auto-commit, or :meth:`commit`, ``persist=False``
        too), never what the last poll returned and the application may still be processing."""
        pending = {mq: offset for mq in self._queues if (offset := self.offset_store.read_memory(mq)) is not None}
        await self._write(pending)

    def running_info(self) -> dict[str, Any]:
        """Java's ``DefaultLitePullConsumerImpl.consumerRunningInfo`` (settings under Java's field names and the start
        time), plus the owned queues (as 5.x lists them) and each subscribed topic's ``ConsumeStatus``
        (:mod:`client.consumer.stats`): ours records the pull RT and TPS of its pull loop, Java's lite pull consumer
        records nothing and sends an empty table; the consume figures stay 0, the application consumes after
        ``poll``."""
        now = anyio.current_time()
        stats = self.instance.consumer_stats
        return {
            "properties": {
                "consumerGroup": self._group,
                "messageModel": self.message_model.name,
                "consumeFromWhere": self.consume_from_where.name,
                "autoCommit": str(self.auto_commit).lower(),
                "autoCommitIntervalMillis": str(round(self.auto_commit_interval * 1000)),
                "pullBatchSize": str(self.pull_batch_size),
                "pullThresholdForAll": str(self.pull_threshold_for_all),
                "consumeMaxSpan": str(self.consume_max_span),
                "pullThresholdForQueue": str(self.pull_threshold_for_queue),
                "pullThresholdSizeForQueue": str(self.pull_threshold_size_for_queue // (1024 * 1024)),
                "pullTimeDelayMillsWhenException": str(round(self.pull_time_delay_when_exception * 1000)),
                "pollTimeoutMillis": str(round(self.poll_timeout * 1000)),
                "brokerSuspendMaxTimeMillis": str(round(self.broker_suspend_max_time * 1000)),
                "consumerTimeoutMillisWhenSuspend": str(round(self.consumer_timeout_when_suspend * 1000)),
                PROP_CONSUMER_START_TIMESTAMP: str(self.start_timestamp_ms),
            },
            "subscriptionSet": [s.to_json() for s in self.rebalance.subscriptions.values()],
            "mqTable": {
                mq: st.pq.info(st.consumed_offset or 0, now, round(time.time() * 1000))
                for mq, st in self._queues.items()
            },
            "statusTable": {topic: stats.status(self._group, topic, now) for topic in self.rebalance.subscriptions},
        }

    async def consume_directly(self, msg: MessageExt, broker_name: str | None) -> dict[str, object]:
        return {
            "order": False,
            "autoCommit": self.auto_commit,
            "consumeResult": "CR_THROW_EXCEPTION",
            "remark": "a lite pull consumer has no listener",
            "spentTimeMills": 0,
        }

    async def reset_offset(self, topic: str, offsets: dict[MessageQueue, int]) -> None:
        """RESET_CONSUMER_CLIENT_OFFSET (ours: Java's ``MQClientInstance.resetOffset`` resets push consumers only):
        each owned queue is seeked and, unlike a seek, its new offset committed, so a persist does not undo it. A
        queue whose seek fails (an offset out of range, no broker answering) is logged and the others are still reset,
        as Java's loop updates each queue's offset whatever the others'."""
        for mq, offset in offsets.items():
            if mq in self._queues:
                await self._reset_queue(mq, offset)

    async def _reset_queue(self, mq: MessageQueue, offset: int) -> None:
        try:
            await self.seek(mq, offset)
        except Exception:
            log.warning("reset of %s to %d failed", mq, offset, exc_info=True)
            return
        if mq in self._queues:
            self.offset_store.update(mq, offset)

    # -- RebalanceOwner --------------------------------------------------------------------------------------------

    @property
    def taking_queues(self) -> bool:
        return self._tasks is not None

    def on_queue_added(self, mq: MessageQueue, pq: ProcessQueue, offset: int) -> None:
        self._start(mq, pq, offset)

    def _start(self, mq: MessageQueue, pq: ProcessQueue, offset: int | None) -> None:
        """A new :class:`QueueState` for ``mq`` and its pull task (``offset`` ``None``: the task computes it)."""
        state = self._queues[mq] = QueueState(pq, offset)
        self._check_started().start_soon(self._pull_loop, mq, state)

    async def consume_idle(self, mq: MessageQueue, timeout: float) -> bool:
        return True  # the application polls; nothing of ours runs on a queue

    async def on_queue_removed(self, mq: MessageQueue, pq: ProcessQueue) -> None:
        # Its pause goes with it: Java keeps the flag in the queue's MessageQueueState, new and unpaused when the
        # queue is assigned again (client/src/main/java/org/apache/rocketmq/client/impl/consumer/
        # AssignedMessageQueue.java updateAssignedMessageQueue).
        self._paused.discard(mq)
        state = self._queues.pop(mq, None)
        if state is None:
            return
        state.pq.dropped = True  # a pull task not started yet (a seek's, just now) ends at its first look
        if state.scope is not None:
            state.scope.cancel()
        # Only what was committed counts (RebalanceLitePullImpl.removeUnnecessaryMessageQueue persists the offset in
        # memory): the polled offset would skip a batch the application may still be processing.

    # -- polling ---------------------------------------------------------------------------------------------------

    async def poll(self, timeout: float | None = None) -> list[MessageExt]:
        """The next buffered batch (messages of one queue, in offset order), or ``[]`` after ``timeout`` seconds
        (``None``: the consumer's ``poll_timeout``, 5 s, as Java's ``poll()`` waits ``pollTimeoutMillis``);
        ``timeout=0`` returns what is buffered without waiting. With auto-commit, what the earlier polls returned is
        committed first when ``auto_commit_interval`` passed since the last time (Java's ``maybeAutoCommit``,
        client/src/main/java/org/apache/rocketmq/client/impl/consumer/DefaultLitePullConsumerImpl.java). A negative
        ``timeout`` raises ``ValueError``, as Java's ``poll`` refuses it."""
        self._check_started()
        if timeout is None:
            timeout = self.poll_timeout
        if timeout < 0:
            raise ValueError("Timeout must not be negative")
        if self.auto_commit and (now := anyio.current_time()) >= self._next_auto_commit:
            for mq, offset in self._offsets_to_commit(None).items():
                self.offset_store.update(mq, offset)
            self._next_auto_commit = now + self.auto_commit_interval
        deadline = anyio.current_time() + timeout
        while (batch := await self._next_batch(deadline)) is not None:
            state = batch.state
            if self._queues.get(batch.mq) is not state or state.pq.dropped:
                continue  # pulled before the queue was seeked, or taken away (and maybe given back)
            offset = state.pq.remove_messages(batch.messages)
            if offset >= 0:
                state.consumed_offset = offset
            if self.namespace:  # the application sees its topic names (Java's pullSyncImpl resets the topic)
                return [_unwrapped(self.namespace, m) for m in batch.messages]
            return batch.messages
        return []

    async def _next_batch(self, deadline: float) -> Batch | None:
        """The buffer's head, taken before any wait (a wait's first checkpoint would cancel a past deadline before
        looking, though a cancellation still ends the poll); ``None`` once ``deadline`` passed with nothing
        buffered."""
        await anyio.lowlevel.checkpoint_if_cancelled()
        try:
            batch = self._receive.receive_nowait()
        except anyio.WouldBlock:
            with anyio.move_on_at(deadline):
                return await self._receive.receive()
            return None
        await anyio.lowlevel.cancel_shielded_checkpoint()  # yield (a poll(0) loop must not starve the pulls)
        return batch

    async def commit(
        self, offsets: Mapping[MessageQueue, int] | Iterable[MessageQueue] | None = None, *, persist: bool = True
    ) -> None:
        """Commit offsets: with ``offsets`` ``None``, every assigned queue's polled offset (Java's ``commitSync()``);
        an iterable of queues, theirs (``commit(Set, persist)``); a mapping, exactly those offsets
        (``commitSync(Map, persist)``), for queues still assigned (any other, or a negative offset, is logged and
        skipped). With ``persist`` the offsets are written now (to the brokers, or the BROADCASTING file) and this
        waits for it; a queue whose broker fails is logged and the others are still written (Java's ``persistAll``);
        its offset goes out with the next persist. Without, the next persist (every
        ``persist_consumer_offset_interval``, and at shutdown) writes them."""
        if self.namespace and offsets is not None:
            if isinstance(offsets, Mapping):
                offsets = {wrap_queue(self.namespace, mq): o for mq, o in offsets.items()}
            else:
                offsets = wrap_queues(self.namespace, offsets)
        chosen = self._offsets_to_commit(offsets)
        for mq, offset in chosen.items():
            self.offset_store.update(mq, offset)
        if persist:
            await self._write(chosen)

    async def _write(self, chosen: dict[MessageQueue, int]) -> None:
        """Persist the offsets in memory of ``chosen``'s queues and wait for it; failures are logged per queue. The
        queues' requests go out together, so a broker that does not answer is waited for once (one request timeout),
        not once per queue: Java's ``RemoteBrokerOffsetStore.persistAll``
        (client/src/main/java/org/apache/rocketmq/client/consumer/store/RemoteBrokerOffsetStore.java) sends them one
        way without waiting at all."""
        if not chosen:
            return
        if not isinstance(self.offset_store, RemoteBrokerOffsetStore):
            await self.offset_store.persist_all(chosen)
            return
        store = self.offset_store

        async def persist(mq: MessageQueue, offset: int) -> None:
            try:
                await store.persist(mq)
            except Exception as exc:
                log.warning("committing offset %d of %s failed: %s", offset, mq, exc)

        async with anyio.create_task_group() as tasks:
            for mq, offset in chosen.items():
                tasks.start_soon(persist, mq, offset)

    def _offsets_to_commit(
        self, offsets: Mapping[MessageQueue, int] | Iterable[MessageQueue] | None
    ) -> dict[MessageQueue, int]:
        if isinstance(offsets, Mapping):
            chosen: dict[MessageQueue, int] = {}
            for mq, offset in offsets.items():
                state = self._queues.get(mq)
                if state is None or state.pq.dropped or offset < 0:
                    log.warning("commit of offset %d of %s skipped: not assigned, or negative", offset, mq)
                    continue
                chosen[mq] = offset
            return chosen
        targets = list(self._queues) if offsets is None else list(offsets)
        return {
            mq: state.consumed_offset
            for mq in targets
            if (state := self._queues.get(mq)) is not None and state.consumed_offset is not None
        }

    async def committed(self, mq: MessageQueue) -> int | None:
        """The committed offset of ``mq``: the one in memory (committed, maybe not written yet; with auto-commit, what a
        poll committed), else the broker's (BROADCASTING: the file's); ``None`` when there is none (Java's
        ``readOffset(MEMORY_FIRST_THEN_STORE)``). A store that cannot ask a broker (none known for the queue, no
        route, no answer) raises :class:`MQClientError` "Fetch consume offset from broker exception", the failure as
        its cause, as Java's ``committed`` does when ``readOffset`` answers -2; a broker's refusal stays
        :class:`~client.errors.MQBrokerError` (ours: Java's ``readOffset`` takes it for no offset, -1)."""
        self._check_started()
        mq = wrap_queue(self.namespace, mq)
        pending = self.offset_store.read_memory(mq)
        if pending is not None:
            return pending
        try:
            return await self.offset_store.read(mq)
        except MQBrokerError:
            raise
        except Exception as exc:
            raise MQClientError("Fetch consume offset from broker exception") from exc

    async def seek(self, mq: MessageQueue, offset: int) -> None:
        """Restart consumption of the assigned ``mq`` at ``offset``; what was buffered for it is discarded.
        Raises :class:`~client.errors.MQClientError` for an unassigned queue or an offset outside
        ``[min, max]``, in Java's words ("The message queue is not in assigned list, ...", "Seek offset illegal, ...");
        :class:`~client.errors.ClientStateError` (:data:`NOT_RUNNING`) for a queue assigned while stopped. The
        queue's state is checked again after asking the broker for the bounds: a seek that overlapped another is
        redone on top of it (the last one wins, one pull task survives, as Java's synchronized seek); one whose queue
        was taken away meanwhile does nothing (Java's new pull task finds no process queue). A seek commits nothing:
        ``offset`` becomes the queue's polled offset, committed by the next auto-commit or :meth:`commit`, as Java's
        ``seek`` only sets the seek offset its pull task's ``nextPullOffset`` makes the consume offset."""
        mq = wrap_queue(self.namespace, mq)
        state = self._queues.get(mq)
        if state is None:
            if mq in self._assigned_at_stop:
                self._check_started()  # Java's seek finds it assigned, then its minOffset lookup refuses
            raise MQClientError(self._not_assigned(mq))
        while True:
            low, high = await self._bounds(mq)
            current = self._queues.get(mq)
            if current is state:
                break
            if current is None:
                log.info("seek of %s to %d dropped: the queue was taken away meanwhile", mq, offset)
                return
            state = current
        if not low <= offset <= high:
            raise MQClientError(f"Seek offset illegal, seek offset = {offset}, min offset = {low}, max offset = {high}")
        if state.scope is not None:
            state.scope.cancel()
        fresh = QueueState(ProcessQueue.created_at(anyio.current_time()), offset, consumed_offset=offset)
        state.pq.dropped = True
        self._queues[mq] = fresh
        self._check_started().start_soon(self._pull_loop, mq, fresh)

    def _not_assigned(self, mq: MessageQueue) -> str:
        """Java's seek refusing a queue not assigned, in subscribe mode or not."""
        rebalancing = ", may be rebalancing" if self._subscribed_mode else ""
        return f"The message queue is not in assigned list{rebalancing}, message queue: {java_queue_string(mq)}"

    async def seek_to_begin(self, mq: MessageQueue) -> None:
        self._check_started()
        mq = wrap_queue(self.namespace, mq)
        await self.seek(mq, (await self._bounds(mq))[0])

    async def seek_to_end(self, mq: MessageQueue) -> None:
        self._check_started()
        mq = wrap_queue(self.namespace, mq)
        await self.seek(mq, (await self._bounds(mq))[1])

    def pause(self, mqs: Iterable[MessageQueue]) -> None:
        """Stop pulling ``mqs`` (what is buffered can still be polled) until :meth:`resume`, or until the queue is
        given up (a rebalance, ``assign``, ``unsubscribe``): assigned again, it is pulled, as Java's. A queue not
        assigned is left alone (AssignedMessageQueue.pause finds no state for it)."""
        assigned = self.assignment()
        self._paused.update(mq for mq in wrap_queues(self.namespace, mqs) if mq in assigned)

    def resume(self, mqs: Iterable[MessageQueue]) -> None:
        self._paused.difference_update(wrap_queues(self.namespace, mqs))

    async def offset_for_timestamp(self, mq: MessageQueue, timestamp_ms: int) -> int:
        """The offset of ``mq`` whose message was stored closest to ``timestamp_ms`` (SEARCH_OFFSET_BY_TIMESTAMP)."""
        self._check_started()
        mq = wrap_queue(self.namespace, mq)
        addr = await self._broker_of(mq)
        return await api.search_offset(self.instance.remoting, addr, mq, timestamp_ms, self.instance.config.rpc_timeout)

    async def _broker_of(self, mq: MessageQueue) -> str:
        """The address to ask about ``mq``'s offsets, the topic's route fetched first when its broker is not known
        yet (e.g. assigned while no name server answered), as ``MQAdminImpl.minOffset``/``maxOffset``/
        ``searchOffset`` do (client/src/main/java/org/apache/rocketmq/client/impl/MQAdminImpl.java): a route that cannot
        be read is logged, and a broker still unknown raises "The broker[<name>] not exist", Java's words."""
        addr = self.instance.find_broker_address(mq.broker_name, master=False)
        if addr is None:
            try:
                await self.instance.fetch_route(mq.topic, wait_greeting=True)
            except Exception as exc:  # updateTopicRouteInfoFromNameServer only logs
                log.info("consumer %s: %s", self._group, exc)
            addr = self.instance.find_broker_address(mq.broker_name, master=False)
        if addr is None:
            raise MQClientError(f"The broker[{mq.broker_name}] not exist")
        return addr

    async def _allocation_changed(self, topic: str, mq_all: set[MessageQueue], allocated: set[MessageQueue]) -> None:
        """Rebalance's hook: tell the topic's listener, if any; one that fails is logged (RebalanceLitePullImpl)."""
        listener = self._allocation_listeners.get(topic)
        if listener is not None:
            await _tell("message queue listener", listener, topic, mq_all, allocated)

    # -- topic queue listeners -------------------------------------------------------------------------------------

    async def register_topic_message_queue_change_listener(self, topic: str, listener: TopicQueuesListener) -> None:
        """Call ``listener(topic, queues)`` (a function or coroutine function) whenever the readable queues of
        ``topic`` change (Java's ``registerTopicMessageQueueChangeListener``); a second listener for a topic replaces
        the first. While running, the queues are read now, and a listener is only told of later changes; before the
        start, :meth:`set_topic_queue_listener` does the same (the queues are read at the start)."""
        self.set_topic_queue_listener(topic, listener)
        if self._started:
            await self._remember_queues(wrap(self.namespace, topic))

    def set_topic_queue_listener(self, topic: str, listener: TopicQueuesListener) -> None:
        """Register ``listener`` for ``topic`` without reading its queues (before the start)."""
        self._queue_listeners[wrap(self.namespace, topic)] = listener

    async def _remember_queues(self, topic: str) -> None:
        try:
            self._known_queues[topic] = set(await self.fetch_message_queues(topic))
        except Exception as exc:
            log.info("queues of %s unknown for now (its listener hears of them at the next check): %s", topic, exc)

    async def _watch_topic_queues(self) -> None:
        """Java's ``fetchTopicMessageQueuesAndCompare``: a topic whose queues cannot be read (a name server down, a
        deleted topic) or has none is logged and left for the next check; a listener that fails is logged."""
        await anyio.sleep(TOPIC_METADATA_FIRST_CHECK)
        while True:
            for topic, listener in list(self._queue_listeners.items()):
                try:
                    queues = set(await self.fetch_message_queues(topic))
                except Exception as exc:
                    log.info("checking the queues of %s failed: %s", topic, exc)
                    continue
                if not queues or queues == self._known_queues.get(topic):
                    continue
                self._known_queues[topic] = queues
                await _tell("queue change listener", listener, topic, set(queues))
            await anyio.sleep(self.topic_metadata_check_interval)

    async def _bounds(self, mq: MessageQueue) -> tuple[int, int]:
        addr = await self._broker_of(mq)
        timeout = self.instance.config.rpc_timeout
        low = await api.get_min_offset(self.instance.remoting, addr, mq, timeout)
        high = await api.get_max_offset(self.instance.remoting, addr, mq, timeout)
        return low, high


async def _tell(kind: str, listener: Callable[..., object], topic: str, *queues: set[MessageQueue]) -> None:
    """Call an application's ``listener`` of ``topic`` (awaited when it returns an awaitable); one that fails is
    logged, as Java's consumer logs it, and the consumer goes on."""
    try:
        outcome = listener(topic, *queues)
        if inspect.isawaitable(outcome):
            await outcome
    except Exception:
        log.exception("%s of %s failed", kind, topic)


def _unwrapped(namespace: str, msg: MessageExt) -> MessageExt:
    topic = unwrap(namespace, msg.topic)
    return msg if topic == msg.topic else attrs.evolve(msg, topic=topic)
