"""The replica seam: a second store fed the master's CommitLog bytes ends up with the same log, queues and index."""

from __future__ import annotations

import shutil
import struct
from pathlib import Path

import pytest
import trio

from remoting.codec.errors import MessageDecodeError
from store.errors import OffsetMismatchError
from store.store_config import BrokerRole, FlushDiskType
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


def _queue_offset_set(record: bytes, queue_offset: int) -> bytes:
    """One encoded record with its QUEUEOFFSET field (bytes 20..28, outside the body CRC) replaced."""
    return record[:20] + struct.pack(">q", queue_offset) + record[28:]


def test_replica_record_with_a_far_queue_offset_makes_at_most_one_segment(tmp_path: Path) -> None:
    """A damaged record claiming queue offset 1000 (125 segments of 8 entries past the end) makes no segment: its
    entry goes to the queue's end, as ConsumeQueue.putMessagePositionInfo (4.9.8) appends at the last file's write
    position, making at most the next file, and logs "[BUG]logic queue order maybe wrong". The records after it are
    dispatched, the queue's next offset stays right, and a recovery that dispatches the records again keeps them."""
    master = open_store(tmp_path / "master")
    results = [master.append(message(body=b"m%d" % i)) for i in range(5)]
    log = bytes(master.commitlog.queue.files[0].view[: master.max_phy_offset])
    far = results[3]
    damaged = log[: far.phy_offset] + _queue_offset_set(log[far.phy_offset : far.phy_offset + far.size], 1000)
    replica = open_store(tmp_path / "replica", broker_role=BrokerRole.SLAVE)
    assert replica.replica is not None
    replica.replica.append(0, damaged + log[far.phy_offset + far.size :])
    queue_dir = tmp_path / "replica" / "consumequeue" / "TopicTest" / "0"
    theirs = master.consume_queue("TopicTest", 0)
    expected = [theirs.entry(i) for i in range(5)]
    assert len(list(queue_dir.iterdir())) == 1
    cq = replica.consume_queue("TopicTest", 0)
    assert (cq.max_offset, replica.queue_offsets[cq.key]) == (5, 5)
    assert [cq.entry(i) for i in range(5)] == expected
    replica.close()
    # recovery from the checkpoint; from the log's start over the queue's files; rebuilding the deleted queue
    for undo in (lambda: None, (tmp_path / "replica" / "checkpoint").unlink, lambda: shutil.rmtree(queue_dir)):
        undo()
        recovered = open_store(tmp_path / "replica", broker_role=BrokerRole.SLAVE)
        assert len(list(queue_dir.iterdir())) == 1
        cq = recovered.consume_queue("TopicTest", 0)
        assert (cq.max_offset, recovered.queue_offsets[cq.key]) == (5, 5)
        assert [cq.entry(i) for i in range(5)] == expected
        recovered.close()
    master.close()


@pytest.mark.parametrize("claimed", [5, 9], ids=["in_the_last_file", "in_the_next_file"])
def test_replica_record_a_little_past_the_end_is_indexed_at_the_end(tmp_path: Path, claimed: int) -> None:
    """A damaged record claiming queue offset 5 or 9 when the queue is at 3 (8 entries a file) leaves no empty slot
    before its entry, where recovery would end the queue and lose it and the records after it: RocketMQ 4.9.8 appends
    at the last file's write position whatever the gap, logging "[BUG]logic queue order maybe wrong"
    (store/src/main/java/org/apache/rocketmq/store/ConsumeQueue.java putMessagePositionInfo)."""
    master = open_store(tmp_path / "master")
    results = [master.append(message(body=b"m%d" % i)) for i in range(5)]
    log = bytes(master.commitlog.queue.files[0].view[: master.max_phy_offset])
    gap = results[3]
    damaged = log[: gap.phy_offset] + _queue_offset_set(log[gap.phy_offset : gap.phy_offset + gap.size], claimed)
    replica = open_store(tmp_path / "replica", broker_role=BrokerRole.SLAVE)
    assert replica.replica is not None
    replica.replica.append(0, damaged + log[gap.phy_offset + gap.size :])
    theirs = master.consume_queue("TopicTest", 0)
    expected = [theirs.entry(i) for i in range(5)]
    cq = replica.consume_queue("TopicTest", 0)
    assert (cq.max_offset, replica.queue_offsets[cq.key]) == (5, 5)
    assert [cq.entry(i) for i in range(5)] == expected
    replica.close()
    recovered = open_store(tmp_path / "replica", broker_role=BrokerRole.SLAVE)
    cq = recovered.consume_queue("TopicTest", 0)
    assert cq.max_offset == 5
    assert [cq.entry(i) for i in range(5)] == expected
    recovered.close()
    master.close()


def test_replica_record_with_a_queue_offset_behind_the_end_leaves_the_entry_there(tmp_path: Path) -> None:
    """A damaged record claiming queue offset 1 when the queue is at 3 does not overwrite entry 1 (the message it
    indexes would be lost to consumers): RocketMQ 4.9.8 never rewrites an entry ("Build consume queue repeatedly",
    ConsumeQueue.putMessagePositionInfo). Ours indexes it at the queue's end, as a far one, so nothing is lost."""
    master = open_store(tmp_path / "master")
    results = [master.append(message(body=b"m%d" % i)) for i in range(5)]
    log = bytes(master.commitlog.queue.files[0].view[: master.max_phy_offset])
    behind = results[3]
    damaged = log[: behind.phy_offset] + _queue_offset_set(log[behind.phy_offset : behind.phy_offset + behind.size], 1)
    replica = open_store(tmp_path / "replica", broker_role=BrokerRole.SLAVE)
    assert replica.replica is not None
    replica.replica.append(0, damaged + log[behind.phy_offset + behind.size :])
    theirs = master.consume_queue("TopicTest", 0)
    cq = replica.consume_queue("TopicTest", 0)
    assert (cq.max_offset, replica.queue_offsets[cq.key]) == (5, 5)
    assert [cq.entry(i) for i in range(5)] == [theirs.entry(i) for i in range(5)]
    replica.close()
    master.close()
