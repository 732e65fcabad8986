"""The name server's request processor: RocketMQ's ``DefaultRequestProcessor``
(docs/protocol.md#314-name-server-headers).

Command in, command out: :meth:`NamesrvProcessor.handle` needs no socket, only the request and (for REGISTER_BROKER)
an object identifying the broker's connection, so a closed connection can drop the broker at once.

Errors: a missing or malformed header field or body answers ``SYSTEM_ERROR`` (1) with the decoder's message as
remark; a REGISTER_BROKER whose ``bodyCrc32`` does not match answers ``SYSTEM_ERROR`` ``crc32 not match``; other
exceptions propagate to :func:`remoting.processor.run_processor`, which answers ``SYSTEM_ERROR`` too.

Deliberate difference from Java: the Java name server stays silent on a request code it does not know (the client
waits for its timeout); this one answers ``REQUEST_CODE_NOT_SUPPORTED`` (3) with the broker's remark
``" request type <code> not supported"``, so a caller learns at once.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any, Final

import attrs
import trio

from namesrv.config_admin import ConfigRefused, NamesrvConfigAdmin
from namesrv.kv_config import ORDER_TOPIC_CONFIG, KVConfigManager
from namesrv.product_env import ProductEnvRoutes
from namesrv.route_table import RouteTable
from remoting.codec.bodies import (
    RegisterBrokerBody,
    TopicConfigSerializeWrapper,
    TopicList,
    body_crc32,
    decode_data_version,
    encode_data_version,
)
from remoting.codec.codes import RequestCode, ResponseCode
from remoting.codec.command import RemotingCommand
from remoting.codec.errors import CodecError
from remoting.codec.headers import (
    AddWritePermOfBrokerRequestHeader,
    AddWritePermOfBrokerResponseHeader,
    DeleteKVConfigRequestHeader,
    DeleteTopicFromNamesrvRequestHeader,
    GetKVConfigRequestHeader,
    GetKVConfigResponseHeader,
    GetKVListByNamespaceRequestHeader,
    GetRouteInfoRequestHeader,
    GetTopicsByClusterRequestHeader,
    PutKVConfigRequestHeader,
    QueryDataVersionRequestHeader,
    QueryDataVersionResponseHeader,
    RegisterBrokerRequestHeader,
    RegisterBrokerResponseHeader,
    UnRegisterBrokerRequestHeader,
    WipeWritePermOfBrokerRequestHeader,
    WipeWritePermOfBrokerResponseHeader,
)
from remoting.codec.java_properties import STRING2PROPERTIES_ERROR, PropertiesError, UnreadableProperties
from remoting.dispatch import not_supported_remark
from remoting.processor import RequestContext

#: Brokers at or above V3_0_11 send a RegisterBrokerBody; older ones the bare topic config wrapper.
V3_0_11: Final = 37

FAQ_APPLY_TOPIC_URL: Final = "http://rocketmq.apache.org/docs/faq/"


def topic_not_exist_remark(topic: str) -> str:
    """Java's remark for a topic without a route, FAQ hint included (clients show it to users)."""
    return f"No topic route info in name server for the topic: {topic}\nSee {FAQ_APPLY_TOPIC_URL} for further details."


_Handler = Callable[["NamesrvProcessor", RemotingCommand, Any], Awaitable[RemotingCommand]]


class NamesrvProcessor:
    """Serves every name-server request code against one :class:`RouteTable` and one :class:`KVConfigManager`.

    ``clock`` returns seconds on the route table's time line (Trio's clock by default, so liveness follows
    ``autojump_clock`` in tests).
    """

    def __init__(
        self,
        route_table: RouteTable,
        kv_config: KVConfigManager,
        *,
        order_message_enable: bool = False,
        clock: Callable[[], float] = trio.current_time,
        config_admin: NamesrvConfigAdmin | None = None,
        cluster_test: bool = False,
    ) -> None:
        self.route_table = route_table
        self.kv_config = kv_config
        self.order_message_enable = order_message_enable
        #: ``clusterTest`` (namesrv/.../processor/ClusterTestRequestProcessor.java): routes carry their order config
        #: whatever ``orderMessageEnable`` says, and a miss is asked of ``product_env`` (set by the server).
        self.cluster_test = cluster_test
        self.product_env: ProductEnvRoutes | None = None
        self._clock = clock
        self.config_admin = config_admin

    @staticmethod
    def request_codes() -> list[int]:
        return sorted(_HANDLERS)

    async def process(self, ctx: RequestContext, request: RemotingCommand) -> RemotingCommand | None:
        return await self.handle(request, ctx.connection)

    async def handle(self, request: RemotingCommand, connection: Any = None) -> RemotingCommand:
        handler = _HANDLERS.get(request.code)
        if handler is None:
            return request.response(ResponseCode.REQUEST_CODE_NOT_SUPPORTED, not_supported_remark(request.code))
        try:
            return await handler(self, request, connection)
        except CodecError as exc:
            return request.response(ResponseCode.SYSTEM_ERROR, str(exc))

    # -- brokers ----------------------------------------------------------------------------------------------------

    async def _register_broker(self, request: RemotingCommand, connection: Any) -> RemotingCommand:
        header = RegisterBrokerRequestHeader.from_ext_fields(request.ext_fields)
        body = request.body
        if header.body_crc32 != 0 and body_crc32(body) != header.body_crc32:
            return request.response(ResponseCode.SYSTEM_ERROR, "crc32 not match")
        wrapper, filter_servers = _decode_register_body(request, header.compressed)
        result = self.route_table.register_broker(
            cluster_name=header.cluster_name,
            broker_addr=header.broker_addr,
            broker_name=header.broker_name,
            broker_id=header.broker_id,
            ha_server_addr=header.ha_server_addr,
            topic_config_wrapper=wrapper,
            filter_server_list=filter_servers,
            connection=connection,
            now=self._clock(),
        )
        if getattr(connection, "closed", False):
            # The close listener already ran for this connection; without this the broker would linger 120 s.
            self.route_table.on_connection_closed(connection)
        response_header = RegisterBrokerResponseHeader(result.ha_server_addr, result.master_addr)
        order_conf = self.kv_config.get_kv_list_by_namespace(ORDER_TOPIC_CONFIG)
        return request.response(
            ResponseCode.SUCCESS,
            ext_fields=response_header.to_ext_fields(),
            body=b"" if order_conf is None else order_conf.encode(),
        )

    async def _unregister_broker(self, request: RemotingCommand, connection: Any) -> RemotingCommand:
        header = UnRegisterBrokerRequestHeader.from_ext_fields(request.ext_fields)
        self.route_table.unregister_broker(
            cluster_name=header.cluster_name,
            broker_addr=header.broker_addr,
            broker_name=header.broker_name,
            broker_id=header.broker_id,
        )
        return request.response(ResponseCode.SUCCESS)

    async def _query_data_version(self, request: RemotingCommand, connection: Any) -> RemotingCommand:
        header = QueryDataVersionRequestHeader.from_ext_fields(request.ext_fields)
        version = decode_data_version(request.body)
        changed = self.route_table.is_broker_topic_config_changed(header.broker_addr, version)
        if not changed:
            self.route_table.update_broker_info_update_timestamp(header.broker_addr, self._clock())
        stored = self.route_table.query_broker_topic_config(header.broker_addr)
        return request.response(
            ResponseCode.SUCCESS,
            ext_fields=QueryDataVersionResponseHeader(changed).to_ext_fields(),
            body=b"" if stored is None else encode_data_version(stored),
        )

    async def _wipe_write_perm(self, request: RemotingCommand, connection: Any) -> RemotingCommand:
        header = WipeWritePermOfBrokerRequestHeader.from_ext_fields(request.ext_fields)
        count = self.route_table.wipe_write_perm_of_broker(header.broker_name)
        return request.response(
            ResponseCode.SUCCESS, ext_fields=WipeWritePermOfBrokerResponseHeader(count).to_ext_fields()
        )

    async def _add_write_perm(self, request: RemotingCommand, connection: Any) -> RemotingCommand:
        header = AddWritePermOfBrokerRequestHeader.from_ext_fields(request.ext_fields)
        count = self.route_table.add_write_perm_of_broker(header.broker_name)
        return request.response(
            ResponseCode.SUCCESS, ext_fields=AddWritePermOfBrokerResponseHeader(count).to_ext_fields()
        )

    # -- routes and topics ------------------------------------------------------------------------------------------

    async def _get_route_info(self, request: RemotingCommand, connection: Any) -> RemotingCommand:
        header = GetRouteInfoRequestHeader.from_ext_fields(request.ext_fields)
        route = self.route_table.pickup_topic_route_data(header.topic)
        if route is None:
            if self.cluster_test and self.product_env is not None:
                body = await self.product_env.route(header.topic)
                if body is not None:
                    return request.response(ResponseCode.SUCCESS, body=body)
            return request.response(ResponseCode.TOPIC_NOT_EXIST, topic_not_exist_remark(header.topic))
        if self.order_message_enable or self.cluster_test:
            conf = self.kv_config.get(ORDER_TOPIC_CONFIG, header.topic)
            if conf is not None:
                route = attrs.evolve(route, order_topic_conf=conf)
        # Always standard JSON (quoted broker ids), whatever the request version: every 4.x client reads it.
        return request.response(ResponseCode.SUCCESS, body=route.encode())

    async def _get_cluster_info(self, request: RemotingCommand, connection: Any) -> RemotingCommand:
        return request.response(ResponseCode.SUCCESS, body=self.route_table.get_all_cluster_info().encode())

    async def _get_all_topic_list(self, request: RemotingCommand, connection: Any) -> RemotingCommand:
        return request.response(ResponseCode.SUCCESS, body=self.route_table.get_all_topic_list().encode())

    async def _get_topics_by_cluster(self, request: RemotingCommand, connection: Any) -> RemotingCommand:
        header = GetTopicsByClusterRequestHeader.from_ext_fields(request.ext_fields)
        return request.response(
            ResponseCode.SUCCESS, body=self.route_table.get_topics_by_cluster(header.cluster).encode()
        )

    async def _get_system_topic_list(self, request: RemotingCommand, connection: Any) -> RemotingCommand:
        return request.response(ResponseCode.SUCCESS, body=self.route_table.get_system_topic_list().encode())

    async def _delete_topic(self, request: RemotingCommand, connection: Any) -> RemotingCommand:
        header = DeleteTopicFromNamesrvRequestHeader.from_ext_fields(request.ext_fields)
        self.route_table.delete_topic(header.topic, header.cluster_name)
        return request.response(ResponseCode.SUCCESS)

    # -- KV config --------------------------------------------------------------------------------------------------

    async def _put_kv_config(self, request: RemotingCommand, connection: Any) -> RemotingCommand:
        header = PutKVConfigRequestHeader.from_ext_fields(request.ext_fields)
        self.kv_config.put(header.namespace, header.key, header.value)
        await self.kv_config.persist()
        return request.response(ResponseCode.SUCCESS)

    async def _get_kv_config(self, request: RemotingCommand, connection: Any) -> RemotingCommand:
        header = GetKVConfigRequestHeader.from_ext_fields(request.ext_fields)
        value = self.kv_config.get(header.namespace, header.key)
        if value is None:
            remark = f"No config item, Namespace: {header.namespace} Key: {header.key}"
            return request.response(ResponseCode.QUERY_NOT_FOUND, remark)
        return request.response(ResponseCode.SUCCESS, ext_fields=GetKVConfigResponseHeader(value).to_ext_fields())

    async def _delete_kv_config(self, request: RemotingCommand, connection: Any) -> RemotingCommand:
        header = DeleteKVConfigRequestHeader.from_ext_fields(request.ext_fields)
        if self.kv_config.delete(header.namespace, header.key):
            await self.kv_config.persist()
        return request.response(ResponseCode.SUCCESS)

    async def _get_kv_list(self, request: RemotingCommand, connection: Any) -> RemotingCommand:
        header = GetKVListByNamespaceRequestHeader.from_ext_fields(request.ext_fields)
        table = self.kv_config.get_kv_list_by_namespace(header.namespace)
        if table is None:
            return request.response(ResponseCode.QUERY_NOT_FOUND, f"No config item, Namespace: {header.namespace}")
        return request.response(ResponseCode.SUCCESS, body=table.encode())

    # -- unit topics and settings (namesrv/config_admin.py) -------------------------------------------------------

    async def _unit_topics(self, request: RemotingCommand, connection: Any) -> RemotingCommand:
        """GET_UNIT_TOPIC_LIST (311), GET_HAS_UNIT_SUB_TOPIC_LIST (312), GET_HAS_UNIT_SUB_UNUNIT_TOPIC_LIST (313):
        topics by TopicSysFlag's unit (bit 0) and unit-sub (bit 1) flags."""
        wanted = _UNIT_FILTERS[request.code]
        topics = sorted(t for t, flag in self.route_table.topic_sys_flags().items() if wanted(flag))
        return request.response(ResponseCode.SUCCESS, body=TopicList(topics).encode())

    async def _update_config(self, request: RemotingCommand, connection: Any) -> RemotingCommand:
        if self.config_admin is None:
            return request.response(ResponseCode.SYSTEM_ERROR, "this name server has no configuration to update")
        if request.body:
            try:
                await self.config_admin.update(bytes(request.body).decode("utf-8", "replace"))
            except ConfigRefused as exc:
                return request.response(ResponseCode.NO_PERMISSION, str(exc))
            except UnreadableProperties:
                return request.response(ResponseCode.SYSTEM_ERROR, STRING2PROPERTIES_ERROR)
            except PropertiesError as exc:
                return request.response(ResponseCode.SYSTEM_ERROR, str(exc))
        return request.response(ResponseCode.SUCCESS)

    async def _get_config(self, request: RemotingCommand, connection: Any) -> RemotingCommand:
        body = b"" if self.config_admin is None else self.config_admin.formatted().encode()
        return request.response(ResponseCode.SUCCESS, body=body)


def _decode_register_body(
    request: RemotingCommand, compressed: bool
) -> tuple[TopicConfigSerializeWrapper, list[str] | None]:
    """The topic configs and filter servers of a REGISTER_BROKER. A broker before V3_0_11 sends the bare wrapper and
    no filter servers: ``None`` leaves the stored ones alone (DefaultRequestProcessor.java ``registerBroker``)."""
    if request.version < V3_0_11:
        return (
            TopicConfigSerializeWrapper.decode(request.body) if request.body else TopicConfigSerializeWrapper()
        ), None
    body = RegisterBrokerBody.decode(request.body, compressed) if request.body else RegisterBrokerBody()
    return body.topic_config_serialize_wrapper, body.filter_server_list


_UNIT: Final = 0x1
_UNIT_SUB: Final = 0x2
_UNIT_FILTERS: Final[dict[int, Callable[[int], bool]]] = {
    RequestCode.GET_UNIT_TOPIC_LIST: lambda flag: bool(flag & _UNIT),
    RequestCode.GET_HAS_UNIT_SUB_TOPIC_LIST: lambda flag: bool(flag & _UNIT_SUB),
    RequestCode.GET_HAS_UNIT_SUB_UNUNIT_TOPIC_LIST: lambda flag: not flag & _UNIT and bool(flag & _UNIT_SUB),
}

_HANDLERS: dict[int, _Handler] = {
    RequestCode.REGISTER_BROKER: NamesrvProcessor._register_broker,
    RequestCode.UNREGISTER_BROKER: NamesrvProcessor._unregister_broker,
    RequestCode.QUERY_DATA_VERSION: NamesrvProcessor._query_data_version,
    RequestCode.WIPE_WRITE_PERM_OF_BROKER: NamesrvProcessor._wipe_write_perm,
    RequestCode.ADD_WRITE_PERM_OF_BROKER: NamesrvProcessor._add_write_perm,
    RequestCode.GET_ROUTEINFO_BY_TOPIC: NamesrvProcessor._get_route_info,
    RequestCode.GET_BROKER_CLUSTER_INFO: NamesrvProcessor._get_cluster_info,
    RequestCode.GET_ALL_TOPIC_LIST_FROM_NAMESERVER: NamesrvProcessor._get_all_topic_list,
    RequestCode.GET_TOPICS_BY_CLUSTER: NamesrvProcessor._get_topics_by_cluster,
    RequestCode.GET_SYSTEM_TOPIC_LIST_FROM_NS: NamesrvProcessor._get_system_topic_list,
    RequestCode.DELETE_TOPIC_IN_NAMESRV: NamesrvProcessor._delete_topic,
    RequestCode.PUT_KV_CONFIG: NamesrvProcessor._put_kv_config,
    RequestCode.GET_KV_CONFIG: NamesrvProcessor._get_kv_config,
    RequestCode.DELETE_KV_CONFIG: NamesrvProcessor._delete_kv_config,
    RequestCode.GET_KVLIST_BY_NAMESPACE: NamesrvProcessor._get_kv_list,
    RequestCode.GET_UNIT_TOPIC_LIST: NamesrvProcessor._unit_topics,
    RequestCode.GET_HAS_UNIT_SUB_TOPIC_LIST: NamesrvProcessor._unit_topics,
    RequestCode.GET_HAS_UNIT_SUB_UNUNIT_TOPIC_LIST: NamesrvProcessor._unit_topics,
    RequestCode.UPDATE_NAMESRV_CONFIG: NamesrvProcessor._update_config,
    RequestCode.GET_NAMESRV_CONFIG: NamesrvProcessor._get_config,
}
