"""Types of the C extension; the contract is in store/_appender.c and :mod:`store.message_store`."""

from collections.abc import Callable, Sequence

from remoting.codec.message import MessageRecord
from store.commitlog import CommitLog
from store.consume_queue import ConsumeQueue
from store.results import PyAppendResult

class Appender:
    listener: Callable[[str, int, int, int, str], None] | None
    indexer: Callable[[str, str, int, int], None] | None
    batch_notifier: Callable[[str, int, int, bytes, list[str], int], None] | None
    writable: bool
    on_slow: Callable[[int], None] | None
    on_append: Callable[[], None] | None
    busy_limit_ns: int
    @property
    def fast_appends(self) -> int: ...
    @property
    def fallbacks(self) -> int: ...
    @property
    def fast_batches(self) -> int: ...
    @property
    def batch_fallbacks(self) -> int: ...
    def __init__(
        self,
        commitlog: CommitLog,
        queue_offsets: dict[tuple[str, int], int],
        consume_queues: dict[tuple[str, int], ConsumeQueue],
        fallback: Callable[[MessageRecord], PyAppendResult],
        batch_fallback: Callable[[Sequence[MessageRecord]], PyAppendResult],
        clock: Callable[[], int] | None,
        max_body: int,
    ) -> None: ...
    def append(self, msg: MessageRecord, /) -> PyAppendResult: ...
    def append_batch(self, msgs: Sequence[MessageRecord], /) -> PyAppendResult: ...

class AppendResult:
    phy_offset: int
    size: int
    queue_offset: int
    store_timestamp: int
    store_host: bytes
    def __init__(
        self,
        phy_offset: int,
        size: int,
        queue_offset: int,
        store_timestamp: int,
        phy_offsets: tuple[int, ...] | bytes | None,
        store_host: bytes,
    ) -> None: ...
    @property
    def phy_offsets(self) -> tuple[int, ...]: ...
    @property
    def count(self) -> int: ...
    @property
    def end_offset(self) -> int: ...
    @property
    def msg_id(self) -> str: ...
