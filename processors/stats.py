"""Throughput statistics requests (``mqadmin statsAll`` and ``brokerConsumeStats``): :class:`StatsProcessor` serves

- VIEW_BROKER_STATS_DATA (315): one stats item of :mod:`broker.stats` (``TOPIC_PUT_NUMS`` by topic,
  ``GROUP_GET_NUMS`` / ``GROUP_GET_SIZE`` by ``topic@group``, ``BROKER_PUT_NUMS`` / ``BROKER_GET_NUMS`` by cluster
  name) as a ``BrokerStatsData`` body: sum, rate and average per call over its minute, hour and day windows;
- QUERY_TOPIC_CONSUME_BY_WHO (300): the groups consuming a topic, online subscribers and groups with offsets on it
  (Java's ``queryTopicConsumeByWho``);
- GET_BROKER_CONSUME_STATS (317): for every subscription group, the consume stats of each topic it has offsets on
  (queues up to ``writeQueueNums``, the group's pull rate as ``consumeTps``) and the total lag, as Java's
  ``fetchAllConsumeStatsInBroker`` (``isOrder`` keeps order topics only).

Java's AdminBrokerProcessor answers both on the admin pool. Errors: an unknown statistic or key answers SYSTEM_ERROR
``The stats <name> <key> not exist`` (Java's remark); a missing header field SYSTEM_ERROR naming it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Final

from processors.common import RequestRejected, parse_header
from processors.context import StatsSnapshot
from remoting.codec.bodies import MessageQueue
from remoting.codec.bodies.admin import ConsumeStats, OffsetWrapper
from remoting.codec.bodies.stats import BrokerStatsData, BrokerStatsItem, ConsumeStatsList, GroupList
from remoting.codec.codes import RequestCode, ResponseCode
from remoting.codec.command import RemotingCommand
from remoting.codec.headers import (
    GetConsumeStatsInBrokerHeader,
    QueryTopicConsumeByWhoRequestHeader,
    ViewBrokerStatsDataRequestHeader,
)
from remoting.processor import RequestContext

if TYPE_CHECKING:
    from processors.context import BrokerContext

__all__ = ["StatsProcessor"]


def _item(snapshot: StatsSnapshot) -> BrokerStatsItem:
    return BrokerStatsItem(snapshot.total, snapshot.tps, snapshot.avgpt)


class StatsProcessor:
    """Serves :attr:`REQUEST_CODES`; stateless, reads ``broker`` per request."""

    REQUEST_CODES: Final = (
        RequestCode.VIEW_BROKER_STATS_DATA,
        RequestCode.GET_BROKER_CONSUME_STATS,
        RequestCode.QUERY_TOPIC_CONSUME_BY_WHO,
    )

    def __init__(self, broker: BrokerContext) -> None:
        self.broker = broker

    async def process(self, ctx: RequestContext, request: RemotingCommand) -> RemotingCommand | None:
        try:
            if request.code == RequestCode.VIEW_BROKER_STATS_DATA:
                return self.view_broker_stats_data(request)
            if request.code == RequestCode.GET_BROKER_CONSUME_STATS:
                return self.broker_consume_stats(request)
            if request.code == RequestCode.QUERY_TOPIC_CONSUME_BY_WHO:
                topic = parse_header(QueryTopicConsumeByWhoRequestHeader, request).topic
                groups = set(self.broker.clients.groups_subscribing(topic)) | self.broker.offsets.groups_of_topic(topic)
                return request.response(ResponseCode.SUCCESS, body=GroupList(tuple(sorted(groups))).encode())
        except RequestRejected as rejected:
            return rejected.to_response(request)
        return request.response(ResponseCode.REQUEST_CODE_NOT_SUPPORTED, f" request type {request.code} not supported")

    def view_broker_stats_data(self, request: RemotingCommand) -> RemotingCommand:
        header = parse_header(ViewBrokerStatsDataRequestHeader, request)
        item = self.broker.stats.item(header.stats_name, header.stats_key)
        if item is None:
            remark = f"The stats <{header.stats_name}> <{header.stats_key}> not exist"
            return request.response(ResponseCode.SYSTEM_ERROR, remark)
        body = BrokerStatsData(_item(item.in_minute()), _item(item.in_hour()), _item(item.in_day()))
        return request.response(ResponseCode.SUCCESS, body=body.encode())

    def broker_consume_stats(self, request: RemotingCommand) -> RemotingCommand:
        only_order = parse_header(GetConsumeStatsInBrokerHeader, request).is_order
        broker = self.broker
        store = broker.store
        entries = []
        total_diff = 0
        for group in sorted(broker.groups.groups):
            per_topic = []
            for topic in sorted(broker.offsets.topics_of_group(group)):
                config = broker.topics.get(topic)
                if config is None or (only_order and not config.order):
                    continue
                # Java skips topics an online group does not subscribe to (when it subscribes to anything).
                if broker.clients.not_subscribed(group, topic):
                    continue
                table = {}
                for queue_id in range(config.write_queue_nums):
                    broker_offset = max(0, store.max_offset_in_queue(topic, queue_id))
                    consumer_offset = max(0, broker.offsets.query(group, topic, queue_id))
                    last = 0
                    if consumer_offset > 0:
                        last = max(0, store.message_store_timestamp(topic, queue_id, consumer_offset - 1) or 0)
                    mq = MessageQueue(topic, broker.config.broker_name, queue_id)
                    table[mq] = OffsetWrapper(broker_offset, consumer_offset, last)
                    total_diff += broker_offset - consumer_offset
                per_topic.append(ConsumeStats(table, broker.stats.tps_group_get_nums(group, topic)))
            entries.append((group, tuple(per_topic)))
        body = ConsumeStatsList(broker.broker_addr, tuple(entries), total_diff)
        return request.response(ResponseCode.SUCCESS, body=body.encode())
