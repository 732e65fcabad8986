"""The C record scan and batch encoder agree with their pure-Python twins at the int64 edge (found by a review under
UBSAN, each test failing on the code before: the C code wrapped a signed 64-bit sum, undefined behaviour in C, where
Python's ints do not). Each test compares the C function with its twin on one triggering input."""

from __future__ import annotations

import struct

import pytest

from remoting.codec import record_batch, record_scan
from remoting.codec.message import MessageRecord, encode_record, prepare_message
from tests.codec.speedups import SPEEDUPS, requires_speedups

HOST4 = bytes([10, 0, 0, 9, 0, 0, 0x2A, 0x9F])
BASE = 1 << 30
INT64_MAX = (1 << 63) - 1
INT64_MIN = -(1 << 63)
RECORD = MessageRecord(topic="T", body=b"x", queue_id=0, properties="TAGS\x01a", sys_flag=0, born_host=HOST4,
                       store_host=HOST4)  # fmt: skip


def _outcome(fn: object, *args: object) -> object:
    try:
        return ("ok", fn(*args))  # type: ignore[operator]
    except Exception as exc:
        return ("raised", type(exc))


@requires_speedups
def test_scan_does_not_join_queue_offsets_across_the_int64_wrap() -> None:
    """record_scan.h:274 ``next_qoff = qoff + 1`` wrapped INT64_MAX to INT64_MIN: a record at queue offset INT64_MAX
    followed by one at INT64_MIN (same topic and queue; bytes from a master or a crashed CommitLog) landed in ONE
    ConsumeQueue run in C, two runs in the Python twin (2**63 != -2**63)."""
    buf = bytearray()
    for qoff in (INT64_MAX, INT64_MIN):
        buf += encode_record(RECORD, qoff, BASE + len(buf), 1)
    c = SPEEDUPS.scan_records(bytes(buf), 0, len(buf), BASE, False)
    py = record_scan._py_scan_records(bytes(buf), 0, len(buf), BASE, False)
    assert [(t, q, first, len(packed)) for t, q, first, packed in c[3]] == [
        (t, q, first, len(packed)) for t, q, first, packed in py[3]
    ]
    assert c == py


@requires_speedups
def test_scan_position_check_does_not_wrap_with_a_large_base() -> None:
    """record_scan.h:251 ``phy != base + at`` wrapped for base near INT64_MAX: a record whose physical-offset field is
    INT64_MIN at position 1 of a buffer with base INT64_MAX was taken by C, refused by the twin."""
    buf = bytes(1) + encode_record(RECORD, 0, INT64_MIN, 1)
    assert SPEEDUPS.scan_records(buf, 1, len(buf), INT64_MAX, False) == record_scan._py_scan_records(
        buf, 1, len(buf), INT64_MAX, False
    )


@requires_speedups
@pytest.mark.parametrize(("queue_offset", "phy_offset"), [(INT64_MAX, 0), (0, INT64_MAX - 10)],
                         ids=["queue_offset", "phy_offset"])  # fmt: skip
def test_batch_encoder_refuses_offsets_past_int64_as_the_twin(queue_offset: int, phy_offset: int) -> None:
    """_speedups.c:134/138 (write_all): ``first_queue_offset + i`` and ``phy += size`` wrapped, so the second record of
    a batch starting at INT64_MAX (queue offset) or near it (physical offset) was written with a negative offset and
    the call returned success; the twin's struct.pack raises struct.error before writing."""
    c_buf, py_buf = bytearray(1000), bytearray(1000)
    c = _outcome(record_batch.encode_records_into, c_buf, 0, 1000, phy_offset, queue_offset, lambda: 5, 1 << 20,
                 [RECORD, RECORD])  # fmt: skip
    py = _outcome(record_batch._py_records_into, py_buf, 0, 1000, phy_offset, queue_offset, lambda: 5, 1 << 20,
                  [RECORD, RECORD])  # fmt: skip
    assert py == ("raised", struct.error)
    assert c == py


@requires_speedups
def test_c_batch_encoder_writes_what_its_python_twin_writes_at_the_last_representable_position() -> None:
    """The twin packs each record's own position: a batch whose last record starts at or below INT64_MAX is written
    (a first version of the C check refused it, found by a second review)."""
    assert SPEEDUPS is not None
    records = [MessageRecord("T", b"x", born_host=HOST4, store_host=HOST4) for _ in range(2)]
    total = sum(prepare_message(m).size for m in records)
    phy = INT64_MAX - total + 1  # the last record starts at INT64_MAX - size + 1: representable
    results = []
    for encoder in (record_batch._py_records_into, SPEEDUPS.encode_records_into):
        try:
            results.append(encoder(bytearray(1000), 0, 1000, phy, 0, lambda: 1_700_000_000_123, 10, records)[0])
        except Exception as exc:
            results.append(repr(exc))
    assert results[1] == results[0] == total
