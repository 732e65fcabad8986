""":func:`encode_records` (the CommitLog's batch append) writes exactly the bytes :func:`write_record` writes for each
record one after another, whether the records share a template (:func:`prepare_batch`) or not."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from remoting.codec.message import (
    MessageRecord,
    PreparedMessage,
    encode_records,
    prepare_batch,
    prepare_message,
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
