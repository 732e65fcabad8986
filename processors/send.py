"""SEND_MESSAGE (10), SEND_MESSAGE_V2 (310) and SEND_BATCH_MESSAGE (320): :class:`SendMessageProcessor`.

Check order (docs/protocol.md#75-send-checks): a broker without write permission refuses an order topic
(NO_PERMISSION), then topic name (SYSTEM_ERROR with RocketMQ's remarks), forbidden system topics (NO_PERMISSION),
unknown topic -> TBW102 auto-create or TOPIC_NOT_EXIST, queue id (SYSTEM_ERROR when too large, a random write queue
when negative), topic write permission, then for ``%RETRY%group`` topics the group must exist and a
message retried ``maxReconsumeTimes`` times goes to ``%DLQ%group``. The stored properties gain ``CLUSTER`` and lose
``WAIT`` (whose value decides whether a SYNC_FLUSH send waits for the group commit); ``TRAN_MSG=true`` makes a
transactional half message (stored in ``RMQ_SYS_TRANS_HALF_TOPIC`` queue 0 with ``REAL_TOPIC``/``REAL_QID``) unless
``rejectTransactionMessage`` is set, or the message is a retry (``reconsumeTimes`` > 0) with a delay level. Delay
levels are a seam: ``delay_rewrite`` (see :data:`DelayRewrite`).

Every response, error or not, carries ``MSG_REGION`` and ``TRACE_ON``; a stored message adds ``msgId`` (comma-joined
for a batch), ``queueId`` and ``queueOffset``, and a single message parked in the timer (not one sent to a retry topic)
its ``recallHandle`` (RocketMQ 5.3's ``SendMessageProcessor.attachRecallHandle``; :mod:`remoting.codec.recall_handle`).
Store refusals map to MESSAGE_ILLEGAL / SERVICE_NOT_AVAILABLE / SYSTEM_ERROR with a remark naming the reason; flush
timeouts to FLUSH_DISK_TIMEOUT (the message is stored).

This is the broker's hottest path: the common case (valid header, known topic) is one header parse, two dict lookups,
one pass over the properties string (a plain concatenation when it has no WAIT/TRAN_MSG/DELAY/CLUSTER) and one
store append. Profiled with ``python -m bench.broker --profile``: the store append and the header codec dominate.
"""

from __future__ import annotations

import functools
import logging
import random
import time
from collections.abc import Callable
from datetime import datetime
from typing import TYPE_CHECKING, Final

from processors.common import FAQ_SUFFIX, RequestRejected, born_host
from processors.put_future import PutFutureService
from processors.send_answer import SendAnswers, illegal_remark
from processors.send_fast import SendFastPath
from processors.send_properties import StoredProperties, has_sharding_key, rewrite_properties, without_property
from remoting.codec.batch_body import split_stored_entries
from remoting.codec.codes import RequestCode, ResponseCode
from remoting.codec.command import RemotingCommand
from remoting.codec.errors import HeaderFieldError, MessageDecodeError
from remoting.codec.headers.send import SendMessageRequestHeader, parse_send_request_header
from remoting.codec.message import (
    SYSFLAG_MULTI_TAGS,
    SYSFLAG_TRANSACTION_MASK,
    MessageRecord,
)
from remoting.codec.message_properties import PROPERTY_WAIT, decode_properties, with_properties
from remoting.codec.recall_handle import encode_recall_handle
from remoting.codec.topics import (
    NOT_ALLOWED_SEND_TOPICS,
    RETRY_GROUP_TOPIC_PREFIX,
    SCHEDULE_TOPIC,
    TIMER_TOPIC,
    TRANS_HALF_TOPIC,
    validate_topic,
)
from remoting.processor import RequestContext
from store.errors import StoreError
from store.metadata_files import PERM_WRITE, TopicConfig, TopicFilterType
from store.results import PutStatus

if TYPE_CHECKING:
    from processors.context import BrokerContext
    from store.results import AppendResult

log = logging.getLogger(__name__)

__all__ = ["DelayRewrite", "SendMessageProcessor", "StoredProperties", "TimerRewrite", "rewrite_properties"]

#: ``(record, delay_level) -> record``: the delay-level seam. Given a record whose ``DELAY`` property is > 0 (and that
#: is neither a half message nor DLQ-bound), return what to append instead (``SCHEDULE_TOPIC_XXXX``, queue
#: ``level - 1``, ``REAL_TOPIC``/``REAL_QID`` properties). Without one, the message is stored where it was sent and
#: delivered at once.
DelayRewrite = Callable[[MessageRecord, int], MessageRecord]
#: ``record -> record``: the timer seam. Given a record whose properties mention ``TIMER_`` (and that carries no delay
#: level), return what to append instead (the timer topic when a ``TIMER_*`` time lies in the future). May raise
#: :class:`~processors.common.RequestRejected` (MESSAGE_ILLEGAL for a malformed or too distant time).
TimerRewrite = Callable[[MessageRecord], MessageRecord]


_SEND_CODES: Final = frozenset({RequestCode.SEND_MESSAGE, RequestCode.SEND_MESSAGE_V2, RequestCode.SEND_BATCH_MESSAGE})
_VERSION_WITH_MAX_RECONSUME_TIMES: Final = 121
_PROPERTY_REAL_TOPIC: Final = "REAL_TOPIC"
_PROPERTY_REAL_QID: Final = "REAL_QID"
#: ``rocketmq_message_size``'s message type of a message stored under a system topic by a rewrite, as 5.3.3's
#: ``BrokerMetricsManager.getMessageType`` labels it (a delay level or timer: ``delay``; a half message)
_STORED_KINDS: Final = {SCHEDULE_TOPIC: "delay", TIMER_TOPIC: "delay", TRANS_HALF_TOPIC: "transaction"}


class SendMessageProcessor:
    """Serves codes 10, 310 and 320 against ``broker.store``. One instance per broker; stateless between requests.

    ``delay_rewrite`` is the delay-level seam (:data:`DelayRewrite`), ``timer_rewrite`` the timer seam
    (:data:`TimerRewrite`); ``rng`` picks queues for negative queue ids.
    """

    def __init__(
        self,
        broker: BrokerContext,
        delay_rewrite: DelayRewrite | None = None,
        rng: random.Random | None = None,
        timer_rewrite: TimerRewrite | None = None,
        put_futures: PutFutureService | None = None,
    ) -> None:
        self.broker = broker
        self.delay_rewrite = delay_rewrite
        self.timer_rewrite = timer_rewrite
        self.put_futures = put_futures
        self.answers = SendAnswers(broker, put_futures)
        self._rng = rng or random.Random()
        self._config: object = None
        self.base_fields: dict[str, str] = {}
        self.cluster = ""
        self._reject_transactions = False
        self.start_accept_ms = 0
        #: The reader's shortcut for the common SEND_MESSAGE_V2 (:mod:`processors.send_fast`), for
        #: :meth:`~remoting.dispatch.Dispatcher.register_fast`.
        self.fast = SendFastPath(self)

    def adopt_config(self) -> None:
        # The context's config object is replaced (never mutated) when it changes, so an identity check keeps the
        # derived values current without recomputing them per request.
        config = self.broker.config
        if config is self._config:
            return
        self._config = config
        self.base_fields = {"MSG_REGION": config.region_id, "TRACE_ON": "true" if config.trace_on else "false"}
        self.cluster = config.broker_cluster_name
        self._reject_transactions = config.reject_transaction_message
        self.start_accept_ms = config.start_accept_send_request_time_stamp

    def not_yet_accepting(self, request: RemotingCommand) -> RemotingCommand | None:
        """SYSTEM_ERROR "broker unable to service, until <time>" before ``startAcceptSendRequestTimeStamp``, as
        broker/src/main/java/org/apache/rocketmq/broker/processor/SendMessageProcessor.java (preSend) and
        ReplyMessageProcessor.java answer ahead of any other check; None once sends are accepted."""
        until = self.start_accept_ms
        if until <= 0 or time.time() * 1000 >= until:
            return None
        human = datetime.fromtimestamp(until / 1000).strftime("%Y-%m-%d %H:%M:%S,%f")[:-3]  # timeMillisToHumanString2
        return request.response(
            ResponseCode.SYSTEM_ERROR, f"broker unable to service, until {human}", dict(self.base_fields)
        )

    async def process(self, ctx: RequestContext, request: RemotingCommand) -> RemotingCommand | None:
        self.adopt_config()
        if request.code not in _SEND_CODES:
            return request.response(
                ResponseCode.REQUEST_CODE_NOT_SUPPORTED, f" request type {request.code} not supported"
            )
        try:
            header = parse_send_request_header(request.code, request.ext_fields)
        except HeaderFieldError as exc:
            return request.response(ResponseCode.SYSTEM_ERROR, str(exc), dict(self.base_fields))
        return await self.process_parsed(ctx, request, header)

    async def process_parsed(
        self, ctx: RequestContext, request: RemotingCommand, header: SendMessageRequestHeader
    ) -> RemotingCommand | None:
        """:meth:`process` of a request whose header is already parsed (the gRPC front door builds the header
        itself, proxy/local.py): the request's ``ext_fields`` are not read."""
        self.adopt_config()
        if (refused := self.not_yet_accepting(request)) is not None:
            return refused
        try:
            if header.batch:
                return await self._send_batch(ctx, request, header)
            return await self._send_one(ctx, request, header)
        except RequestRejected as rejected:
            return rejected.to_response(request, dict(self.base_fields))

    # ---- checks shared by single and batch sends (docs/protocol.md#75-send-checks, steps 3-5) ---------------------

    def _check_topic(self, ctx: RequestContext, header: SendMessageRequestHeader) -> tuple[TopicConfig, int]:
        """The topic's config (auto-created when allowed) and the queue to use. Raises RequestRejected."""
        topic = header.topic
        topics = self.broker.topics
        config = topics.get(topic)
        if config is not None and config.order and not self.broker.config.broker_permission & PERM_WRITE:
            # A broker that is not writable registers its topics with its own perm, so producers leave it; only an
            # order topic's producer, which picks its queue itself, can still reach it. Checked first, before the
            # topic's name, its queue id and (ours) its write bit: broker/src/main/java/org/apache/rocketmq/broker/
            # processor/AbstractSendMessageProcessor.java msgCheck (BrokerController.registerBrokerAll: the perm).
            broker_ip = self.broker.config.broker_ip1
            raise RequestRejected(ResponseCode.NO_PERMISSION, f"the broker[{broker_ip}] sending message is forbidden")
        if config is None:
            remark = validate_topic(topic)
            if remark is not None:
                raise RequestRejected(ResponseCode.SYSTEM_ERROR, remark)
            if topic in NOT_ALLOWED_SEND_TOPICS:
                raise RequestRejected(ResponseCode.NO_PERMISSION, f"Sending message to topic[{topic}] is forbidden.")
            config = self._create_topic(header)
        elif topic in NOT_ALLOWED_SEND_TOPICS:
            raise RequestRejected(ResponseCode.NO_PERMISSION, f"Sending message to topic[{topic}] is forbidden.")
        queue_id = header.queue_id
        if queue_id >= max(config.write_queue_nums, config.read_queue_nums):
            host, port = ctx.remote_address[:2]
            # broker/src/main/java/org/apache/rocketmq/broker/processor/AbstractSendMessageProcessor.java msgCheck:
            # the config as its toString() prints it.
            raise RequestRejected(
                ResponseCode.SYSTEM_ERROR,
                f"request queueId[{queue_id}] is illegal, {config.java_text()} Producer: {host}:{port}",
            )
        if not config.perm & PERM_WRITE:
            raise RequestRejected(ResponseCode.NO_PERMISSION, f"the topic[{topic}] sending message is forbidden")
        if queue_id < 0:
            if config.write_queue_nums <= 0:
                raise RequestRejected(ResponseCode.SYSTEM_ERROR, f"topic[{topic}] has no write queue")
            queue_id = self._rng.randrange(config.write_queue_nums)
        return config, queue_id

    def _create_topic(self, header: SendMessageRequestHeader) -> TopicConfig:
        topic = header.topic
        topics = self.broker.topics
        is_retry = topic.startswith(RETRY_GROUP_TOPIC_PREFIX)
        # TopicSysFlag: bit 0 unit, bit 1 unit-sub (Java's buildSysFlag(unit, hasUnitSub)).
        sys_flag = (2 if is_retry else 1) if header.unit_mode else 0
        config = topics.create_topic_in_send_process(
            topic, header.default_topic, header.default_topic_queue_nums, sys_flag
        )
        if config is None and is_retry:  # createTopicInSendMessageBackMethod(topic, 1, RW, topicSysFlag)
            config = topics.create_topic_in_send_back_process(topic, 1, topic_sys_flag=sys_flag)
        if config is None:
            raise RequestRejected(
                ResponseCode.TOPIC_NOT_EXIST, f"topic[{topic}] not exist, apply first please!{FAQ_SUFFIX}"
            )
        return config

    # ---- single message -------------------------------------------------------------------------------------

    async def _send_one(
        self, ctx: RequestContext, request: RemotingCommand, header: SendMessageRequestHeader
    ) -> RemotingCommand | None:
        config, queue_id = self._check_topic(ctx, header)
        topic = header.topic
        reconsume_times = header.reconsume_times or 0
        to_dlq = False
        answer_queue = queue_id  # Java answers the queue it was sent to, also when the message goes to the DLQ
        if topic.startswith(RETRY_GROUP_TOPIC_PREFIX):
            topic, queue_id, to_dlq = self._retry_target(request, header, queue_id, reconsume_times)
        props = rewrite_properties(header.properties, self.cluster)
        sys_flag = header.sys_flag
        if config.topic_filter_type is TopicFilterType.MULTI_TAG:
            sys_flag |= SYSFLAG_MULTI_TAGS
        stored = props.stored
        if to_dlq and props.delay_level:
            stored = without_property(stored, "DELAY")
        # Positional, in field order (topic, body, queue_id, flag, properties, sys_flag, born_timestamp, born_host,
        # store_host, reconsume_times): 1.10 -> 0.76 us per send through attrs' __init__, measured.
        record = MessageRecord(
            topic,
            request.body,
            queue_id,
            header.flag,
            stored,
            sys_flag,
            header.born_timestamp,
            born_host(ctx),
            self.broker.store_host,
            reconsume_times,
        )
        # SendMessageProcessor.sendMessage: a retry re-sent with a delay level (none once DLQ-bound) keeps a committed
        # message's TRAN_MSG without being a half message ("for client under version 4.6.1").
        half_of = None  # the real topic of a half message
        if props.transactional and not (reconsume_times > 0 and props.delay_level > 0 and not to_dlq):
            if self._reject_transactions:
                raise RequestRejected(
                    ResponseCode.NO_PERMISSION,
                    f"the broker[{self.broker.config.broker_ip1}] sending transaction message is forbidden",
                )
            half_of = record.topic
            record = self._half_message(record, props.wait)
        elif props.bad_delay is not None:  # CommitLog.asyncPutMessage's parseInt of DELAY throws: nothing is stored
            raise RequestRejected(ResponseCode.SYSTEM_ERROR, number_format_remark(props.bad_delay))
        elif props.delay_level > 0 and not to_dlq and self.delay_rewrite is not None:
            record = self.delay_rewrite(record, props.delay_level)
        elif self.timer_rewrite is not None and not to_dlq and "TIMER_" in stored:
            record = self.timer_rewrite(record)
            if record.topic == TIMER_TOPIC and not topic.startswith(RETRY_GROUP_TOPIC_PREFIX):
                fields = {**self.base_fields, "recallHandle": self._recall_handle(record)}
                append, kind = self._append_of(record, "delay")
                sized = functools.partial(self._sized_append, append, kind)
                return await self.answers.store(ctx, request, answer_queue, props.wait, sized, record, fields)
        # Java answers the queue a delayed, timer or half message was sent to, not the queue it waits in.
        append, kind = self._append_of(record, _STORED_KINDS.get(record.topic, "normal"))
        sized = functools.partial(self._sized_append, append, kind)
        counted = None if half_of is None else functools.partial(self._half_put, half_of)
        return await self.answers.store(
            ctx, request, answer_queue, props.wait, sized, record, self.base_fields, counted
        )

    def _sized_append(
        self, append: Callable[[MessageRecord], AppendResult], kind: str, msg: MessageRecord
    ) -> AppendResult:
        """``append(msg)``, its size recorded for ``rocketmq_message_size`` under the stored topic as ``kind``."""
        appended = append(msg)
        self.broker.stats.message_sizes.record(msg.topic, kind, appended.size)
        return appended

    def _half_put(self, real_topic: str, status: PutStatus) -> None:
        """A half message's put ended: counted for ``rocketmq_half_messages`` under its real topic when PUT_OK, as
        5.3.3's SendMessageProcessor ``sendMessage`` adds one to TransactionMetrics only for a put that is."""
        if status is PutStatus.PUT_OK:
            self.broker.half_messages.add(real_topic, 1, self.broker.store.config.now_ms())

    def _append_of(self, record: MessageRecord, kind: str) -> tuple[Callable[[MessageRecord], AppendResult], str]:
        """How ``record`` is appended and its ``message_type``: ``fifo`` when it carries a sharding key, unless it is a
        half message (5.3.3's ``getMessageType`` checks the transaction flag, then the sharding key, then the delay
        properties, so a delayed or timer message of a message group is ``fifo`` under the topic it waits in), else
        ``kind``."""
        if record.topic != TRANS_HALF_TOPIC and has_sharding_key(record.properties):
            return self._fifo_append, "fifo"
        return self.broker.store.append, kind

    def _fifo_append(self, msg: MessageRecord) -> AppendResult:
        """Append a message of a 5.x message group, labelled ``fifo`` in ``/metrics`` under the topic it is stored in
        (5.3.3's ``getMessageType``; a retry or DLQ topic's are not counted there)."""
        appended = self.broker.store.append(msg)
        self.broker.stats.record_fifo_put(msg.topic, msg.queue_id, appended.queue_offset)
        return appended

    def _recall_handle(self, parked: MessageRecord) -> str:
        """The handle of a message parked in the timer: its real topic, this broker, ``TIMER_OUT_MS`` + 1 (RocketMQ
        adds one against its floored time) and its ``UNIQ_KEY`` (``null`` without one, as Java joins it)."""
        props = decode_properties(parked.properties)
        timestamp = str(int(props["TIMER_OUT_MS"]) + 1)
        return encode_recall_handle(
            props["REAL_TOPIC"], self.broker.config.broker_name, timestamp, props.get("UNIQ_KEY", "null")
        )

    def _retry_target(
        self, request: RemotingCommand, header: SendMessageRequestHeader, queue_id: int, reconsume_times: int
    ) -> tuple[str, int, bool]:
        """(topic, queue, to DLQ) for a send to ``%RETRY%group`` (step 6 of docs/protocol.md#75-send-checks)."""
        group = header.topic[len(RETRY_GROUP_TOPIC_PREFIX) :]
        group_config = self.broker.groups.find(group)
        if group_config is None:
            raise RequestRejected(
                ResponseCode.SUBSCRIPTION_GROUP_NOT_EXIST, f"subscription group not exist, {group} {FAQ_SUFFIX}"
            )
        max_times = group_config.retry_max_times
        if request.version >= _VERSION_WITH_MAX_RECONSUME_TIMES and header.max_reconsume_times is not None:
            max_times = header.max_reconsume_times
        if reconsume_times < max_times:
            return header.topic, queue_id, False
        dlq = self.broker.topics.create_dlq_topic(group)
        # Counted as sent to the DLQ here, labelled with the request's producer group and topic, as RocketMQ 5.3.3's
        # broker/src/main/java/org/apache/rocketmq/broker/processor/SendMessageProcessor.java handleRetryAndDLQ.
        self.broker.stats.record_dlq(header.producer_group, header.topic)
        return dlq.topic_name, 0, True

    @staticmethod
    def _half_message(record: MessageRecord, wait: bool) -> MessageRecord:
        """The transactional half message (docs/protocol.md#78-transactions): real topic and queue kept as properties,
        stored in the half topic's queue 0 with the transaction bits cleared so it is dispatched to that queue. A
        ``WAIT=false`` is kept too, for END_TRANSACTION's committed copy not to wait for the flush or a slave either:
        broker/src/main/java/org/apache/rocketmq/broker/transaction/queue/TransactionalMessageBridge.java
        ``parseHalfMessageInner`` writes the properties string again from the map SendMessageProcessor put ``WAIT``
        back in (ours leaves out a true one, which absent means as well)."""
        extra = {_PROPERTY_REAL_TOPIC: record.topic, _PROPERTY_REAL_QID: str(record.queue_id)}
        if not wait:
            extra[PROPERTY_WAIT] = "false"
        stored = with_properties(record.properties, extra)
        return MessageRecord(
            topic=TRANS_HALF_TOPIC,
            body=record.body,
            queue_id=0,
            flag=record.flag,
            properties=stored,
            sys_flag=record.sys_flag & ~SYSFLAG_TRANSACTION_MASK,
            born_timestamp=record.born_timestamp,
            born_host=record.born_host,
            store_host=record.store_host,
            reconsume_times=record.reconsume_times,
        )

    # ---- batch ----------------------------------------------------------------------------------------------

    async def _send_batch(
        self, ctx: RequestContext, request: RemotingCommand, header: SendMessageRequestHeader
    ) -> RemotingCommand | None:
        config, queue_id = self._check_topic(ctx, header)
        topic = header.topic
        if len(topic) > 127:
            raise RequestRejected(ResponseCode.MESSAGE_ILLEGAL, f"message topic length too long {len(topic)}")
        if topic.startswith(RETRY_GROUP_TOPIC_PREFIX):
            raise RequestRejected(ResponseCode.MESSAGE_ILLEGAL, f"batch request does not support retry group {topic}")
        max_size = self.broker.store.config.max_message_size
        try:  # DefaultMessageStore.putMessages: the store's state before the batch's length, type, DELAY, encoding
            self.broker.store.check_writable()
        except StoreError as exc:
            raise self.answers.refused(exc) from None
        if len(request.body) > max_size:  # DefaultMessageStore.checkMessages: before the failed puts are counted
            raise RequestRejected(ResponseCode.MESSAGE_ILLEGAL, illegal_remark(max_size))
        batch_props = rewrite_properties(header.properties, self.cluster)
        transactional = header.sys_flag & SYSFLAG_TRANSACTION_MASK
        if not transactional and batch_props.bad_delay is not None:  # asyncPutMessages: the type first, then DELAY
            raise RequestRejected(ResponseCode.SYSTEM_ERROR, number_format_remark(batch_props.bad_delay))
        if transactional or batch_props.delay_level > 0:
            # CommitLog.asyncPutMessages: a batch is neither transactional nor delayed (it used to be stored at once);
            # its MESSAGE_ILLEGAL counts in putMessageFailedTimes, as asyncPutMessages counts every result not PUT_OK
            self.broker.stats.record_put_failed()
            raise RequestRejected(ResponseCode.MESSAGE_ILLEGAL, illegal_remark(max_size))
        # Each message gets the header's properties with CLUSTER set, WAIT kept (asyncSendBatchMessage; a single
        # message's WAIT is dropped).
        suffix = with_properties(header.properties or "", {"CLUSTER": self.cluster})
        try:
            stored = split_stored_entries(request.body, suffix)
        except MessageDecodeError as exc:
            log.debug("batch body refused: %s", exc)
            raise RequestRejected(ResponseCode.MESSAGE_ILLEGAL, illegal_remark(max_size)) from None
        sys_flag = header.sys_flag
        if config.topic_filter_type is TopicFilterType.MULTI_TAG:
            sys_flag |= SYSFLAG_MULTI_TAGS
        # One template record carries what the messages share; each entry keeps only body, properties and flag.
        template = MessageRecord(
            topic=topic,
            body=b"",
            queue_id=queue_id,
            sys_flag=sys_flag,
            born_timestamp=header.born_timestamp,
            born_host=born_host(ctx),
            store_host=self.broker.store_host,
            reconsume_times=header.reconsume_times or 0,
        )
        store, stats = self.broker.store, self.broker.stats
        grouped = has_sharding_key(header.properties or "")
        kind = "fifo" if grouped else "normal"

        def append(batch: list[tuple[bytes, str, int]]) -> AppendResult:
            appended = store.append_entries(template, batch)
            count = len(batch)  # one put "time" per request, as Java's stats count
            stats.record_batch_put(topic, queue_id, appended.queue_offset + count, count)
            if grouped:
                stats.record_fifo_put(topic, queue_id, appended.queue_offset, count)
            stats.message_sizes.record(topic, kind, appended.size // count)
            return appended

        return await self.answers.store(ctx, request, queue_id, batch_props.wait, append, stored, self.base_fields)


def number_format_remark(value: str) -> str:
    """The remark of Java's NumberFormatException escaping a processor (NettyRemotingAbstract answers SYSTEM_ERROR)."""
    return f'java.lang.NumberFormatException: For input string: "{value}"'
