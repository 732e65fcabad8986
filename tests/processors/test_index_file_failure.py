"""An index file that cannot be made (EMFILE, ENOSPC, the index directory gone) as RocketMQ 4.9.8 meets it: the
index is built by the ReputMessageService after the put is answered (store/src/main/java/org/apache/rocketmq/store/
DefaultMessageStore.java ``doReput``, which leaves ``reputFromOffset`` on the message whose dispatch threw and tries it
again a millisecond later; IndexService.java ``getAndCreateLastIndexFile`` throws when ``new IndexFile`` does). So a
send whose keys cannot be indexed is answered SEND_OK and stored once, and its keys are indexed once a file can be
made again. Real sockets and files; the index directory is made unusable by putting a regular file in its place."""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
import trio
import trio.testing

from broker.embedded import EmbeddedCluster
from client.admin import Admin
from client.message import Message, SendStatus
from client.producer import Producer
from remoting.codec.bodies import MessageQueue
from store import message_store
from tests.store.store_helpers import message, open_store

TOPIC = "IndexFailure"
#: Seven entries a file: a few keyed messages fill one, so the next keys need a new file.
TINY_INDEX = {"max_hash_slot_num": 16, "max_index_num": 8}


@contextmanager
def index_directory_unusable(root: Path) -> Iterator[None]:
    """No index file can be made under ``root`` meanwhile: ``root/index`` is a regular file (the mapped files
    stay mapped where they were moved)."""
    index = root / "index"
    away = root / "index.away"
    shutil.move(index, away)
    index.write_text("not a directory")
    try:
        yield
    finally:
        index.unlink()
        shutil.move(away, index)


async def _found(admin: Admin, key: str) -> list[bytes]:
    return [m.body for m in await admin.query_msg_by_key(TOPIC, key)]


async def test_a_batch_whose_keys_need_an_index_file_that_cannot_be_made_is_stored_once(tmp_path: Path) -> None:
    """The batch is stored and answered SEND_OK, once, as in RocketMQ, whose index is built after the answer; ours
    raised after storing the batch, the producer got an error and sent it again: two copies."""
    async with EmbeddedCluster(tmp_path / "cluster", **TINY_INDEX) as cluster:
        root = cluster.data_dir / "broker"
        async with Admin(cluster.namesrv_addr) as admin, Producer("pg-index-failure", cluster.namesrv_addr) as p:
            await admin.create_topic(TOPIC, read_queue_nums=1, write_queue_nums=1)
            await p.send(Message(TOPIC, b"before", keys="before"))
            with index_directory_unusable(root):
                sent = await p.send_batch([Message(TOPIC, b"b%d" % i, keys=f"b{i}") for i in range(8)])
            assert [r.send_status for r in sent] == [SendStatus.SEND_OK]
            assert await admin.max_offset(MessageQueue(TOPIC, "broker-a", 0)) == 9


async def test_keys_stored_while_no_index_file_can_be_made_are_indexed_once_one_can(
    tmp_path: Path, autojump_clock: trio.testing.MockClock
) -> None:
    """RocketMQ's dispatch retries the message whose index file could not be made until one can, so its keys and
    those of the messages after it are found afterwards; ours dropped them for good."""
    async with EmbeddedCluster(tmp_path / "cluster", **TINY_INDEX) as cluster:
        root = cluster.data_dir / "broker"
        async with Admin(cluster.namesrv_addr) as admin, Producer("pg-index-failure", cluster.namesrv_addr) as p:
            await admin.create_topic(TOPIC, read_queue_nums=1, write_queue_nums=1)
            with index_directory_unusable(root):
                for i in range(6):
                    await p.send(Message(TOPIC, b"s%d" % i, keys=f"s{i}"))
                await p.send_batch([Message(TOPIC, b"b%d" % i, keys=f"b{i}") for i in range(3)])
                await trio.sleep(2)  # flushes and index reads meanwhile try the index and fail (virtual time)
            await p.send(Message(TOPIC, b"after", keys="after"))
            for key in ("s0", "s5", "b0", "b2", "after"):
                assert await _found(admin, key) == [key.encode()], key


def test_keys_not_indexed_when_the_store_crashed_are_indexed_by_the_recovery(tmp_path: Path) -> None:
    """The checkpoint never covers a message whose keys are not indexed, so a crash while no index file could be
    made leaves them to recovery, which indexes them from the CommitLog."""
    store = open_store(tmp_path, **TINY_INDEX)
    with index_directory_unusable(tmp_path):
        for i in range(6):
            store.append(message(keys=f"k{i}"))
        store.flush_all_blocking()  # a checkpoint past the messages whose keys could not be written
    store.abandon()
    store = open_store(tmp_path, **TINY_INDEX)
    try:
        for i in range(6):
            assert len(store.query_by_key("TopicTest", f"k{i}", 8, 0, 2**62)) == 1, i
    finally:
        store.close()


def test_keys_missing_for_long_are_indexed_a_bounded_run_at_a_time(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The catch-up reads the missing keys from the CommitLog on the broker's one thread, so one drain indexes at
    most ``INDEX_CATCH_UP_RECORDS`` records and the next drains go on from there (RocketMQ's ReputMessageService
    does it on a thread of its own); a long outage used to be indexed in one call, the loop stalled meanwhile in
    proportion to it (about 7 µs a message)."""
    monkeypatch.setattr(message_store, "INDEX_CATCH_UP_RECORDS", 5, raising=False)
    store = open_store(tmp_path, **TINY_INDEX)
    try:
        with index_directory_unusable(tmp_path):
            for i in range(12):
                store.append(message(keys=f"k{i}"))
            store.flush_all_blocking()
        # a query drains (a run of five records, or two): the first does not reach the last key, later ones do
        tries = [len(store.query_by_key("TopicTest", "k11", 8, 0, 2**62)) for _ in range(6)]
        assert tries[0] == 0 and tries[-1] == 1, tries
        assert [len(store.query_by_key("TopicTest", f"k{i}", 8, 0, 2**62)) for i in range(12)] == [1] * 12
    finally:
        store.close()
