"""RocketMQ's 2m-2s deployment from the embedded cluster, as ``make run`` starts it (``--brokers 2 --slaves 1``):
broker-a and its slave in this process, broker-b and broker-b's slave each a process of its own. Sends reach both
broker names; once broker-b's master is SIGKILLed, a consumer reads broker-b's messages from its slave (the client
reads from a slave when the route has no master for that name)."""

from __future__ import annotations

import os
import signal
from collections.abc import Awaitable, Callable
from pathlib import Path

import trio

from broker.embedded import EmbeddedCluster
from client import Admin, ConsumeConcurrentlyStatus, Message, MessageExt, Producer
from client.errors import TopicRouteNotFoundError
from tests.conftest import SMALL_STORE
from tests.replication.ha_helpers import consumer_from_first

TOPIC = "TwoByTwoTopic"
GROUP = "two-by-two-group"
QUEUES = 4


async def _wait_for(what: str, check: Callable[[], Awaitable[bool]], timeout: float = 90) -> None:
    """Poll ``check()`` every 0.2 s until it is true; AssertionError naming ``what`` after ``timeout`` s."""
    with trio.move_on_after(timeout):
        while not await check():
            await trio.sleep(0.2)
        return
    raise AssertionError(f"{what} not reached within {timeout} s")


async def test_a_sigkilled_second_master_s_messages_are_consumed_from_its_slave(tmp_path: Path) -> None:
    async with EmbeddedCluster(tmp_path, brokers=2, slaves=1, broker_processes=True, **SMALL_STORE) as cluster:
        (master_b,) = cluster.broker_processes
        (slave_b,) = cluster.slave_processes
        assert (master_b.name, slave_b.name, slave_b.config.broker_name) == ("broker-b", "broker-b-s1", "broker-b")
        assert cluster.slave_addr_table["broker-b"] == [slave_b.broker_addr]
        async with Admin(cluster.namesrv_addr) as admin:

            async def both_names_have_a_slave() -> bool:
                table = (await admin.cluster_info()).broker_addr_table
                return {name: sorted(e.broker_addrs) for name, e in table.items()} == {
                    "broker-a": [0, 1],
                    "broker-b": [0, 1],
                }

            await _wait_for("both masters and both slaves registered", both_names_have_a_slave)
            await admin.create_topic(TOPIC, read_queue_nums=QUEUES, write_queue_nums=QUEUES)

            async def both_masters_route_the_topic() -> bool:  # each master registers its new topic on its own
                try:
                    route = await admin.topic_route(TOPIC)
                except TopicRouteNotFoundError:
                    return False
                return {d.broker_name for d in route.broker_datas if 0 in d.broker_addrs} == {"broker-a", "broker-b"}

            await _wait_for("the route naming both masters", both_masters_route_the_topic)
            async with Producer("two-by-two-producer", cluster.namesrv_addr) as producer:
                sent = [await producer.send(Message(TOPIC, b"m%d" % i)) for i in range(40)]
            on_b = {b"m%d" % i for i, result in enumerate(sent) if result.broker_name == "broker-b"}
            assert {result.broker_name for result in sent} == {"broker-a", "broker-b"}

            async def slave_b_caught_up() -> bool:
                master = await admin.broker_status(master_b.broker_addr)
                slave = await admin.broker_status(slave_b.broker_addr)
                return master["commitLogMaxOffset"] == slave["commitLogMaxOffset"]

            async def slave_b_knows_the_topic() -> bool:  # copied from its master every 10 s
                return TOPIC in (await admin.all_topic_config(slave_b.broker_addr)).topic_config_table

            await _wait_for("broker-b's slave holding its master's CommitLog", slave_b_caught_up)
            await _wait_for("broker-b's slave knowing the topic", slave_b_knows_the_topic)

            assert master_b.pid is not None
            os.kill(master_b.pid, signal.SIGKILL)

            async def broker_b_masterless() -> bool:
                route = await admin.topic_route(TOPIC)
                return {d.broker_name: sorted(d.broker_addrs) for d in route.broker_datas}.get("broker-b") == [1]

            await _wait_for("the routes naming only broker-b's slave", broker_b_masterless)
            assert cluster.broker_processes == []  # the killed master's slot is free; its slave still runs
            assert cluster.slave_processes == [slave_b]

        received: set[bytes] = set()

        async def on_messages(msgs: list[MessageExt]) -> ConsumeConcurrentlyStatus:
            received.update(msg.body for msg in msgs)
            return ConsumeConcurrentlyStatus.CONSUME_SUCCESS

        consumer = consumer_from_first(cluster.namesrv_addr, GROUP, TOPIC, on_messages)
        async with consumer:
            with trio.fail_after(90):
                while not on_b <= received:
                    await trio.sleep(0.1)
        assert len(on_b) >= 1
    # the slave and the rest shut down cleanly; the killed master left its abort file behind
    assert not (tmp_path / "broker-b-s1" / "abort").exists()
    assert (tmp_path / "broker-b" / "abort").exists()
