"""The less common ``mqadmin`` commands against RocketMQ 4.9.8's tools (tools/src/main/java/org/apache/rocketmq/
tools/command/**), run as the real CLI against the threaded embedded cluster; each test failed on the code before."""

from __future__ import annotations

import json
from pathlib import Path

from click.testing import CliRunner, Result

from client.mqadmin import main as mqadmin
from tests.threaded_cluster import ThreadedCluster


def _run(*args: str) -> Result:
    return CliRunner().invoke(mqadmin, list(args))


# -- exportMetrics --------------------------------------------------------------------------------------------------


def test_export_metrics_reads_cpu_num_from_the_broker_config(cluster: ThreadedCluster, tmp_path: Path) -> None:
    """ExportMetricsCommand.getRuntimeEnv puts ``cpuNum`` = the broker config's ``clientCallbackExecutorThreads``
    (GET_BROKER_CONFIG); ours wrote null."""
    result = _run("exportMetrics", "-n", cluster.namesrv_addr, "-c", "DefaultCluster", "-f", str(tmp_path))
    assert result.exit_code == 0, result.output
    config = _run("getBrokerConfig", "-n", cluster.namesrv_addr, "-b", cluster.broker_addr, "--json")
    threads = next(r["Value"] for r in json.loads(config.output)["rows"] if r["Key"] == "clientCallbackExecutorThreads")
    report = json.loads((tmp_path / "metrics.json").read_text())["evaluateReport"]["broker-a"]
    assert report["runtimeEnv"]["cpuNum"] == threads


def test_export_metrics_of_an_unknown_cluster_fails(cluster: ThreadedCluster, tmp_path: Path) -> None:
    """ExportMetricsCommand iterates ``getClusterAddrTable().get(clusterName)``: for a cluster the name server does
    not know that is null, a NullPointerException, so the command fails and writes no file; ours wrote an empty
    report and said ``export ... success``."""
    result = _run("exportMetrics", "-n", cluster.namesrv_addr, "-c", "NoSuchCluster", "-f", str(tmp_path))
    assert result.exit_code == 1, result.output
    assert "ExportMetricsCommand command failed" in result.stderr
    assert "success" not in result.stdout and not (tmp_path / "metrics.json").exists()
