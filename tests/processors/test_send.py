"""SEND_MESSAGE / V2 / batch, command in and command out against a real store (docs/protocol.md#75-send-checks)."""

from __future__ import annotations

import random

import attrs
import pytest
from hypothesis import given
from hypothesis import strategies as st

from broker.context import BrokerState
from processors.send import SendMessageProcessor, rewrite_properties
from remoting.codec.codes import RequestCode, ResponseCode
from remoting.codec.command import RemotingCommand
from remoting.codec.message import (
    SYSFLAG_MULTI_TAGS,
    BatchEntry,
    MessageExt,
    decode_record,
    encode_batch_body,
)
from remoting.codec.message_properties import decode_properties
from remoting.codec.msgid import decode_offset_msg_id
from remoting.processor import RequestContext
from store.metadata_files import PERM_READ, TopicConfig, TopicFilterType
from tests.processors.conftest import TOPIC, MakeBroker, send_request, tags_props


async def send(broker: BrokerState, ctx: RequestContext, req: RemotingCommand) -> RemotingCommand:
    response = await SendMessageProcessor(broker, rng=random.Random(7)).process(ctx, req)
    assert response is not None
    assert response.is_response and response.opaque == req.opaque
    # Never a null or empty extFields map, whatever the outcome.
    assert response.ext_fields["MSG_REGION"] == "DefaultRegion"
    assert response.ext_fields["TRACE_ON"] == "true"
    return response


def stored(broker: BrokerState, response: RemotingCommand) -> list[MessageExt]:
    records = []
    for msg_id in response.ext_fields["msgId"].split(","):
        decoded = decode_offset_msg_id(msg_id)
        view = broker.store.look_message_by_offset(decoded.phy_offset)
        assert view is not None
        records.append(decode_record(bytes(view)))
    return records


@pytest.mark.parametrize("code", [RequestCode.SEND_MESSAGE, RequestCode.SEND_MESSAGE_V2])
async def test_send_stores_the_message_and_answers_msg_id_queue_and_offset(
    broker: BrokerState, peer_ctx: RequestContext, code: int
) -> None:
    first = await send(broker, peer_ctx, send_request(queue_id=2, properties=tags_props("TagA"), code=code))
    second = await send(broker, peer_ctx, send_request(queue_id=2, code=code))
    assert first.code == ResponseCode.SUCCESS and first.remark is None
    assert first.ext_fields["queueId"] == "2"
    assert (first.ext_fields["queueOffset"], second.ext_fields["queueOffset"]) == ("0", "1")
    msg_id = decode_offset_msg_id(first.ext_fields["msgId"])
    assert (msg_id.host, msg_id.port) == ("127.0.0.1", 10911)
    (record,) = stored(broker, first)
    assert record.body == b"hello"
    assert record.topic == TOPIC and record.queue_id == 2
    assert broker.store.max_offset_in_queue(TOPIC, 2) == 2


async def test_born_host_is_the_peer_address_and_ipv4_mapped_peers_store_four_bytes(
    broker: BrokerState, peer_ctx: RequestContext
) -> None:
    (record,) = stored(broker, await send(broker, peer_ctx, send_request()))
    assert record.born_host == ("10.1.2.3", 40123)
    peer_ctx.connection.remote_address = ("::ffff:10.9.8.7", 5555)
    peer_ctx.connection.attributes.clear()
    (mapped,) = stored(broker, await send(broker, peer_ctx, send_request()))
    assert mapped.born_host == ("10.9.8.7", 5555)
    assert not mapped.sys_flag & 0x10


async def test_stored_properties_gain_cluster_and_lose_wait(broker: BrokerState, peer_ctx: RequestContext) -> None:
    props = "UNIQ_KEY\x01ABC\x02WAIT\x01true\x02TAGS\x01TagA"
    (record,) = stored(broker, await send(broker, peer_ctx, send_request(properties=props)))
    assert record.properties == {"UNIQ_KEY": "ABC", "TAGS": "TagA", "CLUSTER": "DefaultCluster"}


async def test_ali_ons_trailing_separator_is_kept_verbatim(broker: BrokerState, peer_ctx: RequestContext) -> None:
    response = await send(broker, peer_ctx, send_request(properties="TAGS\x01null\x02KEYS\x01k1\x02"))
    (record,) = stored(broker, response)
    raw = broker.store.look_message_by_offset(decode_offset_msg_id(response.ext_fields["msgId"]).phy_offset)
    assert raw is not None and bytes(raw).endswith(b"TAGS\x01null\x02KEYS\x01k1\x02CLUSTER\x01DefaultCluster")
    assert record.properties["TAGS"] == "null"


@pytest.mark.parametrize(
    ("topic", "remark"),
    [
        ("bad topic!", "The specified topic contains illegal characters, allowing only ^[%|a-zA-Z0-9_-]+$"),
        (" ", "The specified topic is blank."),
        ("T" * 128, "The specified topic is longer than topic max length."),
    ],
)
async def test_bad_topic_names_answer_system_error_with_rocketmq_remarks(
    broker: BrokerState, peer_ctx: RequestContext, topic: str, remark: str
) -> None:
    response = await send(broker, peer_ctx, send_request(topic))
    assert (response.code, response.remark) == (ResponseCode.SYSTEM_ERROR, remark)
    assert "msgId" not in response.ext_fields


@pytest.mark.parametrize("topic", ["SCHEDULE_TOPIC_XXXX", "RMQ_SYS_TRANS_HALF_TOPIC", "SELF_TEST_TOPIC"])
async def test_sending_to_a_system_topic_is_forbidden(
    broker: BrokerState, peer_ctx: RequestContext, topic: str
) -> None:
    response = await send(broker, peer_ctx, send_request(topic))
    assert response.code == ResponseCode.NO_PERMISSION
    assert response.remark == f"Sending message to topic[{topic}] is forbidden."


async def test_missing_topic_with_auto_create_off_answers_topic_not_exist(
    make_broker: MakeBroker, peer_ctx: RequestContext
) -> None:
    broker = make_broker(auto_create_topic_enable=False)
    response = await send(broker, peer_ctx, send_request("NoSuchTopic"))
    assert response.code == ResponseCode.TOPIC_NOT_EXIST
    assert response.remark is not None and response.remark.startswith("topic[NoSuchTopic] not exist, apply first")
    assert broker.topics.get("NoSuchTopic") is None


async def test_missing_topic_is_created_from_tbw102_with_the_clients_queue_count(
    broker: BrokerState, peer_ctx: RequestContext
) -> None:
    changes: list[int] = []
    broker.topic_changed_hook = lambda: changes.append(1)
    response = await send(broker, peer_ctx, send_request("NewTopic", queue_id=3))
    assert response.code == ResponseCode.SUCCESS
    created = broker.topics.get("NewTopic")
    assert created is not None and (created.read_queue_nums, created.write_queue_nums, created.perm) == (4, 4, 6)
    assert changes  # the name servers hear about it at once


async def test_queue_id_beyond_the_topics_queues_is_illegal(broker: BrokerState, peer_ctx: RequestContext) -> None:
    response = await send(broker, peer_ctx, send_request(queue_id=4))
    assert response.code == ResponseCode.SYSTEM_ERROR
    assert response.remark is not None and response.remark.startswith("request queueId[4] is illegal")
    assert "Producer: 10.1.2.3:40123" in response.remark


async def test_negative_queue_id_picks_a_write_queue(broker: BrokerState, peer_ctx: RequestContext) -> None:
    processor = SendMessageProcessor(broker, rng=random.Random(7))
    seen = set()
    for _ in range(40):
        response = await processor.process(peer_ctx, send_request(queue_id=-1))
        assert response is not None
        assert response.code == ResponseCode.SUCCESS
        seen.add(int(response.ext_fields["queueId"]))
    assert seen == {0, 1, 2, 3}


async def test_topic_without_write_permission_is_refused(broker: BrokerState, peer_ctx: RequestContext) -> None:
    broker.topics.update_topic(TopicConfig("ReadOnly", 1, 1, PERM_READ))
    response = await send(broker, peer_ctx, send_request("ReadOnly"))
    assert (response.code, response.remark) == (
        ResponseCode.NO_PERMISSION,
        "the topic[ReadOnly] sending message is forbidden",
    )


async def test_body_over_the_limit_is_message_illegal(make_broker: MakeBroker, peer_ctx: RequestContext) -> None:
    broker = make_broker(store_overrides={"max_message_size": 1024})
    response = await send(broker, peer_ctx, send_request(body=b"x" * 1025))
    assert response.code == ResponseCode.MESSAGE_ILLEGAL
    assert response.remark is not None and "msg body length limit 1024B" in response.remark
    assert broker.store.max_offset_in_queue(TOPIC, 0) == 0


async def test_missing_header_field_answers_system_error_naming_it(
    broker: BrokerState, peer_ctx: RequestContext
) -> None:
    req = send_request()
    del req.ext_fields["b"]
    response = await send(broker, peer_ctx, req)
    assert response.code == ResponseCode.SYSTEM_ERROR
    assert response.remark is not None and "'b'" in response.remark


async def test_store_refusing_writes_answers_service_not_available(
    broker: BrokerState, peer_ctx: RequestContext
) -> None:
    broker.store.disk_full_reason = "disk is full"
    response = await send(broker, peer_ctx, send_request())
    assert response.code == ResponseCode.SERVICE_NOT_AVAILABLE
    assert response.remark is not None and "disk is full" in response.remark


async def test_service_not_available_remark_is_4_9_8s_with_the_disk_usage_of_each_store_directory(
    broker: BrokerState, peer_ctx: RequestContext
) -> None:
    """4.9.8's remark for SERVICE_NOT_AVAILABLE names each directory's used disk ratio, as operators read it: the
    CommitLog's (the least used of its paths), the ConsumeQueues' and the index's, each rounded up to a percent and
    formatted ``%5.2f`` (broker/src/main/java/org/apache/rocketmq/broker/processor/SendMessageProcessor.java
    handlePutMessageResult and diskUtil; common/.../UtilAll.java getDiskPartitionSpaceUsedPercent)."""
    store = broker.store
    config = store.config
    for directory in (config.consume_queue_dir, config.index_dir):
        directory.mkdir(parents=True, exist_ok=True)
    ratios = {config.consume_queue_dir: 0.5, config.index_dir: 0.951}
    store.config = attrs.evolve(config, disk_usage_ratio=lambda path: ratios.get(path, 0.9512))
    store.disk_full_reason = "disk full (test)"
    response = await send(broker, peer_ctx, send_request())
    assert response.code == ResponseCode.SERVICE_NOT_AVAILABLE
    assert response.remark is not None
    assert response.remark.startswith(
        "service not available now. It may be caused by one of the following reasons: the broker's disk is full "
        "[CL:  0.96 CQ:  0.50 INDEX:  0.96], messages are put to the slave, message store has been shut down, etc."
    )


async def test_multi_tag_topic_sets_the_multi_tags_sys_flag(broker: BrokerState, peer_ctx: RequestContext) -> None:
    broker.topics.update_topic(TopicConfig("Multi", 1, 1, topic_filter_type=TopicFilterType.MULTI_TAG))
    (record,) = stored(broker, await send(broker, peer_ctx, send_request("Multi")))
    assert record.sys_flag & SYSFLAG_MULTI_TAGS


async def test_retry_send_below_max_reconsume_times_stays_in_the_retry_topic(
    broker: BrokerState, peer_ctx: RequestContext
) -> None:
    req = send_request("%RETRY%G1", reconsumeTimes="3", maxReconsumeTimes="16")
    response = await send(broker, peer_ctx, req)
    assert response.code == ResponseCode.SUCCESS
    (record,) = stored(broker, response)
    assert record.topic == "%RETRY%G1" and record.reconsume_times == 3


async def test_retry_send_at_max_reconsume_times_goes_to_the_dlq(broker: BrokerState, peer_ctx: RequestContext) -> None:
    req = send_request("%RETRY%G1", properties="DELAY\x013", reconsumeTimes="2", maxReconsumeTimes="2")
    response = await send(broker, peer_ctx, req)
    assert response.code == ResponseCode.SUCCESS
    (record,) = stored(broker, response)
    assert record.topic == "%DLQ%G1" and record.queue_id == 0
    assert "DELAY" not in record.properties
    assert broker.topics.get("%DLQ%G1") is not None


async def test_retry_send_for_an_unknown_group_is_refused_when_groups_are_not_auto_created(
    make_broker: MakeBroker, peer_ctx: RequestContext
) -> None:
    broker = make_broker(auto_create_subscription_group=False)
    response = await send(broker, peer_ctx, send_request("%RETRY%Nobody"))
    assert response.code == ResponseCode.SUBSCRIPTION_GROUP_NOT_EXIST
    assert response.remark is not None and response.remark.startswith("subscription group not exist, Nobody")


async def test_transactional_send_is_stored_as_a_half_message(broker: BrokerState, peer_ctx: RequestContext) -> None:
    props = "TRAN_MSG\x01true\x02PGROUP\x01PG\x02UNIQ_KEY\x01U1"
    response = await send(broker, peer_ctx, send_request(queue_id=1, properties=props, sysFlag="4"))
    assert response.code == ResponseCode.SUCCESS
    assert response.ext_fields["queueId"] == "1"  # the queue asked for, as Java answers, not the half queue
    (record,) = stored(broker, response)
    assert record.topic == "RMQ_SYS_TRANS_HALF_TOPIC" and record.queue_id == 0
    assert record.properties["REAL_TOPIC"] == TOPIC and record.properties["REAL_QID"] == "1"
    assert record.sys_flag & 0xC == 0
    assert broker.store.max_offset_in_queue(TOPIC, 1) == 0


async def test_a_retry_re_sent_with_tran_msg_and_a_delay_level_is_no_half_message(
    broker: BrokerState, peer_ctx: RequestContext
) -> None:
    """RocketMQ's SendMessageProcessor.sendMessage ("for client under version 4.6.1"): a committed message keeps
    ``TRAN_MSG=true``; a client re-sending it to ``%RETRY%`` with reconsumeTimes > 0 and a delay level does not make a
    half message of it. Bound for the DLQ it has no delay level left there, so it is one."""
    props = "TRAN_MSG\x01true\x02DELAY\x013"
    retry = send_request("%RETRY%G1", properties=props, reconsumeTimes="1", maxReconsumeTimes="16")
    (record,) = stored(broker, await send(broker, peer_ctx, retry))
    assert record.topic == "%RETRY%G1" and record.properties["TRAN_MSG"] == "true"
    first = send_request("%RETRY%G1", properties=props, reconsumeTimes="0", maxReconsumeTimes="16")
    dead = send_request("%RETRY%G1", properties=props, reconsumeTimes="2", maxReconsumeTimes="2")
    for req in (first, dead):
        (record,) = stored(broker, await send(broker, peer_ctx, req))
        assert record.topic == "RMQ_SYS_TRANS_HALF_TOPIC"


async def test_batch_send_stores_consecutive_records_and_joins_their_msg_ids(
    broker: BrokerState, peer_ctx: RequestContext
) -> None:
    entries = [BatchEntry(f"m{i}".encode(), f"UNIQ_KEY\x01U{i}\x02TAGS\x01T{i}", i) for i in range(3)]
    req = send_request(queue_id=1, properties="WAIT\x01true", code=RequestCode.SEND_BATCH_MESSAGE, batch="true")
    req = RemotingCommand(code=req.code, opaque=req.opaque, ext_fields=req.ext_fields, body=encode_batch_body(entries))
    response = await send(broker, peer_ctx, req)
    assert response.code == ResponseCode.SUCCESS
    assert response.ext_fields["queueOffset"] == "0" and response.ext_fields["queueId"] == "1"
    records = stored(broker, response)
    assert [r.body for r in records] == [b"m0", b"m1", b"m2"]
    assert [r.queue_offset for r in records] == [0, 1, 2]
    # asyncSendBatchMessage keeps the header's WAIT (only a single message loses it)
    assert records[2].properties == {"UNIQ_KEY": "U2", "TAGS": "T2", "WAIT": "true", "CLUSTER": "DefaultCluster"}
    assert [r.flag for r in records] == [0, 1, 2]


async def test_batch_send_to_a_retry_topic_is_illegal(broker: BrokerState, peer_ctx: RequestContext) -> None:
    body = encode_batch_body([BatchEntry(b"x")])
    req = send_request("%RETRY%G1", code=RequestCode.SEND_BATCH_MESSAGE, batch="true")
    req = RemotingCommand(code=req.code, opaque=req.opaque, ext_fields=req.ext_fields, body=body)
    response = await send(broker, peer_ctx, req)
    assert (response.code, response.remark) == (
        ResponseCode.MESSAGE_ILLEGAL,
        "batch request does not support retry group %RETRY%G1",
    )


@pytest.mark.parametrize(("properties", "sys_flag"), [("DELAY\x013", 0), ("WAIT\x01true", 4), ("WAIT\x01true", 8)])
async def test_a_delayed_or_transactional_batch_is_message_illegal(
    broker: BrokerState, peer_ctx: RequestContext, properties: str, sys_flag: int
) -> None:
    """CommitLog.asyncPutMessages refuses both; a delayed batch used to be stored for delivery at once."""
    req = send_request(properties=properties, code=RequestCode.SEND_BATCH_MESSAGE, batch="true", sysFlag=str(sys_flag))
    req = RemotingCommand(code=req.code, opaque=req.opaque, ext_fields=req.ext_fields,
                          body=encode_batch_body([BatchEntry(b"x")]))  # fmt: skip
    response = await send(broker, peer_ctx, req)
    assert response.code == ResponseCode.MESSAGE_ILLEGAL
    assert broker.store.max_offset_in_queue(TOPIC, 0) == 0


@pytest.mark.parametrize(
    ("properties", "sys_flag", "body"),
    [
        ("DELAY\x013", 0, None),  # delayed
        ("WAIT\x01true", 8, None),  # transactional
        ("DELAY\x01x", 0, None),  # a DELAY that is no number
        ("WAIT\x01true", 0, b"\x00\x00\x00\x30garbage"),  # garbled
        ("WAIT\x01true", 0, bytes(4 * 1024 * 1024 + 1)),  # over maxMessageSize
    ],
)
async def test_a_batch_to_a_store_refusing_writes_is_service_not_available_before_its_checks(
    broker: BrokerState, peer_ctx: RequestContext, properties: str, sys_flag: int, body: bytes | None
) -> None:
    """DefaultMessageStore.putMessages checks the store's state (SERVICE_NOT_AVAILABLE) before checkMessages' length
    and CommitLog.asyncPutMessages' type, DELAY and encoding: a client learns the broker takes no writes, and
    retries on another, rather than that its batch is illegal."""
    broker.store.disk_full_reason = "disk is full"
    req = send_request(properties=properties, code=RequestCode.SEND_BATCH_MESSAGE, batch="true", sysFlag=str(sys_flag))
    body = encode_batch_body([BatchEntry(b"x")]) if body is None else body
    req = RemotingCommand(code=req.code, opaque=req.opaque, ext_fields=req.ext_fields, body=body)
    response = await send(broker, peer_ctx, req)
    assert (response.code, response.remark is not None and "disk is full" in response.remark) == (
        ResponseCode.SERVICE_NOT_AVAILABLE,
        True,
    )


async def test_garbled_batch_body_is_message_illegal(broker: BrokerState, peer_ctx: RequestContext) -> None:
    req = send_request(code=RequestCode.SEND_BATCH_MESSAGE, batch="true")
    req = RemotingCommand(code=req.code, opaque=req.opaque, ext_fields=req.ext_fields, body=b"\x00\x00\x00\x30garbage")
    response = await send(broker, peer_ctx, req)
    assert response.code == ResponseCode.MESSAGE_ILLEGAL
    assert broker.store.max_offset_in_queue(TOPIC, 0) == 0


_text = st.text(alphabet=st.characters(blacklist_characters="\x01\x02", blacklist_categories=("Cs",)), min_size=1)
_names = st.one_of(_text, st.sampled_from(["WAIT", "CLUSTER", "TRAN_MSG", "DELAY", "TAGS", "XWAIT", "AWAIT"]))
_values = st.one_of(_text, st.sampled_from(["true", "false", "TRUE", "3", "WAIT\x01x"]))


@given(st.dictionaries(_names, _values, max_size=6), st.sampled_from(["", "\x02"]))
def test_rewrite_properties_keeps_every_pair_but_wait_and_adds_cluster(props: dict[str, str], trailer: str) -> None:
    raw = "\x02".join(f"{k}\x01{v}" for k, v in props.items()) + (trailer if props else "")
    result = rewrite_properties(raw, "C1")
    expected = {k: v for k, v in props.items() if k not in ("WAIT", "CLUSTER")}
    expected["CLUSTER"] = "C1"
    assert decode_properties(result.stored) == expected
    assert result.wait == (props.get("WAIT", "true").lower() == "true")
    assert result.transactional == (props.get("TRAN_MSG", "").lower() == "true")


async def test_sync_flush_send_waits_for_the_flush_unless_wait_is_false(
    make_broker: MakeBroker, peer_ctx: RequestContext
) -> None:
    from store.store_config import FlushDiskType

    broker = make_broker(store_overrides={"flush_disk_type": FlushDiskType.SYNC_FLUSH})
    no_wait = await send(broker, peer_ctx, send_request(properties="WAIT\x01false"))
    assert no_wait.code == ResponseCode.SUCCESS
    assert broker.store.flush_watermark < broker.store.max_phy_offset  # answered before any flush
    waited = await send(broker, peer_ctx, send_request(properties="WAIT\x01true"))
    assert waited.code == ResponseCode.SUCCESS
    assert broker.store.flush_watermark >= broker.store.max_phy_offset


async def test_transactional_send_is_refused_when_the_broker_rejects_transactions(
    make_broker: MakeBroker, peer_ctx: RequestContext
) -> None:
    broker = make_broker(reject_transaction_message=True)
    response = await send(broker, peer_ctx, send_request(properties="TRAN_MSG\x01true\x02PGROUP\x01PG", sysFlag="4"))
    assert (response.code, response.remark) == (
        ResponseCode.NO_PERMISSION,
        "the broker[127.0.0.1] sending transaction message is forbidden",
    )
    assert broker.store.max_phy_offset == 0
    plain = await send(broker, peer_ctx, send_request())
    assert plain.code == ResponseCode.SUCCESS


async def test_a_broker_without_write_permission_refuses_only_order_topics(
    make_broker: MakeBroker, peer_ctx: RequestContext
) -> None:
    # RocketMQ's msgCheck: a read-only broker leaves the route's write queues, so only an order topic's producer, which
    # picks its queue itself, still reaches it.
    broker = make_broker(broker_permission=PERM_READ)
    broker.topics.update_topic(TopicConfig("Ordered", 4, 4, order=True))
    refused = await send(broker, peer_ctx, send_request(topic="Ordered"))
    assert (refused.code, refused.remark) == (
        ResponseCode.NO_PERMISSION,
        "the broker[127.0.0.1] sending message is forbidden",
    )
    assert (await send(broker, peer_ctx, send_request())).code == ResponseCode.SUCCESS


@pytest.mark.parametrize("batch", [False, True], ids=["single", "batch"])
async def test_a_read_only_broker_refuses_an_order_topic_before_the_queue_and_topic_checks(
    make_broker: MakeBroker, peer_ctx: RequestContext, batch: bool
) -> None:
    # AbstractSendMessageProcessor.msgCheck (4.9.8) checks the broker's permission for an order topic first, before
    # the topic's name, its config and the queue id; the topic's own write bit is ours, after the queue id.
    broker = make_broker(broker_permission=PERM_READ)
    broker.topics.update_topic(TopicConfig("Ordered", 4, 4, order=True))
    broker.topics.update_topic(TopicConfig("OrderedReadOnly", 4, 4, perm=PERM_READ, order=True))
    forbidden = (ResponseCode.NO_PERMISSION, "the broker[127.0.0.1] sending message is forbidden")
    flag = {"batch": "true"} if batch else {}
    beyond = await send(broker, peer_ctx, send_request(topic="Ordered", queue_id=99, **flag))
    assert (beyond.code, beyond.remark) == forbidden
    read_only = await send(broker, peer_ctx, send_request(topic="OrderedReadOnly", **flag))
    assert (read_only.code, read_only.remark) == forbidden
