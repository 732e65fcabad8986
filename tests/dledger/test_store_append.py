"""A DLedger leader's sends (dledger/commitlog_store.py, ``DLedgerMessageStore.append``): a refused message leaves no
entry and takes no queue offset, with the store's refusal for each kind of bad message; the next send gets the next
offset and its entry holds the record the general encoder writes."""

from __future__ import annotations

from pathlib import Path

import pytest
import trio
import trio.testing

from dledger.commitlog_store import DLedgerMessageStore
from dledger.config import DLedgerConfig
from dledger.entry import HEADER_SIZE
from remoting.codec.message import MessageRecord, encode_record
from store.errors import MessageIllegalError, PropertiesSizeExceededError
from store.results import PutStatus
from tests.dledger.ports import free_ports
from tests.store.store_helpers import small_config

HOST = bytes([127, 0, 0, 1, 0, 0, 0x2A, 0x9F])


def _message(topic: str = "TopicA", body: bytes = b"ok", properties: str = "TAGS\x01t") -> MessageRecord:
    return MessageRecord(topic, body, queue_id=1, properties=properties, born_host=HOST, store_host=HOST)


async def test_a_refused_send_leaves_no_entry_and_takes_no_queue_offset(
    tmp_path: Path, autojump_clock: trio.testing.MockClock
) -> None:
    dledger = DLedgerConfig(group="g", self_id="n0", peers=f"n0-127.0.0.1:{free_ports(1)[0]}",
                            store_base_dir=str(tmp_path), mapped_file_size_for_entry_data=4096)  # fmt: skip
    store = DLedgerMessageStore(small_config(tmp_path, max_message_size=100), dledger, HOST)
    store.load()
    async with trio.open_nursery() as nursery:
        await nursery.start(store.run)
        while not store.writable:
            await trio.sleep(0.05)
        end = store.ledger.end_index
        refusals = [
            (_message(body=bytes(101)), MessageIllegalError, "exceeds 100"),
            (_message(properties="K\x01" + "v" * 40_000), PropertiesSizeExceededError, "properties"),
            (_message(topic="T" * 128), MessageIllegalError, "topic"),
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
        nursery.cancel_scope.cancel()
