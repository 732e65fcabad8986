"""Consume-progress operations (the ``mqadmin`` offset tools and the dashboards' consumer views):
:class:`ConsumeOpsProcessor` serves, as RocketMQ 4.9.8's ``AdminBrokerProcessor`` does,

- QUERY_CONSUME_TIME_SPAN (303): per write queue of a topic, the store times of its oldest and newest message, the
  time of the last message a group consumed, and how long the next unconsumed message has waited;
- QUERY_CORRECTION_OFFSET (308): per queue, the smallest committed offset of every group on a topic (groups in
  ``filterGroups`` left out), or ``Long.MAX_VALUE`` where that minimum lies beyond ``compareGroup``'s offset;
- CLONE_GROUP_OFFSET (314): replace another group's committed offsets of each topic with a copy of one group's
  (``mqadmin cloneGroupOffset``; ``ConsumerOffsetManager.cloneOffset``: queues only the destination had are dropped);
- INVOKE_BROKER_TO_GET_CONSUMER_STATUS (223): ask every online consumer of a group (or the one named) for its
  offsets of a topic (GET_CONSUMER_STATUS_FROM_CLIENT, 221) and answer them per client id;
- RocketMQ 5's QUERY_TOPICS_BY_CONSUMER (343): the topics a group has offsets on, with the broker's address, and
  QUERY_SUBSCRIPTION_BY_CONSUMER (345): an online group's subscription of a topic (none when it has none), as 5.3.3's
  ``queryTopicsByConsumer`` and ``querySubscriptionByConsumer`` (DefaultMQAdminExt's queries of the same names).

Deliberate differences from Java: QUERY_CORRECTION_OFFSET does not drop the filtered groups' offsets from the
broker's table (Java's loop removes them from the live key set); CLONE_GROUP_OFFSET with no topic clones every topic
of the source group (Java passes the absent topic on and clones nothing).

Errors: a missing header field answers SYSTEM_ERROR naming it; an unknown topic TOPIC_NOT_EXIST (303); a group
without online consumers SYSTEM_ERROR with Java's remark (223). A consumer that fails to answer 221 within 5 s (one
that stopped reading its socket too) is left out of the table, as in Java.
"""

from __future__ import annotations

import logging
import time
from typing import TYPE_CHECKING, Final

from processors.common import RequestRejected, parse_header
from remoting.codec.bodies import MessageQueue, TopicList
from remoting.codec.bodies.ops import (
    ConsumerStatusBody,
    QueryConsumeTimeSpanBody,
    QueryCorrectionOffsetBody,
    QuerySubscriptionResponseBody,
    QueueTimeSpan,
)
from remoting.codec.codes import RequestCode, ResponseCode
from remoting.codec.command import RemotingCommand, request
from remoting.codec.errors import CodecError
from remoting.codec.headers import (
    GetConsumerStatusRequestHeader,
    QuerySubscriptionByConsumerRequestHeader,
    QueryTopicsByConsumerRequestHeader,
)
from remoting.codec.headers.ops import (
    CloneGroupOffsetRequestHeader,
    QueryConsumeTimeSpanRequestHeader,
    QueryCorrectionOffsetHeader,
)
from remoting.errors import RemotingError
from remoting.processor import RequestContext

if TYPE_CHECKING:
    from processors.context import BrokerContext

__all__ = ["ConsumeOpsProcessor"]

log = logging.getLogger(__name__)

#: Java's ``Long.MAX_VALUE``: QUERY_CORRECTION_OFFSET's "no correction" marker.
LONG_MAX: Final = (1 << 63) - 1
#: How long a consumer may take to answer GET_CONSUMER_STATUS_FROM_CLIENT (Java's ``invokeSync`` timeout).
CLIENT_TIMEOUT: Final = 5.0


class ConsumeOpsProcessor:
    """Serves :attr:`REQUEST_CODES` against the broker's offset table, store and client registry (admin pool)."""

    REQUEST_CODES: Final = (
        RequestCode.QUERY_CONSUME_TIME_SPAN,
        RequestCode.QUERY_CORRECTION_OFFSET,
        RequestCode.CLONE_GROUP_OFFSET,
        RequestCode.INVOKE_BROKER_TO_GET_CONSUMER_STATUS,
        RequestCode.QUERY_TOPICS_BY_CONSUMER,
        RequestCode.QUERY_SUBSCRIPTION_BY_CONSUMER,
    )

    def __init__(self, broker: BrokerContext) -> None:
        self.broker = broker

    async def process(self, ctx: RequestContext, request: RemotingCommand) -> RemotingCommand | None:
        try:
            if request.code == RequestCode.QUERY_CONSUME_TIME_SPAN:
                return self.query_consume_time_span(request)
            if request.code == RequestCode.QUERY_CORRECTION_OFFSET:
                return self.query_correction_offset(request)
            if request.code == RequestCode.CLONE_GROUP_OFFSET:
                return self.clone_group_offset(request)
            if request.code == RequestCode.INVOKE_BROKER_TO_GET_CONSUMER_STATUS:
                return await self.consumer_status(request)
            if request.code == RequestCode.QUERY_TOPICS_BY_CONSUMER:
                return self.topics_by_consumer(request)
            if request.code == RequestCode.QUERY_SUBSCRIPTION_BY_CONSUMER:
                return self.subscription_by_consumer(request)
        except RequestRejected as rejected:
            return rejected.to_response(request)
        return request.response(ResponseCode.REQUEST_CODE_NOT_SUPPORTED, f" request type {request.code} not supported")

    def query_consume_time_span(self, request: RemotingCommand) -> RemotingCommand:
        header = parse_header(QueryConsumeTimeSpanRequestHeader, request)
        broker, topic = self.broker, header.topic
        config = broker.topics.get(topic)
        if config is None:
            return request.response(ResponseCode.TOPIC_NOT_EXIST, f"topic[{topic}] not exist")
        store = broker.store
        now = int(time.time() * 1000)
        spans = []
        for queue_id in range(config.write_queue_nums):
            min_time = _or_minus_one(store.earliest_message_time(topic, queue_id))
            max_offset = store.max_offset_in_queue(topic, queue_id)
            max_time = _or_minus_one(store.message_store_timestamp(topic, queue_id, max_offset - 1))
            consumer_offset = broker.offsets.query(header.group, topic, queue_id)
            consume_time = min_time
            if consumer_offset > 0:
                consume_time = _or_minus_one(store.message_store_timestamp(topic, queue_id, consumer_offset - 1))
            delay = 0
            if consumer_offset < max_offset:
                next_offset = max(consumer_offset, store.min_offset_in_queue(topic, queue_id))
                next_time = store.message_store_timestamp(topic, queue_id, next_offset)
                delay = 0 if next_time is None else now - next_time
            mq = MessageQueue(topic, broker.config.broker_name, queue_id)
            spans.append(QueueTimeSpan(mq, min_time, max_time, consume_time, delay))
        return request.response(ResponseCode.SUCCESS, body=QueryConsumeTimeSpanBody(tuple(spans)).encode())

    def query_correction_offset(self, request: RemotingCommand) -> RemotingCommand:
        header = parse_header(QueryCorrectionOffsetHeader, request)
        offsets, topic = self.broker.offsets, header.topic
        skipped = {g.strip() for g in (header.filter_groups or "").split(",") if g.strip()}
        correction: dict[int, int] = {}
        for group in sorted(offsets.groups_of_topic(topic) - skipped):
            for queue_id, offset in offsets.offsets_of(group, topic).items():
                if offset >= self.broker.store.min_offset_in_queue(topic, queue_id):
                    correction[queue_id] = min(offset, correction.get(queue_id, LONG_MAX))
        for queue_id, compare in offsets.offsets_of(header.compare_group, topic).items():
            if queue_id in correction and correction[queue_id] > compare:
                correction[queue_id] = LONG_MAX
        return request.response(ResponseCode.SUCCESS, body=QueryCorrectionOffsetBody(correction).encode())

    def clone_group_offset(self, request: RemotingCommand) -> RemotingCommand:
        header = parse_header(CloneGroupOffsetRequestHeader, request)
        broker, src = self.broker, header.src_group
        topics = {header.topic} if header.topic and header.topic.strip() else broker.offsets.topics_of_group(src)
        for topic in sorted(topics):
            if broker.topics.get(topic) is None:
                log.warning("[cloneGroupOffset] topic config not exist, %s", topic)
                continue
            if not header.offline and broker.clients.not_subscribed(src, topic):
                log.warning("[cloneGroupOffset] the consumer group[%s], topic[%s] not exist", src, topic)
                continue
            broker.offsets.clone(src, header.dest_group, topic)
        return request.response(ResponseCode.SUCCESS)

    def topics_by_consumer(self, request: RemotingCommand) -> RemotingCommand:
        """QUERY_TOPICS_BY_CONSUMER: ``whichTopicByConsumer`` with the broker's address."""
        group = parse_header(QueryTopicsByConsumerRequestHeader, request).group
        topics = sorted(self.broker.offsets.topics_of_group(group))
        return request.response(ResponseCode.SUCCESS, body=TopicList(topics, self.broker.broker_addr).encode())

    def subscription_by_consumer(self, request: RemotingCommand) -> RemotingCommand:
        """QUERY_SUBSCRIPTION_BY_CONSUMER: ``ConsumerManager.findSubscriptionData`` of the group and topic."""
        header = parse_header(QuerySubscriptionByConsumerRequestHeader, request)
        found = None if header.topic is None else self.broker.clients.find_subscription(header.group, header.topic)
        body = QuerySubscriptionResponseBody(header.group, header.topic, found)
        return request.response(ResponseCode.SUCCESS, body=body.encode())

    async def consumer_status(self, admin: RemotingCommand) -> RemotingCommand:
        """INVOKE_BROKER_TO_GET_CONSUMER_STATUS: Java's ``Broker2Client.getConsumeStatus``."""
        header = parse_header(GetConsumerStatusRequestHeader, admin)
        info = self.broker.clients.consumer_group(header.group)
        if info is None or not info.channels:
            remark = f"No Any Consumer online in the consumer group: [{header.group}]"
            return admin.response(ResponseCode.SYSTEM_ERROR, remark)
        ask = GetConsumerStatusRequestHeader(topic=header.topic, group=header.group)
        table: dict[str, dict[MessageQueue, int]] = {}
        wanted = (header.client_addr or "").strip()
        for channel in list(info.channels.values()):
            if wanted and wanted != channel.client_id:
                continue
            try:
                answer = await channel.connection.invoke(
                    request(RequestCode.GET_CONSUMER_STATUS_FROM_CLIENT, ask.to_ext_fields()), CLIENT_TIMEOUT
                )
                if answer.code == ResponseCode.SUCCESS and answer.body:
                    table[channel.client_id] = dict(ConsumerStatusBody.decode(answer.body).message_queue_table)
            except (RemotingError, CodecError) as exc:
                log.warning("[get-consumer-status] %s of %s failed: %s", channel.client_id, header.group, exc)
        return admin.response(ResponseCode.SUCCESS, body=ConsumerStatusBody(consumer_table=table).encode())


def _or_minus_one(value: int | None) -> int:
    return -1 if value is None else value
