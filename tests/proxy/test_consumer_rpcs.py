"""The consumer RPCs as RocketMQ 5.3.3's proxy and broker answer them (proxy/src/main/java/org/apache/rocketmq/proxy/
grpc/v2/consumer/, processor/ConsumerProcessor.java and ProducerProcessor.java; broker/.../processor/
AckMessageProcessor.java): a FIFO ack wakes the receive waiting on the queue it frees and a second ack of it answers
OK, a receive checks the tag itself (tags codes collide) and reads on past what that check drops, and
ForwardMessageToDeadLetterQueue answers the DLQ copy's result and writes that copy as a send-back does. Real embedded
broker, the proxy's Trio-side activity, virtual time (``autojump_clock``); requests are the generated protobuf
messages the official clients send."""

from __future__ import annotations

from typing import Any

import trio
import trio.testing

from broker.embedded import EmbeddedCluster
from proxy.common import Code
from proxy.config import ProxyConfig
from proxy.messaging import MessagingActivity
from proxy.pb import service
from proxy.startup import build_activity
from remoting.codec.bodies.broker_metadata import SubscriptionGroupConfig
from remoting.codec.message import decode_record
from tests.proxy.test_pop import send
from tests.proxy.test_renew import md
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
    response = activity.consuming.ack(_ack_request("GFifoWake", "FifoWake", first), md("fifo@1"))
    assert response.status.code == Code.OK
    with trio.fail_after(60):
        while not got:
            await trio.sleep(0.1)
    [(messages, at)] = got
    assert [m.body for m in messages] == [b"m1"]
    assert at - acked_at < 2, f"the parked receive answered {at - acked_at:.1f} s after the ack unblocked the queue"


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
    assert activity.consuming.ack(ack, md("c@1")).status.code == Code.OK
    again = activity.consuming.ack(ack, md("c@1")).status
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
        status = activity.consuming.forward_to_dlq(_forward_request("GDlq", "Dlq", message), md("c@1")).status
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
    response = activity.consuming.forward_to_dlq(_forward_request("GDlqProps", "DlqProps", message), md("c@1"))
    assert response.status.code == Code.OK
    store = embedded_cluster.controller.context.store
    [raw] = store.get("%DLQ%GDlqProps", 0, 0, 32).messages
    dead = decode_record(raw)
    original = decode_record(store.get("DlqProps", 0, 0, 1).messages[0])
    assert (dead.reconsume_times, dead.properties.get("ORIGIN_MESSAGE_ID")) == (1, original.msg_id)
