"""The admin client (Java's ``DefaultMQAdminExt``): topics, subscription groups, consumer progress, connections,
message queries, offset resets, broker status, throughput statistics and broker settings. :mod:`client.mqadmin`
is its command line.

Usage::

    async with Admin(namesrv_addr="127.0.0.1:9876") as admin:
        await admin.create_topic("TopicTest", read_queue_nums=4, write_queue_nums=4)   # on every master
        progress = await admin.consumer_progress("my-group")                            # {MessageQueue: OffsetWrapper}
        lag = sum(o.broker_offset - o.consumer_offset for o in progress.values())

It owns a private :class:`~client.instance.MQClientInstance` (no producer or consumer registered, so it sends no
heartbeats). A refusal raises :class:`~client.errors.MQBrokerError` with the server's code and remark; transport
failures raise :class:`~remoting.errors.RemotingError`; a reply that does not decode
:class:`~remoting.codec.errors.CodecError`; a malformed msgId :class:`~client.errors.MQClientError`. The
consume-stats, topic-stats and connection bodies are decoded with :mod:`remoting.codec.bodies.admin`, the same classes
the broker encodes with.

Which brokers a call asks, as DefaultMQAdminExtImpl / MQAdminImpl (``tools/.../DefaultMQAdminExtImpl.java``,
``client/.../impl/MQAdminImpl.java``): reads go to each broker of the topic's route, its master or, while the master
is down, a slave (``BrokerData.selectBrokerAddr``); a group's calls to the brokers of its ``%RETRY%`` topic (every
broker for a group without one: offsets set by tools only); writes to masters; cluster-wide store maintenance to
every address, slaves included. Name-server reads go to the first name server that answers.
"""

from __future__ import annotations

import logging
import zlib
from collections.abc import Callable, Mapping, Sequence
from types import TracebackType
from typing import Any, Self

import anyio
import orjson

from client.admin_ops import AdminOps
from client.config import ClientConfig
from client.errors import BrokerNotExistError, MQBrokerError, MQClientError, TopicRouteNotFoundError
from client.handlers import parse_reset_offset_body
from client.instance import new_instance
from client.message import uncompressed
from remoting.codec.bodies import (
    PERM_READ,
    PERM_WRITE,
    BrokerData,
    ClusterInfo,
    KVTable,
    MessageQueue,
    TopicList,
    TopicRouteData,
)
from remoting.codec.bodies._json import dumps
from remoting.codec.bodies.admin import (
    ClientConnection,
    ConsumerConnection,
    ConsumeStats,
    OffsetWrapper,
    ProducerConnection,
    TopicOffset,
    loads_fastjson,
)
from remoting.codec.bodies.admin import TopicStatsTable as _TopicStats
from remoting.codec.bodies.assignment import MessageRequestMode, SetMessageRequestModeRequestBody
from remoting.codec.bodies.broker_metadata import SubscriptionGroupConfig
from remoting.codec.bodies.stats import BrokerStatsData, ConsumeStatsList, GroupList
from remoting.codec.codes import LanguageCode, RequestCode, ResponseCode
from remoting.codec.command import RemotingCommand, request
from remoting.codec.errors import CodecError, MessageDecodeError
from remoting.codec.headers import (
    ConsumeMessageDirectlyResultRequestHeader,
    CreateTopicRequestHeader,
    DeleteSubscriptionGroupRequestHeader,
    DeleteTopicFromNamesrvRequestHeader,
    DeleteTopicRequestHeader,
    GetConsumerConnectionListRequestHeader,
    GetConsumerRunningInfoRequestHeader,
    GetConsumeStatsInBrokerHeader,
    GetConsumeStatsRequestHeader,
    GetProducerConnectionListRequestHeader,
    GetTopicStatsInfoRequestHeader,
    QueryMessageRequestHeader,
    QueryTopicConsumeByWhoRequestHeader,
    ResetOffsetRequestHeader,
    ViewBrokerStatsDataRequestHeader,
    ViewMessageRequestHeader,
)
from remoting.codec.java_properties import parse_properties
from remoting.codec.message import MessageExt, decode_record, iter_records
from remoting.codec.msgid import OffsetMsgId, decode_offset_msg_id
from remoting.codec.topics import retry_topic
from remoting.errors import RemotingError, RemotingTimeoutError

__all__ = ["Admin", "ConsumeStats", "ConsumerConnection", "OffsetWrapper", "ProducerConnection", "TopicOffset"]

log = logging.getLogger(__name__)

JAVA_LONG_MAX = (1 << 63) - 1
#: Calls a broker relays to a client (running info, direct consumption) wait ``rpc_timeout`` times this, as
#: DefaultMQAdminExtImpl's ``timeoutMillis * 3``, and at least RELAYED_TIMEOUT_MIN (Java's 3 x DefaultMQAdminExt's
#: 5 s): longer than the broker's own wait for the client (Broker2Client.callClient: 10 s), so the broker's
#: CONSUME_MSG_TIMEOUT answer arrives rather than our timeout.
RELAYED_TIMEOUT_FACTOR = 3
RELAYED_TIMEOUT_MIN = 15.0
#: A QUERY_MESSAGE to one broker waits this long, and the answers of all the brokers asked together at most
#: QUERY_WAIT: MQAdminImpl's ``timeoutMillis * 3`` and ``timeoutMillis * 4``, its timeoutMillis being 6000 whatever the
#: client's settings (client/src/main/java/org/apache/rocketmq/client/impl/MQAdminImpl.java queryMessage). A broker
#: answering many records or walking a long index chain takes longer than the usual rpc timeout.
QUERY_TIMEOUT = 18.0
QUERY_WAIT = 24.0
#: VIEW_MESSAGE_BY_ID waits MQAdminImpl's own timeoutMillis (6000), not the client's rpc timeout
#: (client/src/main/java/org/apache/rocketmq/client/impl/MQAdminImpl.java viewMessage).
VIEW_TIMEOUT = 6.0
#: What a call to one broker that fails raises: refused, not answered, or answered with a reply that does not decode
#: (CodecError). Passed over where Java passes over a failing broker (its ``catch (Exception e)``).
BROKER_FAILURES = (MQClientError, RemotingError, OSError, CodecError)


class Admin(AdminOps):
    """See the module docstring."""

    def __init__(self, namesrv_addr: str | Sequence[str] | None = None, *, config: ClientConfig | None = None) -> None:
        self.instance = new_instance(config, namesrv_addr)

    async def __aenter__(self) -> Self:
        await self.instance.__aenter__()
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.instance.__aexit__(exc_type, exc, tb)

    @property
    def _timeout(self) -> float:
        return self.instance.config.rpc_timeout

    @property
    def _relayed_timeout(self) -> float:
        return max(self._timeout * RELAYED_TIMEOUT_FACTOR, RELAYED_TIMEOUT_MIN)

    async def _call(self, addr: str, cmd: RemotingCommand, *ok: int, timeout: float | None = None) -> RemotingCommand:
        """``cmd`` to ``addr`` within ``timeout`` (default ``rpc_timeout``); an answer outside ``ok`` (default
        SUCCESS) raises MQBrokerError."""
        response = await self.instance.remoting.invoke(addr, cmd, timeout or self._timeout)
        if response.code not in (ok or (ResponseCode.SUCCESS,)):
            raise MQBrokerError(response.code, response.remark, addr)
        return response

    async def _namesrv_call(self, code: int, fields: dict[str, str] | None = None, *ok: int) -> RemotingCommand:
        """``code`` to the first name server that answers (Java's ``invokeSync(null, ...)``): one that cannot be
        reached is passed over; an answer outside ``ok`` (default SUCCESS) raises MQBrokerError."""
        last: Exception | None = None
        for addr in self.instance.config.namesrv_addr:
            try:
                response = await self.instance.remoting.invoke(addr, request(code, fields), self._timeout)
            except Exception as exc:
                last = exc
                continue
            if response.code not in (ok or (ResponseCode.SUCCESS,)):
                raise MQBrokerError(response.code, response.remark, addr)
            return response
        raise MQClientError(f"no name server of {', '.join(self.instance.config.namesrv_addr)} answered: {last}")

    async def _first_answer(
        self, addrs: list[str], cmd: Callable[[], RemotingCommand], timeout: float | None = None
    ) -> RemotingCommand:
        """``cmd()`` to each of ``addrs`` in turn until one answers SUCCESS (within ``timeout``, default
        ``rpc_timeout``). When none does: a broker's refusal (MQBrokerError) is raised rather than a dead broker's
        transport error."""
        last: Exception | None = None
        for addr in addrs:
            try:
                return await self._call(addr, cmd(), timeout=timeout)
            except BROKER_FAILURES as exc:
                if last is None or not isinstance(last, MQBrokerError):
                    last = exc
        raise last or MQClientError("no broker in the cluster")

    # -- cluster and topics ------------------------------------------------------------------------------------

    async def cluster_info(self) -> ClusterInfo:
        return ClusterInfo.decode(bytes((await self._namesrv_call(RequestCode.GET_BROKER_CLUSTER_INFO)).body))

    async def topic_list(self) -> list[str]:
        answer = await self._namesrv_call(RequestCode.GET_ALL_TOPIC_LIST_FROM_NAMESERVER)
        return TopicList.decode(bytes(answer.body)).topic_list

    async def topic_route(self, topic: str) -> TopicRouteData:
        return await self.instance.fetch_route(topic)

    async def _cluster_brokers(self, cluster: str | None = None) -> list[BrokerData]:
        """The brokers of ``cluster`` (default: every cluster), one BrokerData per broker name."""
        info = await self.cluster_info()
        clusters = info.cluster_addr_table
        names = (
            {n for members in clusters.values() for n in members} if cluster is None else set(clusters.get(cluster, []))
        )
        return [bd for n, bd in sorted(info.broker_addr_table.items()) if n in names]

    async def master_addresses(self, cluster: str | None = None) -> list[str]:
        """Master addresses of ``cluster`` (default: every cluster)."""
        return sorted(bd.master_addr for bd in await self._cluster_brokers(cluster) if bd.master_addr)

    async def broker_addresses(self, cluster: str | None = None) -> list[str]:
        """Every address, masters and slaves, of ``cluster`` (default: every cluster); Java's
        ``ClusterInfo.retrieveAllAddrByCluster``."""
        return sorted(addr for bd in await self._cluster_brokers(cluster) for addr in bd.broker_addrs.values())

    async def target_brokers(self, broker_addr: str | None = None, cluster: str | None = None) -> list[str]:
        """What an mqadmin-style ``-b``/``-c`` pair names: ``broker_addr`` alone when given, else every master of
        ``cluster`` (default: every cluster)."""
        return [broker_addr] if broker_addr else await self.master_addresses(cluster)

    async def _topic_brokers(self, topic: str, *, reads: bool) -> list[tuple[str, str]]:
        """``(broker name, address)`` of each broker of ``topic``'s route, by name: its master, or for ``reads`` a
        slave while the master is down (``BrokerData.selectBrokerAddr``). A broker without one is left out."""
        route = await self.topic_route(topic)
        picked = ((bd.broker_name, bd.select_broker_addr() if reads else bd.master_addr) for bd in route.broker_datas)
        return sorted((name, addr) for name, addr in picked if addr)

    async def _topic_masters(self, topic: str) -> list[tuple[str, str]]:
        """``(broker name, master address)`` of each broker of ``topic``'s route; BrokerNotExistError for one whose
        master is down: its slave may not hold what the master stored (HA copies asynchronously)."""
        masters = []
        for bd in (await self.topic_route(topic)).broker_datas:
            addr = bd.master_addr
            if not addr:
                raise BrokerNotExistError(bd.broker_name)
            masters.append((bd.broker_name, addr))
        return sorted(masters)

    async def _group_brokers(self, group: str, *, reads: bool) -> list[str]:
        """The brokers ``group`` lives on: those of its ``%RETRY%`` topic's route (DefaultMQAdminExtImpl's
        examineConsumeStats, getConsumerRunningInfo, cloneGroupOffset), so a dead broker elsewhere is never asked.
        A group without that topic (never online; offsets set by tools): every broker of every cluster."""
        try:
            return [addr for _, addr in await self._topic_brokers(retry_topic(group), reads=reads)]
        except TopicRouteNotFoundError:
            brokers = await self._cluster_brokers()
            picked = (bd.select_broker_addr() if reads else bd.master_addr for bd in brokers)
            return sorted(addr for addr in picked if addr)

    async def create_topic(
        self,
        topic: str,
        *,
        read_queue_nums: int = 4,
        write_queue_nums: int = 4,
        perm: int = PERM_READ | PERM_WRITE,
        order: bool = False,
        broker_addr: str | None = None,
        cluster: str | None = None,
        topic_sys_flag: int = 0,
        attributes: str | None = None,
    ) -> list[str]:
        """UPDATE_AND_CREATE_TOPIC on ``broker_addr``, or on every master of ``cluster`` (default: all masters);
        ``attributes`` is RocketMQ 5's modification text (``+message.type=FIFO``). Returns the brokers it was created
        on."""
        header = CreateTopicRequestHeader(
            topic=topic,
            default_topic="TBW102",
            read_queue_nums=read_queue_nums,
            write_queue_nums=write_queue_nums,
            perm=perm,
            topic_filter_type="SINGLE_TAG",
            order=order,
            topic_sys_flag=topic_sys_flag,
            attributes=attributes,
        )
        targets = await self.target_brokers(broker_addr, cluster)
        for addr in targets:
            await self._call(addr, request(RequestCode.UPDATE_AND_CREATE_TOPIC, header.to_ext_fields()))
        return targets

    async def delete_topic(self, topic: str, *, cluster: str | None = None) -> None:
        """Delete ``topic`` on every master of ``cluster``, then on every name server (only ``cluster``'s queues of
        it there, as DefaultMQAdminExtImpl.deleteTopicInNameServer)."""
        await self.delete_topic_in_brokers(topic, await self.master_addresses(cluster))
        await self.delete_topic_in_namesrv(topic, cluster=cluster)

    async def delete_topic_in_brokers(self, topic: str, addrs: Sequence[str]) -> None:
        """DELETE_TOPIC_IN_BROKER at each of ``addrs`` in turn (DefaultMQAdminExtImpl.deleteTopicInBroker); a refusal
        stops there."""
        fields = DeleteTopicRequestHeader(topic=topic).to_ext_fields()
        for addr in addrs:
            await self._call(addr, request(RequestCode.DELETE_TOPIC_IN_BROKER, fields))

    async def delete_topic_in_namesrv(self, topic: str, *, cluster: str | None = None) -> None:
        """DELETE_TOPIC_IN_NAMESRV at every name server (only ``cluster``'s queues when given); the cached route is
        forgotten."""
        fields = DeleteTopicFromNamesrvRequestHeader(topic=topic, cluster_name=cluster).to_ext_fields()
        for addr in self.instance.config.namesrv_addr:
            response = await self.instance.remoting.invoke(
                addr, request(RequestCode.DELETE_TOPIC_IN_NAMESRV, fields), self._timeout
            )
            if response.code != ResponseCode.SUCCESS:
                raise MQBrokerError(response.code, response.remark, addr)
        self.instance.forget_route(topic)

    async def topic_status(self, topic: str) -> dict[MessageQueue, TopicOffset]:
        """Min/max offset and last update time of every queue of ``topic``, from each of its brokers."""
        table: dict[MessageQueue, TopicOffset] = {}
        for _, addr in await self._topic_brokers(topic, reads=True):
            fields = GetTopicStatsInfoRequestHeader(topic=topic).to_ext_fields()
            response = await self._call(addr, request(RequestCode.GET_TOPIC_STATS_INFO, fields))
            table.update(_TopicStats.decode(response.body).offset_table)
        return dict(sorted(table.items()))

    # -- subscription groups and consumers ---------------------------------------------------------------------

    async def create_subscription_group(
        self, config: SubscriptionGroupConfig, *, broker_addr: str | None = None, cluster: str | None = None
    ) -> list[str]:
        targets = await self.target_brokers(broker_addr, cluster)
        for addr in targets:
            cmd = request(RequestCode.UPDATE_AND_CREATE_SUBSCRIPTIONGROUP, body=dumps(config.to_json()))
            await self._call(addr, cmd)
        return targets

    async def delete_subscription_group(
        self, group: str, *, broker_addr: str | None = None, cluster: str | None = None, clean_offset: bool = False
    ) -> list[str]:
        targets = await self.target_brokers(broker_addr, cluster)
        header = DeleteSubscriptionGroupRequestHeader(group, remove_offset=clean_offset, clean_offset=clean_offset)
        fields = header.to_ext_fields()
        for addr in targets:
            await self._call(addr, request(RequestCode.DELETE_SUBSCRIPTIONGROUP, fields))
        return targets

    async def set_message_request_mode(
        self, broker_addr: str, topic: str, group: str, mode: MessageRequestMode, pop_share_queue_num: int = 0
    ) -> None:
        """SET_MESSAGE_REQUEST_MODE (401) of ``group`` on ``topic`` at ``broker_addr`` (Java's
        ``MQClientAPIImpl.setMessageRequestMode``); raises MQBrokerError unless SUCCESS."""
        body = SetMessageRequestModeRequestBody(topic, group, mode, pop_share_queue_num).encode()
        await self._call(broker_addr, request(RequestCode.SET_MESSAGE_REQUEST_MODE, body=body))

    async def consume_stats(
        self, group: str, topic: str | None = None, *, broker_addr: str | None = None, sort: bool = True
    ) -> ConsumeStats:
        """GET_CONSUME_STATS of ``group`` (or of its ``topic``) from ``broker_addr`` alone (Java's
        ``MQClientAPIImpl.getConsumeStats(addr, ...)``), or from each of the group's brokers, merged: every queue's
        offsets and the consume TPS summed over the brokers (Java's ``examineConsumeStats``). No offsets: an empty
        table. The queues sorted, or with ``sort`` false in the order the brokers wrote them."""
        fields = GetConsumeStatsRequestHeader(consumer_group=group, topic=topic).to_ext_fields()
        table: dict[MessageQueue, OffsetWrapper] = {}
        tps = 0.0
        for addr in [broker_addr] if broker_addr else await self._group_brokers(group, reads=True):
            stats = ConsumeStats.decode((await self._call(addr, request(RequestCode.GET_CONSUME_STATS, fields))).body)
            table.update(stats.offset_table)
            tps += stats.consume_tps
        return ConsumeStats(dict(sorted(table.items())) if sort else table, tps)

    async def consumer_progress(self, group: str, topic: str | None = None) -> dict[MessageQueue, OffsetWrapper]:
        """Broker offset, consumer offset and last consume time per queue of every topic ``group`` has offsets
        for (or of ``topic``), from the group's brokers. Lag of a queue = broker_offset - consumer_offset."""
        return (await self.consume_stats(group, topic)).offset_table

    async def consumer_connection(self, group: str, broker_addr: str | None = None) -> ConsumerConnection:
        """The online consumers of ``group`` (from ``broker_addr``, or the first of the group's brokers that knows
        them; one that does not answer is passed over). Raises MQBrokerError CONSUMER_NOT_ONLINE (206) when none is
        online."""
        fields = GetConsumerConnectionListRequestHeader(consumer_group=group).to_ext_fields()
        addrs = [broker_addr] if broker_addr else await self._group_brokers(group, reads=True)
        response = await self._first_answer(addrs, lambda: request(RequestCode.GET_CONSUMER_CONNECTION_LIST, fields))
        return ConsumerConnection.decode(response.body)

    async def producer_connection(self, group: str, topic: str) -> ProducerConnection:
        """The producers of ``group`` connected to the brokers of ``topic``."""
        fields = GetProducerConnectionListRequestHeader(producer_group=group).to_ext_fields()
        found: dict[str, ClientConnection] = {}
        last: MQBrokerError | None = None
        for _, addr in await self._topic_brokers(topic, reads=True):
            try:
                response = await self._call(addr, request(RequestCode.GET_PRODUCER_CONNECTION_LIST, fields))
            except MQBrokerError as exc:
                last = exc
                continue
            for conn in ProducerConnection.decode(response.body).connection_set:
                found[conn.client_id] = conn
        if not found and last is not None:
            raise last
        return ProducerConnection(tuple(found.values()))

    async def reset_offset_by_time(
        self, group: str, topic: str, timestamp_ms: int, *, force: bool = True, cpp: bool = False
    ) -> dict[MessageQueue, int]:
        """INVOKE_BROKER_TO_RESET_OFFSET on each broker of ``topic`` (its master, else a slave while the master is
        down): online consumers move to the offsets of
        ``timestamp_ms`` (-1: the end). Returns the new offsets. ``cpp`` sends it as ``LanguageCode.CPP``, so the
        broker pushes the offsets in the form C++ clients read (Java's ``isC``,
        ``client/src/main/java/org/apache/rocketmq/client/impl/MQClientAPIImpl.java`` invokeBrokerToResetOffset)."""
        table: dict[MessageQueue, int] = {}
        for answer in await self.reset_offset_by_time_per_broker(group, topic, timestamp_ms, force=force, cpp=cpp):
            table.update(answer)
        return dict(sorted(table.items()))

    async def reset_offset_by_time_per_broker(
        self, group: str, topic: str, timestamp_ms: int, *, force: bool = True, cpp: bool = False
    ) -> list[dict[MessageQueue, int]]:
        """:meth:`reset_offset_by_time`'s requests, each broker's answer apart and in the order it wrote them, the
        brokers in the route's order, as DefaultMQAdminExtImpl.resetOffsetByTimestamp goes over them
        (tools/src/main/java/org/apache/rocketmq/tools/admin/DefaultMQAdminExtImpl.java). Each broker is asked at
        ``BrokerData.selectBrokerAddr()``: its master, else a slave, which resets the consumers connected to it
        (common/src/main/java/org/apache/rocketmq/common/protocol/route/BrokerData.java)."""
        fields = ResetOffsetRequestHeader(topic=topic, group=group, timestamp=timestamp_ms, is_force=force)
        answers: list[dict[MessageQueue, int]] = []
        for bd in (await self.topic_route(topic)).broker_datas:
            addr = bd.select_broker_addr()
            if not addr:
                continue
            language = LanguageCode.CPP if cpp else LanguageCode.PYTHON
            cmd = request(RequestCode.INVOKE_BROKER_TO_RESET_OFFSET, fields.to_ext_fields(), language=language)
            answers.append(parse_reset_offset_body((await self._call(addr, cmd)).body))
        return answers

    async def reset_offset_by_queue_id(
        self, broker_addr: str, group: str, topic: str, queue_id: int, offset: int
    ) -> dict[MessageQueue, int]:
        """Move ``group`` on one queue of the broker at ``broker_addr`` to ``offset``: UPDATE_CONSUMER_OFFSET, then
        INVOKE_BROKER_TO_RESET_OFFSET naming the queue and the offset, which a RocketMQ 5 broker resets itself and
        holds for the group's next pull or pop; returns its answer (RocketMQ 5.3.3's
        ``tools/src/main/java/org/apache/rocketmq/tools/admin/DefaultMQAdminExtImpl.java`` resetOffsetByQueueId)."""
        mq = MessageQueue(topic, "", queue_id)
        await self.update_consumer_offset(broker_addr, group, mq, offset)
        header = ResetOffsetRequestHeader(topic, group, 0, False, queue_id=queue_id, offset=offset)
        answer = await self._call(
            broker_addr, request(RequestCode.INVOKE_BROKER_TO_RESET_OFFSET, header.to_ext_fields())
        )
        return parse_reset_offset_body(answer.body)

    async def consumer_running_info(self, group: str, client_id: str, *, jstack: bool = False) -> dict[str, Any]:
        """GET_CONSUMER_RUNNING_INFO, relayed by one of the group's brokers (the first that answers) to the consumer
        ``client_id`` of ``group``: its subscriptions and ``mqTable`` (``{MessageQueue: ProcessQueueInfo}``), as
        Java's ConsumerRunningInfo; with ``jstack`` (the request's ``jstackEnable``, as MQClientAPIImpl sends it) also
        the consumer's thread stacks under ``"jstack"`` (a 5.x consumer answers with those only)."""
        header = GetConsumerRunningInfoRequestHeader(consumer_group=group, client_id=client_id, jstack_enable=jstack)
        fields = header.to_ext_fields()
        response = await self._first_answer(
            await self._group_brokers(group, reads=True),
            lambda: request(RequestCode.GET_CONSUMER_RUNNING_INFO, fields),
            self._relayed_timeout,
        )
        info = loads_fastjson(response.body)
        if not isinstance(info, dict):
            raise MQClientError(f"consumer running info is not an object: {info!r:.80}")
        return info

    async def consume_message_directly(self, group: str, client_id: str, offset_msg_id: str) -> dict[str, object]:
        """CONSUME_MESSAGE_DIRECTLY: the broker storing ``offset_msg_id`` hands the message to the consumer's
        listener; returns the consumer's ConsumeMessageDirectlyResult (``consumeResult`` ``CR_SUCCESS``...)."""
        decoded = _decode_msg_id(offset_msg_id)
        fields = ConsumeMessageDirectlyResultRequestHeader(
            consumer_group=group, client_id=client_id, msg_id=offset_msg_id
        ).to_ext_fields()
        addr = f"{decoded.host}:{decoded.port}"
        cmd = request(RequestCode.CONSUME_MESSAGE_DIRECTLY, fields)
        response = await self._call(addr, cmd, timeout=self._relayed_timeout)
        return dict(orjson.loads(bytes(response.body)))

    # -- messages ----------------------------------------------------------------------------------------------

    async def query_msg_by_id(self, offset_msg_id: str) -> MessageExt:
        """VIEW_MESSAGE_BY_ID at the broker the offset msgId names, within VIEW_TIMEOUT."""
        decoded = _decode_msg_id(offset_msg_id)
        addr = f"{decoded.host}:{decoded.port}"
        fields = ViewMessageRequestHeader(offset=decoded.phy_offset).to_ext_fields()
        response = await self._call(addr, request(RequestCode.VIEW_MESSAGE_BY_ID, fields), timeout=VIEW_TIMEOUT)
        return uncompressed(decode_record(response.body))

    async def query_msg_by_key(
        self,
        topic: str,
        key: str,
        *,
        max_num: int = 32,
        begin_ms: int = 0,
        end_ms: int | None = None,
        every_broker: bool = False,
    ) -> list[MessageExt]:
        """QUERY_MESSAGE by key on each broker of ``topic``: its messages one of whose KEYS is ``key``.

        The broker's index answers by the hash of ``topic#key``, so colliding keys, other topics' messages and
        messages whose UNIQ_KEY (indexed in the same space) is ``key`` come back too; they are dropped here, as
        MQAdminImpl.queryMessage matches only the KEYS tokens (client/src/main/java/org/apache/rocketmq/client/impl/
        MQAdminImpl.java); a producer's msgId is looked up with :meth:`query_msg_by_unique_key`. Without ``end_ms``
        the range is open-ended (Java mqadmin's ``Long.MAX_VALUE``), so a broker clock ahead of ours hides nothing.
        ``every_broker``: ask each broker's master and raise when any broker has none up (BrokerNotExistError: a slave
        may lack what its master stored), fails or does not answer in time, for a caller that takes "nothing found" as
        "nothing stored" (the Spark sink's markers), where Java's reads a slave or passes the broker over. A broker
        the route no longer lists (the name server dropped a dead master without a slave) is not asked at all."""
        end = JAVA_LONG_MAX if end_ms is None else end_ms
        header = QueryMessageRequestHeader(
            topic=topic, key=key, max_num=max_num, begin_timestamp=begin_ms, end_timestamp=end
        )
        keep: Callable[[MessageExt], bool] = lambda m: m.topic == topic and _indexed_under(m, key)  # noqa: E731
        return await self._query_index(header, keep, every_broker=every_broker)

    async def _query_index(
        self, header: QueryMessageRequestHeader, keep: Callable[[MessageExt], bool], *, every_broker: bool = False
    ) -> list[MessageExt]:
        """QUERY_MESSAGE on each broker of ``header.topic`` (reads), all at once, each within QUERY_TIMEOUT and all
        within QUERY_WAIT; the messages ``keep`` accepts, oldest first. A broker that fails or has not answered in
        time is logged and passed over, as MQAdminImpl.queryMessage; an error is raised only when none answered, or,
        with ``every_broker`` (masters only, see :meth:`query_msg_by_key`), when any one did not."""
        topic = header.topic
        brokers = await (self._topic_masters(topic) if every_broker else self._topic_brokers(topic, reads=True))
        found: list[MessageExt] = []
        failed: list[Exception] = []
        answered = 0

        async def ask(addr: str) -> None:
            nonlocal answered
            try:
                records = await self._query_at(addr, header, QUERY_TIMEOUT)
            except BROKER_FAILURES as exc:
                log.warning("query message of %s at %s failed: %s", header.topic, addr, exc)
                failed.append(exc)
                return
            answered += 1
            for record in records:
                try:
                    msg = uncompressed(record)
                except zlib.error as exc:
                    # MessageDecoder.decodes stops at a record whose body does not inflate (decode catches the
                    # failure and answers null), keeping the ones before it and the other brokers' answers
                    # (common/src/main/java/org/apache/rocketmq/common/message/MessageDecoder.java).
                    log.warning("query message of %s at %s: a body does not inflate (%s), the rest skipped",
                                header.topic, addr, exc)  # fmt: skip
                    return
                if keep(msg):
                    found.append(msg)

        # MQAdminImpl.queryMessage asks every broker at once (invokeAsync) and awaits them together, at most
        # QUERY_WAIT: one slow or silent broker neither holds up the others nor counts twice.
        with anyio.move_on_after(QUERY_WAIT) as waited:
            async with anyio.create_task_group() as tasks:
                for _, addr in brokers:
                    tasks.start_soon(ask, addr)
        if waited.cancelled_caught:
            log.warning("query message of %s: maybe some broker failed (no answer in %.0f s)", header.topic, QUERY_WAIT)
        if brokers and not answered:
            raise failed[-1] if failed else RemotingTimeoutError(f"no broker of {header.topic} answered the query")
        if every_broker and answered < len(brokers):
            raise failed[-1] if failed else RemotingTimeoutError(f"a broker of {header.topic} did not answer the query")
        return sorted(found, key=lambda m: m.store_timestamp)

    async def _query_at(
        self, addr: str, header: QueryMessageRequestHeader, timeout: float | None = None
    ) -> list[MessageExt]:
        """QUERY_MESSAGE on one broker: the records its index found, as stored (none: QUERY_NOT_FOUND), up to the
        first that does not decode (logged), as MessageDecoder.decodes stops there and keeps the ones before it
        (common/src/main/java/org/apache/rocketmq/common/message/MessageDecoder.java)."""
        cmd = request(RequestCode.QUERY_MESSAGE, header.to_ext_fields())
        response = await self._call(addr, cmd, ResponseCode.SUCCESS, ResponseCode.QUERY_NOT_FOUND, timeout=timeout)
        if response.code != ResponseCode.SUCCESS:
            return []
        records: list[MessageExt] = []
        try:
            records.extend(iter_records(response.body))
        except MessageDecodeError as exc:
            log.warning("query message of %s at %s: a record does not decode (%s), the rest skipped",
                        header.topic, addr, exc)  # fmt: skip
        return records

    async def query_msg_by_offset(self, mq: MessageQueue, offset: int, count: int = 1) -> list[MessageExt]:
        """Up to ``count`` messages of ``mq`` from ``offset`` (a pull by the tools group, no offset committed)."""
        return (await self.pull(mq, offset, count)).messages[:count]

    async def broker_status(self, broker_addr: str) -> dict[str, str]:
        response = await self._call(broker_addr, request(RequestCode.GET_BROKER_RUNTIME_INFO))
        return KVTable.decode(response.body).table

    # -- statistics and broker settings ------------------------------------------------------------------------

    async def view_broker_stats_data(self, broker_addr: str, stats_name: str, stats_key: str) -> BrokerStatsData:
        """One stats item (``TOPIC_PUT_NUMS`` by topic, ``GROUP_GET_NUMS`` by ``topic@group``...); MQBrokerError
        SYSTEM_ERROR when the broker has no such item (nothing counted yet)."""
        fields = ViewBrokerStatsDataRequestHeader(stats_name=stats_name, stats_key=stats_key).to_ext_fields()
        response = await self._call(broker_addr, request(RequestCode.VIEW_BROKER_STATS_DATA, fields))
        return BrokerStatsData.decode(response.body)

    async def broker_consume_stats(
        self, broker_addr: str, *, is_order: bool = False, timeout: float | None = None
    ) -> ConsumeStatsList:
        """Every group's consume stats on one broker, with its total lag (``mqadmin brokerConsumeStats``), waiting
        ``timeout`` seconds (default ``rpc_timeout``) as MQClientAPIImpl.fetchConsumeStatsInBroker its
        ``timeoutMillis``: a broker with many groups takes long to collect them."""
        fields = GetConsumeStatsInBrokerHeader(is_order=is_order).to_ext_fields()
        cmd = request(RequestCode.GET_BROKER_CONSUME_STATS, fields)
        response = await self._call(broker_addr, cmd, timeout=timeout)
        return ConsumeStatsList.decode(response.body)

    async def topic_consumed_by(self, topic: str) -> list[str]:
        """Groups consuming ``topic`` on any of its brokers that answers (online subscribers and groups with offsets).

        Java's DefaultMQAdminExtImpl.queryTopicConsumeByWho (tools/src/main/java/org/apache/rocketmq/tools/admin/
        DefaultMQAdminExtImpl.java) asks one broker of the route, so a dead broker elsewhere in it does not fail
        ``topicList -c``, ``statsAll`` or a message's tracks; here a broker that fails is passed over, and the last
        failure raised only when none answers."""
        fields = QueryTopicConsumeByWhoRequestHeader(topic=topic).to_ext_fields()
        groups: set[str] = set()
        answered = False
        last: Exception | None = None
        for _, addr in await self._topic_brokers(topic, reads=True):
            try:
                response = await self._call(addr, request(RequestCode.QUERY_TOPIC_CONSUME_BY_WHO, fields))
            except BROKER_FAILURES as exc:
                last = exc
                continue
            answered = True
            groups.update(GroupList.decode(response.body).group_list)
        if not answered and last is not None:
            raise last
        return sorted(groups)

    async def clean_unused_topic(self, *, broker_addr: str | None = None, cluster: str | None = None) -> list[str]:
        """CLEAN_UNUSED_TOPIC on ``broker_addr`` or every broker of ``cluster`` (default: every cluster), slaves
        included (DefaultMQAdminExtImpl.cleanUnusedTopicByCluster): the brokers drop the stored queues of topics they
        no longer have. Returns the brokers asked."""
        targets = [broker_addr] if broker_addr else await self.broker_addresses(cluster)
        for addr in targets:
            await self._call(addr, request(RequestCode.CLEAN_UNUSED_TOPIC))
        return targets

    async def update_broker_config(self, broker_addr: str, properties: dict[str, str]) -> None:
        """UPDATE_BROKER_CONFIG: applied at once and written to the broker's ``-c`` file when it has one."""
        body = "".join(f"{k}={v}\n" for k, v in properties.items()).encode()
        await self._call(broker_addr, request(RequestCode.UPDATE_BROKER_CONFIG, body=body))

    async def broker_config(self, broker_addr: str) -> dict[str, str]:
        """GET_BROKER_CONFIG: every setting of the broker by property name."""
        response = await self._call(broker_addr, request(RequestCode.GET_BROKER_CONFIG))
        return parse_properties(bytes(response.body).decode("utf-8", "replace"))


def _indexed_under(msg: MessageExt, key: str) -> bool:
    return key in msg.keys


def _decode_msg_id(offset_msg_id: str) -> OffsetMsgId:
    """The store address and offset in an offset msgId; MQClientError when it is not one (MQAdminImpl.viewMessage's
    NO_MESSAGE). A producer's UNIQ_KEY has an IPv4 offset msgId's length, but its "port" (pid and class-loader hash)
    is out of range: MessageDecoder.decodeMessageId's InetSocketAddress throws, which viewMessage answers NO_MESSAGE
    too (client/src/main/java/org/apache/rocketmq/client/impl/MQAdminImpl.java)."""
    try:
        decoded = decode_offset_msg_id(offset_msg_id)
    except MessageDecodeError as exc:
        raise MQClientError(f"query message by id finished, but no message: {exc}") from exc
    if not 0 <= decoded.port <= 0xFFFF:
        raise MQClientError(
            f"query message by id finished, but no message: {offset_msg_id} is not an offset msgId (port "
            f"{decoded.port} out of range; a producer's msgId is a unique key: queryMsgByUniqueKey)"
        )
    return decoded


def transferred_tps(runtime: Mapping[str, str]) -> str | None:
    """A broker runtime table's transfer rates (three, space-separated): ``getTransferredTps`` as a 5.x broker names
    them (5.3.3's store/src/main/java/org/apache/rocketmq/store/StoreStatsService.java), else 4.9.8's
    ``getTransferedTps``; None when it has neither."""
    return runtime.get("getTransferredTps") or runtime.get("getTransferedTps")
