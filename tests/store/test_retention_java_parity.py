"""Retention settings as RocketMQ 4.9.8's CleanCommitLogService reads them: ``diskMaxUsedSpaceRatio`` clamped to
10..95 and ``cleanFileForciblyEnable=false`` keeping young segments on a nearly full disk
(store/src/main/java/org/apache/rocketmq/store/DefaultMessageStore.java, config/MessageStoreConfig.java). Found by a
review; these failed before."""

from __future__ import annotations

import datetime
import errno
import os
from pathlib import Path

import attrs
import pytest
import trio
import trio.testing

from broker.broker_config import load_broker_config
from broker.context import store_config_of
from store.errors import ServiceNotAvailableError
from store.maintenance import request_manual_delete
from store.message_store import MessageStore
from tests.store.store_helpers import STORE_HOST, FakeClock, message, open_store
from tests.store.test_multi_path import PathDisk
from tests.store.test_retention import Disk


def _local_ms(hour: int) -> int:
    now = datetime.datetime.now().replace(hour=hour, minute=30, second=0, microsecond=0)
    return int(now.timestamp() * 1000)


def _fill(store: MessageStore) -> int:
    for i in range(40):
        store.append(message(body=bytes(300), queue_id=i % 2))
    store.flush_all_blocking()
    files = len(store.commitlog.queue.files)
    assert files >= 4
    return files


async def test_disk_max_used_space_ratio_above_95_is_clamped_to_95_so_a_full_disk_is_cleaned(tmp_path: Path) -> None:
    # MessageStoreConfig.getDiskMaxUsedSpaceRatio clamps to [10, 95]: with 99 configured and the disk 97 % used,
    # Java's isSpaceToDelete is true (0.97 > 0.95) and cleanImmediately (> 0.85) deletes every segment but the newest,
    # whatever their age. Here 0.97 > 0.99 is false: nothing goes outside deleteWhen while writes are refused.
    clock = FakeClock(_local_ms(hour=13))
    store = open_store(tmp_path, now_ms=clock, disk_usage_ratio=Disk(0.97), disk_max_used_space_ratio=99)
    files_before = _fill(store)
    deleted = await store.retention.check_once()
    assert store.disk_full_reason is not None
    assert deleted == files_before - 1, f"disk 97 % full with diskMaxUsedSpaceRatio=99: {deleted} segments deleted"
    store.close()


async def test_disk_max_used_space_ratio_below_10_is_clamped_to_10(tmp_path: Path) -> None:
    # Clamped to 10 %: at 7 % used and outside deleteWhen Java deletes nothing, even expired segments.
    clock = FakeClock(_local_ms(hour=13))
    store = open_store(tmp_path, now_ms=clock, disk_usage_ratio=Disk(0.07), disk_max_used_space_ratio=5,
                       file_reserved_time=0)  # fmt: skip
    _fill(store)
    deleted = await store.retention.check_once()
    assert deleted == 0, f"disk 7 % used with diskMaxUsedSpaceRatio=5 (Java: 10): {deleted} segments deleted"
    store.close()


async def test_clean_file_forcibly_enable_false_keeps_young_segments_on_a_nearly_full_disk(tmp_path: Path) -> None:
    # cleanAtOnce = isCleanFileForciblyEnable() && cleanImmediately: with cleanFileForciblyEnable=false, a disk 87 %
    # used (spacefull, above 0.85) deletes only segments older than fileReservedTime; these are all young.
    conf = tmp_path / "broker.conf"
    conf.write_text(f"storePathRootDir={tmp_path / 'store'}\ncleanFileForciblyEnable=false\n")
    broker_config, _unknown = load_broker_config(conf)
    clock = FakeClock(_local_ms(hour=13))
    config = attrs.evolve(
        store_config_of(broker_config),
        mapped_file_size_commit_log=4096,
        mapped_file_size_consume_queue=8 * 20,
        max_hash_slot_num=64,
        max_index_num=256,
        now_ms=clock,
        disk_usage_ratio=Disk(0.87),
    )
    store = MessageStore(config, store_host=STORE_HOST)
    store.load()
    files_before = _fill(store)
    deleted = await store.retention.check_once()
    assert deleted == 0, f"cleanFileForciblyEnable=false, young segments: {deleted} of {files_before} deleted"
    store.close()


async def test_disk_full_stays_until_usage_falls_to_the_forcible_ratio(tmp_path: Path) -> None:
    # CleanCommitLogService.isSpaceToDelete (a retention pass) marks the disk full above diskSpaceWarningLevelRatio
    # (0.90) and OK only at or below diskSpaceCleanForciblyRatio (0.85); in between it leaves the flag as it was (the
    # 10 s isSpaceFull check clears it there: the test above).
    disk = Disk(0.95)
    store = open_store(tmp_path, now_ms=FakeClock(_local_ms(hour=13)), disk_usage_ratio=disk)
    _fill(store)
    await full_until_the_forcible_ratio(store, disk)
    store.close()


async def full_until_the_forcible_ratio(store: MessageStore, disk: Disk) -> None:
    """Retention passes at 0.95, 0.88 and 0.85 used: full after the first, still full after the second (between
    the forcible and warning ratios), writable after the third."""
    disk.ratio = 0.95
    await store.retention.check_once()
    assert store.disk_full_reason is not None
    disk.ratio = 0.88
    await store.retention.check_once()
    assert store.disk_full_reason is not None, "disk 88 % used after being full: Java keeps refusing writes"
    disk.ratio = 0.85
    await store.retention.check_once()
    assert store.disk_full_reason is None


async def test_the_disk_check_every_10_s_lets_writes_in_again_at_the_warning_ratio(
    tmp_path: Path, autojump_clock: trio.testing.MockClock
) -> None:
    """Besides the retention passes, 4.9.8 runs CleanCommitLogService.isSpaceFull every 10 s from 1 s after the start
    for the broker's life (store/src/main/java/org/apache/rocketmq/store/DefaultMessageStore.java addScheduleTask's
    diskCheckScheduledExecutorService): it marks the disk full above diskSpaceWarningLevelRatio and OK at or below
    it. A disk back at 88 % takes sends within 10 s; ours refused them until the disk fell to 85 %."""
    disk = Disk(0.95)
    store = open_store(tmp_path, now_ms=FakeClock(_local_ms(hour=13)), disk_usage_ratio=disk,
                       flush_interval_commit_log=60_000, flush_interval_consume_queue=60_000)  # fmt: skip
    async with trio.open_nursery() as nursery:
        await nursery.start(store.run)
        await trio.sleep(65)
        await cleared_at_88_percent(store, disk, passes_for=30)
        disk.ratio = 0.91
        await trio.sleep(10.5)
        assert store.disk_full_reason is not None
        nursery.cancel_scope.cancel()
    store.close()


async def cleared_at_88_percent(store: MessageStore, disk: Disk, passes_for: float) -> None:
    """With the store's retention running and its disk full: back at 88 %, the next 10 s disk check lets writes in,
    and the passes of the ``passes_for`` seconds after it leave the flag so."""
    assert store.disk_full_reason is not None
    disk.ratio = 0.88
    await trio.sleep(10.5)
    assert store.disk_full_reason is None, "disk 88 % used: isSpaceFull marks it OK"
    await trio.sleep(passes_for)
    assert store.disk_full_reason is None, "the passes leave the flag as it is between 85 % and 90 %"


async def test_a_manual_delete_in_the_first_minute_waits_for_the_first_pass(
    tmp_path: Path, autojump_clock: trio.testing.MockClock
) -> None:
    """DELETE_EXPIRED_COMMITLOG (mqadmin deleteExpiredCommitLog) only sets manualDeleteFileSeveralTimes
    (4.9.8 store/src/main/java/org/apache/rocketmq/store/DefaultMessageStore.java executeDeleteFilesManually): the
    next periodic pass deletes, the first one a minute after the start. Ours ran a pass at once. Expired segments,
    outside deleteWhen, the disk half used; no flush timer inside the window."""
    tomorrow = datetime.datetime.now() + datetime.timedelta(days=1)
    clock = FakeClock(int(tomorrow.replace(hour=13, minute=30).timestamp() * 1000))
    store = open_store(tmp_path, now_ms=clock, disk_usage_ratio=Disk(0.5), file_reserved_time=0,
                       flush_interval_commit_log=60_000, flush_interval_consume_queue=60_000)  # fmt: skip
    files = _fill(store)
    async with trio.open_nursery() as nursery:
        await nursery.start(store.run)
        await trio.sleep(5)
        request_manual_delete(store)
        await trio.sleep(54)
        assert len(store.commitlog.queue.files) == files, "deleted before the first pass"
        await trio.sleep(2)
        assert len(store.commitlog.queue.files) < files
        nursery.cancel_scope.cancel()
    store.close()


class FailingOnceDisk:
    """A disk whose first usage read fails (statvfs: EIO), as a disk going away for a moment does."""

    def __init__(self, ratio: float) -> None:
        self.ratio = ratio
        self.calls = 0
        self.fail = False

    def __call__(self, _path: Path) -> float:
        self.calls += 1
        if self.fail:
            self.fail = False
            raise OSError(errno.EIO, "Input/output error")
        return self.ratio


async def test_a_retention_pass_that_fails_is_logged_and_the_next_one_runs(
    tmp_path: Path, autojump_clock: trio.testing.MockClock
) -> None:
    # CleanCommitLogService.run and CleanConsumeQueueService.run catch any Throwable a pass raises and log it
    # (store/src/main/java/org/apache/rocketmq/store/DefaultMessageStore.java): the broker goes on and the next
    # pass runs cleanResourceInterval later. No flush timer inside the window, as in test_retention.py. The first
    # pass runs 60 s after the start, after the disk checks at 1, 11, ... 51 s (DefaultMessageStore.addScheduleTask).
    disk = FailingOnceDisk(0.5)
    store = open_store(tmp_path, disk_usage_ratio=disk, clean_resource_interval=10_000,
                       flush_interval_commit_log=60_000, flush_interval_consume_queue=60_000)  # fmt: skip
    async with trio.open_nursery() as nursery:
        await nursery.start(store.run)
        await trio.sleep(55)
        calls, disk.fail = disk.calls, True
        await trio.sleep(5.5)
        assert disk.calls == calls + 1 and not disk.fail, "the first pass failed"
        disk.ratio = 0.95
        await trio.sleep(10)
        assert store.disk_full_reason is not None, "the pass after the failed one marks the full disk"
        nursery.cancel_scope.cancel()


def _disk_with_reserved_blocks(monkeypatch: pytest.MonkeyPatch, root: Path, *, used: int, free: int,
                               available: int) -> None:  # fmt: skip
    """The file system under ``root`` reports 4 KiB blocks ``used`` + ``free`` in all, of which ``available`` are free
    to us: the rest of the free ones are reserved (ext4 keeps 5 % for root by default)."""
    real = os.statvfs

    def statvfs(path: os.PathLike[str] | str) -> os.statvfs_result:
        if not Path(path).is_relative_to(root):
            return real(path)
        return os.statvfs_result((4096, 4096, used + free, free, available, 1000, 500, 500, 0, 255))

    monkeypatch.setattr(os, "statvfs", statvfs)


async def test_the_disk_ratio_counts_only_the_space_available_to_the_broker(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """UtilAll.getDiskPartitionSpaceUsedPercent (4.9.8, common/src/main/java/org/apache/rocketmq/common/
    UtilAll.java) divides the used space by used + usable (File.getUsableSpace: free blocks not reserved), rounded
    up to a percent, as ``df`` shows Use%: on a disk 88 % used whose 6 % are reserved, 880 / 940 = 0.94, above
    diskSpaceWarningLevelRatio, so writes are refused. Ours divided by the whole disk (0.88) and took writes until
    only the reserved blocks were left."""
    _disk_with_reserved_blocks(monkeypatch, tmp_path, used=880, free=120, available=60)
    store = open_store(tmp_path, now_ms=FakeClock(_local_ms(hour=13)))
    store.append(message())
    await store.retention.check_once()
    assert store.retention.physic_ratio() == 0.94
    with pytest.raises(ServiceNotAvailableError, match="disk full"):
        store.append(message())
    store.close()


async def test_passes_keep_a_fixed_rate_a_long_pass_followed_at_once_by_the_next_due(
    tmp_path: Path, autojump_clock: trio.testing.MockClock
) -> None:
    """DefaultMessageStore.addScheduleTask runs cleanFilesPeriodically with scheduleAtFixedRate (4.9.8
    store/src/main/java/org/apache/rocketmq/store/DefaultMessageStore.java): a minute after the start, then every
    cleanResourceInterval from there, a pass that outlasts it followed at once by the next due. Ours waited the
    interval after each pass ended. The first pass deletes its three expired segments 6 s apart, no pause after the
    last (12 s: MappedFileQueue.deleteExpiredFileByTime); the second starts when it ends. Each pass reads the
    ConsumeQueue directory's usage (isSpaceToDelete's ``getStorePathLogic``). The suite's clock holds while a disk
    thread works (tests/virtual_clock.py)."""
    tomorrow = datetime.datetime.now() + datetime.timedelta(days=1)
    clock = FakeClock(int(tomorrow.replace(hour=4, minute=30).timestamp() * 1000))
    logics_reads: list[float] = []

    def disk(path: Path) -> float:
        if Path(path) == tmp_path / "consumequeue":
            logics_reads.append(trio.current_time())
        return 0.5

    store = open_store(tmp_path, now_ms=clock, disk_usage_ratio=disk, file_reserved_time=0,
                       delete_commit_log_files_interval=6_000,
                       flush_interval_commit_log=60_000, flush_interval_consume_queue=60_000)  # fmt: skip
    assert _fill(store) == 4
    start = trio.current_time()
    async with trio.open_nursery() as nursery:
        await nursery.start(store.run)
        await trio.sleep(95)
        nursery.cancel_scope.cancel()
    store.close()
    assert len(store.commitlog.queue.files) == 1
    first, second = logics_reads[0] - start, logics_reads[1] - start
    assert first == pytest.approx(60, abs=0.1)
    assert 72 <= second < 74, "the next pass due waited the interval after the long one"


async def test_a_pass_pauses_between_two_deletions_but_not_after_the_last(
    tmp_path: Path, autojump_clock: trio.testing.MockClock
) -> None:
    """4.9.8's MappedFileQueue.deleteExpiredFileByTime (store/src/main/java/org/apache/rocketmq/store/
    MappedFileQueue.java) sleeps ``deleteCommitLogFilesInterval`` after a deletion only while a segment before the
    newest is left (``(i + 1) < mfsLength``): three segments deleted make a pass of two pauses. Ours paused once
    more after the last, so the pass (and the next one due, the ConsumeQueue clean-up after it) ran 6 s late."""
    clock = FakeClock(_local_ms(hour=13))
    store = open_store(tmp_path, now_ms=clock, disk_usage_ratio=Disk(0.97), delete_commit_log_files_interval=6_000,
                       delete_consume_queue_files_interval=0)  # fmt: skip
    assert _fill(store) == 4
    start = trio.current_time()
    assert await store.retention.check_once() == 3
    assert trio.current_time() - start == pytest.approx(12)
    store.close()


async def test_a_pass_reads_the_consume_queue_disk_not_the_store_root(tmp_path: Path) -> None:
    """4.9.8's CleanCommitLogService.isSpaceToDelete reads the CommitLog's directories and ``getStorePathLogic``
    (``<storePathRootDir>/consumequeue``), never the root itself (store/src/main/java/org/apache/rocketmq/store/
    DefaultMessageStore.java): a ConsumeQueue disk 95 % used marks the store full, a root 95 % used does not. Ours
    read the root (found by a review)."""
    commitlog, cq_dir = tmp_path / "commitlog", tmp_path / "consumequeue"
    disk = PathDisk({cq_dir: 0.95, commitlog: 0.5})
    store = open_store(tmp_path, now_ms=FakeClock(_local_ms(hour=13)), disk_usage_ratio=disk)
    _fill(store)
    await store.retention.check_once()
    assert store.disk_full_reason is not None
    disk.ratios = {cq_dir: 0.5, commitlog: 0.5, tmp_path: 0.95}
    await store.retention.check_once()
    assert store.disk_full_reason is None
    store.close()


@pytest.mark.parametrize(
    ("log_ratio", "queue_ratio", "full_before", "full_after"),
    [
        (0.80, 0.95, False, False),  # the log's disk is past diskMaxUsedSpaceRatio: the queues' is never read
        (0.80, 0.95, True, False),  # ... and at or below 0.85 it clears the flag
        (0.87, 0.50, True, True),  # between 0.85 and 0.90 the flag is left as it was
        (0.50, 0.88, True, False),  # the log's disk clears it; the queues' 0.88 (between) leaves it cleared
        (0.50, 0.95, False, True),  # the log's disk is below 0.75: the queues' 0.95 marks it full
    ],
)
async def test_a_pass_reads_the_log_disk_then_the_queue_disk_as_javas_two_steps(
    tmp_path: Path, log_ratio: float, queue_ratio: float, full_before: bool, full_after: bool
) -> None:
    """4.9.8's CleanCommitLogService.isSpaceToDelete (store/src/main/java/org/apache/rocketmq/store/
    DefaultMessageStore.java) sets the disk-full flag from the CommitLog's disk (above diskSpaceWarningLevelRatio,
    0.90), clears it at or below diskSpaceCleanForciblyRatio (0.85), and returns at once when that disk is past
    diskMaxUsedSpaceRatio (0.75); only otherwise does the ConsumeQueues' disk get the same rules. Ours took the fuller
    of the two disks in one step: a CommitLog disk at 0.80 beside a queue disk at 0.95 refused writes Java accepts,
    and one at 0.50 did not clear a flag set before (found by a review)."""
    commitlog, cq_dir = tmp_path / "commitlog", tmp_path / "consumequeue"
    disk = PathDisk({cq_dir: 0.5, commitlog: 0.5})
    store = open_store(tmp_path, now_ms=FakeClock(_local_ms(hour=13)), disk_usage_ratio=disk)
    _fill(store)
    if full_before:
        disk.ratios = {cq_dir: 0.5, commitlog: 0.95}
        await store.retention.check_once()
        assert store.disk_full_reason is not None
    disk.ratios = {cq_dir: queue_ratio, commitlog: log_ratio}
    await store.retention.check_once()
    assert (store.disk_full_reason is not None) is full_after
    store.close()
