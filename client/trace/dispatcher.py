"""The trace dispatcher (Java's ``AsyncTraceDispatcher``): hooks hand it what happened, it encodes and sends trace
messages in the background.

Hot path: a producer's send, a push consumer's listener call and a lite pull consumer's pull append a small tuple
(a listener call or pull: a list of them, one per message; or a ready record) to a bounded queue
(``queue_size`` entries, 1024 as Java's ``traceContextQueue``); when the queue is full the entry is dropped
whole (a call's records all together, as Java drops one ``TraceContext``) and counted in
:attr:`TraceDispatcher.dropped`, never waited for. Everything else runs in one background
task of the client instance: every 100 ms (or at once when the queue is half full) it turns the queued events into
:class:`~client.trace.codec.TraceRecord` text and appends it to the open batch; a batch is sent as one message to the
trace topic when its text reaches 118,000 characters (Java's ``maxMessageSize - 10,000``) or its first record is
500 ms old. The message's ``KEYS`` are every record's msgId and the traced messages' keys, so ``QUERY_MESSAGE`` by
msgId finds it (``mqadmin queryMsgTraceById``).

Trace messages go out through an inner producer, group ``_INNER_TRACE_PRODUCER-<group>-<PRODUCE|CONSUME>-<n>``, on the
process's trace client instance, instance name ``PID_CLIENT_INNER_TRACE_PRODUCER_<name server address>``, which every
trace producer of the process shares, as Java's (:mod:`client.trace.instances`), with Java's 5 s timeout and
128,000-byte limit, as ``send_async``: a failed send is logged and counted in :attr:`TraceDispatcher.failed_batches`.
:meth:`stop` sends what is queued (waiting at most 500 ms for those sends, as Java's ``flush``) and stops the inner
producer; the trace instance stops with its last producer. An inner producer that cannot start (its group
refused) is logged and leaves the host running untraced, as Java's hosts do. A shared trace instance failing under the
dispatcher (Java's never does) is replaced: the inner producer moves to a new one, attempts at least
:data:`REATTACH_DELAY` apart, the records queued meanwhile.

With the client config's ``access_channel="CLOUD"`` (Java's ``AccessChannel.CLOUD``) each record goes to
``rmq_sys_TRACE_DATA_<its region>`` instead (``null`` for none), whatever the trace topic setting, one batch per
topic (``AsyncTraceDispatcher.getTraceTopicName``, ``taskQueueByTopic``): a Pub's region is the send answer's
``MSG_REGION``, a consume record's the last traced message's ``MSG_REGION`` property, an EndTransaction's its
record's; and a SubAfter record stops after its context code with 0x01, without time, group or 0x02
(``TraceDataEncoder.encoderFromContextBean``).
"""

from __future__ import annotations

import itertools
import logging
import time
from collections import deque
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, Final

import anyio
import anyio.abc
import attrs

from client.errors import MQClientError
from client.message import Message, MessageExt, SendResult, SendStatus, uniq_msg_id
from client.namespace import strip_namespace
from client.send_request import uniq_key_generator
from client.trace.codec import (
    CONTENT_SPLITOR,
    CPP_TRACE_TOPIC_PREFIX,
    TRACE_TOPIC,
    MessageType,
    TraceRecord,
    encode_fields,
    encode_record,
    find_text_property,
)
from client.trace.instances import shared_trace_instance

if TYPE_CHECKING:
    from client.config import ClientConfig
    from client.instance import MQClientInstance
    from client.producer import Producer
    from client.send_request import PreparedSend

__all__ = ["ConsumeTrace", "TraceDispatcher"]

log = logging.getLogger(__name__)

QUEUE_SIZE: Final = 1024
MAX_BATCH_CHARS: Final = 128_000 - 10_000
BATCH_AGE: Final = 0.5
POLL_INTERVAL: Final = 0.1
FLUSH_WAIT: Final = 0.5
#: The least time between two attempts to get a trace client instance after the one in use failed (ours: Java's
#: never fails; the pause a failed pull takes, DefaultLitePullConsumerImpl's PULL_TIME_DELAY_MILLS_ON_EXCEPTION).
REATTACH_DELAY: Final = 3.0
#: The instance name of the trace producers' client instance, followed by ``_<name server address>`` (Java's
#: ``TraceConstants.TRACE_INSTANCE_NAME``).
TRACE_INSTANCE_NAME: Final = "PID_CLIENT_INNER_TRACE_PRODUCER"
_counter = itertools.count(1)

#: What the hooks queue, formatted in the background: a send (``"Pub"``, start ms, end ms, broker address, the
#: prepared send, its result), a listener call's consume records (a list, each record's fields in encoding order,
#: ``"SubBefore"``/``"SubAfter"`` first), or a ready :class:`TraceRecord`. One event is one entry of the queue, as one
#: ``TraceContext`` is in Java's ``AsyncTraceDispatcher.traceContextQueue``.
_Event = tuple[Any, ...] | list[tuple[Any, ...]] | TraceRecord


@attrs.define
class _Batch:
    """The records waiting for one trace topic (Java's ``TraceDataSegment``)."""

    text: list[str] = attrs.Factory(list)
    keys: dict[str, None] = attrs.Factory(dict)
    chars: int = 0
    since: float = 0.0


@attrs.frozen
class ConsumeTrace:
    """A listener call between its SubBefore and SubAfter records."""

    group: str
    request_id: str
    start_ms: int
    region: str | None
    msgs: list[MessageExt]
    batch_size: int


class TraceDispatcher:
    """One host's trace pipeline; see the module docstring. ``kind`` is ``PRODUCE`` or ``CONSUME``."""

    def __init__(
        self,
        instance: MQClientInstance,
        host_group: str,
        kind: str,
        trace_topic: str | None = None,
        *,
        queue_size: int = QUEUE_SIZE,
    ) -> None:
        self.instance = instance
        self.host_group = host_group
        self.topic = trace_topic.strip() if trace_topic and trace_topic.strip() else TRACE_TOPIC
        self.queue_size = queue_size
        self.inner_group = f"_INNER_TRACE_PRODUCER-{host_group}-{kind}-{next(_counter)}"
        #: ``access_channel="CLOUD"``: records go to their region's trace topic (see the module docstring)
        self.cloud = instance.config.access_channel == "CLOUD"
        self.dropped = 0
        self.sent_batches = 0
        self.failed_batches = 0
        self._events: deque[tuple[str, _Event]] = deque()
        self._batches: dict[str, _Batch] = {}
        self._wake: anyio.Event | None = None
        self._in_flight = 0
        self._producer: Producer | None = None
        self._released = anyio.Event()  # set by stop: the inner producer may go
        self._done = anyio.Event()  # set when the inner producer has stopped (and the instance, if it was the last)
        self._scope: anyio.CancelScope | None = None
        self._serving = False  # _serve runs (or ran to its end) and stop has not waited for it yet
        self._started = False  # _serve told the host's start it is done

    # -- hooks (hot path) ------------------------------------------------------------------------------------------

    def on_sent(self, start_ms: int, addr: str, prepared: PreparedSend, result: SendResult) -> None:
        """A send was answered (Java's ``sendMessageAfter``): skipped for the trace topic itself and when the broker
        turned trace off."""
        if not result.trace_on or prepared.topic.startswith(self.topic):
            return
        self._offer(("Pub", start_ms, time.time_ns() // 1_000_000, addr, prepared, result), result.region_id)

    def append(self, record: TraceRecord) -> None:
        """A ready record (the end-transaction hook)."""
        self._offer(record, record.region_id)

    def consume_before(self, group: str, msgs: Sequence[MessageExt]) -> ConsumeTrace | None:
        """SubBefore records for the messages a listener is about to get (Java's ``consumeMessageBefore``);
        messages whose ``TRACE_ON`` property is ``false`` are left out. Returns what :meth:`consume_after` needs."""
        traced = [m for m in msgs if m.properties.get("TRACE_ON") != "false"]
        if not traced:
            return None
        now = time.time_ns() // 1_000_000
        request_id = uniq_key_generator(self.instance.config.client_ip).next_id()
        region = traced[-1].properties.get("MSG_REGION")
        # One queue entry for the whole call, as Java's hook appends one TraceContext holding every message: a full
        # queue drops the call's records together, never some of them.
        self._offer(
            [
                ("SubBefore", now, region, group, request_id, uniq_msg_id(m), m.reconsume_times,
                 m.properties.get("KEYS"))
                for m in traced
            ],
            region,
        )  # fmt: skip
        return ConsumeTrace(group, request_id, now, region, traced, len(msgs))

    def consume_after(self, trace: ConsumeTrace, success: bool, context_code: int) -> None:
        """SubAfter records once the listener returned: its status, time per message and return type ordinal
        (``ConsumeReturnType``: SUCCESS 0, TIME_OUT 1, EXCEPTION 2, RETURNNULL 3, FAILED 4)."""
        now = time.time_ns() // 1_000_000
        cost = (now - trace.start_ms) // max(1, trace.batch_size)
        # A CLOUD record has seven fields (no time, no group), told apart by its length in _format.
        fields = 7 if self.cloud else 9
        self._offer(
            [
                ("SubAfter", trace.request_id, uniq_msg_id(m), cost, success, m.properties.get("KEYS"), context_code,
                 now, trace.group)[:fields]
                for m in trace.msgs
            ],
            trace.region,
        )  # fmt: skip

    def _offer(self, event: _Event, region: str | None) -> None:
        events = self._events
        if len(events) >= self.queue_size:
            self.dropped += 1
            return
        topic = f"{CPP_TRACE_TOPIC_PREFIX}{'null' if region is None else region}" if self.cloud else self.topic
        events.append((topic, event))
        if len(events) >= self.queue_size // 2 and self._wake is not None:
            self._wake.set()

    # -- life cycle ------------------------------------------------------------------------------------------------

    async def start(self) -> None:
        """Start the inner producer on the shared trace instance and the background task (both in the host
        instance's task group)."""
        await self.instance.task_group.start(self._serve)

    def _trace_config(self) -> ClientConfig:
        """The config of the inner producer's client instance (the key :func:`trace_instance` shares it by): Java's
        AsyncTraceDispatcher starts its producer with only the host's name server address and instance name
        ``PID_CLIENT_INNER_TRACE_PRODUCER_<that address>``, so its client id is ``ip@`` that name (no unit name),
        shared by every trace producer of the process, and its namespace is the
        instance id of an MQ_INST_xxx_yyy endpoint, else none (client/src/main/java/org/apache/rocketmq/client/trace/
        AsyncTraceDispatcher.java start, client/src/main/java/org/apache/rocketmq/client/ClientConfig.java). The
        host's credentials and TLS settings are kept (Java's gets the host's RPC hook); the VIP channel is off, as
        that ``start`` turns it off (``setVipChannelEnabled(false)``)."""
        host = self.instance.config
        name = f"{TRACE_INSTANCE_NAME}_{';'.join(host.namesrv_addr)}"
        return attrs.evolve(host, instance_name=name, unit_name=None, namespace=None, vip_channel_enabled=False)

    async def _serve(self, *, task_status: anyio.abc.TaskStatus[None] = anyio.TASK_STATUS_IGNORED) -> None:
        """Run the inner producer until :meth:`stop` is done with it (or the host instance stops); a shared trace
        instance failing under it is replaced (see :meth:`_reattach`)."""
        config = self._trace_config()
        self._released, self._done = anyio.Event(), anyio.Event()  # a restarted host starts its dispatcher again
        self._serving, self._started = True, False
        began = anyio.current_time()
        try:
            if await self._attach(config, task_status):
                await self._reattach(config, began)
        except Exception:
            if not self._started:
                raise  # the host's start fails, as it did with the inner producer on its own instance
            log.exception("trace dispatcher of %s failed", self.host_group)
        finally:
            self._done.set()

    async def _reattach(self, config: ClientConfig, began: float) -> None:
        """Move to a fresh shared trace instance each time the one in use fails, until :meth:`stop`. Attempts are
        :data:`REATTACH_DELAY` apart at least (one that fails at once waits that long for the next); what an attempt
        raises is logged. Meanwhile records stay queued (the queue's bound drops what does not fit) and batches
        wait. ``began``: when the failed instance's attempt began."""
        while True:
            with anyio.move_on_at(began + REATTACH_DELAY):
                await self._released.wait()
            if self._released.is_set():
                return
            began = anyio.current_time()
            try:
                if not await self._attach(config):
                    return
            except Exception:
                log.exception("trace dispatcher of %s: no trace client instance", self.host_group)

    async def _attach(self, config: ClientConfig, task_status: anyio.abc.TaskStatus[None] | None = None) -> bool:
        """Run an inner producer on the shared trace instance until :meth:`stop` releases it (False) or the instance
        fails (True). ``task_status``: the first attach, which starts the batching task; what it raises fails the
        host's start, as with the inner producer on its own instance."""
        from client.namespace import NO_NAMESPACE
        from client.producer import Producer

        async with shared_trace_instance(config) as shared:
            producer = Producer(
                self.inner_group,
                instance=shared.instance,
                send_msg_timeout=5.0,
                max_message_size=128_000,
                namespace=config.resolved_namespace or NO_NAMESPACE,
            )
            try:
                await producer.__aenter__()
            except MQClientError as exc:
                if task_status is None:
                    raise
                # The host's start catches the trace dispatcher's failure and only logs it, running without
                # trace (client/src/main/java/org/apache/rocketmq/client/producer/DefaultMQProducer.java start;
                # the consumers' alike): e.g. a long legal host group makes the inner group longer than
                # Validators.checkGroup allows. Keep no record then, every one counted as dropped.
                log.warning("trace dispatcher of %s not started: %s", self.host_group, exc)
                self.queue_size = 0
                self._started = True
                task_status.started()
                return False
            self._producer = producer
            if task_status is not None:
                self._wake, self._scope = anyio.Event(), anyio.CancelScope()
                self.instance.task_group.start_soon(self._run, self._scope)
                self._started = True
                task_status.started()
            try:
                await _first_of(self._released, shared.stopping)
            finally:
                if self._producer is producer:
                    self._producer = None
                with anyio.CancelScope(shield=True):
                    await producer.__aexit__(None, None, None)
            if self._released.is_set():
                return False
            log.warning("trace client instance %s failed: moving to a new one", shared.instance.client_id)
            return True

    async def stop(self) -> None:
        """Send what is queued, wait up to 500 ms for it, stop the inner producer (and the trace instance when no
        other dispatcher uses it)."""
        if self._scope is not None:
            self._scope.cancel()
            self._scope = None
        producer, self._producer = self._producer, None
        if not self._serving:
            return
        self._serving = False
        with anyio.CancelScope(shield=True):
            if producer is not None:
                self._drain(producer)
                for topic in list(self._batches):
                    self._send_batch(producer, topic)
                with anyio.move_on_after(FLUSH_WAIT):
                    while self._in_flight:
                        await anyio.sleep(0.01)
            self._released.set()
            await self._done.wait()

    async def _run(self, scope: anyio.CancelScope) -> None:
        with scope:
            while True:
                with anyio.move_on_after(POLL_INTERVAL):
                    await (self._wake or anyio.Event()).wait()
                self._wake = anyio.Event()
                producer = self._producer
                if producer is None:  # between two trace instances (see _reattach): keep it all queued
                    continue
                self._drain(producer)
                now = anyio.current_time()
                for topic in [t for t, batch in self._batches.items() if now - batch.since >= BATCH_AGE]:
                    self._send_batch(producer, topic)

    # -- batching --------------------------------------------------------------------------------------------------

    def _drain(self, producer: Producer) -> None:
        events = self._events
        while events:
            topic, event = events.popleft()
            batch = self._batches.get(topic)
            if batch is None:
                batch = self._batches[topic] = _Batch(since=anyio.current_time())
            if isinstance(event, list):
                for fields in event:
                    _add(batch, *_format(fields))
            else:
                _add(batch, *_format(event))
            # A listener call's records go into one batch together, as Java's TraceDataSegment adds one
            # TraceContext's text before it checks the size.
            if batch.chars >= MAX_BATCH_CHARS:
                self._send_batch(producer, topic)

    def _send_batch(self, producer: Producer, topic: str) -> None:
        batch = self._batches.pop(topic, None)
        if batch is None:
            return
        text, keys = "".join(batch.text), [k for k in batch.keys if k]
        count = len(batch.text)
        message = Message(topic, text.encode(), keys=keys)
        self._in_flight += 1
        try:
            producer.send_async(message, self._sent)
        except Exception as exc:
            self._in_flight -= 1
            self.failed_batches += 1
            log.warning("trace batch of %d record(s) not sent: %s", count, exc)

    def _sent(self, outcome: Any) -> None:
        self._in_flight -= 1
        if isinstance(outcome, Exception):
            self.failed_batches += 1
            log.warning("sending trace data failed: %s", outcome)
        else:
            self.sent_batches += 1


async def _first_of(*events: anyio.Event) -> None:
    """Return once any of ``events`` is set."""

    async def wait(event: anyio.Event) -> None:
        await event.wait()
        group.cancel_scope.cancel()

    async with anyio.create_task_group() as group:
        for event in events:
            group.start_soon(wait, event)


def _add(batch: _Batch, text: str, msg_id: str, keys: str | None) -> None:
    batch.text.append(text)
    batch.keys[msg_id] = None
    if keys:
        for key in keys.split(" "):
            batch.keys[key] = None
    batch.chars += len(text)


def _format(event: tuple[Any, ...] | TraceRecord) -> tuple[str, str, str | None]:
    """An event's record text, its msgId and the traced message's keys (for the batch's ``KEYS``)."""
    if isinstance(event, TraceRecord):
        return encode_record(event), event.msg_id, event.keys
    kind = event[0]
    if kind == "Pub":
        return _pub_text(event)
    if kind == "SubBefore":
        return encode_fields(event), event[5], event[7]
    if len(event) == 7:  # a CLOUD SubAfter: its last field ends with 0x01, and no 0x02 follows
        return encode_fields(event)[:-1] + CONTENT_SPLITOR, event[2], event[5]
    return encode_fields(event), event[2], event[5]


def _pub_text(event: tuple[Any, ...]) -> tuple[str, str, str | None]:
    """A Pub record straight from the prepared send and its result (the common event: no record object)."""
    _, start_ms, end_ms, addr, prepared, result = event
    props = prepared.fields.get("i") or ""
    tags, keys = find_text_property(props, "TAGS"), find_text_property(props, "KEYS")
    # client/.../impl/producer/DefaultMQProducerImpl.java sendKernelImpl: a DELAY or __STARTDELIVERTIME property of
    # any value makes Delay_Msg, set after (so over) Trans_Msg_Half.
    msg_type = MessageType.Normal_Msg.value
    if find_text_property(props, "__STARTDELIVERTIME") is not None or find_text_property(props, "DELAY") is not None:
        msg_type = MessageType.Delay_Msg.value
    elif find_text_property(props, "TRAN_MSG") == "true":
        msg_type = MessageType.Trans_Msg_Half.value
    ok = "true" if result.send_status is SendStatus.SEND_OK else "false"
    # Group and topic without their namespace (Java's SendMessageTraceHookImpl: NamespaceUtil.withoutNamespace).
    group, topic, body_length = (
        strip_namespace(prepared.fields.get("a") or ""),
        strip_namespace(prepared.topic),
        len(prepared.body),
    )
    text = (
        f"Pub\x01{start_ms}\x01{result.region_id}\x01{group}\x01{topic}\x01{result.msg_id}"
        f"\x01{'null' if tags is None else tags}\x01{'null' if keys is None else keys}\x01{addr}\x01{body_length}"
        f"\x01{end_ms - start_ms}\x01{msg_type}\x01{result.offset_msg_id}\x01{ok}\x02"
    )
    return text, result.msg_id, keys
