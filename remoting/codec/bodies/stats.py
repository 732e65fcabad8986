"""Throughput-statistics bodies: VIEW_BROKER_STATS_DATA's ``BrokerStatsData`` and GET_BROKER_CONSUME_STATS'
``ConsumeStatsList``, in the JSON shapes of Java 4.9.8 (sorted keys, as fastjson writes them; the consume stats
inside keep fastjson's MessageQueue-keyed maps, see :mod:`remoting.codec.bodies.admin`). Decoders raise
:class:`~remoting.codec.bodies.BodyDecodeError`.
"""

from __future__ import annotations

from typing import Any

import attrs

from remoting.codec.bodies._json import (
    BodyDecodeError,
    dumps,
    expect_object,
    get_float,
    get_int,
    get_list,
    get_str,
    get_str_list,
    load_object,
)
from remoting.codec.bodies.admin import ConsumeStats, loads_fastjson

__all__ = ["BrokerStatsData", "BrokerStatsItem", "ConsumeStatsList", "GroupList"]


@attrs.frozen
class GroupList:
    """QUERY_TOPIC_CONSUME_BY_WHO body: ``{"groupList": [...]}`` (a set in Java; sorted here)."""

    group_list: tuple[str, ...] = ()

    def encode(self) -> bytes:
        return dumps({"groupList": list(self.group_list)})

    @classmethod
    def decode(cls, data: bytes | memoryview) -> GroupList:
        return cls(tuple(get_str_list(load_object(data, "GroupList"), "groupList")))


@attrs.frozen
class BrokerStatsItem:
    """One window of a stats item: ``sum`` added in it, ``tps`` per second, ``avgpt`` per call."""

    sum: int = 0
    tps: float = 0.0
    avgpt: float = 0.0

    def to_json(self) -> dict[str, Any]:
        return {"avgpt": self.avgpt, "sum": self.sum, "tps": self.tps}

    @classmethod
    def from_json(cls, obj: object) -> BrokerStatsItem:
        o = expect_object(obj or {}, "BrokerStatsItem")
        return cls(get_int(o, "sum"), get_float(o, "tps"), get_float(o, "avgpt"))


@attrs.frozen
class BrokerStatsData:
    """VIEW_BROKER_STATS_DATA body: the item's minute, hour and day windows."""

    stats_minute: BrokerStatsItem = BrokerStatsItem()
    stats_hour: BrokerStatsItem = BrokerStatsItem()
    stats_day: BrokerStatsItem = BrokerStatsItem()

    def encode(self) -> bytes:
        return dumps(
            {
                "statsDay": self.stats_day.to_json(),
                "statsHour": self.stats_hour.to_json(),
                "statsMinute": self.stats_minute.to_json(),
            }
        )

    @classmethod
    def decode(cls, data: bytes | memoryview) -> BrokerStatsData:
        o = load_object(data, "BrokerStatsData")
        return cls(
            BrokerStatsItem.from_json(o.get("statsMinute")),
            BrokerStatsItem.from_json(o.get("statsHour")),
            BrokerStatsItem.from_json(o.get("statsDay")),
        )

    def sum_24_hours(self) -> int:
        """Java's ``StatsAllSubCommand.compute24HourSum``: the day sum, else the hour's, else the minute's."""
        for item in (self.stats_day, self.stats_hour, self.stats_minute):
            if item.sum:
                return item.sum
        return 0


@attrs.frozen
class ConsumeStatsList:
    """GET_BROKER_CONSUME_STATS body: per subscription group, the consume stats of each topic it has offsets on,
    and the total lag (``totalDiff``) on this broker."""

    broker_addr: str = ""
    consume_stats_list: tuple[tuple[str, tuple[ConsumeStats, ...]], ...] = ()
    total_diff: int = 0

    def encode(self) -> bytes:
        groups = [
            b"{" + dumps(group) + b":[" + b",".join(s.encode() for s in stats) + b"]}"
            for group, stats in self.consume_stats_list
        ]
        return (
            b'{"brokerAddr":'
            + dumps(self.broker_addr)
            + b',"consumeStatsList":['
            + b",".join(groups)
            + b'],"totalDiff":'
            + dumps(self.total_diff)
            + b"}"
        )

    @classmethod
    def decode(cls, data: bytes | memoryview) -> ConsumeStatsList:
        root = expect_object(loads_fastjson(data), "ConsumeStatsList")
        entries: list[tuple[str, tuple[ConsumeStats, ...]]] = []
        for element in get_list(root, "consumeStatsList"):
            for group, stats in expect_object(element, "consumeStatsList entry").items():
                if not isinstance(group, str) or not isinstance(stats, list):
                    raise BodyDecodeError("consumeStatsList entries map a group to a list")
                entries.append((group, tuple(ConsumeStats.from_json(s) for s in stats)))
        return cls(get_str(root, "brokerAddr") or "", tuple(entries), get_int(root, "totalDiff"))
