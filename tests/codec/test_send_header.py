"""The send fast path's header check (remoting/codec/send_header.py): the C function gives what the Python twin
gives for any JSON header, and the twin takes exactly the common case."""

from __future__ import annotations

from typing import Any

import orjson
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from remoting.codec import send_header
from tests.codec.speedups import SPEEDUPS, json_header_variant, requires_speedups

ALLOWED = frozenset("abcdefghijklmn") | {"AccessKey", "Signature", "SecurityToken"}
BASE: dict[str, Any] = {
    "code": 310,
    "extFields": {
        "a": "PG", "b": "TopicTest", "c": "TBW102", "d": "4", "e": "3", "f": "0", "g": "1700000000000", "h": "0",
        "i": "UNIQ_KEY\x01AB\x02WAIT\x01true", "j": "0", "k": "false", "m": "false", "n": "broker-a",
    },
    "flag": 0, "language": "JAVA", "opaque": 77, "serializeTypeCurrentRPC": "JSON", "version": 401,
}  # fmt: skip

#: strings a digit or flag field may hold: right, too long, signed, spaced, non-ASCII digits (Arabic-Indic one,
#: superscript two), cased
SHAPES = ["", "0", "7", "123456789", "1234567890", "1" * 18, "1" * 19, "+1", " 1", "1 ", "-1", "true", "false",
          "True", "\u0661", "\u00b2", "0x1", "a", "1700000000000"]  # fmt: skip
#: JSON values that are sometimes right and mostly wrong for a field
ODD = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-(2**63), 2**63 - 1),
    st.floats(allow_nan=False),
    st.sampled_from(SHAPES),
    st.text(max_size=6),
    st.lists(st.integers(-9, 9), max_size=2),
    st.dictionaries(st.text(max_size=2), st.integers(-9, 9), max_size=2),
)
EXT_KEYS = st.sampled_from([*"abcdefghijklmn", "AccessKey", "o", "topic"])
TOP_KEYS = st.sampled_from(["code", "opaque", "version", "flag", "extFields"])


@st.composite
def headers(draw: st.DrawFn) -> dict[str, Any]:
    """The base header with some top-level and ``extFields`` values replaced by odd ones or removed."""
    return json_header_variant(draw, BASE, EXT_KEYS, TOP_KEYS, ODD, ODD)


def test_the_common_header_is_read() -> None:
    expected = (77, "TopicTest", "UNIQ_KEY\x01AB\x02WAIT\x01true", 3, 0, 0, 1_700_000_000_000, 0)
    assert send_header.send_v2_fields(orjson.loads(orjson.dumps(BASE)), ALLOWED) == expected


@pytest.mark.parametrize(
    ("where", "key", "value"),
    [
        ("top", "code", 311), ("top", "opaque", 2**31), ("top", "opaque", True), ("top", "version", "401"),
        ("top", "flag", 1), ("top", "extFields", []), ("ext", "b", None), ("ext", "g", "1" * 19), ("ext", "e", "+1"),
        ("ext", "e", "\u0661"), ("ext", "j", 0), ("ext", "k", "True"), ("ext", "m", "true"), ("ext", "n", 5),
        ("ext", "o", "x"), ("ext", "i", 1),
    ],
)  # fmt: skip
def test_anything_else_is_left_to_the_general_path(where: str, key: str, value: object) -> None:
    fields = orjson.loads(orjson.dumps(BASE))
    (fields if where == "top" else fields["extFields"])[key] = value
    assert send_header._py_send_v2_fields(fields, ALLOWED) is None
    if SPEEDUPS is not None:
        assert SPEEDUPS.send_v2_fields(fields, ALLOWED) is None


def test_absent_optional_fields_read_as_their_defaults() -> None:
    fields = orjson.loads(orjson.dumps(BASE))
    for key in "ijkmn":  # l is absent from the base
        del fields["extFields"][key]
    assert send_header._py_send_v2_fields(fields, ALLOWED) == (77, "TopicTest", None, 3, 0, 0, 1_700_000_000_000, 0)


@requires_speedups
@settings(max_examples=1500, deadline=None)
@given(headers())
def test_the_c_check_gives_what_the_python_twin_gives(fields: dict[str, Any]) -> None:
    assert SPEEDUPS is not None
    assert SPEEDUPS.send_v2_fields(fields, ALLOWED) == send_header._py_send_v2_fields(fields, ALLOWED)
