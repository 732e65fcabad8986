"""Store settings, with the names of RocketMQ's ``MessageStoreConfig`` (snake_case) and 4.9.8 defaults.

Sizes and intervals are configurable down to a few KiB / milliseconds so tests cross segment boundaries. The
``now_ms`` and ``disk_usage_ratio`` hooks exist for deterministic tests (store time, retention age and a simulated
disk); production leaves them at their defaults.
"""

from __future__ import annotations

import enum
import os
import time
from collections.abc import Callable
from pathlib import Path

import attrs

from remoting.codec.message_properties import java_long_wrap, java_parse_long, java_split
from store.store_paths import SegmentDirs


class FlushDiskType(enum.Enum):
    ASYNC_FLUSH = "ASYNC_FLUSH"
    SYNC_FLUSH = "SYNC_FLUSH"


class BrokerRole(enum.Enum):
    """RocketMQ's ``BrokerRole``: a master answers sends at once (ASYNC) or once a slave has them (SYNC); a slave
    takes the master's CommitLog over the HA connection and refuses sends (docs/architecture.md#replication)."""

    ASYNC_MASTER = "ASYNC_MASTER"
    SYNC_MASTER = "SYNC_MASTER"
    SLAVE = "SLAVE"


def wall_clock_ms() -> int:
    return time.time_ns() // 1_000_000


def disk_used_ratio(path: Path) -> float:
    """Used fraction of the file system holding ``path`` as RocketMQ reads it (``df``'s Use%): used / (used + free
    to us), blocks reserved for root left out, rounded up to 0.01 (4.9.8's
    ``UtilAll.getDiskPartitionSpaceUsedPercent``, common/src/main/java/org/apache/rocketmq/common/UtilAll.java, and
    DLedger's ``DLedgerUtils``). ``OSError`` propagates (a missing path)."""
    st = os.statvfs(path)
    used = st.f_blocks - st.f_bfree
    entire = used + st.f_bavail
    return -(-used * 100 // entire) / 100 if entire > 0 else 0.0


#: Bytes of one ConsumeQueue entry (store/consume_queue.py ``CQ_STORE_UNIT_SIZE``).
_CQ_ENTRY_SIZE = 20


def whole_entries(size: int) -> int:
    """``mappedFileSizeConsumeQueue`` rounded up to a multiple of the 20-byte entry, as 4.9.8's
    ``MessageStoreConfig.getMappedFileSizeConsumeQueue`` reads it (store/src/main/java/org/apache/rocketmq/store/
    config/MessageStoreConfig.java): every ConsumeQueue is made with that size."""
    return -(-size // _CQ_ENTRY_SIZE) * _CQ_ENTRY_SIZE


_UNITS = {"s": 1000, "m": 60_000, "h": 3_600_000, "d": 86_400_000}


class DelayLevelError(ValueError):
    """``messageDelayLevel`` has a level Java cannot parse: the store does not load (the broker refuses to start)."""


def parse_delay_levels(spec: str) -> dict[int, int]:
    """``"1s 5s 10s ..."`` -> ``{1: 1000, 2: 5000, ...}`` (level is 1-based), read as 4.9.8's
    ``ScheduleMessageService.parseDelayLevel`` (store/src/main/java/org/apache/rocketmq/store/schedule/
    ScheduleMessageService.java) reads it: split at each single space (Java's ``String.split(" ")``: an empty value
    or two spaces in a row make an empty level, a tab is part of a level), each level a ``Long.parseLong`` number
    followed by s, m, h or d, multiplied in Java longs. Raises :class:`DelayLevelError` naming ``messageDelayLevel``
    for any other level: Java's parse then fails the store's load, and the broker does not start."""
    levels = {}
    for level, token in enumerate(java_split(spec, " "), start=1):
        try:
            unit = _UNITS.get(token[-1:])
            if unit is None:
                raise ValueError(f"unknown unit {token[-1:]!r}")
            levels[level] = java_long_wrap(java_parse_long(token[:-1]) * unit)
        except ValueError as exc:
            raise DelayLevelError(f"messageDelayLevel {spec!r}: level {level} ({token!r}) is illegal: {exc}") from None
    return levels


@attrs.frozen
class StoreConfig:
    store_path_root_dir: Path
    #: ``storePathCommitLog``: the CommitLog's directory, or several ``,``-separated (store/store_paths.py); empty:
    #: ``<storePathRootDir>/commitlog``.
    store_path_commit_log: str = ""
    #: ``readOnlyCommitLogStorePaths``: directories whose segments are read but never written (multi-path only).
    read_only_commit_log_store_paths: str = ""
    flush_disk_type: FlushDiskType = FlushDiskType.ASYNC_FLUSH
    mapped_file_size_commit_log: int = 1024 * 1024 * 1024
    #: Bytes per ConsumeQueue file (300 000 entries of 20 bytes), rounded up to whole entries as
    #: MessageStoreConfig.getMappedFileSizeConsumeQueue does.
    mapped_file_size_consume_queue: int = attrs.field(default=300_000 * 20, converter=whole_entries)
    max_message_size: int = 4 * 1024 * 1024
    #: The periodic CommitLog flush (CommitLog.FlushRealTimeService, store/services.py): every
    #: ``flush_interval_commit_log`` ms it syncs a segment once ``flush_commit_log_least_pages`` 4 KiB pages of it are
    #: unsynced (or it is full), and everything at least every ``flush_commit_log_thorough_interval`` ms. Read at
    #: every round. ``flush_commit_log_timed``: sleep the whole interval (Java's default); false: a round starts at
    #: each append (ASYNC_FLUSH), or after the interval when none comes.
    flush_interval_commit_log: int = 500
    flush_commit_log_least_pages: int = 4
    flush_commit_log_thorough_interval: int = 10_000
    flush_commit_log_timed: bool = True
    #: The ConsumeQueue flush (DefaultMessageStore.FlushConsumeQueueService), the same way with its own settings; its
    #: thorough round also syncs the CommitLog, the index and the checkpoint (store/services.py).
    flush_interval_consume_queue: int = 1000
    flush_consume_queue_least_pages: int = 2
    flush_consume_queue_thorough_interval: int = 60_000
    sync_flush_timeout: int = 5000
    #: Recovery checks each record's body CRC (a corrupted body ends the log there).
    check_crc_on_recover: bool = True
    warm_mapped_file_enable: bool = False
    #: ``osPageCacheBusyTimeOutMills``: an append that held the put lock (the Trio thread) longer than this makes the
    #: store "page-cache busy" (:meth:`~store.message_store.MessageStore.is_os_page_cache_busy`).
    os_page_cache_busy_time_out_mills: int = 1000
    file_reserved_time: int = 72
    delete_when: str = "04"
    clean_resource_interval: int = 10_000
    #: Percent; used clamped to 10..95 (:attr:`disk_max_used_fraction`).
    disk_max_used_space_ratio: int = 75
    #: ``cleanFileForciblyEnable``: above ``disk_space_clean_forcibly_ratio`` segments go whatever their age.
    clean_file_forcibly_enable: bool = True
    disk_space_clean_forcibly_ratio: float = 0.85
    disk_space_warning_level_ratio: float = 0.90
    delete_commit_log_files_interval: int = 100
    #: Pause (ms) after each ConsumeQueue whose expired files a pass deleted (CleanConsumeQueueService).
    delete_consume_queue_files_interval: int = 100
    #: Java's grace (ms) for a segment readers still reference before it is destroyed anyway. Accepted and shown,
    #: nothing to wait for here: a deleted segment is unlinked and unmapped at once, and the slices readers already
    #: hold keep the mapping (and its bytes) valid until the last is dropped (store/services.py destroy_off_thread).
    destroy_maped_file_interval_forcibly: int = 120_000
    max_hash_slot_num: int = 5_000_000
    max_index_num: int = 20_000_000
    message_index_enable: bool = True
    #: Light Message Queues and multi-dispatch (store/multi_dispatch.py; MessageStoreConfig's names and defaults):
    #: ``enableMultiDispatch`` dispatches a message to the queues its ``INNER_MULTI_DISPATCH`` lists, ``enableLmq``
    #: gives ``%LMQ%`` queues queue id 0 and caps their ConsumeQueues at ``maxLmqConsumeQueueNum``.
    enable_lmq: bool = False
    enable_multi_dispatch: bool = False
    max_lmq_consume_queue_num: int = 20_000
    message_delay_level: str = "1s 5s 10s 30s 1m 2m 3m 4m 5m 6m 7m 8m 9m 10m 20m 30m 1h 2h"
    disk_io_threads: int = 2
    #: Most messages one pull returns while its data is in memory (Java's maxTransferCountOnMessageInMemory)...
    max_transfer_count_on_message_in_memory: int = 32
    #: ...and most bytes (a pull's first message always comes), then the same once it is on disk
    #: (``accessMessageInMemoryMaxRatio``): MessageStoreConfig's names and defaults.
    max_transfer_bytes_on_message_in_memory: int = 256 * 1024
    max_transfer_count_on_message_in_disk: int = 8
    max_transfer_bytes_on_message_in_disk: int = 64 * 1024
    #: Replication (RocketMQ's MessageStoreConfig names and defaults; store/ha/).
    broker_role: BrokerRole = BrokerRole.ASYNC_MASTER
    #: Port of the master's HA listener; 0 binds a free one (the broker derives listenPort + 1 before this).
    ha_listen_port: int = 0
    #: Host the HA listener binds.
    ha_listen_host: str = "0.0.0.0"
    #: Bind a free port when ``ha_listen_port`` is taken (the broker sets it when it derived the port from its own
    #: rather than being given one: slaves learn the real one from the name server).
    ha_listen_port_fallback: bool = False
    ha_send_heartbeat_interval: int = 5000
    ha_housekeeping_interval: int = 20_000
    ha_transfer_batch_size: int = 32 * 1024
    ha_slave_fallbehind_max: int = 256 * 1024 * 1024
    #: RocketMQ 5: a slave this many bytes behind or more is not in sync (GET_BROKER_HA_STATUS's ``inSync``).
    ha_max_gap_not_in_sync: int = 256 * 1024 * 1024
    #: A slave's static master HA address (``host:port``); shorter than 6 characters means "learn it from the name
    #: server", as Java.
    ha_master_address: str = ""
    #: SYNC_MASTER: how long a send waits for a slave's acknowledgement (ms) before FLUSH_SLAVE_TIMEOUT.
    slave_timeout: int = 3000
    #: Percentage of physical RAM behind the CommitLog head that still counts as "in memory" for pulls.
    access_message_in_memory_max_ratio: int = 40
    now_ms: Callable[[], int] = wall_clock_ms
    disk_usage_ratio: Callable[[Path], float] = disk_used_ratio

    @property
    def disk_max_used_fraction(self) -> float:
        """``diskMaxUsedSpaceRatio`` clamped to 10..95 %, as a fraction (RocketMQ's
        store/src/main/java/org/apache/rocketmq/store/config/MessageStoreConfig.java getDiskMaxUsedSpaceRatio)."""
        return min(max(self.disk_max_used_space_ratio, 10), 95) / 100

    @property
    def is_slave(self) -> bool:
        return self.broker_role is BrokerRole.SLAVE

    @property
    def commit_log_dirs(self) -> SegmentDirs:
        """The CommitLog's directories (RocketMQ's ``getStorePathCommitLog``). Raises ValueError when every one named
        is read-only."""
        default = Path(self.store_path_root_dir) / "commitlog"
        return SegmentDirs.from_settings(self.store_path_commit_log, self.read_only_commit_log_store_paths, default)

    @property
    def consume_queue_dir(self) -> Path:
        return Path(self.store_path_root_dir) / "consumequeue"

    @property
    def index_dir(self) -> Path:
        return Path(self.store_path_root_dir) / "index"
