"""JSON bodies: exact output bytes, the fastjson-style input real peers send, and round trips."""

from __future__ import annotations

import json
import struct
import zlib

import pytest
from hypothesis import given
from hypothesis import strategies as st

from remoting.codec.bodies import (
    BodyDecodeError,
    BrokerData,
    ClusterInfo,
    ConsumeFromWhere,
    ConsumerData,
    ConsumerListBody,
    ConsumeType,
    DataVersion,
    HeartbeatData,
    KVTable,
    LockBatchRequestBody,
    LockBatchResponseBody,
    MessageModel,
    MessageQueue,
    ProducerData,
    QueueData,
    RegisterBrokerBody,
    SubscriptionData,
    TopicConfig,
    TopicConfigSerializeWrapper,
    TopicFilterType,
    TopicList,
    TopicRouteData,
    body_crc32,
    decode_data_version,
    encode_data_version,
)
from remoting.codec.bodies._json import loads, quote_numeric_keys
from remoting.codec.errors import CodecError


def _route() -> TopicRouteData:
    return TopicRouteData(
        queue_datas=[QueueData("broker-a", 8, 8, 6, 0)],
        broker_datas=[BrokerData("DefaultCluster", "broker-a", {1: "10.0.0.2:10911", 0: "10.0.0.1:10911"})],
    )


def test_topic_route_data_encodes_exact_standard_json() -> None:
    assert _route().encode() == (
        b'{"brokerDatas":[{"brokerAddrs":{"0":"10.0.0.1:10911","1":"10.0.0.2:10911"},"brokerName":"broker-a",'
        b'"cluster":"DefaultCluster"}],"filterServerTable":{},"queueDatas":[{"brokerName":"broker-a","perm":6,'
        b'"readQueueNums":8,"topicSysFlag":0,"writeQueueNums":8}]}'
    )


def test_topic_route_data_writes_order_conf_only_when_set() -> None:
    route = TopicRouteData(order_topic_conf="broker-a:4")
    assert route.encode() == b'{"brokerDatas":[],"filterServerTable":{},"orderTopicConf":"broker-a:4","queueDatas":[]}'


def test_cluster_info_encodes_exact_standard_json() -> None:
    info = ClusterInfo(
        broker_addr_table={"broker-a": BrokerData("DefaultCluster", "broker-a", {0: "ip:10911"})},
        cluster_addr_table={"DefaultCluster": ["broker-b", "broker-a"]},
    )
    assert info.encode() == (
        b'{"brokerAddrTable":{"broker-a":{"brokerAddrs":{"0":"ip:10911"},"brokerName":"broker-a",'
        b'"cluster":"DefaultCluster"}},"clusterAddrTable":{"DefaultCluster":["broker-a","broker-b"]}}'
    )


def test_route_from_java_namesrv_with_unquoted_ids_and_old_flag_spelling() -> None:
    java = (
        b'{"brokerDatas":[{"brokerAddrs":{0:"10.0.0.1:10911", 1 :"10.0.0.2:10911"},"brokerName":"broker-a",'
        b'"cluster":"c"}],"filterServerTable":{},"queueDatas":[{"brokerName":"broker-a","perm":6,'
        b'"readQueueNums":4,"topicSynFlag":1,"writeQueueNums":4}]}'
    )
    route = TopicRouteData.decode(java)
    assert route.broker_datas[0].broker_addrs == {0: "10.0.0.1:10911", 1: "10.0.0.2:10911"}
    assert route.broker_datas[0].master_addr == "10.0.0.1:10911"
    assert route.queue_datas == [QueueData("broker-a", 4, 4, 6, 1)]


def test_cluster_info_from_java_namesrv_with_unquoted_ids() -> None:
    java = (
        b'{"brokerAddrTable":{"b":{"brokerAddrs":{0:"h:1"},"brokerName":"b","cluster":"c"}},'
        b'"clusterAddrTable":{"c":["b"]}}'
    )
    info = ClusterInfo.decode(java)
    assert info.broker_addr_table["b"].broker_addrs == {0: "h:1"}
    assert info.cluster_addr_table == {"c": ["b"]}


def test_quoting_numeric_keys_leaves_strings_and_arrays_alone() -> None:
    text = '{0:"a,1:b", "k":[1, 2], "m":{-3 : {4:"{5:x}"}}}'
    assert quote_numeric_keys(text) == '{"0":"a,1:b", "k":[1, 2], "m":{"-3" : {"4":"{5:x}"}}}'


def test_garbage_body_raises_a_codec_error() -> None:
    with pytest.raises(BodyDecodeError):
        TopicRouteData.decode(b"{not json")
    with pytest.raises(CodecError):
        TopicRouteData.decode(b"[1,2]")
    with pytest.raises(BodyDecodeError):
        QueueData.from_json({"brokerName": "b", "perm": "rw"})


def test_heartbeat_from_ali_ons_without_expression_type() -> None:
    body = (
        b'{"clientID":"10.0.0.5@12345","producerDataSet":[{"groupName":"CLIENT_INNER_PRODUCER"}],'
        b'"consumerDataSet":[{"groupName":"g","consumeType":"CONSUME_PASSIVELY","messageModel":"CLUSTERING",'
        b'"consumeFromWhere":"CONSUME_FROM_FIRST_OFFSET","unitMode":false,"subscriptionDataSet":[{"topic":"T",'
        b'"subString":"TagA || TagB","tagsSet":["TagA","TagB"],"codeSet":[2598919,2598920],'
        b'"subVersion":1700000000000,"classFilterMode":false}]}]}'
    )
    hb = HeartbeatData.decode(body)
    assert hb.client_id == "10.0.0.5@12345"
    assert hb.producer_data_set == (ProducerData("CLIENT_INNER_PRODUCER"),)
    consumer = hb.consumer_data_set[0]
    assert consumer.consume_from_where is ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET
    sub = consumer.subscription_data_set[0]
    assert sub.expression_type == "TAG"
    assert sub.tags_set == ("TagA", "TagB")
    assert sub.code_set == (2598919, 2598920)
    assert sub.sub_version == 1700000000000


def test_heartbeat_from_cpp_with_enum_ordinals_and_string_sub_version() -> None:
    body = (
        b'{"clientID":"10.0.0.6@777#12","consumerDataSet":[{"groupName":"g","consumeType":1,"messageModel":0,'
        b'"consumeFromWhere":5,"unitMode":false,"subscriptionDataSet":[{"topic":"T","subString":"*",'
        b'"subVersion":"1700000000000123456","expressionType":"TAG"}]}],"producerDataSet":[]}\n'
    )
    consumer = HeartbeatData.decode(body).consumer_data_set[0]
    assert consumer.consume_type is ConsumeType.CONSUME_PASSIVELY
    assert consumer.message_model is MessageModel.BROADCASTING
    assert consumer.consume_from_where is ConsumeFromWhere.CONSUME_FROM_TIMESTAMP
    assert consumer.subscription_data_set[0].sub_version == 1700000000000123456


def test_a_digit_string_for_an_enum_is_a_name_no_member_has_not_an_ordinal() -> None:
    """fastjson 1.2.69's EnumDeserializer takes an ordinal from a JSON number alone (``JSONToken.LITERAL_INT``); a
    JSON string, digits or not, is looked up by name (its FNV-1a hash, as the bean deserializers' ``scanEnum``), and
    ``"0"`` names no member: null, as 4.9.8's ConsumerData (no initial values) when the field is absent, and left out
    when written, as fastjson writes no null field. Ours read ``"0"`` as the ordinal 0 (found by a review), then the
    field's default (found by a second review)."""
    consumer = ConsumerData.from_json(
        {"groupName": "g", "consumeType": "0", "messageModel": "0", "consumeFromWhere": "4"}
    )
    assert (consumer.consume_type, consumer.message_model, consumer.consume_from_where) == (None, None, None)
    assert ConsumerData.from_json({"groupName": "g"}) == consumer
    assert consumer.to_json() == {"groupName": "g", "subscriptionDataSet": [], "unitMode": False}


def test_heartbeat_rejects_unknown_enum_value() -> None:
    with pytest.raises(BodyDecodeError):
        ConsumerData.from_json({"groupName": "g", "messageModel": 7})


def test_heartbeat_encodes_enums_by_name_with_sorted_keys() -> None:
    hb = HeartbeatData(
        "c@1",
        consumer_data_set=(ConsumerData("g", subscription_data_set=(SubscriptionData("T", sub_version=5),)),),
    )
    assert hb.encode() == (
        b'{"clientID":"c@1","consumerDataSet":[{"consumeFromWhere":"CONSUME_FROM_LAST_OFFSET","consumeType":'
        b'"CONSUME_PASSIVELY","groupName":"g","messageModel":"CLUSTERING","subscriptionDataSet":[{"classFilterMode":'
        b'false,"codeSet":[],"expressionType":"TAG","subString":"*","subVersion":5,"tagsSet":[],"topic":"T"}],'
        b'"unitMode":false}],"producerDataSet":[]}'
    )
    assert HeartbeatData.decode(hb.encode()) == hb


def _wrapper() -> TopicConfigSerializeWrapper:
    return TopicConfigSerializeWrapper(
        topic_config_table={
            "T": TopicConfig("T", 8, 8, 6),
            "O": TopicConfig("O", 4, 2, 7, TopicFilterType.MULTI_TAG),
        },
        data_version=DataVersion(timestamp=1700000000000, counter=3),
    )


def test_register_body_json_as_a_java_broker_sends_it() -> None:
    body = (
        b'{"filterServerList":[],"topicConfigSerializeWrapper":{"dataVersion":{"counter":3,"timestamp":1700000000000},'
        b'"topicConfigTable":{"T":{"order":false,"perm":6,"readQueueNums":8,"topicFilterType":"SINGLE_TAG",'
        b'"topicName":"T","topicSysFlag":0,"writeQueueNums":8}}}}'
    )
    decoded = RegisterBrokerBody.decode(body)
    wrapper = decoded.topic_config_serialize_wrapper
    assert wrapper.data_version == DataVersion(1700000000000, 3)
    assert wrapper.topic_config_table == {"T": TopicConfig("T", 8, 8, 6)}
    assert decoded.encode() == body


def test_compressed_register_body_layout_and_round_trip() -> None:
    body = RegisterBrokerBody(_wrapper(), ["fs:1"])
    compressed = body.encode(compress=True)
    raw = zlib.decompress(compressed)
    version = b'{"counter":3,"timestamp":1700000000000}'
    expected = struct.pack(">i", len(version)) + version + struct.pack(">i", 2)
    for line in (b"T 8 8 6 SINGLE_TAG", b"O 4 2 7 MULTI_TAG"):
        expected += struct.pack(">i", len(line)) + line
    expected += struct.pack(">i", 8) + b'["fs:1"]'
    assert raw == expected
    assert RegisterBrokerBody.decode(compressed, compressed=True) == body


def test_compressed_register_body_truncated_raises() -> None:
    raw = zlib.decompress(RegisterBrokerBody(_wrapper()).encode(compress=True))
    with pytest.raises(BodyDecodeError):
        RegisterBrokerBody.decode(zlib.compress(raw[:-3]), compressed=True)
    with pytest.raises(BodyDecodeError):
        RegisterBrokerBody.decode(b"not zlib", compressed=True)


@pytest.mark.parametrize("numbers", ["2147483648 8 6", "8 8 " + "9" * 101, "-2147483649 8 6", "8 x 6"])
def test_a_compressed_topic_line_with_a_number_a_java_int_cannot_hold_is_refused(numbers: str) -> None:
    """A queue count or perm past a Java int was stored, and every later route query of that topic failed to encode
    it (the route poisoned until the broker's next registration)."""
    raw = zlib.decompress(RegisterBrokerBody(_wrapper()).encode(compress=True))
    bad = raw.replace(b"T 8 8 6 SINGLE_TAG", f"T {numbers} SINGLE_TAG".encode())
    line = f"T {numbers} SINGLE_TAG".encode()
    bad = bad.replace(struct.pack(">i", 18) + line, struct.pack(">i", len(line)) + line)
    with pytest.raises(BodyDecodeError, match="bad topic line"):
        RegisterBrokerBody.decode(zlib.compress(bad), compressed=True)


@pytest.mark.parametrize(
    ("key", "value"),
    [("readQueueNums", 2**31), ("writeQueueNums", "-2147483649"), ("perm", "9" * 30), ("topicSysFlag", 2**31)],
)
def test_a_json_topic_config_with_a_number_a_java_int_cannot_hold_is_refused(key: str, value: object) -> None:
    """As the compressed topic line: fastjson cannot put such a number into TopicConfig's int fields (found by a
    review; failed before: the JSON form stored it and poisoned the topic's route)."""
    obj = {"topicName": "T", "readQueueNums": 8, "writeQueueNums": 8, "perm": 6, key: value}
    body = json.dumps({"topicConfigSerializeWrapper": {"topicConfigTable": {"T": obj}}}).encode()
    with pytest.raises(BodyDecodeError, match=key):
        RegisterBrokerBody.decode(body)
    assert TopicConfig.from_json({**obj, key: 2**31 - 1}).topic_name == "T"


def test_a_json_long_past_64_bits_is_refused() -> None:
    with pytest.raises(BodyDecodeError, match="64-bit"):
        decode_data_version(b'{"counter":' + b"9" * 25 + b',"timestamp":1}')


def test_body_crc32_is_masked_to_a_non_negative_java_int() -> None:
    data = b"\xff" * 7
    assert zlib.crc32(data) > 0x7FFFFFFF
    assert body_crc32(data) == zlib.crc32(data) & 0x7FFFFFFF


def test_topic_list_kv_table_and_consumer_list_shapes() -> None:
    assert TopicList(["A", "B"]).encode() == b'{"topicList":["A","B"]}'
    assert TopicList(["A"], "h:1").encode() == b'{"brokerAddr":"h:1","topicList":["A"]}'
    assert KVTable({"b": "2", "a": "1"}).encode() == b'{"table":{"a":"1","b":"2"}}'
    assert ConsumerListBody(["c1"]).encode() == b'{"consumerIdList":["c1"]}'
    assert TopicList.decode(b'{"topicList":["A"],"brokerAddr":"h:1"}') == TopicList(["A"], "h:1")
    assert KVTable.decode(b'{"table":{"k":"v"}}') == KVTable({"k": "v"})
    assert ConsumerListBody.decode(b'{"consumerIdList":["x"]}') == ConsumerListBody(["x"])


def test_lock_bodies_shape_and_round_trip() -> None:
    mqs = frozenset({MessageQueue("T", "broker-a", 1), MessageQueue("T", "broker-a", 0)})
    req = LockBatchRequestBody("g", "10.0.0.5@12345", mqs)
    assert req.encode() == (
        b'{"clientId":"10.0.0.5@12345","consumerGroup":"g","mqSet":[{"brokerName":"broker-a","queueId":0,'
        b'"topic":"T"},{"brokerName":"broker-a","queueId":1,"topic":"T"}]}'
    )
    assert LockBatchRequestBody.decode(req.encode()) == req
    resp = LockBatchResponseBody(mqs)
    assert LockBatchResponseBody.decode(resp.encode()) == resp
    assert LockBatchResponseBody.decode(b'{"lockOKMQSet":[{"topic":"T","brokerName":"b","queueId":"3"}]}') == (
        LockBatchResponseBody(frozenset({MessageQueue("T", "b", 3)}))
    )


def test_data_version_wire_form_is_sorted_json_and_tolerates_strings() -> None:
    assert encode_data_version(DataVersion(1, 4)) == b'{"counter":4,"timestamp":1}'
    assert decode_data_version(b'{"counter":"7","timestamp":1}') == DataVersion(1, 7)
    with pytest.raises(BodyDecodeError):
        decode_data_version(b'{"counter":"x"}')


def test_topic_config_in_a_wrapper_takes_its_name_from_the_table_key() -> None:
    wrapper = TopicConfigSerializeWrapper.decode(
        b'{"topicConfigTable":{"T":{"perm":"6","topicFilterType":"MULTI_TAG"}}}'
    )
    assert wrapper.topic_config_table == {"T": TopicConfig("T", perm=6, topic_filter_type=TopicFilterType.MULTI_TAG)}
    assert wrapper.data_version == DataVersion(0, 0)


_names = st.text(alphabet=st.characters(codec="utf-8", exclude_categories=("Cs",)), min_size=1, max_size=12)
_ints = st.integers(min_value=0, max_value=2**31 - 1)


@given(
    st.lists(st.builds(QueueData, _names, _ints, _ints, _ints, _ints), max_size=4),
    st.lists(
        st.builds(BrokerData, _names, _names, st.dictionaries(st.integers(0, 16), _names, max_size=3)), max_size=4
    ),
    st.dictionaries(_names, st.lists(_names, max_size=2), max_size=2),
    st.none() | _names,
)
def test_topic_route_data_round_trips(
    queues: list[QueueData],
    brokers: list[BrokerData],
    servers: dict[str, list[str]],
    order_conf: str | None,
) -> None:
    route = TopicRouteData(queues, brokers, servers, order_conf)
    assert TopicRouteData.decode(route.encode()) == route


@given(
    st.dictionaries(
        _names.filter(lambda s: " " not in s),
        st.tuples(_ints, _ints, st.integers(0, 15), st.sampled_from(list(TopicFilterType))),
        max_size=5,
    ),
    st.builds(DataVersion, st.integers(0, 2**62), st.integers(0, 2**62)),
    st.booleans(),
)
def test_register_body_round_trips_in_both_forms(
    topics: dict[str, tuple[int, int, int, TopicFilterType]], version: DataVersion, compress: bool
) -> None:
    table = {name: TopicConfig(name, r, w, p, f) for name, (r, w, p, f) in topics.items()}
    body = RegisterBrokerBody(TopicConfigSerializeWrapper(table, version), [])
    assert RegisterBrokerBody.decode(body.encode(compress), compressed=compress) == body


_leaf = st.none() | st.booleans() | st.integers(-(2**40), 2**40) | st.text(max_size=8)
_fastjson_values = st.recursive(
    _leaf,
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.integers(-50, 50) | st.text(max_size=5), inner, max_size=3)
    ),
    max_leaves=12,
)


def _fastjson(value: object) -> str:
    """What fastjson writes without its string-keys feature: integer map keys unquoted."""
    if isinstance(value, dict):
        items = (f"{k if isinstance(k, int) else json.dumps(k)}:{_fastjson(v)}" for k, v in value.items())
        return "{" + ",".join(items) + "}"
    if isinstance(value, list):
        return "[" + ",".join(_fastjson(v) for v in value) + "]"
    return json.dumps(value)


def _string_keys(value: object) -> object:
    if isinstance(value, dict):
        return {str(k): _string_keys(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_string_keys(v) for v in value]
    return value


@given(_fastjson_values)
def test_fastjson_unquoted_keys_parse_like_quoted_ones(value: object) -> None:
    assert loads(_fastjson(value).encode()) == _string_keys(value)
