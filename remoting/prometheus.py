"""``/metrics`` in Prometheus text, served beside the Trio loop (RocketMQ 5's ``metricsExporterType=PROM``).

Why this shape: prometheus-client's threaded HTTP server (its ``start_http_server``'s, which also knows its open
connections here, to close them when it stops) runs in daemon threads, so a
scrape never runs on the event loop; the only loop time it costs is a snapshot. Each :data:`Source` is called on the
Trio thread (through ``trio.from_thread.run_sync``), copies the numbers it needs from the live tables and returns a
function that builds the metric families from that copy in the HTTP thread, where prometheus-client also formats the
text. Nothing is updated per message for ``/metrics``: the families are built at scrape time from statistics the
server keeps anyway. (Hypercorn on Trio would have put the formatting, the expensive part with thousands of series,
on the loop itself.)

:class:`PrometheusExporter` owns the HTTP server: ``await nursery.start(exporter.run)`` binds ``host:port`` (port 0
picks one) and reports the bound address; cancelling it shuts the server down (in a worker thread, shielded, so the
port is free when ``run`` returns). A scrape arriving after the loop ended gets HTTP 500. Errors: ``OSError`` before
``started`` when the port cannot be bound.

:func:`rpc_latency_source` exports a :class:`~remoting.rpc_metrics.RpcLatency` as RocketMQ 5's
``rocketmq_rpc_latency_milliseconds`` histogram; :func:`metrics_labels` builds the labels every family of a server
carries.

Imported only when ``metricsExporterType`` asks for ``/metrics`` (:func:`~remoting.rpc_metrics.prometheus_wanted`):
prometheus-client and the standard library's HTTP server it loads are about 3 MB of an idle server's memory.
"""

from __future__ import annotations

import contextlib
import itertools
import logging
import math
import socket
import threading
import time
from collections.abc import Callable, Iterable, Iterator
from typing import Any
from wsgiref.simple_server import WSGIRequestHandler, make_server

import trio
from prometheus_client import make_wsgi_app
from prometheus_client.core import HistogramMetricFamily, InfoMetricFamily, Metric
from prometheus_client.exposition import ThreadingWSGIServer
from prometheus_client.registry import Collector, CollectorRegistry

from remoting.codec.codes import ResponseCode, request_name
from remoting.connection import Address
from remoting.rpc_metrics import RPC_LATENCY_BUCKETS_MS, RpcLatency

__all__ = [
    "BROKER_SCOPE",
    "NAMESRV_SCOPE",
    "OVERFLOW_LABEL",
    "PrometheusExporter",
    "Source",
    "histogram_buckets",
    "metrics_labels",
    "rpc_latency_source",
]

log = logging.getLogger(__name__)

#: Called on the Trio thread; the function it returns builds the families in the HTTP thread.
Source = Callable[[], Callable[[], Iterable[Metric]]]

#: ``response_code`` labels: RemotingHelper.getResponseCodeDesc, the lower-cased name of 5.3.3's ResponseCode field of
#: that number (remoting/src/main/java/org/apache/rocketmq/remoting/common/RemotingHelper.java). 209-211 are 4.x's ACL
#: failures in our enum, which 5.3.3 no longer has: there they are POLLING_FULL, POLLING_TIMEOUT, BROKER_NOT_EXIST.
_RESPONSE_NAMES = {code.value: code.name.lower() for code in ResponseCode} | {
    ResponseCode.POLLING_FULL.value: "polling_full",
    ResponseCode.POLLING_TIMEOUT.value: "polling_timeout",
    211: "broker_not_exist",
}
#: The OpenTelemetry meter (instrumentation scope) RocketMQ 5.3.3's broker registers every instrument on, the local
#: proxy's and the store's included (``BrokerMetricsConstant.OPEN_TELEMETRY_METER_NAME``).
BROKER_SCOPE = "broker-meter"
#: Ours: Java's name server has no metrics.
NAMESRV_SCOPE = "namesrv-meter"
#: The label OpenTelemetry 1.29's Prometheus exporter writes the scope's name in, first on every sample.
SCOPE_LABEL = "otel_scope_name"
#: The label of OpenTelemetry's overflow series (``otel.metric.overflow`` in Prometheus' spelling).
OVERFLOW_LABEL = "otel_metric_overflow"
#: ``rocketmq_rpc_latency`` as RocketMQ 5.3.3 serves it: its unit appended by OpenTelemetry's Prometheus exporter.
RPC_LATENCY_FAMILY = "rocketmq_rpc_latency_milliseconds"


def metrics_labels(node_type: str, node_id: str, cluster: str | None, extra: str) -> dict[str, str]:
    """RocketMQ 5's common labels: ``cluster`` (brokers), ``node_type``, ``node_id``, then the ``metricsLabel``
    setting's ``key:value`` pairs (comma separated; a malformed pair is logged and skipped, as Java does). A pair
    naming a label set before it is ignored: those always carry the server's own values, as in 5.3.3's
    ``broker/.../metrics/BrokerMetricsManager.java`` ``init``, which puts them into its label map last."""
    labels = {} if cluster is None else {"cluster": cluster}
    labels.update(node_type=node_type, node_id=node_id)
    own = set(labels)
    for item in filter(None, extra.split(",")):
        key, sep, value = item.partition(":")
        if not sep or ":" in value or not key:
            log.warning("metricsLabel is not valid: %s", extra)
            continue
        if key not in own:
            labels[key] = value
    return labels


def histogram_buckets(bounds: Iterable[float], counts: Iterable[int]) -> list[tuple[str, float]]:
    """Per-bucket counts (the last one above every bound) as cumulative ``(le, count)`` pairs ending in ``+Inf``."""
    les = [repr(float(b)) if math.isfinite(b) else "+Inf" for b in bounds] + ["+Inf"]
    return list(zip(les, itertools.accumulate(counts), strict=True))


def rpc_latency_source(recorder: RpcLatency, labels: dict[str, str]) -> Source:
    """``rocketmq_rpc_latency_milliseconds`` by ``protocol_type``, ``request_code`` and ``response_code`` (Java's
    lowercase names, or the number), ``is_long_polling`` and ``result``. RocketMQ 5.3.3's instrument is
    ``rocketmq_rpc_latency`` with unit ``milliseconds``
    (remoting/src/main/java/org/apache/rocketmq/remoting/metrics/RemotingMetricsManager.java); the OpenTelemetry 1.29
    Prometheus exporter it ships appends the unit to the name."""
    names = [*labels, "protocol_type", "request_code", "response_code", "is_long_polling", "result"]
    fixed = list(labels.values())

    def snapshot() -> Callable[[], Iterable[Metric]]:
        series = recorder.snapshot()
        overflow = recorder.overflow_snapshot()

        def families() -> Iterator[Metric]:
            family = HistogramMetricFamily(RPC_LATENCY_FAMILY, "Rpc latency", labels=names)
            for (code, response, polling, result), counts, sum_ms in series:
                values = [request_name(code).lower(), _RESPONSE_NAMES.get(response, str(response))]
                family.add_metric(
                    [*fixed, "remoting", *values, "true" if polling else "false", result],
                    histogram_buckets(RPC_LATENCY_BUCKETS_MS, counts),
                    float(sum_ms),
                )
            if overflow is not None:
                # OpenTelemetry's overflow series carries its one attribute and none of the others.
                extra = HistogramMetricFamily(family.name, family.documentation, labels=[OVERFLOW_LABEL])
                extra.add_metric(["true"], histogram_buckets(RPC_LATENCY_BUCKETS_MS, overflow[0]), float(overflow[1]))
                family.samples.extend(extra.samples)
            yield family

        return families

    return snapshot


def _scoped(family: Metric, scope: str) -> Metric:
    family.samples = [s._replace(labels={SCOPE_LABEL: scope, **s.labels}) for s in family.samples]
    return family


class _Bridge(Collector):
    """The registry's one collector: snapshots every source on the Trio thread, then builds their families here. As
    OpenTelemetry 1.29's Prometheus exporter (exporters/prometheus/.../Serializer.java, which RocketMQ 5.3.3 ships)
    writes them: ``target_info`` (an empty resource: ``BrokerMetricsManager`` sets ``Resource.empty()``), one
    ``otel_scope_info`` line and ``otel_scope_name`` first on every sample."""

    def __init__(self, token: trio.lowlevel.TrioToken, sources: list[Source], scope: str) -> None:
        self._token = token
        self._sources = sources
        self._scope = scope

    def describe(self) -> Iterable[Metric]:
        return ()  # families are only known at scrape time; nothing to check at registration

    def _snapshot(self) -> list[Callable[[], Iterable[Metric]]]:
        return [source() for source in self._sources]

    def collect(self) -> Iterable[Metric]:
        builds = trio.from_thread.run_sync(self._snapshot, trio_token=self._token)
        yield InfoMetricFamily("target", "Target metadata", value={})
        yield InfoMetricFamily("otel_scope", "Scope metadata", value={SCOPE_LABEL: self._scope})
        for build in builds:
            for family in build():
                yield _scoped(family, self._scope)


#: Seconds a connection may take to send its request (and to read the answer) before it is closed. Ours: without
#: it, each connection that sends nothing held a server thread for as long as it stayed open, so a few thousand idle
#: connections took as many threads; a Prometheus scrape sends its request at once. It bounds the whole connection,
#: not each read: the server's loop closes one open longer (:meth:`_HttpServer.service_actions`), so a client that
#: trickles its request a byte at a time cannot keep its thread either.
READ_TIMEOUT_S = 30.0


class _QuietHandler(WSGIRequestHandler):
    """One request per connection (HTTP/1.0), nothing logged per request; the server bounds each connection's life
    by :data:`READ_TIMEOUT_S`."""

    def log_message(self, format: str, *args: Any) -> None:
        pass


class _HttpServer(ThreadingWSGIServer):
    """prometheus-client's thread-per-connection server that also knows its open connections, so that stopping it
    closes them: a client that sent half a request (or nothing) would otherwise keep a thread blocked reading it
    and the socket open after the exporter stopped. RocketMQ 5 stops OpenTelemetry's PrometheusHttpServer, which
    closes its connections, in ``broker/src/main/java/org/apache/rocketmq/broker/metrics/BrokerMetricsManager.java``
    ``shutdown``."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        self._lock = threading.Lock()
        self._open: dict[socket.socket, float] = {}  # connection -> its deadline (time.monotonic())
        self._closing = False
        super().__init__(*args, **kwargs)

    def process_request(self, request: Any, client_address: Any) -> None:
        with self._lock:
            if self._closing:
                self.shutdown_request(request)
                return
            self._open[request] = time.monotonic() + READ_TIMEOUT_S
        super().process_request(request, client_address)

    def shutdown_request(self, request: Any) -> None:
        with self._lock:
            self._open.pop(request, None)
        super().shutdown_request(request)

    def service_actions(self) -> None:
        """Run by ``serve_forever`` between polls (every 0.5 s): wake the threads of connections open past their
        deadline (:data:`READ_TIMEOUT_S`), whatever they sent meanwhile; their reads end and they close."""
        now = time.monotonic()
        with self._lock:
            late = [connection for connection, deadline in self._open.items() if deadline <= now]
        _shut(late)

    def close_connections(self) -> None:
        """Wake every connection's thread: its reads end and it closes the connection."""
        with self._lock:
            self._closing = True
            connections = list(self._open)
        _shut(connections)


def _shut(connections: Iterable[socket.socket]) -> None:
    for connection in connections:
        with contextlib.suppress(OSError):
            connection.shutdown(socket.SHUT_RDWR)


class PrometheusExporter:
    """Serves ``sources`` at ``http://host:port/metrics``. See the module docstring."""

    def __init__(self, host: str, port: int, sources: list[Source], scope: str = BROKER_SCOPE) -> None:
        self.host = host
        self.port = port
        self.sources = sources
        self.scope = scope
        self.address: Address | None = None

    async def run(self, *, task_status: trio.TaskStatus[Address] = trio.TASK_STATUS_IGNORED) -> None:
        registry = CollectorRegistry(auto_describe=False)
        registry.register(_Bridge(trio.lowlevel.current_trio_token(), self.sources, self.scope))
        # The address family of the host, as prometheus-client's start_http_server picks it (IPv6 hosts too).
        family, _, _, _, sockaddr = socket.getaddrinfo(
            self.host, self.port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE
        )[0]
        server_class: type[_HttpServer] = type("_Server", (_HttpServer,), {"address_family": family})
        app = make_wsgi_app(registry)
        server: _HttpServer = make_server(str(sockaddr[0]), self.port, app, server_class, _QuietHandler)
        thread = threading.Thread(target=server.serve_forever, name="metrics-http", daemon=True)
        thread.start()
        try:
            host, port = server.server_address[:2]
            self.address = (str(host), int(port))
            log.info("metrics served at http://%s:%d/metrics", host, port)
            task_status.started(self.address)
            await trio.sleep_forever()
        finally:
            with trio.CancelScope(shield=True):
                await trio.to_thread.run_sync(server.shutdown)
                server.server_close()
                server.close_connections()
                await trio.to_thread.run_sync(thread.join)
