"""Review findings: the send path against RocketMQ 4.9.8 (broker/.../processor/SendMessageProcessor.java,
store/.../CommitLog.java). Each test states what the Java broker does and fails on the current code."""

from __future__ import annotations

import random
import time
from datetime import datetime

import attrs
import trio

from broker.context import BrokerState
from processors.hold import HoldService
from processors.runtime_info import runtime_table
from processors.send_back import ConsumerSendMsgBackProcessor
from remoting.codec.codes import RequestCode, ResponseCode
from remoting.codec.command import RemotingCommand, request
from remoting.codec.message import BatchEntry, MessageExt, decode_record, encode_batch_body
from remoting.codec.msgid import decode_offset_msg_id
from remoting.processor import RequestContext
from remoting.server import RemotingServer
from store.metadata_files import PERM_READ, TopicConfig
from store.store_config import BrokerRole
from tests.processors.conftest import TOPIC, MakeBroker, RawPeer, ServedBroker, send_request


def stored(broker: BrokerState, response: RemotingCommand) -> list[MessageExt]:
    records = []
    for msg_id in response.ext_fields["msgId"].split(","):
        view = broker.store.look_message_by_offset(decode_offset_msg_id(msg_id).phy_offset)
        assert view is not None
        records.append(decode_record(bytes(view)))
    return records


async def round_trip(address: tuple[str, int], req: RemotingCommand) -> RemotingCommand:
    peer = await RawPeer.connect(address)
    try:
        await peer.send(req)
        response = await peer.receive()
    finally:
        await peer.aclose()
    assert response is not None and response.opaque == req.opaque
    return response


def batch_request(body: bytes, **extra: str) -> RemotingCommand:
    req = send_request(code=RequestCode.SEND_BATCH_MESSAGE, batch="true", **extra)
    return RemotingCommand(code=req.code, opaque=req.opaque, ext_fields=req.ext_fields, body=body)


async def test_a_retry_send_redirected_to_the_dlq_answers_the_queue_it_was_sent_to(
    served: ServedBroker, served_address: tuple[str, int]
) -> None:
    """SendMessageProcessor.asyncSendMessage: handleRetryAndDLQ moves msgInner to %DLQ% queue 0, but the answer's
    queueId is ``queueIdInt``, the queue of the request (handlePutMessageResult:
    responseHeader.setQueueId(queueIdInt))."""
    served.broker.topics.update_topic(TopicConfig("%RETRY%G1", 4, 4))
    req = send_request("%RETRY%G1", queue_id=3, reconsumeTimes="16")
    response = await round_trip(served_address, req)
    assert response.code == ResponseCode.SUCCESS
    (record,) = stored(served.broker, response)
    assert (record.topic, record.queue_id) == ("%DLQ%G1", 0)
    assert response.ext_fields["queueId"] == "3"


async def test_a_batch_stores_the_headers_reconsume_times(
    served: ServedBroker, served_address: tuple[str, int]
) -> None:
    """asyncSendBatchMessage: messageExtBatch.setReconsumeTimes(requestHeader.getReconsumeTimes()), and
    CommitLog.MessageExtEncoder.encode(MessageExtBatch) writes it as every record's RECONSUMETIMES (field 13)."""
    body = encode_batch_body([BatchEntry(b"a", "TAGS\x01x"), BatchEntry(b"b", "TAGS\x01y")])
    response = await round_trip(served_address, batch_request(body, reconsumeTimes="5"))
    assert response.code == ResponseCode.SUCCESS
    assert [m.reconsume_times for m in stored(served.broker, response)] == [5, 5]


async def test_a_batch_keeps_wait_in_its_stored_properties(
    served: ServedBroker, served_address: tuple[str, int]
) -> None:
    """4.9.8 removes WAIT only on the single-message path (asyncSendMessage); asyncSendBatchMessage copies the header's
    properties (WAIT included) plus CLUSTER into messageExtBatch, and the batch encoder appends
    messageProperties2String(messageExtBatch.getProperties()) to every record."""
    body = encode_batch_body([BatchEntry(b"a", "TAGS\x01x")])
    response = await round_trip(served_address, batch_request(body, properties="WAIT\x01true"))
    assert response.code == ResponseCode.SUCCESS
    (record,) = stored(served.broker, response)
    assert record.properties.get("CLUSTER") == "DefaultCluster"
    assert record.properties.get("WAIT") == "true"


async def test_a_unit_mode_retry_topic_created_by_a_send_gets_the_unit_sub_flag(
    served: ServedBroker, served_address: tuple[str, int]
) -> None:
    """AbstractSendMessageProcessor.msgCheck: when the default topic cannot create it, a %RETRY% topic is created by
    createTopicInSendMessageBackMethod(topic, 1, PERM_WRITE | PERM_READ, topicSysFlag), topicSysFlag being
    TopicSysFlag.buildSysFlag(false, true) == 2 for a unitMode request."""
    req = send_request("%RETRY%UnitGroup", defaultTopic="NoSuchDefault", unitMode="true")
    response = await round_trip(served_address, req)
    assert response.code == ResponseCode.SUCCESS
    created = served.broker.topics.get("%RETRY%UnitGroup")
    assert created is not None
    assert (created.perm, created.write_queue_nums) == (6, 1)
    assert created.topic_sys_flag == 2


async def test_a_send_back_to_a_dlq_without_write_permission_is_stored(
    broker: BrokerState, peer_ctx: RequestContext
) -> None:
    """4.9.8 asyncConsumerSendMsgBack checks the write permission of %RETRY%group only; for the DLQ it creates (or
    finds) the topic, checks it is not null and stores (SendMessageProcessor.java, `msgExt.getReconsumeTimes() >=
    maxReconsumeTimes || delayLevel < 0` branch): no NO_PERMISSION for a read-only DLQ."""
    from processors.send import SendMessageProcessor

    sent = await SendMessageProcessor(broker, rng=random.Random(1)).process(peer_ctx, send_request())
    assert sent is not None and sent.code == ResponseCode.SUCCESS
    offset = decode_offset_msg_id(sent.ext_fields["msgId"]).phy_offset
    group = "cg-ro-dlq"
    assert broker.groups.find(group) is not None  # auto-created
    broker.topics.update_topic(TopicConfig(f"%DLQ%{group}", 1, 1, PERM_READ))
    back = request(RequestCode.CONSUMER_SEND_MSG_BACK, {"offset": str(offset), "group": group, "delayLevel": "-1"})
    response = await ConsumerSendMsgBackProcessor(broker, rng=random.Random(1)).process(peer_ctx, back)
    assert response is not None
    assert (response.code, response.remark) == (ResponseCode.SUCCESS, None)
    assert broker.store.max_offset_in_queue(f"%DLQ%{group}", 0) == 1


async def test_a_delay_property_that_is_not_a_number_is_refused_and_not_stored(
    served: ServedBroker, served_address: tuple[str, int]
) -> None:
    """CommitLog.asyncPutMessage calls msg.getDelayTimeLevel(), which is Integer.parseInt(DELAY) (Message.java): a
    non-numeric DELAY throws NumberFormatException out of the processor, and NettyRemotingAbstract.processRequestCommand
    answers SYSTEM_ERROR; nothing is appended."""
    response = await round_trip(served_address, send_request(properties="DELAY\x01abc"))
    assert response.code == ResponseCode.SYSTEM_ERROR
    assert served.broker.store.max_offset_in_queue("TopicTest", 0) == 0


async def test_sends_before_start_accept_send_request_timestamp_answer_system_error(
    make_broker: MakeBroker, nursery: trio.Nursery
) -> None:
    """BrokerConfig ``startAcceptSendRequestTimeStamp``: until then SendMessageProcessor.preSend (and sendMessage)
    answers SYSTEM_ERROR "broker unable to service, until <UtilAll.timeMillisToHumanString2>" to every send, single
    or batch; GET_BROKER_RUNTIME_INFO reports the setting. Once it has passed, sends are served."""
    until = int(time.time() * 1000) + 3_600_000
    broker = make_broker(start_accept_send_request_time_stamp=until)
    hold = HoldService()
    served = ServedBroker(broker, hold)
    await nursery.start(hold.run)
    await nursery.start(served.dispatcher.run)
    address = await nursery.start(RemotingServer(served.dispatcher).serve, "127.0.0.1", 0)
    human = datetime.fromtimestamp(until / 1000).strftime("%Y-%m-%d %H:%M:%S,%f")[:-3]
    batch = batch_request(encode_batch_body([BatchEntry(b"a", "TAGS\x01x")]))
    for req in (send_request(), send_request(code=RequestCode.SEND_MESSAGE), batch):
        response = await round_trip(address, req)
        assert (response.code, response.remark) == (
            ResponseCode.SYSTEM_ERROR,
            f"broker unable to service, until {human}",
        )
    assert broker.store.max_offset_in_queue(TOPIC, 0) == 0
    assert runtime_table(broker, {}, until)["startAcceptSendRequestTimeStamp"] == str(until)
    broker.config = attrs.evolve(broker.config, start_accept_send_request_time_stamp=until - 7_200_000)
    assert (await round_trip(address, send_request())).code == ResponseCode.SUCCESS


_ILLEGAL_1024 = (
    "the message is illegal, maybe msg body or properties length not matched. "
    "msg body length limit 1024B, msg properties length limit 32KB."
)


async def test_message_illegal_answers_carry_the_java_brokers_remark(
    make_broker: MakeBroker, peer_ctx: RequestContext
) -> None:
    """SendMessageProcessor.handlePutMessageResult (4.9.8 and 5.3.3) answers MESSAGE_ILLEGAL and
    PROPERTIES_SIZE_EXCEEDED alike with ``String.format("... msg body length limit %dB, msg properties length limit
    32KB.", maxMessageSize)``: the limit in bytes, nothing appended. A single body over the limit, properties over
    32,767 bytes and a batch body over the limit all get that text."""
    from processors.send import SendMessageProcessor

    broker = make_broker(store_overrides={"max_message_size": 1024})
    processor = SendMessageProcessor(broker, rng=random.Random(1))
    too_long = "P\x01" + "y" * 32767
    body = encode_batch_body([BatchEntry(b"x" * 600), BatchEntry(b"y" * 600)])
    for req in (send_request(body=b"x" * 1025), send_request(properties=too_long), batch_request(body)):
        response = await processor.process(peer_ctx, req)
        assert response is not None
        assert (response.code, response.remark) == (ResponseCode.MESSAGE_ILLEGAL, _ILLEGAL_1024)
    assert broker.store.max_offset_in_queue(TOPIC, 0) == 0


async def test_a_stored_send_answered_slave_not_available_has_no_remark(
    make_broker: MakeBroker, nursery: trio.Nursery
) -> None:
    """SendMessageProcessor.handlePutMessageResult: FLUSH_DISK_TIMEOUT, FLUSH_SLAVE_TIMEOUT and SLAVE_NOT_AVAILABLE
    are "sendOK" (the message is stored): the answer carries msgId, queueId and queueOffset and ``setRemark(null)``.
    A SYNC_MASTER without a slave answers SLAVE_NOT_AVAILABLE, on the fast path (V2) and the general one (V1)."""
    broker = make_broker(store_overrides={"broker_role": BrokerRole.SYNC_MASTER})
    hold = HoldService()
    served = ServedBroker(broker, hold)
    await nursery.start(hold.run)
    await nursery.start(served.dispatcher.run)
    await nursery.start(broker.store.run)
    address = await nursery.start(RemotingServer(served.dispatcher).serve, "127.0.0.1", 0)
    for offset, req in enumerate((send_request(), send_request(code=RequestCode.SEND_MESSAGE))):
        response = await round_trip(address, req)
        assert (response.code, response.remark) == (ResponseCode.SLAVE_NOT_AVAILABLE, None)
        assert response.ext_fields["queueOffset"] == str(offset) and stored(broker, response)
