"""Consume services of the push consumer (Java's ``ConsumeMessageConcurrentlyService`` and
``ConsumeMessageOrderlyService``).

Concurrent: every pulled batch is split into listener calls of ``consume_message_batch_max_size`` messages, each a task
under the consumer's capacity limiter. A RECONSUME_LATER (or an exception) in CLUSTERING sends each message back to the
broker (CONSUMER_SEND_MSG_BACK at the context's ``delay_level_when_next_consume``: by default 0, the broker picks the
delay; -1 the DLQ), and so does a CONSUME_SUCCESS for the messages after the context's ``ack_index``; when that fails
the message is sent to ``%RETRY%<group>`` as a new message (without ``TRAN_MSG``, as Java's ``sendMessageBack``), and
when that fails too it is consumed again locally 5 s later with its ``reconsume_times`` raised by one. In BROADCASTING
failed messages are dropped with a warning, as in Java. The offset to commit is always the smallest offset still in
flight, so a slow message holds the committed offset back instead of being skipped.

Consume timeout (concurrent only): every ``consume_timeout`` minutes (Java's ``cleanExpireMsg``) a message at the head
of its queue whose listener call started more than ``consume_timeout`` ago is sent back at delay level 3 (BROADCASTING:
dropped) and removed, so the committed offset moves past it. A call counts from when it holds a slot of
``consume_thread_min`` (Java: from when a consume thread takes the request); a head message still waiting for a slot
has not started, and the clean-up of its queue stops there. The call is not cancelled: when it ends its outcome changes
nothing, except that a failure sends the message back once more, as in Java.

Orderly: one task per queue at a time takes messages in offset order, only while the broker lock on the queue is held
(CLUSTERING), checked again once the call holds its consume slot; a lock the broker refused is asked for again 3 s
later. SUSPEND_CURRENT_QUEUE_A_MOMENT raises each message's
``reconsume_times`` (the listener sees 0, 1, 2, ...), puts the batch back and waits ``suspend_current_queue_time`` (or
the context's ``suspend_current_queue_time_ms``; 10 ms to 30 s). With the default ``max_reconsume_times`` (-1) that goes
on for ever; with a limit, a message that reached it is sent to ``%RETRY%<group>`` as a copy carrying its count (the
broker moves it to the DLQ) and skipped, as Java's ``ConsumeMessageOrderlyService.checkReconsumeTimes`` (BROADCASTING
too). A context without ``auto_commit`` commits only on COMMIT and hands every uncommitted message out again on
ROLLBACK. A queue has one listener call at a time, across process queues and restarts: a call a stop abandoned keeps
the queue until its plain listener's thread returns.

Statistics (:mod:`client.consumer.stats`, as Java's two services): every listener call that started records its
time (from when it held its consume slot) as consume RT; concurrent: a call whose queue is still owned then records
its done messages as consume OK TPS (CONSUME_SUCCESS only) and the ones to send back as consume failed TPS (0 too);
orderly: a call records all its messages as OK (SUCCESS) or failed (SUSPEND_CURRENT_QUEUE_A_MOMENT, given up or
not), its queue dropped meanwhile or not.

Trace (``enable_msg_trace``): a listener call writes its SubBefore records when it holds its consume slot and its
SubAfter records when it returned, as Java's hook runs on the consume thread; a call skipped before it started (its
queue dropped meanwhile) writes neither.

``max_reconsume_times`` -1 means 16 for concurrent consumption (also what a send-back tells the broker) and no limit
for orderly consumption, as Java's two ``getMaxReconsumeTimes``.
"""

from __future__ import annotations

import logging
import time
from typing import TYPE_CHECKING, Final

import anyio
import attrs

from client import api
from client.async_send import RETRY_RESPONSE_CODES
from client.budget import time_left
from client.consumer.hooks import CONSUME_CONTEXT_TYPE, ConsumeMessageContext, run_after, run_before
from client.consumer.listener import (
    ConsumeConcurrentlyContext,
    ConsumeConcurrentlyStatus,
    ConsumeOrderlyContext,
    ConsumeOrderlyStatus,
    ConsumeStatus,
    ListenerThread,
    call_listener,
)
from client.consumer.process_queue import ProcessQueue
from client.consumer.subscription import retry_topic
from client.errors import MQBrokerError, MQClientError, SendFailedError, TopicRouteNotFoundError
from client.instance import CLIENT_INNER_PRODUCER_GROUP, MQClientInstance
from client.message import (
    PROPERTY_CONSUME_START_TIME,
    PROPERTY_MAX_OFFSET,
    PROPERTY_MAX_RECONSUME_TIMES,
    PROPERTY_MIN_OFFSET,
    PROPERTY_ORIGIN_MESSAGE_ID,
    PROPERTY_RECONSUME_TIME,
    PROPERTY_RETRY_TOPIC,
    PROPERTY_TRANSACTION_PREPARED,
    uniq_msg_id,
)
from client.namespace import unwrap
from client.route import publish_info
from client.selector import select_one_message_queue
from remoting.codec.bodies import MessageModel, MessageQueue
from remoting.codec.headers import SendMessageRequestHeaderV2
from remoting.codec.message import SYSFLAG_COMPRESSED, MessageExt
from remoting.codec.message_properties import PROPERTY_DELAY, encode_properties
from remoting.errors import RemotingError

if TYPE_CHECKING:
    from client.consumer.push import PushConsumer
    from client.trace.dispatcher import ConsumeTrace

log = logging.getLogger(__name__)

#: Delay before a message whose send-back failed is consumed again locally (Java: 5 s).
LOCAL_RETRY_DELAY = 5.0
#: Wait before retrying to take an orderly queue whose lock the broker refused: 3 s, as
#: ``client/src/main/java/org/apache/rocketmq/client/impl/consumer/ConsumeMessageOrderlyService.java``'s
#: ``tryLockLaterAndReconsume`` resubmits the queue 3 s later.
ORDERLY_LOCK_RETRY_DELAY = 3.0
#: At most this many timed-out head messages are sent back per queue and clean-up (Java's ``cleanExpiredMsg``: 16).
CLEAN_EXPIRED_MAX = 16
#: Delay level of a message sent back because its listener call overran ``consume_timeout`` (Java: 3).
EXPIRED_DELAY_LEVEL = 3
#: What ``max_reconsume_times=-1`` means for concurrent consumption and send-backs (Java: 16).
DEFAULT_MAX_RECONSUME_TIMES = 16
#: How long CONSUMER_SEND_MSG_BACK may take before the consumer sends a retry copy itself: 5 s whatever the client's
#: ``rpc_timeout``, as ``client/src/main/java/org/apache/rocketmq/client/impl/consumer/DefaultMQPushConsumerImpl.java``
#: ``sendMessageBack`` passes 5000 ms (a copy sent after a late but stored send-back is a second retry).
SEND_BACK_TIMEOUT = 5.0
#: The inner producer's ``retryTimesWhenSendFailed`` (DefaultMQProducer's default, 2): a retry copy's further attempts.
INNER_PRODUCER_RETRIES: Final = 2


def reset_retry_topic(msg: MessageExt, group: str, namespace: str | None = None) -> MessageExt:
    """A message pulled from ``%RETRY%<group>`` shows its original topic to the listener, as in Java; with a
    ``namespace``, its topic without it (Java's ``resetRetryAndNamespace``)."""
    original = msg.properties.get(PROPERTY_RETRY_TOPIC)
    topic = original if original and msg.topic == retry_topic(group) else msg.topic
    if namespace:
        topic = unwrap(namespace, topic)
    return msg if topic == msg.topic else attrs.evolve(msg, topic=topic)


#: The inner producer's ``compressMsgBodyOverHowmuch`` (DefaultMQProducer's default, 4 KiB).
_INNER_COMPRESS_OVER: Final = 4 * 1024

#: Java's ``ConsumeReturnType`` ordinals, the SubAfter record's contextCode.
RETURN_SUCCESS: Final = 0
RETURN_TIME_OUT: Final = 1
RETURN_EXCEPTION: Final = 2
RETURN_NULL: Final = 3
RETURN_FAILED: Final = 4


class _ListenerTrace:
    """The trace of one listener call, written on the call's own path as Java's ConsumeMessageTraceHookImpl runs on the
    consume thread: SubBefore once the call holds its consume slot (:meth:`begin`, the ``started`` callback), SubAfter
    when it returned (:meth:`end`). A call skipped before it started writes neither.

    The SubAfter's contextCode is the call's ``ConsumeReturnType``, decided in Java's order
    (``client/src/main/java/org/apache/rocketmq/client/impl/consumer/ConsumeMessageConcurrentlyService.java`` and
    ``ConsumeMessageOrderlyService.java``): EXCEPTION when the listener raised (:meth:`raised`), RETURNNULL when it
    returned ``None`` (:meth:`returned_none`), else TIME_OUT when the
    call took ``consume_timeout`` or longer, else FAILED for RECONSUME_LATER or SUSPEND_CURRENT_QUEUE_A_MOMENT, else
    SUCCESS (an orderly ROLLBACK too, though its ``success`` is false)."""

    def __init__(self, consumer: PushConsumer, mq: MessageQueue, msgs: list[MessageExt]) -> None:
        self.consumer = consumer
        self.mq = mq
        self.msgs = msgs
        self.begun: ConsumeTrace | None = None
        self.hooked: ConsumeMessageContext | None = None
        self._started = 0.0
        self._raised = False
        self._returned_none = False

    def begin(self) -> None:
        c = self.consumer
        if c.trace is not None or c.consume_hooks:
            self._started = anyio.current_time()
        if c.trace is not None:
            self.begun = c.trace.consume_before(unwrap(c.namespace, c.group), self.msgs)
        if c.consume_hooks:
            self.hooked = ConsumeMessageContext(c.group, self.mq, self.msgs, namespace=c.namespace)
            run_before(c.consume_hooks, self.hooked)

    def raised(self) -> None:
        self._raised = True

    def returned_none(self) -> None:
        self._returned_none = True

    def _return_code(self, status: ConsumeStatus) -> int:
        if self._raised:
            return RETURN_EXCEPTION
        if self._returned_none:
            return RETURN_NULL
        if anyio.current_time() - self._started >= self.consumer.consume_timeout * 60:
            return RETURN_TIME_OUT
        return RETURN_FAILED if status in _FAILED_STATUSES else RETURN_SUCCESS

    def end(self, success: bool, status: ConsumeConcurrentlyStatus | ConsumeOrderlyStatus) -> None:
        """``success`` is the trace's; the hooks' is Java's: CONSUME_SUCCESS or SUCCESS (the status after a raising
        listener's default, or a ``None`` one's), with the ``ConsumeReturnType`` name under ``ConsumeContextType``."""
        c = self.consumer
        if self.begun is not None and c.trace is not None:
            c.trace.consume_after(self.begun, success, self._return_code(status))
        context = self.hooked
        if context is not None:
            ok = status in _HOOK_SUCCESS
            context.props[CONSUME_CONTEXT_TYPE] = _RETURN_TYPE_NAMES[self._return_code(status)]
            context.status, context.success = status.name, ok
            run_after(c.consume_hooks, context)


#: The statuses a consume hook's context calls a success (Java's ``setSuccess``: CONSUME_SUCCESS; SUCCESS or COMMIT).
_HOOK_SUCCESS: Final = (
    ConsumeConcurrentlyStatus.CONSUME_SUCCESS,
    ConsumeOrderlyStatus.SUCCESS,
    ConsumeOrderlyStatus.COMMIT,
)

#: The statuses whose ConsumeReturnType is FAILED: the others (COMMIT, ROLLBACK) stay SUCCESS, as
#: ConsumeMessageOrderlyService.ConsumeRequest.run starts at SUCCESS and sets FAILED for a suspension alone.
_FAILED_STATUSES: Final = (
    ConsumeConcurrentlyStatus.RECONSUME_LATER,
    ConsumeOrderlyStatus.SUSPEND_CURRENT_QUEUE_A_MOMENT,
)

_RETURN_TYPE_NAMES: Final = {
    RETURN_SUCCESS: "SUCCESS",
    RETURN_TIME_OUT: "TIME_OUT",
    RETURN_EXCEPTION: "EXCEPTION",
    RETURN_NULL: "RETURNNULL",
    RETURN_FAILED: "FAILED",
}


def send_back_max_reconsume_times(consumer: PushConsumer) -> int:
    """The maximum a send-back tells the broker (Java's ``DefaultMQPushConsumerImpl.getMaxReconsumeTimes``)."""
    configured = consumer.max_reconsume_times
    return DEFAULT_MAX_RECONSUME_TIMES if configured == -1 else configured


def _counted_again(msg: MessageExt) -> MessageExt:
    """``msg`` with ``reconsume_times`` one higher (Java's ``msg.setReconsumeTimes(+1)``; ours is frozen: a copy)."""
    return attrs.evolve(msg, reconsume_times=msg.reconsume_times + 1)


def _stamp_start(msgs: list[MessageExt]) -> None:
    now = str(time.time_ns() // 1_000_000)
    for msg in msgs:
        msg.properties[PROPERTY_CONSUME_START_TIME] = now


def retry_copy_properties(msg: MessageExt, origin: str) -> dict[str, str]:
    """The properties of the copy a failed send-back sends to ``%RETRY%<group>`` itself (Java's
    ``DefaultMQPushConsumerImpl.sendMessageBack``): ``msg``'s, with ``RETRY_TOPIC`` (when absent), ``ORIGIN_MESSAGE_ID``
    and delay level 3 + reconsumeTimes, without what a pull adds, without the counts the header carries
    (``RECONSUME_TIME``, which Java sets to the new count and its producer moves into the header, and
    ``MAX_RECONSUME_TIMES``) and without ``TRAN_MSG`` (a committed transactional message keeps it; the copy must not be
    a half message)."""
    props = dict(msg.properties)
    props.setdefault(PROPERTY_RETRY_TOPIC, msg.topic)
    props[PROPERTY_ORIGIN_MESSAGE_ID] = origin
    props[PROPERTY_DELAY] = str(3 + msg.reconsume_times)
    for transient in _NOT_IN_A_RETRY_COPY:
        props.pop(transient, None)
    return props


_NOT_IN_A_RETRY_COPY: Final = (
    PROPERTY_RECONSUME_TIME,
    PROPERTY_MAX_RECONSUME_TIMES,
    PROPERTY_MIN_OFFSET,
    PROPERTY_MAX_OFFSET,
    PROPERTY_CONSUME_START_TIME,
    PROPERTY_TRANSACTION_PREPARED,
)


async def send_back(consumer: PushConsumer, msg: MessageExt, broker_name: str | None, delay_level: int = 0) -> bool:
    """:func:`send_back_or_raise`, a failure logged: returns whether either way worked."""
    try:
        await send_back_or_raise(consumer, msg, broker_name, delay_level)
        return True
    except Exception as exc:
        log.warning("sending %s to the retry topic failed too: %s", msg.msg_id, exc)
        return False


async def send_back_or_raise(
    consumer: PushConsumer, msg: MessageExt, broker_name: str | None, delay_level: int
) -> None:
    """Return ``msg`` to the broker for a later retry (CONSUMER_SEND_MSG_BACK naming the original topic, the client
    msgId and ``broker_name``, as ``client/src/main/java/org/apache/rocketmq/client/impl/MQClientAPIImpl.java``
    ``consumerSendMessageBack``), to the master of ``broker_name`` or, without one (or its address), to the host that
    stored ``msg`` (``DefaultMQPushConsumerImpl.sendMessageBack``); falls back to sending a copy to the retry topic,
    whose failure is raised."""
    instance = consumer.instance
    addr = (instance.find_broker_address(broker_name) if broker_name else None) or (
        f"{msg.store_host[0]}:{msg.store_host[1]}"
    )
    max_times = send_back_max_reconsume_times(consumer)
    try:
        await api.consumer_send_msg_back(
            instance.remoting,
            addr,
            msg,
            consumer.group,
            delay_level,
            max_times,
            SEND_BACK_TIMEOUT,
            uniq_msg_id(msg),
            origin_topic=reset_retry_topic(msg, consumer.group).topic,  # Java resets it before the listener, in place
            broker_name=broker_name,
        )
        return
    except Exception as exc:
        log.info("send-back of %s failed (%s); sending it to the retry topic instead", msg.msg_id, exc)
    await send_retry_copy(consumer, msg, msg.reconsume_times + 1, max_times)


async def send_retry_copy(consumer: PushConsumer, msg: MessageExt, reconsume_times: int, max_times: int) -> None:
    """Send a copy of ``msg`` (:func:`retry_copy_properties`) to ``%RETRY%<group>`` as a new message, born now, whose
    header carries ``reconsume_times`` and ``max_times``: the broker's send path moves it to ``%DLQ%<group>`` when
    ``reconsume_times >= max_times``. Java's consumers do so from their client's inner producer
    (``DefaultMQPushConsumerImpl.sendMessageBack`` after a failed send-back, ``ConsumeMessageOrderlyService
    .sendMessageBack`` for a message given up), so the header's producer group is :data:`CLIENT_INNER_PRODUCER_GROUP`,
    and as that producer's ``send(msg)`` (client/src/main/java/org/apache/rocketmq/client/impl/producer/
    DefaultMQProducerImpl.java ``sendDefaultImpl``, SYNC): up to 1 + :data:`INNER_PRODUCER_RETRIES` attempts within
    ``rpc_timeout`` (its ``sendMsgTimeout``), each on a queue of another broker than the one the last attempt failed
    on, after a transport error, a broker without a master address or a refusal of ``retryResponseCodes``; any other
    refusal is raised at once. Raises when it was not stored."""
    instance = consumer.instance
    origin = msg.properties.get(PROPERTY_ORIGIN_MESSAGE_ID) or uniq_msg_id(msg)
    topic = retry_topic(consumer.group)
    started = anyio.current_time()
    info = publish_info(topic, await instance.route(topic))
    if not info.ok:
        raise TopicRouteNotFoundError(topic, instance.config.namesrv_addr, "the route has no writable queue")
    body, sys_flag = _inner_producer_body(instance, msg.body)
    properties = encode_properties(retry_copy_properties(msg, origin))
    attempts: list[tuple[str, BaseException]] = []
    last_broker: str | None = None
    for _ in range(1 + INNER_PRODUCER_RETRIES):
        budget = time_left(instance.config.rpc_timeout, started)
        if budget <= 0:
            raise SendFailedError(topic, attempts, timed_out=True)
        mq = select_one_message_queue(info, last_broker)
        last_broker = mq.broker_name
        target = instance.find_broker_address(mq.broker_name)
        if target is None:
            attempts.append((mq.broker_name, MQClientError(f"no master address for broker {mq.broker_name}")))
            continue
        header = SendMessageRequestHeaderV2(
            a=CLIENT_INNER_PRODUCER_GROUP,  # the inner producer's send, not the consumer group
            b=topic,
            c="TBW102",
            d=4,
            e=mq.queue_id,
            f=sys_flag,
            g=_now_ms(),  # the copy's own birth, as the inner producer's sendKernelImpl stamps it
            h=msg.flag,
            i=properties,
            j=reconsume_times,
            l=max_times,
        )
        try:
            await api.send_message(
                instance.remoting,
                target,
                mq.broker_name,
                header.to_ext_fields(),
                body,
                budget,
                uniq_id=uniq_msg_id(msg),
            )
            return
        except MQBrokerError as exc:
            if exc.code not in RETRY_RESPONSE_CODES:
                raise
            attempts.append((mq.broker_name, exc))
        except RemotingError as exc:
            attempts.append((mq.broker_name, exc))
        log.info("retry copy of %s to %s failed: %s", msg.msg_id, mq, attempts[-1][1])
    raise SendFailedError(topic, attempts)


def _now_ms() -> int:
    """The client's wall clock in ms (a sent message's born timestamp)."""
    return time.time_ns() // 1_000_000


def _inner_producer_body(instance: MQClientInstance, body: bytes) -> tuple[bytes, int]:
    """The body and sysflag the client's inner producer (a DefaultMQProducer with its defaults) sends ``body`` with:
    compressed from 4 KiB on (kept even when larger: ``tryToCompressMessage``) by the instance's codec at its level
    (zlib at 5 unless the environment says otherwise: ``rocketmq.message.compressType`` / ``compressLevel``),
    COMPRESSED and the type bits, as client/src/main/java/org/apache/rocketmq/client/impl/producer/
    DefaultMQProducerImpl.java ``sendKernelImpl``."""
    if len(body) >= _INNER_COMPRESS_OVER:
        type_flag, compress = instance.inner_compressor
        return compress(bytes(body), instance.inner_compress_level), SYSFLAG_COMPRESSED | type_flag
    return bytes(body), 0


def _failed(msgs: list[MessageExt], status: ConsumeStatus, context: ConsumeConcurrentlyContext) -> list[MessageExt]:
    """The messages of a concurrent listener call to send back: after ``context.ack_index`` for CONSUME_SUCCESS
    (none by default), all of them otherwise
    (``client/src/main/java/org/apache/rocketmq/client/impl/consumer/ConsumeMessageConcurrentlyService.java``'s
    ``processConsumeResult``)."""
    if status is not ConsumeConcurrentlyStatus.CONSUME_SUCCESS:
        return msgs
    return msgs[max(0, context.ack_index + 1) :]


class ConcurrentConsumeService:
    """See the module docstring."""

    def __init__(self, consumer: PushConsumer) -> None:
        self.consumer = consumer

    def submit(self, mq: MessageQueue, pq: ProcessQueue, msgs: list[MessageExt]) -> None:
        size = max(1, self.consumer.consume_message_batch_max_size)
        for i in range(0, len(msgs), size):
            self.consumer.consume_tasks.start_soon(self._consume, mq, pq, msgs[i : i + size])

    async def _consume(self, mq: MessageQueue, pq: ProcessQueue, msgs: list[MessageExt]) -> None:
        c = self.consumer
        if pq.dropped:  # rebalanced away or reset: the new owner, or the new offset, has these (Java's ConsumeRequest)
            return
        retry = retry_topic(c.group)
        # Only messages of the retry topic can change: no per-message call for the others.
        ns = c.namespace
        shown = [reset_retry_topic(m, c.group, ns) if ns or m.topic == retry else m for m in msgs]

        trace = _ListenerTrace(c, mq, shown)
        begun: float | None = None

        def started() -> None:  # a consume slot is held: the call starts now, not when it began waiting for one
            nonlocal begun
            _stamp_start(shown)
            pq.mark_consume_started(msgs, begun := anyio.current_time())
            trace.begin()

        context = ConsumeConcurrentlyContext(mq)
        status = await call_listener(
            c.bound_listener(context),
            shown,
            c.limiter,
            ConsumeConcurrentlyStatus.RECONSUME_LATER,
            lambda: pq.dropped,
            started,
            raised=trace.raised,
            returned_none=trace.returned_none,
        )
        trace.end(status is ConsumeConcurrentlyStatus.CONSUME_SUCCESS, status)
        pq.last_consume_time = now = anyio.current_time()
        stats = c.instance.consumer_stats.topic(c.group, mq.topic, now)
        if begun is not None:  # else not called: its queue was dropped before the call held a slot
            stats.consumed(now, round((now - begun) * 1000))
        if pq.dropped:
            return
        retry_locally: list[MessageExt] = []
        failed = _failed(msgs, status, context)
        if status is ConsumeConcurrentlyStatus.CONSUME_SUCCESS:
            stats.consumed_ok(now, len(msgs) - len(failed))
        stats.consumed_failed(now, len(failed))
        if failed:
            if c.message_model is MessageModel.BROADCASTING:
                log.warning("BROADCASTING: %d failed message(s) of %s dropped", len(failed), mq)
            else:
                delay_level = context.delay_level_when_next_consume
                for msg in failed:
                    if not await send_back(c, msg, mq.broker_name, delay_level):
                        retry_locally.append(msg)
        done = [m for m in msgs if m not in retry_locally] if retry_locally else msgs
        offset = pq.remove_messages(done)
        if offset >= 0 and not pq.dropped:
            c.offset_store.update(mq, offset, increase_only=True)
        if retry_locally and not c.stopping:  # stopping: left in the queue, the committed offset stays before them
            again = [_counted_again(m) for m in retry_locally]
            pq.replace_messages(again)  # a timed-out one is sent back with its new count (Java counts in place)
            c.background_tasks.start_soon(self._retry_later, mq, pq, again)

    async def _retry_later(self, mq: MessageQueue, pq: ProcessQueue, msgs: list[MessageExt]) -> None:
        await anyio.sleep(LOCAL_RETRY_DELAY)
        if not pq.dropped and not self.consumer.stopping:
            self.submit(mq, pq, msgs)

    async def clean_expired_loop(self) -> None:
        """Every ``consume_timeout`` minutes, :meth:`_clean_expired` on every owned queue; runs until cancelled."""
        c = self.consumer
        while True:
            await anyio.sleep(c.consume_timeout * 60)
            for mq, pq in list(c.rebalance.process_queues.items()):
                await self._clean_expired(mq, pq)

    async def _clean_expired(self, mq: MessageQueue, pq: ProcessQueue) -> None:
        """Send back and remove, one after the other, the head messages whose listener call overran
        ``consume_timeout``; a failed send-back is tried again (the head stays), up to :data:`CLEAN_EXPIRED_MAX`."""
        c = self.consumer
        for _ in range(CLEAN_EXPIRED_MAX):
            msg = pq.expired_head(anyio.current_time(), c.consume_timeout * 60)
            if msg is None or pq.dropped:
                return
            if c.message_model is MessageModel.BROADCASTING:
                log.warning("BROADCASTING: message %s of %s overran the consume timeout, dropped", msg.msg_id, mq)
            elif not await send_back(c, msg, mq.broker_name, EXPIRED_DELAY_LEVEL):
                continue
            offset = pq.remove_messages([msg])
            if offset >= 0 and not pq.dropped:
                c.offset_store.update(mq, offset, increase_only=True)


def _suspension(context_ms: int, default: float) -> float:
    """Seconds an orderly queue waits after a suspension: its context's time (-1: the consumer's ``default``), within
    10 ms and 30 s (``ConsumeMessageOrderlyService.submitConsumeRequestLater``)."""
    seconds = default if context_ms == -1 else context_ms / 1000
    return min(max(seconds, 0.01), 30.0)


class _QueueTurn:
    """The right to call the listener on one orderly queue (Java's ProcessQueue ``consumeLock``), held around each call
    and its commit, whichever process queue (a queue taken again) or run of the consumer (a restart) the call is for.
    A call a stop cancelled while its plain listener's thread ran leaves that thread the turn: the next holder waits
    until it returned."""

    def __init__(self) -> None:
        self._lock = anyio.Lock()
        self._abandoned: ListenerThread | None = None

    async def __aenter__(self) -> None:
        await self._lock.acquire()
        try:
            if self._abandoned is not None:
                await self._abandoned.wait()
                self._abandoned = None
        except BaseException:
            self._lock.release()
            raise

    async def __aexit__(self, *exc_info: object) -> None:
        self._lock.release()

    def abandoned(self, thread: ListenerThread) -> None:
        """The holder's listener call was abandoned while ``thread`` runs it."""
        self._abandoned = thread

    @property
    def taken(self) -> bool:
        """Whether a listener call runs on the queue (an abandoned thread's included)."""
        return self._lock.locked() or (self._abandoned is not None and self._abandoned.running)


class OrderlyConsumeService:
    """See the module docstring."""

    def __init__(self, consumer: PushConsumer) -> None:
        self.consumer = consumer
        #: the process queues with a consume task (by identity: a queue taken again gets a new one, which must get its
        #: own task even while the old one's listener call ends)
        self._running: set[ProcessQueue] = set()
        #: per queue, what rebalance waits for before it unlocks the queue (one call at a time on it)
        self._turns: dict[MessageQueue, _QueueTurn] = {}
        #: the waits under way of suspended queues and queues whose lock was refused, which a stop ends
        self._pauses: set[anyio.CancelScope] = set()

    async def _pause(self, seconds: float) -> None:
        """Wait ``seconds`` before a queue is consumed again, or until the consumer stops (:meth:`end_pauses`): as
        ``client/src/main/java/org/apache/rocketmq/client/impl/consumer/ConsumeMessageOrderlyService.java``'s
        ``shutdown`` shuts the scheduler of those resubmits and waits only for running consume requests."""
        if self.consumer.stopping:
            return
        with anyio.CancelScope() as scope:
            self._pauses.add(scope)
            try:
                await anyio.sleep(seconds)
            finally:
                self._pauses.discard(scope)

    def end_pauses(self) -> None:
        """The consumer stops: the queues waiting to be consumed again wait no more (their tasks then end)."""
        for scope in list(self._pauses):
            scope.cancel()

    def submit(self, mq: MessageQueue, pq: ProcessQueue, msgs: list[MessageExt]) -> None:
        if pq not in self._running:
            self._running.add(pq)
            self.consumer.consume_tasks.start_soon(self._consume_queue, mq, pq)

    async def idle(self, mq: MessageQueue, timeout: float) -> bool:
        """Whether no listener call runs on ``mq``, waiting up to ``timeout`` for the one that does (Java's
        ``consumeLock.tryLock(1 s)`` before a queue's broker lock is given up)."""
        turn = self._turns.get(mq)
        if turn is None:
            return True
        with anyio.move_on_after(timeout):
            async with turn:
                return True
        return False

    def calling(self, mq: MessageQueue) -> bool:
        """Whether a listener call runs on ``mq`` now (an abandoned thread's included)."""
        turn = self._turns.get(mq)
        return turn is not None and turn.taken

    async def _consume_queue(self, mq: MessageQueue, pq: ProcessQueue) -> None:
        c = self.consumer
        try:
            while not pq.dropped and not c.stopping:
                if self._unlocked(pq):
                    if not await c.rebalance.lock(mq):
                        await self._pause(ORDERLY_LOCK_RETRY_DELAY)
                        continue
                    pq.locked, pq.last_lock_time = True, anyio.current_time()
                turn = self._turns.setdefault(mq, _QueueTurn())
                async with turn:
                    if pq.dropped:
                        return
                    # ProcessQueue.takeMessages (client/src/main/java/org/apache/rocketmq/client/impl/consumer/
                    # ProcessQueue.java) stamps lastConsumeTimestamp on every take, as removeMessage does for
                    # concurrent consumption: consumerStatus shows when the queue was last consumed.
                    pq.last_consume_time = anyio.current_time()
                    msgs = pq.take_messages(max(1, c.consume_message_batch_max_size))
                    if not msgs:
                        return
                    suspend = await self._consume_batch(mq, pq, msgs, turn)
                if suspend is not None:
                    await self._pause(suspend)
        finally:
            self._running.discard(pq)
            # Messages may have arrived after the last take: make sure they are not left waiting.
            if pq.has_messages() and not pq.dropped and not c.stopping:
                self.submit(mq, pq, [])

    def _unlocked(self, pq: ProcessQueue) -> bool:
        """Whether ``pq`` may not be consumed for want of its broker lock: in CLUSTERING, not locked (the last renewal
        was refused) or its lock older than the consumer's :attr:`~client.consumer.push.PushConsumer.lock_max_live`."""
        return self.consumer.message_model is MessageModel.CLUSTERING and (
            not pq.locked or pq.lock_expired(anyio.current_time(), self.consumer.lock_max_live)
        )

    async def _consume_batch(
        self, mq: MessageQueue, pq: ProcessQueue, msgs: list[MessageExt], turn: _QueueTurn
    ) -> float | None:
        """One listener call and its commit, ``turn`` held; how long the queue is to be suspended, if it is.

        The lock is asked for again once the call holds its consume slot, which it may wait long for: a batch whose
        lock was lost meanwhile is put back, uncounted, for the loop to lock the queue again, as
        ``client/src/main/java/org/apache/rocketmq/client/impl/consumer/ConsumeMessageOrderlyService.java``'s
        ``ConsumeRequest.run`` checks ``isLocked()`` and ``isLockExpired()`` on the consume thread before each
        batch (another member holding the lock consumes the queue meanwhile)."""
        c = self.consumer
        shown = [reset_retry_topic(m, c.group, c.namespace) for m in msgs]
        _stamp_start(shown)
        trace = _ListenerTrace(c, mq, shown)
        context = ConsumeOrderlyContext(mq)
        unlocked = False
        begun: float | None = None

        def skip() -> bool:
            nonlocal unlocked
            unlocked = not pq.dropped and self._unlocked(pq)
            return pq.dropped or unlocked

        def started() -> None:
            nonlocal begun
            begun = anyio.current_time()
            trace.begin()

        status = await call_listener(
            c.bound_listener(context),
            shown,
            c.limiter,
            ConsumeOrderlyStatus.SUSPEND_CURRENT_QUEUE_A_MOMENT,
            skip=skip,
            started=started,
            abandoned=turn.abandoned,
            raised=trace.raised,
            returned_none=trace.returned_none,
        )
        trace.end(status in _HOOK_SUCCESS, status)  # also if dropped, as Java
        if begun is not None:  # called: counted also if dropped meanwhile, as Java's processConsumeResult
            now = anyio.current_time()
            stats = c.instance.consumer_stats.topic(c.group, mq.topic, now)
            stats.consumed(now, round((now - begun) * 1000))
            if status is ConsumeOrderlyStatus.SUSPEND_CURRENT_QUEUE_A_MOMENT:
                stats.consumed_failed(now, len(msgs))
            elif status is ConsumeOrderlyStatus.SUCCESS or context.auto_commit:
                stats.consumed_ok(now, len(msgs))
        if pq.dropped:  # rebalanced away or reset meanwhile: its new owner has these; nothing to commit or count
            return None
        if unlocked:  # not called: consumed once the queue is locked again
            pq.make_messages_to_consume_again(msgs)
            return None
        return await self._process_result(mq, pq, msgs, status, context)

    async def _process_result(
        self,
        mq: MessageQueue,
        pq: ProcessQueue,
        msgs: list[MessageExt],
        status: ConsumeStatus,
        context: ConsumeOrderlyContext,
    ) -> float | None:
        """Commit, suspend or roll back after a call as ``ConsumeMessageOrderlyService.processConsumeResult``; how
        long the queue is to be suspended, if it is. With ``auto_commit`` every status but a suspension commits (COMMIT
        and ROLLBACK count as SUCCESS); without it only COMMIT does, a SUCCESS leaves the messages taken for a later
        COMMIT, a ROLLBACK hands every message taken since the last commit out again, and a suspension whose
        messages were all given up commits nothing."""
        suspension = _suspension(context.suspend_current_queue_time_ms, self.consumer.suspend_current_queue_time)
        if status is ConsumeOrderlyStatus.SUSPEND_CURRENT_QUEUE_A_MOMENT:
            again = await self._check_reconsume_times(mq, msgs)
            if again is not None:
                pq.make_messages_to_consume_again(again)
                return suspension
            if not context.auto_commit:
                return None
        elif not context.auto_commit:
            if status is ConsumeOrderlyStatus.ROLLBACK:
                pq.rollback()
                return suspension
            if status is not ConsumeOrderlyStatus.COMMIT:
                return None
        elif status is not ConsumeOrderlyStatus.SUCCESS:
            log.warning("the message queue consume result is illegal, we think you want to ack these message %s", mq)
        offset = pq.commit()
        if offset >= 0 and not pq.dropped:
            self.consumer.offset_store.update(mq, offset, increase_only=False)
        return None

    async def _check_reconsume_times(self, mq: MessageQueue, msgs: list[MessageExt]) -> list[MessageExt] | None:
        """After a suspension (Java's ``checkReconsumeTimes``): a message below ``max_reconsume_times`` (-1: no
        limit) is counted once more; one that reached it is given up (:meth:`_give_up`), and counted too when that
        fails. Returns the batch to consume again, counts raised, or None when every message was given up."""
        limit = self.consumer.max_reconsume_times
        again: list[MessageExt] = []
        suspend = False
        for m in msgs:
            if limit == -1 or m.reconsume_times < limit or not await self._give_up(mq, m):
                suspend = True
                m = _counted_again(m)
            again.append(m)
        return again if suspend else None

    async def _give_up(self, mq: MessageQueue, msg: MessageExt) -> bool:
        """Send ``msg`` to the DLQ; returns whether that worked.

        As ``client/src/main/java/org/apache/rocketmq/client/impl/consumer/ConsumeMessageOrderlyService.java``'s
        ``sendMessageBack``: a copy sent to ``%RETRY%<group>`` with the ``reconsume_times`` it reached and the
        limit, which the broker moves to ``%DLQ%<group>``; the dead letter counts the tries (a broker send-back of
        the stored message would count its stored reconsumeTimes + 1). BROADCASTING too, as Java: the broker made the
        group's retry topic at its heartbeat, whatever the model."""
        c = self.consumer
        try:
            await send_retry_copy(c, msg, msg.reconsume_times, c.max_reconsume_times)
        except Exception as exc:
            log.warning("sending %s of %s to the DLQ failed: %s", msg.msg_id, mq, exc)
            return False
        return True
