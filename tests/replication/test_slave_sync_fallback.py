"""A slave copies its master's topics from the master's main port, whatever holds ``port - 2`` (RocketMQ's VIP
channel): a master run with ``fastChannelEnable=false`` leaves that port to another process, which may answer nothing
useful (here the name server: REQUEST_CODE_NOT_SUPPORTED) or, worse, SUCCESS with another broker's table. (With the
fast channel on, a taken ``port - 2`` fails the master's start: ``tests/broker/test_controller.py``.)"""

from __future__ import annotations

import socket
from pathlib import Path

import trio
import trio.testing

from broker.embedded import EmbeddedCluster
from broker.ports import free_ports
from client.admin import Admin
from tests.conftest import SMALL_STORE
from tests.replication.ha_helpers import slave_learns_topic

TOPIC = "FallbackTopic"


def two_ports_apart() -> int:
    """A free port ``p`` with ``p + 2`` free too."""
    while True:
        with socket.socket() as low:
            low.bind(("127.0.0.1", 0))
            port = low.getsockname()[1]
            with socket.socket() as high:
                try:
                    high.bind(("127.0.0.1", port + 2))
                except OSError:
                    continue
        return port


async def test_a_slave_learns_topics_from_the_main_port_when_another_server_holds_the_fast_one(
    tmp_path: Path, autojump_clock: trio.testing.MockClock
) -> None:
    port = two_ports_apart()
    async with EmbeddedCluster(
        tmp_path, namesrv_port=port, broker_port=port + 2, slaves=1, fast_channel_enable=False, **SMALL_STORE
    ) as cluster:
        assert cluster.controller.fast_address is None  # the name server holds port - 2
        async with Admin(cluster.namesrv_addr) as admin:
            await admin.create_topic(TOPIC, read_queue_nums=2, write_queue_nums=2, broker_addr=cluster.broker_addr)
        slave = cluster.slave_controllers[0]
        await slave_learns_topic(slave, TOPIC)


async def test_a_slave_never_adopts_the_topics_of_a_broker_holding_its_master_s_fast_port(
    tmp_path: Path, autojump_clock: trio.testing.MockClock
) -> None:
    # Another broker listens on the master's port - 2, the master runs without a fast channel, and that broker
    # answers GET_ALL_TOPIC_CONFIG with SUCCESS and its own table.
    (port,) = free_ports(1, span=4, before=2)
    async with EmbeddedCluster(tmp_path / "other", broker_port=port, **SMALL_STORE) as other:
        async with Admin(other.namesrv_addr) as admin:
            await admin.create_topic("OtherTopic", broker_addr=other.broker_addr)
        async with EmbeddedCluster(
            tmp_path / "a", broker_port=port + 2, slaves=1, fast_channel_enable=False, **SMALL_STORE
        ) as cluster:
            assert cluster.controller.fast_address is None
            async with Admin(cluster.namesrv_addr) as admin:
                await admin.create_topic(TOPIC, read_queue_nums=2, write_queue_nums=2, broker_addr=cluster.broker_addr)
            slave = cluster.slave_controllers[0]
            await slave_learns_topic(slave, TOPIC)
            assert slave.context.topics.get("OtherTopic") is None
