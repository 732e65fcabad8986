"""The broker's ``/metrics`` (RocketMQ 5's ``metricsExporterType=PROM``): :func:`broker_exporter` builds the
:class:`~remoting.prometheus.PrometheusExporter` the controller runs, serving the broker's families
(:mod:`broker.metrics.families`, from a :mod:`broker.metrics.snapshot` taken at scrape time) and the transport's
``rocketmq_rpc_latency_milliseconds`` (:mod:`remoting.rpc_metrics`), all labelled ``cluster``, ``node_type=broker``,
``node_id`` (the broker name), the ``metricsLabel`` pairs and, with ``metricsInDelta``, ``aggregation="delta"``,
on ``metricsPromExporterHost`` (default ``brokerIP1``) and ``metricsPromExporterPort`` (default 5557; 0 picks a free
port)."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from typing import TYPE_CHECKING

from prometheus_client.core import Metric

from broker.metrics.families import broker_families
from broker.metrics.snapshot import PopGaugeReader, TimerGauges, take_snapshot
from remoting.dispatch import ProcessorPool
from remoting.prometheus import PrometheusExporter, metrics_labels, rpc_latency_source
from remoting.rpc_metrics import RpcLatency

if TYPE_CHECKING:
    from broker.context import BrokerState

__all__ = ["broker_exporter"]


def broker_exporter(
    state: BrokerState,
    pools: Mapping[str, ProcessorPool],
    rpc_latency: RpcLatency | None,
    timer_gauges: TimerGauges | None = None,
    pop_gauges: PopGaugeReader | None = None,
) -> PrometheusExporter | None:
    """The exporter, or ``None`` without an RPC recorder (the controller makes one only when
    :func:`~remoting.rpc_metrics.prometheus_wanted` says the settings ask for ``/metrics``); ``timer_gauges`` reads
    the timer's gauges, ``pop_gauges`` the pop service's."""
    config = state.config
    if rpc_latency is None:
        return None
    labels = metrics_labels("broker", config.broker_name, config.broker_cluster_name, config.metrics_label)
    if config.metrics_in_delta:
        # broker/src/main/java/org/apache/rocketmq/broker/metrics/BrokerMetricsManager.java ``init``: put into the
        # label map after the metricsLabel pairs, so it replaces one named ``aggregation``.
        labels["aggregation"] = "delta"

    def broker_source() -> Callable[[], Iterable[Metric]]:
        snapshot = take_snapshot(state, pools, timer_gauges, pop_gauges)
        return lambda: broker_families(snapshot, labels)

    host = config.metrics_prom_exporter_host or config.broker_ip1
    sources = [broker_source, rpc_latency_source(rpc_latency, labels)]
    return PrometheusExporter(host, config.metrics_prom_exporter_port, sources)
