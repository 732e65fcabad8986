"""A DLedger leader's sends (dledger/commitlog_store.py, ``DLedgerMessageStore.append``): a refused message leaves no
entry and takes no queue offset, with the store's refusal for each kind of bad message; the next send gets the next
offset and its entry holds the record the general encoder writes. A refused batch leaves none of its entries, and a
send refused by the file system (an index segment that cannot be made) leaves nothing a restart would bring back."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import pytest
import trio
import trio.testing

from dledger.commitlog_store import DLedgerMessageStore
from dledger.config import DLedgerConfig
from dledger.entry import HEADER_SIZE, INDEX_UNIT_SIZE
from remoting.codec.message import MessageRecord, decode_record, encode_record
from store.errors import MessageIllegalError, PropertiesSizeExceededError, StoreError
from store.mapped_file import segment_name
from store.results import GetStatus, PutStatus
from tests.dledger.ports import free_ports
from tests.store.store_helpers import small_config

HOST = bytes([127, 0, 0, 1, 0, 0, 0x2A, 0x9F])


def _message(topic: str = "TopicA", body: bytes = b"ok", properties: str = "TAGS\x01t") -> MessageRecord:
    return MessageRecord(topic, body, queue_id=1, properties=properties, born_host=HOST, store_host=HOST)


def _one_member(tmp_path: Path, **settings: object) -> DLedgerConfig:
    """A one-member group (4 KiB entry files unless ``settings`` say otherwise)."""
    settings.setdefault("mapped_file_size_for_entry_data", 4096)
    return DLedgerConfig(group="g", self_id="n0", peers=f"n0-127.0.0.1:{free_ports(1)[0]}",
                         store_base_dir=str(tmp_path), **settings)  # type: ignore[arg-type]  # fmt: skip


@asynccontextmanager
async def _writable_leader(tmp_path: Path, dledger: DLedgerConfig | None = None,
                           **store_settings: object) -> AsyncIterator[DLedgerMessageStore]:  # fmt: skip
    """The store of ``dledger`` (default: :func:`_one_member`), running and writable; stopped on exit."""
    dledger = dledger or _one_member(tmp_path)
    store = DLedgerMessageStore(small_config(tmp_path, **store_settings), dledger, HOST)
    store.load()
    async with trio.open_nursery() as nursery:
        await nursery.start(store.run)
        while not store.writable:
            await trio.sleep(0.05)
        yield store
        nursery.cancel_scope.cancel()


async def test_a_refused_send_leaves_no_entry_and_takes_no_queue_offset(
    tmp_path: Path, autojump_clock: trio.testing.MockClock
) -> None:
    async with _writable_leader(tmp_path, max_message_size=100) as store:
        end = store.ledger.end_index
        refusals = [
            (_message(body=bytes(101)), MessageIllegalError, "exceeds 100"),
            (_message(properties="K\x01" + "v" * 40_000), PropertiesSizeExceededError, "properties"),
            (_message(topic="T" * 128), MessageIllegalError, "topic"),
            (_message(topic="../../x"), MessageIllegalError, "cannot name"),  # its queue directory would escape
        ]
        for message, error, words in refusals:
            with pytest.raises(error, match=words):
                store.append(message)
            assert store.ledger.end_index == end and store.queue_offsets.get(("TopicA", 1), 0) == 0
        for offset in (0, 1):
            put = await store.put(_message(body=b"ok%d" % offset))
            assert put.status is PutStatus.PUT_OK and put.append.queue_offset == offset
            entry = store.ledger.get(store.ledger.end_index)
            assert entry is not None and put.append.phy_offset == entry.pos + HEADER_SIZE
            assert entry.body == encode_record(_message(body=b"ok%d" % offset), offset, put.append.phy_offset,
                                               put.append.store_timestamp)  # fmt: skip


async def test_a_refused_batch_leaves_no_entry_and_no_queue_offset_taken_twice(
    tmp_path: Path, autojump_clock: trio.testing.MockClock
) -> None:
    """A batch whose second message fits no entry file is refused whole: had its first entry stayed in the log, it
    would commit with queue offset 0, which the store never handed out, and the next send, given 0 too, would share
    it (the ConsumeQueue keeping only the later record)."""
    async with _writable_leader(tmp_path) as store:
        end = store.ledger.end_index
        with pytest.raises(StoreError):
            store.append_batch([_message(body=b"small"), _message(body=bytes(5000))])
        assert store.ledger.end_index == end
        put = await store.put(_message(body=b"next"))
        assert put.status is PutStatus.PUT_OK and put.append.queue_offset == 0
        await trio.sleep(1)
        cq = store.consume_queues[("TopicA", 1)]
        assert (cq.min_offset, cq.max_offset) == (0, 1)
        assert decode_record(store.get("TopicA", 1, 0, 1).messages[0]).body == b"next"
        logged = []
        for index in range(store.ledger.begin_index, store.ledger.committed_index + 1):
            entry = store.ledger.get(index)
            if entry is not None and len(entry.body) > 8:  # no new leader's empty entry
                record = decode_record(entry.body)
                logged.append((record.body, record.queue_offset))
        assert logged == [(b"next", 0)]


async def test_a_send_whose_index_segment_cannot_be_made_does_not_come_back_in_place_of_the_next(
    tmp_path: Path, autojump_clock: trio.testing.MockClock
) -> None:
    """The index segment (64 records here) is full and the next one cannot be made (here a directory in its place;
    on a broker EMFILE or ENOMEM from mmap): the send is refused, and its entry, already in the data file, is taken
    back. Left there with no index record, the next send (PUT_OK, the same index and queue offset) would follow it,
    and a restart's recovery scan would take the refused entry as that index and end the log there: the
    acknowledged message gone, the refused one served in its place."""
    records = 64
    dledger = _one_member(tmp_path, mapped_file_size_for_entry_data=64 * 1024,
                          mapped_file_size_for_entry_index=INDEX_UNIT_SIZE * records)  # fmt: skip
    async with _writable_leader(tmp_path, dledger) as store:
        sent = 0
        while store.ledger.end_index < records - 1:
            assert (await store.put(_message(body=b"m%d" % sent))).status is PutStatus.PUT_OK
            sent += 1
        in_the_way = store.ledger.index.dir_for(INDEX_UNIT_SIZE * records) / segment_name(INDEX_UNIT_SIZE * records)
        in_the_way.mkdir(parents=True)
        with pytest.raises(OSError):
            await store.put(_message(body=b"refused"))
        in_the_way.rmdir()
        acked = await store.put(_message(body=b"acked"))
        assert acked.status is PutStatus.PUT_OK and acked.append.queue_offset == sent
        await trio.sleep(1)
        assert decode_record(store.get("TopicA", 1, sent, 1).messages[0]).body == b"acked"
    again = DLedgerMessageStore(small_config(tmp_path), dledger, HOST)
    again.load()
    try:
        assert [decode_record(m).body for m in again.get("TopicA", 1, sent, 1).messages] == [b"acked"]
    finally:
        again.close()


async def test_the_earliest_store_time_is_the_first_records_after_many_terms_without_sends(
    tmp_path: Path, autojump_clock: trio.testing.MockClock
) -> None:
    """Every election appends the new leader's empty entry; a group restarted 17 times before its first send has 18 of
    them ahead of that send's record. GET_BROKER_RUNTIME_INFO's ``earliestMessageTimeStamp`` is still the
    first record's store time (RocketMQ's ``DefaultMessageStore.getEarliestMessageTime`` reads the log's first
    message, store/src/main/java/org/apache/rocketmq/store/DefaultMessageStore.java), not -1."""
    dledger = _one_member(tmp_path)
    for _ in range(17):
        async with _writable_leader(tmp_path, dledger):
            pass
    async with _writable_leader(tmp_path, dledger) as store:
        assert store.ledger.end_index >= 17
        put = await store.put(_message(body=b"first"))
        assert put.status is PutStatus.PUT_OK
        assert store.earliest_store_time() == put.append.store_timestamp


async def test_messages_dispatched_before_a_crash_stay_readable_with_a_checkpoint_from_before_them(
    tmp_path: Path, autojump_clock: trio.testing.MockClock
) -> None:
    """A member killed within ``checkPointInterval`` (3 s) of sends the quorum acknowledged leaves a ``checkpoint``
    whose committed index predates them, while its entry and ConsumeQueue files (page cache) hold them. RocketMQ's
    DLedgerCommitLog.recover cuts the ConsumeQueues only past the DLedger log's write end
    (store/src/main/java/org/apache/rocketmq/store/dledger/DLedgerCommitLog.java), so the restarted member still
    serves them, also while no leader is back to push the committed index. Here the queues were cut at the stale
    committed end: acknowledged messages vanished from a restarted member's queues and its queue offsets went back."""
    dledger = _one_member(tmp_path)
    config = small_config(tmp_path)
    async with _writable_leader(tmp_path, dledger) as store:
        store.ledger.persist_checkpoint()
        checkpoint = store.ledger.directory / "checkpoint"
        before = checkpoint.read_bytes()
        for n in range(3):
            assert (await store.put(_message(body=b"m%d" % n))).status is PutStatus.PUT_OK
        assert store.max_offset_in_queue("TopicA", 1) == 3
    checkpoint.write_bytes(before)  # what a kill -9 right after the sends leaves
    store = DLedgerMessageStore(config, dledger, HOST)
    store.load()
    try:
        assert store.max_offset_in_queue("TopicA", 1) == 3
        got = store.get("TopicA", 1, 2, 1)
        assert got.status is GetStatus.FOUND
        assert decode_record(got.messages[0]).body == b"m2"
    finally:
        store.close()
