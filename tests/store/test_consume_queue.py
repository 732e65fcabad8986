"""ConsumeQueue: 20-byte entries at ``i * 20``, filler padding for a queue born at a non-zero offset, recovery of the
written end, segment boundaries; a put whose ConsumeQueue file cannot be made is refused with nothing written."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import attrs
import pytest

from remoting.codec.message import MessageRecord
from store.consume_queue import CQ_STORE_UNIT_SIZE, ENTRY, FILLER_SIZE, ConsumeQueue
from store.errors import CreateMappedFileError, MessageIllegalError
from store.message_store import SCHEDULE_TOPIC, MessageStore
from store.results import AppendResult
from tests.store.store_helpers import message, no_descriptor_left, open_store


def test_entries_are_twenty_bytes_at_their_logical_position(tmp_path: Path) -> None:
    cq = ConsumeQueue(tmp_path, "T", 0, 8 * CQ_STORE_UNIT_SIZE)
    for i in range(10):
        cq.put(i, 1000 + i * 100, 90 + i, -i)
    assert (cq.min_offset, cq.max_offset) == (0, 10)
    names = sorted(p.name for p in tmp_path.iterdir())
    assert names == [f"{0:020d}", f"{160:020d}"]
    raw = (tmp_path / names[1]).read_bytes()
    assert raw[:20] == (1800).to_bytes(8, "big") + (98).to_bytes(4, "big") + (-8).to_bytes(8, "big", signed=True)
    assert cq.entries(6, 32) == [(1600, 96, -6), (1700, 97, -7)]  # stops at the segment end
    assert cq.entries(9, 32) == [(1900, 99, -9)]
    cq.close()


def test_lazy_entries_give_what_entries_gives_at_every_start_and_count(tmp_path: Path) -> None:
    cq = ConsumeQueue(tmp_path, "T", 0, 8 * CQ_STORE_UNIT_SIZE)
    for i in range(20):
        cq.put(i, 1000 + i * 100, 90 + i, -i)
    for start in range(0, 22):
        for count in (1, 3, 8, 32, 800):
            lazy = cq.iter_entries(start, count)
            eager = cq.entries(start, count)
            assert (None if lazy is None else list(lazy)) == eager
            assert eager is None or len(eager) <= count
    cq.close()


def test_queue_first_written_at_a_non_zero_offset_is_padded_with_fillers(tmp_path: Path) -> None:
    cq = ConsumeQueue(tmp_path, "T", 0, 8 * CQ_STORE_UNIT_SIZE)
    cq.put(13, 5000, 120, 7)
    assert (cq.min_offset, cq.max_offset) == (13, 14)
    assert cq.entry(12) is None
    raw = (tmp_path / f"{160:020d}").read_bytes()
    for i in range(5):  # entries 8..12
        entry = raw[i * 20 : i * 20 + 20]
        assert entry == bytes(8) + FILLER_SIZE.to_bytes(4, "big") + bytes(8)
    cq.close()
    reloaded = ConsumeQueue(tmp_path, "T", 0, 8 * CQ_STORE_UNIT_SIZE)
    reloaded.load()
    reloaded.recover(0, 10_000)
    assert (reloaded.min_offset, reloaded.max_offset) == (13, 14)
    assert reloaded.entry(13) == (5000, 120, 7)
    reloaded.close()


def test_recovery_drops_entries_past_the_log_end_and_finds_the_end_in_a_full_segment(tmp_path: Path) -> None:
    cq = ConsumeQueue(tmp_path, "T", 0, 8 * CQ_STORE_UNIT_SIZE)
    for i in range(16):  # exactly two full segments, entries with zero bytes across boundaries
        cq.put(i, i * 65536, 65536, 0)
    cq.close()
    cq = ConsumeQueue(tmp_path, "T", 0, 8 * CQ_STORE_UNIT_SIZE)
    cq.load()
    cq.recover(0, 16 * 65536)
    assert cq.max_offset == 16
    cq.close()
    cq = ConsumeQueue(tmp_path, "T", 0, 8 * CQ_STORE_UNIT_SIZE)
    cq.load()
    cq.recover(0, 11 * 65536 + 10)
    assert cq.max_offset == 11
    cq.put(11, 1, 2, 3)
    assert cq.entry(11) == (1, 2, 3) and cq.entry(12) is None
    cq.close()


@pytest.mark.parametrize("method", ["put", "put_packed"])
def test_a_write_past_the_end_of_a_queue_with_no_live_entry_restarts_it_when_asked(tmp_path: Path, method: str) -> None:
    """A DLedger follower rebuilt from the leader's first entry never had the offsets in between: with
    ``restart_gapped`` a queue left with no live entry starts afresh at the next one (fillers only before it in its
    own segment), and recovery finds it there."""
    cq = ConsumeQueue(tmp_path, "T", 0, 8 * CQ_STORE_UNIT_SIZE)
    for i in range(10):
        cq.put(i, 100 * i, 100, 0)
    cq.delete_expired(10_000)  # everything it indexed is gone
    assert (cq.min_offset, cq.max_offset) == (10, 10)
    cq.restart_gapped = True
    if method == "put":
        cq.put(21, 20_000, 50, 9)
    else:
        cq.put_packed(21, ENTRY.pack(20_000, 50, 9) + ENTRY.pack(20_050, 50, 9))
    assert (cq.min_offset, cq.entry(21)) == (21, (20_000, 50, 9))
    assert sorted(p.name for p in tmp_path.iterdir()) == [f"{320:020d}"]  # the old segments are gone
    raw = (tmp_path / f"{320:020d}").read_bytes()
    assert raw[:100] == ENTRY.pack(0, FILLER_SIZE, 0) * 5  # offsets 16..20
    end = cq.max_offset
    cq.delete_expired(10_000)  # under the disk lock: the unlinked segments are unmapped now
    assert cq.retired == []
    cq.close()
    reloaded = ConsumeQueue(tmp_path, "T", 0, 8 * CQ_STORE_UNIT_SIZE)
    reloaded.load()
    reloaded.recover(10_000, 30_000)
    assert (reloaded.min_offset, reloaded.max_offset) == (21, end)
    reloaded.close()


@pytest.mark.parametrize("restart_gapped", [False, True])
def test_a_write_past_the_end_of_a_queue_with_live_entries_restarts_nothing(
    tmp_path: Path, restart_gapped: bool
) -> None:
    """Live entries stay whatever the flag (a DLedger queue that still indexes live data is never dropped); the entry
    past the end goes to the end, as ConsumeQueue.putMessagePositionInfo (4.9.8) appends there whatever the gap."""
    cq = ConsumeQueue(tmp_path, "T", 0, 8 * CQ_STORE_UNIT_SIZE)
    cq.restart_gapped = restart_gapped
    cq.put(0, 0, 100, 0)
    cq.put(5, 500, 100, 0)
    assert cq.entry(0) == (0, 100, 0) and cq.entry(1) == (500, 100, 0) and cq.max_offset == 2
    assert cq.min_offset == 0 and not cq.retired
    cq.close()


def test_without_the_flag_a_queue_with_no_live_entry_is_not_restarted(tmp_path: Path) -> None:
    cq = ConsumeQueue(tmp_path, "T", 0, 8 * CQ_STORE_UNIT_SIZE)
    for i in range(3):
        cq.put(i, 100 * i, 100, 0)
    cq.delete_expired(10_000)
    cq.put(5, 20_000, 100, 0)
    assert (tmp_path / f"{0:020d}").exists() and not cq.retired
    cq.close()


def _delayed(msg: MessageRecord) -> MessageRecord:
    return attrs.evolve(msg, topic=SCHEDULE_TOPIC, queue_id=1, properties="DELAY\x012")


PLAIN, DELAYED = ("TopicTest", 0), (SCHEDULE_TOPIC, 1)
#: Each way a put reaches a ConsumeQueue: (put messages to the queue, the queue).
PUTS: dict[str, tuple[Callable[[MessageStore], AppendResult], tuple[str, int]]] = {
    "single": (lambda store: store.append(message()), PLAIN),
    "batch": (lambda store: store.append_batch([message(), message()]), PLAIN),
    "entries": (lambda store: store.append_entries(message(), [(b"a", "TAGS\x01A", 0), (b"b", "", 0)]), PLAIN),
    "delayed": (lambda store: store.append(_delayed(message())), DELAYED),
    "delayed-batch": (lambda store: store.append_batch([_delayed(message()), _delayed(message())]), DELAYED),
}


@pytest.mark.parametrize("name", sorted(PUTS))
def test_a_put_whose_consume_queue_file_cannot_be_made_is_refused_and_leaves_no_hole(tmp_path: Path, name: str) -> None:
    """The queue's next file is made before the record goes to the CommitLog: when it cannot be (EMFILE, ENOSPC) the
    put is refused with CREATE_MAPPED_FILE_FAILED and nothing written, and the next put takes the same queue offset.
    Written first, the record would have had no entry and the next put an offset past that hole, where recovery
    ends the queue (ConsumeQueue.recover): an acknowledged message lost after a restart. RocketMQ never leaves the
    hole either: its dispatch retries, then refuses every put (ConsumeQueue.putMessagePositionInfoWrapper,
    RunningFlags.makeLogicsQueueError); here the next put retries the file."""
    put, key = PUTS[name]
    store = open_store(tmp_path)  # 8 entries a ConsumeQueue file
    one = _delayed(message()) if key == DELAYED else message()
    for _ in range(8 if name in ("single", "delayed") else 7):
        store.append(one)  # the next put's (last) entry is the first of the queue's second file
    before = (store.commitlog.max_offset, dict(store.queue_offsets))
    with no_descriptor_left(), pytest.raises(CreateMappedFileError) as refused:
        put(store)
    assert refused.value.put_status == "CREATE_MAPPED_FILE_FAILED"
    assert (store.commitlog.max_offset, dict(store.queue_offsets)) == before
    later = put(store)  # acknowledged
    assert later.queue_offset == before[1][key]
    store.close()
    store = open_store(tmp_path)
    try:
        cq = store.consume_queue(*key)
        assert cq.max_offset == later.queue_offset + later.count, "an acknowledged message fell out of its queue"
        phys = [cq.entry(later.queue_offset + i)[0] for i in range(later.count)]  # type: ignore[index]
        assert phys == list(later.phy_offsets)
        assert put(store).queue_offset == later.queue_offset + later.count
    finally:
        store.close()


def test_a_put_refused_after_its_consume_queue_file_was_made_leaves_no_file(tmp_path: Path) -> None:
    """The file made for a put's entries goes again when the put is refused after all (here by the encoder), so a
    refused put changes nothing: neither the queue it needed a second file of nor the new queue it would have
    started."""
    store = open_store(tmp_path, max_message_size=600)
    for _ in range(7):
        store.append(message())
    queue_dir = tmp_path / "consumequeue" / "TopicTest" / "0"
    with pytest.raises(MessageIllegalError):
        store.append_batch([message(), message(body=bytes(601))])  # entries 7 and 8: the second file
    with pytest.raises(MessageIllegalError):
        store.append(message(topic="Fresh", body=bytes(601)))
    assert [p.name for p in queue_dir.iterdir()] == [f"{0:020d}"]
    assert not [p for p in (tmp_path / "consumequeue").rglob("*") if p.is_file() and "Fresh" in p.parts]
    assert store.append_batch([message(), message()]).queue_offset == 7
    store.close()


def test_a_consume_queue_file_size_between_two_entries_is_rounded_up_to_whole_entries(tmp_path: Path) -> None:
    """MessageStoreConfig.getMappedFileSizeConsumeQueue (4.9.8, store/src/main/java/org/apache/rocketmq/store/config/
    MessageStoreConfig.java) rounds ``mappedFileSizeConsumeQueue`` up to a multiple of the 20-byte entry, and every
    ConsumeQueue is made with that size: 170 makes 180-byte files of 9 entries. Ours refused every put (ValueError:
    not a multiple of 20), so a broker.conf Java takes made a broker that stored nothing."""
    store = open_store(tmp_path, mapped_file_size_consume_queue=170)
    for i in range(10):
        assert store.append(message(body=f"m{i}".encode())).queue_offset == i
    store.close()
    files = sorted((tmp_path / "consumequeue" / "TopicTest" / "0").iterdir())
    assert [(p.name, p.stat().st_size) for p in files] == [(f"{0:020d}", 180), (f"{180:020d}", 180)]
    store = open_store(tmp_path, mapped_file_size_consume_queue=170)
    assert store.max_offset_in_queue("TopicTest", 0) == 10
    assert store.get("TopicTest", 0, 9, 32).status.name == "FOUND"
    store.close()


def test_count_matching_stops_where_javas_estimate_scan_stops(tmp_path: Path) -> None:
    """The scan behind a lag estimate (RocketMQ 5.3.3's ConsumeQueue ``estimateMessageCount``), read a chunk of tags
    codes at a time across segments: stopped after ``max_scan`` entries or at the entry that makes more than
    ``max_matches`` match, as an entry-by-entry count stops."""
    cq = ConsumeQueue(tmp_path, "T", 0, 1500 * CQ_STORE_UNIT_SIZE)
    tags = [7 if i % 3 == 0 else 8 for i in range(6000)]
    for i, code in enumerate(tags):
        cq.put(i, i * 100, 100, code)

    def by_entry(start: int, end: int, max_scan: int, max_matches: int) -> tuple[int, int]:
        matched = scanned = 0
        for code in tags[start:end]:
            scanned += 1
            matched += code == 7
            if scanned >= max_scan or matched > max_matches:
                break
        return matched, scanned

    for start, end, max_scan, max_matches in [
        (0, 6000, 20_000, 5000),
        (1, 5999, 20_000, 900),
        (1499, 4501, 2500, 5000),
        (2000, 2000, 10, 10),
        (10, 7000, 20_000, 5000),
    ]:
        expected = by_entry(start, min(end, 6000), max_scan, max_matches)
        assert cq.count_matching(start, end, (7).__eq__, max_scan, max_matches) == expected, (start, end)
    cq.close()
