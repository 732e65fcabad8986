"""Blocking facade: :class:`Producer`, :class:`TransactionProducer`, :class:`PushConsumer`, :class:`LitePullConsumer`
and :class:`Admin` for plain synchronous code, with the async classes' method names.

Each facade object runs its async twin on a background event loop started with
``anyio.from_thread.start_blocking_portal`` (asyncio by default, ``backend="trio"`` works too) and forwards calls
through the portal, so they block the calling thread until done and raise what the async method raised. Use as a
context manager or call ``start()`` / ``shutdown()``::

    from client.sync import Producer, PushConsumer

    with Producer("pg", namesrv_addr="127.0.0.1:9876") as producer:
        producer.send(Message("TopicTest", b"hello"))

    consumer = PushConsumer("cg", namesrv_addr="127.0.0.1:9876")
    consumer.subscribe("TopicTest")
    consumer.register_message_listener(lambda msgs: ConsumeConcurrentlyStatus.CONSUME_SUCCESS)
    consumer.start(); ...; consumer.shutdown()

Methods not spelled out here (e.g. ``Admin.consumer_progress``) are forwarded by name: a coroutine method of the
async object becomes a blocking method of the facade. Its public attributes are read and written through the facade
too (``producer.max_message_size = 1024`` sets the async producer's).

Push listeners, and a lite pull consumer's queue listeners, given to the facade may be plain functions (they run in
worker threads, so they may call the facade's blocking methods) or coroutine functions (they run on the background
loop). ``send_async`` callbacks run on the background loop's thread.
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable, Iterable, Mapping, Sequence
from contextlib import AbstractContextManager, ExitStack
from types import TracebackType
from typing import Any, Self

import anyio
from anyio.from_thread import BlockingPortal, start_blocking_portal

from client import admin as _admin
from client import producer as _producer
from client import transaction as _transaction
from client.config import ClientConfig
from client.consumer import lite_pull as _lite_pull
from client.consumer import push as _push
from client.consumer.hooks import ConsumeMessageHook
from client.consumer.listener import MessageListener
from client.errors import ClientStateError
from client.hooks import SendMessageHook
from client.message import Message, MessageExt, SendResult
from client.producer import SendCallback
from client.request_reply import RequestCallback
from client.selector import MessageQueueSelector
from remoting.codec.bodies import ClusterInfo, MessageQueue, TopicRouteData


class _Facade:
    """Owns the portal thread and the async object's context; subclasses forward methods through :meth:`_call`."""

    def __init__(self, target: Any, backend: str) -> None:
        self._target = target
        self._backend = backend
        self._stack: ExitStack | None = None
        self._portal: BlockingPortal | None = None

    def start(self) -> None:
        """Start the background loop and enter the async object (connects, heartbeats, first rebalance)."""
        if self._stack is not None:
            raise ClientStateError("already started")
        stack = ExitStack()
        try:
            portal_cm: AbstractContextManager[BlockingPortal] = start_blocking_portal(self._backend)
            self._portal = stack.enter_context(portal_cm)
            stack.enter_context(self._portal.wrap_async_context_manager(self._target))
        except BaseException:
            stack.close()
            self._portal = None
            raise
        self._stack = stack

    def shutdown(self) -> None:
        """Leave the async object (graceful shutdown) and stop the background loop. Idempotent."""
        stack, self._stack = self._stack, None
        if stack is not None:
            stack.close()
        self._portal = None

    def __enter__(self) -> Self:
        self.start()
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.shutdown()

    def __getattr__(self, name: str) -> Any:
        """Every other public method of the async object, by the same name: coroutine methods run through the
        portal (blocking), anything else is returned as is."""
        if name.startswith("_"):
            raise AttributeError(name)
        attr = getattr(self._target, name)
        if inspect.iscoroutinefunction(attr):
            return functools.partial(self._call, attr)
        return attr

    def __setattr__(self, name: str, value: Any) -> None:
        """A public attribute of the async object (``max_message_size``, ``pull_batch_size``, ...) is set on it, as
        Java's setters change the client itself; the facade's own attributes stay the facade's."""
        target = self.__dict__.get("_target")
        own = name.startswith("_") or name in self.__dict__ or hasattr(type(self), name)
        if target is not None and not own and hasattr(target, name):
            setattr(target, name, value)
        else:
            object.__setattr__(self, name, value)

    def _call(self, fn: Any, *args: Any, **kwargs: Any) -> Any:
        if self._portal is None:
            raise ClientStateError("not started: call start() or use `with`")
        return self._portal.call(lambda: fn(*args, **kwargs))


class Producer(_Facade):
    """Blocking :class:`client.producer.Producer`; constructor arguments are the same plus ``backend``."""

    def __init__(
        self,
        group: str,
        namesrv_addr: str | Sequence[str] | None = None,
        *,
        backend: str = "asyncio",
        **options: Any,
    ) -> None:
        self.producer = _producer.Producer(group, namesrv_addr, **options)
        super().__init__(self.producer, backend)

    def register_send_message_hook(self, hook: SendMessageHook) -> None:
        """The hook runs on the background loop's thread: it must not block nor call this facade."""
        self.producer.register_send_message_hook(hook)

    def send(self, msg: Message, **options: Any) -> SendResult:
        result: SendResult = self._call(self.producer.send, msg, **options)
        return result

    def send_async(self, msg: Message, callback: SendCallback, **options: Any) -> None:
        if self._portal is None:
            raise ClientStateError("not started: call start() or use `with`")
        self._portal.call(self._start_async, msg, callback, options)

    async def _start_async(self, msg: Message, callback: SendCallback, options: dict[str, Any]) -> None:
        self.producer.send_async(msg, callback, **options)

    def request_async(self, msg: Message, callback: RequestCallback, timeout: float, **where: Any) -> None:
        """:meth:`client.producer.Producer.request_async`; ``callback`` runs on the background loop's thread.
        (``request`` itself is forwarded by name and blocks until the reply or the timeout.)"""
        if self._portal is None:
            raise ClientStateError("not started: call start() or use `with`")
        self._portal.call(self._start_request, msg, callback, timeout, where)

    async def _start_request(
        self, msg: Message, callback: RequestCallback, timeout: float, where: dict[str, Any]
    ) -> None:
        self.producer.request_async(msg, callback, timeout, **where)

    def send_oneway(
        self,
        msg: Message,
        *,
        queue: MessageQueue | None = None,
        selector: MessageQueueSelector | None = None,
        arg: object = None,
    ) -> None:
        self._call(self.producer.send_oneway, msg, queue=queue, selector=selector, arg=arg)

    def send_batch(self, msgs: Sequence[Message], **options: Any) -> list[SendResult]:
        results: list[SendResult] = self._call(self.producer.send_batch, msgs, **options)
        return results


class TransactionProducer(Producer):
    """Blocking :class:`client.transaction.TransactionProducer`. Plain-function callbacks run in worker threads,
    coroutine functions on the background loop; constructor arguments are the async class's plus ``backend``."""

    def __init__(
        self,
        group: str,
        namesrv_addr: str | Sequence[str] | None = None,
        *,
        execute_local_transaction: _transaction.ExecuteLocalTransaction,
        check_local_transaction: _transaction.CheckLocalTransaction,
        backend: str = "asyncio",
        **options: Any,
    ) -> None:
        self.producer = self.transaction_producer = _transaction.TransactionProducer(
            group,
            namesrv_addr,
            execute_local_transaction=execute_local_transaction,
            check_local_transaction=check_local_transaction,
            **options,
        )
        _Facade.__init__(self, self.producer, backend)

    def send_message_in_transaction(
        self, msg: Message, arg: object = None, *, timeout: float | None = None
    ) -> _transaction.TransactionSendResult:
        result: _transaction.TransactionSendResult = self._call(
            self.transaction_producer.send_message_in_transaction, msg, arg, timeout=timeout
        )
        return result


class PushConsumer(_Facade):
    """Blocking :class:`client.consumer.push.PushConsumer`."""

    def __init__(
        self,
        group: str,
        namesrv_addr: str | Sequence[str] | None = None,
        *,
        backend: str = "asyncio",
        **options: Any,
    ) -> None:
        self.consumer = _push.PushConsumer(group, namesrv_addr, **options)
        super().__init__(self.consumer, backend)

    def subscribe(self, topic: str, expression: str = "*", expression_type: str = "TAG") -> None:
        if self._portal is None:
            self.consumer.subscribe(topic, expression, expression_type)
        else:
            self._portal.call(self._subscribe, topic, expression, expression_type)

    async def _subscribe(self, topic: str, expression: str, expression_type: str) -> None:
        self.consumer.subscribe(topic, expression, expression_type)

    def register_message_listener(self, listener: MessageListener) -> None:
        self.consumer.register_message_listener(listener)

    def register_message_listener_orderly(self, listener: MessageListener) -> None:
        self.consumer.register_message_listener_orderly(listener)

    def resume(self) -> None:
        """On the background loop's thread, whose rebalance it wakes."""
        if self._portal is None:
            self.consumer.resume()
        else:
            self._portal.call(self.consumer.resume)

    def fetch_subscribe_message_queues(self, topic: str) -> list[MessageQueue]:
        result: list[MessageQueue] = self._call(self.consumer.fetch_subscribe_message_queues, topic)
        return result

    def send_message_back(self, msg: MessageExt, delay_level: int, broker_name: str | None = None) -> None:
        """Blocking :meth:`client.consumer.push.PushConsumer.send_message_back`, from any thread but the background
        loop's (a plain listener's worker thread may call it)."""
        self._call(self.consumer.send_message_back, msg, delay_level, broker_name)

    def register_consume_message_hook(self, hook: ConsumeMessageHook) -> None:
        """The hook runs on the background loop's thread: it must not block nor call this facade."""
        self.consumer.register_consume_message_hook(hook)


def _in_worker_thread(listener: Callable[..., object]) -> Callable[..., object]:
    """A plain listener as a coroutine function that runs it in a worker thread, off the background loop whose thread
    the facade's blocking methods cannot be called from; a coroutine function as it is."""
    if inspect.iscoroutinefunction(listener):
        return listener

    async def in_thread(*args: object) -> object:
        return await anyio.to_thread.run_sync(listener, *args)

    return in_thread


class LitePullConsumer(_Facade):
    """Blocking :class:`client.consumer.lite_pull.LitePullConsumer`."""

    def __init__(
        self,
        group: str,
        namesrv_addr: str | Sequence[str] | None = None,
        *,
        backend: str = "asyncio",
        **options: Any,
    ) -> None:
        self.consumer = _lite_pull.LitePullConsumer(group, namesrv_addr, **options)
        super().__init__(self.consumer, backend)

    def register_consume_message_hook(self, hook: ConsumeMessageHook) -> None:
        """The hook runs on the background loop's thread: it must not block nor call this facade."""
        self.consumer.register_consume_message_hook(hook)

    def subscribe(
        self,
        topic: str,
        expression: str = "*",
        expression_type: str = "TAG",
        listener: Callable[[str, set[MessageQueue], set[MessageQueue]], object] | None = None,
    ) -> None:
        """``listener(topic, mq_all, mq_divided)``, a plain function, runs in a worker thread and may call this
        consumer (``seek`` the queues it was given). Before :meth:`start` it is kept for the start, as Java's."""
        wrapped = None if listener is None else _in_worker_thread(listener)
        if self._portal is None:
            self.consumer.set_subscription(topic, expression, expression_type, listener=wrapped)
        else:
            self._call(self.consumer.subscribe, topic, expression, expression_type, wrapped)

    def fetch_message_queues(self, topic: str) -> list[MessageQueue]:
        queues: list[MessageQueue] = self._call(self.consumer.fetch_message_queues, topic)
        return queues

    def assign(self, mqs: Iterable[MessageQueue], expression: str = "*") -> None:
        """Before :meth:`start` the queues are kept for the start, as Java's."""
        if self._portal is None:
            self.consumer.set_assignment(list(mqs), expression)
        else:
            self._call(self.consumer.assign, list(mqs), expression)

    def poll(self, timeout: float | None = None) -> list[MessageExt]:
        msgs: list[MessageExt] = self._call(self.consumer.poll, timeout)
        return msgs

    def unsubscribe(self, topic: str) -> None:
        self._call(self.consumer.unsubscribe, topic)

    def commit(
        self, offsets: Mapping[MessageQueue, int] | Iterable[MessageQueue] | None = None, *, persist: bool = True
    ) -> None:
        chosen = offsets if offsets is None or isinstance(offsets, Mapping) else list(offsets)
        self._call(self.consumer.commit, chosen, persist=persist)

    def register_topic_message_queue_change_listener(
        self, topic: str, listener: Callable[[str, set[MessageQueue]], object]
    ) -> None:
        """``listener(topic, queues)``, a plain function, runs in a worker thread. Before :meth:`start` it is kept
        for the start, as Java's."""
        listener = _in_worker_thread(listener)
        if self._portal is None:
            self.consumer.set_topic_queue_listener(topic, listener)
        else:
            self._call(self.consumer.register_topic_message_queue_change_listener, topic, listener)

    def committed(self, mq: MessageQueue) -> int | None:
        offset: int | None = self._call(self.consumer.committed, mq)
        return offset

    def seek(self, mq: MessageQueue, offset: int) -> None:
        self._call(self.consumer.seek, mq, offset)

    def seek_to_begin(self, mq: MessageQueue) -> None:
        self._call(self.consumer.seek_to_begin, mq)

    def seek_to_end(self, mq: MessageQueue) -> None:
        self._call(self.consumer.seek_to_end, mq)


class Admin(_Facade):
    """Blocking :class:`client.admin.Admin`."""

    def __init__(
        self,
        namesrv_addr: str | Sequence[str] | None = None,
        *,
        config: ClientConfig | None = None,
        backend: str = "asyncio",
    ) -> None:
        self.admin = _admin.Admin(namesrv_addr, config=config)
        super().__init__(self.admin, backend)

    def create_topic(self, topic: str, **options: Any) -> None:
        self._call(self.admin.create_topic, topic, **options)

    def delete_topic(self, topic: str, **options: Any) -> None:
        self._call(self.admin.delete_topic, topic, **options)

    def topic_route(self, topic: str) -> TopicRouteData:
        route: TopicRouteData = self._call(self.admin.topic_route, topic)
        return route

    def topic_list(self) -> list[str]:
        topics: list[str] = self._call(self.admin.topic_list)
        return topics

    def cluster_info(self) -> ClusterInfo:
        info: ClusterInfo = self._call(self.admin.cluster_info)
        return info
