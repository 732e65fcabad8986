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


def test_unparsable_boolean_names_the_field() -> None:
    with pytest.raises(HeaderFieldError) as info:
        headers.GetRouteInfoRequestHeader.from_ext_fields({"topic": "T", "acceptStandardJsonOnly": "yes"})
    assert info.value.field == "acceptStandardJsonOnly"


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
