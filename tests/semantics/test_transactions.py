"""Transactions with check-back through the broker and our TransactionProducer, in virtual time (autojump clock: the
check service's 60 s rounds and the 15-check limit pass in seconds), plus END_TRANSACTION's checks on the wire and a
real broker restart."""

from __future__ import annotations

import contextlib
import itertools
import socket
import threading
import time
from collections.abc import Callable
from pathlib import Path

import attrs
import pytest
import trio
import trio.testing

from broker.broker_config import BrokerConfig
from broker.context import build_context
from broker.embedded import EmbeddedCluster
from broker.transaction import TransactionCheckService
from client import sync
from client.admin import Admin
from client.consumer.listener import ConsumeConcurrentlyStatus
from client.errors import SendFailedError
from client.message import Message, MessageExt, uniq_msg_id
from client.producer import Producer
from client.transaction import LocalTransactionState, TransactionProducer
from processors.end_transaction import EndTransactionProcessor
from processors.transaction_bridge import origin_of
from remoting.client import RemotingClient
from remoting.codec.bodies import ConsumeFromWhere
from remoting.codec.codes import LanguageCode, RequestCode, ResponseCode
from remoting.codec.command import RemotingCommand, request
from remoting.codec.frame import FrameDecoder, encode_command
from remoting.codec.headers.transaction import EndTransactionRequestHeader
from remoting.codec.message import (
    SYSFLAG_TRANSACTION_COMMIT,
    SYSFLAG_TRANSACTION_MASK,
    MessageRecord,
    decode_record,
    encode_record,
)
from remoting.codec.message import MessageExt as StoredExt
from remoting.codec.message_properties import encode_properties
from remoting.codec.msgid import decode_offset_msg_id, pack_socket_address
from remoting.codec.topics import SCHEDULE_TOPIC, TRANS_CHECK_MAX_TIME_TOPIC, TRANS_HALF_TOPIC, TRANS_OP_HALF_TOPIC
from remoting.connection import Connection
from remoting.errors import RemotingTimeoutError
from store.maintenance import clean_expired_consume_queues
from store.metadata_files import PERM_READ
from store.results import AppendResult
from tests.conftest import SMALL_STORE
from tests.remoting.helpers import congest, served_connection
from tests.semantics.helpers import use_virtual_store_clock
from tests.threaded_cluster import ThreadedCluster

COMMIT = LocalTransactionState.COMMIT_MESSAGE
ROLLBACK = LocalTransactionState.ROLLBACK_MESSAGE
UNKNOWN = LocalTransactionState.UNKNOWN
TOPIC = "TxTopic"


async def _create_topic(cluster: EmbeddedCluster, topic: str = TOPIC) -> None:
    async with Admin(cluster.namesrv_addr) as admin:
        await admin.create_topic(topic, read_queue_nums=2, write_queue_nums=2)


def _visible(cluster: EmbeddedCluster, topic: str = TOPIC, queues: int = 2) -> list[StoredExt]:
    """What a consumer of ``topic`` could pull right now, read from the broker's consume queues."""
    store = cluster.controller.context.store
    found = []
    for queue_id in range(queues):
        result = store.get(topic, queue_id, 0, 32)
        found.extend(decode_record(view) for view in result.messages)
    return found


def _producer(
    cluster: EmbeddedCluster,
    execute: Callable[[Message, object], LocalTransactionState],
    check: Callable[[MessageExt], LocalTransactionState],
    group: str = "tx-pg",
) -> TransactionProducer:
    async def execute_async(msg: Message, arg: object) -> LocalTransactionState:
        return execute(msg, arg)

    async def check_async(msg: MessageExt) -> LocalTransactionState:
        return check(msg)

    return TransactionProducer(
        group,
        cluster.namesrv_addr,
        execute_local_transaction=execute_async,
        check_local_transaction=check_async,
    )


def _counting(counts: list[str], answer: LocalTransactionState) -> Callable[[MessageExt], LocalTransactionState]:
    """A check listener that records the ``TRANSACTION_CHECK_TIMES`` of each check in ``counts`` and answers
    ``answer``."""

    def check(msg: MessageExt) -> LocalTransactionState:
        counts.append(msg.properties["TRANSACTION_CHECK_TIMES"])
        return answer

    return check


async def _wait_visible(cluster: EmbeddedCluster, count: int, within: float = 90) -> list[StoredExt]:
    """Poll (in virtual time) until ``count`` messages are visible; fail after ``within`` virtual seconds."""
    with trio.fail_after(within):
        while len(found := _visible(cluster)) < count:
            await trio.sleep(0.01)
    return found


async def _wait_ops(cluster: EmbeddedCluster, count: int) -> None:
    store = cluster.controller.context.store
    with trio.fail_after(30):
        while store.max_offset_in_queue(TRANS_OP_HALF_TOPIC, 0) < count:
            await trio.sleep(0.01)


async def test_commit_restores_the_real_topic_and_makes_the_message_visible_only_then(
    embedded_cluster: EmbeddedCluster, autojump_clock: trio.testing.MockClock
) -> None:
    await _create_topic(embedded_cluster)
    seen_before_commit: list[int] = []

    def execute(msg: Message, arg: object) -> LocalTransactionState:
        seen_before_commit.append(len(_visible(embedded_cluster)))
        return COMMIT

    async with _producer(embedded_cluster, execute, lambda m: UNKNOWN) as producer:
        result = await producer.send_message_in_transaction(Message(TOPIC, b"order-1", tags="T", keys="k1"))
        (msg,) = await _wait_visible(embedded_cluster, 1)
    assert seen_before_commit == [0]
    assert result.local_transaction_state is COMMIT
    half_phy = decode_offset_msg_id(result.send_result.offset_msg_id).phy_offset
    (half_view,) = embedded_cluster.controller.context.store.get(TRANS_HALF_TOPIC, 0, 0, 32).messages
    half = decode_record(half_view)
    assert (msg.topic, msg.queue_id, msg.body) == (TOPIC, int(half.properties["REAL_QID"]), b"order-1")
    assert (half.commit_log_offset, half.queue_offset) == (half_phy, result.send_result.queue_offset)
    assert (half.properties["REAL_TOPIC"], half.properties["TRAN_MSG"]) == (TOPIC, "true")
    assert msg.sys_flag & SYSFLAG_TRANSACTION_MASK == SYSFLAG_TRANSACTION_COMMIT
    assert msg.prepared_transaction_offset == half_phy
    assert msg.properties["UNIQ_KEY"] == result.transaction_id
    assert msg.properties["TAGS"] == "T" and msg.properties["PGROUP"] == "tx-pg"
    # EndTransactionProcessor builds the properties string before it clears REAL_* and TRAN_MSG from the map.
    kept = {k: msg.properties.get(k) for k in ("TRAN_MSG", "REAL_TOPIC", "REAL_QID")}
    assert kept == {"TRAN_MSG": "true", "REAL_TOPIC": TOPIC, "REAL_QID": half.properties["REAL_QID"]}
    await _wait_ops(embedded_cluster, 1)


async def test_the_controller_wires_the_delay_schedule_into_end_transaction(embedded_cluster: EmbeddedCluster) -> None:
    controller = embedded_cluster.controller
    assert controller.transaction_bridge.delay_rewrite == controller.schedule.rewrite


async def test_a_committed_message_with_a_delay_level_is_delivered_by_the_schedule_when_due(
    embedded_cluster: EmbeddedCluster, autojump_clock: trio.testing.MockClock
) -> None:
    use_virtual_store_clock(embedded_cluster)
    await _create_topic(embedded_cluster)
    # Java's and our transactional producers drop DELAY; a client that keeps it (as this raw half send does) must
    # still see the delay honoured on commit (step 10 of docs/protocol.md#75-send-checks).
    half_msg = Message(TOPIC, b"later", delay_level=3, properties={"TRAN_MSG": "true", "PGROUP": "tx-pg"})
    async with Producer("tx-pg", embedded_cluster.namesrv_addr) as producer:
        half = await producer.send(half_msg)
    phy = decode_offset_msg_id(half.offset_msg_id).phy_offset
    assert await _end_transaction(embedded_cluster, "tx-pg", half.queue_offset, phy) == (ResponseCode.SUCCESS, None)
    committed_at = trio.current_time()
    store = embedded_cluster.controller.context.store
    (scheduled_view,) = store.get(SCHEDULE_TOPIC, 2, 0, 32).messages
    assert _visible(embedded_cluster) == []
    (msg,) = await _wait_visible(embedded_cluster, 1, within=60)
    assert 10 <= trio.current_time() - committed_at < 11.5  # level 3 is 10 s
    scheduled = decode_record(scheduled_view)
    assert (scheduled.properties["REAL_TOPIC"], scheduled.properties["DELAY"]) == (TOPIC, "3")
    assert scheduled.sys_flag & SYSFLAG_TRANSACTION_MASK == SYSFLAG_TRANSACTION_COMMIT
    assert (msg.topic, msg.body, msg.properties["UNIQ_KEY"]) == (TOPIC, b"later", half.msg_id)
    # The delay rewrite rebuilds the string from the map TRAN_MSG was cleared from; the schedule keeps DELAY.
    assert msg.properties["DELAY"] == "3" and "TRAN_MSG" not in msg.properties


async def test_a_committed_message_parked_for_a_delay_level_counts_in_no_queue_put_item(
    embedded_cluster: EmbeddedCluster, autojump_clock: trio.testing.MockClock
) -> None:
    """4.9.8 counts QUEUE_PUT_NUMS / QUEUE_PUT_SIZE of a delay level's queue on the send paths only
    (broker/src/main/java/org/apache/rocketmq/broker/processor/SendMessageProcessor.java ``handlePutMessageResult``
    and ``asyncConsumerSendMsgBack``); EndTransactionProcessor ``sendFinalMessage`` parks a committed message that
    asks for a delay with a plain store put, which counts in no put item. Its delivery still counts as
    SCHEDULE_CONSUMER's get (ScheduleMessageService ``PutResultProcess.onSuccess``)."""
    use_virtual_store_clock(embedded_cluster)
    await _create_topic(embedded_cluster)
    stats = embedded_cluster.controller.context.stats
    half_msg = Message(TOPIC, b"later", delay_level=1, properties={"TRAN_MSG": "true", "PGROUP": "tx-pg"})
    async with Producer("tx-pg", embedded_cluster.namesrv_addr) as producer:
        half = await producer.send(half_msg)
    phy = decode_offset_msg_id(half.offset_msg_id).phy_offset
    assert await _end_transaction(embedded_cluster, "tx-pg", half.queue_offset, phy) == (ResponseCode.SUCCESS, None)
    assert embedded_cluster.controller.context.store.max_offset_in_queue(SCHEDULE_TOPIC, 0) == 1
    for name in ("QUEUE_PUT_NUMS", "QUEUE_PUT_SIZE"):
        assert stats.item(name, f"{SCHEDULE_TOPIC}@0") is None, name
    assert stats.item("TOPIC_PUT_NUMS", SCHEDULE_TOPIC) is None
    await _wait_visible(embedded_cluster, 1, within=60)
    await trio.sleep(2)  # sampled after the delivery too
    assert stats.item("QUEUE_GET_NUMS", f"{SCHEDULE_TOPIC}@0@SCHEDULE_CONSUMER") is not None
    for name in ("QUEUE_PUT_NUMS", "QUEUE_PUT_SIZE"):
        assert stats.item(name, f"{SCHEDULE_TOPIC}@0") is None, name


async def test_rollback_records_an_op_message_and_the_message_never_becomes_visible(
    embedded_cluster: EmbeddedCluster, autojump_clock: trio.testing.MockClock
) -> None:
    await _create_topic(embedded_cluster)
    checks: list[MessageExt] = []

    def check(msg: MessageExt) -> LocalTransactionState:
        checks.append(msg)
        return COMMIT

    async with _producer(embedded_cluster, lambda m, a: ROLLBACK, check) as producer:
        result = await producer.send_message_in_transaction(Message(TOPIC, b"cancelled"))
        await _wait_ops(embedded_cluster, 1)
        await trio.sleep(5 * 60)  # five check rounds: a rolled-back message is never asked about
    store = embedded_cluster.controller.context.store
    (op_view,) = store.get(TRANS_OP_HALF_TOPIC, 0, 0, 32).messages
    op = decode_record(op_view)
    assert op.body == str(result.send_result.queue_offset).encode()
    assert op.properties["TAGS"] == "d"
    assert result.local_transaction_state is ROLLBACK
    assert checks == []
    assert _visible(embedded_cluster) == []


async def test_unknown_outcome_is_resolved_by_check_back_to_commit(
    embedded_cluster: EmbeddedCluster, autojump_clock: trio.testing.MockClock
) -> None:
    use_virtual_store_clock(embedded_cluster)  # the check service ages half messages on the store clock
    await _create_topic(embedded_cluster)
    checks: list[tuple[float, MessageExt]] = []

    def check(msg: MessageExt) -> LocalTransactionState:
        checks.append((trio.current_time(), msg))
        return COMMIT

    async with _producer(embedded_cluster, lambda m, a: UNKNOWN, check) as producer:
        start = trio.current_time()
        result = await producer.send_message_in_transaction(Message(TOPIC, b"late"))
        await trio.sleep(59)
        assert _visible(embedded_cluster) == [] and checks == []
        (msg,) = await _wait_visible(embedded_cluster, 1)
        await trio.sleep(3 * 60)  # later rounds neither ask again nor commit twice
        assert len(_visible(embedded_cluster)) == 1
    assert result.local_transaction_state is UNKNOWN
    ((asked_at, asked),) = checks
    assert 60 <= asked_at - start < 61
    assert (asked.topic, asked.queue_id, asked.body) == (TOPIC, msg.queue_id, b"late")
    assert asked.properties["UNIQ_KEY"] == result.transaction_id
    assert asked.properties["TRANSACTION_CHECK_TIMES"] == "1"
    assert msg.body == b"late" and msg.properties["UNIQ_KEY"] == result.transaction_id


async def test_the_local_transaction_and_its_check_back_see_the_same_transaction_id(
    embedded_cluster: EmbeddedCluster, autojump_clock: trio.testing.MockClock
) -> None:
    """sendMessageInTransaction passes executeLocalTransaction the very message it sent: UNIQ_KEY set by sendKernelImpl,
    then ``msg.setTransactionId(UNIQ_KEY)``, so the listener can record the id the check-back's message carries
    (DefaultMQProducerImpl.java), whose ``transaction_id`` is that UNIQ_KEY too (ClientRemotingProcessor's
    ``messageExt.setTransactionId``). Before, the callback's message had neither, and the check's no
    ``transaction_id``, so execute and check could not meet."""
    use_virtual_store_clock(embedded_cluster)  # the check service ages half messages on the store clock
    await _create_topic(embedded_cluster)
    executed: list[tuple[str | None, str | None]] = []
    checked: list[tuple[str | None, str]] = []

    def execute(msg: Message, arg: object) -> LocalTransactionState:
        executed.append((msg.transaction_id, msg.properties.get("UNIQ_KEY")))
        return UNKNOWN

    def check(msg: MessageExt) -> LocalTransactionState:
        checked.append((msg.transaction_id, uniq_msg_id(msg)))
        return COMMIT

    async with _producer(embedded_cluster, execute, check) as producer:
        result = await producer.send_message_in_transaction(Message(TOPIC, b"matched"))
        (visible,) = await _wait_visible(embedded_cluster, 1)
    assert executed == [(result.transaction_id, result.transaction_id)]
    assert checked == [(result.transaction_id, result.transaction_id)]
    # The committed copy keeps TRAN_MSG (endMessageTransaction clears it after the properties string is built), so a
    # consumer's message has the id too (PullAPIWrapper.processPullResult).
    assert visible.transaction_id == result.transaction_id


async def test_unknown_outcome_is_resolved_by_check_back_to_rollback(
    embedded_cluster: EmbeddedCluster, autojump_clock: trio.testing.MockClock
) -> None:
    use_virtual_store_clock(embedded_cluster)  # the check service ages half messages on the store clock
    await _create_topic(embedded_cluster)
    checks: list[MessageExt] = []

    def check(msg: MessageExt) -> LocalTransactionState:
        checks.append(msg)
        return ROLLBACK

    async with _producer(embedded_cluster, lambda m, a: UNKNOWN, check) as producer:
        await producer.send_message_in_transaction(Message(TOPIC, b"undone"))
        await trio.sleep(61)
        await _wait_ops(embedded_cluster, 1)
        await trio.sleep(5 * 60)
    assert len(checks) == 1
    assert _visible(embedded_cluster) == []


async def test_a_producer_that_never_answers_ends_in_discard_after_the_maximum_checks(
    quiet_timer_cluster: EmbeddedCluster, autojump_clock: trio.testing.MockClock
) -> None:
    use_virtual_store_clock(quiet_timer_cluster)  # the check service ages half messages on the store clock
    await _create_topic(quiet_timer_cluster)
    checks: list[MessageExt] = []

    def check(msg: MessageExt) -> LocalTransactionState:
        checks.append(msg)
        return UNKNOWN

    async with _producer(quiet_timer_cluster, lambda m, a: UNKNOWN, check) as producer:
        result = await producer.send_message_in_transaction(Message(TOPIC, b"orphan"))
        await trio.sleep(20 * 60)
    assert [m.properties["TRANSACTION_CHECK_TIMES"] for m in checks] == [str(n) for n in range(1, 16)]
    store = quiet_timer_cluster.controller.context.store
    (view,) = store.get(TRANS_CHECK_MAX_TIME_TOPIC, 0, 0, 32).messages
    discarded = decode_record(view)
    assert discarded.properties["UNIQ_KEY"] == result.transaction_id
    assert discarded.properties["TRANSACTION_CHECK_TIMES"] == "15"
    assert _visible(quiet_timer_cluster) == []


async def test_the_first_check_round_creates_the_half_topic_so_operators_can_see_the_backlog(
    embedded_cluster: EmbeddedCluster, autojump_clock: trio.testing.MockClock
) -> None:
    """4.9.8's check lists the half topic's queues through ``fetchMessageQueues``, whose ``selectTopicConfig``
    creates ``RMQ_SYS_TRANS_HALF_TOPIC`` (1 queue, read-write) and registers it with the name servers
    (``createTopicInSendMessageBackMethod``): from the first round on, ``mqadmin topicList`` names it and
    ``topicStatus -t RMQ_SYS_TRANS_HALF_TOPIC`` shows the half messages waiting. Ours never created it, so the
    backlog could not be seen with the tools (TOPIC_NOT_EXIST, no route)."""
    use_virtual_store_clock(embedded_cluster)
    await _create_topic(embedded_cluster)
    topics = embedded_cluster.controller.context.topics
    async with _producer(embedded_cluster, lambda m, a: UNKNOWN, lambda m: UNKNOWN) as producer:
        await producer.send_message_in_transaction(Message(TOPIC, b"pending"))
        assert topics.get(TRANS_HALF_TOPIC) is None  # as in 4.9.8, before the first round
        await trio.sleep(61)
        async with Admin(embedded_cluster.namesrv_addr) as admin:
            assert TRANS_HALF_TOPIC in await admin.topic_list()
            status = await admin.topic_status(TRANS_HALF_TOPIC)
    config = topics.get(TRANS_HALF_TOPIC)
    assert config is not None
    assert (config.read_queue_nums, config.write_queue_nums, config.perm) == (1, 1, 6)
    ((queue, offsets),) = status.items()
    assert (queue.queue_id, offsets.min_offset, offsets.max_offset) == (0, 0, 2)  # the half and its renewal


async def test_the_broker_logs_a_pending_end_with_the_producers_exception_as_its_remark(
    embedded_cluster: EmbeddedCluster, autojump_clock: trio.testing.MockClock, caplog: pytest.LogCaptureFixture
) -> None:
    """The remark of END_TRANSACTION carries the exception that left a transaction pending: the producer's
    ``"executeLocalTransactionBranch exception: " + e.toString()`` (DefaultMQProducerImpl.endTransaction), a
    check-back's ``"checkLocalTransactionState Exception: " + RemotingHelper.exceptionSimpleDesc(e)``
    (``processTransactionState``), and 4.9.8's EndTransactionProcessor.processRequest logs it with a warning for an
    unknown outcome (and a rollback, and a commit a check brought): the operator's only view of why a transaction
    stays open. Ours dropped an unknown outcome without a word, and our client wrote remarks of its own wording."""
    use_virtual_store_clock(embedded_cluster)
    await _create_topic(embedded_cluster)

    def execute(msg: Message, arg: object) -> LocalTransactionState:
        raise RuntimeError("local database down")

    def check(msg: MessageExt) -> LocalTransactionState:
        raise ValueError("still down")

    caplog.set_level("WARNING", logger="processors.end_transaction")
    async with _producer(embedded_cluster, execute, check) as producer:
        await producer.send_message_in_transaction(Message(TOPIC, b"pending"))
        await trio.sleep(61)
    warnings = [r.getMessage() for r in caplog.records if r.name == "processors.end_transaction"]
    (sent,) = [w for w in warnings if "executeLocalTransactionBranch exception: RuntimeError: local database down" in w]
    assert "in sending message" in sent and "pending" in sent
    (checked,) = [w for w in warnings if "checkLocalTransactionState Exception: ValueError: still down, " in w]
    assert "Check producer" in checked and "pending" in checked


async def test_check_immunity_property_delays_the_first_check(
    embedded_cluster: EmbeddedCluster, autojump_clock: trio.testing.MockClock
) -> None:
    use_virtual_store_clock(embedded_cluster)  # the check service ages half messages on the store clock
    await _create_topic(embedded_cluster)
    checks: list[float] = []

    def check(msg: MessageExt) -> LocalTransactionState:
        checks.append(trio.current_time())
        return COMMIT

    async with _producer(embedded_cluster, lambda m, a: UNKNOWN, check) as producer:
        start = trio.current_time()
        msg = Message(TOPIC, b"immune", properties={"CHECK_IMMUNITY_TIME_IN_SECONDS": "150"})
        await producer.send_message_in_transaction(msg)
        await _wait_visible(embedded_cluster, 1, within=300)
    assert len(checks) == 1 and 180 <= checks[0] - start < 181


async def test_a_round_that_renews_an_immune_half_message_counts_it_as_a_check(
    embedded_cluster: EmbeddedCluster, autojump_clock: trio.testing.MockClock
) -> None:
    """4.9.8's check raises TRANSACTION_CHECK_TIMES (needDiscard) before it looks at the immunity, and
    putImmunityMsgBackToHalfQueue stores the raised count: a half message immune for 150 s, renewed at the rounds of
    60 s and 120 s, is asked at 180 s with a count of 3 (broker/src/main/java/org/apache/rocketmq/broker/transaction/
    queue/TransactionalMessageServiceImpl.java). Ours kept the count at each immune renewal."""
    use_virtual_store_clock(embedded_cluster)  # the check service ages half messages on the store clock
    await _create_topic(embedded_cluster)
    counts: list[str] = []
    immune = Message(TOPIC, b"immune", properties={"CHECK_IMMUNITY_TIME_IN_SECONDS": "150"})
    async with _producer(embedded_cluster, lambda m, a: UNKNOWN, _counting(counts, COMMIT)) as producer:
        await producer.send_message_in_transaction(immune)
        await _wait_visible(embedded_cluster, 1, within=300)
    assert counts == ["3"]


async def test_a_check_goes_to_a_producer_of_the_group_that_reads_not_to_one_that_stopped(
    embedded_cluster: EmbeddedCluster, autojump_clock: trio.testing.MockClock
) -> None:
    """ProducerManager.getAvailableChannel: from the round-robin pick on, the first writable channel of the group. A
    member that stopped reading (its connection congested) must not cost a half message its check for the round,
    since the round already counted the check."""
    use_virtual_store_clock(embedded_cluster)  # the check service ages half messages on the store clock
    await _create_topic(embedded_cluster)
    checks: list[str] = []

    def check(msg: MessageExt) -> LocalTransactionState:
        checks.append(msg.properties["TRANSACTION_CHECK_TIMES"])
        return COMMIT

    clients = embedded_cluster.controller.context.clients
    async with trio.open_nursery() as nursery, _producer(embedded_cluster, lambda m, a: UNKNOWN, check) as producer:
        stuck, _stuck_end = served_connection(nursery, 1, small_buffers=True)
        await congest(stuck)
        clients.register_producer("tx-pg", clients.channel_info(stuck, "stuck", LanguageCode.JAVA, 409))
        for body in (b"one", b"two"):  # round robin: one of the two picks lands on the stuck member
            await producer.send_message_in_transaction(Message(TOPIC, body))
        await trio.sleep(61)  # the first round
        assert checks == ["1", "1"]
        await _wait_visible(embedded_cluster, 2)
        nursery.cancel_scope.cancel()


async def test_a_check_goes_to_the_last_active_producer_when_none_of_the_group_is_writable(
    embedded_cluster: EmbeddedCluster, autojump_clock: trio.testing.MockClock
) -> None:
    """4.9.8's ProducerManager.getAvailableChannel returns ``lastActiveChannel`` when no channel it looked at is
    writable: the check is queued to a producer that is slow to read, which answers once it catches up. Ours
    skipped the check, though the round had counted it: a producer busy for 15 rounds lost its transaction to the
    discard without ever being asked."""
    clients = embedded_cluster.controller.context.clients
    async with trio.open_nursery() as nursery:
        slow, _slow_end = served_connection(nursery, 1, small_buffers=True)
        await congest(slow)
        clients.register_producer("tx-slow", clients.channel_info(slow, "slow", LanguageCode.JAVA, 409))
        (half,) = _half_backlog(embedded_cluster, 1, group="tx-slow")
        queued = slow.buffered_bytes
        outcome = await embedded_cluster.controller.transaction_check.check_once()
        assert outcome.checked == 1
        # The check (its body the half message) waits behind the backlog, for the producer to read it.
        assert slow.buffered_bytes - queued > half.size, slow.buffered_bytes - queued
        nursery.cancel_scope.cancel()


async def _end_transaction(
    cluster: EmbeddedCluster, producer_group: str, queue_offset: int, phy: int, kind: int = 8
) -> tuple[int, str | None]:
    header = EndTransactionRequestHeader(
        producer_group=producer_group,
        tran_state_table_offset=queue_offset,
        commit_log_offset=phy,
        commit_or_rollback=kind,
        msg_id="X",
    )
    async with RemotingClient() as client:
        answer = await client.invoke(
            cluster.broker_addr, request(RequestCode.END_TRANSACTION, header.to_ext_fields()), 3.0
        )
    return answer.code, answer.remark


async def _unanswered(cluster: EmbeddedCluster, producer_group: str, queue_offset: int, phy: int, kind: int) -> bool:
    """Whether END_TRANSACTION sent as a request that waits for a response gets none (the client times out)."""
    timed_out = False
    try:
        await _end_transaction(cluster, producer_group, queue_offset, phy, kind)
    except* RemotingTimeoutError:
        timed_out = True
    return timed_out


async def test_end_transaction_checks_the_producer_group_and_the_offsets(
    embedded_cluster: EmbeddedCluster, autojump_clock: trio.testing.MockClock
) -> None:
    await _create_topic(embedded_cluster)
    async with _producer(embedded_cluster, lambda m, a: UNKNOWN, lambda m: UNKNOWN) as producer:
        result = await producer.send_message_in_transaction(Message(TOPIC, b"guarded"))
        plain = await producer.send(Message(TOPIC, b"plain"))
    plain_phy = decode_offset_msg_id(plain.offset_msg_id).phy_offset
    not_half = await _end_transaction(embedded_cluster, "tx-pg", plain.queue_offset, plain_phy)
    assert not_half == (ResponseCode.SYSTEM_ERROR, "Find prepared transaction message failed")
    assert [m.body for m in _visible(embedded_cluster)] == [b"plain"]  # an ordinary message is not re-published
    offset = result.send_result.queue_offset
    phy = decode_offset_msg_id(result.send_result.offset_msg_id).phy_offset
    wrong_group = await _end_transaction(embedded_cluster, "other-group", offset, phy)
    wrong_offset = await _end_transaction(embedded_cluster, "tx-pg", offset + 1, phy)
    no_half = await _end_transaction(embedded_cluster, "tx-pg", offset, phy + 1)
    assert wrong_group == (ResponseCode.SYSTEM_ERROR, "The producer group wrong")
    assert wrong_offset == (ResponseCode.SYSTEM_ERROR, "The transaction state table offset wrong")
    assert no_half == (ResponseCode.SYSTEM_ERROR, "Find prepared transaction message failed")
    assert await _unanswered(embedded_cluster, "tx-pg", offset, phy, 0)  # UNKNOWN: EndTransactionProcessor says null
    assert len(_visible(embedded_cluster)) == 1
    assert await _end_transaction(embedded_cluster, "tx-pg", offset, phy) == (ResponseCode.SUCCESS, None)
    assert await _end_transaction(embedded_cluster, "tx-pg", offset, phy) == (ResponseCode.SUCCESS, None)
    assert len(_visible(embedded_cluster)) == 2  # a repeated commit is acknowledged, not stored twice


async def test_an_end_transaction_the_store_refuses_is_answered_as_javas_send_final_message(
    embedded_cluster: EmbeddedCluster, autojump_clock: trio.testing.MockClock
) -> None:
    """A store that takes no writes (disk full): 4.9.8's EndTransactionProcessor answers a COMMIT with its final
    message's put status as ``sendFinalMessage`` maps it (SERVICE_NOT_AVAILABLE "Service not available now."), and a
    ROLLBACK with SUCCESS, ignoring whether ``deletePrepareMessage`` wrote the op message (the check asks again).
    Ours answered both SERVICE_NOT_AVAILABLE with a remark of its own."""
    await _create_topic(embedded_cluster)
    async with _producer(embedded_cluster, lambda m, a: UNKNOWN, lambda m: UNKNOWN) as producer:
        result = await producer.send_message_in_transaction(Message(TOPIC, b"refused"))
    offset = result.send_result.queue_offset
    phy = decode_offset_msg_id(result.send_result.offset_msg_id).phy_offset
    store = embedded_cluster.controller.context.store
    store.disk_full_reason = "disk full (test)"
    try:
        commit = await _end_transaction(embedded_cluster, "tx-pg", offset, phy, 8)
        rollback = await _end_transaction(embedded_cluster, "tx-pg", offset, phy, 12)
    finally:
        store.disk_full_reason = None
    assert commit == (ResponseCode.SERVICE_NOT_AVAILABLE, "Service not available now.")
    assert rollback == (ResponseCode.SUCCESS, None)
    assert store.max_offset_in_queue(TRANS_OP_HALF_TOPIC, 0) == 0  # nothing written: the transaction is still open
    assert _visible(embedded_cluster) == []
    assert await _end_transaction(embedded_cluster, "tx-pg", offset, phy, 8) == (ResponseCode.SUCCESS, None)
    assert [m.body for m in _visible(embedded_cluster)] == [b"refused"]


async def test_transaction_state_survives_a_broker_restart(
    embedded_cluster: EmbeddedCluster, autojump_clock: trio.testing.MockClock
) -> None:
    clock = use_virtual_store_clock(embedded_cluster)  # the check service ages half messages on the store clock
    await _create_topic(embedded_cluster)
    answers = {b"pending": UNKNOWN, b"undone": ROLLBACK}
    checks: list[MessageExt] = []

    def check(msg: MessageExt) -> LocalTransactionState:
        checks.append(msg)
        return answers[msg.body]

    def execute(msg: Message, arg: object) -> LocalTransactionState:
        return ROLLBACK if msg.body == b"undone" else UNKNOWN

    async with _producer(embedded_cluster, execute, check) as producer:
        await producer.send_message_in_transaction(Message(TOPIC, b"pending"))
        await producer.send_message_in_transaction(Message(TOPIC, b"undone"))
        await trio.sleep(61)  # one round: "pending" asked once (still unknown), "undone" never
        assert [m.body for m in checks] == [b"pending"]
        await embedded_cluster.restart_broker()
        use_virtual_store_clock(embedded_cluster, clock)
        answers[b"pending"] = COMMIT
        (msg,) = await _wait_visible(embedded_cluster, 1)
        await trio.sleep(3 * 60)
    assert [(m.body, m.properties["TRANSACTION_CHECK_TIMES"]) for m in checks] == [(b"pending", "1"), (b"pending", "2")]
    assert msg.body == b"pending"
    assert len(_visible(embedded_cluster)) == 1


def test_blocking_producer_with_plain_callbacks_delivers_only_committed_messages_to_a_consumer(
    tmp_path: Path,
) -> None:
    # Wall-clock test (plain threads): the check service runs every 100 ms and asks about a message left unended
    # for 2 s. The immunity time leaves the producer's END_TRANSACTION room to arrive on a loaded machine (with 0 the
    # broker could ask about "rolled-back" before its rollback landed); every wait below ends as soon as its event
    # is set.
    cluster = ThreadedCluster(tmp_path / "cluster", transaction_check_interval=100, transaction_time_out=2000).start()
    received: list[MessageExt] = []
    got_committed = threading.Event()
    checked: list[bytes] = []

    def listener(msgs: list[MessageExt]) -> ConsumeConcurrentlyStatus:
        received.extend(msgs)
        if {b"committed", b"checked-commit"} <= {m.body for m in received}:
            got_committed.set()
        return ConsumeConcurrentlyStatus.CONSUME_SUCCESS

    def execute(msg: Message, arg: object) -> LocalTransactionState:
        assert threading.current_thread() is not threading.main_thread()
        return {b"rolled-back": ROLLBACK, b"committed": COMMIT}.get(msg.body, UNKNOWN)

    def check(msg: MessageExt) -> LocalTransactionState:
        checked.append(msg.body)
        return COMMIT if msg.body == b"checked-commit" else ROLLBACK

    try:
        cluster.call(_create_topic, cluster.cluster)
        consumer = sync.PushConsumer(
            "tx-cg", cluster.namesrv_addr, consume_from_where=ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET
        )
        consumer.subscribe(TOPIC)
        consumer.register_message_listener(listener)
        with (
            consumer,
            sync.TransactionProducer(
                "tx-sync", cluster.namesrv_addr, execute_local_transaction=execute, check_local_transaction=check
            ) as producer,
        ):
            states = [
                producer.send_message_in_transaction(Message(TOPIC, body)).local_transaction_state
                for body in (b"rolled-back", b"committed", b"checked-rollback", b"checked-commit")
            ]
            assert got_committed.wait(60)
    finally:
        cluster.stop()
    assert states == [ROLLBACK, COMMIT, UNKNOWN, UNKNOWN]
    assert set(checked) == {b"checked-commit", b"checked-rollback"}  # a fast round may ask twice: at least once
    assert sorted(m.body for m in received) == [b"checked-commit", b"committed"]


@pytest.mark.parametrize("between", ["a restart", "a check round"])
async def test_a_repeated_commit_is_acknowledged_not_stored_twice(
    embedded_cluster: EmbeddedCluster, autojump_clock: trio.testing.MockClock, between: str
) -> None:
    """Right after a restart, and after a check round, which drops from its window the op messages of transactions it
    scanned past (a second COMMIT then used to be stored again): the transaction ended, nothing more is stored."""
    await _create_topic(embedded_cluster)
    async with _producer(embedded_cluster, lambda m, a: COMMIT, lambda m: UNKNOWN) as producer:
        result = await producer.send_message_in_transaction(Message(TOPIC, b"once"))
        await _wait_visible(embedded_cluster, 1)
    await _wait_ops(embedded_cluster, 1)
    if between == "a restart":
        await embedded_cluster.restart_broker()
    else:
        await trio.sleep(61)  # one check round
    phy = decode_offset_msg_id(result.send_result.offset_msg_id).phy_offset
    answer = await _end_transaction(embedded_cluster, "tx-pg", result.send_result.queue_offset, phy)
    assert answer == (ResponseCode.SUCCESS, None)
    assert [m.body for m in _visible(embedded_cluster)] == [b"once"]


async def test_rejecting_transactions_refuses_new_half_messages_but_lets_accepted_ones_end(
    embedded_cluster: EmbeddedCluster, autojump_clock: trio.testing.MockClock
) -> None:
    await _create_topic(embedded_cluster)
    async with _producer(embedded_cluster, lambda m, a: UNKNOWN, lambda m: UNKNOWN) as producer:
        accepted = await producer.send_message_in_transaction(Message(TOPIC, b"accepted"))
        async with RemotingClient() as client:
            update = request(RequestCode.UPDATE_BROKER_CONFIG, body=b"rejectTransactionMessage=true\n")
            assert (await client.invoke(embedded_cluster.broker_addr, update, 3.0)).code == ResponseCode.SUCCESS
        with pytest.raises(SendFailedError, match="sending transaction message is forbidden"):
            await producer.send_message_in_transaction(Message(TOPIC, b"refused"))
    assert embedded_cluster.controller.context.store.max_offset_in_queue(TRANS_HALF_TOPIC, 0) == 1
    phy = decode_offset_msg_id(accepted.send_result.offset_msg_id).phy_offset
    answer = await _end_transaction(embedded_cluster, "tx-pg", accepted.send_result.queue_offset, phy)
    assert answer == (ResponseCode.SUCCESS, None)
    assert [m.body for m in _visible(embedded_cluster)] == [b"accepted"]


async def test_a_slave_refuses_to_end_transactions(tmp_path: Path) -> None:
    """SLAVE_NOT_AVAILABLE without a remark, as RocketMQ's EndTransactionProcessor answers on a slave
    (broker/src/main/java/org/apache/rocketmq/broker/processor/EndTransactionProcessor.java: only its log says why)."""
    config = BrokerConfig(store_path_root_dir=str(tmp_path / "slave"), broker_role="SLAVE", listen_port=10911)
    broker = build_context(config)
    left, _right = trio.testing.memory_stream_pair()
    peer = Connection(left, ("10.1.2.3", 40123), ("127.0.0.1", 10911)).context
    header = EndTransactionRequestHeader(
        producer_group="tx-pg", tran_state_table_offset=0, commit_log_offset=0, commit_or_rollback=8, msg_id="X"
    )
    processor = EndTransactionProcessor(broker)
    answer = await processor.process(peer, request(RequestCode.END_TRANSACTION, header.to_ext_fields()))
    assert answer is not None
    assert (answer.code, answer.remark) == (ResponseCode.SLAVE_NOT_AVAILABLE, None)
    oneway = request(RequestCode.END_TRANSACTION, header.to_ext_fields(), oneway=True)
    assert await processor.process(peer, oneway) is None


async def test_without_a_live_producer_checks_are_skipped_and_the_message_is_discarded_in_the_end(
    quiet_timer_cluster: EmbeddedCluster, autojump_clock: trio.testing.MockClock
) -> None:
    use_virtual_store_clock(quiet_timer_cluster)  # the check service ages half messages on the store clock
    await _create_topic(quiet_timer_cluster)
    async with _producer(quiet_timer_cluster, lambda m, a: UNKNOWN, lambda m: COMMIT, group="tx-gone") as producer:
        result = await producer.send_message_in_transaction(Message(TOPIC, b"abandoned"))
    await trio.sleep(15 * 60 + 1)
    store = quiet_timer_cluster.controller.context.store
    assert store.max_offset_in_queue(TRANS_CHECK_MAX_TIME_TOPIC, 0) == 0  # 15 rounds: renewed, nobody asked
    await trio.sleep(60)
    (view,) = store.get(TRANS_CHECK_MAX_TIME_TOPIC, 0, 0, 32).messages
    assert decode_record(view).properties["UNIQ_KEY"] == result.transaction_id
    assert _visible(quiet_timer_cluster) == []


#: a record's body starts 88 bytes after its start (IPv4 hosts)
_BODY_AT = 88


async def test_a_forged_half_inside_a_message_body_cannot_be_committed(
    embedded_cluster: EmbeddedCluster, autojump_clock: trio.testing.MockClock
) -> None:
    """A normal message whose body is an encoded half message (to a read-only topic, with the producer's group),
    then END_TRANSACTION COMMIT naming the offset where that body landed: every field RocketMQ checks comes from the
    record's own bytes, so the forged half was committed, publishing to a topic the sender could not write. The half
    queue's own entry must name the offset."""
    async with Admin(embedded_cluster.namesrv_addr) as admin:
        await admin.create_topic("Plain", read_queue_nums=1, write_queue_nums=1)
        await admin.create_topic("Locked", read_queue_nums=1, write_queue_nums=1, perm=PERM_READ)
    store = embedded_cluster.controller.context.store
    async with Producer("evil-pg", embedded_cluster.namesrv_addr) as producer:
        with pytest.raises(Exception):  # noqa: B017 - the client refuses: the route has no writable queue
            await producer.send(Message("Locked", b"direct"))
        inner_phy = store.commitlog.max_offset + _BODY_AT
        forged = MessageRecord(
            topic=TRANS_HALF_TOPIC,
            body=b"forged",
            queue_id=0,
            properties=encode_properties({"REAL_TOPIC": "Locked", "REAL_QID": "0", "PGROUP": "evil-pg"}),
            born_host=pack_socket_address("127.0.0.1", 1),
            store_host=pack_socket_address("127.0.0.1", 2),
        )
        sent = await producer.send(Message("Plain", encode_record(forged, queue_offset=7, phy_offset=inner_phy)))
    assert decode_offset_msg_id(sent.offset_msg_id).phy_offset + _BODY_AT == inner_phy
    answer = await _end_transaction(embedded_cluster, "evil-pg", 7, inner_phy)
    published = [decode_record(v).body for v in store.get("Locked", 0, 0, 32).messages]
    assert published == [], answer
    assert answer[0] == ResponseCode.SYSTEM_ERROR


async def test_a_commit_after_a_rollback_and_a_check_round_does_not_publish(
    embedded_cluster: EmbeddedCluster, autojump_clock: trio.testing.MockClock
) -> None:
    """A rolled-back transaction committed after a check round (a late or forged answer) stays rolled back."""
    await _create_topic(embedded_cluster)
    async with _producer(embedded_cluster, lambda m, a: ROLLBACK, lambda m: ROLLBACK) as producer:
        result = await producer.send_message_in_transaction(Message(TOPIC, b"cancelled"))
    await _wait_ops(embedded_cluster, 1)
    await trio.sleep(61)  # one check round
    phy = decode_offset_msg_id(result.send_result.offset_msg_id).phy_offset
    await _end_transaction(embedded_cluster, "tx-pg", result.send_result.queue_offset, phy, 8)
    assert _visible(embedded_cluster) == []


@pytest.mark.parametrize("check_max", [0, -3])
async def test_a_check_max_of_zero_or_less_still_checks_a_half_message_once(
    tmp_path: Path, autojump_clock: trio.testing.MockClock, check_max: int
) -> None:
    """TransactionalMessageServiceImpl.needDiscard compares the count with ``transactionCheckMax`` only once the
    ``TRANSACTION_CHECK_TIMES`` property exists: a half message never checked is checked (the copy says 1) whatever the
    setting; with ``transactionCheckMax`` <= 0 the next round discards it."""
    async with EmbeddedCluster(tmp_path / "cluster", transaction_check_max=check_max, **SMALL_STORE) as cluster:
        use_virtual_store_clock(cluster)  # the check service ages half messages on the store clock
        await _create_topic(cluster)
        checks: list[str] = []

        def check(msg: MessageExt) -> LocalTransactionState:
            checks.append(msg.properties["TRANSACTION_CHECK_TIMES"])
            return UNKNOWN

        async with _producer(cluster, lambda m, a: UNKNOWN, check) as producer:
            result = await producer.send_message_in_transaction(Message(TOPIC, b"checked once"))
            await trio.sleep(3 * 60 + 1)
        assert checks == ["1"]
        store = cluster.controller.context.store
        (view,) = store.get(TRANS_CHECK_MAX_TIME_TOPIC, 0, 0, 32).messages
        discarded = decode_record(view)
        assert discarded.properties["UNIQ_KEY"] == result.transaction_id
        assert discarded.properties["TRANSACTION_CHECK_TIMES"] == "1"
        assert _visible(cluster) == []


def _half_backlog(cluster: EmbeddedCluster, count: int, group: str = "tx-nobody") -> list[AppendResult]:
    """``count`` half messages of ``group`` stored as the send processor stores them, born a minute ago (past
    ``transactionTimeOut``, well within ``fileReservedTime``)."""
    context = cluster.controller.context
    born = int(time.time() * 1000) - 60_000
    results = []
    for i in range(count):
        props = {"REAL_TOPIC": TOPIC, "REAL_QID": "0", "PGROUP": group, "UNIQ_KEY": f"backlog-{i}"}
        record = MessageRecord(topic=TRANS_HALF_TOPIC, body=b"x" * 64, queue_id=0, flag=0,
                               properties=encode_properties(props), sys_flag=0, born_timestamp=born,
                               born_host=context.store_host, store_host=context.store_host)  # fmt: skip
        results.append(context.store.append(record))
    return results


async def _served_socket(cluster: EmbeddedCluster) -> socket.socket:
    """A blocking socket to the broker, accepted and read by it already (one GET_MAX_OFFSET answered), so bytes this
    task writes to it synchronously wait there for the broker's next look."""
    host, port = cluster.broker_addr.rsplit(":", 1)
    sock = socket.create_connection((host, int(port)))
    probe = encode_command(request(RequestCode.GET_MAX_OFFSET, {"topic": TRANS_HALF_TOPIC, "queueId": "0"}))

    def round_trip() -> RemotingCommand:
        sock.sendall(probe)
        return _answer(sock, FrameDecoder())

    await trio.to_thread.run_sync(round_trip)
    return sock


def _answer(sock: socket.socket, decoder: FrameDecoder) -> RemotingCommand:
    """The next command on a blocking socket (run in a thread)."""
    while (cmd := decoder.next_command()) is None:
        data = sock.recv(65536)
        assert data, "the broker closed the connection"
        decoder.receive_data(data)
    return cmd


async def test_other_clients_are_answered_while_a_check_round_walks_a_big_backlog(tmp_path: Path) -> None:
    """A check round over thousands of half messages (each renewed and queued for a check) must not hold the broker's
    event loop for its whole length, as RocketMQ's check runs on its own thread: a request already waiting when the
    round starts is answered while the round is still renewing the backlog (GET_MAX_OFFSET of the half queue sees
    fewer renewals than the round makes)."""
    backlog = 4000
    async with EmbeddedCluster(tmp_path / "cluster", **SMALL_STORE) as cluster:
        _half_backlog(cluster, backlog)
        decoder = FrameDecoder()
        max_offset = encode_command(request(RequestCode.GET_MAX_OFFSET, {"topic": TRANS_HALF_TOPIC, "queueId": "0"}))
        with await _served_socket(cluster) as sock:
            sock.sendall(max_offset)  # blocking, from this task: nothing else runs before the round starts
            outcome = await cluster.controller.transaction_check.check_once()
            assert outcome.checked == backlog
            answer = await trio.to_thread.run_sync(_answer, sock, decoder)
        seen = int(answer.ext_fields["offset"])
        assert backlog <= seen < 2 * backlog, f"answered only after the round renewed all {backlog}: {seen}"


async def test_commits_that_arrive_while_a_round_walks_the_backlog_are_never_stored_twice(tmp_path: Path) -> None:
    """The round yields while it walks the backlog, so END_TRANSACTION may end half messages meanwhile: one the round
    has not reached yet is counted done (no renewed copy, no check); one it already renewed keeps its op message in
    the window that makes the answer for the renewed copy an acknowledgement, never a second commit."""
    backlog = 4000
    async with EmbeddedCluster(tmp_path / "cluster", **SMALL_STORE) as cluster:
        await _create_topic(cluster)
        halves = _half_backlog(cluster, backlog, group="tx-pg")
        first, last = halves[0], halves[-1]
        commits = b"".join(
            encode_command(request(RequestCode.END_TRANSACTION, EndTransactionRequestHeader(
                producer_group="tx-pg", tran_state_table_offset=half.queue_offset, commit_log_offset=half.phy_offset,
                commit_or_rollback=8, msg_id="X").to_ext_fields()))
            for half in (first, last)
        )  # fmt: skip
        with await _served_socket(cluster) as sock:
            sock.sendall(commits)  # waiting when the round starts, which has renewed the first one when it yields
            outcome = await cluster.controller.transaction_check.check_once()
            decoder = FrameDecoder()
            answers = [await trio.to_thread.run_sync(_answer, sock, decoder) for _ in range(2)]
        assert [a.code for a in answers] == [ResponseCode.SUCCESS] * 2, answers
        assert (outcome.checked, outcome.resolved) == (backlog - 1, 1)
        assert len(_visible(cluster)) == 2
        bridge = cluster.controller.transaction_bridge
        (copy,) = [h for h in bridge.iter_queue(TRANS_HALF_TOPIC, backlog, bridge.half_max_offset())
                   if origin_of(h) == first.queue_offset]  # fmt: skip
        # The producer's answer to the check of the renewed copy, and a repeated commit of the last one.
        for queue_offset, phy in ((copy.queue_offset, copy.commit_log_offset), (last.queue_offset, last.phy_offset)):
            assert await _end_transaction(cluster, "tx-pg", queue_offset, phy) == (ResponseCode.SUCCESS, None)
        assert len(_visible(cluster)) == 2


async def test_clean_expired_cq_keeps_the_half_and_op_queues_so_later_transactions_are_checked(
    tmp_path: Path, autojump_clock: trio.testing.MockClock
) -> None:
    """cleanExpiredCQ skips every system topic (5.3.3's ConsumeQueueStore.cleanExpired: ``isSystemTopic``), the
    half and op queues too. Destroyed once retention had removed their records, the half queue restarted at offset 0,
    below ``CID_RMQ_SYS_TRANS``'s progress: a later half message was never scanned, so never checked."""
    small = {"mapped_file_size_commit_log": 4096, "mapped_file_size_consume_queue": 8 * 20}
    async with EmbeddedCluster(tmp_path / "cluster", **small) as cluster:
        use_virtual_store_clock(cluster)  # the check service ages half messages on the store clock
        await _create_topic(cluster)
        await _create_topic(cluster, "Filler")
        store = cluster.controller.context.store
        async with _producer(cluster, lambda m, a: COMMIT, lambda m: COMMIT) as producer:
            await producer.send_message_in_transaction(Message(TOPIC, b"first"))
        await _wait_ops(cluster, 1)
        await cluster.controller.transaction_check.check_once()
        assert cluster.controller.transaction_bridge.half_progress() == 1
        async with Producer("filler-pg", cluster.namesrv_addr) as filler:
            for _ in range(30):  # later traffic: the half and op records end up in segments retention removes
                await filler.send(Message("Filler", bytes(300)))
        store.flush_all_blocking()
        ratio = store.config.disk_usage_ratio
        store.config = attrs.evolve(store.config, disk_usage_ratio=lambda _path: 0.87)
        assert await store.retention.check_once() >= 1
        store.config = attrs.evolve(store.config, disk_usage_ratio=ratio)
        assert TOPIC in {topic for topic, _ in await clean_expired_consume_queues(store)}  # "first"'s queue

        checks: list[MessageExt] = []

        def check(msg: MessageExt) -> LocalTransactionState:
            checks.append(msg)
            return COMMIT

        async with _producer(cluster, lambda m, a: UNKNOWN, check) as producer:
            await producer.send_message_in_transaction(Message(TOPIC, b"later"))
            with trio.fail_after(150):
                while not checks:
                    await trio.sleep(1)
        assert checks[0].body == b"later"


async def test_a_non_positive_check_interval_runs_rounds_back_to_back_instead_of_stopping_the_broker(
    tmp_path: Path,
) -> None:
    """``transactionCheckInterval`` is a wait: TransactionalMessageCheckService's ``waitForRunning`` with 0 or less
    returns at once (common/src/main/java/org/apache/rocketmq/common/ServiceThread.java), so rounds follow each
    other. Set to -1 by UPDATE_BROKER_CONFIG (or in broker.conf), the next wait raised out of the check service and
    took the whole broker down. Real time: the rounds run back to back, so virtual time would never advance."""
    async with EmbeddedCluster(tmp_path / "cluster", transaction_check_interval=50, **SMALL_STORE) as cluster:
        check = cluster.controller.transaction_check
        async with RemotingClient() as client:
            update = request(RequestCode.UPDATE_BROKER_CONFIG, body=b"transactionCheckInterval=-1\n")
            assert (await client.invoke(cluster.broker_addr, update, 3.0)).code == ResponseCode.SUCCESS
            with trio.fail_after(30):  # a hang guard: back to back, a hundred rounds take milliseconds
                first = check.rounds
                while check.rounds < first + 100:
                    await trio.sleep(0.01)
            restore = request(RequestCode.UPDATE_BROKER_CONFIG, body=b"transactionCheckInterval=60000\n")
            assert (await client.invoke(cluster.broker_addr, restore, 3.0)).code == ResponseCode.SUCCESS
            runtime = await client.invoke(cluster.broker_addr, request(RequestCode.GET_BROKER_RUNTIME_INFO), 3.0)
            assert runtime.code == ResponseCode.SUCCESS


async def test_an_immunity_of_minus_one_seconds_means_the_transaction_timeout(
    embedded_cluster: EmbeddedCluster, autojump_clock: trio.testing.MockClock
) -> None:
    """TransactionalMessageServiceImpl.getImmunityTime reads ``CHECK_IMMUNITY_TIME_IN_SECONDS`` of -1 (also what its
    getLong makes of a value that is no number) as ``transactionTimeOut``: a half message born 5 s before a round is
    too young for it and is first asked about a round later. Before, -1 became -1000 ms: asked at once."""
    use_virtual_store_clock(embedded_cluster)  # the check service ages half messages on the store clock
    await _create_topic(embedded_cluster)
    checks: list[float] = []

    def check(msg: MessageExt) -> LocalTransactionState:
        checks.append(trio.current_time())
        return COMMIT

    context = embedded_cluster.controller.context
    async with _producer(embedded_cluster, lambda m, a: UNKNOWN, check) as producer:
        start = trio.current_time()
        await producer.send(Message(TOPIC, b"plain"))  # the producer's connection to the broker
        await trio.sleep(55)  # the first round runs 60 s after the start
        # Stored as the send processor stores a half message, born now on the check service's (virtual) clock.
        props = {"REAL_TOPIC": TOPIC, "REAL_QID": "0", "PGROUP": "tx-pg", "UNIQ_KEY": "immunity-minus-one",
                 "CHECK_IMMUNITY_TIME_IN_SECONDS": "-1"}  # fmt: skip
        born = embedded_cluster.controller.transaction_check.now_ms()
        context.store.append(MessageRecord(topic=TRANS_HALF_TOPIC, body=b"half", queue_id=0,
                                           properties=encode_properties(props), born_timestamp=born,
                                           born_host=context.store_host, store_host=context.store_host))  # fmt: skip
        await _wait_visible(embedded_cluster, 2, within=120)
    assert len(checks) == 1 and 120 <= checks[0] - start < 121


@pytest.mark.parametrize("backlog_of", ["renewed half messages", "op messages"])
async def test_a_round_yields_while_it_reads_what_is_left_to_scan_and_the_op_window(
    tmp_path: Path, backlog_of: str
) -> None:
    """After the scan, a round collects the transactions with a copy left to scan (every half message past its new
    progress: the thousands it renewed when their producer is gone) and reads the op messages from its op progress
    on (one per transaction ended since the last round: tens of thousands a minute on a busy broker, ~45 µs each).
    Both ran in one synchronous step, so the broker answered nobody for as long (seconds every round at such
    rates), where RocketMQ's check runs on its own thread. Seen from another task: the round must let it run after
    its last renewal and before it commits its progress."""
    backlog = 4000
    async with EmbeddedCluster(tmp_path / "cluster", **SMALL_STORE) as cluster:
        bridge = cluster.controller.transaction_bridge
        if backlog_of == "op messages":
            for half in _half_backlog(cluster, backlog, group="tx-ended"):  # ended since the last round
                stored = bridge.look_half(half.phy_offset)
                assert stored is not None
                bridge.put_op_message(stored)
            # Their half messages lie below the progress (as if a round had scanned past them): the round's long step
            # is the read of its op window alone: the scan's walk of resolved half messages yields too and must not
            # stand in for it.
            bridge.commit_progress(backlog, 0)
            _half_backlog(cluster, 1)  # renewed by the round
            after_renewals = backlog + 2
        else:
            _half_backlog(cluster, backlog)  # all renewed by the round
            after_renewals = 2 * backlog
        seen: set[tuple[int, int]] = set()
        turns = 0

        async def watch() -> None:
            nonlocal turns
            while True:
                seen.add((bridge.half_max_offset(), bridge.half_progress()))
                turns += 1
                await trio.lowlevel.checkpoint()

        async with trio.open_nursery() as nursery:
            nursery.start_soon(watch)
            await trio.lowlevel.checkpoint()
            before = turns
            await cluster.controller.transaction_check.check_once()
            during = turns - before
            nursery.cancel_scope.cancel()
        assert bridge.half_progress() > 0
        if backlog_of == "op messages":
            # The op window is read once, by the scan (before the renewal), yielding every 64 op messages.
            assert during >= backlog // 128, during
        else:
            assert (after_renewals, 0) in seen, sorted(seen)[-3:]


async def test_a_check_round_stops_after_a_minute_of_work_and_the_next_goes_on_from_there(tmp_path: Path) -> None:
    """4.9.8's check ends a round that has worked ``MAX_PROCESS_TIME_LIMIT`` (60 s) at the half message it reached,
    storing the progress made (``TransactionalMessageServiceImpl.check``, "process time reach max"): the next round goes
    on from there. Ours walked the whole backlog in one round however long it took. Here the round's clock advances a
    second per look, as if each half message cost a second: the round stops at the first one it reaches past 60 s."""
    backlog = 100
    async with EmbeddedCluster(tmp_path / "cluster", **SMALL_STORE) as cluster:
        await _create_topic(cluster)
        _half_backlog(cluster, backlog)
        ticks = itertools.count()
        start = int(time.time() * 1000)
        bridge = cluster.controller.transaction_bridge
        check = TransactionCheckService(cluster.controller.context, bridge, now_ms=lambda: start + next(ticks) * 1000)
        first = await check.check_once()
        assert 0 < first.checked < backlog
        assert bridge.half_progress() == first.checked  # the progress made is kept
        second = await check.check_once()  # the rest of the backlog, then the first round's renewed copies
        assert second.checked > backlog - first.checked
        assert bridge.half_progress() == first.checked + second.checked


async def test_a_half_message_old_enough_by_the_time_the_round_reaches_it_is_checked(tmp_path: Path) -> None:
    """4.9.8's ``TransactionalMessageServiceImpl.check`` measures each half message's age when it reaches it
    (``System.currentTimeMillis() - bornTimestamp`` per message), so one that turns ``transactionTimeOut`` old while
    the round works is checked in that round. Ours measured every age against the round's start and ended the scan
    at the first half message young then, putting off its check a whole round. Here the round starts half a second
    before the backlog is old enough and its clock advances a second per look."""
    async with EmbeddedCluster(tmp_path / "cluster", **SMALL_STORE) as cluster:
        await _create_topic(cluster)
        _half_backlog(cluster, 2)
        bridge = cluster.controller.transaction_bridge
        born = max(h.born_timestamp for h in bridge.iter_queue(TRANS_HALF_TOPIC, 0, bridge.half_max_offset()))
        start = born + cluster.controller.context.config.transaction_time_out - 500
        ticks = itertools.count()
        check = TransactionCheckService(cluster.controller.context, bridge, now_ms=lambda: start + next(ticks) * 1000)
        outcome = await check.check_once()
        assert outcome.checked == 2
        assert bridge.half_progress() == 2


async def test_a_round_the_store_refuses_midway_keeps_the_progress_it_made(tmp_path: Path) -> None:
    """The store refuses appends partway through a round (the disk crossed the critical ratio, the page cache got
    busy): RocketMQ's check stops putting half messages back there and still stores the half offset it reached
    (``putBackHalfMsgQueue`` fails, the loop retries the same offset until ``MAX_PROCESS_TIME_LIMIT``, then
    ``updateConsumeOffset``). Ours dropped the whole round's progress, so the next round renewed the transactions
    renewed before the refusal a second time: two live copies each, two checks every round from then on."""
    backlog, refused_after = 4000, 1000
    async with EmbeddedCluster(tmp_path / "cluster", **SMALL_STORE) as cluster:
        _half_backlog(cluster, backlog)
        store = cluster.controller.context.store
        bridge = cluster.controller.transaction_bridge
        check = cluster.controller.transaction_check

        async def fill_the_disk() -> None:
            while bridge.half_max_offset() < backlog + refused_after:
                await trio.lowlevel.checkpoint()
            store.disk_full_reason = "disk full (test)"

        async with trio.open_nursery() as nursery:
            nursery.start_soon(fill_the_disk)
            await trio.lowlevel.checkpoint()
            with contextlib.suppress(Exception):  # ours raised out of the round
                await check.check_once()
        renewed_first = bridge.half_max_offset() - backlog
        assert refused_after <= renewed_first < backlog
        store.disk_full_reason = None
        second = await check.check_once()
        assert second.checked == backlog
        copies = [origin_of(h) for h in bridge.iter_queue(TRANS_HALF_TOPIC, bridge.half_progress(),
                                                          bridge.half_max_offset())]  # fmt: skip
        assert sorted(copies) == list(range(backlog))


async def test_a_check_service_taking_over_yields_while_it_reads_the_op_window(tmp_path: Path) -> None:
    """The check service starts with the broker and, in DLedger mode, each time a member becomes the leader; it first
    reads the op messages past its op progress (one per transaction ended since the last round, and every one since
    the oldest transaction still live) to rebuild what END_TRANSACTION consults. That read ran in one synchronous
    step, as the rounds' did: a new leader answered nobody, its followers' heartbeats neither, for as long. Seen from
    another task: starting the service must let it run while the window is read."""
    backlog = 4000
    async with EmbeddedCluster(tmp_path / "cluster", **SMALL_STORE) as cluster:
        bridge = cluster.controller.transaction_bridge
        for half in _half_backlog(cluster, backlog, group="tx-ended"):  # ended, not scanned yet
            stored = bridge.look_half(half.phy_offset)
            assert stored is not None
            bridge.put_op_message(stored)
        taking_over = TransactionCheckService(cluster.controller.context, bridge)
        turns = 0

        async def watch() -> None:
            nonlocal turns
            while True:
                turns += 1
                await trio.lowlevel.checkpoint()

        async with trio.open_nursery() as nursery:
            nursery.start_soon(watch)
            await trio.lowlevel.checkpoint()
            before = turns
            await nursery.start(taking_over.run)
            during = turns - before
            nursery.cancel_scope.cancel()
        assert len(bridge.resolved) == backlog
        assert during > 10, during  # one turn per 64 op messages read; none while the read blocked the loop


async def test_a_commit_after_the_half_was_discarded_still_publishes_it_once(
    tmp_path: Path, autojump_clock: trio.testing.MockClock
) -> None:
    """Discarding moves a copy to TRANS_CHECK_MAX_TIME_TOPIC but leaves the half message where it is, with no op
    message: 4.9.8's EndTransactionProcessor reads it by offset and publishes a late COMMIT. It was answered SUCCESS
    and nothing was stored: the producer's committed transaction was lost. A second commit, also after a restart, is
    acknowledged without storing it again."""
    async with EmbeddedCluster(tmp_path / "cluster", transaction_check_max=0, **SMALL_STORE) as cluster:
        use_virtual_store_clock(cluster)  # the check service ages half messages on the store clock
        await _create_topic(cluster)
        async with _producer(cluster, lambda m, a: UNKNOWN, lambda m: UNKNOWN) as producer:
            result = await producer.send_message_in_transaction(Message(TOPIC, b"late commit"))
            await trio.sleep(3 * 60 + 1)  # checked once, then discarded; a round runs past it
        store = cluster.controller.context.store
        assert store.max_offset_in_queue(TRANS_CHECK_MAX_TIME_TOPIC, 0) == 1
        offset = result.send_result.queue_offset
        phy = decode_offset_msg_id(result.send_result.offset_msg_id).phy_offset
        assert await _end_transaction(cluster, "tx-pg", offset, phy) == (ResponseCode.SUCCESS, None)
        assert [m.body for m in _visible(cluster)] == [b"late commit"]
        await trio.sleep(2 * 60 + 1)  # rounds move the op progress past the commit's op message
        assert await _end_transaction(cluster, "tx-pg", offset, phy) == (ResponseCode.SUCCESS, None)
        await cluster.restart_broker()
        assert await _end_transaction(cluster, "tx-pg", offset, phy) == (ResponseCode.SUCCESS, None)
        assert await _end_transaction(cluster, "tx-pg", offset, phy, 12) == (ResponseCode.SUCCESS, None)
        assert [m.body for m in _visible(cluster)] == [b"late commit"]


async def test_a_commit_after_a_discard_and_a_restart_still_publishes_it(
    tmp_path: Path, autojump_clock: trio.testing.MockClock
) -> None:
    """The same with a broker restart between the discard and the late COMMIT: nothing in memory says it was
    discarded, the log must."""
    async with EmbeddedCluster(tmp_path / "cluster", transaction_check_max=0, **SMALL_STORE) as cluster:
        await _create_topic(cluster)
        async with _producer(cluster, lambda m, a: UNKNOWN, lambda m: UNKNOWN) as producer:
            result = await producer.send_message_in_transaction(Message(TOPIC, b"after restart"))
            await trio.sleep(3 * 60 + 1)
        await cluster.restart_broker()
        offset = result.send_result.queue_offset
        phy = decode_offset_msg_id(result.send_result.offset_msg_id).phy_offset
        assert await _end_transaction(cluster, "tx-pg", offset, phy) == (ResponseCode.SUCCESS, None)
        assert await _end_transaction(cluster, "tx-pg", offset, phy) == (ResponseCode.SUCCESS, None)
        assert [m.body for m in _visible(cluster)] == [b"after restart"]


async def test_a_request_answered_end_transaction_with_unknown_gets_no_response(
    embedded_cluster: EmbeddedCluster, autojump_clock: trio.testing.MockClock
) -> None:
    """4.9.8's EndTransactionProcessor returns null for TRANSACTION_NOT_TYPE: no response even to a request that waits
    for one; it was answered SUCCESS."""
    await _create_topic(embedded_cluster)
    async with _producer(embedded_cluster, lambda m, a: UNKNOWN, lambda m: UNKNOWN) as producer:
        result = await producer.send_message_in_transaction(Message(TOPIC, b"pending"))
    offset = result.send_result.queue_offset
    phy = decode_offset_msg_id(result.send_result.offset_msg_id).phy_offset
    assert await _unanswered(embedded_cluster, "tx-pg", offset, phy, 0)
    assert _visible(embedded_cluster) == []


async def test_an_end_transaction_of_another_kind_is_refused_with_javas_header_check(
    embedded_cluster: EmbeddedCluster, autojump_clock: trio.testing.MockClock
) -> None:
    """A commitOrRollback other than 0, 8 or 12 fails 4.9.8's EndTransactionRequestHeader.checkFields, which the
    header's decode runs: SYSTEM_ERROR with the exception's simple description (it got no answer, so a caller waiting
    for one timed out)."""
    await _create_topic(embedded_cluster)
    async with _producer(embedded_cluster, lambda m, a: UNKNOWN, lambda m: UNKNOWN) as producer:
        result = await producer.send_message_in_transaction(Message(TOPIC, b"pending"))
    offset = result.send_result.queue_offset
    phy = decode_offset_msg_id(result.send_result.offset_msg_id).phy_offset
    remark = (
        "org.apache.rocketmq.remoting.exception.RemotingCommandException: commitOrRollback field wrong, "
        "org.apache.rocketmq.common.protocol.header.EndTransactionRequestHeader.checkFields("
        "EndTransactionRequestHeader.java:60)"
    )
    for kind in (4, -1, 9):
        assert await _end_transaction(embedded_cluster, "tx-pg", offset, phy, kind) == (
            ResponseCode.SYSTEM_ERROR,
            remark,
        )
    assert _visible(embedded_cluster) == []


def _count_reads(cluster: EmbeddedCluster, topic: str) -> list[int]:
    """Count the broker store's reads of ``topic`` from now on (one item per ``get``), reads passing through."""
    store = cluster.controller.context.store
    reads: list[int] = []
    plain_get = store.get

    def counting_get(read_topic: str, *args: object, **kwargs: object) -> object:
        if read_topic == topic:
            reads.append(1)
        return plain_get(read_topic, *args, **kwargs)  # type: ignore[arg-type]

    store.get = counting_get  # type: ignore[method-assign]
    return reads


async def test_late_answers_after_a_restart_read_the_half_queue_past_the_progress_once(tmp_path: Path) -> None:
    """After a restart, before the first round, an END_TRANSACTION naming a half message below the check progress
    asks whether a copy of its transaction is left past the progress (4.9.8 answers from the half's own offset;
    ours must not commit a transaction twice). Each such answer read the whole half queue past the progress again:
    a producer repeating its COMMIT over a backlog of unended half messages cost one full scan per request. One read
    serves them all until the next round."""
    backlog, answers = 640, 10
    async with EmbeddedCluster(tmp_path / "cluster", **SMALL_STORE) as cluster:
        await _create_topic(cluster)
        (ended,) = _half_backlog(cluster, 1, group="tx-pg")
        assert await _end_transaction(cluster, "tx-pg", ended.queue_offset, ended.phy_offset) == (0, None)
        await cluster.controller.transaction_check.check_once()  # the progress passes it and its op message
        _half_backlog(cluster, backlog)  # past the progress, never ended
        await cluster.restart_broker()
        reads = _count_reads(cluster, TRANS_HALF_TOPIC)
        for _ in range(answers):
            assert await _end_transaction(cluster, "tx-pg", ended.queue_offset, ended.phy_offset) == (0, None)
        assert [m.body for m in _visible(cluster)] == [b"x" * 64]
        assert len(reads) <= backlog // 32 + 2, len(reads)


async def test_late_commits_of_discarded_halves_do_not_each_read_every_discarded_one(tmp_path: Path) -> None:
    """A late COMMIT of a half message the check service scanned past asks whether it was discarded (4.9.8 then
    still publishes it: the half stays where it is). Each asked by reading all of TRANS_CHECK_MAX_TIME_TOPIC, which
    only grows (every transaction a producer never resolved): a burst of late answers cost a full read each."""
    backlog, answers = 320, 10
    async with EmbeddedCluster(tmp_path / "cluster", transaction_check_max=0, **SMALL_STORE) as cluster:
        await _create_topic(cluster)
        halves = _half_backlog(cluster, backlog, group="tx-pg")
        check = cluster.controller.transaction_check
        await check.check_once()  # checked once (nobody to ask)
        assert (await check.check_once()).discarded == backlog
        reads = _count_reads(cluster, TRANS_CHECK_MAX_TIME_TOPIC)
        for half in halves[:answers]:
            assert await _end_transaction(cluster, "tx-pg", half.queue_offset, half.phy_offset) == (0, None)
        assert len(_visible(cluster)) == answers
        assert len(reads) <= backlog // 32 + 2, len(reads)


async def test_a_clock_step_counts_from_the_next_round_not_from_a_restart(embedded_cluster: EmbeddedCluster) -> None:
    """4.9.8's check reads ``System.currentTimeMillis()`` each round (TransactionalMessageServiceImpl.check). Ours
    read the wall clock once when the service started and advanced it by Trio's clock since: after the host's clock
    stepped (NTP, a suspended VM) half messages' ages stayed off until the broker restarted. Here the broker's clock
    steps an hour ahead: the next round finds the half message born just before an hour old, and checks it."""
    now = [int(time.time() * 1000)]
    store = embedded_cluster.controller.context.store
    store.config = attrs.evolve(store.config, now_ms=lambda: now[0])
    context = embedded_cluster.controller.context
    props = {"REAL_TOPIC": TOPIC, "REAL_QID": "0", "PGROUP": "tx-pg", "UNIQ_KEY": "before-the-step"}
    context.store.append(MessageRecord(topic=TRANS_HALF_TOPIC, body=b"half", queue_id=0,
                                       properties=encode_properties(props), born_timestamp=now[0],
                                       born_host=context.store_host, store_host=context.store_host))  # fmt: skip
    check = embedded_cluster.controller.transaction_check
    assert (await check.check_once()).checked == 0  # born just now: immune for transactionTimeOut
    now[0] += 3_600_000  # the clock steps an hour ahead
    assert (await check.check_once()).checked == 1


async def test_a_half_message_past_a_short_immunity_is_checked_before_the_transaction_timeout(
    embedded_cluster: EmbeddedCluster,
) -> None:
    """4.9.8's check measures a half message with ``CHECK_IMMUNITY_TIME_IN_SECONDS`` against that immunity, not
    ``transactionTimeOut``: past it, it is checked; only a half message without the property ends the scan while
    younger than ``transactionTimeOut`` (broker/src/main/java/org/apache/rocketmq/broker/transaction/queue/
    TransactionalMessageServiceImpl.java check, checkImmunityTime). Ours ended the scan at one immune for 1 s and
    3 s old (younger than the 6 s timeout): neither it nor the older half message after it was checked."""
    now = [int(time.time() * 1000)]
    store = embedded_cluster.controller.context.store
    store.config = attrs.evolve(store.config, now_ms=lambda: now[0])
    context = embedded_cluster.controller.context
    for uniq, age, extra in (("short-immunity", 3_000, {"CHECK_IMMUNITY_TIME_IN_SECONDS": "1"}), ("old", 10_000, {})):
        props = {"REAL_TOPIC": TOPIC, "REAL_QID": "0", "PGROUP": "tx-pg", "UNIQ_KEY": uniq, **extra}
        context.store.append(MessageRecord(topic=TRANS_HALF_TOPIC, body=b"half", queue_id=0,
                                           properties=encode_properties(props), born_timestamp=now[0] - age,
                                           born_host=context.store_host, store_host=context.store_host))  # fmt: skip
    check = embedded_cluster.controller.transaction_check
    assert (await check.check_once()).checked == 2


async def test_late_commits_of_discarded_halves_read_the_op_queue_once(tmp_path: Path) -> None:
    """A late COMMIT of a discarded half message asks whether its transaction was ended since the discard: 4.9.8's
    EndTransactionProcessor reads no op message at all, and its check reads each op message once per round
    (TransactionalMessageServiceImpl ``fillOpRemoveMap``). Ours read the op queue from the discard point to its end
    again for every such answer: a burst of late answers over a long op queue cost a full read each."""
    backlog, ops, answers = 64, 320, 10
    async with EmbeddedCluster(tmp_path / "cluster", transaction_check_max=0, **SMALL_STORE) as cluster:
        await _create_topic(cluster)
        halves = _half_backlog(cluster, backlog, group="tx-pg")
        check = cluster.controller.transaction_check
        await check.check_once()  # checked once (nobody to ask)
        assert (await check.check_once()).discarded == backlog
        bridge = cluster.controller.transaction_bridge
        for ended in _half_backlog(cluster, ops, group="tx-other"):  # transactions ended after the discards
            half = bridge.look_half(ended.phy_offset)
            assert half is not None
            bridge.put_op_message(half)
        reads = _count_reads(cluster, TRANS_OP_HALF_TOPIC)
        for half in halves[:answers]:
            assert await _end_transaction(cluster, "tx-pg", half.queue_offset, half.phy_offset) == (0, None)
        assert len(_visible(cluster)) == answers
        for half in halves[:answers]:  # each repeated COMMIT is acknowledged, not stored again
            assert await _end_transaction(cluster, "tx-pg", half.queue_offset, half.phy_offset) == (0, None)
        assert len(_visible(cluster)) == answers
        assert len(reads) <= ops // 32 + 2 * answers + 2, len(reads)


async def test_a_check_round_reads_each_op_message_once(tmp_path: Path) -> None:
    """4.9.8's check pulls the op queue in batches of 32 from its op offset once per round (``fillOpRemoveMap``,
    broker/src/main/java/org/apache/rocketmq/broker/transaction/queue/TransactionalMessageServiceImpl.java); ours
    read the round's op window twice more (after the scan, and again when committing the progress)."""
    ops = 320
    async with EmbeddedCluster(tmp_path / "cluster", **SMALL_STORE) as cluster:
        await _create_topic(cluster)
        bridge = cluster.controller.transaction_bridge
        for ended in _half_backlog(cluster, ops, group="tx-pg"):
            half = bridge.look_half(ended.phy_offset)
            assert half is not None
            bridge.put_op_message(half)
        reads = _count_reads(cluster, TRANS_OP_HALF_TOPIC)
        outcome = await cluster.controller.transaction_check.check_once()
        assert outcome.resolved == ops
        assert bridge.op_progress() == ops
        assert len(reads) <= ops // 32 + 2, len(reads)
