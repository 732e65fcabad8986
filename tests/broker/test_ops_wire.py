"""The operations request codes over real sockets against the embedded cluster: 45, 223, 303, 306, 308, 314, 321,
323, 328, 329 and 351 on the broker, 311-313, 318 and 319 on the name server (request-reply's 324-326 are in
tests/broker/test_reply_wire.py).

Requests are golden frames: the JSON header spelled out byte for byte as a Java 4.9.8 admin writes it (field order
and all), framed by hand and sent from a bare socket, so neither our encoder nor our client is on the request path.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import orjson
import pytest
import trio

from broker.embedded import EmbeddedCluster
from client.consumer.listener import ConsumeConcurrentlyStatus
from client.consumer.push import PushConsumer
from client.message import Message
from client.producer import Producer
from remoting.client import RemotingClient
from remoting.codec.bodies import (
    ConsumerData,
    HeartbeatData,
    MessageQueue,
    ProducerData,
    SubscriptionData,
    TopicList,
)
from remoting.codec.bodies.ops import (
    ConsumerStatusBody,
    ProducerTableInfo,
    QueryConsumeQueueResponseBody,
    QueryConsumeTimeSpanBody,
    QueryCorrectionOffsetBody,
)
from remoting.codec.codes import RequestCode, ResponseCode
from remoting.codec.command import RemotingCommand, request
from remoting.codec.message import MessageRecord, decode_record
from remoting.codec.msgid import offset_msg_id
from remoting.codec.topics import TRANS_HALF_TOPIC
from store.metadata_files import encode_delay_offsets
from tests.broker.helpers import create_topic_request
from tests.remoting.helpers import RawPeer
from tests.semantics.helpers import deliver_delayed

LONG_MAX = (1 << 63) - 1


def golden(code: int, ext: bytes = b"{}", body: bytes = b"", opaque: int = 7) -> bytes:
    """A Java 4.9.8 client's request frame: JSON header in fastjson's field order, then the body."""
    header = (
        b'{"code":%d,"extFields":%s,"flag":0,"language":"JAVA","opaque":%d,"serializeTypeCurrentRPC":"JSON",'
        b'"version":409}' % (code, ext, opaque)
    )
    return (4 + len(header) + len(body)).to_bytes(4, "big") + b"\x00" + len(header).to_bytes(3, "big") + header + body


async def ask(address: str, frame: bytes) -> RemotingCommand:
    host, port = address.rsplit(":", 1)
    peer = await RawPeer.connect((host, int(port)))
    try:
        await peer.stream.send_all(frame)
        with trio.fail_after(20):
            answer = await peer.receive()
    finally:
        await peer.stream.aclose()
    assert answer is not None
    return answer


@pytest.fixture
async def cluster(embedded_cluster: EmbeddedCluster) -> AsyncIterator[EmbeddedCluster]:
    yield embedded_cluster


def _put(cluster: EmbeddedCluster, topic: str, count: int, queue_id: int = 0, body: bytes = b"m") -> None:
    ctx = cluster.controller.context
    for _ in range(count):
        ctx.store.append(MessageRecord(topic, body, queue_id, store_host=ctx.store_host))


async def _topic(cluster: EmbeddedCluster, topic: str, queues: int = 1) -> None:
    from remoting.client import RemotingClient

    async with RemotingClient() as client:
        answer = await client.invoke(cluster.broker_addr, create_topic_request(topic, queues=queues), 5)
    assert answer.code == ResponseCode.SUCCESS


async def test_query_consume_time_span_reports_each_queue_and_the_groups_position(cluster: EmbeddedCluster) -> None:
    await _topic(cluster, "SpanT", queues=2)
    _put(cluster, "SpanT", 3)
    ctx = cluster.controller.context
    ctx.offsets.commit("span-g", "SpanT", 0, 1)
    answer = await ask(cluster.broker_addr, golden(303, b'{"group":"span-g","topic":"SpanT"}'))
    assert answer.code == ResponseCode.SUCCESS
    spans = {s.message_queue.queue_id: s for s in QueryConsumeTimeSpanBody.decode(answer.body).consume_time_span_set}
    store = ctx.store
    first, last = store.message_store_timestamp("SpanT", 0, 0), store.message_store_timestamp("SpanT", 0, 2)
    assert (spans[0].min_time_stamp, spans[0].max_time_stamp, spans[0].consume_time_stamp) == (first, last, first)
    assert spans[0].delay_time >= 0
    assert (spans[1].min_time_stamp, spans[1].max_time_stamp, spans[1].delay_time) == (-1, -1, 0)
    missing = await ask(cluster.broker_addr, golden(303, b'{"group":"g","topic":"NoSuchTopic"}'))
    assert (missing.code, missing.remark) == (ResponseCode.TOPIC_NOT_EXIST, "topic[NoSuchTopic] not exist")
    no_group = await ask(cluster.broker_addr, golden(303, b'{"topic":"SpanT"}'))
    assert no_group.code == ResponseCode.SYSTEM_ERROR and "group" in (no_group.remark or "")


async def test_correction_offset_is_the_minimum_of_unfiltered_groups_unless_the_compared_group_is_behind(
    cluster: EmbeddedCluster,
) -> None:
    await _topic(cluster, "CorrT", queues=2)
    _put(cluster, "CorrT", 6, 0)
    _put(cluster, "CorrT", 6, 1)
    offsets = cluster.controller.context.offsets
    for group, q0, q1 in (("a", 2, 5), ("b", 4, 3), ("slow", 1, 1), ("behind", 1, 6)):
        offsets.commit(group, "CorrT", 0, q0)
        offsets.commit(group, "CorrT", 1, q1)
    frame = golden(308, b'{"compareGroup":"behind","filterGroups":"slow,behind","topic":"CorrT"}')
    answer = await ask(cluster.broker_addr, frame)
    assert answer.code == ResponseCode.SUCCESS
    # min over a and b: q0 = 2 (> behind's 1 -> MAX), q1 = 3 (<= behind's 6 -> kept)
    assert QueryCorrectionOffsetBody.decode(answer.body).correction_offsets == {0: LONG_MAX, 1: 3}
    assert offsets.query("slow", "CorrT", 0) == 1  # Java drops filtered groups' offsets; rocketrio keeps them


async def test_clone_group_offset_copies_committed_offsets_and_skips_unsubscribed_topics_online(
    cluster: EmbeddedCluster,
) -> None:
    await _topic(cluster, "CloneT", queues=2)
    await _topic(cluster, "CloneU", queues=1)
    offsets = cluster.controller.context.offsets
    offsets.commit("src", "CloneT", 0, 4)
    offsets.commit("src", "CloneT", 1, 7)
    offsets.commit("src", "CloneU", 0, 2)
    answer = await ask(cluster.broker_addr, golden(314, b'{"destGroup":"dst","offline":false,"srcGroup":"src"}'))
    assert answer.code == ResponseCode.SUCCESS
    assert offsets.offsets_of("dst", "CloneT") == {0: 4, 1: 7}
    assert offsets.offsets_of("dst", "CloneU") == {0: 2}
    one = golden(314, b'{"destGroup":"dst2","offline":true,"srcGroup":"src","topic":"CloneU"}')
    assert (await ask(cluster.broker_addr, one)).code == ResponseCode.SUCCESS
    assert offsets.topics_of_group("dst2") == {"CloneU"}


async def test_query_consume_queue_returns_the_raw_entries(cluster: EmbeddedCluster) -> None:
    await _topic(cluster, "CqT")
    _put(cluster, "CqT", 5)
    cq = cluster.controller.context.store.consume_queues[("CqT", 0)]
    frame = golden(321, b'{"consumerGroup":"nobody","count":2,"index":1,"queueId":0,"topic":"CqT"}')
    answer = await ask(cluster.broker_addr, frame)
    assert answer.code == ResponseCode.SUCCESS
    body = QueryConsumeQueueResponseBody.decode(answer.body)
    assert (body.min_queue_index, body.max_queue_index) == (0, 5)
    assert [(q.physic_offset, q.physic_size, q.tags_code) for q in body.queue_data or ()] == [cq.entry(1), cq.entry(2)]
    assert body.filter_data == "nobody@CqT is not online!"
    missing = await ask(cluster.broker_addr, golden(321, b'{"count":1,"index":0,"queueId":3,"topic":"CqT"}'))
    assert (missing.code, missing.remark) == (ResponseCode.SYSTEM_ERROR, "3@CqT is not exist!")


async def test_resume_check_half_message_puts_a_copy_back_with_zero_checks(cluster: EmbeddedCluster) -> None:
    ctx = cluster.controller.context
    half = MessageRecord(
        TRANS_HALF_TOPIC, b"tx", 0, properties="REAL_TOPIC\x01T\x02REAL_QID\x010\x02TRANSACTION_CHECK_TIMES\x015",
        store_host=ctx.store_host,
    )  # fmt: skip
    appended = ctx.store.append(half)
    before = ctx.store.max_offset_in_queue(TRANS_HALF_TOPIC, 0)
    msg_id = offset_msg_id(appended.store_host, appended.phy_offset).encode()
    answer = await ask(cluster.broker_addr, golden(323, b'{"msgId":"%s"}' % msg_id))
    assert answer.code == ResponseCode.SUCCESS
    assert ctx.store.max_offset_in_queue(TRANS_HALF_TOPIC, 0) == before + 1
    entry = ctx.store.consume_queues[(TRANS_HALF_TOPIC, 0)].entry(before)
    assert entry is not None
    copy = decode_record(ctx.store.look_message_by_offset(entry[0]))  # type: ignore[arg-type]
    assert copy.properties["TRANSACTION_CHECK_TIMES"] == "0" and copy.body == b"tx"
    bad = await ask(cluster.broker_addr, golden(323, b'{"msgId":"0000"}'))
    assert (bad.code, bad.remark) == (
        ResponseCode.SYSTEM_ERROR,
        "Exception was thrown when putting message back to RMQ_SYS_TRANS_HALF_TOPIC.",
    )


async def test_all_producer_info_lists_heartbeating_producers(cluster: EmbeddedCluster) -> None:
    async with Producer("info-pg", cluster.namesrv_addr) as producer:
        await _topic(cluster, "InfoT")
        await producer.send(Message("InfoT", b"x"))
        answer = await ask(cluster.broker_addr, golden(328))
    assert answer.code == ResponseCode.SUCCESS
    table = ProducerTableInfo.decode(answer.body).data
    [info] = table["info-pg"]
    assert info.client_id == producer.instance.client_id
    assert info.language == "PYTHON" and info.remote_ip.startswith("/127.0.0.1:") and info.last_update_timestamp > 0


async def test_all_producer_info_leaves_out_a_group_whose_connections_closed(cluster: EmbeddedCluster) -> None:
    """4.9.8's ProducerManager keeps a group whose channels closed, empty, but ``getProducerTable`` builds its map
    from the channels, so GET_ALL_PRODUCER_INFO names no such group (only GET_PRODUCER_CONNECTION_LIST still finds
    it)."""
    heartbeat = HeartbeatData("10.0.0.9@79", producer_data_set=(ProducerData("info-closed"),))
    async with RemotingClient() as gone:
        answer = await gone.invoke(cluster.broker_addr, request(RequestCode.HEART_BEAT, body=heartbeat.encode()), 5)
        assert answer.code == ResponseCode.SUCCESS
        listed = ProducerTableInfo.decode((await ask(cluster.broker_addr, golden(328))).body).data
        assert [info.client_id for info in listed["info-closed"]] == ["10.0.0.9@79"]
    with trio.fail_after(10):
        while True:  # until the close reached the broker: the group has no connection left
            table = ProducerTableInfo.decode((await ask(cluster.broker_addr, golden(328))).body).data
            if not table.get("info-closed"):
                break
            await trio.sleep(0.01)
    assert "info-closed" not in table


async def test_topics_and_subscription_by_consumer_answer_as_rocketmq_5(cluster: EmbeddedCluster) -> None:
    """RocketMQ 5's QUERY_TOPICS_BY_CONSUMER (343): the topics the group has offsets on here, with the broker's
    address; QUERY_SUBSCRIPTION_BY_CONSUMER (345): the online group's subscription of the topic, without one when it
    has none (broker/src/main/java/org/apache/rocketmq/broker/processor/AdminBrokerProcessor.java, 5.3.3)."""
    offsets = cluster.controller.context.offsets
    offsets.commit("bycons-g", "ByConsT", 0, 3)
    offsets.commit("bycons-g", "%RETRY%bycons-g", 0, 0)
    offsets.commit("other-g", "ByConsU", 0, 1)
    answer = await ask(cluster.broker_addr, golden(343, b'{"group":"bycons-g"}'))
    assert answer.code == ResponseCode.SUCCESS
    listed = TopicList.decode(answer.body)
    assert (sorted(listed.topic_list), listed.broker_addr) == (["%RETRY%bycons-g", "ByConsT"], cluster.broker_addr)
    nobody = TopicList.decode((await ask(cluster.broker_addr, golden(343, b'{"group":"nobody"}'))).body)
    assert nobody.topic_list == []
    no_group = await ask(cluster.broker_addr, golden(343))
    assert no_group.code == ResponseCode.SYSTEM_ERROR and "group" in (no_group.remark or "")

    frame = golden(345, b'{"group":"bycons-g","topic":"ByConsT"}')
    offline = await ask(cluster.broker_addr, frame)
    assert offline.code == ResponseCode.SUCCESS
    assert orjson.loads(offline.body) == {"group": "bycons-g", "topic": "ByConsT"}
    sub = SubscriptionData("ByConsT", "A || B", ("A", "B"), sub_version=5)
    heartbeat = HeartbeatData(
        "10.0.0.9@81", consumer_data_set=(ConsumerData("bycons-g", subscription_data_set=(sub,)),)
    )
    async with RemotingClient() as member:
        joined = await member.invoke(cluster.broker_addr, request(RequestCode.HEART_BEAT, body=heartbeat.encode()), 5)
        assert joined.code == ResponseCode.SUCCESS
        online = await ask(cluster.broker_addr, frame)
    assert online.code == ResponseCode.SUCCESS
    body = orjson.loads(online.body)
    assert (body["group"], body["topic"]) == ("bycons-g", "ByConsT")
    assert SubscriptionData.from_json(body["subscriptionData"]) == sub


async def test_topic_config_and_delay_offsets(cluster: EmbeddedCluster) -> None:
    await _topic(cluster, "ConfT", queues=3)
    answer = await ask(cluster.broker_addr, golden(351, b'{"lo":false,"topic":"ConfT"}'))
    assert answer.code == ResponseCode.SUCCESS
    config = orjson.loads(answer.body)
    assert (config["topicName"], config["readQueueNums"], config["perm"], config["attributes"]) == ("ConfT", 3, 6, {})
    missing = await ask(cluster.broker_addr, golden(351, b'{"topic":"Nope"}'))
    assert (missing.code, missing.remark) == (ResponseCode.TOPIC_NOT_EXIST, "No topic in this broker. topic: Nope")
    schedule = cluster.controller.schedule
    await deliver_delayed(cluster, "DelayT", 1, 2)
    delays = await ask(cluster.broker_addr, golden(45))
    assert delays.code == ResponseCode.SUCCESS
    assert bytes(delays.body) == encode_delay_offsets(dict(schedule.offsets))
    assert orjson.loads(delays.body)["offsetTable"]["1"] == 2


async def test_consumer_status_asks_every_online_consumer_for_its_offsets(cluster: EmbeddedCluster) -> None:
    await _topic(cluster, "StatusT", queues=2)
    seen = trio.Event()

    async def listener(msgs: list[object]) -> ConsumeConcurrentlyStatus:
        seen.set()
        return ConsumeConcurrentlyStatus.CONSUME_SUCCESS

    consumer = PushConsumer("status-cg", cluster.namesrv_addr)
    consumer.subscribe("StatusT")
    consumer.register_message_listener(listener)
    async with consumer, Producer("status-pg", cluster.namesrv_addr) as producer:
        await producer.send(Message("StatusT", b"x"), queue=MessageQueue("StatusT", "broker-a", 1))
        with trio.fail_after(30):
            await seen.wait()
            while consumer.offset_store.read_memory(MessageQueue("StatusT", "broker-a", 1)) != 1:
                await trio.sleep(0.02)
        answer = await ask(cluster.broker_addr, golden(223, b'{"group":"status-cg","topic":"StatusT"}'))
    assert answer.code == ResponseCode.SUCCESS
    table = ConsumerStatusBody.decode(answer.body).consumer_table
    assert table[consumer.instance.client_id][MessageQueue("StatusT", "broker-a", 1)] == 1
    offline = await ask(cluster.broker_addr, golden(223, b'{"group":"nobody","topic":"StatusT"}'))
    assert (offline.code, offline.remark) == (
        ResponseCode.SYSTEM_ERROR,
        "No Any Consumer online in the consumer group: [nobody]",
    )


async def test_unit_topic_lists_and_name_server_settings(cluster: EmbeddedCluster, tmp_path: Path) -> None:
    from remoting.client import RemotingClient

    flags = {"UnitT": 1, "UnitSubT": 2, "BothT": 3}
    async with RemotingClient() as client:
        for topic, flag in flags.items():
            fields = dict(create_topic_request(topic).ext_fields, topicSysFlag=str(flag))
            from remoting.codec.command import request

            assert (await client.invoke(cluster.broker_addr, request(17, fields), 5)).code == ResponseCode.SUCCESS
    # Each creation was answered once the name server took it (AdminBrokerProcessor.updateAndCreateTopic's
    # registerIncrementBrokerData), so the lists hold the three at once.
    lists = {
        code: TopicList.decode((await ask(cluster.namesrv_addr, golden(code))).body).topic_list
        for code in (311, 312, 313)
    }
    assert lists == {311: ["BothT", "UnitT"], 312: ["BothT", "UnitSubT"], 313: ["UnitSubT"]}

    before = bytes((await ask(cluster.namesrv_addr, golden(RequestCode.GET_NAMESRV_CONFIG))).body).decode()
    assert "orderMessageEnable=false\n" in before
    updated = await ask(cluster.namesrv_addr, golden(318, body=b"orderMessageEnable=true\n"))
    assert updated.code == ResponseCode.SUCCESS
    after = bytes((await ask(cluster.namesrv_addr, golden(319))).body).decode()
    assert "orderMessageEnable=true\n" in after
    assert cluster.namesrv is not None and cluster.namesrv.processor.order_message_enable
    stored = Path(cluster.namesrv_config.config_store_path).read_text()
    assert "orderMessageEnable=true\n" in stored
    refused = await ask(cluster.namesrv_addr, golden(318, body=b"kvConfigPath=/tmp/x\n"))
    assert (refused.code, refused.remark) == (ResponseCode.NO_PERMISSION, "Can not update config in black list.")


async def test_manual_commit_log_deletion_then_expired_consume_queues_are_cleaned(tmp_path: Path) -> None:
    small = {"mapped_file_size_commit_log": 64 << 10, "max_message_size": 16 << 10, "file_reserved_time": 0}
    async with EmbeddedCluster(tmp_path / "cluster", **small) as cluster:
        await _topic(cluster, "OldT")
        await _topic(cluster, "NewT")
        _put(cluster, "OldT", 4, body=b"o" * 8000)
        _put(cluster, "NewT", 40, body=b"n" * 8000)  # rolls several segments past OldT's
        store = cluster.controller.context.store
        assert store.commitlog.min_offset == 0
        answer = await ask(cluster.broker_addr, golden(329))
        assert answer.code == ResponseCode.SUCCESS
        assert store.retention.manual_delete_times == 20  # used by the next pass, a minute after the start
        await store.retention.check_once()
        assert store.commitlog.min_offset > 0
        assert ("OldT", 0) in store.consume_queues
        cleaned = await ask(cluster.broker_addr, golden(306))
        assert cleaned.code == ResponseCode.SUCCESS
        assert ("OldT", 0) not in store.consume_queues and ("NewT", 0) in store.consume_queues
        assert not (store.config.consume_queue_dir / "OldT" / "0").exists()
