"""Where the delay schedule, the timer and transactions differed from RocketMQ (found by a review, each test failing
on the code before): a committed timer message parked until its time, a delay time past its level's delivered at
once, saved progress past a crash-lost tail corrected at start (delay levels and the half queue), the timer's
ENQUEUE/DEQUEUE stamps, and TIMER_DELAY_SEC before TIMER_DELIVER_MS."""

from __future__ import annotations

import math
import shutil
from pathlib import Path

import pytest
import trio
import trio.testing

from broker.embedded import EmbeddedCluster
from client.message import Message
from client.producer import Producer
from remoting.codec.codes import ResponseCode
from remoting.codec.msgid import decode_offset_msg_id
from remoting.codec.topics import SCHEDULE_TOPIC
from tests.conftest import SMALL_STORE
from tests.semantics.helpers import create_topic, use_virtual_store_clock
from tests.semantics.test_delay import _stored
from tests.semantics.test_transactions import TOPIC, _create_topic, _end_transaction, _visible


async def test_a_committed_transactional_timer_message_waits_for_its_time(
    embedded_cluster: EmbeddedCluster, autojump_clock: trio.testing.MockClock
) -> None:
    """RocketMQ 5.3.3: EndTransactionProcessor.sendFinalMessage -> MessageStore.putMessage runs the
    handleScheduleMessage hook for COMMIT-type messages (HookUtils.handleScheduleMessage), so a committed message
    carrying TIMER_DELAY_SEC is parked in rmq_sys_wheel_timer and delivered when due, not at once."""
    use_virtual_store_clock(embedded_cluster)
    await _create_topic(embedded_cluster)
    half_msg = Message(TOPIC, b"timed-tx", properties={"TRAN_MSG": "true", "PGROUP": "tx-pg", "TIMER_DELAY_SEC": "30"})
    async with Producer("tx-pg", embedded_cluster.namesrv_addr) as producer:
        half = await producer.send(half_msg)
    phy = decode_offset_msg_id(half.offset_msg_id).phy_offset
    assert await _end_transaction(embedded_cluster, "tx-pg", half.queue_offset, phy) == (ResponseCode.SUCCESS, None)
    assert _visible(embedded_cluster) == [], "committed timer message visible at once, 30 s before its time"


async def test_a_delay_due_further_than_its_levels_delay_is_delivered_at_once(
    tmp_path, autojump_clock: trio.testing.MockClock
) -> None:
    """RocketMQ 4.9.8 ScheduleMessageService.DeliverDelayedMessageTimerTask.correctDeliverTimestamp: a tags code
    (delivery time) beyond now + the level's delay is corrected to *now* (delivered at once). Here the operator
    shortens level 3 from 10m to 10s and restarts: Java delivers the pending level-3 message right after the
    restart; before, it was kept until the old 10-minute time."""
    cluster = EmbeddedCluster(tmp_path, message_delay_level="1s 5s 10m", **SMALL_STORE)
    async with cluster:
        clock = use_virtual_store_clock(cluster)
        await create_topic(cluster, "Shortened")
        async with Producer("pg-short", cluster.namesrv_addr) as producer:
            await producer.send(Message("Shortened", b"x", delay_level=3))
        await trio.sleep(2)
        assert _stored(cluster, "Shortened", 0) == []
        autojump_clock.autojump_threshold = math.inf
        await cluster.stop_broker()
        cluster._broker_overrides["message_delay_level"] = "1s 5s 10s"
        await cluster.start_broker()
        autojump_clock.autojump_threshold = 0
        use_virtual_store_clock(cluster, clock)
        assert cluster.controller.schedule.levels[3] == 10_000
        restarted = trio.current_time()
        while not _stored(cluster, "Shortened", 0) and trio.current_time() - restarted < 120:
            await trio.sleep(0.5)
        assert _stored(cluster, "Shortened", 0), "not delivered within 120 s of the restart (Java: at once)"
        assert _stored(cluster, SCHEDULE_TOPIC, 2)


def _lose_commitlog_tail(root: Path, durable_end: int) -> None:
    """A power cut: the CommitLog pages after the flushed prefix (``durable_end``) never reached the disk."""
    segment = root / "commitlog" / f"{0:020d}"
    data = bytearray(segment.read_bytes())
    data[durable_end:] = bytes(len(data) - durable_end)
    segment.write_bytes(bytes(data))


@pytest.mark.parametrize("queue_files_lost", [False, True])
def test_a_delay_offset_beyond_the_recovered_schedule_queue_skips_new_delayed_messages(
    tmp_path: Path, queue_files_lost: bool
) -> None:
    """RocketMQ 4.9.8 ScheduleMessageService.load -> correctDelayOffset: an offset in delayOffset.json beyond the
    schedule queue's max offset (the CommitLog tail lost by a power cut after delayOffset.json was written) is
    corrected to cqMaxOffset, so delayed messages sent after the restart are delivered. Before, the old offset
    was kept and the new messages that land below it never delivered. With the schedule queue's files lost too,
    Java's correctDelayOffset finds (makes) an empty queue and corrects the progress to 0 (found by a second
    review)."""
    from broker.schedule import ScheduleMessageService
    from remoting.codec.message import MessageRecord
    from store.message_store import MessageStore
    from store.store_config import StoreConfig
    from tests.semantics.test_timer import _read_all

    now = [1_000_000]
    root = tmp_path / "store"
    config_dir = root / "config"

    def open_store() -> MessageStore:
        store = MessageStore(StoreConfig(root, mapped_file_size_commit_log=1 << 20, now_ms=lambda: now[0]))
        store.load()
        return store

    store = open_store()
    store.append(MessageRecord(topic="Target", body=b"durable", queue_id=0))
    store.flush_all_blocking()
    durable_end = store.max_phy_offset
    service = ScheduleMessageService(store, config_dir, delay_levels="1s 5s")
    service.load()
    for i in range(4):
        store.append(service.rewrite(MessageRecord(topic="Target", body=f"old{i}".encode(), queue_id=0), 1))
    now[0] += 2_000
    service.deliver_due(1)
    assert service.offsets[1] == 4
    service._persister.write_through()  # the periodic save of delayOffset.json
    store.abandon()
    _lose_commitlog_tail(root, durable_end)
    if queue_files_lost:  # the schedule queue's files were created after the last flush
        shutil.rmtree(root / "consumequeue" / SCHEDULE_TOPIC)

    store = open_store()
    if queue_files_lost:
        assert (SCHEDULE_TOPIC, 0) not in store.consume_queues
    service = ScheduleMessageService(store, config_dir, delay_levels="1s 5s")
    service.load()
    for i in range(2):
        store.append(service.rewrite(MessageRecord(topic="Target", body=f"new{i}".encode(), queue_id=0), 1))
    now[0] += 2_000
    for _ in range(3):
        service.deliver_due(1)
    bodies = [m.body for m in _read_all(store, "Target", 0)]
    store.close()
    assert bodies == [b"durable", b"new0", b"new1"], (
        f"delayed messages sent after the restart were never delivered (offset kept at {service.offsets[1]})"
    )


async def test_a_commit_after_the_half_queue_lost_its_tail_is_stored(tmp_path) -> None:
    """RocketMQ 4.9.8 EndTransactionProcessor commits any half message it finds by commitLogOffset (it never looks
    at the check service's progress), and TransactionalMessageServiceImpl.check moves a CID_RMQ_SYS_TRANS offset that
    lies beyond the half queue back to its end (the pull's nextBeginOffset). After a power cut lost the CommitLog tail
    but consumerOffset.json kept the progress past it, we took a new transaction's COMMIT as one that "already
    ended" (ended_before: its queue offset is below the stale progress) and stores nothing: the message is lost."""
    from broker.broker_config import BrokerConfig
    from broker.context import build_context, load_managers
    from processors.end_transaction import EndTransactionProcessor
    from processors.transaction_bridge import TRANS_SYS_GROUP, TransactionalMessageBridge
    from remoting.codec.codes import RequestCode
    from remoting.codec.command import request
    from remoting.codec.headers.transaction import EndTransactionRequestHeader
    from remoting.codec.message import MessageRecord
    from remoting.codec.message_properties import encode_properties
    from remoting.codec.topics import TRANS_HALF_TOPIC
    from remoting.connection import Connection
    from store.metadata_files import TopicConfig

    config = BrokerConfig(store_path_root_dir=str(tmp_path / "b"), listen_port=10911, **SMALL_STORE)

    def open_broker():
        broker = build_context(config)
        load_managers(broker)
        broker.store.load()
        TransactionalMessageBridge(broker).correct_progress()  # as BrokerController.serve, after the store's load
        broker.topics.update_topic(TopicConfig(TOPIC, 1, 1))
        return broker

    def half(body: bytes) -> MessageRecord:
        props = {"REAL_TOPIC": TOPIC, "REAL_QID": "0", "PGROUP": "tx-pg", "TRAN_MSG": "true", "UNIQ_KEY": body.hex()}
        return MessageRecord(topic=TRANS_HALF_TOPIC, body=body, queue_id=0, properties=encode_properties(props))

    broker = open_broker()
    broker.store.append(MessageRecord(topic="Other", body=b"durable", queue_id=0))
    broker.store.flush_all_blocking()
    durable_end = broker.store.max_phy_offset
    bridge = TransactionalMessageBridge(broker)
    for i in range(3):  # three transactions rolled back; a check round moved the progress past them
        h = bridge.look_half(broker.store.append(half(f"old{i}".encode())).phy_offset)
        bridge.put_op_message(h)
    bridge.commit_progress(3, 3)
    await broker.offsets.persist()
    broker.store.abandon()
    _lose_commitlog_tail(tmp_path / "b", durable_end)

    broker = open_broker()
    assert broker.offsets.query(TRANS_SYS_GROUP, TRANS_HALF_TOPIC, 0) == 0  # saved 3, past the recovered end
    appended = broker.store.append(half(b"new"))
    assert appended.queue_offset == 0
    header = EndTransactionRequestHeader(
        producer_group="tx-pg",
        tran_state_table_offset=appended.queue_offset,
        commit_log_offset=appended.phy_offset,
        commit_or_rollback=8,
        msg_id="X",
    )
    left, _right = trio.testing.memory_stream_pair()
    peer = Connection(left, ("10.1.2.3", 40123), ("127.0.0.1", 10911)).context
    answer = await EndTransactionProcessor(broker).process(
        peer, request(RequestCode.END_TRANSACTION, header.to_ext_fields())
    )
    assert answer is not None and answer.code == ResponseCode.SUCCESS
    committed = broker.store.get(TOPIC, 0, 0, 32).messages
    broker.store.close()
    assert len(committed) == 1, "COMMIT answered SUCCESS but the message was never stored"


async def test_a_delivered_timer_message_carries_timer_enqueue_and_dequeue_ms(
    embedded_cluster: EmbeddedCluster, autojump_clock: trio.testing.MockClock
) -> None:
    """RocketMQ 5.3.3 TimerMessageStore.convert puts TIMER_ENQUEUE_MS and TIMER_DEQUEUE_MS on every message it
    delivers (before convertMessage copies the properties string)."""
    from tests.semantics.test_timer import _stored as stored_timer

    use_virtual_store_clock(embedded_cluster)
    await create_topic(embedded_cluster, "Stamped")
    async with Producer("pg-stamp", embedded_cluster.namesrv_addr) as producer:
        await producer.send(Message("Stamped", b"t", properties={"TIMER_DELAY_SEC": "5"}))
    await trio.sleep(10)
    (msg,) = stored_timer(embedded_cluster, "Stamped")
    assert {"TIMER_ENQUEUE_MS", "TIMER_DEQUEUE_MS"} <= msg.properties.keys(), sorted(msg.properties)


async def test_timer_delay_sec_takes_precedence_over_deliver_ms(
    embedded_cluster: EmbeddedCluster, autojump_clock: trio.testing.MockClock
) -> None:
    """RocketMQ 5.3.3 HookUtils.transformTimerMessage reads TIMER_DELAY_SEC first, then TIMER_DELAY_MS, and only
    then TIMER_DELIVER_MS; we read TIMER_DELIVER_MS first before."""
    from tests.semantics.test_timer import _stored as stored_timer

    clock = use_virtual_store_clock(embedded_cluster)
    await create_topic(embedded_cluster, "Both")
    async with Producer("pg-both", embedded_cluster.namesrv_addr) as producer:
        now = clock()
        props = {"TIMER_DELAY_SEC": "5", "TIMER_DELIVER_MS": str(now + 600_000)}
        await producer.send(Message("Both", b"b", properties=props))
    await trio.sleep(10)
    assert [m.body for m in stored_timer(embedded_cluster, "Both")] == [b"b"], "not delivered after TIMER_DELAY_SEC=5"
