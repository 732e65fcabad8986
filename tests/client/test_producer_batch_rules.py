"""A list the producer cannot make a batch of, refused as 4.9.8's ``DefaultMQProducer.batch`` refuses it
(client/src/main/java/org/apache/rocketmq/client/producer/DefaultMQProducer.java): ``MessageBatch.generateFromList``
(common/src/main/java/org/apache/rocketmq/common/message/MessageBatch.java) walks the whole list for its rules (no
delay level, no retry topic, then the first message's topic and waitStoreMsgOK), then ``Validators.checkMessage``
checks each message, and whatever either throws comes back as ``MQClientException("Failed to initiate the
MessageBatch", cause)``: response code -1, the rule's text in the cause. A body over ``maxMessageSize`` is refused
after, by ``sendDefaultImpl``'s check of the batch, with its own text and MESSAGE_ILLEGAL."""

from __future__ import annotations

import pytest

from client.config import ClientConfig
from client.errors import MessageValidationError
from client.message import Message
from client.producer import Producer
from client.send_request import batch_entry_size
from remoting.codec.bodies import MessageQueue
from remoting.codec.codes import ResponseCode
from tests.client.helpers import create_topic
from tests.threaded_cluster import ThreadedCluster

pytestmark = pytest.mark.anyio

#: MQClientException(String, Throwable)'s text: FAQUrl.attachDefaultURL appends the unexpected-exception URL.
FAILED_TO_INITIATE = "Failed to initiate the MessageBatch\nFor more information, please visit the url, http://rocketmq.apache.org/docs/faq/"
TOPIC = "BatchRules"


def _m(body: bytes = b"x", topic: str = TOPIC, **kw: object) -> Message:
    return Message(topic, body, **kw)  # type: ignore[arg-type]


CASES = [
    pytest.param([_m(), _m(delay_level=3)], "TimeDelayLevel is not supported for batching", -1, id="delay"),
    pytest.param([_m(properties={"DELAY": "2"})], "TimeDelayLevel is not supported for batching", -1, id="DELAY"),
    pytest.param([_m(topic="%RETRY%g")], "Retry Group is not supported for batching", -1, id="retry"),
    pytest.param(
        [_m(), _m(topic="OtherTopic")], "The topic of the messages in one batch should be the same", -1, id="topics"
    ),
    pytest.param(
        [_m(), _m(wait_store_msg_ok=False)],
        "The waitStoreMsgOK of the messages in one batch should the same",
        -1,
        id="wait",
    ),
    # generateFromList's rules for the whole list before any message's checkMessage
    pytest.param([_m(b""), _m(delay_level=2)], "TimeDelayLevel is not supported for batching", -1, id="rules-first"),
    pytest.param([_m(), _m(topic="%RETRY%g")], "Retry Group is not supported for batching", -1, id="retry-first"),
    pytest.param([_m(), _m(b"")], "the message body length is zero", ResponseCode.MESSAGE_ILLEGAL, id="empty-body"),
]


@pytest.mark.parametrize(("msgs", "cause", "cause_code"), CASES)
async def test_a_list_java_cannot_batch_fails_to_initiate_the_message_batch(
    cluster: ThreadedCluster, msgs: list[Message], cause: str, cause_code: int
) -> None:
    await create_topic(cluster.namesrv_addr, TOPIC, queues=1)
    async with Producer("pg-rules", cluster.namesrv_addr) as producer:
        with pytest.raises(MessageValidationError) as refused:
            await producer.send_batch(msgs)
        with pytest.raises(MessageValidationError) as refused_async:
            producer.send_batch_async(msgs, lambda outcome: None)
        stored = await producer.send_batch([_m(b"after")])
    for error in (refused.value, refused_async.value):
        assert (str(error), error.response_code) == (FAILED_TO_INITIATE, -1)
        assert isinstance(error.__cause__, MessageValidationError)
        assert (str(error.__cause__), error.__cause__.response_code) == (cause, cause_code)
    assert stored[0].queue_offset == 0  # nothing of the refused lists was sent


async def test_a_message_that_fills_the_batch_past_the_limit_is_refused_as_the_batch_body(
    cluster: ThreadedCluster,
) -> None:
    """Each message passes checkMessage (its body is within the limit); the batch's body is not, and sendDefaultImpl's
    ``Validators.checkMessage`` of the batch refuses it: MESSAGE_ILLEGAL, "the message body size over max value"."""
    await create_topic(cluster.namesrv_addr, TOPIC, queues=1)
    async with Producer("pg-size", cluster.namesrv_addr, max_message_size=100) as producer:
        mq = MessageQueue(TOPIC, "broker-a", 0)
        for msgs in ([_m(b"y" * 100)], [_m(b"y" * 40), _m(b"z" * 40)]):
            with pytest.raises(MessageValidationError) as refused:
                await producer.send_batch(msgs, queue=mq)
            assert (str(refused.value), refused.value.response_code) == (
                "the message body size over max value, MAX: 100",
                ResponseCode.MESSAGE_ILLEGAL,
            )


@pytest.mark.parametrize("client_ip", ["10.1.2.3", "fd00::1234"])
async def test_a_list_split_by_batch_entry_size_is_sent_whatever_the_client_ip(
    cluster: ThreadedCluster, client_ip: str
) -> None:
    """``batch_entry_size`` is what a caller adds up to split a long list into batches within ``max_message_size``
    (as Java's users do with the batch example's ``ListSplitter``): the UNIQ_KEY the producer gives a message is 32
    hex digits from an IPv4 client address and 56 from an IPv6 one (``MessageClientIDSetter``'s layout), so a list
    filled up to the limit by those sizes must pass the producer's check either way."""
    await create_topic(cluster.namesrv_addr, TOPIC, queues=1)
    msgs = [_m(b"v" * 200, keys=f"k{i}") for i in range(5)]
    limit = sum(batch_entry_size(m) for m in msgs)
    config = ClientConfig(namesrv_addr=cluster.namesrv_addr, client_ip=client_ip)
    async with Producer("pg-split", config=config, max_message_size=limit) as producer:
        [result] = await producer.send_batch(msgs)
    assert len(result.msg_id.split(",")) == 5
