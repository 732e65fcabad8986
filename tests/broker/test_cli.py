"""``mqbroker`` and ``python -m broker.embedded`` as real subprocesses: boot lines with the real bound port, requests
answered, clean shutdown on SIGTERM/SIGINT within a bounded time; plus option parsing without a process."""

from __future__ import annotations

import re
import signal
import subprocess
import sys
from pathlib import Path

import pytest
import trio

from broker.broker_config import BrokerConfig
from broker.cli import boot_line, build_config
from broker.embedded import broker_overrides_of
from remoting.client import RemotingClient
from remoting.codec.bodies import TopicRouteData
from remoting.codec.codes import RequestCode, ResponseCode
from remoting.codec.command import request
from remoting.codec.java_properties import PropertiesError

MQBROKER = Path(sys.executable).with_name("mqbroker")
BROKER_BOOT = re.compile(
    rb"The broker\[([^,\]]+), (\S+?):(\d+)\] boot success\. serializeType=JSON and name server is (\S*)\n"
)
NAMESRV_BOOT = re.compile(rb"The Name Server boot success\. serializeType=JSON, address (\S+):(\d+)\n")


def test_config_precedence_file_then_properties_then_namesrv_option(tmp_path: Path) -> None:
    conf = tmp_path / "broker.conf"
    conf.write_text("brokerName=b-file\nlistenPort=10915\nnamesrvAddr=a:1\nflushDiskType=SYNC_FLUSH\n")
    config = build_config(str(conf), ["--brokerName", "b-arg", "--autoCreateTopicEnable=false"], None)
    assert (config.broker_name, config.listen_port, config.namesrv_addr) == ("b-arg", 10915, "a:1")
    assert (config.flush_disk_type, config.auto_create_topic_enable) == ("SYNC_FLUSH", False)
    assert build_config(str(conf), [], "x:1;y:2").namesrv_addrs == ["x:1", "y:2"]
    with pytest.raises(PropertiesError, match="flushDiskType"):
        build_config(None, ["--flushDiskType", "SOMETIMES"], None)
    with pytest.raises(PropertiesError, match="stray"):
        build_config(None, ["stray"], None)


def test_namesrv_addr_falls_back_to_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("NAMESRV_ADDR", "env:1")
    assert build_config(None, [], None).namesrv_addr == "env:1"
    assert build_config(None, ["--namesrvAddr", "prop:1"], None).namesrv_addr == "prop:1"
    assert build_config(None, [], "opt:1").namesrv_addr == "opt:1"


def test_boot_line_is_rocketmqs() -> None:
    """BrokerStartup.start names the name servers only when namesrvAddr is set (found by a review: ours ended with
    "and name server is " and nothing after it)."""
    line = boot_line(BrokerConfig(broker_name="b", namesrv_addr="127.0.0.1:9876"), ("127.0.0.1", 10911))
    assert line == "The broker[b, 127.0.0.1:10911] boot success. serializeType=JSON and name server is 127.0.0.1:9876"
    alone = boot_line(BrokerConfig(broker_name="b"), ("127.0.0.1", 10911))
    assert alone == "The broker[b, 127.0.0.1:10911] boot success. serializeType=JSON"


def test_embedded_takes_broker_properties_as_overrides() -> None:
    assert broker_overrides_of(["--flushDiskType", "SYNC_FLUSH", "--listenPort", "0"]) == {
        "flush_disk_type": "SYNC_FLUSH",
        "listen_port": 0,
    }


def test_embedded_takes_the_java_keys_without_an_equivalent_as_mqbroker_does(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """``python -m broker.embedded --name value`` takes broker properties as ``mqbroker`` does, and RocketMQ 4.9.8's
    BrokerStartup reads every key of BrokerConfig, NettyServerConfig, NettyClientConfig and MessageStoreConfig
    (MixAll.properties2Object). ``mqbroker`` accepted the Java-only ones (docs/architecture.md#settings); the
    embedded cluster still warned "ignoring unknown broker property" for each, as for a typo."""
    args = ["--serverSelectorThreads", "5", "--transientStorePoolEnable", "true", "--clientWorkerThreads", "2"]
    overrides = broker_overrides_of(args)
    assert capsys.readouterr().err == ""
    assert overrides == {"server_selector_threads": 5, "transient_store_pool_enable": True, "client_worker_threads": 2}


async def _read_until(proc: trio.Process, *patterns: re.Pattern[bytes], timeout: float = 60) -> bytes:
    assert proc.stdout is not None
    output = b""
    with trio.fail_after(timeout):
        while not all(p.search(output) for p in patterns):
            chunk = await proc.stdout.receive_some()
            assert chunk, f"process exited before booting: {output!r}"
            output += chunk
    return output


async def _stop(proc: trio.Process, signum: int) -> int:
    proc.send_signal(signum)
    with trio.fail_after(30):
        return await proc.wait()


async def test_mqbroker_subprocess_registers_its_real_port_and_stops_on_sigterm(tmp_path: Path) -> None:
    nameserver = await trio.lowlevel.open_process(
        [str(MQBROKER.with_name("mqnamesrv")), "--listenPort", "0", "--listenHost", "127.0.0.1",
         "--kvConfigPath", str(tmp_path / "kv.json")],
        stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
    )  # fmt: skip
    broker: trio.Process | None = None
    try:
        ns_out = await _read_until(nameserver, NAMESRV_BOOT)
        ns = NAMESRV_BOOT.search(ns_out)
        assert ns is not None
        ns_addr = f"{ns.group(1).decode()}:{int(ns.group(2))}"
        broker = await trio.lowlevel.open_process(
            [str(MQBROKER), "-n", ns_addr, "--listenPort", "0", "--listenHost", "127.0.0.1", "--brokerName", "cli-b",
             "--storePathRootDir", str(tmp_path / "store"), "--flushDiskType", "SYNC_FLUSH",
             "--mappedFileSizeCommitLog", str(1 << 20), "--maxHashSlotNum", "1024", "--maxIndexNum", "4096"],
            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
        )  # fmt: skip
        out = await _read_until(broker, BROKER_BOOT)
        match = BROKER_BOOT.search(out)
        assert match is not None
        assert (match.group(1), match.group(4).decode()) == (b"cli-b", ns_addr)
        port = int(match.group(3))
        assert port != 0
        broker_addr = f"127.0.0.1:{port}"
        async with RemotingClient() as client:
            route = await client.invoke(ns_addr, request(RequestCode.GET_ROUTEINFO_BY_TOPIC, {"topic": "TBW102"}), 10)
            assert route.code == ResponseCode.SUCCESS
            assert TopicRouteData.decode(route.body).broker_datas[0].broker_addrs == {0: broker_addr}
            answer = await client.invoke(broker_addr, request(RequestCode.GET_BROKER_RUNTIME_INFO), 10)
            assert answer.code == ResponseCode.SUCCESS
        assert await _stop(broker, signal.SIGTERM) == 0
        # A clean shutdown saved the config files and removed the abort marker.
        assert (tmp_path / "store" / "config" / "topics.json").exists()
        assert not (tmp_path / "store" / "abort").exists()
        async with RemotingClient() as client:
            gone = await client.invoke(ns_addr, request(RequestCode.GET_ROUTEINFO_BY_TOPIC, {"topic": "TBW102"}), 10)
            assert gone.code == ResponseCode.TOPIC_NOT_EXIST
    finally:
        for proc in (broker, nameserver):
            if proc is not None and proc.returncode is None:
                proc.kill()
                await proc.wait()


async def test_embedded_module_prints_both_boot_lines_and_stops_on_sigint(tmp_path: Path) -> None:
    proc = await trio.lowlevel.open_process(
        [sys.executable, "-m", "broker.embedded", "--data", str(tmp_path / "data"), "--namesrv-port", "0",
         "--listenPort", "0", "--mappedFileSizeCommitLog", str(1 << 20), "--maxHashSlotNum", "1024",
         "--maxIndexNum", "4096"],
        stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
    )  # fmt: skip
    try:
        out = await _read_until(proc, NAMESRV_BOOT, BROKER_BOOT)
        ns, broker = NAMESRV_BOOT.search(out), BROKER_BOOT.search(out)
        assert ns is not None and broker is not None
        ns_addr = f"{ns.group(1).decode()}:{int(ns.group(2))}"
        assert broker.group(4).decode() == ns_addr
        assert int(broker.group(3)) != 0
        async with RemotingClient() as client:
            route = await client.invoke(ns_addr, request(RequestCode.GET_ROUTEINFO_BY_TOPIC, {"topic": "TBW102"}), 10)
            assert route.code == ResponseCode.SUCCESS
        assert await _stop(proc, signal.SIGINT) == 0
        assert (tmp_path / "data" / "broker" / "config" / "topics.json").exists()
    finally:
        if proc.returncode is None:
            proc.kill()
            await proc.wait()


def test_an_empty_namesrv_addr_in_the_config_file_is_not_replaced_by_the_environment(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """BrokerConfig's namesrvAddr defaults to the NAMESRV_ADDR environment variable, then MixAll.properties2Object
    sets every key the file has, an empty ``namesrvAddr=`` too: the file's empty value wins and RocketMQ 5.3.3's
    BrokerStartup (``StringUtils.isNotBlank``) starts the broker without name servers."""
    monkeypatch.setenv("NAMESRV_ADDR", "env:1")
    conf = tmp_path / "broker.conf"
    conf.write_text("brokerName=b\nnamesrvAddr=\n")
    assert build_config(str(conf), [], None).namesrv_addr == ""
    assert build_config(None, ["--namesrvAddr="], None).namesrv_addr == ""
    conf.write_text("brokerName=b\n")
    assert build_config(str(conf), [], None).namesrv_addr == "env:1"


PROXY_BOOT = re.compile(rb"The proxy\[grpcServerPort=(\d+), tlsPort=0\] boot success\.\n")


async def test_embedded_runs_the_proxy_for_enable_proxy_true_as_mqbroker_does(tmp_path: Path) -> None:
    """``enableProxy=true`` among the ``--name value`` properties runs the 5.x proxy, as ``mqbroker --enableProxy true``
    does (:func:`broker.cli.build_proxy_config`) and as ``--enable-proxy`` does. The embedded cluster took the key in
    silence (a proxy key, so not "unknown") and started no proxy."""
    proc = await trio.lowlevel.open_process(
        [sys.executable, "-m", "broker.embedded", "--data", str(tmp_path / "data"), "--namesrv-port", "0",
         "--host", "127.0.0.1", "--brokers", "1", "--listenPort", "0", "--enableProxy", "true",
         "--grpcServerPort", "0", "--mappedFileSizeCommitLog", str(1 << 20), "--maxHashSlotNum", "1024",
         "--maxIndexNum", "4096"],
        stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
    )  # fmt: skip
    try:
        out = await _read_until(proc, NAMESRV_BOOT, BROKER_BOOT)
        assert await _stop(proc, signal.SIGINT) == 0
        assert proc.stdout is not None
        while chunk := await proc.stdout.receive_some():
            out += chunk
        proxy = PROXY_BOOT.search(out)
        assert proxy is not None, out.decode(errors="replace")
        assert int(proxy.group(1)) != 0
    finally:
        if proc.returncode is None:
            proc.kill()
            await proc.wait()
