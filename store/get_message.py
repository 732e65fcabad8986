"""The pull read path: ConsumeQueue entries to CommitLog slices, with RocketMQ's statuses and limits.

:func:`get_message` follows docs/protocol.md#79-pull-checks-and-results (status and ``nextBeginOffset`` per case) and
docs/protocol.md#710-pull-batch-limits (batch limits: the first message always comes; then at most ``max_msgs``, and 32
messages / ``max_bytes`` while the data is "in memory" or 8 messages / 64 KiB once it is more than 40 % of RAM behind
the CommitLog head; ``max_count_in_memory``, ``max_count_on_disk`` and ``max_bytes_on_disk`` replace the 32, 8 and
64 KiB, as Java's ``maxTransferCountOnMessageInMemory``, ``maxTransferCountOnMessageInDisk`` and
``maxTransferBytesOnMessageInDisk`` do). It
scans at most one ConsumeQueue segment and at least 800 entries per call, as Java does, and (ours) at most
:data:`MAX_SCAN_ENTRIES`, so one pull cannot hold the event loop. It never raises; slices are zero-copy views of the
log.

Filters, in Java's order: ``tag_filter`` sees the consume-queue tags code before the CommitLog is touched;
``property_filter`` (SQL92 subscriptions) then sees the raw properties of each remaining candidate, sliced straight
from the mapped record by :func:`record_properties` without decoding the message. A candidate either filter refuses
is skipped but counts as scanned; it must not raise.
"""

from __future__ import annotations

import os
import struct
from collections.abc import Callable
from typing import Final

from store.commitlog import CommitLog
from store.consume_queue import FILLER_SIZE, ConsumeQueue
from store.results import GetResult, GetStatus

MAX_TRANSFER_BYTES_IN_MEMORY: Final = 256 * 1024
MAX_TRANSFER_COUNT_IN_MEMORY: Final = 32
MAX_TRANSFER_BYTES_ON_DISK: Final = 64 * 1024
MAX_TRANSFER_COUNT_ON_DISK: Final = 8
#: Java's maxFilterMessageCount: 16 000 bytes of ConsumeQueue = 800 entries at least.
MIN_SCAN_ENTRIES: Final = 800
#: Ours: the most entries one call scans, whatever ``max_msgs`` asks. Java scans ``max(800, maxMsgNums)`` entries on
#: one of its pull threads; here the scan runs on the event loop every connection shares, and an SQL92 filter costs
#: a few microseconds an entry, so a pull asking for 300,000 messages (a whole ConsumeQueue segment) that match none
#: would hold every other client up for about a second. 4x the largest ``pullBatchSize`` Java's consumers send (1024).
MAX_SCAN_ENTRIES: Final = 4096

#: Broker-side filter on the consume-queue tags code (True = deliver).
TagFilter = Callable[[int], bool]
#: Broker-side filter on a candidate's raw properties string (``name 0x01 value 0x02 ...``; True = deliver).
PropertyFilter = Callable[[memoryview], bool]

# Record layout (remoting/codec/message.py): sysFlag at 36 says whether each host is 8 or 20 bytes; the body length
# follows the fixed part, then the body, the topic (1-byte length) and the properties (2-byte length).
_POS_SYSFLAG: Final = 36
_FIXED_BEFORE_HOSTS: Final = 68
_BORNHOST_V6: Final = 0x10
_STOREHOST_V6: Final = 0x20
_INT: Final = struct.Struct(">i")


def record_properties(record: memoryview) -> memoryview:
    """The raw properties of one stored record (a view, no copy). The record must be well formed, as records the
    store hands out are; a truncated one raises ``struct.error`` or ``IndexError``."""
    sys_flag = _INT.unpack_from(record, _POS_SYSFLAG)[0]
    body_len_at = _FIXED_BEFORE_HOSTS + (20 if sys_flag & _BORNHOST_V6 else 8) + (20 if sys_flag & _STOREHOST_V6 else 8)
    topic_at = body_len_at + 4 + _INT.unpack_from(record, body_len_at)[0]
    # Skip the topic-length byte, the topic and the 2-byte properties length.
    return record[topic_at + 3 + record[topic_at] :]


def in_memory_limit(ratio: int = 40) -> int:
    """How far behind the CommitLog head data still counts as "in memory": ``ratio`` % of physical RAM (Java's
    ``accessMessageInMemoryMaxRatio``, 40 by default); farther behind, pulls suggest a slave."""
    try:
        total = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError):
        total = 8 << 30
    return total * ratio // 100


def get_message(
    commitlog: CommitLog,
    cq: ConsumeQueue | None,
    offset: int,
    max_msgs: int,
    max_bytes: int,
    tag_filter: TagFilter | None,
    memory_limit: int,
    property_filter: PropertyFilter | None = None,
    max_count_in_memory: int = MAX_TRANSFER_COUNT_IN_MEMORY,
    max_count_on_disk: int = MAX_TRANSFER_COUNT_ON_DISK,
    max_bytes_on_disk: int = MAX_TRANSFER_BYTES_ON_DISK,
    max_filtered: int | None = None,
) -> GetResult:
    """``max_bytes`` and ``max_count_in_memory`` bound a batch in memory, ``max_bytes_on_disk`` and
    ``max_count_on_disk`` once on disk (MessageStoreConfig's maxTransfer{Bytes,Count}OnMessageIn{Memory,Disk}, read
    by isTheBatchFull in store/src/main/java/org/apache/rocketmq/store/DefaultMessageStore.java). ``max_filtered``
    (ours; at least 1) bounds how many candidates ``property_filter`` sees in this call: the scan stops before the
    next one, as it stops at the scan limit, so an expensive filter costs the event loop a bounded time."""
    if cq is None:  # never written: empty, as Java's findConsumeQueue makes the queue on first look-up
        return GetResult(GetStatus.NO_MESSAGE_IN_QUEUE, 0, 0, 0)
    lo, hi = cq.min_offset, cq.max_offset
    if hi == 0:
        return GetResult(GetStatus.NO_MESSAGE_IN_QUEUE, 0, lo, hi)
    if offset < lo:
        return GetResult(GetStatus.OFFSET_TOO_SMALL, lo, lo, hi)
    if offset == hi:
        return GetResult(GetStatus.OFFSET_OVERFLOW_ONE, offset, lo, hi)
    if offset > hi:
        return GetResult(GetStatus.OFFSET_OVERFLOW_BADLY, hi, lo, hi)
    entries = cq.iter_entries(offset, max(MIN_SCAN_ENTRIES, min(max_msgs, MAX_SCAN_ENTRIES)))
    if entries is None:
        return GetResult(GetStatus.OFFSET_FOUND_NULL, cq.next_file_start(offset), lo, hi)
    status = GetStatus.NO_MATCHED_MESSAGE
    runs: list[list[object]] = []  # [segment view, start, end] per run of adjacent records
    sizes: list[int] = []
    queue_offsets: list[int] = []
    total = 0
    max_phy = commitlog.max_offset
    last_phy = max_phy
    scanned = 0
    # The segment of the last record read: a record inside its written part is read from it directly (what
    # commitlog.read would give), and one that starts where the open run ends extends that run.
    seg: memoryview | None = None
    seg_base = seg_written = 0
    run_end = -1
    filtered_left = -1 if max_filtered is None else max(1, max_filtered)
    for phy, size, tags in entries:
        if size == FILLER_SIZE:  # padding before a queue's first real entry
            scanned += 1
            continue
        last_phy = phy
        if sizes:
            on_disk = max_phy - phy > memory_limit
            byte_limit = max_bytes_on_disk if on_disk else max_bytes
            count_limit = max_count_on_disk if on_disk else max_count_in_memory
            if len(sizes) >= max_msgs or len(sizes) >= count_limit or total + size > byte_limit:
                break
        scanned += 1
        if tag_filter is not None and not tag_filter(tags):
            continue
        pos = phy - seg_base
        if seg is None or pos < 0 or pos + size > seg_written or size <= 0:
            located = commitlog.segment_at(phy)
            if located is None or size <= 0 or phy - located[1] + size > located[2]:
                # its segment was deleted by retention (or the entry points past the written end)
                if not sizes:
                    status = GetStatus.MESSAGE_WAS_REMOVING
                continue
            seg, seg_base, seg_written = located
            pos = phy - seg_base
            run_end = -1
        if property_filter is not None:
            if filtered_left == 0:
                scanned -= 1  # not seen: the next call starts with it
                break
            filtered_left -= 1
            if not property_filter(record_properties(seg[pos : pos + size])):
                continue
        if pos == run_end:
            runs[-1][2] = run_end = pos + size
        else:
            run_end = pos + size
            runs.append([seg, pos, run_end])
        sizes.append(size)
        queue_offsets.append(offset + scanned - 1)
        total += size
        status = GetStatus.FOUND
    suggest = max_phy - last_phy > memory_limit
    views = [view[start:end] for view, start, end in runs]  # type: ignore[index]
    return GetResult(status, offset + scanned, lo, hi, views, sizes, queue_offsets, suggest, max_phy - last_phy)
