"""The mapping of a 5.x message's system properties through the store (docs/grpc.md#message-mapping, RocketMQ 5.3.3's
proxy/src/main/java/org/apache/rocketmq/proxy/grpc/v2/producer/SendMessageActivity.java and
common/GrpcConverter.java): the trace context a producer sends reaches the consumer (an empty one is not stored), and a
delivery attempt a producer sends does not count as earlier deliveries, nor when our 4.x producer sends the stored
message again. Found by reviews; each failed before. Real embedded broker, the proxy's Trio-side activity, virtual
time (``autojump_clock``)."""

from __future__ import annotations

from typing import Any

import trio
import trio.testing

from broker.embedded import EmbeddedCluster
from client.message import Message
from client.producer import Producer
from proxy.common import Code
from proxy.config import ProxyConfig
from proxy.messaging import MessagingActivity
from proxy.pb import service
from proxy.startup import build_activity
from remoting.codec.message import decode_record, read_record_meta
from tests.proxy.grpc_front import message
from tests.proxy.test_renew import md
from tests.proxy.test_send_checks import NOT_IN_STRING_HASH_SET
from tests.semantics.helpers import create_topic, use_virtual_store_clock


async def _activity(cluster: EmbeddedCluster, nursery: trio.Nursery) -> MessagingActivity:
    use_virtual_store_clock(cluster)
    activity, revive = build_activity(cluster.controller, ProxyConfig())
    await nursery.start(revive.run)
    return activity


def _receive_request(topic: str, group: str) -> Any:
    """A ReceiveMessage of up to 32 messages of ``topic`` for ``group``, tags ``*``, invisible 30 s."""
    req = service.ReceiveMessageRequest(batch_size=32)
    req.group.name = group
    req.message_queue.topic.name = topic
    req.message_queue.id = -1
    req.filter_expression.expression = "*"
    req.invisible_duration.FromSeconds(30)
    return req


async def _sent_and_received(activity: MessagingActivity, sent: Any) -> Any:
    """``sent`` stored through SendMessage, then received by a new group: the message it gets."""
    answer = await activity.send(service.SendMessageRequest(messages=[sent]), md("p@1"))
    assert answer.status.code == Code.OK, answer.status.message
    req = _receive_request(sent.topic.name, "GMapping")
    [got] = [r.message for r in activity.consuming.receive_now(req, md("c@1"), None) or [] if r.HasField("message")]
    return got


async def test_the_trace_context_sent_reaches_the_consumer(
    embedded_cluster: EmbeddedCluster, autojump_clock: trio.testing.MockClock, nursery: trio.Nursery
) -> None:
    """SendMessageActivity.buildMessageProperty stores system_properties.trace_context as TRACE_CONTEXT, and
    GrpcConverter.buildSystemProperties gives it back as trace_context: the consumer's span keeps its link to the
    producer's. TRACE_CONTEXT is not in MessageConst.STRING_HASH_SET, so GrpcConverter.buildUserAttributes gives it
    back as a user property too."""
    activity = await _activity(embedded_cluster, nursery)
    await create_topic(embedded_cluster, "TraceT", queues=1)
    sent = message("TraceT", b"traced")
    sent.system_properties.trace_context = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"
    got = await _sent_and_received(activity, sent)
    stored = decode_record(embedded_cluster.controller.context.store.get("TraceT", 0, 0, 1).messages[0])
    assert stored.properties.get("TRACE_CONTEXT") == sent.system_properties.trace_context
    assert got.system_properties.trace_context == sent.system_properties.trace_context
    assert dict(got.user_properties) == {"TRACE_CONTEXT": sent.system_properties.trace_context}


async def test_an_empty_trace_context_is_not_stored(
    embedded_cluster: EmbeddedCluster, autojump_clock: trio.testing.MockClock, nursery: trio.Nursery
) -> None:
    """SendMessageActivity.buildMessageProperty stores TRACE_CONTEXT only when the trace context is not empty: one
    set to "" (present on the wire) writes no empty pair into the stored properties (decoders, Java's
    string2messageProperties too, drop such a pair; a reader of the raw properties found it), and the consumer gets
    none back."""
    activity = await _activity(embedded_cluster, nursery)
    await create_topic(embedded_cluster, "NoTraceT", queues=1)
    sent = message("NoTraceT", b"untraced", trace_context="")
    assert sent.system_properties.HasField("trace_context")
    got = await _sent_and_received(activity, sent)
    raw = embedded_cluster.controller.context.store.get("NoTraceT", 0, 0, 1).messages[0]
    stored = bytes(read_record_meta(raw).properties)
    assert (b"TRACE_CONTEXT" in stored, got.system_properties.HasField("trace_context")) == (False, False)


async def test_a_sent_delivery_attempt_does_not_count_as_earlier_deliveries(
    embedded_cluster: EmbeddedCluster, autojump_clock: trio.testing.MockClock, nursery: trio.Nursery
) -> None:
    """SendMessageActivity puts delivery_attempt in the RECONSUME_TIME property only; ProducerProcessor.
    buildSendMessageRequestHeader sends reconsumeTimes 0 for any topic but a retry topic, so the broker stores 0 and
    the first delivery is attempt 1 (a message re-published from a received one, attempt 5, would otherwise reach the
    DLQ after fewer failures)."""
    activity = await _activity(embedded_cluster, nursery)
    await create_topic(embedded_cluster, "AttemptT", queues=1)
    got = await _sent_and_received(activity, message("AttemptT", b"again", delivery_attempt=5))
    stored = decode_record(embedded_cluster.controller.context.store.get("AttemptT", 0, 0, 1).messages[0])
    assert (got.system_properties.delivery_attempt, stored.reconsume_times) == (1, 0)
    assert (stored.properties.get("RECONSUME_TIME"), dict(got.user_properties)) == ("5", {})


async def test_a_delivery_attempt_sent_to_a_retry_topic_is_its_reconsume_count(
    embedded_cluster: EmbeddedCluster, autojump_clock: trio.testing.MockClock, nursery: trio.Nursery
) -> None:
    """ProducerProcessor.buildSendMessageRequestHeader: for a ``%RETRY%`` topic the RECONSUME_TIME property becomes
    the header's reconsumeTimes and is removed, as a 4.x consumer's retry send carries it."""
    activity = await _activity(embedded_cluster, nursery)
    answer = await activity.send(
        service.SendMessageRequest(messages=[message("%RETRY%GMapping", b"retried", delivery_attempt=3)]), md("p@1")
    )
    assert answer.status.code == Code.OK, answer.status.message
    stored = decode_record(embedded_cluster.controller.context.store.get("%RETRY%GMapping", 0, 0, 1).messages[0])
    assert (stored.reconsume_times, "RECONSUME_TIME" in stored.properties) == (3, False)


async def test_a_5x_message_resent_by_our_4x_producer_keeps_reconsume_times_zero(
    embedded_cluster: EmbeddedCluster, autojump_clock: trio.testing.MockClock, nursery: trio.Nursery
) -> None:
    """A 5.x send's delivery_attempt is stored as the RECONSUME_TIME property of every message. Re-sending such a
    message with its properties through our 4.x producer, as ``mqadmin queryMsgById -s true`` does, must store
    reconsumeTimes 0 and keep the property, as Java's DefaultMQProducerImpl.sendKernelImpl does for any topic but a
    %RETRY% one; moved into the header, a 5.x consumer got it as attempt 6 and it reached the DLQ after fewer
    failures."""
    activity = await _activity(embedded_cluster, nursery)
    await create_topic(embedded_cluster, "ResendT", queues=1)
    sent = message("ResendT", b"again", delivery_attempt=5)
    assert (await activity.send(service.SendMessageRequest(messages=[sent]), md("p@1"))).status.code == Code.OK
    store = embedded_cluster.controller.context.store
    original = decode_record(store.get("ResendT", 0, 0, 1).messages[0])
    assert (original.reconsume_times, original.properties.get("RECONSUME_TIME")) == (0, "5")
    async with Producer("ReSendMsgById", embedded_cluster.namesrv_addr) as producer:
        again = Message(original.topic, original.body, properties=dict(original.properties), flag=original.flag)
        await producer.send(again)
    resent = decode_record(store.get("ResendT", 0, 1, 1).messages[0])
    assert (resent.reconsume_times, resent.properties.get("RECONSUME_TIME")) == (0, "5")


async def test_properties_outside_string_hash_set_reach_the_consumer_as_user_properties(
    embedded_cluster: EmbeddedCluster, autojump_clock: trio.testing.MockClock, nursery: trio.Nursery
) -> None:
    """GrpcConverter.buildUserAttributes (proxy/src/main/java/org/apache/rocketmq/proxy/grpc/v2/common/
    GrpcConverter.java) leaves out of user_properties only the names of MessageConst.STRING_HASH_SET: a property
    named otherwise, such as TRACE_CONTEXT or __SHARDINGKEY (also given back as trace_context and message_group),
    reaches a 5.x consumer as a user property, whether a 5.x producer (SendMessageActivity takes them) or a 4.x one
    stored it. Ours dropped every MessageConst name (found by a review)."""
    activity = await _activity(embedded_cluster, nursery)
    await create_topic(embedded_cluster, "PassT", queues=1)
    user = {key: f"v{i}" for i, key in enumerate(NOT_IN_STRING_HASH_SET)}
    async with Producer("PassP", embedded_cluster.namesrv_addr) as producer:
        await producer.send(Message("PassT", b"4.x", properties=dict(user)))
    req = _receive_request("PassT", "GPass")
    [from_4x] = [r.message for r in activity.consuming.receive_now(req, md("c@1"), None) or [] if r.HasField("message")]
    assert dict(from_4x.user_properties) == user
    await create_topic(embedded_cluster, "PassT5", queues=1)
    got = await _sent_and_received(activity, message("PassT5", b"passed", user=user))
    assert dict(got.user_properties) == user
    sp = got.system_properties
    assert (sp.trace_context, sp.message_group) == (user["TRACE_CONTEXT"], user["__SHARDINGKEY"])


async def test_a_message_naming_its_dlq_origin_carries_it_as_dead_letter_queue(
    embedded_cluster: EmbeddedCluster, autojump_clock: trio.testing.MockClock, nursery: trio.Nursery
) -> None:
    """GrpcConverter.buildSystemProperties (proxy/src/main/java/org/apache/rocketmq/proxy/grpc/v2/common/
    GrpcConverter.java) gives a stored message with both DLQ_ORIGIN_TOPIC and DLQ_ORIGIN_MESSAGE_ID the system
    property dead_letter_queue {topic, message_id}; with one of them only, none. Ours never set it (found by a
    review)."""
    activity = await _activity(embedded_cluster, nursery)
    await create_topic(embedded_cluster, "OriginT", queues=1)
    origin = {"DLQ_ORIGIN_TOPIC": "Orders", "DLQ_ORIGIN_MESSAGE_ID": "7F0000010001ABCD"}
    async with Producer("OriginP", embedded_cluster.namesrv_addr) as producer:
        await producer.send(Message("OriginT", b"both", properties=dict(origin)))
        await producer.send(Message("OriginT", b"half", properties={"DLQ_ORIGIN_TOPIC": "Orders"}))
    req = _receive_request("OriginT", "GOrigin")
    got = {r.message.body: r.message for r in activity.consuming.receive_now(req, md("c@1"), None) or []
           if r.HasField("message")}  # fmt: skip
    both, half = got[b"both"].system_properties, got[b"half"].system_properties
    assert both.HasField("dead_letter_queue")
    assert (both.dead_letter_queue.topic, both.dead_letter_queue.message_id) == ("Orders", "7F0000010001ABCD")
    assert not half.HasField("dead_letter_queue")
    assert dict(got[b"both"].user_properties) == {}
