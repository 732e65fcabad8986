"""QueryRoute, QueryAssignment, Heartbeat, NotifyClientTermination and Telemetry Settings as RocketMQ 5.3.3's proxy
answers them (proxy/src/main/java/org/apache/rocketmq/proxy/grpc/v2/route/RouteActivity.java and
client/ClientActivity.java): queue permissions follow the topic's perm, system topics are ILLEGAL_TOPIC (a Settings
publishing one ends the stream, as does one subscribing with an illegal or system group or an expression FilterAPI
refuses), QueryAssignment is FORBIDDEN without a readable queue and names every read queue for an orderly group, and a
client without Settings is UNRECOGNIZED_CLIENT_TYPE. Found by reviews; each failed before. Over a real gRPC socket to
the in-process front door."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import attrs
import grpc
import pytest
import trio

from proxy.common import Code
from proxy.pb import definition, service
from remoting.codec.bodies.broker_metadata import SubscriptionGroupConfig, TopicConfig
from tests.proxy.grpc_front import META, PREFIX, front

pytestmark = pytest.mark.timeout(120)

PERM_READ = 4
PERM_WRITE = 2


def _route(topic: str) -> object:
    return service.QueryRouteRequest(topic=definition.Resource(name=topic))


def _assignment(topic: str, group: str) -> object:
    return service.QueryAssignmentRequest(topic=definition.Resource(name=topic), group=definition.Resource(name=group))


async def test_query_route_of_a_read_only_topic_offers_no_writable_queue(tmp_path: Path) -> None:
    # genMessageQueueFromQueueData: perm readable only -> every queue Permission.READ.
    async with front(tmp_path) as f:
        f.ctx.topics.update_topic(TopicConfig("RO", read_queue_nums=2, write_queue_nums=2, perm=PERM_READ))
        answer = await f.call("QueryRoute", _route("RO"), service.QueryRouteResponse)
        perms = [definition.Permission.Name(q.permission) for q in answer.message_queues]
        assert perms == ["READ", "READ"]


async def test_a_read_only_broker_routes_its_topics_read_only(tmp_path: Path) -> None:
    """With ``brokerPermission=4`` the name server's routes carry READ for every topic (registerBrokerAll); the
    proxy's own routes and assignments must too (found by a second review)."""
    async with front(tmp_path) as f:
        f.ctx.topics.update_topic(TopicConfig("RW", read_queue_nums=2, write_queue_nums=2))
        f.ctx.config = attrs.evolve(f.ctx.config, broker_permission=PERM_READ)
        answer = await f.call("QueryRoute", _route("RW"), service.QueryRouteResponse)
        assert [definition.Permission.Name(q.permission) for q in answer.message_queues] == ["READ", "READ"]
        assigned = await f.call("QueryAssignment", _assignment("RW", "G1"), service.QueryAssignmentResponse)
        assert [definition.Permission.Name(a.message_queue.permission) for a in assigned.assignments] == ["READ"]


async def test_query_route_of_a_system_topic_is_illegal_topic(tmp_path: Path) -> None:
    # RouteActivity.queryRoute: validateTopic -> ILLEGAL_TOPIC "cannot access system topic".
    async with front(tmp_path) as f:
        answer = await f.call("QueryRoute", _route("TBW102"), service.QueryRouteResponse)
        assert Code.Name(answer.status.code) == "ILLEGAL_TOPIC", answer.status.message


async def test_query_assignment_of_an_unreadable_topic_is_forbidden(tmp_path: Path) -> None:
    # queryAssignment: no queue data readable with readQueueNums > 0 -> FORBIDDEN "no readable queue".
    async with front(tmp_path) as f:
        f.ctx.topics.update_topic(TopicConfig("WO", read_queue_nums=2, write_queue_nums=2, perm=PERM_WRITE))
        answer = await f.call("QueryAssignment", _assignment("WO", "G1"), service.QueryAssignmentResponse)
        got = (
            Code.Name(answer.status.code),
            [definition.Permission.Name(a.message_queue.permission) for a in answer.assignments],
        )
        assert got == ("FORBIDDEN", []), got


async def test_query_assignment_of_an_orderly_group_names_every_readable_queue(tmp_path: Path) -> None:
    # queryAssignment: group consumeMessageOrderly -> one assignment per read queue, ids 0..readQueueNums-1.
    async with front(tmp_path) as f:
        f.ctx.topics.update_topic(TopicConfig("FT", read_queue_nums=3, write_queue_nums=3))
        f.ctx.groups.update(SubscriptionGroupConfig("FG", consume_message_orderly=True))
        answer = await f.call("QueryAssignment", _assignment("FT", "FG"), service.QueryAssignmentResponse)
        assert [a.message_queue.id for a in answer.assignments] == [0, 1, 2]


async def test_heartbeat_without_settings_is_unrecognized_client_type(tmp_path: Path) -> None:
    # ClientActivity.heartbeat: no client settings -> UNRECOGNIZED_CLIENT_TYPE "cannot find client settings".
    async with front(tmp_path) as f:
        answer = await f.call(
            "Heartbeat", service.HeartbeatRequest(client_type=definition.ClientType.PRODUCER), service.HeartbeatResponse
        )
        assert Code.Name(answer.status.code) == "UNRECOGNIZED_CLIENT_TYPE", answer.status.message


async def test_notify_termination_without_settings_is_unrecognized_client_type(tmp_path: Path) -> None:
    # ClientActivity.notifyClientTermination: no client settings -> UNRECOGNIZED_CLIENT_TYPE.
    async with front(tmp_path) as f:
        answer = await f.call(
            "NotifyClientTermination", service.NotifyClientTerminationRequest(), service.NotifyClientTerminationResponse
        )
        assert Code.Name(answer.status.code) == "UNRECOGNIZED_CLIENT_TYPE", answer.status.message


@contextlib.contextmanager
def _telemetry(endpoint: str, command: Any, metadata: Any) -> Iterator[Any]:
    """A fresh Telemetry stream sent ``command``: its replies, while its channel is open."""
    with grpc.insecure_channel(endpoint) as channel:
        stream = channel.stream_stream(
            PREFIX + "Telemetry",
            request_serializer=service.TelemetryCommand.SerializeToString,
            response_deserializer=service.TelemetryCommand.FromString,
        )
        yield stream(iter([command]), timeout=5, metadata=metadata)


def _first_telemetry_reply(endpoint: str, command: Any) -> Any:
    """The first command a fresh Telemetry stream answers ``command`` with (the stream then cancelled); raises the
    stream's ``grpc.RpcError`` when it ends instead."""
    with _telemetry(endpoint, command, META) as call:
        first = next(call)
        call.cancel()
        return first


def _telemetry_once(endpoint: str, command: Any) -> tuple[str, str]:
    """One command on a fresh Telemetry stream: ("reply", its status code name) or ("ended", the gRPC status name)."""
    try:
        return ("reply", Code.Name(_first_telemetry_reply(endpoint, command).status.code))
    except grpc.RpcError as err:
        return ("ended", err.code().name)


def _subscribing(group: str, expression: str, kind: Any = definition.FilterType.TAG) -> Any:
    command = service.TelemetryCommand()
    command.settings.client_type = definition.ClientType.SIMPLE_CONSUMER
    command.settings.subscription.group.name = group
    sub = command.settings.subscription.subscriptions.add()
    sub.topic.name = "SomeTopic"
    sub.expression.type = kind
    sub.expression.expression = expression
    return command


async def test_settings_publishing_a_system_topic_ends_the_stream_with_invalid_argument(tmp_path: Path) -> None:
    # processAndWriteClientSettings: validateTopic on every publishing topic -> GrpcProxyException(ILLEGAL_TOPIC),
    # processTelemetryException: a 4xxxx code -> the stream ends with INVALID_ARGUMENT; nothing is registered.
    async with front(tmp_path) as f:
        command = service.TelemetryCommand()
        command.settings.client_type = definition.ClientType.PRODUCER
        command.settings.publishing.topics.add(name="TBW102")
        got = await trio.to_thread.run_sync(_telemetry_once, f.endpoint, command)
        registered = [c.client_id for c in f.ctx.clients.producer_connections("TBW102")]
        assert (got, registered) == (("ended", "INVALID_ARGUMENT"), [])


@pytest.mark.parametrize("group", ["", "bad group!", "CID_RMQ_SYS_TRANS"])
async def test_settings_subscribing_with_an_illegal_or_system_group_end_the_stream(tmp_path: Path, group: str) -> None:
    """processAndWriteClientSettings: SUBSCRIPTION -> validateConsumerGroup (blank, illegal characters, a system
    group: ILLEGAL_CONSUMER_GROUP) -> the stream ends INVALID_ARGUMENT; no consumer is registered and no group created
    (the merged Settings read the group table only: LocalMetadataService.getSubscriptionGroupConfig): the table is
    as before, the system group's built-in config included."""
    async with front(tmp_path) as f:
        before = dict(f.ctx.groups.groups)
        got = await trio.to_thread.run_sync(_telemetry_once, f.endpoint, _subscribing(group, "*"))
        registered = f.ctx.clients.consumer_ids(group)
        unchanged = dict(f.ctx.groups.groups) == before
        assert (got, registered, unchanged) == (("ended", "INVALID_ARGUMENT"), [], True)


@pytest.mark.parametrize(
    ("expression", "kind"), [("||", definition.FilterType.TAG), ("", definition.FilterType.SQL)], ids=["tag", "sql"]
)
async def test_settings_with_an_expression_filterapi_refuses_end_the_stream(
    tmp_path: Path, expression: str, kind: Any
) -> None:
    """ClientActivity.buildSubscriptionData: FilterAPI.build failing ("subString split error" for a TAG expression
    without a tag, "Expression can't be null!" for an empty SQL92 one) -> ILLEGAL_FILTER_EXPRESSION -> the stream ends
    INVALID_ARGUMENT, nothing registered."""
    async with front(tmp_path) as f:
        got = await trio.to_thread.run_sync(_telemetry_once, f.endpoint, _subscribing("GBadExpr", expression, kind))
        assert (got, f.ctx.clients.consumer_ids("GBadExpr")) == (("ended", "INVALID_ARGUMENT"), [])


async def test_settings_with_an_unparsable_sql92_expression_are_accepted_as_rocketmq_does(tmp_path: Path) -> None:
    """FilterAPI.build does not parse a SQL92 expression, and the broker's ConsumerFilterManager.build only logs one
    it cannot compile: the Settings are answered OK and the consumer registered (its receives are refused then)."""
    async with front(tmp_path) as f:
        sql = _subscribing("GSql", "a >>>> (", definition.FilterType.SQL)
        got = await trio.to_thread.run_sync(_telemetry_once, f.endpoint, sql)
        assert (got, f.ctx.clients.consumer_ids("GSql")) == (("reply", "OK"), ["checks@1@0@x"])


async def test_query_assignment_neither_creates_a_group_nor_takes_an_illegal_name(tmp_path: Path) -> None:
    """RouteActivity.queryAssignment validates the group (ILLEGAL_CONSUMER_GROUP) and reads the group table only
    (LocalMetadataService.getSubscriptionGroupConfig); a lookup that auto-created it left any name in
    subscriptionGroup.json (found by a second review)."""
    async with front(tmp_path) as f:
        f.ctx.topics.update_topic(TopicConfig("RevTopic", read_queue_nums=2, write_queue_nums=2))
        for group, code in (("rev2 never subscribed!", "ILLEGAL_CONSUMER_GROUP"), ("NeverSubscribed", "OK")):
            req = service.QueryAssignmentRequest(
                topic=definition.Resource(name="RevTopic"), group=definition.Resource(name=group)
            )
            answer = await f.call("QueryAssignment", req, service.QueryAssignmentResponse)
            assert Code.Name(answer.status.code) == code
            assert f.ctx.groups.get(group) is None


async def test_illegal_topic_and_group_names_get_the_remarks_of_rocketmq_5s_validators(tmp_path: Path) -> None:
    """GrpcValidator.validateTopic / validateConsumerGroup (proxy/src/main/java/org/apache/rocketmq/proxy/grpc/v2/
    common/GrpcValidator.java) answer with the message of the 5.x client's Validators.checkTopic / checkGroup
    (client/src/main/java/org/apache/rocketmq/client/Validators.java): blank, then too long (the limit named), then
    illegal characters (the name quoted), which the 5.x clients raise to the application. The proxy answered the
    4.9.8 broker's remarks instead, and checked the characters before the length (found by a review)."""
    legal = "^[%|a-zA-Z0-9_-]+$"
    topics = [
        ("", "The specified topic is blank"),
        ("bad topic", f"The specified topic[bad topic] contains illegal characters, allowing only {legal}"),
        ("T" * 128, "The specified topic is longer than topic max length 127."),
        ("bad topic" * 20, "The specified topic is longer than topic max length 127."),
    ]
    groups = [
        ("bad group", f"the specified group[bad group] contains illegal characters, allowing only {legal}"),
        ("bad group" * 30, "the specified group is longer than group max length 255."),
    ]
    async with front(tmp_path) as f:
        f.ctx.topics.update_topic(TopicConfig("NamedT", read_queue_nums=1, write_queue_nums=1))
        got = []
        for topic, _ in topics:
            answer = await f.call("QueryRoute", _route(topic), service.QueryRouteResponse)
            got.append((Code.Name(answer.status.code), answer.status.message))
        for group, _ in groups:
            answer = await f.call("QueryAssignment", _assignment("NamedT", group), service.QueryAssignmentResponse)
            got.append((Code.Name(answer.status.code), answer.status.message))
        expected = [("ILLEGAL_TOPIC", remark) for _, remark in topics]
        assert got == expected + [("ILLEGAL_CONSUMER_GROUP", remark) for _, remark in groups]


def _telemetry_refusal(endpoint: str, command: Any) -> tuple[str, str]:
    """The gRPC status name and details a fresh Telemetry stream ends with after ``command``."""
    try:
        first = _first_telemetry_reply(endpoint, command)
    except grpc.RpcError as err:
        return (err.code().name, err.details() or "")
    return ("reply", Code.Name(first.status.code))


async def test_refused_settings_end_the_stream_with_client_activitys_description(tmp_path: Path) -> None:
    """ClientActivity.processTelemetryException (proxy/src/main/java/org/apache/rocketmq/proxy/grpc/v2/client/
    ClientActivity.java) ends the stream INVALID_ARGUMENT "process client telemetryCommand failed. <message>", and
    processAndWriteClientSettings a Settings without publishing or subscription INVALID_ARGUMENT "there is no
    publishing or subscription data in settings"; the 5.x clients log that description. Ours gave the bare message,
    and a text of ours for the latter (found by a review)."""
    neither = service.TelemetryCommand()
    neither.settings.client_type = definition.ClientType.PRODUCER
    system = service.TelemetryCommand()
    system.settings.client_type = definition.ClientType.PRODUCER
    system.settings.publishing.topics.add(name="TBW102")
    no_tag = _subscribing("GNoTag", "||")  # buildSubscriptionData: "expression format is not correct"
    async with front(tmp_path) as f:
        got = [await trio.to_thread.run_sync(_telemetry_refusal, f.endpoint, c) for c in (system, no_tag, neither)]
        assert got == [
            ("INVALID_ARGUMENT", "process client telemetryCommand failed. cannot access system topic"),
            ("INVALID_ARGUMENT", "process client telemetryCommand failed. expression format is not correct"),
            ("INVALID_ARGUMENT", "there is no publishing or subscription data in settings"),
        ]


@pytest.mark.parametrize("client_id", ["", " ", "   "])
async def test_a_blank_client_id_is_client_id_required(tmp_path: Path, client_id: str) -> None:
    """GrpcMessagingApplication.validateContext (proxy/src/main/java/org/apache/rocketmq/proxy/grpc/v2/
    GrpcMessagingApplication.java) refuses every request whose ``x-mq-client-id`` is blank (StringUtils.isBlank),
    with CLIENT_ID_REQUIRED "client id cannot be empty". Ours took a whitespace id as a client (found by a review)."""
    metadata = (("x-mq-client-id", client_id), ("x-mq-language", "PYTHON"))
    async with front(tmp_path) as f:
        f.ctx.topics.update_topic(TopicConfig("Blank", read_queue_nums=1, write_queue_nums=1))
        answer = await f.call("QueryRoute", _route("Blank"), service.QueryRouteResponse, metadata)
        beat = await f.call("Heartbeat", service.HeartbeatRequest(), service.HeartbeatResponse, metadata)
        for status in (answer.status, beat.status):
            assert (Code.Name(status.code), status.message) == ("CLIENT_ID_REQUIRED", "client id cannot be empty")
        assert not answer.message_queues


def _telemetry_replies(endpoint: str, command: Any, metadata: Any) -> list[tuple[str, str]]:
    """Every command a fresh Telemetry stream writes after ``command``, until it ends; raises ``grpc.RpcError``
    when it ends with an error."""
    with _telemetry(endpoint, command, metadata) as replies:
        return [(Code.Name(reply.status.code), reply.status.message) for reply in replies]


@pytest.mark.parametrize("client_id", ["", " "])
async def test_a_telemetry_stream_without_a_client_id_answers_its_first_command_with_the_status(
    tmp_path: Path, client_id: str
) -> None:
    """GrpcMessagingApplication.telemetry (proxy/src/main/java/org/apache/rocketmq/proxy/grpc/v2/
    GrpcMessagingApplication.java) runs validateContext on each command: a blank ``x-mq-client-id`` is answered with
    a command carrying CLIENT_ID_REQUIRED "client id cannot be empty", then the stream completes (ResponseWriter.write).
    Ours ended the stream INVALID_ARGUMENT as it opened."""
    metadata = (("x-mq-client-id", client_id), ("x-mq-language", "PYTHON"))
    command = service.TelemetryCommand()
    command.settings.client_type = definition.ClientType.PRODUCER
    command.settings.publishing.topics.add(name="Blank")
    async with front(tmp_path) as f:
        got = await trio.to_thread.run_sync(_telemetry_replies, f.endpoint, command, metadata)
        assert got == [("CLIENT_ID_REQUIRED", "client id cannot be empty")]


def topic_route_missing(topic: str) -> str:
    """The message of RocketMQ's MQClientException(TOPIC_NOT_EXIST, ...) for a topic without a route, the status
    message ResponseBuilder.buildStatus answers with TOPIC_NOT_FOUND (TopicRouteService.getCacheMessageQueueWrapper,
    client/.../exception/MQClientException.java, common/.../help/FAQUrl.java attachDefaultURL)."""
    return (
        f"CODE: 17  DESC: No topic route info in name server for the topic: {topic}\n"
        "For more information, please visit the url, https://rocketmq.apache.org/docs/bestPractice/06FAQ"
    )


async def test_an_unknown_topic_answers_the_route_services_not_found_message(tmp_path: Path) -> None:
    """QueryRoute and QueryAssignment of a topic no one knows: TOPIC_NOT_FOUND with the message of the route
    service's MQClientException, which the official clients raise to the application. Ours answered a text of its
    own (found by a third review)."""
    async with front(tmp_path, auto_create_topic_enable=False) as f:
        route = await f.call("QueryRoute", _route("Nowhere"), service.QueryRouteResponse)
        assigned = await f.call("QueryAssignment", _assignment("Nowhere", "G1"), service.QueryAssignmentResponse)
        got = [(Code.Name(a.status.code), a.status.message) for a in (route, assigned)]
        assert got == [("TOPIC_NOT_FOUND", topic_route_missing("Nowhere"))] * 2, got


async def test_settings_subscribing_as_no_consumer_type_end_the_stream_internal(tmp_path: Path) -> None:
    """processAndWriteClientSettings registers a subscribing Settings as a consumer of its client type, and
    ClientActivity.buildConsumeType throws IllegalArgumentException "Client type is not consumer, type: <name>" for
    a type neither SIMPLE_CONSUMER nor PUSH_CONSUMER: processTelemetryException ends the stream INTERNAL with it,
    nothing registered (the Settings are stored only after). Ours registered such a client as a simple consumer."""
    producer = _subscribing("GTyped", "*")
    producer.settings.client_type = definition.ClientType.PRODUCER
    untyped = _subscribing("GTyped", "*")
    untyped.settings.client_type = definition.ClientType.CLIENT_TYPE_UNSPECIFIED
    async with front(tmp_path) as f:
        got = [await trio.to_thread.run_sync(_telemetry_refusal, f.endpoint, c) for c in (producer, untyped)]
        prefix = "process client telemetryCommand failed. Client type is not consumer, type: "
        assert got == [("INTERNAL", prefix + "PRODUCER"), ("INTERNAL", prefix + "CLIENT_TYPE_UNSPECIFIED")]
        assert f.ctx.clients.consumer_ids("GTyped") == []
