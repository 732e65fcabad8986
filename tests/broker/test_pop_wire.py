"""Pop over remoting: POP_MESSAGE, ACK_MESSAGE and CHANGE_MESSAGE_INVISIBLETIME as a RocketMQ 5.3.3 remoting client
sends them (client/src/main/java/org/apache/rocketmq/client/impl/MQClientAPIImpl.java), over a real socket to an
embedded broker, in virtual time (``autojump_clock``; the store's clock follows Trio's)."""

from __future__ import annotations

import base64
from collections.abc import Callable
from pathlib import Path

import attrs
import orjson
import pytest
import trio
import trio.testing

from broker.embedded import EmbeddedCluster
from broker.pop import ReceiptHandle
from broker.pop.revive import REVIVE_CK_GROUP, REVIVE_GROUP
from broker.pop.service import revive_topic
from client.message import Message
from client.producer import Producer
from remoting.client import RemotingClient
from remoting.codec.bodies.broker_metadata import SubscriptionGroupConfig
from remoting.codec.bodies.pop import BatchAck, BatchAckMessageRequestBody
from remoting.codec.bodies.tables import KVTable, MessageQueue
from remoting.codec.codes import RequestCode, ResponseCode
from remoting.codec.command import RemotingCommand, request
from remoting.codec.headers.admin import QuerySubscriptionByConsumerRequestHeader
from remoting.codec.message import MessageExt, MessageRecord
from remoting.codec.pull_body import decode_records
from tests.conftest import SMALL_STORE
from tests.proxy.test_pop import SMALL_SEGMENTS, expire_old_segments, fill_a_segment, send
from tests.remoting.helpers import GateProcessor
from tests.semantics.helpers import create_topic, use_virtual_store_clock

GROUP = "pop-wire-group"


async def ask(cluster: EmbeddedCluster, cmd: RemotingCommand, timeout: float = 60) -> RemotingCommand:
    async with RemotingClient() as client:
        return await client.invoke(cluster.broker_addr, cmd, timeout)


def pop_request(
    clock: Callable[[], int], topic: str, *, invisible: int = 30_000, poll: int = 0, **extra: str
) -> RemotingCommand:
    fields = {"consumerGroup": GROUP, "topic": topic, "queueId": "-1", "maxMsgNums": "32",
              "invisibleTime": str(invisible), "pollTime": str(poll), "bornTime": str(clock()), "initMode": "0",
              "expType": "TAG", "exp": "*", **extra}  # fmt: skip
    return request(RequestCode.POP_MESSAGE, fields)


def messages(answer: RemotingCommand) -> list[MessageExt]:
    assert answer.code == ResponseCode.SUCCESS, (answer.code, answer.remark)
    return decode_records(bytes(answer.body))


async def woken_by_a_send(
    cluster: EmbeddedCluster, waiting: RemotingCommand, body: bytes | None
) -> tuple[RemotingCommand, float]:
    """``waiting``'s answer, ``body`` (if any) sent to its topic 3 s after it was asked, and the seconds it took."""
    answers: list[RemotingCommand] = []
    start = trio.current_time()

    async def wait() -> None:
        answers.append(await ask(cluster, waiting))

    async with trio.open_nursery() as nursery:
        nursery.start_soon(wait)
        if body is not None:
            await trio.sleep(3)
            await send(cluster, waiting.ext_fields["topic"], body)
    return answers[0], trio.current_time() - start


def ack_request(topic: str, msg: MessageExt, group: str = GROUP) -> RemotingCommand:
    """The ACK_MESSAGE Java's DefaultMQPushConsumerImpl.ackAsync sends: the topic the message lies in
    (ExtraInfoUtil.getRealTopic: the pop retry topic for a redelivery), the queue and offset of its POP_CK."""
    ck = msg.properties["POP_CK"].split(" ")
    real = f"%RETRY%{group}_{topic}" if ck[4] == "1" else topic
    fields = {"consumerGroup": group, "topic": real, "queueId": ck[6], "extraInfo": msg.properties["POP_CK"],
              "offset": ck[7]}  # fmt: skip
    return request(RequestCode.ACK_MESSAGE, fields)


async def test_pop_then_ack_hands_out_handles_java_parses_and_nothing_comes_again(
    embedded_cluster: EmbeddedCluster, autojump_clock: trio.testing.MockClock
) -> None:
    clock = use_virtual_store_clock(embedded_cluster)
    await create_topic(embedded_cluster, "PopWireA", queues=2)
    await send(embedded_cluster, "PopWireA", b"a0", b"a1", b"a2")
    answer = await ask(embedded_cluster, pop_request(clock, "PopWireA"))
    popped = messages(answer)
    assert sorted(m.body for m in popped) == [b"a0", b"a1", b"a2"]
    fields = answer.ext_fields
    assert (fields["invisibleTime"], fields["reviveQid"], fields["restNum"]) == ("30000", "0", "0")
    for m in popped:  # ExtraInfoUtil.buildExtraInfo with the message's offset
        ck = m.properties["POP_CK"].split(" ")
        assert ck[1:8] == [fields["popTime"], "30000", "0", "0", "broker-a", str(m.queue_id), str(m.queue_offset)]
        assert f"0 {m.queue_id} {ck[0]}" in fields["startOffsetInfo"].split(";")
    for m in popped:
        acked = await ask(embedded_cluster, ack_request("PopWireA", m))
        assert acked.code == ResponseCode.SUCCESS, acked.remark
    await trio.sleep(45)
    again = await ask(embedded_cluster, pop_request(clock, "PopWireA"))
    assert (again.code, again.remark) == (ResponseCode.POLLING_TIMEOUT, "NO_MESSAGE_IN_QUEUE")


async def test_a_message_not_acked_comes_again_from_the_retry_topic_under_its_own_topic(
    embedded_cluster: EmbeddedCluster, autojump_clock: trio.testing.MockClock
) -> None:
    clock = use_virtual_store_clock(embedded_cluster)
    await create_topic(embedded_cluster, "PopWireB")
    await send(embedded_cluster, "PopWireB", b"b0")
    [_first] = messages(await ask(embedded_cluster, pop_request(clock, "PopWireB", invisible=10_000)))
    await trio.sleep(15)
    [again] = messages(await ask(embedded_cluster, pop_request(clock, "PopWireB")))
    assert (again.body, again.topic, again.reconsume_times) == (b"b0", "PopWireB", 1)
    assert again.properties["POP_CK"].split(" ")[4] == "1"  # the V1 retry topic
    acked = await ask(embedded_cluster, ack_request("PopWireB", again))
    assert acked.code == ResponseCode.SUCCESS, acked.remark
    await trio.sleep(45)
    assert (await ask(embedded_cluster, pop_request(clock, "PopWireB"))).code == ResponseCode.POLLING_TIMEOUT


async def test_a_change_of_invisibility_moves_the_redelivery(
    embedded_cluster: EmbeddedCluster, autojump_clock: trio.testing.MockClock
) -> None:
    clock = use_virtual_store_clock(embedded_cluster)
    await create_topic(embedded_cluster, "PopWireC")
    await send(embedded_cluster, "PopWireC", b"c0")
    [m] = messages(await ask(embedded_cluster, pop_request(clock, "PopWireC", invisible=10_000)))
    fields = {"consumerGroup": GROUP, "topic": "PopWireC", "queueId": str(m.queue_id),
              "extraInfo": m.properties["POP_CK"], "offset": str(m.queue_offset), "invisibleTime": "60000"}  # fmt: skip
    changed = await ask(embedded_cluster, request(RequestCode.CHANGE_MESSAGE_INVISIBLETIME, fields))
    assert changed.code == ResponseCode.SUCCESS, changed.remark
    assert (changed.ext_fields["invisibleTime"], changed.ext_fields["reviveQid"]) == ("60000", "0")
    assert int(changed.ext_fields["popTime"]) >= int(m.properties["POP_CK"].split(" ")[1])
    await trio.sleep(20)
    assert (await ask(embedded_cluster, pop_request(clock, "PopWireC"))).code == ResponseCode.POLLING_TIMEOUT
    await trio.sleep(50)
    [again] = messages(await ask(embedded_cluster, pop_request(clock, "PopWireC")))
    assert again.body == b"c0"


async def test_an_orderly_pop_blocks_its_queue_until_acked(
    embedded_cluster: EmbeddedCluster, autojump_clock: trio.testing.MockClock
) -> None:
    clock = use_virtual_store_clock(embedded_cluster)
    await create_topic(embedded_cluster, "PopWireD")
    await send(embedded_cluster, "PopWireD", b"d0", b"d1")
    answer = await ask(embedded_cluster, pop_request(clock, "PopWireD", maxMsgNums="1", order="true"))
    [m] = messages(answer)
    assert (m.body, answer.ext_fields["reviveQid"], m.properties["POP_CK"].split(" ")[3]) == (b"d0", "999", "999")
    assert answer.ext_fields["orderCountInfo"] == f"0 qo{m.queue_id}%{m.queue_offset} 0"
    blocked = await ask(embedded_cluster, pop_request(clock, "PopWireD", order="true"))
    assert blocked.code == ResponseCode.POLLING_TIMEOUT
    acked = await ask(embedded_cluster, ack_request("PopWireD", m))
    assert acked.code == ResponseCode.SUCCESS, acked.remark
    [n] = messages(await ask(embedded_cluster, pop_request(clock, "PopWireD", order="true")))
    assert n.body == b"d1"
    await trio.sleep(40)  # not acked: the same message again, its attempt counted
    [again] = messages(await ask(embedded_cluster, pop_request(clock, "PopWireD", order="true")))
    assert (again.body, again.reconsume_times) == (b"d1", 1)


async def test_a_reset_of_a_queue_unblocks_its_orderly_pop_and_it_reads_from_the_reset(
    tmp_path: Path, autojump_clock: trio.testing.MockClock
) -> None:
    """5.3.3's PopMessageProcessor.resetPopOffset, which an orderly pop calls too (getPopOffset), clears the queue's
    order info (ConsumerOrderInfoManager.clearBlock) when it takes an admin's reset of it (``useServerSideResetOffset``
    holds one): the batch in flight no longer blocks the queue, and the pop reads from the reset offset."""
    async with EmbeddedCluster(tmp_path / "reset", use_server_side_reset_offset=True, **SMALL_STORE) as cluster:
        await _orderly_pop_after_reset(cluster)


async def _orderly_pop_after_reset(cluster: EmbeddedCluster) -> None:
    clock = use_virtual_store_clock(cluster)
    await create_topic(cluster, "PopWireR")
    await send(cluster, "PopWireR", b"r0", b"r1")
    [m] = messages(await ask(cluster, pop_request(clock, "PopWireR", maxMsgNums="1", order="true")))
    assert m.body == b"r0"
    fields = {"topic": "PopWireR", "group": GROUP, "timestamp": "-1", "isForce": "true",
              "queueId": str(m.queue_id), "offset": str(m.queue_offset)}  # fmt: skip
    reset = await ask(cluster, request(RequestCode.INVOKE_BROKER_TO_RESET_OFFSET, fields))
    assert reset.code == ResponseCode.SUCCESS, reset.remark
    cmd = pop_request(clock, "PopWireR", maxMsgNums="1", order="true", queueId=str(m.queue_id))
    [again] = messages(await ask(cluster, cmd))
    assert (again.body, again.queue_offset) == (b"r0", m.queue_offset)


async def test_a_long_polling_pop_is_woken_by_a_send_and_one_that_finds_nothing_times_out(
    embedded_cluster: EmbeddedCluster, autojump_clock: trio.testing.MockClock
) -> None:
    clock = use_virtual_store_clock(embedded_cluster)
    await create_topic(embedded_cluster, "PopWireE")
    empty, waited = await woken_by_a_send(embedded_cluster, pop_request(clock, "PopWireE", poll=5_000), None)
    assert (empty.code, empty.remark) == (ResponseCode.POLLING_TIMEOUT, "NO_MESSAGE_IN_QUEUE")
    assert waited >= 5
    answer, waited = await woken_by_a_send(embedded_cluster, pop_request(clock, "PopWireE", poll=20_000), b"e0")
    assert [m.body for m in messages(answer)] == [b"e0"]
    assert waited < 8  # woken by the arrival 3 s in, not by the end of its polling window


async def test_refusals_answer_javas_codes(
    embedded_cluster: EmbeddedCluster, autojump_clock: trio.testing.MockClock
) -> None:
    clock = use_virtual_store_clock(embedded_cluster)
    await create_topic(embedded_cluster, "PopWireF")
    await send(embedded_cluster, "PopWireF", b"f0")
    no_group = pop_request(clock, "PopWireF")
    del no_group.ext_fields["consumerGroup"]
    missing = await ask(embedded_cluster, no_group)
    assert missing.code == ResponseCode.SYSTEM_ERROR and "consumerGroup" in (missing.remark or "")
    too_many = await ask(embedded_cluster, pop_request(clock, "PopWireF", maxMsgNums="33"))
    assert (too_many.code, too_many.remark) == (
        ResponseCode.INVALID_PARAMETER,
        "the broker[127.0.0.1] pop message's num is greater than 32",
    )
    late = await ask(embedded_cluster, pop_request(lambda: clock() - 10_000, "PopWireF", poll=1_000))
    assert late.code == ResponseCode.POLLING_TIMEOUT and "timeout too much" in (late.remark or "")
    unknown = await ask(embedded_cluster, pop_request(clock, "PopWireNope"))
    assert unknown.code == ResponseCode.TOPIC_NOT_EXIST
    assert (unknown.remark or "").startswith("topic[PopWireNope] not exist, apply first please! \nSee ")
    bad_queue = await ask(embedded_cluster, pop_request(clock, "PopWireF", queueId="1"))
    assert bad_queue.code == ResponseCode.INVALID_PARAMETER
    assert (bad_queue.remark or "").startswith("queueId[1] is illegal, topic:[PopWireF] topicConfig.readQueueNums:[1]")
    [m] = messages(await ask(embedded_cluster, pop_request(clock, "PopWireF")))
    good = ack_request("PopWireF", m)
    bad_info = await ask(embedded_cluster, request(RequestCode.ACK_MESSAGE, {**good.ext_fields, "extraInfo": "x y"}))
    assert bad_info.code == ResponseCode.SYSTEM_ERROR
    gone = await ask(embedded_cluster, request(RequestCode.ACK_MESSAGE, {**good.ext_fields, "topic": "PopWireNope"}))
    assert gone.code == ResponseCode.TOPIC_NOT_EXIST
    far = await ask(embedded_cluster, request(RequestCode.ACK_MESSAGE, {**good.ext_fields, "offset": "5"}))
    assert (far.code, far.remark) == (ResponseCode.NO_MESSAGE, "offset is illegal, key:PopWireF@0, commit:5, store:0~1")
    change = {**good.ext_fields, "offset": "1", "invisibleTime": "1000"}
    past_end = await ask(embedded_cluster, request(RequestCode.CHANGE_MESSAGE_INVISIBLETIME, change))
    assert past_end.code == ResponseCode.NO_MESSAGE
    illegal_queue = await ask(embedded_cluster, request(RequestCode.ACK_MESSAGE, {**good.ext_fields, "queueId": "3"}))
    assert illegal_queue.code == ResponseCode.MESSAGE_ILLEGAL
    embedded_cluster.controller.context.groups.update(SubscriptionGroupConfig("off", consume_enable=False))
    off = await ask(embedded_cluster, pop_request(clock, "PopWireF", consumerGroup="off"))
    assert (off.code, off.remark) == (ResponseCode.NO_PERMISSION, "subscription group no permission, off")


def test_extra_info_is_read_as_javas_ack_reads_it() -> None:
    """AckMessageProcessor reads the queue and offset from the header and the rest from ``extraInfo``: the POP_CK
    (8 fields), a proxy's receipt handle (9, the CommitLog offset appended) and buildExtraInfo without the message
    offset (7) all name the same handle; fewer than six fields, or a bad one of the six read, do not parse."""
    handle = ReceiptHandle(5, 1700000000000, 30000, 0, 1, "broker-a", 2, 7, 4096)
    assert handle.extra_info() == "5 1700000000000 30000 0 1 broker-a 2 7"
    for text in (handle.extra_info(), handle.encode(), "5 1700000000000 30000 0 1 broker-a 2"):
        assert ReceiptHandle.from_extra_info(text, 2, 7) == attrs.evolve(handle, commit_log_offset=0)
    for bad in ("x y", "5 1 2 3 4", "5 1 2 3 4  6 7", "-5 1 2 3 4 b 6 7", "5 1 x 3 4 b 6 7"):
        with pytest.raises(ValueError):
            ReceiptHandle.from_extra_info(bad, 2, 7)


def test_an_extra_info_of_six_fields_or_more_than_nine_is_read_as_javas_ack_reads_it() -> None:
    """AckMessageProcessor.appendAck and ChangeInvisibleTimeProcessor read only the first six fields of ``extraInfo``
    (ExtraInfoUtil.getCkQueueOffset, getPopTime, getInvisibleTime, getReviveQid, getBrokerName; the topic type for
    the real topic), the queue and offset from the header: a handle without the queue id, or with fields after the
    CommitLog offset, names the same message."""
    handle = ReceiptHandle(5, 1700000000000, 30000, 0, 1, "broker-a", 2, 7, 0)
    for text in ("5 1700000000000 30000 0 1 broker-a", "5 1700000000000 30000 0 1 broker-a 2 7 4096 extra"):
        assert ReceiptHandle.from_extra_info(text, 2, 7) == handle


async def test_a_malformed_sql92_expression_is_checked_after_the_request_and_the_topic(
    embedded_cluster: EmbeddedCluster, autojump_clock: trio.testing.MockClock
) -> None:
    """PopMessageProcessor.processRequest (5.3.3) builds the pop's filter after its checks of the request, the topic,
    the queue and the group: a malformed SQL92 expression is SUBSCRIPTION_PARSE_FAILED only for a pop they pass."""
    clock = use_virtual_store_clock(embedded_cluster)
    await create_topic(embedded_cluster, "PopWireSql")
    malformed = {"expType": "SQL92", "exp": "a >"}
    too_many = await ask(embedded_cluster, pop_request(clock, "PopWireSql", maxMsgNums="33", **malformed))
    assert too_many.code == ResponseCode.INVALID_PARAMETER
    unknown = await ask(embedded_cluster, pop_request(clock, "PopWireSqlNope", **malformed))
    assert unknown.code == ResponseCode.TOPIC_NOT_EXIST
    bad_queue = await ask(embedded_cluster, pop_request(clock, "PopWireSql", queueId="1", **malformed))
    assert bad_queue.code == ResponseCode.INVALID_PARAMETER
    refused = await ask(embedded_cluster, pop_request(clock, "PopWireSql", **malformed))
    assert (refused.code, refused.remark) == (
        ResponseCode.SUBSCRIPTION_PARSE_FAILED,
        "parse the consumer's subscription failed",
    )


async def test_a_pop_of_one_queue_reads_that_queue_only(
    embedded_cluster: EmbeddedCluster, autojump_clock: trio.testing.MockClock
) -> None:
    clock = use_virtual_store_clock(embedded_cluster)
    await create_topic(embedded_cluster, "PopWireG", queues=2)
    await send(embedded_cluster, "PopWireG", b"g0", b"g1", b"g2", b"g3")
    answer = await ask(embedded_cluster, pop_request(clock, "PopWireG", queueId="1"))
    popped = messages(answer)
    assert len(popped) == 2 and {m.queue_id for m in popped} == {1}
    assert answer.ext_fields["restNum"] == "0"
    [ck] = answer.ext_fields["startOffsetInfo"].split(";")
    assert ck == "0 1 0" and answer.ext_fields["msgOffsetInfo"] == "0 1 0,1"


def batch_ack_body(topic: str, popped: list[MessageExt]) -> bytes:
    """The body Java's MQClientAPIImpl.batchAckMessageAsync builds from POP_CKs: one entry per (retry, queue, CK
    offset, pop time), a bit per message at ``queueOffset - ckQueueOffset``, as fastjson writes it (short names,
    the BitSet's bytes in base64)."""
    entries: dict[tuple[str, ...], dict[str, object]] = {}
    bits: dict[tuple[str, ...], int] = {}
    for m in popped:
        ck = m.properties["POP_CK"].split(" ")
        key = (ck[4], ck[6], ck[0], ck[1])
        entries[key] = {"c": GROUP, "t": topic, "r": ck[4], "so": int(ck[0]), "q": int(ck[6]), "rq": int(ck[3]),
                        "pt": int(ck[1]), "it": int(ck[2])}  # fmt: skip
        bits[key] = bits.get(key, 0) | 1 << (int(ck[7]) - int(ck[0]))
    acks = []
    for key, entry in entries.items():
        raw = bits[key].to_bytes((bits[key].bit_length() + 7) // 8, "little")  # BitSet.toByteArray
        acks.append({**entry, "b": base64.b64encode(raw).decode()})
    return orjson.dumps({"acks": acks, "brokerName": "broker-a"})


async def test_a_batch_ack_acks_the_offsets_of_its_bit_sets(
    embedded_cluster: EmbeddedCluster, autojump_clock: trio.testing.MockClock
) -> None:
    clock = use_virtual_store_clock(embedded_cluster)
    await create_topic(embedded_cluster, "PopWireH")
    await send(embedded_cluster, "PopWireH", b"h0", b"h1", b"h2")
    popped = messages(await ask(embedded_cluster, pop_request(clock, "PopWireH", invisible=10_000)))
    body = batch_ack_body("PopWireH", [m for m in popped if m.body != b"h1"])
    acked = await ask(embedded_cluster, request(RequestCode.BATCH_ACK_MESSAGE, body=body))
    assert acked.code == ResponseCode.SUCCESS, acked.remark
    await trio.sleep(15)
    [again] = messages(await ask(embedded_cluster, pop_request(clock, "PopWireH")))
    assert again.body == b"h1"
    empty = await ask(embedded_cluster, request(RequestCode.BATCH_ACK_MESSAGE, body=b'{"acks":[]}'))
    assert empty.code == ResponseCode.NO_MESSAGE
    junk = await ask(embedded_cluster, request(RequestCode.BATCH_ACK_MESSAGE, body=b"{not json"))
    assert junk.code == ResponseCode.SYSTEM_ERROR


def test_the_batch_ack_body_reads_fastjsons_short_and_long_names() -> None:
    short = b'{"acks":[{"b":"BQ==","c":"g","it":30000,"pt":17,"q":2,"r":"1","rq":0,"so":40,"t":"T"}],"brokerName":"b"}'
    body = BatchAckMessageRequestBody.decode(short)
    assert body == BatchAckMessageRequestBody("b", (BatchAck("g", "T", "1", 40, 2, 0, 17, 30000, b"\x05"),))
    assert BatchAckMessageRequestBody.decode(body.encode()) == body
    long_names = (
        b'{"acks":[{"bitSet":[5],"consumerGroup":"g","invisibleTime":30000,"popTime":17,"queueId":2,'
        b'"retry":"1","reviveQueueId":0,"startOffset":40,"topic":"T"}],"brokerName":"b"}'
    )
    assert BatchAckMessageRequestBody.decode(long_names) == body


def notification(clock: Callable[[], int], topic: str, poll: int = 0, **extra: str) -> RemotingCommand:
    fields = {"consumerGroup": GROUP, "topic": topic, "queueId": "-1", "pollTime": str(poll),
              "bornTime": str(clock()), **extra}  # fmt: skip
    return request(RequestCode.NOTIFICATION, fields)


async def test_a_notification_says_whether_a_pop_would_find_messages_and_waits_for_one(
    embedded_cluster: EmbeddedCluster, autojump_clock: trio.testing.MockClock
) -> None:
    clock = use_virtual_store_clock(embedded_cluster)
    await create_topic(embedded_cluster, "PopWireN")
    empty, waited = await woken_by_a_send(embedded_cluster, notification(clock, "PopWireN", poll=5_000), None)
    assert empty.code == ResponseCode.SUCCESS and empty.ext_fields["hasMsg"] == "false"
    assert waited >= 5
    woken, waited = await woken_by_a_send(embedded_cluster, notification(clock, "PopWireN", poll=20_000), b"n0")
    assert woken.ext_fields["hasMsg"] == "true" and waited < 8
    [m] = messages(await ask(embedded_cluster, pop_request(clock, "PopWireN", order="true")))
    blocked = await ask(embedded_cluster, notification(clock, "PopWireN", order="true"))
    assert blocked.ext_fields["hasMsg"] == "false", "an orderly queue in flight has nothing to pop"
    assert (await ask(embedded_cluster, ack_request("PopWireN", m))).code == ResponseCode.SUCCESS
    unknown = await ask(embedded_cluster, notification(clock, "PopWireNope"))
    assert unknown.code == ResponseCode.TOPIC_NOT_EXIST


async def test_a_peek_reads_without_popping_and_polling_info_counts_the_waiting_pops(
    embedded_cluster: EmbeddedCluster, autojump_clock: trio.testing.MockClock
) -> None:
    clock = use_virtual_store_clock(embedded_cluster)
    await create_topic(embedded_cluster, "PopWireP")
    fields = {"consumerGroup": GROUP, "topic": "PopWireP", "queueId": "-1", "maxMsgNums": "32"}
    nothing = await ask(embedded_cluster, request(RequestCode.PEEK_MESSAGE, fields))
    assert (nothing.code, nothing.remark) == (ResponseCode.PULL_NOT_FOUND, "NO_MESSAGE_IN_QUEUE")
    info = {"consumerGroup": GROUP, "topic": "PopWireP", "queueId": "-1"}
    answers: list[RemotingCommand] = []

    async def poll() -> None:
        answers.append(await ask(embedded_cluster, pop_request(clock, "PopWireP", poll=20_000)))

    async with trio.open_nursery() as nursery:
        nursery.start_soon(poll)
        await trio.sleep(3)
        waiting = await ask(embedded_cluster, request(RequestCode.POLLING_INFO, info))
        assert (waiting.code, waiting.ext_fields["pollingNum"]) == (ResponseCode.SUCCESS, "1")
        await send(embedded_cluster, "PopWireP", b"p0")
    after = await ask(embedded_cluster, request(RequestCode.POLLING_INFO, info))
    assert after.ext_fields["pollingNum"] == "0"
    await send(embedded_cluster, "PopWireP", b"p2")
    for _ in range(2):  # a peek leaves the offset where it was
        peeked = await ask(embedded_cluster, request(RequestCode.PEEK_MESSAGE, fields))
        assert [m.body for m in messages(peeked)] == [b"p2"] and peeked.ext_fields["restNum"] == "1"
        assert "POP_CK" not in messages(peeked)[0].properties
    assert [m.body for m in messages(await ask(embedded_cluster, pop_request(clock, "PopWireP")))] == [b"p2"]


async def test_a_message_whose_properties_leave_no_room_for_pop_ck_goes_out_without_it(
    embedded_cluster: EmbeddedCluster, autojump_clock: trio.testing.MockClock
) -> None:
    """A message stored with properties near their 32767-byte limit has no room for ``POP_CK``: it goes out as
    stored, as 5.3.3's PopMessageProcessor sends a normal topic's records, and Java's client builds its handle from
    the header's offset infos (MQClientAPIImpl.processPopResponse). It used to fail the whole pop after its
    checkpoints were written, so the batch came only after its invisible time and the big message never."""
    clock = use_virtual_store_clock(embedded_cluster)
    await create_topic(embedded_cluster, "PopWireBig")
    async with Producer("pg-pop-big", embedded_cluster.namesrv_addr) as producer:
        await producer.send(Message("PopWireBig", b"small0"))
        big = Message("PopWireBig", b"big", keys="k" * 32_690)
        await producer.send(big)
        await producer.send(Message("PopWireBig", b"small1"))
    answer = await ask(embedded_cluster, pop_request(clock, "PopWireBig"))
    popped = messages(answer)
    assert [m.body for m in popped] == [b"small0", b"big", b"small1"]
    [bare] = [m for m in popped if "POP_CK" not in m.properties]
    assert bare.body == b"big"
    start = answer.ext_fields["startOffsetInfo"].split(" ")[2]
    extra = " ".join([start, answer.ext_fields["popTime"], "30000", "0", "0", "broker-a", str(bare.queue_id),
                      str(bare.queue_offset)])  # fmt: skip  # what the Java client builds
    acked = await ask(embedded_cluster, ack_request("PopWireBig", attrs.evolve(bare, properties={"POP_CK": extra})))
    assert acked.code == ResponseCode.SUCCESS, acked.remark
    for m in popped:
        if m is not bare:
            assert (await ask(embedded_cluster, ack_request("PopWireBig", m))).code == ResponseCode.SUCCESS
    await trio.sleep(45)
    again = await ask(embedded_cluster, pop_request(clock, "PopWireBig"))
    assert again.code == ResponseCode.POLLING_TIMEOUT


async def test_a_pop_of_no_messages_hands_out_none(
    embedded_cluster: EmbeddedCluster, autojump_clock: trio.testing.MockClock
) -> None:
    """``maxMsgNums`` 0 or less pops nothing (5.3.3's popMsgFromQueue stops once it has ``maxMsgNums``); it used to
    hand out one message, checkpointed for a client that asked for none."""
    clock = use_virtual_store_clock(embedded_cluster)
    await create_topic(embedded_cluster, "PopWireNone")
    await send(embedded_cluster, "PopWireNone", b"n0")
    for nums in ("0", "-5"):
        answer = await ask(embedded_cluster, pop_request(clock, "PopWireNone", maxMsgNums=nums))
        assert (answer.code, answer.remark) == (ResponseCode.POLLING_TIMEOUT, "NO_MESSAGE_IN_QUEUE")
    [first] = messages(await ask(embedded_cluster, pop_request(clock, "PopWireNone")))
    assert (first.body, first.reconsume_times) == (b"n0", 0)


def test_a_batch_ack_bit_set_is_read_only_where_the_queue_has_offsets() -> None:
    """A bit set far larger than its queue costs what the queue's range does: 16 MiB of set bits (134 million
    offsets) read for a queue of ten entries (5.3.3's appendAck walks BitSet.nextSetBit and skips what is out of
    range). It used to be expanded into every set bit first, seconds of the event loop every client shares."""
    raw = b"\xff" * (16 << 20)
    entry = BatchAck("g", "T", "0", 1000, 0, 0, 17, 30000, raw)
    assert list(entry.offsets(1003, 1012)) == list(range(1003, 1013))
    assert list(entry.offsets(0, 999)) == []
    sparse = BatchAck("g", "T", "0", 40, 0, 0, 17, 30000, b"\x05\x00\x80")
    assert list(sparse.offsets(0, 10**9)) == [40, 42, 63]
    assert list(sparse.offsets(41, 62)) == [42]


async def test_a_new_group_popping_from_the_first_offset_starts_at_the_queues_first_message(
    tmp_path: Path, autojump_clock: trio.testing.MockClock
) -> None:
    """``initMode`` 0 (ConsumeInitMode.MIN, what Java's RebalancePushImpl sends for CONSUME_FROM_FIRST_OFFSET) starts a
    group without an offset at the queue's first message, 1 (MAX) at its last, as 5.3.3's PopMessageProcessor
    .getInitOffset; it used to be ignored, so on a queue retention had aged a new group skipped all but the last."""
    async with EmbeddedCluster(tmp_path / "cluster", **SMALL_SEGMENTS) as cluster:
        clock = use_virtual_store_clock(cluster)
        await create_topic(cluster, "PopWireAged", queues=1)
        await send(cluster, "PopWireAged", b"old")
        await fill_a_segment(cluster)
        await send(cluster, "PopWireAged", b"kept1", b"kept2")
        await expire_old_segments(cluster, autojump_clock)
        assert cluster.controller.context.store.min_offset_in_queue("PopWireAged", 0) == 1
        first = await ask(cluster, pop_request(clock, "PopWireAged", initMode="0", consumerGroup="GMin"))
        last = await ask(cluster, pop_request(clock, "PopWireAged", initMode="1", consumerGroup="GMax"))
        assert [m.body for m in messages(first)] == [b"kept1", b"kept2"]
        assert [m.body for m in messages(last)] == [b"kept2"]


async def test_a_restarted_broker_revives_what_was_popped_before_without_any_pop(
    embedded_cluster: EmbeddedCluster, autojump_clock: trio.testing.MockClock
) -> None:
    """5.3.3's BrokerController.startBasicService starts PopReviveService with the broker (running on a master,
    broker/src/main/java/org/apache/rocketmq/broker/BrokerController.java): a message popped and not acked before a
    restart is written to the retry topic at its time though no client pops again."""
    clock = use_virtual_store_clock(embedded_cluster)
    await create_topic(embedded_cluster, "PopWireRestart")
    await send(embedded_cluster, "PopWireRestart", b"r0")
    [_popped] = messages(await ask(embedded_cluster, pop_request(clock, "PopWireRestart", invisible=10_000)))
    await embedded_cluster.restart_broker()
    use_virtual_store_clock(embedded_cluster, clock)
    await trio.sleep(20)
    retry = f"%RETRY%{GROUP}_PopWireRestart"
    answer = await ask(embedded_cluster, request(RequestCode.GET_MAX_OFFSET, {"topic": retry, "queueId": "0"}))
    assert (answer.code, answer.ext_fields.get("offset")) == (ResponseCode.SUCCESS, "1")


async def parked_then_sent(
    cluster: EmbeddedCluster, waiting: list[RemotingCommand], queue_id: int
) -> list[tuple[RemotingCommand, float]]:
    """The answers to ``waiting`` (parked in that order, 1 s apart) and the seconds each took from the first's
    asking; one message sent to queue ``queue_id`` of their topic 3 s after the last was asked."""
    answers: list[tuple[RemotingCommand, float]] = [None] * len(waiting)  # type: ignore[list-item]
    start = trio.current_time()

    async def wait(i: int) -> None:
        answer = await ask(cluster, waiting[i])
        answers[i] = answer, trio.current_time() - start

    topic = waiting[0].ext_fields["topic"]
    async with trio.open_nursery() as nursery:
        for i in range(len(waiting)):
            nursery.start_soon(wait, i)
            await trio.sleep(1)
        await trio.sleep(2)
        async with Producer("pg-pop-wake", cluster.namesrv_addr) as producer:
            await producer.send(Message(topic, b"woke"), queue=MessageQueue(topic, "broker-a", queue_id))
    return answers


def popped_at_the_arrival(answer: RemotingCommand, waited: float) -> None:
    assert [m.body for m in messages(answer)] == [b"woke"]
    assert waited < 10, "the pop answers at the arrival, not at the end of its window"


async def test_an_arrival_wakes_the_pop_of_its_queue_not_one_of_another_queue(
    embedded_cluster: EmbeddedCluster, autojump_clock: trio.testing.MockClock
) -> None:
    # PopLongPollingService polls by topic@group@queueId and wakes one request of the -1 key and one of the arrival's
    clock = use_virtual_store_clock(embedded_cluster)
    await create_topic(embedded_cluster, "PopWireQ", queues=2)
    on_0, on_1 = (pop_request(clock, "PopWireQ", poll=30_000, queueId=str(q)) for q in (0, 1))
    [(first, _), on_1_answer] = await parked_then_sent(embedded_cluster, [on_0, on_1], 1)
    assert first.code == ResponseCode.POLLING_TIMEOUT
    popped_at_the_arrival(*on_1_answer)


async def test_a_parked_notification_does_not_take_the_wake_of_a_pop(
    embedded_cluster: EmbeddedCluster, autojump_clock: trio.testing.MockClock
) -> None:
    # NotificationProcessor polls with a PopLongPollingService of its own, woken apart from the pops'
    clock = use_virtual_store_clock(embedded_cluster)
    await create_topic(embedded_cluster, "PopWireR")
    waiting = [notification(clock, "PopWireR", poll=30_000), pop_request(clock, "PopWireR", poll=30_000)]
    noticed, popped = await parked_then_sent(embedded_cluster, waiting, 0)
    popped_at_the_arrival(*popped)
    # woken too, it says true unless the pop took the message first (then it waits on, as Java's would)
    assert noticed[0].code == ResponseCode.SUCCESS


async def test_polling_info_counts_the_parked_pops_not_the_notifications(
    embedded_cluster: EmbeddedCluster, autojump_clock: trio.testing.MockClock
) -> None:
    # PollingInfoProcessor reads PopMessageProcessor's polling map; notifications park in NotificationProcessor's
    clock = use_virtual_store_clock(embedded_cluster)
    await create_topic(embedded_cluster, "PopWireS")
    info = request(RequestCode.POLLING_INFO, {"consumerGroup": GROUP, "topic": "PopWireS", "queueId": "-1"})

    async def park(cmd: RemotingCommand) -> None:
        await ask(embedded_cluster, cmd)

    async with trio.open_nursery() as nursery:
        nursery.start_soon(park, notification(clock, "PopWireS", poll=10_000))
        nursery.start_soon(park, notification(clock, "PopWireS", poll=10_000))
        nursery.start_soon(park, pop_request(clock, "PopWireS", poll=10_000))
        await trio.sleep(3)
        waiting = await ask(embedded_cluster, info)
        assert waiting.ext_fields["pollingNum"] == "1"


async def test_a_parked_pop_whose_client_left_gives_its_polling_slot_up(
    embedded_cluster: EmbeddedCluster, autojump_clock: trio.testing.MockClock
) -> None:
    """A pop (or notification) parked for an hour whose connection closes leaves within seconds, as the pull hold
    service drops the pulls of closed connections: its slot counted against ``popPollingSize`` and
    ``maxPopPollingSize`` until an arrival or the end of the window the client chose, so clients gone could make
    every pop of the key answer POLLING_FULL."""
    clock = use_virtual_store_clock(embedded_cluster)
    await create_topic(embedded_cluster, "PopWireGone")
    info = {"consumerGroup": GROUP, "topic": "PopWireGone", "queueId": "-1"}
    async with RemotingClient() as client:
        with trio.move_on_after(3):
            await client.invoke(embedded_cluster.broker_addr, pop_request(clock, "PopWireGone", poll=3_600_000), 3600)
        waiting = await ask(embedded_cluster, request(RequestCode.POLLING_INFO, info))
        assert waiting.ext_fields["pollingNum"] == "1"
    await trio.sleep(10)
    after = await ask(embedded_cluster, request(RequestCode.POLLING_INFO, info))
    assert after.ext_fields["pollingNum"] == "0"


async def test_a_message_arriving_while_a_pop_parks_is_handed_out_at_once(
    embedded_cluster: EmbeddedCluster, autojump_clock: trio.testing.MockClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A message stored between a pop's read that found nothing and the moment its long poll starts waiting is
    handed out at once (PopLongPollingService files the request in the processor's own call, so no arrival falls
    between); it used to wait out the whole polling window. The arrival is injected at that moment."""
    clock = use_virtual_store_clock(embedded_cluster)
    await create_topic(embedded_cluster, "PopWireGap")
    processor, store = embedded_cluster.controller.pop_processor, embedded_cluster.controller.context.store
    park = processor._park

    def park_then_arrive(ctx: object, cmd: RemotingCommand, wait: Callable[[], object]) -> None:
        park(ctx, cmd, wait)  # type: ignore[arg-type]
        store.append(MessageRecord("PopWireGap", b"g0"))

    monkeypatch.setattr(processor, "_park", park_then_arrive)
    start = trio.current_time()
    answer = await ask(embedded_cluster, pop_request(clock, "PopWireGap", poll=20_000))
    assert [m.body for m in messages(answer)] == [b"g0"]
    assert trio.current_time() - start < 5  # not at the end of its 20 s window


async def test_an_ack_past_the_invisible_time_still_cancels_the_revive_to_come(
    embedded_cluster: EmbeddedCluster, autojump_clock: trio.testing.MockClock
) -> None:
    """AckMessageProcessor.appendAck writes the ACK whatever the handle's invisible time: one that comes after it,
    before the revive reached its CK, keeps the message from coming again (ACK_MESSAGE and BATCH_ACK_MESSAGE)."""
    clock = use_virtual_store_clock(embedded_cluster)
    await create_topic(embedded_cluster, "PopWireLate")
    await send(embedded_cluster, "PopWireLate", b"l0", b"l1")
    first, second = messages(await ask(embedded_cluster, pop_request(clock, "PopWireLate", invisible=10_000)))
    await trio.sleep(10.1)
    acked = await ask(embedded_cluster, ack_request("PopWireLate", first))
    assert acked.code == ResponseCode.SUCCESS, acked.remark
    body = batch_ack_body("PopWireLate", [second])
    assert (await ask(embedded_cluster, request(RequestCode.BATCH_ACK_MESSAGE, body=body))).code == ResponseCode.SUCCESS
    await trio.sleep(45)
    again = await ask(embedded_cluster, pop_request(clock, "PopWireLate"))
    assert again.code == ResponseCode.POLLING_TIMEOUT, [m.body for m in messages(again)]


async def test_an_arrival_wakes_the_next_parked_pop_when_the_first_ones_client_left(
    embedded_cluster: EmbeddedCluster, autojump_clock: trio.testing.MockClock
) -> None:
    """PopLongPollingService.pollRemotingCommands passes over a request whose channel is no longer active and wakes
    the next: a message arriving before the closed connection's pop was swept goes to the pop still waiting."""
    clock = use_virtual_store_clock(embedded_cluster)
    await create_topic(embedded_cluster, "PopWireLeft")
    answers: list[tuple[RemotingCommand, float]] = []
    start = trio.current_time()

    async def second() -> None:
        answer = await ask(embedded_cluster, pop_request(clock, "PopWireLeft", poll=30_000, queueId="0"))
        answers.append((answer, trio.current_time() - start))

    async with trio.open_nursery() as nursery:
        async with RemotingClient() as client:
            with trio.move_on_after(0.5):
                cmd = pop_request(clock, "PopWireLeft", poll=30_000, queueId="0")
                await client.invoke(embedded_cluster.broker_addr, cmd, 60)
            nursery.start_soon(second)
            await trio.sleep(0.5)
        await trio.sleep(1)
        await send(embedded_cluster, "PopWireLeft", b"woke")
    [(answer, waited)] = answers
    popped_at_the_arrival(answer, waited)


async def test_an_arrival_wakes_the_next_parked_notification_when_the_newest_ones_client_left(
    embedded_cluster: EmbeddedCluster, autojump_clock: trio.testing.MockClock
) -> None:
    """NotificationProcessor's long polling passes over a request whose channel is no longer active too: the newest
    parked notification's client left, so the arrival wakes the one still waiting (found by a review: only pops
    were shown to skip closed connections)."""
    clock = use_virtual_store_clock(embedded_cluster)
    await create_topic(embedded_cluster, "PopWireNLeft")
    answers: list[tuple[RemotingCommand, float]] = []
    start = trio.current_time()

    async def first() -> None:
        answer = await ask(embedded_cluster, notification(clock, "PopWireNLeft", poll=30_000))
        answers.append((answer, trio.current_time() - start))

    async with trio.open_nursery() as nursery:
        nursery.start_soon(first)
        await trio.sleep(0.5)
        async with RemotingClient() as client:
            with trio.move_on_after(0.5):
                cmd = notification(clock, "PopWireNLeft", poll=30_000)
                await client.invoke(embedded_cluster.broker_addr, cmd, 60)
        await trio.sleep(1)
        await send(embedded_cluster, "PopWireNLeft", b"woke")
    [(answer, waited)] = answers
    assert answer.ext_fields["hasMsg"] == "true"
    assert waited < 10, "the notification answers at the arrival, not at the end of its window"


async def test_pop_rollback_answers_success_having_no_kv_pop_store_to_export(embedded_cluster: EmbeddedCluster) -> None:
    """POP_ROLLBACK 200056 (``mqadmin exportPopRecord``): 5.3.3's AdminBrokerProcessor.transferPopToFsStore answers
    SUCCESS, exporting nothing without a PopConsumerService (``popConsumerKVServiceInit`` false, the default)."""
    answer = await ask(embedded_cluster, request(200056))
    assert (answer.code, answer.remark) == (ResponseCode.SUCCESS, None)


async def test_an_orderly_pops_rest_num_leaves_out_what_is_in_flight_and_blocked_queues(
    embedded_cluster: EmbeddedCluster, autojump_clock: trio.testing.MockClock
) -> None:
    """PopMessageProcessor.popMsgFromQueue's ``restNum`` of an orderly pop: a queue it reads adds what is past the
    messages it hands out, one blocked by a batch in flight adds nothing (checkBlock: "should not add accumulation")."""
    clock = use_virtual_store_clock(embedded_cluster)
    await create_topic(embedded_cluster, "PopWireRest")
    await send(embedded_cluster, "PopWireRest", b"r0", b"r1", b"r2")
    answer = await ask(embedded_cluster, pop_request(clock, "PopWireRest", maxMsgNums="1", order="true"))
    assert [m.body for m in messages(answer)] == [b"r0"]
    assert answer.ext_fields["restNum"] == "2"
    blocked = await ask(embedded_cluster, pop_request(clock, "PopWireRest", order="true"))
    assert (blocked.code, blocked.ext_fields["restNum"]) == (ResponseCode.POLLING_TIMEOUT, "0")


async def test_an_arrival_wakes_the_newest_parked_notification(
    embedded_cluster: EmbeddedCluster, autojump_clock: trio.testing.MockClock
) -> None:
    """NotificationProcessor's PopLongPollingService is built with ``notifyLast``: an arrival wakes the request due
    last (pollRemotingCommands' pollLast), where the pops' wakes the one due first."""
    clock = use_virtual_store_clock(embedded_cluster)
    await create_topic(embedded_cluster, "PopWireNewest")
    older, newer = (notification(clock, "PopWireNewest", poll=30_000) for _ in range(2))
    [(_first, first_took), (second, second_took)] = await parked_then_sent(embedded_cluster, [older, newer], 0)
    assert second.code == ResponseCode.SUCCESS and second.ext_fields["hasMsg"] == "true"
    assert second_took < 10, "the newest notification answers at the arrival"
    assert first_took > 25, "the oldest waits on"


async def test_a_change_of_invisibility_past_the_invisible_time_still_moves_the_redelivery(
    embedded_cluster: EmbeddedCluster, autojump_clock: trio.testing.MockClock
) -> None:
    """ChangeInvisibleTimeProcessor.appendCheckPointThenAckOrigin writes the new CK and the ACK of the old whatever
    the handle's invisible time: one come before the revive reached the old CK moves the redelivery to the new time."""
    clock = use_virtual_store_clock(embedded_cluster)
    await create_topic(embedded_cluster, "PopWireLateChange")
    await send(embedded_cluster, "PopWireLateChange", b"c0")
    [m] = messages(await ask(embedded_cluster, pop_request(clock, "PopWireLateChange", invisible=10_000)))
    await trio.sleep(10.1)
    fields = {"consumerGroup": GROUP, "topic": "PopWireLateChange", "queueId": str(m.queue_id),
              "extraInfo": m.properties["POP_CK"], "offset": str(m.queue_offset), "invisibleTime": "60000"}  # fmt: skip
    changed = await ask(embedded_cluster, request(RequestCode.CHANGE_MESSAGE_INVISIBLETIME, fields))
    assert changed.code == ResponseCode.SUCCESS, changed.remark
    await trio.sleep(20)
    early = await ask(embedded_cluster, pop_request(clock, "PopWireLateChange"))
    assert early.code == ResponseCode.POLLING_TIMEOUT, [m.body for m in messages(early)]
    await trio.sleep(50)
    [again] = messages(await ask(embedded_cluster, pop_request(clock, "PopWireLateChange")))
    assert again.body == b"c0"


async def test_acks_run_on_a_pool_of_their_own_sized_and_swept_by_the_ack_settings(tmp_path: Path) -> None:
    """5.3.3's BrokerController registers ACK_MESSAGE, BATCH_ACK_MESSAGE and CHANGE_MESSAGE_INVISIBLETIME on its ack
    executor (``ackMessageThreadPoolNums``, ``ackThreadPoolQueueCapacity``; BrokerFastFailure sweeps its queue after
    ``waitTimeMillsInAckQueue``), not the pull pool, and GET_BROKER_RUNTIME_INFO reports that queue
    (AdminBrokerProcessor.prepareRuntimeInfo's ``ackThreadPoolQueue*``)."""
    settings = {"ack_thread_pool_queue_capacity": 500, "wait_time_mills_in_ack_queue": 700}
    async with EmbeddedCluster(tmp_path / "cluster", **SMALL_SEGMENTS, **settings) as cluster:
        runtime = await ask(cluster, request(RequestCode.GET_BROKER_RUNTIME_INFO))
        table = KVTable.decode(bytes(runtime.body)).table
        assert (table["ackThreadPoolQueueCapacity"], table["ackThreadPoolQueueSize"]) == ("500", "0")
        config = (await ask(cluster, request(RequestCode.GET_BROKER_CONFIG))).body
        assert b"waitTimeMillsInAckQueue=700" in bytes(config)


async def test_acks_are_answered_while_every_pull_worker_is_held(tmp_path: Path) -> None:
    """The ack codes run on the ack pool, not behind the pull pool's queue: with the one pull worker held, an
    ACK_MESSAGE, a CHANGE_MESSAGE_INVISIBLETIME and a BATCH_ACK_MESSAGE are still answered (here refused, their
    headers incomplete), as on 5.3.3's ack executor. Found by a review: nothing showed where acks were run."""
    async with EmbeddedCluster(tmp_path / "cluster", pull_message_thread_pool_nums=1, **SMALL_SEGMENTS) as cluster:
        gate = GateProcessor()
        cluster.controller.dispatcher.register(9_901, gate, cluster.controller.pools["pull"])
        async with RemotingClient() as client:
            client.invoke_callback(cluster.broker_addr, request(9_901), 60, lambda _outcome: None)
            while gate.entered == 0:
                await trio.sleep(0.01)
            for code in (RequestCode.ACK_MESSAGE, RequestCode.CHANGE_MESSAGE_INVISIBLETIME):
                answer = await client.invoke(cluster.broker_addr, request(code, {"topic": "T"}), 10)
                assert answer.code == ResponseCode.SYSTEM_ERROR
            batch = await client.invoke(cluster.broker_addr, request(RequestCode.BATCH_ACK_MESSAGE, body=b"{"), 10)
            assert batch.code != ResponseCode.SUCCESS
            gate.gate.set()


async def test_a_change_of_invisibility_past_the_timer_max_delay_answers_system_error(
    embedded_cluster: EmbeddedCluster, autojump_clock: trio.testing.MockClock
) -> None:
    """ChangeInvisibleTimeProcessor.appendCheckPointThenAckOrigin: the new CK's deliver time past ``timerMaxDelaySec``
    is refused by HookUtils.transformTimerMessage (WHEEL_TIMER_MSG_ILLEGAL), the future completes false and the answer
    is a bare SYSTEM_ERROR; the old CK is not acked, so the message comes again at its old time."""
    clock = use_virtual_store_clock(embedded_cluster)
    await create_topic(embedded_cluster, "PopWireFarChange")
    await send(embedded_cluster, "PopWireFarChange", b"c0")
    [m] = messages(await ask(embedded_cluster, pop_request(clock, "PopWireFarChange", invisible=10_000)))
    far = str(4 * 24 * 3600 * 1000)  # past the default three days
    fields = {"consumerGroup": GROUP, "topic": "PopWireFarChange", "queueId": str(m.queue_id),
              "extraInfo": m.properties["POP_CK"], "offset": str(m.queue_offset), "invisibleTime": far}  # fmt: skip
    changed = await ask(embedded_cluster, request(RequestCode.CHANGE_MESSAGE_INVISIBLETIME, fields))
    assert (changed.code, changed.remark) == (ResponseCode.SYSTEM_ERROR, None)
    await trio.sleep(15)
    [again] = messages(await ask(embedded_cluster, pop_request(clock, "PopWireFarChange")))
    assert again.body == b"c0"


async def test_an_orderly_pops_rest_num_leaves_out_what_its_filter_read_past(
    embedded_cluster: EmbeddedCluster, autojump_clock: trio.testing.MockClock
) -> None:
    """PopMessageProcessor.popMsgFromQueue adds ``maxOffset - nextBeginOffset`` of the read for an orderly queue it
    pops: the entries past the last message handed out that the filter read and skipped are not left to read."""
    clock = use_virtual_store_clock(embedded_cluster)
    await create_topic(embedded_cluster, "PopWireRestTag")
    await send(embedded_cluster, "PopWireRestTag", b"a0", tags="a")
    await send(embedded_cluster, "PopWireRestTag", b"b1", b"b2", tags="b")
    answer = await ask(embedded_cluster, pop_request(clock, "PopWireRestTag", order="true", exp="a"))
    assert [m.body for m in messages(answer)] == [b"a0"]
    assert answer.ext_fields["restNum"] == "0"


async def test_an_arrival_wakes_the_parked_pop_due_first_not_the_first_parked(
    embedded_cluster: EmbeddedCluster, autojump_clock: trio.testing.MockClock
) -> None:
    """PopLongPollingService files a key's requests in a ConcurrentSkipListSet ordered by PopRequest.COMPARATOR
    (``bornTime + pollTime``, then arrival): an arrival wakes the pop due first, here the one parked second with a
    shorter polling window, not the one parked first."""
    clock = use_virtual_store_clock(embedded_cluster)
    await create_topic(embedded_cluster, "PopWireDue")
    longer, shorter = (pop_request(clock, "PopWireDue", poll=poll, queueId="0") for poll in (30_000, 20_000))
    [(first, first_took), second] = await parked_then_sent(embedded_cluster, [longer, shorter], 0)
    popped_at_the_arrival(*second)
    assert first.code == ResponseCode.POLLING_TIMEOUT and first_took > 25


async def test_an_arrival_wakes_the_parked_notification_due_last_not_the_last_parked(
    embedded_cluster: EmbeddedCluster, autojump_clock: trio.testing.MockClock
) -> None:
    """NotificationProcessor's polling service (``notifyLast``) polls the last of PopRequest.COMPARATOR's order: the
    notification due last, here the one parked first with the longer window, not the newest."""
    clock = use_virtual_store_clock(embedded_cluster)
    await create_topic(embedded_cluster, "PopWireDueLast")
    longer, shorter = (notification(clock, "PopWireDueLast", poll=poll) for poll in (30_000, 20_000))
    [(first, first_took), (_second, second_took)] = await parked_then_sent(embedded_cluster, [longer, shorter], 0)
    assert first.ext_fields["hasMsg"] == "true" and first_took < 10
    assert second_took > 15, "the newer notification, due first, waits on"


async def test_a_pops_rest_num_counts_the_retry_topic_it_read(
    embedded_cluster: EmbeddedCluster, autojump_clock: trio.testing.MockClock
) -> None:
    """PopMessageProcessor pops the group's retry topic when the topic left the pop short (or first, by
    ``popFromRetryProbability``), and popMsgFromQueue adds each retry queue it visits to ``restNum``: the retried
    message the pop left behind is counted."""
    clock = use_virtual_store_clock(embedded_cluster)
    await create_topic(embedded_cluster, "PopWireRestRetry")
    await send(embedded_cluster, "PopWireRestRetry", b"r0", b"r1")
    assert len(messages(await ask(embedded_cluster, pop_request(clock, "PopWireRestRetry", invisible=10_000)))) == 2
    await trio.sleep(15)
    answer = await ask(embedded_cluster, pop_request(clock, "PopWireRestRetry", maxMsgNums="1"))
    [again] = messages(answer)
    assert again.reconsume_times == 1
    assert answer.ext_fields["restNum"] == "1"


async def revive_queue_size(cluster: EmbeddedCluster) -> int:
    topic = revive_topic(cluster.controller.config.broker_cluster_name)
    answer = await ask(cluster, request(RequestCode.GET_MAX_OFFSET, {"topic": topic, "queueId": "0"}))
    return int(answer.ext_fields["offset"]) if answer.code == ResponseCode.SUCCESS else 0


async def acked_after_its_checkpoint(cluster: EmbeddedCluster, topic: str, invisible: int, ack_after: float) -> None:
    """Pop one message of a new ``topic`` for ``invisible`` ms, ack it ``ack_after`` s later, its CK then in the
    revive queue, and check it does not come again."""
    clock = use_virtual_store_clock(cluster)
    await create_topic(cluster, topic)
    await send(cluster, topic, b"m0")
    before = await revive_queue_size(cluster)
    [m] = messages(await ask(cluster, pop_request(clock, topic, invisible=invisible)))
    await trio.sleep(ack_after)
    assert await revive_queue_size(cluster) == before + 1, "the CK is in the revive queue"
    acked = await ask(cluster, ack_request(topic, m))
    assert acked.code == ResponseCode.SUCCESS, acked.remark
    await trio.sleep(45)
    again = await ask(cluster, pop_request(clock, topic))
    assert again.code == ResponseCode.POLLING_TIMEOUT, [x.body for x in messages(again)]


async def test_an_ack_read_shortly_after_its_checkpoint_still_cancels_the_revive(
    embedded_cluster: EmbeddedCluster, autojump_clock: trio.testing.MockClock
) -> None:
    """PopReviveService.consumeReviveMessage and mergeAndRevive hold a CK until the revive queue's time is
    ``ackTimeInterval + SECOND`` (2 s) past its handle's expiry: an ACK written after the CK came into the revive queue,
    1.6 s past the expiry, still meets it and the message does not come again."""
    await acked_after_its_checkpoint(embedded_cluster, "PopWireWindow", 10_000, 11.6)


async def test_a_checkpoint_whose_message_no_longer_decodes_stops_no_other_revive(
    embedded_cluster: EmbeddedCluster, autojump_clock: trio.testing.MockClock
) -> None:
    """A popped message's record is damaged on disk before its CK comes due (its magic code overwritten): reviving
    that CK fails to decode the message. The revive loop kept the CK at the head of what it holds and failed on it
    every round, so no later CK of any group was revived again and the held CKs grew. The message that cannot be read
    is skipped, logged, and the next CK's message comes again."""
    clock = use_virtual_store_clock(embedded_cluster)
    for topic in ("PopWireDamaged", "PopWireHealthy"):
        await create_topic(embedded_cluster, topic)
    await send(embedded_cluster, "PopWireDamaged", b"d0")
    await send(embedded_cluster, "PopWireHealthy", b"h0")
    [damaged] = messages(await ask(embedded_cluster, pop_request(clock, "PopWireDamaged", invisible=10_000)))
    [healthy] = messages(await ask(embedded_cluster, pop_request(clock, "PopWireHealthy", invisible=12_000)))
    config = embedded_cluster.controller.config
    size, phy = config.mapped_file_size_commit_log, damaged.commit_log_offset
    segment = Path(config.store_path_root_dir) / "commitlog" / f"{phy - phy % size:020d}"
    with segment.open("r+b") as file:
        file.seek(phy % size + 4)  # the record's magic code
        file.write(b"\0\0\0\0")
    await trio.sleep(45)
    [again] = messages(await ask(embedded_cluster, pop_request(clock, "PopWireHealthy")))
    assert again.body == healthy.body and again.reconsume_times == 1


async def test_a_master_that_steps_down_while_holding_a_checkpoint_reads_it_again_when_it_leads_again(
    embedded_cluster: EmbeddedCluster, autojump_clock: trio.testing.MockClock
) -> None:
    """A DLedger leader holds a CK in its revive window and steps down (its role turns SLAVE, as
    ``broker.dledger_mode`` sets it); the member that leads meanwhile revives that CK and its progress comes back with
    the offsets. Leading again, the loop revived the CK it still held in memory, and the message came twice. It now
    forgets what it read when it stops being the master and reads again from the committed offsets, as 5.3.3's
    PopReviveService builds its map anew every round: the CK is then below the CK progress and only meets its ACKs."""
    clock = use_virtual_store_clock(embedded_cluster)
    ctx = embedded_cluster.controller.context
    await create_topic(embedded_cluster, "PopWireStepDown")
    await send(embedded_cluster, "PopWireStepDown", b"s0")
    before = await revive_queue_size(embedded_cluster)
    messages(await ask(embedded_cluster, pop_request(clock, "PopWireStepDown", invisible=10_000)))
    await trio.sleep(11.6)  # the CK is in the revive queue and held
    assert await revive_queue_size(embedded_cluster) == before + 1
    master = ctx.config
    ctx.config = attrs.evolve(master, broker_role="SLAVE")
    await trio.sleep(5)
    topic = revive_topic(master.broker_cluster_name)
    ctx.offsets.commit(REVIVE_CK_GROUP, topic, 0, before + 1)  # the interim leader's progress
    ctx.offsets.commit(REVIVE_GROUP, topic, 0, before + 1)
    ctx.config = master
    await trio.sleep(30)
    again = await ask(embedded_cluster, pop_request(clock, "PopWireStepDown"))
    assert again.code == ResponseCode.POLLING_TIMEOUT, [m.body for m in messages(again)]


async def test_a_restart_reads_again_the_checkpoint_held_and_the_ack_read_after_it(
    embedded_cluster: EmbeddedCluster, autojump_clock: trio.testing.MockClock
) -> None:
    """PopReviveService.mergeAndRevive commits the revive offset before its first CK not revived: a restart while a
    CK is held reads it again with the ACK written after it, so the message not acked comes again and the acked one
    does not."""
    clock = use_virtual_store_clock(embedded_cluster)
    await create_topic(embedded_cluster, "PopWireHeld")
    await send(embedded_cluster, "PopWireHeld", b"h0", b"h1")
    before = await revive_queue_size(embedded_cluster)
    first, _second = messages(await ask(embedded_cluster, pop_request(clock, "PopWireHeld", invisible=10_000)))
    await trio.sleep(11.6)
    assert await revive_queue_size(embedded_cluster) == before + 1, "the CK is in the revive queue"
    assert (await ask(embedded_cluster, ack_request("PopWireHeld", first))).code == ResponseCode.SUCCESS
    topic = revive_topic(embedded_cluster.controller.config.broker_cluster_name)
    fields = {"consumerGroup": REVIVE_GROUP, "topic": topic, "queueId": "0"}
    committed = await ask(embedded_cluster, request(RequestCode.QUERY_CONSUMER_OFFSET, fields))
    assert int(committed.ext_fields["offset"]) <= before, "not past the CK held"
    await embedded_cluster.restart_broker()
    use_virtual_store_clock(embedded_cluster, clock)
    await trio.sleep(20)
    [again] = messages(await ask(embedded_cluster, pop_request(clock, "PopWireHeld")))
    assert again.body == b"h1"
    assert (await ask(embedded_cluster, ack_request("PopWireHeld", again))).code == ResponseCode.SUCCESS
    await trio.sleep(45)
    assert (await ask(embedded_cluster, pop_request(clock, "PopWireHeld"))).code == ResponseCode.POLLING_TIMEOUT


async def test_the_timer_max_delay_bounds_a_checkpoint_due_a_second_before_its_handle_expires(
    embedded_cluster: EmbeddedCluster, autojump_clock: trio.testing.MockClock
) -> None:
    """5.3.3 writes a CK due at ``reviveTime - PopAckConstants.ackTimeInterval`` (1 s; PopMessageProcessor.buildCkMsg,
    ChangeInvisibleTimeProcessor), which HookUtils.transformTimerMessage refuses only past ``timerMaxDelaySec``: an
    invisible time of up to that limit + 1 s is taken by a pop and by a change of invisibility, one past it is not."""
    clock = use_virtual_store_clock(embedded_cluster)
    await create_topic(embedded_cluster, "PopWireMaxDelay")
    await send(embedded_cluster, "PopWireMaxDelay", b"m0", b"m1")
    limit = 3 * 24 * 3600 * 1000 + 1000  # the default timerMaxDelaySec, and ackTimeInterval
    first, second = messages(await ask(embedded_cluster, pop_request(clock, "PopWireMaxDelay", invisible=limit)))

    def change(m: MessageExt, invisible: int) -> RemotingCommand:
        fields = {"consumerGroup": GROUP, "topic": "PopWireMaxDelay", "queueId": str(m.queue_id),
                  "extraInfo": m.properties["POP_CK"], "offset": str(m.queue_offset),
                  "invisibleTime": str(invisible)}  # fmt: skip
        return request(RequestCode.CHANGE_MESSAGE_INVISIBLETIME, fields)

    changed = await ask(embedded_cluster, change(first, limit))
    assert changed.code == ResponseCode.SUCCESS, changed.remark
    refused = await ask(embedded_cluster, change(second, limit + 1))
    assert refused.code == ResponseCode.SYSTEM_ERROR


async def test_an_ack_in_the_last_second_of_a_handle_past_the_timer_max_delay_still_cancels_the_revive(
    embedded_cluster: EmbeddedCluster, autojump_clock: trio.testing.MockClock
) -> None:
    """With ``timerMaxDelaySec`` 20 a pop invisible 20.9 s has its CK due at the limit, 0.9 s before the handle
    expires (5.3.3's is always due ``ackTimeInterval`` early): an ACK at 20.6 s comes after the CK, and the revive
    loop, holding the CK until its queue is 2 s past the expiry as PopReviveService does, still meets it."""
    assert await embedded_cluster.controller.context.update_config({"timerMaxDelaySec": "20"}) == []
    await acked_after_its_checkpoint(embedded_cluster, "PopWireLastSecond", 20_900, 20.6)


async def test_a_pop_without_a_heartbeat_records_the_groups_subscriptions(
    embedded_cluster: EmbeddedCluster, autojump_clock: trio.testing.MockClock
) -> None:
    """PopMessageProcessor.processRequest (5.3.3) records the pop's subscription of the topic and ``*`` of its pop
    retry topic (ConsumerManager.compensateSubscribeData): QUERY_SUBSCRIPTION_BY_CONSUMER finds them for a group
    that never sent a heartbeat."""
    clock = use_virtual_store_clock(embedded_cluster)
    await create_topic(embedded_cluster, "PopWireSub", queues=1)
    answer = await ask(embedded_cluster, pop_request(clock, "PopWireSub", exp="TagA||TagB"))
    assert answer.code == ResponseCode.POLLING_TIMEOUT, answer.remark
    found = {}
    for topic in ("PopWireSub", f"%RETRY%{GROUP}_PopWireSub"):
        fields = QuerySubscriptionByConsumerRequestHeader(group=GROUP, topic=topic).to_ext_fields()
        reply = await ask(embedded_cluster, request(RequestCode.QUERY_SUBSCRIPTION_BY_CONSUMER, fields))
        found[topic] = orjson.loads(bytes(reply.body))["subscriptionData"]["subString"]
    assert found == {"PopWireSub": "TagA||TagB", f"%RETRY%{GROUP}_PopWireSub": "*"}


async def test_a_pop_refused_for_its_malformed_sql92_still_records_the_subscription(
    embedded_cluster: EmbeddedCluster, autojump_clock: trio.testing.MockClock
) -> None:
    """PopMessageProcessor.processRequest (5.3.3) records the pop's subscription (FilterAPI.build, which does not
    parse SQL92, then ConsumerManager.compensateSubscribeData) before ConsumerFilterManager.build finds it malformed:
    the pop is refused, and QUERY_SUBSCRIPTION_BY_CONSUMER finds the expression (and ``*`` of the retry topic, of the
    same type) as a Java broker answers."""
    clock = use_virtual_store_clock(embedded_cluster)
    await create_topic(embedded_cluster, "PopWireBadSub", queues=1)
    answer = await ask(embedded_cluster, pop_request(clock, "PopWireBadSub", expType="SQL92", exp="a >"))
    assert answer.code == ResponseCode.SUBSCRIPTION_PARSE_FAILED
    found = {}
    for topic in ("PopWireBadSub", f"%RETRY%{GROUP}_PopWireBadSub"):
        fields = QuerySubscriptionByConsumerRequestHeader(group=GROUP, topic=topic).to_ext_fields()
        reply = await ask(embedded_cluster, request(RequestCode.QUERY_SUBSCRIPTION_BY_CONSUMER, fields))
        assert reply.code == ResponseCode.SUCCESS, reply.remark
        sub = orjson.loads(bytes(reply.body))["subscriptionData"]
        found[topic] = (sub["subString"], sub["expressionType"])
    assert found == {"PopWireBadSub": ("a >", "SQL92"), f"%RETRY%{GROUP}_PopWireBadSub": ("*", "SQL92")}


async def test_pops_of_an_unchanged_expression_keep_the_recorded_subscription_version(
    embedded_cluster: EmbeddedCluster, autojump_clock: trio.testing.MockClock
) -> None:
    """Each pop recorded a new SubscriptionData whose version, unique per broker as a new Java one's time stamp, ran
    ahead of the clock at a few hundred pops a second (two versions a pop); a heartbeat's subscription stamped by the
    client's clock could then never replace a gRPC client's. A pop of the expression already recorded only refreshes
    its time (found by a read-only review)."""
    clock = use_virtual_store_clock(embedded_cluster)
    await create_topic(embedded_cluster, "PopWireSubVersion", queues=1)
    fields = QuerySubscriptionByConsumerRequestHeader(group=GROUP, topic="PopWireSubVersion").to_ext_fields()
    versions = []
    for _ in range(3):
        await ask(embedded_cluster, pop_request(clock, "PopWireSubVersion", exp="TagA"))
        reply = await ask(embedded_cluster, request(RequestCode.QUERY_SUBSCRIPTION_BY_CONSUMER, fields))
        versions.append(orjson.loads(bytes(reply.body))["subscriptionData"]["subVersion"])
    assert len(set(versions)) == 1, versions
