"""Message trace: the record encoding against golden Java 4.9.8 and C++ 2.1 text, and traces our producer, consumer
and transactional producer write through the embedded broker (virtual time: the dispatcher's 100 ms polls and 500 ms
batch age pass at once), found again by message id as ``mqadmin queryMsgTraceById`` finds them."""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import trio
import trio.testing

from broker.embedded import EmbeddedCluster
from client.admin import Admin
from client.consumer.listener import ConsumeConcurrentlyStatus, ConsumeOrderlyStatus
from client.consumer.lite_pull import LitePullConsumer
from client.consumer.push import PushConsumer
from client.errors import ClientStateError, MQBrokerError, TopicRouteNotFoundError
from client.message import Message, MessageExt
from client.mqadmin_trace import find_traces
from client.producer import Producer
from client.trace import TRACE_TOPIC, MessageType, TraceDispatcher, TraceRecord, TraceType, decode_trace_data
from client.trace.codec import encode_record, trace_keys
from client.trace.view import TraceView, trace_views
from client.transaction import LocalTransactionState, TransactionProducer
from remoting.client import RemotingClient
from remoting.codec.bodies import ConsumeFromWhere, MessageQueue
from remoting.codec.codes import RequestCode, ResponseCode
from remoting.codec.command import RemotingCommand
from remoting.codec.message import decode_record
from remoting.codec.msgid import offset_msg_id, pack_socket_address
from remoting.dispatch import Dispatcher, ProcessorPool, RequestContext
from remoting.server import RemotingServer
from tests.client.test_master_watch import register_as_master
from tests.conftest import SMALL_STORE
from tests.semantics.helpers import use_virtual_store_clock

A, B = "\x01", "\x02"
JAVA_PUB = A.join(
    ["Pub", "1700000000000", "DefaultRegion", "PG", "T", "MSGID1", "TagA", "k1 k2", "10.0.0.1:10911", "5", "3", "0",
     "OFFSETID1", "true"]
) + B  # fmt: skip
JAVA_SUB_BEFORE = A.join(["SubBefore", "1700000000010", "null", "CG", "REQ1", "MSGID1", "0", "k1 k2"]) + B
JAVA_SUB_AFTER = A.join(["SubAfter", "REQ1", "MSGID1", "7", "true", "k1 k2", "0", "1700000000017", "CG"]) + B
JAVA_END = A.join(
    ["EndTransaction", "1700000000020", "DefaultRegion", "TPG", "T", "MSGID2", "null", "null", "10.0.0.1:10911", "2",
     "MSGID2", "COMMIT_MESSAGE", "false"]
) + B  # fmt: skip
# The C++ core 2.1 (src/trace/TraceUtil.cpp): SubAfter ends after its keys, and writes "dKey" for none.
CPP_SUB_BEFORE = A.join(["SubBefore", "1700000000030", "DEFAULT_REGION", "CCG", "REQ9", "MSGID3", "0", "dKey"]) + B
CPP_SUB_AFTER = A.join(["SubAfter", "REQ9", "MSGID3", "4", "true", "dKey"]) + B


def test_java_records_decode_and_encode_back_to_the_same_text() -> None:
    text = JAVA_PUB + JAVA_SUB_BEFORE + JAVA_SUB_AFTER + JAVA_END
    records = decode_trace_data(text)
    assert [r.type for r in records] == [
        TraceType.Pub,
        TraceType.SubBefore,
        TraceType.SubAfter,
        TraceType.EndTransaction,
    ]
    pub, before, after, end = records
    assert (pub.group, pub.msg_id, pub.tags, pub.keys, pub.store_host, pub.body_length, pub.cost_time) == (
        "PG", "MSGID1", "TagA", "k1 k2", "10.0.0.1:10911", 5, 3,
    )  # fmt: skip
    assert (pub.msg_type, pub.offset_msg_id, pub.success) == (MessageType.Normal_Msg, "OFFSETID1", True)
    assert (before.region_id, before.request_id, before.group) == ("null", "REQ1", "CG")
    assert (after.request_id, after.cost_time, after.timestamp, after.group) == ("REQ1", 7, 1700000000017, "CG")
    assert (end.transaction_state, end.msg_type, end.tags) == ("COMMIT_MESSAGE", MessageType.Trans_msg_Commit, None)
    assert "".join(encode_record(r) for r in records) == text
    assert trace_keys(records[:1]) == ["MSGID1", "k1", "k2"]


def test_a_pub_record_of_twelve_fields_decodes_as_a_successful_send() -> None:
    """A Pub record that ends after its msgType (no offsetMsgId, no success), as the oldest trace writers left it, is
    read by 4.9.8's ``TraceDataEncoder.decoderFromTraceDataString`` (TraceContext's success stays true) and by
    rocketmq-dashboard's ``MsgTraceDecodeUtil`` (``TRACE_MSG_PUB_V1_LEN``); ours skipped it, so the send was missing
    from ``queryMsgTraceById``."""
    from remoting.codec.message import MessageExt as Ext

    short_pub = A.join(JAVA_PUB.split(A)[:12]) + B
    records = decode_trace_data(short_pub)
    assert [(r.type, r.msg_id, r.group, r.cost_time, r.offset_msg_id, r.success) for r in records] == [
        (TraceType.Pub, "MSGID1", "PG", 3, None, True)
    ]
    carrier = Ext(
        0, 0, 0, 0, 0, 0, 0, 0, ("10.9.9.9", 4242), 0, ("127.0.0.1", 1), 0, 0, short_pub.encode(), "T", {}, b""
    )
    assert [v.status for v in trace_views("MSGID1", [carrier])] == ["success"]


def test_a_recall_record_of_rocketmq_5_decodes_and_encodes_back() -> None:
    """5.3.3's ``TraceDataEncoder`` writes a ``Recall`` record (time, region, group, topic, msgId, success) for a
    recalled timer message (``DefaultRecallMessageTraceHook``) and ``decoderFromTraceDataString`` reads it, so
    ``TraceView.decodeFromTraceTransData`` lists it; ours skipped it, and the dashboard's trace lacked the recall."""
    from remoting.codec.message import MessageExt as Ext

    recall = A.join(["Recall", "1700000000040", "DefaultRegion", "PG", "T", "MSGID1", "false"]) + B
    records = decode_trace_data(JAVA_PUB + recall)
    assert [(r.type.value, r.timestamp, r.group, r.topic, r.msg_id, r.success) for r in records[1:]] == [
        ("Recall", 1700000000040, "PG", "T", "MSGID1", False)
    ]
    assert "".join(encode_record(r) for r in records) == JAVA_PUB + recall
    body = (JAVA_PUB + recall).encode()
    carrier = Ext(0, 0, 0, 0, 0, 0, 0, 0, ("10.9.9.9", 4242), 0, ("127.0.0.1", 1), 0, 0, body, "T", {}, b"")
    assert [(v.record.type.value, v.status) for v in trace_views("MSGID1", [carrier])] == [
        ("Pub", "success"),
        ("Recall", "failed"),
    ]


def test_cpp_records_decode_and_the_view_fills_the_consume_group_from_sub_before() -> None:
    from remoting.codec.message import MessageExt as Ext

    body = (CPP_SUB_BEFORE + CPP_SUB_AFTER + "garbage" + A + "x" + B).encode()
    carrier = Ext(0, 0, 0, 0, 0, 0, 0, 0, ("10.9.9.9", 4242), 0, ("127.0.0.1", 1), 0, 0, body, "T", {}, b"")
    views = trace_views("MSGID3", [carrier])
    after = next(v for v in views if v.record.type is TraceType.SubAfter)
    assert (after.record.group, after.record.timestamp, after.record.cost_time) == ("CCG", 1700000000030, 4)
    assert after.client_host == "10.9.9.9" and after.status == "success"
    assert isinstance(after, TraceView)


def test_cloud_sub_after_records_run_into_the_next_record_and_decode_apart() -> None:
    """With ``AccessChannel.CLOUD`` 4.9.8's ``TraceDataEncoder.encoderFromContextBean`` ends a SubAfter record after
    its context code with 0x01 and no 0x02, so a batch's next record (the listener call's next message, or another
    call's records) follows in the same 0x02 chunk. Java's ``decoderFromTraceDataString`` then parses the next
    record's type name as the time and fails the whole query; ours read the next record's request id as the group
    and lost that record. Each decodes on its own now, and the view takes the group and time from SubBefore."""
    from remoting.codec.message import MessageExt as Ext

    befores = "".join(
        A.join(["SubBefore", "1700000000010", "null", "CG", "REQ1", msg_id, "0", "k"]) + B for msg_id in ("M1", "M2")
    )
    cloud_afters = "".join(A.join(["SubAfter", "REQ1", msg_id, "7", "true", "k", "0"]) + A for msg_id in ("M1", "M2"))
    records = decode_trace_data(befores + cloud_afters + JAVA_PUB)
    assert [(r.type, r.msg_id) for r in records] == [
        (TraceType.SubBefore, "M1"),
        (TraceType.SubBefore, "M2"),
        (TraceType.SubAfter, "M1"),
        (TraceType.SubAfter, "M2"),
        (TraceType.Pub, "MSGID1"),
    ]
    assert all((r.group, r.timestamp, r.request_id) == (None, 0, "REQ1") for r in records[2:4])
    body = (befores + cloud_afters).encode()
    carrier = Ext(0, 0, 0, 0, 0, 0, 0, 0, ("10.9.9.9", 4242), 0, ("127.0.0.1", 1), 0, 0, body, "T", {}, b"")
    after = next(v for v in trace_views("M1", [carrier]) if v.record.type is TraceType.SubAfter)
    assert (after.record.group, after.record.timestamp, after.record.cost_time) == ("CG", 1700000000010, 7)


async def test_a_full_queue_drops_records_and_counts_them() -> None:
    from client.instance import new_instance

    dispatcher = TraceDispatcher(new_instance(None, "127.0.0.1:1"), "g", "PRODUCE", queue_size=4)
    for i in range(10):
        dispatcher.append(TraceRecord(TraceType.EndTransaction, msg_id=str(i)))
    assert dispatcher.dropped == 6
    assert dispatcher.topic == TRACE_TOPIC and dispatcher.inner_group.startswith("_INNER_TRACE_PRODUCER-g-PRODUCE-")


async def _create(cluster: EmbeddedCluster, topic: str) -> None:
    async with Admin(cluster.namesrv_addr) as admin:
        await admin.create_topic(topic, read_queue_nums=2, write_queue_nums=2)


async def _traces(cluster: EmbeddedCluster, msg_id: str, topic: str | None, want: set[TraceType]) -> list[TraceView]:
    """The trace of ``msg_id`` once it holds every record type in ``want`` (they arrive in batches)."""
    async with Admin(cluster.namesrv_addr) as admin:
        with trio.fail_after(60):
            while True:
                with contextlib.suppress(TopicRouteNotFoundError):  # the trace topic is created by its first batch
                    views = await find_traces(admin, msg_id, topic)
                    if {v.record.type for v in views} >= want:
                        return views
                await trio.sleep(0.2)


async def test_a_message_sent_and_consumed_with_trace_on_has_its_publish_and_consume_records(
    embedded_cluster: EmbeddedCluster, autojump_clock: trio.testing.MockClock
) -> None:
    await _create(embedded_cluster, "TracedTopic")
    done = trio.Event()

    async def listener(msgs: list[MessageExt]) -> ConsumeConcurrentlyStatus:
        done.set()
        return ConsumeConcurrentlyStatus.CONSUME_SUCCESS

    consumer = PushConsumer("traced-cg", embedded_cluster.namesrv_addr, enable_msg_trace=True)
    consumer.subscribe("TracedTopic")
    consumer.register_message_listener(listener)
    async with consumer, Producer("traced-pg", embedded_cluster.namesrv_addr, enable_msg_trace=True) as producer:
        sent = await producer.send(Message("TracedTopic", b"traced body", tags="TagT", keys="order-9"))
        with trio.fail_after(60):
            await done.wait()
        views = await _traces(
            embedded_cluster, sent.msg_id, None, {TraceType.Pub, TraceType.SubBefore, TraceType.SubAfter}
        )
        assert producer.trace is not None and producer.trace.dropped == 0
    by_type = {v.record.type: v.record for v in views}
    pub, before, after = by_type[TraceType.Pub], by_type[TraceType.SubBefore], by_type[TraceType.SubAfter]
    assert (pub.group, pub.topic, pub.tags, pub.keys, pub.region_id) == (
        "traced-pg",
        "TracedTopic",
        "TagT",
        "order-9",
        "DefaultRegion",
    )
    assert (pub.store_host, pub.offset_msg_id, pub.success) == (embedded_cluster.broker_addr, sent.offset_msg_id, True)
    assert pub.body_length == len(b"traced body") and pub.msg_type is MessageType.Normal_Msg
    assert (before.group, before.retry_times, before.keys) == ("traced-cg", 0, "order-9")
    assert (after.group, after.request_id, after.success, after.context_code) == (
        "traced-cg",
        before.request_id,
        True,
        0,
    )
    store = embedded_cluster.controller.context.store
    carriers = [decode_record(v) for q in range(8) for v in store.get(TRACE_TOPIC, q, 0, 32).messages]
    assert carriers and all(c.properties.get("KEYS") for c in carriers)
    assert any(sent.msg_id in c.keys and "order-9" in c.keys for c in carriers)


async def test_a_custom_trace_topic_and_end_transaction_records(
    embedded_cluster: EmbeddedCluster, autojump_clock: trio.testing.MockClock
) -> None:
    await _create(embedded_cluster, "TxTraced")

    async def commit(msg: Message, arg: object) -> LocalTransactionState:
        return LocalTransactionState.COMMIT_MESSAGE

    producer = TransactionProducer(
        "tx-traced-pg",
        embedded_cluster.namesrv_addr,
        execute_local_transaction=commit,
        check_local_transaction=commit,
        enable_msg_trace=True,
        customized_trace_topic="MyTraceTopic",
    )
    async with producer:
        result = await producer.send_message_in_transaction(Message("TxTraced", b"tx", keys="tk"))
        views = await _traces(
            embedded_cluster, result.send_result.msg_id, "MyTraceTopic", {TraceType.Pub, TraceType.EndTransaction}
        )
    by_type = {v.record.type: v.record for v in views}
    assert by_type[TraceType.Pub].msg_type is MessageType.Trans_Msg_Half
    end = by_type[TraceType.EndTransaction]
    assert (end.group, end.topic, end.keys, end.transaction_state, end.from_transaction_check) == (
        "tx-traced-pg", "TxTraced", "tk", "COMMIT_MESSAGE", False,
    )  # fmt: skip
    async with Admin(embedded_cluster.namesrv_addr) as admin:
        assert await find_traces(admin, result.send_result.msg_id, None) == []  # not in the default topic


async def test_a_half_message_not_stored_ok_ends_traced_without_a_transaction_id(
    tmp_path: Path, autojump_clock: trio.testing.MockClock
) -> None:
    """4.9.8's DefaultMQProducerImpl.sendMessageInTransaction sets the message's transactionId (its UNIQ_KEY) only
    once the half is SEND_OK; one answered SLAVE_NOT_AVAILABLE is rolled back without it, so the EndTransaction
    record's transactionId is ``null`` (doExecuteEndTransactionHook: ``msg.getTransactionId()``). Ours wrote the
    message id there, as for a transaction that ran."""
    async with EmbeddedCluster(tmp_path / "c", broker_role="SYNC_MASTER", **SMALL_STORE) as cluster:
        await _create(cluster, "TxNotOk")

        async def commit(msg: Message, arg: object) -> LocalTransactionState:
            return LocalTransactionState.COMMIT_MESSAGE

        producer = TransactionProducer(
            "tx-notok-pg",
            cluster.namesrv_addr,
            execute_local_transaction=commit,
            check_local_transaction=commit,
            enable_msg_trace=True,
        )
        async with producer:
            result = await producer.send_message_in_transaction(Message("TxNotOk", b"tx"))
            views = await _traces(cluster, result.send_result.msg_id, None, {TraceType.EndTransaction})
    assert result.local_transaction_state is LocalTransactionState.ROLLBACK_MESSAGE
    end = next(v.record for v in views if v.record.type is TraceType.EndTransaction)
    assert (end.transaction_state, end.transaction_id) == ("ROLLBACK_MESSAGE", None)


@pytest.mark.parametrize("status", [ConsumeConcurrentlyStatus.RECONSUME_LATER])
async def test_a_failed_consumption_is_traced_as_failed(
    embedded_cluster: EmbeddedCluster, autojump_clock: trio.testing.MockClock, status: ConsumeConcurrentlyStatus
) -> None:
    use_virtual_store_clock(embedded_cluster)  # the send-back waits in delay level 3 (10 s) of store time
    await _create(embedded_cluster, "FailTraced")
    calls = 0

    async def listener(msgs: list[MessageExt]) -> ConsumeConcurrentlyStatus:
        nonlocal calls
        calls += 1
        return status if calls == 1 else ConsumeConcurrentlyStatus.CONSUME_SUCCESS

    views = await _consumed_twice(embedded_cluster, "FailTraced", "fail", listener, lambda: calls)
    outcomes = [
        (v.record.success, v.record.context_code, v.record.group) for v in views if v.record.type is TraceType.SubAfter
    ]
    assert outcomes == [(False, 4, "fail-cg"), (True, 0, "fail-cg")]
    assert not [v for v in views if v.record.type is TraceType.Pub]  # the producer had trace off


async def _consumed_twice(
    cluster: EmbeddedCluster, topic: str, prefix: str, listener: Any, calls: Callable[[], int]
) -> list[Any]:
    """One message to ``topic``, consumed by ``listener`` (group ``<prefix>-cg``, trace on) until it was called
    twice; the trace views of the message once both SubAfter records are there (producer ``<prefix>-pg``, trace
    off)."""
    consumer = PushConsumer(f"{prefix}-cg", cluster.namesrv_addr, enable_msg_trace=True)
    consumer.subscribe(topic)
    consumer.register_message_listener(listener)
    async with consumer, Producer(f"{prefix}-pg", cluster.namesrv_addr) as producer:
        sent = await producer.send(Message(topic, b"x"))
        with trio.fail_after(120):
            while calls() < 2:
                await trio.sleep(0.1)
        async with Admin(cluster.namesrv_addr) as admin:
            with trio.fail_after(60):
                while True:
                    views = await find_traces(admin, sent.msg_id, None)
                    if len([v for v in views if v.record.type is TraceType.SubAfter]) >= 2:
                        return views
                    await trio.sleep(0.2)


async def test_a_listener_that_raises_is_traced_with_the_exception_context_code(
    embedded_cluster: EmbeddedCluster, autojump_clock: trio.testing.MockClock
) -> None:
    """Java's ConsumeMessageConcurrentlyService.ConsumeRequest.run: a listener that throws leaves status null with
    hasException, so CONSUME_CONTEXT_TYPE is ConsumeReturnType.EXCEPTION and the SubAfter's contextCode is its
    ordinal 2; RECONSUME_LATER alone is FAILED (4). Before, a raising listener was traced as FAILED."""
    use_virtual_store_clock(embedded_cluster)  # the send-back waits in delay level 3 (10 s) of store time
    await _create(embedded_cluster, "RaiseTraced")
    calls = 0

    async def listener(msgs: list[MessageExt]) -> ConsumeConcurrentlyStatus:
        nonlocal calls
        calls += 1
        if calls == 1:
            raise RuntimeError("listener broke")
        return ConsumeConcurrentlyStatus.CONSUME_SUCCESS

    views = await _consumed_twice(embedded_cluster, "RaiseTraced", "raise", listener, lambda: calls)
    outcomes = [(v.record.success, v.record.context_code) for v in views if v.record.type is TraceType.SubAfter]
    assert outcomes == [(False, 2), (True, 0)]


async def test_a_listener_returning_none_is_traced_with_the_returnnull_context_code(
    embedded_cluster: EmbeddedCluster, autojump_clock: trio.testing.MockClock
) -> None:
    """Java's ConsumeMessageConcurrentlyService.ConsumeRequest.run: a null status without an exception is
    ConsumeReturnType.RETURNNULL (contextCode 3), then RECONSUME_LATER: success false, the message delivered again.
    Ours traced None as a success (0)."""
    use_virtual_store_clock(embedded_cluster)  # the send-back waits in delay level 3 (10 s) of store time
    await _create(embedded_cluster, "NoneTraced")
    calls = 0

    async def listener(msgs: list[MessageExt]) -> ConsumeConcurrentlyStatus | None:
        nonlocal calls
        calls += 1
        return None if calls == 1 else ConsumeConcurrentlyStatus.CONSUME_SUCCESS

    views = await _consumed_twice(embedded_cluster, "NoneTraced", "none", listener, lambda: calls)
    outcomes = [(v.record.success, v.record.context_code) for v in views if v.record.type is TraceType.SubAfter]
    assert outcomes == [(False, 3), (True, 0)]


async def test_a_listener_call_that_overran_the_consume_timeout_is_traced_as_time_out(
    embedded_cluster: EmbeddedCluster, autojump_clock: trio.testing.MockClock
) -> None:
    """Java's ConsumeRequest.run: a call whose consumeRT reached consumeTimeout minutes is ConsumeReturnType.TIME_OUT
    (contextCode 1) whatever it returned; the SubAfter's success still follows the status."""
    await _create(embedded_cluster, "SlowTraced")
    calls = 0

    async def listener(msgs: list[MessageExt]) -> ConsumeConcurrentlyStatus:
        nonlocal calls
        calls += 1
        if calls == 1:
            await trio.sleep(4)  # virtual: past the 3 s consume_timeout below
        return ConsumeConcurrentlyStatus.CONSUME_SUCCESS

    consumer = PushConsumer("slow-cg", embedded_cluster.namesrv_addr, enable_msg_trace=True, consume_timeout=0.05)
    consumer.subscribe("SlowTraced")
    consumer.register_message_listener(listener)
    async with consumer, Producer("slow-pg", embedded_cluster.namesrv_addr) as producer:
        sent = await producer.send(Message("SlowTraced", b"x"))
        views = await _traces(embedded_cluster, sent.msg_id, None, {TraceType.SubAfter})
    first = next(v.record for v in views if v.record.type is TraceType.SubAfter)
    assert (first.success, first.context_code) == (True, 1)


async def test_an_orderly_rollback_is_traced_as_no_success_with_the_success_context_code(
    embedded_cluster: EmbeddedCluster, autojump_clock: trio.testing.MockClock
) -> None:
    """4.9.8's ConsumeMessageOrderlyService.ConsumeRequest.run: returnType stays SUCCESS for ROLLBACK (FAILED is
    SUSPEND_CURRENT_QUEUE_A_MOMENT's alone), so the SubAfter is success false, contextCode 0. Ours said 4."""
    await _create(embedded_cluster, "RollbackTraced")
    consumer = PushConsumer("rollback-cg", embedded_cluster.namesrv_addr, enable_msg_trace=True)
    consumer.subscribe("RollbackTraced")

    async def rollback(msgs: list[MessageExt]) -> ConsumeOrderlyStatus:  # on the loop: virtual time throughout
        return ConsumeOrderlyStatus.ROLLBACK

    consumer.register_message_listener_orderly(rollback)
    async with consumer, Producer("rollback-pg", embedded_cluster.namesrv_addr) as producer:
        sent = await producer.send(Message("RollbackTraced", b"x"))
        views = await _traces(embedded_cluster, sent.msg_id, None, {TraceType.SubAfter})
    first = next(v.record for v in views if v.record.type is TraceType.SubAfter)
    assert (first.success, first.context_code) == (False, 0)


async def test_a_consume_trace_starts_when_the_listener_gets_a_consume_slot_not_while_waiting_for_one(
    embedded_cluster: EmbeddedCluster, autojump_clock: trio.testing.MockClock
) -> None:
    """Java's ConsumeMessageTraceHookImpl.consumeMessageBefore runs in ConsumeRequest.run, on the consume thread: a
    request waiting in the pool's queue has no SubBefore yet. With one consume slot, the message waiting for it has
    no record in the trace topic while the other's call holds the slot (long after the holder's own SubBefore is
    there), and its SubBefore comes after the holder's SubAfter."""
    await _create(embedded_cluster, "SlotTraced")
    ids: dict[bytes, str] = {}
    seen_while_held: list[set[TraceType]] = []

    async def listener(msgs: list[MessageExt]) -> ConsumeConcurrentlyStatus:
        if not seen_while_held:  # the first call holds the only slot; the other message waits for it
            holder = msgs[0].body
            waiter = next(msg_id for body, msg_id in ids.items() if body != holder)
            await _traces(embedded_cluster, ids[holder], None, {TraceType.SubBefore})
            await trio.sleep(5)  # virtual: the dispatcher sends its batches (at most 500 ms old) many times meanwhile
            async with Admin(embedded_cluster.namesrv_addr) as admin:
                seen_while_held.append({v.record.type for v in await find_traces(admin, waiter, None)})
        return ConsumeConcurrentlyStatus.CONSUME_SUCCESS

    consumer = PushConsumer(
        "slot-cg", embedded_cluster.namesrv_addr, enable_msg_trace=True, consume_thread_min=1, consume_thread_max=1
    )
    consumer.subscribe("SlotTraced")
    consumer.register_message_listener(listener)
    queue = MessageQueue("SlotTraced", "broker-a", 0)
    async with Producer("slot-pg", embedded_cluster.namesrv_addr) as producer:
        for body in (b"first", b"second"):
            ids[body] = (await producer.send(Message("SlotTraced", body), queue=queue)).msg_id
        async with consumer:
            want = {TraceType.SubBefore, TraceType.SubAfter}
            records = [v.record for msg_id in ids.values() for v in await _traces(embedded_cluster, msg_id, None, want)]
    assert seen_while_held == [set()], "the waiting message was traced as consumed before it got the slot"
    holder_after = min(r.timestamp for r in records if r.type is TraceType.SubAfter)
    waiter_before = max(r.timestamp for r in records if r.type is TraceType.SubBefore)
    assert waiter_before >= holder_after


async def test_a_lite_pull_consumer_traces_each_batch_when_it_is_pulled(
    embedded_cluster: EmbeddedCluster, autojump_clock: trio.testing.MockClock
) -> None:
    """Java 4.9.8's DefaultLitePullConsumer with enableMsgTrace registers ConsumeMessageTraceHookImpl, which
    DefaultLitePullConsumerImpl.pullSyncImpl runs on every pulled batch: SubBefore and at once a successful SubAfter
    (context code 0), before the application polls; the customized trace topic is used."""
    await _create(embedded_cluster, "LiteTraced")
    consumer = LitePullConsumer(
        "lite-traced-cg",
        embedded_cluster.namesrv_addr,
        consume_from_where=ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET,
        enable_msg_trace=True,
        customized_trace_topic="LiteTraceTopic",
    )
    async with Producer("lite-traced-pg", embedded_cluster.namesrv_addr) as producer:
        sent = await producer.send(Message("LiteTraced", b"pulled", keys="lk"))
        async with consumer:
            await consumer.subscribe("LiteTraced")
            want = {TraceType.SubBefore, TraceType.SubAfter}
            views = await _traces(embedded_cluster, sent.msg_id, "LiteTraceTopic", want)  # not polled yet
            polled = await consumer.poll(timeout=10)
    assert [m.body for m in polled] == [b"pulled"]
    by_type = {v.record.type: v.record for v in views}
    before, after = by_type[TraceType.SubBefore], by_type[TraceType.SubAfter]
    assert (before.group, before.keys, before.retry_times) == ("lite-traced-cg", "lk", 0)
    assert (after.group, after.request_id, after.success, after.context_code) == (
        "lite-traced-cg",
        before.request_id,
        True,
        0,
    )


async def test_a_custom_trace_topic_of_trace_topic_enable_is_a_system_topic(tmp_path: Path) -> None:
    """With ``traceTopicEnable`` the broker creates ``msgTraceTopicName`` and (4.9.8 TopicConfigManager) adds it to the
    system topics: GET_SYSTEM_TOPIC_LIST_FROM_BROKER lists it and UPDATE_AND_CREATE_TOPIC / DELETE_TOPIC refuse it."""
    async with EmbeddedCluster(
        tmp_path / "cluster", trace_topic_enable=True, msg_trace_topic_name="MyTraceTopic", **SMALL_STORE
    ) as cluster:
        assert cluster.controller.context.topics.get("MyTraceTopic") is not None
        async with Admin(cluster.namesrv_addr) as admin:
            assert "MyTraceTopic" in await admin.system_topics(cluster.broker_addr)
            with pytest.raises(MQBrokerError) as deleting:
                await admin.delete_topic("MyTraceTopic")
            assert deleting.value.code == 1 and "conflict with system topic" in (deleting.value.remark or "")


def test_the_trace_view_client_host_is_the_born_ip_without_the_port() -> None:
    """Java's TraceView.clientHost is ``MessageExt.getBornHostString()``: the born host's IP, which
    ``mqadmin queryMsgTraceById`` prints under #ClientHost (and the Java dashboard shows)."""
    from remoting.codec.message import MessageExt as Ext

    carrier = Ext(
        0, 0, 0, 0, 0, 0, 0, 0, ("10.9.9.9", 4242), 0, ("127.0.0.1", 1), 0, 0, JAVA_PUB.encode(), "T", {}, b""
    )
    [view] = trace_views("MSGID1", [carrier])
    assert view.client_host == "10.9.9.9"


class HalfTakingBroker:
    """A master that answers every SEND_MESSAGE_V2 as stored at CommitLog offset 0 and anything else SUCCESS."""

    def __init__(self) -> None:
        self.store_host = b""

    async def process(self, ctx: RequestContext, request: RemotingCommand) -> RemotingCommand | None:
        if request.code == RequestCode.SEND_MESSAGE_V2:
            fields = {"msgId": offset_msg_id(self.store_host, 0), "queueId": request.ext_fields["e"],
                      "queueOffset": "0", "MSG_REGION": "DefaultRegion", "TRACE_ON": "true"}  # fmt: skip
            return request.response(ResponseCode.SUCCESS, None, fields)
        return None if request.is_oneway else request.response(ResponseCode.SUCCESS)


async def test_an_end_transaction_that_could_not_be_sent_is_traced_all_the_same(
    embedded_cluster: EmbeddedCluster, autojump_clock: trio.testing.MockClock
) -> None:
    """4.9.8's client/.../impl/producer/DefaultMQProducerImpl.java runs the EndTransaction hook before the
    END_TRANSACTION oneway, in endTransaction (after the local transaction) and in the check-back's
    processTransactionState alike, so the record is written whatever becomes of the oneway. Here the half message's
    broker is gone by the time the local transaction commits: the trace (on the embedded broker) has the Pub and the
    EndTransaction. Before, the record was only written once the oneway had gone out, so it was missing."""
    topic = "TxEndLost"
    broker = HalfTakingBroker()
    dispatcher = Dispatcher()
    dispatcher.set_default(broker, ProcessorPool("half-taking", 4, 100))
    server = trio.CancelScope()

    async def serve(task_status: trio.TaskStatus[tuple[str, int]] = trio.TASK_STATUS_IGNORED) -> None:
        with server:
            await RemotingServer(dispatcher).serve("127.0.0.1", 0, task_status=task_status)

    async def commit_once_the_broker_is_gone(msg: Message, arg: object) -> LocalTransactionState:
        server.cancel()
        await trio.sleep(1)  # its connections are closed: the oneway finds nobody listening
        return LocalTransactionState.COMMIT_MESSAGE

    async with trio.open_nursery() as nursery, RemotingClient() as client:
        host, port = await nursery.start(serve)
        broker.store_host = pack_socket_address(host, port)
        await register_as_master(client, embedded_cluster.namesrv_addr, f"{host}:{port}", topic, "broker-gone")
        producer = TransactionProducer(
            "tx-end-lost-pg",
            embedded_cluster.namesrv_addr,
            execute_local_transaction=commit_once_the_broker_is_gone,
            check_local_transaction=commit_once_the_broker_is_gone,
            enable_msg_trace=True,
        )
        async with producer:
            result = await producer.send_message_in_transaction(Message(topic, b"tx", keys="lost-end"))
            assert result.local_transaction_state is LocalTransactionState.COMMIT_MESSAGE
            views = await _traces(embedded_cluster, result.send_result.msg_id, None, {TraceType.Pub})
            with trio.move_on_after(30):
                while TraceType.EndTransaction not in {v.record.type for v in views}:
                    await trio.sleep(1)
                    views = await _traces(embedded_cluster, result.send_result.msg_id, None, {TraceType.Pub})
    ends = [v.record for v in views if v.record.type is TraceType.EndTransaction]
    assert [(e.topic, e.keys, e.store_host, e.transaction_state, e.from_transaction_check) for e in ends] == [
        (topic, "lost-end", f"{host}:{port}", "COMMIT_MESSAGE", False)
    ]


async def test_a_consume_batch_takes_one_queue_slot_and_is_dropped_whole() -> None:
    """A listener call's SubBefore (and SubAfter) records are one entry of the 1024-entry queue, as Java's
    ConsumeMessageTraceHookImpl appends one TraceContext holding every message of the batch to AsyncTraceDispatcher's
    traceContextQueue: 33 batches of 32 messages fit, and a batch that does not fit is dropped whole, not cut."""
    from client.instance import new_instance
    from remoting.codec.message import MessageExt as Ext

    def batch(n: int) -> list[MessageExt]:
        return [
            Ext(0, 0, 0, 0, i, 0, 0, 0, ("127.0.0.1", 1), 0, ("127.0.0.1", 2), 0, 0, b"x", "T",
                {"UNIQ_KEY": f"ID{n}-{i}", "KEYS": f"k{i}"}, b"")
            for i in range(32)
        ]  # fmt: skip

    dispatcher = TraceDispatcher(new_instance(None, "127.0.0.1:1"), "cg", "CONSUME")
    for n in range(33):
        begun = dispatcher.consume_before("cg", batch(n))
        assert begun is not None
    assert dispatcher.dropped == 0

    small = TraceDispatcher(new_instance(None, "127.0.0.1:1"), "cg", "CONSUME", queue_size=2)
    first = small.consume_before("cg", batch(0))
    assert first is not None
    small.consume_after(first, True, 0)
    assert small.dropped == 0
    assert small.consume_before("cg", batch(1)) is not None  # the trace goes on; its records are dropped
    assert small.dropped == 1


async def test_access_channel_cloud_sends_each_record_to_its_regions_trace_topic(
    embedded_cluster: EmbeddedCluster, autojump_clock: trio.testing.MockClock
) -> None:
    """``access_channel="CLOUD"`` (4.9.8's ``AccessChannel.CLOUD``): every record goes to
    ``rmq_sys_TRACE_DATA_<its region>`` whatever ``customized_trace_topic`` says (``AsyncTraceDispatcher
    .getTraceTopicName``): a Pub to the send answer's ``MSG_REGION``, the consume records to the consumed message's
    ``MSG_REGION`` property (none here: ``..._null``); and a SubAfter record stops after its context code, with 0x01
    and no time, group or 0x02 (``TraceDataEncoder.encoderFromContextBean``)."""
    from client.config import ClientConfig

    await _create(embedded_cluster, "CloudTraced")
    done = trio.Event()

    async def listener(msgs: list[MessageExt]) -> ConsumeConcurrentlyStatus:
        done.set()
        return ConsumeConcurrentlyStatus.CONSUME_SUCCESS

    config = ClientConfig(namesrv_addr=embedded_cluster.namesrv_addr, access_channel="CLOUD")
    consumer = PushConsumer("cloud-cg", config=config, enable_msg_trace=True, customized_trace_topic="Ignored")
    consumer.subscribe("CloudTraced")
    consumer.register_message_listener(listener)
    producer = Producer("cloud-pg", config=config, enable_msg_trace=True, customized_trace_topic="Ignored")
    async with consumer, producer:
        sent = await producer.send(Message("CloudTraced", b"cloud body", keys="ck"))
        with trio.fail_after(60):
            await done.wait()
        pubs = await _traces(embedded_cluster, sent.msg_id, "rmq_sys_TRACE_DATA_DefaultRegion", {TraceType.Pub})
        consumes = await _traces(embedded_cluster, sent.msg_id, "rmq_sys_TRACE_DATA_null", {TraceType.SubBefore})
    assert [v.record.region_id for v in pubs] == ["DefaultRegion"]
    assert consumes[0].record.region_id == "null"
    store = embedded_cluster.controller.context.store
    texts = [
        decode_record(v).body.decode()
        for q in range(8)
        for v in store.get("rmq_sys_TRACE_DATA_null", q, 0, 32).messages
    ]
    afters = [part for text in texts for part in text.split(B) if part.startswith(f"SubAfter{A}")]
    assert len(afters) == 1 and afters[0].endswith(f"{A}true{A}ck{A}0{A}"), afters
    assert not any(store.get("Ignored", q, 0, 1).messages for q in range(8))


async def _producer_client_ids(cluster: EmbeddedCluster, group: str, topic: str) -> set[str]:
    """The client ids the broker lists for the producer ``group`` once it lists any."""
    async with Admin(cluster.namesrv_addr) as admin:
        with trio.fail_after(120):
            while True:
                with contextlib.suppress(MQBrokerError):
                    conns = (await admin.producer_connection(group, topic)).connection_set
                    if conns:
                        return {c.client_id for c in conns}
                await trio.sleep(1)


async def test_trace_producers_run_on_their_own_client_instance_named_as_javas(
    embedded_cluster: EmbeddedCluster, autojump_clock: trio.testing.MockClock
) -> None:
    """Java's AsyncTraceDispatcher starts its producer on a client instance of its own, instance name
    ``PID_CLIENT_INNER_TRACE_PRODUCER_<name server address>``, shared by every trace producer of the process: the
    broker lists the trace groups under that client id, and the hosts' heartbeats do not list them."""
    await _create(embedded_cluster, "OwnTraceInstance")
    consumer = PushConsumer("own-trace-cg", embedded_cluster.namesrv_addr, enable_msg_trace=True)
    consumer.subscribe("OwnTraceInstance")
    consumer.register_message_listener(lambda msgs: ConsumeConcurrentlyStatus.CONSUME_SUCCESS)
    async with consumer, Producer("own-trace-pg", embedded_cluster.namesrv_addr, enable_msg_trace=True) as producer:
        await producer.send(Message("OwnTraceInstance", b"x"))
        assert producer.trace is not None and consumer.trace is not None
        trace_id = (
            f"{producer.instance.config.client_ip}@PID_CLIENT_INNER_TRACE_PRODUCER_{embedded_cluster.namesrv_addr}"
        )
        for trace in (producer.trace, consumer.trace):
            assert await _producer_client_ids(embedded_cluster, trace.inner_group, "OwnTraceInstance") == {trace_id}
        assert await _producer_client_ids(embedded_cluster, "own-trace-pg", "OwnTraceInstance") == {
            producer.instance.client_id
        }
        assert producer.trace.inner_group not in producer.instance.producers
        assert consumer.trace.inner_group not in consumer.instance.producers


async def test_a_traced_producer_started_again_traces_again_and_stops_its_trace_instance(
    embedded_cluster: EmbeddedCluster, autojump_clock: trio.testing.MockClock
) -> None:
    """A producer stopped and started again starts its trace dispatcher's producer and client instance again; each
    stop returns once the trace instance has stopped."""
    await _create(embedded_cluster, "TraceRestart")
    producer = Producer("trace-restart-pg", embedded_cluster.namesrv_addr, enable_msg_trace=True)
    sent = []
    for _ in range(2):
        async with producer:
            sent.append(await producer.send(Message("TraceRestart", b"x")))
            assert producer.trace is not None and producer.trace._producer is not None
            trace_instance = producer.trace._producer.instance
            assert trace_instance.client_id.endswith(
                f"@PID_CLIENT_INNER_TRACE_PRODUCER_{embedded_cluster.namesrv_addr}"
            )
        with pytest.raises(ClientStateError):
            trace_instance.task_group  # noqa: B018 - stopped
    for result in sent:
        views = await _traces(embedded_cluster, result.msg_id, None, {TraceType.Pub})
        assert [v.record.msg_id for v in views] == [result.msg_id]
