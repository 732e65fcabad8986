"""Results of the store API: put statuses and append results, get statuses and :class:`GetResult`.

Names follow RocketMQ's ``PutMessageStatus`` / ``GetMessageStatus`` so processors map them to response codes as
docs/protocol.md#715-flush-and-put-results (puts) and docs/protocol.md#79-pull-checks-and-results (gets) describe.
"""

from __future__ import annotations

import enum
import functools
import struct
from typing import TYPE_CHECKING, Final

import attrs

from remoting.codec.msgid import offset_msg_id
from remoting.codec.record_batch import NATIVE


class PutStatus(enum.Enum):
    PUT_OK = "PUT_OK"
    FLUSH_DISK_TIMEOUT = "FLUSH_DISK_TIMEOUT"
    FLUSH_SLAVE_TIMEOUT = "FLUSH_SLAVE_TIMEOUT"
    SLAVE_NOT_AVAILABLE = "SLAVE_NOT_AVAILABLE"
    SERVICE_NOT_AVAILABLE = "SERVICE_NOT_AVAILABLE"
    MESSAGE_ILLEGAL = "MESSAGE_ILLEGAL"
    PROPERTIES_SIZE_EXCEEDED = "PROPERTIES_SIZE_EXCEEDED"
    #: DLedger mode: the quorum did not acknowledge in time (DLedgerCommitLog's WAIT_QUORUM_ACK_TIMEOUT)
    OS_PAGECACHE_BUSY = "OS_PAGECACHE_BUSY"
    UNKNOWN_ERROR = "UNKNOWN_ERROR"


class PyAppendResult:
    """Where a put landed: ``AppendResult(phy_offset, size, queue_offset, store_timestamp, phy_offsets,
    store_host)``. For a batch, ``count`` records start at ``phy_offset`` / ``queue_offset``; ``phy_offsets`` holds
    each record's physical offset. Immutable.

    :data:`AppendResult` is this class when the C extension is not in use, else its C twin
    ``store._appender.AppendResult`` (the same fields and answers, built by the C appends without a Python call or
    garbage-collector tracking; tests/store/test_append_result.py compares the two).

    A batch append passes its packed ConsumeQueue entries (``bytes``, 20 per record) instead of the offsets tuple:
    ``phy_offsets`` unpacks them on first use (the same tuple), as unpacking 32 of them into ints for every batch
    was a tenth of the Python a 32-message append runs, for a field only a batch send's msgId reads. A single append
    passes ``None``: one record, at ``phy_offset``.
    """

    __slots__ = ("_phy_offsets", "phy_offset", "queue_offset", "size", "store_host", "store_timestamp")

    def __init__(
        self,
        phy_offset: int,
        size: int,
        queue_offset: int,
        store_timestamp: int,
        phy_offsets: tuple[int, ...] | bytes | None,
        store_host: bytes,
    ) -> None:
        self.phy_offset = phy_offset
        self.size = size
        self.queue_offset = queue_offset
        self.store_timestamp = store_timestamp
        self._phy_offsets = phy_offsets
        self.store_host = store_host

    def __repr__(self) -> str:
        return (
            f"AppendResult(phy_offset={self.phy_offset}, size={self.size}, queue_offset={self.queue_offset}, "
            f"count={self.count})"
        )

    @property
    def phy_offsets(self) -> tuple[int, ...]:
        offsets = self._phy_offsets
        if offsets is None:
            offsets = self._phy_offsets = (self.phy_offset,)
        elif isinstance(offsets, bytes):
            offsets = self._phy_offsets = phy_offsets_of_packed(offsets)
        return offsets

    @property
    def count(self) -> int:
        offsets = self._phy_offsets
        if offsets is None:
            return 1
        return len(offsets) // _CQ_UNIT if isinstance(offsets, bytes) else len(offsets)

    @property
    def end_offset(self) -> int:
        """CommitLog offset just past the last record (what a flush must cover)."""
        return self.phy_offset + self.size

    @property
    def msg_id(self) -> str:
        """Offset msgId(s), comma-joined for a batch, as the send response carries them."""
        if len(self.phy_offsets) == 1:
            return offset_msg_id(self.store_host, self.phy_offset)
        # All offsets packed and hexed in C, comma-separated every 8 bytes, then each comma followed by the host's
        # hex: 51 ns instead of 196 ns per message of a 64-message batch, against one f-string per offset.
        host = self.store_host.hex().upper()
        offsets = struct.pack(f">{len(self.phy_offsets)}Q", *self.phy_offsets)
        return host + offsets.hex(",", 8).upper().replace(",", "," + host)


def _append_result_type() -> type[PyAppendResult]:
    """``store._appender.AppendResult`` when the C extensions are in use, else :class:`PyAppendResult`."""
    if not NATIVE:
        return PyAppendResult
    try:
        from store._appender import AppendResult as native
    except ImportError:
        return PyAppendResult
    return native  # type: ignore[return-value]


if TYPE_CHECKING:
    AppendResult = PyAppendResult
else:
    AppendResult = _append_result_type()


#: Bytes of one packed ConsumeQueue entry (``phyOffset int64 | size int32 | tagsCode int64``, store.consume_queue).
_CQ_UNIT: Final = 20


def phy_offsets_of_packed(packed: bytes) -> tuple[int, ...]:
    """The physical offsets of packed ConsumeQueue entries (as :mod:`remoting.codec.record_batch` returns them)."""
    return _phy_offsets(len(packed) // _CQ_UNIT).unpack(packed)


@functools.lru_cache(maxsize=256)
def _phy_offsets(count: int) -> struct.Struct:
    """The physical offsets of ``count`` packed ConsumeQueue entries, unpacked in one call."""
    return struct.Struct(">" + "q12x" * count)


@attrs.frozen(slots=True)
class PutResult:
    status: PutStatus
    append: AppendResult

    @property
    def ok(self) -> bool:
        return self.status is PutStatus.PUT_OK


class GetStatus(enum.Enum):
    FOUND = "FOUND"
    NO_MATCHED_MESSAGE = "NO_MATCHED_MESSAGE"
    MESSAGE_WAS_REMOVING = "MESSAGE_WAS_REMOVING"
    OFFSET_FOUND_NULL = "OFFSET_FOUND_NULL"
    OFFSET_OVERFLOW_BADLY = "OFFSET_OVERFLOW_BADLY"
    OFFSET_OVERFLOW_ONE = "OFFSET_OVERFLOW_ONE"
    OFFSET_TOO_SMALL = "OFFSET_TOO_SMALL"
    NO_MATCHED_LOGIC_QUEUE = "NO_MATCHED_LOGIC_QUEUE"
    NO_MESSAGE_IN_QUEUE = "NO_MESSAGE_IN_QUEUE"


@attrs.frozen(slots=True)
class GetResult:
    """The found records as ``runs``: zero-copy slices of the CommitLog, each holding whole records back to back
    (records that lie next to each other in a segment share one run), so a pull body is the runs joined. ``sizes``
    gives each record's length in order and ``queue_offsets`` its queue offset; :attr:`messages` slices the runs
    into one view per record for the readers that want them one by one."""

    status: GetStatus
    next_begin_offset: int
    min_offset: int
    max_offset: int
    runs: list[memoryview] = attrs.field(factory=list)
    sizes: list[int] = attrs.field(factory=list)
    queue_offsets: list[int] = attrs.field(factory=list)
    suggest_pulling_from_slave: bool = False
    #: CommitLog bytes between the head and the last queue entry read (DefaultMessageStore.getMessage's
    #: ``maxOffsetPy - maxPhyOffsetPulling``); -1 when no entry was read.
    fall_behind: int = -1

    @property
    def messages(self) -> list[memoryview]:
        """One zero-copy view per record, in order (built on each access)."""
        out: list[memoryview] = []
        sizes = iter(self.sizes)
        for run in self.runs:
            pos, end = 0, len(run)
            while pos < end:
                size = next(sizes)
                out.append(run[pos : pos + size])
                pos += size
        return out

    @property
    def buffer_total_size(self) -> int:
        return sum(self.sizes)

    @property
    def message_count(self) -> int:
        return len(self.sizes)
