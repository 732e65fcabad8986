"""The liveness scan in virtual time: silent brokers go after 120 s, re-registering ones stay."""

from __future__ import annotations

import trio
import trio.testing

from namesrv.liveness import run_liveness_scan
from namesrv.route_table import RouteTable
from remoting.codec.bodies import DataVersion, TopicConfig, TopicConfigSerializeWrapper
from remoting.connection import Connection


def _connection() -> Connection:
    stream, _peer = trio.testing.memory_stream_pair()
    return Connection(stream, ("127.0.0.1", 40000), ("127.0.0.1", 9876))


def _register(table: RouteTable, name: str, addr: str, connection: Connection) -> None:
    table.register_broker(
        cluster_name="DefaultCluster",
        broker_addr=addr,
        broker_name=name,
        broker_id=0,
        ha_server_addr="",
        topic_config_wrapper=TopicConfigSerializeWrapper({"T": TopicConfig("T", 4, 4)}, DataVersion(1, 1)),
        filter_server_list=[],
        connection=connection,
        now=trio.current_time(),
    )


async def test_scan_drops_a_silent_broker_after_120_s_and_closes_its_connection(
    nursery: trio.Nursery, autojump_clock: trio.testing.MockClock
) -> None:
    table = RouteTable(broker_channel_expired_time=120.0)
    silent, chatty = _connection(), _connection()
    _register(table, "broker-a", "10.0.0.1:10911", silent)
    _register(table, "broker-b", "10.0.0.2:10911", chatty)
    await nursery.start(run_liveness_scan, table)
    for _ in range(4):  # broker-b registers every 30 s, like a Java broker
        await trio.sleep(30)
        _register(table, "broker-b", "10.0.0.2:10911", chatty)
    await trio.sleep(6)  # t = 126: the scan at t = 125 found broker-a 125 s old
    assert not chatty.closed
    assert silent.closed
    route = table.pickup_topic_route_data("T")
    assert route is not None and [bd.broker_name for bd in route.broker_datas] == ["broker-b"]


async def test_broker_is_kept_until_the_expiry_has_passed(
    nursery: trio.Nursery, autojump_clock: trio.testing.MockClock
) -> None:
    table = RouteTable(broker_channel_expired_time=120.0)
    conn = _connection()
    _register(table, "broker-a", "10.0.0.1:10911", conn)
    await nursery.start(run_liveness_scan, table)
    await trio.sleep(119)
    assert table.pickup_topic_route_data("T") is not None
    await trio.sleep(10)  # the scan at t = 125 drops it
    assert table.pickup_topic_route_data("T") is None
    assert conn.closed


async def test_scan_interval_and_expiry_are_configurable(
    nursery: trio.Nursery, autojump_clock: trio.testing.MockClock
) -> None:
    table = RouteTable(broker_channel_expired_time=3.0)
    _register(table, "broker-a", "10.0.0.1:10911", _connection())
    await nursery.start(
        lambda task_status: run_liveness_scan(table, interval=1.0, initial_delay=0.5, task_status=task_status)
    )
    await trio.sleep(2.9)
    assert table.pickup_topic_route_data("T") is not None
    await trio.sleep(1.2)
    assert table.pickup_topic_route_data("T") is None
