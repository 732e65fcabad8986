""":func:`encode_records` (the CommitLog's batch append) writes exactly the bytes :func:`write_record` writes for each
record one after another, whether the records share a template (:func:`prepare_batch`) or not; and the batch body
splits the same from ``bytes``, ``bytearray`` or a ``memoryview``."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from remoting.codec.message import (
    BatchEntry,
    MessageRecord,
    PreparedMessage,
    encode_batch_body,
    encode_records,
    prepare_batch,
    prepare_message,
    split_batch_body,
    write_record,
)
from tests.codec.test_message import records

offsets = st.integers(0, 2**62)


def _one_by_one(prepared: list[PreparedMessage], queue_offset: int, phy: int, store_ts: int) -> bytes:
    buf = bytearray(sum(p.size for p in prepared))
    pos = 0
    for qoff, p in enumerate(prepared, queue_offset):
        pos += write_record(buf, pos, p, qoff, phy + pos, store_ts)
    return bytes(buf)


@given(st.lists(records(), min_size=1, max_size=6), offsets, offsets, offsets)
def test_mixed_records_encode_as_one_by_one(recs: list[MessageRecord], qoff: int, phy: int, ts: int) -> None:
    prepared = [prepare_message(r) for r in recs]
    assert encode_records(prepared, qoff, phy, ts) == _one_by_one(prepared, qoff, phy, ts)


@given(records(), st.lists(st.tuples(st.binary(max_size=40), st.sampled_from(["", "KEYS\x01k", "a\x01中"]),
       st.integers(-(2**31), 2**31 - 1)), min_size=1, max_size=12), offsets, offsets, offsets)  # fmt: skip
def test_a_template_batch_encodes_as_one_by_one(
    template: MessageRecord, entries: list[tuple[bytes, str, int]], qoff: int, phy: int, ts: int
) -> None:
    prepared = prepare_batch(template, entries, 1 << 20)
    prepared += [prepare_message(template), *prepare_batch(template, entries[:2], 1 << 20)]
    assert encode_records(prepared, qoff, phy, ts) == _one_by_one(prepared, qoff, phy, ts)


@given(st.lists(st.builds(BatchEntry, st.binary(max_size=50), st.text(max_size=10), st.integers(-(2**31), 2**31 - 1))))
def test_batch_body_splits_the_same_from_any_buffer(entries: list[BatchEntry]) -> None:
    raw = encode_batch_body(entries)
    expected = [(e.body, e.properties, e.flag) for e in entries]
    assert split_batch_body(raw) == split_batch_body(bytearray(raw)) == split_batch_body(memoryview(raw)) == expected
