"""Queue selection for sends: the default round robin that avoids the broker that just failed and (optionally)
brokers the latency fault table marks as slow, plus user selectors for ordered messages.

A :data:`MessageQueueSelector` is ``(queues, message, arg) -> queue``, as Java's ``MessageQueueSelector.select``;
:func:`apply_selector` fails the send with QueueSelectionError (an MQClientError) when it raises or returns None (no
fallback queue). :func:`select_by_hash` keeps every message with the same key (an order id, say) on the same queue
while the queue count stays the same, hashing the key as Java's ``hashCode`` of the boxed value
(:func:`java_hash_code`) so a Java producer with ``SelectMessageQueueByHash`` and the same keys agrees.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Sequence

from client.errors import QueueSelectionError
from client.fault import LatencyFaultTolerance
from client.message import Message
from client.route import TopicPublishInfo
from remoting.codec.bodies import MessageQueue
from remoting.codec.message_properties import java_string_hash

MessageQueueSelector = Callable[[Sequence[MessageQueue], Message, object], MessageQueue]


def apply_selector(
    selector: MessageQueueSelector, queues: Sequence[MessageQueue], msg: Message, arg: object
) -> MessageQueue:
    """The queue ``selector`` picks for ``msg`` (Java's ``sendSelectImpl``). Raises :class:`QueueSelectionError` (an
    ``MQClientError``) when it raises or picks none: an ordered message never falls back to another queue."""
    try:
        queue: MessageQueue | None = selector(queues, msg, arg)
    except Exception as exc:
        raise QueueSelectionError(f"select message queue threw exception: {exc!r}") from exc
    if queue is None:
        raise QueueSelectionError("select message queue return null.")
    return queue


def java_hash_code(arg: object) -> int:
    """``arg.hashCode()`` of the Java value a Java producer would pass for ``arg``: ``Boolean`` for a bool (1231 /
    1237), ``Integer`` for an int in Java's int range (the value), ``Long`` beyond it (``(int) (v ^ (v >>> 32))``),
    ``String`` for a str and for anything else its ``str()``."""
    if isinstance(arg, bool):
        return 1231 if arg else 1237
    if isinstance(arg, int):
        if -(2**31) <= arg < 2**31:
            return arg
        v = arg & 0xFFFFFFFFFFFFFFFF
        h = (v ^ (v >> 32)) & 0xFFFFFFFF
        return h - 0x100000000 if h & 0x80000000 else h
    return java_string_hash(arg if isinstance(arg, str) else str(arg))


def select_by_hash(queues: Sequence[MessageQueue], msg: Message, arg: object) -> MessageQueue:
    """``queues[abs(arg.hashCode() % len(queues))]`` with :func:`java_hash_code`, as Java's
    ``SelectMessageQueueByHash`` (client/src/main/java/org/apache/rocketmq/client/producer/selector/
    SelectMessageQueueByHash.java): an integer order id goes where a Java producer sends it."""
    return queues[abs(java_hash_code(arg)) % len(queues)]


def select_by_random(queues: Sequence[MessageQueue], msg: Message, arg: object) -> MessageQueue:
    return random.choice(list(queues))


def select_one_message_queue(
    info: TopicPublishInfo,
    last_broker_name: str | None,
    fault: LatencyFaultTolerance | None = None,
) -> MessageQueue:
    """The next queue in round robin, skipping ``last_broker_name`` (the broker the previous attempt failed on)
    when another broker has queues; with ``fault`` also skipping brokers it marks unavailable.

    ``info`` must have queues (the caller checks ``info.ok``).
    """
    queues = info.message_queues
    if fault is not None:
        for _ in range(len(queues)):
            mq = queues[info.next_index() % len(queues)]
            if fault.is_available(mq.broker_name) and mq.broker_name != last_broker_name:
                return mq
        # Every broker is marked slow: take one of the less bad ones rather than failing.
        candidate = fault.pick_one_at_least()
        if candidate is not None and candidate != last_broker_name:
            on_candidate = [mq for mq in queues if mq.broker_name == candidate]
            if on_candidate:
                return on_candidate[info.next_index() % len(on_candidate)]
    if last_broker_name is not None:
        for _ in range(len(queues)):
            mq = queues[info.next_index() % len(queues)]
            if mq.broker_name != last_broker_name:
                return mq
    return queues[info.next_index() % len(queues)]
