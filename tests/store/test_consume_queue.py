"""ConsumeQueue: 20-byte entries at ``i * 20``, filler padding for a queue born at a non-zero offset, recovery of the
written end, segment boundaries."""

from __future__ import annotations

from pathlib import Path

import pytest

from store.consume_queue import CQ_STORE_UNIT_SIZE, ENTRY, FILLER_SIZE, ConsumeQueue


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
    """Live entries stay whatever the flag (a classic store's recovery writes into queues whose end it has not read
    yet, and a DLedger queue that still indexes live data is never dropped)."""
    cq = ConsumeQueue(tmp_path, "T", 0, 8 * CQ_STORE_UNIT_SIZE)
    cq.restart_gapped = restart_gapped
    cq.put(0, 0, 100, 0)
    cq.put(5, 500, 100, 0)
    assert cq.entry(0) == (0, 100, 0) and cq.entry(5) == (500, 100, 0)
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
