"""What a client derives from a :class:`~remoting.codec.bodies.TopicRouteData`: the queues it may write to
(:class:`TopicPublishInfo`), the queues it may read from (:func:`subscribe_queues`) and broker addresses.

Pure functions over the route body; no I/O. Queues are listed per broker in route order and queue id order, only for
brokers that have a master (you cannot send to or lock on a broker without one), as Java's ``MQClientInstance`` does.
"""

from __future__ import annotations

import random

import attrs

from remoting.codec.bodies import PERM_READ, PERM_WRITE, MessageQueue, TopicRouteData

#: Java's ``MixAll.MASTER_ID``.
MASTER_ID = 0


def _has_master(route: TopicRouteData, broker_name: str) -> bool:
    return any(bd.broker_name == broker_name and bd.master_addr for bd in route.broker_datas)


@attrs.define(slots=True)
class TopicPublishInfo:
    """A topic's writable queues and a rotating index, as Java's ``TopicPublishInfo``.

    ``order_topic`` is set when the name server returned an ``orderTopicConf`` (then queue ids come from it).
    ``send_which_queue`` starts at a random value (Java's ``ThreadLocalIndex``), so the first sends of many
    short-lived producers spread over the queues instead of all going to the same one.
    """

    topic: str
    route: TopicRouteData
    message_queues: list[MessageQueue] = attrs.field(factory=list)
    order_topic: bool = False
    send_which_queue: int = attrs.field(factory=lambda: random.randrange(0x7FFFFFFF))

    @property
    def ok(self) -> bool:
        return bool(self.message_queues)

    def next_index(self) -> int:
        self.send_which_queue = (self.send_which_queue + 1) & 0x7FFFFFFF
        return self.send_which_queue


def publish_info(topic: str, route: TopicRouteData) -> TopicPublishInfo:
    """Writable queues of ``topic``: for an ordered topic conf (``brokerName:num;...``) those queues, else the
    ``writeQueueNums`` of every writable queue data whose broker has a master."""
    info = TopicPublishInfo(topic=topic, route=route)
    if route.order_topic_conf:
        for item in route.order_topic_conf.split(";"):
            name, _, num = item.partition(":")
            if num.isdigit():
                info.message_queues.extend(MessageQueue(topic, name, i) for i in range(int(num)))
        info.order_topic = True
        return info
    for qd in sorted(route.queue_datas, key=lambda q: q.broker_name):
        if qd.perm & PERM_WRITE and _has_master(route, qd.broker_name):
            info.message_queues.extend(MessageQueue(topic, qd.broker_name, i) for i in range(qd.write_queue_nums))
    return info


def subscribe_queues(topic: str, route: TopicRouteData) -> list[MessageQueue]:
    """Readable queues of ``topic`` (``readQueueNums`` of every readable queue data), sorted."""
    queues = [
        MessageQueue(topic, qd.broker_name, i)
        for qd in route.queue_datas
        if qd.perm & PERM_READ
        for i in range(qd.read_queue_nums)
    ]
    return sorted(queues)


def master_address(route: TopicRouteData, broker_name: str) -> str | None:
    for bd in route.broker_datas:
        if bd.broker_name == broker_name:
            return bd.master_addr
    return None
