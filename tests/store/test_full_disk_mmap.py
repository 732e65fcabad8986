"""Mapped files on a disk that fills up: a write through a mapping into a page the file has no block for raises
SIGBUS when the disk has none left, which kills the process (the JVM turns it into an InternalError at the write:
DLedger's DefaultMmapFile and RocketMQ's MappedFile and IndexFile map sparse files and go on). Here every such file
takes its blocks before writing into them (``posix_fallocate``), so a full disk is ENOSPC, an error, and the process
lives on. Each case runs in a child process on a 16 MiB tmpfs filled to the last block: a SIGBUS kills the child, not
the test run; the child reports what it saw as a JSON line."""

from __future__ import annotations

import errno
import json
import os
import shutil
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

if TYPE_CHECKING:
    from dledger.config import DLedgerConfig

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture
def full_disk(tmp_path: Path) -> Iterator[Path]:
    """A 16 MiB tmpfs (room for an 8 MiB DLedger data segment), unmounted afterwards; skipped where mounting is not
    allowed."""
    mount = tmp_path / "tiny"
    mount.mkdir()
    done = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=16m", "tmpfs", str(mount)], capture_output=True)
    if done.returncode:
        pytest.skip(f"cannot mount a tmpfs here: {done.stderr.decode(errors='replace').strip()}")
    try:
        yield mount
    finally:
        subprocess.run(["umount", str(mount)], check=False)


@pytest.fixture
def xfs_disk(tmp_path: Path) -> Iterator[Path]:
    """A 300 MiB XFS (mkfs.xfs's smallest) on a loop device, unmounted afterwards; skipped without xfsprogs or where
    loop mounts are not allowed (a container without root or /dev/loop*)."""
    mkfs = shutil.which("mkfs.xfs") or shutil.which("mkfs.xfs", path="/usr/sbin:/sbin")
    if mkfs is None:
        pytest.skip("mkfs.xfs is not installed (Debian package xfsprogs, which `make test-setup` installs as root)")
    image, mount = tmp_path / "xfs.img", tmp_path / "xfs"
    image.write_bytes(b"")
    os.truncate(image, 300 << 20)
    mount.mkdir()
    made = subprocess.run([mkfs, "-q", str(image)], capture_output=True)
    loop = ["mount", "-o", "loop", str(image), str(mount)]
    done = made if made.returncode else subprocess.run(loop, capture_output=True)
    if done.returncode:
        pytest.skip(f"cannot make and loop-mount an XFS here: {done.stderr.decode(errors='replace').strip()}")
    try:
        yield mount
    finally:
        subprocess.run(["umount", str(mount)], check=False)


def fill(path: Path) -> None:
    """Write ``path`` until the disk has no block left."""
    with open(path, "wb", buffering=0) as f:
        for chunk in (64 * 1024, 4096, 512):
            try:
                while True:
                    f.write(bytes(chunk))
            except OSError as exc:
                if exc.errno != errno.ENOSPC:
                    raise


def run_child(case: str, root: Path) -> dict[str, object]:
    """Run ``case`` (a function of this module) in a child process; its report, once it exited normally."""
    code = f"import sys; from tests.store.test_full_disk_mmap import {case}; {case}(sys.argv[1])"
    done = subprocess.run([sys.executable, "-c", code, str(root)], cwd=REPO, capture_output=True, timeout=120)
    assert done.returncode == 0, f"child died ({done.returncode}): {done.stderr.decode(errors='replace')[-2000:]}"
    report: dict[str, object] = json.loads(done.stdout.decode().splitlines()[-1])
    return report


def constant(body: bytes) -> Callable[[int], bytes]:
    """An entry's body fill that writes ``body`` wherever the entry lies."""
    return lambda _pos: body


def dledger_index_case(root: str) -> None:
    """A leader appends small entries to a DLedger log whose data segment has room while the disk is full: the
    index records reach the end of the blocks the index segment holds."""
    from dledger.config import DLedgerConfig
    from dledger.file_store import FileLedger

    size = 1 << 20
    config = DLedgerConfig(group="g", self_id="n0", peers="n0-a:1", store_base_dir=root,
                           mapped_file_size_for_entry_data=size, mapped_file_size_for_entry_index=size)  # fmt: skip
    ledger = FileLedger(config)
    ledger.load()
    ledger.append_as_leader(1, [(10, lambda _pos: b"0" * 10)])
    fill(Path(root) / "filler")
    error = 0
    try:
        for i in range(1, 16_000):  # 16000 x 58 bytes fit the 1 MiB data segment
            ledger.append_as_leader(1, [(10, constant(b"%010d" % i))])
    except OSError as exc:
        error = exc.errno or 0
    last = ledger.end_index
    intact = all(ledger.get(i).body == b"%010d" % i for i in range(1, last + 1))  # type: ignore[union-attr]
    (Path(root) / "filler").unlink()
    after = ledger.append_as_leader(1, [(5, lambda _pos: b"after")])[0]
    print(json.dumps({"error": error, "last": last, "intact": intact, "after": after.index,
                      "found": ledger.get(after.index) == after}))  # fmt: skip


def test_a_dledger_index_segment_on_a_full_disk_fails_the_append_not_the_process(full_disk: Path) -> None:
    """DLedger's index segment is sparse (DLedger's DefaultMmapFile maps it so: 160 MB of 32-byte records by
    default): a record in a page with no block on a full disk was a SIGBUS. The append now fails with ENOSPC, taken
    back whole, the entries before it intact, and the log takes entries again once the disk has room."""
    report = run_child("dledger_index_case", full_disk)
    assert report["error"] == errno.ENOSPC
    assert isinstance(report["last"], int) and report["last"] > 0
    assert report["intact"] and report["found"] and report["after"] == report["last"] + 1


def index_create_case(root: str) -> None:
    """An index file made on a full disk."""
    from store.index_file import IndexFile

    fill(Path(root) / "filler")
    error = 0
    try:
        IndexFile.create(Path(root) / "20260101000000000", 4096, 16_384)
    except OSError as exc:
        error = exc.errno or 0
    print(json.dumps({"error": error, "left": sorted(p.name for p in Path(root).iterdir())}))


def test_an_index_file_made_on_a_full_disk_fails_with_enospc(full_disk: Path) -> None:
    """Its header written into a page with no block was a SIGBUS; now the creation raises ENOSPC and leaves no file
    (the index dispatch tries it again later: tests/processors/test_index_file_failure.py)."""
    assert run_child("index_create_case", full_disk) == {"error": errno.ENOSPC, "left": ["filler"]}


def index_put_case(root: str) -> None:
    """Keys put into an index file while the disk is full."""
    from store.index_file import IndexFile, index_key_hash

    index = IndexFile.create(Path(root) / "20260101000000000", 4096, 200_000)
    fill(Path(root) / "filler")
    error, put = 0, 0
    try:
        for i in range(100_000):  # 2 MB of entries
            put += index.put_entries([(index_key_hash(f"k{i}"), 1000 + i)], 1_700_000_000_000)
    except OSError as exc:
        error = exc.errno or 0
    found: list[int] = []
    index.select(index_key_hash(f"k{put - 1}"), found, 10, 0, 2**62)
    (Path(root) / "filler").unlink()
    again = index.put_entries([(index_key_hash("after"), 5_000_000)], 1_700_000_000_000)
    print(json.dumps({"error": error, "put": put, "found": found, "count": index.index_count, "again": again}))


def test_keys_put_into_an_index_file_on_a_full_disk_fail_with_enospc(full_disk: Path) -> None:
    """An index file is sparse, as RocketMQ's IndexFile maps it (420 MB by default): an entry or a hash slot in a
    page with no block on a full disk was a SIGBUS. Now the put raises ENOSPC before it writes anything, the entries
    before it intact, and puts go on once the disk has room."""
    report = run_child("index_put_case", full_disk)
    put = report["put"]
    assert report["error"] == errno.ENOSPC and isinstance(put, int) and 0 < put < 100_000
    assert report["found"] == [1000 + put - 1] and report["count"] == put + 2 and report["again"] == 1


def checkpoint_case(root: str) -> None:
    """The store's checkpoint made on a full disk, then written."""
    from store.checkpoint import Checkpoint

    fill(Path(root) / "filler")
    error = 0
    try:
        checkpoint = Checkpoint(Path(root) / "checkpoint")
        checkpoint.safe_offset = 1
        checkpoint.write()
    except OSError as exc:
        error = exc.errno or 0
    print(json.dumps({"error": error}))


def test_a_checkpoint_made_on_a_full_disk_fails_with_enospc(full_disk: Path) -> None:
    """Its page written with no block behind it was a SIGBUS at the first checkpoint write; now opening it raises
    ENOSPC, so a store that cannot keep a checkpoint does not start."""
    assert run_child("checkpoint_case", full_disk) == {"error": errno.ENOSPC}


def dledger_broker_case(root: str) -> None:
    """A DLedger broker whose disk fills after its first send, then takes a batch whose index records need more
    blocks than its index segment holds, before a retention pass saw the disk full: virtual time stands still from
    the fill to the batch's answer, so no pass runs in between."""
    import math

    import trio
    import trio.testing

    from broker.embedded_dledger import EmbeddedDLedgerGroup
    from remoting.client import RemotingClient
    from remoting.codec.batch_body import BatchEntry, encode_batch_body
    from remoting.codec.codes import RequestCode, ResponseCode
    from remoting.codec.command import RemotingCommand
    from tests.broker.helpers import create_topic_request
    from tests.conftest import SMALL_STORE
    from tests.processors.conftest import send_request

    async def main() -> dict[str, object]:
        small = {**SMALL_STORE, "timer_wheel_enable": False}  # its wheel alone takes more than this disk
        async with EmbeddedDLedgerGroup(root, members=1, **small) as group, RemotingClient() as client:
            addr = group.addr(await group.leader())
            assert (await client.invoke(addr, create_topic_request("Full", queues=1), 5)).code == ResponseCode.SUCCESS
            assert (await client.invoke(addr, send_request("Full", b"first"), 5)).code == ResponseCode.SUCCESS
            head = send_request("Full", code=RequestCode.SEND_BATCH_MESSAGE, batch="true")
            body = encode_batch_body([BatchEntry(b"%010d" % i) for i in range(9000)])
            batch = RemotingCommand(code=head.code, opaque=head.opaque, ext_fields=head.ext_fields, body=body)
            clock.autojump_threshold = math.inf
            fill(Path(root) / "filler")
            refused = await client.invoke(addr, batch, 10)
            (Path(root) / "filler").unlink()
            clock.autojump_threshold = 0
            after = (await client.invoke(addr, send_request("Full", b"after"), 5)).code
            ledger = group.store(group.ids[0]).ledger
            bodies = [ledger.get(i).body for i in range(ledger.begin_index, ledger.end_index + 1)]  # type: ignore[union-attr]
            return {"code": refused.code, "remark": refused.remark, "after": after, "entries": len(bodies),
                    "first": b"first" in bodies[1], "last": b"after" in bodies[-1]}  # fmt: skip

    clock = trio.testing.MockClock(autojump_threshold=0)
    print(json.dumps(trio.run(main, clock=clock)))


def test_a_dledger_broker_whose_disk_fills_answers_an_error_and_lives_on(full_disk: Path) -> None:
    """The disk fills between two of the retention pass's ratio checks (every 100 ms; here a large batch right after
    the disk filled): the batch whose index records need blocks the disk has no more of is answered SYSTEM_ERROR,
    none of it stored, and the broker lives on with every entry before it and takes sends again once the disk has
    room. It was a SIGBUS at the batch's 127th message."""
    report = run_child("dledger_broker_case", full_disk)
    assert report["code"] == 1 and "No space left on device" in str(report["remark"]), report
    assert report["after"] == 0 and report["first"] and report["last"]
    assert report["entries"] == 3  # the leader's first (empty) entry, "first", "after"


def make_sparse(path: Path, written: int) -> None:
    """Rewrite the segment ``path`` as RocketMQ's MappedFile leaves one (``fileChannel.map`` past the file's end, no
    warm-up by default): its first ``written`` bytes with blocks, the rest a hole."""
    data = path.read_bytes()
    path.unlink()
    with open(path, "wb") as f:
        f.truncate(len(data))
        f.write(data[:written])


def java_sparse_tail_case(root: str) -> None:
    """A store whose CommitLog and ConsumeQueue tails were written by a Java broker (sparse), opened on a full disk
    and sent to."""
    from store.results import GetStatus
    from tests.store.store_helpers import message, open_store

    sizes = {"mapped_file_size_commit_log": 1 << 20, "mapped_file_size_consume_queue": 1000 * 20}
    store = open_store(Path(root) / "store", **sizes)
    store.append(message(body=b"java"))
    store.close()
    make_sparse(Path(root) / "store" / "commitlog" / f"{0:020d}", 4096)
    make_sparse(Path(root) / "store" / "consumequeue" / "TopicTest" / "0" / f"{0:020d}", 4096)
    fill(Path(root) / "filler")
    stage, error = "load", 0
    try:
        store = open_store(Path(root) / "store", **sizes)
        stage = "append"
        for _ in range(300):  # 300 KB: past the CommitLog tail's first page
            store.append(message(body=bytes(1000)))
        store.close()
    except OSError as exc:
        error = exc.errno or 0
    (Path(root) / "filler").unlink()
    store = open_store(Path(root) / "store", **sizes)
    after = store.append(message(body=b"after")).queue_offset
    first = store.get("TopicTest", 0, 0, 1).status is GetStatus.FOUND
    store.close()
    print(json.dumps({"stage": stage, "error": error, "after": after, "first": first}))


def test_a_store_whose_tail_java_left_sparse_does_not_start_on_a_full_disk(full_disk: Path) -> None:
    """RocketMQ's MappedFile maps a segment without preallocating it, so the CommitLog and ConsumeQueue tails of a
    store a Java broker wrote are sparse: appends into their holes on a full disk were a SIGBUS. The load now gives
    the tails their blocks, and a disk without them is ENOSPC there, before anything is written; once the disk has
    room the store opens with its messages and takes sends."""
    report = run_child("java_sparse_tail_case", full_disk)
    assert report == {"stage": "load", "error": errno.ENOSPC, "after": 1, "first": True}


def java_sparse_wheel_case(root: str) -> None:
    """A timer wheel file a Java 5.x broker made (sparse), loaded on a full disk and written."""
    from broker.timer.wheel import SLOT_UNIT, Slot, TimerWheel

    slots, precision = 4096, 1000
    path = Path(root) / "timerwheel"
    with open(path, "wb") as f:
        f.truncate(slots * SLOT_UNIT)  # TimerWheel.java: randomAccessFile.setLength(wheelLength), then a map
    fill(Path(root) / "filler")
    stage, error = "load", 0
    wheel = TimerWheel(path, slots, precision)
    try:
        wheel.load()
        stage = "put"
        for i in range(slots):
            wheel.put(Slot(i * precision, i, 1))
    except OSError as exc:
        error = exc.errno or 0
    (Path(root) / "filler").unlink()
    wheel = TimerWheel(path, slots, precision)
    wheel.load()
    wheel.put(Slot(0, 7, 1))
    print(json.dumps({"stage": stage, "error": error, "after": wheel.get(0).last}))


def test_a_timer_wheel_java_left_sparse_is_refused_on_a_full_disk(full_disk: Path) -> None:
    """RocketMQ 5.x's TimerWheel sizes its file with ``setLength`` (sparse) and maps it: a slot written into one of
    its holes on a full disk was a SIGBUS. The load now gives the wheel all its blocks, and a disk without them is
    ENOSPC there; once the disk has room the wheel loads and takes slots."""
    assert run_child("java_sparse_wheel_case", full_disk) == {"stage": "load", "error": errno.ENOSPC, "after": 7}


def leave_free(path: Path, free: int) -> None:
    """Fill the disk with the file ``path``, then give ``free`` bytes of it back."""
    fill(path)
    os.truncate(path, path.stat().st_size - free)


def healthy_reload_case(root: str) -> None:
    """A store, a DLedger ledger, a timer wheel and an index file made here (their tails and wheel preallocated, the
    sparse ones with a chunk of blocks ahead of their writes), reopened with 256 KiB left on the disk (XFS wants some
    to make the store's abort file) and written."""
    from broker.timer.wheel import Slot, TimerWheel
    from dledger.config import DLedgerConfig
    from dledger.file_store import FileLedger
    from store.index_file import IndexFile, index_key_hash
    from tests.store.store_helpers import message, open_store

    base, seg = Path(root), 4 << 20
    sizes = {"mapped_file_size_commit_log": seg, "mapped_file_size_consume_queue": 1000 * 20}
    config = DLedgerConfig(group="g", self_id="n0", peers="n0-a:1", store_base_dir=str(base / "dl"),
                           mapped_file_size_for_entry_data=seg, mapped_file_size_for_entry_index=seg)  # fmt: skip
    store = open_store(base / "store", **sizes)
    store.append(message(body=b"x" * 100))
    store.close()
    ledger = FileLedger(config)
    ledger.load()
    ledger.append_as_leader(1, [(10, constant(b"0123456789"))])
    ledger.close()
    TimerWheel(base / "timerwheel", 131072, 1000).load()  # 4 MiB
    index = IndexFile.create(base / "index", 4096, 200_000)
    index.put_entries([(index_key_hash("k"), 1000)], 1_700_000_000_000)
    index.close()
    leave_free(base / "filler", 256 * 1024)

    def reopen_store() -> None:
        store = open_store(base / "store", **sizes)
        store.append(message(body=b"y" * 100))
        store.close()

    def reopen_ledger() -> None:
        ledger = FileLedger(config)
        ledger.load()
        ledger.append_as_leader(1, [(10, constant(b"abcdefghij"))])
        ledger.close()

    def reopen_wheel() -> None:
        wheel = TimerWheel(base / "timerwheel", 131072, 1000)
        wheel.load()
        wheel.put(Slot(0, 7, 1))

    def reopen_index() -> None:
        index = IndexFile.open(base / "index", 4096, 200_000)
        index.put_entries([(index_key_hash("k2"), 2000)], 1_700_000_000_000)
        index.close()

    report: dict[str, str] = {}
    for name, reopen in {"store": reopen_store, "dledger": reopen_ledger, "wheel": reopen_wheel,
                         "index": reopen_index}.items():  # fmt: skip
        try:
            reopen()
            report[name] = "ok"
        except OSError as exc:
            report[name] = errno.errorcode.get(exc.errno or 0, str(exc))
    print(json.dumps(report))


def test_files_made_here_reopen_and_take_writes_on_a_nearly_full_xfs(xfs_disk: Path) -> None:
    """XFS's ``fallocate`` fails with ENOSPC when the disk has less free space than the range asked for, even where
    every block of it is allocated already (ext4 and tmpfs answer at once). Reserving a preallocated tail, a whole
    timer wheel, or a sparse file from its byte 0 at each load thus kept a healthy store from starting on a nearly
    full disk, where RocketMQ's (which never preallocates) starts. Only the holes take blocks now."""
    report = run_child("healthy_reload_case", xfs_disk)
    assert report == {"store": "ok", "dledger": "ok", "wheel": "ok", "index": "ok"}


def ledger_config(root: Path, segment: int) -> DLedgerConfig:
    """A one-member DLedger config storing under ``root`` in segments of ``segment`` bytes."""
    from dledger.config import DLedgerConfig

    return DLedgerConfig(group="g", self_id="n0", peers="n0-a:1", store_base_dir=str(root),
                         mapped_file_size_for_entry_data=segment, mapped_file_size_for_entry_index=segment)  # fmt: skip


def dledger_stale_index_case(root: str) -> None:
    """A ledger whose last entry's data is torn (its index record left past the end the recovery finds), reloaded
    on a full disk: the recovery erases that record in its sparse index segment."""
    from dledger.file_store import FileLedger

    config = ledger_config(Path(root) / "dl", 4 << 20)
    ledger = FileLedger(config)
    ledger.load()
    last = ledger.append_as_leader(1, [(10, constant(b"0123456789")) for _ in range(3)])[-1]
    ledger.close()
    [segment] = (Path(root) / "dl").rglob(f"data/{0:020d}")
    with open(segment, "r+b") as f:
        f.seek(last.pos)
        f.write(bytes(8))
    fill(Path(root) / "filler")
    ledger = FileLedger(config)
    ledger.load()
    print(json.dumps({"end": ledger.end_index, "torn": last.index}))


def test_a_ledger_with_a_torn_last_entry_recovers_on_a_full_disk(full_disk: Path) -> None:
    """The recovery erases the index records past the end it found; it wrote whole 1 MiB chunks of the sparse index
    segment wherever one held a record, its holes included: a SIGBUS on a full disk. Only pages that hold a record
    are written now, so the ledger loads, ending before the torn entry."""
    assert run_child("dledger_stale_index_case", full_disk) == {"end": 1, "torn": 2}


def healthy_full_case(root: str) -> None:
    """A store, a DLedger ledger and a timer wheel made here, reloaded on a full disk."""
    from broker.timer.wheel import TimerWheel
    from dledger.file_store import FileLedger
    from tests.store.store_helpers import message, open_store

    base = Path(root)
    sizes = {"mapped_file_size_commit_log": 1 << 20, "mapped_file_size_consume_queue": 1000 * 20}
    store = open_store(base / "store", **sizes)
    store.append(message(body=b"x" * 100))
    store.close()
    config = ledger_config(base / "dl", 1 << 20)
    ledger = FileLedger(config)
    ledger.load()
    ledger.append_as_leader(1, [(10, constant(b"0123456789"))])
    ledger.close()
    TimerWheel(base / "timerwheel", 4096, 1000).load()
    fill(base / "filler")
    report: dict[str, object] = {}
    store = open_store(base / "store", **sizes)
    report["store"] = store.get("TopicTest", 0, 0, 1).status.name
    store.close()
    ledger = FileLedger(config)
    ledger.load()
    report["dledger"] = ledger.end_index
    TimerWheel(base / "timerwheel", 4096, 1000).load()
    report["wheel"] = "ok"
    print(json.dumps(report))


def test_files_made_here_reload_on_a_full_disk(full_disk: Path) -> None:
    """Reading a hole of a tmpfs mapping takes a page, a SIGBUS on a full one: the recovery's erase of the DLedger
    index segment read all of it. It reads only the pages that hold data now (``SEEK_DATA``), so a store, a ledger and
    a wheel made here all reload on a full disk."""
    assert run_child("healthy_full_case", full_disk) == {"store": "FOUND", "dledger": 0, "wheel": "ok"}


def test_a_file_system_that_reports_no_holes_gets_the_whole_range_asked_for(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Where a file system has neither FIEMAP nor its own ``SEEK_HOLE`` (NFSv3, 9p, FUSE), Linux's generic lseek
    answers ``SEEK_HOLE`` with the file's size: "no hole" for a sparse file. Then the whole range is asked for, as
    before holes were told apart, and the first hole is taken to be at 0 (a review found the sparse file taken for
    allocated, so nothing reserved)."""
    from store import mapped_file

    path = tmp_path / "sparse"
    with path.open("wb") as f:
        f.truncate(1 << 20)  # sparse: no block at all
    real_lseek = os.lseek

    def no_fiemap(*_: object) -> list[tuple[int, int]]:
        raise OSError(errno.EOPNOTSUPP, "no FIEMAP")

    def generic_lseek(fd: int, pos: int, how: int) -> int:
        return os.fstat(fd).st_size if how == os.SEEK_HOLE else real_lseek(fd, pos, how)

    monkeypatch.setattr(mapped_file, "_extents", no_fiemap)
    monkeypatch.setattr(mapped_file.os, "lseek", generic_lseek)
    fd = os.open(path, os.O_RDWR)
    try:
        assert mapped_file.file_holes(fd, 4096, 65536) == [(4096, 65536)]
        assert mapped_file.first_hole(fd, 1 << 20) == 0
    finally:
        os.close(fd)
