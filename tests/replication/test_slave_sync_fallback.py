"""A slave copies its master's topics from the master's fast port (``port - 2``) or, when something else answers
there, from its main port: a master whose fast channel could not bind (the port taken by another process) leaves its
slave learning nothing otherwise. Here the name server itself holds ``port - 2`` and answers REQUEST_CODE_NOT_SUPPORTED,
as another process's server did in a CI run."""

from __future__ import annotations

import socket
from pathlib import Path

import trio
import trio.testing

from broker.embedded import EmbeddedCluster
from client.admin import Admin
from tests.conftest import SMALL_STORE

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
    async with EmbeddedCluster(tmp_path, namesrv_port=port, broker_port=port + 2, slaves=1, **SMALL_STORE) as cluster:
        assert cluster.controller.fast_address is None  # the name server holds port - 2
        async with Admin(cluster.namesrv_addr) as admin:
            await admin.create_topic(TOPIC, read_queue_nums=2, write_queue_nums=2, broker_addr=cluster.broker_addr)
        slave = cluster.slave_controllers[0]
        with trio.fail_after(30):  # the slave's metadata sync runs after 3 s, then every 10 s
            while slave.context.topics.get(TOPIC) is None:
                await trio.sleep(0.5)
