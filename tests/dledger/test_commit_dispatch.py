"""The commit-time dispatch of a DLedger member (dledger/commitlog_store.py): committed entries walked by the record
scan in runs give the ConsumeQueues, queue offsets and IndexFile bytes that dispatching each entry on the general
path gives, for logs mixing plain records, empty entries, transaction halves and rollbacks, delayed messages and
non-ASCII keys, across data segments, with an uncommitted tail left alone. Under ``ROCKETRIO_PURE_PYTHON=1`` the
scan is the Python twin. A ConsumeQueue file that cannot be made stalls the dispatch, retried, not the member."""

from __future__ import annotations

import random
import shutil
from pathlib import Path

import pytest
import trio
import trio.testing

from dledger.commitlog_store import DISPATCH_RETRY_S, DLedgerMessageStore
from dledger.config import DLedgerConfig
from dledger.entry import HEADER_SIZE
from dledger.file_store import FileLedger
from remoting.codec.message import MessageRecord, encode_record
from store.results import PutStatus
from tests.dledger.test_store_append import _message, _writable_leader
from tests.store.store_helpers import no_descriptor_left, small_config

HOST = bytes([127, 0, 0, 1, 0, 0, 0x2A, 0x9F])
TS = 1_700_000_000_000


def _config(root: Path) -> DLedgerConfig:
    return DLedgerConfig(group="g", self_id="n0", peers="n0-127.0.0.1:1", store_base_dir=str(root),
                         mapped_file_size_for_entry_data=4096)  # fmt: skip


def _messages(rng: random.Random, n: int) -> list[MessageRecord | None]:
    out: list[MessageRecord | None] = []
    for i in range(n):
        kind = rng.choice(["plain"] * 6 + ["empty", "half", "rollback", "delayed", "non-ascii"])
        if kind == "empty":
            out.append(None)
            continue
        props = f"TAGS\x01t{rng.randrange(3)}\x02KEYS\x01k{i} k{rng.randrange(4)}\x02UNIQ_KEY\x01U{i:08d}"
        topic, flag = rng.choice(["TopicA", "TopicB"]), 0
        if kind == "half":
            flag = 0x4
        elif kind == "rollback":
            flag = 0xC
        elif kind == "delayed":
            topic, props = "SCHEDULE_TOPIC_XXXX", props + "\x02DELAY\x013"
        elif kind == "non-ascii":
            props += "\x02KEYS\x01键"
        queue_id = 2 if topic == "SCHEDULE_TOPIC_XXXX" else rng.randrange(2)
        out.append(MessageRecord(topic, bytes(rng.randrange(40)), queue_id=queue_id, properties=props,
                                 sys_flag=flag, born_host=HOST, store_host=HOST))  # fmt: skip
    return out


def _write_log(root: Path, msgs: list[MessageRecord | None], committed: int) -> None:
    ledger = FileLedger(_config(root))
    ledger.load()
    offsets: dict[tuple[str, int], int] = {}
    for i, msg in enumerate(msgs):
        if msg is None:
            ledger.append_as_leader(1, [(0, lambda _pos: b"")])
            continue
        key = (msg.topic, msg.queue_id)
        counted = msg.sys_flag & 0xC not in (0x4, 0xC)
        qoff = offsets.get(key, 0) if counted else 0
        if counted:
            offsets[key] = qoff + 1
        size = len(encode_record(msg, qoff, 0, TS + i // 3))
        ledger.append_as_leader(1, [(size, lambda pos, m=msg, q=qoff, t=TS + i // 3: encode_record(
            m, q, pos + HEADER_SIZE, t))])  # fmt: skip
    ledger.set_committed(committed)
    ledger.persist_checkpoint()
    ledger.flush_all()
    ledger.close()


class _EntryByEntry(DLedgerMessageStore):
    """The reference: each committed entry on the general path."""

    def _dispatch_committed(self) -> None:
        while self.dispatched_index < self.ledger.committed_index:
            assert self._dispatch_general(self.dispatched_index + 1)
            self.dispatched_index += 1


def _dispatched(store: DLedgerMessageStore) -> tuple[object, ...]:
    """What the dispatch of ``store``'s committed entries left: the ConsumeQueues, the queue offsets, the dispatched
    index, the last store time, and every arrival announced (what wakes held pulls)."""
    arrivals: list[tuple[object, ...]] = []
    store.arrival_listener = lambda *arrival: arrivals.append(arrival)
    store.load()
    try:
        queues = {key: [cq.entry(i) for i in range(cq.min_offset, cq.max_offset)]
                  for key, cq in sorted(store.consume_queues.items())}  # fmt: skip
        return (queues, dict(store.queue_offsets), store.dispatched_index, store.commitlog.last_store_timestamp,
                arrivals)  # fmt: skip
    finally:
        store.close()
        store.ledger.close()


def _index_bytes(root: Path) -> list[bytes]:
    return [p.read_bytes() for p in sorted((root / "index").iterdir())]


@pytest.mark.parametrize("seed", range(12))
def test_the_scanned_dispatch_equals_the_entry_by_entry_one(tmp_path: Path, seed: int) -> None:
    rng = random.Random(seed)
    msgs = _messages(rng, rng.randrange(20, 120))
    committed = len(msgs) - 1 - rng.randrange(0, 5)
    _write_log(tmp_path / "a", msgs, committed)
    shutil.copytree(tmp_path / "a", tmp_path / "b")
    scanned = _dispatched(DLedgerMessageStore(small_config(tmp_path / "a"), _config(tmp_path / "a"), HOST))
    general = _dispatched(_EntryByEntry(small_config(tmp_path / "b"), _config(tmp_path / "b"), HOST))
    assert scanned == general
    assert scanned[2] == committed
    assert len(scanned[4]) > 10  # type: ignore[arg-type]
    assert _index_bytes(tmp_path / "a") == _index_bytes(tmp_path / "b")


def test_committed_bytes_not_yet_dispatched_are_the_dispatch_behind_bytes(tmp_path: Path) -> None:
    """``dispatchBehindBytes`` is the committed end less where the dispatch stands (DLedgerCommitLog's committed
    position less ``reputFromOffset``): entries committed since the last dispatch pass (a follower's, until its next
    one) count, the uncommitted tail does not; the CommitLog's end (``max_offset``) is the committed one, its
    ``write_end`` past the tail."""
    msgs = _messages(random.Random(7), 30)
    _write_log(tmp_path, msgs, 19)
    store = DLedgerMessageStore(small_config(tmp_path), _config(tmp_path), HOST)
    store.load()
    try:
        ledger = store.ledger
        dispatched_end = ledger.committed_pos
        assert store.dispatched_index == 19 and store.dispatch_behind_bytes() == 0
        assert store.commitlog.max_offset == dispatched_end < store.commitlog.write_end == ledger.write_pos
        ledger.set_committed(25)  # committed, not dispatched yet
        assert store.commitlog.max_offset == ledger.committed_pos
        assert store.dispatch_behind_bytes() == ledger.committed_pos - dispatched_end > 0
        store._dispatch_committed()
        assert store.dispatched_index == 25 and store.dispatch_behind_bytes() == 0
    finally:
        store.close()
        store.ledger.close()


async def test_a_consume_queue_file_that_cannot_be_made_stalls_the_dispatch_not_the_leader(
    tmp_path: Path, autojump_clock: trio.testing.MockClock
) -> None:
    """A committed entry whose ConsumeQueue file cannot be made (EMFILE here, ENOSPC alike) is acknowledged (the
    quorum has it, as DLedgerCommitLog answers) but not dispatched yet; the leader keeps running and tries again
    every DISPATCH_RETRY_S (RocketMQ's dispatcher retries the entry: ConsumeQueue.putMessagePositionInfoWrapper), so
    once the file can be made the queue holds every acknowledged message, in order, with no hole. The OSError used
    to escape the commit listener and end the DLedger server and the store with it."""
    async with _writable_leader(tmp_path) as store:  # 8 entries a ConsumeQueue file (small_config)
        for i in range(8):
            assert (await store.put(_message(body=b"m%d" % i))).status is PutStatus.PUT_OK
        cq = store.consume_queue("TopicA", 1)
        with no_descriptor_left():
            stalled = await store.put(_message(body=b"m8"))  # its entry is the first of the queue's second file
            await trio.sleep(3 * DISPATCH_RETRY_S)  # retried, still failing
            assert stalled.status is PutStatus.PUT_OK and stalled.append.queue_offset == 8
            assert cq.max_offset == 8 and store.dispatched_index < store.ledger.committed_index
        await trio.sleep(DISPATCH_RETRY_S)  # the retry, no new commit needed
        assert cq.max_offset == 9 and store.dispatched_index == store.ledger.committed_index
        later = await store.put(_message(body=b"m9"))
        assert later.status is PutStatus.PUT_OK and later.append.queue_offset == 9 and cq.max_offset == 10
        entries = [cq.entry(i) for i in range(10)]
        assert [e[0] for e in entries if e is not None] == sorted({e[0] for e in entries if e is not None})
        assert all(e is not None and e[1] > 0 for e in entries), entries
        assert store.writable and store.server.running
