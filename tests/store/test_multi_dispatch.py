"""Multi-dispatch and Light Message Queues in the store (store/multi_dispatch.py, RocketMQ 4.9.8's MultiDispatch and
ConsumeQueue.multiDispatchLmqQueue): one CommitLog record, an entry in its own queue and in each listed queue, the
offsets stamped into the stored properties; recovery (also after a kill -9 of a real process) and retention."""

from __future__ import annotations

import datetime
import os
import shutil
import signal
import subprocess
import sys
from pathlib import Path

import attrs
import pytest
import trio
import trio.testing

from dledger.commitlog_store import DLedgerMessageStore
from remoting.codec.message import MessageRecord, decode_record
from remoting.codec.message_properties import encode_properties
from remoting.codec.topics import SCHEDULE_TOPIC, TIMER_TOPIC
from store.errors import MessageIllegalError
from store.maintenance import clean_expired_consume_queues
from store.message_store import MessageStore
from store.multi_dispatch import LmqQueueNumExceededError
from store.results import GetStatus, PutStatus
from store.store_config import BrokerRole
from store.topic_cleanup import clean_unused_topics
from tests.dledger.test_store_append import HOST, _one_member, _writable_leader
from tests.store.store_helpers import FakeClock, message, open_store, small_config

LMQ = {"enable_lmq": True, "enable_multi_dispatch": True}


def _multi(queues: str, queue_id: int = 3, body: bytes = b"hello", **props: str) -> MessageRecord:
    msg = message(body=body, queue_id=queue_id, tags="TagA")
    extra = encode_properties({"INNER_MULTI_DISPATCH": queues, "WAIT": "true", **props})
    return attrs.evolve(msg, properties=msg.properties + "\x02" + extra if msg.properties else extra)


def _read(store: MessageStore, topic: str, queue_id: int = 0) -> list[tuple[bytes, dict[str, str]]]:
    result = store.get(topic, queue_id, 0, 32)
    if result.status is not GetStatus.FOUND:
        return []
    out = []
    for view in result.messages:
        ext = decode_record(view, check_crc=True)
        out.append((bytes(ext.body), dict(ext.properties)))
    return out


def test_a_record_is_stored_once_and_dispatched_to_each_lmq_queue(tmp_path: Path) -> None:
    store = open_store(tmp_path, **LMQ)
    first = store.append(_multi("%LMQ%a,%LMQ%b", body=b"one"))
    second = store.append(_multi("%LMQ%b", body=b"two"))
    end = store.max_phy_offset
    assert end == first.phy_offset + first.size + second.size  # stored once each
    assert [b for b, _ in _read(store, "TopicTest", 3)] == [b"one", b"two"]
    a, b = _read(store, "%LMQ%a"), _read(store, "%LMQ%b")
    assert [x for x, _ in a] == [b"one"] and [x for x, _ in b] == [b"one", b"two"]
    props = b[1][1]
    assert props["INNER_MULTI_DISPATCH"] == "%LMQ%b" and props["INNER_MULTI_QUEUE_OFFSET"] == "1"
    assert a[0][1]["INNER_MULTI_QUEUE_OFFSET"] == "0,0"
    assert "WAIT" not in props  # not stored, as Java's removeWaitStorePropertyString
    assert store.max_offset_in_queue("%LMQ%b", 0) == 2
    # The LMQ queue's entries point at the one record.
    assert store.get("%LMQ%a", 0, 0, 1).messages[0].tobytes() == store.get("TopicTest", 3, 0, 1).messages[0].tobytes()
    store.close()


def test_arrivals_are_announced_for_every_dispatched_queue(tmp_path: Path) -> None:
    store = open_store(tmp_path, **LMQ)
    arrived: list[tuple[str, int, int]] = []
    store.arrival_listener = lambda topic, qid, qoff, _tags, _props: arrived.append((topic, qid, qoff))
    store.append(_multi("%LMQ%a,%LMQ%b"))
    assert sorted(arrived) == [("%LMQ%a", 0, 0), ("%LMQ%b", 0, 0), ("TopicTest", 3, 0)]
    store.close()


def test_non_lmq_names_keep_the_message_queue_id_and_lmq_ids_need_enable_lmq(tmp_path: Path) -> None:
    store = open_store(tmp_path, enable_multi_dispatch=True)
    store.append(_multi("%LMQ%a,Other", queue_id=2))
    assert len(_read(store, "%LMQ%a", 2)) == 1 and len(_read(store, "Other", 2)) == 1
    assert _read(store, "%LMQ%a", 0) == []
    store.close()


def test_off_by_default_the_property_is_stored_as_sent(tmp_path: Path) -> None:
    store = open_store(tmp_path)
    store.append(_multi("%LMQ%a"))
    assert _read(store, "%LMQ%a") == []
    [(_, props)] = _read(store, "TopicTest", 3)
    assert "INNER_MULTI_QUEUE_OFFSET" not in props and props["WAIT"] == "true"
    store.close()


def test_queue_names_that_cannot_name_a_directory_are_refused(tmp_path: Path) -> None:
    store = open_store(tmp_path, **LMQ)
    end = store.max_phy_offset
    with pytest.raises(MessageIllegalError):
        store.append(_multi("%LMQ%a,../../x"))
    assert store.max_phy_offset == end and _read(store, "%LMQ%a") == []
    store.close()


def test_more_lmq_queues_than_the_limit_refuse_the_put(tmp_path: Path) -> None:
    store = open_store(tmp_path, max_lmq_consume_queue_num=1, **LMQ)
    store.append(_multi("%LMQ%a,%LMQ%b"))  # 0 queues before: stored, now 2 (Java checks before the put)
    end = store.max_phy_offset
    with pytest.raises(LmqQueueNumExceededError):
        store.append(_multi("%LMQ%c"))
    assert store.max_phy_offset == end
    store.append(message())  # a message that lists no queue is not limited
    store.close()


def test_recovery_after_a_crash_rebuilds_lmq_queues_and_their_offsets(tmp_path: Path) -> None:
    store = open_store(tmp_path, **LMQ)
    for i in range(5):
        store.append(_multi("%LMQ%a,%LMQ%b" if i % 2 else "%LMQ%a", body=f"m{i}".encode()))
    store.abandon()  # a crash: nothing flushed, no checkpoint
    shutil.rmtree(tmp_path / "consumequeue")  # the queue files lost too: everything from the CommitLog
    store = open_store(tmp_path, **LMQ)
    assert store.abnormal_recovery
    assert [b for b, _ in _read(store, "%LMQ%a")] == [f"m{i}".encode() for i in range(5)]
    assert [b for b, _ in _read(store, "%LMQ%b")] == [b"m1", b"m3"]
    store.append(_multi("%LMQ%b", body=b"next"))
    assert _read(store, "%LMQ%b")[-1][1]["INNER_MULTI_QUEUE_OFFSET"] == "2"
    store.close()


async def test_retention_destroys_expired_lmq_queues(tmp_path: Path) -> None:
    noon = int(datetime.datetime(2026, 1, 15, 12, 30).timestamp() * 1000)
    store = open_store(tmp_path, now_ms=FakeClock(noon), disk_usage_ratio=lambda _path: 0.87, **LMQ)
    store.append(_multi("%LMQ%old", body=bytes(300)))
    for _ in range(30):
        store.append(message(body=bytes(300)))
    store.flush_all_blocking()
    assert store.multi_dispatch.lmq_queue_count() == 1
    assert await store.retention.check_once() >= 1
    assert await clean_expired_consume_queues(store) == [("%LMQ%old", 0), ("TopicTest", 3)]
    assert store.multi_dispatch.lmq_queue_count() == 0
    assert not (tmp_path / "consumequeue" / "%LMQ%old").exists()
    store.close()


async def test_a_deleted_lmq_queue_stays_deleted_through_recovery_and_clean_unused_skips_lmq(
    tmp_path: Path,
) -> None:
    store = open_store(tmp_path, **LMQ)
    for i in range(3):
        store.append(_multi("%LMQ%gone,%LMQ%kept", body=f"m{i}".encode()))
    assert await clean_unused_topics(store, lambda topic: topic == "TopicTest") == []  # LMQ queues have no config
    assert await store.delete_topic("%LMQ%gone") == 1
    store.abandon()  # a crash: recovery scans every record again
    store = open_store(tmp_path, **LMQ)
    assert store.abnormal_recovery and store.recovery_start == 0
    assert _read(store, "%LMQ%gone") == [] and len(_read(store, "%LMQ%kept")) == 3
    store.close()


CHILD = """
import sys, time, attrs
from pathlib import Path
from remoting.codec.message_properties import encode_properties
from remoting.codec.topics import SCHEDULE_TOPIC, TIMER_TOPIC
from store.message_store import MessageStore
from tests.store.store_helpers import STORE_HOST, message, small_config
store = MessageStore(small_config(Path(sys.argv[1]), enable_lmq=True, enable_multi_dispatch=True,
                                  mapped_file_size_commit_log=64 * 1024), store_host=STORE_HOST)
store.load()
for i in range(40):
    msg = message(body=f"m{i}".encode(), queue_id=i % 2)
    extra = encode_properties({"INNER_MULTI_DISPATCH": "%LMQ%k" if i % 4 else "%LMQ%k,%LMQ%four"})
    store.append(attrs.evolve(msg, properties=msg.properties + chr(2) + extra))
print("stored", flush=True)
time.sleep(600)
"""


def test_kill_9_of_a_real_process_then_recovery_rebuilds_the_lmq_queues(tmp_path: Path) -> None:
    root = tmp_path / "store"
    child = subprocess.Popen([sys.executable, "-c", CHILD, str(root)], stdout=subprocess.PIPE,
                             cwd=Path(__file__).resolve().parents[2], text=True)  # fmt: skip
    try:
        assert child.stdout is not None and child.stdout.readline() == "stored\n"
    finally:
        os.kill(child.pid, signal.SIGKILL)
        child.wait()
    assert (root / "abort").exists()
    store = open_store(root, mapped_file_size_commit_log=64 * 1024, **LMQ)
    assert store.abnormal_recovery
    assert [b for b, _ in _read(store, "%LMQ%k")][:3] == [b"m0", b"m1", b"m2"]
    assert store.max_offset_in_queue("%LMQ%k", 0) == 40
    assert store.max_offset_in_queue("%LMQ%four", 0) == 10
    store.append(_multi("%LMQ%four"))
    assert store.max_offset_in_queue("%LMQ%four", 0) == 11
    store.close()


def test_a_slave_fed_the_master_bytes_builds_the_same_lmq_queues(tmp_path: Path) -> None:
    master = open_store(tmp_path / "master", **LMQ)
    for i in range(6):
        master.append(_multi("%LMQ%a,%LMQ%b" if i % 2 else "%LMQ%a", body=f"m{i}".encode(), queue_id=i % 2))
    slave = open_store(tmp_path / "slave", broker_role=BrokerRole.SLAVE, **LMQ)
    assert slave.replica is not None
    slave.replica.append(0, bytes(master.commitlog.read(0, master.commitlog.max_offset) or b""))
    for topic, queue_id in [("%LMQ%a", 0), ("%LMQ%b", 0), ("TopicTest", 0), ("TopicTest", 1)]:
        mine, theirs = slave.consume_queue(topic, queue_id), master.consume_queue(topic, queue_id)
        assert mine.max_offset == theirs.max_offset > 0
        assert [mine.entry(i) for i in range(mine.max_offset)] == [theirs.entry(i) for i in range(theirs.max_offset)]
    master.close()
    slave.close()


def test_a_sent_back_lmq_message_in_the_schedule_topic_rewrites_no_lmq_entry(tmp_path: Path) -> None:
    """A consumer's send-back copies the stored properties, stamped INNER_MULTI_QUEUE_OFFSET included, into a
    SCHEDULE_TOPIC_XXXX record (processors/send_back.py, broker/schedule.py). The live append gives that record no LMQ
    entry; a slave and recovery must not either, or they overwrite the original's entries with the schedule record."""
    master = open_store(tmp_path / "master", **LMQ)
    original = master.append(_multi("%LMQ%a", body=b"orig"))
    [(_, stored)] = _read(master, "%LMQ%a")
    sent_back = {**stored, "DELAY": "3", "REAL_TOPIC": "%RETRY%g", "REAL_QID": "0", "WAIT": "false"}
    master.append(attrs.evolve(message(body=b"orig"), topic=SCHEDULE_TOPIC, queue_id=2,
                               properties=encode_properties(sent_back)))  # fmt: skip
    master.append(_multi("%LMQ%a", body=b"next"))
    lmq = master.consume_queue("%LMQ%a", 0)
    entries = [lmq.entry(i) for i in range(lmq.max_offset)]
    assert len(entries) == 2 and entries[0][0] == original.phy_offset

    slave = open_store(tmp_path / "slave", broker_role=BrokerRole.SLAVE, **LMQ)
    assert slave.replica is not None
    slave.replica.append(0, bytes(master.commitlog.read(0, master.commitlog.max_offset) or b""))
    mine = slave.consume_queue("%LMQ%a", 0)
    assert [mine.entry(i) for i in range(mine.max_offset)] == entries
    slave.close()

    master.abandon()  # a crash: recovery scans every record again
    master = open_store(tmp_path / "master", **LMQ)
    assert master.abnormal_recovery and master.recovery_start == 0
    lmq = master.consume_queue("%LMQ%a", 0)
    assert [lmq.entry(i) for i in range(lmq.max_offset)] == entries
    assert [b for b, _ in _read(master, "%LMQ%a")] == [b"orig", b"next"]
    master.close()


def test_a_record_parked_in_the_timer_topic_is_dispatched_only_when_delivered(tmp_path: Path) -> None:
    """A timer message is parked in rmq_sys_wheel_timer with its properties (broker/timer/service.py): it reaches the
    queues INNER_MULTI_DISPATCH lists when delivered, not also at once (5.x's MixAll.topicAllowsLMQ skips rmq_sys_)."""
    store = open_store(tmp_path, **LMQ)
    parked = _multi("%LMQ%a", body=b"later", REAL_TOPIC="TopicTest", REAL_QID="3", TIMER_OUT_MS="99999999999999")
    store.append(attrs.evolve(parked, topic=TIMER_TOPIC, queue_id=0))
    assert _read(store, "%LMQ%a") == []
    store.append(_multi("%LMQ%a", body=b"later"))  # the delivery
    assert [(b, p["INNER_MULTI_QUEUE_OFFSET"]) for b, p in _read(store, "%LMQ%a")] == [(b"later", "0")]
    store.abandon()  # a crash: recovery scans every record again
    store = open_store(tmp_path, **LMQ)
    assert store.abnormal_recovery and store.recovery_start == 0
    assert [b for b, _ in _read(store, "%LMQ%a")] == [b"later"]
    store.close()


def test_a_batch_cannot_place_entries_at_offsets_its_sender_chose(tmp_path: Path) -> None:
    """A batch is stored without multi-dispatch (Java's batch append does not stamp either), so an
    INNER_MULTI_QUEUE_OFFSET its sender put in must not be stored: recovery would give the listed LMQ queue entries at
    the sender's offsets, which the live broker never handed out (here 0, colliding with a real entry, and 7)."""
    store = open_store(tmp_path, **LMQ)
    forged = [_multi("%LMQ%a", body=b"b0", INNER_MULTI_QUEUE_OFFSET="0"),
              _multi("%LMQ%a", body=b"b1", INNER_MULTI_QUEUE_OFFSET="7")]  # fmt: skip
    store.append_batch(forged)
    template = attrs.evolve(forged[0], body=b"", properties="")
    store.append_entries(template, [(b"e0", m.properties, 0) for m in forged])
    store.append(_multi("%LMQ%a", body=b"real"))  # the broker's own stamp: offset 0
    stored = [p for _, p in _read(store, "TopicTest", 3)]
    assert [p.get("INNER_MULTI_QUEUE_OFFSET") for p in stored] == [None, None, None, None, "0"]
    assert [b for b, _ in _read(store, "%LMQ%a")] == [b"real"]
    store.abandon()  # a crash: recovery scans every record again
    shutil.rmtree(tmp_path / "consumequeue")
    store = open_store(tmp_path, **LMQ)
    assert store.abnormal_recovery
    assert [b for b, _ in _read(store, "%LMQ%a")] == [b"real"]
    assert store.max_offset_in_queue("%LMQ%a", 0) == 1
    store.close()


async def test_a_dledger_send_cannot_place_entries_at_offsets_its_sender_chose(
    tmp_path: Path, autojump_clock: trio.testing.MockClock
) -> None:
    """A DLedger store does not stamp INNER_MULTI_QUEUE_OFFSET, and it dispatches committed entries as recovery does:
    a sender's own INNER_MULTI_QUEUE_OFFSET must not be stored, or the listed LMQ queue gets an entry at the offset
    the sender chose, live and again after a restart."""
    dledger = _one_member(tmp_path)
    async with _writable_leader(tmp_path, dledger, **LMQ) as store:
        put = await store.put(_multi("%LMQ%a", body=b"forged", INNER_MULTI_QUEUE_OFFSET="5"))
        assert put.status is PutStatus.PUT_OK
        await trio.sleep(1)  # committed and dispatched
        [(_, props)] = _read(store, "TopicTest", 3)
        assert "INNER_MULTI_QUEUE_OFFSET" not in props
        assert store.max_offset_in_queue("%LMQ%a", 0) == 0
    shutil.rmtree(tmp_path / "consumequeue")  # the queues rebuilt from the entries
    again = DLedgerMessageStore(small_config(tmp_path, **LMQ), dledger, HOST)
    again.load()
    try:
        assert [b for b, _ in _read(again, "TopicTest", 3)] == [b"forged"]
        assert again.max_offset_in_queue("%LMQ%a", 0) == 0
    finally:
        again.close()


def test_a_repeated_list_is_read_as_its_last_one_live_and_in_recovery(tmp_path: Path) -> None:
    """A properties string may name INNER_MULTI_DISPATCH twice (a raw client's header). Java reads the last one
    (common/.../message/MessageDecoder.java string2messageProperties fills a HashMap), when it stamps
    (store/.../MultiDispatch.java wrapMultiDispatch) and when it dispatches (store/.../ConsumeQueue.java
    multiDispatchLmqQueue), and so does our redispatch: the live put must read the same list, or recovery and a slave
    place the record in %LMQ%b at the offset %LMQ%a was stamped with (here 0, colliding with a real entry)."""
    store = open_store(tmp_path, **LMQ)
    store.append(_multi("%LMQ%b", body=b"first"))  # %LMQ%b's offset 0
    twice = _multi("%LMQ%a", body=b"second")
    store.append(attrs.evolve(twice, properties=twice.properties + "\x02INNER_MULTI_DISPATCH\x01%LMQ%b"))
    assert [b for b, _ in _read(store, "%LMQ%b")] == [b"first", b"second"]
    assert _read(store, "%LMQ%a") == []
    store.abandon()  # a crash: recovery scans every record again
    shutil.rmtree(tmp_path / "consumequeue")
    store = open_store(tmp_path, **LMQ)
    assert store.abnormal_recovery
    assert [b for b, _ in _read(store, "%LMQ%b")] == [b"first", b"second"]
    assert _read(store, "%LMQ%a") == []
    store.close()
