"""The broker's batch body split (remoting/codec/batch_body.py ``split_stored_entries``): the C split gives the
Python twin's entries for every well-formed body, and refuses (None) exactly the bodies the twin raises for."""

from __future__ import annotations

import struct

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from remoting.codec import batch_body
from remoting.codec.batch_body import BatchEntry, encode_batch_body, split_stored_entries
from remoting.codec.errors import MessageDecodeError, MessageEncodeError
from tests.codec.speedups import SPEEDUPS, requires_speedups

#: properties texts: empty, ASCII, non-ASCII, already ending with the separator
PROPS = st.text(alphabet="ab\x01\x02é中", max_size=12)
ENTRIES = st.lists(
    st.builds(BatchEntry, st.binary(max_size=40), PROPS, st.integers(-(2**31), 2**31 - 1)), min_size=1, max_size=8
)
SUFFIXES = st.sampled_from(["CLUSTER\x01DefaultCluster", "CLUSTER\x01集群", "TAGS\x01a\x02CLUSTER\x01c"])


def _twin(body: bytes, suffix: str) -> list[tuple[bytes, str, int]] | None:
    try:
        return batch_body._py_split_stored_entries(body, suffix)
    except MessageDecodeError:
        return None


def test_each_message_gets_the_suffix_as_the_store_keeps_it() -> None:
    body = encode_batch_body([BatchEntry(b"x", "KEYS\x01k"), BatchEntry(b"y", ""), BatchEntry(b"z", "A\x01b\x02", 3)])
    assert split_stored_entries(body, "CLUSTER\x01c") == [
        (b"x", "KEYS\x01k\x02CLUSTER\x01c", 0),
        (b"y", "CLUSTER\x01c", 0),
        (b"z", "A\x01b\x02CLUSTER\x01c", 3),
    ]


def test_an_undecodable_property_byte_is_replaced() -> None:
    body = bytearray(encode_batch_body([BatchEntry(b"x", "ab")]))
    body[-1] = 0xFF
    assert split_stored_entries(bytes(body), "S") == [(b"x", "a\ufffd\x02S", 0)]


@pytest.mark.parametrize("cut", [1, 5, 21, 23])
def test_a_truncated_body_raises_the_decode_error(cut: int) -> None:
    body = encode_batch_body([BatchEntry(b"abc", "p\x01v")])
    with pytest.raises(MessageDecodeError):
        split_stored_entries(body[:-cut], "S")


@requires_speedups
@settings(max_examples=400, deadline=None)
@given(ENTRIES, SUFFIXES)
def test_the_c_split_gives_the_twins_entries(entries: list[BatchEntry], suffix: str) -> None:
    body = encode_batch_body(entries)
    assert SPEEDUPS is not None
    for view in (body, bytearray(body), memoryview(body)):
        assert SPEEDUPS.split_stored_entries(view, suffix) == batch_body._py_split_stored_entries(body, suffix)


@requires_speedups
@settings(max_examples=600, deadline=None)
@given(ENTRIES, st.data())
def test_the_c_split_refuses_what_the_twin_raises_for(entries: list[BatchEntry], data: st.DataObject) -> None:
    """Bodies with one field overwritten (sizes, lengths; negative, too large) or cut short."""
    body = bytearray(encode_batch_body(entries))
    if data.draw(st.booleans()):
        at = data.draw(st.integers(0, len(body) - 1))
        fmt = data.draw(st.sampled_from([">i", ">h", ">B"]))
        width = struct.calcsize(fmt)
        lo, hi = {">i": (-(2**31), 2**31 - 1), ">h": (-(2**15), 2**15 - 1), ">B": (0, 255)}[fmt]
        if at + width <= len(body):
            struct.pack_into(fmt, body, at, data.draw(st.integers(lo, hi)))
    else:
        del body[data.draw(st.integers(0, len(body) - 1)) :]
    assert SPEEDUPS is not None
    assert SPEEDUPS.split_stored_entries(bytes(body), "S") == _twin(bytes(body), "S")


@requires_speedups
def test_reference_counts_stay_put_over_many_calls() -> None:
    import sys

    assert SPEEDUPS is not None
    body, suffix = encode_batch_body([BatchEntry(b"x" * 9, "é\x01v"), BatchEntry(b"y", "a\x01b")]), "CLUSTER\x01c"
    bad = body[:-3]
    before = (sys.getrefcount(body), sys.getrefcount(suffix), sys.getrefcount(bad))
    for _ in range(2000):
        SPEEDUPS.split_stored_entries(body, suffix)
        SPEEDUPS.split_stored_entries(bad, suffix)
    assert (sys.getrefcount(body), sys.getrefcount(suffix), sys.getrefcount(bad)) == before


def test_a_non_contiguous_view_is_split_as_its_bytes() -> None:
    body = encode_batch_body([BatchEntry(b"x", "a")])
    strided = memoryview(bytes(b for c in body for b in (c, c)))[::2]
    assert split_stored_entries(strided, "S") == [(b"x", "a\x02S", 0)]


PARTS = st.lists(
    st.tuples(st.binary(max_size=40), st.binary(max_size=40), st.integers(-(2**31) - 2, 2**31 + 1)), max_size=8
)


def _py_parts(entries: list[tuple[bytes, bytes, int]]) -> bytes | None:
    try:
        return batch_body._py_encode_batch_parts(entries)
    except (struct.error, MessageEncodeError):
        return None


@requires_speedups
@settings(max_examples=500, deadline=None)
@given(PARTS)
def test_the_c_batch_encoder_writes_the_twins_bytes(entries: list[tuple[bytes, bytes, int]]) -> None:
    assert SPEEDUPS is not None
    assert SPEEDUPS.encode_batch_parts(entries) == _py_parts(entries)


def test_the_batch_parts_are_the_general_bodys_bytes_and_oversized_properties_raise() -> None:
    entries = [BatchEntry(b"abc", "K\x01v\x02é", 7), BatchEntry(b"", "", -1)]
    parts = [(e.body, e.properties.encode(), e.flag) for e in entries]
    assert batch_body.encode_batch_parts(parts) == encode_batch_body(entries)
    assert len(batch_body.encode_batch_parts([(b"x", b"p" * 32767, 0)])) == 22 + 1 + 32767
    with pytest.raises(MessageEncodeError):
        batch_body.encode_batch_parts([(b"x", b"p" * 32768, 0)])
