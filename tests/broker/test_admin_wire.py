"""Admin requests over real sockets against the embedded cluster, through our RemotingClient."""

from __future__ import annotations

from collections.abc import AsyncIterator

import orjson
import pytest
import trio

from broker.embedded import EmbeddedCluster
from remoting.client import RemotingClient
from remoting.codec.bodies import (
    ConsumerData,
    HeartbeatData,
    KVTable,
    MessageQueue,
    ProducerData,
    SubscriptionData,
    TopicConfigSerializeWrapper,
    TopicList,
    TopicRouteData,
)
from remoting.codec.bodies.admin import (
    ConsumerConnection,
    ConsumeStats,
    ProducerConnection,
    TopicStatsTable,
    loads_fastjson,
)
from remoting.codec.codes import RequestCode, ResponseCode
from remoting.codec.command import RemotingCommand, request
from remoting.codec.headers.pull import PullMessageRequestHeader
from remoting.codec.message import MessageRecord
from remoting.processor import RequestContext
from store.metadata_files import SubscriptionGroupConfig
from tests.broker.helpers import create_topic_request, wait_for_route


@pytest.fixture
async def client() -> AsyncIterator[RemotingClient]:
    async with RemotingClient() as c:
        yield c


async def admin(client: RemotingClient, cluster: EmbeddedCluster, cmd: RemotingCommand) -> RemotingCommand:
    return await client.invoke(cluster.broker_addr, cmd, 5)


async def test_created_topic_is_stored_and_routed_by_the_name_server(
    embedded_cluster: EmbeddedCluster, client: RemotingClient
) -> None:
    answer = await admin(client, embedded_cluster, create_topic_request("AdminTopic", queues=3, order=True))
    assert answer.code == ResponseCode.SUCCESS
    tc = embedded_cluster.controller.context.topics.get("AdminTopic")
    assert tc is not None and (tc.read_queue_nums, tc.write_queue_nums, tc.perm, tc.order) == (3, 3, 6, True)
    route = TopicRouteData.decode(await wait_for_route(client, embedded_cluster, "AdminTopic"))
    assert [(q.broker_name, q.read_queue_nums, q.perm) for q in route.queue_datas] == [("broker-a", 3, 6)]
    assert route.broker_datas[0].broker_addrs == {0: embedded_cluster.broker_addr}

    all_topics = await admin(client, embedded_cluster, request(RequestCode.GET_ALL_TOPIC_CONFIG))
    wrapper = TopicConfigSerializeWrapper.decode(all_topics.body)
    assert "AdminTopic" in wrapper.topic_config_table and "TBW102" in wrapper.topic_config_table
    assert wrapper.data_version == embedded_cluster.controller.context.topics.data_version

    deleted = await admin(
        client, embedded_cluster, request(RequestCode.DELETE_TOPIC_IN_BROKER, {"topic": "AdminTopic"})
    )
    assert deleted.code == ResponseCode.SUCCESS
    assert embedded_cluster.controller.context.topics.get("AdminTopic") is None


@pytest.mark.parametrize(
    ("topic", "remark"),
    [
        ("bad topic!", "contains illegal characters"),
        ("x" * 128, "longer than topic max length"),
        ("SCHEDULE_TOPIC_XXXX", "conflict with system topic"),
        ("DefaultCluster", "conflict with system topic"),
        ("DefaultCluster_REPLY_TOPIC", "conflict with system topic"),
    ],
)
async def test_invalid_and_system_topics_are_refused(
    embedded_cluster: EmbeddedCluster, client: RemotingClient, topic: str, remark: str
) -> None:
    answer = await admin(client, embedded_cluster, create_topic_request(topic))
    assert answer.code == ResponseCode.SYSTEM_ERROR
    assert answer.remark is not None and remark in answer.remark


@pytest.mark.parametrize("value", ["NORMAL", "BOGUS"])
async def test_an_attribute_both_altered_and_deleted_in_one_update_is_refused(
    embedded_cluster: EmbeddedCluster, client: RemotingClient, value: str
) -> None:
    """``+message.type=NORMAL,-message.type`` names ``message.type`` twice: RocketMQ 5's
    AttributeUtil.alterCurrentAttributes (its duplicationCheck on the real key) refuses it, so UPDATE_AND_CREATE_TOPIC
    answers SYSTEM_ERROR with its message and the FIFO topic keeps its type. The duplication is named even beside a
    value out of the set (``BOGUS``): every key is checked before any value."""

    def create(attributes: str) -> RemotingCommand:
        cmd = create_topic_request("AttrTopic", queues=1)
        return request(RequestCode.UPDATE_AND_CREATE_TOPIC, {**cmd.ext_fields, "attributes": attributes})

    assert (await admin(client, embedded_cluster, create("+message.type=FIFO"))).code == ResponseCode.SUCCESS
    answer = await admin(client, embedded_cluster, create(f"+message.type={value},-message.type"))
    assert (answer.code, answer.remark) == (ResponseCode.SYSTEM_ERROR, "alter duplication key. key: message.type")
    config = embedded_cluster.controller.context.topics.get("AttrTopic")
    assert config is not None and config.attribute("message.type") == "FIFO", config


async def test_a_mixed_topic_is_refused_as_an_invalid_parameter(
    embedded_cluster: EmbeddedCluster, client: RemotingClient
) -> None:
    """Without ``enableMixedMessageType``, RocketMQ 5's AdminBrokerProcessor.updateAndCreateTopic answers
    ``+message.type=MIXED`` with INVALID_PARAMETER (29), not SYSTEM_ERROR, and writes nothing; other attribute
    refusals stay SYSTEM_ERROR (its catch of AttributeUtil's RuntimeException)."""
    cmd = create_topic_request("MixedTopic", queues=1)
    answer = await admin(
        client,
        embedded_cluster,
        request(RequestCode.UPDATE_AND_CREATE_TOPIC, {**cmd.ext_fields, "attributes": "+message.type=MIXED"}),
    )
    assert (answer.code, answer.remark) == (29, "MIXED message type is not supported.")
    assert embedded_cluster.controller.context.topics.get("MixedTopic") is None
    answer = await admin(
        client,
        embedded_cluster,
        request(RequestCode.UPDATE_AND_CREATE_TOPIC, {**cmd.ext_fields, "attributes": "+message.type=ODD"}),
    )
    assert answer.code == ResponseCode.SYSTEM_ERROR


async def test_system_topics_cannot_be_deleted_and_missing_headers_are_errors(
    embedded_cluster: EmbeddedCluster, client: RemotingClient
) -> None:
    answer = await admin(client, embedded_cluster, request(RequestCode.DELETE_TOPIC_IN_BROKER, {"topic": "TBW102"}))
    assert answer.code == ResponseCode.SYSTEM_ERROR
    assert embedded_cluster.controller.context.topics.get("TBW102") is not None
    missing = await admin(client, embedded_cluster, request(RequestCode.UPDATE_AND_CREATE_TOPIC, {"topic": "T"}))
    assert missing.code == ResponseCode.SYSTEM_ERROR
    unknown = await admin(client, embedded_cluster, request(9999))
    assert unknown.code == ResponseCode.REQUEST_CODE_NOT_SUPPORTED


async def test_subscription_groups_are_created_listed_and_deleted_with_their_offsets(
    embedded_cluster: EmbeddedCluster, client: RemotingClient
) -> None:
    broker = embedded_cluster.controller.context
    body = SubscriptionGroupConfig("admin_group", retry_queue_nums=2, retry_max_times=5).to_json()
    created = await admin(
        client, embedded_cluster, request(RequestCode.UPDATE_AND_CREATE_SUBSCRIPTIONGROUP, body=orjson.dumps(body))
    )
    assert created.code == ResponseCode.SUCCESS
    assert broker.groups.get("admin_group") == SubscriptionGroupConfig(
        "admin_group", retry_queue_nums=2, retry_max_times=5
    )
    listing = await admin(client, embedded_cluster, request(RequestCode.GET_ALL_SUBSCRIPTIONGROUP_CONFIG))
    table = orjson.loads(listing.body)["subscriptionGroupTable"]
    assert table["admin_group"]["retryMaxTimes"] == 5 and "TOOLS_CONSUMER" in table
    broker.offsets.commit("admin_group", "T", 0, 5)
    deleted = await admin(
        client,
        embedded_cluster,
        request(RequestCode.DELETE_SUBSCRIPTIONGROUP, {"groupName": "admin_group", "cleanOffset": "true"}),
    )
    assert deleted.code == ResponseCode.SUCCESS
    assert broker.groups.get("admin_group") is None
    assert broker.offsets.query("admin_group", "T", 0) == -1


async def test_a_list_of_subscription_groups_is_created_in_one_request(
    embedded_cluster: EmbeddedCluster, client: RemotingClient
) -> None:
    """RocketMQ 5's UPDATE_AND_CREATE_SUBSCRIPTIONGROUP_LIST (225; 5.x ``mqadmin updateSubGroupList``): a
    ``{"groupConfigList": [...]}`` body creates or replaces each group (broker/src/main/java/org/apache/rocketmq/
    broker/processor/AdminBrokerProcessor.java updateAndCreateSubscriptionGroupList, 5.3.3)."""
    groups = embedded_cluster.controller.context.groups
    configs = [SubscriptionGroupConfig("list_a", retry_max_times=3), SubscriptionGroupConfig("list_b", broker_id=1)]
    body = orjson.dumps({"groupConfigList": [c.to_json() for c in configs]})
    answer = await admin(client, embedded_cluster, request(225, body=body))
    assert answer.code == ResponseCode.SUCCESS
    assert [groups.get("list_a"), groups.get("list_b")] == configs


async def test_one_subscription_group_config_is_read_as_rocketmq_5_answers_it(
    embedded_cluster: EmbeddedCluster, client: RemotingClient
) -> None:
    """RocketMQ 5's GET_SUBSCRIPTIONGROUP_CONFIG (352), which a 5.x proxy asks for each consumer group: the group's
    config as JSON, auto-created as ``findSubscriptionGroupConfig`` does, or SUBSCRIPTION_GROUP_NOT_EXIST ``No group
    in this broker`` (broker/src/main/java/org/apache/rocketmq/broker/processor/AdminBrokerProcessor.java
    getSubscriptionGroup, 5.3.3)."""
    groups = embedded_cluster.controller.context.groups
    groups.update(SubscriptionGroupConfig("one_group", retry_max_times=7))
    found = await admin(client, embedded_cluster, request(352, {"group": "one_group"}))
    assert found.code == ResponseCode.SUCCESS
    assert SubscriptionGroupConfig.from_json(orjson.loads(found.body)) == groups.get("one_group")
    made = await admin(client, embedded_cluster, request(352, {"group": "auto_made_group"}))
    assert made.code == ResponseCode.SUCCESS and orjson.loads(made.body)["groupName"] == "auto_made_group"
    assert groups.get("auto_made_group") is not None
    illegal = await admin(client, embedded_cluster, request(352, {"group": "not/legal"}))
    assert (illegal.code, illegal.remark) == (ResponseCode.SUBSCRIPTION_GROUP_NOT_EXIST, "No group in this broker")
    missing = await admin(client, embedded_cluster, request(352))
    assert missing.code == ResponseCode.SYSTEM_ERROR


async def test_runtime_info_and_broker_config(embedded_cluster: EmbeddedCluster, client: RemotingClient) -> None:
    info = await admin(client, embedded_cluster, request(RequestCode.GET_BROKER_RUNTIME_INFO))
    table = KVTable.decode(info.body).table
    assert table["brokerVersion"] == "409"
    assert table["sendThreadPoolQueueCapacity"] == "10000"
    assert int(table["commitLogMaxOffset"]) >= 0
    # mqadmin clusterList parses these without null checks.
    assert [float(x) for x in table["putTps"].split(" ")] == [0.0, 0.0, 0.0]
    assert 0.0 <= float(table["commitLogDiskRatio"]) <= 1.0
    for key in ("msgPutTotalTodayNow", "msgGetTotalTodayMorning", "earliestMessageTimeStamp"):
        int(table[key])
    config = await admin(client, embedded_cluster, request(RequestCode.GET_BROKER_CONFIG))
    text = bytes(config.body).decode()
    port = embedded_cluster.broker_addr.rsplit(":", 1)[1]
    assert f"listenPort={port}\n" in text and "brokerIP1=127.0.0.1\n" in text
    assert "version" in config.ext_fields


async def test_get_broker_config_version_moves_on_with_update_broker_config(
    embedded_cluster: EmbeddedCluster, client: RemotingClient
) -> None:
    """GET_BROKER_CONFIG's ``version`` is ``Configuration.getDataVersionJson()`` (AdminBrokerProcessor.getBrokerConfig):
    the settings' DataVersion, which Configuration.update moves on for every UPDATE_BROKER_CONFIG."""
    before = await admin(client, embedded_cluster, request(RequestCode.GET_BROKER_CONFIG))
    update = request(RequestCode.UPDATE_BROKER_CONFIG, body=b"maxMessageSize=1048576\n")
    assert (await admin(client, embedded_cluster, update)).code == ResponseCode.SUCCESS
    after = await admin(client, embedded_cluster, request(RequestCode.GET_BROKER_CONFIG))
    assert embedded_cluster.controller.context.config.max_message_size == 1048576
    counter_before = orjson.loads(before.ext_fields["version"])["counter"]
    counter_after = orjson.loads(after.ext_fields["version"])["counter"]
    assert counter_after > counter_before, (before.ext_fields["version"], after.ext_fields["version"])


async def test_an_update_broker_config_without_a_body_leaves_the_config_version(
    embedded_cluster: EmbeddedCluster, client: RemotingClient
) -> None:
    """AdminBrokerProcessor.updateBrokerConfig calls Configuration.update, and so ``dataVersion.nextVersion()``, only
    ``if (body != null)``, and a body of length 0 decodes as null: such a request answers SUCCESS and
    GET_BROKER_CONFIG's ``version`` stays where it was."""
    before = await admin(client, embedded_cluster, request(RequestCode.GET_BROKER_CONFIG))
    update = request(RequestCode.UPDATE_BROKER_CONFIG)
    assert (await admin(client, embedded_cluster, update)).code == ResponseCode.SUCCESS
    after = await admin(client, embedded_cluster, request(RequestCode.GET_BROKER_CONFIG))
    assert orjson.loads(after.ext_fields["version"]) == orjson.loads(before.ext_fields["version"])


async def test_an_updated_broker_ip1_is_the_address_registered_next(
    embedded_cluster: EmbeddedCluster, client: RemotingClient
) -> None:
    """Java's registration sends BrokerController.getBrokerAddr(), ``brokerIP1:listenPort`` read from the live
    config each time, so after UPDATE_BROKER_CONFIG ``brokerIP1`` the next round (here: the one a topic creation
    triggers) registers the new address on the port the broker listens on. Found by a review: ours kept registering
    the start-up address."""
    started = embedded_cluster.broker_addr
    port = started.rsplit(":", 1)[1]
    update = request(RequestCode.UPDATE_BROKER_CONFIG, body=b"brokerIP1=127.0.0.2\nlistenPort=1\n")
    assert (await client.invoke(started, update, 5)).code == ResponseCode.SUCCESS
    assert embedded_cluster.controller.broker_addr == f"127.0.0.2:{port}"
    answer = await client.invoke(started, create_topic_request("MovedTopic"), 5)  # listening where it started
    assert answer.code == ResponseCode.SUCCESS
    route = TopicRouteData.decode(await wait_for_route(client, embedded_cluster, "MovedTopic"))
    assert route.broker_datas[0].broker_addrs == {0: f"127.0.0.2:{port}"}


def _put(cluster: EmbeddedCluster, topic: str, queue_id: int, count: int) -> None:
    store = cluster.controller.context.store
    for i in range(count):
        store.append(MessageRecord(topic, f"m{i}".encode(), queue_id, store_host=cluster.controller.context.store_host))


async def _topic_with(tool: RemotingClient, cluster: EmbeddedCluster, topic: str, *counts: int) -> None:
    """Create ``topic`` with a queue per count, each holding that many messages."""
    await admin(tool, cluster, create_topic_request(topic, queues=len(counts)))
    for queue_id, count in enumerate(counts):
        _put(cluster, topic, queue_id, count)


async def test_topic_stats_and_consume_stats_report_queue_offsets(
    embedded_cluster: EmbeddedCluster, client: RemotingClient
) -> None:
    await admin(client, embedded_cluster, create_topic_request("StatsTopic", queues=2))
    _put(embedded_cluster, "StatsTopic", 0, 3)
    _put(embedded_cluster, "StatsTopic", 1, 1)
    missing = await admin(client, embedded_cluster, request(RequestCode.GET_TOPIC_STATS_INFO, {"topic": "Nope"}))
    assert missing.code == ResponseCode.TOPIC_NOT_EXIST
    stats = await admin(client, embedded_cluster, request(RequestCode.GET_TOPIC_STATS_INFO, {"topic": "StatsTopic"}))
    table = TopicStatsTable.decode(stats.body).offset_table
    q0, q1 = MessageQueue("StatsTopic", "broker-a", 0), MessageQueue("StatsTopic", "broker-a", 1)
    assert (table[q0].min_offset, table[q0].max_offset, table[q1].max_offset) == (0, 3, 1)
    assert table[q0].last_update_timestamp > 0

    embedded_cluster.controller.context.offsets.commit("stats_group", "StatsTopic", 0, 2)
    consume = await admin(
        client,
        embedded_cluster,
        request(RequestCode.GET_CONSUME_STATS, {"consumerGroup": "stats_group", "topic": "StatsTopic"}),
    )
    offsets = ConsumeStats.decode(consume.body).offset_table
    assert (offsets[q0].broker_offset, offsets[q0].consumer_offset) == (3, 2)
    assert (offsets[q1].broker_offset, offsets[q1].consumer_offset) == (1, 0)
    assert offsets[q0].last_timestamp > 0


async def test_consume_stats_carry_rocketmq_5_s_pull_offset(
    embedded_cluster: EmbeddedCluster, client: RemotingClient
) -> None:
    """RocketMQ 5's OffsetWrapper.pullOffset: the next offset after the group's last pull of the queue, at least the
    committed one (the committed one before any pull), which 5.x ``mqadmin consumerProgress`` subtracts the
    consumer offset from for its #Inflight column (broker/src/main/java/org/apache/rocketmq/broker/processor/
    AdminBrokerProcessor.java getConsumeStats, 5.3.3); without it that column reads minus the consumer offset."""
    await admin(client, embedded_cluster, create_topic_request("InflightT", queues=2))
    _put(embedded_cluster, "InflightT", 0, 5)
    _put(embedded_cluster, "InflightT", 1, 2)
    embedded_cluster.controller.context.offsets.commit("inflight_g", "InflightT", 0, 1)
    embedded_cluster.controller.context.offsets.commit("inflight_g", "InflightT", 1, 2)
    pull = PullMessageRequestHeader("inflight_g", "InflightT", 0, 1, 3, 4, 0, 0, 0, "*", "TAG")
    pulled = await admin(client, embedded_cluster, request(RequestCode.PULL_MESSAGE, pull.to_ext_fields()))
    assert pulled.code == ResponseCode.SUCCESS
    consume = await admin(
        client,
        embedded_cluster,
        request(RequestCode.GET_CONSUME_STATS, {"consumerGroup": "inflight_g", "topic": "InflightT"}),
    )
    table = loads_fastjson(consume.body)["offsetTable"]
    q0, q1 = MessageQueue("InflightT", "broker-a", 0), MessageQueue("InflightT", "broker-a", 1)
    assert (table[q0]["consumerOffset"], table[q0].get("pullOffset")) == (1, 4)
    assert (table[q1]["consumerOffset"], table[q1].get("pullOffset")) == (2, 2)


async def test_consume_stats_of_a_topic_list_cover_those_topics_alone(
    embedded_cluster: EmbeddedCluster, client: RemotingClient
) -> None:
    """RocketMQ 5's ``topicList`` (topics joined by ``;``): the listed topics alone, whatever the group has offsets
    on, and without the subscription check a single topic gets (AdminBrokerProcessor.getConsumeStats'
    getTopicsForCollectingConsumeStats, broker/src/main/java/org/apache/rocketmq/broker/processor/
    AdminBrokerProcessor.java, 5.3.3)."""
    for topic in ("ListA", "ListB", "ListC", "ListD"):
        await admin(client, embedded_cluster, create_topic_request(topic, queues=1))
    offsets = embedded_cluster.controller.context.offsets
    for topic in ("ListA", "ListB", "ListC"):
        offsets.commit("list_group", topic, 0, 0)
    sub = SubscriptionData("ListA")
    data = HeartbeatData("10.0.0.9@78", consumer_data_set=(ConsumerData("list_group", subscription_data_set=(sub,)),))
    await admin(client, embedded_cluster, request(RequestCode.HEART_BEAT, body=data.encode()))
    consume = await admin(
        client,
        embedded_cluster,
        request(RequestCode.GET_CONSUME_STATS, {"consumerGroup": "list_group", "topicList": "ListB;ListD;"}),
    )
    assert consume.code == ResponseCode.SUCCESS
    assert sorted(mq.topic for mq in ConsumeStats.decode(consume.body).offset_table) == ["ListB", "ListD"]


async def test_connection_lists_show_heartbeating_clients(
    embedded_cluster: EmbeddedCluster, client: RemotingClient
) -> None:
    offline = await admin(
        client, embedded_cluster, request(RequestCode.GET_CONSUMER_CONNECTION_LIST, {"consumerGroup": "cg"})
    )
    assert offline.code == ResponseCode.CONSUMER_NOT_ONLINE
    no_producer = await admin(
        client, embedded_cluster, request(RequestCode.GET_PRODUCER_CONNECTION_LIST, {"producerGroup": "pg"})
    )
    assert no_producer.code == ResponseCode.SYSTEM_ERROR
    data = HeartbeatData(
        "10.0.0.9@77",
        producer_data_set=(ProducerData("pg"),),
        consumer_data_set=(ConsumerData("cg", subscription_data_set=(SubscriptionData("T", "A", ("A",)),)),),
    )
    await admin(client, embedded_cluster, request(RequestCode.HEART_BEAT, body=data.encode()))
    consumers = await admin(
        client, embedded_cluster, request(RequestCode.GET_CONSUMER_CONNECTION_LIST, {"consumerGroup": "cg"})
    )
    body = ConsumerConnection.decode(consumers.body)
    assert [(c.client_id, c.language) for c in body.connection_set] == [("10.0.0.9@77", "PYTHON")]
    assert body.subscription_table["T"].sub_string == "A"
    assert (body.consume_type, body.message_model) == ("CONSUME_PASSIVELY", "CLUSTERING")
    producers = await admin(
        client, embedded_cluster, request(RequestCode.GET_PRODUCER_CONNECTION_LIST, {"producerGroup": "pg"})
    )
    assert [c.client_id for c in ProducerConnection.decode(producers.body).connection_set] == ["10.0.0.9@77"]


class _Pushes:
    """A consumer's request handler keeping what the broker pushes to it."""

    def __init__(self) -> None:
        self.commands: list[RemotingCommand] = []

    async def process(self, ctx: RequestContext, cmd: RemotingCommand) -> RemotingCommand | None:
        self.commands.append(cmd)
        return None

    async def reset(self, consumer: RemotingClient, cluster: EmbeddedCluster) -> RemotingCommand:
        """The first RESET_CONSUMER_CLIENT_OFFSET pushed, once it came (a request of ours lets it in)."""
        with trio.fail_after(10):
            while not any(c.code == RequestCode.RESET_CONSUMER_CLIENT_OFFSET for c in self.commands):
                await consumer.invoke(cluster.broker_addr, request(RequestCode.GET_BROKER_RUNTIME_INFO), 5)
        return next(c for c in self.commands if c.code == RequestCode.RESET_CONSUMER_CLIENT_OFFSET)


async def test_reset_offset_pushes_the_new_offsets_to_online_consumers(embedded_cluster: EmbeddedCluster) -> None:
    pushes = _Pushes()
    broker = embedded_cluster.controller.context
    async with RemotingClient(request_handler=pushes) as consumer, RemotingClient() as tool:
        await _topic_with(tool, embedded_cluster, "ResetTopic", 5, 2)
        fields = {"topic": "ResetTopic", "group": "reset_group", "timestamp": "-1", "isForce": "true"}
        reset = request(RequestCode.INVOKE_BROKER_TO_RESET_OFFSET, fields)
        never = await admin(tool, embedded_cluster, reset)
        assert (never.code, never.remark) == (ResponseCode.SYSTEM_ERROR, "THe consumer group <reset_group> not exist")
        broker.offsets.commit("reset_group", "ResetTopic", 0, 1)
        broker.offsets.commit("reset_group", "ResetTopic", 1, 1)
        offline = await admin(tool, embedded_cluster, reset)
        assert offline.code == ResponseCode.CONSUMER_NOT_ONLINE
        data = HeartbeatData("c1", consumer_data_set=(ConsumerData("reset_group"),))
        await consumer.invoke(embedded_cluster.broker_addr, request(RequestCode.HEART_BEAT, body=data.encode()), 5)
        answer = await admin(tool, embedded_cluster, reset)
        assert answer.code == ResponseCode.SUCCESS
        expected = (
            b'{"offsetTable":{{"brokerName":"broker-a","queueId":0,"topic":"ResetTopic"}:5,'
            b'{"brokerName":"broker-a","queueId":1,"topic":"ResetTopic"}:2}}'
        )
        assert bytes(answer.body) == expected
        push = await pushes.reset(consumer, embedded_cluster)
        assert push.is_oneway and bytes(push.body) == expected and push.ext_fields["group"] == "reset_group"


async def test_a_reset_of_one_queue_moves_that_queue_only(embedded_cluster: EmbeddedCluster) -> None:
    """RocketMQ 5's ``mqadmin resetOffsetByTime -b -q -o`` (DefaultMQAdminExtImpl.resetOffsetByQueueId) names one
    queue and its offset: only that queue is reset, as the 5.x broker's resetOffsetInner, and the online consumers
    are told of that queue alone, never every queue of the topic rewound to the time 0 the request carries."""
    pushes = _Pushes()
    broker = embedded_cluster.controller.context
    async with RemotingClient(request_handler=pushes) as consumer, RemotingClient() as tool:
        await _topic_with(tool, embedded_cluster, "OneQueueReset", 5, 5)
        broker.groups.update(SubscriptionGroupConfig("one_queue_group"))
        broker.offsets.commit("one_queue_group", "OneQueueReset", 0, 4)
        broker.offsets.commit("one_queue_group", "OneQueueReset", 1, 4)
        fields = {"topic": "OneQueueReset", "group": "one_queue_group", "timestamp": "0", "isForce": "false"}
        one = request(RequestCode.INVOKE_BROKER_TO_RESET_OFFSET, {**fields, "queueId": "1", "offset": "2"})
        offline = await admin(tool, embedded_cluster, one)  # no consumer online: reset all the same, as 5.x
        assert offline.code == ResponseCode.SUCCESS
        assert broker.offsets.offsets_of("one_queue_group", "OneQueueReset") == {0: 4, 1: 2}
        data = HeartbeatData("c1", consumer_data_set=(ConsumerData("one_queue_group"),))
        await consumer.invoke(embedded_cluster.broker_addr, request(RequestCode.HEART_BEAT, body=data.encode()), 5)
        again = request(RequestCode.INVOKE_BROKER_TO_RESET_OFFSET, {**fields, "queueId": "1", "offset": "3"})
        answer = await admin(tool, embedded_cluster, again)
        expected = b'{"offsetTable":{{"brokerName":"broker-a","queueId":1,"topic":"OneQueueReset"}:3}}'
        assert (answer.code, bytes(answer.body)) == (ResponseCode.SUCCESS, expected)
        assert broker.offsets.offsets_of("one_queue_group", "OneQueueReset") == {0: 4, 1: 3}
        push = await pushes.reset(consumer, embedded_cluster)
        assert bytes(push.body) == expected
        beyond = request(RequestCode.INVOKE_BROKER_TO_RESET_OFFSET, {**fields, "queueId": "1", "offset": "7"})
        refused = await admin(tool, embedded_cluster, beyond)
        assert (refused.code, refused.remark) == (
            ResponseCode.SYSTEM_ERROR,
            "Target offset 7 not in consume queue range [0-5]",
        )
        unknown = {**fields, "group": "no_such_group", "queueId": "1", "offset": "1"}
        missing = await admin(tool, embedded_cluster, request(RequestCode.INVOKE_BROKER_TO_RESET_OFFSET, unknown))
        assert (missing.code, missing.remark) == (
            ResponseCode.SUBSCRIPTION_GROUP_NOT_EXIST,
            "Group no_such_group does not exist",
        )


async def test_all_consumer_offsets_system_topics_and_config_updates(
    embedded_cluster: EmbeddedCluster, client: RemotingClient
) -> None:
    broker = embedded_cluster.controller.context
    broker.offsets.commit("g", "T", 1, 9)
    offsets = await admin(client, embedded_cluster, request(RequestCode.GET_ALL_CONSUMER_OFFSET))
    assert orjson.loads(offsets.body) == {"offsetTable": {"T@g": {"1": 9}}}
    system = await admin(client, embedded_cluster, request(RequestCode.GET_SYSTEM_TOPIC_LIST_FROM_BROKER))
    topics = TopicList.decode(system.body).topic_list
    assert "TBW102" in topics and "DefaultCluster" in topics and "broker-a" in topics
    assert broker.topics.create_topic_in_send_process("Before", "TBW102", 4) is not None
    update = request(RequestCode.UPDATE_BROKER_CONFIG, body=b"autoCreateTopicEnable=false\nlistenPort=1\n")
    assert (await admin(client, embedded_cluster, update)).code == ResponseCode.SUCCESS
    assert broker.config.auto_create_topic_enable is False
    assert broker.broker_addr == embedded_cluster.broker_addr
    assert broker.topics.create_topic_in_send_process("After", "TBW102", 4) is None
    # Numbers Integer.parseInt refuses are skipped, as MixAll.properties2Object does: SUCCESS, nothing changed.
    max_message_size = broker.config.max_message_size
    bad = request(RequestCode.UPDATE_BROKER_CONFIG, body=b"listenPort=x\nmaxMessageSize=big\n")
    assert (await admin(client, embedded_cluster, bad)).code == ResponseCode.SUCCESS
    assert broker.config.max_message_size == max_message_size
    assert broker.broker_addr == embedded_cluster.broker_addr


async def test_running_info_and_consume_directly_are_forwarded_to_the_named_consumer(
    embedded_cluster: EmbeddedCluster,
) -> None:
    seen: list[RemotingCommand] = []

    class Consumer:
        async def process(self, ctx: RequestContext, cmd: RemotingCommand) -> RemotingCommand | None:
            seen.append(cmd)
            if cmd.code == RequestCode.GET_CONSUMER_RUNNING_INFO:
                return cmd.response(ResponseCode.SUCCESS, body=b'{"properties":{}}')
            if cmd.code == RequestCode.CONSUME_MESSAGE_DIRECTLY:
                return cmd.response(ResponseCode.SUCCESS, body=b"consumed")
            return None

    broker = embedded_cluster.controller.context
    async with RemotingClient(request_handler=Consumer()) as consumer, RemotingClient() as tool:
        data = HeartbeatData("fw-1", consumer_data_set=(ConsumerData("fw_group"),))
        await consumer.invoke(embedded_cluster.broker_addr, request(RequestCode.HEART_BEAT, body=data.encode()), 5)
        running = await admin(
            tool,
            embedded_cluster,
            request(RequestCode.GET_CONSUMER_RUNNING_INFO, {"consumerGroup": "fw_group", "clientId": "fw-1"}),
        )
        assert (running.code, bytes(running.body)) == (ResponseCode.SUCCESS, b'{"properties":{}}')
        offline = await admin(
            tool,
            embedded_cluster,
            request(RequestCode.GET_CONSUMER_RUNNING_INFO, {"consumerGroup": "fw_group", "clientId": "nobody"}),
        )
        assert (offline.code, offline.remark) == (
            ResponseCode.SYSTEM_ERROR,
            "The Consumer <fw_group> <nobody> not online",
        )

        appended = broker.store.append(MessageRecord("T", b"BODY", 0, store_host=broker.store_host))
        fields = {"consumerGroup": "fw_group", "clientId": "fw-1", "msgId": appended.msg_id}
        direct = await admin(tool, embedded_cluster, request(RequestCode.CONSUME_MESSAGE_DIRECTLY, fields))
        assert (direct.code, bytes(direct.body)) == (ResponseCode.SUCCESS, b"consumed")
        forwarded = next(c for c in seen if c.code == RequestCode.CONSUME_MESSAGE_DIRECTLY)
        assert bytes(forwarded.body) == bytes(broker.store.look_message_by_offset(appended.phy_offset) or b"")
        missing = dict(fields, msgId="7F00000100002A9F00000000FFFFFFFF")
        gone = await admin(tool, embedded_cluster, request(RequestCode.CONSUME_MESSAGE_DIRECTLY, missing))
        assert gone.code == ResponseCode.SYSTEM_ERROR


async def test_a_producer_group_whose_last_connection_closed_lists_no_connections_until_unregistered(
    embedded_cluster: EmbeddedCluster,
) -> None:
    """As 4.9.8's ProducerManager: a closed channel leaves its group (empty) in the table, so
    GET_PRODUCER_CONNECTION_LIST answers SUCCESS with no connection; UNREGISTER_CLIENT of the last member removes the
    group ("not exist")."""
    listing = request(RequestCode.GET_PRODUCER_CONNECTION_LIST, {"producerGroup": "pg-closed"})
    heartbeat = HeartbeatData("10.0.0.9@78", producer_data_set=(ProducerData("pg-closed"),))
    async with RemotingClient() as gone:
        await admin(gone, embedded_cluster, request(RequestCode.HEART_BEAT, body=heartbeat.encode()))
    async with RemotingClient() as client:
        with trio.fail_after(10):
            while True:
                answer = await admin(client, embedded_cluster, listing)
                assert answer.code == ResponseCode.SUCCESS, answer.remark
                if not ProducerConnection.decode(answer.body).connection_set:
                    break  # the close reached the broker
                await trio.sleep(0.01)
        await admin(client, embedded_cluster, request(RequestCode.HEART_BEAT, body=heartbeat.encode()))
        unregister = {"clientID": "10.0.0.9@78", "producerGroup": "pg-closed"}
        await admin(client, embedded_cluster, request(RequestCode.UNREGISTER_CLIENT, unregister))
        answer = await admin(client, embedded_cluster, listing)
        assert (answer.code, answer.remark) == (ResponseCode.SYSTEM_ERROR, "the producer group[pg-closed] not exist")
