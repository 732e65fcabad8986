"""The replica seam: a second store fed the master's CommitLog bytes ends up with the same log, queues and index."""

from __future__ import annotations

from pathlib import Path

import pytest
import trio

from remoting.codec.errors import MessageDecodeError
from store.errors import OffsetMismatchError
from store.store_config import FlushDiskType
from tests.store.store_helpers import message, open_store


def test_replica_fed_master_bytes_builds_identical_queues_and_index(tmp_path: Path) -> None:
    master = open_store(tmp_path / "master")
    for i in range(30):
        master.append(message(body=bytes(100 + i), queue_id=i % 3, tags=f"t{i % 2}", keys=f"k{i}"))
    master.append_batch([message(body=b"b", queue_id=1) for _ in range(5)])
    replica = open_store(tmp_path / "replica")
    offset = 0
    for mf in master.commitlog.queue.files:
        chunk = bytes(mf.view[: mf.wrote_position])
        assert replica.append_encoded(offset, chunk) == offset + len(chunk)
        offset += len(chunk)
    assert replica.max_phy_offset == master.max_phy_offset
    for queue_id in range(3):
        assert replica.max_offset_in_queue("TopicTest", queue_id) == master.max_offset_in_queue("TopicTest", queue_id)
        mine, theirs = replica.consume_queue("TopicTest", queue_id), master.consume_queue("TopicTest", queue_id)
        assert [mine.entry(i) for i in range(mine.max_offset)] == [theirs.entry(i) for i in range(theirs.max_offset)]
    assert len(replica.query_by_key("TopicTest", "k7", 8, 0, 2**62)) == 1
    with pytest.raises(OffsetMismatchError):
        replica.append_encoded(0, b"")
    with pytest.raises(MessageDecodeError):
        replica.append_encoded(replica.max_phy_offset, b"\x00" * 100)
    master.close()
    replica.close()


async def test_put_batch_under_sync_flush_is_durable_when_it_returns(tmp_path: Path) -> None:
    store = open_store(tmp_path, flush_disk_type=FlushDiskType.SYNC_FLUSH)
    async with trio.open_nursery() as nursery:
        await nursery.start(store.run)
        result = await store.put_batch([message(body=b"x" * 50) for _ in range(4)])
        assert result.ok
        assert result.append.count == 4
        assert len(result.append.msg_id.split(",")) == 4
        assert store.flush_watermark >= result.append.end_offset
        nursery.cancel_scope.cancel()
