"""The C encoder (``remoting.codec._speedups``) under hostile inputs: it never writes past ``room`` or the buffer,
never reads freed memory when the clock runs Python code, keeps reference counts, and refuses what the Python twin
refuses. Without the extension, or under ``ROCKETRIO_PURE_PYTHON=1``, these tests skip, except that a missing
extension fails under ``CI=true`` (tests/codec/speedups.py).
"""

from __future__ import annotations

import struct
import sys
from collections.abc import Callable
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from remoting.codec import record_batch
from remoting.codec.message import MessageRecord
from tests.codec.speedups import SPEEDUPS, requires_speedups

pytestmark = requires_speedups

HOST4 = bytes([10, 0, 0, 9, 0, 0, 0x2A, 0x9F])
GUARD = b"\xa5" * 64


def _entries(buf: object, pos: int, room: int, clock: Callable[[], Any], entries: object) -> Any:
    assert SPEEDUPS is not None
    return SPEEDUPS.encode_entries_into(
        buf, pos, room, 0, 0, clock, 1 << 20, b"T", 0, 0, 0, HOST4, HOST4, 0, 0, entries
    )


def _record(body: object = b"x", properties: str = "") -> MessageRecord:
    return MessageRecord(topic="T", body=body, properties=properties, born_host=HOST4, store_host=HOST4)  # type: ignore[arg-type]


@pytest.mark.parametrize("pos", [2**63 - 1, 2**63 - 50, 2**62, 4097])
def test_position_past_the_buffer_is_refused_not_written(pos: int) -> None:
    """pos + total overflowed Py_ssize_t and passed the bounds check: a write far outside the buffer (segfault)."""
    buf = bytearray(4096)
    with pytest.raises(IndexError):
        _entries(buf, pos, 1 << 40, lambda: 1, [(b"x" * 10, "", 0)])
    assert SPEEDUPS is not None
    with pytest.raises(IndexError):
        SPEEDUPS.encode_record_into(buf, pos, 1 << 40, 0, 0, lambda: 1, 1 << 20, _record())
    assert buf == bytearray(4096)


def test_negative_position_and_room() -> None:
    buf = bytearray(4096)
    with pytest.raises(IndexError):
        _entries(buf, -1, 1 << 20, lambda: 1, [(b"x", "", 0)])
    total, cq, ts = _entries(buf, 0, -5, lambda: 1, [(b"x", "", 0)])
    assert total < 0 and cq == b"" and ts == 0
    assert buf == bytearray(4096)


@settings(max_examples=200, deadline=None)
@given(
    bodies=st.lists(st.binary(max_size=300), min_size=0, max_size=70),
    slack=st.integers(-200, 200),
    pos=st.integers(0, 64),
)
def test_guard_bytes_after_room_untouched(bodies: list[bytes], slack: int, pos: int) -> None:
    entries = [(b, "TAGS\x01a", i) for i, b in enumerate(bodies)]
    need = -_entries(bytearray(0), 0, -1, lambda: 1, entries)[0] if entries else 0
    room = max(0, need + slack)
    buf = bytearray(b"\x00" * pos + b"\x00" * room + GUARD)
    before = bytes(buf)
    total, cq, _ = _entries(buf, pos, room, lambda: 7, entries)
    assert buf[pos + room :] == GUARD
    assert buf[:pos] == before[:pos]
    if need > room:
        assert total == -need and buf == before
    else:
        assert total == need and len(cq) == 20 * len(entries)
        py = bytearray(len(buf))
        template = MessageRecord(topic="T", body=b"", born_host=HOST4, store_host=HOST4)
        record_batch._py_entries_into(py, pos, room, 0, 0, lambda: 7, 1 << 20, template, entries)
        assert buf[pos : pos + total] == py[pos : pos + total]


def test_clock_that_empties_the_entries_list_does_not_free_what_is_written() -> None:
    """The items borrowed bodies and properties from the list's tuples; a clock clearing the list freed them and the
    record got whatever reused that memory (use-after-free)."""
    entries = [(bytes([65]) * 3000 + bytes([i]), "A" * 2000 + str(i), 0) for i in range(8)]
    py = bytearray(100_000)  # the expected bytes, first: a copy of the list would keep the entries alive
    template = MessageRecord(topic="T", body=b"", born_host=HOST4, store_host=HOST4)
    record_batch._py_entries_into(py, 0, len(py), 0, 0, lambda: 1, 1 << 20, template, entries)
    junk: list[bytes] = []

    def clock() -> int:
        entries.clear()
        junk.extend(bytes([66]) * 3001 for _ in range(1000))
        return 1

    buf = bytearray(100_000)
    total, _, _ = _entries(buf, 0, len(buf), clock, entries)
    assert buf[:total] == py[:total]


class _Hostile:
    """A record-like object whose getattr empties the list it is in."""

    def __init__(self, victims: list[object]) -> None:
        self._victims = victims
        self._rec = _record(b"y" * 2000, "KEYS\x01k")

    def __getattr__(self, name: str) -> object:
        self._victims.clear()
        return getattr(self._rec, name)


def test_getattr_that_empties_the_records_list() -> None:
    assert SPEEDUPS is not None
    records: list[object] = []
    records.extend([_Hostile(records), _Hostile(records), _Hostile(records)])
    buf = bytearray(20_000)
    total, cq, _ = SPEEDUPS.encode_records_into(buf, 0, len(buf), 0, 0, lambda: 1, 1 << 20, records)
    assert total > 0 and len(cq) == 60
    assert buf[:total].count(b"y" * 2000) == 3


def test_clock_that_raises_writes_nothing() -> None:
    def clock() -> int:
        raise RuntimeError("clock")

    buf = bytearray(4096)
    with pytest.raises(RuntimeError):
        _entries(buf, 0, 4096, clock, [(b"x", "", 0)])
    assert buf == bytearray(4096)
    assert SPEEDUPS is not None
    with pytest.raises(RuntimeError):
        SPEEDUPS.encode_record_into(buf, 0, 4096, 0, 0, clock, 1 << 20, _record())
    assert buf == bytearray(4096)


@pytest.mark.parametrize("value", [1.5, "1", None, 2**64])
def test_clock_that_returns_a_non_int64_writes_nothing(value: object) -> None:
    buf = bytearray(4096)
    with pytest.raises(struct.error):
        _entries(buf, 0, 4096, lambda: value, [(b"x", "", 0)])
    assert buf == bytearray(4096)


def test_body_types() -> None:
    """bytearray and contiguous memoryview slices are written as bytes; non-contiguous views and objects without the
    buffer protocol are refused before anything is written."""
    data = bytes(range(256)) * 4
    ok = [bytearray(data[:100]), memoryview(data)[10:110], memoryview(bytearray(data))[:0]]
    for body in ok:
        buf = bytearray(4096)
        total, _, _ = _entries(buf, 0, 4096, lambda: 1, [(body, "", 0)])
        ref = bytearray(4096)
        _entries(ref, 0, 4096, lambda: 1, [(bytes(body), "", 0)])
        assert buf[:total] == ref[:total]
    for bad in [memoryview(data)[::2], 12, "text", object()]:
        buf = bytearray(4096)
        with pytest.raises((TypeError, BufferError)):
            _entries(buf, 0, 4096, lambda: 1, [(b"ok", "", 0), (bad, "", 0)])
        assert buf == bytearray(4096)


def test_str_subclass_and_non_str_properties() -> None:
    class S(str):
        pass

    buf = bytearray(4096)
    total, _, _ = _entries(buf, 0, 4096, lambda: 1, [(b"x", S("TAGS\x01a"), 0)])
    ref = bytearray(4096)
    _entries(ref, 0, 4096, lambda: 1, [(b"x", "TAGS\x01a", 0)])
    assert buf[:total] == ref[:total]
    for bad in [b"TAGS\x01a", None, 5]:
        with pytest.raises(TypeError):
            _entries(bytearray(4096), 0, 4096, lambda: 1, [(b"x", bad, 0)])
    with pytest.raises(UnicodeEncodeError):
        _entries(bytearray(4096), 0, 4096, lambda: 1, [(b"x", "\ud800", 0)])


@pytest.mark.parametrize("flag", [2**31, -(2**31) - 1, 2**64, 1.0, True.__class__])
def test_flag_out_of_range(flag: object) -> None:
    buf = bytearray(4096)
    with pytest.raises(struct.error):
        _entries(buf, 0, 4096, lambda: 1, [(b"x", "", flag)])
    assert buf == bytearray(4096)


def test_reference_counts_stable_over_many_calls() -> None:
    body, props = b"z" * 100, "TAGS\x01t\x02KEYS\x01k"
    view_src = bytearray(b"v" * 50)
    entries = [(body, props, 1), (memoryview(view_src), props, 2)] * 40  # past the 64-record stack arrays
    recs = [_record(body, props) for _ in range(70)]
    assert SPEEDUPS is not None
    counts = lambda: [sys.getrefcount(o) for o in (body, props, view_src, recs[0], entries[0])]  # noqa: E731
    buf = bytearray(1 << 20)
    before = counts()
    for _ in range(500):
        _entries(buf, 0, len(buf), lambda: 1, entries)
        _entries(buf, 0, 10, lambda: 1, entries)  # refused
        SPEEDUPS.encode_records_into(buf, 0, len(buf), 0, 0, lambda: 1, 1 << 20, recs)
        SPEEDUPS.encode_record_into(buf, 0, len(buf), 0, 0, lambda: 1, 1 << 20, recs[0])
        with pytest.raises(struct.error):
            _entries(buf, 0, len(buf), lambda: None, entries)
    assert counts() == before
    entries.clear()  # the memoryviews go: no buffer export left behind by the encoder
    view_src.append(1)


@pytest.mark.parametrize("count", [1, 3, 70])
def test_clock_that_rebinds_a_frozen_records_slots(count: int) -> None:
    """A MessageRecord's fields were borrowed from its slots with only the record referenced; object.__setattr__ in
    the clock (frozen is not immutable) freed the body, properties and topic the write then copied."""
    assert SPEEDUPS is not None
    recs = [
        MessageRecord(topic="".join(["T", "p" * 50]), body=bytes([65]) * 3000 + bytes([i]),
                      properties="A" * 2000 + str(i), born_host=bytes(HOST4), store_host=bytes(HOST4))
        for i in range(count)
    ]  # fmt: skip
    expected = bytearray(count * 6000)
    record_batch._py_records_into(expected, 0, len(expected), 0, 0, lambda: 1, 1 << 20, recs)
    junk: list[bytes] = []

    def clock() -> int:
        for rec in recs:
            for name, value in [("body", b""), ("properties", ""), ("topic", "U"), ("born_host", HOST4)]:
                object.__setattr__(rec, name, value)
        junk.extend(bytes([66]) * 3001 for _ in range(1000))
        return 1

    buf = bytearray(len(expected))
    if count == 1:
        size, _, _ = SPEEDUPS.encode_record_into(buf, 0, len(buf), 0, 0, clock, 1 << 20, recs[0])
    else:
        size, _, _ = SPEEDUPS.encode_records_into(buf, 0, len(buf), 0, 0, clock, 1 << 20, recs)
    assert buf[:size] == expected[:size]
