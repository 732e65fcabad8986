"""5.x client sessions in the broker, in virtual time: Settings register producers and consumers in the broker's
client registry (what ``mqadmin`` lists) with their subscriptions as FilterAPI builds them (a later Settings replacing
them, a Heartbeat not), the merged producer
Settings carry the proxy's message type check, termination and the 120 s expiry remove them, and a transaction check
written to a 5.x client's channel becomes a recovery command on its Telemetry stream. The activity runs over the
embedded broker; requests are the generated protobuf messages the official client sends."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import orjson
import pytest
import trio

from broker.cli import build_config, build_proxy_config
from broker.embedded import EmbeddedCluster
from proxy.config import ProxyConfig
from proxy.messaging import MessagingActivity
from proxy.pb import definition, service
from proxy.startup import build_activity
from remoting.client import RemotingClient
from remoting.codec.codes import CURRENT_VERSION, RequestCode, ResponseCode
from remoting.codec.command import request
from remoting.codec.headers.transaction import CheckTransactionStateRequestHeader
from remoting.codec.message import MessageRecord, encode_record
from tests.semantics.helpers import create_topic

PEER = "ipv4:127.0.0.1:40000"


def md(client_id: str) -> dict[str, str]:
    return {"x-mq-client-id": client_id, "x-mq-language": "PYTHON", "x-rocketrio-peer": PEER}


def producer_settings(*topics: str) -> Any:
    command = service.TelemetryCommand()
    command.settings.client_type = definition.ClientType.PRODUCER
    for topic in topics:
        command.settings.publishing.topics.add(name=topic)
    return command


def consumer_settings(group: str, topic: str) -> Any:
    command = service.TelemetryCommand()
    command.settings.client_type = definition.ClientType.SIMPLE_CONSUMER
    command.settings.subscription.group.name = group
    sub = command.settings.subscription.subscriptions.add()
    sub.topic.name = topic
    sub.expression.expression = "TagA"
    return command


def activity_of(cluster: EmbeddedCluster) -> MessagingActivity:
    activity, _ = build_activity(cluster.controller, ProxyConfig())
    return activity


async def test_settings_register_clients_and_termination_removes_them(embedded_cluster: EmbeddedCluster) -> None:
    activity = activity_of(embedded_cluster)
    clients = embedded_cluster.controller.context.clients
    reply = activity.telemetry(producer_settings("T1", "T2"), md("p@1"))
    assert reply.status.code == definition.Code.OK and reply.settings.publishing.max_body_size == 4 << 20
    assert [c.client_id for c in clients.producer_connections("T1")] == ["p@1"]
    assert [c.client_id for c in clients.producer_connections("T2")] == ["p@1"]
    reply = activity.telemetry(consumer_settings("G1", "T1"), md("c@1"))
    assert reply.settings.backoff_policy.max_attempts == 17 and not reply.settings.subscription.fifo
    assert clients.consumer_ids("G1") == ["c@1"]
    group = clients.consumer_group("G1")
    assert group is not None and group.subscriptions["T1"].sub_string == "TagA"
    stranger = activity.heartbeat(service.HeartbeatRequest(), md("stranger@9"))  # no Settings: ClientActivity refuses
    assert stranger.status.code == definition.Code.UNRECOGNIZED_CLIENT_TYPE
    activity.notify_termination(_termination("G1"), md("c@1"))  # a consumer names its group
    assert clients.consumer_ids("G1") == []
    assert "c@1" not in activity.sessions.sessions


async def test_settings_subscriptions_are_registered_as_filterapi_builds_them(
    embedded_cluster: EmbeddedCluster,
) -> None:
    """ClientActivity.buildSubscriptionData: FilterAPI.build(topic, expression, type): a TAG expression is registered
    with its tagsSet and codeSet, a SQL92 one with expressionType SQL92 (what ``mqadmin consumerConnection`` shows,
    and what a pull without the subscription flag filters with)."""
    command = consumer_settings("GSubs", "TagTopic")
    command.settings.subscription.subscriptions[0].expression.expression = "TagA||TagB"
    sql = command.settings.subscription.subscriptions.add()
    sql.topic.name = "SqlTopic"
    sql.expression.type = definition.FilterType.SQL
    sql.expression.expression = "a > 1"
    reply = activity_of(embedded_cluster).telemetry(command, md("subs@1"))
    assert reply.status.code == definition.Code.OK
    clients = embedded_cluster.controller.context.clients
    tags, by_sql = clients.find_subscription("GSubs", "TagTopic"), clients.find_subscription("GSubs", "SqlTopic")
    got = (tags.expression_type, sorted(tags.tags_set), len(tags.code_set), by_sql.expression_type, by_sql.sub_string)
    assert got == ("TAG", ["TagA", "TagB"], 2, "SQL92", "a > 1"), got


async def test_settings_changing_a_subscription_update_the_registered_one(embedded_cluster: EmbeddedCluster) -> None:
    """FilterAPI.build returns a new SubscriptionData, whose subVersion is System.currentTimeMillis(); a Settings
    registers with updateSubscription and ConsumerGroupInfo.updateSubscription replaces a topic's subscription only
    for a larger subVersion. So a Settings changing the expression (PushConsumer.subscribe with a new one, another
    client of the group) is what consumerConnection shows, even within the same millisecond; built with subVersion 0,
    the first subscription of a topic stayed for ever."""
    activity = activity_of(embedded_cluster)
    assert activity.telemetry(consumer_settings("GChange", "ChangeT"), md("chg@1")).status.code == definition.Code.OK
    changed = _sql_settings("GChange", "ChangeT", "a > 1")
    assert activity.telemetry(changed, md("chg@1")).status.code == definition.Code.OK
    registered = embedded_cluster.controller.context.clients.find_subscription("GChange", "ChangeT")
    assert registered is not None and (registered.expression_type, registered.sub_string) == ("SQL92", "a > 1")


async def test_a_heartbeat_leaves_the_subscription_the_latest_settings_registered(
    embedded_cluster: EmbeddedCluster,
) -> None:
    """ClientActivity.heartbeat registers the consumer with updateSubscription false: the group keeps the
    subscription of the latest Settings (here another client's), whichever client of the group heartbeats after."""
    activity = activity_of(embedded_cluster)
    assert activity.telemetry(consumer_settings("GBeat", "BeatT"), md("first@1")).status.code == definition.Code.OK
    assert (
        activity.telemetry(_sql_settings("GBeat", "BeatT", "b = 2"), md("second@1")).status.code == definition.Code.OK
    )
    request = service.HeartbeatRequest(client_type=definition.ClientType.SIMPLE_CONSUMER)
    request.group.name = "GBeat"
    assert activity.heartbeat(request, md("first@1")).status.code == definition.Code.OK
    registered = embedded_cluster.controller.context.clients.find_subscription("GBeat", "BeatT")
    assert registered is not None and registered.sub_string == "b = 2"


def _sql_settings(group: str, topic: str, expression: str) -> Any:
    command = consumer_settings(group, topic)
    command.settings.subscription.subscriptions[0].expression.type = definition.FilterType.SQL
    command.settings.subscription.subscriptions[0].expression.expression = expression
    return command


async def test_producer_settings_carry_the_proxys_message_type_check_setting(embedded_cluster: EmbeddedCluster) -> None:
    """GrpcClientSettingsManager.mergeProducerData: publishing.validate_message_type =
    ProxyConfig.enableTopicMessageTypeCheck; with the check off, the official clients must not refuse before sending
    a message whose type the route's queues do not list."""
    for check in (True, False):
        activity, _ = build_activity(embedded_cluster.controller, ProxyConfig(enable_topic_message_type_check=check))
        reply = activity.telemetry(producer_settings("AnyTopic"), md("p@9"))
        assert (reply.status.code, reply.settings.publishing.validate_message_type) == (definition.Code.OK, check)


async def test_silent_clients_expire_after_120_s_and_their_sessions_go(
    embedded_cluster: EmbeddedCluster, autojump_clock: trio.testing.MockClock
) -> None:
    activity = activity_of(embedded_cluster)
    clients = embedded_cluster.controller.context.clients
    activity.telemetry(consumer_settings("G2", "T1"), md("c@2"))
    await trio.sleep(60)
    assert activity.heartbeat(_consumer_heartbeat("G2"), md("c@2")).status.code == definition.Code.OK
    await trio.sleep(100)
    assert clients.consumer_ids("G2") == ["c@2"]  # the heartbeat at 60 s kept it
    await trio.sleep(100)
    assert clients.consumer_ids("G2") == []
    activity.sessions.session("newcomer@1")
    assert set(activity.sessions.sessions) == {"newcomer@1"}


async def test_a_transaction_check_becomes_a_recovery_command_on_telemetry(embedded_cluster: EmbeddedCluster) -> None:
    await create_topic(embedded_cluster, "TxT")
    activity = activity_of(embedded_cluster)
    pushed: list[Any] = []
    activity.telemetry_opened(md("p@3"), pushed.append)
    activity.telemetry(producer_settings("TxT"), md("p@3"))
    [channel] = embedded_cluster.controller.context.clients.producer_connections("TxT")
    half = MessageRecord("TxT", b"half body", properties="UNIQ_KEY\x01ABC\x02TAGS\x01tx\x02TRAN_MSG\x01true")
    header = CheckTransactionStateRequestHeader(
        tran_state_table_offset=7, commit_log_offset=4096, msg_id="ABC", transaction_id="ABC", offset_msg_id="X"
    )
    body = encode_record(half, 7, 4096, 1)
    await channel.connection.invoke_oneway(request(RequestCode.CHECK_TRANSACTION_STATE, header.to_ext_fields(), body))
    [command] = pushed
    recover = command.recover_orphaned_transaction_command
    assert recover.transaction_id == "ABC"
    message = recover.message
    assert (message.topic.name, message.body, message.system_properties.message_id) == ("TxT", b"half body", "ABC")
    assert message.system_properties.message_type == definition.MessageType.TRANSACTION
    assert activity.producing.transactions.by_key[("TxT", "ABC")][-1][:2] == (4096, 7)


async def test_the_settings_answered_to_clients_follow_rocketmqs_proxy_config_keys(
    embedded_cluster: EmbeddedCluster, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """GrpcClientSettingsManager.mergeProducerData / mergeSubscriptionData answer what ProxyConfig says
    (proxy/src/main/java/org/apache/rocketmq/proxy/config/ProxyConfig.java): ``grpcClientProducerMaxAttempts``,
    ``grpcClientProducerBackoffInitialMillis``, ``...BackoffMaxMillis``, ``...BackoffMultiplier`` for producers and
    ``grpcClientConsumerLongPollingBatchSize`` for consumers. A broker file with RocketMQ's names was ignored: the
    producer keys did not exist and the batch size was read under a name RocketMQ does not have (found by a review)."""
    conf = tmp_path / "broker.conf"
    conf.write_text(
        "grpcClientProducerMaxAttempts=5\ngrpcClientProducerBackoffInitialMillis=20\n"
        "grpcClientProducerBackoffMaxMillis=3000\ngrpcClientProducerBackoffMultiplier=3\n"
        "grpcClientConsumerLongPollingBatchSize=16\n"
    )
    build_config(str(conf), [], None)
    assert "grpcClient" not in capsys.readouterr().err  # the broker knows them
    activity, _ = build_activity(embedded_cluster.controller, build_proxy_config(str(conf), [], enable=True))
    policy = activity.telemetry(producer_settings("AnyTopic"), md("p@7")).settings.backoff_policy
    backoff = policy.exponential_backoff
    got = (policy.max_attempts, backoff.initial.ToMilliseconds(), backoff.max.ToMilliseconds(), backoff.multiplier)
    batch = activity.telemetry(consumer_settings("GBatch", "T1"), md("c@7")).settings.subscription.receive_batch_size
    assert (got, batch) == ((5, 20, 3000, 3.0), 16)


def _consumer_heartbeat(group: str) -> Any:
    request = service.HeartbeatRequest(client_type=definition.ClientType.SIMPLE_CONSUMER)
    request.group.name = group
    return request


@pytest.mark.parametrize("group", ["", "CID_RMQ_SYS_TRANS"], ids=["blank", "system"])
async def test_a_consumer_heartbeat_without_a_legal_group_is_illegal_consumer_group(
    embedded_cluster: EmbeddedCluster, group: str
) -> None:
    """ClientActivity.heartbeat checks a consumer's ``request.group`` (validateConsumerGroup: blank, illegal or
    system -> ILLEGAL_CONSUMER_GROUP). Any group was answered OK (found by a review)."""
    activity = activity_of(embedded_cluster)
    assert activity.telemetry(consumer_settings("GLegal", "T1"), md("c@5")).status.code == definition.Code.OK
    answer = activity.guarded_sync(activity.heartbeat, service.HeartbeatResponse, _consumer_heartbeat(group), md("c@5"))
    assert definition.Code.Name(answer.status.code) == "ILLEGAL_CONSUMER_GROUP", answer.status


async def test_a_consumer_heartbeat_registers_the_client_under_the_requests_group(
    embedded_cluster: EmbeddedCluster,
) -> None:
    """ClientActivity.heartbeat registers a consumer under ``request.group`` with its Settings' subscriptions (only
    the Settings' group was ever registered, whatever group the heartbeat named; found by a review)."""
    activity = activity_of(embedded_cluster)
    assert activity.telemetry(consumer_settings("GFirst", "T1"), md("c@6")).status.code == definition.Code.OK
    assert activity.heartbeat(_consumer_heartbeat("GSecond"), md("c@6")).status.code == definition.Code.OK
    clients = embedded_cluster.controller.context.clients
    assert (clients.consumer_ids("GFirst"), clients.consumer_ids("GSecond")) == (["c@6"], ["c@6"])


async def test_a_heartbeat_of_a_client_neither_producer_nor_consumer_is_unrecognized_client_type(
    embedded_cluster: EmbeddedCluster,
) -> None:
    """ClientActivity.heartbeat switches on the Settings' client type: neither PRODUCER nor PUSH_CONSUMER nor
    SIMPLE_CONSUMER is UNRECOGNIZED_CLIENT_TYPE with the type's Java enum name, ``UNRECOGNIZED`` for a number the
    proto does not name (Telemetry took the Settings by their publishing, registering a producer). It was answered
    OK (found by a review), and an unnamed type had its number as the message."""
    activity = activity_of(embedded_cluster)
    got = []
    for client_id, kind in (("c@7", definition.ClientType.CLIENT_TYPE_UNSPECIFIED), ("c@17", 99)):
        command = producer_settings("T1")
        command.settings.client_type = kind
        assert activity.telemetry(command, md(client_id)).status.code == definition.Code.OK
        answer = activity.heartbeat(_consumer_heartbeat("GUntyped"), md(client_id))
        got.append((definition.Code.Name(answer.status.code), answer.status.message))
    unrecognized = definition.Code.Name(definition.Code.UNRECOGNIZED_CLIENT_TYPE)
    assert got == [(unrecognized, "CLIENT_TYPE_UNSPECIFIED"), (unrecognized, "UNRECOGNIZED")]


def _termination(group: str) -> Any:
    request = service.NotifyClientTerminationRequest()
    request.group.name = group
    return request


@pytest.mark.parametrize("group", ["", "CID_RMQ_SYS_TRANS"], ids=["blank", "system"])
async def test_a_consumer_termination_without_a_legal_group_is_illegal_consumer_group(
    embedded_cluster: EmbeddedCluster, group: str
) -> None:
    """ClientActivity.notifyClientTermination checks a consumer's ``request.group`` (validateConsumerGroup: blank,
    illegal or system -> ILLEGAL_CONSUMER_GROUP) before it unregisters anything, as Heartbeat does. Any group was
    answered OK and the consumer unregistered (found by a review)."""
    activity = activity_of(embedded_cluster)
    assert activity.telemetry(consumer_settings("GStay", "T1"), md("c@8")).status.code == definition.Code.OK
    answer = activity.guarded_sync(activity.notify_termination, service.NotifyClientTerminationResponse,
                                   _termination(group), md("c@8"))  # fmt: skip
    clients = embedded_cluster.controller.context.clients
    assert (definition.Code.Name(answer.status.code), clients.consumer_ids("GStay")) == (
        "ILLEGAL_CONSUMER_GROUP",
        ["c@8"],
    ), answer.status


async def test_a_termination_of_a_client_neither_producer_nor_consumer_is_unrecognized_client_type(
    embedded_cluster: EmbeddedCluster,
) -> None:
    """ClientActivity.notifyClientTermination switches on the Settings' client type: neither PRODUCER nor
    PUSH_CONSUMER nor SIMPLE_CONSUMER is UNRECOGNIZED_CLIENT_TYPE with the type's name. It was answered OK (found by
    a review)."""
    activity = activity_of(embedded_cluster)
    command = producer_settings("T1")  # a subscribing Settings of this type is refused (buildConsumeType)
    command.settings.client_type = definition.ClientType.CLIENT_TYPE_UNSPECIFIED
    assert activity.telemetry(command, md("c@9")).status.code == definition.Code.OK
    answer = activity.notify_termination(_termination("GUntypedEnd"), md("c@9"))
    got = (definition.Code.Name(answer.status.code), answer.status.message)
    assert got == ("UNRECOGNIZED_CLIENT_TYPE", "CLIENT_TYPE_UNSPECIFIED"), got


EXPONENTIAL_POLICY = {"type": "EXPONENTIAL", "exponentialRetryPolicy": {"initial": 2000, "max": 60000, "multiplier": 3}}
CUSTOMIZED_POLICY = {"type": "CUSTOMIZED", "customizedRetryPolicy": {"next": [1000, 2000, 4000]}}


async def test_a_groups_retry_policy_is_stored_and_reported_in_its_consumers_settings(
    embedded_cluster: EmbeddedCluster,
) -> None:
    """RocketMQ 5.3.3's SubscriptionGroupConfig has a ``groupRetryPolicy`` (EXPONENTIAL or CUSTOMIZED) that
    UPDATE_AND_CREATE_SUBSCRIPTIONGROUP sets and subscriptionGroup.json keeps; GrpcClientSettingsManager
    .mergeSubscriptionData answers it as the Settings' backoff policy (exponential: initial, max and multiplier;
    customized: its ``next`` delays). It was dropped, every group answered the default customized table."""
    async with RemotingClient() as client:
        for group, policy in (("GExp", EXPONENTIAL_POLICY), ("GCustom", CUSTOMIZED_POLICY)):
            body = orjson.dumps({"groupName": group, "retryMaxTimes": 5, "groupRetryPolicy": policy})
            cmd = request(RequestCode.UPDATE_AND_CREATE_SUBSCRIPTIONGROUP, {}, body)
            answer = await client.invoke(embedded_cluster.broker_addr, cmd, 5)
            assert answer.code == ResponseCode.SUCCESS, answer.remark
    groups = embedded_cluster.controller.context.groups
    for group, policy in (("GExp", EXPONENTIAL_POLICY), ("GCustom", CUSTOMIZED_POLICY)):
        config = groups.get(group)
        assert config is not None and config.to_json()["groupRetryPolicy"] == policy
    activity = activity_of(embedded_cluster)
    backoff = activity.telemetry(consumer_settings("GExp", "T1"), md("c@exp")).settings.backoff_policy
    assert backoff.max_attempts == 6 and backoff.WhichOneof("strategy") == "exponential_backoff"
    exponential = backoff.exponential_backoff
    assert (exponential.initial.ToMilliseconds(), exponential.max.ToMilliseconds(), exponential.multiplier) == (
        2000,
        60000,
        3,
    )
    backoff = activity.telemetry(consumer_settings("GCustom", "T1"), md("c@custom")).settings.backoff_policy
    assert backoff.WhichOneof("strategy") == "customized_backoff"
    assert [d.ToMilliseconds() for d in backoff.customized_backoff.next] == [1000, 2000, 4000]


async def test_a_consumer_termination_unregisters_it_from_the_requests_group_only(
    embedded_cluster: EmbeddedCluster,
) -> None:
    """ClientActivity.notifyClientTermination unregisters a push or simple consumer from ``request.group`` alone
    (messagingProcessor.unRegisterConsumer(ctx, consumerGroup, ...)); a group its Heartbeat also named keeps it until
    its registration expires. Ours unregistered the client from every group it was in, and from every producer
    group too."""
    activity = activity_of(embedded_cluster)
    clients = embedded_cluster.controller.context.clients
    assert activity.telemetry(consumer_settings("GEndOwn", "T1"), md("c@5")).status.code == definition.Code.OK
    assert activity.heartbeat(_consumer_heartbeat("GEndOther"), md("c@5")).status.code == definition.Code.OK
    assert (clients.consumer_ids("GEndOwn"), clients.consumer_ids("GEndOther")) == (["c@5"], ["c@5"])
    answer = activity.notify_termination(_termination("GEndOwn"), md("c@5"))
    assert answer.status.code == definition.Code.OK
    assert (clients.consumer_ids("GEndOwn"), clients.consumer_ids("GEndOther")) == ([], ["c@5"])


async def test_a_producer_termination_unregisters_its_topics_producer_groups(
    embedded_cluster: EmbeddedCluster,
) -> None:
    """ClientActivity.notifyClientTermination unregisters a producer from its Settings' topics with
    unRegisterProducer, and ProducerManager.unregisterProducer drops a group it leaves empty: ``mqadmin
    producerConnection`` then answers "the producer group[T] not exist", as for a group never registered. Ours
    closed the client's channel, which leaves the emptied groups (as a closed connection does in RocketMQ). (Java's
    loop takes the channel out of its channel manager on the first topic, so only that one is unregistered and the
    rest wait for the expiry; ours unregisters each, which is what the loop is for.)"""
    activity = activity_of(embedded_cluster)
    clients = embedded_cluster.controller.context.clients
    assert activity.telemetry(producer_settings("TEndA", "TEndB"), md("p@5")).status.code == definition.Code.OK
    assert clients.has_producer_group("TEndA") and clients.has_producer_group("TEndB")
    answer = activity.notify_termination(service.NotifyClientTerminationRequest(), md("p@5"))
    assert answer.status.code == definition.Code.OK
    assert not clients.has_producer_group("TEndA") and not clients.has_producer_group("TEndB")


@pytest.mark.parametrize(
    ("conf", "expected"),
    [
        ("", (False, [])),
        ("metricCollectorMode=ON\nmetricCollectorAddress=10.0.0.7:4317\n", (True, [("10.0.0.7", 4317)])),
        ("metricCollectorMode=proxy\n", (True, [("proxy.example", 8081)])),
    ],
    ids=["off", "on", "proxy"],
)
async def test_the_metric_settings_answered_follow_the_metric_collector_mode(
    embedded_cluster: EmbeddedCluster, tmp_path: Path, conf: str, expected: tuple[bool, list[tuple[str, int]]]
) -> None:
    """GrpcClientSettingsManager.mergeMetric replaces the client's ``metric`` with what ProxyConfig's
    ``metricCollectorMode`` says (proxy/src/main/java/org/apache/rocketmq/proxy/config/MetricCollectorMode.java, its
    name in any case): off (the default) ``on=false`` with no endpoints, on ``on=true`` at ``metricCollectorAddress``
    (IPv4), proxy ``on=true`` at the client's access point. The client's endpoints were echoed back with ``on=false``
    and the two keys were unknown (found by a review)."""
    path = tmp_path / "broker.conf"
    path.write_text(conf)
    activity, _ = build_activity(embedded_cluster.controller, build_proxy_config(str(path), [], enable=True))
    answers = []
    for command in (producer_settings("AnyTopic"), consumer_settings("GMetric", "T1")):
        command.settings.metric.on = True
        command.settings.metric.endpoints.addresses.add(host="collector.client", port=9999)
        command.settings.access_point.scheme = definition.AddressScheme.DOMAIN_NAME
        command.settings.access_point.addresses.add(host="proxy.example", port=8081)
        metric = activity.telemetry(command, md("m@1")).settings.metric
        answers.append((metric.on, [(address.host, address.port) for address in metric.endpoints.addresses]))
    assert answers == [expected, expected]


@pytest.mark.parametrize(
    ("sent", "registered"),
    [("5.0.7", CURRENT_VERSION), ("", CURRENT_VERSION), ("v5_0_5", 423), ("V4_9_8_SNAPSHOT", 408)],
    ids=["release-number", "none", "enum-name", "snapshot-name"],
)
async def test_a_5x_clients_channel_is_registered_with_the_version_java_parses(
    embedded_cluster: EmbeddedCluster, sent: str, registered: int
) -> None:
    """ClientActivity.registerProducer / registerConsumer stamp the channel with parseClientVersion of
    x-mq-client-version: the ordinal of the MQVersion.Version its upper-cased value names, else the proxy's own
    CURRENT_VERSION (what ``mqadmin consumerConnection`` / ``producerConnection`` print). Ours registered 0, printed
    as a 3.x version."""
    activity = activity_of(embedded_cluster)
    clients = embedded_cluster.controller.context.clients
    headers = {**md("ver@1"), "x-mq-client-version": sent}
    assert activity.telemetry(consumer_settings("GVersion", "T1"), headers).status.code == definition.Code.OK
    producer_headers = {**headers, "x-mq-client-id": "ver@2"}
    assert activity.telemetry(producer_settings("TVersion"), producer_headers).status.code == definition.Code.OK
    consumer = clients.find_consumer_channel("GVersion", "ver@1")
    [producer] = clients.producer_connections("TVersion")
    assert consumer is not None and (consumer.version, producer.version) == (registered, registered)


async def test_a_consumer_termination_notifies_the_rest_of_its_group_of_nothing(
    embedded_cluster: EmbeddedCluster, autojump_clock: trio.testing.MockClock
) -> None:
    """ClientProcessor.unRegisterConsumer calls ConsumerManager.unregisterConsumer with
    isNotifyConsumerIdsChangedEnable false (proxy/src/main/java/org/apache/rocketmq/proxy/processor/
    ClientProcessor.java), as its registerConsumer does: a 5.x client leaving sends the group's other members no
    NOTIFY_CONSUMER_IDS_CHANGED. Ours notified them."""
    activity = activity_of(embedded_cluster)
    clients = embedded_cluster.controller.context.clients
    activity.telemetry_opened(md("stay@1"), lambda command: None)  # writable: a notification would reach it
    for client_id in ("stay@1", "leave@1"):
        assert activity.telemetry(consumer_settings("GLeave", "T1"), md(client_id)).status.code == definition.Code.OK
    await trio.sleep(1)
    sent = clients.notifications_sent
    assert activity.notify_termination(_termination("GLeave"), md("leave@1")).status.code == definition.Code.OK
    await trio.sleep(1)
    assert (clients.consumer_ids("GLeave"), clients.notifications_sent) == (["stay@1"], sent)
