"""Client management requests (docs/protocol.md#38-client-management-headers,
docs/protocol.md#74-client-registry-and-heartbeats): HEART_BEAT, UNREGISTER_CLIENT, GET_CONSUMER_LIST_BY_GROUP and
CHECK_CLIENT_CONFIG. RocketMQ's ``ClientManageProcessor`` and the consumer-list half of ``ConsumerManageProcessor``.

Contract: command in, command out, state in the :class:`~broker.context.BrokerContext` managers. A heartbeat
auto-creates each consumer group's subscription config (when allowed) and its ``%RETRY%group`` topic, registers
producers and consumers under the request's connection, and answers SUCCESS stamped with our version (409): Java
clients remember it as the broker version. An empty consumer group answers SYSTEM_ERROR
``no consumer for this group, <g>`` (not an empty list), as Java does.

CHECK_CLIENT_CONFIG (sent by Java consumers at start for SQL92 subscriptions) compiles an SQL92 expression and answers
SUBSCRIPTION_PARSE_FAILED with the parser's message when it is malformed, or for an unknown expression type. With
``enablePropertyFilter`` off any non-TAG subscription answers SYSTEM_ERROR ``The broker does not support consumer to
filter message by <type>``, as Java's ``ClientManageProcessor.checkClientConfig`` does (checked before parsing).

Errors: a missing header field or a body that does not decode answers SYSTEM_ERROR with the decoder's message.
"""

from __future__ import annotations

import logging
from typing import Final

from processors.context import BrokerContext
from processors.filter import Sql92Filter, Sql92ParseError, compile_sql92
from processors.filter.cache import compile_offloaded
from remoting.codec.bodies import EXPRESSION_SQL92, EXPRESSION_TAG, ConsumerListBody, HeartbeatData
from remoting.codec.bodies.admin import CheckClientRequestBody
from remoting.codec.codes import RequestCode, ResponseCode
from remoting.codec.command import RemotingCommand
from remoting.codec.errors import CodecError
from remoting.codec.headers import GetConsumerListByGroupRequestHeader, UnregisterClientRequestHeader
from remoting.codec.topics import retry_topic
from remoting.dispatch import not_supported_remark
from remoting.processor import RequestContext

log = logging.getLogger(__name__)

#: Codes served here; the controller routes 34 to the heartbeat pool, 35/46 to client-manage, 38 to consumer-manage.
REQUEST_CODES: Final = (
    RequestCode.HEART_BEAT,
    RequestCode.UNREGISTER_CLIENT,
    RequestCode.GET_CONSUMER_LIST_BY_GROUP,
    RequestCode.CHECK_CLIENT_CONFIG,
)


class ClientManageProcessor:
    """Serves :data:`REQUEST_CODES` against one broker context."""

    REQUEST_CODES = REQUEST_CODES

    def __init__(self, broker: BrokerContext) -> None:
        self.broker = broker

    async def process(self, ctx: RequestContext, request: RemotingCommand) -> RemotingCommand | None:
        try:
            if request.code == RequestCode.HEART_BEAT:
                data = HeartbeatData.decode(request.body)
                await self._compile_sql92(data)
                return self.heart_beat(ctx, request, data)
            if request.code == RequestCode.UNREGISTER_CLIENT:
                return self.unregister_client(ctx, request)
            if request.code == RequestCode.GET_CONSUMER_LIST_BY_GROUP:
                return self.consumer_list(request)
            if request.code == RequestCode.CHECK_CLIENT_CONFIG:
                body = CheckClientRequestBody.decode(request.body)
                sub = body.subscription_data
                compiled = None
                if sub is not None and sub.expression_type == EXPRESSION_SQL92 and self._filtering:
                    compiled = await compile_offloaded(sub.sub_string)
                return self.check_client_config(request, body, compiled)
        except CodecError as exc:
            return request.response(ResponseCode.SYSTEM_ERROR, str(exc))
        return request.response(ResponseCode.REQUEST_CODE_NOT_SUPPORTED, not_supported_remark(request.code))

    @property
    def _filtering(self) -> bool:
        return self.broker.config.enable_property_filter

    async def _compile_sql92(self, data: HeartbeatData) -> None:
        """Compile the heartbeat's long SQL92 expressions off the event loop, as ConsumerFilterManager.register builds
        them on the heartbeat thread (broker/src/main/java/org/apache/rocketmq/broker/filter/
        ConsumerFilterManager.java): the pulls (and ``filterSupportRetry``'s retry matching) then find them compiled."""
        if not self._filtering:
            return
        for consumer in data.consumer_data_set:
            for sub in consumer.subscription_data_set:
                if sub.expression_type == EXPRESSION_SQL92:
                    await compile_offloaded(sub.sub_string)

    def heart_beat(
        self, ctx: RequestContext, request: RemotingCommand, data: HeartbeatData | None = None
    ) -> RemotingCommand:
        if data is None:
            data = HeartbeatData.decode(request.body)
        if ctx.connection.closed:
            # Queued before its connection closed (the registry already dropped the channel): registering it again
            # would list a dead client, and rebalance with it, until the 120 s scan.
            return request.response(ResponseCode.SUCCESS)
        broker = self.broker
        clients = broker.clients
        info = clients.channel_info(ctx.connection, data.client_id, request.language, request.version)
        ctx.connection.attributes["client_id"] = data.client_id
        for consumer in data.consumer_data_set:
            group_config = broker.groups.find(consumer.group_name)
            notify = True
            if group_config is not None:
                notify = group_config.notify_consumer_ids_changed_enable
                # Java marks unit-mode retry topics with the unit sub flag (TopicSysFlag bit 1).
                sys_flag = 0b10 if consumer.unit_mode else 0
                retry = retry_topic(consumer.group_name)
                if broker.topics.get(retry) is None:
                    broker.topics.create_topic_in_send_back_process(
                        retry, group_config.retry_queue_nums, topic_sys_flag=sys_flag
                    )
            changed = clients.register_consumer(
                consumer.group_name,
                info,
                consumer.consume_type,
                consumer.message_model,
                consumer.consume_from_where,
                consumer.subscription_data_set,
                notify,
            )
            if changed:
                log.info("consumer group %s changed by %s", consumer.group_name, data.client_id)
        for producer in data.producer_data_set:
            clients.register_producer(producer.group_name, info)
        return request.response(ResponseCode.SUCCESS)

    def unregister_client(self, ctx: RequestContext, request: RemotingCommand) -> RemotingCommand:
        header = UnregisterClientRequestHeader.from_ext_fields(request.ext_fields)
        clients = self.broker.clients
        if header.producer_group:
            clients.unregister_producer(header.producer_group, ctx.connection)
        if header.consumer_group:
            group_config = self.broker.groups.get(header.consumer_group)
            notify = group_config is None or group_config.notify_consumer_ids_changed_enable
            clients.unregister_consumer(header.consumer_group, ctx.connection, notify)
        return request.response(ResponseCode.SUCCESS)

    def consumer_list(self, request: RemotingCommand) -> RemotingCommand:
        header = GetConsumerListByGroupRequestHeader.from_ext_fields(request.ext_fields)
        ids = self.broker.clients.consumer_ids(header.consumer_group)
        if not ids:
            return request.response(ResponseCode.SYSTEM_ERROR, f"no consumer for this group, {header.consumer_group}")
        return request.response(ResponseCode.SUCCESS, body=ConsumerListBody(ids).encode())

    def check_client_config(
        self,
        request: RemotingCommand,
        body: CheckClientRequestBody | None = None,
        compiled: Sql92Filter | Sql92ParseError | None = None,
    ) -> RemotingCommand:
        """``compiled``: what the subscription's expression compiled to off the loop, if it did."""
        if body is None:
            body = CheckClientRequestBody.decode(request.body)
        sub = body.subscription_data
        property_filter = self.broker.config.enable_property_filter
        if sub is not None and sub.expression_type != EXPRESSION_TAG and not property_filter:
            return request.response(
                ResponseCode.SYSTEM_ERROR,
                f"The broker does not support consumer to filter message by {sub.expression_type}",
            )
        if sub is not None and sub.expression_type not in (EXPRESSION_TAG, EXPRESSION_SQL92):
            return request.response(
                ResponseCode.SUBSCRIPTION_PARSE_FAILED, f"unknown expression type {sub.expression_type}"
            )
        if sub is not None and sub.expression_type == EXPRESSION_SQL92:
            if isinstance(compiled, Sql92ParseError):
                return request.response(ResponseCode.SUBSCRIPTION_PARSE_FAILED, str(compiled))
            if compiled is None:
                try:
                    compile_sql92(sub.sub_string)
                except Sql92ParseError as error:
                    return request.response(ResponseCode.SUBSCRIPTION_PARSE_FAILED, str(error))
        return request.response(ResponseCode.SUCCESS)
