"""FrameDecoder: chunking never changes the result, bad lengths raise typed errors, and no input whatsoever makes the
decoder raise anything but a CodecError (this is the server's security boundary, so it is fuzzed hard)."""

from __future__ import annotations

import itertools
import math
from typing import Any

import cbor2
import orjson
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from remoting.codec import MAX_FRAME, FrameDecoder, LanguageCode, RemotingCommand, SerializeType, encode_command
from remoting.codec.errors import CodecError, FrameLengthError, HeaderDecodeError, HeaderLengthError
from remoting.codec.frame import decode_payload

INT16 = st.integers(min_value=-(1 << 15), max_value=(1 << 15) - 1)
INT32 = st.integers(min_value=-(1 << 31), max_value=(1 << 31) - 1)

commands = st.builds(
    RemotingCommand,
    code=INT16,
    opaque=INT32,
    flag=INT32,
    language=st.sampled_from(LanguageCode),
    version=INT16,
    remark=st.none() | st.text(min_size=1, max_size=20),
    ext_fields=st.dictionaries(st.text(min_size=1, max_size=10), st.text(max_size=20), max_size=5),
    body=st.binary(max_size=300),
    serialize_type=st.sampled_from(SerializeType),
)
command_lists = st.lists(commands, min_size=1, max_size=8)


def feed_in_chunks(data: bytes, cuts: list[int]) -> list[RemotingCommand]:
    """Feed ``data`` split at ``cuts``, draining after every chunk as a reader task does."""
    decoder = FrameDecoder()
    out: list[RemotingCommand] = []
    bounds = [0, *sorted(c % (len(data) + 1) for c in cuts), len(data)]
    for start, end in itertools.pairwise(bounds):
        decoder.receive_data(data[start:end])
        while (cmd := decoder.next_command()) is not None:
            out.append(cmd)
    assert decoder.buffered == 0
    return out


# ---- chunking -----------------------------------------------------------------------------------------------------


@given(cmds=command_lists, cuts=st.lists(st.integers(min_value=0), max_size=20))
def test_any_chunking_yields_the_same_commands(cmds: list[RemotingCommand], cuts: list[int]) -> None:
    stream = b"".join(encode_command(cmd) for cmd in cmds)
    everything_at_once = feed_in_chunks(stream, [])
    assert feed_in_chunks(stream, cuts) == everything_at_once
    assert len(everything_at_once) == len(cmds)
    for got, sent in zip(everything_at_once, cmds, strict=True):
        ext = sent.ext_fields
        if sent.serialize_type is SerializeType.ROCKETMQ:  # an empty string travels as length 0: null (readStr)
            ext = {k: v for k, v in ext.items() if v}
        assert (got.code, got.opaque, got.ext_fields, got.body, got.serialize_type) == (
            sent.code,
            sent.opaque,
            ext,
            sent.body,
            sent.serialize_type,
        )


@settings(max_examples=20)
@given(cmds=command_lists)
def test_one_byte_at_a_time_yields_the_same_commands(cmds: list[RemotingCommand]) -> None:
    stream = b"".join(encode_command(cmd) for cmd in cmds)
    assert feed_in_chunks(stream, list(range(len(stream)))) == feed_in_chunks(stream, [])


def test_large_bodies_across_buffer_compaction_decode_intact() -> None:
    bodies = [bytes([i]) * (70_000 + i) for i in range(5)]
    stream = b"".join(encode_command(RemotingCommand(code=10, opaque=i, body=b)) for i, b in enumerate(bodies))
    cuts = list(range(0, len(stream), 33_333))
    assert [cmd.body for cmd in feed_in_chunks(stream, cuts)] == bodies


def test_need_data_returns_none_until_the_frame_is_complete() -> None:
    frame = encode_command(RemotingCommand(code=105, opaque=1, ext_fields={"topic": "T"}))
    decoder = FrameDecoder()
    for i in range(len(frame) - 1):
        decoder.receive_data(frame[i : i + 1])
        assert decoder.next_command() is None
        assert decoder.buffered == i + 1
    decoder.receive_data(frame[-1:])
    cmd = decoder.next_command()
    assert cmd is not None and cmd.ext_fields == {"topic": "T"}


# ---- typed errors -------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("length", [-(1 << 31), -1, 0, 1, 2, 3])
def test_length_below_four_raises_frame_length_error(length: int) -> None:
    decoder = FrameDecoder()
    decoder.receive_data(length.to_bytes(4, "big", signed=True))
    with pytest.raises(FrameLengthError):
        decoder.next_command()


def test_length_beyond_sixteen_mib_raises_frame_length_error() -> None:
    decoder = FrameDecoder()
    decoder.receive_data((MAX_FRAME - 3).to_bytes(4, "big"))
    with pytest.raises(FrameLengthError):
        decoder.next_command()


def test_length_at_the_limit_waits_for_data() -> None:
    decoder = FrameDecoder()
    decoder.receive_data((MAX_FRAME - 4).to_bytes(4, "big"))
    assert decoder.next_command() is None


def test_custom_frame_limit_is_enforced() -> None:
    decoder = FrameDecoder(max_frame=1024)
    decoder.receive_data((1021).to_bytes(4, "big"))
    with pytest.raises(FrameLengthError):
        decoder.next_command()


@pytest.mark.parametrize("excess", [1, 2, 0xFFFFFF])
def test_header_length_beyond_the_frame_raises_header_length_error(excess: int) -> None:
    header = b'{"code":1}'
    declared = min(len(header) + excess, 0xFFFFFF)
    frame = (4 + len(header)).to_bytes(4, "big") + declared.to_bytes(4, "big") + header
    decoder = FrameDecoder()
    decoder.receive_data(frame)
    with pytest.raises(HeaderLengthError):
        decoder.next_command()


def test_payload_without_header_word_raises_frame_length_error() -> None:
    with pytest.raises(FrameLengthError):
        decode_payload(b"\x00\x00")


def test_unknown_serialize_type_raises_header_decode_error() -> None:
    frame = (4 + 2).to_bytes(4, "big") + b"\x07\x00\x00\x02{}"
    decoder = FrameDecoder()
    decoder.receive_data(frame)
    with pytest.raises(HeaderDecodeError):
        decoder.next_command()


def test_decoder_stays_poisoned_after_an_error() -> None:
    decoder = FrameDecoder()
    decoder.receive_data(b"\x00\x00\x00\x00")
    with pytest.raises(FrameLengthError) as first:
        decoder.next_command()
    decoder.receive_data(encode_command(RemotingCommand(code=1)))
    with pytest.raises(FrameLengthError) as second:
        decoder.next_command()
    assert second.value is first.value


# ---- fuzzing ------------------------------------------------------------------------------------------------------


def drain(decoder: FrameDecoder) -> list[RemotingCommand]:
    """Everything the decoder yields, stopping at the first CodecError; any other exception fails the test."""
    out: list[RemotingCommand] = []
    try:
        while (cmd := decoder.next_command()) is not None:
            out.append(cmd)
    except CodecError:
        pass
    return out


def assert_well_formed(cmd: RemotingCommand) -> None:
    """A decoded command honours its type contract and can always be answered in its own serialize type."""
    assert isinstance(cmd.code, int) and isinstance(cmd.opaque, int) and isinstance(cmd.flag, int)
    assert all(isinstance(k, str) and isinstance(v, str) for k, v in cmd.ext_fields.items())
    assert cmd.remark is None or isinstance(cmd.remark, str)
    encode_command(cmd.response(1, remark="x", ext_fields={"k": "v"}))
    if cmd.serialize_type is not SerializeType.ROCKETMQ or -(1 << 15) <= cmd.code < (1 << 15):
        encode_command(cmd)


def fuzz(data: bytes, cuts: list[int]) -> None:
    decoder = FrameDecoder()
    bounds = [0, *sorted(c % (len(data) + 1) for c in cuts), len(data)]
    for start, end in itertools.pairwise(bounds):
        decoder.receive_data(data[start:end])
        for cmd in drain(decoder):
            assert_well_formed(cmd)


def frame_of(serialize_type: int, header: bytes, body: bytes = b"") -> bytes:
    return (
        (4 + len(header) + len(body)).to_bytes(4, "big")
        + bytes([serialize_type & 0xFF])
        + len(header).to_bytes(3, "big")
        + header
        + body
    )


FUZZ = settings(max_examples=400, suppress_health_check=[HealthCheck.too_slow], deadline=None)


@FUZZ
@given(data=st.binary(max_size=512), cuts=st.lists(st.integers(min_value=0), max_size=4))
def test_random_bytes_raise_only_codec_errors(data: bytes, cuts: list[int]) -> None:
    fuzz(data, cuts)


@FUZZ
@given(
    serialize_type=st.sampled_from([0, 1, 0xCB]) | st.integers(0, 255),
    header=st.binary(max_size=256),
    body=st.binary(max_size=16),
)
def test_random_headers_in_valid_frames_raise_only_codec_errors(
    serialize_type: int, header: bytes, body: bytes
) -> None:
    fuzz(frame_of(serialize_type, header, body), [])


@st.composite
def mutated_streams(draw: st.DrawFn) -> bytes:
    stream = bytearray(b"".join(encode_command(cmd) for cmd in draw(command_lists)))
    for _ in range(draw(st.integers(1, 6))):
        kind = draw(st.sampled_from(["flip", "set", "insert", "delete", "truncate"]))
        pos = draw(st.integers(0, max(len(stream) - 1, 0)))
        if kind == "flip" and stream:
            stream[pos] ^= 1 << draw(st.integers(0, 7))
        elif kind == "set" and stream:
            stream[pos] = draw(st.integers(0, 255))
        elif kind == "insert":
            stream[pos:pos] = draw(st.binary(min_size=1, max_size=8))
        elif kind == "delete":
            del stream[pos : pos + draw(st.integers(1, 8))]
        else:
            del stream[pos:]
    return bytes(stream)


@FUZZ
@given(data=mutated_streams(), cuts=st.lists(st.integers(min_value=0), max_size=4))
def test_mutated_valid_streams_raise_only_codec_errors(data: bytes, cuts: list[int]) -> None:
    fuzz(data, cuts)


@st.composite
def mutated_headers(draw: st.DrawFn) -> bytes:
    """One valid frame whose header bytes (not the framing) are mutated, so the header decoders see the damage."""
    cmd = draw(commands)
    frame = encode_command(cmd)
    header_len = int.from_bytes(frame[5:8], "big")
    header = bytearray(frame[8 : 8 + header_len])
    for _ in range(draw(st.integers(1, 4))):
        if not header:
            break
        pos = draw(st.integers(0, len(header) - 1))
        header[pos] = draw(st.integers(0, 255))
    return frame_of(cmd.serialize_type, bytes(header), frame[8 + header_len :])


@FUZZ
@given(data=mutated_headers())
def test_mutated_headers_in_valid_frames_raise_only_codec_errors(data: bytes) -> None:
    fuzz(data, [])


json_scalars = (
    st.none()
    | st.booleans()
    | st.integers(min_value=-(1 << 70), max_value=1 << 70).filter(lambda i: -(1 << 63) <= i < (1 << 64))
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=10)
)
json_values = st.recursive(
    json_scalars,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=5), inner, max_size=3),
    max_leaves=10,
)


def header_objects(values: st.SearchStrategy[Any], numbers: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
    """Header-shaped objects (always with a ``code``) so the fuzz reaches field coercion, not just "no code"."""
    return st.fixed_dictionaries(
        {"code": numbers | values},
        optional={
            "opaque": numbers | values,
            "flag": numbers | values,
            "version": numbers | values,
            "language": st.sampled_from(["JAVA", "CPP", "GO", "?"]) | numbers | values,
            "remark": st.text(max_size=10) | values,
            "extFields": st.dictionaries(st.text(max_size=5), values, max_size=4) | values,
        },
    )


STRUCTURED = settings(max_examples=200, suppress_health_check=[HealthCheck.too_slow], deadline=None)


@STRUCTURED
@given(fields=header_objects(json_values, st.integers(min_value=-(1 << 63), max_value=(1 << 64) - 1)))
def test_arbitrary_json_headers_raise_only_codec_errors(fields: dict[str, Any]) -> None:
    fuzz(frame_of(SerializeType.JSON, orjson.dumps(fields)), [])


cbor_scalars = (
    st.none()
    | st.booleans()
    | st.integers(min_value=-(1 << 80), max_value=1 << 80)
    | st.floats()
    | st.text(max_size=10)
    | st.binary(max_size=10)
    | st.just(math.inf)
    | st.just(cbor2.CBORTag(2, b"\xff" * 2000))  # a bignum beyond Python's int-to-str digit limit
)
cbor_values = st.recursive(
    cbor_scalars,
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=5) | st.integers(-5, 5), inner, max_size=3)
    ),
    max_leaves=10,
)


@STRUCTURED
@given(fields=header_objects(cbor_values, st.integers(min_value=-(1 << 80), max_value=1 << 80) | st.floats()))
def test_arbitrary_cbor_headers_raise_only_codec_errors(fields: dict[Any, Any]) -> None:
    fuzz(frame_of(SerializeType.CBOR, cbor2.dumps(fields)), [])


@pytest.mark.parametrize(
    "header",
    [
        b'{"code":1e400}',
        b'{"code":1e300}',
        b'{"code":1,"opaque":18446744073709551615}',
        b'{"code":1,"extFields":{"k":[18446744073709551615]}}',
    ],
)
def test_json_numbers_outside_int32_are_rejected(header: bytes) -> None:
    decoder = FrameDecoder()
    decoder.receive_data(frame_of(0, header))
    if b"extFields" in header:
        cmd = decoder.next_command()
        assert cmd is not None and cmd.ext_fields == {"k": "[18446744073709551615]"}
    else:
        with pytest.raises(HeaderDecodeError):
            decoder.next_command()


@pytest.mark.parametrize(
    "fields",
    [
        {"code": math.inf},
        {"code": 1, "opaque": 1 << 40},
        {"code": 1, "extFields": {"k": b"raw"}},
        {"code": 1, "extFields": {"k": [1 << 70]}},
        {"code": 1, "extFields": {1: "x"}},
        {"code": 1, "extFields": {"k": {1: 2}}},
        {"code": 1, "extFields": {"k": cbor2.CBORTag(4242, 1)}},
        {"code": 10**5000},
        {"code": 1, "extFields": {"k": 10**5000}},
    ],
    ids=[
        "inf-code",
        "big-opaque",
        "bytes-value",
        "huge-int-in-list",
        "int-key",
        "int-key-nested",
        "unknown-tag",
        "bignum-code",
        "bignum-value",
    ],
)
def test_cbor_values_without_a_string_form_raise_header_decode_error(fields: dict[Any, Any]) -> None:
    decoder = FrameDecoder()
    decoder.receive_data(frame_of(SerializeType.CBOR, cbor2.dumps(fields)))
    with pytest.raises(HeaderDecodeError):
        decoder.next_command()
