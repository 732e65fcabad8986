"""Topic message types (RocketMQ 5's ``message.type`` attribute): the attribute text of UPDATE_AND_CREATE_TOPIC, the
type of a message, and on a real ``mqbroker --enable-proxy``: routes offer the topic's type, a SendMessage of another
type answers MESSAGE_PROPERTY_CONFLICT_WITH_TYPE (40014) and stores nothing, a topic without the attribute (every
4.x topic) takes every type, and the attribute survives a restart."""

from __future__ import annotations

import re
import time
from typing import Any

import grpc
import pytest
import trio
from click.testing import CliRunner
from rocketmq import ClientConfiguration, Credentials, Producer

from client import Admin
from client.errors import MQBrokerError
from client.mqadmin import main as mqadmin
from processors.topic_attributes import TopicAttributeError, TopicMessageType, alter_attributes, message_type_of
from proxy.pb import definition, service
from tests.proxy.cluster import GrpcCluster
from tests.proxy.official import make_message

pytestmark = pytest.mark.timeout(180)

MT = definition.MessageType


@pytest.mark.parametrize(
    ("create", "current", "text", "result"),
    [
        (True, {}, None, {}),
        (True, {}, "+message.type=FIFO", {"message.type": "FIFO"}),
        (True, {}, "+message.type=UNSPECIFIED", {"message.type": "UNSPECIFIED"}),  # topicMessageTypeSet has it
        (False, {"message.type": "FIFO"}, None, {"message.type": "FIFO"}),
        (False, {"message.type": "FIFO"}, "+message.type=DELAY", {"message.type": "DELAY"}),
        (False, {"message.type": "FIFO"}, "-message.type", {}),
    ],
)
def test_attribute_modifications_as_rocketmq_applies_them(
    create: bool, current: dict[str, str], text: str | None, result: dict[str, str]
) -> None:
    assert alter_attributes(create, current, text) == result


@pytest.mark.parametrize(
    ("create", "current", "text", "reason"),
    [
        (True, {}, "+message.type=MIXED", "MIXED message type is not supported."),
        (True, {}, "+message.type=BULK", "value is not in set"),
        (True, {}, "-message.type", "only add attribute is supported while creating topic"),
        (False, {}, "-message.type", "attempt to delete a nonexistent key: message.type"),
        (True, {}, "+queue.type=BatchCQ", "unsupported key: queue.type"),
        (True, {}, "message.type=FIFO", "add/alter attribute format is wrong: message.type"),
        (True, {}, "message.type", "delete attribute format is wrong: message.type"),
        (True, {}, "+message.type=FIFO,+message.type=FIFO", "key duplication: +message.type"),
        (
            False,
            {"message.type": "FIFO"},
            "+message.type=NORMAL,-message.type",
            "alter duplication key. key: message.type",
        ),
        # every key is checked (form, duplication) before any value or served key (AttributeUtil.validateAlter)
        (
            False,
            {"message.type": "FIFO"},
            "+message.type=BOGUS,-message.type",
            "alter duplication key. key: message.type",
        ),
        (False, {"message.type": "FIFO", "foo": "1"}, "+foo=1,-foo", "alter duplication key. key: foo"),
        (True, {}, "+message.type=BOGUS,+=1", "kv string format wrong."),
        (True, {}, "a+b=1", "kv string format wrong."),
    ],
)
def test_bad_attribute_modifications_are_refused_with_rocketmq_messages(
    create: bool, current: dict[str, str], text: str, reason: str
) -> None:
    with pytest.raises(TopicAttributeError, match=re.escape(reason)):
        alter_attributes(create, current, text)
    assert alter_attributes(True, {}, "+message.type=MIXED", mixed_allowed=True) == {"message.type": "MIXED"}


@pytest.mark.parametrize(
    ("properties", "kind"),
    [
        ({}, TopicMessageType.NORMAL),
        ({"__SHARDINGKEY": "g"}, TopicMessageType.FIFO),
        ({"TIMER_DELIVER_MS": "1"}, TopicMessageType.DELAY),
        ({"DELAY": "3", "__SHARDINGKEY": "g"}, TopicMessageType.DELAY),
        ({"TRAN_MSG": "true", "DELAY": "3"}, TopicMessageType.TRANSACTION),
        ({"TRAN_MSG": "false"}, TopicMessageType.NORMAL),
    ],
)
def test_a_messages_type_comes_from_its_properties(properties: dict[str, str], kind: TopicMessageType) -> None:
    assert message_type_of(properties) is kind


PREFIX = "/apache.rocketmq.v2.MessagingService/"
META = (("x-mq-client-id", "types@1@0@x"),)


def _raw_sends(endpoint: str) -> dict[str, Any]:
    """One raw SendMessage per (topic, message type); the status code of each."""
    out: dict[str, Any] = {}
    with grpc.insecure_channel(endpoint) as channel:
        call = channel.unary_unary(
            PREFIX + "SendMessage", request_serializer=service.SendMessageRequest.SerializeToString,
            response_deserializer=service.SendMessageResponse.FromString,
        )  # fmt: skip
        routes = channel.unary_unary(
            PREFIX + "QueryRoute", request_serializer=service.QueryRouteRequest.SerializeToString,
            response_deserializer=service.QueryRouteResponse.FromString,
        )  # fmt: skip
        for topic in ("TFifo", "TNormal", "TUntyped", "TDelay"):
            route = routes(service.QueryRouteRequest(topic=definition.Resource(name=topic)), timeout=5, metadata=META)
            out[f"route {topic}"] = sorted({t for q in route.message_queues for t in q.accept_message_types})
            for kind in ("NORMAL", "FIFO", "DELAY", "TRANSACTION"):
                msg = definition.Message(topic=definition.Resource(name=topic), body=b"typed")
                sp = msg.system_properties
                sp.message_id = f"01{topic}{kind}"
                sp.message_type = MT.Value(kind)
                if kind == "FIFO":
                    sp.message_group = "g1"
                if kind == "DELAY":
                    sp.delivery_timestamp.FromMilliseconds(int(time.time() * 1000) + 3_600_000)
                answer = call(service.SendMessageRequest(messages=[msg]), timeout=5, metadata=META)
                out[f"{topic} {kind}"] = (answer.status.code, answer.status.message)
    return out


def _official(endpoint: str) -> dict[str, Any]:
    producer = Producer(ClientConfiguration(endpoint, Credentials(), request_timeout=3), ("TFifo",))
    producer.startup()
    try:
        fifo = producer.send(make_message("TFifo", b"in-order", group="g2")).message_id
        try:
            producer.send(make_message("TFifo", b"normal"))
            normal = "sent"
        except Exception as exc:
            normal = str(exc)
    finally:
        producer.shutdown()
    return {"fifo": fifo, "normal": normal}


async def _stored(admin: Admin, topic: str) -> int:
    return sum(offset.max_offset for offset in (await admin.topic_status(topic)).values())


async def test_topic_types_on_routes_and_sends(grpc_cluster: GrpcCluster) -> None:
    async with Admin(grpc_cluster.namesrv_addr) as admin:
        argv = ["updateTopic", "-n", grpc_cluster.namesrv_addr, "-b", grpc_cluster.broker_addr, "-t", "TFifo"]
        argv += ["-r", "4", "-w", "4", "-a", "+message.type=FIFO"]
        cli = await trio.to_thread.run_sync(lambda: CliRunner().invoke(mqadmin, argv, catch_exceptions=False))
        assert cli.exit_code == 0 and "create topic to" in cli.output, cli.output
        await admin.create_topic("TNormal", attributes="+message.type=NORMAL")
        await admin.create_topic("TDelay", attributes="+message.type=FIFO")
        await admin.create_topic("TDelay", attributes="+message.type=DELAY")  # altered
        await admin.create_topic("TUntyped")
        await admin.create_topic("TNormal")  # an update without attributes keeps them
        with pytest.raises(MQBrokerError, match="MIXED message type is not supported"):
            await admin.create_topic("TMixed", attributes="+message.type=MIXED")
        with pytest.raises(MQBrokerError, match=r"unsupported key: queue\.type"):
            await admin.create_topic("TQueue", attributes="+queue.type=BatchCQ")
        assert "TMixed" not in await admin.topic_list() and "TQueue" not in await admin.topic_list()
        raw = await trio.to_thread.run_sync(_raw_sends, grpc_cluster.endpoint)
        official = await trio.to_thread.run_sync(_official, grpc_cluster.endpoint)
        stored = {topic: await _stored(admin, topic) for topic in ("TFifo", "TNormal", "TUntyped", "TDelay")}

    everything = sorted([MT.NORMAL, MT.FIFO, MT.DELAY, MT.TRANSACTION])
    assert raw.pop("route TFifo") == [MT.FIFO]
    assert raw.pop("route TNormal") == [MT.NORMAL]
    assert raw.pop("route TDelay") == [MT.DELAY]
    assert raw.pop("route TUntyped") == everything
    for key, (code, message) in raw.items():
        topic, kind = key.split()
        if topic == "TUntyped" or topic[1:].upper() == kind:
            assert code == 20000, (key, message)
        else:
            declared = topic[1:].upper()
            assert code == 40014, (key, message)
            assert message == (  # a ProxyException's message, as 5.3.3's GrpcProxyException wraps it
                "org.apache.rocketmq.proxy.common.ProxyException: "
                f"TopicMessageType validate failed, the expected type is {declared}, but actual type is {kind}"
            )
    assert official["fifo"]
    assert "current message type not match with queue accept message types" in official["normal"]
    # Typed topics stored only the sends of their type (TFifo: the raw one and the official client's). A delay message
    # waits in the timer and a transaction's half message in its own topic, so the untyped topic shows two.
    assert stored == {"TFifo": 2, "TNormal": 1, "TUntyped": 2, "TDelay": 0}


async def test_the_attribute_survives_a_restart(grpc_cluster: GrpcCluster, nursery: trio.Nursery) -> None:
    async with Admin(grpc_cluster.namesrv_addr) as admin:
        await admin.create_topic("TKept", attributes="+message.type=TRANSACTION")
    topics_json = grpc_cluster.data_dir / "store" / "config" / "topics.json"
    with trio.fail_after(30):  # the topic table is saved shortly after a change
        while '"message.type": "TRANSACTION"' not in (topics_json.read_text() if topics_json.exists() else ""):
            await trio.sleep(0.2)
    await grpc_cluster.kill_broker()
    await grpc_cluster.start_broker(nursery)
    topics = await trio.to_thread.run_sync(_route_types, grpc_cluster.endpoint, "TKept")
    assert topics == [MT.TRANSACTION]


def _route_types(endpoint: str, topic: str) -> list[int]:
    with grpc.insecure_channel(endpoint) as channel:
        routes = channel.unary_unary(
            PREFIX + "QueryRoute", request_serializer=service.QueryRouteRequest.SerializeToString,
            response_deserializer=service.QueryRouteResponse.FromString,
        )  # fmt: skip
        route = routes(service.QueryRouteRequest(topic=definition.Resource(name=topic)), timeout=5, metadata=META)
    return sorted({t for q in route.message_queues for t in q.accept_message_types})
