"""Review findings: the remarks of the send, send-back and pull refusals, character for character as RocketMQ 4.9.8
writes them (broker/src/main/java/org/apache/rocketmq/broker/processor/SendMessageProcessor.java,
PullMessageProcessor.java; common/.../help/FAQUrl.java ``suggestTodo`` is ``"\\nSee <url> for further details."``).
A Java client's MQBrokerException appends a second FAQ link to a remark without ``"\\nSee "``
(FAQUrl.attachDefaultURL), so the line break is visible to users."""

from __future__ import annotations

from broker.context import BrokerState
from processors.pull import PullMessageProcessor
from processors.send import SendMessageProcessor
from processors.send_back import ConsumerSendMsgBackProcessor
from remoting.codec.codes import RequestCode, ResponseCode
from remoting.codec.command import request
from remoting.codec.msgid import decode_offset_msg_id
from remoting.processor import RequestContext
from tests.processors.conftest import PEER, TOPIC, MakeBroker, pull_request, send_request

FAQ = "\nSee http://rocketmq.apache.org/docs/faq/ for further details."


async def test_a_pull_of_an_unknown_group_keeps_the_faq_line_break(
    make_broker: MakeBroker, peer_ctx: RequestContext
) -> None:
    """``String.format("subscription group [%s] does not exist, %s", group, FAQUrl.suggestTodo(...))``."""
    broker = make_broker(auto_create_subscription_group=False)
    response = PullMessageProcessor(broker).pull(peer_ctx, pull_request(group="Unknown"), allow_suspend=False)
    assert response is not None
    assert (response.code, response.remark) == (
        ResponseCode.SUBSCRIPTION_GROUP_NOT_EXIST,
        f"subscription group [Unknown] does not exist, {FAQ}",
    )


async def test_a_pull_of_an_unknown_topic_keeps_the_faq_line_break(
    broker: BrokerState, peer_ctx: RequestContext
) -> None:
    """``String.format("topic[%s] not exist, apply first please! %s", topic, FAQUrl.suggestTodo(...))``."""
    response = PullMessageProcessor(broker).pull(peer_ctx, pull_request("Nope"), allow_suspend=False)
    assert response is not None
    assert (response.code, response.remark) == (
        ResponseCode.TOPIC_NOT_EXIST,
        f"topic[Nope] not exist, apply first please! {FAQ}",
    )


async def test_a_pull_of_an_illegal_queue_names_the_consumers_address(
    broker: BrokerState, peer_ctx: RequestContext
) -> None:
    """The remark's ``consumer:[%s]`` is ``channel.remoteAddress()`` (InetSocketAddress.toString: ``/ip:port``),
    not the consumer group."""
    response = PullMessageProcessor(broker).pull(peer_ctx, pull_request(queue_id=4), allow_suspend=False)
    assert response is not None
    host, port = PEER
    assert (response.code, response.remark) == (
        ResponseCode.SYSTEM_ERROR,
        f"queueId[4] is illegal, topic:[{TOPIC}] topicConfig.readQueueNums:[4] consumer:[/{host}:{port}]",
    )


async def test_a_retry_send_of_an_unknown_group_has_a_space_before_the_faq(
    make_broker: MakeBroker, peer_ctx: RequestContext
) -> None:
    """handleRetryAndDLQ: ``"subscription group not exist, " + groupName + " " + FAQUrl.suggestTodo(...)``."""
    broker = make_broker(auto_create_subscription_group=False)
    response = await SendMessageProcessor(broker).process(peer_ctx, send_request("%RETRY%Nobody"))
    assert response is not None
    assert (response.code, response.remark) == (
        ResponseCode.SUBSCRIPTION_GROUP_NOT_EXIST,
        f"subscription group not exist, Nobody {FAQ}",
    )


async def test_a_send_back_of_an_unknown_group_has_a_space_before_the_faq(
    make_broker: MakeBroker, peer_ctx: RequestContext
) -> None:
    """asyncConsumerSendMsgBack: ``"subscription group not exist, " + group + " " + FAQUrl.suggestTodo(...)``."""
    broker = make_broker(auto_create_subscription_group=False)
    fields = {"offset": "0", "group": "Nobody", "delayLevel": "0", "originTopic": TOPIC, "unitMode": "false"}
    response = await ConsumerSendMsgBackProcessor(broker).process(
        peer_ctx, request(RequestCode.CONSUMER_SEND_MSG_BACK, fields)
    )
    assert response is not None
    assert (response.code, response.remark) == (
        ResponseCode.SUBSCRIPTION_GROUP_NOT_EXIST,
        f"subscription group not exist, Nobody {FAQ}",
    )


async def test_a_send_back_whose_queue_file_cannot_be_made_names_javas_status(
    broker: BrokerState, peer_ctx: RequestContext
) -> None:
    """asyncConsumerSendMsgBack answers a failed put SYSTEM_ERROR with ``r.getPutMessageStatus().name()``: 4.9.8's
    enum spells it ``CREATE_MAPEDFILE_FAILED`` (store/.../PutMessageStatus.java). Here the DLQ's consume queue
    directory cannot be made (a file is in its way)."""
    sent = await SendMessageProcessor(broker).process(peer_ctx, send_request(body=b"failed"))
    assert sent is not None and sent.code == ResponseCode.SUCCESS
    offset = decode_offset_msg_id(sent.ext_fields["msgId"]).phy_offset
    broker.store.config.consume_queue_dir.mkdir(parents=True, exist_ok=True)
    (broker.store.config.consume_queue_dir / "%DLQ%G1").write_bytes(b"in the way")
    fields = {"offset": str(offset), "group": "G1", "delayLevel": "-1", "originTopic": TOPIC, "unitMode": "false"}
    response = await ConsumerSendMsgBackProcessor(broker).process(
        peer_ctx, request(RequestCode.CONSUMER_SEND_MSG_BACK, fields)
    )
    assert response is not None
    assert (response.code, response.remark) == (ResponseCode.SYSTEM_ERROR, "CREATE_MAPEDFILE_FAILED")
