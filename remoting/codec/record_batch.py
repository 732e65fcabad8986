"""The store's batch encoder: a whole batch of records written straight into the CommitLog segment in one call.

:func:`encode_entries_into` (one template record plus ``(body, properties, flag)`` entries, the broker's batch send)
and :func:`encode_records_into` (a list of :class:`MessageRecord`) write the records :func:`encode_records` of
:func:`prepare_batch` / :func:`prepare_message` would write, at ``buf[pos:]``, and return
``(total, cq_entries, store_timestamp)``: the bytes written, the batch's ConsumeQueue entries packed as the
ConsumeQueue stores them (20 bytes each, ``phyOffset int64 | size int32 | tagsCode int64`` big-endian, the tags code
being :func:`tags_code_of_raw` of the properties) and the store time ``clock()`` gave the records.

The caller owns the segment: ``room`` is how many bytes may be written at ``pos`` and ``phy_offset`` is the CommitLog
offset of ``pos``. When the batch does not fit, nothing is written, ``clock`` is not called and ``(-total, b"", 0)``
is returned, so the caller can roll the segment and call again.

Errors, raised before anything is written: :class:`BodyTooLongError` for a body over ``max_body``,
:class:`MessageEncodeError` for a bad topic or host, :class:`PropertiesTooLongError`, in :func:`prepare_batch`'s
order (a per-message loop's); :class:`MixedBatchError` when records name more than one topic or queue;
``struct.error`` for a field out of its record field's range.

The work runs in C (``remoting.codec._speedups``, about 0.1 us a small message instead of 2) when the extension is
built; otherwise, or with ``ROCKETRIO_PURE_PYTHON=1`` in the environment at import, in the Python below. Both give
identical bytes (tests/codec/test_record_batch.py). :data:`NATIVE` says which one is in use. Nothing here does I/O.
"""

from __future__ import annotations

import struct
from collections.abc import Callable, Sequence
from typing import Final

from remoting.codec.errors import BodyTooLongError, MessageEncodeError, MixedBatchError
from remoting.codec.message import (
    MessageRecord,
    PreparedMessage,
    _check_template,
    encode_records,
    prepare_batch,
    prepare_message,
    write_record,
)
from remoting.codec.message_properties import tags_code_of_raw
from remoting.codec.native import native_module

__all__ = ["NATIVE", "Encoded", "encode_entries_into", "encode_record_into", "encode_records_into"]

#: (bytes written or -needed, packed ConsumeQueue entries, store timestamp)
Encoded = tuple[int, bytes, int]
Entry = tuple[bytes | memoryview, str, int]
RecordEncoder = Callable[[object, int, int, int, int, Callable[[], int], int, MessageRecord], tuple[int, int, int]]
RecordsEncoder = Callable[[object, int, int, int, int, Callable[[], int], int, Sequence[MessageRecord]], Encoded]

_CQ_ENTRY: Final = struct.Struct(">qiq")


def _py_write(buf: object, pos: int, room: int, phy_offset: int, first_queue_offset: int, clock: Callable[[], int],
              prepared: list[PreparedMessage]) -> Encoded:  # fmt: skip
    """Write prepared records (the pure-Python path)."""
    total = sum(p.size for p in prepared)
    if total > room:
        encode_records(prepared, first_queue_offset, phy_offset, 0)  # a field out of range raises first, as in C
        return -total, b"", 0
    store_ts = clock()
    data = encode_records(prepared, first_queue_offset, phy_offset, store_ts)
    buf[pos : pos + total] = data  # type: ignore[index]
    entries = []
    phy = phy_offset
    for p in prepared:
        entries.append(_CQ_ENTRY.pack(phy, p.size, tags_code_of_raw(p.properties)))
        phy += p.size
    return total, b"".join(entries), store_ts


def _py_entries_into(buf: object, pos: int, room: int, phy_offset: int, first_queue_offset: int,
                     clock: Callable[[], int], max_body: int, template: MessageRecord,
                     entries: Sequence[Entry]) -> Encoded:  # fmt: skip
    prepared = prepare_batch(template, entries, max_body)  # type: ignore[arg-type]
    return _py_write(buf, pos, room, phy_offset, first_queue_offset, clock, prepared)


def _py_records_into(buf: object, pos: int, room: int, phy_offset: int, first_queue_offset: int,
                     clock: Callable[[], int], max_body: int, records: Sequence[MessageRecord]) -> Encoded:  # fmt: skip
    if records:
        topic, queue_id = records[0].topic, records[0].queue_id
        if any(m.topic != topic or m.queue_id != queue_id for m in records):
            raise MixedBatchError("a batch must target one topic and queue")
    prepared = []
    for m in records:
        if len(m.body) > max_body:
            raise BodyTooLongError(f"message body {len(m.body)} bytes exceeds {max_body}")
        prepared.append(prepare_message(m))
    return _py_write(buf, pos, room, phy_offset, first_queue_offset, clock, prepared)


def _py_record_into(buf: object, pos: int, room: int, phy_offset: int, queue_offset: int, clock: Callable[[], int],
                    max_body: int, record: MessageRecord) -> tuple[int, int, int]:  # fmt: skip
    if len(record.body) > max_body:
        raise BodyTooLongError(f"message body {len(record.body)} bytes exceeds {max_body}")
    prepared = prepare_message(record)
    if prepared.size > room:
        # As the C encoder, a field out of range raises (struct.error) before the room is looked at: a caller that
        # rolls its segment on -size would otherwise leave a blank for a record that is never written.
        write_record(bytearray(prepared.size), 0, prepared, queue_offset, phy_offset, 0)
        return -prepared.size, 0, 0
    store_ts = clock()
    write_record(buf, pos, prepared, queue_offset, phy_offset, store_ts)
    return prepared.size, tags_code_of_raw(prepared.properties), store_ts


_speedups: Final = native_module()
#: Whether the C encoder is in use.
NATIVE: Final = _speedups is not None

#: Records at ``buf[pos:]`` (see the module doc).
encode_records_into: Final[RecordsEncoder] = _py_records_into if _speedups is None else _speedups.encode_records_into
#: One record at ``buf[pos:]`` with queue offset ``queue_offset``, for a single append: ``(size, tags code, store
#: timestamp)``, or ``(-size, 0, 0)`` with nothing written when it does not fit; the errors of a one-record batch.
encode_record_into: Final[RecordEncoder] = _py_record_into if _speedups is None else _speedups.encode_record_into


def encode_entries_into(buf: object, pos: int, room: int, phy_offset: int, first_queue_offset: int,
                        clock: Callable[[], int], max_body: int, template: MessageRecord,
                        entries: Sequence[Entry]) -> Encoded:  # fmt: skip
    """One record per entry, the other fields from ``template``, at ``buf[pos:]`` (see the module doc)."""
    if _speedups is None or not entries:
        return _py_entries_into(buf, pos, room, phy_offset, first_queue_offset, clock, max_body, template, entries)
    try:
        topic, sys_flag = _check_template(template)
    except (MessageEncodeError, UnicodeEncodeError):  # a topic too long, or one UTF-8 cannot encode
        first = entries[0][0]
        if len(first) > max_body:  # prepare_batch meets the first body before the template
            raise BodyTooLongError(f"message body {len(first)} bytes exceeds {max_body}") from None
        raise
    t = template
    encoded: Encoded = _speedups.encode_entries_into(
        buf, pos, room, phy_offset, first_queue_offset, clock, max_body, topic, sys_flag, t.queue_id,
        t.born_timestamp, t.born_host, t.store_host, t.reconsume_times, t.prepared_transaction_offset, entries,
    )  # fmt: skip
    return encoded
