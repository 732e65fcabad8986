"""Custom header classes: round trips, tolerant parsing as real clients send values, and exact wire keys."""

from __future__ import annotations

from typing import Any

import attrs
import pytest
from hypothesis import given
from hypothesis import strategies as st

import remoting.codec.headers as headers
from remoting.codec.errors import HeaderFieldError
from remoting.codec.headers import Header, WireField

ALL_HEADERS: list[type[Header]] = sorted(
    (obj for obj in vars(headers).values() if isinstance(obj, type) and issubclass(obj, Header) and obj is not Header),
    key=lambda cls: cls.__name__,
)


def _value_strategy(field: WireField) -> st.SearchStrategy[Any]:
    base: st.SearchStrategy[Any]
    if field.kind is bool:
        base = st.booleans()
    elif field.kind is int:
        bits = 31 if field.int32 else 63
        base = st.integers(min_value=-(1 << bits), max_value=(1 << bits) - 1)
    else:
        base = st.text()
    return st.none() | base if field.optional else base


def header_strategy(cls: type[Header]) -> st.SearchStrategy[Header]:
    return st.builds(cls, **{field.name: _value_strategy(field) for field in cls.wire_fields()})


@pytest.mark.parametrize("cls", ALL_HEADERS, ids=lambda cls: cls.__name__)
@given(data=st.data())
def test_every_header_round_trips_through_ext_fields(cls: type[Header], data: st.DataObject) -> None:
    header = data.draw(header_strategy(cls))
    ext = header.to_ext_fields()
    assert all(isinstance(value, str) for value in ext.values())
    assert cls.from_ext_fields(ext) == header


@pytest.mark.parametrize("cls", ALL_HEADERS, ids=lambda cls: cls.__name__)
def test_every_header_class_is_frozen_and_slotted(cls: type[Header]) -> None:
    assert attrs.has(cls)
    assert "__slots__" in vars(cls)
    assert cls.__setattr__ is not object.__setattr__  # attrs' frozen guard
    assert len(set(cls.wire_keys())) == len(cls.wire_keys())


@pytest.mark.parametrize("cls", ALL_HEADERS, ids=lambda cls: cls.__name__)
def test_missing_required_field_names_the_wire_key(cls: type[Header]) -> None:
    for missing in cls.required_keys():
        ext = {field.key: _sample(field) for field in cls.wire_fields() if field.key != missing}
        with pytest.raises(HeaderFieldError) as info:
            cls.from_ext_fields(ext)
        assert info.value.field == missing
        assert missing in str(info.value)


def _sample(field: WireField) -> str:
    return {bool: "true", int: "7", str: "x"}[field.kind]


def test_none_fields_are_omitted_and_booleans_are_lowercase() -> None:
    ext = headers.GetRouteInfoRequestHeader(topic="T", accept_standard_json_only=True).to_ext_fields()
    assert ext == {"topic": "T", "acceptStandardJsonOnly": "true"}
    assert headers.GetRouteInfoRequestHeader(topic="T").to_ext_fields() == {"topic": "T"}


@pytest.mark.parametrize(
    ("raw", "expected"),
    [("true", True), ("TRUE", True), ("True", True), ("1", True), ("false", False), ("FaLsE", False), ("0", False)],
)
def test_booleans_parse_in_any_case_and_as_digits(raw: str, expected: bool) -> None:
    header = headers.GetRouteInfoRequestHeader.from_ext_fields({"topic": "T", "acceptStandardJsonOnly": raw})
    assert header.accept_standard_json_only is expected


def test_a_boolean_other_than_true_is_false_as_javas_parse_boolean() -> None:
    for text, value in (("yes", False), ("TRUE", True), ("1", True), ("0", False)):
        header = headers.GetRouteInfoRequestHeader.from_ext_fields({"topic": "T", "acceptStandardJsonOnly": text})
        assert header.accept_standard_json_only is value


def test_integers_parse_from_strings_as_clients_send_them() -> None:
    header = headers.UnRegisterBrokerRequestHeader.from_ext_fields(
        {"brokerName": "b", "brokerAddr": "127.0.0.1:10911", "clusterName": "c", "brokerId": " 12 "}
    )
    assert header.broker_id == 12


@pytest.mark.parametrize("raw", ["x", "1.5", "1_000", "9223372036854775808", "--1"])
def test_unparsable_or_out_of_range_long_names_the_field(raw: str) -> None:
    with pytest.raises(HeaderFieldError) as info:
        headers.UnRegisterBrokerRequestHeader.from_ext_fields(
            {"brokerName": "b", "brokerAddr": "a", "clusterName": "c", "brokerId": raw}
        )
    assert info.value.field == "brokerId"


def test_int32_field_rejects_values_beyond_java_int() -> None:
    with pytest.raises(HeaderFieldError) as info:
        headers.WipeWritePermOfBrokerResponseHeader.from_ext_fields({"wipeTopicCount": str(1 << 31)})
    assert info.value.field == "wipeTopicCount"
    assert headers.WipeWritePermOfBrokerResponseHeader.from_ext_fields({"wipeTopicCount": str((1 << 31) - 1)})


def test_empty_number_is_treated_as_absent() -> None:
    header = headers.RegisterBrokerRequestHeader.from_ext_fields(
        {
            "brokerName": "b",
            "brokerAddr": "a",
            "clusterName": "c",
            "haServerAddr": "h",
            "brokerId": "0",
            "bodyCrc32": "",
        }
    )
    assert header.body_crc32 == 0
    with pytest.raises(HeaderFieldError) as info:
        headers.RegisterBrokerRequestHeader.from_ext_fields(
            {"brokerName": "b", "brokerAddr": "a", "clusterName": "c", "haServerAddr": "h", "brokerId": ""}
        )
    assert info.value.field == "brokerId"


def test_unknown_and_acl_keys_are_ignored() -> None:
    header = headers.GetKVConfigRequestHeader.from_ext_fields(
        {"namespace": "ns", "key": "k", "AccessKey": "ak", "Signature": "sig", "OnsChannel": "ALIYUN", "bname": "b"}
    )
    assert header == headers.GetKVConfigRequestHeader(namespace="ns", key="k")


def test_register_broker_wire_keys_match_protocol() -> None:
    assert headers.RegisterBrokerRequestHeader.wire_keys() == (
        "brokerName",
        "brokerAddr",
        "clusterName",
        "haServerAddr",
        "brokerId",
        "compressed",
        "bodyCrc32",
    )
    assert headers.RegisterBrokerResponseHeader.wire_keys() == ("haServerAddr", "masterAddr")
    assert headers.QueryDataVersionResponseHeader.wire_keys() == ("changed",)
    assert headers.GetKVConfigResponseHeader.wire_keys() == ("value",)


# ---- send V1 / V2 -------------------------------------------------------------------------------------------------

V1_KEY_BY_LETTER = {
    "a": "producerGroup",
    "b": "topic",
    "c": "defaultTopic",
    "d": "defaultTopicQueueNums",
    "e": "queueId",
    "f": "sysFlag",
    "g": "bornTimestamp",
    "h": "flag",
    "i": "properties",
    "j": "reconsumeTimes",
    "k": "unitMode",
    "l": "maxReconsumeTimes",
    "m": "batch",
    "n": "bname",
}


def test_v2_letters_map_exactly_to_v1_keys() -> None:
    assert headers.V2_TO_V1_KEYS == V1_KEY_BY_LETTER
    assert headers.SendMessageRequestHeaderV2.wire_keys() == tuple(V1_KEY_BY_LETTER)
    assert set(headers.SendMessageRequestHeader.wire_keys()) == set(V1_KEY_BY_LETTER.values())


@given(header_strategy(headers.SendMessageRequestHeaderV2))
def test_v2_to_v1_renames_every_key_and_keeps_every_value(v2: Any) -> None:
    v1 = v2.to_v1()
    renamed = {V1_KEY_BY_LETTER[letter]: value for letter, value in v2.to_ext_fields().items()}
    assert v1.to_ext_fields() == renamed
    assert headers.SendMessageRequestHeaderV2.from_v1(v1) == v2


@given(header_strategy(headers.SendMessageRequestHeader))
def test_v1_to_v2_and_back_is_identity(v1: Any) -> None:
    assert headers.SendMessageRequestHeaderV2.from_v1(v1).to_v1() == v1


ALI_ONS_V2 = {  # what ali-ons sends, after the JSON serializer coerced its numbers and booleans to strings
    "a": "PID_GROUP",
    "b": "TopicTest",
    "c": "TBW102",
    "d": "4",
    "e": "3",
    "f": "0",
    "g": "1700000000123",
    "h": "0",
    "i": "TAGS\x01TagA\x02",
    "j": "0",
    "k": "false",
}


@pytest.mark.parametrize("code", [310, 320])
def test_parse_send_request_header_reads_letters_for_v2_codes(code: int) -> None:
    v1 = headers.parse_send_request_header(code, ALI_ONS_V2)
    assert v1 == headers.SendMessageRequestHeader(
        producer_group="PID_GROUP",
        topic="TopicTest",
        default_topic="TBW102",
        default_topic_queue_nums=4,
        queue_id=3,
        sys_flag=0,
        born_timestamp=1700000000123,
        flag=0,
        properties="TAGS\x01TagA\x02",
        reconsume_times=0,
        unit_mode=False,
    )
    assert v1.batch is False  # the batch path follows the flag, not the code


def test_parse_send_request_header_reads_long_names_for_code_10() -> None:
    ext = {V1_KEY_BY_LETTER[k]: v for k, v in ALI_ONS_V2.items()} | {"batch": "true", "bname": "broker-a"}
    v1 = headers.parse_send_request_header(10, ext)
    assert v1.batch is True
    assert v1.bname == "broker-a"
    assert v1.queue_id == 3


def test_cpp_client_booleans_as_digits_parse() -> None:
    ext = dict(ALI_ONS_V2, k="0", m="1", AccessKey="ak", OnsChannel="ALIYUN", Signature="sig")
    v1 = headers.parse_send_request_header(320, ext)
    assert (v1.unit_mode, v1.batch) == (False, True)


def test_parse_send_request_header_names_missing_letter() -> None:
    ext = {k: v for k, v in ALI_ONS_V2.items() if k != "g"}
    with pytest.raises(HeaderFieldError) as info:
        headers.parse_send_request_header(310, ext)
    assert info.value.field == "g"


def test_parse_send_request_header_rejects_non_send_codes() -> None:
    with pytest.raises(ValueError, match="not a send request"):
        headers.parse_send_request_header(11, ALI_ONS_V2)


def test_queue_id_beyond_java_int_is_rejected() -> None:
    with pytest.raises(HeaderFieldError) as info:
        headers.parse_send_request_header(310, dict(ALI_ONS_V2, e=str(1 << 40)))
    assert info.value.field == "e"


def test_send_response_header_writes_strings_java_clients_read() -> None:
    header = headers.SendMessageResponseHeader(
        msg_id="0A0000010000291100000000000004D2", queue_id=1, queue_offset=5, msg_region="DefaultRegion", trace_on=True
    )
    assert header.to_ext_fields() == {
        "msgId": "0A0000010000291100000000000004D2",
        "queueId": "1",
        "queueOffset": "5",
        "MSG_REGION": "DefaultRegion",
        "TRACE_ON": "true",
    }


def test_pull_response_requires_all_four_offsets() -> None:
    assert headers.PullMessageResponseHeader.required_keys() == (
        "suggestWhichBrokerId",
        "nextBeginOffset",
        "minOffset",
        "maxOffset",
    )


def test_ali_ons_pull_request_parses() -> None:
    ext = {
        "consumerGroup": "GID",
        "topic": "T",
        "queueId": "0",
        "queueOffset": "120",
        "maxMsgNums": "32",
        "sysFlag": "6",
        "commitOffset": "0",
        "suspendTimeoutMillis": "15000",
        "subscription": "*",
        "subVersion": "1700000000000",
    }
    header = headers.PullMessageRequestHeader.from_ext_fields(ext)
    assert (header.queue_offset, header.sys_flag, header.subscription, header.expression_type) == (120, 6, "*", None)


@pytest.mark.parametrize(
    ("cls", "keys"),
    [
        (headers.UnregisterClientRequestHeader, ("clientID", "producerGroup", "consumerGroup")),
        (headers.QueryConsumerOffsetRequestHeader, ("consumerGroup", "topic", "queueId", "bname", "setZeroIfNotFound")),
        (headers.UpdateConsumerOffsetRequestHeader, ("consumerGroup", "topic", "queueId", "commitOffset", "bname")),
        (headers.SearchOffsetRequestHeader, ("topic", "queueId", "timestamp", "bname", "boundaryType")),
        (headers.GetEarliestMsgStoretimeResponseHeader, ("timestamp",)),
        (
            headers.QueryMessageRequestHeader,
            ("topic", "key", "maxNum", "beginTimestamp", "endTimestamp", "_UNIQUE_KEY_QUERY"),
        ),
        (headers.ResetOffsetRequestHeader, ("topic", "group", "timestamp", "isForce", "queueId", "offset")),
        (headers.UpdateConsumerOffsetResponseHeader, ()),
    ],
)
def test_wire_keys_match_protocol_tables(cls: type[Header], keys: tuple[str, ...]) -> None:
    assert cls.wire_keys() == keys


@pytest.mark.parametrize(
    "cls",
    [
        headers.SendMessageRequestHeader,
        headers.PullMessageRequestHeader,
        headers.QueryConsumerOffsetRequestHeader,
        headers.UpdateConsumerOffsetRequestHeader,
        headers.GetMaxOffsetRequestHeader,
        headers.GetMinOffsetRequestHeader,
        headers.SearchOffsetRequestHeader,
        headers.GetEarliestMsgStoretimeRequestHeader,
        headers.ConsumerSendMsgBackRequestHeader,
        headers.EndTransactionRequestHeader,
        headers.CheckTransactionStateRequestHeader,
    ],
)
def test_rpc_headers_accept_optional_bname(cls: type[Header]) -> None:
    assert "bname" in cls.wire_keys()
    assert "bname" not in cls.required_keys()


# ---- declaration checks -------------------------------------------------------------------------------------------


def test_field_without_wire_key_is_a_declaration_error() -> None:
    @attrs.frozen(slots=True)
    class Broken(Header):
        topic: str

    with pytest.raises(TypeError, match="wire"):
        Broken.from_ext_fields({"topic": "T"})


def test_unsupported_field_type_is_a_declaration_error() -> None:
    @attrs.frozen(slots=True)
    class Broken(Header):
        ratio: float = attrs.field(metadata=headers.wire("ratio"))

    with pytest.raises(TypeError, match="unsupported"):
        Broken.wire_fields()


def test_header_values_are_immutable() -> None:
    header = headers.GetKVConfigRequestHeader(namespace="ns", key="k")
    with pytest.raises(attrs.exceptions.FrozenInstanceError):
        header.key = "other"  # type: ignore[misc]


# Every request of docs/protocol.md#3-custom-headers that carries extFields, leaving out the admin and statistics
# requests of docs/protocol.md#313-broker-admin-headers other than UPDATE_AND_CREATE_TOPIC and DELETE_TOPIC_IN_BROKER
# (HEART_BEAT, CHECK_CLIENT_CONFIG, the lock requests, GET_ALL_TOPIC_CONFIG, GET_BROKER_CLUSTER_INFO and
# GET_ALL_TOPIC_LIST_FROM_NAMESERVER carry none).
PROTOCOL_SECTION_3_CODES = {
    10, 310, 320, 11, 14, 15, 30, 31, 29, 32, 35, 38, 40, 36, 37, 39, 12, 33, 17, 215,
    103, 104, 105, 216, 100, 101, 102, 219, 224, 205, 327, 322,
}  # fmt: skip


def test_every_protocol_request_with_ext_fields_has_a_header_class() -> None:
    missing = PROTOCOL_SECTION_3_CODES - set(headers.HEADER_BY_REQUEST_CODE)
    assert not missing
    assert headers.request_header_class(310) is headers.SendMessageRequestHeaderV2
    assert headers.request_header_class(10) is headers.SendMessageRequestHeader
    assert headers.request_header_class(34) is None
    for code, cls in headers.HEADER_BY_REQUEST_CODE.items():
        assert code in cls.REQUEST_CODES
