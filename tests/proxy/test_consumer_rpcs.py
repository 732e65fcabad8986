"""The consumer RPCs as RocketMQ 5.3.3's proxy and broker answer them (proxy/src/main/java/org/apache/rocketmq/proxy/
grpc/v2/consumer/, processor/ConsumerProcessor.java and ProducerProcessor.java; broker/.../processor/
AckMessageProcessor.java, PopMessageProcessor.java): a receive pops nothing from a broker that is not readable or for
a group that does not consume, a receive whose topic is deleted while it waits answers TOPIC_NOT_FOUND, receive, ack
and change of invisibility refuse system topics and groups, a FIFO receive repeating its attempt id gets its batch
again, a FIFO ack wakes the receive waiting on the queue it frees and a second ack of it answers OK, a receive checks
the tag itself (tags codes collide) and reads on past what that check drops, and ForwardMessageToDeadLetterQueue
checks the group's name, then is the broker's send-back (its checks, its DLQ copy, its answer), and so is a receive's
move of a message whose attempts are used up to the DLQ. Real embedded broker, the proxy's Trio-side activity,
virtual time (``autojump_clock``); requests are the generated protobuf messages the official clients send."""

from __future__ import annotations

import logging
import math
from pathlib import Path
from typing import Any

import attrs
import pytest
import trio
import trio.testing

from broker.embedded import EmbeddedCluster
from broker.pop import ReceiptHandle
from client.admin import Admin
from client.message import Message
from client.producer import Producer
from processors.filter import Sql92Filter
from processors.filter.cache import compile_sql92
from processors.pull import SQL92_EVALUATION_BUDGET
from proxy.common import Code, finish_now
from proxy.config import ProxyConfig
from proxy.messaging import MessagingActivity
from proxy.pb import definition, service
from proxy.startup import build_activity
from remoting.codec.bodies.broker_metadata import PERM_READ, PERM_WRITE, SubscriptionGroupConfig
from remoting.codec.message import decode_record
from tests.conftest import SMALL_STORE
from tests.proxy.test_pop import delete_topic, send
from tests.proxy.test_renew import md
from tests.proxy.test_route_checks import topic_route_missing
from tests.proxy.test_send_checks import PROXY
from tests.proxy.test_sessions import consumer_settings
from tests.semantics.helpers import create_topic, use_virtual_store_clock


async def _activity(cluster: EmbeddedCluster, nursery: trio.Nursery) -> MessagingActivity:
    use_virtual_store_clock(cluster)
    activity, revive = build_activity(cluster.controller, ProxyConfig())
    await nursery.start(revive.run)
    return activity


def _receive_request(group: str, topic: str, *, batch: int = 32, invisible_s: int = 30, tag: str = "*") -> Any:
    req = service.ReceiveMessageRequest(batch_size=batch)
    req.group.name = group
    req.message_queue.topic.name = topic
    req.message_queue.id = -1
    req.filter_expression.expression = tag
    req.invisible_duration.FromSeconds(invisible_s)
    return req


def _messages(stream: list[Any] | None) -> list[Any]:
    return [r.message for r in stream or [] if r.HasField("message")]


def _ack_request(group: str, topic: str, *messages: Any) -> Any:
    req = service.AckMessageRequest()
    req.group.name, req.topic.name = group, topic
    for m in messages:
        req.entries.add(message_id=m.system_properties.message_id, receipt_handle=m.system_properties.receipt_handle)
    return req


def _forward_request(group: str, topic: str, message: Any) -> Any:
    req = service.ForwardMessageToDeadLetterQueueRequest(
        receipt_handle=message.system_properties.receipt_handle,
        message_id=message.system_properties.message_id,
        delivery_attempt=message.system_properties.delivery_attempt,
        max_delivery_attempts=17,
    )
    req.group.name, req.topic.name = group, topic
    return req


async def _forward(activity: MessagingActivity, req: Any) -> Any:
    """ForwardMessageToDeadLetterQueue as the servicer runs it (its RpcErrors become the response's status)."""
    return await activity.guarded(
        activity.consuming.forward_to_dlq, service.ForwardMessageToDeadLetterQueueResponse, req, md("c@1")
    )


async def _one_received(cluster: EmbeddedCluster, activity: MessagingActivity, group: str, topic: str) -> Any:
    """A one-queue ``topic`` made, one message sent to it, received by ``group``."""
    await create_topic(cluster, topic, queues=1)
    await send(cluster, topic, b"poison")
    [message] = _messages(activity.consuming.receive_now(_receive_request(group, topic), md("c@1"), None))
    return message


def _dlq_copies(cluster: EmbeddedCluster, group: str) -> int:
    ctx = cluster.controller.context
    return 0 if ctx.topics.get(f"%DLQ%{group}") is None else ctx.store.max_offset_in_queue(f"%DLQ%{group}", 0)


async def test_a_fifo_ack_wakes_the_receive_parked_on_the_queue_it_unblocks(
    embedded_cluster: EmbeddedCluster, autojump_clock: trio.testing.MockClock, nursery: trio.Nursery
) -> None:
    """RocketMQ's AckMessageProcessor.ackOrderly calls notifyMessageArriving once the queue is no longer blocked, so
    a receive long-polling on a FIFO queue (the official push consumer keeps one in flight while it consumes the
    batch it holds) gets the next message as soon as the batch is acked, not at the end of its polling window
    (20 s)."""
    activity = await _activity(embedded_cluster, nursery)
    embedded_cluster.controller.context.groups.update(
        SubscriptionGroupConfig("GFifoWake", consume_message_orderly=True)
    )
    await create_topic(embedded_cluster, "FifoWake", queues=1)
    await send(embedded_cluster, "FifoWake", b"m0", b"m1")
    req = _receive_request("GFifoWake", "FifoWake", batch=1)
    [first] = _messages(activity.consuming.receive_now(req, md("fifo@1"), None))
    assert first.body == b"m0"

    got: list[tuple[list[Any], float]] = []

    async def parked() -> None:
        stream = await activity.consuming.receive(req, md("fifo@1"), None)
        got.append((_messages(stream), trio.current_time()))

    nursery.start_soon(parked)
    await trio.sleep(1)  # the receive is parked: m1 is behind m0, which is in flight
    assert got == []
    acked_at = trio.current_time()
    response = finish_now(activity.consuming.ack(_ack_request("GFifoWake", "FifoWake", first), md("fifo@1")))
    assert response.status.code == Code.OK
    with trio.fail_after(60):
        while not got:
            await trio.sleep(0.1)
    [(messages, at)] = got
    assert [m.body for m in messages] == [b"m1"]
    assert at - acked_at < 2, f"the parked receive answered {at - acked_at:.1f} s after the ack unblocked the queue"


async def test_a_fifo_receive_retried_with_its_attempt_id_gets_the_same_messages_again(
    embedded_cluster: EmbeddedCluster, autojump_clock: trio.testing.MockClock, nursery: trio.Nursery
) -> None:
    """ConsumerOrderInfoManager.OrderInfo.needBlock does not block a queue for a pop carrying the attempt id of the
    delivery in flight (ReceiveMessageActivity passes the request's ``attempt_id`` down), and ``update`` keeps its
    attempt counts (mergeOffsetConsumedCount): a client that lost a FIFO receive's answer (a timeout) and asks again
    with the same attempt id gets that batch at once, not after its invisible time (for an auto-renewed receive, not
    until the renewals stop)."""
    activity = await _activity(embedded_cluster, nursery)
    embedded_cluster.controller.context.groups.update(SubscriptionGroupConfig("GAttempt", consume_message_orderly=True))
    await create_topic(embedded_cluster, "FifoAttempt", queues=1)
    await send(embedded_cluster, "FifoAttempt", b"m0", b"m1")
    req = _receive_request("GAttempt", "FifoAttempt")
    req.attempt_id = "attempt-1"
    first = _messages(activity.consuming.receive_now(req, md("fifo@1"), None))
    assert [(m.body, m.system_properties.delivery_attempt) for m in first] == [(b"m0", 1), (b"m1", 1)]
    # The answer was lost; the client asks again with the same attempt id.
    again = _messages(activity.consuming.receive_now(req, md("fifo@1"), None))
    assert [(m.body, m.system_properties.delivery_attempt) for m in again] == [(b"m0", 1), (b"m1", 1)]
    # Another receive (no attempt id, or another one) is still blocked while the batch is in flight.
    req.attempt_id = "attempt-2"
    assert _messages(activity.consuming.receive_now(req, md("fifo@1"), None)) == []


async def test_acking_a_fifo_message_again_answers_ok(
    embedded_cluster: EmbeddedCluster, autojump_clock: trio.testing.MockClock, nursery: trio.Nursery
) -> None:
    """A client whose ack timed out after the broker applied it acks again (the Java client re-acks a FIFO message on
    any status but OK and INVALID_RECEIPT_HANDLE, for ever, and consumes nothing more of that queue meanwhile).
    RocketMQ's ackOrderly answers SUCCESS for an offset below the committed one (and for a pop time that no longer
    matches), as a second ack of a normal message is answered OK too."""
    activity = await _activity(embedded_cluster, nursery)
    embedded_cluster.controller.context.groups.update(SubscriptionGroupConfig("GReAck", consume_message_orderly=True))
    await create_topic(embedded_cluster, "ReAck", queues=1)
    await send(embedded_cluster, "ReAck", b"once", b"next")
    [message] = _messages(activity.consuming.receive_now(_receive_request("GReAck", "ReAck", batch=1), md("c@1"), None))
    ack = _ack_request("GReAck", "ReAck", message)
    assert finish_now(activity.consuming.ack(ack, md("c@1"))).status.code == Code.OK
    again = finish_now(activity.consuming.ack(ack, md("c@1"))).status
    assert again.code == Code.OK, f"re-ack answered {Code.Name(again.code)}: {again.message}"


async def test_a_receive_does_not_deliver_a_tag_that_only_shares_the_hash_code(
    embedded_cluster: EmbeddedCluster, autojump_clock: trio.testing.MockClock, nursery: trio.Nursery
) -> None:
    """The consume queue filters on tags hash codes; Java's "Aa" and "BB" share one (2112). RocketMQ's proxy checks
    the tag itself after the pop (PopMessageResultFilterImpl: FilterUtils.isTagMatched, NO_MATCH acked) and the 4.x
    clients re-check it too, so a consumer of "Aa" never sees "BB"."""
    activity = await _activity(embedded_cluster, nursery)
    await create_topic(embedded_cluster, "Tags", queues=1)
    await send(embedded_cluster, "Tags", b"tagged BB", tags="BB")
    await send(embedded_cluster, "Tags", b"tagged Aa", tags="Aa")
    got = _messages(activity.consuming.receive_now(_receive_request("GTags", "Tags", tag="Aa"), md("c@1"), None))
    assert [(m.body, m.system_properties.tag) for m in got] == [(b"tagged Aa", "Aa")]


async def test_a_receive_whose_pop_dropped_only_colliding_tags_does_not_wait_out_its_polling_window(
    embedded_cluster: EmbeddedCluster, autojump_clock: trio.testing.MockClock, nursery: trio.Nursery
) -> None:
    """Messages that pass the tags-code filter but fail the tag check ("BB" read for a subscription to "Aa") are
    consumed; the pop reads on past them, so the matching message behind them is handed out at once. RocketMQ's
    proxy answers a pop whose messages were all filtered out at once too (MESSAGE_NOT_FOUND "no match message",
    ReceiveMessageResponseStreamWriter) and its client receives again; waiting out the polling window (20 s) with
    the match visible would stall the consumer."""
    activity = await _activity(embedded_cluster, nursery)
    await create_topic(embedded_cluster, "TagStall", queues=1)
    await send(embedded_cluster, "TagStall", b"bb-0", b"bb-1", tags="BB")
    await send(embedded_cluster, "TagStall", b"aa-2", tags="Aa")
    req = _receive_request("GTagStall", "TagStall", batch=1, tag="Aa")
    req.long_polling_timeout.FromSeconds(20)
    started = trio.current_time()
    # What the servicer does (call_now_or_later): the pop without waiting, then the long poll.
    stream = activity.consuming.receive_now(req, md("c@1"), None)
    if stream is None:
        stream = await activity.consuming.receive(req, md("c@1"), None)
    took = trio.current_time() - started
    got = [m.body for m in _messages(stream)]
    assert (got, took < 2) == ([b"aa-2"], True), f"the receive answered {got} after {took:.1f} s"


def _status(stream: list[Any] | None) -> int:
    assert stream is not None
    return int(stream[0].status.code)


@pytest.mark.parametrize("unreadable", ["broker", "topic"])
async def test_a_broker_or_topic_without_read_permission_hands_out_nothing(
    embedded_cluster: EmbeddedCluster, autojump_clock: trio.testing.MockClock, nursery: trio.Nursery, unreadable: str
) -> None:
    """A topic without read permission, or a broker whose brokerPermission is not readable (an operator draining
    reads with updateBrokerConfig: it registers its topics with that permission), has no readable queue in its route:
    RocketMQ's proxy answers FORBIDDEN "no readable queue" before it pops (ConsumerProcessor.popMessage). The pop
    itself would answer NO_PERMISSION, as the 4.x pull path of this broker does (processors/pull.py)."""
    activity = await _activity(embedded_cluster, nursery)
    ctx = embedded_cluster.controller.context
    ctx.groups.update(SubscriptionGroupConfig("GNoRead"))
    await create_topic(embedded_cluster, "NoRead", queues=1)
    await send(embedded_cluster, "NoRead", b"m0")
    if unreadable == "broker":
        ctx.config = attrs.evolve(ctx.config, broker_permission=PERM_WRITE)
    else:
        ctx.topics.update_topic(attrs.evolve(ctx.topics.get("NoRead"), perm=PERM_WRITE))
    stream = activity.consuming.receive_now(_receive_request("GNoRead", "NoRead"), md("c@1"), None)
    got = (_messages(stream), _status(stream), stream[0].status.message)
    assert got == ([], Code.FORBIDDEN, PROXY + "no readable queue")
    assert ctx.offsets.query("GNoRead", "NoRead", 0) == -1  # nothing popped


async def test_a_group_with_consume_disabled_is_handed_nothing(
    embedded_cluster: EmbeddedCluster, autojump_clock: trio.testing.MockClock, nursery: trio.Nursery
) -> None:
    """PopMessageProcessor.processRequest answers NO_PERMISSION ("subscription group no permission") for a group
    whose consumeEnable is false (mqadmin updateSubGroup -c ... consumeEnable false: how an operator stops a group);
    RocketMQ 5.3.3's proxy relays it as INTERNAL_SERVER_ERROR (LocalMessageService.popMessage; ResponseBuilder maps no
    NO_PERMISSION), with the broker's remark. The 4.x pull path of this broker refuses too."""
    activity = await _activity(embedded_cluster, nursery)
    embedded_cluster.controller.context.groups.update(SubscriptionGroupConfig("GOff", consume_enable=False))
    await create_topic(embedded_cluster, "Off", queues=1)
    await send(embedded_cluster, "Off", b"m0")
    stream = activity.consuming.receive_now(_receive_request("GOff", "Off"), md("c@1"), None)
    assert (_messages(stream), _status(stream)) == ([], Code.INTERNAL_SERVER_ERROR)
    assert stream[0].status.message == "subscription group no permission, GOff"


async def test_a_receive_whose_topic_is_deleted_while_it_waits_answers_topic_not_found(
    embedded_cluster: EmbeddedCluster, autojump_clock: trio.testing.MockClock, nursery: trio.Nursery
) -> None:
    """A receive long-polling on a topic deleted meanwhile pops again at the end of its window and the broker answers
    TOPIC_NOT_EXIST: RocketMQ 5.3.3's cluster-mode proxy answers TOPIC_NOT_FOUND (ResponseBuilder.buildStatus,
    TopicRouteHelper.isTopicNotExistError), which tells the client more than the INTERNAL_SERVER_ERROR of its local
    mode (LocalMessageService.popMessage)."""
    activity = await _activity(embedded_cluster, nursery)
    embedded_cluster.controller.context.groups.update(SubscriptionGroupConfig("GGoneWhile"))
    await create_topic(embedded_cluster, "GoneWhile", queues=1)
    got: list[list[Any]] = []

    async def parked() -> None:
        got.append(await activity.consuming.receive(_receive_request("GGoneWhile", "GoneWhile"), md("c@1"), None))

    nursery.start_soon(parked)
    await trio.sleep(1)
    assert got == []  # waiting for a message
    await delete_topic(embedded_cluster, "GoneWhile", autojump_clock)
    with trio.fail_after(60):
        while not got:
            await trio.sleep(0.1)
    [stream] = got
    assert (_messages(stream), _status(stream)) == ([], Code.TOPIC_NOT_FOUND)
    assert stream[0].status.message == "topic[GoneWhile] not exist, apply first please!"


async def test_a_receive_on_the_revive_topic_is_refused_and_loses_no_redelivery(
    embedded_cluster: EmbeddedCluster, autojump_clock: trio.testing.MockClock, nursery: trio.Nursery
) -> None:
    """ReceiveMessageActivity.receiveMessage starts with validateTopicAndConsumerGroup (GrpcValidator): a system topic
    answers ILLEGAL_TOPIC, a system group ILLEGAL_CONSUMER_GROUP, before anything is popped. Here a receive of the
    revive topic by the revive group pops it: it moves CID_RMQ_SYS_REVIVE_GROUP's offset past the checkpoints, and
    the revive loop never reads them, so an unacknowledged message never comes back."""
    activity = await _activity(embedded_cluster, nursery)
    ctx = embedded_cluster.controller.context
    ctx.groups.update(SubscriptionGroupConfig("GRevived"))
    await create_topic(embedded_cluster, "Revived", queues=1)
    await send(embedded_cluster, "Revived", b"m0")
    [first] = _messages(
        activity.consuming.receive_now(_receive_request("GRevived", "Revived", invisible_s=10), md("c@1"), None)
    )
    await trio.sleep(5)  # the CK waits in the timer wheel until 10.5 s
    revive_topic = f"rmq_sys_REVIVE_LOG_{ctx.config.broker_cluster_name}"
    req = _receive_request("CID_RMQ_SYS_REVIVE_GROUP", revive_topic, invisible_s=3600)
    answers: list[list[Any]] = []

    async def long_poll() -> None:  # a receive parked on the revive topic is woken by the CK's arrival
        answers.append(await activity.consuming.receive(req, md("c@1"), None))

    nursery.start_soon(long_poll)
    await trio.sleep(60)
    again = _messages(activity.consuming.receive_now(_receive_request("GRevived", "Revived"), md("c@1"), None))
    assert [(m.body, m.system_properties.delivery_attempt) for m in again] == [(first.body, 2)]
    assert [_status(a) for a in answers] == [Code.ILLEGAL_TOPIC]


async def test_an_ack_or_a_change_of_invisibility_naming_a_system_topic_or_group_is_refused(
    embedded_cluster: EmbeddedCluster, autojump_clock: trio.testing.MockClock, nursery: trio.Nursery
) -> None:
    """AckMessageActivity and ChangeInvisibleDurationActivity start with validateTopicAndConsumerGroup too: a system
    topic answers ILLEGAL_TOPIC, a system group ILLEGAL_CONSUMER_GROUP, and nothing is acknowledged."""
    activity = await _activity(embedded_cluster, nursery)
    message = await _one_received(embedded_cluster, activity, "GSysAck", "SysAck")
    revive_topic = f"rmq_sys_REVIVE_LOG_{embedded_cluster.controller.context.config.broker_cluster_name}"
    answers = []
    for group, topic in [("GSysAck", revive_topic), ("CID_RMQ_SYS_REVIVE_GROUP", "SysAck")]:
        ack = _ack_request(group, topic, message)
        answers.append(activity.now_unless_waiting(activity.consuming.ack, service.AckMessageResponse, ack, md("c@1")))
        change = service.ChangeInvisibleDurationRequest(
            receipt_handle=message.system_properties.receipt_handle, message_id=message.system_properties.message_id
        )
        change.group.name, change.topic.name = group, topic
        change.invisible_duration.FromSeconds(10)
        make = service.ChangeInvisibleDurationResponse
        answers.append(activity.now_unless_waiting(activity.consuming.change_invisible, make, change, md("c@1")))
    codes = [Code.Name(a.status.code) for a in answers]
    assert codes == ["ILLEGAL_TOPIC", "ILLEGAL_TOPIC", "ILLEGAL_CONSUMER_GROUP", "ILLEGAL_CONSUMER_GROUP"]
    await trio.sleep(40)  # past the invisible time (30 s): the message was neither acked nor hidden longer
    again = _messages(activity.consuming.receive_now(_receive_request("GSysAck", "SysAck"), md("c@1"), None))
    assert [m.system_properties.delivery_attempt for m in again] == [2]


async def test_an_ack_entry_with_an_oversized_number_fails_alone(
    embedded_cluster: EmbeddedCluster, autojump_clock: trio.testing.MockClock, nursery: trio.Nursery
) -> None:
    """AckMessageActivity.ackMessageOneByOne answers each entry on its own: a handle whose pop time passes Java's
    long does not decode (ReceiptHandle.decode's Long.parseLong) and fails that entry alone, INVALID_RECEIPT_HANDLE
    as any malformed handle here (RocketMQ's NumberFormatException answers it INTERNAL_SERVER_ERROR), while the good
    entry is acked. It used to decode and fail the whole AckMessage when the ACK record was written."""
    activity = await _activity(embedded_cluster, nursery)
    embedded_cluster.controller.context.groups.update(SubscriptionGroupConfig("GBig"))
    await create_topic(embedded_cluster, "Big", queues=1)
    await send(embedded_cluster, "Big", b"m0")
    [message] = _messages(activity.consuming.receive_now(_receive_request("GBig", "Big"), md("c@1"), None))
    good = message.system_properties.receipt_handle
    fields = good.split(" ")
    fields[1] = str(1 << 70)
    req = service.AckMessageRequest()
    req.group.name, req.topic.name = "GBig", "Big"
    req.entries.add(message_id=message.system_properties.message_id, receipt_handle=" ".join(fields))
    req.entries.add(message_id=message.system_properties.message_id, receipt_handle=good)
    response = activity.now_unless_waiting(activity.consuming.ack, service.AckMessageResponse, req, md("c@1"))
    assert [e.status.code for e in response.entries] == [Code.INVALID_RECEIPT_HANDLE, Code.OK]


async def test_a_forward_to_the_dlq_that_stored_its_copy_answers_ok(
    embedded_cluster: EmbeddedCluster, autojump_clock: trio.testing.MockClock, nursery: trio.Nursery
) -> None:
    """RocketMQ's ProducerProcessor.forwardMessageToDeadLetterQueue answers the send-back's result (the DLQ copy) and
    acks afterwards, ignoring the ack's outcome: a handle that expired meanwhile still answers OK once the copy is in
    the DLQ. The official Java client (ProcessQueueImpl.forwardToDeadLetterQueue) re-forwards at once on any status
    but OK: answering the ack's INVALID_RECEIPT_HANDLE stored one more copy per retry, without end."""
    activity = await _activity(embedded_cluster, nursery)
    embedded_cluster.controller.context.groups.update(SubscriptionGroupConfig("GDlq", consume_message_orderly=True))
    await create_topic(embedded_cluster, "Dlq", queues=1)
    await send(embedded_cluster, "Dlq", b"poison")
    [message] = _messages(
        activity.consuming.receive_now(_receive_request("GDlq", "Dlq", invisible_s=10), md("c@1"), None)
    )
    await trio.sleep(11)  # the consumer's local retries took longer than the handle's invisible time
    store = embedded_cluster.controller.context.store
    statuses = []
    for _ in range(3):  # what the Java client does: forward again while the answer is not OK
        status = (await _forward(activity, _forward_request("GDlq", "Dlq", message))).status
        statuses.append(status.code)
        if status.code == Code.OK:
            break
    copies = store.max_offset_in_queue("%DLQ%GDlq", 0)
    assert (statuses, copies) == ([Code.OK], 1), f"answers {statuses}, {copies} copies in the DLQ"


async def test_a_forwarded_dlq_copy_counts_the_attempt_and_names_its_origin(
    embedded_cluster: EmbeddedCluster, autojump_clock: trio.testing.MockClock, nursery: trio.Nursery
) -> None:
    """ForwardMessageToDeadLetterQueue is RocketMQ's consumerSendMsgBack with delay level -1
    (AbstractSendMessageProcessor): the DLQ copy has reconsumeTimes + 1 and ORIGIN_MESSAGE_ID (the original's offset
    message id), as our own 4.x send-back (processors/send_back.py) writes."""
    activity = await _activity(embedded_cluster, nursery)
    await create_topic(embedded_cluster, "DlqProps", queues=1)
    await send(embedded_cluster, "DlqProps", b"dead")
    [message] = _messages(activity.consuming.receive_now(_receive_request("GDlqProps", "DlqProps"), md("c@1"), None))
    response = await _forward(activity, _forward_request("GDlqProps", "DlqProps", message))
    assert response.status.code == Code.OK
    store = embedded_cluster.controller.context.store
    [raw] = store.get("%DLQ%GDlqProps", 0, 0, 32).messages
    dead = decode_record(raw)
    original = decode_record(store.get("DlqProps", 0, 0, 1).messages[0])
    assert (dead.reconsume_times, dead.properties.get("ORIGIN_MESSAGE_ID")) == (1, original.msg_id)


async def test_forward_to_dlq_with_an_illegal_group_is_refused_and_stores_nothing(
    embedded_cluster: EmbeddedCluster, autojump_clock: trio.testing.MockClock, nursery: trio.Nursery
) -> None:
    """ForwardMessageToDLQActivity: validateTopicAndConsumerGroup first -> ILLEGAL_CONSUMER_GROUP; no DLQ topic
    named after the illegal group ("%DLQ%bad group!") is made, nothing written."""
    activity = await _activity(embedded_cluster, nursery)
    message = await _one_received(embedded_cluster, activity, "GFwd", "FwdT")
    answer = await _forward(activity, _forward_request("bad group!", "FwdT", message))
    ctx = embedded_cluster.controller.context
    got = (Code.Name(answer.status.code), ctx.topics.get("%DLQ%bad group!") is not None)
    assert got == ("ILLEGAL_CONSUMER_GROUP", False), got


async def test_forward_to_dlq_on_a_broker_that_does_not_take_writes_stores_nothing(
    embedded_cluster: EmbeddedCluster, autojump_clock: trio.testing.MockClock, nursery: trio.Nursery
) -> None:
    """ProducerProcessor.forwardMessageToDeadLetterQueue is CONSUMER_SEND_MSG_BACK through the broker's
    AbstractSendMessageProcessor.consumerSendMsgBack: a broker whose brokerPermission is not writable (drained before
    decommissioning) answers NO_PERMISSION, relayed as INTERNAL_SERVER_ERROR (ResponseBuilder.buildCode), and writes
    nothing; the message is not acked, so it comes back."""
    activity = await _activity(embedded_cluster, nursery)
    message = await _one_received(embedded_cluster, activity, "GFwdRo", "FwdRo")
    ctx = embedded_cluster.controller.context
    ctx.config = attrs.evolve(ctx.config, broker_permission=PERM_READ)
    answer = await _forward(activity, _forward_request("GFwdRo", "FwdRo", message))
    got = (Code.Name(answer.status.code), answer.status.message, _dlq_copies(embedded_cluster, "GFwdRo"))
    assert got == ("INTERNAL_SERVER_ERROR", f"the broker[{ctx.config.broker_ip1}] sending message is forbidden", 0)
    await trio.sleep(40)  # past the invisible time (30 s), the CK grace and a revive pass
    again = _messages(activity.consuming.receive_now(_receive_request("GFwdRo", "FwdRo"), md("c@1"), None))
    assert [m.system_properties.delivery_attempt for m in again] == [2]


async def test_forward_to_dlq_of_a_group_without_retry_queues_stores_nothing(
    embedded_cluster: EmbeddedCluster, autojump_clock: trio.testing.MockClock, nursery: trio.Nursery
) -> None:
    """consumerSendMsgBack: a group whose retryQueueNums <= 0 answers SUCCESS and writes nothing (our 4.x send-back
    does the same); the proxy then acks the message, which is gone."""
    activity = await _activity(embedded_cluster, nursery)
    embedded_cluster.controller.context.groups.update(SubscriptionGroupConfig("GNoRetry", retry_queue_nums=0))
    message = await _one_received(embedded_cluster, activity, "GNoRetry", "FwdNoRetry")
    answer = await _forward(activity, _forward_request("GNoRetry", "FwdNoRetry", message))
    assert (Code.Name(answer.status.code), _dlq_copies(embedded_cluster, "GNoRetry")) == ("OK", 0)
    await trio.sleep(40)  # past the invisible time (30 s), the CK grace and a revive pass
    assert _messages(activity.consuming.receive_now(_receive_request("GNoRetry", "FwdNoRetry"), md("c@1"), None)) == []


# ---- a receive moving a message whose attempts are used up to the DLQ (ConsumerProcessor.popMessage's TO_DLQ) -------


def _received(activity: MessagingActivity, req: Any) -> list[Any]:
    return _messages(activity.consuming.receive_now(req, md("c@1"), None))


async def _received_after_each_invisible_time(activity: MessagingActivity, req: Any, times: int) -> list[Any]:
    """``times`` receives of ``req``, each past the previous one's invisible time (10 s), the CK grace and a revive
    pass; no message is acked."""
    got = []
    for _ in range(times):
        got += _received(activity, req)
        await trio.sleep(20)
    return got


@pytest.mark.parametrize("fifo", [False, True], ids=["normal", "fifo"])
async def test_a_receive_moves_a_message_whose_attempts_are_used_up_to_the_dlq_as_a_forward(
    embedded_cluster: EmbeddedCluster, autojump_clock: trio.testing.MockClock, nursery: trio.Nursery, fifo: bool
) -> None:
    """RocketMQ 5.3.3's broker writes no DLQ for pops (PopReviveService); the proxy's receive sees a message whose
    reconsumeTimes reached the group's retryMaxTimes + 1 (PopMessageResultFilterImpl: TO_DLQ), forwards it as
    ForwardMessageToDeadLetterQueue does (consumerSendMsgBack, delay level -1: RETRY_TOPIC, ORIGIN_MESSAGE_ID)
    and acks it: it is not handed out again, and a FIFO queue moves on to the next message."""
    activity = await _activity(embedded_cluster, nursery)
    group, topic = ("GUsedFifo", "UsedFifo") if fifo else ("GUsed", "Used")
    embedded_cluster.controller.context.groups.update(
        SubscriptionGroupConfig(group, retry_max_times=1, consume_message_orderly=fifo)
    )
    await create_topic(embedded_cluster, topic, queues=1)
    await send(embedded_cluster, topic, b"poison", b"next")
    req = _receive_request(group, topic, batch=1, invisible_s=10)
    got = [(m.body, m.system_properties.delivery_attempt)
           for m in await _received_after_each_invisible_time(activity, req, 5)]  # fmt: skip
    order = [(b"poison", 1), (b"poison", 2), (b"next", 1), (b"next", 2)]
    assert got == (order if fifo else [order[0], order[2], order[1], order[3]])
    store = embedded_cluster.controller.context.store
    original = decode_record(store.get(topic, 0, 0, 1).messages[0])
    dead = [decode_record(raw) for raw in store.get(f"%DLQ%{group}", 0, 0, 32).messages]
    # ORIGIN_MESSAGE_ID: the offset id of the stored message the send-back read (the pop retry copy's, as in Java).
    got_dead = [(d.body, d.properties["RETRY_TOPIC"], d.properties["UNIQ_KEY"], "ORIGIN_MESSAGE_ID" in d.properties)
                for d in dead]  # fmt: skip
    assert got_dead == [(b"poison", topic, original.properties["UNIQ_KEY"], True)]


@pytest.mark.parametrize("fifo", [False, True], ids=["normal", "fifo"])
async def test_attempts_used_up_by_a_group_without_retry_queues_store_no_dlq_copy(
    embedded_cluster: EmbeddedCluster, autojump_clock: trio.testing.MockClock, nursery: trio.Nursery, fifo: bool
) -> None:
    """The receive's move to the DLQ is consumerSendMsgBack's: a group with retryQueueNums <= 0 answers SUCCESS and
    writes nothing; the message is acked and gone (our revive loop and FIFO pop used to append the DLQ copy
    themselves)."""
    activity = await _activity(embedded_cluster, nursery)
    group, topic = ("GNoRetryFifo", "NoRetryFifo") if fifo else ("GNoRetryRev", "NoRetryRev")
    embedded_cluster.controller.context.groups.update(
        SubscriptionGroupConfig(group, retry_queue_nums=0, retry_max_times=0, consume_message_orderly=fifo)
    )
    await create_topic(embedded_cluster, topic, queues=1)
    await send(embedded_cluster, topic, b"poison")
    got = await _received_after_each_invisible_time(activity, _receive_request(group, topic, invisible_s=10), 3)
    assert ([m.body for m in got], _dlq_copies(embedded_cluster, group)) == ([b"poison"], 0)


async def test_attempts_used_up_on_a_broker_that_takes_no_writes_store_no_dlq_copy_until_it_does(
    embedded_cluster: EmbeddedCluster, autojump_clock: trio.testing.MockClock, nursery: trio.Nursery
) -> None:
    """A broker whose brokerPermission takes no writes (drained before decommissioning) refuses the receive's move to
    the DLQ (consumerSendMsgBack: NO_PERMISSION) and stores nothing; the message is not acked, so it comes back and is
    moved once the broker takes writes again, never lost."""
    activity = await _activity(embedded_cluster, nursery)
    ctx = embedded_cluster.controller.context
    ctx.groups.update(SubscriptionGroupConfig("GDrained", retry_max_times=0))
    await create_topic(embedded_cluster, "Drained", queues=1)
    await send(embedded_cluster, "Drained", b"poison")
    req = _receive_request("GDrained", "Drained", invisible_s=10)
    assert [m.body for m in _received(activity, req)] == [b"poison"]
    writable = ctx.config.broker_permission
    ctx.config = attrs.evolve(ctx.config, broker_permission=PERM_READ)
    await trio.sleep(20)
    assert await _received_after_each_invisible_time(activity, req, 3) == []
    assert _dlq_copies(embedded_cluster, "GDrained") == 0
    ctx.config = attrs.evolve(ctx.config, broker_permission=writable)
    assert await _received_after_each_invisible_time(activity, req, 2) == []
    assert _dlq_copies(embedded_cluster, "GDrained") == 1


async def test_a_receive_without_an_invisible_time_or_auto_renew_is_illegal_invisible_time(
    embedded_cluster: EmbeddedCluster, autojump_clock: trio.testing.MockClock, nursery: trio.Nursery
) -> None:
    """ReceiveMessageActivity gives the default invisible time only to an auto-renew receive; any other is checked
    against [minInvisibleTimeMillsForRecv, maxInvisibleTimeMills], a missing invisible_duration reading as 0 ms: it is
    ILLEGAL_INVISIBLE_TIME, and nothing is handed out."""
    activity = await _activity(embedded_cluster, nursery)
    await create_topic(embedded_cluster, "NoInvis", queues=1)
    await send(embedded_cluster, "NoInvis", b"m")
    req = _receive_request("GNoInvis", "NoInvis")
    req.ClearField("invisible_duration")
    stream = activity.consuming.receive_now(req, md("c@1"), None)
    assert stream is not None and stream[0].status.code == Code.ILLEGAL_INVISIBLE_TIME
    assert _messages(stream) == []
    req.auto_renew = True
    assert [m.body for m in _messages(activity.consuming.receive_now(req, md("c@1"), None))] == [b"m"]


async def test_an_ack_entry_whose_ack_record_the_store_refuses_fails_alone(
    embedded_cluster: EmbeddedCluster, autojump_clock: trio.testing.MockClock, nursery: trio.Nursery
) -> None:
    """AckMessageActivity.ackMessageOneByOne answers each entry on its own, whatever the broker says of one: with the
    store refusing appends (a full disk), the entry whose ACK record is refused answers INTERNAL_SERVER_ERROR and the
    others theirs. The refusal used to fail the whole AckMessage, the answers of the entries before it lost."""
    activity = await _activity(embedded_cluster, nursery)
    embedded_cluster.controller.context.groups.update(SubscriptionGroupConfig("GFull"))
    await create_topic(embedded_cluster, "Full", queues=1)
    await send(embedded_cluster, "Full", b"m0")
    [message] = _messages(activity.consuming.receive_now(_receive_request("GFull", "Full"), md("c@1"), None))
    req = _ack_request("GFull", "Full", message)
    req.entries.add(message_id=message.system_properties.message_id, receipt_handle="not a handle")
    store = embedded_cluster.controller.context.store
    store.disk_full_reason = "disk full (test)"
    try:
        response = activity.now_unless_waiting(activity.consuming.ack, service.AckMessageResponse, req, md("c@1"))
    finally:
        store.disk_full_reason = None
    assert response.status.code == Code.MULTIPLE_RESULTS, response.status
    assert [e.status.code for e in response.entries] == [Code.INTERNAL_SERVER_ERROR, Code.INVALID_RECEIPT_HANDLE]


@pytest.mark.parametrize("max_invisible", [0, -1])
async def test_max_invisible_time_mills_of_zero_or_less_sets_no_upper_bound(
    embedded_cluster: EmbeddedCluster, autojump_clock: trio.testing.MockClock, nursery: trio.Nursery, max_invisible: int
) -> None:
    """GrpcValidator.validateInvisibleTime checks the upper bound only while maxInvisibleTimeMills is positive: with
    0 or less a receive for 30 s and a ChangeInvisibleDuration to a day are taken. Every one answered
    ILLEGAL_INVISIBLE_TIME: a proxy so configured served no receive at all."""
    use_virtual_store_clock(embedded_cluster)
    activity, revive = build_activity(embedded_cluster.controller, ProxyConfig(max_invisible_time_mills=max_invisible))
    await nursery.start(revive.run)
    await create_topic(embedded_cluster, "NoMax", queues=1)
    await send(embedded_cluster, "NoMax", b"m")
    stream = activity.consuming.receive_now(_receive_request("GNoMax", "NoMax"), md("c@1"), None)
    assert stream is not None and stream[0].status.code == Code.OK, stream[0].status
    [message] = _messages(stream)
    req = service.ChangeInvisibleDurationRequest(
        receipt_handle=message.system_properties.receipt_handle, message_id=message.system_properties.message_id
    )
    req.group.name, req.topic.name = "GNoMax", "NoMax"
    req.invisible_duration.FromSeconds(24 * 3600)
    answer = activity.now_unless_waiting(
        activity.consuming.change_invisible, service.ChangeInvisibleDurationResponse, req, md("c@1")
    )
    assert answer.status.code == Code.OK, answer.status


async def test_a_change_of_invisibility_past_a_lowered_timer_max_delay_answers_as_rocketmqs_proxy(
    tmp_path: Path, autojump_clock: trio.testing.MockClock, nursery: trio.Nursery, caplog: pytest.LogCaptureFixture
) -> None:
    """``timerMaxDelaySec`` (1 h) below a ChangeInvisibleDuration's 2 h: RocketMQ 5.3's broker cannot park the new
    CK (HookUtils refuses it, ChangeInvisibleTimeProcessor answers SYSTEM_ERROR before acking the old one) and its
    proxy's ChangeInvisibleDurationActivity answers INTERNAL_SERVER_ERROR "changeInvisibleDuration failed: status is
    abnormal". The old handle stays good (it acks), a change within the limit is taken, and the refusal is no error
    with a traceback (before: "RequestRejected: timer message illegal..." logged as a failed request)."""
    async with EmbeddedCluster(tmp_path / "c", **SMALL_STORE, timer_max_delay_sec=3600) as cluster:
        activity = await _activity(cluster, nursery)
        await create_topic(cluster, "LowMax", queues=1)
        await send(cluster, "LowMax", b"m1", b"m2")
        stream = activity.consuming.receive_now(_receive_request("GLowMax", "LowMax"), md("c@1"), None)
        first, second = _messages(stream)
        make = service.ChangeInvisibleDurationResponse
        answers = []
        for message, hours in ((first, 2), (second, 2), (second, 0.5)):
            req = service.ChangeInvisibleDurationRequest(
                receipt_handle=message.system_properties.receipt_handle,
                message_id=message.system_properties.message_id,
            )
            req.group.name, req.topic.name = "GLowMax", "LowMax"
            req.invisible_duration.FromSeconds(int(hours * 3600))
            with caplog.at_level(logging.WARNING):
                answers.append(activity.now_unless_waiting(activity.consuming.change_invisible, make, req, md("c@1")))
        abnormal = (Code.INTERNAL_SERVER_ERROR, "changeInvisibleDuration failed: status is abnormal")
        assert [(a.status.code, a.status.message) for a in answers[:2]] == [abnormal, abnormal]
        assert answers[2].status.code == Code.OK, answers[2].status
        assert not [r for r in caplog.records if r.levelno >= logging.ERROR]
        ack = activity.now_unless_waiting(
            activity.consuming.ack, service.AckMessageResponse, _ack_request("GLowMax", "LowMax", first), md("c@1")
        )
        assert ack.status.code == Code.OK, ack.status


async def test_a_fifo_receive_parked_on_a_queue_wakes_when_its_batch_becomes_visible_again(
    embedded_cluster: EmbeddedCluster, autojump_clock: trio.testing.MockClock, nursery: trio.Nursery
) -> None:
    """A FIFO consumer that does not ack its batch: once the batch's invisible time ends the queue is free and the
    batch is there to be delivered again. RocketMQ's ConsumerOrderInfoLockManager (enableNotifyAfterPopOrderLockRelease,
    on by default) wakes the pops long-polling on the queue when its lock is free, so a receive parked on it gets the
    batch then, not at the end of its polling window (20 s)."""
    late = await _fifo_parked_receive_lateness(embedded_cluster, nursery, "GFifoFree", "FifoFree")
    assert late < 2, f"the parked receive answered {late:.1f} s after m0 was free"


async def _fifo_parked_receive_lateness(
    cluster: EmbeddedCluster, nursery: trio.Nursery, group: str, topic: str
) -> float:
    """A FIFO receive takes m0 (10 s invisible) without acking it; a second receive parks on the queue 1 s later and
    gets m0 again (attempt 2). Returns how long after m0 became visible again that second receive was answered."""
    activity = await _activity(cluster, nursery)
    cluster.controller.context.groups.update(SubscriptionGroupConfig(group, consume_message_orderly=True))
    await create_topic(cluster, topic, queues=1)
    await send(cluster, topic, b"m0", b"m1")
    req = _receive_request(group, topic, batch=1, invisible_s=10)
    [first] = _messages(activity.consuming.receive_now(req, md("fifo@1"), None))
    assert first.body == b"m0"
    visible_at = trio.current_time() + 10
    await trio.sleep(1)
    stream = await activity.consuming.receive(req, md("fifo@1"), None)
    answered = trio.current_time()
    assert [(m.body, m.system_properties.delivery_attempt) for m in _messages(stream)] == [(b"m0", 2)]
    return answered - visible_at


async def test_a_receive_without_a_polling_timeout_leaves_half_the_request_timeout_for_its_answer(
    embedded_cluster: EmbeddedCluster, autojump_clock: trio.testing.MockClock, nursery: trio.Nursery
) -> None:
    """The official Go simple consumer sends no long_polling_timeout: its deadline is awaitDuration plus its request
    timeout (5 s + 3 s in its examples). ReceiveMessageActivity then polls the time remaining less half the request
    timeout of the client's Settings, clamped to [5 s, 20 s], so the answer has that long to reach the client. Ours
    polled up to the deadline itself (less half a second): a slow network lost the answer, its messages popped."""
    activity = await _activity(embedded_cluster, nursery)
    settings = consumer_settings("GGo", "GoPoll")
    settings.settings.request_timeout.FromSeconds(3)
    assert activity.telemetry(settings, md("go@1")).status.code == Code.OK
    await create_topic(embedded_cluster, "GoPoll", queues=1)
    req = _receive_request("GGo", "GoPoll")
    req.ClearField("long_polling_timeout")
    start = trio.current_time()
    stream = await activity.consuming.receive(req, md("go@1"), 7.5)  # the servicer's for a client deadline of 8 s
    waited = trio.current_time() - start
    assert stream[0].status.code == Code.MESSAGE_NOT_FOUND
    assert 5 <= waited <= 8 - 1.5, f"polled {waited:.1f} s of the client's 8 s"


async def test_a_forward_to_the_dlq_whose_ack_the_store_refuses_still_answers_ok(
    embedded_cluster: EmbeddedCluster, autojump_clock: trio.testing.MockClock, nursery: trio.Nursery
) -> None:
    """ProducerProcessor.forwardMessageToDeadLetterQueue acks after the send-back without looking at how the ack
    went (whenCompleteAsync): its answer is the send-back's. With the DLQ copy stored and the ACK record refused (the
    revive queue's file cannot be made: a directory stands where it goes), the request answered INTERNAL_SERVER_ERROR,
    and the official clients, which forward again on anything but OK, stored one more DLQ copy per retry."""
    activity = await _activity(embedded_cluster, nursery)
    message = await _one_received(embedded_cluster, activity, "GDlqAckRefused", "DlqAckRefused")
    ctx = embedded_cluster.controller.context
    revive = activity.consuming.pop.revive_topic
    assert ctx.store.max_offset_in_queue(revive, 0) == 0  # the CK went to the timer: no revive queue file yet
    (ctx.store.config.consume_queue_dir / revive / "0" / f"{0:020d}").mkdir(parents=True)
    statuses = []
    for _ in range(3):  # what the Java client does: forward again while the answer is not OK
        status = (await _forward(activity, _forward_request("GDlqAckRefused", "DlqAckRefused", message))).status
        statuses.append(status.code)
        if status.code == Code.OK:
            break
    copies = _dlq_copies(embedded_cluster, "GDlqAckRefused")
    assert (statuses, copies) == ([Code.OK], 1), f"answers {statuses}, {copies} copies in the DLQ"


async def test_a_receive_whose_dlq_move_is_not_acked_still_answers(
    embedded_cluster: EmbeddedCluster, autojump_clock: trio.testing.MockClock, nursery: trio.Nursery
) -> None:
    """ConsumerProcessor.popMessage moves a message whose attempts are used up to the DLQ and acks it without
    waiting on either: a refused ACK record (the revive queue's file cannot be made: a directory stands where it
    goes) is logged, and the receive answers. It escaped the receive instead, the stream failing as a whole."""
    activity = await _activity(embedded_cluster, nursery)
    ctx = embedded_cluster.controller.context
    ctx.groups.update(SubscriptionGroupConfig("GNoAttempts", retry_max_times=-1))  # the first delivery is one too many
    revive = activity.consuming.pop.revive_topic
    (ctx.store.config.consume_queue_dir / revive / "0" / f"{0:020d}").mkdir(parents=True)
    await create_topic(embedded_cluster, "NoAttempts", queues=1)
    await send(embedded_cluster, "NoAttempts", b"poison")
    stream = await activity.consuming.receive(_receive_request("GNoAttempts", "NoAttempts"), md("c@1"), None)
    assert [r.status.code for r in stream if r.HasField("status")] == [Code.MESSAGE_NOT_FOUND]
    assert _dlq_copies(embedded_cluster, "GNoAttempts") == 1


async def test_receives_parked_past_the_pop_polling_size_answer_polling_full(
    embedded_cluster: EmbeddedCluster, autojump_clock: trio.testing.MockClock, nursery: trio.Nursery
) -> None:
    """PopLongPollingService.polling parks a pop that found nothing only while fewer than ``maxPopPollingSize``
    (100000) pops are parked in all and no more than ``popPollingSize`` (1024) on its topic, group and queue; past
    that it answers POLLING_FULL, which ReceiveMessageResponseStreamWriter writes as TOO_MANY_REQUESTS "polling full".
    Nothing bounded them: a client could park receives without end, each holding a task and a stream."""
    activity = await _activity(embedded_cluster, nursery)
    await create_topic(embedded_cluster, "Parked", queues=1)
    answers: list[int] = []

    async def receive(group: str) -> None:
        stream = await activity.consuming.receive(_receive_request(group, "Parked"), md("c@1"), None)
        answers.append(stream[0].status.code)

    async with trio.open_nursery() as parked:
        for _ in range(1025):  # the queue's size is checked before each is added: 1025 park
            parked.start_soon(receive, "GParked")
        await trio.testing.wait_all_tasks_blocked()
        assert answers == []
        stream = await activity.consuming.receive(_receive_request("GParked", "Parked"), md("c@1"), 7.5)
        assert (stream[0].status.code, stream[0].status.message) == (Code.TOO_MANY_REQUESTS, "polling full")
        parked.start_soon(receive, "GOther")  # another group's receives park on their own key
        await trio.testing.wait_all_tasks_blocked()
        assert answers == []
    assert answers == [Code.MESSAGE_NOT_FOUND] * 1026
    stream = await activity.consuming.receive(_receive_request("GParked", "Parked"), md("c@1"), 7.5)
    assert stream[0].status.code == Code.MESSAGE_NOT_FOUND  # parked again once the others left


async def test_an_arrival_wakes_one_parked_receive_of_each_group_not_every_receive_on_the_topic(
    embedded_cluster: EmbeddedCluster, autojump_clock: trio.testing.MockClock, nursery: trio.Nursery
) -> None:
    """PopLongPollingService.notifyMessageArriving wakes, for each group polling the topic, one request parked on
    the arrival's queue and one on queue -1 (all queues, the proxy's receives), taken off the key's polling queue
    as it is woken; a V2 retry message wakes its normal topic's. Ours woke every receive parked on the topic,
    whatever its group: with N receives parked, one message cost N empty reads (a thundering herd). Here 6 receives
    of each of two groups wait on a 4-queue topic and 3 of the first group on another topic: one message is read
    once by each group, and a message on a group's retry topic wakes one receive of that group only."""
    activity = await _activity(embedded_cluster, nursery)
    await create_topic(embedded_cluster, "Herd", queues=4)
    await create_topic(embedded_cluster, "Calm", queues=1)
    await create_topic(embedded_cluster, "%RETRY%GHerdA_Herd", queues=1)
    pop = activity.consuming.pop
    got: dict[str, list[bytes]] = {}

    async def receive(group: str, topic: str) -> None:
        stream = await activity.consuming.receive(_receive_request(group, topic), md("c@1"), None)
        got.setdefault(group, []).extend(m.body for m in _messages(stream))

    def reads() -> dict[tuple[str, str], int]:
        keys = [("GHerdA", "Herd"), ("GHerdB", "Herd"), ("GHerdA", "Calm")]
        return {key: pop._turns.get(key, 0) for key in keys}

    async with trio.open_nursery() as parked:
        for _ in range(6):
            parked.start_soon(receive, "GHerdA", "Herd")
            parked.start_soon(receive, "GHerdB", "Herd")
        for _ in range(3):
            parked.start_soon(receive, "GHerdA", "Calm")
        await trio.testing.wait_all_tasks_blocked()
        before = reads()
        autojump_clock.autojump_threshold = math.inf  # the polling windows stand still while the producer connects
        await send(embedded_cluster, "Herd", b"one")
        await trio.testing.wait_all_tasks_blocked()
        after = reads()
        assert {k: after[k] - before[k] for k in after} == {
            ("GHerdA", "Herd"): 1,
            ("GHerdB", "Herd"): 1,
            ("GHerdA", "Calm"): 0,
        }
        assert got == {"GHerdA": [b"one"], "GHerdB": [b"one"]}
        await send(embedded_cluster, "%RETRY%GHerdA_Herd", b"again")
        await trio.testing.wait_all_tasks_blocked()
        last = reads()
        assert {k: last[k] - after[k] for k in last} == {
            ("GHerdA", "Herd"): 1,
            ("GHerdB", "Herd"): 0,
            ("GHerdA", "Calm"): 0,
        }
        assert got == {"GHerdA": [b"one", b"again"], "GHerdB": [b"one"]}
        autojump_clock.autojump_threshold = 0
        parked.cancel_scope.cancel()


async def test_a_receive_whose_client_goes_away_after_its_wake_leaves_the_message_to_the_groups_next_receive(
    embedded_cluster: EmbeddedCluster, autojump_clock: trio.testing.MockClock, nursery: trio.Nursery
) -> None:
    """An arrival wakes the group's longest parked receive; its client goes away (the bridge cancels the receive's
    task) after the wake chose it but before the task runs. PopLongPollingService.wakeUp does not run a request
    whose channel is no longer active and pollRemotingCommands takes the next one instead. Ours ran the woken
    receive anyway: it popped the message for a caller that was gone, which never saw it (hidden for its whole
    invisible time), while the group's other receive slept its whole window."""
    activity = await _activity(embedded_cluster, nursery)
    await create_topic(embedded_cluster, "Left", queues=1)
    got: dict[str, list[bytes]] = {}

    async def receive(name: str, *, task_status: trio.TaskStatus[trio.CancelScope]) -> None:
        with trio.CancelScope() as scope:  # the bridge's scope of one ReceiveMessage call
            task_status.started(scope)
            stream = await activity.consuming.receive(_receive_request("GLeft", "Left"), md(f"{name}@1"), None)
            got[name] = [m.body for m in _messages(stream)]

    async with trio.open_nursery() as parked:
        first = await parked.start(receive, "first")
        await trio.testing.wait_all_tasks_blocked()
        await parked.start(receive, "second")
        await trio.testing.wait_all_tasks_blocked()
        store = embedded_cluster.controller.context.store
        previous = store.arrival_listener
        assert previous is not None

        def arrival_then_gone(topic: str, queue_id: int, offset: int, tags_code: int, properties: str = "") -> None:
            previous(topic, queue_id, offset, tags_code, properties)
            first.cancel()  # the first receive's client goes away right after the arrival woke that receive

        store.arrival_listener = arrival_then_gone
        autojump_clock.autojump_threshold = math.inf  # the polling windows stand still while the producer connects
        await send(embedded_cluster, "Left", b"one")
        await trio.testing.wait_all_tasks_blocked()
        store.arrival_listener = previous
        assert got == {"second": [b"one"]}
        autojump_clock.autojump_threshold = 0
        parked.cancel_scope.cancel()


@pytest.mark.parametrize(
    ("version", "code"),
    [(None, Code.BAD_REQUEST), ("5.0.2", Code.BAD_REQUEST), ("5.0.3", Code.ILLEGAL_POLLING_TIME),
     ("5.0.8", Code.ILLEGAL_POLLING_TIME)],
)  # fmt: skip
async def test_a_deadline_too_short_for_polling_is_checked_first_and_answered_as_the_client_knows(
    embedded_cluster: EmbeddedCluster,
    autojump_clock: trio.testing.MockClock,
    nursery: trio.Nursery,
    version: str | None,
    code: int,
) -> None:
    """ReceiveMessageActivity checks the polling time before anything else (the topic's and group's names too): with
    less than grpcClientConsumerMinLongPollingTimeoutMillis (5 s) left before the deadline it answers
    ILLEGAL_POLLING_TIME, or BAD_REQUEST to a client without ``x-mq-client-version`` or older than 5.0.3, which
    predates that code, with "The deadline time remaining is not enough for polling, please check network
    condition". Ours checked it last and answered ILLEGAL_POLLING_TIME to every client."""
    activity = await _activity(embedded_cluster, nursery)
    headers = md("c@1") if version is None else {**md("c@1"), "x-mq-client-version": version}
    for topic in ("Short", "an illegal topic"):
        stream = await activity.consuming.receive(_receive_request("GShort", topic), headers, 3.0)
        assert (stream[0].status.code, stream[0].status.message) == (
            code,
            "The deadline time remaining is not enough for polling, please check network condition",
        )


async def test_a_receive_checks_its_invisible_time_then_the_topic_then_the_group(
    embedded_cluster: EmbeddedCluster, autojump_clock: trio.testing.MockClock, nursery: trio.Nursery
) -> None:
    """After the polling time and the names, ReceiveMessageActivity checks the invisible time and builds the filter;
    only then does ConsumerProcessor.popMessage look the topic up (its route: TOPIC_NOT_FOUND, no readable queue
    FORBIDDEN), and the group is the broker's check after that (PopMessageProcessor: SUBSCRIPTION_GROUP_NOT_EXIST).
    Ours checked the group, then the topic, before the invisible time: a receive of an unknown topic with an illegal
    invisible time answered TOPIC_NOT_FOUND (and auto-created its group), an unknown group's receive of an unknown
    topic CONSUMER_GROUP_NOT_FOUND."""
    activity = await _activity(embedded_cluster, nursery)
    groups = embedded_cluster.controller.context.groups
    stream = activity.consuming.receive_now(_receive_request("GOrder", "NoSuchTopic", invisible_s=1), md("c@1"), 30.0)
    assert stream is not None and stream[0].status.code == Code.ILLEGAL_INVISIBLE_TIME, stream[0].status
    assert groups.get("GOrder") is None, "a receive refused before the broker's pop created its group"
    groups.config = attrs.evolve(groups.config, auto_create_subscription_group=False)
    stream = activity.consuming.receive_now(_receive_request("GOrder", "NoSuchTopic"), md("c@1"), 30.0)
    assert stream is not None and stream[0].status.code == Code.TOPIC_NOT_FOUND, stream[0].status
    # the cluster mode's route service's MQClientException (the local mode's route of no topic config fails on null)
    assert stream[0].status.message == topic_route_missing("NoSuchTopic")


async def test_an_ack_answers_its_overall_status_as_rocketmqs_proxy(
    embedded_cluster: EmbeddedCluster, autojump_clock: trio.testing.MockClock, nursery: trio.Nursery
) -> None:
    """AckMessageActivity.setAckResponseStatus: the overall status is the one code of all entries with that code's
    name as its message ("INVALID_RECEIPT_HANDLE", not the first entry's text), MULTIPLE_RESULTS "MULTIPLE_RESULTS"
    for mixed codes, and INTERNAL_SERVER_ERROR "ack message result is empty" for a request without entries (it
    answered BAD_REQUEST "ack")."""
    activity = await _activity(embedded_cluster, nursery)
    embedded_cluster.controller.context.groups.update(SubscriptionGroupConfig("GAll"))
    message = await _one_received(embedded_cluster, activity, "GAll", "All")
    ack = activity.consuming.ack

    def answer(*handles: str) -> Any:
        req = service.AckMessageRequest()
        req.group.name, req.topic.name = "GAll", "All"
        for handle in handles:
            req.entries.add(message_id=message.system_properties.message_id, receipt_handle=handle)
        return activity.now_unless_waiting(ack, service.AckMessageResponse, req, md("c@1")).status

    empty, bad = answer(), answer("not a handle", "nor this")
    mixed = answer("not a handle", message.system_properties.receipt_handle)
    assert (empty.code, empty.message) == (Code.INTERNAL_SERVER_ERROR, "ack message result is empty")
    assert (bad.code, bad.message) == (Code.INVALID_RECEIPT_HANDLE, "INVALID_RECEIPT_HANDLE")
    assert (mixed.code, mixed.message) == (Code.MULTIPLE_RESULTS, "MULTIPLE_RESULTS")


async def test_a_change_of_invisibility_of_an_offset_not_in_the_queue_answers_as_rocketmqs_proxy(
    embedded_cluster: EmbeddedCluster, autojump_clock: trio.testing.MockClock, nursery: trio.Nursery
) -> None:
    """A handle naming an offset past the queue's end: RocketMQ 5.3's broker answers the change of invisibility with
    no SUCCESS, the client API makes that AckStatus.NO_EXIST, and ChangeInvisibleDurationActivity answers it
    INTERNAL_SERVER_ERROR "changeInvisibleDuration failed: status is abnormal" (it answered the ack's wording, "ack
    failed: status is abnormal")."""
    activity = await _activity(embedded_cluster, nursery)
    embedded_cluster.controller.context.groups.update(SubscriptionGroupConfig("GPast"))
    message = await _one_received(embedded_cluster, activity, "GPast", "Past")
    fields = message.system_properties.receipt_handle.split(" ")
    fields[7] = "1000"
    req = service.ChangeInvisibleDurationRequest(
        receipt_handle=" ".join(fields), message_id=message.system_properties.message_id
    )
    req.group.name, req.topic.name = "GPast", "Past"
    req.invisible_duration.FromSeconds(60)
    answer = activity.now_unless_waiting(
        activity.consuming.change_invisible, service.ChangeInvisibleDurationResponse, req, md("c@1")
    )
    abnormal = (Code.INTERNAL_SERVER_ERROR, "changeInvisibleDuration failed: status is abnormal")
    assert (answer.status.code, answer.status.message) == abnormal


def _sql_receive_request(group: str, topic: str, expression: str) -> Any:
    req = _receive_request(group, topic)
    req.filter_expression.type = definition.FilterType.SQL
    req.filter_expression.expression = expression
    return req


async def test_an_arrival_its_filter_does_not_match_leaves_a_parked_receive_parked(
    embedded_cluster: EmbeddedCluster, autojump_clock: trio.testing.MockClock, nursery: trio.Nursery
) -> None:
    """PopLongPollingService.notifyMessageArriving checks the polled request's filter against the arrival
    (messageFilter.isMatchedByConsumeQueue on its tags code, then isMatchedByCommitLog on its properties for SQL92)
    and puts a request it does not match back, unwoken. Ours woke the group's receive for every message on the topic:
    a receive of TagA on a topic busy with TagB popped (read the store) once per message, each pop empty. Here a
    receive of TagA and one of ``a > 1`` (other groups) stay parked through messages neither matches, and each is
    woken by the first message it matches (all below offset 799: RocketMQ forces a wake on every 800th message)."""
    activity = await _activity(embedded_cluster, nursery)
    await create_topic(embedded_cluster, "Picky", queues=1)
    await send(embedded_cluster, "Picky", b"first")  # matched by neither filter: both receives park
    pop = activity.consuming.pop
    got: dict[str, list[bytes]] = {}

    async def receive(group: str, req: Any) -> None:
        stream = await activity.consuming.receive(req, md("c@1"), None)
        got[group] = [m.body for m in _messages(stream)]

    def pops() -> dict[str, int]:
        return {group: pop._turns.get((group, "Picky"), 0) for group in ("GTagA", "GSqlA")}

    async with trio.open_nursery() as parked:
        parked.start_soon(receive, "GTagA", _receive_request("GTagA", "Picky", tag="TagA"))
        parked.start_soon(receive, "GSqlA", _sql_receive_request("GSqlA", "Picky", "a > 1"))
        await trio.testing.wait_all_tasks_blocked()
        before = pops()
        autojump_clock.autojump_threshold = math.inf  # the polling windows stand still while the producer connects
        async with Producer("pg-picky", embedded_cluster.namesrv_addr) as producer:
            for _ in range(3):
                await producer.send(Message("Picky", b"other", tags="TagB", properties={"a": "0"}))
                await trio.testing.wait_all_tasks_blocked()
            assert {g: n - before[g] for g, n in pops().items()} == {"GTagA": 0, "GSqlA": 0}, "woken by no match"
            assert got == {}
            await producer.send(Message("Picky", b"tagged", tags="TagA", properties={"a": "0"}))
            await trio.testing.wait_all_tasks_blocked()
            await producer.send(Message("Picky", b"sql", tags="TagB", properties={"a": "5"}))
            await trio.testing.wait_all_tasks_blocked()
        assert {g: n - before[g] for g, n in pops().items()} == {"GTagA": 1, "GSqlA": 1}
        assert got == {"GTagA": [b"tagged"], "GSqlA": [b"sql"]}
        autojump_clock.autojump_threshold = 0


async def test_a_fifo_queue_freed_by_its_invisible_time_wakes_one_parked_receive_not_all(
    embedded_cluster: EmbeddedCluster, autojump_clock: trio.testing.MockClock, nursery: trio.Nursery
) -> None:
    """When a FIFO queue's batch in flight becomes visible again, RocketMQ's ConsumerOrderInfoLockManager timer
    calls PopMessageProcessor.notifyLongPollingRequestIfNeed, which wakes one pop long-polling on the group's queue -1
    key (PopLongPollingService.notifyMessageArriving polls one request), as an orderly ack does. Ours woke every
    receive of the group parked on the topic at that moment: with 4 parked, 4 pops, 3 of them empty. Here one of
    them gets the batch again at once, and the others stay parked until the end of their windows."""
    activity = await _activity(embedded_cluster, nursery)
    embedded_cluster.controller.context.groups.update(SubscriptionGroupConfig("GFifoOne", consume_message_orderly=True))
    await create_topic(embedded_cluster, "FifoOne", queues=1)
    await send(embedded_cluster, "FifoOne", b"m0", b"m1")
    req = _receive_request("GFifoOne", "FifoOne", batch=1, invisible_s=10)
    [first] = _messages(activity.consuming.receive_now(req, md("fifo@1"), None))
    assert first.body == b"m0"
    visible_at = trio.current_time() + 10
    pop = activity.consuming.pop
    got: list[tuple[list[bytes], float]] = []

    async def parked() -> None:
        stream = await activity.consuming.receive(req, md("fifo@1"), None)
        got.append(([m.body for m in _messages(stream)], trio.current_time()))

    async with trio.open_nursery() as receives:
        for _ in range(4):
            receives.start_soon(parked)
        await trio.sleep(1)
        before = pop._turns[("GFifoOne", "FifoOne")]
        await trio.sleep(visible_at - trio.current_time() + 1)
        assert pop._turns[("GFifoOne", "FifoOne")] - before == 1, "pops when the queue was free again"
        [(bodies, at)] = got
        assert bodies == [b"m0"] and at - visible_at < 1


async def test_an_arrival_checks_a_groups_filter_once_not_once_per_parked_receive(
    embedded_cluster: EmbeddedCluster, autojump_clock: trio.testing.MockClock, nursery: trio.Nursery
) -> None:
    """PopLongPollingService.notifyMessageArriving polls one request off the group's key and checks its filter
    once per arrival, whatever the number parked. Ours checked the filter of every parked receive of the group until
    one matched, inside the store's append: 200 receives of one SQL92 filter on a topic busy with messages it does not
    match cost 200 evaluations per message. The receives of a group share their filter (the proxy compiles an
    expression once), so one evaluation per group and arrival says the same."""
    activity = await _activity(embedded_cluster, nursery)
    await create_topic(embedded_cluster, "Busy", queues=1)
    pop = activity.consuming.pop
    sql = compile_sql92("a > 1", string_operators=True).matches_raw
    evaluations = 0

    def counted(raw: memoryview) -> bool:
        nonlocal evaluations
        evaluations += 1
        return sql(raw)

    order: list[int] = []
    woken: list[int] = []

    async def parked(i: int) -> None:
        with trio.move_on_after(3600):
            order.append(i)  # filed in this order: no checkpoint before wait_arrival files it
            await pop.wait_arrival(["Busy"], 3600, "GBusy", None, counted)
            woken.append(i)

    async with trio.open_nursery() as receives:
        for i in range(200):
            receives.start_soon(parked, i)
        await trio.testing.wait_all_tasks_blocked()
        autojump_clock.autojump_threshold = math.inf  # the waits stand still while the producer connects
        async with Producer("pg-busy", embedded_cluster.namesrv_addr) as producer:
            for _ in range(5):
                await producer.send(Message("Busy", b"other", properties={"a": "0"}))
            await trio.testing.wait_all_tasks_blocked()
            assert (woken, evaluations) == ([], 5), "one evaluation per arrival, none woken"
            await producer.send(Message("Busy", b"match", properties={"a": "5"}))
            await trio.testing.wait_all_tasks_blocked()
        autojump_clock.autojump_threshold = 0
        assert (woken, evaluations) == (order[:1], 6), "the longest waiting"
        receives.cancel_scope.cancel()


async def test_an_arrival_checks_the_parked_receives_sql92_filters_within_a_budget(
    embedded_cluster: EmbeddedCluster,
    autojump_clock: trio.testing.MockClock,
    nursery: trio.Nursery,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """PopLongPollingService.notifyMessageArriving checks one parked request's filter per group on RocketMQ's reput
    thread; ours runs inside the append, on the loop every client shares: 40 groups receiving with a 2,000-term
    filter made one message cost 40 evaluations there. One arrival evaluates within the pull path's budget and wakes
    the receive of each group past it unchecked (it pops, finds nothing and waits again); those it checked wait on
    until a message they match arrives."""
    activity = await _activity(embedded_cluster, nursery)
    await create_topic(embedded_cluster, "Heavy", queues=1)
    pop = activity.consuming.pop
    spent = 0
    original = Sql92Filter.matches_raw

    def counted(sql: Sql92Filter, raw: str | bytes | memoryview) -> bool:
        nonlocal spent
        spent += sql.cost
        return original(sql, raw)

    monkeypatch.setattr(Sql92Filter, "matches_raw", counted)
    heavy = compile_sql92(" OR ".join(f"a = 'x{i}'" for i in range(2000)), string_operators=True)
    groups: list[str] = []  # in the order they are filed
    woken: set[str] = set()

    async def parked(group: str) -> None:
        with trio.move_on_after(3600):
            groups.append(group)  # no checkpoint before wait_arrival files it
            await pop.wait_arrival(["Heavy"], 3600, group, None, heavy.matches_raw)
            woken.add(group)

    async with trio.open_nursery() as receives:
        for i in range(40):
            receives.start_soon(parked, f"GHeavy{i}")
        await trio.testing.wait_all_tasks_blocked()
        autojump_clock.autojump_threshold = math.inf  # the waits stand still while the producer connects
        async with Producer("pg-heavy", embedded_cluster.namesrv_addr) as producer:
            await producer.send(Message("Heavy", b"other", properties={"a": "0"}))
            await trio.testing.wait_all_tasks_blocked()
            assert 0 < spent <= SQL92_EVALUATION_BUDGET
            checked = spent // heavy.cost
            assert woken == set(groups[checked:]), "the groups past the budget woken unchecked"
            await producer.send(Message("Heavy", b"match", properties={"a": "x1999"}))
            await trio.testing.wait_all_tasks_blocked()
        autojump_clock.autojump_threshold = 0
        assert woken == set(groups)
        receives.cancel_scope.cancel()


async def test_pop_long_polling_force_notify_interval_is_a_broker_setting(
    embedded_cluster: EmbeddedCluster, autojump_clock: trio.testing.MockClock, nursery: trio.Nursery
) -> None:
    """RocketMQ 5.3.3's BrokerConfig ``popLongPollingForceNotifyInterval`` (default 800; 0 or less: never): every
    message whose queue offset + 1 is a multiple of it wakes a parked pop of each group whatever its filter
    (broker/src/main/java/org/apache/rocketmq/broker/longpolling/PopLongPollingService.java notifyMessageArriving).
    Ours had 800 as a constant: the setting was an unknown key, and a receive of TagA on a topic of TagB messages
    was never woken early. Here with 3, the third TagB message wakes it."""
    activity = await _activity(embedded_cluster, nursery)
    ctx = embedded_cluster.controller.context
    assert await ctx.update_config({"popLongPollingForceNotifyInterval": "3"}) == []
    await create_topic(embedded_cluster, "Forced", queues=1)
    pop = activity.consuming.pop

    async def receive() -> None:
        await activity.consuming.receive(_receive_request("GForced", "Forced", tag="TagA"), md("c@1"), None)

    async with trio.open_nursery() as parked:
        parked.start_soon(receive)
        await trio.testing.wait_all_tasks_blocked()
        before = pop._turns.get(("GForced", "Forced"), 0)
        woken: list[int] = []
        autojump_clock.autojump_threshold = math.inf  # the polling window stands still while the producer connects
        async with Producer("pg-forced", embedded_cluster.namesrv_addr) as producer:
            for _ in range(3):
                await producer.send(Message("Forced", b"other", tags="TagB"))
                await trio.testing.wait_all_tasks_blocked()
                woken.append(pop._turns.get(("GForced", "Forced"), 0) - before)
        assert woken == [0, 0, 1], "pops after each TagB message"
        autojump_clock.autojump_threshold = 0


async def test_enable_notify_after_pop_order_lock_release_false_leaves_a_fifo_receive_parked(
    embedded_cluster: EmbeddedCluster, autojump_clock: trio.testing.MockClock, nursery: trio.Nursery
) -> None:
    """RocketMQ 5.3.3's BrokerConfig ``enableNotifyAfterPopOrderLockRelease`` (default true) turns the
    ConsumerOrderInfoLockManager timer on (broker/src/main/java/org/apache/rocketmq/broker/offset/
    ConsumerOrderInfoLockManager.java): off, a FIFO queue whose batch becomes visible again wakes no parked pop, which
    gets the batch at the end of its polling window. Ours had it on as a constant: the setting was an unknown key."""
    ctx = embedded_cluster.controller.context
    assert await ctx.update_config({"enableNotifyAfterPopOrderLockRelease": "false"}) == []
    late = await _fifo_parked_receive_lateness(embedded_cluster, nursery, "GFifoNoNotify", "FifoNoNotify")
    assert late > 5, f"the parked receive answered {late:.1f} s after m0 was free"


async def test_an_ack_past_the_invisible_time_is_a_proxy_exceptions_expired_handle(
    embedded_cluster: EmbeddedCluster, autojump_clock: trio.testing.MockClock, nursery: trio.Nursery
) -> None:
    """ConsumerProcessor.batchAckMessage answers an expired handle with AbstractProcessor's ProxyException
    INVALID_RECEIPT_HANDLE "receipt handle is expired", which AckMessageActivity turns into the entry's status through
    ResponseBuilder.buildStatus(Throwable): GrpcProxyException's message is the ProxyException's toString. Ours
    answered the bare text (found by a third review)."""
    activity = await _activity(embedded_cluster, nursery)
    embedded_cluster.controller.context.groups.update(SubscriptionGroupConfig("GLate"))
    await create_topic(embedded_cluster, "Late", queues=1)
    await send(embedded_cluster, "Late", b"m0")
    [message] = _messages(
        activity.consuming.receive_now(_receive_request("GLate", "Late", invisible_s=10), md("c@1"), None)
    )
    await trio.sleep(11)
    req = _ack_request("GLate", "Late", message)
    response = activity.now_unless_waiting(activity.consuming.ack, service.AckMessageResponse, req, md("c@1"))
    got = [(e.status.code, e.status.message) for e in response.entries]
    assert got == [(Code.INVALID_RECEIPT_HANDLE, PROXY + "receipt handle is expired")], got


async def test_consumer_progress_of_a_5x_group_lists_the_pop_retry_topic_its_receives_read(
    embedded_cluster: EmbeddedCluster, autojump_clock: trio.testing.MockClock, nursery: trio.Nursery
) -> None:
    """PopMessageProcessor.processRequest records each pop's subscription of the topic and of its pop retry topic in
    ConsumerManager's compensation table (compensateSubscribeData), and findSubscriptionData falls back to it, so
    GET_CONSUME_STATS (``mqadmin consumerProgress``, getTopicsForCollectingConsumeStats) of a group whose Settings
    subscribe only the topic keeps the ``%RETRY%group_topic`` its receives commit offsets on. Ours dropped it: the
    redeliveries waiting there were missing from the group's progress."""
    activity = await _activity(embedded_cluster, nursery)
    ctx = embedded_cluster.controller.context
    ctx.groups.update(SubscriptionGroupConfig("GProgress"))
    settings = consumer_settings("GProgress", "Progress")
    settings.settings.subscription.subscriptions[0].expression.expression = "*"
    assert activity.telemetry(settings, md("c@1")).status.code == definition.Code.OK
    await create_topic(embedded_cluster, "Progress", queues=1)
    await send(embedded_cluster, "Progress", b"m0")
    receive = _receive_request("GProgress", "Progress", invisible_s=10)
    assert len(_messages(activity.consuming.receive_now(receive, md("c@1"), None))) == 1
    await trio.sleep(60)  # not acked: revived into the pop retry topic
    [again] = _messages(activity.consuming.receive_now(receive, md("c@1"), None))
    assert again.system_properties.delivery_attempt == 2
    retry = "%RETRY%GProgress_Progress"
    assert ctx.offsets.topics_of_group("GProgress") == {"Progress", retry}
    async with Admin(embedded_cluster.namesrv_addr) as admin:
        stats = await admin.consume_stats("GProgress", broker_addr=embedded_cluster.broker_addr)
    assert {mq.topic for mq in stats.offset_table} == {"Progress", retry}


async def test_a_receive_whose_messages_all_go_to_the_dlq_answers_no_match_at_once(
    embedded_cluster: EmbeddedCluster, autojump_clock: trio.testing.MockClock, nursery: trio.Nursery
) -> None:
    """ConsumerProcessor.popMessage drops what PopMessageResultFilterImpl sends to the DLQ from the broker's FOUND
    result, and ReceiveMessageResponseStreamWriter answers a FOUND result left empty MESSAGE_NOT_FOUND "no match
    message" at once. Ours went on long-polling for the rest of the window, then answered "no new message"."""
    activity = await _activity(embedded_cluster, nursery)
    embedded_cluster.controller.context.groups.update(SubscriptionGroupConfig("GNoMatch", retry_max_times=0))
    await create_topic(embedded_cluster, "NoMatch", queues=1)
    await send(embedded_cluster, "NoMatch", b"poison")
    req = _receive_request("GNoMatch", "NoMatch", invisible_s=10)
    assert [m.body for m in _received(activity, req)] == [b"poison"]
    await trio.sleep(20)  # revived, its attempts used up
    start = trio.current_time()
    stream = await activity.consuming.receive(req, md("c@1"), 30.0)
    got = (_messages(stream), stream[0].status.code, stream[0].status.message, trio.current_time() - start)
    assert got == ([], Code.MESSAGE_NOT_FOUND, "no match message", 0), got
    assert _dlq_copies(embedded_cluster, "GNoMatch") == 1


async def test_a_clients_own_fifo_flag_does_not_make_a_non_orderly_groups_receive_fifo(
    embedded_cluster: EmbeddedCluster, autojump_clock: trio.testing.MockClock, nursery: trio.Nursery
) -> None:
    """RocketMQ 5.3.3's ReceiveMessageActivity pops with ``fifo`` from the client's Settings as
    GrpcClientSettingsManager.getClientSettings merges them: ``subscription.fifo`` is the group's
    ``consumeMessageOrderly`` once the group exists (mergeSubscriptionData), whatever the client sent, as the
    Settings answered over Telemetry tell the client. A client claiming FIFO for a non-orderly group gets the next
    message of a queue while the previous one is in flight."""
    activity = await _activity(embedded_cluster, nursery)
    embedded_cluster.controller.context.groups.update(SubscriptionGroupConfig("GNotFifo"))
    await create_topic(embedded_cluster, "NotFifo", queues=1)
    await send(embedded_cluster, "NotFifo", b"m0", b"m1")
    settings = consumer_settings("GNotFifo", "NotFifo")
    settings.settings.subscription.fifo = True
    answered = activity.telemetry(settings, md("claims-fifo@1"))
    assert not answered.settings.subscription.fifo
    req = _receive_request("GNotFifo", "NotFifo", batch=1)
    first = _messages(activity.consuming.receive_now(req, md("claims-fifo@1"), None))
    second = _messages(activity.consuming.receive_now(req, md("claims-fifo@1"), None))
    assert [m.body for m in first + second] == [b"m0", b"m1"]


async def test_a_group_not_created_yet_is_fifo_as_the_client_says_in_settings_and_receive(
    embedded_cluster: EmbeddedCluster, autojump_clock: trio.testing.MockClock, nursery: trio.Nursery
) -> None:
    """Without the group's config, GrpcClientSettingsManager.getClientSettings returns the Settings as stored
    (updateClientSettings: the defaults merged with the client's, so its ``fifo``), and so does the Telemetry answer;
    ReceiveMessageActivity reads them before the broker's pop auto-creates the group (orderly: no)."""
    activity = await _activity(embedded_cluster, nursery)
    await create_topic(embedded_cluster, "NewFifo", queues=1)
    await send(embedded_cluster, "NewFifo", b"m0", b"m1")
    settings = consumer_settings("GNewFifo", "NewFifo")
    settings.settings.subscription.fifo = True
    assert activity.telemetry(settings, md("new-fifo@1")).settings.subscription.fifo
    req = _receive_request("GNewFifo", "NewFifo", batch=1)
    [first] = _messages(activity.consuming.receive_now(req, md("new-fifo@1"), None))
    assert ReceiptHandle.decode(first.system_properties.receipt_handle).fifo
    assert embedded_cluster.controller.context.groups.get("GNewFifo") is not None  # created by the pop
