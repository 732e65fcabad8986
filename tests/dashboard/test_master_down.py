"""The pages while a broker's master is down and its slave serves reads (found by a review): rocketmq-dashboard reads
each broker at ``BrokerData.selectBrokerAddr()`` (the master, else a slave), as the admin client's reads do, so what
the slave holds is still shown rather than silently left out. An embedded cluster with one slave, whose master is
stopped once the slave has the messages, the topics, the groups and their offsets."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import trio

from broker.embedded import EmbeddedCluster
from client import Message, Producer
from client.admin import Admin
from remoting.codec.bodies import MessageQueue
from store.metadata_files import SubscriptionGroupConfig
from tests.client.helpers import HANG_GUARD, create_topic
from tests.conftest import SMALL_STORE
from tests.dashboard.conftest import open_dash


@asynccontextmanager
async def _cluster_with_a_slave(tmp_path: Path) -> AsyncIterator[EmbeddedCluster]:
    async with EmbeddedCluster(tmp_path / "c", slaves=1, **SMALL_STORE) as cluster:
        yield cluster


async def _stop_the_master(cluster: EmbeddedCluster, topic: str) -> None:
    """Once the slave holds the master's commit log and metadata (one round of its 10 s sync), stop the master and
    wait until ``topic``'s route names the slave alone."""
    await cluster.wait_replicated()
    [slave] = cluster.slave_controllers
    assert slave.replication.slave_sync is not None
    await slave.replication.slave_sync.sync_all()
    await cluster.stop_broker()
    async with Admin(cluster.namesrv_addr) as admin:
        with trio.fail_after(HANG_GUARD):
            while (await admin.topic_route(topic)).broker_datas[0].broker_addrs != {1: slave.broker_addr}:
                await trio.sleep(0.05)


async def test_a_time_search_reads_a_broker_from_its_slave_while_the_master_is_down(
    tmp_path: Path, nursery: trio.Nursery
) -> None:
    """The search by topic and time skipped a broker without a master, so its messages were silently missing from
    the result; it reads that broker's slave, as the key search and the message page already do."""
    async with _cluster_with_a_slave(tmp_path) as cluster:
        await create_topic(cluster.namesrv_addr, "SlaveTimeTopic", queues=1)
        async with Producer("slave-time-pg", cluster.namesrv_addr) as producer:
            sent = await producer.send(Message("SlaveTimeTopic", b"kept on the slave"))
        await _stop_the_master(cluster, "SlaveTimeTopic")
        async for dash in open_dash(cluster, nursery):
            found = await dash.get("/api/messages/time?topic=SlaveTimeTopic&begin=0&end=99999999999999")
    assert [m["msgId"] for m in found["messages"]] == [sent.msg_id], found


async def test_the_groups_page_lists_a_brokers_groups_from_its_slave_while_the_master_is_down(
    tmp_path: Path, nursery: trio.Nursery
) -> None:
    """The Consumer groups page asked masters only, so while a broker's master was down its groups vanished from
    the list; rocketmq-dashboard's ``makeGroupListCache`` reads each broker at ``selectBrokerAddr()``, the slave
    then, which holds the groups and offsets synced from the master."""
    async with _cluster_with_a_slave(tmp_path) as cluster:
        await create_topic(cluster.namesrv_addr, "SlaveGroupTopic", queues=1)
        async with Producer("slave-group-pg", cluster.namesrv_addr) as producer:
            for i in range(3):
                await producer.send(Message("SlaveGroupTopic", f"m{i}".encode()))
        async with Admin(cluster.namesrv_addr) as admin:
            await admin.create_subscription_group(SubscriptionGroupConfig("slave-listed-cg"))
            mq = MessageQueue("SlaveGroupTopic", "broker-a", 0)
            await admin.update_consumer_offset(cluster.broker_addr, "slave-listed-cg", mq, 1)
        await _stop_the_master(cluster, "SlaveGroupTopic")
        async for dash in open_dash(cluster, nursery):
            groups = {g["group"]: g for g in (await dash.get("/api/groups"))["groups"]}
    assert "slave-listed-cg" in groups, sorted(groups)
    assert groups["slave-listed-cg"]["diffTotal"] == 2 and groups["slave-listed-cg"]["topics"] == ["SlaveGroupTopic"]
