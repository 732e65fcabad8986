"""Broker admin requests (docs/protocol.md#313-broker-admin-headers and the admin codes of
docs/protocol.md#21-requests-rocketrio-serves): topics, subscription groups, runtime info, topic and consume stats,
connection lists, broker config, and the consume-progress tools of ``mqadmin``. RocketMQ's ``AdminBrokerProcessor``,
for the codes ``mqadmin`` and the dashboards use most.

Contract: command in, command out. Topic changes go through the topic manager, which re-registers with the name
servers at once; UPDATE_AND_CREATE_TOPIC registers that topic alone and answers once they took it
(``BrokerContext.register_topic``). Bodies are
those of :mod:`remoting.codec.bodies.admin` and :mod:`remoting.codec.bodies`.

- INVOKE_BROKER_TO_RESET_OFFSET (222), GET_CONSUMER_RUNNING_INFO (307) and CONSUME_MESSAGE_DIRECTLY (309) call the
  consumers themselves, through :mod:`processors.broker2client`.
- UPDATE_BROKER_CONFIG (25) hands a properties body to :meth:`BrokerContext.update_config`, which applies it to the
  running broker (managers see the new values at once; ``listenPort`` and the other restart settings only at the
  next start) and, when the broker was started with ``-c broker.conf``, writes the changed keys back into that
  file; a key of :data:`ALWAYS_BLACK_LISTED` or of the ``configBlackList`` setting refuses the whole update with
  NO_PERMISSION; a request without a body changes nothing. GET_BROKER_CONFIG (26) answers every setting with
  ``version``, the settings' DataVersion that each applied update moves on.
- DELETE_TOPIC_IN_BROKER (215) also drops the topic's ConsumeQueues (files included), its consumer offsets, its
  statistics and the timer's count of it (RocketMQ 5's ``removeTimingCount``), so a topic created again under the
  same name starts empty, and with ``clearRetryTopicWhenDeleteTopic`` (RocketMQ 5, on by default) the pop retry
  topics of the groups with an offset on it likewise (not one whose name is also the 4.x retry topic of a group
  consuming it: ours); CLEAN_UNUSED_TOPIC (316) does the same for every topic in the store that is neither
  configured nor a system topic.
- GET_BROKER_RUNTIME_INFO (28) and GET_CONSUME_STATS (208) carry the rates of :mod:`broker.stats`.

UPDATE_AND_CREATE_TOPIC, DELETE_TOPIC_IN_BROKER and UPDATE_BROKER_CONFIG run one at a time, as Java's
``synchronized`` methods: a creation arriving while a deletion still drops the topic's ConsumeQueues waits for it, and
a config update waits for the one before it to be registered.

UPDATE_AND_CREATE_TOPIC (17) also applies RocketMQ 5's ``attributes`` modification (``+message.type=FIFO``;
:mod:`processors.topic_attributes`); a topic updated without one keeps its attributes.

System topics are the broker's set (:meth:`TopicTable.is_system_topic`: the fixed ones and every topic it created at
start, such as ``<cluster>_REPLY_TOPIC``): UPDATE_AND_CREATE_TOPIC and DELETE_TOPIC_IN_BROKER refuse them and
GET_SYSTEM_TOPIC_LIST_FROM_BROKER (305) lists them, as Java's TopicValidator in the broker's JVM.

Errors: an invalid topic name or a system topic answers SYSTEM_ERROR with Java's remark; an unknown
topic TOPIC_NOT_EXIST; an offline consumer group CONSUMER_NOT_ONLINE; a missing header field, a body that does not
decode or a bad property value SYSTEM_ERROR with the decoder's message (an UPDATE_BROKER_CONFIG body that
``Properties.load`` refuses: Java's "string2Properties error").
"""

from __future__ import annotations

import enum
import logging
import time
from collections.abc import Awaitable, Callable, Mapping
from typing import Final

import trio

from processors import broker2client
from processors.client_channels import ClientChannelInfo
from processors.context import BrokerContext
from processors.runtime_info import runtime_table
from processors.topic_attributes import MixedTypeRefused, TopicAttributeError, alter_attributes
from remoting.codec.bodies import KVTable, MessageQueue, TopicList
from remoting.codec.bodies._json import dumps, get_list, load_object
from remoting.codec.bodies.admin import (
    ClientConnection,
    ConsumerConnection,
    ConsumeStats,
    OffsetWrapper,
    ProducerConnection,
    TopicOffset,
    TopicStatsTable,
)
from remoting.codec.codes import RequestCode, ResponseCode
from remoting.codec.command import RemotingCommand
from remoting.codec.errors import CodecError
from remoting.codec.headers import (
    CreateTopicRequestHeader,
    DeleteSubscriptionGroupRequestHeader,
    DeleteTopicRequestHeader,
    GetConsumerConnectionListRequestHeader,
    GetConsumeStatsRequestHeader,
    GetProducerConnectionListRequestHeader,
    GetSubscriptionGroupConfigRequestHeader,
    GetTopicStatsInfoRequestHeader,
)
from remoting.codec.java_properties import (
    STRING2PROPERTIES_ERROR,
    PropertiesError,
    UnreadableProperties,
    black_listed_keys,
    format_properties,
    parse_properties,
)
from remoting.codec.topics import RETRY_GROUP_TOPIC_PREFIX, pop_retry_topic, validate_topic
from remoting.dispatch import ProcessorPool, not_supported_remark
from remoting.processor import RequestContext
from store.metadata_files import ConfigFileError, SubscriptionGroupConfig, TopicConfig, TopicFilterType
from store.topic_cleanup import clean_unused_topics

log = logging.getLogger(__name__)

_Handler = Callable[["AdminBrokerProcessor", RemotingCommand], RemotingCommand]
_AsyncHandler = Callable[["AdminBrokerProcessor", RemotingCommand], Awaitable[RemotingCommand]]

#: The keys ``initConfigBlackList`` always black-lists (``rocketmqHome``: the ACL files are read below it); the broker's
#: ``configBlackList`` setting adds to them.
ALWAYS_BLACK_LISTED: Final = frozenset({"configBlackList", "brokerConfigPath", "rocketmqHome"})
#: A slave's answer to topic and group changes (RocketMQ's ``validateSlave``): metadata follows the master.
SLAVE_REFUSAL: Final = (
    "Can't modify topic or subscription group from slave broker, please execute it from master broker."
)


class AdminBrokerProcessor:
    """Serves :data:`REQUEST_CODES`. ``pools`` (optional) feeds the queue sizes of GET_BROKER_RUNTIME_INFO."""

    def __init__(self, broker: BrokerContext, pools: Mapping[str, ProcessorPool] | None = None) -> None:
        self.broker = broker
        self.pools = dict(pools or {})
        #: Java's ``synchronized`` on updateAndCreateTopic, deleteTopic and updateBrokerConfig
        #: (broker/src/main/java/org/apache/rocketmq/broker/processor/AdminBrokerProcessor.java): a creation waits
        #: for a deletion still dropping the topic's queues, which would otherwise destroy what is sent to the new one;
        #: config updates apply and register in the order they came.
        self._topic_changes = trio.Lock()
        #: Called with each topic DELETE_TOPIC_IN_BROKER deleted (the controller forgets its timer count there).
        self.on_topic_deleted: Callable[[str], None] | None = None

    async def process(self, ctx: RequestContext, request: RemotingCommand) -> RemotingCommand | None:
        if request.code in _SYNCHRONIZED:
            async with self._topic_changes:
                return await self._process(request)
        return await self._process(request)

    async def _process(self, request: RemotingCommand) -> RemotingCommand:
        handler = _HANDLERS.get(request.code)
        try:
            forward = _BROKER_TO_CLIENT.get(request.code)
            if forward is not None:
                return await forward(self.broker, request)
            slow = _ASYNC_HANDLERS.get(request.code)
            if slow is not None:
                return await slow(self, request)
            if handler is None:
                return request.response(ResponseCode.REQUEST_CODE_NOT_SUPPORTED, not_supported_remark(request.code))
            return handler(self, request)
        except (CodecError, ConfigFileError, PropertiesError) as exc:
            return request.response(ResponseCode.SYSTEM_ERROR, str(exc))

    # ---- topics ------------------------------------------------------------------------------------------------

    def _refused_on_slave(self, request: RemotingCommand) -> RemotingCommand | None:
        """SYSTEM_ERROR with :data:`SLAVE_REFUSAL` on a slave, else ``None``."""
        if self.broker.config.broker_role == "SLAVE":
            return request.response(ResponseCode.SYSTEM_ERROR, SLAVE_REFUSAL)
        return None

    async def update_and_create_topic(self, request: RemotingCommand) -> RemotingCommand:
        """Java's updateAndCreateTopic: answered once the name servers took the topic (``registerIncrementBrokerData``
        before the answer: a registration of that topic alone), so a route query right after it finds the topic."""
        refused = self._refused_on_slave(request)
        if refused is not None:
            return refused
        header = CreateTopicRequestHeader.from_ext_fields(request.ext_fields)
        topic = header.topic
        remark = validate_topic(topic)
        if remark is None and self.broker.topics.is_system_topic(topic):
            remark = f"The topic[{topic}] is conflict with system topic."
        if remark is not None:
            return request.response(ResponseCode.SYSTEM_ERROR, remark)
        try:
            filter_type = TopicFilterType[header.topic_filter_type]
        except KeyError:
            return request.response(ResponseCode.SYSTEM_ERROR, f"unknown topicFilterType {header.topic_filter_type}")
        current = self.broker.topics.get(topic)
        try:
            attributes = alter_attributes(
                current is None,
                dict(current.attributes) if current is not None else {},
                header.attributes,
                mixed_allowed=self.broker.config.enable_mixed_message_type,
            )
        except MixedTypeRefused as exc:
            return request.response(ResponseCode.INVALID_PARAMETER, str(exc))
        except TopicAttributeError as exc:
            return request.response(ResponseCode.SYSTEM_ERROR, str(exc))
        config = TopicConfig(
            topic_name=topic,
            read_queue_nums=header.read_queue_nums,
            write_queue_nums=header.write_queue_nums,
            perm=header.perm,
            topic_filter_type=filter_type,
            topic_sys_flag=header.topic_sys_flag or 0,
            order=header.order,
            attributes=attributes,
        )
        self.broker.topics.update_topic(config, register=False)
        self.broker.topics.write_through()  # on disk before the answer, as TopicConfigManager.updateTopicConfig
        await self.broker.register_topic(config)
        return request.response(ResponseCode.SUCCESS)

    async def delete_topic(self, request: RemotingCommand) -> RemotingCommand:
        """RocketMQ 5's deleteTopic: the topic and, with ``clearRetryTopicWhenDeleteTopic``, the pop retry topic of
        every group with an offset on it (:meth:`_delete_topic_in_broker` each)."""
        refused = self._refused_on_slave(request)
        if refused is not None:
            return refused
        broker = self.broker
        topic = DeleteTopicRequestHeader.from_ext_fields(request.ext_fields).topic
        remark = validate_topic(topic)  # first, as Java: the name becomes a directory of the store
        if remark is not None:
            return request.response(ResponseCode.SYSTEM_ERROR, remark)
        if broker.topics.is_system_topic(topic):
            return request.response(ResponseCode.SYSTEM_ERROR, f"The topic[{topic}] is conflict with system topic.")
        doomed = [topic]
        if broker.config.clear_retry_topic_when_delete_topic:
            doomed += self._pop_retry_topics(topic)
        for name in doomed:
            await self._delete_topic_in_broker(name)
        return request.response(ResponseCode.SUCCESS)

    def _pop_retry_topics(self, topic: str) -> list[str]:
        """The existing pop retry topic ``%RETRY%<group>_<topic>`` of every group with an offset on ``topic``, but
        none that is also the 4.x retry topic ``%RETRY%<group>`` of a group consuming it (group ``A`` on topic ``B``
        and group ``A_B`` share ``%RETRY%A_B``; ``A_B`` has an offset on it): ours, RocketMQ 5 deletes that group's
        pending retries too. A group ``A_B`` that never consumed it keeps nothing: the deleted topic's messages would
        come back to ``A`` from the topic created again."""
        broker = self.broker
        retries = (pop_retry_topic(group, topic) for group in sorted(broker.offsets.groups_of_topic(topic)))
        return [
            retry
            for retry in retries
            if retry in broker.topics
            and retry.removeprefix(RETRY_GROUP_TOPIC_PREFIX) not in broker.offsets.groups_of_topic(retry)
        ]

    async def _delete_topic_in_broker(self, topic: str) -> None:
        """Java's deleteTopicInBroker: the config, the offsets, the ConsumeQueues (files included), the statistics
        and, through :attr:`on_topic_deleted`, the timer's count of the topic."""
        broker = self.broker
        broker.topics.delete_topic(topic)
        broker.topics.write_through()
        broker.offsets.remove_topic(topic)
        # What was stored before counts (puts are read from the queues, which the deletion drops), as Java's send
        # path counted it already.
        broker.stats.count_puts()
        # Its queues kept when created again (a send from TBW102) while the deletion waits for the disk lock, as
        # deleteTopic hands cleanUnusedTopic the table's live key set (broker/src/main/java/org/apache/rocketmq/
        # broker/processor/AdminBrokerProcessor.java).
        await broker.store.delete_topic(topic, lambda name: name in broker.topics)
        if topic not in broker.topics:
            broker.stats.on_topic_deleted(topic, drop_items=broker.config.auto_delete_unused_stats)
        if self.on_topic_deleted is not None:
            self.on_topic_deleted(topic)

    async def clean_unused_topic(self, request: RemotingCommand) -> RemotingCommand:
        """CLEAN_UNUSED_TOPIC: drop the store's queues of topics that are neither configured nor system topics."""
        broker, topics = self.broker, self.broker.topics
        broker.stats.count_puts()  # before their queues go (see _delete_topic_in_broker)
        for topic in await clean_unused_topics(broker.store, lambda t: t in topics or topics.is_system_topic(t)):
            # its stats items only with autoDeleteUnusedStats, as DefaultMessageStore.cleanUnusedTopic
            broker.stats.on_topic_deleted(topic, drop_items=broker.config.auto_delete_unused_stats)
            log.info("cleanUnusedTopic: %s destroyed", topic)
        return request.response(ResponseCode.SUCCESS)

    def get_all_topic_config(self, request: RemotingCommand) -> RemotingCommand:
        return request.response(ResponseCode.SUCCESS, body=self.broker.topics.wrapper().encode())

    # ---- subscription groups -----------------------------------------------------------------------------------

    def update_and_create_subscription_group(self, request: RemotingCommand) -> RemotingCommand:
        refused = self._refused_on_slave(request)
        if refused is not None:
            return refused
        config = SubscriptionGroupConfig.from_json(load_object(request.body, "SubscriptionGroupConfig"))
        self.broker.groups.update(config)
        self.broker.groups.write_through()  # as SubscriptionGroupManager.updateSubscriptionGroupConfig
        return request.response(ResponseCode.SUCCESS)

    def create_subscription_group_list(self, request: RemotingCommand) -> RemotingCommand:
        """RocketMQ 5's UPDATE_AND_CREATE_SUBSCRIPTIONGROUP_LIST: each config of the body's ``groupConfigList``
        (SubscriptionGroupList), written through once."""
        refused = self._refused_on_slave(request)
        if refused is not None:
            return refused
        listed = get_list(load_object(request.body, "SubscriptionGroupList"), "groupConfigList")
        configs = [SubscriptionGroupConfig.from_json(c) for c in listed]  # all decoded before any is applied
        for config in configs:
            self.broker.groups.update(config)
        self.broker.groups.write_through()
        return request.response(ResponseCode.SUCCESS)

    def delete_subscription_group(self, request: RemotingCommand) -> RemotingCommand:
        refused = self._refused_on_slave(request)
        if refused is not None:
            return refused
        header = DeleteSubscriptionGroupRequestHeader.from_ext_fields(request.ext_fields)
        self.broker.groups.delete(header.group_name)
        self.broker.groups.write_through()
        if header.remove_offset or header.clean_offset:
            self.broker.offsets.remove_group(header.group_name)
        # Its stats items only with autoDeleteUnusedStats (AdminBrokerProcessor.deleteSubscriptionGroup).
        self.broker.stats.on_group_deleted(header.group_name, drop_items=self.broker.config.auto_delete_unused_stats)
        return request.response(ResponseCode.SUCCESS)

    def get_subscription_group_config(self, request: RemotingCommand) -> RemotingCommand:
        """RocketMQ 5's GET_SUBSCRIPTIONGROUP_CONFIG: the group's config, auto-created as
        ``findSubscriptionGroupConfig`` does when the broker allows it."""
        group = GetSubscriptionGroupConfigRequestHeader.from_ext_fields(request.ext_fields).group
        config = self.broker.groups.find(group)
        if config is None:
            return request.response(ResponseCode.SUBSCRIPTION_GROUP_NOT_EXIST, "No group in this broker")
        return request.response(ResponseCode.SUCCESS, body=dumps(config.to_json()))

    def get_all_subscription_group_config(self, request: RemotingCommand) -> RemotingCommand:
        groups = self.broker.groups
        body = dumps(
            {
                "dataVersion": groups.data_version.to_json(),
                "subscriptionGroupTable": {name: g.to_json() for name, g in groups.groups.items()},
            }
        )
        return request.response(ResponseCode.SUCCESS, body=body)

    # ---- runtime and stats -------------------------------------------------------------------------------------

    def get_broker_runtime_info(self, request: RemotingCommand) -> RemotingCommand:
        """Java's runtime KV table (:mod:`processors.runtime_info`): every key ``mqadmin`` and rocketmq-exporter
        parse, in Java's formats."""
        table = runtime_table(self.broker, self.pools, int(time.time() * 1000))
        return request.response(ResponseCode.SUCCESS, body=KVTable(table).encode())

    def get_topic_stats_info(self, request: RemotingCommand) -> RemotingCommand:
        topic = GetTopicStatsInfoRequestHeader.from_ext_fields(request.ext_fields).topic
        config = self.broker.topics.get(topic)
        if config is None:
            return request.response(ResponseCode.TOPIC_NOT_EXIST, f"topic[{topic}] not exist")
        store = self.broker.store
        table: dict[MessageQueue, TopicOffset] = {}
        for queue_id in range(config.write_queue_nums):
            max_offset = store.max_offset_in_queue(topic, queue_id)
            last = store.message_store_timestamp(topic, queue_id, max_offset - 1) if max_offset > 0 else None
            table[MessageQueue(topic, self.broker.config.broker_name, queue_id)] = TopicOffset(
                store.min_offset_in_queue(topic, queue_id), max_offset, last or 0
            )
        return request.response(ResponseCode.SUCCESS, body=TopicStatsTable(table).encode())

    def get_consume_stats(self, request: RemotingCommand) -> RemotingCommand:
        header = GetConsumeStatsRequestHeader.from_ext_fields(request.ext_fields)
        broker, group = self.broker, header.consumer_group
        table: dict[MessageQueue, OffsetWrapper] = {}
        tps = 0.0
        for topic in sorted(self._consume_stats_topics(header)):
            config = broker.topics.get(topic)
            if config is None:
                continue
            tps += broker.stats.tps_group_get_nums(group, topic)
            for queue_id in range(config.read_queue_nums):
                broker_offset = max(0, broker.store.max_offset_in_queue(topic, queue_id))
                committed = broker.offsets.query(group, topic, queue_id)
                consumer_offset = max(0, committed)
                last = 0
                if consumer_offset > 0:
                    last = broker.store.message_store_timestamp(topic, queue_id, consumer_offset - 1) or 0
                # RocketMQ 5's pullOffset: the last pull's next offset, else the committed one (queryPullOffset).
                pulled = broker.stats.pull_offset(group, topic, queue_id)
                pull = max(consumer_offset, committed if pulled is None else pulled)
                mq = MessageQueue(topic, broker.config.broker_name, queue_id)
                table[mq] = OffsetWrapper(broker_offset, consumer_offset, last, pull)
        return request.response(ResponseCode.SUCCESS, body=ConsumeStats(table, tps).encode())

    def _consume_stats_topics(self, header: GetConsumeStatsRequestHeader) -> set[str]:
        """GET_CONSUME_STATS' topics, as 5.3.3's getTopicsForCollectingConsumeStats: RocketMQ 5's ``topicList``
        as given; else ``topic`` (a blank one is none, UtilAll.isBlank) or every topic the group has offsets on,
        less those an online group that subscribes to anything does not subscribe to, nor a pop of it recorded
        (:meth:`~broker.client_registry.ClientRegistry.not_subscribed`)."""
        broker, group = self.broker, header.consumer_group
        if header.topic_list and header.topic_list.strip():
            return {t for t in header.topic_list.split(";") if t}  # StringUtils.split drops empty tokens
        topic = header.topic if header.topic and header.topic.strip() else None
        topics = {topic} if topic else broker.offsets.topics_of_group(group)
        return {t for t in topics if not broker.clients.not_subscribed(group, t)}

    # ---- consume progress and broker settings (mqadmin) -----------------------------------------------------------

    def all_consumer_offsets(self, request: RemotingCommand) -> RemotingCommand:
        offsets = self.broker.offsets
        table: dict[str, dict[str, int]] = {}
        for key in offsets.offset_keys():
            topic, _, group = key.partition("@")
            table[key] = {str(q): o for q, o in sorted(offsets.offsets_of(group, topic).items())}
        return request.response(ResponseCode.SUCCESS, body=dumps({"offsetTable": table}))

    def export_pop_records(self, request: RemotingCommand) -> RemotingCommand:
        """POP_ROLLBACK (``mqadmin exportPopRecord``): SUCCESS, with no pop KV store to move into the file store, as
        AdminBrokerProcessor.transferPopToFsStore answers without a PopConsumerService (``popConsumerKVServiceInit``
        false, its default)."""
        return request.response(ResponseCode.SUCCESS)

    def system_topics(self, request: RemotingCommand) -> RemotingCommand:
        """GET_SYSTEM_TOPIC_LIST_FROM_BROKER: the broker's system topic set (``TopicValidator.getSystemTopicSet``)."""
        topics = sorted(self.broker.topics.system_topic_names)
        return request.response(ResponseCode.SUCCESS, body=TopicList(topics).encode())

    async def update_broker_config(self, request: RemotingCommand) -> RemotingCommand:
        if not request.body:  # a body of length 0 is Java's null body: SUCCESS, no Configuration.update
            return request.response(ResponseCode.SUCCESS)
        try:
            props = parse_properties(bytes(request.body).decode("utf-8", "replace"))
        except UnreadableProperties:
            return request.response(ResponseCode.SYSTEM_ERROR, STRING2PROPERTIES_ERROR)
        if black_listed_keys(ALWAYS_BLACK_LISTED, self.broker.config.config_black_list) & props.keys():
            return request.response(ResponseCode.NO_PERMISSION, "Can not update config in black list.")
        # listenPort included: the running broker keeps its bound port and the -c file gets the new one, as
        # Configuration.update and persist (common/src/main/java/org/apache/rocketmq/common/Configuration.java).
        unknown = await self.broker.update_config(props)
        log.info("broker config updated: %s (unknown keys ignored: %s)", sorted(props), unknown)
        return request.response(ResponseCode.SUCCESS)

    # ---- connections and config --------------------------------------------------------------------------------

    def get_consumer_connection_list(self, request: RemotingCommand) -> RemotingCommand:
        group = GetConsumerConnectionListRequestHeader.from_ext_fields(request.ext_fields).consumer_group
        info = self.broker.clients.consumer_group(group)
        if info is None or not info.channels:
            return request.response(ResponseCode.CONSUMER_NOT_ONLINE, f"the consumer group[{group}] not online")
        body = ConsumerConnection(
            connection_set=tuple(_connection(c) for c in info.channels.values()),
            subscription_table=dict(info.subscriptions),
            consume_type=_name(info.consume_type),
            message_model=_name(info.message_model),
            consume_from_where=_name(info.consume_from_where),
        )
        return request.response(ResponseCode.SUCCESS, body=body.encode())

    def get_producer_connection_list(self, request: RemotingCommand) -> RemotingCommand:
        group = GetProducerConnectionListRequestHeader.from_ext_fields(request.ext_fields).producer_group
        if not self.broker.clients.has_producer_group(group):
            return request.response(ResponseCode.SYSTEM_ERROR, f"the producer group[{group}] not exist")
        channels = self.broker.clients.producer_connections(group)
        body = ProducerConnection(tuple(_connection(c) for c in channels))
        return request.response(ResponseCode.SUCCESS, body=body.encode())

    def get_broker_config(self, request: RemotingCommand) -> RemotingCommand:
        version = self.broker.config_version  # Configuration.getDataVersionJson(), not the topic table's
        texts = self.broker.config_texts()
        # An empty brokerIP2 means brokerIP1's host, the HA host the broker registers: shown as such, as Java's
        # BrokerConfig holds its default, the local address (common/src/main/java/org/apache/rocketmq/common/
        # BrokerConfig.java), and `mqbroker -p` prints it.
        texts["brokerIP2"] = texts.get("brokerIP2") or self.broker.config.broker_ip1
        # The -c file's keys no setting has, which Java's Configuration holds too (registerConfig; common/src/main/
        # java/org/apache/rocketmq/common/Configuration.java).
        texts = {**self.broker.file_only_properties, **texts}
        return request.response(
            ResponseCode.SUCCESS,
            ext_fields={"version": dumps(version.to_json()).decode()},
            body=format_properties(texts).encode(),
        )


def _connection(info: ClientChannelInfo) -> ClientConnection:
    return ClientConnection(info.client_id, info.client_addr, info.language.name, info.version)


def _name(member: enum.Enum | None) -> str | None:
    """An enum field of the group as fastjson writes it: its name, or left out (None) when null."""
    return None if member is None else member.name


_HANDLERS: Final[dict[int, _Handler]] = {
    RequestCode.GET_ALL_TOPIC_CONFIG: AdminBrokerProcessor.get_all_topic_config,
    RequestCode.UPDATE_AND_CREATE_SUBSCRIPTIONGROUP: AdminBrokerProcessor.update_and_create_subscription_group,
    RequestCode.UPDATE_AND_CREATE_SUBSCRIPTIONGROUP_LIST: AdminBrokerProcessor.create_subscription_group_list,
    RequestCode.DELETE_SUBSCRIPTIONGROUP: AdminBrokerProcessor.delete_subscription_group,
    RequestCode.GET_ALL_SUBSCRIPTIONGROUP_CONFIG: AdminBrokerProcessor.get_all_subscription_group_config,
    RequestCode.GET_SUBSCRIPTIONGROUP_CONFIG: AdminBrokerProcessor.get_subscription_group_config,
    RequestCode.GET_BROKER_RUNTIME_INFO: AdminBrokerProcessor.get_broker_runtime_info,
    RequestCode.GET_TOPIC_STATS_INFO: AdminBrokerProcessor.get_topic_stats_info,
    RequestCode.GET_CONSUME_STATS: AdminBrokerProcessor.get_consume_stats,
    RequestCode.GET_CONSUMER_CONNECTION_LIST: AdminBrokerProcessor.get_consumer_connection_list,
    RequestCode.GET_PRODUCER_CONNECTION_LIST: AdminBrokerProcessor.get_producer_connection_list,
    RequestCode.GET_BROKER_CONFIG: AdminBrokerProcessor.get_broker_config,
    RequestCode.GET_ALL_CONSUMER_OFFSET: AdminBrokerProcessor.all_consumer_offsets,
    RequestCode.GET_SYSTEM_TOPIC_LIST_FROM_BROKER: AdminBrokerProcessor.system_topics,
    RequestCode.POP_ROLLBACK: AdminBrokerProcessor.export_pop_records,
}

_ASYNC_HANDLERS: Final[dict[int, _AsyncHandler]] = {
    RequestCode.UPDATE_AND_CREATE_TOPIC: AdminBrokerProcessor.update_and_create_topic,
    RequestCode.DELETE_TOPIC_IN_BROKER: AdminBrokerProcessor.delete_topic,
    RequestCode.UPDATE_BROKER_CONFIG: AdminBrokerProcessor.update_broker_config,
    RequestCode.CLEAN_UNUSED_TOPIC: AdminBrokerProcessor.clean_unused_topic,
}

_BROKER_TO_CLIENT: Final[dict[int, Callable[[BrokerContext, RemotingCommand], Awaitable[RemotingCommand]]]] = {
    RequestCode.INVOKE_BROKER_TO_RESET_OFFSET: broker2client.reset_offset,
    RequestCode.GET_CONSUMER_RUNNING_INFO: broker2client.consumer_running_info,
    RequestCode.CONSUME_MESSAGE_DIRECTLY: broker2client.consume_message_directly,
}

#: Codes served one at a time (:attr:`AdminBrokerProcessor._topic_changes`).
_SYNCHRONIZED: Final = frozenset(
    {RequestCode.UPDATE_AND_CREATE_TOPIC, RequestCode.DELETE_TOPIC_IN_BROKER, RequestCode.UPDATE_BROKER_CONFIG}
)

#: Codes served here (all on the admin pool).
REQUEST_CODES: Final = (*_HANDLERS, *_ASYNC_HANDLERS, *_BROKER_TO_CLIENT)
