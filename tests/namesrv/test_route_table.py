"""Route table rules (docs/protocol.md#81-registration-and-the-route-table): registration, rebuild on DataVersion
change, removal, permissions, queries."""

from __future__ import annotations

from namesrv.route_table import RegisterBrokerResult, RouteTable
from remoting.codec.bodies import (
    BrokerData,
    DataVersion,
    QueueData,
    TopicConfig,
    TopicConfigSerializeWrapper,
)

MASTER = "10.0.0.1:10911"
SLAVE = "10.0.0.2:10911"


def _wrapper(counter: int, **topics: int) -> TopicConfigSerializeWrapper:
    return TopicConfigSerializeWrapper(
        {name: TopicConfig(name, queues, queues, 6) for name, queues in topics.items()},
        DataVersion(timestamp=1000 + counter, counter=counter),
    )


def _register(
    table: RouteTable,
    wrapper: TopicConfigSerializeWrapper,
    *,
    addr: str = MASTER,
    broker_id: int = 0,
    name: str = "broker-a",
    cluster: str = "DefaultCluster",
    now: float = 0.0,
    connection: object = None,
) -> RegisterBrokerResult:
    return table.register_broker(
        cluster_name=cluster,
        broker_addr=addr,
        broker_name=name,
        broker_id=broker_id,
        ha_server_addr=addr.replace("10911", "10912"),
        topic_config_wrapper=wrapper,
        filter_server_list=[],
        connection=connection,
        now=now,
    )


def test_master_registration_builds_the_route() -> None:
    table = RouteTable()
    result = _register(table, _wrapper(1, T=8))
    assert result == RegisterBrokerResult()
    route = table.pickup_topic_route_data("T")
    assert route is not None
    assert route.queue_datas == [QueueData("broker-a", 8, 8, 6, 0)]
    assert route.broker_datas == [BrokerData("DefaultCluster", "broker-a", {0: MASTER})]
    assert route.filter_server_table == {}
    assert table.pickup_topic_route_data("unknown") is None


def test_slave_gets_master_and_ha_address_and_does_not_touch_queue_data() -> None:
    table = RouteTable()
    _register(table, _wrapper(1, T=8))
    result = _register(table, _wrapper(9, T=2, S=2), addr=SLAVE, broker_id=1)
    assert result == RegisterBrokerResult(ha_server_addr="10.0.0.1:10912", master_addr=MASTER)
    route = table.pickup_topic_route_data("T")
    assert route is not None
    assert route.queue_datas[0].write_queue_nums == 8
    assert route.broker_datas[0].broker_addrs == {0: MASTER, 1: SLAVE}
    assert table.pickup_topic_route_data("S") is None


def test_slave_before_its_master_gets_no_master_address() -> None:
    assert _register(RouteTable(), _wrapper(1, T=8), addr=SLAVE, broker_id=1) == RegisterBrokerResult()


def test_unchanged_data_version_does_not_rebuild_queue_data() -> None:
    table = RouteTable()
    _register(table, _wrapper(1, T=8))
    table.wipe_write_perm_of_broker("broker-a")
    _register(table, _wrapper(1, T=8))
    route = table.pickup_topic_route_data("T")
    assert route is not None and route.queue_datas[0].perm == 4
    _register(table, _wrapper(2, T=8))
    route = table.pickup_topic_route_data("T")
    assert route is not None and route.queue_datas[0].perm == 6


def test_changed_data_version_updates_and_adds_topics() -> None:
    table = RouteTable()
    _register(table, _wrapper(1, T=8))
    _register(table, _wrapper(2, T=4, U=2))
    route_t, route_u = table.pickup_topic_route_data("T"), table.pickup_topic_route_data("U")
    assert route_t is not None and route_t.queue_datas[0].read_queue_nums == 4
    assert route_u is not None and route_u.queue_datas[0].read_queue_nums == 2


def test_slave_promoted_to_master_keeps_one_id_per_address() -> None:
    table = RouteTable()
    _register(table, _wrapper(1, T=8), addr=SLAVE, broker_id=1)
    _register(table, _wrapper(1, T=8), addr=SLAVE, broker_id=0)
    assert table.broker_addrs_by_name("broker-a") == {0: SLAVE}
    assert table.pickup_topic_route_data("T") is not None


def test_unregister_master_and_slave_removes_broker_and_its_topics() -> None:
    table = RouteTable()
    _register(table, _wrapper(1, T=8))
    _register(table, _wrapper(1, T=8), addr=SLAVE, broker_id=1)
    table.unregister_broker(cluster_name="DefaultCluster", broker_addr=MASTER, broker_name="broker-a", broker_id=0)
    route = table.pickup_topic_route_data("T")
    assert route is not None and route.broker_datas[0].broker_addrs == {1: SLAVE}
    table.unregister_broker(cluster_name="DefaultCluster", broker_addr=SLAVE, broker_name="broker-a", broker_id=1)
    assert table.pickup_topic_route_data("T") is None
    assert table.get_all_cluster_info().cluster_addr_table == {}
    assert table.get_all_topic_list().topic_list == []


def test_scan_drops_only_brokers_silent_past_the_expiry() -> None:
    table = RouteTable(broker_channel_expired_time=120.0)
    a, b = object(), object()
    _register(table, _wrapper(1, T=8), now=0.0, connection=a)
    _register(table, _wrapper(1, T=8), name="broker-b", addr="10.0.0.3:10911", now=60.0, connection=b)
    assert table.scan_not_active_brokers(120.0) == []
    expired = table.scan_not_active_brokers(121.0)
    assert [(e.broker_addr, e.connection) for e in expired] == [(MASTER, a)]
    route = table.pickup_topic_route_data("T")
    assert route is not None and [bd.broker_name for bd in route.broker_datas] == ["broker-b"]


def test_query_data_version_refresh_keeps_a_broker_alive() -> None:
    table = RouteTable(broker_channel_expired_time=120.0)
    _register(table, _wrapper(1, T=8), now=0.0)
    assert not table.is_broker_topic_config_changed(MASTER, _wrapper(1).data_version)
    assert table.is_broker_topic_config_changed(MASTER, _wrapper(2).data_version)
    table.update_broker_info_update_timestamp(MASTER, 100.0)
    assert table.scan_not_active_brokers(200.0) == []
    assert table.query_broker_topic_config(MASTER) == _wrapper(1).data_version


def test_closed_connection_drops_exactly_its_broker() -> None:
    table = RouteTable()
    a, b = object(), object()
    _register(table, _wrapper(1, T=8), connection=a)
    _register(table, _wrapper(1, T=8), addr=SLAVE, broker_id=1, connection=b)
    assert table.on_connection_closed(object()) == []
    assert table.on_connection_closed(a) == [MASTER]
    route = table.pickup_topic_route_data("T")
    assert route is not None and route.broker_datas[0].broker_addrs == {1: SLAVE}


def test_delete_topic_everywhere_or_in_one_cluster() -> None:
    table = RouteTable()
    _register(table, _wrapper(1, T=8, U=8))
    _register(table, _wrapper(1, T=8), name="broker-b", addr="10.0.0.3:10911", cluster="Other")
    table.delete_topic("T", "Other")
    route = table.pickup_topic_route_data("T")
    assert route is not None and [q.broker_name for q in route.queue_datas] == ["broker-a"]
    table.delete_topic("T")
    assert table.pickup_topic_route_data("T") is None
    assert table.get_all_topic_list().topic_list == ["U"]


def test_wipe_and_add_write_permission_count_topics() -> None:
    table = RouteTable()
    _register(table, _wrapper(1, T=8, U=8))
    assert table.wipe_write_perm_of_broker("broker-a") == 2
    route = table.pickup_topic_route_data("U")
    assert route is not None and route.queue_datas[0].perm == 4
    assert table.add_write_perm_of_broker("broker-a") == 2
    route = table.pickup_topic_route_data("U")
    assert route is not None and route.queue_datas[0].perm == 6
    assert table.wipe_write_perm_of_broker("nobody") == 0


def test_cluster_info_topics_by_cluster_and_system_topics() -> None:
    table = RouteTable()
    _register(table, _wrapper(1, T=8))
    _register(table, _wrapper(1, U=8), name="broker-b", addr="10.0.0.3:10911", cluster="Other")
    info = table.get_all_cluster_info()
    assert info.cluster_addr_table == {"DefaultCluster": ["broker-a"], "Other": ["broker-b"]}
    assert info.broker_addr_table["broker-b"] == BrokerData("Other", "broker-b", {0: "10.0.0.3:10911"})
    assert table.get_topics_by_cluster("Other").topic_list == ["U"]
    assert table.get_topics_by_cluster("nope").topic_list == []
    system = table.get_system_topic_list()
    assert system.topic_list == ["DefaultCluster", "Other", "broker-a", "broker-b"]
    assert system.broker_addr == MASTER


def test_filter_servers_appear_in_the_route() -> None:
    table = RouteTable()
    table.register_broker(
        cluster_name="c",
        broker_addr=MASTER,
        broker_name="broker-a",
        broker_id=0,
        ha_server_addr="",
        topic_config_wrapper=_wrapper(1, T=1),
        filter_server_list=["10.0.0.1:9999"],
        connection=None,
        now=0.0,
    )
    route = table.pickup_topic_route_data("T")
    assert route is not None and route.filter_server_table == {MASTER: ["10.0.0.1:9999"]}
