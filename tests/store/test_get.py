"""MessageStore.get statuses and limits (docs/protocol.md#79-pull-checks-and-results,
docs/protocol.md#710-pull-batch-limits), lookups by offset, key and time."""

from __future__ import annotations

import itertools
import tempfile
from pathlib import Path

import attrs
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from broker.broker_config import load_broker_config
from broker.context import store_config_of
from remoting.codec.message import decode_record
from remoting.codec.message_properties import java_string_hash
from store.errors import MessageIllegalError
from store.get_message import MAX_SCAN_ENTRIES
from store.mapped_file import destroy_segments
from store.message_store import MessageStore
from store.results import GetStatus
from tests.store.store_helpers import STORE_HOST, FakeClock, message, open_store


def test_unknown_queue_empty_queue_and_offset_statuses(tmp_path: Path) -> None:
    store = open_store(tmp_path)
    # Java's findConsumeQueue makes a queue on first look-up: a never-written one is empty, not unknown.
    r = store.get("Nope", 0, 5, 32)
    assert (r.status, r.next_begin_offset, r.min_offset, r.max_offset) == (GetStatus.NO_MESSAGE_IN_QUEUE, 0, 0, 0)
    for _ in range(3):
        store.append(message())
    r = store.get("TopicTest", 0, 3, 32)
    assert (r.status, r.next_begin_offset) == (GetStatus.OFFSET_OVERFLOW_ONE, 3)
    r = store.get("TopicTest", 0, 9, 32)
    # RocketMQ 4.9.4 on (DefaultMessageStore.getMessage): the queue's end, even when its min offset is 0; earlier
    # releases sent such a consumer back to 0, to consume the whole queue again.
    assert (r.status, r.next_begin_offset) == (GetStatus.OFFSET_OVERFLOW_BADLY, 3)
    r = store.get("TopicTest", 0, 1, 32)
    assert (r.status, r.next_begin_offset, r.message_count) == (GetStatus.FOUND, 3, 2)
    assert [decode_record(m).queue_offset for m in r.messages] == [1, 2]
    store.close()


def test_tag_filter_skips_entries_and_reports_no_matched_message(tmp_path: Path) -> None:
    store = open_store(tmp_path)
    for tag in ["A", "B", "A", "B"]:
        store.append(message(tags=tag))
    code_b = java_string_hash("B")
    r = store.get("TopicTest", 0, 0, 32, tag_filter=lambda code: code == code_b)
    assert r.status is GetStatus.FOUND
    assert r.queue_offsets == [1, 3]
    assert r.next_begin_offset == 4
    r = store.get("TopicTest", 0, 0, 32, tag_filter=lambda code: False)
    assert (r.status, r.next_begin_offset) == (GetStatus.NO_MATCHED_MESSAGE, 4)
    store.close()


def test_max_msgs_and_max_bytes_limit_a_pull_but_the_first_message_always_comes(tmp_path: Path) -> None:
    store = open_store(tmp_path, mapped_file_size_consume_queue=100 * 20)
    for _ in range(10):
        store.append(message(body=bytes(200)))
    assert store.get("TopicTest", 0, 0, 4).message_count == 4
    one = store.get("TopicTest", 0, 0, 32, max_bytes=10)
    assert (one.message_count, one.next_begin_offset) == (1, 1)
    size = one.buffer_total_size
    assert store.get("TopicTest", 0, 0, 32, max_bytes=3 * size).message_count == 3
    store.close()


def test_in_memory_pulls_stop_at_32_unless_max_transfer_count_says_otherwise(tmp_path: Path) -> None:
    default = open_store(tmp_path / "default", mapped_file_size_consume_queue=300 * 20)
    larger = open_store(tmp_path / "larger", mapped_file_size_consume_queue=300 * 20,
                        max_transfer_count_on_message_in_memory=100)  # fmt: skip
    for store in (default, larger):
        for _ in range(150):
            store.append(message())
    assert default.get("TopicTest", 0, 0, 200).message_count == 32
    wide = larger.get("TopicTest", 0, 0, 200)
    assert (wide.message_count, wide.next_begin_offset) == (100, 100)
    assert larger.get("TopicTest", 0, 0, 40).message_count == 40
    default.close()
    larger.close()


def test_pull_stops_at_the_consume_queue_segment_end(tmp_path: Path) -> None:
    store = open_store(tmp_path)  # 8 entries per ConsumeQueue file
    for _ in range(12):
        store.append(message())
    r = store.get("TopicTest", 0, 5, 32)
    assert r.queue_offsets == [5, 6, 7]
    assert store.get("TopicTest", 0, 8, 32).queue_offsets == [8, 9, 10, 11]
    store.close()


def test_look_message_by_offset_and_query_by_key(tmp_path: Path) -> None:
    store = open_store(tmp_path)
    a = store.append(message(keys="order-1 order-2", body=b"first"))
    store.append(message(keys="order-3", body=b"second"))
    record = store.look_message_by_offset(a.phy_offset)
    assert record is not None and decode_record(record).body == b"first"
    assert store.look_message_by_offset(a.phy_offset + 1) is None
    found = store.query_by_key("TopicTest", "order-2", 32, 0, 2**62)
    assert [decode_record(r).body for r in found] == [b"first"]
    assert store.query_by_key("TopicTest", "order-9", 32, 0, 2**62) == []
    assert a.msg_id == "0A000009" + "00002A9F" + f"{a.phy_offset:016X}"
    store.close()


def test_offset_by_time_picks_exact_then_closer_neighbour(tmp_path: Path) -> None:
    clock = FakeClock(1000)
    store = open_store(tmp_path, now_ms=clock, mapped_file_size_consume_queue=100 * 20)
    times = []
    for _ in range(5):
        clock.now += 99  # store times 1100, 1200, ...
        times.append(store.append(message()).store_timestamp)
    assert times == [1100, 1200, 1300, 1400, 1500]
    assert store.offset_in_queue_by_time("TopicTest", 0, 1300) == 2
    assert store.offset_in_queue_by_time("TopicTest", 0, 1320) == 2
    assert store.offset_in_queue_by_time("TopicTest", 0, 1390) == 3
    assert store.offset_in_queue_by_time("TopicTest", 0, 0) == 0
    assert store.offset_in_queue_by_time("TopicTest", 0, 99_999) == 4
    assert store.offset_in_queue_by_time("Nope", 0, 1) == 0
    assert store.earliest_message_time("TopicTest", 0) == 1100
    assert store.message_store_timestamp("TopicTest", 0, 4) == 1500
    store.close()


def test_offset_by_time_after_commitlog_retention_reads_a_logarithmic_number_of_records(tmp_path: Path) -> None:
    """CleanCommitLogService deletes the CommitLog's first segments before CleanConsumeQueueService moves the queues'
    minimums up (deleteConsumeQueueFilesInterval apart per queue): a search meanwhile must find the first entry whose
    message is left by bisection, not by reading the gone ones one by one on the event loop."""
    clock = FakeClock(1_000_000)
    store = open_store(
        tmp_path,
        now_ms=clock,
        mapped_file_size_commit_log=64 * 1024,
        mapped_file_size_consume_queue=1024 * 20,
    )
    count = 6000
    for _ in range(count):
        clock.now += 1
        store.append(message(body=bytes(64)))
    store.flush_all_blocking()
    taken = store.commitlog.queue.take_first(len(store.commitlog.queue.files) - 2)
    destroy_segments(taken)
    cq = store.consume_queue("TopicTest", 0)
    assert cq is not None and cq.min_offset == 0  # not cleaned yet
    min_phy = store.commitlog.min_offset
    first_live = next(i for i in range(count) if (e := cq.entry(i)) is not None and e[0] >= min_phy)
    assert first_live > 4000
    reads = [0]

    def store_time(phy: int, size: int) -> int | None:
        reads[0] += 1
        return store.commitlog.store_timestamp_at(phy, size)

    times = [store.message_store_timestamp("TopicTest", 0, i) for i in (first_live, first_live + 1, count - 1)]
    assert times[0] is not None and times[1] is not None and times[2] is not None
    for timestamp, expected in ((0, first_live), (times[1], first_live + 1), (times[2] + 10, count - 1)):
        for boundary in (None, "LOWER"):
            reads[0] = 0
            found = cq.offset_by_time(timestamp, store_time, boundary)
            assert found == (count if boundary and timestamp > times[2] else expected)
            assert reads[0] <= 40, (boundary, timestamp, reads[0])
    store.close()


def test_upper_before_every_retained_message_is_the_entry_before_the_first_left(tmp_path: Path) -> None:
    """Between CleanCommitLogService and CleanConsumeQueueService's next pass the queue's entries below the CommitLog's
    minimum are gone; RocketMQ 5's UPPER search moves right past them, keeping the last as its left neighbour
    (store/.../ConsumeQueue.java binarySearchInQueueByTime), so UPPER before every retained message answers the entry
    just before the first one left, within the queue's min and max (ConsumeQueueStore.getOffsetInQueueByTime): not
    the queue's min offset, far below. With nothing gone it is the min offset."""
    clock = FakeClock(1_000_000)
    store = open_store(
        tmp_path, now_ms=clock, mapped_file_size_commit_log=64 * 1024, mapped_file_size_consume_queue=1024 * 20
    )
    count = 3000
    for _ in range(count):
        clock.now += 1
        store.append(message(body=bytes(64)))
    store.flush_all_blocking()
    first = store.message_store_timestamp("TopicTest", 0, 0)
    assert first is not None
    assert store.offset_in_queue_by_time("TopicTest", 0, first - 1, "UPPER") == 0
    destroy_segments(store.commitlog.queue.take_first(len(store.commitlog.queue.files) - 2))
    cq = store.consume_queue("TopicTest", 0)
    assert cq is not None and cq.min_offset == 0  # not cleaned yet
    min_phy = store.commitlog.min_offset
    first_live = next(i for i in range(count) if (e := cq.entry(i)) is not None and e[0] >= min_phy)
    assert first_live > 1000
    live_time = store.message_store_timestamp("TopicTest", 0, first_live)
    assert live_time is not None
    assert store.offset_in_queue_by_time("TopicTest", 0, live_time - 1, "UPPER") == first_live - 1
    assert store.offset_in_queue_by_time("TopicTest", 0, live_time - 1, "LOWER") == first_live
    store.close()


@settings(max_examples=60, deadline=None)
@given(
    st.lists(st.integers(0, 3), min_size=1, max_size=30), st.integers(995, 1025), st.sampled_from(["LOWER", "upper"])
)
def test_rocketmq5_boundaries_give_the_first_at_or_after_and_the_last_at_or_before(
    steps: list[int], timestamp: int, boundary: str
) -> None:
    """Store times with runs of equal milliseconds across consume-queue segments of 4 entries; RocketMQ 5's
    boundaryType answers against a scan of every entry."""
    now = [1000]
    with tempfile.TemporaryDirectory() as root:
        store = open_store(Path(root), now_ms=lambda: now[0], mapped_file_size_consume_queue=4 * 20)
        times = []
        for step in steps:
            now[0] += step
            times.append(store.append(message()).store_timestamp)
        found = store.offset_in_queue_by_time("TopicTest", 0, timestamp, boundary)
        if boundary == "LOWER":
            assert found == next((i for i, t in enumerate(times) if t >= timestamp), len(times))
        else:
            assert found == max((i for i, t in enumerate(times) if t <= timestamp), default=0)
        store.close()


async def test_rocketmq5_boundaries_are_kept_within_the_queues_min_and_max_offsets(tmp_path: Path) -> None:
    """RocketMQ 5 keeps a boundary search's answer within the queue's min and max offsets (ConsumeQueueStore's
    getOffsetInQueueByTime): UPPER before every retained message is the min offset, not 0; on a queue whose every
    message retention deleted LOWER and UPPER are its max offset (its last entry's message gone reads as stored
    before any time), not 0, which pointed a reader below the min offset."""
    clock = FakeClock(1_000_000)
    store = open_store(
        tmp_path,
        now_ms=clock,
        disk_usage_ratio=lambda _path: 0.87,  # above diskSpaceCleanForciblyRatio: every segment but the newest goes
        delete_commit_log_files_interval=0,
        delete_consume_queue_files_interval=0,
    )
    for queue_id, count in ((0, 60), (1, 60), (0, 30)):
        for _ in range(count):
            clock.now += 1
            store.append(message(body=bytes(200), queue_id=queue_id))
    for _ in range(3):
        clock.now += 1
        store.append(message(body=bytes(200), topic="Other"))
    store.flush_all_blocking()
    while await store.retention.check_once():
        pass
    lo0 = store.min_offset_in_queue("TopicTest", 0)
    assert 60 < lo0 < 90 and store.max_offset_in_queue("TopicTest", 0) == 90
    first = store.message_store_timestamp("TopicTest", 0, lo0)
    assert first is not None
    assert store.offset_in_queue_by_time("TopicTest", 0, first - 1, "UPPER") == lo0
    assert store.offset_in_queue_by_time("TopicTest", 0, first - 1, "LOWER") == lo0
    assert store.min_offset_in_queue("TopicTest", 1) == store.max_offset_in_queue("TopicTest", 1) == 60
    for boundary in ("LOWER", "UPPER"):
        for timestamp in (0, first, clock.now + 1):
            assert store.offset_in_queue_by_time("TopicTest", 1, timestamp, boundary) == 60, (boundary, timestamp)
    store.close()


def test_transaction_half_and_rollback_records_get_no_queue_entry(tmp_path: Path) -> None:
    store = open_store(tmp_path)
    half = store.append(message(sys_flag=0x4))
    store.append(message(sys_flag=0xC))
    commit = store.append(message(sys_flag=0x8))
    assert half.queue_offset == 0 and commit.queue_offset == 0
    assert store.max_offset_in_queue("TopicTest", 0) == 1
    store.close()


def test_delayed_messages_carry_their_delivery_time_as_tags_code(tmp_path: Path) -> None:
    clock = FakeClock(5000)
    store = open_store(tmp_path, now_ms=clock)
    msg = attrs.evolve(message(topic="SCHEDULE_TOPIC_XXXX", queue_id=2), properties="DELAY\x013")
    r = store.append(msg)
    entry = store.consume_queue("SCHEDULE_TOPIC_XXXX", 2).entry(0)
    assert entry is not None and entry[2] == r.store_timestamp + 10_000
    store.close()


def test_arrival_listener_sees_every_dispatched_message(tmp_path: Path) -> None:
    store = open_store(tmp_path)
    seen: list[tuple[str, int, int, int, str]] = []
    store.arrival_listener = lambda *args: seen.append(args)
    store.append(message(tags="TagA"))
    store.append_batch([message(queue_id=1), message(queue_id=1)])
    assert [(s[0], s[1], s[2], s[3]) for s in seen] == [
        ("TopicTest", 0, 0, java_string_hash("TagA")),
        ("TopicTest", 1, 0, 0),
        ("TopicTest", 1, 1, 0),
    ]
    assert "TAGS\x01TagA" in seen[0][4]
    store.close()


@settings(max_examples=40, deadline=None)
@given(
    st.lists(st.tuples(st.integers(0, 1), st.sampled_from(["A", "B"]), st.integers(1, 300)), min_size=1, max_size=40),
    st.integers(0, 40),
    st.integers(1, 40),
    st.sampled_from([None, "A"]),
    st.booleans(),
)
def test_a_get_returns_its_records_as_runs_of_adjacent_records(
    appends: list[tuple[int, str, int]], start: int, max_msgs: int, tag: str | None, by_property: bool
) -> None:
    """Records of one queue that lie back to back in a segment share a run; every other one starts a run (another
    queue's record between them, a filtered one, a segment roll); the runs hold exactly the records, in order."""
    with tempfile.TemporaryDirectory() as root:
        store = open_store(Path(root), mapped_file_size_consume_queue=64 * 20)
        for queue_id, tags, size in appends:
            store.append(message(body=b"b" * size, queue_id=queue_id, tags=tags))
        tag_filter = property_filter = None
        if tag is not None and by_property:
            property_filter = lambda raw: b"TAGS\x01A" in bytes(raw)  # noqa: E731
        elif tag is not None:
            tag_filter = java_string_hash(tag).__eq__
        r = store.get("TopicTest", 0, start, max_msgs, tag_filter=tag_filter, property_filter=property_filter)
        cq = store.consume_queues.get(("TopicTest", 0))
        entries = [cq.entry(q) for q in r.queue_offsets] if cq is not None else []
        expected = [store.commitlog.read(phy, size) for phy, size, _tags in entries]
        assert [bytes(m) for m in r.messages] == [bytes(m) for m in expected]
        assert r.sizes == [size for _phy, size, _tags in entries]
        assert b"".join(r.runs) == b"".join(expected)
        breaks = sum(1 for a, b in itertools.pairwise(entries) if a[0] + a[1] != b[0] or b[0] % 4096 == 0)
        assert len(r.runs) == (breaks + 1 if entries else 0)
        assert (r.message_count, r.buffer_total_size) == (len(entries), sum(r.sizes))
        store.close()


def test_transfer_limits_set_in_broker_conf_bound_pulls_in_memory_and_on_disk(tmp_path: Path) -> None:
    """``maxTransferBytesOnMessageInMemory``, ``maxTransferCountOnMessageInDisk`` and
    ``maxTransferBytesOnMessageInDisk`` are MessageStoreConfig settings a broker.conf may set;
    DefaultMessageStore.isTheBatchFull (store/src/main/java/org/apache/rocketmq/store/DefaultMessageStore.java) bounds
    every pull by them. Found by a review: the broker did not know them (logged as unknown keys) and pulled
    32 messages / 256 KiB in memory and 8 messages / 64 KiB on disk whatever they said."""

    def pull(name: str, settings: str) -> int:
        conf = tmp_path / f"{name}.conf"
        conf.write_text(
            f"storePathRootDir={tmp_path / name}\nmappedFileSizeCommitLog=1048576\nmappedFileSizeConsumeQueue=6000\n"
            + settings
        )
        config, unknown = load_broker_config(conf)
        assert unknown == []
        store = MessageStore(store_config_of(config), store_host=STORE_HOST)
        store.load()
        for _ in range(40):
            store.append(message(body=bytes(1000)))
        count = store.get("TopicTest", 0, 0, 64).message_count
        store.close()
        return count

    # A record here is about 1.1 KiB: 3 fit in 4096 bytes, 2 in 3000.
    assert pull("memory", "maxTransferBytesOnMessageInMemory=4096\n") == 3
    on_disk = "accessMessageInMemoryMaxRatio=0\n"  # everything behind the CommitLog head is "on disk"
    assert (
        pull("disk_count", on_disk + "maxTransferCountOnMessageInDisk=20\nmaxTransferBytesOnMessageInDisk=1048576\n")
        == 20
    )
    assert pull("disk_bytes", on_disk + "maxTransferBytesOnMessageInDisk=3000\n") == 2


def test_one_pull_scans_at_most_max_scan_entries_whatever_it_asks(tmp_path: Path) -> None:
    """A pull asking for a whole segment's worth of messages that a filter refuses would scan that segment on the
    event loop (Java scans max(800, maxMsgNums) entries, on a pull thread): ours stops after MAX_SCAN_ENTRIES with
    NO_MATCHED_MESSAGE and the offset to go on from, and the next pull goes on. A pull of Java's largest
    pullBatchSize (1024) is not cut."""
    store = open_store(tmp_path, mapped_file_size_consume_queue=20 * 20_000)
    total = MAX_SCAN_ENTRIES + 1500
    for _ in range(total):
        store.append(message(tags="A"))
    refuse_all = lambda code: False  # noqa: E731
    first = store.get("TopicTest", 0, 0, 1_000_000, tag_filter=refuse_all)
    assert (first.status, first.next_begin_offset) == (GetStatus.NO_MATCHED_MESSAGE, MAX_SCAN_ENTRIES)
    rest = store.get("TopicTest", 0, first.next_begin_offset, 1_000_000, tag_filter=refuse_all)
    assert (rest.status, rest.next_begin_offset) == (GetStatus.NO_MATCHED_MESSAGE, total)
    batch = store.get("TopicTest", 0, 0, 1024, tag_filter=refuse_all)
    assert batch.next_begin_offset == 1024
    found = store.get("TopicTest", 0, 0, 1_000_000, property_filter=lambda props: True)
    assert (found.status, found.message_count) == (GetStatus.FOUND, 32)  # the in-memory count limit, as before
    store.close()


def test_a_put_whose_topic_cannot_name_a_queue_directory_is_refused_and_nothing_written(tmp_path: Path) -> None:
    """The queue directory is consumequeue/<topic>/<queueId>: a topic with a path in it (a group created by an admin
    request with such a name, then a send-back to its retry topic) would write outside the store. Refused as
    MESSAGE_ILLEGAL before any byte goes to the CommitLog; the store goes on."""
    store = open_store(tmp_path / "store")
    store.append(message(body=b"before"))
    end = store.max_phy_offset
    for topic in ("../../escaped", "..", "a\x00b"):
        with pytest.raises(MessageIllegalError):
            store.append(message(topic=topic))
        with pytest.raises(MessageIllegalError):
            store.append_batch([message(topic=topic), message(topic=topic)])
    assert store.max_phy_offset == end
    assert not (tmp_path / "escaped").exists()
    assert store.append(message(body=b"after")).queue_offset == 1
    store.close()
