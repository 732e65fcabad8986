"""Where the producer differed from RocketMQ 4.9.8's DefaultMQProducerImpl and Validators (found by a review, each
test failing on the code before): topics Java refuses before sending, a user property named like ``MSG_TYPE`` or
``TRAN_MSG`` taken for the real one (a reply send, a transactional trace record). Embedded broker, real sockets."""

from __future__ import annotations

import pytest
import trio
import trio.testing

from broker.embedded import EmbeddedCluster
from client.admin import Admin
from client.config import ClientConfig
from client.errors import MessageValidationError
from client.instance import new_instance
from client.message import Message
from client.producer import Producer
from client.trace import MessageType, TraceType
from tests.client.test_trace import _create, _traces


@pytest.mark.parametrize(
    "topic",
    ["Bad Topic!", "T" * 128, "SCHEDULE_TOPIC_XXXX", "RMQ_SYS_TRANS_HALF_TOPIC"],
    ids=["illegal-characters", "longer-than-127", "schedule-topic", "half-topic"],
)
async def test_a_topic_java_refuses_is_refused_before_anything_is_sent(
    embedded_cluster: EmbeddedCluster, topic: str
) -> None:
    """Java's ``Validators.checkMessage`` (checkTopic + isNotAllowedSendTopic) throws MQClientException before any
    request; the broker never sees the message (before: sent three times, the broker's refusals reported)."""
    async with Producer("pg-validate", embedded_cluster.namesrv_addr) as producer:
        with pytest.raises(MessageValidationError):
            await producer.send(Message(topic, b"x"))


async def test_a_user_property_ending_in_msg_type_with_value_reply_is_an_ordinary_send(
    embedded_cluster: EmbeddedCluster,
) -> None:
    """Java's ``sendKernelImpl`` sends SEND_REPLY_MESSAGE_V2 only when the ``MSG_TYPE`` property *equals* ``reply``
    (``MessageConst.PROPERTY_MESSAGE_TYPE``, ``MixAll.REPLY_MESSAGE_FLAG``). Before, a substring test of the encoded
    properties turned a message with a user property such as ``ORDER_MSG_TYPE=reply`` into a reply: the broker's reply
    processor answered SYSTEM_ERROR (no REPLY_TO_CLIENT), the producer retried it, and every attempt stored a copy."""
    async with Admin(embedded_cluster.namesrv_addr) as admin:
        await admin.create_topic("Orders", read_queue_nums=1, write_queue_nums=1)
    async with Producer("pg-orders", embedded_cluster.namesrv_addr) as producer:
        result = await producer.send(Message("Orders", b"order-1", properties={"ORDER_MSG_TYPE": "reply"}))
    stored = embedded_cluster.controller.context.store.get("Orders", 0, 0, 32).messages
    assert result.queue_offset == 0 and len(stored) == 1


async def test_a_user_property_ending_in_tran_msg_does_not_make_a_pub_record_transactional(
    embedded_cluster: EmbeddedCluster, autojump_clock: trio.testing.MockClock
) -> None:
    """Java sets the Pub record's msgType from ``msg.getProperty(TRAN_MSG)`` equal to ``"true"``
    (DefaultMQProducerImpl.sendKernelImpl -> context.setMsgType(Trans_Msg_Half)). Before, a substring test of
    ``TRAN_MSG\\x01true`` in the encoded properties traced an ordinary message with a user property
    ``X_TRAN_MSG=true`` as a half (transactional) message."""
    await _create(embedded_cluster, "PlainTraced")
    async with Producer("plain-traced-pg", embedded_cluster.namesrv_addr, enable_msg_trace=True) as producer:
        sent = await producer.send(Message("PlainTraced", b"plain", properties={"X_TRAN_MSG": "true"}))
        views = await _traces(embedded_cluster, sent.msg_id, None, {TraceType.Pub})
    [pub] = [v.record for v in views if v.record.type is TraceType.Pub]
    assert pub.msg_type is MessageType.Normal_Msg


async def test_the_name_server_given_beside_a_config_is_used(embedded_cluster: EmbeddedCluster) -> None:
    """``Producer(group, addr, config=ClientConfig(access_key=...))`` (the README's ACL form) used the config's default
    127.0.0.1:9876 and dropped ``addr``; a config naming name servers of its own keeps them."""
    async with Admin(embedded_cluster.namesrv_addr) as admin:
        await admin.create_topic("WithConfig", read_queue_nums=1, write_queue_nums=1)
    config = ClientConfig(instance_name="with-config")
    async with Producer("pg-config", embedded_cluster.namesrv_addr, config=config) as producer:
        assert (await producer.send(Message("WithConfig", b"x"))).queue_offset == 0
    own = ClientConfig(namesrv_addr="10.0.0.1:9876;10.0.0.2:9876")
    assert new_instance(own, embedded_cluster.namesrv_addr).config.namesrv_addr == ("10.0.0.1:9876", "10.0.0.2:9876")
