"""The local proxy's gauge on the broker's ``/metrics``: imported by :func:`proxy.startup.serve_proxy` only when the
broker serves that exporter (``metricsExporterType``), so a proxy without metrics never loads prometheus-client."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator

from prometheus_client.core import GaugeMetricFamily, Metric

from proxy.config import ProxyConfig
from remoting.prometheus import Source, metrics_labels

__all__ = ["proxy_up_source"]


def proxy_up_source(config: ProxyConfig, metrics_label: str, in_delta: bool = False) -> Source:
    """``rocketmq_proxy_up`` (always 1) as RocketMQ 5.3.3's local proxy registers it on the broker's meter
    (proxy/src/main/java/org/apache/rocketmq/proxy/metrics/ProxyMetricsManager.java ``initLocalMode``): the broker's
    labels (its ``metricsLabel`` pairs and, ``in_delta`` (``metricsInDelta``), ``aggregation="delta"``), with
    ``cluster``, ``node_type``, ``node_id`` and ``proxy_mode`` the proxy's."""
    labels = metrics_labels("proxy", config.proxy_name, config.proxy_cluster_name, metrics_label)
    if in_delta:
        labels["aggregation"] = "delta"
    labels["proxy_mode"] = "local"

    def snapshot() -> Callable[[], Iterable[Metric]]:
        def families() -> Iterator[Metric]:
            up = GaugeMetricFamily("rocketmq_proxy_up", "proxy status", labels=list(labels))
            up.add_metric(list(labels.values()), 1)
            yield up

        return families

    return snapshot
