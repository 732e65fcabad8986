"""DLedger's files (dledger/file_store.py): the entry and index layout byte for byte, blanks at segment ends, recovery
after a clean stop and after a crash, truncation, the checkpoint and the currterm file; as DLedger's
DLedgerMappedFileStoreTest and DLedgerEntryCoderTest check them."""

from __future__ import annotations

import os
import struct
import zlib
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from dledger.codes import ResponseCode
from dledger.config import DLedgerConfig
from dledger.entry import Entry, decode_entry, place
from dledger.file_store import FileLedger, FileTermStore
from dledger.ledger import LedgerError
from remoting.codec import record_batch
from remoting.codec.errors import MessageEncodeError
from remoting.codec.message import MessageRecord, PreparedMessage, prepare_message, write_record
from store import mapped_file
from store.errors import StoreCorruptError
from tests.store.store_helpers import dirty_kib, no_descriptor_left

DATA_SIZE = 1024
INDEX_SIZE = 32 * 64


def ledger_at(tmp_path: Path, **settings: object) -> FileLedger:
    config = DLedgerConfig(group="g", self_id="n0", peers="n0-a:1", store_base_dir=str(tmp_path),
                           mapped_file_size_for_entry_data=DATA_SIZE, mapped_file_size_for_entry_index=INDEX_SIZE,
                           **settings)  # type: ignore[arg-type]  # fmt: skip
    ledger = FileLedger(config)
    ledger.load()
    return ledger


def body(i: int, size: int = 100) -> bytes:
    return bytes([i % 256]) * size


def append(ledger: FileLedger, term: int, *bodies: bytes) -> list[Entry]:
    return ledger.append_as_leader(term, [(len(b), lambda _p, b=b: b) for b in bodies])


def test_entries_and_index_records_are_dledgers_bytes(tmp_path: Path) -> None:
    ledger = ledger_at(tmp_path)
    entries = append(ledger, 3, b"hello", b"rocketmq")
    ledger.flush_all()
    data = (tmp_path / "dledger-n0" / "data" / ("0" * 20)).read_bytes()
    assert len(data) == DATA_SIZE
    # magic, size, index, term, pos, channel, chainCrc, bodyCrc, body length, body
    crc = [zlib.crc32(b) & 0x7FFFFFFF for b in (b"hello", b"rocketmq")]
    assert data[:53] == struct.pack(">iiqqqiiii", 1, 53, 0, 3, 0, 0, 0, crc[0], 5) + b"hello"
    assert data[53:109] == struct.pack(">iiqqqiiii", 1, 56, 1, 3, 53, 0, 0, crc[1], 8) + b"rocketmq"
    index = (tmp_path / "dledger-n0" / "index" / ("0" * 20)).read_bytes()
    assert index[:64] == struct.pack(">iqiqq", 1, 0, 53, 0, 3) + struct.pack(">iqiqq", 1, 53, 56, 1, 3)
    assert [ledger.get(i) for i in (0, 1)] == entries
    assert ledger.get(2) is None and ledger.get(-1) is None


def test_a_full_segment_ends_with_a_blank_and_entries_never_cross_it(tmp_path: Path) -> None:
    ledger = ledger_at(tmp_path)
    entries = append(ledger, 1, *[body(i) for i in range(20)])  # 148 bytes each: 6 per 1024-byte segment
    end = 0
    for entry in entries:
        pos, _ = place(end, entry.size, DATA_SIZE)
        assert entry.pos == pos
        assert entry.pos // DATA_SIZE == (entry.end_pos - 1) // DATA_SIZE
        end = entry.end_pos
    ledger.flush_all()
    first = (tmp_path / "dledger-n0" / "data" / ("0" * 20)).read_bytes()
    assert struct.unpack_from(">ii", first, 6 * 148) == (-1, DATA_SIZE - 6 * 148)
    second = tmp_path / "dledger-n0" / "data" / f"{DATA_SIZE:020d}"
    assert decode_entry(second.read_bytes()) == entries[6]
    with pytest.raises(LedgerError):
        append(ledger, 1, b"x" * DATA_SIZE)


def test_body_at_points_at_each_entry_body_in_the_mapping_across_segments(tmp_path: Path) -> None:
    """The commit-time dispatch reads bodies in place: ``body_at`` is the body ``get`` copies, for every entry
    (six per segment here), and None outside the log or over a damaged header."""
    ledger = ledger_at(tmp_path)
    entries = append(ledger, 2, *[body(i, 60 + i) for i in range(20)])
    for entry in entries:
        found = ledger.body_at(entry.index)
        assert found is not None
        view, at, length = found
        assert bytes(view[at : at + length]) == entry.body == ledger.get(entry.index).body  # type: ignore[union-attr]
    assert ledger.body_at(20) is None and ledger.body_at(-1) is None
    mf = ledger.data.find(entries[3].pos)
    assert mf is not None
    mf.buf[entries[3].pos - mf.file_from_offset] = 9  # the header's magic
    assert ledger.body_at(3) is None and ledger.get(3) is None


def test_a_clean_restart_recovers_the_log_the_term_and_the_committed_index(tmp_path: Path) -> None:
    ledger = ledger_at(tmp_path)
    entries = append(ledger, 2, *[body(i) for i in range(15)])
    ledger.set_committed(11)
    ledger.flush_all()
    ledger.persist_checkpoint()
    ledger.close()
    again = ledger_at(tmp_path)
    assert (again.begin_index, again.end_index, again.end_term, again.committed_index) == (0, 14, 2, 11)
    assert again.committed_pos == entries[11].end_pos
    assert [again.get(i) for i in range(15)] == entries
    assert (tmp_path / "dledger-n0" / "checkpoint").read_text() == "endIndex=14\ncommittedIndex=11\n"


def test_a_crash_mid_write_ends_the_log_at_the_last_whole_entry(tmp_path: Path) -> None:
    ledger = ledger_at(tmp_path)
    entries = append(ledger, 1, *[body(i) for i in range(8)])
    # What a power loss in the middle of the ninth append can leave: the header and a torn body (bodyCrc catches it).
    tail = Entry(8, 1, entries[-1].end_pos, body(8), body_crc=zlib.crc32(body(8)) & 0x7FFFFFFF)
    assert place(entries[-1].end_pos, tail.size, DATA_SIZE)[0] == tail.pos
    last = ledger.data.last()
    assert last is not None
    at = ledger.write_pos - last.file_from_offset
    last.buf[at : at + 100] = tail.encode()[:100]
    ledger.flush_all()
    ledger.close()
    again = ledger_at(tmp_path)
    assert again.end_index == 7 and [again.get(i) for i in range(8)] == entries
    assert again.write_pos == entries[-1].end_pos
    # The torn bytes are erased: the next entry lands where the torn one began.
    assert append(again, 2, b"next")[0].pos == entries[-1].end_pos


def test_a_recovery_that_would_cut_more_than_the_last_two_segments_refuses_to_start(tmp_path: Path) -> None:
    """A bad entry in the third segment from the end: ending the log there would drop more than a segment of
    committed entries, so the load fails (StoreCorruptError) with every file left as it was, as DLedger 0.3.1.2's
    ``recover`` exits ("the processOffset is too small, you should check it manually") when the cut lies more than a
    segment before the last one's start. One in the segment before the last is still cut there."""
    ledger = ledger_at(tmp_path)
    entries = append(ledger, 1, *[body(i) for i in range(30)])
    starts = [mf.file_from_offset for mf in ledger.data.files]
    assert len(starts) == 5
    third_last = next(e for e in entries if e.pos > starts[2])
    mf = ledger.data.files[2]
    mf.buf[third_last.pos - mf.file_from_offset + 60] ^= 0xFF  # its body: bodyCrc no longer matches
    ledger.flush_all()
    ledger.close()
    files = sorted((tmp_path / "dledger-n0" / "data").iterdir())
    before = [f.read_bytes() for f in files]
    with pytest.raises(StoreCorruptError, match="check"):
        ledger_at(tmp_path)
    assert [f.read_bytes() for f in sorted((tmp_path / "dledger-n0" / "data").iterdir())] == before
    mf_path = files[2]
    data = bytearray(before[2])
    data[third_last.pos - starts[2] + 60] ^= 0xFF  # repaired by hand: the log comes back whole
    mf_path.write_bytes(bytes(data))
    second_last = next(e for e in entries if e.pos > starts[3])
    data = bytearray(before[3])
    data[second_last.pos - starts[3] + 60] ^= 0xFF
    files[3].write_bytes(bytes(data))
    again = ledger_at(tmp_path)
    assert again.end_index == second_last.index - 1 and again.write_pos == second_last.pos
    again.close()


def test_an_index_that_disagrees_with_the_data_is_rebuilt_from_it(tmp_path: Path) -> None:
    ledger = ledger_at(tmp_path)
    entries = append(ledger, 1, *[body(i) for i in range(5)])
    index = ledger.index.last()
    assert index is not None
    index.buf[3 * 32 : 4 * 32] = bytes(32)
    ledger.flush_all()
    ledger.close()
    again = ledger_at(tmp_path)
    assert [again.get(i) for i in range(5)] == entries


def test_lost_index_records_of_an_earlier_index_segment_are_rewritten_where_they_belong(tmp_path: Path) -> None:
    """A power loss after the data segments were synced but before the index segments were: the last records read
    back as zeros, across an index segment boundary (60..63 in the first, 64..69 in the second). Recovery rewrites
    each at ``index * 32`` (DLedger's recover: ``indexFileList.truncateOffset`` then ``append``), in the first
    segment too, not at a negative offset of the last; ``get(60)`` is entry 60, never the entry a zero record
    points at (entry 0)."""
    ledger = ledger_at(tmp_path)
    entries = append(ledger, 1, *[body(i) for i in range(70)])
    assert len(ledger.index.files) == 2
    ledger.flush_all()
    ledger.index.files[0].buf[60 * 32 : 64 * 32] = bytes(4 * 32)
    ledger.index.files[1].buf[0 : 6 * 32] = bytes(6 * 32)
    ledger.flush_all()
    ledger.close()
    again = ledger_at(tmp_path)
    assert again.end_index == 69
    assert [again.get(i) for i in range(54, 70)] == entries[54:70]


def test_a_lost_first_index_segment_is_rebuilt_from_the_data_as_dledger_recovers_it(tmp_path: Path) -> None:
    """Data segments intact, the first index segment gone, the second there. DLedger 0.3.1.2's ``recover``: the
    first entry whose index record is missing or disagrees truncates the index list there
    (``indexFileList.truncateOffset(index * 32)``, which deletes every segment after it) and appends every following
    record again (``rebuildWithPos`` when the list does not end there), so the log comes back whole and the member
    starts, rather than failing its load with DISK_ERROR."""
    ledger = ledger_at(tmp_path)
    entries = append(ledger, 1, *[body(i) for i in range(70)])  # index records 0..63 in segment 0, 64..69 in 1
    assert len(ledger.index.files) == 2
    ledger.flush_all()
    first_index_segment = ledger.index.files[0].path
    ledger.close()
    first_index_segment.unlink()
    again = ledger_at(tmp_path)
    assert (again.begin_index, again.end_index) == (0, 69)
    assert [again.get(i) for i in range(70)] == entries
    assert [mf.file_from_offset for mf in again.index.files] == [0, INDEX_SIZE]
    assert append(again, 1, body(70))[0] == again.get(70)
    again.close()


def test_index_records_recovery_rewrites_are_synced_before_the_log_serves(tmp_path: Path) -> None:
    """``load`` marks every index segment flushed, so no later flush would sync what recovery rewrote: a second
    power loss would lose those records again while the checkpoint counts the entries durable. Records 60..69
    (across both index segments) lost durably, as a power cut after the data was synced leaves them; after the
    recovery rewrote them, neither index segment has a page only in the page cache."""
    ledger = ledger_at(tmp_path)
    append(ledger, 1, *[body(i) for i in range(70)])
    ledger.flush_all()
    paths = [mf.path for mf in ledger.index.files]
    ledger.close()
    for path, (start, end) in zip(paths, [(60 * 32, INDEX_SIZE), (0, 6 * 32)], strict=True):
        with path.open("r+b") as f:
            f.seek(start)
            f.write(bytes(end - start))
            os.fsync(f.fileno())
    again = ledger_at(tmp_path)
    assert again.index_record(60) is not None and again.index_record(69) is not None
    assert {mf.path.name: dirty_kib(mf.path) for mf in again.index.files if dirty_kib(mf.path)} == {}
    again.close()


def test_get_refuses_an_entry_whose_index_is_not_the_one_asked_for(tmp_path: Path) -> None:
    """A corrupted index record pointing at another whole entry (its ``pos`` and ``size``): ``get(3)`` answers
    nothing rather than entry 1 as entry 3."""
    ledger = ledger_at(tmp_path)
    entries = append(ledger, 1, *[body(i) for i in range(5)])
    index = ledger.index.files[0]
    index.buf[3 * 32 : 4 * 32] = index.buf[1 * 32 : 2 * 32]
    assert ledger.get(3) is None
    assert [ledger.get(i) for i in (0, 1, 2, 4)] == [entries[i] for i in (0, 1, 2, 4)]
    ledger.close()


def test_deleted_data_files_give_a_shorter_log(tmp_path: Path) -> None:
    ledger = ledger_at(tmp_path)
    entries = append(ledger, 1, *[body(i) for i in range(20)])
    ledger.flush_all()
    ledger.close()
    for name in (f"{2 * DATA_SIZE:020d}", f"{3 * DATA_SIZE:020d}"):
        (tmp_path / "dledger-n0" / "data" / name).unlink()
    again = ledger_at(tmp_path)
    assert again.end_index == 11 and again.get(11) == entries[11] and again.get(12) is None


@pytest.mark.parametrize("keep", [True, False])
def test_truncation_keeps_or_replaces_the_entry_and_nothing_after_it_comes_back(tmp_path: Path, keep: bool) -> None:
    ledger = ledger_at(tmp_path)
    entries = append(ledger, 1, *[body(i) for i in range(12)])
    ledger.flush_all()
    target = entries[5] if keep else Entry(5, 2, entries[5].pos, b"leader's")
    assert ledger.truncate(target) == 5
    assert ledger.end_index == 5 and ledger.get(5) == target and ledger.get(6) is None
    assert ledger.end_term == target.term
    ledger.close()  # no flush: the truncation itself was made durable
    again = ledger_at(tmp_path)
    assert again.end_index == 5 and again.get(5) == target
    assert [again.get(i) for i in range(5)] == entries[:5]


def test_a_truncation_erases_only_what_was_written(tmp_path: Path) -> None:
    """The stale entries and index records go; the rest of the segments is not read. RocketMQ's data segments are
    1 GiB, preallocated: erasing to a segment's end, as before, blocked the Trio thread for seconds on every
    truncation. Bytes planted past the written end (a valid store has none) show how far the erase reached."""
    sizes = {"mapped_file_size_for_entry_data": 1 << 16, "mapped_file_size_for_entry_index": 1 << 15}
    config = DLedgerConfig(group="g", self_id="n0", peers="n0-a:1", store_base_dir=str(tmp_path), **sizes)
    ledger = FileLedger(config)
    ledger.load()
    entries = append(ledger, 1, *[body(i) for i in range(3)])
    data, index = ledger.data.last(), ledger.index.last()
    assert data is not None and index is not None
    data_end, index_end = data.wrote_position, index.wrote_position
    data.buf[data_end + 4096 : data_end + 4100] = b"past"
    index.buf[index_end + 4096 : index_end + 4100] = b"past"
    theirs = Entry(1, 2, entries[1].pos, b"n" * 100, entries[1].magic)
    assert ledger.truncate(theirs) == 1
    assert ledger.get(1) == theirs and ledger.get(2) is None
    assert not any(data.view[theirs.end_pos : data_end]) and not any(index.view[2 * 32 : index_end])
    assert data.view[data_end + 4096 : data_end + 4100] == b"past"
    assert index.view[index_end + 4096 : index_end + 4100] == b"past"
    ledger.close()


def test_a_follower_entry_must_land_at_its_position_and_index(tmp_path: Path) -> None:
    ledger = ledger_at(tmp_path)
    append(ledger, 1, b"a")
    with pytest.raises(LedgerError) as wrong_pos:
        ledger.append_as_follower(Entry(1, 1, 999, b"b"))
    assert wrong_pos.value.code == ResponseCode.DISK_ERROR
    with pytest.raises(LedgerError) as wrong_index:
        ledger.append_as_follower(Entry(5, 1, 49, b"b"))
    assert wrong_index.value.code == ResponseCode.INCONSISTENT_INDEX
    ledger.append_as_follower(Entry(1, 1, 49, b"b"))
    assert ledger.end_index == 1


def test_a_leaders_batch_is_written_whole_or_not_at_all(tmp_path: Path) -> None:
    """An entry no segment holds refuses its batch before anything is written; a body of another size than announced
    (after a blank closed the segment and a new one started) has the entries before it taken back, erased and
    synced, so the next append lands where the batch would have."""
    ledger = ledger_at(tmp_path)
    first = append(ledger, 1, body(0, 800))[0]
    with pytest.raises(LedgerError):
        append(ledger, 1, body(1), b"x" * DATA_SIZE)
    assert ledger.end_index == 0 and ledger.write_pos == first.end_pos
    wrong = [(100, lambda _p: body(1)), (100, lambda _p: body(2)), (100, lambda _p: b"short")]
    with pytest.raises(LedgerError, match="announced"):
        ledger.append_as_leader(1, wrong)
    assert ledger.end_index == 0 and ledger.end_term == 1 and ledger.write_pos == first.end_pos
    assert len(ledger.data.files) == 1 and not any(ledger.data.files[0].view[first.end_pos :])
    assert not any(ledger.index.files[0].view[32:64]) and ledger.get(1) is None
    again = append(ledger, 2, body(3, 200))[0]  # too big for the first segment's rest, as the second of the batch
    assert (again.index, again.pos) == (1, DATA_SIZE)
    ledger.close()
    reloaded = ledger_at(tmp_path)
    assert reloaded.end_index == 1 and reloaded.get(1) == again


def test_the_currterm_file_holds_dledgers_two_keys_and_a_backup(tmp_path: Path) -> None:
    store = FileTermStore(tmp_path)
    assert store.load() == (0, None)
    store.save(3, "n1")
    store.save(4, None)
    assert (tmp_path / "currterm").read_text() == "currTerm=4\nvoteLeader=\n"
    assert (tmp_path / "currterm.bak").read_text() == "currTerm=3\nvoteLeader=n1\n"
    assert FileTermStore(tmp_path).load() == (4, None)


RECORD_ENCODERS = [pytest.param(record_batch._py_record_into, id="python")]
if record_batch.NATIVE:
    RECORD_ENCODERS.append(pytest.param(record_batch.encode_record_into, id="c"))


def _record(body: bytes, properties: str, sys_flag: int) -> MessageRecord:
    return MessageRecord(topic="TopicTest", body=body, queue_id=3, flag=1, properties=properties, sys_flag=sys_flag,
                         born_timestamp=1_700_000_000_000, born_host=b"\x7f\x00\x00\x01\x00\x00\x27\x10",
                         store_host=b"\x7f\x00\x00\x01\x00\x00\x27\x11")  # fmt: skip


def _files(root: Path) -> dict[str, bytes]:
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


@pytest.mark.parametrize("encode", RECORD_ENCODERS)
@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(messages=st.lists(st.tuples(st.binary(max_size=300), st.sampled_from(["", "TAGS\x01a\x02KEYS\x01k1 k2\x02"]),
                                   st.sampled_from([0, 4, 8, 0xC])), min_size=1, max_size=12))  # fmt: skip
def test_a_record_encoded_in_place_is_the_entry_a_filled_body_makes(
    tmp_path: Path, encode: object, messages: list[tuple[bytes, str, int]]
) -> None:
    """append_record_as_leader (the broker's single send) writes the data and index bytes, blanks and segment rolls
    that append_as_leader writes for a fill encoding the same record at the entry's pos + 48."""
    run = tmp_path / str(len(list(tmp_path.iterdir())))
    in_place, filled = ledger_at(run / "a"), ledger_at(run / "b")
    for offset, (data, props, flag) in enumerate(messages):
        record = _record(data, props, flag)
        got = in_place.append_record_as_leader(2, encode, offset, lambda: 1_700_000_000_123, 4096, record)
        prepared = prepare_message(record)

        def fill(pos: int, prepared: PreparedMessage = prepared, offset: int = offset) -> bytes:
            buf = bytearray(prepared.size)
            write_record(buf, 0, prepared, offset, pos + 48, 1_700_000_000_123)
            return bytes(buf)

        assert [got] == filled.append_as_leader(2, [(prepared.size, fill)])
        assert got.body_crc == filled.get(got.index).body_crc  # type: ignore[union-attr]
    for ledger in (in_place, filled):
        ledger.flush_all()
    assert _files(run / "a") == _files(run / "b")
    assert in_place.write_pos == filled.write_pos and in_place.end_index == len(messages) - 1


@pytest.mark.parametrize("encode", RECORD_ENCODERS)
def test_a_record_no_segment_holds_is_refused_with_nothing_written(tmp_path: Path, encode: object) -> None:
    ledger = ledger_at(tmp_path)
    with pytest.raises(LedgerError) as refused:
        ledger.append_record_as_leader(1, encode, 0, lambda: 1, 4096, _record(bytes(DATA_SIZE), "", 0))
    assert refused.value.code == ResponseCode.DISK_ERROR
    assert ledger.end_index == -1 and ledger.write_pos == 0
    with pytest.raises(MessageEncodeError):
        ledger.append_record_as_leader(1, encode, 0, lambda: 1, 10, _record(bytes(11), "", 0))
    assert ledger.end_index == -1 and ledger.write_pos == 0
    first = ledger.append_record_as_leader(1, encode, 0, lambda: 1, 4096, _record(b"x", "", 0))
    with pytest.raises(LedgerError):  # after an entry: refused before the segment is closed with a blank
        ledger.append_record_as_leader(1, encode, 1, lambda: 1, 4096, _record(bytes(DATA_SIZE), "", 0))
    assert ledger.end_index == 0 and ledger.write_pos == first.end_pos
    assert ledger.append_record_as_leader(1, encode, 1, lambda: 1, 4096, _record(b"y", "", 0)).pos == first.end_pos


@pytest.mark.parametrize("encode", RECORD_ENCODERS)
def test_a_leader_append_whose_segment_roll_fails_leaves_no_blank_and_followers_take_the_next_entry(
    tmp_path: Path, encode: object
) -> None:
    """The next data segment cannot be made (here a directory in its place; on a broker ENOSPC reserving a new 1 GiB
    segment, or EMFILE) after the blank that closes the last one is written: a batch and a single send alike take
    the blank back, so the leader's next entry lands right after its last one, where a follower whose log ends
    there places it (a blank left behind would put it at the next segment: the follower would refuse that push,
    DISK_ERROR, and every one after it)."""
    leader, follower = ledger_at(tmp_path / "leader"), ledger_at(tmp_path / "follower")
    first = append(leader, 1, body(0, 800))[0]
    follower.append_as_follower(first)
    in_the_way = leader.data.dir_for(DATA_SIZE) / mapped_file.segment_name(DATA_SIZE)
    in_the_way.mkdir(parents=True)
    with pytest.raises(OSError):
        append(leader, 1, body(1, 300))
    assert leader.write_pos == first.end_pos
    with pytest.raises(OSError):
        leader.append_record_as_leader(1, encode, 0, lambda: 1, 4096, _record(bytes(300), "", 0))
    assert leader.write_pos == first.end_pos and leader.end_index == 0
    assert len(leader.data.files) == 1 and not any(leader.data.files[0].view[first.end_pos :])
    in_the_way.rmdir()
    small = leader.append_record_as_leader(1, encode, 0, lambda: 1, 4096, _record(b"small", "", 0))
    follower.append_as_follower(small)
    assert follower.get(1) == small and small.pos == first.end_pos
    assert leader.write_pos == follower.write_pos


def test_a_follower_append_whose_index_segment_cannot_be_made_takes_the_same_entry_again(tmp_path: Path) -> None:
    """The follower's index segment is full and the next one cannot be made (EMFILE, ENOMEM from mmap; here a
    directory in its place) after the entry's data is written: the append raises OSError with the data taken back,
    so the leader's next push of the same entry lands once the segment can be made (data left behind would put the
    data end past the entry's ``pos``: that push and every later one refused, DISK_ERROR)."""
    leader, follower = ledger_at(tmp_path / "leader"), ledger_at(tmp_path / "follower")
    records = INDEX_SIZE // 32
    entries = append(leader, 1, *[body(i, 10) for i in range(records + 1)])
    for entry in entries[:-1]:
        follower.append_as_follower(entry)
    in_the_way = follower.index.dir_for(INDEX_SIZE) / mapped_file.segment_name(INDEX_SIZE)
    in_the_way.mkdir(parents=True)
    with pytest.raises(OSError):
        follower.append_as_follower(entries[-1])
    assert follower.end_index == records - 1 and follower.write_pos == entries[-1].pos
    in_the_way.rmdir()
    follower.append_as_follower(entries[-1])
    assert follower.get(records) == entries[-1]
    assert follower.write_pos == leader.write_pos


@pytest.mark.parametrize("encode", RECORD_ENCODERS)
@pytest.mark.parametrize("slack", [-1, 0, 1, 7, 8, 9])
def test_an_entry_that_would_leave_less_than_a_blank_starts_the_next_segment(
    tmp_path: Path, encode: object, slack: int
) -> None:
    """The second entry leaves ``slack`` bytes of the first segment: under 8 (a blank's size) it must move on, as
    place() moves a filled entry on."""
    fixed = 48 + prepare_message(_record(b"", "", 0)).size
    second = _record(bytes(100), "", 0)
    first = _record(bytes(DATA_SIZE - (fixed + 100) - slack - fixed), "", 0)
    in_place, filled = ledger_at(tmp_path / "a"), ledger_at(tmp_path / "b")
    for offset, record in enumerate((first, second)):
        got = in_place.append_record_as_leader(1, encode, offset, lambda: 5, 4096, record)
        prepared = prepare_message(record)
        data = bytearray(prepared.size)
        write_record(data, 0, prepared, offset, got.pos + 48, 5)
        assert got.body == bytes(data)
        assert got.pos == place(filled.write_pos, got.size, DATA_SIZE)[0]
        filled.append_as_leader(1, [(prepared.size, lambda _pos, data=bytes(data): data)])
    assert (in_place.get(1).pos >= DATA_SIZE) == (slack < 8)  # type: ignore[union-attr]
    in_place.flush_all()
    filled.flush_all()
    assert _files(tmp_path / "a") == _files(tmp_path / "b")


def test_a_flush_in_flight_across_a_truncation_claims_nothing_written_after_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The flush task plans on the Trio thread and syncs in a worker: a new leader's TRUNCATE can land in between and
    the entries after the cut be written again before the sync returns. Neither the ledger's flushed index nor the
    segment's flushed position may then claim those new bytes; the next flush syncs them."""
    ledger = ledger_at(tmp_path)
    entries = append(ledger, 1, body(0), body(1), body(2))
    plan = ledger.flush_plan()
    real_sync = mapped_file.os.fdatasync

    def sync_while_a_new_leader_rewrites(fd: int) -> None:
        real_sync(fd)
        if ledger.end_index == 2:  # once, during the data segment's sync
            ledger.truncate(Entry(1, 2, entries[1].pos, body(7)))
            append(ledger, 2, body(8))

    monkeypatch.setattr(mapped_file.os, "fdatasync", sync_while_a_new_leader_rewrites)
    FileLedger.flush_planned(plan)
    monkeypatch.setattr(mapped_file.os, "fdatasync", real_sync)
    ledger.flushed(plan)
    assert ledger.flushed_index == -1  # the in-flight flush's claim is dropped whole; the next one makes it
    data = ledger.data.last()
    assert data is not None and data.flushed_position < data.wrote_position  # so the next plan takes it
    ledger.flush_all()
    assert ledger.flushed_index == 2 and data.flushed_position == data.wrote_position


def test_a_flush_in_flight_across_an_undone_append_keeps_its_claim(tmp_path: Path) -> None:
    """A leader's failed append is taken back only past where the log ended before it, so a flush planned earlier
    still makes its entries durable (a truncation's rule, claim nothing, would hold back answers waiting for it)."""
    ledger = ledger_at(tmp_path)
    append(ledger, 1, body(0), body(1))
    plan = ledger.flush_plan()
    with pytest.raises(LedgerError, match="announced"):
        ledger.append_as_leader(1, [(100, lambda _p: body(2)), (100, lambda _p: b"short")])
    assert ledger.end_index == 1
    FileLedger.flush_planned(plan)
    ledger.flushed(plan)
    assert ledger.flushed_index == 1


def _diverged(tmp_path: Path, count: int) -> tuple[FileLedger, list[Entry]]:
    """A follower's log of ``count`` entries of term 1, flushed."""
    follower = ledger_at(tmp_path)
    entries = append(follower, 1, *[body(i, 10) for i in range(count)])
    follower.flush_all()
    assert follower.flushed_index == count - 1
    return follower, entries


def test_a_truncation_whose_entry_cannot_be_written_ends_the_log_before_it(tmp_path: Path) -> None:
    """A TRUNCATE that replaces entry 64 (its index record opens the second index segment) when no file can be
    opened (EMFILE; ENOSPC or ENOMEM alike): the cut is made, the leader's entry is not, and the log ends at entry 63
    with that entry's term and a flushed index no further (the end term was -1 and the flushed index still 69, so
    under ``sync_before_ack`` the next pushes of entries 64..69 were answered before a sync). Once files open
    again, the same TRUNCATE lands and a restart finds it."""
    records = INDEX_SIZE // 32
    follower, entries = _diverged(tmp_path, records + 6)
    theirs = Entry(records, 2, entries[records].pos, b"leader's", entries[records].magic)
    with no_descriptor_left(), pytest.raises(OSError):
        follower.truncate(theirs)
    assert (follower.end_index, follower.end_term, follower.flushed_index) == (records - 1, 1, records - 1)
    assert follower.get(records - 1) == entries[records - 1] and follower.get(records) is None
    assert follower.write_pos == entries[records - 1].end_pos
    assert follower.truncate(theirs) == records
    assert (follower.end_index, follower.end_term, follower.get(records)) == (records, 2, theirs)
    follower.close()
    again = ledger_at(tmp_path)
    assert again.end_index == records and again.get(records) == theirs


def test_a_truncation_that_keeps_its_entry_opens_no_file(tmp_path: Path) -> None:
    """Keeping entry 64 (the first record of the second index segment) and cutting what follows rewrites its index
    record in place: it used to erase the segment holding it and make it again, so a follower out of descriptors
    (or disk) could not take a TRUNCATE that writes nothing new."""
    records = INDEX_SIZE // 32
    follower, entries = _diverged(tmp_path, records + 6)
    with no_descriptor_left():
        assert follower.truncate(entries[records]) == records
    assert (follower.end_index, follower.end_term, follower.flushed_index) == (records, 1, records)
    assert follower.get(records) == entries[records] and follower.get(records + 1) is None


def test_a_rebuild_whose_first_segment_cannot_be_made_leaves_an_empty_log(tmp_path: Path) -> None:
    """A TRUNCATE to the leader's first entry, past this log's end (DLedger's ``rebuildWithPos``), whose data segment
    cannot be made (a directory in its place): the old segments are gone and the log is empty, begin, end, end term
    and flushed index all -1 (they named entries no file held any more); once the segment can be made, the same
    TRUNCATE starts the log there."""
    follower, _ = _diverged(tmp_path, 6)
    first = Entry(100, 2, 5 * DATA_SIZE + 200, b"leader's first")
    in_the_way = follower.data.dir_for(5 * DATA_SIZE) / mapped_file.segment_name(5 * DATA_SIZE)
    in_the_way.mkdir(parents=True)
    with pytest.raises(OSError):
        follower.truncate(first)
    assert (follower.begin_index, follower.end_index, follower.end_term, follower.flushed_index) == (-1, -1, -1, -1)
    assert follower.get(0) is None and not follower.data.files
    in_the_way.rmdir()
    assert follower.truncate(first) == 100
    assert (follower.begin_index, follower.end_index, follower.get(100)) == (100, 100, first)
    follower.close()
    again = ledger_at(tmp_path)
    assert again.begin_index == again.end_index == 100 and again.get(100) == first


def test_a_segment_a_truncation_cannot_unlink_leaves_the_log_cut(tmp_path: Path) -> None:
    """A data segment past the cut cannot be unlinked (here a directory took its name; EIO or a read-only remount
    alike): it leaves the log all the same, logged, and the truncation completes (the error stopped it midway, the
    end index naming entries of a segment no longer in the log). Recovery ends the log before a leftover file."""
    follower, entries = _diverged(tmp_path, 40)
    last = follower.data.last()
    assert last is not None and last.file_from_offset > entries[5].end_pos
    last.path.rename(last.path.with_name("moved"))
    last.path.mkdir()
    assert follower.truncate(entries[5]) == 5
    assert (follower.end_index, follower.write_pos, follower.get(6)) == (5, entries[5].end_pos, None)
    assert follower.data.last() is not last
    last.path.rmdir()
    follower.close()
    assert ledger_at(tmp_path).end_index == 5
