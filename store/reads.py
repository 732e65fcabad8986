"""The read side of :class:`~store.message_store.MessageStore`: pulls, lookups by offset and key, queue offsets and
times (docs/protocol.md#79-pull-checks-and-results, docs/protocol.md#710-pull-batch-limits,
docs/protocol.md#713-search-by-timestamp). :class:`StoreReads` is a base class of the store, kept apart from the
append / dispatch / life-cycle code; it owns nothing and reads the store's CommitLog, ConsumeQueues and optional index.
Reads never raise for a missing queue or record: they answer 0, ``None`` or an empty result.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import TYPE_CHECKING, Protocol

import trio

from store.commitlog import CommitLog
from store.consume_queue import ConsumeQueue, names_a_directory
from store.errors import MessageIllegalError
from store.get_message import PropertyFilter, TagFilter, get_message
from store.results import GetResult
from store.store_config import StoreConfig

if TYPE_CHECKING:
    from store.index import IndexGap
    from store.index_file import IndexFile


#: ``maxConsumeQueueScan`` and ``sampleCountThreshold``, RocketMQ 5.3.3's MessageStoreConfig defaults: an estimate
#: scans at most this many consume-queue entries, and samples once more than that many matched.
ESTIMATE_MAX_SCAN = 20_000
ESTIMATE_SAMPLE_MATCHES = 5_000


class IndexLike(Protocol):
    """The IndexService contract (implemented in ``store/index.py``)."""

    def put(self, topic: str, keys: Iterable[str], phy_offset: int, store_timestamp: int) -> None: ...
    def put_batch(self, topic: str, messages: Iterable[tuple[Iterable[str], int]], store_timestamp: int) -> None: ...
    def put_hashed(self, packed: bytes, store_timestamp: int) -> None: ...
    def put_timed(self, topic: str, messages: Iterable[tuple[Iterable[str], int, int]]) -> None: ...
    def query(self, topic: str, key: str, max_num: int, begin_ms: int, end_ms: int) -> list[int]: ...
    def query_steps(
        self, topic: str, key: str, max_num: int, begin_ms: int, end_ms: int, out: list[int]
    ) -> Iterator[None]: ...
    def flush(self) -> None: ...
    def close(self) -> None: ...
    def truncate_after(self, phy_offset: int) -> None: ...
    def delete_expired(self, min_phy_offset: int) -> int: ...
    def take_expired(self, min_phy_offset: int) -> list[IndexFile]: ...
    def gaps(self) -> list[IndexGap]: ...
    def refill(self, gap: IndexGap, messages: Iterable[tuple[str, list[str], int, int]]) -> int: ...
    @property
    def last_update_timestamp(self) -> int:
        """Store time of the newest indexed message (0 before the first)."""
        ...

    @property
    def last_update_phy_offset(self) -> int:
        """CommitLog offset of the newest indexed message (0 before the first)."""
        ...


class StoreReads:
    """Read methods of :class:`~store.message_store.MessageStore`; the attributes below are set by its constructor."""

    config: StoreConfig
    commitlog: CommitLog
    consume_queues: dict[tuple[str, int], ConsumeQueue]
    index: IndexLike | None
    _memory_limit: int

    @property
    def in_memory_distance(self) -> int:
        """CommitLog bytes behind the head beyond which data counts as on disk (``accessMessageInMemoryMaxRatio`` %
        of physical memory, following the live config)."""
        return self._memory_limit

    def consume_queue(self, topic: str, queue_id: int) -> ConsumeQueue:
        """The queue's ConsumeQueue, created on first use; :class:`~store.errors.MessageIllegalError` (nothing made)
        for a topic that cannot name its directory (:func:`~store.consume_queue.names_a_directory`)."""
        cq = self.consume_queues.get((topic, queue_id))
        if cq is None:
            if not names_a_directory(topic):
                raise MessageIllegalError(f"the topic {topic!r} cannot name a consume queue directory")
            directory = self.config.consume_queue_dir / topic / str(queue_id)
            cq = ConsumeQueue(directory, topic, queue_id, self.config.mapped_file_size_consume_queue)
            self.consume_queues[cq.key] = cq
        return cq

    def get(self, topic: str, queue_id: int, offset: int, max_msgs: int, max_bytes: int | None = None,
            tag_filter: TagFilter | None = None,
            property_filter: PropertyFilter | None = None, max_filtered: int | None = None) -> GetResult:  # fmt: skip
        """Read up to ``max_msgs`` records from logical ``offset`` (docs/protocol.md#79-pull-checks-and-results,
        docs/protocol.md#710-pull-batch-limits) within the config's transfer limits (``max_bytes``, if given,
        replaces the in-memory byte limit and caps the on-disk one). Never raises. ``tag_filter`` sees consume-queue
        tags codes, ``property_filter`` each candidate's raw properties (at most ``max_filtered`` of them)."""
        cq = self.consume_queues.get((topic, queue_id))
        config = self.config
        in_memory = config.max_transfer_bytes_on_message_in_memory
        on_disk = config.max_transfer_bytes_on_message_in_disk
        if max_bytes is not None:
            in_memory, on_disk = max_bytes, min(max_bytes, on_disk)
        return get_message(
            self.commitlog, cq, offset, max_msgs, in_memory, tag_filter, self._memory_limit, property_filter,
            config.max_transfer_count_on_message_in_memory, config.max_transfer_count_on_message_in_disk, on_disk,
            max_filtered,
        )  # fmt: skip

    def look_message_by_offset(self, phy_offset: int, size: int | None = None) -> memoryview | None:
        """The record at a CommitLog offset (from an offset msgId), or ``None`` when gone or not a record start."""
        return self.commitlog.read_record(phy_offset) if size is None else self.commitlog.read(phy_offset, size)

    def query_by_key(self, topic: str, key: str, max_num: int, begin_ms: int, end_ms: int) -> list[memoryview]:
        """Records indexed under ``key`` (KEYS token or UNIQ_KEY) stored in ``[begin_ms, end_ms]``; hash collisions
        are returned too (clients re-check keys), in CommitLog order (DefaultMessageStore.java queryMessage sorts the
        offsets). Empty without an index."""
        if self.index is None:
            return []
        return self.records_at(self.index.query(topic, key, max_num, begin_ms, end_ms))

    async def query_offsets_async(self, topic: str, key: str, max_num: int, begin_ms: int, end_ms: int) -> list[int]:
        """The CommitLog offsets :meth:`query_by_key` reads (some may be gone from the CommitLog since: read them with
        :meth:`records_at`), letting the event loop's other tasks run while it walks the index: a key shared by many
        messages chains that many entries (RocketMQ walks them on its query pool's threads)."""
        index = self.index
        if index is None:
            return []
        offsets: list[int] = []
        for _ in index.query_steps(topic, key, max_num, begin_ms, end_ms, offsets):
            await trio.lowlevel.checkpoint()
        return offsets

    def records_at(self, offsets: list[int]) -> list[memoryview]:
        """The records still in the CommitLog at ``offsets``, in CommitLog order; a record indexed twice under the key
        (``KEYS=k k``) comes twice, as DefaultMessageStore.queryMessage reads every offset the index found."""
        found = []
        for phy in sorted(offsets):
            record = self.commitlog.read_record(phy)
            if record is not None:
                found.append(record)
        return found

    def max_offset_in_queue(self, topic: str, queue_id: int) -> int:
        cq = self.consume_queues.get((topic, queue_id))
        return 0 if cq is None else cq.max_offset

    def min_offset_in_queue(self, topic: str, queue_id: int) -> int:
        cq = self.consume_queues.get((topic, queue_id))
        return 0 if cq is None else cq.min_offset

    def offset_in_queue_by_time(self, topic: str, queue_id: int, timestamp: int, boundary: str | None = None) -> int:
        """SEARCH_OFFSET_BY_TIMESTAMP; ``boundary``: None (4.9's answer), ``LOWER`` or ``UPPER`` (RocketMQ 5's)."""
        cq = self.consume_queues.get((topic, queue_id))
        return 0 if cq is None else cq.offset_by_time(timestamp, self.commitlog.store_timestamp_at, boundary)

    def message_store_timestamp(self, topic: str, queue_id: int, offset: int) -> int | None:
        cq = self.consume_queues.get((topic, queue_id))
        entry = None if cq is None else cq.entry(offset)
        return None if entry is None else self.commitlog.store_timestamp_at(entry[0], entry[1])

    def estimate_message_count(
        self, topic: str, queue_id: int, start: int, end: int, matches: TagFilter, max_scan: int = ESTIMATE_MAX_SCAN
    ) -> int:
        """How many of the queue's messages ``[start, end)`` have a tags code that ``matches``, as RocketMQ 5.3.3's
        ``DefaultMessageStore.estimateMessageCount`` / ``ConsumeQueue.estimateMessageCount`` count them: a window
        below the queue's first entry moves up to it (same width); past ``max_scan`` scanned entries (Java's
        :data:`ESTIMATE_MAX_SCAN`) or :data:`ESTIMATE_SAMPLE_MATCHES` matches, the count is extrapolated from what
        was scanned."""
        start = max(start, 0)
        if start >= end:
            return 0
        cq = self.consume_queues.get((topic, queue_id))
        if cq is None:
            return 0
        if start < cq.min_offset:
            start, end = cq.min_offset, cq.min_offset + end - start
        matched, scanned = cq.count_matching(start, end, matches, max_scan, ESTIMATE_SAMPLE_MATCHES)
        if scanned == 0:
            return end - start
        if scanned >= max_scan or matched > ESTIMATE_SAMPLE_MATCHES:
            return matched * (end - start) // scanned
        return matched

    def commit_log_offset_at(self, topic: str, queue_id: int, offset: int) -> int | None:
        """Where the queue's message at ``offset`` starts in the CommitLog (``None``: the queue has no such entry)."""
        cq = self.consume_queues.get((topic, queue_id))
        entry = None if cq is None else cq.entry(offset)
        return None if entry is None else entry[0]

    def earliest_message_time(self, topic: str, queue_id: int) -> int | None:
        """Store time of the queue's oldest retained message (GET_EARLIEST_MSG_STORETIME)."""
        return self.message_store_timestamp(topic, queue_id, self.min_offset_in_queue(topic, queue_id))

    def earliest_store_time(self) -> int:
        """Store time of the CommitLog's first retained record, -1 when there is none (Java's
        ``getEarliestMessageTime``, shown by GET_BROKER_RUNTIME_INFO)."""
        record = self.commitlog.read_record(self.commitlog.min_offset)
        if record is None:
            return -1
        timestamp = self.commitlog.store_timestamp_at(self.commitlog.min_offset, len(record))
        return -1 if timestamp is None else timestamp

    @property
    def max_phy_offset(self) -> int:
        return self.commitlog.max_offset

    @property
    def min_phy_offset(self) -> int:
        return self.commitlog.min_offset

    @property
    def flush_watermark(self) -> int:
        """CommitLog offset below which every byte is durable."""
        return self.commitlog.queue.flushed_offset

    @property
    def unflushed_bytes(self) -> int:
        """RocketMQ's ``remainHowManyDataToFlush``: bytes appended and not yet durable (in DLedger mode uncommitted
        entries count too, as DLedger's ``MmapFileList.remainHowManyDataToFlush``)."""
        return max(0, self.commitlog.write_end - self.flush_watermark)
