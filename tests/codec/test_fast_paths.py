"""The hot-path shortcuts give exactly what the general code gives: the SEND V2 -> V1 one-pass parser and the JSON
header decoder's in-range int fast path, and FrameDecoder's inlined payload decoding."""

from __future__ import annotations

from collections.abc import Callable
from functools import partial

import orjson
import pytest
from hypothesis import given
from hypothesis import strategies as st

from remoting.codec.codes import RequestCode, SerializeType
from remoting.codec.command import RemotingCommand
from remoting.codec.errors import CodecError, HeaderDecodeError, HeaderFieldError
from remoting.codec.frame import FrameDecoder, decode_payload, encode_command, encode_json_request
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


_NUMBER = st.one_of(
    st.integers(0, 999_999_999).map(str),
    st.sampled_from(["", "-1", "1000000000", "2147483648", "007", " 7", "\u0663", "\u00b2", "9" * 19, "1_0"]),
)
_FLAG = st.sampled_from(["", "true", "false", "TRUE", "1", "0", "x"])
_WELL_FORMED_ISH = st.fixed_dictionaries(
    {"a": st.text(max_size=4), "b": st.text(max_size=4), "c": st.just("TBW102")}
    | {letter: _NUMBER for letter in "defh"}
    | {"g": st.one_of(_NUMBER, st.integers(0, 1 << 64).map(str))},
    optional={"i": st.text(max_size=6), "n": st.text(max_size=4)}
    | {"j": _NUMBER, "l": _NUMBER, "k": _FLAG, "m": _FLAG},
)


@given(_WELL_FORMED_ISH)
def test_send_v2_shortcut_for_client_shaped_headers_agrees_with_the_v2_class(fields: dict[str, str]) -> None:
    """Headers shaped like a real client's (every required letter, digit strings, lower-case booleans) take the
    shortcut; near misses (signs, padding, non-ASCII digits, out-of-range) must fall back to the same answer."""
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


def _decode_or_error(decode: Callable[[], RemotingCommand | None]) -> RemotingCommand | str | None:
    try:
        return decode()
    except CodecError as exc:
        return f"{type(exc).__name__}: {exc}"


@given(
    st.builds(
        RemotingCommand,
        code=st.integers(-(1 << 15), (1 << 15) - 1),
        opaque=st.integers(0, (1 << 31) - 1),
        remark=st.none() | st.text(max_size=10),
        ext_fields=st.dictionaries(st.text(min_size=1, max_size=6), st.text(max_size=10), max_size=4),
        body=st.binary(max_size=200),
        serialize_type=st.sampled_from(SerializeType),
    ),
    st.binary(max_size=6),
)
def test_frame_decoder_gives_what_decode_payload_gives(cmd: RemotingCommand, garbage: bytes) -> None:
    """FrameDecoder inlines decode_payload (views into its buffer): same command or same error,
    for valid frames and for frames whose header is cut or extended with garbage."""
    for frame in (encode_command(cmd), _with_header_garbage(encode_command(cmd), garbage)):
        decoder = FrameDecoder()
        decoder.receive_data(frame)
        assert _decode_or_error(decoder.next_command) == _decode_or_error(partial(decode_payload, frame[4:]))


def _with_header_garbage(frame: bytes, garbage: bytes) -> bytes:
    """``frame`` with ``garbage`` appended to its header (the header length grows with it)."""
    word = int.from_bytes(frame[4:8], "big")
    header_len = word & 0xFFFFFF
    end = 8 + header_len
    payload = (word + len(garbage)).to_bytes(4, "big") + frame[8:end] + garbage + frame[end:]
    return len(payload).to_bytes(4, "big") + payload


@given(
    st.integers(0, 32767),
    st.integers(0, 2**31 - 1),
    st.dictionaries(st.text(min_size=1, max_size=8), st.text(max_size=16), min_size=0, max_size=6),
    st.binary(max_size=64),
)
def test_a_json_request_written_from_its_fields_is_the_frame_of_its_command(
    code: int, opaque: int, fields: dict[str, str], body: bytes
) -> None:
    expected = encode_command(RemotingCommand(code, opaque, ext_fields=fields, body=body))
    assert encode_json_request(code, opaque, fields, body) == expected
