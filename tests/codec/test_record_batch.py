"""The C batch encoder (``remoting.codec._speedups``) writes exactly what the pure-Python path writes: the same record
bytes, the same packed ConsumeQueue entries and the same errors, with nothing written when it raises or lacks room.

Without the extension, or under ``ROCKETRIO_PURE_PYTHON=1``, these tests skip, except that a missing extension fails
under ``CI=true`` (CI has a compiler): tests/codec/speedups.py.
"""

from __future__ import annotations

import struct
import sys
import zlib
from collections.abc import Callable

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from remoting.codec import record_batch
from remoting.codec.crc import ISAL_FROM
from remoting.codec.errors import BodyTooLongError, MessageEncodeError, MixedBatchError, PropertiesTooLongError
from remoting.codec.message import MessageRecord, encode_record, encode_records, prepare_batch, prepare_message
from remoting.codec.message_properties import tags_code_of_raw
from tests.codec.speedups import SPEEDUPS, requires_speedups

pytestmark = requires_speedups

HOST4 = bytes([10, 0, 0, 9, 0, 0, 0x2A, 0x9F])
HOST6 = bytes(range(16)) + bytes([0, 0, 0x2A, 0x9F])
MAX_BODY = 4 << 20

NAMES = st.sampled_from(["TAGS", "KEYS", "UNIQ_KEY", "XTAGS", "TAGSX", "a", "标签"])
SPECIAL = ["", "TagA", "a b", "标签", "\U0001f600", "TAGS\x01x", "\ud800"]
VALUES = st.one_of(st.sampled_from(SPECIAL), st.text(max_size=12))
PAIR = st.tuples(NAMES, VALUES).map(lambda nv: f"{nv[0]}\x01{nv[1]}".replace("\x02", ""))
#: Properties strings: none, Java's form, ali-ons' trailing separator, repeated or non-boundary TAGS, unicode,
#: lone surrogates (which UTF-8 cannot encode) and free text.
PROPERTIES = st.one_of(
    st.lists(PAIR, max_size=5).map("\x02".join),
    st.lists(PAIR, min_size=1, max_size=5).map(lambda ps: "\x02".join(ps) + "\x02"),
    st.text(max_size=40),
)
BODY = st.one_of(st.binary(max_size=64), st.integers(0, 5000).map(lambda n: bytes(i * 7 & 0xFF for i in range(n))))
INT32 = st.integers(-(2**31), 2**31 - 1)
ENTRY = st.tuples(BODY, PROPERTIES, INT32)


@st.composite
def templates(draw: st.DrawFn) -> MessageRecord:
    return MessageRecord(
        topic=draw(st.sampled_from(["TopicTest", "t", "主题", "T" * 127])),
        body=b"",
        queue_id=draw(st.integers(0, 2**31 - 1)),
        sys_flag=draw(st.sampled_from([0, 0x2, 0x4, 0x8, 0x10, 0x30])),
        born_timestamp=draw(st.integers(0, 2**63 - 1)),
        born_host=draw(st.sampled_from([HOST4, HOST6])),
        store_host=draw(st.sampled_from([HOST4, HOST6])),
        reconsume_times=draw(st.integers(0, 16)),
        prepared_transaction_offset=draw(st.integers(0, 2**40)),
    )


def _clock(value: int = 1_700_000_000_123) -> Callable[[], int]:
    return lambda: value


def _both(call: Callable[[Callable[..., record_batch.Encoded], bytearray], record_batch.Encoded],
          native: Callable[..., record_batch.Encoded],
          python: Callable[..., record_batch.Encoded]) -> tuple[object, bytearray, object, bytearray]:  # fmt: skip
    """Run ``call`` with each implementation on its own buffer: (result or exception, buffer) for each."""
    outcomes: list[object] = []
    buffers: list[bytearray] = []
    for encoder in (native, python):
        buf = bytearray(b"\xee" * 400_000)
        try:
            outcomes.append(call(encoder, buf))
        except (ValueError, struct.error, UnicodeError) as exc:
            outcomes.append((type(exc), str(exc)))
        buffers.append(buf)
    return outcomes[0], buffers[0], outcomes[1], buffers[1]


def _native_entries(*args: object) -> record_batch.Encoded:
    assert record_batch.NATIVE
    return record_batch.encode_entries_into(*args)  # type: ignore[arg-type]


@settings(max_examples=300)
@given(template=templates(), entries=st.lists(ENTRY, max_size=8), pos=st.integers(0, 64), phy=st.integers(0, 2**50),
       first=st.integers(0, 2**40))  # fmt: skip
def test_entries_encode_like_prepare_batch_and_encode_records(template: MessageRecord,
        entries: list[tuple[bytes, str, int]], pos: int, phy: int, first: int) -> None:  # fmt: skip
    native, nbuf, python, pbuf = _both(
        lambda enc, buf: enc(buf, pos, 300_000, phy, first, _clock(), MAX_BODY, template, entries),
        _native_entries, record_batch._py_entries_into)  # fmt: skip
    assert native == python
    assert nbuf == pbuf
    if isinstance(native, tuple) and isinstance(native[0], int) and entries:
        total, packed, _ts = native
        records = encode_records(prepare_batch(template, entries, MAX_BODY), first, phy, 1_700_000_000_123)
        assert bytes(nbuf[pos : pos + total]) == records
        tags = [tags_code_of_raw(text.encode()) for _body, text, _flag in entries]
        assert [t for _phy, _size, t in struct.iter_unpack(">qiq", packed)] == tags


def _records(template: MessageRecord, entries: list[tuple[bytes, str, int]]) -> list[MessageRecord]:
    t = template
    return [MessageRecord(t.topic, body, t.queue_id, flag, text, t.sys_flag, t.born_timestamp, t.born_host,
                          t.store_host, t.reconsume_times, t.prepared_transaction_offset)
            for body, text, flag in entries]  # fmt: skip


@settings(max_examples=200)
@given(template=templates(), entries=st.lists(ENTRY, max_size=8), other=templates(), mix=st.integers(0, 8))
def test_records_encode_like_prepare_message_even_when_their_fields_differ(template: MessageRecord,
        entries: list[tuple[bytes, str, int]], other: MessageRecord, mix: int) -> None:  # fmt: skip
    """Records may differ in every field but topic and queue: each is written with its own."""
    records = _records(template, entries)
    if mix < len(records):  # one record with another template's hosts, flags, times (same topic and queue)
        o = other
        records[mix] = MessageRecord(template.topic, records[mix].body, template.queue_id, 7, "TAGS\x01other",
                                     o.sys_flag, o.born_timestamp, o.born_host, o.store_host, o.reconsume_times,
                                     o.prepared_transaction_offset)  # fmt: skip
    assert SPEEDUPS is not None
    native, nbuf, python, pbuf = _both(
        lambda enc, buf: enc(buf, 3, 300_000, 99, 5, _clock(), MAX_BODY, records),
        SPEEDUPS.encode_records_into, record_batch._py_records_into)  # fmt: skip
    assert native == python
    assert nbuf == pbuf
    if isinstance(native, tuple) and isinstance(native[0], int) and records:
        total, _packed, _ts = native
        expected = encode_records([prepare_message(r) for r in records], 5, 99, 1_700_000_000_123)
        assert bytes(nbuf[3 : 3 + total]) == expected


SMALL_ENTRY = st.tuples(st.binary(max_size=64), PROPERTIES, INT32)


@settings(max_examples=60)
@given(template=templates(), entries=st.lists(SMALL_ENTRY, min_size=60, max_size=70), bad=st.integers(0, 80))
def test_batches_past_the_encoders_stack_arrays_encode_alike(template: MessageRecord,
        entries: list[tuple[bytes, str, int]], bad: int) -> None:  # fmt: skip
    """Up to 64 records the C encoders keep their work arrays on the stack, past that on the heap: both alike, also
    when a record past either limit is refused (a body over ``max_body``)."""
    if bad < len(entries):
        entries[bad] = (b"x" * 101, entries[bad][1], entries[bad][2])
    records = _records(template, entries)
    assert SPEEDUPS is not None
    for call, native_encoder, python_encoder in (
        (lambda enc, buf: enc(buf, 1, 300_000, 77, 3, _clock(), 100, template, entries), _native_entries,
         record_batch._py_entries_into),
        (lambda enc, buf: enc(buf, 1, 300_000, 77, 3, _clock(), 100, records), SPEEDUPS.encode_records_into,
         record_batch._py_records_into),
    ):  # fmt: skip
        native, nbuf, python, pbuf = _both(call, native_encoder, python_encoder)
        assert native == python
        assert nbuf == pbuf


@settings(max_examples=200)
@given(template=templates(), entry=ENTRY, room=st.integers(0, 6000), max_body=st.sampled_from([MAX_BODY, 100]))
def test_a_single_record_encodes_like_write_record(template: MessageRecord, entry: tuple[bytes, str, int], room: int,
                                                   max_body: int) -> None:  # fmt: skip
    body, text, flag = entry
    t = template
    record = MessageRecord(t.topic, body, t.queue_id, flag, text, t.sys_flag, t.born_timestamp, t.born_host,
                           t.store_host, t.reconsume_times, t.prepared_transaction_offset)  # fmt: skip
    assert SPEEDUPS is not None
    native, nbuf, python, pbuf = _both(
        lambda enc, buf: enc(buf, 7, room, 2**40, 12, _clock(), max_body, record),
        SPEEDUPS.encode_record_into, record_batch._py_record_into)  # fmt: skip
    assert native == python
    assert nbuf == pbuf
    if isinstance(native, tuple) and isinstance(native[0], int) and native[0] > 0:
        size, tags, _ts = native
        assert bytes(nbuf[7 : 7 + size]) == encode_record(record, 12, 2**40, 1_700_000_000_123)
        assert tags == tags_code_of_raw(text.encode())


@given(entries=st.lists(ENTRY, min_size=1, max_size=6), bad=st.integers(0, 5), kind=st.sampled_from(["body", "props"]))
def test_oversize_body_or_properties_raise_the_same_error_and_write_nothing(
        entries: list[tuple[bytes, str, int]], bad: int, kind: str) -> None:  # fmt: skip
    bad %= len(entries)
    body, text, flag = entries[bad]
    entries[bad] = (b"x" * 5001, text, flag) if kind == "body" else (body, "p" * 32768, flag)
    template = MessageRecord("TopicTest", b"", 1, 0, "", 0, 1, HOST4, HOST4)
    native, nbuf, python, pbuf = _both(
        lambda enc, buf: enc(buf, 0, 300_000, 0, 0, _clock(), 5000, template, entries),
        _native_entries, record_batch._py_entries_into)  # fmt: skip
    assert native == python
    assert isinstance(native, tuple) and native[0] in (BodyTooLongError, PropertiesTooLongError, UnicodeEncodeError)
    assert nbuf == pbuf == bytearray(b"\xee" * 400_000)


@pytest.mark.parametrize(
    ("template", "entries", "error"),
    [
        (MessageRecord("T" * 128, b""), [(b"", "", 0)], MessageEncodeError),
        (MessageRecord("T", b"", born_host=b"1234"), [(b"", "", 0)], MessageEncodeError),
        (MessageRecord("T" * 128, b""), [(b"x" * 11, "", 0)], BodyTooLongError),  # the first body comes first
        (MessageRecord("T\ud800", b""), [(b"", "", 0)], UnicodeEncodeError),  # a topic UTF-8 cannot encode
        (MessageRecord("T\ud800", b""), [(b"x" * 11, "", 0)], BodyTooLongError),  # the first body still first
        (MessageRecord("T", b""), [(b"", "", 0), (b"", "", 2**31)], struct.error),
        (MessageRecord("T", b"", queue_id=2**31), [(b"", "", 0)], struct.error),
    ],
)
@pytest.mark.parametrize("room", [300_000, 0])
def test_bad_template_or_field_raise_what_the_python_path_raises(template: MessageRecord,
        entries: list[tuple[bytes, str, int]], error: type[Exception], room: int) -> None:  # fmt: skip
    """With room or without (a caller rolls its segment on -size): the same error, nothing written."""
    native, nbuf, python, pbuf = _both(
        lambda enc, buf: enc(buf, 0, room, 0, 0, _clock(), 10, template, entries),
        _native_entries, record_batch._py_entries_into)  # fmt: skip
    assert isinstance(native, tuple) and native[0] is error
    assert isinstance(python, tuple) and python[0] is error
    if error is not struct.error:  # struct's own messages name no field; ours do
        assert native == python
    assert nbuf == pbuf == bytearray(b"\xee" * 400_000)


@pytest.mark.parametrize("fields", [{"queue_id": 2**40}, {"flag": 2**31}, {"born_timestamp": 2**64},
                                    {"reconsume_times": 2**31}])  # fmt: skip
@pytest.mark.parametrize("room", [300_000, 0])
def test_a_field_out_of_range_raises_before_the_room_is_looked_at(fields: dict[str, int], room: int) -> None:
    """One record and a list of records, both encoders: struct.error whether the record fits or not, never -size
    (a caller would roll its segment for a record that is then refused)."""
    assert SPEEDUPS is not None
    record = MessageRecord("T", b"x", born_host=HOST4, store_host=HOST4, **fields)  # type: ignore[arg-type]
    for single in (SPEEDUPS.encode_record_into, record_batch._py_record_into):
        with pytest.raises(struct.error):
            single(bytearray(400), 0, room, 0, 0, _clock(), 10, record)
    for batch in (SPEEDUPS.encode_records_into, record_batch._py_records_into):
        with pytest.raises(struct.error):
            batch(bytearray(400), 0, room, 0, 0, _clock(), 10, [record])


def test_records_of_two_queues_are_refused_before_anything_is_checked() -> None:
    assert SPEEDUPS is not None
    records = [MessageRecord("T", b"x" * 99), MessageRecord("T", b"", queue_id=1)]
    for encoder in (SPEEDUPS.encode_records_into, record_batch._py_records_into):
        with pytest.raises(MixedBatchError, match="one topic and queue"):
            encoder(bytearray(1000), 0, 1000, 0, 0, _clock(), 10, records)


@given(entries=st.lists(ENTRY, min_size=1, max_size=6), short=st.integers(1, 50))
def test_a_batch_without_room_writes_nothing_reads_no_clock_and_reports_its_size(
        entries: list[tuple[bytes, str, int]], short: int) -> None:  # fmt: skip
    template = MessageRecord("TopicTest", b"", 1, 0, "", 0, 1, HOST4, HOST6)
    try:
        prepared = prepare_batch(template, entries, MAX_BODY)
    except UnicodeEncodeError:
        return
    total = sum(p.size for p in prepared)

    def clock() -> int:
        raise AssertionError("the clock was read for a batch that does not fit")

    for encoder in (_native_entries, record_batch._py_entries_into):
        buf = bytearray(b"\xee" * (total + 10))
        assert encoder(buf, 10, total - short, 0, 0, clock, MAX_BODY, template, entries) == (-total, b"", 0)
        assert buf == bytearray(b"\xee" * (total + 10))
        assert encoder(buf, 10, total, 0, 0, _clock(5), MAX_BODY, template, entries)[0::2] == (total, 5)


@given(size=st.one_of(st.integers(0, 2 * ISAL_FROM), st.integers(ISAL_FROM, 70_000)), skip=st.integers(0, 15))
def test_the_extension_crc_equals_zlib_at_every_length_and_alignment(size: int, skip: int) -> None:
    assert SPEEDUPS is not None
    data = bytes((i * 131 + size) & 0xFF for i in range(size + skip))
    assert SPEEDUPS.crc32(memoryview(data)[skip:]) == zlib.crc32(data[skip:])


class _DerivedRecord(MessageRecord):
    """Not MessageRecord itself: the extension reads its fields by getattr instead of from the slots."""


def test_records_of_a_subclass_encode_like_message_records() -> None:
    assert SPEEDUPS is not None
    records = [_DerivedRecord("T", b"body", 1, 5, "TAGS\x01a", born_host=HOST6),
               MessageRecord("T", b"", 1, 6, "TAGS\x01b\x02KEYS\x01k")]  # fmt: skip
    native, nbuf, python, pbuf = _both(
        lambda enc, buf: enc(buf, 0, 300_000, 0, 0, _clock(), MAX_BODY, records),
        SPEEDUPS.encode_records_into, record_batch._py_records_into)  # fmt: skip
    assert native == python
    assert nbuf == pbuf
    single = _both(lambda enc, buf: enc(buf, 0, 300_000, 0, 0, _clock(), MAX_BODY, records[0]),
                   SPEEDUPS.encode_record_into, record_batch._py_record_into)  # fmt: skip
    assert single[0] == single[2]
    assert single[1] == single[3]


@pytest.mark.parametrize("max_body", [MAX_BODY, 3])
def test_the_encoder_leaves_every_reference_count_as_it_found_it(max_body: int) -> None:
    """A MessageRecord's fields are borrowed (the record held), a subclass's fetched by getattr (each held): after
    a write or a refusal, the records, their fields and the shared ones are referenced as before."""
    assert SPEEDUPS is not None
    body, text, topic = b"body" * 4, "TAGS\x01a\x02KEYS\x01k", "RefTopic"
    records = [MessageRecord(topic, body, 1, 0, text), _DerivedRecord(topic, body, 1, 0, text),
               MessageRecord(topic, b"", 1, 0, text)] * 3  # fmt: skip
    watched = [*records, body, text, topic, records[0].born_host]
    before = [sys.getrefcount(o) for o in watched]
    for _ in range(3):
        try:
            SPEEDUPS.encode_records_into(bytearray(4096), 0, 4096, 0, 0, _clock(), max_body, records)
        except BodyTooLongError:
            assert max_body == 3
        SPEEDUPS.encode_record_into(bytearray(4096), 0, 4096, 0, 0, _clock(), MAX_BODY, records[1])
    assert [sys.getrefcount(o) for o in watched] == before


@pytest.mark.parametrize("size", [255, 256, 8191, 8192, 70_000])
def test_bodies_on_either_side_of_the_crc_crossovers_encode_alike(size: int) -> None:
    assert SPEEDUPS is not None
    record = MessageRecord("T", bytes(i * 31 & 0xFF for i in range(size)), 0, 0, "TAGS\x01t")
    native, nbuf, python, pbuf = _both(lambda enc, buf: enc(buf, 1, 300_000, 0, 0, _clock(), MAX_BODY, [record] * 3),
                                       SPEEDUPS.encode_records_into, record_batch._py_records_into)  # fmt: skip
    assert native == python
    assert nbuf == pbuf
