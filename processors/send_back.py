"""CONSUMER_SEND_MSG_BACK (36): :class:`ConsumerSendMsgBackProcessor` (docs/protocol.md#76-retry-and-dead-letter-queues,
docs/protocol.md#39-consumer_send_msg_back-header).

A consumer returns a message it failed to consume. Checks, in Java's order: the group must exist (or be
auto-creatable: SUBSCRIPTION_GROUP_NOT_EXIST), the broker must be writable (NO_PERMISSION); a group with
``retryQueueNums <= 0`` answers SUCCESS and drops the message. ``%RETRY%group`` is created with the group's retry queue
count (perm RW) and must be writable (NO_PERMISSION); the message is looked up by its CommitLog offset (SYSTEM_ERROR
``look message by offset failed, <offset>``).

The new record copies body, flag, sysFlag, born fields and properties; ``RETRY_TOPIC`` is set to the original topic when
absent, ``ORIGIN_MESSAGE_ID`` to the original's offset msgId when absent, ``WAIT`` to ``false``, and ``reconsumeTimes``
grows by one. It goes to ``%DLQ%group`` (one queue, perm RW, no delay) when the message was already reconsumed
``maxReconsumeTimes`` times (group ``retryMaxTimes``; the header's value when the request version is >= 121) or the
header's delay level is negative; otherwise to a random retry queue with delay level = the header's, or 3 +
reconsumeTimes when it is 0, through the delay rewrite (``SCHEDULE_TOPIC_XXXX``). As its ``WAIT=false`` says, the put
waits neither for a SYNC_FLUSH flush nor for a SYNC_MASTER's slave (4.9.8
``SendMessageProcessor.asyncConsumerSendMsgBack`` calls ``msgExt.setWaitStoreMsgOK(false)``): a SYNC_MASTER without a
slave answers SUCCESS, not SYSTEM_ERROR. SUCCESS only when the put is PUT_OK; any other outcome answers SYSTEM_ERROR
with the put status name. A stored send-back counts in ``SNDBCK_PUT_NUMS`` under the message's original topic (its
``RETRY_TOPIC`` when it was a retry already), as Java's ``incSendBackNums``.

:meth:`ConsumerSendMsgBackProcessor.send_back_now` is the same send-back for callers on the Trio thread that cannot
wait (the pop paths moving a message to the DLQ with :func:`dead_letter_header`, as RocketMQ's proxy does): appended
without the flush or slave waits, a refusal raised.
"""

from __future__ import annotations

import random
from typing import TYPE_CHECKING, Final

import attrs

from processors.common import FAQ_SUFFIX, RequestRejected, parse_header
from processors.send import DelayRewrite
from remoting.codec.bodies.broker_metadata import SubscriptionGroupConfig
from remoting.codec.codes import RequestCode, ResponseCode
from remoting.codec.command import RemotingCommand
from remoting.codec.errors import MessageDecodeError
from remoting.codec.headers.send import ConsumerSendMsgBackRequestHeader
from remoting.codec.message import MessageExt, MessageRecord, decode_record
from remoting.codec.message_properties import PROPERTY_WAIT, with_properties
from remoting.codec.record_copy import raw_properties, record_from_stored
from remoting.codec.topics import TOPIC_MAX_LENGTH, retry_topic
from remoting.processor import RequestContext
from store.errors import PutRefusedError
from store.metadata_files import PERM_READ, PERM_WRITE, TopicConfig
from store.results import PutStatus

if TYPE_CHECKING:
    from processors.context import BrokerContext

__all__ = ["ConsumerSendMsgBackProcessor", "dead_letter_header"]

PROPERTY_RETRY_TOPIC: Final = "RETRY_TOPIC"
PROPERTY_ORIGIN_MESSAGE_ID: Final = "ORIGIN_MESSAGE_ID"
_PROPERTY_DELAY: Final = "DELAY"
_VERSION_WITH_MAX_RECONSUME_TIMES: Final = 121
#: First retry level when the client lets the broker choose: 3 + reconsumeTimes (10 s, 30 s, 1 m, ...).
_BASE_RETRY_LEVEL: Final = 3
#: TopicSysFlag: bit 0 unit, bit 1 unit-sub (Java's buildSysFlag).
_UNIT_SUB_FLAG: Final = 2
#: A refused put's status as 4.9.8's PutMessageStatus enum spells it, where ours differs (the answer's remark).
_JAVA_STATUS_NAMES: Final = {"CREATE_MAPPED_FILE_FAILED": "CREATE_MAPEDFILE_FAILED"}


def dead_letter_header(
    group: str, offset: int, origin_topic: str, origin_msg_id: str | None = None
) -> ConsumerSendMsgBackRequestHeader:
    """The send-back RocketMQ's proxy makes to move the message at CommitLog ``offset`` into ``%DLQ%<group>``
    (ProducerProcessor.forwardMessageToDeadLetterQueue): delay level -1, maxReconsumeTimes 0."""
    return ConsumerSendMsgBackRequestHeader(
        offset=offset,
        group=group,
        delay_level=-1,
        origin_msg_id=origin_msg_id,
        origin_topic=origin_topic,
        max_reconsume_times=0,
    )


@attrs.frozen
class _Prepared:
    """A checked send-back: the record to store and what the statistics count it as."""

    record: MessageRecord
    origin_topic: str
    to_dlq: bool


class ConsumerSendMsgBackProcessor:
    """Serves code 36 against ``broker``; ``delay_rewrite`` is the delay-level seam (the schedule service's
    ``rewrite``): without one, retries are stored without delay. Stateless between requests."""

    REQUEST_CODES: Final = (RequestCode.CONSUMER_SEND_MSG_BACK,)

    def __init__(
        self, broker: BrokerContext, delay_rewrite: DelayRewrite | None = None, rng: random.Random | None = None
    ) -> None:
        self.broker = broker
        self.delay_rewrite = delay_rewrite
        self._rng = rng or random.Random()

    async def process(self, ctx: RequestContext, request: RemotingCommand) -> RemotingCommand | None:
        try:
            return await self._send_back(request)
        except RequestRejected as rejected:
            return rejected.to_response(request)

    async def _send_back(self, request: RemotingCommand) -> RemotingCommand:
        header = parse_header(ConsumerSendMsgBackRequestHeader, request)
        prepared = self._prepare(header, request.version >= _VERSION_WITH_MAX_RECONSUME_TIMES)
        if prepared is None:
            return request.response(ResponseCode.SUCCESS)
        store, stats, record = self.broker.store, self.broker.stats, prepared.record
        try:
            appended = store.append(record)
        except PutRefusedError as exc:
            status = getattr(exc, "put_status", "UNKNOWN_ERROR")
            raise RequestRejected(ResponseCode.SYSTEM_ERROR, _JAVA_STATUS_NAMES.get(status, status)) from None
        # Marked before the wait: a DLedger leader dispatches the copy at its commit, a scheduler pass before this
        # task resumes, and the put statistics read then must not count it as a sent message (a copy whose wait
        # fails is one the quorum never acknowledged, counted nowhere: broker/stats/puts.py).
        stats.record_send_back_put(record.topic, record.queue_id, appended.queue_offset, prepared.to_dlq)
        status = await store.put_waits.status(appended.end_offset, False)  # WAIT=false: see _copy
        if status is not PutStatus.PUT_OK:
            raise RequestRejected(ResponseCode.SYSTEM_ERROR, status.value)
        stats.record_send_back(header.group, prepared.origin_topic, prepared.to_dlq)
        return request.response(ResponseCode.SUCCESS)

    def send_back_now(self, header: ConsumerSendMsgBackRequestHeader) -> None:
        """The send-back of ``header`` (its ``max_reconsume_times`` honoured when set), appended without waiting for
        the flush or a slave: for the pop paths on the Trio thread, which cannot wait (the proxy's receive forwarding
        a message whose attempts are used up, the revive loop's DLQ fallback). Returns where the answer is SUCCESS
        (a group without retry queues stores nothing); raises ``RequestRejected`` with the answer's code and remark
        otherwise, and the store's ``PutRefusedError`` as is (nothing stored)."""
        prepared = self._prepare(header, True)
        if prepared is not None:
            appended = self.broker.store.append(prepared.record)
            stats, record = self.broker.stats, prepared.record
            stats.record_send_back_put(record.topic, record.queue_id, appended.queue_offset, prepared.to_dlq)
            stats.record_send_back(header.group, prepared.origin_topic, prepared.to_dlq)

    def _prepare(self, header: ConsumerSendMsgBackRequestHeader, honour_max: bool) -> _Prepared | None:
        """The checks, in Java's order, and the record to store; ``None``: SUCCESS with nothing to store (a group
        without retry queues). ``honour_max``: the header's ``max_reconsume_times`` counts when set."""
        group = self._writable_group(header.group)
        if group.retry_queue_nums <= 0:
            return None
        retry = self._retry_topic(header, group)
        msg = self._look_message(header.offset)
        max_times = group.retry_max_times
        if honour_max and header.max_reconsume_times is not None:
            max_times = header.max_reconsume_times
        to_dlq = msg.reconsume_times >= max_times or header.delay_level < 0
        if to_dlq:
            target = self.broker.topics.create_dlq_topic(header.group)  # Java checks no permission of the DLQ
            topic, queue_id, level = target.topic_name, 0, 0
        elif retry is None:
            # Ours: stored later (delayed), the store's refusal of the name used to block that delay level for every
            # group; the DLQ (shorter) may still fit, as in RocketMQ, whose store checks the topic it writes.
            raise RequestRejected(
                ResponseCode.SYSTEM_ERROR, f"MESSAGE_ILLEGAL: the retry topic of group {header.group} is too long"
            )
        else:
            topic = retry.topic_name
            queue_id = self._rng.randrange(max(retry.write_queue_nums, 1))
            level = header.delay_level or _BASE_RETRY_LEVEL + msg.reconsume_times
        record = self._copy(msg, topic, queue_id)
        if level > 0 and self.delay_rewrite is not None:
            record = self.delay_rewrite(record, level)
        return _Prepared(record, msg.properties.get(PROPERTY_RETRY_TOPIC, msg.topic), to_dlq)

    def _writable_group(self, name: str) -> SubscriptionGroupConfig:
        """The group's config (SUBSCRIPTION_GROUP_NOT_EXIST without one), on a broker that takes writes
        (NO_PERMISSION)."""
        broker = self.broker
        group = broker.groups.find(name)
        if group is None:
            raise RequestRejected(
                ResponseCode.SUBSCRIPTION_GROUP_NOT_EXIST, f"subscription group not exist, {name} {FAQ_SUFFIX}"
            )
        if not broker.config.broker_permission & PERM_WRITE:
            raise RequestRejected(
                ResponseCode.NO_PERMISSION, f"the broker[{broker.config.broker_ip1}] sending message is forbidden"
            )
        return group

    def _retry_topic(
        self, header: ConsumerSendMsgBackRequestHeader, group: SubscriptionGroupConfig
    ) -> TopicConfig | None:
        """``%RETRY%group``, created if needed and writable (NO_PERMISSION); ``None`` when its name is too long."""
        retry_name = retry_topic(header.group)
        if len(retry_name.encode()) > TOPIC_MAX_LENGTH:
            return None
        sys_flag = _UNIT_SUB_FLAG if header.unit_mode else 0
        retry = self.broker.topics.create_topic_in_send_back_process(
            retry_name, group.retry_queue_nums, PERM_READ | PERM_WRITE, sys_flag
        )
        _check_writable(retry)
        return retry

    def _copy(self, msg: MessageExt, topic: str, queue_id: int) -> MessageRecord:
        """``msg`` for ``topic``: ``RETRY_TOPIC`` and ``ORIGIN_MESSAGE_ID`` set when absent, ``WAIT=false``,
        ``DELAY`` dropped, ``reconsumeTimes + 1``."""
        updates = {PROPERTY_WAIT: "false"}
        if PROPERTY_RETRY_TOPIC not in msg.properties:
            updates[PROPERTY_RETRY_TOPIC] = msg.topic
        if not msg.properties.get(PROPERTY_ORIGIN_MESSAGE_ID):
            updates[PROPERTY_ORIGIN_MESSAGE_ID] = msg.msg_id
        props = with_properties(raw_properties(msg), updates, frozenset({_PROPERTY_DELAY}))
        try:
            return record_from_stored(msg, topic, queue_id, props, self.broker.store_host, msg.reconsume_times + 1)
        except ValueError as exc:
            raise RequestRejected(ResponseCode.SYSTEM_ERROR, f"MESSAGE_ILLEGAL: {exc}") from None

    def _look_message(self, offset: int) -> MessageExt:
        view = self.broker.store.look_message_by_offset(offset)
        if view is not None:
            try:
                return decode_record(view)
            except MessageDecodeError:
                pass
        raise RequestRejected(ResponseCode.SYSTEM_ERROR, f"look message by offset failed, {offset}")


def _check_writable(config: TopicConfig) -> None:
    if not config.perm & PERM_WRITE:
        raise RequestRejected(
            ResponseCode.NO_PERMISSION, f"the topic[{config.topic_name}] sending message is forbidden"
        )
