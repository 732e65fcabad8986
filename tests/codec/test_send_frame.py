"""The producer's send frame and send-result reader (remoting/codec/send_frame.py): the C functions give what the
Python twins give, byte for byte and value for value, and the twin frame is the general encoder's."""

from __future__ import annotations

import sys
from typing import Any

import orjson
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from client.api import STATUS_BY_CODE
from client.message import SendResult
from remoting.codec import send_frame
from remoting.codec.codes import CURRENT_VERSION
from remoting.codec.frame import encode_json_request
from tests.codec.speedups import SPEEDUPS, json_header_variant, requires_speedups

_INT64 = st.integers(-(2**63), 2**63 - 1)
_text = st.text(max_size=12)


def _encoded(members: dict[str, str]) -> bytes:
    """``orjson.dumps(members)`` without its braces, and a comma after it when not empty (a send's ``head``)."""
    return orjson.dumps(members)[1:-1] + b"," if members else b""


@settings(max_examples=500, deadline=None)
@given(
    st.integers(0, 32767),
    st.integers(-(2**31), 2**31 - 1),
    st.dictionaries(st.sampled_from("abcd"), _text),
    st.integers(-(2**31), 2**31 - 1),
    st.dictionaries(st.sampled_from("fghijklm"), _text),
    _text,
    st.binary(max_size=64),
)
def test_the_twin_frame_is_the_general_encoders(
    code: int, opaque: int, before: dict[str, str], queue_id: int, after: dict[str, str], broker: str, body: bytes
) -> None:
    head = _encoded(before) + b'"e":"'
    tail = b'"' + (b"," + orjson.dumps(after)[1:-1] if after else b"")
    fields = {**before, "e": str(queue_id), **after, "n": broker}
    expected = encode_json_request(code, opaque, fields, body)
    frame = send_frame._py_send_frame(code, opaque, head, queue_id, tail, orjson.dumps(broker), body, CURRENT_VERSION)
    assert frame == expected
    if SPEEDUPS is not None:
        native = SPEEDUPS.send_frame(code, opaque, head, queue_id, tail, orjson.dumps(broker), body, CURRENT_VERSION)
        assert native == expected


@requires_speedups
@settings(max_examples=1500, deadline=None)
@given(_INT64, _INT64, st.binary(max_size=40), _INT64, st.binary(max_size=40), st.binary(max_size=20),
       st.binary(max_size=300) | st.binary(max_size=3).map(bytearray), _INT64)  # fmt: skip
def test_the_c_frame_is_the_twins_for_any_parts(
    code: int, opaque: int, head: bytes, queue_id: int, tail: bytes, broker: bytes, body: bytes, version: int
) -> None:
    assert SPEEDUPS is not None
    args = (code, opaque, head, queue_id, tail, broker, body, version)
    assert SPEEDUPS.send_frame(*args) == send_frame._py_send_frame(*args)


@requires_speedups
def test_the_c_frame_refuses_what_it_cannot_write() -> None:
    assert SPEEDUPS is not None
    with pytest.raises(TypeError):
        SPEEDUPS.send_frame(310, 1, "head", 0, b"", b'"b"', b"", 409)
    with pytest.raises(OverflowError):
        SPEEDUPS.send_frame(310, 2**63, b"", 0, b"", b'"b"', b"", 409)
    with pytest.raises(TypeError):
        SPEEDUPS.send_frame(310, 1, b"", 0, b"", b'"b"', "body", 409)
    with pytest.raises(TypeError):
        SPEEDUPS.send_frame(310, 1)


#: The broker's PUT_OK answer, as processors/send_fast.py writes it.
PUT_OK = orjson.loads(
    b'{"code":0,"extFields":{"MSG_REGION":"DefaultRegion","TRACE_ON":"true","msgId":"7F00000100002A9F0000000000001234",'
    b'"queueId":"3","queueOffset":"42"},"flag":1,"language":"JAVA","opaque":9,"serializeTypeCurrentRPC":"JSON",'
    b'"version":401}'
)
#: strings a number may hold: right, signed, spaced, underscored, non-ASCII digits, too long for the fast loop
SHAPES = ["0", "3", "42", "-1", "+1", " 7", "7 ", "1_0", "\u0661", "\u00b2", "1" * 18, "1" * 19, "9" * 40, "", "x",
          "true", "false", "True"]  # fmt: skip
ODD = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-(2**63), 2**63),
    st.floats(allow_nan=False),
    st.sampled_from(SHAPES),
    st.text(max_size=6),
    st.lists(st.integers(-9, 9), max_size=2),
    st.dictionaries(st.text(max_size=2), st.integers(-9, 9), max_size=2),
)
EXT_KEYS = st.sampled_from(["msgId", "queueId", "queueOffset", "MSG_REGION", "TRACE_ON", "recallHandle", "other"])
TOP_KEYS = st.sampled_from(["code", "version", "language", "extFields", "flag"])


@st.composite
def responses(draw: st.DrawFn) -> dict[str, Any]:
    """The PUT_OK header with some values replaced by odd ones (or codes of other statuses) or removed."""
    top = ODD | st.sampled_from([10, 11, 12, 13, 1, 2**31 - 1, -(2**31), 2**31])
    return json_header_variant(draw, PUT_OK, EXT_KEYS, TOP_KEYS, ODD, top)


def test_the_put_ok_answer_is_read() -> None:
    expected = SendResult(STATUS_BY_CODE[0], "uniq", "7F00000100002A9F0000000000001234", "topic", "broker", 3, 42,
                          "DefaultRegion", True, None)  # fmt: skip
    assert send_frame._py_send_result_json(PUT_OK, STATUS_BY_CODE, SendResult, "uniq", "topic", "broker") == expected
    if SPEEDUPS is not None:
        native = SPEEDUPS.send_result_json(PUT_OK, STATUS_BY_CODE, SendResult, "uniq", "topic", "broker")
        assert native == expected and type(native) is SendResult and hash(native) == hash(expected)


@requires_speedups
@settings(max_examples=2000, deadline=None)
@given(responses())
def test_the_c_reader_gives_what_the_python_twin_gives(fields: dict[str, Any]) -> None:
    assert SPEEDUPS is not None
    args = (fields, {**STATUS_BY_CODE, 13: None}, SendResult, "uniq", "topic", "broker")  # a None status is none
    native = SPEEDUPS.send_result_json(*args)
    twin = send_frame._py_send_result_json(*args)
    assert native == twin
    if native is not None:  # every field, including the bool and the ints' exact types
        assert [(type(getattr(native, f)), getattr(native, f)) for f in SendResult.__slots__ if f != "__weakref__"] == [
            (type(getattr(twin, f)), getattr(twin, f)) for f in SendResult.__slots__ if f != "__weakref__"
        ]


@requires_speedups
def test_the_c_reader_calls_a_class_without_those_slots() -> None:
    assert SPEEDUPS is not None
    made: list[tuple[object, ...]] = []

    def cls(*values: object) -> tuple[object, ...]:
        made.append(values)
        return values

    class Plain:
        def __init__(self, *values: object) -> None:
            self.values = values

    native = SPEEDUPS.send_result_json(PUT_OK, STATUS_BY_CODE, Plain, "uniq", "topic", "broker")
    assert isinstance(native, Plain) and native.values[5:7] == (3, 42)
    again = SPEEDUPS.send_result_json(PUT_OK, STATUS_BY_CODE, SendResult, "uniq", "topic", "broker")
    assert type(again) is SendResult  # the class it learns follows the argument
    with pytest.raises(TypeError):
        SPEEDUPS.send_result_json(PUT_OK, STATUS_BY_CODE, cls, "uniq", "topic", "broker")
    assert made == []


@requires_speedups
def test_the_c_reader_holds_no_stray_references() -> None:
    assert SPEEDUPS is not None
    fields = orjson.loads(orjson.dumps(PUT_OK))
    msg_id = fields["extFields"]["msgId"]
    before = sys.getrefcount(msg_id)
    args = (fields, STATUS_BY_CODE, SendResult, "uniq", "topic", "broker")
    results = [SPEEDUPS.send_result_json(*args) for _ in range(50)]
    assert sys.getrefcount(msg_id) == before + 50
    del results
    assert sys.getrefcount(msg_id) == before
    for _ in range(50):
        assert SPEEDUPS.send_result_json({**fields, "code": 1}, STATUS_BY_CODE, SendResult, "u", "t", "b") is None
    assert sys.getrefcount(msg_id) == before


@pytest.mark.parametrize("code", [13, 14, True, "0", None])
def test_a_code_without_a_status_is_left_to_the_general_path(code: object) -> None:
    fields = {**PUT_OK, "code": code}
    statuses = {**STATUS_BY_CODE, 13: None}
    assert send_frame._py_send_result_json(fields, statuses, SendResult, "u", "t", "b") is None
    if SPEEDUPS is not None:
        assert SPEEDUPS.send_result_json(fields, statuses, SendResult, "u", "t", "b") is None
