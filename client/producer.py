"""The producer (Java's ``DefaultMQProducer``): sync, async and oneway sends, batches split at the size limit, retries
that avoid the broker that just failed, latency fault avoidance and queue selectors for ordered messages.

Usage::

    async with Producer("my-group", namesrv_addr="127.0.0.1:9876") as producer:
        result = await producer.send(Message("TopicTest", b"hello", tags="TagA", keys="order-1"))
        await producer.send(msg, selector=select_by_hash, arg=order_id)   # ordered per order id
        producer.send_async(msg, on_result)                                 # callback gets SendResult | Exception
        await producer.send_oneway(msg)
        results = await producer.send_batch([msg1, msg2, ...])              # one SendResult per sub-batch

Errors: :class:`~client.errors.TopicRouteNotFoundError` (names the topic and the name servers),
:class:`~client.errors.MessageValidationError` (nothing sent), :class:`~client.errors.SendFailedError` after every
attempt failed (``retry_times_when_send_failed`` retries on transport errors and on the response codes Java retries),
:class:`~client.errors.MQBrokerError` for a refusal that retrying cannot fix (e.g. MESSAGE_ILLEGAL).

The producer owns a private :class:`~client.instance.MQClientInstance` unless one is passed in; either way the
instance must outlive the ``async with`` block. Async sends run in the instance's task group: leaving the block
cancels the ones still in flight.
"""

from __future__ import annotations

import contextlib
import inspect
import logging
import time
import zlib
from collections.abc import Callable, Sequence
from types import TracebackType
from typing import Final, Self

import anyio
import attrs

from client import api
from client.config import ClientConfig
from client.errors import (
    ClientStateError,
    MessageValidationError,
    MQBrokerError,
    SendFailedError,
    TopicRouteNotFoundError,
)
from client.fault import LatencyFaultTolerance
from client.instance import MQClientInstance
from client.message import COMPRESSION_ZLIB, Message, SendResult
from client.route import TopicPublishInfo, publish_info
from client.selector import MessageQueueSelector, select_one_message_queue
from remoting.codec.bodies import MessageQueue, TopicRouteData
from remoting.codec.codes import ResponseCode
from remoting.codec.command import RemotingCommand
from remoting.codec.headers import SendMessageRequestHeaderV2
from remoting.codec.message import SYSFLAG_COMPRESSED, BatchEntry, MessageExt, encode_batch_body
from remoting.codec.msgid import UniqKeyGenerator
from remoting.codec.properties import PROPERTY_UNIQ_KEY, PROPERTY_WAIT, encode_properties
from remoting.errors import RemotingError

log = logging.getLogger(__name__)

#: Java's ``maxMessageSize`` and ``compressMsgBodyOverHowmuch`` defaults.
MAX_MESSAGE_SIZE: Final = 4 * 1024 * 1024
COMPRESS_OVER: Final = 4 * 1024
#: Response codes after which Java retries on another queue (``retryResponseCodes``).
RETRY_RESPONSE_CODES: Final = frozenset({17, 14, 1, 16, 204, 205})
#: Bytes a batch entry adds around its body and properties.
BATCH_ENTRY_OVERHEAD: Final = 22

SendCallback = Callable[[SendResult | Exception], object]

_uniq_keys: dict[str, UniqKeyGenerator] = {}


def _uniq_key_generator(ip: str) -> UniqKeyGenerator:
    gen = _uniq_keys.get(ip)
    if gen is None:
        try:
            gen = _uniq_keys[ip] = UniqKeyGenerator(ip)
        except ValueError:
            gen = _uniq_keys[ip] = UniqKeyGenerator()
    return gen


def split_batch(entries: Sequence[BatchEntry], limit: int = MAX_MESSAGE_SIZE) -> list[list[BatchEntry]]:
    """Split ``entries`` in order into runs whose encoded batch body stays within ``limit`` bytes.

    Raises :class:`MessageValidationError` when a single entry alone exceeds ``limit``.
    """
    batches: list[list[BatchEntry]] = []
    current: list[BatchEntry] = []
    size = 0
    for entry in entries:
        entry_size = BATCH_ENTRY_OVERHEAD + len(entry.body) + len(entry.properties.encode())
        if entry_size > limit:
            raise MessageValidationError(f"a batch message of {entry_size} bytes exceeds the {limit}-byte limit")
        if current and size + entry_size > limit:
            batches.append(current)
            current, size = [], 0
        current.append(entry)
        size += entry_size
    if current:
        batches.append(current)
    return batches


class Producer:
    """See the module docstring. Times are seconds."""

    def __init__(
        self,
        group: str,
        namesrv_addr: str | Sequence[str] = "127.0.0.1:9876",
        *,
        instance: MQClientInstance | None = None,
        config: ClientConfig | None = None,
        send_msg_timeout: float = 3.0,
        retry_times_when_send_failed: int = 2,
        retry_times_when_send_async_failed: int = 2,
        compress_msg_body_over_howmuch: int = COMPRESS_OVER,
        max_message_size: int = MAX_MESSAGE_SIZE,
        send_latency_fault_enable: bool = False,
        default_topic_queue_nums: int = 4,
        create_topic_key: str = "TBW102",
    ) -> None:
        self._group = group
        if instance is None:
            cfg = config or ClientConfig(namesrv_addr=namesrv_addr)  # type: ignore[arg-type]
            self._own_instance = True
            self.instance = MQClientInstance(cfg)
        else:
            self._own_instance = False
            self.instance = instance
        self.send_msg_timeout = send_msg_timeout
        self.retry_times_when_send_failed = retry_times_when_send_failed
        self.retry_times_when_send_async_failed = retry_times_when_send_async_failed
        self.compress_msg_body_over_howmuch = compress_msg_body_over_howmuch
        self.max_message_size = max_message_size
        self.send_latency_fault_enable = send_latency_fault_enable
        self.default_topic_queue_nums = default_topic_queue_nums
        self.create_topic_key = create_topic_key
        self.fault = LatencyFaultTolerance(anyio.current_time)
        self._publish: dict[str, TopicPublishInfo] = {}
        self._fallback_topics: set[str] = set()  # topics sent with TBW102's route until theirs shows up
        self._uniq = _uniq_key_generator(self.instance.config.client_ip)
        self._started = False

    # -- lifecycle -------------------------------------------------------------------------------------------------

    @property
    def group(self) -> str:
        return self._group

    async def __aenter__(self) -> Self:
        if self._own_instance:
            await self.instance.__aenter__()
        try:
            self.instance.register_producer(self)
        except BaseException:
            if self._own_instance:
                await self.instance.__aexit__(None, None, None)
            raise
        self._started = True
        await self.instance.send_heartbeat_to_all_brokers()
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self._started = False
        try:
            with anyio.CancelScope(shield=True):
                await self.instance.unregister(producer_group=self._group)
        finally:
            if self._own_instance:
                await self.instance.__aexit__(exc_type, exc, tb)

    def published_topics(self) -> set[str]:
        return set(self._publish)

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
        one attempt (ordered messages must not move); otherwise up to ``1 + retry_times_when_send_failed`` attempts."""
        self._check_started()
        header, body, uniq = self._prepare(msg)
        info = await self.publish_info(msg.topic)
        timeout = self.send_msg_timeout if timeout is None else timeout
        if queue is not None or selector is not None:
            target = queue if queue is not None else selector(list(info.message_queues), msg, arg)  # type: ignore[misc]
            return await self._send_to(target, header, body, uniq, timeout)
        return await self._send_with_retries(info, header, body, uniq, timeout, self.retry_times_when_send_failed)

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
        """Start a send in the background; ``callback`` gets the :class:`SendResult` or the exception (it may be a
        coroutine function). Validation errors raise here, synchronously."""
        self._check_started()
        self._prepare(msg)
        self.instance.task_group.start_soon(self._send_then_call, msg, callback, queue, selector, arg, timeout)

    async def _send_then_call(
        self,
        msg: Message,
        callback: SendCallback,
        queue: MessageQueue | None,
        selector: MessageQueueSelector | None,
        arg: object,
        timeout: float | None,
    ) -> None:
        outcome: SendResult | Exception
        try:
            outcome = await self.send(msg, queue=queue, selector=selector, arg=arg, timeout=timeout)
        except Exception as exc:
            outcome = exc
        try:
            result = callback(outcome)
            if inspect.isawaitable(result):
                await result
        except Exception:
            log.exception("send callback %r failed", callback)

    async def send_oneway(
        self,
        msg: Message,
        *,
        queue: MessageQueue | None = None,
        selector: MessageQueueSelector | None = None,
        arg: object = None,
    ) -> None:
        """Write the message and return without waiting for the broker (no retry, no result)."""
        self._check_started()
        header, body, _ = self._prepare(msg)
        info = await self.publish_info(msg.topic)
        if queue is None:
            queue = selector(list(info.message_queues), msg, arg) if selector else select_one_message_queue(info, None)
        addr = await self._broker_address(queue)
        await api.send_message_oneway(self.instance.remoting, addr, self._header_for(header, queue), body)

    async def send_batch(self, msgs: Sequence[Message], *, timeout: float | None = None) -> list[SendResult]:
        """Send messages of one topic as SEND_BATCH_MESSAGE requests, split so that each body stays within
        ``max_message_size``. Returns one result per request (its ``msg_id`` joins the messages' ids by commas).
        Batches may not carry delay levels or go to retry topics (MessageValidationError)."""
        self._check_started()
        if not msgs:
            raise MessageValidationError("an empty batch cannot be sent")
        topic = msgs[0].topic
        entries: list[BatchEntry] = []
        ids: list[str] = []
        for m in msgs:
            if m.topic != topic:
                raise MessageValidationError("every message of a batch must have the same topic")
            if m.delay_level > 0:
                raise MessageValidationError("batch messages cannot have a delay level")
            if topic.startswith("%RETRY%"):
                raise MessageValidationError("batch messages cannot be sent to a retry topic")
            self._validate(m)
            uniq = self._uniq.next_id()
            props = m.all_properties()
            props[PROPERTY_UNIQ_KEY] = uniq
            entries.append(BatchEntry(bytes(m.body), encode_properties(props), m.flag))
            ids.append(uniq)
        info = await self.publish_info(topic)
        timeout = self.send_msg_timeout if timeout is None else timeout
        results: list[SendResult] = []
        start = 0
        for chunk in split_batch(entries, self.max_message_size):
            chunk_ids = ",".join(ids[start : start + len(chunk)])
            start += len(chunk)
            header = SendMessageRequestHeaderV2(
                a=self._group,
                b=topic,
                c=self.create_topic_key,
                d=self.default_topic_queue_nums,
                e=0,
                f=0,
                g=int(time.time() * 1000),
                h=0,
                i=encode_properties({PROPERTY_WAIT: "true"}),
                j=0,
                m=True,
            )
            results.append(
                await self._send_with_retries(
                    info, header, encode_batch_body(chunk), chunk_ids, timeout, self.retry_times_when_send_failed
                )
            )
        return results

    # -- internals -------------------------------------------------------------------------------------------------

    def _check_started(self) -> None:
        if not self._started:
            raise ClientStateError(f"producer {self._group!r} is not started (use `async with`)")

    def _validate(self, msg: Message) -> None:
        if not msg.topic:
            raise MessageValidationError("the message topic is empty")
        if not msg.body:
            raise MessageValidationError("the message body is empty")
        if len(msg.body) > self.max_message_size:
            raise MessageValidationError(
                f"the message body is {len(msg.body)} bytes, more than the {self.max_message_size}-byte limit"
            )
        if not msg.delay_level >= 0:
            raise MessageValidationError(f"delay level {msg.delay_level} is negative")

    def _prepare(self, msg: Message) -> tuple[SendMessageRequestHeaderV2, bytes, str]:
        """The V2 header (queue id to fill in), the body (compressed when large) and the UNIQ_KEY."""
        self._validate(msg)
        uniq = self._uniq.next_id()
        props = msg.all_properties()
        props[PROPERTY_UNIQ_KEY] = uniq
        body = bytes(msg.body)
        sys_flag = 0
        if len(body) >= self.compress_msg_body_over_howmuch:
            compressed = zlib.compress(body, 5)
            if len(compressed) < len(body):
                body = compressed
                sys_flag |= SYSFLAG_COMPRESSED | COMPRESSION_ZLIB
        reconsume = props.pop("RECONSUME_TIME", None)
        max_reconsume = props.pop("MAX_RECONSUME_TIMES", None)
        header = SendMessageRequestHeaderV2(
            a=self._group,
            b=msg.topic,
            c=self.create_topic_key,
            d=self.default_topic_queue_nums,
            e=0,
            f=sys_flag,
            g=int(time.time() * 1000),
            h=msg.flag,
            i=encode_properties(props),
            j=int(reconsume) if reconsume else 0,
            l=int(max_reconsume) if max_reconsume else None,
        )
        return header, body, uniq

    async def publish_info(self, topic: str) -> TopicPublishInfo:
        """The writable queues of ``topic`` (route fetched when unknown). Raises TopicRouteNotFoundError."""
        try:
            route = await self.instance.route(topic)
        except TopicRouteNotFoundError:
            route = await self._default_topic_route(topic)
        info = self._publish.get(topic)
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
        ``create_topic_key`` (TBW102), at most ``default_topic_queue_nums`` queues per broker; the broker then creates
        it. Raises the original TopicRouteNotFoundError for ``topic`` when TBW102 has no route either."""
        try:
            default = await self.instance.route(self.create_topic_key)
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
        route = attrs.evolve(default, queue_datas=queues)
        self.instance.routes.setdefault(topic, route)
        self._fallback_topics.add(topic)
        return route

    async def _broker_address(self, mq: MessageQueue) -> str:
        addr = self.instance.find_broker_address(mq.broker_name)
        if addr is None:
            await self.instance.fetch_route(mq.topic)
            addr = self.instance.find_broker_address(mq.broker_name)
        if addr is None:
            raise MQBrokerError(ResponseCode.SYSTEM_ERROR, f"broker {mq.broker_name} has no master address")
        return addr

    @staticmethod
    def _header_for(header: SendMessageRequestHeaderV2, mq: MessageQueue) -> SendMessageRequestHeaderV2:
        return attrs.evolve(header, e=mq.queue_id, n=mq.broker_name)

    async def _send_to(
        self, mq: MessageQueue, header: SendMessageRequestHeaderV2, body: bytes, uniq: str, timeout: float
    ) -> SendResult:
        addr = await self._broker_address(mq)
        return await api.send_message(
            self.instance.remoting, addr, mq.broker_name, self._header_for(header, mq), body, timeout, uniq_id=uniq
        )

    async def _send_with_retries(
        self,
        info: TopicPublishInfo,
        header: SendMessageRequestHeaderV2,
        body: bytes,
        uniq: str,
        timeout: float,
        retries: int,
    ) -> SendResult:
        attempts: list[tuple[str, BaseException]] = []
        last_broker: str | None = None
        fault = self.fault if self.send_latency_fault_enable else None
        for _ in range(1 + max(0, retries)):
            mq = select_one_message_queue(info, last_broker, fault)
            started = anyio.current_time()
            try:
                result = await self._send_to(mq, header, body, uniq, timeout)
            except (RemotingError, MQBrokerError) as exc:
                if isinstance(exc, MQBrokerError) and exc.code not in RETRY_RESPONSE_CODES:
                    raise
                if fault is not None:
                    fault.report(mq.broker_name, int((anyio.current_time() - started) * 1000), failed=True)
                attempts.append((mq.broker_name, exc))
                last_broker = mq.broker_name
                if header.b in self._fallback_topics:
                    # The TBW102 stand-in route may be wrong for a topic that exists by now: ask again.
                    self._fallback_topics.discard(header.b)
                    self.instance.routes.pop(header.b, None)
                    with contextlib.suppress(TopicRouteNotFoundError):
                        info = await self.publish_info(header.b)
                log.info("send to %s failed (%s), %d attempt(s) so far", mq, exc, len(attempts))
                continue
            if fault is not None:
                fault.report(mq.broker_name, int((anyio.current_time() - started) * 1000), failed=False)
            return result
        raise SendFailedError(header.b, attempts)
