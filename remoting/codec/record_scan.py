"""The replica's record scan: the records a slave received, walked in one call into what its dispatch writes.

:func:`scan_records` ``(buf, pos, limit, base, with_index)`` walks the whole records of ``buf[pos:limit]`` (a CommitLog
segment's mapping; ``base`` is the CommitLog offset of ``buf[0]``) and returns
``(end, count, last_store_timestamp, cq_runs, index_runs)``:

- ``cq_runs``: ``(topic, queue_id, first_queue_offset, packed)`` per run of consecutive records of one queue at
  consecutive queue offsets, ``packed`` their ConsumeQueue entries as the file holds them (20 bytes each,
  ``phyOffset int64 | size int32 | tagsCode int64`` big-endian; the tags code is Java's ``String.hashCode`` of
  ``TAGS``, 0 without);
- ``index_runs``: ``(store_timestamp, packed)`` per run of consecutive records of one store time, ``packed`` their
  index entries (12 bytes each, ``keyHash int32 | phyOffset int64`` big-endian: :func:`~store.index.topic_key_hash`
  of the record's UNIQ_KEY, then of each KEYS token); empty unless ``with_index``.

The scan's index entries go into an IndexFile's mapping with :func:`index_put_hashed` ``(buf, packed, number, limit,
slots, entries_at, time_diff)``: from entry number ``number`` on, until ``limit`` (the file's entry count), each entry
at the head of its hash slot's chain (``keyHash % slots``; a slot pointing at 0 or at ``number`` or beyond counts as
empty and as one more used slot), with ``time_diff`` (seconds from the file's begin time); it returns the next entry
number and how many slots became used. The header is the caller's (store/index_file.py). ``ValueError`` for a
geometry the buffer cannot hold, before anything is written.

It stops at ``end`` before the first record that is not *plain*: one not wholly below ``limit``, a blank, a record
that does not validate as :func:`~remoting.codec.record_decode.read_record_meta` validates it, whose physical offset
field is not where it lies, a prepared or rolled-back transaction, ``SCHEDULE_TOPIC_XXXX``, or a non-ASCII topic,
TAGS, KEYS or UNIQ_KEY. The caller (store/ha/replica.py) dispatches that one record on its general path and scans on;
the master's batch send (store/message_store.py ``_index_written``) takes only the index runs of the batch it just
wrote and indexes the records from that one on from their properties texts.
Never raises for bad bytes; nothing is written.

With the optional sixth argument ``entries`` true, ``buf`` holds DLedger entries instead of bare records (a DLedger
member's CommitLog, dledger/entry.py): each a 48-byte header (``magic`` 1, ``size``, ..., ``bodyLength`` at 44, equal
to ``size - 48``) and then one record of ``bodyLength`` bytes, or nothing (an empty entry, walked over). ``end`` is
then the start of the entry where the walk stopped and ``count`` counts entries, the empty ones too; the record's
physical offset must be where the record lies (past the header). The caller (dledger/commitlog_store.py) takes the
entry it stopped at on its general path.

The work runs in C (``remoting.codec._speedups``) when the extension is built; otherwise, or with
``ROCKETRIO_PURE_PYTHON=1``, in the Python below, which reuses the general path's functions. Both return equal values
(tests/codec/test_record_scan.py).
"""

from __future__ import annotations

import struct
from collections.abc import Callable
from typing import Final

from remoting.codec.errors import MessageDecodeError
from remoting.codec.message_properties import find_property, index_keys_of_raw, java_hash, tags_code
from remoting.codec.native import native_module
from remoting.codec.record_decode import read_record_meta
from remoting.codec.record_layout import (
    MAGIC_V1,
    SYSFLAG_TRANSACTION_MASK,
    SYSFLAG_TRANSACTION_PREPARED,
    SYSFLAG_TRANSACTION_ROLLBACK,
)

__all__ = ["CQ_RUN", "INDEX_ENTRY", "NATIVE", "CqRun", "IndexRun", "Scan", "index_put_hashed", "scan_records"]

#: ``(topic, queue_id, first_queue_offset, packed ConsumeQueue entries)``
CqRun = tuple[str, int, int, bytes]
#: ``(store_timestamp, packed index entries)``
IndexRun = tuple[int, bytes]
#: ``(end, count, last_store_timestamp, cq_runs, index_runs)``
Scan = tuple[int, int, int, list[CqRun], list[IndexRun]]

CQ_RUN: Final = struct.Struct(">qiq")
INDEX_ENTRY: Final = struct.Struct(">iq")
SCHEDULE_TOPIC: Final = "SCHEDULE_TOPIC_XXXX"
_HEAD: Final = struct.Struct(">iI")
#: a DLedger entry's header: ``magic size`` at its start, ``bodyLength`` at 44
ENTRY_HEAD: Final = 48
_ENTRY_MAGIC: Final = 1
_ENTRY_SIZES: Final = struct.Struct(">ii")
_BODY_LENGTH: Final = struct.Struct(">i")
_INT_MAX: Final = 0x7FFFFFFF


def _ascii(raw: bytes | None) -> bool:
    return raw is None or raw.isascii()


def _entry_record(view: memoryview, pos: int, limit: int) -> tuple[int, int] | None:
    """The DLedger entry at ``pos``: ``(record start, entry end)``, ``(-1, entry end)`` for an empty one, ``None``
    when no well-formed entry lies wholly below ``limit``."""
    if limit - pos < ENTRY_HEAD:
        return None
    magic, size = _ENTRY_SIZES.unpack_from(view, pos)
    if magic != _ENTRY_MAGIC or not ENTRY_HEAD <= size <= limit - pos:
        return None
    if _BODY_LENGTH.unpack_from(view, pos + 44)[0] != size - ENTRY_HEAD:
        return None
    if size == ENTRY_HEAD:
        return -1, pos + size
    at = pos + ENTRY_HEAD
    if size - ENTRY_HEAD < _HEAD.size or _BODY_LENGTH.unpack_from(view, at)[0] != size - ENTRY_HEAD:
        return None
    return at, pos + size


def _py_scan_records(buf: object, pos: int, limit: int, base: int, with_index: bool, entries: bool = False) -> Scan:
    view = buf if isinstance(buf, memoryview) else memoryview(buf)  # type: ignore[arg-type]
    limit = min(limit, len(view))
    count = last_ts = 0
    cq_runs: list[CqRun] = []
    index_runs: list[IndexRun] = []
    run: list[bytes] = []
    run_key: tuple[str, int, int] | None = None  # topic, queue id, next queue offset
    run_first = 0
    idx: list[bytes] = []
    idx_ts = -1
    while pos >= 0 and limit - pos >= _HEAD.size:
        at = pos
        if entries:
            entry = _entry_record(view, pos, limit)
            if entry is None:
                break
            if entry[0] < 0:  # an empty entry (a new leader's first): nothing to dispatch
                count += 1
                pos = entry[1]
                continue
            at = entry[0]
        size, magic = _HEAD.unpack_from(view, at)
        if magic != MAGIC_V1 or size <= 0 or at + size > limit:
            break
        try:
            meta = read_record_meta(view[:limit], at)
        except MessageDecodeError:
            break
        tx = meta.sys_flag & SYSFLAG_TRANSACTION_MASK
        if meta.phy_offset != base + at or tx in (SYSFLAG_TRANSACTION_PREPARED, SYSFLAG_TRANSACTION_ROLLBACK):
            break
        topic, props = meta.topic, meta.properties
        tags = find_property(props, b"TAGS")
        if topic == SCHEDULE_TOPIC or not topic.isascii() or not _ascii(tags):
            break
        if with_index and not (_ascii(find_property(props, b"KEYS")) and _ascii(find_property(props, b"UNIQ_KEY"))):
            break
        key = (topic, meta.queue_id, meta.queue_offset)
        if key != run_key:
            if run_key is not None:
                cq_runs.append((run_key[0], run_key[1], run_first, b"".join(run)))
            run, run_first = [], meta.queue_offset
        run.append(CQ_RUN.pack(meta.phy_offset, meta.size, tags_code(tags.decode() if tags else None)))
        run_key = (topic, meta.queue_id, meta.queue_offset + 1)
        keys = index_keys_of_raw(props) if with_index else []
        if keys:
            if meta.store_timestamp != idx_ts and idx:
                index_runs.append((idx_ts, b"".join(idx)))
                idx = []
            idx_ts = meta.store_timestamp
            for k in keys:
                h = abs(java_hash(topic + "#" + k))
                idx.append(INDEX_ENTRY.pack(0 if h > _INT_MAX else h, meta.phy_offset))
        last_ts = meta.store_timestamp
        count += 1
        pos = at + size
    if run_key is not None:
        cq_runs.append((run_key[0], run_key[1], run_first, b"".join(run)))
    if idx:
        index_runs.append((idx_ts, b"".join(idx)))
    return pos, count, last_ts, cq_runs, index_runs


_SLOT: Final = struct.Struct(">i")
_TAIL: Final = struct.Struct(">ii")


def _py_index_put_hashed(buf: object, packed: bytes, number: int, limit: int, slots: int, entries_at: int,
                         time_diff: int) -> tuple[int, int]:  # fmt: skip
    mm: memoryview = memoryview(buf)  # type: ignore[arg-type]
    if slots <= 0 or number < 1 or not 40 + slots * 4 <= entries_at <= len(mm) or limit > (len(mm) - entries_at) // 20:
        raise ValueError("index_put_hashed: arguments outside the file's geometry")
    if len(packed) % INDEX_ENTRY.size or not -(2**31) <= time_diff < 2**31:
        raise ValueError("index_put_hashed: arguments outside the file's geometry")
    added = 0
    for at in range(0, len(packed), INDEX_ENTRY.size):
        if number >= limit:
            break
        slot_pos = 40 + _SLOT.unpack_from(packed, at)[0] % slots * 4
        prev = _SLOT.unpack_from(mm, slot_pos)[0]
        if prev <= 0 or prev >= number:
            prev = 0
            added += 1
        entry = entries_at + number * 20
        mm[entry : entry + INDEX_ENTRY.size] = packed[at : at + INDEX_ENTRY.size]
        _TAIL.pack_into(mm, entry + INDEX_ENTRY.size, time_diff, prev)
        _SLOT.pack_into(mm, slot_pos, number)
        number += 1
    return number, added


Scanner = Callable[..., Scan]
IndexWriter = Callable[[object, bytes, int, int, int, int, int], tuple[int, int]]

# An extension built before these functions existed (not rebuilt since) has neither: the twins run then.
_speedups: Final = native_module()
_native_scan: Final[Scanner | None] = getattr(_speedups, "scan_records", None)
_native_index: Final[IndexWriter | None] = getattr(_speedups, "index_put_hashed", None)


def _takes_entries(scan: Scanner | None) -> bool:
    """Whether ``scan`` walks DLedger entries (an extension built before that argument existed takes five)."""
    try:
        return scan is not None and scan(b"", 0, 0, 0, False, True)[1] == 0
    except TypeError:
        return False


#: Whether the C scan is in use.
NATIVE: Final = _native_scan is not None and _native_index is not None and _takes_entries(_native_scan)
#: See the module docstring.
scan_records: Final[Scanner] = _native_scan if _native_scan is not None and NATIVE else _py_scan_records
#: ``(buf, packed, number, limit, slots, entries_at, time_diff) -> (number, new_slots)``: see the module docstring.
index_put_hashed: Final[IndexWriter] = _native_index if _native_index is not None and NATIVE else _py_index_put_hashed
