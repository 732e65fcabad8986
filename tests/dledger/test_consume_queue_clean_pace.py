"""deleteConsumeQueueFilesInterval in DLedger mode: RocketMQ's DLedger broker is a DefaultMessageStore over a
DLedgerCommitLog, so the ConsumeQueue files below the log's new first entry go in CleanConsumeQueueService's pass,
one queue at a time with the pause after each (store/src/main/java/org/apache/rocketmq/store/
DefaultMessageStore.java CleanConsumeQueueService.deleteExpiredFiles), as the classic store's retention does
(tests/store/test_flush_settings.py::test_consume_queue_files_are_deleted_delete_consume_queue_files_interval_apart).
"""

from __future__ import annotations

from pathlib import Path

import attrs
import trio
import trio.testing

from dledger.commitlog_store import DLedgerMessageStore, _filler
from dledger.config import DLedgerConfig
from remoting.codec.message import prepare_message
from tests.store.store_helpers import message, small_config
from tests.store.test_retention import Disk

QUEUES = 3


def three_queue_store(root: Path) -> DLedgerMessageStore:
    """A single member: 4 KiB entry segments, 8 entries a queue file, records of TopicTest queues 0..2 in turn,
    committed, flushed and dispatched, over several segments."""
    dledger = DLedgerConfig(group="g", self_id="n0", peers="n0-127.0.0.1:1", store_base_dir=str(root),
                            mapped_file_size_for_entry_data=4096)  # fmt: skip
    store = DLedgerMessageStore(small_config(root), dledger)
    store.load()
    ledger = store.ledger
    for i in range(QUEUES * 24):
        queue_id = i % QUEUES
        prepared = prepare_message(message(body=bytes(200), queue_id=queue_id))
        ledger.append_as_leader(1, [(prepared.size, _filler(prepared, i // QUEUES, 1_700_000_000_000))])
    ledger.set_committed(ledger.end_index)
    ledger.flush_all()
    ledger.persist_checkpoint()
    store._dispatch_committed()
    return store


async def test_dledger_queue_files_below_the_first_entry_go_delete_consume_queue_files_interval_apart(
    tmp_path: Path, autojump_clock: trio.testing.MockClock
) -> None:
    """Three queues lose files when the entry segments go: a pass pauses deleteConsumeQueueFilesInterval after each
    of them. Ours dropped every queue's files at once, under the disk lock, as each entry segment went (the setting
    had no effect in DLedger mode)."""
    store = three_queue_store(tmp_path)
    try:
        counts = {key: len(cq.queue.files) for key, cq in store.consume_queues.items()}
        assert len(counts) == QUEUES and all(count > 2 for count in counts.values())
        store.config = attrs.evolve(store.config, disk_usage_ratio=Disk(0.87), delete_consume_queue_files_interval=1000)
        start = trio.current_time()
        assert await store.retention.check_once() > 0
        assert all(len(cq.queue.files) < counts[key] for key, cq in store.consume_queues.items())
        # Up to ten entry segments 100 ms apart (under 1 s), then a 1 s pause after each of the three queues.
        assert trio.current_time() - start >= QUEUES * 1.0
    finally:
        store.close()
