"""Header serializers: every command survives JSON, ROCKETMQ and CBOR, with the documented normalisations."""

from __future__ import annotations

import struct

import attrs
import cbor2
import pytest
from hypothesis import given
from hypothesis import strategies as st

from remoting.codec import LanguageCode, RemotingCommand, SerializeType, decode_payload, encode_command
from remoting.codec.errors import HeaderDecodeError
from remoting.codec.serializers import decode_header, encode_header

INT16 = st.integers(min_value=-(1 << 15), max_value=(1 << 15) - 1)
INT32 = st.integers(min_value=-(1 << 31), max_value=(1 << 31) - 1)


def commands(serialize_type: SerializeType) -> st.SearchStrategy[RemotingCommand]:
    # The ROCKETMQ layout stores code and version as int16; JSON and CBOR carry any int32.
    small = INT16 if serialize_type is SerializeType.ROCKETMQ else INT32
    return st.builds(
        RemotingCommand,
        code=small,
        opaque=INT32,
        flag=INT32,
        language=st.sampled_from(LanguageCode),
        version=small,
        remark=st.none() | st.text(),
        ext_fields=st.dictionaries(st.text(min_size=1), st.text(), max_size=8),
        body=st.binary(max_size=64),
        serialize_type=st.just(serialize_type),
    )


def round_trip(cmd: RemotingCommand) -> RemotingCommand:
    return decode_payload(encode_command(cmd)[4:])


@given(commands(SerializeType.JSON))
def test_json_round_trips_every_command(cmd: RemotingCommand) -> None:
    assert round_trip(cmd) == cmd


@given(commands(SerializeType.CBOR))
def test_cbor_round_trips_every_command(cmd: RemotingCommand) -> None:
    assert round_trip(cmd) == cmd


@given(commands(SerializeType.ROCKETMQ))
def test_rocketmq_round_trips_every_command_up_to_empty_remark(cmd: RemotingCommand) -> None:
    # length 0 is null in the binary layout (readStr): an empty remark or ext value comes back absent, as in Java
    ext = {k: v for k, v in cmd.ext_fields.items() if v}
    expected = attrs.evolve(cmd, remark=cmd.remark or None, ext_fields=ext)
    assert round_trip(cmd) == expected


def test_rocketmq_encodes_empty_remark_as_null() -> None:
    """Documented normalisation: the binary layout has no way to say "" (length 0 means null), as in Java."""
    cmd = RemotingCommand(code=1, remark="", serialize_type=SerializeType.ROCKETMQ)
    assert round_trip(cmd).remark is None
    assert round_trip(attrs.evolve(cmd, serialize_type=SerializeType.JSON)).remark == ""
    assert round_trip(attrs.evolve(cmd, serialize_type=SerializeType.CBOR)).remark == ""


@pytest.mark.parametrize("serialize_type", list(SerializeType))
@given(request=commands(SerializeType.JSON), code=INT16)
def test_response_mirrors_request_serialize_type(
    serialize_type: SerializeType, request: RemotingCommand, code: int
) -> None:
    request = attrs.evolve(request, serialize_type=serialize_type, code=code, version=409)
    response = request.response(0, ext_fields={"queueId": "1"})
    assert response.serialize_type is serialize_type
    assert response.opaque == request.opaque
    assert response.is_response
    frame = encode_command(response)
    assert frame[4] == serialize_type.value
    assert round_trip(response) == response


@pytest.mark.parametrize(
    ("raw", "text"),
    [
        (b"3", "3"),
        (b"-12", "-12"),
        (b"true", "true"),
        (b"false", "false"),
        (b"1.0", "1"),
        (b"1.5", "1.5"),
        (b"1700000000123", "1700000000123"),
        (b"[1,2]", "[1,2]"),
    ],
)
def test_json_ext_field_values_are_coerced_to_strings(raw: bytes, text: str) -> None:
    cmd = decode_header(0, b'{"code":1,"extFields":{"k":' + raw + b"}}", b"")
    assert cmd.ext_fields == {"k": text}


def test_json_null_ext_field_value_drops_the_key() -> None:
    cmd = decode_header(0, b'{"code":1,"extFields":{"k":null,"j":"x"}}', b"")
    assert cmd.ext_fields == {"j": "x"}


def test_cbor_ext_field_values_are_coerced_like_json() -> None:
    data = cbor2.dumps({"code": 310, "extFields": {"d": 4, "k": False, "a": "g"}})
    assert decode_header(SerializeType.CBOR, data, b"").ext_fields == {"d": "4", "k": "false", "a": "g"}


@pytest.mark.parametrize(
    "data",
    [b"", b"[]", b'{"code":"x"}', b'{"code":1,"extFields":[1]}', b"{", b"\xff", b'{"code":1,"opaque":{}}'],
)
def test_malformed_json_headers_raise_header_decode_error(data: bytes) -> None:
    with pytest.raises(HeaderDecodeError):
        decode_header(0, data, b"")


@pytest.mark.parametrize("data", [b"{}", b'{"flag":0,"opaque":5}', b'{"code":null,"opaque":5}'])
def test_a_json_header_without_a_code_decodes_as_code_zero(data: bytes) -> None:
    """fastjson leaves RemotingCommand's ``int code`` at 0 when the key is absent (RemotingSerializable.decode in
    remoting/src/main/java/org/apache/rocketmq/remoting/protocol/), so Java serves such a request."""
    cmd = decode_header(0, data, b"")
    assert cmd.code == 0 and cmd.opaque == (0 if data == b"{}" else 5)


def test_a_rocketmq_header_with_a_negative_ext_fields_length_has_no_ext_fields() -> None:
    """RocketMQSerializable.rocketMQProtocolDecode reads extFields only when their length is above 0."""
    header = struct.pack(">hBhii", 310, 0, 409, 9, 0) + struct.pack(">i", 0) + struct.pack(">i", -1)
    cmd = decode_header(SerializeType.ROCKETMQ, header, b"body")
    assert (cmd.code, cmd.opaque, cmd.ext_fields, cmd.body) == (310, 9, {}, b"body")


def test_unknown_serialize_type_raises_header_decode_error() -> None:
    with pytest.raises(HeaderDecodeError):
        decode_header(7, b"{}", b"")


@pytest.mark.parametrize("serialize_type", list(SerializeType))
def test_encode_header_dispatches_on_the_command_serialize_type(serialize_type: SerializeType) -> None:
    cmd = RemotingCommand(code=105, opaque=3, ext_fields={"topic": "T"}, serialize_type=serialize_type)
    assert decode_header(serialize_type, encode_header(cmd), b"") == cmd
