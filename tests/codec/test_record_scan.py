"""The replica's record scan (remoting/codec/record_scan.py): the C scan returns exactly what the pure-Python twin
returns, for well-formed logs, logs with records the general path must take (transactions, SCHEDULE_TOPIC_XXXX,
non-ASCII keys, misplaced offsets), and damaged or truncated bytes; and the twin's runs are what the general path
(``read_record_meta``, ``tags_code``, ``index_keys_of_raw``, ``topic_key_hash``) gives record by record.

The comparisons with C skip without the extension or under ``ROCKETRIO_PURE_PYTHON=1`` (tests/codec/speedups.py).
"""

from __future__ import annotations

import itertools
import struct

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from remoting.codec import record_scan
from remoting.codec.message import BLANK_MAGIC, MessageRecord, encode_record
from remoting.codec.message_properties import find_property, index_keys_of_raw, tags_code
from remoting.codec.record_decode import read_record_meta
from store.index_file import topic_key_hash
from tests.codec.speedups import SPEEDUPS, requires_speedups

HOST4 = bytes([10, 0, 0, 9, 0, 0, 0x2A, 0x9F])
HOST6 = bytes(range(16)) + bytes([0, 0, 0x2A, 0x9F])
BASE = 1 << 30

NAMES = st.sampled_from(["TAGS", "KEYS", "UNIQ_KEY", "XTAGS", "KEYSX", "a", "WAIT"])
VALUES = st.one_of(
    st.sampled_from(["", " ", "   ", "TagA", "a b", "  k1  k2 ", "标签", "\U0001f600", "7F000001" + "A" * 24]),
    st.text(alphabet="abcXYZ0189 -_", max_size=12),
)
PROPERTIES = st.lists(st.tuples(NAMES, VALUES).map(lambda nv: f"{nv[0]}\x01{nv[1]}"), max_size=5).map("\x02".join)


@st.composite
def messages(draw: st.DrawFn) -> tuple[MessageRecord, int, int]:
    """A record with its queue offset and store time (drawn from few values, so runs form)."""
    record = MessageRecord(
        topic=draw(st.sampled_from(["TopicA", "TopicB", "主题", "SCHEDULE_TOPIC_XXXX", "T" * 127])),
        body=draw(st.binary(max_size=40)),
        queue_id=draw(st.integers(0, 2)),
        properties=draw(PROPERTIES),
        sys_flag=draw(st.sampled_from([0, 0, 0, 0x2, 0x4, 0x8, 0xC])),
        born_host=draw(st.sampled_from([HOST4, HOST4, HOST6])),
        store_host=draw(st.sampled_from([HOST4, HOST4, HOST6])),
    )
    return record, draw(st.integers(0, 3)), draw(st.sampled_from([1_700_000_000_000, 1_700_000_000_001]))


def _log(msgs: list[tuple[MessageRecord, int, int]], start: int, misplace: int) -> bytearray:
    """The records one after another from ``start`` (record ``misplace`` claims a wrong physical offset)."""
    buf = bytearray(start)
    for i, (record, qoff, ts) in enumerate(msgs):
        phy = BASE + len(buf) + (8 if i == misplace else 0)
        buf += encode_record(record, qoff, phy, ts)
    return buf


@st.composite
def logs(draw: st.DrawFn) -> tuple[bytearray, int, int]:
    """A log, maybe damaged, with a scan's start and limit."""
    start = draw(st.integers(0, 3))
    buf = _log(draw(st.lists(messages(), max_size=12)), start, draw(st.integers(-1, 12)))
    return _ending(draw, buf, struct.pack(">iI", 8, BLANK_MAGIC)), start, draw(st.integers(0, len(buf) + 12))


def _ending(draw: st.DrawFn, buf: bytearray, blank: bytes) -> bytearray:
    """``buf`` maybe ended by a segment's end-of-file ``blank``, then maybe damaged at a byte or two."""
    if draw(st.booleans()):
        buf += blank
    for _ in range(draw(st.integers(0, 2))):
        if buf:
            buf[draw(st.integers(0, len(buf) - 1))] = draw(st.integers(0, 255))
    return buf


@requires_speedups
@settings(max_examples=1500)
@given(log=logs(), with_index=st.booleans())
def test_the_c_scan_equals_the_python_twin(log: tuple[bytearray, int, int], with_index: bool) -> None:
    buf, start, limit = log
    assert SPEEDUPS is not None
    native = SPEEDUPS.scan_records(buf, start, limit, BASE, with_index)
    assert native == record_scan._py_scan_records(buf, start, limit, BASE, with_index)


@requires_speedups
def test_the_c_scan_takes_any_start_and_a_read_only_buffer() -> None:
    assert SPEEDUPS is not None
    record = encode_record(MessageRecord("T", b"x", properties="KEYS\x01a"), 0, BASE, 5)
    for pos in (-5, 0, 3, len(record), len(record) + 9):
        assert SPEEDUPS.scan_records(record, pos, 10**9, BASE, True) == record_scan._py_scan_records(
            record, pos, 10**9, BASE, True
        )


@settings(max_examples=300)
@given(msgs=st.lists(messages(), max_size=12), with_index=st.booleans())
def test_the_runs_are_what_the_general_path_gives_record_by_record(
    msgs: list[tuple[MessageRecord, int, int]], with_index: bool
) -> None:
    buf = _log(msgs, 0, -1)
    end, count, last_ts, cq_runs, index_runs = record_scan.scan_records(buf, 0, len(buf), BASE, with_index)
    entries: list[tuple[str, int, int, int, int, int]] = []
    keyed: list[tuple[int, int, int]] = []
    pos = 0
    for _ in range(count):
        meta = read_record_meta(buf, pos)
        tags = find_property(meta.properties, b"TAGS")
        entries.append((meta.topic, meta.queue_id, meta.queue_offset, BASE + pos, meta.size,
                        tags_code(tags.decode() if tags else None)))  # fmt: skip
        if with_index:
            keyed += [(topic_key_hash(meta.topic, k), BASE + pos, meta.store_timestamp)
                      for k in index_keys_of_raw(meta.properties)]  # fmt: skip
        pos += meta.size
    assert end == pos
    assert last_ts == (msgs[count - 1][2] if count else 0)
    assert [
        (topic, qid, first + i, phy, size, tags)
        for topic, qid, first, packed in cq_runs
        for i, (phy, size, tags) in enumerate(record_scan.CQ_RUN.iter_unpack(packed))
    ] == entries
    assert [
        (h, phy, ts) for ts, packed in index_runs for h, phy in record_scan.INDEX_ENTRY.iter_unpack(packed)
    ] == keyed
    # Runs are maximal: neighbours differ in queue or break the offset sequence; index runs differ in store time.
    for (t1, q1, f1, p1), (t2, q2, f2, _p2) in itertools.pairwise(cq_runs):
        assert (t1, q1, f1 + len(p1) // 20) != (t2, q2, f2)
    assert all(a[0] != b[0] for a, b in itertools.pairwise(index_runs))
    # Where it stopped, the record is not plain (or not whole).
    if count < len(msgs):
        record, _qoff, _ts = msgs[count]
        non_ascii = not record.topic.isascii() or any(
            not (v or b"").isascii()
            for v in (
                find_property(record.properties.encode(), b"TAGS"),
                *((find_property(record.properties.encode(), n) for n in (b"KEYS", b"UNIQ_KEY")) if with_index else ()),
            )
        )
        assert record.sys_flag & 0xC in (0x4, 0xC) or record.topic == "SCHEDULE_TOPIC_XXXX" or non_ascii


HASHES = st.one_of(st.integers(0, 2**31 - 1), st.integers(-(2**31), -1), st.sampled_from([0, 1, 2, 3]))
HASHED = st.lists(st.tuples(HASHES, st.integers(0, 2**40)), max_size=10).map(
    lambda es: b"".join(record_scan.INDEX_ENTRY.pack(h, phy) for h, phy in es)
)


@requires_speedups
@settings(max_examples=800)
@given(slots=st.integers(1, 7), limit=st.integers(2, 12), before=HASHED, packed=HASHED, start=st.integers(1, 13),
       time_diff=st.integers(-(2**31), 2**31 - 1), garbage=st.binary(min_size=4, max_size=4))  # fmt: skip
def test_the_c_index_writes_equal_the_python_twin(slots: int, limit: int, before: bytes, packed: bytes, start: int,
                                                  time_diff: int, garbage: bytes) -> None:  # fmt: skip
    """From any slot contents (even garbage: a slot pointing beyond the entries counts as empty) and any start."""
    assert SPEEDUPS is not None
    entries_at = 40 + slots * 4
    size = entries_at + limit * 20
    outcomes = []
    for put in (SPEEDUPS.index_put_hashed, record_scan._py_index_put_hashed):
        buf = bytearray(size)
        buf[40:44] = garbage
        number, _ = put(buf, before, 1, limit, slots, entries_at, 0) if before else (1, 0)
        try:
            result: object = put(buf, packed, min(start, number), limit, slots, entries_at, time_diff)
        except ValueError as exc:
            result = str(exc)
        outcomes.append((result, bytes(buf)))
    assert outcomes[0] == outcomes[1]


@requires_speedups
def test_the_c_index_writes_refuse_a_geometry_the_buffer_cannot_hold() -> None:
    assert SPEEDUPS is not None
    for args in [(2, 0, 52, 0), (2, 3, 40, 0), (3, 3, 52, 0), (0, 3, 100, 0), (2, 3, 52, 2**31)]:
        limit, slots, entries_at, time_diff = args
        for put in (SPEEDUPS.index_put_hashed, record_scan._py_index_put_hashed):
            buf = bytearray(92)
            with pytest.raises(ValueError):
                put(buf, bytes(12), 1, limit, slots, entries_at, time_diff)
            assert buf == bytearray(92)


@requires_speedups
@pytest.mark.parametrize(
    "properties",
    [
        "KEYS\x01   ",
        "KEYS\x01 a  b ",
        "UNIQ_KEY\x01u\x02KEYS\x01 ",
        "KEYS\x01x\x02KEYS\x01",
        "TAGS\x01\x02KEYS\x01k",
        "",
    ],
)
def test_keys_of_spaces_only_give_no_index_entry_and_no_empty_run(properties: str) -> None:
    assert SPEEDUPS is not None
    buf = encode_record(MessageRecord("T", b"x", properties=properties), 0, BASE, 5)
    native = SPEEDUPS.scan_records(buf, 0, len(buf), BASE, True)
    assert native == record_scan._py_scan_records(buf, 0, len(buf), BASE, True)
    assert all(packed for _ts, packed in native[4])


_ENTRY_HEADER = struct.Struct(">iiqqqiiii")


def _entry_log(msgs: list[tuple[MessageRecord, int, int] | None], start: int, misplace: int) -> bytearray:
    """DLedger entries one after another from ``start``, each holding one record (``None``: an empty entry); the
    record of entry ``misplace`` claims a wrong physical offset."""
    buf = bytearray(start)
    for i, msg in enumerate(msgs):
        body = b""
        if msg is not None:
            record, qoff, ts = msg
            body = encode_record(record, qoff, BASE + len(buf) + 48 + (8 if i == misplace else 0), ts)
        buf += _ENTRY_HEADER.pack(1, 48 + len(body), i, 1, BASE + len(buf), 0, 0, 0, len(body)) + body
    return buf


@st.composite
def entry_logs(draw: st.DrawFn) -> tuple[bytearray, int, int]:
    """A DLedger entry log, maybe damaged, with a scan's start and limit."""
    start = draw(st.integers(0, 3))
    msgs = draw(st.lists(st.one_of(messages(), st.none()), max_size=12))
    buf = _entry_log(msgs, start, draw(st.integers(-1, 12)))
    return _ending(draw, buf, struct.pack(">ii", -1, 8)), start, draw(st.integers(0, len(buf) + 12))


@requires_speedups
@settings(max_examples=1500)
@given(log=entry_logs(), with_index=st.booleans())
def test_the_c_entry_scan_equals_the_python_twin(log: tuple[bytearray, int, int], with_index: bool) -> None:
    buf, start, limit = log
    assert SPEEDUPS is not None
    native = SPEEDUPS.scan_records(buf, start, limit, BASE, with_index, True)
    assert native == record_scan._py_scan_records(buf, start, limit, BASE, with_index, True)


@settings(max_examples=300)
@given(msgs=st.lists(st.one_of(messages(), st.none()), max_size=12), with_index=st.booleans())
def test_an_entry_scan_gives_what_a_record_scan_gives_for_each_entrys_record(
    msgs: list[tuple[MessageRecord, int, int] | None], with_index: bool
) -> None:
    """Walking entries gives the runs of walking their records one by one, and stops at the entry whose record a
    record scan would stop at; ``count`` counts the entries, empty ones too."""
    buf = _entry_log(msgs, 0, -1)
    end, count, last_ts, cq_runs, index_runs = record_scan.scan_records(buf, 0, len(buf), BASE, with_index, True)
    pos, walked, ts = 0, 0, 0
    cq: list[tuple[str, int, int, int, int, int]] = []
    keyed: list[tuple[int, int, int]] = []
    for msg in msgs:
        size = struct.unpack_from(">i", buf, pos + 4)[0]
        if msg is not None:
            one = record_scan._py_scan_records(buf, pos + 48, pos + size, BASE, with_index)
            if one[1] != 1:
                break
            ts = one[2]
            cq += [(t, q, f, *e) for t, q, f, packed in one[3] for e in record_scan.CQ_RUN.iter_unpack(packed)]
            keyed += [(s, *e) for s, packed in one[4] for e in record_scan.INDEX_ENTRY.iter_unpack(packed)]
        pos += size
        walked += 1
    assert (end, count, last_ts) == (pos, walked, ts)
    assert [(t, q, f + i, *e) for t, q, f, packed in cq_runs
            for i, e in enumerate(record_scan.CQ_RUN.iter_unpack(packed))] == cq  # fmt: skip
    assert [(s, *e) for s, packed in index_runs for e in record_scan.INDEX_ENTRY.iter_unpack(packed)] == keyed
