"""Our PushConsumer checks SQL92 subscriptions with a broker of their topic at start (CHECK_CLIENT_CONFIG, as Java's
``checkClientInBroker``): a refused expression fails ``start`` with the broker's code and remark, before any
heartbeat registers the group; an accepted one starts and filters. Real sockets on 127.0.0.1, in-loop cluster."""

from __future__ import annotations

from pathlib import Path

import pytest
import trio
import trio.testing

from broker.embedded import EmbeddedCluster
from client import Message, Producer
from client.admin import Admin
from client.consumer.listener import ConsumeConcurrentlyStatus
from client.consumer.lite_pull import LitePullConsumer
from client.consumer.push import PushConsumer
from client.errors import MQBrokerError
from client.message import MessageExt
from remoting.codec.bodies import ConsumeFromWhere
from remoting.codec.codes import ResponseCode
from tests.client.helpers import create_topic
from tests.conftest import SMALL_STORE

TOPIC = "Sql92Checked"


async def _ignore(msgs: list[MessageExt]) -> ConsumeConcurrentlyStatus:
    return ConsumeConcurrentlyStatus.CONSUME_SUCCESS


def _consumer(cluster: EmbeddedCluster, group: str, expression: str) -> PushConsumer:
    consumer = PushConsumer(group, cluster.namesrv_addr)
    consumer.subscribe(TOPIC, expression, expression_type="SQL92")
    consumer.register_message_listener(_ignore)
    return consumer


async def test_start_fails_with_the_brokers_answer_while_property_filtering_is_off(
    embedded_cluster: EmbeddedCluster,
) -> None:
    await create_topic(embedded_cluster.namesrv_addr, TOPIC)
    with pytest.raises(MQBrokerError) as refused:
        async with _consumer(embedded_cluster, "cg-sql-off", "a > 1"):
            pytest.fail("the consumer started although the broker refused its SQL92 subscription")
    assert (refused.value.code, refused.value.remark) == (
        ResponseCode.SYSTEM_ERROR,
        "The broker does not support consumer to filter message by SQL92",
    )
    assert refused.value.address == embedded_cluster.broker_addr
    # Refused before the first heartbeat: the broker never registered the group.
    assert embedded_cluster.controller.context.clients.consumer_ids("cg-sql-off") == []


async def test_a_malformed_expression_fails_start_and_a_good_one_starts(tmp_path: Path) -> None:
    async with EmbeddedCluster(tmp_path / "cluster", enable_property_filter=True, **SMALL_STORE) as cluster:
        await create_topic(cluster.namesrv_addr, TOPIC)
        with pytest.raises(MQBrokerError) as refused:
            async with _consumer(cluster, "cg-sql-bad", "amount BETWEEN 10 AND"):
                pytest.fail("the consumer started with a malformed SQL92 expression")
        assert refused.value.code == ResponseCode.SUBSCRIPTION_PARSE_FAILED
        assert refused.value.remark is not None and "Invalid SQL92 expression" in refused.value.remark
        async with _consumer(cluster, "cg-sql-good", "amount BETWEEN 10 AND 20") as consumer:
            assert consumer.group == "cg-sql-good"
            assert cluster.controller.context.clients.consumer_ids("cg-sql-good")


async def test_check_asks_only_a_broker_of_the_sql92_subscriptions_topic(
    tmp_path: Path, autojump_clock: trio.testing.MockClock
) -> None:
    """Java's checkClientInBroker sends each SQL92 subscription to findBrokerAddrByTopic(its topic) only: a broker
    that does not serve that topic (here one with property filtering off, hosting the group's TAG topic) is never
    asked, so the consumer starts."""
    async with EmbeddedCluster(tmp_path / "c", brokers=2, enable_property_filter=True, **SMALL_STORE) as cluster:
        sql_broker, tag_broker = cluster.broker_addrs
        async with Admin(cluster.namesrv_addr) as admin:
            await admin.update_broker_config(tag_broker, {"enablePropertyFilter": "false"})
            await admin.create_topic(TOPIC, read_queue_nums=1, write_queue_nums=1, broker_addr=sql_broker)
            await admin.create_topic("TagTopic", read_queue_nums=1, write_queue_nums=1, broker_addr=tag_broker)
        consumer = _consumer(cluster, "cg-sql-one-broker", "a > 1")
        consumer.subscribe("TagTopic", "*")
        with trio.fail_after(60):
            async with consumer:
                assert cluster.controller.context.clients.consumer_ids("cg-sql-one-broker")


async def test_a_lite_pull_subscribe_with_a_refused_expression_fails_and_is_not_kept(
    embedded_cluster: EmbeddedCluster,
) -> None:
    """Java's lite pull consumer runs checkClientInBroker too (DefaultLitePullConsumerImpl.operateAfterRunning); ours
    subscribes after the start, so the check runs at subscribe: a refused SQL92 subscription raises the broker's
    answer, is not kept (no heartbeat carries it, no pull is made for it), and a tag subscription still works."""
    await create_topic(embedded_cluster.namesrv_addr, TOPIC)
    async with LitePullConsumer("cg-lite-sql-off", embedded_cluster.namesrv_addr) as consumer:
        with pytest.raises(MQBrokerError) as refused:
            await consumer.subscribe(TOPIC, "a > 1", expression_type="SQL92")
        assert refused.value.code == ResponseCode.SYSTEM_ERROR
        assert refused.value.address == embedded_cluster.broker_addr
        assert consumer.subscribed_topics() == set()
        clients = embedded_cluster.controller.context.clients
        assert clients.find_subscription("cg-lite-sql-off", TOPIC) is None
        await consumer.subscribe(TOPIC, "*")
        assert consumer.subscribed_topics() == {TOPIC}
        subscription = clients.find_subscription("cg-lite-sql-off", TOPIC)
        assert subscription is not None and subscription.expression_type == "TAG"


async def test_a_lite_pull_restart_checks_its_sql92_subscriptions_again(tmp_path: Path) -> None:
    """A restart takes the subscriptions up again with a heartbeat and a rebalance; the check runs first, so a
    broker that turned property filtering off meanwhile fails the restart with its answer."""
    async with EmbeddedCluster(tmp_path / "cluster", enable_property_filter=True, **SMALL_STORE) as cluster:
        await create_topic(cluster.namesrv_addr, TOPIC)
        consumer = LitePullConsumer("cg-lite-sql-restart", cluster.namesrv_addr)
        async with consumer:
            await consumer.subscribe(TOPIC, "amount > 1", expression_type="SQL92")
        async with Admin(cluster.namesrv_addr) as admin:
            await admin.update_broker_config(cluster.broker_addr, {"enablePropertyFilter": "false"})
        with pytest.raises(MQBrokerError) as refused:
            async with consumer:
                pytest.fail("the restart took up an SQL92 subscription the broker refuses")
        assert refused.value.code == ResponseCode.SYSTEM_ERROR


async def test_a_lite_pull_subscribe_before_its_topic_exists_is_kept_and_consumed(
    tmp_path: Path, autojump_clock: trio.testing.MockClock
) -> None:
    """Java's DefaultLitePullConsumerImpl.subscribe keeps the subscription and only logs a topic without a route
    (updateTopicRouteInfoFromNameServer answers false): once the topic is made, the route refresh and the rebalance
    take its queues up. Ours must neither raise nor drop it now that the check comes first."""
    async with EmbeddedCluster(tmp_path / "c", **SMALL_STORE) as cluster:
        consumer = LitePullConsumer(
            "cg-lite-later", cluster.namesrv_addr, consume_from_where=ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET
        )
        with trio.fail_after(600):
            async with consumer:
                await consumer.subscribe("LaterTopic")
                assert consumer.subscribed_topics() == {"LaterTopic"}
                await create_topic(cluster.namesrv_addr, "LaterTopic", queues=1)
                async with Producer("pg-lite-later", cluster.namesrv_addr) as producer:
                    await producer.send(Message("LaterTopic", b"made after the subscribe"))
                received: list[bytes] = []
                while not received:
                    received.extend(m.body for m in await consumer.poll(timeout=5.0))
                assert received == [b"made after the subscribe"]
