"""SQL92 subscriptions end to end against the embedded cluster (``enablePropertyFilter=true``), over real sockets on
127.0.0.1: our PushConsumer receives exactly the matching messages, before and after it starts; CHECK_CLIENT_CONFIG
answers the parser's message for a malformed expression. The lite pull consumer filters the same way."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest
import trio
import trio.testing

from broker.embedded import EmbeddedCluster
from client.admin import Admin
from client.consumer.listener import ConsumeConcurrentlyStatus
from client.consumer.lite_pull import LitePullConsumer
from client.consumer.push import PushConsumer
from client.consumer.subscription import build_subscription
from client.message import Message, MessageExt
from client.producer import Producer
from remoting.client import RemotingClient
from remoting.codec.bodies import ConsumeFromWhere, ConsumerData, HeartbeatData, SubscriptionData
from remoting.codec.bodies.admin import CheckClientRequestBody
from remoting.codec.codes import RequestCode, ResponseCode
from remoting.codec.command import request
from tests.broker.helpers import create_topic_request
from tests.conftest import SMALL_STORE
from tests.processors.conftest import pull_request

TOPIC = "Sql92Orders"
EXPRESSION = "region IN ('eu', 'us') AND amount > 10 AND NOT (priority = 'low')"


@pytest.fixture
async def filtering_cluster(tmp_path: Path) -> AsyncIterator[EmbeddedCluster]:
    async with EmbeddedCluster(tmp_path / "cluster", enable_property_filter=True, **SMALL_STORE) as cluster:
        yield cluster


def order(i: int) -> Message:
    """Message ``i``: regions, amounts and priorities cycle, some messages lack an amount or a priority."""
    props = {"region": ("eu", "us", "apac")[i % 3]}
    if i % 5:
        props["amount"] = str(i)
    if i % 4 == 0:
        props["priority"] = "low"
    elif i % 4 == 1:
        props["priority"] = "high"
    return Message(TOPIC, f"order-{i}".encode(), tags="Order", properties=props)


def matches(i: int) -> bool:
    props = order(i).properties
    amount = props.get("amount")
    priority = props.get("priority")
    # priority absent makes NOT (priority = 'low') unknown: such messages are not delivered.
    return props["region"] in ("eu", "us") and amount is not None and int(amount) > 10 and priority == "high"


async def test_push_consumer_with_sql92_receives_exactly_the_matching_messages(
    filtering_cluster: EmbeddedCluster, autojump_clock: trio.testing.MockClock
) -> None:
    cluster = filtering_cluster
    async with Admin(cluster.namesrv_addr) as admin:
        await admin.create_topic(TOPIC, read_queue_nums=2, write_queue_nums=2)
    received: list[MessageExt] = []

    async def listener(msgs: list[MessageExt]) -> ConsumeConcurrentlyStatus:
        received.extend(msgs)
        return ConsumeConcurrentlyStatus.CONSUME_SUCCESS

    consumer = PushConsumer(
        "cg-sql92", cluster.namesrv_addr, consume_from_where=ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET
    )
    consumer.subscribe(TOPIC, EXPRESSION, "SQL92")
    consumer.register_message_listener(listener)
    expected = {f"order-{i}".encode() for i in range(80) if matches(i)}
    assert 0 < len(expected) < 40
    async with Producer("pg-sql92", cluster.namesrv_addr) as producer:
        for i in range(40):
            await producer.send(order(i))
        async with consumer:
            for i in range(40, 80):  # these arrive while the consumer's pulls are held
                await producer.send(order(i))
            with trio.fail_after(120):  # virtual seconds: a hang guard
                while len(received) < len(expected):
                    await trio.sleep(0.1)
            await trio.sleep(20)  # longer than a held pull: nothing else may come
    assert sorted(m.body for m in received) == sorted(expected)
    assert all(m.properties["priority"] == "high" for m in received)


async def test_lite_pull_consumer_with_sql92_polls_only_the_matching_messages(
    filtering_cluster: EmbeddedCluster, autojump_clock: trio.testing.MockClock
) -> None:
    cluster = filtering_cluster
    async with Admin(cluster.namesrv_addr) as admin:
        await admin.create_topic(TOPIC, read_queue_nums=2, write_queue_nums=2)
    async with Producer("pg-sql92-lite", cluster.namesrv_addr) as producer:
        for i in range(40):
            await producer.send(order(i))
    expected = {f"order-{i}".encode() for i in range(40) if matches(i)}
    polled: list[bytes] = []
    consumer = LitePullConsumer(
        "cg-sql92-lite", cluster.namesrv_addr, consume_from_where=ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET
    )
    async with consumer:
        await consumer.subscribe(TOPIC, EXPRESSION, "SQL92")
        with trio.fail_after(120):  # virtual seconds: a hang guard
            while len(polled) < len(expected):
                polled.extend(m.body for m in await consumer.poll(timeout=1.0))
        polled.extend(m.body for m in await consumer.poll(timeout=20.0))  # nothing else may come
    assert sorted(polled) == sorted(expected)


def test_client_refuses_an_empty_sql92_expression_and_unknown_types() -> None:
    with pytest.raises(ValueError, match="Expression can't be null! SQL92"):
        build_subscription(TOPIC, "  ", "SQL92")
    with pytest.raises(ValueError, match="unknown expression type 'sql'"):
        build_subscription(TOPIC, "a > 1", "sql")
    sub = build_subscription(TOPIC, EXPRESSION, "SQL92")
    assert (sub.sub_string, sub.expression_type, sub.tags_set) == (EXPRESSION, "SQL92", ())


async def test_check_client_config_answers_the_parser_message(filtering_cluster: EmbeddedCluster) -> None:
    async def check(expression: str) -> tuple[int, str | None]:
        sub = SubscriptionData(TOPIC, expression, expression_type="SQL92")
        body = CheckClientRequestBody("client-1", "cg-check", sub).encode()
        async with RemotingClient() as client:
            answer = await client.invoke(
                filtering_cluster.broker_addr, request(RequestCode.CHECK_CLIENT_CONFIG, body=body), 5
            )
        return answer.code, answer.remark

    assert (await check(EXPRESSION))[0] == ResponseCode.SUCCESS
    code, remark = await check("amount BETWEEN 10 AND")
    assert code == ResponseCode.SUBSCRIPTION_PARSE_FAILED
    assert remark == (
        "Invalid SQL92 expression: expected a property, a literal or '(' but found end of input "
        "at line 1, column 22 (position 21)"
    )


async def test_a_pull_by_a_heartbeats_malformed_sql92_answers_filter_data_not_exist(
    filtering_cluster: EmbeddedCluster,
) -> None:
    """A heartbeat registers a malformed SQL92 subscription (answered SUCCESS: ClientManageProcessor.heartBeat never
    parses); a pull without the subscription flag then finds no filter data for it, as PullMessageProcessor answers
    when ConsumerFilterManager could not compile the expression: FILTER_DATA_NOT_EXIST, not SUBSCRIPTION_PARSE_FAILED.
    """
    group = "cg-sql92-bad-heartbeat"
    sub = SubscriptionData(TOPIC, "amount BETWEEN 10 AND", sub_version=7, expression_type="SQL92")
    data = HeartbeatData("10.0.0.7@1", consumer_data_set=(ConsumerData(group, subscription_data_set=(sub,)),))
    addr = filtering_cluster.broker_addr
    async with RemotingClient() as client:
        assert (await client.invoke(addr, create_topic_request(TOPIC, 1), 5)).code == ResponseCode.SUCCESS
        beat = await client.invoke(addr, request(RequestCode.HEART_BEAT, body=data.encode()), 5)
        assert beat.code == ResponseCode.SUCCESS
        pulled = await client.invoke(
            addr, pull_request(TOPIC, group=group, sys_flag=0, subscription=None, subVersion="7"), 5
        )
    assert (pulled.code, pulled.remark) == (
        ResponseCode.FILTER_DATA_NOT_EXIST,
        "The broker's consumer filter data is not exist!Your expression may be wrong!",
    )
