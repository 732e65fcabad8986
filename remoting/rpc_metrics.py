"""RPC latency per request code, RocketMQ 5's ``rocketmq_rpc_latency`` (``RemotingMetricsManager``): the time from
reading a request to writing its response, in whole milliseconds, counted into RocketMQ's buckets (1, 3, 5, 7, 10,
100, 1000, 2000, 3000 ms) per (request code, response code, long polling, result).

The transport records it (:class:`~remoting.connection.Connection` holds an :class:`RpcLatency` when the server was
given one): a request's code and start time are noted by opaque when it is read and looked up when a response with
that opaque is written, whenever and by whoever writes it (a pool worker, a group-commit callback, the hold service).
A oneway request is recorded with result ``oneway`` when its processor returns. ``is_long_polling`` is true for a
pull the hold service parked (Java's ``request.isSuspended()``).

Without an :class:`RpcLatency` (the default: metrics off) the transport does nothing per request. With one, a
request costs two clock reads, a dict insert and pop and one bisect. Single-threaded (the Trio thread); the exporter
reads :meth:`RpcLatency.series` there too. Nothing here raises.
"""

from __future__ import annotations

import bisect
from typing import Final

#: RocketMQ 5's bucket bounds for ``rocketmq_rpc_latency`` (milliseconds, inclusive upper bounds).
RPC_LATENCY_BUCKETS_MS: Final = (1, 3, 5, 7, 10, 100, 1000, 2000, 3000)
RESULT_SUCCESS: Final = "success"
RESULT_ONEWAY: Final = "oneway"
_NS_PER_MS: Final = 1_000_000

#: (request code, response code, long polling, result)
SeriesKey = tuple[int, int, bool, str]


class LatencySeries:
    """One label set's bucket counts (not cumulative; the last one is above 3 s) and sum in ms."""

    __slots__ = ("counts", "sum_ms")

    def __init__(self) -> None:
        self.counts = [0] * (len(RPC_LATENCY_BUCKETS_MS) + 1)
        self.sum_ms = 0


class RpcLatency:
    """All series of one server. See the module docstring."""

    def __init__(self) -> None:
        self.series: dict[SeriesKey, LatencySeries] = {}

    def observe(self, request_code: int, response_code: int, long_polling: bool, result: str, elapsed_ns: int) -> None:
        key = (request_code, response_code, long_polling, result)
        series = self.series.get(key)
        if series is None:
            series = self.series[key] = LatencySeries()
        ms = elapsed_ns // _NS_PER_MS
        series.counts[bisect.bisect_left(RPC_LATENCY_BUCKETS_MS, ms)] += 1
        series.sum_ms += ms

    def snapshot(self) -> list[tuple[SeriesKey, list[int], int]]:
        """A copy of every series: ``(key, bucket counts, sum in ms)``."""
        return [(key, list(s.counts), s.sum_ms) for key, s in self.series.items()]
