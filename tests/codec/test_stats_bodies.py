"""Statistics bodies and headers in the exact JSON and extFields Java 4.9.8's admin tools exchange."""

from __future__ import annotations

import pytest

from remoting.codec.bodies import BodyDecodeError, MessageQueue
from remoting.codec.bodies.admin import ConsumeStats, OffsetWrapper
from remoting.codec.bodies.stats import BrokerStatsData, BrokerStatsItem, ConsumeStatsList, GroupList
from remoting.codec.headers import (
    GetConsumeStatsInBrokerHeader,
    QueryTopicConsumeByWhoRequestHeader,
    ViewBrokerStatsDataRequestHeader,
    request_header_class,
)


def test_broker_stats_data_is_fastjsons_sorted_object() -> None:
    data = BrokerStatsData(BrokerStatsItem(300, 5.0, 1.0), BrokerStatsItem(12, 0.02, 2.5), BrokerStatsItem())
    assert data.encode() == (
        b'{"statsDay":{"avgpt":0.0,"sum":0,"tps":0.0},"statsHour":{"avgpt":2.5,"sum":12,"tps":0.02},'
        b'"statsMinute":{"avgpt":1.0,"sum":300,"tps":5.0}}'
    )
    assert BrokerStatsData.decode(data.encode()) == data
    assert data.sum_24_hours() == 12


def test_a_java_broker_stats_body_with_integer_rates_decodes() -> None:
    java = b'{"statsMinute":{"sum":3,"tps":1,"avgpt":1},"statsHour":{"sum":0,"tps":0,"avgpt":0},"statsDay":null}'
    data = BrokerStatsData.decode(java)
    assert data.stats_minute == BrokerStatsItem(3, 1.0, 1.0) and data.stats_day == BrokerStatsItem()
    with pytest.raises(BodyDecodeError):
        BrokerStatsData.decode(b'{"statsMinute":{"sum":"many"}}')


def test_consume_stats_list_keeps_message_queue_keys_and_round_trips() -> None:
    mq = MessageQueue("T", "broker-a", 0)
    stats = ConsumeStatsList("127.0.0.1:10911", (("g", (ConsumeStats({mq: OffsetWrapper(6, 2, 17)}, 1.5),)),), 4)
    assert stats.encode() == (
        b'{"brokerAddr":"127.0.0.1:10911","consumeStatsList":[{"g":[{"consumeTps":1.5,"offsetTable":'
        b'{{"brokerName":"broker-a","queueId":0,"topic":"T"}:{"brokerOffset":6,"consumerOffset":2,'
        b'"lastTimestamp":17}}}]}],"totalDiff":4}'
    )
    assert ConsumeStatsList.decode(stats.encode()) == stats
    for wrong in (
        b'{"consumeStatsList": 5}',
        b'{"totalDiff": "x"}',
        b'{"consumeStatsList": [{"g": [{"consumeTps": []}]}]}',
    ):
        with pytest.raises(BodyDecodeError):
            ConsumeStatsList.decode(wrong)


def test_group_list_and_stats_headers() -> None:
    assert GroupList(("a", "b")).encode() == b'{"groupList":["a","b"]}'
    assert GroupList.decode(b'{"groupList":["x"]}').group_list == ("x",)
    view = ViewBrokerStatsDataRequestHeader.from_ext_fields({"statsName": "TOPIC_PUT_NUMS", "statsKey": "T"})
    assert view.to_ext_fields() == {"statsName": "TOPIC_PUT_NUMS", "statsKey": "T"}
    assert GetConsumeStatsInBrokerHeader.from_ext_fields({"isOrder": "true"}).is_order is True
    assert request_header_class(300) is QueryTopicConsumeByWhoRequestHeader
    assert request_header_class(315) is ViewBrokerStatsDataRequestHeader
