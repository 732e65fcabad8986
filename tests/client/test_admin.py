"""Admin client and the mqadmin command line against the embedded cluster: topics, groups, lag in consumerProgress,
connections, message queries, offset reset and broker status."""

from __future__ import annotations

import json
from typing import Any

import anyio
import pytest
from click.testing import CliRunner

from client.admin import Admin
from client.consumer.listener import ConsumeConcurrentlyStatus
from client.consumer.lite_pull import LitePullConsumer
from client.consumer.push import PushConsumer
from client.errors import MQBrokerError, MQClientError
from client.message import Message, MessageExt
from client.mqadmin import main as mqadmin
from client.producer import Producer
from remoting.codec.bodies import MessageQueue
from remoting.codec.bodies.broker_metadata import SubscriptionGroupConfig
from tests.client.helpers import create_topic, wait_until
from tests.threaded_cluster import ThreadedCluster


def _cli(*args: str) -> Any:
    result = CliRunner().invoke(mqadmin, [*args, "--json"], catch_exceptions=False)
    assert result.exit_code == 0, result.output
    return json.loads(result.output)


@pytest.mark.anyio
async def test_a_lagging_consumer_shows_its_lag_in_consumer_progress(cluster: ThreadedCluster) -> None:
    await create_topic(cluster.namesrv_addr, "Lag", queues=2)
    async with Producer("pg-lag", cluster.namesrv_addr) as producer:
        for i in range(30):
            await producer.send(
                Message("Lag", f"{i}".encode(), keys=f"key{i}"), queue=MessageQueue("Lag", "broker-a", i % 2)
            )
    async with LitePullConsumer("cg-lag", cluster.namesrv_addr, auto_commit=False, pull_batch_size=4) as consumer:
        mq0 = MessageQueue("Lag", "broker-a", 0)
        await consumer.assign([mq0, MessageQueue("Lag", "broker-a", 1)])
        taken = 0
        while taken < 4:
            batch = await consumer.poll(timeout=10)
            taken += len(batch) if batch and batch[0].queue_id == 0 else 0
        await consumer.commit([mq0])
        async with Admin(cluster.namesrv_addr) as admin:
            progress = await admin.consumer_progress("cg-lag", "Lag")
            connection = await admin.consumer_connection("cg-lag")
    assert {mq.queue_id: (w.broker_offset, w.consumer_offset) for mq, w in progress.items()} == {0: (15, 4), 1: (15, 0)}
    assert [c.client_id for c in connection.connection_set] == [consumer.instance.client_id]


@pytest.mark.anyio
async def test_admin_manages_topics_and_groups_and_finds_messages(cluster: ThreadedCluster) -> None:
    async with Admin(cluster.namesrv_addr) as admin:
        assert await admin.create_topic("AdminT", read_queue_nums=2, write_queue_nums=2) == [cluster.broker_addr]
        await create_topic(cluster.namesrv_addr, "AdminT", queues=2)
        async with Producer("pg-admin", cluster.namesrv_addr) as producer:
            sent = await producer.send(Message("AdminT", b"find me", keys="needle"))
            producers = await admin.producer_connection("pg-admin", "AdminT")
        assert len(producers.connection_set) == 1
        assert (await admin.query_msg_by_id(sent.offset_msg_id)).body == b"find me"
        assert [m.body for m in await admin.query_msg_by_key("AdminT", "needle")] == [b"find me"]
        mq = MessageQueue("AdminT", "broker-a", sent.queue_id)
        assert [m.body for m in await admin.query_msg_by_offset(mq, sent.queue_offset)] == [b"find me"]
        status = await admin.topic_status("AdminT")
        assert status[mq].max_offset == sent.queue_offset + 1
        await admin.create_subscription_group(SubscriptionGroupConfig("g-admin", retry_max_times=3))
        await admin.delete_subscription_group("g-admin")
        assert "brokerVersionDesc" in await admin.broker_status(cluster.broker_addr)
        await admin.delete_topic("AdminT")
        with anyio.fail_after(60):
            while "AdminT" in await admin.topic_list():
                await anyio.sleep(0.05)
        with pytest.raises(MQBrokerError):
            await admin.consumer_connection("nobody-home")


def test_mqadmin_prints_rocketmq_text_and_json(cluster: ThreadedCluster) -> None:
    ns = cluster.namesrv_addr
    created = _cli("updateTopic", "-n", ns, "-t", "CliTopic", "-c", "DefaultCluster", "-r", "2", "-w", "2")
    assert f"create topic to {cluster.broker_addr} success." in created["lines"]
    anyio.run(create_topic, ns, "CliTopic", 2)
    sent = _cli("sendMessage", "-n", ns, "-t", "CliTopic", "-p", "hello cli", "-k", "k1")
    assert sent["rows"][0]["Send Result"] == "SEND_OK"
    offset_id = sent["OffsetMsgId"]
    assert _cli("queryMsgById", "-n", ns, "-i", offset_id)["messages"][0]["Body"] == "hello cli"
    assert (
        _cli("queryMsgByKey", "-n", ns, "-t", "CliTopic", "-k", "k1")["rows"][0]["Message ID"]
        == sent["rows"][0]["MsgId"]
    )
    consumed = _cli("consumeMessage", "-n", ns, "-t", "CliTopic")["rows"]
    assert [r["BODY"] for r in consumed] == ["hello cli"]
    assert {"Topic": "CliTopic"} in _cli("topicList", "-n", ns)["rows"]
    assert len(_cli("topicStatus", "-n", ns, "-t", "CliTopic")["rows"]) == 2
    assert _cli("topicRoute", "-n", ns, "-t", "CliTopic", "-l")["rows"][0]["WriteQueue"] == 2
    assert _cli("clusterList", "-n", ns)["rows"][0]["Addr"] == cluster.broker_addr
    assert _cli("updateSubGroup", "-n", ns, "-g", "cli-group", "-c", "DefaultCluster")["lines"]
    no_offsets = CliRunner().invoke(mqadmin, ["consumerProgress", "-n", ns, "-g", "cli-group"])  # fails, as Java's
    assert no_offsets.exit_code == 1 and "Not found the consumer group consume stats" in no_offsets.output
    assert _cli("brokerStatus", "-n", ns, "-b", cluster.broker_addr)["rows"]
    table = CliRunner().invoke(mqadmin, ["topicStatus", "-n", ns, "-t", "CliTopic"])
    assert table.exit_code == 0 and "#Max Offset" in table.output and "broker-a" in table.output
    failed = CliRunner().invoke(mqadmin, ["consumerConnection", "-n", ns, "-g", "nobody"])
    assert failed.exit_code == 1


@pytest.mark.anyio
async def test_mqadmin_connection_reset_and_delete_commands(cluster: ThreadedCluster) -> None:
    ns = cluster.namesrv_addr
    await create_topic(ns, "CliLive", queues=1)
    seen: list[MessageExt] = []

    async def listener(msgs: list[MessageExt]) -> ConsumeConcurrentlyStatus:
        seen.extend(msgs)
        return ConsumeConcurrentlyStatus.CONSUME_SUCCESS

    consumer = PushConsumer("cli-cg", ns)
    consumer.subscribe("CliLive")
    consumer.register_message_listener(listener)
    async with Producer("cli-pg", ns) as producer, consumer:
        await producer.send(Message("CliLive", b"live"))
        await wait_until(lambda: len(seen) == 1)
        run = anyio.to_thread.run_sync
        conn = await run(_cli, "consumerConnection", "-n", ns, "-g", "cli-cg")
        assert [r["ClientId"] for r in conn["rows"]] == [consumer.instance.client_id]
        assert conn["subscriptions"]["CliLive"] == "*"
        prod = await run(_cli, "producerConnection", "-n", ns, "-g", "cli-pg", "-t", "CliLive")
        assert [r["ClientId"] for r in prod["rows"]] == [producer.instance.client_id]
        msg = await run(_cli, "queryMsgByOffset", "-n", ns, "-t", "CliLive", "-b", "broker-a", "-i", "0", "-o", "0")
        assert msg["messages"][0]["Body"] == "live"
        await consumer.persist_offsets()  # the broker resets only groups with committed offsets
        async with Admin(ns) as admin:
            with anyio.fail_after(60):
                while [w.consumer_offset for w in (await admin.consumer_progress("cli-cg", "CliLive")).values()] != [1]:
                    await anyio.sleep(0.02)
        reset = await run(_cli, "resetOffsetByTime", "-n", ns, "-g", "cli-cg", "-t", "CliLive", "-s", "0")
        assert [r["offset"] for r in reset["rows"]] == [0]
        await wait_until(lambda: len(seen) == 2)
    removed = await anyio.to_thread.run_sync(
        _cli, "deleteSubGroup", "-n", ns, "-g", "cli-cg", "-b", cluster.broker_addr
    )
    assert removed["lines"] == [f"delete subscription group [cli-cg] from broker [{cluster.broker_addr}] success."]
    deleted = await anyio.to_thread.run_sync(_cli, "deleteTopic", "-n", ns, "-t", "CliLive", "-c", "DefaultCluster")
    assert deleted["lines"][-1] == "delete topic [CliLive] from NameServer success."


@pytest.mark.anyio
async def test_query_by_key_drops_messages_whose_key_only_shares_the_hash(cluster: ThreadedCluster) -> None:
    # "Aa" and "BB" have the same Java hashCode, so the broker's index returns both for either key.
    await create_topic(cluster.namesrv_addr, "KeyHash", queues=1)
    async with Producer("pg-keyhash", cluster.namesrv_addr) as producer:
        await producer.send(Message("KeyHash", b"first", keys="Aa"))
        sent = await producer.send(Message("KeyHash", b"second", keys="BB"))
    async with Admin(cluster.namesrv_addr) as admin:
        assert [m.body for m in await admin.query_msg_by_key("KeyHash", "Aa")] == [b"first"]
        assert [m.body for m in await admin.query_msg_by_key("KeyHash", "BB")] == [b"second"]
        # A key query matches KEYS tokens only (MQAdminImpl.queryMessage); the msgId is a unique-key query.
        by_msg_id_as_key = await admin.query_msg_by_key("KeyHash", sent.msg_id)
        by_unique_key = await admin.query_msg_by_unique_key("KeyHash", sent.msg_id)
    assert by_msg_id_as_key == []
    assert [m.body for m in by_unique_key] == [b"second"]


@pytest.mark.anyio
async def test_query_by_key_drops_messages_of_another_topic_whose_index_hash_collides(
    cluster: ThreadedCluster,
) -> None:
    """``TopicAa#k`` and ``TopicBB#k`` have the same Java hashCode, so the broker's index answers a query of either
    topic with both messages; as MQAdminImpl.queryMessage, only the queried topic's are kept."""
    ns = cluster.namesrv_addr
    await create_topic(ns, "TopicAa", queues=1)
    await create_topic(ns, "TopicBB", queues=1)
    async with Producer("pg-collide", ns) as producer:
        await producer.send(Message("TopicAa", b"mine", keys="k"))
        await producer.send(Message("TopicBB", b"other topic", keys="k"))
    async with Admin(ns) as admin:
        found = await admin.query_msg_by_key("TopicAa", "k")
    assert [(m.topic, m.body) for m in found] == [("TopicAa", b"mine")]


@pytest.mark.anyio
async def test_view_message_by_a_malformed_msg_id_raises_a_client_error(cluster: ThreadedCluster) -> None:
    """A msgId that is not an offset msgId is MQClientError, as MQAdminImpl.viewMessage's NO_MESSAGE."""
    async with Admin(cluster.namesrv_addr) as admin:
        with pytest.raises(MQClientError, match="no message"):
            await admin.query_msg_by_id("not-a-message-id")
        with pytest.raises(MQClientError, match="no message"):
            await admin.consume_message_directly("g", "client", "not-a-message-id")


async def test_queue_offsets_and_the_earliest_store_time_by_message_queue(cluster: ThreadedCluster) -> None:
    """Java's MQAdminExt ``minOffset``/``maxOffset``/``searchOffset``/``earliestMsgStoreTime`` of a queue, asked
    at its broker's master found from the topic's route; an unknown broker name is a client error."""
    await create_topic(cluster.namesrv_addr, "AdminQueueTimes", queues=1)
    async with Admin(cluster.namesrv_addr) as admin, Producer("pg-queue-times", cluster.namesrv_addr) as producer:
        [mq] = [
            MessageQueue("AdminQueueTimes", bd.broker_name, 0)
            for bd in (await admin.topic_route("AdminQueueTimes")).broker_datas
        ]
        assert await admin.earliest_msg_store_time(mq) == -1
        for i in range(3):
            await producer.send(Message("AdminQueueTimes", f"t{i}".encode()))
        [first] = await admin.query_msg_by_offset(mq, 0)
        assert (await admin.min_offset(mq), await admin.max_offset(mq)) == (0, 3)
        assert await admin.earliest_msg_store_time(mq) == first.store_timestamp
        assert await admin.search_offset(mq, first.store_timestamp) == 0
        with pytest.raises(MQClientError, match="not exist"):
            await admin.max_offset(MessageQueue("AdminQueueTimes", "no-such-broker", 0))
