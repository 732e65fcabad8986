"""``destroyMapedFileIntervalForcibly`` has nothing to wait for here: RocketMQ 4.9.8 keeps a segment that a reader
still references (MappedFile.destroy, ReferenceResource.shutdown) because unmapping it under that reader would crash
the JVM, and destroys it anyway after the interval (120 s) in case a reference leaked. Retention here takes the
segment out of its log and unlinks and unmaps it at once; what a reader already holds (a pull's record views, a
looked-up message, a replication chunk, a ConsumeQueue iterator) are slices that keep the mapping, and with it the
unlinked file's bytes, alive until the last one is dropped; a reader that looks the segment up afterwards gets a
clean miss. Real files, real retention pass (its unlink in a worker thread)."""

from __future__ import annotations

import datetime
import gc
import os
from collections.abc import Iterator
from pathlib import Path

import pytest
import trio

from remoting.codec.message import decode_record
from store.consume_queue import Entry
from store.message_store import MessageStore
from store.results import GetResult, GetStatus
from tests.store.store_helpers import FakeClock, message, open_store

TOPIC = "TopicTest"


def _at_delete_hour() -> int:
    return int(datetime.datetime(2026, 1, 15, 4, 30).timestamp() * 1000)


def _mapped(path: Path) -> bool:
    """Whether this process still maps ``path`` (Linux: an unlinked one shows as ``path (deleted)``)."""
    with open("/proc/self/maps") as maps:
        return any(str(path) in line for line in maps)


async def _delete_expired_segments(store: MessageStore, clock: FakeClock) -> int:
    """One retention pass at the delete hour with every segment older than ``fileReservedTime``."""
    clock.now = _at_delete_hour()
    old = (clock.now - (store.config.file_reserved_time + 1) * 3_600_000) / 1000
    for mf in store.commitlog.queue.files:
        os.utime(mf.path, (old, old))
    return await store.retention.check_once()


@pytest.mark.skipif(not os.path.exists("/proc/self/maps"), reason="reads the process's mappings (Linux)")
async def test_readers_holding_a_segment_retention_deletes_read_the_same_bytes_and_later_ones_miss(
    tmp_path: Path,
) -> None:
    clock = FakeClock()
    store = open_store(tmp_path, now_ms=clock)
    bodies = [f"body-{i:03d}".encode() * 20 for i in range(40)]
    phys = [store.append(message(body=body)).phy_offset for body in bodies]
    store.flush_all_blocking()
    first = store.commitlog.queue.files[0]
    first_path, first_end = first.path, first.end_offset
    cq_first = store.consume_queue(TOPIC, 0).queue.files[0]
    in_first = list(range(cq_first.file_size // 20))  # the messages of the first ConsumeQueue file
    assert phys[in_first[-1]] < first_end and phys[-1] >= first_end  # all in the first CommitLog segment
    cq_first_path = cq_first.path
    del cq_first

    pulled = store.get(TOPIC, 0, 0, len(in_first))  # a pull whose response is not written out yet
    assert pulled.status is GetStatus.FOUND and pulled.queue_offsets == in_first
    looked_up = store.look_message_by_offset(phys[0])  # a message viewed by offset
    shipped = store.commitlog.read_from(0, first_end)  # a replication chunk
    assert looked_up is not None and shipped is not None
    shipped_copy = bytes(shipped)
    entries = store.consume_queue(TOPIC, 0).iter_entries(0, len(in_first))  # a ConsumeQueue scan under way
    assert entries is not None
    del first

    async with trio.open_nursery() as nursery:  # a task holds them across the pass, as a response being sent
        deleted = trio.Event()

        async def holder(
            pulled: GetResult, looked_up: memoryview, shipped: memoryview, entries: Iterator[Entry]
        ) -> None:
            await deleted.wait()
            assert [decode_record(view).body for view in pulled.messages] == [bodies[i] for i in in_first]
            assert decode_record(looked_up).body == bodies[0]
            assert bytes(shipped) == shipped_copy
            assert [entry[0] for entry in entries] == [phys[i] for i in in_first]

        nursery.start_soon(holder, pulled, looked_up, shipped, entries)
        assert await _delete_expired_segments(store, clock) >= 1
        gc.collect()
        assert not first_path.exists() and not cq_first_path.exists()
        assert _mapped(first_path)  # unlinked, still mapped for the readers that hold it
        deleted.set()

    # Looked up after the deletion: clean misses.
    assert store.min_phy_offset >= first_end
    again = store.get(TOPIC, 0, 0, len(in_first))
    assert again.status is GetStatus.OFFSET_TOO_SMALL and not again.runs
    assert store.look_message_by_offset(phys[0]) is None
    assert store.commitlog.read_from(0, first_end) is None
    assert store.consume_queue(TOPIC, 0).iter_entries(0, 1) is None

    # The last view dropped, the mapping (and with it the unlinked file's blocks) goes: nothing to force.
    del pulled, looked_up, shipped, entries
    gc.collect()
    assert not _mapped(first_path)
    store.close()
