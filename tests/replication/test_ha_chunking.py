"""Deterministic chunking of the HA transfer: the master's CommitLog (records of many sizes and kinds across several
segments) reaches a slave in frames cut at every possible byte position, over a byte stream itself cut at random
(seeded) places. After every frame the slave has dispatched exactly the records it holds whole; at the end its
CommitLog, ConsumeQueue and IndexFile contents equal the master's."""

from __future__ import annotations

import random
from collections.abc import Iterator
from pathlib import Path

import attrs

from remoting.codec.message import SYSFLAG_TRANSACTION_PREPARED
from remoting.codec.message_properties import encode_properties
from store.ha.frames import FrameReader, encode_frame
from store.message_store import MessageStore
from store.store_config import BrokerRole
from tests.replication.ha_helpers import ha_store, written_segments
from tests.store.store_helpers import files_of, message

SEED = 20240611
#: Frame size of every replay but the first frame of each segment, which is 1..STRIDE bytes: over STRIDE replays
#: every byte position of the log is a frame boundary once.
STRIDE = 53


def _fill_master(master: MessageStore, rng: random.Random) -> None:
    """About three 4 KiB segments of records: plain messages on three queues and two topics, tags and keys (some with
    a UNIQ_KEY, some not ASCII: the slave's general path beside its runs), a batch, a delay-level message, a prepared
    transaction message (no ConsumeQueue entry)."""
    n = 0
    while master.commitlog.max_offset < 11_000:
        kind = n % 9
        body = bytes(rng.randrange(256) for _ in range(rng.randrange(1, 400)))
        if kind == 4:
            master.append_batch([message(body=body[:30], queue_id=1, keys=f"b{n}-{i}") for i in range(3)])
        elif kind == 6:
            props = encode_properties({"DELAY": "3", "REAL_TOPIC": "TopicTest", "REAL_QID": "0"})
            master.append(attrs.evolve(message(topic="SCHEDULE_TOPIC_XXXX", body=body, queue_id=2), properties=props))
        elif kind == 7:
            master.append(message(body=body, queue_id=0, sys_flag=SYSFLAG_TRANSACTION_PREPARED))
        elif kind == 8:
            props = encode_properties({"TAGS": "标签", "KEYS": f"ключ{n} k{n}", "UNIQ_KEY": f"7F00000100{n:030X}"})
            master.append(attrs.evolve(message(topic="Other", body=body, queue_id=n % 3), properties=props))
        elif kind == 2:
            props = encode_properties({"TAGS": "t2", "KEYS": f"a{n}  b{n}", "UNIQ_KEY": f"7F00000100{n:030X}"})
            master.append(attrs.evolve(message(topic="Other", body=body, queue_id=n % 3), properties=props))
        else:
            topic = "TopicTest" if kind % 2 else "Other"
            master.append(message(topic=topic, body=body, queue_id=n % 3, tags=f"t{n % 4}", keys=f"k{n}"))
        n += 1


def _record_ends(master: MessageStore) -> list[int]:
    """The offset after each record (and after each segment's blank), in log order."""
    return [end for end, _meta in master.commitlog.scan(master.commitlog.min_offset, check_crc=True)]


def _frames(master: MessageStore, first: int) -> Iterator[tuple[int, bytes]]:
    """The master's frames: per segment, a first frame of ``first`` bytes, then STRIDE-byte frames."""
    for mf in master.commitlog.queue.files:
        data = bytes(mf.view[: mf.wrote_position])
        pos, size = 0, first
        while pos < len(data):
            yield mf.file_from_offset + pos, data[pos : pos + size]
            pos += size
            size = STRIDE


def _cq_entries(store: MessageStore) -> dict[tuple[str, int], list[object]]:
    return {
        key: [cq.entry(i) for i in range(cq.min_offset, cq.max_offset)]
        for key, cq in sorted(store.consume_queues.items())
        if cq.max_offset
    }


async def test_frames_cut_at_every_byte_position_give_the_master_s_files(tmp_path: Path) -> None:
    rng = random.Random(SEED)
    master = ha_store(tmp_path / "master", BrokerRole.ASYNC_MASTER)
    _fill_master(master, rng)
    master.flush_all_blocking()
    ends = _record_ends(master)
    assert len(master.commitlog.queue.files) >= 3 and ends[-1] == master.commitlog.max_offset
    expected_queues = _cq_entries(master)
    assert files_of(master.root / "index") and len(expected_queues) >= 6
    for replay in range(STRIDE):
        slave = ha_store(tmp_path / f"slave{replay}", BrokerRole.SLAVE)
        assert slave.replica is not None
        stream = b"".join(encode_frame(offset, body) for offset, body in _frames(master, replay + 1))
        reader = FrameReader()
        pos = 0
        while pos < len(stream):
            cut = rng.randrange(1, 200)
            for frame in reader.feed(stream[pos : pos + cut]):
                slave.replica.append(frame.offset, frame.body)
                whole = [end for end in ends if end <= slave.commitlog.max_offset]
                assert slave.replica.dispatched == (whole[-1] if whole else 0), (replay, frame.offset)
            pos += cut
        assert slave.replica.stalled is None
        assert _cq_entries(slave) == expected_queues, replay
        slave.flush_all_blocking()
        assert written_segments(slave.root) == written_segments(master.root), replay
        assert files_of(slave.root / "consumequeue") == files_of(master.root / "consumequeue"), replay
        assert sorted(files_of(slave.root / "index").values()) == sorted(files_of(master.root / "index").values())
        slave.close()
    master.close()


async def test_the_slave_calls_the_arrival_listener_for_the_queues_a_pull_waits_on(tmp_path: Path) -> None:
    """Whichever path dispatched a record (a run or the general path), the listener hears of it, with its queue
    offset, tags code and properties, exactly when the store's arrival interest names its queue."""
    master = ha_store(tmp_path / "master", BrokerRole.ASYNC_MASTER)
    _fill_master(master, random.Random(SEED))
    master.flush_all_blocking()
    wanted = {("TopicTest", 1), ("Other", 2), ("SCHEDULE_TOPIC_XXXX", 2)}
    expected = []
    for _end, meta in master.commitlog.scan(master.commitlog.min_offset, check_crc=True):
        if meta is None:  # a segment's blank
            continue
        cq = master.consume_queues.get((meta.topic, meta.queue_id))
        entry = cq.entry(meta.queue_offset) if cq is not None else None
        if (meta.topic, meta.queue_id) in wanted and entry is not None and entry[0] == meta.phy_offset:
            expected.append((meta.topic, meta.queue_id, meta.queue_offset, entry[2], meta.properties.decode()))
    heard: list[tuple[str, int, int, int, str]] = []
    asked: set[tuple[str, int]] = set()

    def interest(topic: str, queue_id: int) -> bool:
        asked.add((topic, queue_id))
        return (topic, queue_id) in wanted

    slave = ha_store(tmp_path / "slave", BrokerRole.SLAVE)
    assert slave.replica is not None
    slave.arrival_listener = lambda *args: heard.append(args) if args[:2] in wanted else None
    slave.arrival_interest = interest
    for offset, body in _frames(master, 300):
        slave.replica.append(offset, body)
    assert slave.replica.dispatched == master.commitlog.max_offset
    assert heard == expected and len({h[:2] for h in heard}) == 3
    assert asked - wanted  # runs of other queues were asked about and left alone
    slave.close()
    master.close()
