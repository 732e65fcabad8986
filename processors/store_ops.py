"""Broker inspection and maintenance requests of ``mqadmin`` and the dashboards: :class:`StoreOpsProcessor` serves,
as RocketMQ 4.9.8's ``AdminBrokerProcessor`` does,

- GET_ALL_DELAY_OFFSET (45): the delay-level schedule's progress, ``delayOffset.json``'s text;
- CLEAN_EXPIRED_CONSUMEQUEUE (306) and DELETE_EXPIRED_COMMITLOG (329): :mod:`store.maintenance`;
- QUERY_CONSUME_QUEUE (321): raw entries of one ConsumeQueue, with a group's subscription when one is named;
- RESUME_CHECK_HALF_MESSAGE (323): put a half message (usually one the check-back gave up on) back into the half
  topic with ``TRANSACTION_CHECK_TIMES`` = 0, so the check-back asks its producer again;
- GET_ALL_PRODUCER_INFO (328): every producer connection per group (rocketmq-exporter's producer metrics);
- GET_TOPIC_CONFIG (351, RocketMQ 5): one topic's config, which rocketmq-dashboard's topic view reads.

GET_ALL_DELAY_OFFSET is a processor method plus one registration line on purpose: replication's slave sync asks it
too. Errors: a missing header field SYSTEM_ERROR naming it; an unknown queue SYSTEM_ERROR ``<q>@<topic> is not
exist!`` (321, Java's remark); an unknown topic TOPIC_NOT_EXIST (351); an offset msgId that names no message, or a
store that refuses the put, SYSTEM_ERROR with Java's remarks (323).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Final

import trio

from processors.common import RequestRejected, parse_header
from processors.transaction_bridge import TransactionalMessageBridge
from remoting.codec.bodies._json import dumps
from remoting.codec.bodies.ops import (
    ConsumeQueueData,
    ProducerInfo,
    ProducerTableInfo,
    QueryConsumeQueueResponseBody,
)
from remoting.codec.codes import RequestCode, ResponseCode
from remoting.codec.command import RemotingCommand
from remoting.codec.errors import MessageDecodeError
from remoting.codec.headers.ops import (
    GetTopicConfigRequestHeader,
    QueryConsumeQueueRequestHeader,
    ResumeCheckHalfMessageRequestHeader,
)
from remoting.codec.message import decode_record
from remoting.codec.msgid import decode_offset_msg_id
from remoting.processor import RequestContext
from store.errors import StoreError
from store.maintenance import clean_expired_consume_queues, request_manual_delete
from store.metadata_files import encode_delay_offsets

if TYPE_CHECKING:
    from processors.context import BrokerContext

__all__ = ["StoreOpsProcessor"]

log = logging.getLogger(__name__)

_RESUME_FAILED: Final = "Put message back to RMQ_SYS_TRANS_HALF_TOPIC failed."
_RESUME_ERROR: Final = "Exception was thrown when putting message back to RMQ_SYS_TRANS_HALF_TOPIC."


class StoreOpsProcessor:
    """Serves :attr:`REQUEST_CODES` on the admin pool. ``delay_offsets`` returns the schedule's level -> offset
    table (GET_ALL_DELAY_OFFSET answers SYSTEM_ERROR without one); ``bridge`` writes resumed half messages."""

    #: GET_ALL_DELAY_OFFSET (45) is registered on its own line (see the module docstring), so it is not here.
    REQUEST_CODES: Final = (
        RequestCode.CLEAN_EXPIRED_CONSUMEQUEUE,
        RequestCode.DELETE_EXPIRED_COMMITLOG,
        RequestCode.QUERY_CONSUME_QUEUE,
        RequestCode.RESUME_CHECK_HALF_MESSAGE,
        RequestCode.GET_ALL_PRODUCER_INFO,
        RequestCode.GET_TOPIC_CONFIG,
    )

    def __init__(
        self,
        broker: BrokerContext,
        *,
        delay_offsets: Callable[[], Mapping[int, int]] | None = None,
        bridge: TransactionalMessageBridge | None = None,
    ) -> None:
        self.broker = broker
        self.delay_offsets = delay_offsets
        self.bridge = bridge or TransactionalMessageBridge(broker)

    async def process(self, ctx: RequestContext, request: RemotingCommand) -> RemotingCommand | None:
        code = request.code
        try:
            if code == RequestCode.GET_ALL_DELAY_OFFSET:
                return self.all_delay_offset(request)
            if code == RequestCode.CLEAN_EXPIRED_CONSUMEQUEUE:
                await clean_expired_consume_queues(self.broker.store)
                return request.response(ResponseCode.SUCCESS)
            if code == RequestCode.DELETE_EXPIRED_COMMITLOG:
                request_manual_delete(self.broker.store)
                return request.response(ResponseCode.SUCCESS)
            if code == RequestCode.QUERY_CONSUME_QUEUE:
                return self.query_consume_queue(request)
            if code == RequestCode.RESUME_CHECK_HALF_MESSAGE:
                return self.resume_check_half_message(request)
            if code == RequestCode.GET_ALL_PRODUCER_INFO:
                return self.all_producer_info(request)
            if code == RequestCode.GET_TOPIC_CONFIG:
                return self.topic_config(request)
        except RequestRejected as rejected:
            return rejected.to_response(request)
        return request.response(ResponseCode.REQUEST_CODE_NOT_SUPPORTED, f" request type {code} not supported")

    def all_delay_offset(self, request: RemotingCommand) -> RemotingCommand:
        """GET_ALL_DELAY_OFFSET: ``{"offsetTable": {level: offset}}``, as ``delayOffset.json`` holds it."""
        if self.delay_offsets is None:
            return request.response(ResponseCode.SYSTEM_ERROR, "No delay offset in this broker")
        return request.response(ResponseCode.SUCCESS, body=encode_delay_offsets(dict(self.delay_offsets())))

    def query_consume_queue(self, request: RemotingCommand) -> RemotingCommand:
        header = parse_header(QueryConsumeQueueRequestHeader, request)
        topic, queue_id = header.topic, header.queue_id
        cq = self.broker.store.consume_queues.get((topic, queue_id))
        if cq is None:
            return request.response(ResponseCode.SYSTEM_ERROR, f"{queue_id}@{topic} is not exist!")
        subscription, filter_data = None, None
        if header.consumer_group is not None:
            subscription = self.broker.clients.find_subscription(header.consumer_group, topic)
            if subscription is None:
                filter_data = f"{header.consumer_group}@{topic} is not online!"
            else:
                filter_data = _filter_data(header.consumer_group, topic, subscription.expression_type,
                                           subscription.sub_string, subscription.sub_version)  # fmt: skip
        body = QueryConsumeQueueResponseBody(cq.max_offset, cq.min_offset, None, subscription, filter_data)
        entries = (
            cq.entries(header.index, max(0, header.count)) if cq.min_offset <= header.index < cq.max_offset else None
        )
        if entries is None:
            remark = f"Index {header.index} of {queue_id}@{topic} is not exist!"
            return request.response(ResponseCode.SUCCESS, remark, body=body.encode())
        queue_data = tuple(ConsumeQueueData(phy, size, tags) for phy, size, tags in entries)
        body = QueryConsumeQueueResponseBody(cq.max_offset, cq.min_offset, queue_data, subscription, filter_data)
        return request.response(ResponseCode.SUCCESS, body=body.encode())

    def resume_check_half_message(self, request: RemotingCommand) -> RemotingCommand:
        header = parse_header(ResumeCheckHalfMessageRequestHeader, request)
        try:
            offset = decode_offset_msg_id(header.msg_id or "").phy_offset
            view = self.broker.store.look_message_by_offset(offset)
            if view is None:
                return request.response(ResponseCode.SYSTEM_ERROR, _RESUME_ERROR)
            message = decode_record(view)
            self.bridge.renew_half(message, 0)
        except (MessageDecodeError, ValueError):
            return request.response(ResponseCode.SYSTEM_ERROR, _RESUME_ERROR)
        except StoreError as exc:
            log.error("resume of half message %s refused by the store: %s", header.msg_id, exc)
            return request.response(ResponseCode.SYSTEM_ERROR, _RESUME_FAILED)
        log.info("Put message back to RMQ_SYS_TRANS_HALF_TOPIC. real topic=%s", message.properties.get("REAL_TOPIC"))
        return request.response(ResponseCode.SUCCESS)

    def all_producer_info(self, request: RemotingCommand) -> RemotingCommand:
        clients = self.broker.clients
        now_ms, now = int(time.time() * 1000), trio.current_time()
        data = {}
        # Only groups with a connection: 4.9.8's ProducerManager.getProducerTable builds its map from the channels
        # (broker/src/main/java/org/apache/rocketmq/broker/client/ProducerManager.java), so a group kept empty after
        # its connections closed is not named.
        for group in sorted(g for g in clients.producer_groups if clients.producer_connections(g)):
            data[group] = tuple(
                ProducerInfo(
                    info.client_id,
                    "/" + info.client_addr,
                    info.language.name,
                    info.version,
                    now_ms - int((now - info.last_update) * 1000),
                )
                for info in clients.producer_connections(group)
            )
        return request.response(ResponseCode.SUCCESS, body=ProducerTableInfo(data).encode())

    def topic_config(self, request: RemotingCommand) -> RemotingCommand:
        """GET_TOPIC_CONFIG: RocketMQ 5's ``TopicConfigAndQueueMapping`` (no mapping detail: no static topics)."""
        topic = parse_header(GetTopicConfigRequestHeader, request).topic
        config = self.broker.topics.get(topic)
        if config is None:
            return request.response(ResponseCode.TOPIC_NOT_EXIST, f"No topic in this broker. topic: {topic}")
        body = {**config.to_json(), "attributes": dict(config.attributes)}
        return request.response(ResponseCode.SUCCESS, body=dumps(body))


def _filter_data(group: str, topic: str, expression_type: str, expression: str, version: int) -> str:
    """Java prints the group's ConsumerFilterData as JSON: ``null`` for tag subscriptions, which have none."""
    if expression_type == "TAG":
        return "null"
    return dumps(
        {
            "consumerGroup": group,
            "expression": expression,
            "expressionType": expression_type,
            "clientVersion": version,
            "topic": topic,
        }
    ).decode()
