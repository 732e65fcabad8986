"""Throughput statistics fed by real sends and pulls (virtual time), and the OFFSET_MOVED_EVENT a moved pull
stores on a master."""

from __future__ import annotations

import orjson
import trio
import trio.testing

from broker.context import BrokerState
from broker.stats import BROKER_PUT_NUMS, GROUP_GET_NUMS, GROUP_GET_SIZE, TOPIC_PUT_NUMS, TOPIC_PUT_SIZE
from processors.admin import AdminBrokerProcessor
from processors.end_transaction import EndTransactionProcessor
from processors.pull import PullMessageProcessor
from processors.send import SendMessageProcessor
from processors.stats import StatsProcessor
from processors.transaction_bridge import TransactionalMessageBridge
from remoting.codec.bodies import KVTable
from remoting.codec.bodies.admin import ConsumeStats
from remoting.codec.bodies.stats import BrokerStatsData, ConsumeStatsList
from remoting.codec.codes import RequestCode, ResponseCode
from remoting.codec.command import RemotingCommand, request
from remoting.codec.headers import EndTransactionRequestHeader
from remoting.codec.headers.transaction import TRANSACTION_COMMIT_TYPE
from remoting.codec.message import BatchEntry, MessageRecord, decode_record, encode_batch_body
from remoting.codec.topics import OFFSET_MOVED_EVENT, TRANS_CHECK_MAX_TIME_TOPIC, TRANS_HALF_TOPIC, TRANS_OP_HALF_TOPIC
from remoting.processor import RequestContext
from tests.processors.conftest import GROUP, TOPIC, MakeBroker, pull_request, send_request

NO_SUSPEND = 0x4
COMMIT_AND_SUBSCRIPTION = 0x1 | 0x4


def rates(text: str) -> list[float]:
    return [float(x) for x in text.split(" ")]


async def test_put_and_pull_rates_come_out_right_in_virtual_time(
    broker: BrokerState, peer_ctx: RequestContext, autojump_clock: trio.testing.MockClock
) -> None:
    send, pull = SendMessageProcessor(broker), PullMessageProcessor(broker)
    admin, stats = AdminBrokerProcessor(broker), StatsProcessor(broker)
    offset = 0
    async with trio.open_nursery() as nursery:
        await nursery.start(broker.stats.run)
        # Half a second off the sampler's ticks, so each sample sees whole seconds of traffic.
        await trio.sleep(0.5)
        for _ in range(70):
            for _ in range(5):
                answer = await send.process(peer_ctx, send_request())
                assert answer is not None and answer.code == ResponseCode.SUCCESS
            found = await pull.process(
                peer_ctx, pull_request(offset=offset, sys_flag=COMMIT_AND_SUBSCRIPTION, commit_offset=offset)
            )
            assert found is not None and found.code == ResponseCode.SUCCESS
            offset += 5
            missed = await pull.process(peer_ctx, pull_request(offset=offset, sys_flag=NO_SUSPEND))
            assert missed is not None and missed.code == ResponseCode.PULL_NOT_FOUND
            await trio.sleep(1)
        nursery.cancel_scope.cancel()

    info = await admin.process(peer_ctx, request(RequestCode.GET_BROKER_RUNTIME_INFO))
    assert info is not None
    table = KVTable.decode(info.body).table
    # 70 s of samples: the 10 s and 60 s windows are full, the 600 s one is read over what it has.
    assert rates(table["putTps"]) == [5.0, 5.0, 5.0]
    assert rates(table["getFoundTps"]) == rates(table["getMissTps"]) == [1.0, 1.0, 1.0]
    assert rates(table["getTotalTps"]) == [2.0, 2.0, 2.0]
    assert rates(table["getTransferedTps"]) == [5.0, 5.0, 5.0]
    assert table["msgPutTotalTodayNow"] == "350" and table["msgGetTotalTodayNow"] == "350"

    view = await stats.process(
        peer_ctx, request(RequestCode.VIEW_BROKER_STATS_DATA, {"statsName": TOPIC_PUT_NUMS, "statsKey": TOPIC})
    )
    assert view is not None and view.code == ResponseCode.SUCCESS
    minute = BrokerStatsData.decode(view.body).stats_minute
    assert (minute.sum, minute.tps) == (300, 5.0)

    key = f"{TOPIC}@{GROUP}"
    view = await stats.process(
        peer_ctx, request(RequestCode.VIEW_BROKER_STATS_DATA, {"statsName": GROUP_GET_NUMS, "statsKey": key})
    )
    assert view is not None
    gets = BrokerStatsData.decode(view.body).stats_minute
    # One found pull of 5 messages a second: 5 msg/s, 5 messages per call.
    assert (gets.sum, gets.tps, gets.avgpt) == (300, 5.0, 5.0)
    sizes = broker.stats.item(GROUP_GET_SIZE, key)
    assert sizes is not None and sizes.in_minute().total == 300 * len(found.body) // 5

    consume = await admin.process(
        peer_ctx, request(RequestCode.GET_CONSUME_STATS, {"consumerGroup": GROUP, "topic": TOPIC})
    )
    assert consume is not None and ConsumeStats.decode(consume.body).consume_tps == 5.0
    per_broker = await stats.process(peer_ctx, request(RequestCode.GET_BROKER_CONSUME_STATS, {"isOrder": "false"}))
    assert per_broker is not None
    listed = ConsumeStatsList.decode(per_broker.body)
    groups = dict(listed.consume_stats_list)
    assert [s.consume_tps for s in groups[GROUP]] == [5.0]
    # The group committed 345 of the 350 messages of queue 0.
    assert listed.total_diff == 5 and listed.broker_addr == broker.broker_addr


async def test_unknown_stats_item_answers_javas_remark(broker: BrokerState, peer_ctx: RequestContext) -> None:
    answer = await StatsProcessor(broker).process(
        peer_ctx, request(RequestCode.VIEW_BROKER_STATS_DATA, {"statsName": TOPIC_PUT_NUMS, "statsKey": "Nope"})
    )
    assert answer is not None
    assert (answer.code, answer.remark) == (ResponseCode.SYSTEM_ERROR, "The stats <TOPIC_PUT_NUMS> <Nope> not exist")
    missing = await StatsProcessor(broker).process(peer_ctx, request(RequestCode.VIEW_BROKER_STATS_DATA, {}))
    assert missing is not None and missing.code == ResponseCode.SYSTEM_ERROR


async def test_messages_recovered_at_start_are_not_counted_as_puts(
    broker: BrokerState, peer_ctx: RequestContext, autojump_clock: trio.testing.MockClock
) -> None:
    send = SendMessageProcessor(broker)
    for _ in range(3):
        await send.process(peer_ctx, send_request())
    async with trio.open_nursery() as nursery:
        await nursery.start(broker.stats.run)
        await trio.sleep(0.5)
        await send.process(peer_ctx, send_request())
        await trio.sleep(1)
        nursery.cancel_scope.cancel()
    assert broker.stats.runtime_entries()["msgPutTotalTodayNow"] == "1"


async def test_msg_get_total_today_now_counts_every_pull_so_far(
    broker: BrokerState, peer_ctx: RequestContext, autojump_clock: trio.testing.MockClock
) -> None:
    """As RocketMQ 4.9.8's (store/.../stats/BrokerStats.java ``getMsgGetTotalTodayNow``, the store's live
    ``getMessageTransferedMsgCount``), GET_BROKER_RUNTIME_INFO right after a pull counts the messages just pulled,
    between two ticks of the sampler, as ``msgPutTotalTodayNow`` counts the ones just stored."""
    send, pull, admin = SendMessageProcessor(broker), PullMessageProcessor(broker), AdminBrokerProcessor(broker)
    async with trio.open_nursery() as nursery:
        await nursery.start(broker.stats.run)
        await trio.sleep(0.5)
        sent = [await send.process(peer_ctx, send_request()) for _ in range(3)]
        assert all(answer is not None and answer.code == ResponseCode.SUCCESS for answer in sent)
        found = await pull.process(peer_ctx, pull_request(offset=0, sys_flag=NO_SUSPEND))
        assert found is not None and found.code == ResponseCode.SUCCESS
        info = await admin.process(peer_ctx, request(RequestCode.GET_BROKER_RUNTIME_INFO))
        nursery.cancel_scope.cancel()
    assert info is not None
    table = KVTable.decode(info.body).table
    assert (table["msgPutTotalTodayNow"], table["msgGetTotalTodayNow"]) == ("3", "3")


async def _assert_no_put_items(stats: StatsProcessor, ctx: RequestContext, *topics: str) -> None:
    """TOPIC_PUT_NUMS and TOPIC_PUT_SIZE of each of ``topics`` answer RocketMQ's "not exist"."""
    for name in (TOPIC_PUT_NUMS, TOPIC_PUT_SIZE):
        for topic in topics:
            fields = {"statsName": name, "statsKey": topic}
            view = await stats.process(ctx, request(RequestCode.VIEW_BROKER_STATS_DATA, fields))
            assert view is not None
            assert (view.code, view.remark) == (ResponseCode.SYSTEM_ERROR, f"The stats <{name}> <{topic}> not exist")


async def _minute_sum(stats: StatsProcessor, ctx: RequestContext, name: str, key: str) -> int:
    """The minute's sum of stats item ``name`` ``key``, which must exist."""
    fields = {"statsName": name, "statsKey": key}
    view = await stats.process(ctx, request(RequestCode.VIEW_BROKER_STATS_DATA, fields))
    assert view is not None and view.code == ResponseCode.SUCCESS
    return BrokerStatsData.decode(view.body).stats_minute.sum


def _offset_moved_events(broker: BrokerState) -> list[dict[str, object]]:
    result = broker.store.get(OFFSET_MOVED_EVENT, 0, 0, 32)
    events = []
    for record in result.messages:
        msg = decode_record(record)
        assert msg.properties["TAGS"] == msg.properties["KEYS"] == GROUP
        assert msg.properties["DELAY"] == "0"
        events.append(orjson.loads(msg.body))
    return events


async def test_a_moved_pull_on_a_master_stores_an_offset_moved_event(
    broker: BrokerState, peer_ctx: RequestContext
) -> None:
    send, pull = SendMessageProcessor(broker), PullMessageProcessor(broker)
    for _ in range(3):
        await send.process(peer_ctx, send_request(queue_id=1))
    moved = await pull.process(peer_ctx, pull_request(queue_id=1, offset=10, sys_flag=NO_SUSPEND))
    assert moved is not None and moved.code == ResponseCode.PULL_OFFSET_MOVED
    assert _offset_moved_events(broker) == [
        {
            "consumerGroup": GROUP,
            "messageQueue": {"brokerName": broker.config.broker_name, "queueId": 1, "topic": TOPIC},
            "offsetNew": int(moved.ext_fields["nextBeginOffset"]),
            "offsetRequest": 10,
        }
    ]
    # The exact JSON Java's fastjson writes (sorted keys).
    raw = decode_record(broker.store.get(OFFSET_MOVED_EVENT, 0, 0, 1).messages[0]).body
    assert raw.startswith(b'{"consumerGroup":"please_rename_unique_group_name","messageQueue":{"brokerName":')
    found = await pull.process(peer_ctx, pull_request(queue_id=1, offset=0, sys_flag=NO_SUSPEND))
    assert found is not None and found.code == ResponseCode.SUCCESS
    assert len(_offset_moved_events(broker)) == 1


async def test_a_slave_stores_no_offset_moved_event(make_broker: MakeBroker, peer_ctx: RequestContext) -> None:
    broker = make_broker(broker_role="SLAVE")
    broker.store.append(MessageRecord(TOPIC, b"x"))
    answer = await PullMessageProcessor(broker).process(peer_ctx, pull_request(offset=10, sys_flag=NO_SUSPEND))
    assert answer is not None and answer.code == ResponseCode.PULL_RETRY_IMMEDIATELY
    assert broker.store.max_offset_in_queue(OFFSET_MOVED_EVENT, 0) == 0


async def test_only_puts_the_commit_log_refused_count_as_failed_puts(
    broker: BrokerState, peer_ctx: RequestContext
) -> None:
    """4.9.8 DefaultMessageStore.asyncPutMessage answers checkStoreStatus' SERVICE_NOT_AVAILABLE (disk full, slave,
    shut down) before it hooks the put's timing and ``putMessageFailedTimes``: a full disk refusing every send leaves
    the count alone. A message the CommitLog refuses (body above maxMessageSize) counts."""
    send, admin = SendMessageProcessor(broker), AdminBrokerProcessor(broker)
    broker.store.disk_full_reason = "disk is full"
    for _ in range(3):
        refused = await send.process(peer_ctx, send_request())
        assert refused is not None and refused.code == ResponseCode.SERVICE_NOT_AVAILABLE
    broker.store.disk_full_reason = None
    too_big = await send.process(peer_ctx, send_request(body=b"x" * (broker.store.config.max_message_size + 1)))
    assert too_big is not None and too_big.code == ResponseCode.MESSAGE_ILLEGAL
    info = await admin.process(peer_ctx, request(RequestCode.GET_BROKER_RUNTIME_INFO))
    assert info is not None
    assert KVTable.decode(info.body).table["putMessageFailedTimes"] == "1"


async def test_properties_past_32767_characters_are_refused_before_the_failed_put_count(
    broker: BrokerState, peer_ctx: RequestContext
) -> None:
    """4.9.8 DefaultMessageStore.asyncPutMessage runs checkMessage (topic over 127 characters, properties over 32767
    characters: MESSAGE_ILLEGAL) before it hooks ``putMessageFailedTimes``, as it does checkStoreStatus: such a send
    leaves the count alone. Properties of at most 32767 characters whose bytes pass 32767 reach the CommitLog's
    encoder, which refuses them (PROPERTIES_SIZE_EXCEEDED): that put counts."""
    send, admin = SendMessageProcessor(broker), AdminBrokerProcessor(broker)

    async def failed_puts() -> str:
        info = await admin.process(peer_ctx, request(RequestCode.GET_BROKER_RUNTIME_INFO))
        assert info is not None
        return KVTable.decode(info.body).table["putMessageFailedTimes"]

    chars = await send.process(peer_ctx, send_request(properties="K\x01" + "v" * 40_000))
    assert chars is not None and chars.code == ResponseCode.MESSAGE_ILLEGAL
    assert await failed_puts() == "0"
    encoded = await send.process(peer_ctx, send_request(properties="K\x01" + "\u00e9" * 20_000))
    assert encoded is not None and encoded.code == ResponseCode.MESSAGE_ILLEGAL
    assert await failed_puts() == "1"


async def test_properties_past_32767_utf16_units_are_refused_before_the_failed_put_count(
    broker: BrokerState, peer_ctx: RequestContext
) -> None:
    """4.9.8 checkMessage measures the properties with ``String.length()``, in UTF-16 code units: 16,400 characters
    outside the Basic Multilingual Plane are 32,800 units, past Short.MAX_VALUE, so the send is refused
    (MESSAGE_ILLEGAL) before DefaultMessageStore.asyncPutMessage counts a failed put. Counted in code points (16,402)
    they passed the check and the encoder's refusal was counted."""
    send, admin = SendMessageProcessor(broker), AdminBrokerProcessor(broker)
    answer = await send.process(peer_ctx, send_request(properties="K\x01" + "\U0001f600" * 16_400))
    assert answer is not None and answer.code == ResponseCode.MESSAGE_ILLEGAL
    info = await admin.process(peer_ctx, request(RequestCode.GET_BROKER_RUNTIME_INFO))
    assert info is not None
    assert KVTable.decode(info.body).table["putMessageFailedTimes"] == "0"


async def test_an_offset_moved_event_counts_in_no_put_item(
    broker: BrokerState, peer_ctx: RequestContext, autojump_clock: trio.testing.MockClock
) -> None:
    """The broker stores an OffsetMovedEvent with a plain store put (4.9.8's PullMessageProcessor
    ``generateOffsetMovedEvent``), never through the send path that counts TOPIC_PUT_NUMS / TOPIC_PUT_SIZE /
    BROKER_PUT_NUMS (SendMessageProcessor ``handlePutMessageResult``): the event is in the store totals only."""
    send, pull, stats = SendMessageProcessor(broker), PullMessageProcessor(broker), StatsProcessor(broker)
    async with trio.open_nursery() as nursery:
        await nursery.start(broker.stats.run)
        await trio.sleep(0.5)
        for _ in range(3):
            await send.process(peer_ctx, send_request(queue_id=1))
        moved = await pull.process(peer_ctx, pull_request(queue_id=1, offset=10, sys_flag=NO_SUSPEND))
        assert moved is not None and moved.code == ResponseCode.PULL_OFFSET_MOVED
        assert len(_offset_moved_events(broker)) == 1
        await trio.sleep(10)
        nursery.cancel_scope.cancel()
    assert broker.stats.runtime_entries()["msgPutTotalTodayNow"] == "4"  # the store took the event
    await _assert_no_put_items(stats, peer_ctx, OFFSET_MOVED_EVENT)
    cluster = broker.config.broker_cluster_name
    assert await _minute_sum(stats, peer_ctx, BROKER_PUT_NUMS, cluster) == 3, "BROKER_PUT_NUMS: the 3 sends only"


async def test_a_discarded_half_message_counts_in_no_put_item(
    broker: BrokerState, peer_ctx: RequestContext, autojump_clock: trio.testing.MockClock
) -> None:
    """A half message whose checks ran out is moved to RMQ_SYS_TRANS_CHECK_MAX_TIME_TOPIC with a plain store put
    (broker/src/main/java/org/apache/rocketmq/broker/transaction/queue/DefaultTransactionalMessageCheckListener.java
    ``resolveDiscardMsg``), never counted in TOPIC_PUT_NUMS / TOPIC_PUT_SIZE / BROKER_PUT_NUMS."""
    send, stats = SendMessageProcessor(broker), StatsProcessor(broker)
    bridge = TransactionalMessageBridge(broker)
    async with trio.open_nursery() as nursery:
        await nursery.start(broker.stats.run)
        await trio.sleep(0.5)
        props = "TRAN_MSG\x01true\x02PGROUP\x01PG\x02UNIQ_KEY\x01U1"
        answer = await send.process(peer_ctx, send_request(properties=props))
        assert answer is not None and answer.code == ResponseCode.SUCCESS
        (half,) = bridge.iter_queue(TRANS_HALF_TOPIC, 0, 1)
        bridge.put_discarded(half)
        await trio.sleep(10)
        nursery.cancel_scope.cancel()
    assert broker.stats.runtime_entries()["msgPutTotalTodayNow"] == "2"  # the store took the discarded copy
    await _assert_no_put_items(stats, peer_ctx, TRANS_CHECK_MAX_TIME_TOPIC)
    cluster = broker.config.broker_cluster_name
    assert await _minute_sum(stats, peer_ctx, BROKER_PUT_NUMS, cluster) == 1, "BROKER_PUT_NUMS: the half's send only"


async def test_a_transactions_renewal_commit_and_op_message_count_in_no_put_item(
    broker: BrokerState, peer_ctx: RequestContext, autojump_clock: trio.testing.MockClock
) -> None:
    """4.9.8 counts a transaction's half message once, at its send, and stores the rest with plain store puts: the
    check's renewal of the half (broker/src/main/java/org/apache/rocketmq/broker/transaction/queue/
    TransactionalMessageBridge.java ``putMessage``), the op message (``writeOp``) and the committed message
    (broker/src/main/java/org/apache/rocketmq/broker/processor/EndTransactionProcessor.java ``sendFinalMessage``):
    in the store totals only, in no TOPIC_PUT_NUMS / TOPIC_PUT_SIZE and no BROKER_PUT_NUMS."""
    send, stats, end = SendMessageProcessor(broker), StatsProcessor(broker), EndTransactionProcessor(broker)
    bridge = end.bridge
    async with trio.open_nursery() as nursery:
        await nursery.start(broker.stats.run)
        await trio.sleep(0.5)
        props = "TRAN_MSG\x01true\x02PGROUP\x01PG\x02UNIQ_KEY\x01U1"
        answer = await send.process(peer_ctx, send_request(properties=props))
        assert answer is not None and answer.code == ResponseCode.SUCCESS
        (half,) = bridge.iter_queue(TRANS_HALF_TOPIC, 0, 1)
        bridge.renew_half(half, 1)  # as a check of the transaction does
        header = EndTransactionRequestHeader(
            producer_group="PG",
            tran_state_table_offset=half.queue_offset,
            commit_log_offset=half.commit_log_offset,
            commit_or_rollback=TRANSACTION_COMMIT_TYPE,
            msg_id="U1",
        )
        answer = await end.process(peer_ctx, request(RequestCode.END_TRANSACTION, header.to_ext_fields()))
        assert answer is not None and answer.code == ResponseCode.SUCCESS, answer.remark if answer else None
        assert broker.store.max_offset_in_queue(TOPIC, 0) == 1  # the committed message
        await trio.sleep(10)
        nursery.cancel_scope.cancel()
    assert broker.stats.runtime_entries()["msgPutTotalTodayNow"] == "4"  # half, renewal, commit, op: all stored
    await _assert_no_put_items(stats, peer_ctx, TOPIC, TRANS_OP_HALF_TOPIC)
    assert await _minute_sum(stats, peer_ctx, TOPIC_PUT_NUMS, TRANS_HALF_TOPIC) == 1, "the half's send, not its renewal"
    cluster = broker.config.broker_cluster_name
    assert await _minute_sum(stats, peer_ctx, BROKER_PUT_NUMS, cluster) == 1, "BROKER_PUT_NUMS: the half's send only"


async def test_a_batch_the_commit_log_refuses_counts_as_a_failed_put(
    broker: BrokerState, peer_ctx: RequestContext
) -> None:
    """4.9.8 DefaultMessageStore.asyncPutMessages hooks ``putMessageFailedTimes`` on CommitLog.asyncPutMessages'
    result, which is MESSAGE_ILLEGAL for a transactional or delayed batch: each counts. A body over maxMessageSize is
    refused before, by checkMessages, and a DELAY that is no number or a garbled body throws out of
    asyncPutMessages before the hook: neither counts."""
    send, admin = SendMessageProcessor(broker), AdminBrokerProcessor(broker)
    max_size = broker.store.config.max_message_size
    cases = [
        ("DELAY\x013", 0, encode_batch_body([BatchEntry(b"x")])),  # delayed: counts
        ("WAIT\x01true", 4, encode_batch_body([BatchEntry(b"x")])),  # transactional (prepared): counts
        ("WAIT\x01true", 0, bytes(max_size + 1)),  # over maxMessageSize
        ("DELAY\x01x", 0, encode_batch_body([BatchEntry(b"x")])),  # NumberFormatException
        ("WAIT\x01true", 0, b"\x00\x00\x00\x30garbage"),  # garbled
    ]
    for properties, sys_flag, body in cases:
        head = send_request(properties=properties, code=RequestCode.SEND_BATCH_MESSAGE, batch="true",
                            sysFlag=str(sys_flag))  # fmt: skip
        batch = RemotingCommand(code=head.code, opaque=head.opaque, ext_fields=head.ext_fields, body=body)
        refused = await send.process(peer_ctx, batch)
        assert refused is not None and refused.code != ResponseCode.SUCCESS
    info = await admin.process(peer_ctx, request(RequestCode.GET_BROKER_RUNTIME_INFO))
    assert info is not None
    assert KVTable.decode(info.body).table["putMessageFailedTimes"] == "2"
    assert broker.store.max_offset_in_queue(TOPIC, 0) == 0
