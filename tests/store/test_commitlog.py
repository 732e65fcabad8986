"""CommitLog and mapped segments: naming, end-of-file blanks, batches, zero-copy reads, the replica seam."""

from __future__ import annotations

from pathlib import Path

import pytest

from remoting.codec.errors import MessageDecodeError
from remoting.codec.message import BLANK_MAGIC, decode_record, prepare_message, read_record_meta, record_magic
from store.commitlog import CommitLog
from store.errors import MessageIllegalError, OffsetMismatchError, StoreCorruptError
from store.mapped_file import MappedFileQueue, segment_name
from tests.store.store_helpers import message


def test_segments_are_named_by_twenty_digit_start_offset_and_preallocated(tmp_path: Path) -> None:
    log = CommitLog(tmp_path, 1024)
    for i in range(20):
        log.append(prepare_message(message(body=bytes(100))), i, 1)
    names = sorted(p.name for p in tmp_path.iterdir())
    assert names[:3] == [segment_name(0), segment_name(1024), segment_name(2048)]
    assert names[1] == "00000000000000001024"
    assert all((tmp_path / n).stat().st_size == 1024 for n in names)
    log.close()


def test_record_that_does_not_fit_leaves_a_blank_and_starts_the_next_segment(tmp_path: Path) -> None:
    log = CommitLog(tmp_path, 1024)
    p = prepare_message(message(body=bytes(300)))
    offsets = [log.append(p, i, 7) for i in range(4)]
    # 3 records of ~410 bytes do not fit in 1024 with the 8-byte blank reserve: the third moves on.
    assert offsets[2] == 1024
    first = log.queue.files[0]
    blank_at = offsets[1] + p.size
    assert record_magic(first.view, blank_at) == BLANK_MAGIC
    assert int.from_bytes(first.view[blank_at : blank_at + 4], "big") == 1024 - blank_at
    for i, phy in enumerate(offsets):
        record = log.read_record(phy)
        assert record is not None
        msg = decode_record(record, check_crc=True)
        assert (msg.commit_log_offset, msg.queue_offset, msg.store_timestamp) == (phy, i, 7)
    log.close()


def test_batch_moves_to_the_next_segment_as_a_whole(tmp_path: Path) -> None:
    log = CommitLog(tmp_path, 1024)
    log.append(prepare_message(message(body=bytes(500))), 0, 1)
    batch = [prepare_message(message(body=bytes(150))) for _ in range(3)]
    first = log.append_batch(batch, 1, 2)
    assert first == 1024
    metas = [read_record_meta(log.read_record(first + sum(b.size for b in batch[:i])) or b"") for i in range(3)]
    assert [m.queue_offset for m in metas] == [1, 2, 3]
    log.close()


def test_reads_are_zero_copy_views_of_the_mapping(tmp_path: Path) -> None:
    log = CommitLog(tmp_path, 4096)
    phy = log.append(prepare_message(message(body=b"abc")), 0, 1)
    view = log.read_record(phy)
    assert isinstance(view, memoryview)
    assert view.obj is log.queue.files[0].buf
    assert log.read(phy, 10_000) is None
    assert log.read_record(log.max_offset) is None
    del view
    log.close()


def test_record_larger_than_a_segment_is_illegal(tmp_path: Path) -> None:
    log = CommitLog(tmp_path, 1024)
    with pytest.raises(MessageIllegalError):
        log.check_fits(1020)
    log.check_fits(1016)
    log.close()


def test_replica_appends_master_bytes_at_the_same_offsets(tmp_path: Path) -> None:
    master = CommitLog(tmp_path / "m", 1024)
    for i in range(7):
        master.append(prepare_message(message(body=bytes(200 + i))), i, 100 + i)
    replica = CommitLog(tmp_path / "r", 1024)
    # Ship the master's segments in two chunks, the way a replication stream would.
    end = master.max_offset
    data = b"".join(bytes(mf.view[: mf.wrote_position]) for mf in master.queue.files)
    metas = replica.append_encoded(0, data[:1024]) + replica.append_encoded(1024, data[1024:])
    assert [m.queue_offset for m in metas] == list(range(7))
    assert replica.max_offset == end
    for a, b in zip(master.queue.files, replica.queue.files, strict=True):
        assert bytes(a.view[: a.wrote_position]) == bytes(b.view[: b.wrote_position])
    with pytest.raises(OffsetMismatchError):
        replica.append_encoded(0, data)
    bad = bytearray(data[2048:])
    bad[100] ^= 0xFF
    with pytest.raises(MessageDecodeError):
        replica.append_encoded(replica.max_offset, bytes(bad[: len(bad)]))
    master.close()
    replica.close()


def test_segment_of_the_wrong_size_is_reported_as_corrupt(tmp_path: Path) -> None:
    (tmp_path / segment_name(0)).write_bytes(b"x" * 100)
    queue = MappedFileQueue(tmp_path, 1024)
    with pytest.raises(StoreCorruptError):
        queue.load()
