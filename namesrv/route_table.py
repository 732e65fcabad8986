"""The name server's route table: RocketMQ's ``RouteInfoManager`` (docs/protocol.md#81-registration-and-the-route-table,
docs/protocol.md#314-name-server-headers).

State, all keyed the way Java keys it:

- ``topic -> {brokerName -> QueueData}`` (topic queue table);
- ``brokerName -> BrokerData`` (cluster, and ``brokerId -> address``);
- ``cluster -> {brokerName}``;
- ``brokerAddr -> BrokerLiveInfo`` (last registration time, DataVersion, HA address, connection);
- ``brokerAddr -> [filter server]``.

Rules kept from Java: an address registered under a new id replaces its old id (slave promoted to master); queue data
is rebuilt from a registration only for a master (id 0) and only when its DataVersion changed or this is its first
registration; a slave learns its master's address and HA address; a route needs both queue data and broker data.

Ownership and time: the table is plain, synchronous state owned by one name server and touched only from its Trio
tasks (no locks needed: no method awaits). It never reads a clock: callers pass ``now`` in seconds (Trio's clock in
the server, so liveness is testable under ``autojump_clock``). It never closes connections either:
:meth:`RouteTable.scan_not_active_brokers` returns the expired brokers and the caller closes them. Methods do not
raise for unknown brokers or topics; they return ``None``, an empty result or a zero count.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import attrs

from remoting.codec.bodies import (
    MASTER_ID,
    PERM_READ,
    PERM_WRITE,
    BrokerData,
    ClusterInfo,
    DataVersion,
    QueueData,
    TopicConfig,
    TopicConfigSerializeWrapper,
    TopicList,
    TopicRouteData,
)


@attrs.define
class BrokerLiveInfo:
    last_update: float
    data_version: DataVersion
    ha_server_addr: str
    #: The broker's connection (any object; identity only), so its close can drop the broker at once.
    connection: Any = None


@attrs.frozen
class RegisterBrokerResult:
    """For a slave whose master is alive: the master's HA address and main address; otherwise both ``None``."""

    ha_server_addr: str | None = None
    master_addr: str | None = None


@attrs.frozen
class ExpiredBroker:
    broker_addr: str
    connection: Any


@attrs.define
class _BrokerEntry:
    cluster: str
    broker_name: str
    addrs: dict[int, str] = attrs.field(factory=dict)

    def snapshot(self) -> BrokerData:
        return BrokerData(self.cluster, self.broker_name, dict(self.addrs))


class RouteTable:
    """See the module docstring. ``broker_channel_expired_time`` is in seconds."""

    def __init__(self, broker_channel_expired_time: float = 120.0) -> None:
        self.broker_channel_expired_time = broker_channel_expired_time
        self._topic_queues: dict[str, dict[str, QueueData]] = {}
        self._brokers: dict[str, _BrokerEntry] = {}
        self._clusters: dict[str, set[str]] = {}
        self._live: dict[str, BrokerLiveInfo] = {}
        self._filter_servers: dict[str, list[str]] = {}

    # -- registration ---------------------------------------------------------------------------------------------

    def register_broker(
        self,
        *,
        cluster_name: str,
        broker_addr: str,
        broker_name: str,
        broker_id: int,
        ha_server_addr: str,
        topic_config_wrapper: TopicConfigSerializeWrapper | None,
        filter_server_list: list[str] | None,
        connection: Any,
        now: float,
    ) -> RegisterBrokerResult:
        self._clusters.setdefault(cluster_name, set()).add(broker_name)
        entry = self._brokers.get(broker_name)
        first = entry is None
        if entry is None:
            entry = self._brokers[broker_name] = _BrokerEntry(cluster_name, broker_name)
        # One address has one id: a slave promoted to master re-registers its address under id 0.
        for bid in [bid for bid, addr in entry.addrs.items() if addr == broker_addr and bid != broker_id]:
            del entry.addrs[bid]
        old_addr = entry.addrs.get(broker_id)
        entry.addrs[broker_id] = broker_addr
        first = first or old_addr is None

        version = topic_config_wrapper.data_version if topic_config_wrapper is not None else DataVersion(0, 0)
        rebuild = first or self.is_broker_topic_config_changed(broker_addr, version)
        if topic_config_wrapper is not None and broker_id == MASTER_ID and rebuild:
            for topic_config in topic_config_wrapper.topic_config_table.values():
                self._update_queue_data(broker_name, topic_config)

        self._live[broker_addr] = BrokerLiveInfo(now, version, ha_server_addr, connection)
        if filter_server_list is not None:
            if filter_server_list:
                self._filter_servers[broker_addr] = list(filter_server_list)
            else:
                self._filter_servers.pop(broker_addr, None)

        if broker_id != MASTER_ID:
            master_addr = entry.addrs.get(MASTER_ID)
            master = self._live.get(master_addr) if master_addr is not None else None
            if master is not None:
                return RegisterBrokerResult(master.ha_server_addr, master_addr)
        return RegisterBrokerResult()

    def _update_queue_data(self, broker_name: str, tc: TopicConfig) -> None:
        queue_data = QueueData(broker_name, tc.read_queue_nums, tc.write_queue_nums, tc.perm, tc.topic_sys_flag)
        self._topic_queues.setdefault(tc.topic_name, {})[broker_name] = queue_data

    def unregister_broker(self, *, cluster_name: str, broker_addr: str, broker_name: str, broker_id: int) -> None:
        """Forget one broker address; its topics go only when its broker name has no address left (as in Java)."""
        self._live.pop(broker_addr, None)
        self._filter_servers.pop(broker_addr, None)
        entry = self._brokers.get(broker_name)
        if entry is None:
            return
        entry.addrs.pop(broker_id, None)
        if entry.addrs:
            return
        del self._brokers[broker_name]
        names = self._clusters.get(cluster_name)
        if names is not None:
            names.discard(broker_name)
            if not names:
                del self._clusters[cluster_name]
        self._remove_topics_of(broker_name)

    def is_broker_topic_config_changed(self, broker_addr: str, data_version: DataVersion) -> bool:
        live = self._live.get(broker_addr)
        return live is None or live.data_version != data_version

    def query_broker_topic_config(self, broker_addr: str) -> DataVersion | None:
        live = self._live.get(broker_addr)
        return None if live is None else live.data_version

    def update_broker_info_update_timestamp(self, broker_addr: str, now: float) -> None:
        live = self._live.get(broker_addr)
        if live is not None:
            live.last_update = now

    # -- liveness ---------------------------------------------------------------------------------------------------

    def scan_not_active_brokers(self, now: float) -> list[ExpiredBroker]:
        """Drop every broker silent for longer than the expiry; return them so the caller can close their links."""
        expired = [
            ExpiredBroker(addr, live.connection)
            for addr, live in self._live.items()
            if live.last_update + self.broker_channel_expired_time < now
        ]
        for broker in expired:
            self._destroy_broker_addr(broker.broker_addr)
        return expired

    def on_connection_closed(self, connection: Any) -> list[str]:
        """Drop the brokers registered over ``connection``; returns their addresses (empty for a client's link)."""
        addrs = [addr for addr, live in self._live.items() if live.connection is connection]
        for addr in addrs:
            self._destroy_broker_addr(addr)
        return addrs

    def _destroy_broker_addr(self, broker_addr: str) -> None:
        self._live.pop(broker_addr, None)
        self._filter_servers.pop(broker_addr, None)
        emptied: list[_BrokerEntry] = []
        for entry in self._brokers.values():
            for bid in [bid for bid, addr in entry.addrs.items() if addr == broker_addr]:
                del entry.addrs[bid]
            if not entry.addrs:
                emptied.append(entry)
        for entry in emptied:
            del self._brokers[entry.broker_name]
            for cluster, names in list(self._clusters.items()):
                names.discard(entry.broker_name)
                if not names:
                    del self._clusters[cluster]
            self._remove_topics_of(entry.broker_name)

    def _remove_topics_of(self, broker_name: str) -> None:
        for topic in list(self._topic_queues):
            queues = self._topic_queues[topic]
            queues.pop(broker_name, None)
            if not queues:
                del self._topic_queues[topic]

    # -- queries ----------------------------------------------------------------------------------------------------

    def pickup_topic_route_data(self, topic: str) -> TopicRouteData | None:
        """The route in Java's shape, or ``None`` when the topic has no queue data or no broker data."""
        queues = self._topic_queues.get(topic)
        if not queues:
            return None
        broker_datas = [self._brokers[name].snapshot() for name in queues if name in self._brokers]
        if not broker_datas:
            return None
        filter_servers = {
            addr: list(self._filter_servers[addr])
            for bd in broker_datas
            for addr in bd.broker_addrs.values()
            if addr in self._filter_servers
        }
        return TopicRouteData(list(queues.values()), broker_datas, filter_servers)

    def get_all_cluster_info(self) -> ClusterInfo:
        return ClusterInfo(
            broker_addr_table={name: entry.snapshot() for name, entry in self._brokers.items()},
            cluster_addr_table={cluster: sorted(names) for cluster, names in self._clusters.items()},
        )

    def get_all_topic_list(self) -> TopicList:
        return TopicList(sorted(self._topic_queues))

    def get_topics_by_cluster(self, cluster: str) -> TopicList:
        names = self._clusters.get(cluster, set())
        return TopicList(sorted(t for t, queues in self._topic_queues.items() if names.intersection(queues)))

    def get_system_topic_list(self) -> TopicList:
        """Cluster and broker names (the broker creates a topic for each), with one broker address to ask: a master,
        else (only slaves registered) a slave's, as Java's getSystemTopicList takes a broker's first address whatever
        its id."""
        topics = set(self._clusters)
        for names in self._clusters.values():
            topics.update(names)
        tables = [e.addrs for e in self._brokers.values() if e.addrs]
        addr = next((t[MASTER_ID] for t in tables if MASTER_ID in t), None)
        if addr is None and tables:
            addr = min(tables[0].items())[1]
        return TopicList(sorted(topics), addr)

    def topic_sys_flags(self) -> dict[str, int]:
        """Each routed topic's ``topicSysFlag`` as its first registered broker reports it (Java's unit-topic lists
        read the first queue data)."""
        return {
            topic: next(iter(queues.values())).topic_sys_flag for topic, queues in self._topic_queues.items() if queues
        }

    def broker_addrs_by_name(self, broker_name: str) -> dict[int, str]:
        entry = self._brokers.get(broker_name)
        return {} if entry is None else dict(entry.addrs)

    def live_broker_addrs(self) -> list[str]:
        return list(self._live)

    # -- admin ------------------------------------------------------------------------------------------------------

    def delete_topic(self, topic: str, cluster_name: str | None = None) -> None:
        """Delete the topic's route; with ``cluster_name``, only that cluster's brokers' queues of it."""
        if not cluster_name:
            self._topic_queues.pop(topic, None)
            return
        queues = self._topic_queues.get(topic)
        if queues is None:
            return
        for name in self._clusters.get(cluster_name, set()):
            queues.pop(name, None)
        if not queues:
            del self._topic_queues[topic]

    def wipe_write_perm_of_broker(self, broker_name: str) -> int:
        """Clear the write bit of every queue data of ``broker_name``; returns how many topics it touched."""
        return self._operate_perm(broker_name, lambda perm: perm & ~PERM_WRITE)

    def add_write_perm_of_broker(self, broker_name: str) -> int:
        """Restore read-write permission (Java sets it to exactly READ|WRITE); returns the topic count."""
        return self._operate_perm(broker_name, lambda perm: PERM_READ | PERM_WRITE)

    def _operate_perm(self, broker_name: str, change: Callable[[int], int]) -> int:
        count = 0
        for queues in self._topic_queues.values():
            qd = queues.get(broker_name)
            if qd is not None:
                queues[broker_name] = attrs.evolve(qd, perm=change(qd.perm))
                count += 1
        return count
