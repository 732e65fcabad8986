"""``messageIndexEnable=false`` as RocketMQ 4.9.8 (found by a review; the first two tests failed before).
DefaultMessageStore.load always runs ``indexService.load(lastExitOK)``; the flag only stops
CommitLogDispatcherBuildIndex from adding keys. So the index written before the flag was turned off still answers
queryMessage, and CleanConsumeQueueService still calls ``indexService.deleteExpiredFile(minOffset)``
(store/src/main/java/org/apache/rocketmq/store/DefaultMessageStore.java)."""

from __future__ import annotations

import datetime
import os
import struct
from pathlib import Path

from tests.store.store_helpers import FakeClock, message, open_store


class Disk:
    def __call__(self, _path: Path) -> float:
        return 0.1


def _local_ms(hour: int) -> int:
    now = datetime.datetime.now().replace(hour=hour, minute=30, second=0, microsecond=0)
    return int(now.timestamp() * 1000)


def test_keys_indexed_before_the_index_was_turned_off_are_still_found(tmp_path: Path) -> None:
    store = open_store(tmp_path)
    phy = store.append(message(keys="order-1 order-2")).phy_offset
    store.close()

    store = open_store(tmp_path, message_index_enable=False)
    found = store.query_by_key("TopicTest", "order-2", 32, 0, 2**63 - 1)
    # Java: the loaded IndexFile still maps TopicTest#order-2 to the record.
    assert len(found) == 1, f"a message indexed before messageIndexEnable=false is no longer found (phy {phy})"
    store.close()


async def test_index_files_below_the_commitlog_minimum_are_deleted_with_the_index_off(tmp_path: Path) -> None:
    clock = FakeClock(_local_ms(hour=13))
    store = open_store(tmp_path, now_ms=clock)
    for i in range(40):
        keys = " ".join(f"k{i}-{j}" for j in range(10))
        store.append(message(body=bytes(300), queue_id=i % 2, keys=keys))
    store.close()
    index_dir = tmp_path / "index"
    names = sorted(p.name for p in index_dir.iterdir())
    assert len(names) >= 2

    store = open_store(tmp_path, now_ms=clock, disk_usage_ratio=Disk(), message_index_enable=False)
    clock.now = _local_ms(hour=4)
    old = (clock.now - 73 * 3_600_000) / 1000
    for mf in store.commitlog.queue.files:
        os.utime(mf.path, (old, old))
    assert await store.retention.check_once() > 0
    min_phy = store.min_phy_offset
    remaining = sorted(p.name for p in index_dir.iterdir())
    # IndexService.deleteExpiredFile: every file but the newest whose endPhyOffset < minOffset goes.
    stale = [
        name for name in remaining[:-1] if struct.unpack_from(">q", (index_dir / name).read_bytes(), 24)[0] < min_phy
    ]
    store.close()
    assert stale == [], f"index files entirely below the CommitLog minimum {min_phy} kept: {stale}"


def test_keys_stored_with_the_index_off_are_not_indexed(tmp_path: Path) -> None:
    # The flag still stops new keys: CommitLogDispatcherBuildIndex checks isMessageIndexEnable.
    store = open_store(tmp_path, message_index_enable=False)
    store.append(message(keys="late-1"))
    assert store.query_by_key("TopicTest", "late-1", 32, 0, 2**63 - 1) == []
    store.close()
