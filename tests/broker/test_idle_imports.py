"""What `python -m broker.embedded` imports with RocketMQ's defaults: none of the modules of the features those
defaults leave off (the Prometheus exporter, DLedger, ACL and its YAML files), nor the CBOR header codec, which only
a client asking for it uses, so an idle broker does not carry their code (docs/PERFORMANCE.md, idle RSS). A real
process: the child runs the module as `python -m` does, serves a real request, and prints its ``sys.modules`` at
exit, after a clean SIGTERM shutdown; so a module imported by the start, the request or the shutdown counts. Small
store files (``SMALL``) change no feature. Failed before each was imported at its first use."""

from __future__ import annotations

import sys
from collections.abc import Callable
from pathlib import Path

import pytest
import trio

from remoting.client import RemotingClient
from remoting.codec.codes import RequestCode, ResponseCode
from remoting.codec.command import request
from tests.e2e.harness import Process, kill_all

SMALL = ["--mappedFileSizeCommitLog", str(1 << 20), "--maxHashSlotNum", "1024", "--maxIndexNum", "4096"]

#: Runs ``broker.embedded`` as ``python -m`` would (its ``__main__``, the command line's arguments), printing every
#: loaded module's name on one line when the process exits.
CHILD = (
    "import atexit, runpy, sys\n"
    "atexit.register(lambda: print('MODULES', *sorted(sys.modules), flush=True))\n"
    "runpy.run_module('broker.embedded', run_name='__main__', alter_sys=True)\n"
)

#: Packages (and modules) of features off by default, each with what needs it (the setting that turns it on).
OFF_BY_DEFAULT = {
    "prometheus_client": "metricsExporterType=PROM",
    "http.server": "metricsExporterType=PROM (prometheus-client's HTTP server)",
    "remoting.prometheus": "metricsExporterType=PROM",
    "broker.metrics": "metricsExporterType=PROM",
    "dledger": "enableDLegerCommitLog=true",
    "broker.dledger_mode": "enableDLegerCommitLog=true",
    "yaml": "aclEnable=true",
    "broker.acl.manager": "aclEnable=true",
    "cbor2": "a request with a CBOR header (serialize type 0xCB, rocketrio's own; RocketMQ's clients never send one)",
}


def loaded(modules: set[str], name: str) -> bool:
    """Whether ``name`` or a submodule of it is among ``modules``."""
    return name in modules or any(module.startswith(name + ".") for module in modules)


async def modules_of_embedded(tmp_path: Path, *settings: str) -> set[str]:
    """Start ``python -m broker.embedded`` (port 0, data under ``tmp_path``, ``settings`` appended), ask its broker
    for its runtime info, stop it with SIGTERM and return the modules it had loaded."""
    argv = [sys.executable, "-c", CHILD, "--data", str(tmp_path / "data"), "--brokers", "1",
            "--namesrv-port", "0", "--listenPort", "0", *SMALL, *settings]  # fmt: skip
    proc = Process("embedded", argv, tmp_path / "embedded.log")
    try:
        async with trio.open_nursery() as nursery:
            await proc.start(nursery)
            await proc.wait_until(lambda: any(line.startswith("The broker[") for line in proc.lines), 90, "boot line")
            boot = next(line for line in proc.lines if line.startswith("The broker["))
            address = boot.split(", ", 1)[1].split("]", 1)[0]
            async with RemotingClient() as client:
                answer = await client.invoke(address, request(RequestCode.GET_BROKER_RUNTIME_INFO), 10)
            assert answer.code == ResponseCode.SUCCESS
            proc.terminate()
            assert await proc.wait_exit(90) == 0, proc.context()
    finally:
        await kill_all()
    line = next((line for line in proc.lines if line.startswith("MODULES ")), None)
    assert line is not None, f"no module list printed at exit{proc.context()}"
    return set(line.split()[1:])


async def test_an_idle_default_broker_imports_no_module_of_a_feature_that_is_off(tmp_path: Path) -> None:
    modules = await modules_of_embedded(tmp_path)
    assert "broker.controller" in modules and "namesrv.server" in modules  # the probe sees the servers' modules
    wrongly = {name: setting for name, setting in OFF_BY_DEFAULT.items() if loaded(modules, name)}
    assert not wrongly, f"imported although off by default (module: the setting that needs it): {wrongly}"


def metrics_on(_tmp_path: Path) -> list[str]:
    return ["--metricsExporterType", "PROM", "--metricsPromExporterPort", "0"]


def acl_on(tmp_path: Path) -> list[str]:
    """ACL over a RocketMQ home whose ``plain_acl.yml`` white-lists 127.0.0.1 (the probe's request is admitted)."""
    home = tmp_path / "rocketmq-home"
    (home / "conf").mkdir(parents=True)
    (home / "conf" / "plain_acl.yml").write_text("globalWhiteRemoteAddresses:\n  - 127.0.0.1\n")
    return ["--aclEnable", "true", "--rocketmqHome", str(home)]


@pytest.mark.parametrize(
    ("settings_of", "needed"),
    [(metrics_on, ("prometheus_client", "broker.metrics")), (acl_on, ("yaml", "broker.acl.manager"))],
    ids=["metrics", "acl"],
)
async def test_a_feature_turned_on_imports_its_modules(
    tmp_path: Path, settings_of: Callable[[Path], list[str]], needed: tuple[str, ...]
) -> None:
    """The control: the same probe sees a feature's modules once its setting turns it on."""
    modules = await modules_of_embedded(tmp_path, *settings_of(tmp_path))
    assert all(loaded(modules, name) for name in needed), [name for name in needed if not loaded(modules, name)]


async def test_a_broker_running_the_proxy_with_metrics_off_imports_no_exporter(tmp_path: Path) -> None:
    """``--enable-proxy`` loads grpcio and the proxy's modules, but with ``metricsExporterType`` off nothing serves
    ``/metrics``, so prometheus-client and the exporter's modules stay out, as in a broker without the proxy (RocketMQ
    5.3.3's ProxyMetricsManager registers ``rocketmq_proxy_up`` only on a meter the exporter setting turns on). Failed
    before: ``proxy.startup`` imported prometheus-client at its top for that gauge."""
    modules = await modules_of_embedded(tmp_path, "--enable-proxy", "--grpcServerPort", "0")
    assert loaded(modules, "grpc") and "proxy.startup" in modules  # the probe sees the proxy running
    wrongly = {name: setting for name, setting in OFF_BY_DEFAULT.items() if loaded(modules, name)}
    assert not wrongly, f"imported although off by default (module: the setting that needs it): {wrongly}"
