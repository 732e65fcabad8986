"""Consumer offsets (14, 15; CLONE_GROUP_OFFSET 314), queue offsets and times (29-32), QUERY_MESSAGE (12) and
VIEW_MESSAGE_BY_ID (33)."""

from __future__ import annotations

import trio
import trio.testing

from broker.context import BrokerState
from processors.consume_ops import ConsumeOpsProcessor
from processors.offsets import QUERY_NOT_FOUND_REMARK, ConsumerOffsetProcessor
from processors.query import QueryMessageProcessor
from processors.send import SendMessageProcessor
from remoting.codec.codes import RequestCode, ResponseCode
from remoting.codec.command import RemotingCommand, request
from remoting.codec.message import decode_record, iter_records
from remoting.codec.msgid import decode_offset_msg_id
from remoting.processor import RequestContext
from tests.processors.conftest import GROUP, TOPIC, MakeBroker, ServedBroker, send_request, tags_props


async def offsets(broker: BrokerState, ctx: RequestContext, code: int, **fields: str) -> RemotingCommand:
    response = await ConsumerOffsetProcessor(broker).process(ctx, request(code, dict(fields)))
    assert response is not None
    return response


async def query(broker: BrokerState, ctx: RequestContext, code: int, **fields: str) -> RemotingCommand:
    response = await QueryMessageProcessor(broker).process(ctx, request(code, dict(fields)))
    assert response is not None
    return response


async def put(broker: BrokerState, ctx: RequestContext, count: int, **props: str) -> list[RemotingCommand]:
    processor = SendMessageProcessor(broker)
    out = []
    for i in range(count):
        response = await processor.process(ctx, send_request(body=f"b{i}".encode(), properties=tags_props(**props)))
        assert response is not None and response.code == ResponseCode.SUCCESS
        out.append(response)
    return out


Q = {"consumerGroup": GROUP, "topic": TOPIC, "queueId": "0"}


async def test_query_consumer_offset_returns_the_committed_offset(
    broker: BrokerState, peer_ctx: RequestContext
) -> None:
    update = await offsets(broker, peer_ctx, RequestCode.UPDATE_CONSUMER_OFFSET, **Q, commitOffset="12")
    assert update.code == ResponseCode.SUCCESS
    response = await offsets(broker, peer_ctx, RequestCode.QUERY_CONSUMER_OFFSET, **Q)
    assert (response.code, response.ext_fields) == (ResponseCode.SUCCESS, {"offset": "12"})


async def test_new_group_on_a_young_queue_starts_at_zero(broker: BrokerState, peer_ctx: RequestContext) -> None:
    empty = await offsets(broker, peer_ctx, RequestCode.QUERY_CONSUMER_OFFSET, **Q)
    assert (empty.code, empty.ext_fields["offset"]) == (ResponseCode.SUCCESS, "0")
    await put(broker, peer_ctx, 3)
    young = await offsets(broker, peer_ctx, RequestCode.QUERY_CONSUMER_OFFSET, **Q)
    assert (young.code, young.ext_fields["offset"]) == (ResponseCode.SUCCESS, "0")


async def test_a_query_asking_not_to_be_set_to_zero_is_query_not_found_on_a_young_queue(
    broker: BrokerState, peer_ctx: RequestContext
) -> None:
    """RocketMQ 5's ``setZeroIfNotFound=false`` (ConsumerManageProcessor.queryConsumerOffset, 5.3.3): a group without
    an offset gets QUERY_NOT_FOUND even where the young queue would start it at 0; ``true`` keeps 4.9.8's answer."""
    await put(broker, peer_ctx, 3)
    kept = await offsets(broker, peer_ctx, RequestCode.QUERY_CONSUMER_OFFSET, **Q, setZeroIfNotFound="false")
    assert (kept.code, kept.remark) == (
        ResponseCode.QUERY_NOT_FOUND,
        "Not found, do not set to zero, maybe this group boot first",
    )
    zero = await offsets(broker, peer_ctx, RequestCode.QUERY_CONSUMER_OFFSET, **Q, setZeroIfNotFound="true")
    assert (zero.code, zero.ext_fields["offset"]) == (ResponseCode.SUCCESS, "0")
    await offsets(broker, peer_ctx, RequestCode.UPDATE_CONSUMER_OFFSET, **Q, commitOffset="2")
    stored = await offsets(broker, peer_ctx, RequestCode.QUERY_CONSUMER_OFFSET, **Q, setZeroIfNotFound="false")
    assert (stored.code, stored.ext_fields["offset"]) == (ResponseCode.SUCCESS, "2")


async def test_new_group_on_a_queue_whose_first_message_is_on_disk_is_query_not_found(
    broker: BrokerState, peer_ctx: RequestContext
) -> None:
    await put(broker, peer_ctx, 2)
    # A broker with almost no RAM: everything but the newest message is "on disk".
    processor = ConsumerOffsetProcessor(broker, in_memory_distance=10)
    response = await processor.process(peer_ctx, request(RequestCode.QUERY_CONSUMER_OFFSET, dict(Q)))
    assert response is not None
    assert (response.code, response.remark) == (ResponseCode.QUERY_NOT_FOUND, QUERY_NOT_FOUND_REMARK)


async def test_update_consumer_offset_is_not_bounds_checked(broker: BrokerState, peer_ctx: RequestContext) -> None:
    await offsets(broker, peer_ctx, RequestCode.UPDATE_CONSUMER_OFFSET, **Q, commitOffset="999")
    assert broker.offsets.query(GROUP, TOPIC, 0) == 999


async def test_queue_offset_and_time_queries(broker: BrokerState, peer_ctx: RequestContext) -> None:
    q = {"topic": TOPIC, "queueId": "0"}
    assert (await offsets(broker, peer_ctx, RequestCode.GET_MAX_OFFSET, **q)).ext_fields == {"offset": "0"}
    earliest = await offsets(broker, peer_ctx, RequestCode.GET_EARLIEST_MSG_STORETIME, **q)
    assert (earliest.code, earliest.ext_fields) == (ResponseCode.SUCCESS, {"timestamp": "-1"})
    sent = await put(broker, peer_ctx, 3)
    assert (await offsets(broker, peer_ctx, RequestCode.GET_MAX_OFFSET, **q)).ext_fields == {"offset": "3"}
    assert (await offsets(broker, peer_ctx, RequestCode.GET_MIN_OFFSET, **q)).ext_fields == {"offset": "0"}
    view = broker.store.look_message_by_offset(decode_offset_msg_id(sent[1].ext_fields["msgId"]).phy_offset)
    assert view is not None
    second_time = decode_record(bytes(view)).store_timestamp
    search = await offsets(broker, peer_ctx, RequestCode.SEARCH_OFFSET_BY_TIMESTAMP, **q, timestamp=str(second_time))
    assert search.code == ResponseCode.SUCCESS and int(search.ext_fields["offset"]) in (0, 1, 2)
    # RocketMQ 5's clients send boundaryType: the first (LOWER) or last (UPPER) of the messages stored in that ms.
    times = []
    for answer in sent:
        record = broker.store.look_message_by_offset(decode_offset_msg_id(answer.ext_fields["msgId"]).phy_offset)
        assert record is not None
        times.append(decode_record(bytes(record)).store_timestamp)
    lower, upper = times.index(second_time), len(times) - 1 - times[::-1].index(second_time)
    for boundary, expected in (("LOWER", lower), ("UPPER", upper)):
        fields = {**q, "timestamp": str(second_time), "boundaryType": boundary}
        bound = await offsets(broker, peer_ctx, RequestCode.SEARCH_OFFSET_BY_TIMESTAMP, **fields)
        assert (bound.code, int(bound.ext_fields["offset"])) == (ResponseCode.SUCCESS, expected)
    earliest = await offsets(broker, peer_ctx, RequestCode.GET_EARLIEST_MSG_STORETIME, **q)
    assert 0 < int(earliest.ext_fields["timestamp"]) <= second_time
    unknown = await offsets(broker, peer_ctx, RequestCode.GET_MAX_OFFSET, topic="Nope", queueId="9")
    assert (unknown.code, unknown.ext_fields) == (ResponseCode.SUCCESS, {"offset": "0"})


async def test_offset_request_missing_a_field_answers_system_error(
    broker: BrokerState, peer_ctx: RequestContext
) -> None:
    response = await offsets(broker, peer_ctx, RequestCode.QUERY_CONSUMER_OFFSET, topic=TOPIC, queueId="0")
    assert response.code == ResponseCode.SYSTEM_ERROR
    assert response.remark is not None and "consumerGroup" in response.remark


async def test_update_consumer_offset_answers_with_flag_zero_and_stays_silent_when_oneway(
    served: ServedBroker, nursery: trio.Nursery
) -> None:
    client = await served.connect_memory(nursery)
    oneway = request(RequestCode.UPDATE_CONSUMER_OFFSET, {**Q, "commitOffset": "4"}, oneway=True)
    two_way = request(RequestCode.UPDATE_CONSUMER_OFFSET, {**Q, "queueId": "1", "commitOffset": "5"})
    await client.send(oneway, two_way)
    answer = await client.receive()
    assert answer is not None and (answer.opaque, answer.code) == (two_way.opaque, ResponseCode.SUCCESS)
    await trio.testing.wait_all_tasks_blocked()
    assert served.broker.offsets.query(GROUP, TOPIC, 0) == 4
    assert served.broker.offsets.query(GROUP, TOPIC, 1) == 5


async def test_clone_group_offset_replaces_the_destination_groups_offsets_of_the_topic(
    broker: BrokerState, peer_ctx: RequestContext
) -> None:
    """ConsumerOffsetManager.cloneOffset puts a copy of the source's table for the topic in place of the
    destination's: queues only the destination had are dropped (it resumes them per consumeFromWhere), not kept at
    stale positions."""
    broker.offsets.commit("src", TOPIC, 0, 10)
    broker.offsets.commit("src", TOPIC, 1, 11)
    for queue_id in range(4):
        broker.offsets.commit("dest", TOPIC, queue_id, 500)
    clone = request(RequestCode.CLONE_GROUP_OFFSET, {"srcGroup": "src", "destGroup": "dest", "topic": TOPIC})
    answer = await ConsumeOpsProcessor(broker).process(peer_ctx, clone)
    assert answer is not None and answer.code == ResponseCode.SUCCESS
    assert broker.offsets.offsets_of("dest", TOPIC) == {0: 10, 1: 11}


async def test_query_message_by_key_returns_the_indexed_records(broker: BrokerState, peer_ctx: RequestContext) -> None:
    await put(broker, peer_ctx, 3, keys="order-1 shared")
    await put(broker, peer_ctx, 2, keys="order-2 shared")
    window = {"beginTimestamp": "0", "endTimestamp": str(2**62)}
    response = await query(
        broker, peer_ctx, RequestCode.QUERY_MESSAGE, topic=TOPIC, key="order-1", maxNum="10", **window
    )
    assert response.code == ResponseCode.SUCCESS
    assert sorted(m.body for m in iter_records(response.body)) == [b"b0", b"b1", b"b2"]
    assert int(response.ext_fields["indexLastUpdatePhyoffset"]) > 0
    capped = await query(broker, peer_ctx, RequestCode.QUERY_MESSAGE, topic=TOPIC, key="shared", maxNum="2", **window)
    assert len(list(iter_records(capped.body))) == 2


async def test_query_message_by_unique_key(broker: BrokerState, peer_ctx: RequestContext) -> None:
    await put(broker, peer_ctx, 1, UNIQ_KEY="7F0000010001000000000000000000AB")
    window = {"beginTimestamp": "0", "endTimestamp": str(2**62)}
    response = await query(
        broker,
        peer_ctx,
        RequestCode.QUERY_MESSAGE,
        topic=TOPIC,
        key="7F0000010001000000000000000000AB",
        maxNum="0",
        _UNIQUE_KEY_QUERY="true",
        **window,
    )
    assert response.code == ResponseCode.SUCCESS
    assert [m.body for m in iter_records(response.body)] == [b"b0"]


async def test_query_message_for_an_unknown_key_is_query_not_found(
    broker: BrokerState, peer_ctx: RequestContext
) -> None:
    response = await query(
        broker, peer_ctx, RequestCode.QUERY_MESSAGE, topic=TOPIC, key="nope", maxNum="5", beginTimestamp="0",
        endTimestamp="1",
    )  # fmt: skip
    assert (response.code, response.remark) == (
        ResponseCode.QUERY_NOT_FOUND,
        "can not find message, maybe time range not correct",
    )
    assert "indexLastUpdateTimestamp" in response.ext_fields


async def test_view_message_by_id_returns_exactly_the_stored_record(
    broker: BrokerState, peer_ctx: RequestContext
) -> None:
    (sent,) = await put(broker, peer_ctx, 1)
    phy = decode_offset_msg_id(sent.ext_fields["msgId"]).phy_offset
    response = await query(broker, peer_ctx, RequestCode.VIEW_MESSAGE_BY_ID, offset=str(phy))
    assert response.code == ResponseCode.SUCCESS
    view = broker.store.look_message_by_offset(phy)
    assert view is not None and bytes(response.body) == bytes(view)


async def test_view_message_by_a_bad_offset_is_system_error(broker: BrokerState, peer_ctx: RequestContext) -> None:
    await put(broker, peer_ctx, 1)
    for offset in ("3", "999999", "-1"):
        response = await query(broker, peer_ctx, RequestCode.VIEW_MESSAGE_BY_ID, offset=offset)
        assert (response.code, response.remark) == (
            ResponseCode.SYSTEM_ERROR,
            f"can not find message by the offset, {offset}",
        )


async def test_query_message_caps_follow_max_msgs_num_batch_and_default_query_max_num(
    broker: BrokerState, peer_ctx: RequestContext
) -> None:
    """``maxMsgsNumBatch`` (64) caps a key query's ``maxNum`` (IndexService.queryOffset) and ``defaultQueryMaxNum``
    (32) is a unique-key query's (QueryMessageProcessor.queryMessage): MessageStoreConfig settings, read per query
    (store/src/main/java/org/apache/rocketmq/store/index/IndexService.java,
    broker/src/main/java/org/apache/rocketmq/broker/processor/QueryMessageProcessor.java). Found by a review: both
    were constants, the keys unknown to broker.conf and UPDATE_BROKER_CONFIG."""
    await put(broker, peer_ctx, 80, keys="order-1", UNIQ_KEY="7F0000010001000000000000000000AB")
    window = {"topic": TOPIC, "beginTimestamp": "0", "endTimestamp": str(2**62)}

    async def found(key: str, max_num: int, **extra: str) -> int:
        response = await query(broker, peer_ctx, RequestCode.QUERY_MESSAGE, key=key, maxNum=str(max_num), **window,
                               **extra)  # fmt: skip
        assert response.code == ResponseCode.SUCCESS
        return len(list(iter_records(response.body)))

    assert await found("order-1", 100) == 64
    assert await broker.update_config({"maxMsgsNumBatch": "100", "defaultQueryMaxNum": "5"}) == []
    assert await found("order-1", 100) == 80
    assert await found("7F0000010001000000000000000000AB", 100, _UNIQUE_KEY_QUERY="true") == 5


async def test_a_key_query_walking_a_long_index_chain_lets_other_requests_run(
    make_broker: MakeBroker, peer_ctx: RequestContext
) -> None:
    """A key shared by many messages (a user id, a constant) chains that many index entries, and a QUERY_MESSAGE
    whose time window lies before most of them walks the whole chain (IndexFile.selectPhyOffset). RocketMQ walks it
    on the query pool's threads (broker/src/main/java/org/apache/rocketmq/broker/BrokerController.java
    queryMessageExecutor); here every connection shares one event loop, so the walk must let the others run. Found by
    a review: it ran in one go, and a chain of 1 million entries held every client of the broker for 1.5 s (sends,
    pulls and heartbeats included), 20 million (one index file) for half a minute."""
    broker = make_broker(store_overrides={"max_index_num": 200_000})
    await put(broker, peer_ctx, 1, keys="hot")
    stamp = broker.store.message_store_timestamp(TOPIC, 0, 0)
    assert stamp is not None and broker.store.index is not None
    # The entries the key's later messages left (an hour later; pointing past the log, as only matches are read).
    broker.store.index.put_batch(TOPIC, [(["hot"], (1 << 40) + i) for i in range(150_000)], stamp + 3_600_000)
    served_meanwhile = 0
    done = False

    async def another_connection() -> None:
        nonlocal served_meanwhile
        while not done:
            answer = await offsets(broker, peer_ctx, RequestCode.GET_MAX_OFFSET, topic=TOPIC, queueId="0")
            assert answer.code == ResponseCode.SUCCESS
            served_meanwhile += 1
            await trio.sleep(0)

    async with trio.open_nursery() as nursery:
        nursery.start_soon(another_connection)
        window = {"beginTimestamp": str(stamp), "endTimestamp": str(stamp + 1)}
        response = await query(broker, peer_ctx, RequestCode.QUERY_MESSAGE, topic=TOPIC, key="hot", maxNum="32",
                               **window)  # fmt: skip
        done = True
    assert response.code == ResponseCode.SUCCESS
    assert [m.body for m in iter_records(response.body)] == [b"b0"]
    assert served_meanwhile > 0, "the other connection's requests waited for the whole walk"
