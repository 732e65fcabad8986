"""IndexFile / IndexService: RocketMQ's byte layout (docs/protocol.md#64-indexfile), lookups, rolling, reopening and
recovery."""

from __future__ import annotations

import random
import struct
import tempfile
import threading
import time
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from store.errors import StoreError
from store.index import (
    HEADER_SIZE,
    IndexFile,
    IndexFileCorruptError,
    IndexGap,
    IndexRuns,
    IndexService,
    index_file_name,
    index_file_size,
    index_key_hash,
)
from store.index_file import SELECT_STEP

T0 = 1_700_000_000_000  # a store timestamp in ms, a whole second


def java_hash(text: str) -> int:
    """Reference Java String.hashCode, written from its definition."""
    h = 0
    raw = text.encode("utf-16-be", "surrogatepass")
    for i in range(0, len(raw), 2):
        h = (h * 31 + int.from_bytes(raw[i : i + 2], "big")) % 2**32
    return h - 2**32 if h >= 2**31 else h


def only_file(service: IndexService) -> Path:
    files = service.files
    assert len(files) == 1
    return files[0].path


def test_key_hash_is_abs_java_hash_and_min_int_maps_to_zero() -> None:
    assert index_key_hash("hello") == 99162322
    assert java_hash("TopicTest#order-7") < 0
    assert index_key_hash("TopicTest#order-7") == -java_hash("TopicTest#order-7")
    assert java_hash("polygenelubricants") == -(2**31)
    assert index_key_hash("polygenelubricants") == 0
    assert index_key_hash("T#ключ😀") == abs(java_hash("T#ключ😀"))


def test_header_slot_and_entries_have_the_exact_java_layout(tmp_path: Path) -> None:
    slots, num = 7, 5
    service = IndexService(tmp_path, max_hash_slots=slots, max_index_num=num)
    service.put("T", ["k"], 100, T0 + 123)
    service.put("T", ["k"], 250, T0 + 2_999)
    service.flush()
    data = only_file(service).read_bytes()
    assert len(data) == index_file_size(slots, num) == 40 + 7 * 4 + 5 * 20
    key_hash = abs(java_hash("T#k"))
    assert data[:HEADER_SIZE] == struct.pack(">qqqqii", T0 + 123, T0 + 2_999, 100, 250, 1, 3)
    slot_table = data[HEADER_SIZE : HEADER_SIZE + slots * 4]
    expected_slots = [0] * slots
    expected_slots[key_hash % slots] = 2
    assert slot_table == struct.pack(">7i", *expected_slots)
    entries = data[HEADER_SIZE + slots * 4 :]
    assert entries[:20] == bytes(20)  # entry number 0 is never used
    assert entries[20:40] == struct.pack(">iqii", key_hash, 100, 0, 0)
    assert entries[40:60] == struct.pack(">iqii", key_hash, 250, 2, 1)  # 2.876 s -> 2; prev = entry 1
    assert entries[60:] == bytes(40)
    service.close()


def test_query_walks_a_shared_slot_and_returns_only_matching_hashes_newest_first(tmp_path: Path) -> None:
    service = IndexService(tmp_path, max_hash_slots=1, max_index_num=100)
    for i, key in enumerate(["a", "b", "a", "c", "a b"]):
        service.put("T", key.split(" "), i * 100, T0 + i * 1000)
    end = T0 + 10_000
    assert service.query("T", "a", 10, T0, end) == [400, 200, 0]
    assert service.query("T", "b", 10, T0, end) == [400, 100]
    assert service.query("T", "zz", 10, T0, end) == []
    assert service.query("other", "a", 10, T0, end) == []
    service.close()


def test_colliding_keys_are_both_returned_for_the_client_to_recheck(tmp_path: Path) -> None:
    assert java_hash("T#Aa") == java_hash("T#BB")
    service = IndexService(tmp_path, max_hash_slots=11, max_index_num=100)
    service.put("T", ["Aa"], 10, T0)
    service.put("T", ["BB"], 20, T0 + 1000)
    assert service.query("T", "Aa", 10, 0, T0 * 2) == [20, 10]
    service.close()


def test_query_keeps_only_entries_stored_within_the_time_range(tmp_path: Path) -> None:
    service = IndexService(tmp_path, max_hash_slots=5, max_index_num=100)
    for i in range(6):
        service.put("T", ["k"], i, T0 + i * 10_000)
    assert service.query("T", "k", 10, T0 + 10_000, T0 + 30_000) == [3, 2, 1]
    assert service.query("T", "k", 10, T0 + 10_001, T0 + 39_999) == [3, 2]
    assert service.query("T", "k", 10, T0 + 60_000, T0 + 90_000) == []
    assert service.query("T", "k", 10, 0, T0 - 1) == []
    service.close()


def test_query_stops_at_max_num_with_the_newest_entries(tmp_path: Path) -> None:
    service = IndexService(tmp_path, max_hash_slots=3, max_index_num=100)
    for i in range(10):
        service.put("T", ["k"], i * 10, T0 + i)
    assert service.query("T", "k", 3, 0, T0 * 2) == [90, 80, 70]
    assert service.query("T", "k", 0, 0, T0 * 2) == []
    service.close()


def test_a_full_file_rolls_to_a_new_one_and_queries_span_files_newest_first(tmp_path: Path) -> None:
    service = IndexService(tmp_path, max_hash_slots=2, max_index_num=4)  # 3 entries per file
    for i in range(10):
        service.put("T", ["k"], i, T0 + i * 1000)
    files = service.files
    assert len(files) == 4
    names = [f.path.name for f in files]
    assert names == sorted(names) and all(len(n) == 17 and n.isdigit() for n in names)
    assert len(set(names)) == 4
    assert [f.index_count for f in files] == [4, 4, 4, 2]
    assert service.query("T", "k", 100, 0, T0 * 2) == list(range(9, -1, -1))
    assert service.query("T", "k", 4, 0, T0 * 2) == [9, 8, 7, 6]
    assert service.query("T", "k", 100, T0 + 4000, T0 + 6000) == [6, 5, 4]
    service.close()


def test_keys_of_one_message_may_straddle_a_roll(tmp_path: Path) -> None:
    service = IndexService(tmp_path, max_hash_slots=2, max_index_num=3)  # 2 entries per file
    service.put("T", ["u1", "", "k1", "k2"], 0, T0)
    assert len(service.files) == 2
    for key in ("u1", "k1", "k2"):
        assert service.query("T", key, 10, 0, T0 * 2) == [0]
    service.close()


def test_a_key_a_message_repeats_across_a_roll_is_found_once_per_entry(tmp_path: Path) -> None:
    """``KEYS=a a a`` puts three entries under ``T#a``; when the file rolls between them, RocketMQ's
    IndexService.queryOffset collects the offset from each file (store/src/main/java/org/apache/rocketmq/store/index/
    IndexFile.java selectPhyOffset appends every matching entry), as it does within one file. Ours dropped the
    offset an older file found again (hypothesis found it: test_query_agrees_with_a_model_of_the_index)."""
    service = IndexService(tmp_path, max_hash_slots=3, max_index_num=5)  # 4 entries per file
    service.put("T", ["a", "a"], 0, T0)
    service.put("T", ["a", "a", "a"], 1, T0)
    assert len(service.files) == 2
    assert service.query("T", "a", 2, 0, T0 * 2) == [1, 1]
    assert service.query("T", "a", 10, 0, T0 * 2) == [1, 1, 1, 0, 0]
    service.close()


def test_reopen_after_close_answers_the_same_and_keeps_appending(tmp_path: Path) -> None:
    service = IndexService(tmp_path, max_hash_slots=2, max_index_num=4)
    for i in range(5):
        service.put("T", ["k", f"u{i}"], i * 10, T0 + i * 1000)
    before = service.query("T", "k", 100, 0, T0 * 2)
    service.close()

    reopened = IndexService(tmp_path, max_hash_slots=2, max_index_num=4)
    reopened.load()
    assert reopened.query("T", "k", 100, 0, T0 * 2) == before == [40, 30, 20, 10, 0]
    assert reopened.query("T", "u3", 100, 0, T0 * 2) == [30]
    assert reopened.last_update_phy_offset == 40
    assert reopened.last_update_timestamp == T0 + 4000
    reopened.put("T", ["k"], 50, T0 + 5000)
    assert reopened.query("T", "k", 2, 0, T0 * 2) == [50, 40]
    reopened.close()


def test_puts_written_in_runs_leave_the_bytes_of_one_put_each(tmp_path: Path) -> None:
    """A slave's dispatch: runs of one topic and store time, UNIQ_KEY-like keys sharing their head, short and
    non-ASCII keys, messages without keys, files rolling inside a run, a redispatched tail skipped."""
    uniq = "7F0000010B5B18B4AAC2"
    puts = [
        ("T", [f"{uniq}{i:012X}", "k" if i % 3 else "", "\u00e9t\u00e9"], 100 + i * 64, T0 + i // 4) for i in range(40)
    ]
    puts += [("U", [f"{uniq}{i:012X}"], 100 + i * 64, T0 + 9) for i in range(40, 45)]
    puts += [("T", ["ab"], 100 + 45 * 64, T0 + 9), ("T", ["k"], 100 + 10 * 64, T0 + 9)]
    assert _one_put_each_and_runs_write_the_same_files(tmp_path, puts, timed=False) > 3


def _one_put_each_and_runs_write_the_same_files(
    tmp_path: Path, puts: list[tuple[str, list[str], int, int]], *, timed: bool
) -> int:
    """Write ``puts`` one ``put`` each and through :class:`IndexRuns` (flushed every 17 puts too); assert both leave
    the same index files and return how many files that took."""
    roots = {"one": tmp_path / "one", "runs": tmp_path / "runs"}
    one, batched = (IndexService(root, max_hash_slots=7, max_index_num=20) for root in roots.values())
    runs = IndexRuns(batched, timed=timed)
    for i, (topic, keys, phy, ts) in enumerate(puts):
        one.put(topic, keys, phy, ts)
        runs.put(topic, keys, phy, ts)
        if i % 17 == 16:
            runs.flush()
    runs.flush()
    files = len(one.files)
    one.close()
    batched.close()
    contents = {name: sorted(f.read_bytes() for f in root.rglob("*") if f.is_file()) for name, root in roots.items()}
    assert contents["runs"] == contents["one"]
    return files


@pytest.mark.parametrize("seed", range(20))
def test_timed_runs_leave_the_bytes_of_one_put_each(tmp_path: Path, seed: int) -> None:
    """A DLedger member's dispatch: runs of one topic whose store times differ (going back too, as a wall clock
    may), files rolling inside a run, messages without keys, a redispatched tail skipped."""
    rng = random.Random(seed)
    puts: list[tuple[str, list[str], int, int]] = []
    ts = T0
    for i in range(60):
        ts += rng.choice((0, 0, 1, 999, 1000, 2500, -3))
        keys = [f"u{i}", rng.choice(("k", "", "q"))][: rng.randint(0, 2)]
        puts.append((rng.choice("TTTU"), keys, 100 + i * 64, ts))
    puts.append(("T", ["k"], 100 + 5 * 64, ts))
    assert _one_put_each_and_runs_write_the_same_files(tmp_path, puts, timed=True) > 2


def test_redispatching_an_indexed_message_does_not_index_it_twice(tmp_path: Path) -> None:
    service = IndexService(tmp_path, max_hash_slots=5, max_index_num=100)
    service.put("T", ["k"], 10, T0)
    service.put("T", ["k"], 20, T0)
    service.put("T", ["k"], 10, T0)
    service.put("T", ["k"], 20, T0)
    assert service.query("T", "k", 10, 0, T0 * 2) == [20, 10]
    service.close()


def test_truncate_after_leaves_exactly_the_bytes_of_an_index_that_never_saw_the_tail(tmp_path: Path) -> None:
    def build(root: Path, count: int) -> IndexService:
        service = IndexService(root, max_hash_slots=3, max_index_num=6)  # 5 entries per file
        for i in range(count):
            service.put("T", [f"k{i % 4}", "same"], i * 100, T0 + i * 1000)
        return service

    full = build(tmp_path / "full", 7)  # 14 entries: files of 5, 5, 4
    assert len(full.files) == 3
    full.truncate_after(300)  # forget messages 3..6
    assert len(full.files) == 2
    assert full.query("T", "same", 100, 0, T0 * 2) == [200, 100, 0]
    assert full.last_update_phy_offset == 200
    assert full.last_update_timestamp == T0 + 2000

    reference = build(tmp_path / "ref", 3)
    full.flush()
    reference.flush()
    assert [f.path.read_bytes() for f in full.files] == [f.path.read_bytes() for f in reference.files]

    full.put("T", ["same"], 300, T0 + 3000)
    assert full.query("T", "same", 100, 0, T0 * 2) == [300, 200, 100, 0]
    full.close()
    reference.close()


def test_truncate_after_everything_leaves_an_empty_usable_index(tmp_path: Path) -> None:
    service = IndexService(tmp_path, max_hash_slots=3, max_index_num=4)
    for i in range(5):
        service.put("T", ["k"], 100 + i, T0 + i)
    service.truncate_after(0)
    assert service.query("T", "k", 10, 0, T0 * 2) == []
    assert service.last_update_phy_offset == 0
    service.put("T", ["k"], 0, T0)
    assert service.query("T", "k", 10, 0, T0 * 2) == [0]
    service.close()


def test_delete_expired_removes_old_files_but_never_the_newest(tmp_path: Path) -> None:
    service = IndexService(tmp_path, max_hash_slots=2, max_index_num=3)  # 2 entries per file
    for i in range(6):
        service.put("T", ["k"], i * 100, T0 + i)
    assert len(service.files) == 3
    assert service.delete_expired(250) == 1  # first file ends at 100
    assert service.query("T", "k", 10, 0, T0 * 2) == [500, 400, 300, 200]
    assert service.delete_expired(10_000) == 1
    assert len(service.files) == 1
    assert len(list((tmp_path / "index").iterdir())) == 1
    service.close()


def test_flush_advances_the_checkpoint_timestamp(tmp_path: Path) -> None:
    service = IndexService(tmp_path, max_hash_slots=2, max_index_num=10)
    assert service.last_flushed_timestamp == 0
    service.put("T", ["k"], 0, T0)
    assert service.last_update_timestamp == T0
    assert service.last_flushed_timestamp == 0
    service.flush()
    assert service.last_flushed_timestamp == T0
    service.close()


def test_flush_in_another_thread_runs_alongside_puts_and_rolls(tmp_path: Path) -> None:
    service = IndexService(tmp_path, max_hash_slots=7, max_index_num=50)
    stop = threading.Event()

    def flush_until_stopped() -> None:
        while not stop.is_set():
            service.flush()

    flusher = threading.Thread(target=flush_until_stopped)
    flusher.start()
    try:
        for i in range(1000):
            service.put("T", ["k", f"u{i}"], i, T0 + i)
    finally:
        stop.set()
        flusher.join()
    service.flush()
    assert service.last_flushed_timestamp == T0 + 999
    assert service.query("T", "k", 5, 0, T0 * 2) == [999, 998, 997, 996, 995]
    assert service.query("T", "u123", 5, 0, T0 * 2) == [123]
    service.close()


def test_a_truncated_file_is_refused_with_a_typed_error(tmp_path: Path) -> None:
    service = IndexService(tmp_path, max_hash_slots=3, max_index_num=4)
    service.put("T", ["k"], 0, T0)
    path = only_file(service)
    service.close()
    with open(path, "r+b") as f:
        f.truncate(30)
    with pytest.raises(IndexFileCorruptError) as err:
        IndexFile.open(path, 3, 4)
    assert isinstance(err.value, StoreError)
    assert err.value.path == path


def test_files_of_another_geometry_or_with_impossible_counts_are_refused(tmp_path: Path) -> None:
    service = IndexService(tmp_path, max_hash_slots=3, max_index_num=4)
    service.put("T", ["k"], 0, T0)
    path = only_file(service)
    service.close()
    with pytest.raises(IndexFileCorruptError, match="size"):
        IndexFile.open(path, 4, 4)
    with open(path, "r+b") as f:
        f.seek(36)
        f.write(struct.pack(">i", -5))  # indexCount
    with pytest.raises(IndexFileCorruptError, match="header"):
        IndexFile.open(path, 3, 4)


def test_an_end_time_below_the_begin_time_is_a_valid_header_and_bounds_time_queries(tmp_path: Path) -> None:
    """The wall clock stepped back: the second put's store time is below the file's begin time, so endTimestamp is
    below beginTimestamp, as Java's IndexFile.putKey writes it. The file reopens, and a query from the first store
    time on finds both entries (their times read back as the begin time: the time diff is clamped to 0)."""
    service = IndexService(tmp_path, max_hash_slots=3, max_index_num=10)
    service.put("T", ["k"], 0, T0 + 10_000)
    service.put("T", ["k"], 1, T0)
    service.close()
    reopened = IndexService(tmp_path, max_hash_slots=3, max_index_num=10)
    reopened.load()
    (file,) = reopened.files
    assert (file.begin_timestamp, file.end_timestamp) == (T0 + 10_000, T0)
    assert reopened.query("T", "k", 10, T0 + 10_000, T0 + 20_000) == [1, 0]
    assert reopened.query("T", "k", 10, T0 + 11_000, T0 + 20_000) == []
    reopened.close()


def _three_files_the_middle_one_cut(tmp_path: Path) -> list[Path]:
    """Nine messages, three per file (offsets 0, 10, ... 80); the middle file is cut short on disk."""
    service = IndexService(tmp_path, max_hash_slots=2, max_index_num=4)
    for i in range(9):
        service.put("T", [f"u{i}"], i * 10, T0 + i * 1000)
    paths = [f.path for f in service.files]
    service.close()
    with open(paths[1], "r+b") as f:
        f.truncate(100)
    return paths


def test_load_deletes_only_an_unusable_file_and_reports_the_range_it_covered(tmp_path: Path) -> None:
    paths = _three_files_the_middle_one_cut(tmp_path)
    service = IndexService(tmp_path, max_hash_slots=2, max_index_num=4)
    service.load()
    assert [f.path for f in service.files] == [paths[0], paths[2]]
    assert not paths[1].exists()
    assert (tmp_path / "index" / "dropped").read_text() == paths[1].name + "\n"  # recorded before the delete
    assert service.gaps() == [IndexGap(after=20, before=60, name=paths[1].name, limit=paths[2].name)]
    assert service.query("T", "u0", 10, 0, T0 * 2) == [0]
    assert service.query("T", "u8", 10, 0, T0 * 2) == [80]
    assert service.query("T", "u4", 10, 0, T0 * 2) == []
    service.close()


def test_refill_puts_the_gaps_keys_back_in_the_deleted_files_place(tmp_path: Path) -> None:
    paths = _three_files_the_middle_one_cut(tmp_path)
    service = IndexService(tmp_path, max_hash_slots=2, max_index_num=4)
    service.load()
    (gap,) = service.gaps()
    written = service.refill(gap, [("T", [f"u{i}"], i * 10, T0 + i * 1000) for i in (3, 4, 5)])
    assert written == 3
    assert service.gaps() == []
    assert not (tmp_path / "index" / "dropped").exists()
    assert [f.path for f in service.files] == paths
    assert [(f.begin_phy_offset, f.end_phy_offset) for f in service.files] == [(0, 20), (30, 50), (60, 80)]
    assert service.query("T", "u4", 10, T0 + 4000, T0 + 4000) == [40]
    service.put("T", ["u9"], 90, T0 + 9000)  # new keys still go after the newest file
    assert service.files[-1].path != paths[1] and service.query("T", "u9", 10, 0, T0 * 2) == [90]
    service.close()


def test_a_refill_that_counted_but_whose_files_were_not_renamed_yet_is_put_in_place_on_load(tmp_path: Path) -> None:
    """A kill after the refill's commit (the gap gone from the record) but before its files took their names: the
    next load renames them and keeps them."""
    paths = _three_files_the_middle_one_cut(tmp_path)
    service = IndexService(tmp_path, max_hash_slots=2, max_index_num=4)
    service.load()
    (gap,) = service.gaps()
    service.refill(gap, [("T", [f"u{i}"], i * 10, T0 + i * 1000) for i in (3, 4, 5)])
    service.close()
    paths[1].rename(paths[1].with_name(paths[1].name + ".refill"))  # the disk as the kill left it

    reopened = IndexService(tmp_path, max_hash_slots=2, max_index_num=4)
    reopened.load()
    assert [f.path for f in reopened.files] == paths
    assert reopened.gaps() == []
    assert reopened.query("T", "u4", 10, 0, T0 * 2) == [40]
    reopened.close()


def test_a_new_file_is_named_after_a_gap_not_refilled_yet(tmp_path: Path) -> None:
    """A gap still recorded (a DLedger store never refills; here a file named by a clock that ran ahead): a new file
    takes a later name, so the next load neither deletes it as the recorded file nor puts it before the gap."""
    (tmp_path / "index").mkdir()
    ahead = index_file_name(int(time.time() * 1000) + 3_600_000)
    (tmp_path / "index" / "dropped").write_text(ahead + "\n")
    service = IndexService(tmp_path, max_hash_slots=2, max_index_num=4)
    service.load()
    service.put("T", ["k"], 0, T0)
    assert only_file(service).name > ahead
    service.close()

    reopened = IndexService(tmp_path, max_hash_slots=2, max_index_num=4)
    reopened.load()
    assert reopened.query("T", "k", 10, 0, T0 * 2) == [0]
    assert [g.name for g in reopened.gaps()] == [ahead]
    reopened.close()


def test_refill_stops_when_no_file_name_is_left_before_the_next_kept_file(tmp_path: Path) -> None:
    service = IndexService(tmp_path, max_hash_slots=2, max_index_num=2)  # one entry per file
    service.load()
    name = "20240101120000000"
    gap = IndexGap(after=-1, before=None, name=name, limit="20240101120000001")
    assert service.refill(gap, [("T", ["a", "b"], 0, T0)]) == 1
    assert [f.path.name for f in service.files] == [name]
    service.close()


def test_a_corrupt_chain_ends_the_lookup_instead_of_looping(tmp_path: Path) -> None:
    slots, num = 1, 10
    service = IndexService(tmp_path, max_hash_slots=slots, max_index_num=num)
    service.put("T", ["x"], 0, T0)
    service.put("T", ["y"], 1, T0)
    service.put("T", ["z"], 2, T0)
    path = only_file(service)
    service.close()
    with open(path, "r+b") as f:
        f.seek(HEADER_SIZE + slots * 4 + 2 * 20 + 16)  # entry 2's prev -> entry 3 (a cycle 3 -> 2 -> 3)
        f.write(struct.pack(">i", 3))
    reopened = IndexService(tmp_path, max_hash_slots=slots, max_index_num=num)
    reopened.load()
    assert reopened.query("T", "nothing", 10, 0, T0 * 2) == []
    assert reopened.query("T", "z", 10, 0, T0 * 2) == [2]
    reopened.close()


def test_a_never_flushed_java_file_with_a_zero_header_opens_as_empty(tmp_path: Path) -> None:
    (tmp_path / "index").mkdir()
    path = tmp_path / "index" / "20231114221320000"
    path.write_bytes(bytes(index_file_size(3, 4)))
    service = IndexService(tmp_path, max_hash_slots=3, max_index_num=4)
    service.load()
    assert [f.index_count for f in service.files] == [1]
    service.put("T", ["k"], 7, T0)
    assert service.files[0].path == path
    assert service.query("T", "k", 1, 0, T0 * 2) == [7]
    service.close()


def test_leftover_file_from_a_crash_during_creation_is_ignored(tmp_path: Path) -> None:
    (tmp_path / "index").mkdir()
    (tmp_path / "index" / "20260101000000000.creating").write_bytes(b"\0" * 7)
    service = IndexService(tmp_path, max_hash_slots=3, max_index_num=4)
    service.load()
    assert service.files == []
    assert list((tmp_path / "index").iterdir()) == []


puts = st.lists(
    st.tuples(st.lists(st.sampled_from(["a", "b", "c", "Aa", "BB", "d e"]), max_size=3), st.integers(0, 3)),
    max_size=30,
)


@settings(max_examples=150, deadline=None)
@given(puts, st.sampled_from(["a", "b", "Aa", "d"]), st.integers(1, 8), st.integers(0, 40), st.integers(0, 40))
def test_query_agrees_with_a_model_of_the_index(
    messages: list[tuple[list[str], int]], key: str, max_num: int, lo: int, span: int
) -> None:
    model: list[tuple[int, int, int]] = []  # (hash, phy offset, store time)
    with tempfile.TemporaryDirectory() as d:
        service = IndexService(Path(d), max_hash_slots=3, max_index_num=5)
        ts = T0
        for phy, (keys, step) in enumerate(messages):
            ts += step * 1000
            service.put("T", keys, phy, ts)
            model += [(index_key_hash("T#" + k), phy, ts) for k in keys if k]
        begin, end = T0 + lo * 1000, T0 + (lo + span) * 1000
        wanted = index_key_hash("T#" + key)
        expected = [phy for h, phy, t in reversed(model) if h == wanted and begin <= t <= end][:max_num]
        assert service.query("T", key, max_num, begin, end) == expected
        service.close()


batch_keys = st.lists(st.lists(st.sampled_from(["a", "b", "Aa", "BB", "", "订单"]), max_size=3), max_size=5)


@settings(max_examples=100, deadline=None)
@given(st.lists(batch_keys, max_size=8), st.integers(0, 3))
def test_put_batch_writes_the_files_that_one_put_per_message_writes(
    batches: list[list[list[str]]], already_indexed: int
) -> None:
    with tempfile.TemporaryDirectory() as general_dir, tempfile.TemporaryDirectory() as batch_dir:
        general = IndexService(Path(general_dir), max_hash_slots=3, max_index_num=5)
        batched = IndexService(Path(batch_dir), max_hash_slots=3, max_index_num=5)
        general.load()
        batched.load()
        phy, ts = 10, T0
        for messages in batches:
            ts += 1500
            # Offsets restart a little below the newest indexed one now and then, as recovery's re-dispatch does.
            phy = max(phy - already_indexed, 0)
            offsets = list(range(phy, phy + len(messages)))
            for keys, offset in zip(messages, offsets, strict=True):
                general.put("T", keys, offset, ts)
            batched.put_batch("T", list(zip(messages, offsets, strict=True)), ts)
            phy += len(messages)
        general_bytes = [f.path.read_bytes() for f in general.files]
        batched_bytes = [f.path.read_bytes() for f in batched.files]
        for key in ("a", "b", "Aa", "BB", "订单"):
            assert batched.query("T", key, 64, 0, 2**62) == general.query("T", key, 64, 0, 2**62)
        general.close()
        batched.close()
    assert batched_bytes == general_bytes


def test_a_stepwise_query_resumes_after_puts_and_ends_quietly_once_its_file_is_deleted(tmp_path: Path) -> None:
    """``query_steps`` yields every SELECT_STEP entries walked (the broker lets other requests run there): puts in
    between leave the answer as one ``query`` gives, and a file that retention deletes meanwhile ends the walk."""
    index = IndexService(tmp_path, max_hash_slots=64, max_index_num=3 * SELECT_STEP)
    index.load()
    index.put_batch("T", [(["hot"], phy) for phy in range(1, 2 * SELECT_STEP + 1)], 1_000)
    expected = index.query("T", "hot", 5 * SELECT_STEP, 0, 2**62)
    out: list[int] = []
    steps = index.query_steps("T", "hot", 5 * SELECT_STEP, 0, 2**62, out)
    next(steps)
    index.put("T", ["hot"], 10 * SELECT_STEP, 2_000)  # newer than the walk: not in its chain
    list(steps)
    assert out == expected and len(out) == 2 * SELECT_STEP
    out.clear()
    steps = index.query_steps("T", "hot", 5 * SELECT_STEP, 0, 2**62, out)
    next(steps)
    index.put_batch("T", [(["x"], 20 * SELECT_STEP + i) for i in range(SELECT_STEP)], 3_000)  # rolls a new file
    index.delete_expired(10**9)  # deletes the walked file
    assert list(steps) == [] and 0 < len(out) < 2 * SELECT_STEP
    index.close()
