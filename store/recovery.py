"""Start-up recovery (docs/protocol.md#66-abort-and-lock-files-and-recovery).

One algorithm for both cases, differing in how much is re-validated:

1. Map every segment. Delete leftover ``*.alloc`` spares (a crash during preallocation).
2. Scan the CommitLog from the checkpoint's ``safe_offset`` (below it everything, including ConsumeQueue and index
   entries, was flushed before the checkpoint was written; in a checkpoint a Java broker wrote, which has none, from
   the segment its own recovery starts with: :func:`_checkpoint_offset`), or from where the ConsumeQueues' files end
   when that is lower (queue files removed: :func:`_queues_end`), with magic, length and CRC checks, re-dispatching
   each valid record into its ConsumeQueue and the index (entries are rewritten in place, so re-dispatching a record
   that was already indexed in the ConsumeQueue is harmless; the index is truncated after ``safe_offset`` first).
   Retention deletes only CommitLog segments the checkpoint covers (:class:`~store.services.RetentionService`), so
   the CommitLog never starts past it: no queue entry of a deleted record is missing before the ones re-dispatched.
3. The first invalid record (or one whose topic cannot name a directory: the body CRC does not cover the topic, so a
   power cut can leave zeros or anything there: :func:`~store.consume_queue.names_a_directory`) ends the log:
   later segments are deleted and, after a crash, the torn tail is zeroed
   so no stale record can reappear behind newer writes. On a slave, a last record whose final bytes are zeros is
   a torn tail too (:func:`_torn`).
4. Every ConsumeQueue drops entries that point at or past the recovered end, and the next-queue-offset table is
   rebuilt from the queues.

Before the scan, index files the index's load deleted (unusable: :meth:`~store.index.IndexService.load`, this start
or one a crash cut short) are refilled: the keys of the records they covered below ``safe_offset`` are indexed again,
in their place among the kept files (:func:`refill_index`), so one damaged file costs a re-read of its range, not the
keys of the others. The re-read is synchronous and logged (range, then keys and seconds): after a change of the index
geometry it is the whole CommitLog.

After a crash (``abort`` present) the ConsumeQueue tails are scanned linearly, because unflushed pages can leave
holes; after a clean shutdown the same scan is cheap since ``safe_offset`` equals the end (zeroed space there is the
end of the log, not a damaged checkpoint). The cost is proportional to the un-checkpointed tail of the CommitLog plus
the newest segment of each ConsumeQueue; ``store.recovery_start`` records where the scan began.

Records of a topic deleted after they were stored are not re-dispatched (:mod:`store.topic_cleanup`'s tombstones).
"""

from __future__ import annotations

import contextlib
import logging
import os
import time
from collections.abc import Iterator
from typing import TYPE_CHECKING

from remoting.codec.errors import MessageDecodeError
from remoting.codec.message_properties import index_keys_of_raw
from remoting.codec.record_decode import RecordMeta, read_record_meta
from remoting.codec.record_layout import SYSFLAG_TRANSACTION_MASK, SYSFLAG_TRANSACTION_ROLLBACK
from store.checkpoint import create_abort_file
from store.consume_queue import ConsumeQueue, names_a_directory
from store.topic_cleanup import is_deleted_record, load_tombstones

if TYPE_CHECKING:
    from store.message_store import MessageStore

log = logging.getLogger(__name__)


def load_consume_queues(store: MessageStore) -> None:
    """Map every ConsumeQueue found under the store's queue directory (spares left by a crash removed); their ends are
    set by recovery. Blocking."""
    root = store.config.consume_queue_dir
    if not root.is_dir():
        return
    for topic_dir in sorted(root.iterdir()):
        if not topic_dir.is_dir():
            continue
        for queue_dir in sorted(topic_dir.iterdir()):
            if not queue_dir.name.lstrip("-").isdigit():
                continue
            cq = store.consume_queue(topic_dir.name, int(queue_dir.name))
            _remove_spares(cq)
            cq.load()


def _remove_spares(cq: ConsumeQueue) -> None:
    directory = cq.queue.directory
    if directory.is_dir():
        for leftover in directory.glob("*.alloc"):
            with contextlib.suppress(FileNotFoundError):
                leftover.unlink()


def _scan_and_dispatch(store: MessageStore, start: int, check_crc: bool) -> int:
    end = start
    deleted = load_tombstones(store.root)
    store.multi_dispatch.tombstones = deleted  # the queues a record lists are skipped alike
    last: tuple[int, RecordMeta] | None = None  # dispatched once the scan shows it is not a torn last record

    def dispatch(meta: RecordMeta) -> None:
        if not (deleted and is_deleted_record(deleted, meta)):
            store.redispatch(meta)
        store.commitlog.last_store_timestamp = meta.store_timestamp

    for offset, meta in store.commitlog.scan(start, check_crc):
        if meta is not None and not names_a_directory(meta.topic):
            log.error(
                "recovery: the record at offset %d names no possible topic (%r): the log ends there", end, meta.topic
            )
            break
        if last is not None:
            dispatch(last[1])
            last = None
        if meta is not None:
            last = (end, meta)
        end = offset
    if last is not None:
        if store.config.is_slave and _torn(last[1]):
            return last[0]
        dispatch(last[1])
    return end


def _torn(meta: RecordMeta) -> bool:
    """A slave's last record whose final bytes never arrived: a slave appends the master's frames as they come, so
    a kill can leave a record's head on disk with zeros where its tail should be. The body CRC does not cover the
    topic and properties, so zeros there pass the scan; a record never ends with a NUL (properties end with their
    last value, a topic holds no NUL), so a zero last byte means a torn tail. The master resends the record."""
    tail = meta.properties or meta.topic.encode()
    return not tail or tail[-1] == 0


def refill_index(store: MessageStore, end: int) -> None:
    """Index again the keys of the records below ``end`` that were in index files the load deleted
    (:meth:`~store.index.IndexService.gaps`: from the record at ``after`` through the one at ``before``, whose keys
    may have been split between a deleted file and a kept one), when the store indexes keys
    (``messageIndexEnable``). Blocking."""
    index = store.indexer
    if index is None:
        return
    for gap in index.gaps():
        first = max(gap.after, store.commitlog.min_offset)
        stop = end if gap.before is None else min(gap.before + 1, end)
        log.warning("index: indexing the keys of CommitLog [%d, %d) (%d bytes) again, those of the unusable index "
                    "files deleted from %s on, before the store opens",
                    first, stop, max(stop - first, 0), gap.name)  # fmt: skip
        began = time.monotonic()
        written = index.refill(gap, keyed_records(store, first, stop))
        log.warning("index: %d keys of CommitLog [%d, %d) indexed again in %.1f s", written, first, stop,
                    time.monotonic() - began)  # fmt: skip


def keyed_records(store: MessageStore, first: int, stop: int) -> Iterator[tuple[str, list[str], int, int]]:
    """``(topic, keys, phy_offset, store_timestamp)`` of the records from ``first`` (a record boundary) up to
    ``stop`` that dispatch would index: not rolled back, not of a deleted topic, with keys."""
    deleted = load_tombstones(store.root)
    for _, meta in store.commitlog.scan(first, False):
        if meta is None:
            continue
        if meta.phy_offset >= stop:
            return
        if meta.sys_flag & SYSFLAG_TRANSACTION_MASK == SYSFLAG_TRANSACTION_ROLLBACK:
            continue
        keys = index_keys_of_raw(meta.properties)
        if keys and not (deleted and is_deleted_record(deleted, meta)):
            yield meta.topic, keys, meta.phy_offset, meta.store_timestamp


def _blank_at(store: MessageStore, offset: int) -> bool:
    """True when ``offset`` is where the written log stops: the record header there (size, magic) is all zeros, as
    in a preallocated segment's unwritten space."""
    mf = store.commitlog.queue.find(offset)
    if mf is None:
        return False
    pos = offset - mf.file_from_offset
    return mf.file_size - pos >= 8 and not any(mf.view[pos : pos + 8])


def _queues_end(store: MessageStore) -> int:
    """The highest CommitLog offset the ConsumeQueues' files reach, -1 when they hold no entry. Below the checkpoint
    when queue files were removed (an operator deleting a damaged ``consumequeue/``, or a CommitLog copied in from
    another broker): the scan then starts there, so the missing entries are dispatched again, as
    DefaultMessageStore.start sets the reput offset to the ConsumeQueues' max physical offset, never below the
    CommitLog's minimum (store/src/main/java/org/apache/rocketmq/store/DefaultMessageStore.java)."""
    return max((cq.physical_end_on_disk() for cq in store.consume_queues.values()), default=-1)


def _checkpoint_offset(store: MessageStore) -> int:
    """The checkpoint's safe offset; in one a Java 4.9 broker wrote (its timestamps set, no safe offset), the start
    of the segment that broker's own recovery begins with, rather than the whole log: the third newest after a clean
    stop (recoverNormally), else the newest whose first record was stored no later than the checkpoint's
    ``min_timestamp``, the first when none was (recoverAbnormally, isMappedFileMatchedRecover:
    store/src/main/java/org/apache/rocketmq/store/CommitLog.java)."""
    checkpoint = store.checkpoint
    assert checkpoint is not None
    files = store.commitlog.queue.files
    if checkpoint.safe_offset or checkpoint.physic_msg_timestamp <= 0 or not files:
        return checkpoint.safe_offset
    if not store.abnormal_recovery:
        return files[max(0, len(files) - 3)].file_from_offset
    for mf in reversed(files):
        try:
            stamp = read_record_meta(mf.view).store_timestamp
        except MessageDecodeError:
            continue
        if 0 < stamp <= checkpoint.min_timestamp:
            return mf.file_from_offset
    return files[0].file_from_offset


def recover(store: MessageStore) -> None:
    """Bring ``store`` to a consistent state; see the module docstring. Blocking."""
    assert store.checkpoint is not None
    store.abnormal_recovery = create_abort_file(store.root)
    commitlog = store.commitlog
    for directory in commitlog.queue.dirs.writable:
        if directory.is_dir():
            for leftover in directory.glob("*.alloc"):
                leftover.unlink()
    commitlog.queue.load()
    load_consume_queues(store)

    start = min(max(_checkpoint_offset(store), commitlog.min_offset), commitlog.max_offset)
    queues_end = max(_queues_end(store), commitlog.min_offset)
    if queues_end < start and not _blank_at(store, queues_end):  # zeros: a slave's log starting mid-segment
        start = queues_end
    if store.index is not None:
        store.index.truncate_after(start)
        refill_index(store, start)
    check_crc = store.config.check_crc_on_recover
    end = _scan_and_dispatch(store, start, check_crc)
    segment_start = start - start % commitlog.file_size
    if end == start and start != segment_start and start < commitlog.max_offset and not _blank_at(store, start):
        # Nothing valid where the checkpoint points, and not the zeroed space after the last record either: it is
        # not a record boundary (a damaged checkpoint). Rather than cut the log there, re-validate its whole
        # segment, as Java's recovery always does.
        if store.index is not None:
            store.index.truncate_after(segment_start)
        start = segment_start
        end = _scan_and_dispatch(store, segment_start, check_crc)
    store.recovery_start = start
    commitlog.truncate_to(end, erase=store.abnormal_recovery)
    for (topic, queue_id), cq in list(store.consume_queues.items()):
        cq.recover(commitlog.min_offset, end, erase=store.abnormal_recovery)
        if cq.max_offset:
            store.queue_offsets[cq.key] = cq.max_offset
        else:
            store.queue_offsets.pop((topic, queue_id), None)
    if commitlog.last_store_timestamp == 0:
        commitlog.last_store_timestamp = store.checkpoint.physic_msg_timestamp
    if store.abnormal_recovery:
        _sync_recovered(store, start)


def _sync_recovered(store: MessageStore, start: int) -> None:
    """After a crash, sync what the recovery wrote or kept through the mappings (the log from ``start``, the queue
    and index entries it dispatched again): the segments count as flushed from here on, and the next checkpoint
    moves past them. Left to the page cache, a power loss soon after lost acknowledged messages from their queues
    for good (the next recovery starts past them)."""
    for mf in store.commitlog.queue.files:
        if mf.end_offset > start:
            os.fdatasync(mf.fd)
    for cq in store.consume_queues.values():
        for mf in cq.queue.files:
            os.fdatasync(mf.fd)
    if store.index is not None:
        store.index.flush()
