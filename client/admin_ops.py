"""The admin client's operations requests (Java's ``DefaultMQAdminExt`` calls behind the ``mqadmin`` commands that
``client/admin.py`` does not cover): name-server KV, permissions, settings and unit-topic lists; consume time spans,
correction offsets, consumer status, raw ConsumeQueue entries, producer tables, store maintenance, half-message
resume, topic configs and delay offsets on brokers; offsets read and written per queue.

:class:`AdminOps` is a mixin of :class:`client.admin.Admin`, which supplies the transport (``_call``,
``_namesrv_call``) and the lookups it uses (which brokers a call asks: the module docstring of :mod:`client.admin`).
Errors as the admin client's: :class:`~client.errors.MQBrokerError` for a refusal,
:class:`~remoting.errors.RemotingError` for the transport.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from client import api
from client.consumer.subscription import build_subscription
from client.errors import MQBrokerError, MQClientError
from remoting.codec.bodies import EXPRESSION_TAG, KVTable, MessageQueue, TopicList
from remoting.codec.bodies._json import get_map, load_object
from remoting.codec.bodies.broker_metadata import DataVersion, SubscriptionGroupConfig, TopicConfig
from remoting.codec.bodies.ha import HARuntimeInfo
from remoting.codec.bodies.ops import (
    ConsumerStatusBody,
    ProducerTableInfo,
    QueryConsumeQueueResponseBody,
    QueryConsumeTimeSpanBody,
    QueryCorrectionOffsetBody,
    QueueTimeSpan,
)
from remoting.codec.bodies.topic_config import (
    TopicConfigSerializeWrapper,
    data_version_from_json,
    topic_config_from_json,
)
from remoting.codec.codes import RequestCode, ResponseCode
from remoting.codec.command import RemotingCommand, request
from remoting.codec.headers import (
    DeleteKVConfigRequestHeader,
    GetConsumerStatusRequestHeader,
    GetEarliestMsgStoretimeRequestHeader,
    GetKVConfigRequestHeader,
    GetKVConfigResponseHeader,
    GetMaxOffsetRequestHeader,
    GetMinOffsetRequestHeader,
    PullMessageRequestHeader,
    PutKVConfigRequestHeader,
    QueryMessageRequestHeader,
    SearchOffsetRequestHeader,
    UpdateConsumerOffsetRequestHeader,
    WipeWritePermOfBrokerRequestHeader,
)
from remoting.codec.headers.namesrv import AddWritePermOfBrokerRequestHeader
from remoting.codec.headers.ops import (
    CloneGroupOffsetRequestHeader,
    GetTopicConfigRequestHeader,
    QueryConsumeQueueRequestHeader,
    QueryConsumeTimeSpanRequestHeader,
    QueryCorrectionOffsetHeader,
    ResumeCheckHalfMessageRequestHeader,
)
from remoting.codec.java_properties import format_properties, parse_properties
from remoting.codec.message import MessageExt

if TYPE_CHECKING:
    from client.instance import MQClientInstance

__all__ = ["AdminOps"]

#: The group tools pull with (Java's ``MixAll.TOOLS_CONSUMER_GROUP``).
TOOLS_CONSUMER_GROUP = "TOOLS_CONSUMER"
#: KV namespace of order-topic configs (Java's ``NamesrvUtil.NAMESPACE_ORDER_TOPIC_CONFIG``).
ORDER_TOPIC_CONFIG = "ORDER_TOPIC_CONFIG"


class AdminOps:
    """See the module docstring."""

    instance: MQClientInstance

    async def _call(self, addr: str, cmd: RemotingCommand, *ok: int, timeout: float | None = None) -> RemotingCommand:
        raise NotImplementedError

    async def _namesrv_call(self, code: int, fields: dict[str, str] | None = None, *ok: int) -> RemotingCommand:
        raise NotImplementedError

    async def _topic_brokers(self, topic: str, *, reads: bool) -> list[tuple[str, str]]:
        raise NotImplementedError

    async def _group_brokers(self, group: str, *, reads: bool) -> list[str]:
        raise NotImplementedError

    async def _query_index(
        self, header: QueryMessageRequestHeader, keep: Callable[[MessageExt], bool]
    ) -> list[MessageExt]:
        raise NotImplementedError

    # -- name servers ------------------------------------------------------------------------------------------

    @property
    def namesrv_addrs(self) -> list[str]:
        return list(self.instance.config.namesrv_addr)

    async def _each_namesrv(self, code: int, fields: dict[str, str] | None = None) -> None:
        """``code`` to every name server (Java's ``putKVConfigValue`` / ``deleteKVConfigValue``): a refusal does not
        stop the others; the last one is raised at the end. A transport failure is raised at once."""
        refused: MQBrokerError | None = None
        for addr in self.namesrv_addrs:
            try:
                await self._call(addr, request(code, fields))
            except MQBrokerError as exc:
                refused = exc
        if refused is not None:
            raise refused

    async def put_kv_config(self, namespace: str, key: str, value: str) -> None:
        fields = PutKVConfigRequestHeader(namespace=namespace, key=key, value=value).to_ext_fields()
        await self._each_namesrv(RequestCode.PUT_KV_CONFIG, fields)

    async def delete_kv_config(self, namespace: str, key: str) -> None:
        fields = DeleteKVConfigRequestHeader(namespace=namespace, key=key).to_ext_fields()
        await self._each_namesrv(RequestCode.DELETE_KV_CONFIG, fields)

    async def get_kv_config(self, namespace: str, key: str, *, missing_ok: bool = True) -> str | None:
        """The value from the first name server that answers; ``None`` when it has none (QUERY_NOT_FOUND), or with
        ``missing_ok`` false MQBrokerError, as Java's ``MQClientAPIImpl.getKVConfigValue`` throws."""
        fields = GetKVConfigRequestHeader(namespace=namespace, key=key).to_ext_fields()
        missing = (ResponseCode.QUERY_NOT_FOUND,) if missing_ok else ()
        answer = await self._namesrv_call(RequestCode.GET_KV_CONFIG, fields, ResponseCode.SUCCESS, *missing)
        if answer.code != ResponseCode.SUCCESS:
            return None
        return GetKVConfigResponseHeader.from_ext_fields(answer.ext_fields).value

    async def create_or_update_order_conf(self, topic: str, conf: str, *, is_cluster: bool) -> None:
        """Java's ``createOrUpdateOrderConf``: the whole ``b1:n;b2:n`` value (cluster), or one broker's entry merged
        into the existing value."""
        if not is_cluster:
            entries = {
                item.split(":")[0]: item
                for item in (await self.get_kv_config(ORDER_TOPIC_CONFIG, topic) or "").split(";")
                if item
            }
            entries[conf.split(":")[0]] = conf
            conf = ";".join(entries.values())
        await self.put_kv_config(ORDER_TOPIC_CONFIG, topic, conf)

    async def wipe_write_perm(self, namesrv: str, broker_name: str) -> int:
        """WIPE_WRITE_PERM_OF_BROKER on one name server: the number of topics changed."""
        fields = WipeWritePermOfBrokerRequestHeader(broker_name=broker_name).to_ext_fields()
        answer = await self._call(namesrv, request(RequestCode.WIPE_WRITE_PERM_OF_BROKER, fields))
        return int(answer.ext_fields.get("wipeTopicCount", "0"))

    async def add_write_perm(self, namesrv: str, broker_name: str) -> int:
        fields = AddWritePermOfBrokerRequestHeader(broker_name=broker_name).to_ext_fields()
        answer = await self._call(namesrv, request(RequestCode.ADD_WRITE_PERM_OF_BROKER, fields))
        return int(answer.ext_fields.get("addTopicCount", "0"))

    async def namesrv_config(self, addrs: list[str] | None = None) -> dict[str, dict[str, str]]:
        """GET_NAMESRV_CONFIG of each name server (``addrs``, default all)."""
        out = {}
        for addr in addrs or self.namesrv_addrs:
            answer = await self._call(addr, request(RequestCode.GET_NAMESRV_CONFIG))
            out[addr] = parse_properties(bytes(answer.body).decode("utf-8", "replace"))
        return out

    async def update_namesrv_config(self, props: dict[str, str], addrs: list[str] | None = None) -> None:
        body = format_properties(props).encode()
        for addr in addrs or self.namesrv_addrs:
            await self._call(addr, request(RequestCode.UPDATE_NAMESRV_CONFIG, body=body))

    async def unit_topics(self, code: int) -> list[str]:
        """GET_UNIT_TOPIC_LIST (311), GET_HAS_UNIT_SUB_TOPIC_LIST (312) or GET_HAS_UNIT_SUB_UNUNIT_TOPIC_LIST (313),
        from the first name server that answers."""
        return TopicList.decode((await self._namesrv_call(code)).body).topic_list

    # -- consume progress --------------------------------------------------------------------------------------

    async def consume_time_span(self, topic: str, group: str) -> list[QueueTimeSpan]:
        """QUERY_CONSUME_TIME_SPAN on each broker of ``topic``."""
        fields = QueryConsumeTimeSpanRequestHeader(topic=topic, group=group).to_ext_fields()
        spans: list[QueueTimeSpan] = []
        for _, addr in await self._topic_brokers(topic, reads=True):
            answer = await self._call(addr, request(RequestCode.QUERY_CONSUME_TIME_SPAN, fields))
            spans.extend(QueryConsumeTimeSpanBody.decode(answer.body).consume_time_span_set)
        return spans

    async def consumer_status(
        self, topic: str, group: str, client_addr: str | None = None
    ) -> dict[str, dict[MessageQueue, int]]:
        """INVOKE_BROKER_TO_GET_CONSUMER_STATUS on each broker of ``topic``: each online client's offsets."""
        fields = GetConsumerStatusRequestHeader(topic=topic, group=group, client_addr=client_addr).to_ext_fields()
        table: dict[str, dict[MessageQueue, int]] = {}
        for _, addr in await self._topic_brokers(topic, reads=True):
            answer = await self._call(addr, request(RequestCode.INVOKE_BROKER_TO_GET_CONSUMER_STATUS, fields))
            for client, offsets in ConsumerStatusBody.decode(answer.body).consumer_table.items():
                table.setdefault(client, {}).update(offsets)
        return table

    async def query_correction_offset(
        self, addr: str, topic: str, compare_group: str, filter_groups: str | None = None
    ) -> dict[int, int]:
        """QUERY_CORRECTION_OFFSET (308) on one broker: per queue, the least committed offset of the topic's other
        groups, or ``Long.MAX_VALUE`` where it lies past ``compare_group``'s."""
        header = QueryCorrectionOffsetHeader(compare_group=compare_group, topic=topic, filter_groups=filter_groups)
        answer = await self._call(addr, request(RequestCode.QUERY_CORRECTION_OFFSET, header.to_ext_fields()))
        return QueryCorrectionOffsetBody.decode(answer.body).correction_offsets

    async def clone_group_offset(
        self, src_group: str, dest_group: str, topic: str | None = None, *, offline: bool = False
    ) -> None:
        """CLONE_GROUP_OFFSET (314) on the masters of ``src_group``'s brokers: they copy its committed offsets."""
        header = CloneGroupOffsetRequestHeader(src_group=src_group, dest_group=dest_group, topic=topic, offline=offline)
        for addr in await self._group_brokers(src_group, reads=False):
            await self._call(addr, request(RequestCode.CLONE_GROUP_OFFSET, header.to_ext_fields()))

    async def update_consumer_offset(self, addr: str, group: str, mq: MessageQueue, offset: int) -> None:
        """UPDATE_CONSUMER_OFFSET of ``mq`` at ``addr`` (``bname`` left out when ``mq`` names no broker)."""
        header = UpdateConsumerOffsetRequestHeader(
            consumer_group=group,
            topic=mq.topic,
            queue_id=mq.queue_id,
            commit_offset=offset,
            bname=mq.broker_name or None,
        )
        await self._call(addr, request(RequestCode.UPDATE_CONSUMER_OFFSET, header.to_ext_fields()))

    async def queue_offset(self, addr: str, mq: MessageQueue, code: int, timestamp: int | None = None) -> int:
        """GET_MAX_OFFSET, GET_MIN_OFFSET, (with ``timestamp``) SEARCH_OFFSET_BY_TIMESTAMP or
        GET_EARLIEST_MSG_STORETIME (the store time in ms; -1 for an empty queue) of one queue at ``addr``."""
        fields: dict[str, str]
        if code == RequestCode.GET_EARLIEST_MSG_STORETIME:
            fields = GetEarliestMsgStoretimeRequestHeader(topic=mq.topic, queue_id=mq.queue_id).to_ext_fields()
            answer = await self._call(addr, request(code, fields))
            return int(answer.ext_fields.get("timestamp", "-1"))
        if code == RequestCode.SEARCH_OFFSET_BY_TIMESTAMP:
            fields = SearchOffsetRequestHeader(
                topic=mq.topic, queue_id=mq.queue_id, timestamp=timestamp or 0
            ).to_ext_fields()
        elif code == RequestCode.GET_MAX_OFFSET:
            fields = GetMaxOffsetRequestHeader(topic=mq.topic, queue_id=mq.queue_id).to_ext_fields()
        else:
            fields = GetMinOffsetRequestHeader(topic=mq.topic, queue_id=mq.queue_id).to_ext_fields()
        answer = await self._call(addr, request(code, fields))
        return int(answer.ext_fields.get("offset", "0"))

    async def min_offset(self, mq: MessageQueue) -> int:
        """GET_MIN_OFFSET of ``mq`` at its broker's master (Java's ``MQAdminExt.minOffset``)."""
        return await self.queue_offset(await self._publish_addr(mq), mq, RequestCode.GET_MIN_OFFSET)

    async def max_offset(self, mq: MessageQueue) -> int:
        """GET_MAX_OFFSET of ``mq`` at its broker's master (``maxOffset``)."""
        return await self.queue_offset(await self._publish_addr(mq), mq, RequestCode.GET_MAX_OFFSET)

    async def search_offset(self, mq: MessageQueue, timestamp_ms: int) -> int:
        """SEARCH_OFFSET_BY_TIMESTAMP of ``mq`` at its broker's master (``searchOffset``)."""
        addr = await self._publish_addr(mq)
        return await self.queue_offset(addr, mq, RequestCode.SEARCH_OFFSET_BY_TIMESTAMP, timestamp_ms)

    async def earliest_msg_store_time(self, mq: MessageQueue) -> int:
        """Store time (ms) of ``mq``'s first message at its broker's master, -1 when the queue is empty
        (``earliestMsgStoreTime``)."""
        return await self.queue_offset(await self._publish_addr(mq), mq, RequestCode.GET_EARLIEST_MSG_STORETIME)

    async def _publish_addr(self, mq: MessageQueue) -> str:
        """The master of ``mq``'s broker from a fresh route of its topic (MQAdminImpl's ``findBrokerAddressInPublish``
        after a route update); :class:`MQClientError` when the route has none."""
        addr = dict(await self._topic_brokers(mq.topic, reads=False)).get(mq.broker_name)
        if addr is None:
            raise MQClientError(f"The broker[{mq.broker_name}] not exist")
        return addr

    # -- messages ----------------------------------------------------------------------------------------------

    async def pull(
        self, mq: MessageQueue, offset: int, count: int, expression: str = "*", group: str = TOOLS_CONSUMER_GROUP
    ) -> api.PullResult:
        """One pull of ``mq`` by ``group`` (the tools group unless given; Java's ``DefaultMQPullConsumer.pull``) from
        its broker's master, or a slave while the master is down: no offset committed, tag ``expression`` applied by
        the broker and here. A negative ``offset`` or a ``count`` below 1 fails before any broker is asked, and a
        broker the route lacks fails, with Java's texts (``DefaultMQPullConsumerImpl.pullSyncImpl``,
        ``PullAPIWrapper.pullKernelImpl``)."""
        if offset < 0:
            raise MQClientError("offset < 0")
        if count <= 0:
            raise MQClientError("maxNums <= 0")
        addr = dict(await self._topic_brokers(mq.topic, reads=True)).get(mq.broker_name)
        if addr is None:
            raise MQClientError(f"The broker[{mq.broker_name}] not exist")
        sub = build_subscription(mq.topic, expression, EXPRESSION_TAG)
        header = PullMessageRequestHeader(
            consumer_group=group, topic=mq.topic, queue_id=mq.queue_id, queue_offset=offset,
            max_msg_nums=count, sys_flag=0x4, commit_offset=0, suspend_timeout_millis=0, sub_version=0,
            subscription=sub.sub_string, expression_type=EXPRESSION_TAG,
        )  # fmt: skip
        tags = None if sub.sub_string == "*" else frozenset(sub.tags_set)
        return await api.pull_message(self.instance.remoting, addr, header, self.instance.config.rpc_timeout, tags)

    async def query_msg_by_unique_key(
        self, topic: str, msg_id: str, max_num: int = 32, *, begin_ms: int = 0
    ) -> list[MessageExt]:
        """QUERY_MESSAGE with ``_UNIQUE_KEY_QUERY=true`` on each broker of ``topic``: the message whose UNIQ_KEY is
        ``msg_id`` stored first (from ``begin_ms`` on), as a list of at most one; a broker that fails is passed over
        unless every one does.

        MQAdminImpl.queryMessage with isUniqKey keeps only the copy with the earliest store timestamp across brokers
        (a resent message is stored more than once), and ``queryMsgByUniqueKey -a`` prints that list
        (client/src/main/java/org/apache/rocketmq/client/impl/MQAdminImpl.java)."""
        header = QueryMessageRequestHeader(
            topic=topic,
            key=msg_id,
            max_num=max_num,
            begin_timestamp=begin_ms,
            end_timestamp=(1 << 63) - 1,
            unique_key_query=True,
        )
        found = await self._query_index(header, lambda m: m.properties.get("UNIQ_KEY") == msg_id)
        return found[:1]  # oldest first

    # -- broker inspection and maintenance ---------------------------------------------------------------------

    async def query_consume_queue(
        self, addr: str, topic: str, queue_id: int, index: int, count: int, group: str | None = None
    ) -> QueryConsumeQueueResponseBody:
        header = QueryConsumeQueueRequestHeader(
            topic=topic, queue_id=queue_id, index=index, count=count, consumer_group=group
        )
        answer = await self._call(addr, request(RequestCode.QUERY_CONSUME_QUEUE, header.to_ext_fields()))
        if not answer.body:
            raise MQClientError(answer.remark or f"no entries at {index} of {queue_id}@{topic}")
        return QueryConsumeQueueResponseBody.decode(answer.body)

    async def producer_table(self, addr: str) -> ProducerTableInfo:
        answer = await self._call(addr, request(RequestCode.GET_ALL_PRODUCER_INFO))
        return ProducerTableInfo.decode(answer.body)

    async def clean_expired_consume_queue(self, addr: str) -> None:
        await self._call(addr, request(RequestCode.CLEAN_EXPIRED_CONSUMEQUEUE))

    async def delete_expired_commit_log(self, addr: str) -> None:
        await self._call(addr, request(RequestCode.DELETE_EXPIRED_COMMITLOG))

    async def resume_check_half_message(self, addr: str, offset_msg_id: str) -> None:
        fields = ResumeCheckHalfMessageRequestHeader(msg_id=offset_msg_id).to_ext_fields()
        await self._call(addr, request(RequestCode.RESUME_CHECK_HALF_MESSAGE, fields))

    async def topic_config(self, addr: str, topic: str) -> TopicConfig:
        """GET_TOPIC_CONFIG (351); MQBrokerError TOPIC_NOT_EXIST for a topic the broker lacks."""
        answer = await self._call(
            addr, request(RequestCode.GET_TOPIC_CONFIG, GetTopicConfigRequestHeader(topic=topic).to_ext_fields())
        )
        return topic_config_from_json(load_object(answer.body, "TopicConfig"), topic)

    async def all_topic_config(self, addr: str) -> TopicConfigSerializeWrapper:
        return TopicConfigSerializeWrapper.decode(
            (await self._call(addr, request(RequestCode.GET_ALL_TOPIC_CONFIG))).body
        )

    async def subscription_groups(self, addr: str) -> dict[str, SubscriptionGroupConfig]:
        """GET_ALL_SUBSCRIPTIONGROUP_CONFIG (201) of one broker, by group name."""
        return (await self.subscription_group_wrapper(addr))[0]

    async def subscription_group_wrapper(self, addr: str) -> tuple[dict[str, SubscriptionGroupConfig], DataVersion]:
        """GET_ALL_SUBSCRIPTIONGROUP_CONFIG (201) of one broker: its groups by name and the table's DataVersion
        (``(0, 0)`` when the answer has none)."""
        body = load_object(
            (await self._call(addr, request(RequestCode.GET_ALL_SUBSCRIPTIONGROUP_CONFIG))).body,
            "SubscriptionGroupWrapper",
        )
        table = body.get("subscriptionGroupTable") or {}
        if not isinstance(table, dict):
            raise MQBrokerError(ResponseCode.SYSTEM_ERROR, "subscriptionGroupTable is not an object", addr)
        raw_version = body.get("dataVersion")
        version = DataVersion(0, 0) if raw_version is None else data_version_from_json(raw_version)
        return {name: SubscriptionGroupConfig.from_json(g, name) for name, g in table.items() if g is not None}, version

    async def delay_offsets(self, addr: str) -> dict[int, int]:
        """GET_ALL_DELAY_OFFSET (45): delay level -> progress in its schedule queue."""
        answer = await self._call(addr, request(RequestCode.GET_ALL_DELAY_OFFSET))
        table = get_map(load_object(answer.body, "DelayOffsetSerializeWrapper"), "offsetTable")
        return {int(level): int(offset) for level, offset in table.items()}

    async def system_topics(self, addr: str) -> list[str]:
        """GET_SYSTEM_TOPIC_LIST_FROM_BROKER (305)."""
        return TopicList.decode(
            (await self._call(addr, request(RequestCode.GET_SYSTEM_TOPIC_LIST_FROM_BROKER))).body
        ).topic_list

    async def runtime_info(self, addr: str) -> dict[str, str]:
        return KVTable.decode((await self._call(addr, request(RequestCode.GET_BROKER_RUNTIME_INFO))).body).table

    async def ha_status(self, addr: str) -> HARuntimeInfo:
        """GET_BROKER_HA_STATUS (907, RocketMQ 5): the broker's replication state (5.3.3's
        ``MQClientAPIImpl.getBrokerHAStatus``)."""
        return HARuntimeInfo.decode((await self._call(addr, request(RequestCode.GET_BROKER_HA_STATUS))).body)
