"""Which brokers and name servers the admin client asks (DefaultMQAdminExtImpl / MQAdminImpl / MQClientAPIImpl of
RocketMQ 4.9.8), and what it does when one does not answer: a group's calls ask only the brokers of its ``%RETRY%``
topic, reads go to a slave while its master is down, CLEAN_UNUSED_TOPIC of a cluster reaches its slaves, a query by
key passes over a dead broker of the topic, name-server reads fail over and KV writes reach every name server, and
calls a broker relays to a consumer wait longer than the broker does."""

from __future__ import annotations

import socket
from functools import partial
from pathlib import Path

import anyio
import pytest
import trio

from broker.controller import BrokerController
from broker.embedded import EmbeddedCluster
from client.admin import Admin
from client.consumer.listener import ConsumeConcurrentlyStatus
from client.consumer.push import PushConsumer
from client.errors import BrokerNotExistError, MQBrokerError
from client.message import Message
from client.offset_reset import Rollback, reset_offline
from client.producer import Producer
from remoting.client import RemotingClient
from remoting.codec.bodies import ConsumerData, HeartbeatData, MessageQueue
from remoting.codec.codes import RequestCode, ResponseCode
from remoting.codec.command import RemotingCommand, request
from remoting.processor import RequestContext
from tests.client.helpers import create_topic, register_dead_broker, wait_until
from tests.conftest import SMALL_STORE
from tests.threaded_cluster import ThreadedCluster


def _dead_addr() -> str:
    """An address nothing listens on (connection refused at once)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return f"127.0.0.1:{s.getsockname()[1]}"


async def _register_dead_broker(cluster: ThreadedCluster, *, name: str, addr: str, topics: tuple[str, ...]) -> None:
    await anyio.to_thread.run_sync(partial(register_dead_broker, cluster, name=name, addr=addr, topics=topics))


async def _slave_sync_round(slave: BrokerController) -> None:
    """One round of the slave's metadata sync (it runs every 10 s): topics, offsets, groups from the master."""
    sync = slave.replication.slave_sync
    assert sync is not None
    await sync.sync_all()


async def _wait_routed(admin: Admin, topic: str) -> None:
    with trio.fail_after(60):
        while True:
            try:
                if (await admin.topic_route(topic)).queue_datas:
                    return
            except Exception:
                pass
            await trio.sleep(0.05)


# -- a group's calls ask the brokers of its %RETRY% topic ----------------------------------------------------------


@pytest.mark.anyio
async def test_consumer_progress_ignores_a_dead_master_that_does_not_host_the_group(cluster: ThreadedCluster) -> None:
    """DefaultMQAdminExtImpl.examineConsumeStats asks the brokers of the group's %RETRY% topic route only, so a
    master elsewhere in the cluster that does not answer does not matter."""
    ns, addr = cluster.namesrv_addr, cluster.broker_addr
    await create_topic(ns, "ProgDead", queues=1)
    async with Admin(ns) as admin:
        await admin.create_topic("%RETRY%prog-g", read_queue_nums=1, write_queue_nums=1, broker_addr=addr)
        await admin.update_consumer_offset(addr, "prog-g", MessageQueue("ProgDead", "broker-a", 0), 0)
        assert await admin.consumer_progress("prog-g", "ProgDead")
        await _register_dead_broker(cluster, name="broker-dead", addr=_dead_addr(), topics=("Unrelated",))
        progress = await admin.consumer_progress("prog-g", "ProgDead")
    assert list(progress) == [MessageQueue("ProgDead", "broker-a", 0)]


@pytest.mark.anyio
async def test_consumer_running_info_passes_over_a_master_that_does_not_answer(cluster: ThreadedCluster) -> None:
    """DefaultMQAdminExtImpl.getConsumerRunningInfo asks a broker of the group's %RETRY% route, so a dead master of
    another broker name (here sorting first) is never asked."""
    ns = cluster.namesrv_addr
    await create_topic(ns, "RunDead", queues=1)

    async def listener(msgs: object) -> ConsumeConcurrentlyStatus:
        return ConsumeConcurrentlyStatus.CONSUME_SUCCESS

    consumer = PushConsumer("run-dead-cg", ns)
    consumer.subscribe("RunDead")
    consumer.register_message_listener(listener)
    async with consumer, Admin(ns) as admin:
        assert await admin.consumer_running_info("run-dead-cg", consumer.instance.client_id)
        # port 1 refuses at once and sorts before the live broker's address
        await _register_dead_broker(cluster, name="broker-dead", addr="127.0.0.1:1", topics=("Unrelated",))
        info = await admin.consumer_running_info("run-dead-cg", consumer.instance.client_id)
    assert "mqTable" in info


# -- reads go to a slave while its master is down ------------------------------------------------------------------


async def test_admin_reads_a_broker_from_its_slave_while_the_master_is_down(tmp_path: Path) -> None:
    """Every read of DefaultMQAdminExtImpl / MQAdminImpl picks the broker with BrokerData.selectBrokerAddr(): the
    master, else one of its slaves. So queryMessage, examineTopicStats, examineConsumeStats and queryConsumeTimeSpan
    still answer from the slave while the master is gone (mqadmin queryMsgByKey / topicStatus / consumerProgress
    during a master outage)."""
    async with (
        EmbeddedCluster(tmp_path / "c", slaves=1, **SMALL_STORE) as cluster,
        Admin(cluster.namesrv_addr) as admin,
    ):
        await admin.create_topic("SlaveRead", read_queue_nums=1, write_queue_nums=1, broker_addr=cluster.broker_addr)
        await _wait_routed(admin, "SlaveRead")
        async with Producer("pg-slave-read", cluster.namesrv_addr) as producer:
            sent = await producer.send(Message("SlaveRead", b"on the slave too", keys="slave-key"))
        await admin.create_topic(
            "%RETRY%slave-read-g", read_queue_nums=1, write_queue_nums=1, broker_addr=cluster.broker_addr
        )
        mq = MessageQueue("SlaveRead", "broker-a", 0)
        await admin.update_consumer_offset(cluster.broker_addr, "slave-read-g", mq, 1)
        await cluster.wait_replicated()
        slave = cluster.slave_controllers[0]
        await _slave_sync_round(slave)
        assert slave.context.topics.get("SlaveRead") is not None
        await cluster.stop_broker()
        with trio.fail_after(60):
            while 0 in (await admin.topic_route("SlaveRead")).broker_datas[0].broker_addrs:
                await trio.sleep(0.05)
        assert (await admin.topic_route("SlaveRead")).broker_datas[0].broker_addrs == {1: slave.broker_addr}
        found = await admin.query_msg_by_key("SlaveRead", "slave-key")
        status = await admin.topic_status("SlaveRead")
        progress = await admin.consumer_progress("slave-read-g", "SlaveRead")
    assert [m.body for m in found] == [b"on the slave too"]
    assert status[mq].max_offset == sent.queue_offset + 1
    assert (progress[mq].broker_offset, progress[mq].consumer_offset) == (1, 1)


async def test_a_query_by_key_of_every_broker_refuses_a_slaves_answer_while_its_master_is_down(tmp_path: Path) -> None:
    """``every_broker`` (the Spark sink's marker lookup, where "not found" means "not stored") asks each broker's
    master: a slave may not hold what its master stored (RocketMQ's HA copies asynchronously, ASYNC_MASTER by
    default: store/src/main/java/org/apache/rocketmq/store/ha/HAService.java), so a broker whose master is down
    raises BrokerNotExistError rather than answer from the slave. A plain query still reads the slave."""
    async with (
        EmbeddedCluster(tmp_path / "c", slaves=1, **SMALL_STORE) as cluster,
        Admin(cluster.namesrv_addr) as admin,
    ):
        await admin.create_topic("SlaveMarks", read_queue_nums=1, write_queue_nums=1, broker_addr=cluster.broker_addr)
        await _wait_routed(admin, "SlaveMarks")
        async with Producer("pg-slave-marks", cluster.namesrv_addr) as producer:
            await producer.send(Message("SlaveMarks", b"marker", keys="mark"))
        await cluster.wait_replicated()
        assert len(await admin.query_msg_by_key("SlaveMarks", "mark", every_broker=True)) == 1
        await cluster.stop_broker()
        with trio.fail_after(60):
            while 0 in (await admin.topic_route("SlaveMarks")).broker_datas[0].broker_addrs:
                await trio.sleep(0.05)
        assert len(await admin.query_msg_by_key("SlaveMarks", "mark")) == 1
        with pytest.raises(BrokerNotExistError, match="broker-a"):
            await admin.query_msg_by_key("SlaveMarks", "mark", every_broker=True)


async def test_reset_offset_by_time_goes_to_the_slave_while_the_master_is_down(tmp_path: Path) -> None:
    """DefaultMQAdminExtImpl.resetOffsetByTimestamp sends INVOKE_BROKER_TO_RESET_OFFSET to each broker of the route
    at BrokerData.selectBrokerAddr(): the master, else one of its slaves, which resets the offsets of the consumers
    connected to it and answers them (tools/src/main/java/org/apache/rocketmq/tools/admin/DefaultMQAdminExtImpl.java,
    common/src/main/java/org/apache/rocketmq/common/protocol/route/BrokerData.java). Ours passed over a broker
    without its master, so resetOffsetByTime during a master outage reset and listed nothing."""

    class Consumer:
        async def process(self, ctx: RequestContext, cmd: RemotingCommand) -> RemotingCommand | None:
            return None

    async with (
        EmbeddedCluster(tmp_path / "c", slaves=1, **SMALL_STORE) as cluster,
        Admin(cluster.namesrv_addr) as admin,
    ):
        await admin.create_topic("SlaveReset", read_queue_nums=1, write_queue_nums=1, broker_addr=cluster.broker_addr)
        await _wait_routed(admin, "SlaveReset")
        async with Producer("pg-slave-reset", cluster.namesrv_addr) as producer:
            await producer.send(Message("SlaveReset", b"on the slave too"))
        mq = MessageQueue("SlaveReset", "broker-a", 0)
        await admin.update_consumer_offset(cluster.broker_addr, "slave-reset-cg", mq, 0)
        await cluster.wait_replicated()
        slave = cluster.slave_controllers[0]
        await _slave_sync_round(slave)  # the group's offset reaches the slave, as Broker2Client.resetOffset needs
        await cluster.stop_broker()
        with trio.fail_after(60):
            while 0 in (await admin.topic_route("SlaveReset")).broker_datas[0].broker_addrs:
                await trio.sleep(0.05)
        async with RemotingClient(request_handler=Consumer()) as consumer:
            beat = HeartbeatData("10.0.0.9@java", consumer_data_set=(ConsumerData("slave-reset-cg"),))
            beat_cmd = request(RequestCode.HEART_BEAT, body=beat.encode())
            assert (await consumer.invoke(slave.broker_addr, beat_cmd, 5)).code == ResponseCode.SUCCESS
            answers = await admin.reset_offset_by_time_per_broker("slave-reset-cg", "SlaveReset", -1)
            table = await admin.reset_offset_by_time("slave-reset-cg", "SlaveReset", -1)
    assert answers == [{mq: 1}]
    assert table == {mq: 1}


async def test_offline_offset_reset_goes_to_the_slave_while_the_master_is_down(tmp_path: Path) -> None:
    """DefaultMQAdminExtImpl.resetOffsetByTimestampOld (no consumer online) reads, resets and lists each broker's
    queues at BrokerData.selectBrokerAddr(): the master, else one of its slaves (GET_CONSUME_STATS, GET_MAX_OFFSET
    and UPDATE_CONSUMER_OFFSET all go there; tools/src/main/java/org/apache/rocketmq/tools/admin/
    DefaultMQAdminExtImpl.java). Ours passed over a broker without its master and listed nothing."""
    async with (
        EmbeddedCluster(tmp_path / "c", slaves=1, **SMALL_STORE) as cluster,
        Admin(cluster.namesrv_addr) as admin,
    ):
        await admin.create_topic("SlaveOld", read_queue_nums=1, write_queue_nums=1, broker_addr=cluster.broker_addr)
        await _wait_routed(admin, "SlaveOld")
        async with Producer("pg-slave-old", cluster.namesrv_addr) as producer:
            await producer.send(Message("SlaveOld", b"on the slave too"))
        mq = MessageQueue("SlaveOld", "broker-a", 0)
        await admin.update_consumer_offset(cluster.broker_addr, "slave-old-cg", mq, 0)
        await cluster.wait_replicated()
        slave = cluster.slave_controllers[0]
        await _slave_sync_round(slave)
        await cluster.stop_broker()
        with trio.fail_after(60):
            while 0 in (await admin.topic_route("SlaveOld")).broker_datas[0].broker_addrs:
                await trio.sleep(0.05)
        rolled = await reset_offline(admin, "slave-old-cg", "SlaveOld", -1, True)
    assert rolled == [Rollback(mq, broker_offset=1, consumer_offset=0, timestamp_offset=1, rollback_offset=1)]


# -- store maintenance of a cluster reaches its slaves -------------------------------------------------------------


async def test_clean_unused_topic_of_a_cluster_reaches_its_slaves(tmp_path: Path) -> None:
    """DefaultMQAdminExtImpl.cleanUnusedTopic(cluster) sends CLEAN_UNUSED_TOPIC to
    ClusterInfo.retrieveAllAddrByCluster(cluster): every address of every broker name, slaves included (the broker
    serves it without validateSlave). A topic deleted on the master leaves its ConsumeQueues on the slave (the
    slave's metadata sync drops only the config), and only this call removes them there."""
    async with EmbeddedCluster(tmp_path / "c", slaves=1, **SMALL_STORE) as cluster:
        slave = cluster.slave_controllers[0]
        async with Admin(cluster.namesrv_addr) as admin:
            await admin.create_topic("Gone", read_queue_nums=1, write_queue_nums=1, broker_addr=cluster.broker_addr)
            await _wait_routed(admin, "Gone")
            async with Producer("pg-gone", cluster.namesrv_addr) as producer:
                await producer.send(Message("Gone", b"x"))
            await cluster.wait_replicated()
            assert slave.context.store.max_offset_in_queue("Gone", 0) == 1
            await admin.delete_topic("Gone", cluster="DefaultCluster")
            await _slave_sync_round(slave)  # the slave's metadata sync forgets the topic's config
            assert slave.context.topics.get("Gone") is None
            asked = await admin.clean_unused_topic(cluster="DefaultCluster")
            assert sorted(asked) == sorted([cluster.broker_addr, slave.broker_addr])
            assert slave.context.store.max_offset_in_queue("Gone", 0) == 0


# -- a query by key: a broker of the topic that does not answer ----------------------------------------------------


@pytest.mark.anyio
async def test_query_by_key_still_finds_the_message_when_another_broker_of_the_topic_does_not_answer(
    cluster: ThreadedCluster,
) -> None:
    """MQAdminImpl.queryMessage asks every broker of the route; a broker whose request fails is logged ("queryMessage
    exception" / "maybe some broker failed") and the others' messages are returned."""
    ns = cluster.namesrv_addr
    await create_topic(ns, "KeyDead", queues=1)
    async with Producer("pg-keydead", ns) as producer:
        await producer.send(Message("KeyDead", b"here", keys="needle"))
    await _register_dead_broker(cluster, name="broker-dead", addr=_dead_addr(), topics=("KeyDead",))
    async with Admin(ns) as admin:
        assert len((await admin.topic_route("KeyDead")).queue_datas) == 2
        found = await admin.query_msg_by_key("KeyDead", "needle")
    assert [m.body for m in found] == [b"here"]


# -- name servers: reads fail over, writes reach every one ---------------------------------------------------------


@pytest.mark.anyio
async def test_get_kv_config_fails_over_to_a_live_name_server(cluster: ThreadedCluster) -> None:
    """MQClientAPIImpl.getKVConfigValue sends with ``invokeSync(null, ...)``: the remoting client picks a name server
    it can connect to, so a dead first name server in the list does not fail the read."""
    ns = cluster.namesrv_addr
    async with Admin(ns) as admin:
        await admin.put_kv_config("failover-ns", "k", "v")
    async with Admin([_dead_addr(), ns]) as admin:
        assert await admin.get_kv_config("failover-ns", "k") == "v"


@pytest.mark.anyio
async def test_unit_topic_list_fails_over_to_a_live_name_server(cluster: ThreadedCluster) -> None:
    """MQClientAPIImpl.getUnitTopicList also uses ``invokeSync(null, ...)`` (any reachable name server)."""
    ns = cluster.namesrv_addr
    async with Admin([_dead_addr(), ns]) as admin:
        assert isinstance(await admin.unit_topics(RequestCode.GET_UNIT_TOPIC_LIST), list)
        assert await admin.get_kv_config("failover-ns", "absent") is None  # QUERY_NOT_FOUND from the live one


@pytest.mark.anyio
async def test_put_kv_config_reaches_every_name_server_then_raises_a_refusal(cluster: ThreadedCluster) -> None:
    """MQClientAPIImpl.putKVConfigValue sends to every name server and throws the last refusal at the end: one that
    refuses (here a broker, which does not serve PUT_KV_CONFIG) does not keep the write from the next."""
    ns = cluster.namesrv_addr
    async with Admin([cluster.broker_addr, ns]) as admin:
        with pytest.raises(MQBrokerError) as refused:
            await admin.put_kv_config("kv-ns", "k", "v")
        assert refused.value.address == cluster.broker_addr
    async with Admin(ns) as admin:
        assert await admin.get_kv_config("kv-ns", "k") == "v"


# -- calls a broker relays to a consumer wait longer than the broker -----------------------------------------------


async def test_consume_message_directly_waits_for_a_listener_as_long_as_javas_broker_does(
    embedded_cluster: EmbeddedCluster, autojump_clock: trio.testing.MockClock
) -> None:
    """The broker waits 10 s for the consumer (Broker2Client.callClient's ``invokeSync(channel, request, 10000)``)
    and DefaultMQAdminExtImpl.consumeMessageDirectly (and getConsumerRunningInfo) ``timeoutMillis * 3`` (15 s with
    DefaultMQAdminExt's 5 s): a listener taking 6 s (twice the 3 s rpc_timeout) answers CR_SUCCESS, and for one
    taking 12 s the caller gets the broker's CONSUME_MSG_TIMEOUT, not a timeout of its own."""
    ns = embedded_cluster.namesrv_addr
    await create_topic(ns, "Direct", queues=1)
    delay = 0.0
    seen: list[object] = []

    async def listener(msgs: list[object]) -> ConsumeConcurrentlyStatus:
        await trio.sleep(delay)
        seen.extend(msgs)
        return ConsumeConcurrentlyStatus.CONSUME_SUCCESS

    consumer = PushConsumer("direct-cg", ns)
    consumer.subscribe("Direct")
    consumer.register_message_listener(listener)
    async with Producer("direct-pg", ns) as producer, consumer, Admin(ns) as admin:
        sent = await producer.send(Message("Direct", b"again"))
        await wait_until(lambda: len(seen) == 1)
        client_id = consumer.instance.client_id
        delay = 6.0
        result = await admin.consume_message_directly("direct-cg", client_id, sent.offset_msg_id)
        assert result["consumeResult"] == "CR_SUCCESS"
        delay = 12.0
        with pytest.raises(MQBrokerError) as refused:
            await admin.consume_message_directly("direct-cg", client_id, sent.offset_msg_id)
        assert refused.value.code == ResponseCode.CONSUME_MSG_TIMEOUT
