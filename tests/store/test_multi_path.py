"""RocketMQ's multi-path CommitLog (``storePathCommitLog`` naming several directories, ``readOnlyCommitLogStorePaths``):
segments spread over the directories by number, every directory read back at load, read-only and nearly full
directories never given a new segment, nothing acknowledged lost when the writer is SIGKILLed, and a directory with
no room left refusing sends instead of killing the broker."""

from __future__ import annotations

import errno
import os
import random
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from broker.embedded import EmbeddedCluster
from remoting.client import RemotingClient
from remoting.codec.codes import ResponseCode
from remoting.codec.message import decode_record
from store.errors import StoreCorruptError
from store.mapped_file import MappedFile, segment_name, segment_paths
from store.message_store import MessageStore
from store.results import GetStatus
from store.store_config import FlushDiskType
from store.store_paths import SegmentDirs, split_paths
from tests.broker.helpers import create_topic_request
from tests.processors.conftest import send_request
from tests.store.store_helpers import message, open_store
from tests.store.test_crash import run_child_until_killed, verify_acked

SEGMENT = 4096


def _names(directory: Path) -> list[int]:
    return [int(p.name) for p in segment_paths(directory)]


def _fill(store: MessageStore, count: int) -> list[int]:
    return [store.append(message(body=f"m{i}".encode() * 40, queue_id=i % 2)).phy_offset for i in range(count)]


def _bodies(store: MessageStore, phys: list[int]) -> list[bytes]:
    records = [store.look_message_by_offset(phy) for phy in phys]
    assert all(record is not None for record in records)
    return [decode_record(record, check_crc=True).body for record in records if record is not None]


def test_split_paths_and_the_directory_of_each_segment(tmp_path: Path) -> None:
    a, b, c = tmp_path / "a", tmp_path / "b", tmp_path / "c"
    assert split_paths(f" {b} ,{a},,{b}") == (b, a)
    dirs = SegmentDirs.from_settings(f"{b},{a},{c}", str(c), tmp_path / "default")
    # Sorted by name, the read-only one left out, picked by segment number modulo their count.
    assert [dirs.for_segment(n * SEGMENT, SEGMENT) for n in range(4)] == [a, b, a, b]
    assert [dirs.for_segment(n * SEGMENT, SEGMENT, frozenset({a})) for n in range(3)] == [b, b, b]
    # Every writable directory full: the writable ones again rather than none.
    assert dirs.for_segment(SEGMENT, SEGMENT, frozenset({a, b})) == b
    assert dirs.every() == (b, a, c)
    # One path: read-only directories are ignored, as RocketMQ uses its multi-path queue only for several.
    single = SegmentDirs.from_settings(str(a), str(b), tmp_path / "default")
    assert (single.writable, single.read_only) == ((a,), ())
    assert SegmentDirs.from_settings("", str(b), tmp_path / "default").writable == (tmp_path / "default",)
    with pytest.raises(ValueError, match="read-only"):
        SegmentDirs.from_settings(f"{a},{b}", f"{a},{b}", tmp_path / "default")


def test_segments_alternate_over_the_directories_and_survive_a_restart(tmp_path: Path) -> None:
    a, b = tmp_path / "disk-a", tmp_path / "disk-b"
    paths = f"{b},{a}"
    store = open_store(tmp_path / "root", store_path_commit_log=paths)
    phys = _fill(store, 60)
    files = len(store.commitlog.queue.files)
    assert files >= 4
    starts = [mf.file_from_offset for mf in store.commitlog.queue.files]
    assert _names(a) == starts[0::2] and _names(b) == starts[1::2]
    assert not (tmp_path / "root" / "commitlog").exists()
    store.close()
    store = open_store(tmp_path / "root", store_path_commit_log=paths)
    assert len(store.commitlog.queue.files) == files
    assert _bodies(store, phys) == [f"m{i}".encode() * 40 for i in range(60)]
    # New writes go on after the last record, into the directory the next segment's number picks.
    end = store.max_phy_offset
    more = _fill(store, 30)
    assert end <= more[0] < end + SEGMENT
    assert sorted(_names(a) + _names(b)) == [mf.file_from_offset for mf in store.commitlog.queue.files]
    assert {s // SEGMENT % 2 for s in _names(a)} == {0} and {s // SEGMENT % 2 for s in _names(b)} == {1}
    store.close()


def test_read_only_directories_are_read_and_never_written(tmp_path: Path) -> None:
    old, a, b = tmp_path / "old", tmp_path / "a", tmp_path / "b"
    store = open_store(tmp_path / "root", store_path_commit_log=str(old))
    phys = _fill(store, 40)
    store.close()
    kept = sorted(p.name for p in old.iterdir())
    # The old disk is kept for reading only; new segments go to the two new ones.
    settings = {"store_path_commit_log": f"{a},{b}", "read_only_commit_log_store_paths": str(old)}
    store = open_store(tmp_path / "root", **settings)
    assert _bodies(store, phys) == [f"m{i}".encode() * 40 for i in range(40)]
    more = _fill(store, 60)
    store.close()
    assert sorted(p.name for p in old.iterdir()) == kept
    assert _names(a) and _names(b)
    store = open_store(tmp_path / "root", **settings)
    assert _bodies(store, phys + more) == [f"m{i}".encode() * 40 for i in [*range(40), *range(60)]]
    store.close()


def test_a_segment_in_two_directories_is_refused_at_load(tmp_path: Path) -> None:
    a, b = tmp_path / "a", tmp_path / "b"
    store = open_store(tmp_path / "root", store_path_commit_log=f"{a},{b}")
    _fill(store, 40)
    store.close()
    first = segment_paths(a)[0]
    (b / first.name).write_bytes(first.read_bytes())
    with pytest.raises(StoreCorruptError, match=f"segment {first.name} is both in"):
        open_store(tmp_path / "root", store_path_commit_log=f"{a},{b}")


class PathDisk:
    """A disk per directory: the used ratio of the first configured path containing the asked one, else 0.5."""

    def __init__(self, ratios: dict[Path, float]) -> None:
        self.ratios = ratios

    def __call__(self, path: Path) -> float:
        return next((r for d, r in self.ratios.items() if Path(path).is_relative_to(d)), 0.5)


async def test_retention_keeps_new_segments_off_a_nearly_full_directory(tmp_path: Path) -> None:
    a, b = tmp_path / "a", tmp_path / "b"
    disk = PathDisk({a: 0.5, b: 0.5})
    store = open_store(tmp_path / "root", store_path_commit_log=f"{a},{b}", disk_usage_ratio=disk)
    _fill(store, 40)
    assert _names(a) and _names(b)
    disk.ratios[a] = 0.88  # above diskSpaceCleanForciblyRatio (0.85)
    await store.retention.check_once()
    assert store.commitlog.queue.full == {a}
    before = _names(a)
    _fill(store, 60)
    assert _names(a) == before and len(_names(b)) >= 3
    # The least used directory is the CommitLog's ratio: 0.5 is below diskMaxUsedSpaceRatio, nothing is due.
    assert store.disk_full_reason is None
    disk.ratios[a] = 0.5
    await store.retention.check_once()
    assert store.commitlog.queue.full == frozenset()
    store.close()


def test_sigkilled_writer_over_two_directories_loses_no_acknowledged_record(tmp_path: Path) -> None:
    seed = random.randrange(1 << 30)
    rng = random.Random(seed)
    print(f"multi-path crash test seed {seed}")
    paths = f"{tmp_path / 'disk-a'},{tmp_path / 'disk-b'}"
    acked: list[tuple[int, ...]] = []
    for run in range(3):
        acked += run_child_until_killed(tmp_path / "root", run, rng.randint(100, 600), paths)
        store = open_store(tmp_path / "root", flush_disk_type=FlushDiskType.SYNC_FLUSH, store_path_commit_log=paths,
                           mapped_file_size_commit_log=16 * 1024)  # fmt: skip
        assert store.abnormal_recovery, f"seed {seed}"
        verify_acked(store, acked)
        store.close()
    assert _names(tmp_path / "disk-a") and _names(tmp_path / "disk-b"), f"seed {seed}"


@pytest.mark.parametrize(
    ("code", "made"), [(errno.ENOSPC, False), (errno.EDQUOT, False), (errno.EOPNOTSUPP, True), (errno.EINVAL, True)]
)
def test_a_segment_whose_blocks_cannot_be_taken_is_not_made_sparse(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, code: int, made: bool
) -> None:
    """A full disk (the OS call made to answer ENOSPC here) fails the segment's creation and leaves no file: a sparse
    segment would take its blocks at the first write to each page, and one finding none kills the broker with
    SIGBUS. A file system without fallocate still gets a sparse segment."""

    def refuse(_fd: int, _offset: int, _length: int) -> None:
        raise OSError(code, os.strerror(code))

    monkeypatch.setattr(os, "posix_fallocate", refuse)
    path = tmp_path / segment_name(0)
    if made:
        MappedFile(path, 0, SEGMENT).close()
        assert path.stat().st_size == SEGMENT
    else:
        with pytest.raises(OSError):
            MappedFile(path, 0, SEGMENT)
        assert not path.exists()


@pytest.fixture
def tiny_disk(tmp_path: Path) -> Iterator[Path]:
    """A 64 KiB tmpfs, named to sort after the other directories; skipped where mounting is not allowed."""
    mount = tmp_path / "zz-tiny"
    mount.mkdir()
    done = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=64k", "tmpfs", str(mount)], capture_output=True)
    if done.returncode:
        pytest.skip(f"cannot mount a tmpfs here: {done.stderr.decode(errors='replace').strip()}")
    try:
        yield mount
    finally:
        subprocess.run(["umount", str(mount)], check=False)


async def test_a_directory_with_no_room_refuses_sends_and_the_broker_lives_on(tmp_path: Path, tiny_disk: Path) -> None:
    """Multi-path with one directory on a full disk: the segment that falls there cannot be made, the send is answered
    SYSTEM_ERROR with RocketMQ's remark (CREATE_MAPEDFILE_FAILED), and everything stored before stays readable."""
    paths = f"{tmp_path / 'big'},{tiny_disk / 'cl'}"
    async with EmbeddedCluster(tmp_path / "cluster", mapped_file_size_commit_log=256 * 1024,
                               store_path_commit_log=paths) as cluster, RemotingClient() as client:  # fmt: skip
        addr = cluster.broker_addr
        assert (await client.invoke(addr, create_topic_request("Full", queues=1), 5)).code == ResponseCode.SUCCESS
        codes = []
        for _ in range(300):  # 300 KB: past the first segment
            answer = await client.invoke(addr, send_request("Full", b"x" * 1000, queue_id=0), 5)
            codes.append(answer.code)
            if answer.code != ResponseCode.SUCCESS:
                assert answer.code == ResponseCode.SYSTEM_ERROR
                assert answer.remark == "create mapped file failed, server is busy or broken."
                break
        assert codes[-1] == ResponseCode.SYSTEM_ERROR and codes.count(ResponseCode.SUCCESS) == len(codes) - 1
        store = cluster.controller.context.store
        assert store.get("Full", 0, 0, 32).status is GetStatus.FOUND
        assert not any(tiny_disk.rglob("0*"))
