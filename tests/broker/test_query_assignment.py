"""QUERY_ASSIGNMENT (400) and SET_MESSAGE_REQUEST_MODE (401) as a RocketMQ 5.3.3 Java push consumer and
``mqadmin setConsumeMode`` send them (client/src/main/java/org/apache/rocketmq/client/impl/MQClientAPIImpl.java
``queryAssignment``, ``setMessageRequestMode``), over real sockets to an embedded broker, answered as
broker/src/main/java/org/apache/rocketmq/broker/processor/QueryAssignmentProcessor.java answers them."""

from __future__ import annotations

import socket
from pathlib import Path

import attrs
import orjson
import trio
import trio.testing

from broker.context import config_dir_of
from broker.embedded import EmbeddedCluster
from client.admin import Admin
from remoting.client import RemotingClient
from remoting.codec.bodies.assignment import (
    MessageRequestMode,
    QueryAssignmentRequestBody,
    QueryAssignmentResponseBody,
    SetMessageRequestModeRequestBody,
)
from remoting.codec.bodies.heartbeat import ConsumerData, HeartbeatData, MessageModel
from remoting.codec.codes import RequestCode, ResponseCode
from remoting.codec.command import RemotingCommand, request
from store.metadata_files import PERM_WRITE
from tests.conftest import SMALL_STORE
from tests.semantics.helpers import create_topic

GROUP = "assign-group"


def query(topic: str, client_id: str, strategy: str = "AVG", model: MessageModel = MessageModel.CLUSTERING) -> bytes:
    return QueryAssignmentRequestBody(topic, GROUP, client_id, strategy, model).encode()


async def assigned(client: RemotingClient, addr: str, body: bytes) -> list[tuple[str, int, str]] | None:
    """The (broker name, queue id, mode) of each assignment, sorted; None when the answer names none."""
    answer = await client.invoke(addr, request(RequestCode.QUERY_ASSIGNMENT, body=body), 10)
    assert answer.code == ResponseCode.SUCCESS, answer.remark
    items = QueryAssignmentResponseBody.decode(bytes(answer.body)).message_queue_assignments
    if items is None:
        return None
    return sorted((a.message_queue.broker_name, a.message_queue.queue_id, a.mode.name) for a in items)


async def set_mode(client: RemotingClient, addr: str, body: SetMessageRequestModeRequestBody) -> RemotingCommand:
    return await client.invoke(addr, request(RequestCode.SET_MESSAGE_REQUEST_MODE, body=body.encode()), 10)


async def heartbeat(client: RemotingClient, addr: str, client_id: str) -> None:
    data = HeartbeatData(client_id, consumer_data_set=(ConsumerData(GROUP),))
    answer = await client.invoke(addr, request(RequestCode.HEART_BEAT, body=data.encode()), 10)
    assert answer.code == ResponseCode.SUCCESS


async def test_queues_are_balanced_among_the_groups_consumers_in_pull_mode_by_default(
    embedded_cluster: EmbeddedCluster,
) -> None:
    addr = embedded_cluster.broker_addr
    await create_topic(embedded_cluster, "AssignT", queues=4)
    async with RemotingClient() as a, RemotingClient() as b:
        await heartbeat(a, addr, "cid-a")
        await heartbeat(b, addr, "cid-b")
        assert await assigned(a, addr, query("AssignT", "cid-a")) == [("broker-a", q, "PULL") for q in (0, 1)]
        assert await assigned(b, addr, query("AssignT", "cid-b")) == [("broker-a", q, "PULL") for q in (2, 3)]
        circle = await assigned(a, addr, query("AssignT", "cid-a", "AVG_BY_CIRCLE"))
        assert circle == [("broker-a", q, "PULL") for q in (0, 2)]
        # Broadcasting: every queue; an unknown strategy or a topic no name server knows: no assignment at all.
        everything = await assigned(a, addr, query("AssignT", "cid-a", model=MessageModel.BROADCASTING))
        assert everything == [("broker-a", q, "PULL") for q in range(4)]
        assert await assigned(a, addr, query("AssignT", "cid-a", "NO_SUCH")) is None
        # A light message queue (MixAll.isLmq) is its one queue on this broker, no route asked for.
        assert await assigned(a, addr, query("%LMQ%assign", "cid-a")) == [("broker-a", 0, "PULL")]
        assert await assigned(a, addr, query("NoSuchTopic", "cid-a")) is None
        answer = await a.invoke(addr, request(RequestCode.QUERY_ASSIGNMENT, body=query("NoSuchTopic", "x")), 10)
        assert orjson.loads(bytes(answer.body)) == {}  # fastjson leaves the null set out


async def test_a_pop_mode_set_is_answered_with_every_queue_and_survives_a_restart(
    embedded_cluster: EmbeddedCluster,
) -> None:
    addr = embedded_cluster.broker_addr
    await create_topic(embedded_cluster, "AssignPop", queues=2)
    async with RemotingClient() as client:
        body = SetMessageRequestModeRequestBody("AssignPop", GROUP, MessageRequestMode.POP, 0)
        answer = await set_mode(client, addr, body)
        assert answer.code == ResponseCode.SUCCESS, answer.remark
    config_dir = config_dir_of(embedded_cluster.controller.context.config)
    saved = orjson.loads((config_dir / "messageRequestMode.json").read_bytes())
    assert saved["messageRequestModeMap"]["AssignPop"][GROUP] == {
        "consumerGroup": GROUP, "mode": "POP", "popShareQueueNum": 0, "topic": "AssignPop"
    }  # fmt: skip
    addr = "{}:{}".format(*await embedded_cluster.restart_broker())
    async with RemotingClient() as client:
        await heartbeat(client, addr, "cid-a")
        assert await assigned(client, addr, query("AssignPop", "cid-a")) == [("broker-a", -1, "POP")]


async def test_pop_share_queue_num_limits_a_pop_consumer_to_its_share_and_its_followers(
    embedded_cluster: EmbeddedCluster,
) -> None:
    addr = embedded_cluster.broker_addr
    await create_topic(embedded_cluster, "AssignShare", queues=6)
    async with RemotingClient() as a, RemotingClient() as b, RemotingClient() as c:
        body = SetMessageRequestModeRequestBody("AssignShare", GROUP, MessageRequestMode.POP, 1)
        assert (await set_mode(a, addr, body)).code == ResponseCode.SUCCESS
        for client, cid in ((a, "cid-a"), (b, "cid-b"), (c, "cid-c")):
            await heartbeat(client, addr, cid)
        # 3 consumers, share 1 < 3 - 1: cid-a pops its own two queues and cid-b's.
        assert await assigned(a, addr, query("AssignShare", "cid-a")) == [("broker-a", q, "POP") for q in range(4)]
        assert await assigned(c, addr, query("AssignShare", "cid-c")) == [("broker-a", q, "POP") for q in (0, 1, 4, 5)]


async def test_set_message_request_mode_refusals(embedded_cluster: EmbeddedCluster) -> None:
    addr = embedded_cluster.broker_addr
    async with RemotingClient() as client:
        retry = await set_mode(client, addr, SetMessageRequestModeRequestBody(f"%RETRY%{GROUP}", GROUP))
        assert (retry.code, retry.remark) == (ResponseCode.NO_PERMISSION, "retry topic is not allowed to set mode")
        unknown = await set_mode(client, addr, SetMessageRequestModeRequestBody("NoSuchTopic", GROUP))
        assert (unknown.code, unknown.remark) == (ResponseCode.TOPIC_NOT_EXIST, "topic[NoSuchTopic] not exist")
        garbage = await client.invoke(addr, request(RequestCode.SET_MESSAGE_REQUEST_MODE, body=b"not json"), 10)
        assert garbage.code == ResponseCode.SYSTEM_ERROR


async def test_a_pop_default_is_the_mode_of_every_topic_but_a_retry_topic(tmp_path: Path) -> None:
    """``defaultMessageRequestMode`` POP with ``defaultPopShareQueueNum`` -1: every queue popped; a retry topic is
    always pulled, balanced as any PULL topic."""
    settings = {"default_message_request_mode": "POP"}
    async with EmbeddedCluster(tmp_path / "cluster", **SMALL_STORE, **settings) as cluster:
        addr = cluster.broker_addr
        await create_topic(cluster, "AssignDefault", queues=2)
        await create_topic(cluster, f"%RETRY%{GROUP}", queues=1)
        async with RemotingClient() as client:
            await heartbeat(client, addr, "cid-a")
            assert await assigned(client, addr, query("AssignDefault", "cid-a")) == [("broker-a", -1, "POP")]
            retry = await assigned(client, addr, query(f"%RETRY%{GROUP}", "cid-a"))
            assert retry == [("broker-a", 0, "PULL")]


async def test_a_mode_for_a_group_the_broker_does_not_create_is_refused(tmp_path: Path) -> None:
    async with EmbeddedCluster(tmp_path / "c", auto_create_subscription_group=False, **SMALL_STORE) as cluster:
        await create_topic(cluster, "AssignNoGroup")
        async with RemotingClient() as client:
            body = SetMessageRequestModeRequestBody("AssignNoGroup", "unknown-group", MessageRequestMode.POP)
            answer = await set_mode(client, cluster.broker_addr, body)
    assert (answer.code, answer.remark) == (
        ResponseCode.SUBSCRIPTION_GROUP_NOT_EXIST, "subscription group does not exist"
    )  # fmt: skip
    assert not (config_dir_of(cluster.controller.context.config) / "messageRequestMode.json").exists()


async def test_a_route_no_name_server_refreshes_keeps_its_queues(
    embedded_cluster: EmbeddedCluster, autojump_clock: trio.testing.MockClock
) -> None:
    """TopicRouteInfoManager answers from its table, refreshes it every ``loadBalancePollNameServerInterval`` in the
    background and leaves it alone when a refresh fails (broker/src/main/java/org/apache/rocketmq/broker/topic/
    TopicRouteInfoManager.java). Ours refreshed a route 30 s old inside the request (up to 3 s a name server, past a
    Java client's 3 s QUERY_ASSIGNMENT timeout, which closes its connection) and answered no assignment when no name
    server did."""
    addr = embedded_cluster.broker_addr
    await create_topic(embedded_cluster, "AssignStale", queues=2)
    both = [("broker-a", 0, "PULL"), ("broker-a", 1, "PULL")]
    async with RemotingClient() as client:
        await heartbeat(client, addr, "cid-a")
        assert await assigned(client, addr, query("AssignStale", "cid-a")) == both
        with socket.socket() as unused:  # a port nothing listens on once closed
            unused.bind(("127.0.0.1", 0))
            port = unused.getsockname()[1]
        ctx = embedded_cluster.controller.context
        ctx.config = attrs.evolve(ctx.config, namesrv_addr=f"127.0.0.1:{port}")
        await trio.sleep(65)
        await heartbeat(client, addr, "cid-a")
        start = trio.current_time()
        assert await assigned(client, addr, query("AssignStale", "cid-a")) == both
        assert trio.current_time() - start < 1


async def test_a_route_without_readable_queues_answers_an_empty_set_and_no_message_model_an_error(
    embedded_cluster: EmbeddedCluster,
) -> None:
    """TopicRouteInfoManager keeps the empty set of a route with no readable queue: broadcasting, or a POP group
    popping every queue, is answered an empty set (the client drops its queues), a balanced one null (the strategy
    throws on no queues). A body without ``messageModel`` makes doLoadBalance's switch throw: SYSTEM_ERROR."""
    addr = embedded_cluster.broker_addr
    async with Admin(embedded_cluster.namesrv_addr) as admin:
        await admin.create_topic("AssignWriteOnly", read_queue_nums=2, write_queue_nums=2, perm=PERM_WRITE)
    async with RemotingClient() as client:
        await heartbeat(client, addr, "cid-a")
        broadcast = await assigned(client, addr, query("AssignWriteOnly", "cid-a", model=MessageModel.BROADCASTING))
        assert broadcast == []
        assert await assigned(client, addr, query("AssignWriteOnly", "cid-a")) is None
        body = SetMessageRequestModeRequestBody("AssignWriteOnly", GROUP, MessageRequestMode.POP, 0)
        assert (await set_mode(client, addr, body)).code == ResponseCode.SUCCESS
        assert await assigned(client, addr, query("AssignWriteOnly", "cid-a")) == []
        no_model = orjson.dumps({"clientId": "cid-a", "consumerGroup": GROUP, "strategyName": "AVG", "topic": "T"})
        answer = await client.invoke(addr, request(RequestCode.QUERY_ASSIGNMENT, body=no_model), 10)
        assert answer.code == ResponseCode.SYSTEM_ERROR


async def test_an_empty_queue_set_is_fetched_again_once_the_topic_is_readable(
    embedded_cluster: EmbeddedCluster,
) -> None:
    """TopicRouteInfoManager.getTopicSubscribeInfo asks the name server again when its table holds no queue for the
    topic, null or empty: a topic made readable is assigned at the next query, not after the 30 s refresh. Found by
    a review: the kept empty set was answered until the table's next periodic refresh."""
    addr = embedded_cluster.broker_addr
    async with Admin(embedded_cluster.namesrv_addr) as admin, RemotingClient() as client:
        await admin.create_topic("AssignLater", read_queue_nums=2, write_queue_nums=2, perm=PERM_WRITE)
        await heartbeat(client, addr, "cid-a")
        assert await assigned(client, addr, query("AssignLater", "cid-a", model=MessageModel.BROADCASTING)) == []
        await admin.create_topic("AssignLater", read_queue_nums=2, write_queue_nums=2)
        while not all(data.perm & 4 for data in (await admin.topic_route("AssignLater")).queue_datas):
            await trio.sleep(0.05)
        broadcast = await assigned(client, addr, query("AssignLater", "cid-a", model=MessageModel.BROADCASTING))
        assert broadcast == [("broker-a", 0, "PULL"), ("broker-a", 1, "PULL")]


async def test_a_body_without_a_topic_answers_system_error(embedded_cluster: EmbeddedCluster) -> None:
    """QueryAssignmentProcessor reads the mode of a null topic (MessageRequestModeManager's ConcurrentHashMap.get:
    NullPointerException) and setMessageRequestMode calls ``topic.startsWith``: SYSTEM_ERROR for both, where an
    empty topic is a topic no one knows."""
    addr = embedded_cluster.broker_addr
    named = {"clientId": "cid-a", "consumerGroup": GROUP, "strategyName": "AVG", "messageModel": "CLUSTERING"}
    async with RemotingClient() as client:
        for body in (named, {**named, "topic": None}):
            answer = await client.invoke(addr, request(RequestCode.QUERY_ASSIGNMENT, body=orjson.dumps(body)), 10)
            assert (answer.code, answer.remark) == (ResponseCode.SYSTEM_ERROR, "java.lang.NullPointerException")
        assert await assigned(client, addr, orjson.dumps({**named, "topic": ""})) is None
        no_topic = orjson.dumps({"consumerGroup": GROUP, "mode": "POP"})
        answer = await client.invoke(addr, request(RequestCode.SET_MESSAGE_REQUEST_MODE, body=no_topic), 10)
        assert (answer.code, answer.remark) == (ResponseCode.SYSTEM_ERROR, "java.lang.NullPointerException")
