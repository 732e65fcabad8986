"""RPC latency per request code, RocketMQ 5's ``rocketmq_rpc_latency`` (``RemotingMetricsManager``): the time from
reading a request to writing its response, in whole milliseconds, counted into RocketMQ's buckets (1, 3, 5, 7, 10,
100, 1000, 2000, 3000 ms) per (request code, response code, long polling, result).

The transport records it (:class:`~remoting.connection.Connection` holds an :class:`RpcLatency` when the server was
given one): a request's code and start time are noted by opaque when it is read and looked up when a response with
that opaque is written, whenever and by whoever writes it (a pool worker, a group-commit callback, the hold service).
A oneway request is recorded with result ``oneway`` when its processor returns a response (one that returns none
is not recorded, as RocketMQ 5.3.3's ``NettyRemotingAbstract.writeResponse``). ``is_long_polling`` is true for a
pull the hold service parked (Java's ``request.isSuspended()``).

At most ``cardinality_limit`` series are kept, the overflow series included (``metricsOtelCardinalityLimit``,
50,000 by default, as RocketMQ 5.3's
``broker/src/main/java/org/apache/rocketmq/broker/metrics/BrokerMetricsManager.java`` sets it on every view): past
``cardinality_limit - 1`` label sets, a request whose labels would make one more is counted in a single overflow
series instead, as OpenTelemetry 1.29's SDK does (exported with the one label ``otel_metric_overflow="true"``), so a
client sending ever new request codes cannot grow the table without bound.

Without an :class:`RpcLatency` (the default: metrics off) the transport does nothing per request. With one, a
request costs two clock reads, a dict insert and pop and one bisect. Single-threaded (the Trio thread); the exporter
reads :meth:`RpcLatency.series` there too. Nothing here raises. :func:`prometheus_wanted` reads the setting that
decides whether a server makes one, here and not in :mod:`remoting.prometheus`, which is imported only then.
"""

from __future__ import annotations

import bisect
import logging
from typing import Final

log = logging.getLogger(__name__)

#: RocketMQ 5's bucket bounds for ``rocketmq_rpc_latency`` (milliseconds, inclusive upper bounds).
RPC_LATENCY_BUCKETS_MS: Final = (1, 3, 5, 7, 10, 100, 1000, 2000, 3000)
RESULT_SUCCESS: Final = "success"
RESULT_ONEWAY: Final = "oneway"
_NS_PER_MS: Final = 1_000_000

#: RocketMQ 5.3's default ``metricsOtelCardinalityLimit``.
DEFAULT_CARDINALITY_LIMIT: Final = 50_000

#: ``MetricsExporterType`` by number (Java's setter takes the number or the name).
_EXPORTER_TYPES = {"0": "DISABLE", "1": "OTLP_GRPC", "2": "PROM", "3": "LOG"}


def prometheus_wanted(exporter_type: str) -> bool:
    """Whether RocketMQ 5's ``metricsExporterType`` setting (``PROM`` or ``2``) asks for ``/metrics``. The other
    exporters (``OTLP_GRPC``, ``LOG``) are not implemented: asking for one is logged and exports nothing."""
    name = _EXPORTER_TYPES.get(exporter_type.strip(), exporter_type.strip().upper())
    if name in ("OTLP_GRPC", "LOG"):
        log.warning("metricsExporterType %s is not supported; only PROM is: no metrics are exported", name)
    elif name not in ("PROM", "DISABLE"):
        log.warning("unknown metricsExporterType %r: no metrics are exported", exporter_type)
    return name == "PROM"


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

    def __init__(self, cardinality_limit: int = DEFAULT_CARDINALITY_LIMIT) -> None:
        self.series: dict[SeriesKey, LatencySeries] = {}
        self.cardinality_limit = cardinality_limit
        #: Requests whose series would have passed the limit (``None`` until one did).
        self.overflow: LatencySeries | None = None

    def observe(self, request_code: int, response_code: int, long_polling: bool, result: str, elapsed_ns: int) -> None:
        key = (request_code, response_code, long_polling, result)
        series = self.series.get(key)
        if series is None:
            if len(self.series) < self.cardinality_limit - 1:
                series = self.series[key] = LatencySeries()
            else:
                series = self.overflow
                if series is None:
                    log.warning("rocketmq_rpc_latency passed %d series: more go to the overflow one", len(self.series))
                    series = self.overflow = LatencySeries()
        ms = elapsed_ns // _NS_PER_MS
        series.counts[bisect.bisect_left(RPC_LATENCY_BUCKETS_MS, ms)] += 1
        series.sum_ms += ms

    def snapshot(self) -> list[tuple[SeriesKey, list[int], int]]:
        """A copy of every series: ``(key, bucket counts, sum in ms)``; the overflow series is not among them."""
        return [(key, list(s.counts), s.sum_ms) for key, s in self.series.items()]

    def overflow_snapshot(self) -> tuple[list[int], int] | None:
        """A copy of the overflow series' bucket counts and sum in ms, ``None`` while nothing overflowed."""
        overflow = self.overflow
        return None if overflow is None else (list(overflow.counts), overflow.sum_ms)
