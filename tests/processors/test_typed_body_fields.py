"""Request bodies whose fields Java binds to typed fields, over a real socket (127.0.0.1, port 0) against an embedded
broker: fastjson 1.2.69 (RemotingSerializable.decode) refuses a number its ``int`` field cannot hold
(JSONLexerBase.intValue throws NumberFormatException, IntegerCodec wraps it in "parseInt error"), so the request
fails with SYSTEM_ERROR and nothing is stored that a Java tool could not read back."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import orjson
import pytest
import trio

from broker.embedded import EmbeddedCluster
from remoting.client import RemotingClient
from remoting.codec.codes import RequestCode, ResponseCode
from remoting.codec.command import RemotingCommand, request
from tests.conftest import SMALL_STORE

INT_MAX = (1 << 31) - 1


@pytest.fixture
async def client() -> AsyncIterator[RemotingClient]:
    async with RemotingClient() as c:
        yield c


@pytest.mark.parametrize("field", ["retryQueueNums", "retryMaxTimes"])
async def test_a_subscription_group_int_past_the_java_int_range_is_refused(
    embedded_cluster: EmbeddedCluster, client: RemotingClient, field: str
) -> None:
    """SubscriptionGroupConfig (common/.../subscription/SubscriptionGroupConfig.java, 4.9.8): ``retryQueueNums`` and
    ``retryMaxTimes`` are ``int``; ``brokerId`` and ``whichBrokerWhenConsumeSlowly`` are ``long``."""
    groups = embedded_cluster.controller.context.groups
    body = {"groupName": "too_big", field: INT_MAX + 1}
    cmd = request(RequestCode.UPDATE_AND_CREATE_SUBSCRIPTIONGROUP, body=orjson.dumps(body))
    answer = await client.invoke(embedded_cluster.broker_addr, cmd, 5)
    assert answer.code == ResponseCode.SYSTEM_ERROR, answer
    assert field in (answer.remark or "")
    assert "too_big" not in groups.groups


async def test_a_subscription_group_at_the_java_ranges_edges_is_stored(
    embedded_cluster: EmbeddedCluster, client: RemotingClient
) -> None:
    groups = embedded_cluster.controller.context.groups
    body = {
        "groupName": "edges",
        "retryQueueNums": INT_MAX,
        "retryMaxTimes": -(1 << 31),
        "brokerId": INT_MAX + 1,
        "whichBrokerWhenConsumeSlowly": (1 << 63) - 1,
    }
    cmd = request(RequestCode.UPDATE_AND_CREATE_SUBSCRIPTIONGROUP, body=orjson.dumps(body))
    answer = await client.invoke(embedded_cluster.broker_addr, cmd, 5)
    assert answer.code == ResponseCode.SUCCESS, answer
    stored = groups.groups["edges"]
    assert (stored.retry_queue_nums, stored.retry_max_times) == (INT_MAX, -(1 << 31))
    assert (stored.broker_id, stored.which_broker_when_consume_slowly) == (INT_MAX + 1, (1 << 63) - 1)


async def _heartbeat(cluster: EmbeddedCluster, client: RemotingClient, body: dict[str, object]) -> RemotingCommand:
    return await client.invoke(cluster.broker_addr, request(RequestCode.HEART_BEAT, body=orjson.dumps(body)), 5)


async def _registered_enums(
    cluster: EmbeddedCluster, client: RemotingClient, group: str, *names: str
) -> list[str | None]:
    """The consumeType, messageModel and consumeFromWhere a consumer of ``group`` is registered with after a heartbeat
    naming them ``names`` (None: null)."""
    enums = dict(zip(("consumeType", "messageModel", "consumeFromWhere"), names, strict=True))
    consumer = {"groupName": group, **enums, "subscriptionDataSet": [{"topic": "T", "subString": "*"}]}
    answer = await _heartbeat(cluster, client, {"clientID": f"127.0.0.1@{group}", "consumerDataSet": [consumer]})
    assert answer.code == ResponseCode.SUCCESS, answer
    info = cluster.controller.context.clients.consumer_group(group)
    assert info is not None
    enums = (info.consume_type, info.message_model, info.consume_from_where)
    return [None if e is None else e.name for e in enums]


async def test_heartbeat_enum_names_are_read_in_any_case(
    embedded_cluster: EmbeddedCluster, client: RemotingClient
) -> None:
    """fastjson 1.2.69's EnumDeserializer matches a name exactly or by its ASCII lower case
    (parser/deserializer/EnumDeserializer.java), so 4.9.8 registers a consumer whose heartbeat
    (common/.../protocol/heartbeat/ConsumerData.java) spells its enums ``Broadcasting`` or ``consume_actively``."""
    names = ("consume_actively", "Broadcasting", "CONSUME_FROM_first_OFFSET")
    assert await _registered_enums(embedded_cluster, client, "mixed_case", *names) == [
        "CONSUME_ACTIVELY",
        "BROADCASTING",
        "CONSUME_FROM_FIRST_OFFSET",
    ]


async def test_get_all_topic_config_leaves_out_a_topic_filter_type_topics_json_named_no_member_of(
    tmp_path: Path, client: RemotingClient
) -> None:
    """4.9.8 loads ``"topicFilterType": "2"`` from topics.json as null (fastjson 1.2.69's EnumDeserializer: a JSON
    string is a name, and no member has this one), and fastjson writes no null field, so GET_ALL_TOPIC_CONFIG's body
    (AdminBrokerProcessor, TopicConfigSerializeWrapper) has no ``topicFilterType`` for that topic, which a tool then
    reads as SINGLE_TAG; ours answered SINGLE_TAG itself (found by a review)."""
    config_dir = tmp_path / "cluster" / "broker" / "config"
    config_dir.mkdir(parents=True)
    topics = {"odd": {"topicName": "odd", "perm": 6, "topicFilterType": "2"}, "plain": {"topicName": "plain"}}
    (config_dir / "topics.json").write_bytes(orjson.dumps({"topicConfigTable": topics}))
    async with EmbeddedCluster(tmp_path / "cluster", **SMALL_STORE) as cluster:
        answer = await client.invoke(cluster.broker_addr, request(RequestCode.GET_ALL_TOPIC_CONFIG), 5)
    assert answer.code == ResponseCode.SUCCESS, answer
    table = orjson.loads(answer.body)["topicConfigTable"]
    assert "topicFilterType" not in table["odd"]
    assert table["plain"]["topicFilterType"] == "SINGLE_TAG"


async def test_a_heartbeat_enum_given_as_a_digit_string_is_a_name_not_an_ordinal(
    embedded_cluster: EmbeddedCluster, client: RemotingClient
) -> None:
    """fastjson 1.2.69's EnumDeserializer reads an ordinal from a JSON number only; ``"0"`` is a name no member has,
    null in 4.9.8's ConsumerData, as ours (found by a review: registered as the ordinal; then by a second one: as the
    field's default)."""
    assert await _registered_enums(embedded_cluster, client, "digit_names", "0", "0", "4") == [None, None, None]


async def test_a_heartbeat_enum_name_no_member_has_is_read_as_absent(
    embedded_cluster: EmbeddedCluster, client: RemotingClient
) -> None:
    """fastjson 1.2.69's EnumDeserializer (and the bean deserializers' ``scanEnum``) reads a name no member has as
    null unless ``ErrorOnEnumNotMatch`` is on, which RemotingSerializable.decode does not turn on: 4.9.8 registers the
    consumer with nulls, as ours (found by a review: refused SYSTEM_ERROR; then by a second one: the field's
    default was registered)."""
    registered = await _registered_enums(embedded_cluster, client, "odd_enums", "PUSH", "CLUSTER", "FROM_NOWHERE")
    assert registered == [None, None, None]


async def test_a_heartbeat_tag_code_past_the_java_int_range_is_refused(
    embedded_cluster: EmbeddedCluster, client: RemotingClient
) -> None:
    """SubscriptionData.codeSet is a ``Set<Integer>`` (common/.../protocol/heartbeat/SubscriptionData.java): 4.9.8
    fails the heartbeat, and registers nothing mqadmin consumerConnection could not read back."""
    sub = {"topic": "T", "subString": "a", "tagsSet": ["a"], "codeSet": [INT_MAX + 1]}
    consumer = {"groupName": "big_code", "subscriptionDataSet": [sub]}
    answer = await _heartbeat(embedded_cluster, client, {"clientID": "127.0.0.1@big", "consumerDataSet": [consumer]})
    assert answer.code == ResponseCode.SYSTEM_ERROR, answer
    assert embedded_cluster.controller.context.clients.consumer_group("big_code") is None


@pytest.mark.parametrize("code", [RequestCode.LOCK_BATCH_MQ, RequestCode.UNLOCK_BATCH_MQ])
async def test_a_lock_body_queue_id_past_the_java_int_range_is_refused(
    embedded_cluster: EmbeddedCluster, client: RemotingClient, code: int
) -> None:
    """MessageQueue.queueId is an ``int`` (common/.../message/MessageQueue.java): LockBatchRequestBody and
    UnlockBatchRequestBody fail to decode, so 4.9.8 answers SYSTEM_ERROR and locks nothing."""
    mq = {"topic": "T", "brokerName": "b", "queueId": INT_MAX + 1}
    body = {"consumerGroup": "g", "clientId": "127.0.0.1@lock", "mqSet": [mq]}
    answer = await client.invoke(embedded_cluster.broker_addr, request(code, body=orjson.dumps(body)), 5)
    assert answer.code == ResponseCode.SYSTEM_ERROR, answer
    assert "queueId" in (answer.remark or "")


async def test_a_fraction_in_an_int_field_is_cut_to_its_integer_part(
    embedded_cluster: EmbeddedCluster, client: RemotingClient
) -> None:
    """fastjson 1.2.69 reads a fraction for an ``int`` or ``long`` field as ``BigDecimal.intValue()`` /
    ``longValue()`` (IntegerCodec, LongCodec, TypeUtils.intValue): the integer part, toward zero; 4.9.8 stores it."""
    groups = embedded_cluster.controller.context.groups
    body = {"groupName": "fractions", "retryQueueNums": 2.5, "retryMaxTimes": -1.9, "brokerId": 1.99}
    cmd = request(RequestCode.UPDATE_AND_CREATE_SUBSCRIPTIONGROUP, body=orjson.dumps(body))
    answer = await client.invoke(embedded_cluster.broker_addr, cmd, 5)
    assert answer.code == ResponseCode.SUCCESS, answer
    stored = groups.groups["fractions"]
    assert (stored.retry_queue_nums, stored.retry_max_times, stored.broker_id) == (2, -1, 1)


async def test_subscription_group_booleans_are_cast_as_fastjson_casts_them(
    embedded_cluster: EmbeddedCluster, client: RemotingClient
) -> None:
    """fastjson 1.2.69's BooleanCodec takes a number as ``intValue == 1`` and a text through TypeUtils.castToBoolean:
    ``true``/``false`` in any case, ``1``/``0``, ``Y``/``F`` in any case, ``T``/``N``; an empty text is null, which
    leaves a primitive field its default (FieldDeserializer.setValue)."""
    groups = embedded_cluster.controller.context.groups
    body = {
        "groupName": "casts",
        "consumeEnable": 2,
        "consumeBroadcastEnable": "y",
        "notifyConsumerIdsChangedEnable": "N",
        "consumeFromMinEnable": "",
    }
    cmd = request(RequestCode.UPDATE_AND_CREATE_SUBSCRIPTIONGROUP, body=orjson.dumps(body))
    answer = await client.invoke(embedded_cluster.broker_addr, cmd, 5)
    assert answer.code == ResponseCode.SUCCESS, answer
    stored = groups.groups["casts"]
    assert (stored.consume_enable, stored.consume_broadcast_enable) == (False, True)
    assert (stored.notify_consumer_ids_changed_enable, stored.consume_from_min_enable) == (False, True)


async def test_numbers_given_as_texts_are_read_as_fastjson_casts_them(
    embedded_cluster: EmbeddedCluster, client: RemotingClient
) -> None:
    """A text for an ``int`` field goes through TypeUtils.castToInt (commas dropped, a trailing ``.0`` cut, then
    Integer.parseInt), for a ``long`` through castToLong (commas dropped, Long.parseLong); an empty text is null,
    which leaves the field its default."""
    groups = embedded_cluster.controller.context.groups
    body = {"groupName": "texts", "retryQueueNums": "", "retryMaxTimes": "1,024.00", "brokerId": "+7"}
    cmd = request(RequestCode.UPDATE_AND_CREATE_SUBSCRIPTIONGROUP, body=orjson.dumps(body))
    answer = await client.invoke(embedded_cluster.broker_addr, cmd, 5)
    assert answer.code == ResponseCode.SUCCESS, answer
    stored = groups.groups["texts"]
    assert (stored.retry_queue_nums, stored.retry_max_times, stored.broker_id) == (1, 1024, 7)


@pytest.mark.parametrize("text", [" 3", "3 ", "1_0", "0x10"])
async def test_a_number_text_java_cannot_parse_is_refused(
    embedded_cluster: EmbeddedCluster, client: RemotingClient, text: str
) -> None:
    """Integer.parseInt and Long.parseLong take neither spaces nor underscores."""
    body = {"groupName": "bad_text", "whichBrokerWhenConsumeSlowly": text}
    cmd = request(RequestCode.UPDATE_AND_CREATE_SUBSCRIPTIONGROUP, body=orjson.dumps(body))
    answer = await client.invoke(embedded_cluster.broker_addr, cmd, 5)
    assert answer.code == ResponseCode.SYSTEM_ERROR, answer
    assert "bad_text" not in embedded_cluster.controller.context.groups.groups


async def test_a_heartbeat_without_a_client_id_is_refused_and_registers_nothing(
    embedded_cluster: EmbeddedCluster, client: RemotingClient
) -> None:
    """Ours, a deliberate difference: 4.9.8's ClientManageProcessor.heartBeat registers each consumer under a null
    client id (ConsumerGroupInfo keys by channel), so GET_CONSUMER_LIST_BY_GROUP lists a null every Java consumer's
    rebalance fails to sort, then fails on the first producer (ProducerManager's ConcurrentHashMap refuses a null
    key). Ours refuses the heartbeat SYSTEM_ERROR before registering anything."""
    consumer = {"groupName": "no_id", "subscriptionDataSet": [{"topic": "T", "subString": "*"}]}
    body = {"consumerDataSet": [consumer], "producerDataSet": [{"groupName": "no_id_p"}]}
    answer = await _heartbeat(embedded_cluster, client, body)
    assert answer.code == ResponseCode.SYSTEM_ERROR, answer
    assert embedded_cluster.controller.context.clients.consumer_group("no_id") is None


async def test_a_heartbeat_subscription_without_sub_version_replaces_the_one_registered(
    embedded_cluster: EmbeddedCluster, client: RemotingClient
) -> None:
    """4.9.8's SubscriptionData starts ``subVersion`` at ``System.currentTimeMillis()`` (common/.../protocol/heartbeat/
    SubscriptionData.java), which fastjson keeps when the body leaves it out or sends null, so each such heartbeat is
    newer than the last and ConsumerGroupInfo.updateSubscription takes its tags: a consumer that changes its tags
    is filtered by the new ones. Ours read 0 and kept the first subscription for good."""
    left_out = {"topic": "T", "subString": "TagA", "tagsSet": ["TagA"]}
    null = {"topic": "T", "subString": "TagB", "tagsSet": ["TagB"], "subVersion": None}
    for sub in (left_out, null):
        consumer = {"groupName": "no_version", "subscriptionDataSet": [sub]}
        body = {"clientID": "127.0.0.1@no_version", "consumerDataSet": [consumer]}
        answer = await _heartbeat(embedded_cluster, client, body)
        assert answer.code == ResponseCode.SUCCESS, answer
        await trio.sleep(0.01)  # the next heartbeat's millisecond is a later one
    info = embedded_cluster.controller.context.clients.consumer_group("no_version")
    assert info is not None
    assert info.subscriptions["T"].sub_string == "TagB"
    assert info.subscriptions["T"].sub_version > 0
