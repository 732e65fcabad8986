"""The hot-path shortcuts give exactly what the general code gives: the SEND V2 -> V1 one-pass parser and the JSON
header decoder's in-range int fast path."""

from __future__ import annotations

import orjson
import pytest
from hypothesis import given
from hypothesis import strategies as st

from remoting.codec.codes import RequestCode
from remoting.codec.errors import HeaderDecodeError, HeaderFieldError
from remoting.codec.headers.send import SendMessageRequestHeader, SendMessageRequestHeaderV2, parse_send_request_header
from remoting.codec.serializers import decode_json

_LETTERS = "abcdefghijklmn"
_VALUES = st.one_of(
    st.sampled_from(["", "0", "1", "-1", "true", "FALSE", " 7 ", "2147483648", "9223372036854775808", "1_0", "x"]),
    st.text(max_size=8),
    st.integers(-(1 << 40), 1 << 40).map(str),
)


def _general(fields: dict[str, str]) -> SendMessageRequestHeader | str:
    try:
        return SendMessageRequestHeaderV2.from_ext_fields(fields).to_v1()
    except HeaderFieldError as exc:
        return f"{exc.field}: {exc}"


def _direct(fields: dict[str, str]) -> SendMessageRequestHeader | str:
    try:
        return parse_send_request_header(RequestCode.SEND_MESSAGE_V2, fields)
    except HeaderFieldError as exc:
        return f"{exc.field}: {exc}"


@given(st.dictionaries(st.sampled_from(_LETTERS), _VALUES))
def test_send_v2_parses_to_the_same_v1_header_or_the_same_error_as_the_v2_class(fields: dict[str, str]) -> None:
    assert _direct(fields) == _general(fields)


def test_a_well_formed_send_v2_header_parses_to_its_v1_fields() -> None:
    v1 = SendMessageRequestHeader("g", "T", "TBW102", 4, 2, 0, 1700000000000, 0, "K\x01v\x02", 3, False, True, 16, "b")
    fields = SendMessageRequestHeaderV2.from_v1(v1).to_ext_fields()
    assert parse_send_request_header(RequestCode.SEND_BATCH_MESSAGE, fields) == v1


@pytest.mark.parametrize(
    ("header", "expected"),
    [
        ({"code": 10, "opaque": 5, "flag": 0, "version": 409}, (10, 5, 0, 409)),
        ({"code": "10", "opaque": 5.0, "flag": None, "version": 409}, (10, 5, 0, 409)),
        ({"code": 10}, (10, 0, 0, 0)),
        ({"code": None, "opaque": -(1 << 31)}, (0, -(1 << 31), 0, 0)),
        ({"code": True, "opaque": 7, "flag": 1, "version": 0}, (1, 7, 1, 0)),
    ],
)
def test_json_header_int_fields_decode_alike_on_the_fast_and_slow_paths(
    header: dict[str, object], expected: tuple[int, int, int, int]
) -> None:
    cmd = decode_json(orjson.dumps(header), b"")
    assert (cmd.code, cmd.opaque, cmd.flag, cmd.version) == expected


@pytest.mark.parametrize("field", ["code", "opaque", "flag", "version"])
@pytest.mark.parametrize("value", [1 << 31, -(1 << 31) - 1, "x", [1]])
def test_json_header_int_fields_out_of_int32_or_not_numbers_are_rejected(field: str, value: object) -> None:
    header: dict[str, object] = {"code": 10, field: value}
    with pytest.raises(HeaderDecodeError):
        decode_json(orjson.dumps(header), b"")
