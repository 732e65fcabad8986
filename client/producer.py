"""The producer (Java's ``DefaultMQProducer``): sync, async and oneway sends, batches refused over the size limit,
retries that avoid the broker that just failed, latency fault avoidance and queue selectors for ordered messages.

Usage::

    async with Producer("my-group", namesrv_addr="127.0.0.1:9876") as producer:
        result = await producer.send(Message("TopicTest", b"hello", tags="TagA", keys="order-1"))
        await producer.send(msg, selector=select_by_hash, arg=order_id)   # ordered per order id
        producer.send_async(msg, on_result)                                 # callback gets SendResult | Exception
        await producer.send_oneway(msg)
        results = await producer.send_batch([msg1, msg2, ...])  # [SendResult]: refused over 4 MiB
        await producer.send_batch(msgs, queue=mq)                           # one attempt, on that queue
        producer.send_batch_async(msgs, on_result)                          # callback gets the batch's SendResult

Errors: :class:`~client.errors.TopicRouteNotFoundError` ("No route info of this topic", ``response_code`` 10005),
:class:`~client.errors.MessageValidationError` (nothing sent; an async send's callback gets it),
:class:`~client.errors.SendFailedError` after every attempt failed (``retry_times_when_send_failed`` retries on
transport errors and on the response codes Java retries),
:class:`~client.errors.MQBrokerError` for a refusal that retrying cannot fix (e.g. MESSAGE_ILLEGAL),
:class:`~client.errors.MQClientError` (nothing sent) for a queue of another topic (``send``, ``send_async``, the
batches) or a selector that raises or picks no queue.

The producer owns a private :class:`~client.instance.MQClientInstance` unless one is passed in; either way the
instance must outlive the ``async with`` block. Async sends run in the instance's task group: leaving the block
cancels the ones still in flight.
"""

from __future__ import annotations

import contextlib
import logging
import math
import time
from collections.abc import Awaitable, Callable, Iterator, Sequence
from types import TracebackType
from typing import Self

import anyio
import attrs

from client import api, hooks, request_reply
from client.async_send import RETRY_RESPONSE_CODES, AsyncSend
from client.body_codecs import default_compress_level, default_compress_type
from client.budget import time_left
from client.config import ClientConfig
from client.errors import (
    BrokerNotExistError,
    ClientStateError,
    MessageValidationError,
    MQBrokerError,
    MQClientError,
    SendFailedError,
    TopicRouteNotFoundError,
)
from client.fault import LATENCY_MAX, NOT_AVAILABLE_DURATION, LatencyFaultTolerance
from client.hooks import SendMessageContext, SendMessageHook
from client.instance import MQClientInstance, new_instance
from client.master_watch import MasterWatch
from client.message import Message, SendResult, SendStatus
from client.namespace import resolve_namespace, unwrap, unwrap_queue, wrap, wrap_queue
from client.route import TopicPublishInfo, publish_info
from client.selector import MessageQueueSelector, apply_selector, select_one_message_queue
from client.send_request import (
    COMPRESS_OVER,
    MAX_MESSAGE_SIZE,
    BatchSizeError,
    PreparedSend,
    SendBuilder,
    check_producer_group,
    check_topic_name,
    uniq_key_generator,
)
from client.trace.dispatcher import TraceDispatcher
from client.vip import kernel_address
from remoting.codec.bodies import MessageQueue, TopicRouteData
from remoting.codec.command import RemotingCommand
from remoting.codec.headers import RecallMessageRequestHeader
from remoting.codec.message import MessageExt
from remoting.codec.recall_handle import RecallHandleError, decode_recall_handle
from remoting.codec.topics import is_retry_or_dlq_topic
from remoting.errors import RemotingError, RemotingTimeoutError

log = logging.getLogger(__name__)

SendCallback = Callable[[SendResult | Exception], object]


class Producer:
    """See the module docstring. Times are seconds."""

    def __init__(
        self,
        group: str,
        namesrv_addr: str | Sequence[str] | None = None,
        *,
        instance: MQClientInstance | None = None,
        config: ClientConfig | None = None,
        send_msg_timeout: float = 3.0,
        retry_times_when_send_failed: int = 2,
        retry_times_when_send_async_failed: int = 2,
        compress_msg_body_over_howmuch: int = COMPRESS_OVER,
        max_message_size: int = MAX_MESSAGE_SIZE,
        compress_level: int | None = None,
        compress_type: str | None = None,
        send_latency_fault_enable: bool = False,
        latency_max: Sequence[int] = LATENCY_MAX,
        not_available_duration: Sequence[int] = NOT_AVAILABLE_DURATION,
        retry_another_broker_when_not_store_ok: bool = False,
        default_topic_queue_nums: int = 4,
        create_topic_key: str = "TBW102",
        enable_msg_trace: bool = False,
        customized_trace_topic: str | None = None,
        namespace: str | None = None,
    ) -> None:
        self.instance, self._own_instance = (
            (instance, False) if instance is not None else (new_instance(config, namesrv_addr), True)
        )
        #: Topics and the group are ``namespace%name`` on the wire (:mod:`client.namespace`); None or blank: the
        #: config's (:func:`client.namespace.resolve_namespace`).
        self.namespace = resolve_namespace(namespace, self.instance.config.resolved_namespace)
        self._group = group = wrap(self.namespace, group)
        self.send_msg_timeout = send_msg_timeout
        self.retry_times_when_send_failed = retry_times_when_send_failed
        self.retry_times_when_send_async_failed = retry_times_when_send_async_failed
        self.send_latency_fault_enable = send_latency_fault_enable
        #: A sync send (or batch) answered with a status other than SEND_OK goes on to another broker, as Java's
        #: ``retryAnotherBrokerWhenNotStoreOK`` (client/.../impl/producer/DefaultMQProducerImpl.java sendDefaultImpl).
        self.retry_another_broker_when_not_store_ok = retry_another_broker_when_not_store_ok
        #: The refusals a sync send retries on another queue (Java's ``retryResponseCodes``), see
        #: :meth:`add_retry_response_code`.
        self.retry_response_codes: set[int] = set(RETRY_RESPONSE_CODES)
        self.fault = LatencyFaultTolerance(anyio.current_time, latency_max, not_available_duration)
        #: failed master addresses: the route is re-read at once and their sends give up when it moves on
        self.master_watch = MasterWatch(self.instance)
        self._builder = SendBuilder(
            group,
            uniq_key_generator(self.instance.config.client_ip),
            max_message_size,
            compress_msg_body_over_howmuch,
            create_topic_key,
            default_topic_queue_nums,
            # compressLevel / compressType (ZLIB, ZSTD or LZ4); unset: the environment's, else 5 and ZLIB
            compress_level=default_compress_level() if compress_level is None else compress_level,
            compress_type=default_compress_type() if compress_type is None else compress_type,
        )
        self._publish: dict[str, TopicPublishInfo] = {}
        self._fallback_topics: set[str] = set()  # topics sent with TBW102's route until theirs shows up
        self._started = False
        #: Message trace (client/trace/): Pub records of every answered send, when switched on.
        self.trace: TraceDispatcher | None = None
        if enable_msg_trace:
            self.trace = TraceDispatcher(
                self.instance, unwrap(self.namespace, group), "PRODUCE", customized_trace_topic
            )
        #: Hooks told of every send attempt (:mod:`client.hooks`).
        self.send_hooks: list[SendMessageHook] = []

    # Read at every send, as DefaultMQProducerImpl reads its DefaultMQProducer's (client/src/main/java/org/apache/
    # rocketmq/client/impl/producer/DefaultMQProducerImpl.java): the builder holds them, a change applies from the
    # next send on.

    @property
    def max_message_size(self) -> int:
        """The longest body a send takes (Java's ``maxMessageSize``, 4 MiB)."""
        return self._builder.max_message_size

    @max_message_size.setter
    def max_message_size(self, value: int) -> None:
        self._builder.max_message_size = value

    @property
    def compress_msg_body_over_howmuch(self) -> int:
        """The body length from which a single message's body is compressed (Java's ``compressMsgBodyOverHowmuch``,
        4 KiB)."""
        return self._builder.compress_over

    @compress_msg_body_over_howmuch.setter
    def compress_msg_body_over_howmuch(self, value: int) -> None:
        self._builder.compress_over = value

    @property
    def create_topic_key(self) -> str:
        """The template topic whose route an unknown topic is sent with, named in every send's header (Java's
        ``createTopicKey``, TBW102)."""
        return self._builder.create_topic_key

    @create_topic_key.setter
    def create_topic_key(self, value: str) -> None:
        self._builder.set_topic_template(value, self._builder.default_topic_queue_nums)

    @property
    def default_topic_queue_nums(self) -> int:
        """At most this many queues per broker for a topic the broker creates on a send (Java's
        ``defaultTopicQueueNums``, 4): the send header's and the producer's route for it alike."""
        return self._builder.default_topic_queue_nums

    @default_topic_queue_nums.setter
    def default_topic_queue_nums(self, value: int) -> None:
        self._builder.set_topic_template(self._builder.create_topic_key, value)

    @property
    def latency_max(self) -> Sequence[int]:
        """The latency thresholds (ms) of ``send_latency_fault_enable``, paired by index with
        :attr:`not_available_duration` (Java's ``latencyMax``, client/src/main/java/org/apache/rocketmq/client/latency/
        MQFaultStrategy.java)."""
        return self.fault.latency_max

    @latency_max.setter
    def latency_max(self, value: Sequence[int]) -> None:
        self.fault.latency_max = value

    @property
    def not_available_duration(self) -> Sequence[int]:
        """How long (ms) a broker is avoided after a latency reaching each threshold of :attr:`latency_max` (Java's
        ``notAvailableDuration``; a failure counts as 30,000 ms)."""
        return self.fault.not_available_duration

    @not_available_duration.setter
    def not_available_duration(self, value: Sequence[int]) -> None:
        self.fault.not_available_duration = value

    def add_retry_response_code(self, code: int) -> None:
        """Have a sync send retry a refusal with ``code`` on another queue too (Java's ``addRetryResponseCode``,
        client/src/main/java/org/apache/rocketmq/client/producer/DefaultMQProducer.java)."""
        self.retry_response_codes.add(code)

    def register_send_message_hook(self, hook: SendMessageHook) -> None:
        """Tell ``hook`` of every send attempt, before it is written and after its outcome (Java's
        ``registerSendMessageHook``, run by ``sendKernelImpl`` in
        ``client/src/main/java/org/apache/rocketmq/client/impl/producer/DefaultMQProducerImpl.java``): sync, async
        (each attempt), oneway and batch sends, a transaction's half message; see :mod:`client.hooks`."""
        self.send_hooks.append(hook)

    def hook_address(self, addr: str) -> str:
        """``addr`` as a send's hooks and its Pub trace record name it: ``port - 2`` with the VIP channel on
        (:func:`client.vip.kernel_address`)."""
        return kernel_address(self.instance.config.vip_channel_enabled, addr)

    def _hook(self, prepared: PreparedSend, msg: Message | Sequence[Message], mode: str) -> None:
        """Mark ``prepared`` for the send hooks, when there are any."""
        if self.send_hooks:
            prepared.hooked = (msg, mode)

    # -- lifecycle -------------------------------------------------------------------------------------------------

    @property
    def group(self) -> str:
        return self._group

    async def __aenter__(self) -> Self:
        self._check_not_running()
        check_producer_group(self._group)
        if self._own_instance:
            await self.instance.__aenter__()
        try:
            self.instance.register_producer(self)
        except BaseException:
            if self._own_instance:
                await self.instance.__aexit__(None, None, None)
            raise
        self._started = True
        try:
            await self.instance.send_heartbeat_to_all_brokers()
            if self.trace is not None:
                await self.trace.start()
        except BaseException:
            # A start that does not finish (cancelled while a heartbeat waits for a broker: Java's start cannot fail
            # there, sendHeartbeatToAllBrokerWithLock swallows its errors) leaves the producer not started, as
            # DefaultMQProducerImpl.start puts its state back to CREATE_JUST when registering fails
            # (client/src/main/java/org/apache/rocketmq/client/impl/producer/DefaultMQProducerImpl.java). Else its
            # group stayed registered on a shared instance, heartbeated, and a new start raised "already registered".
            await Producer.__aexit__(self, None, None, None)  # a subclass undoes its own part of the start
            raise
        return self

    def _check_not_running(self) -> None:
        """Raise ClientStateError for a start of a running producer before it touches anything, as
        DefaultMQProducerImpl.start throws "maybe started once" on any state but CREATE_JUST
        (client/src/main/java/org/apache/rocketmq/client/impl/producer/DefaultMQProducerImpl.java)."""
        if self._started:
            raise ClientStateError(f"producer {self._group!r} is running already: maybe started once")

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self._started = False
        try:
            with anyio.CancelScope(shield=True):
                if self.trace is not None:
                    await self.trace.stop()
                await self.instance.unregister(producer_group=self._group)
        finally:
            if self._own_instance:
                await self.instance.__aexit__(exc_type, exc, tb)

    def published_topics(self) -> set[str]:
        """The topics sent to, and the create-topic key, which every Java producer's ``DefaultMQProducerImpl.start``
        puts in its publish table (client/src/main/java/org/apache/rocketmq/client/impl/producer/DefaultMQProducerImpl
        .java), so the instance refreshes its route and heartbeats its brokers from the start (a template topic as the
        key where brokers auto-create nothing, TBW102 by default, which every instance refreshes anyway)."""
        return {self.create_topic_key, *self._publish}

    async def check_transaction_state(self, broker_addr: str, msg: MessageExt, request: RemotingCommand) -> None:
        """Transactions are not implemented by this producer: a check-back is logged and left unanswered, so the
        broker keeps asking until the half message expires (Java does the same without a listener)."""
        log.warning("transaction check-back for %s ignored: this producer has no transaction listener", msg.msg_id)

    # -- sending ---------------------------------------------------------------------------------------------------

    async def send(
        self,
        msg: Message,
        *,
        queue: MessageQueue | None = None,
        selector: MessageQueueSelector | None = None,
        arg: object = None,
        timeout: float | None = None,
    ) -> SendResult:
        """Send and wait for the broker's answer. With ``queue`` or ``selector`` the message goes to that queue in
        one attempt (ordered messages must not move); otherwise up to ``1 + retry_times_when_send_failed`` attempts,
        all within ``timeout`` (``send_msg_timeout``).
        Raises MQClientError, nothing sent, for a ``queue`` of another topic or a ``selector`` that raises or picks no
        queue."""
        self._check_started()
        if self.namespace:
            return self._unwrap_result(await self._send_namespaced(msg, queue, selector, arg, timeout))
        prepared = self._builder.single(msg)
        self._hook(prepared, msg, "SYNC")
        if queue is None and selector is None:
            info = self.cached_publish_info(msg.topic)
            if info is not None:  # what _dispatch does then, without its coroutine
                timeout = self.send_msg_timeout if timeout is None else timeout
                retries, not_stored = self.retry_times_when_send_failed, self.retry_another_broker_when_not_store_ok
                return await self.send_with_retries(
                    info, prepared, timeout, retries, retry_not_stored=not_stored, started=anyio.current_time()
                )
        _check_queue_topic(msg, queue)
        return await self._dispatch(
            prepared,
            msg,
            queue,
            selector,
            arg,
            timeout,
            self.retry_times_when_send_failed,
            retry_not_stored=self.retry_another_broker_when_not_store_ok,
        )

    async def _send_namespaced(
        self,
        msg: Message,
        queue: MessageQueue | None,
        selector: MessageQueueSelector | None,
        arg: object,
        timeout: float | None,
    ) -> SendResult:
        """:meth:`send` of a namespaced producer: a copy of ``msg`` under the namespace (Java wraps the message's topic
        for the send and restores it after), to the queue under it."""
        msg, queue = self._wrap_message(msg), self._wrap_queue(queue)
        prepared = self._builder.single(msg)
        self._hook(prepared, msg, "SYNC")
        _check_queue_topic(msg, queue)
        retries, not_stored = self.retry_times_when_send_failed, self.retry_another_broker_when_not_store_ok
        return await self._dispatch(prepared, msg, queue, selector, arg, timeout, retries, retry_not_stored=not_stored)

    def _wrap_message(self, msg: Message) -> Message:
        """``msg`` with its topic under the namespace: a copy, the application's message is left as it was."""
        topic = wrap(self.namespace, msg.topic)
        return msg if topic == msg.topic else attrs.evolve(msg, topic=topic)

    def _wrap_queue(self, queue: MessageQueue | None) -> MessageQueue | None:
        return None if queue is None else wrap_queue(self.namespace, queue)

    def _select(
        self, selector: MessageQueueSelector, info: TopicPublishInfo, msg: Message, arg: object
    ) -> MessageQueue:
        """The ``selector``'s pick among the topic's queues; under a namespace it sees the message and the queues with
        the topic the application named, and its pick is taken under the namespace (client/src/main/java/org/apache/
        rocketmq/client/impl/producer/DefaultMQProducerImpl.java ``sendSelectImpl``: ``parsePublishMessageQueues``,
        then ``queueWithNamespace`` of the pick)."""
        ns = self.namespace
        if not ns:
            return apply_selector(selector, list(info.message_queues), msg, arg)
        shown = attrs.evolve(msg, topic=unwrap(ns, msg.topic))
        queues = [unwrap_queue(ns, mq) for mq in info.message_queues]
        return wrap_queue(ns, apply_selector(selector, queues, shown, arg))

    def _unwrap_result(self, result: SendResult) -> SendResult:
        """A SendResult names the topic as the application does (Java's processSendResponse)."""
        topic = unwrap(self.namespace, result.topic)
        return result if topic == result.topic else attrs.evolve(result, topic=topic)

    def _unwrapping(self, callback: SendCallback) -> SendCallback:
        """``callback`` getting its SendResult with the topic unwrapped, when there is a namespace."""
        if not self.namespace:
            return callback

        def call(outcome: SendResult | Exception) -> object:
            return callback(self._unwrap_result(outcome) if isinstance(outcome, SendResult) else outcome)

        return call

    async def send_as_async(
        self,
        msg: Message,
        timeout: float,
        queue: MessageQueue | None,
        selector: MessageQueueSelector | None,
        arg: object,
    ) -> SendResult:
        """Java's ASYNC communication mode, awaited (its ``request`` sends this way): up to
        ``retry_times_when_send_async_failed`` retries, a chosen queue's outcome goes to the latency fault table as
        every attempt's does, and a ``queue`` of another topic is taken as given (``request(msg, mq)`` compares no
        topics). Raises as :meth:`send`."""
        self._check_started()
        if self.namespace:
            msg, queue = self._wrap_message(msg), self._wrap_queue(queue)
        prepared = self._builder.single(msg)
        self._hook(prepared, msg, "ASYNC")
        retries = self.retry_times_when_send_async_failed
        return await self._dispatch(prepared, msg, queue, selector, arg, timeout, retries, asynchronous=True)

    async def _dispatch(
        self,
        prepared: PreparedSend,
        msg: Message,
        queue: MessageQueue | None,
        selector: MessageQueueSelector | None,
        arg: object,
        timeout: float | None,
        retries: int,
        *,
        asynchronous: bool = False,
        retry_not_stored: bool = False,
    ) -> SendResult:
        """Send to ``queue``, to the ``selector``'s pick (one attempt each, but for an async send's transport
        failures, :meth:`_send_async_to_queue`) or with ``retries``. ``asynchronous`` (Java's sendMessageAsync): an
        attempt on a chosen queue reports to the fault table too (a sync one does not, sendMessageSync), and a
        broker's refusal is not retried. ``retry_not_stored``: see :meth:`send_with_retries`."""
        started = anyio.current_time()  # sendDefaultImpl's beginTimestampFirst: the route lookup counts too
        timeout = self.send_msg_timeout if timeout is None else timeout
        if queue is None:  # a chosen queue needs no route: sendKernelImpl needs only its broker's address
            info = await self.publish_info(msg.topic, selecting=selector is not None)
            if selector is None:
                # sendDefaultImpl in ASYNC mode gives its attempt ``timeout - costTime`` too, and MQClientAPIImpl's
                # onExceptionImpl a retry ``timeoutMillis - cost``: every attempt, sync or async, shares one budget.
                return await self.send_with_retries(
                    info,
                    prepared,
                    timeout,
                    retries,
                    retry_not_stored=retry_not_stored,
                    retry_refusals=not asynchronous,
                    started=started,
                )
            queue = self._select(selector, info, msg, arg)
        # The route lookups count too: sendSelectImpl gives the attempt ``timeout - costTime``, and sendKernelImpl
        # counts the re-read of a route naming no address for the queue's broker; both fail at once when nothing is
        # left (client/.../impl/producer/DefaultMQProducerImpl.java).
        await self._broker_address(queue)
        budget = time_left(timeout, started)
        if budget <= 0:
            raise RemotingTimeoutError("sendSelectImpl call timeout" if selector is not None else "call timeout")
        if asynchronous:
            return await self._send_async_to_queue(queue, prepared, timeout, started, retries)
        return await self._attempt(queue, prepared, budget, None)

    async def _send_async_to_queue(
        self, mq: MessageQueue, prepared: PreparedSend, timeout: float, started: float, retries: int
    ) -> SendResult:
        """An async send to a chosen queue: a transport failure is retried on that queue while ``retries`` and the
        ``timeout`` last, as MQClientAPIImpl.onExceptionImpl retries a send given no TopicPublishInfo (``send(msg, mq,
        callback)``, sendSelectImpl) on its broker with the same request (client/src/main/java/org/apache/rocketmq/
        client/impl/MQClientAPIImpl.java); a refusal is raised at once. Raises the last failure."""
        fault, failed = self._fault_table(), 0
        while True:
            try:
                return await self._attempt(mq, prepared, time_left(timeout, started), fault)
            except RemotingError as exc:
                failed += 1
                if failed > retries or time_left(timeout, started) <= 0:
                    raise
                log.info("async send to %s failed (%s), retrying there", mq, exc)

    def send_async(
        self,
        msg: Message,
        callback: SendCallback,
        *,
        queue: MessageQueue | None = None,
        selector: MessageQueueSelector | None = None,
        arg: object = None,
        timeout: float | None = None,
    ) -> None:
        """Start a send in the background (``retry_times_when_send_async_failed`` retries); ``callback`` gets the
        :class:`SendResult` or the exception (it may be a coroutine function), a message the send refuses
        (:class:`~client.errors.MessageValidationError`) too, after this call returned, as Java's ``send(msg,
        callback)`` checks it in its async sender's task
        (client/src/main/java/org/apache/rocketmq/client/impl/producer/DefaultMQProducerImpl.java).

        With the route and the broker cached and no ``queue`` / ``selector``, no task is spawned: the request is
        written now and the response completes it (:mod:`client.async_send`: 88-110 -> 45-50 us of client CPU per
        send, 2.2x the async rate). Otherwise a task takes the awaitable path."""
        self._check_started()
        if self.namespace:
            msg, queue, callback = self._wrap_message(msg), self._wrap_queue(queue), self._unwrapping(callback)
        try:
            prepared = self._builder.single_as(msg, AsyncSend)
        except MessageValidationError as exc:
            self._refuse_later(callback, exc)
            return
        self._hook(prepared, msg, "ASYNC")
        if queue is None and selector is None:
            info = self.cached_publish_info(msg.topic)
            if info is not None and msg.topic not in self._fallback_topics:
                timeout = self.send_msg_timeout if timeout is None else timeout
                prepared.launch(self, callback, timeout, self.retry_times_when_send_async_failed, info)
                return
        self.instance.task_group.start_soon(
            self._send_then_call, prepared, msg, callback, queue, selector, arg, timeout
        )

    def _refuse_later(self, callback: SendCallback, refusal: MessageValidationError) -> None:
        """Hand ``refusal`` to ``callback`` from a task, after the async send returned, as Java's async sender's task
        calls ``onException`` (``DefaultMQProducerImpl.send(msg, callback)``): never inside the call, where a callback
        sending the message again would recurse."""
        self.instance.task_group.start_soon(self._refuse, callback, refusal)

    async def _refuse(self, callback: SendCallback, refusal: MessageValidationError) -> None:
        self.instance.call_back(callback, refusal, "send")

    async def _send_then_call(
        self,
        prepared: PreparedSend,
        msg: Message,
        callback: SendCallback,
        queue: MessageQueue | None,
        selector: MessageQueueSelector | None,
        arg: object,
        timeout: float | None,
    ) -> None:
        outcome: SendResult | Exception
        try:
            _check_queue_topic(msg, queue)
            retries = self.retry_times_when_send_async_failed
            outcome = await self._dispatch(prepared, msg, queue, selector, arg, timeout, retries, asynchronous=True)
        except Exception as exc:
            outcome = exc
        except anyio.get_cancelled_exc_class():
            # The instance is stopping (its task group is cancelled only then) with the send under way. Java's
            # shutdown closes the channels, and NettyRemotingAbstract.failFast (remoting/src/main/java/org/apache/
            # rocketmq/remoting/netty/NettyRemotingAbstract.java) fails the pending request, so the callback hears
            # of it: tell it too (a coroutine callback is awaited by the stop, for at most rpc_timeout).
            stopped = ClientStateError(f"producer {self._group!r} stopped before the send to {msg.topic!r} ended")
            self.instance.call_back(callback, stopped, "send")
            raise
        # Not awaited here: the stop, which cancels this task, lets a running callback finish (see start_callback).
        self.instance.call_back(callback, outcome, "send")

    async def send_oneway(
        self,
        msg: Message,
        *,
        queue: MessageQueue | None = None,
        selector: MessageQueueSelector | None = None,
        arg: object = None,
    ) -> None:
        """Write the message and return without waiting for the broker (no retry, no result). A ``selector`` that
        raises or picks no queue raises MQClientError; a ``queue`` is taken as given (Java's ``sendOneway(msg, mq)``
        does not compare topics either). Without either, the queue is picked as a send's is, skipping the brokers the
        latency fault table isolates, and the write's outcome goes to that table (Java's ``sendDefaultImpl`` in
        ONEWAY mode): a failed write raises :class:`SendFailedError` with its ``response_code``."""
        self._check_started()
        if self.namespace:  # as send: no copy without a namespace (the hot path)
            msg, queue = self._wrap_message(msg), self._wrap_queue(queue)
        prepared = self._builder.single(msg)
        if queue is not None:  # sendOneway(msg, mq): sendKernelImpl at once, no route lookup
            await self._oneway_to(queue, prepared, msg, None)
            return
        info = await self.publish_info(msg.topic, selecting=selector is not None)
        if selector is not None:
            await self._oneway_to(self._select(selector, info, msg, arg), prepared, msg, None)
            return
        # sendDefaultImpl in ONEWAY mode: its one attempt's failure becomes "Send [1] times, still failed" with the
        # code of SendFailedError (client/.../impl/producer/DefaultMQProducerImpl.java).
        fault = self._fault_table()
        queue = select_one_message_queue(info, None, fault)
        try:
            await self._oneway_to(queue, prepared, msg, fault)
        except (RemotingError, BrokerNotExistError) as exc:
            raise SendFailedError(msg.topic, [(queue.broker_name, exc)]) from exc

    async def _oneway_to(
        self, queue: MessageQueue, prepared: PreparedSend, msg: Message, fault: LatencyFaultTolerance | None
    ) -> None:
        """sendKernelImpl in ONEWAY mode: write to ``queue``'s broker, told to the send hooks and ``fault``."""
        with _fault_reported(fault, queue.broker_name):
            addr = await self._broker_address(queue)
            fields = prepared.for_queue(queue.queue_id, queue.broker_name)
            context = None
            if self.send_hooks:  # sendKernelImpl in ONEWAY mode: after at once, without a result
                context = SendMessageContext(
                    self._group, msg, queue, self.hook_address(addr), "ONEWAY", namespace=self.namespace
                )
                hooks.run_before(self.send_hooks, context)
            try:
                await api.send_message_oneway(
                    self.instance.remoting, addr, fields, prepared.body, self.send_msg_timeout
                )
            except (RemotingError, MQBrokerError) as exc:
                if context is not None:
                    context.exception = exc
                    hooks.run_after(self.send_hooks, context)
                raise
            if context is not None:
                hooks.run_after(self.send_hooks, context)

    async def send_batch(
        self, msgs: Sequence[Message], *, queue: MessageQueue | None = None, timeout: float | None = None
    ) -> list[SendResult]:
        """Send messages of one topic as one SEND_BATCH_MESSAGE request, stored or refused as a whole. Returns a
        list of its one result (its ``msg_id`` joins the messages' ids by commas). A batch body over
        ``max_message_size`` raises MessageValidationError (MESSAGE_ILLEGAL) and nothing is sent, as Java's
        ``DefaultMQProducer.send(Collection)``: split a long list first, adding up
        ``client.send_request.batch_entry_size``. Batches may not carry delay levels or go to retry topics
        (MessageValidationError). With ``queue`` the batch goes there in one attempt (``send(Collection,
        MessageQueue)``; a queue of another topic raises MQClientError, nothing sent)."""
        self._check_started()
        msgs, queue = self._wrap_batch(msgs, queue)
        prepared = self._builder.batch(msgs)
        results = []
        for p in prepared:  # one request: the builder refuses a body over the limit
            self._hook(p, msgs, "SYNC")
            if queue is not None:
                _check_queue_topic(msgs[0], queue)
                results.append(await self._dispatch(p, msgs[0], queue, None, None, timeout, 0))
                continue
            started = anyio.current_time()  # sendDefaultImpl's beginTimestampFirst: the route lookup counts too
            info = await self.publish_info(msgs[0].topic)
            timeout = self.send_msg_timeout if timeout is None else timeout
            retries, not_stored = self.retry_times_when_send_failed, self.retry_another_broker_when_not_store_ok
            results.append(
                await self.send_with_retries(info, p, timeout, retries, retry_not_stored=not_stored, started=started)
            )
        return [self._unwrap_result(r) for r in results] if self.namespace else results

    def send_batch_async(
        self,
        msgs: Sequence[Message],
        callback: SendCallback,
        *,
        queue: MessageQueue | None = None,
        timeout: float | None = None,
    ) -> None:
        """:meth:`send_batch` in the background, as :meth:`send_async` sends one message (Java's ``send(Collection,
        SendCallback)`` and ``send(Collection, MessageQueue, SendCallback)``): ``callback`` gets the batch's one
        :class:`SendResult` or the exception. A rule of the batch broken raises here, nothing sent; a batch over
        ``max_message_size`` goes to the callback, as Java's ``sendDefaultImpl`` refuses it in its async sender's
        task (:class:`~client.send_request.BatchSizeError`)."""
        self._check_started()
        msgs, queue = self._wrap_batch(msgs, queue)
        if self.namespace:
            callback = self._unwrapping(callback)
        try:
            prepared = self._builder.batch(msgs)
        except BatchSizeError as exc:
            self._refuse_later(callback, exc)
            return
        for p in prepared:
            self._hook(p, msgs, "ASYNC")
            self.instance.task_group.start_soon(self._send_then_call, p, msgs[0], callback, queue, None, None, timeout)

    def _wrap_batch(
        self, msgs: Sequence[Message], queue: MessageQueue | None
    ) -> tuple[Sequence[Message], MessageQueue | None]:
        """The batch's messages and queue under the namespace, when there is one."""
        if not self.namespace:
            return msgs, queue
        return [self._wrap_message(m) for m in msgs], self._wrap_queue(queue)

    # -- request-reply (client/request_reply.py) --------------------------------------------------------------------

    async def request(
        self,
        msg: Message,
        timeout: float,
        *,
        queue: MessageQueue | None = None,
        selector: MessageQueueSelector | None = None,
        arg: object = None,
    ) -> MessageExt:
        """Send ``msg`` as a request and return the reply a replier sent back through the broker. Raises
        :class:`~client.request_reply.RequestTimeoutError` when none came within ``timeout`` seconds, and
        :class:`~client.errors.MQClientError` when the request could not be sent."""
        self._check_started()
        if not self.namespace:
            return await request_reply.request(self, msg, timeout, queue=queue, selector=selector, arg=arg)
        msg, queue = self._wrap_message(msg), self._wrap_queue(queue)
        reply = await request_reply.request(self, msg, timeout, queue=queue, selector=selector, arg=arg)
        return self._unwrap_reply(reply)

    def _unwrap_reply(self, reply: MessageExt) -> MessageExt:
        """A reply names its topic without the namespace, as the client's other answers do (ours: 4.9.8's
        ClientRemotingProcessor.receiveReplyMessage keeps the topic the broker pushed, which a namespaced replier's
        send wrapped)."""
        topic = unwrap(self.namespace, reply.topic)
        return reply if topic == reply.topic else attrs.evolve(reply, topic=topic)

    def request_async(
        self,
        msg: Message,
        callback: request_reply.RequestCallback,
        timeout: float,
        *,
        queue: MessageQueue | None = None,
        selector: MessageQueueSelector | None = None,
        arg: object = None,
    ) -> None:
        """:meth:`request` in the background: ``callback`` gets the reply or the exception (Java's
        ``RequestCallback``); it may be a coroutine function. A message the send would refuse raises
        :class:`~client.errors.MessageValidationError` here, before anything starts."""
        self._check_started()
        if self.namespace:
            msg, queue = self._wrap_message(msg), self._wrap_queue(queue)
        # Validators.checkMessage throws to request(msg, callback, timeout)'s caller: sendDefaultImpl runs on its
        # thread (client/src/main/java/org/apache/rocketmq/client/impl/producer/DefaultMQProducerImpl.java).
        self._builder.validate(msg)
        if self.namespace:
            given = callback

            def callback(outcome: MessageExt | Exception) -> object:
                return given(self._unwrap_reply(outcome) if isinstance(outcome, MessageExt) else outcome)

        request_reply.request_async(self, msg, callback, timeout, queue=queue, selector=selector, arg=arg)

    async def recall_message(self, topic: str, recall_handle: str, *, timeout: float | None = None) -> str:
        """Take back a timer (delay) message before its time, by the ``recall_handle`` of its SendResult (RocketMQ
        5.3's ``DefaultMQProducer.recallMessage``); returns its message id. Raises MQClientError for a retry or DLQ
        topic or a handle that does not decode, MQBrokerError when the broker refuses (recall disabled, the handle's
        time passed, ...), MessageValidationError for a topic name Java's ``Validators.checkTopic`` refuses, checked
        first as in 5.3.3's ``DefaultMQProducerImpl.recallMessage``."""
        self._check_started()
        topic = wrap(self.namespace, topic)
        check_topic_name(topic)
        if is_retry_or_dlq_topic(topic):
            raise MQClientError("topic is not supported")
        try:
            handle = decode_recall_handle(recall_handle)
        except RecallHandleError as exc:
            raise MQClientError(str(exc)) from None
        await self.publish_info(topic)
        address = self.instance.find_broker_address(handle.broker_name)
        if address is None:
            raise MQClientError(f"the broker service address of {handle.broker_name} not found")
        header = RecallMessageRequestHeader(
            topic=topic, recall_handle=recall_handle, producer_group=self._group, bname=handle.broker_name
        )
        timeout = self.send_msg_timeout if timeout is None else timeout
        return await api.recall_message(self.instance.remoting, address, header, timeout)

    # -- internals -------------------------------------------------------------------------------------------------

    def _check_started(self) -> None:
        if not self._started:
            raise ClientStateError(f"producer {self._group!r} is not started (use `async with`)")

    def cached_publish_info(self, topic: str) -> TopicPublishInfo | None:
        """The send hot path of :meth:`publish_info`: ``topic``'s writable queues if nothing changed since the last
        send, else ``None`` (then :meth:`publish_info` must be awaited)."""
        info = self._publish.get(topic)
        if info is not None and info.ok and self.instance.routes.get(topic) is info.route:
            return info
        return None

    async def publish_info(self, topic: str, *, selecting: bool = False) -> TopicPublishInfo:
        """The writable queues of ``topic`` (route fetched when unknown). Raises TopicRouteNotFoundError in
        sendDefaultImpl's words and code, or with ``selecting`` sendSelectImpl's
        (:meth:`TopicRouteNotFoundError.for_send`)."""
        cached = self.cached_publish_info(topic)
        if cached is not None:
            return cached
        try:
            return await self._fetch_publish_info(topic)
        except TopicRouteNotFoundError as exc:
            raise exc.for_send(selecting=selecting) from None

    async def _fetch_publish_info(self, topic: str) -> TopicPublishInfo:
        info = self._publish.get(topic)
        try:
            route = await self.instance.route(topic)
        except TopicRouteNotFoundError:
            route = await self._default_topic_route(topic)
        if info is None or info.route is not route:
            fresh = publish_info(topic, route)
            if info is not None:
                fresh.send_which_queue = info.send_which_queue
            info = self._publish[topic] = fresh
        if not info.ok:
            route = await self.instance.fetch_route(topic)
            info = self._publish[topic] = publish_info(topic, route)
        if not info.ok:
            raise TopicRouteNotFoundError(topic, self.instance.config.namesrv_addr, "the route has no writable queue")
        return info

    async def _default_topic_route(self, topic: str) -> TopicRouteData:
        """Java's auto-create path: a topic unknown to the name servers is sent with the route of
        ``create_topic_key`` (TBW102), at most ``default_topic_queue_nums`` queues per broker, cached under ``topic``
        (never under the key, whose own route the refresh keeps there); the broker then creates it. Raises the original
        TopicRouteNotFoundError for ``topic`` when TBW102 has no route either."""
        try:
            default = await self.instance.query_route(self.create_topic_key)
        except TopicRouteNotFoundError:
            raise TopicRouteNotFoundError(topic, self.instance.config.namesrv_addr) from None
        queues = [
            attrs.evolve(
                qd,
                read_queue_nums=min(qd.read_queue_nums, self.default_topic_queue_nums),
                write_queue_nums=min(qd.write_queue_nums, self.default_topic_queue_nums),
            )
            for qd in default.queue_datas
        ]
        self._fallback_topics.add(topic)
        cached = self.instance.routes.get(topic)  # a concurrent send's: keep it
        return cached or await self.instance.adopt_route(topic, attrs.evolve(default, queue_datas=queues))

    async def _broker_address(self, mq: MessageQueue) -> str:
        """``mq``'s master address, the route re-read once when unknown (or, for a topic without one, the
        ``create_topic_key`` route taken); else BrokerNotExistError, as sendKernelImpl after its
        ``tryToFindTopicPublishInfo`` (which never throws)."""
        addr = self.instance.find_broker_address(mq.broker_name)
        if addr is None:
            with contextlib.suppress(TopicRouteNotFoundError):
                try:
                    await self.instance.fetch_route(mq.topic)
                except TopicRouteNotFoundError:
                    await self._default_topic_route(mq.topic)
            addr = self.instance.find_broker_address(mq.broker_name)
        if addr is None:
            raise BrokerNotExistError(mq.broker_name)
        return addr

    def _send_to(self, mq: MessageQueue, prepared: PreparedSend, timeout: float) -> Awaitable[SendResult]:
        """One attempt on ``mq``. Without a trace and with the broker's address cached, the awaitable is
        :func:`api.send_prepared`'s own coroutine (one frame less per switch of the sending task)."""
        addr = self.instance.find_broker_address(mq.broker_name)
        if self.send_hooks and getattr(prepared, "hooked", None) is not None:
            return self._send_hooked(mq, prepared, timeout)
        if addr is not None and self.trace is None and not self.master_watch.marked(addr):
            return api.send_prepared(self.instance.remoting, addr, mq.broker_name, prepared, mq.queue_id, timeout)
        return self._send_to_slow(mq, prepared, timeout)

    async def _send_hooked(self, mq: MessageQueue, prepared: PreparedSend, timeout: float) -> SendResult:
        """:meth:`_send_to_slow` told to the send hooks: before, after with the result or the transport error or
        refusal (sendKernelImpl's SYNC case; an async send's attempts here alike)."""
        addr = self.instance.find_broker_address(mq.broker_name) or await self._broker_address(mq)
        msg, mode = prepared.hooked
        context = SendMessageContext(self._group, msg, mq, self.hook_address(addr), mode, namespace=self.namespace)
        hooks.run_before(self.send_hooks, context)
        try:
            result = await self._send_to_slow(mq, prepared, timeout)
        except (RemotingError, MQBrokerError) as exc:
            context.exception = exc
            hooks.run_after(self.send_hooks, context)
            raise
        context.send_result = result
        hooks.run_after(self.send_hooks, context)
        return result

    async def _send_to_slow(self, mq: MessageQueue, prepared: PreparedSend, timeout: float) -> SendResult:
        addr = self.instance.find_broker_address(mq.broker_name) or await self._broker_address(mq)
        trace = self.trace
        start_ms = time.time_ns() // 1_000_000 if trace is not None else 0
        remoting, watch = self.instance.remoting, self.master_watch
        if watch.marked(addr):
            result = await watch.send(
                mq.topic,
                mq.broker_name,
                addr,
                lambda: api.send_prepared(remoting, addr, mq.broker_name, prepared, mq.queue_id, timeout),
            )
            watch.succeeded(addr)
        else:
            result = await api.send_prepared(remoting, addr, mq.broker_name, prepared, mq.queue_id, timeout)
        if trace is not None:
            trace.on_sent(start_ms, self.hook_address(addr), prepared, result)
        return result

    async def send_with_retries(
        self,
        info: TopicPublishInfo,
        prepared: PreparedSend,
        timeout: float,
        retries: int,
        *,
        attempts: list[tuple[str, BaseException]] | None = None,
        last_broker: str | None = None,
        retry_not_stored: bool = False,
        retry_refusals: bool = True,
        started: float | None = None,
    ) -> SendResult:
        """Up to ``1 + retries`` attempts on the next queue, avoiding the broker that failed last. ``attempts``
        (extended in place) and ``last_broker`` carry on a send that already failed elsewhere (an async retry).

        ``retry_refusals`` (a sync send): a refusal with one of :attr:`retry_response_codes` makes another attempt
        (sendDefaultImpl's ``retryResponseCodes``); an async send retries only when no answer came and raises every
        refusal at once (client/.../impl/MQClientAPIImpl.java sendMessageAsync: onExceptionImpl, needRetry false).

        ``retry_not_stored`` (a sync send with ``retry_another_broker_when_not_store_ok``): a result other than
        SEND_OK makes another attempt on another broker too, and is returned when no later attempt gets a result, as
        in Java's ``sendDefaultImpl`` (client/.../impl/producer/DefaultMQProducerImpl.java).

        ``started`` (the clock's time when the send began): ``timeout`` covers every attempt, each getting what is
        left of it, and once nothing is left no further attempt is made (sendDefaultImpl's ``timeout - costTime``,
        "sendDefaultImpl call timeout"; an async send's retries alike, MQClientAPIImpl's ``timeoutMillis - cost``).
        Without it every attempt gets the whole ``timeout``. The route is re-read (:meth:`_reread_route`) after a
        failed attempt before the next; after the last one the failure is raised at once and the re-read left to
        the background."""
        topic = prepared.topic
        attempts = [] if attempts is None else attempts
        fault = self._fault_table()
        not_stored: SendResult | None = None  # the last answer that was not SEND_OK
        last = max(0, retries)
        for tried in range(1 + last):
            budget = timeout
            if started is not None:
                budget = time_left(timeout, started)
                if budget <= 0:
                    if not_stored is not None:
                        return not_stored
                    raise SendFailedError(topic, attempts, timed_out=True)
            mq = select_one_message_queue(info, last_broker, fault)
            addr = self.instance.find_broker_address(mq.broker_name)
            try:
                result = await self._attempt(mq, prepared, budget, fault)
            except (RemotingError, MQBrokerError, BrokerNotExistError) as exc:
                if isinstance(exc, MQBrokerError) and (not retry_refusals or exc.code not in self.retry_response_codes):
                    if not_stored is not None:
                        return not_stored
                    raise
                attempts.append((mq.broker_name, exc))
                last_broker = mq.broker_name
                # An async send's one sendDefaultImpl attempt ends at a broker without master (its MQClientAPIImpl
                # retries only transport failures); a sync send's goes on, as sendDefaultImpl ``continue``s.
                if tried == last or (isinstance(exc, BrokerNotExistError) and not retry_refusals):
                    # No attempt follows: the failure is reported now and the route re-read for later sends in the
                    # background, as Java's sendDefaultImpl and MQClientAPIImpl.onExceptionImpl give up at once
                    # (client/src/main/java/org/apache/rocketmq/client/impl/producer/DefaultMQProducerImpl.java).
                    self._reread_route_later(topic, addr, info)
                    log.info("send to %s failed (%s), %d attempt(s), no more", mq, exc, len(attempts))
                    break
                # A sync send's re-read gets what is left of its timeout, no more (sendDefaultImpl never waits past it).
                left = math.inf if started is None else time_left(timeout, started)
                with anyio.move_on_after(left):
                    info = await self._reread_route(topic, addr, info)
                log.info("send to %s failed (%s), %d attempt(s) so far", mq, exc, len(attempts))
                continue
            if retry_not_stored and result.send_status is not SendStatus.SEND_OK:
                not_stored, last_broker = result, mq.broker_name
                log.info("send to %s answered %s, trying another broker", mq, result.send_status.value)
                continue
            return result
        if not_stored is not None:
            return not_stored
        raise SendFailedError(topic, attempts)

    async def _reread_route(self, topic: str, addr: str | None, info: TopicPublishInfo) -> TopicPublishInfo:
        """The route after a failed attempt on ``addr``: ``info`` unless a fresh one is found."""
        if topic in self._fallback_topics:
            # The TBW102 stand-in route may be wrong for a topic that exists by now: ask again.
            self._fallback_topics.discard(topic)
            self.instance.forget_route(topic)
        else:
            # A master that failed (gone, paused, deposed, refusing): re-read the route now, not at the next 30 s
            # poll, so the retry finds a new master (a DLedger group's new leader) or drops a broker group without
            # one; later sends to it give up once the route names another (client/master_watch.py).
            await self.master_watch.failed(topic, addr)
        with contextlib.suppress(TopicRouteNotFoundError):
            return await self.publish_info(topic)
        return info

    def _reread_route_later(self, topic: str, addr: str | None, info: TopicPublishInfo) -> None:
        """:meth:`_reread_route` in the client instance's task group (a failure logged), for the sends that follow
        one that gave up: nothing waits for it. The failed master is marked at once, for the sends that follow
        before the task runs."""
        if topic not in self._fallback_topics:
            self.master_watch.mark(addr)

        async def reread() -> None:
            try:
                await self._reread_route(topic, addr, info)
            except Exception as exc:
                log.info("re-reading the route of %s after a failed send failed: %s", topic, exc)

        with contextlib.suppress(RuntimeError, ClientStateError):  # shutting down: nothing left to refresh for
            self.instance.task_group.start_soon(reread)

    def _fault_table(self) -> LatencyFaultTolerance | None:
        return self.fault if self.send_latency_fault_enable else None

    def _attempt(
        self, mq: MessageQueue, prepared: PreparedSend, timeout: float, fault: LatencyFaultTolerance | None
    ) -> Awaitable[SendResult]:
        """One attempt on ``mq`` whose latency and outcome go to ``fault`` when given, every failure, retried or not
        (Java's ``updateFaultItem``); without ``fault`` it is :meth:`_send_to` itself (no extra frame)."""
        if fault is None:
            return self._send_to(mq, prepared, timeout)
        return self._reported_attempt(mq, prepared, timeout, fault)

    async def _reported_attempt(
        self, mq: MessageQueue, prepared: PreparedSend, timeout: float, fault: LatencyFaultTolerance
    ) -> SendResult:
        with _fault_reported(fault, mq.broker_name):
            return await self._send_to(mq, prepared, timeout)


@contextlib.contextmanager
def _fault_reported(fault: LatencyFaultTolerance | None, broker_name: str) -> Iterator[None]:
    """Report the latency of the block's write to ``broker_name`` to ``fault`` (when given), failed when the block
    raises a transport error or a broker's refusal (Java's ``updateFaultItem``); the error propagates."""
    if fault is None:
        yield
        return
    started = anyio.current_time()
    try:
        yield
    except (RemotingError, MQBrokerError, BrokerNotExistError):
        fault.report(broker_name, int((anyio.current_time() - started) * 1000), failed=True)
        raise
    fault.report(broker_name, int((anyio.current_time() - started) * 1000), failed=False)


def _check_queue_topic(msg: Message, queue: MessageQueue | None) -> None:
    """Java's ``send(msg, mq)`` and ``send(msg, mq, callback)`` refuse a queue of another topic (``request`` and
    ``sendOneway`` do not). Raises MQClientError."""
    if queue is not None and queue.topic != msg.topic:
        raise MQClientError("message's topic not equal mq's topic")
