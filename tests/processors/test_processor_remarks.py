"""Review findings: the remarks of the send, send-back and pull refusals, character for character as RocketMQ 4.9.8
writes them (broker/src/main/java/org/apache/rocketmq/broker/processor/SendMessageProcessor.java,
PullMessageProcessor.java; common/.../help/FAQUrl.java ``suggestTodo`` is ``"\\nSee <url> for further details."``).
A Java client's MQBrokerException appends a second FAQ link to a remark without ``"\\nSee "``
(FAQUrl.attachDefaultURL), so the line break is visible to users."""

from __future__ import annotations

import pytest

from broker.context import BrokerState
from processors.pull import PullMessageProcessor
from processors.send import SendMessageProcessor
from processors.send_back import ConsumerSendMsgBackProcessor
from remoting.codec.codes import RequestCode, ResponseCode
from remoting.codec.command import RemotingCommand, request
from remoting.codec.msgid import decode_offset_msg_id
from remoting.processor import RequestContext
from store.metadata_files import SubscriptionGroupConfig
from tests.processors.conftest import GROUP, PEER, TOPIC, MakeBroker, pull_request, send_request

FAQ = "\nSee http://rocketmq.apache.org/docs/faq/ for further details."


_HOST, _PORT = PEER
#: PullMessageProcessor's refusals: ``String.format("subscription group [%s] does not exist, %s", ...)`` and
#: ``String.format("topic[%s] not exist, apply first please! %s", ...)`` with ``FAQUrl.suggestTodo``; the illegal
#: queue's ``consumer:[%s]`` is ``channel.remoteAddress()`` (InetSocketAddress.toString: ``/ip:port``), not the group.
PULL_REFUSALS = {
    "unknown group": (
        pull_request(group="Unknown"),
        ResponseCode.SUBSCRIPTION_GROUP_NOT_EXIST,
        f"subscription group [Unknown] does not exist, {FAQ}",
    ),
    "unknown topic": (
        pull_request("Nope"),
        ResponseCode.TOPIC_NOT_EXIST,
        f"topic[Nope] not exist, apply first please! {FAQ}",
    ),
    "illegal queue": (
        pull_request(queue_id=4),
        ResponseCode.SYSTEM_ERROR,
        f"queueId[4] is illegal, topic:[{TOPIC}] topicConfig.readQueueNums:[4] consumer:[/{_HOST}:{_PORT}]",
    ),
}


@pytest.mark.parametrize("case", sorted(PULL_REFUSALS))
async def test_a_pull_refusal_has_javas_remark(make_broker: MakeBroker, peer_ctx: RequestContext, case: str) -> None:
    req, code, remark = PULL_REFUSALS[case]
    broker = make_broker(auto_create_subscription_group=False)
    broker.groups.update(SubscriptionGroupConfig(GROUP))
    response = PullMessageProcessor(broker).pull(peer_ctx, req, allow_suspend=False)
    assert response is not None
    assert (response.code, response.remark) == (code, remark)


def _send_back_request(offset: int, group: str, delay_level: int) -> RemotingCommand:
    fields = {"offset": str(offset), "group": group, "delayLevel": str(delay_level), "originTopic": TOPIC}
    return request(RequestCode.CONSUMER_SEND_MSG_BACK, {**fields, "unitMode": "false"})


@pytest.mark.parametrize("path", ["retry send", "send-back"])
async def test_an_unknown_group_has_a_space_before_the_faq(
    make_broker: MakeBroker, peer_ctx: RequestContext, path: str
) -> None:
    """handleRetryAndDLQ and asyncConsumerSendMsgBack: ``"subscription group not exist, " + group + " " +
    FAQUrl.suggestTodo(...)``."""
    broker = make_broker(auto_create_subscription_group=False)
    if path == "retry send":
        response = await SendMessageProcessor(broker).process(peer_ctx, send_request("%RETRY%Nobody"))
    else:
        response = await ConsumerSendMsgBackProcessor(broker).process(peer_ctx, _send_back_request(0, "Nobody", 0))
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
    response = await ConsumerSendMsgBackProcessor(broker).process(peer_ctx, _send_back_request(offset, "G1", -1))
    assert response is not None
    assert (response.code, response.remark) == (ResponseCode.SYSTEM_ERROR, "CREATE_MAPEDFILE_FAILED")
