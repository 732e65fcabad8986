"""TopicRouteData and ClusterInfo: what the name server answers to GET_ROUTEINFO_BY_TOPIC and
GET_BROKER_CLUSTER_INFO (docs/protocol.md#42-topicroutedata, docs/protocol.md#43-clusterinfo).

Output is always standard JSON (quoted, sorted broker-id keys), which every 4.x client accepts; input also takes the
Java name server's unquoted ids and the pre-4.9 ``topicSynFlag`` spelling. ``queueDatas`` and ``brokerDatas`` are
always written, even empty, because ali-ons sorts them in place. Decoding raises
:class:`~remoting.codec.bodies._json.BodyDecodeError`.
"""

from __future__ import annotations

import attrs

from remoting.codec.bodies._json import (
    BodyDecodeError,
    JsonObject,
    dumps,
    expect_object,
    get_int,
    get_list,
    get_map,
    get_str,
    get_str_list,
    load_object,
    req_str,
    to_int,
)

MASTER_ID = 0


@attrs.frozen(slots=True)
class QueueData:
    broker_name: str
    read_queue_nums: int
    write_queue_nums: int
    perm: int
    topic_sys_flag: int = 0

    def to_json(self) -> JsonObject:
        return {
            "brokerName": self.broker_name,
            "perm": self.perm,
            "readQueueNums": self.read_queue_nums,
            "topicSysFlag": self.topic_sys_flag,
            "writeQueueNums": self.write_queue_nums,
        }

    @classmethod
    def from_json(cls, obj: object) -> QueueData:
        o = expect_object(obj, "QueueData")
        flag_key = "topicSysFlag" if o.get("topicSysFlag") is not None else "topicSynFlag"
        return cls(
            broker_name=req_str(o, "brokerName"),
            read_queue_nums=get_int(o, "readQueueNums", bits=32),
            write_queue_nums=get_int(o, "writeQueueNums", bits=32),
            perm=get_int(o, "perm", bits=32),
            topic_sys_flag=get_int(o, flag_key, bits=32),
        )


@attrs.frozen(slots=True)
class BrokerData:
    """One broker name's addresses by broker id (0 = master)."""

    cluster: str
    broker_name: str
    broker_addrs: dict[int, str] = attrs.field(factory=dict)

    @property
    def master_addr(self) -> str | None:
        return self.broker_addrs.get(MASTER_ID)

    def select_broker_addr(self) -> str | None:
        """Where a read may go: the master, else the lowest-id slave (Java's ``BrokerData.selectBrokerAddr``, which
        picks a random slave); ``None`` without addresses."""
        if not self.broker_addrs:
            return None
        return self.master_addr or self.broker_addrs[min(self.broker_addrs)]

    def to_json(self) -> JsonObject:
        return {
            "brokerAddrs": {str(bid): addr for bid, addr in sorted(self.broker_addrs.items())},
            "brokerName": self.broker_name,
            "cluster": self.cluster,
        }

    @classmethod
    def from_json(cls, obj: object) -> BrokerData:
        o = expect_object(obj, "BrokerData")
        addrs: dict[int, str] = {}
        for key, addr in get_map(o, "brokerAddrs").items():
            if not isinstance(addr, str):
                raise BodyDecodeError(f"brokerAddrs[{key}] must be a string")
            addrs[to_int(key, "brokerAddrs")] = addr
        return cls(cluster=get_str(o, "cluster") or "", broker_name=req_str(o, "brokerName"), broker_addrs=addrs)


@attrs.frozen(slots=True)
class TopicRouteData:
    queue_datas: list[QueueData] = attrs.field(factory=list)
    broker_datas: list[BrokerData] = attrs.field(factory=list)
    filter_server_table: dict[str, list[str]] = attrs.field(factory=dict)
    order_topic_conf: str | None = None

    def to_json(self) -> JsonObject:
        out: JsonObject = {
            "brokerDatas": [bd.to_json() for bd in self.broker_datas],
            "filterServerTable": {addr: list(servers) for addr, servers in self.filter_server_table.items()},
            "queueDatas": [qd.to_json() for qd in self.queue_datas],
        }
        if self.order_topic_conf is not None:
            out["orderTopicConf"] = self.order_topic_conf
        return out

    @classmethod
    def from_json(cls, obj: object) -> TopicRouteData:
        o = expect_object(obj, "TopicRouteData")
        servers = get_map(o, "filterServerTable")
        return cls(
            queue_datas=[QueueData.from_json(q) for q in get_list(o, "queueDatas")],
            broker_datas=[BrokerData.from_json(b) for b in get_list(o, "brokerDatas")],
            filter_server_table={addr: get_str_list(servers, addr) for addr in servers},
            order_topic_conf=get_str(o, "orderTopicConf"),
        )

    def encode(self) -> bytes:
        return dumps(self.to_json())

    @classmethod
    def decode(cls, data: bytes | memoryview) -> TopicRouteData:
        return cls.from_json(load_object(data, "TopicRouteData"))


@attrs.frozen(slots=True)
class ClusterInfo:
    broker_addr_table: dict[str, BrokerData] = attrs.field(factory=dict)
    cluster_addr_table: dict[str, list[str]] = attrs.field(factory=dict)

    def to_json(self) -> JsonObject:
        return {
            "brokerAddrTable": {name: bd.to_json() for name, bd in self.broker_addr_table.items()},
            "clusterAddrTable": {cluster: sorted(names) for cluster, names in self.cluster_addr_table.items()},
        }

    @classmethod
    def from_json(cls, obj: object) -> ClusterInfo:
        o = expect_object(obj, "ClusterInfo")
        clusters = get_map(o, "clusterAddrTable")
        return cls(
            broker_addr_table={name: BrokerData.from_json(bd) for name, bd in get_map(o, "brokerAddrTable").items()},
            cluster_addr_table={c: get_str_list(clusters, c) for c in clusters},
        )

    def encode(self) -> bytes:
        return dumps(self.to_json())

    @classmethod
    def decode(cls, data: bytes | memoryview) -> ClusterInfo:
        return cls.from_json(load_object(data, "ClusterInfo"))
