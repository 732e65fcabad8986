"""``store.results.AppendResult``: the C type (``store._appender.AppendResult``) gives the same fields and answers as
its pure-Python twin ``PyAppendResult`` for singles (``None``), offset tuples and packed ConsumeQueue entries."""

from __future__ import annotations

import gc
import struct
import sys

import pytest
from hypothesis import given
from hypothesis import strategies as st

from store.results import AppendResult, PyAppendResult
from tests.store.appender import APPENDER, requires_appender

pytestmark = requires_appender

OFFSET = st.integers(0, 2**62)
HOST = st.sampled_from([bytes(range(8)), bytes(range(20)), b"\x7f\x00\x00\x01\x00\x00\x2a\x9f"])


@st.composite
def _offsets(draw: st.DrawFn) -> tuple[int, tuple[int, ...] | bytes | None]:
    """(phy_offset, phy_offsets) as the appends pass them: None for one record, else a tuple or packed entries whose
    first offset is phy_offset."""
    kind = draw(st.sampled_from(["none", "tuple", "packed"]))
    first = draw(OFFSET)
    if kind == "none":
        return first, None
    sizes = draw(st.lists(st.integers(1, 5000), min_size=1, max_size=40))
    offsets = [first]
    for size in sizes[:-1]:
        offsets.append(offsets[-1] + size)
    if kind == "tuple":
        return first, tuple(offsets)
    tags = draw(st.lists(st.integers(-(2**63), 2**63 - 1), min_size=len(sizes), max_size=len(sizes)))
    return first, b"".join(struct.pack(">qiq", o, s, t) for o, s, t in zip(offsets, sizes, tags, strict=True))


@given(_offsets(), st.integers(0, 2**31 - 1), st.integers(0, 2**62), st.integers(0, 2**62), HOST)
def test_the_c_result_answers_as_the_python_one(offsets: tuple[int, tuple[int, ...] | bytes | None], size: int,
                                                queue_offset: int, store_ts: int, host: bytes) -> None:  # fmt: skip
    phy, phys = offsets
    c, py = (
        AppendResult(phy, size, queue_offset, store_ts, phys, host),
        PyAppendResult(phy, size, queue_offset, store_ts, phys, host),
    )
    assert type(c) is not PyAppendResult
    fields = ("phy_offset", "size", "queue_offset", "store_timestamp", "store_host", "count", "end_offset")
    assert [getattr(c, f) for f in fields] == [getattr(py, f) for f in fields]
    assert repr(c) == repr(py)
    assert c.phy_offsets == py.phy_offsets and c.phy_offsets is c.phy_offsets
    assert c.count == py.count and c.msg_id == py.msg_id


def test_the_c_result_is_read_only_untracked_and_checks_its_arguments() -> None:
    r = AppendResult(5, 10, 2, 3, None, bytes(8))
    assert not gc.is_tracked(r)
    for name in ("phy_offset", "size", "queue_offset", "store_timestamp", "store_host", "phy_offsets", "msg_id"):
        with pytest.raises(AttributeError):
            setattr(r, name, 1)
    for bad in ([5], "x", 5, bytearray(20)):
        with pytest.raises(TypeError):
            AppendResult(5, 10, 2, 3, bad, bytes(8))
    with pytest.raises(TypeError):
        AppendResult(5, 10, 2, 3, None, "host")
    with pytest.raises(TypeError):
        AppendResult("5", 10, 2, 3, None, bytes(8))
    with pytest.raises(OverflowError):
        AppendResult(2**63, 10, 2, 3, None, bytes(8))


def test_the_c_result_keeps_reference_counts() -> None:
    host, packed = bytes(range(8)), struct.pack(">qiq", 7, 3, 0) * 4
    before = (sys.getrefcount(host), sys.getrefcount(packed), sys.getrefcount(None))
    for _ in range(1000):
        r = AppendResult(7, 12, 0, 1, packed, host)
        assert r.phy_offsets == (7, 7, 7, 7) and r.msg_id.count(",") == 3
        single = AppendResult(7, 3, 0, 1, None, host)
        assert single.phy_offsets == (7,)
    del r, single
    after = (sys.getrefcount(host), sys.getrefcount(packed), sys.getrefcount(None))
    assert after[:2] == before[:2]
    assert abs(after[2] - before[2]) < 100  # None's count moves with the interpreter's own use; a leak would be 1000s
    assert APPENDER is not None and AppendResult is APPENDER.AppendResult
