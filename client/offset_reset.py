"""Resetting the offsets of a consumer group with no consumer online: Java's
``DefaultMQAdminExtImpl.resetOffsetByTimestampOld`` (``tools/src/main/java/org/apache/rocketmq/tools/admin/
DefaultMQAdminExtImpl.java``), the fallback of ``mqadmin resetOffsetByTime``/``skipAccumulatedMessage`` and of
rocketmq-dashboard's reset when the brokers answer CONSUMER_NOT_ONLINE.

Per broker of the topic's route, in its order, and asking that broker only (a broker of the group elsewhere is never
asked): every queue of the topic the group has offsets for there (GET_CONSUME_STATS without a topic lists each read
queue of such a topic, so queues kept readable after the write queues were shrunk are reset too), in the order of the
``HashMap`` Java reads them into, else each of the broker's ``readQueueNums`` queues. Each gets the offset of the time
(SEARCH_OFFSET_BY_TIMESTAMP, or GET_MAX_OFFSET for -1) committed with UPDATE_CONSUMER_OFFSET, unless ``force`` is off
and that would move the group forward. Each broker is asked at its master, or while the master is down at a slave
(``BrokerData.selectBrokerAddr``); any failure propagates.
"""

from __future__ import annotations

import attrs

from client.admin import Admin
from client.mqadmin_support import java_mq_hash
from remoting.codec.bodies import MessageQueue
from remoting.codec.bodies.admin import OffsetWrapper
from remoting.codec.codes import RequestCode
from remoting.codec.java_hash_order import java_hash_map_order

__all__ = ["Rollback", "reset_offline"]


@attrs.frozen
class Rollback:
    """One queue of the reset (Java's ``RollbackStats``): its offsets before, the time's offset and the one kept."""

    mq: MessageQueue
    broker_offset: int
    consumer_offset: int
    timestamp_offset: int
    rollback_offset: int


async def reset_offline(admin: Admin, group: str, topic: str, timestamp: int, force: bool) -> list[Rollback]:
    """Reset ``group`` on ``topic`` to ``timestamp`` (ms; -1: the end), queue by queue (see the module docstring)."""
    route = await admin.topic_route(topic)
    out = []
    # Java goes over the route's brokers in its order, each one's queues as the HashMap of its ConsumeStats
    # (offsetTable, filled by fastjson in the answer's order) iterates them, at BrokerData.selectBrokerAddr(): the
    # master, else a slave (common/src/main/java/org/apache/rocketmq/common/protocol/route/BrokerData.java).
    for bd in route.broker_datas:
        qd = next((q for q in route.queue_datas if q.broker_name == bd.broker_name), None)
        addr = bd.select_broker_addr()
        if qd is None or addr is None:
            continue
        stats = await admin.consume_stats(group, broker_addr=addr, sort=False)  # every topic it has offsets for
        keys = list(stats.offset_table)
        in_java_order = (keys[i] for i in java_hash_map_order([java_mq_hash(mq) for mq in keys]))
        queues = {mq: stats.offset_table[mq] for mq in in_java_order if mq.topic == topic}
        if not queues:
            for queue_id in range(qd.read_queue_nums):
                mq = MessageQueue(topic, qd.broker_name, queue_id)
                queues[mq] = await _store_offsets(admin, addr, mq)
        for mq, wrapper in queues.items():
            out.append(await _reset_queue(admin, addr, group, mq, wrapper, timestamp, force))
    return out


async def _store_offsets(admin: Admin, addr: str, mq: MessageQueue) -> OffsetWrapper:
    """A queue the group has no offset in, as Java reads it from the topic's stats: its max offset as the broker's,
    its min offset as the group's."""
    max_offset = await admin.queue_offset(addr, mq, RequestCode.GET_MAX_OFFSET)
    return OffsetWrapper(max_offset, await admin.queue_offset(addr, mq, RequestCode.GET_MIN_OFFSET))


async def _reset_queue(
    admin: Admin, addr: str, group: str, mq: MessageQueue, wrapper: OffsetWrapper, timestamp: int, force: bool
) -> Rollback:
    """Java's ``resetOffsetConsumeOffset``: commit the time's offset unless ``force`` is off and it is ahead."""
    if timestamp == -1:
        target = await admin.queue_offset(addr, mq, RequestCode.GET_MAX_OFFSET)
    else:
        target = await admin.queue_offset(addr, mq, RequestCode.SEARCH_OFFSET_BY_TIMESTAMP, timestamp)
    rollback = wrapper.consumer_offset
    if force or target <= wrapper.consumer_offset:
        rollback = target
        await admin.update_consumer_offset(addr, group, mq, target)
    return Rollback(mq, wrapper.broker_offset, wrapper.consumer_offset, target, rollback)
