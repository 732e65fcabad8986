"""broker.conf files that must keep starting the broker they always started (found by a review of the strict
properties reader; each failed on it): a Java ``long`` proxy setting past an int, blanks after an enum, a name or a
name server address (ignored, ours: Java keeps or refuses them), a UTF-8 file with a non-ASCII store path (read as
UTF-8, ours: Java would garble it). Each test starts a real ``python -m broker.cli -c FILE`` process
(tests/e2e/harness.py's Process) and waits for its boot line or its exit."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
import trio

from broker.cli import build_config, build_proxy_config
from broker.embedded import broker_overrides_of
from remoting.codec.java_properties import PropertiesError
from tests.e2e.harness import Process, ScenarioError, kill_all

SMALL = ["--mappedFileSizeCommitLog", str(1 << 20), "--maxHashSlotNum", "1024", "--maxIndexNum", "4096"]
BOOT = " boot success. serializeType=JSON"


async def _start(tmp_path: Path, conf_bytes: bytes, *args: str) -> tuple[Process, int | None]:
    """Start mqbroker with ``conf_bytes`` as its -c file; returns the process and its exit status (None: it printed
    its boot line, and was then stopped)."""
    conf = tmp_path / "broker.conf"
    conf.write_bytes(conf_bytes)
    argv = [sys.executable, "-m", "broker.cli", "-c", str(conf), "--listenPort", "0", "--listenHost", "127.0.0.1",
            *SMALL, *args]  # fmt: skip
    proc = Process("broker", argv, tmp_path / "broker.log")
    status: int | None = None
    try:
        async with trio.open_nursery() as nursery:
            await proc.start(nursery)
            try:
                await proc.wait_until(lambda: any(BOOT in line for line in proc.lines), 90, "boot line")
            except ScenarioError:
                status = await proc.wait_exit(30)
            proc.terminate()
            if await proc.wait_exit(30) is None:
                proc.kill()
    finally:
        await kill_all()
    return proc, status


def _stderr(tmp_path: Path) -> str:
    return (tmp_path / "broker.log").read_text(errors="replace")[-800:]


async def test_a_java_long_proxy_setting_past_int_range_still_starts_the_broker(tmp_path: Path) -> None:
    """ProxyConfig's *Mills/*Millis/*Second settings are Java ``long`` (proxy/.../config/ProxyConfig.java, 5.3.3:
    ``private long maxDelayTimeMills``): 30 days of maxDelayTimeMills (2592000000) must boot the broker (the proxy's
    settings are read on every start, with or without --enable-proxy)."""
    _, status = await _start(
        tmp_path, b"maxDelayTimeMills=2592000000\n", "-n", "127.0.0.1:1", "--storePathRootDir", str(tmp_path / "s")
    )
    assert status is None, f"exit {status}: {_stderr(tmp_path)}"


async def test_a_trailing_blank_after_broker_role_still_starts_the_broker(tmp_path: Path) -> None:
    """``brokerRole=ASYNC_MASTER `` (a trailing blank, common in hand-edited files) starts the broker in that role
    (RocketMQ 4.9.8 starts it too, with the default role: MessageStoreConfig.setBrokerRole(String) throws inside
    MixAll.properties2Object, which ignores it)."""
    _, status = await _start(
        tmp_path, b"brokerRole=ASYNC_MASTER \nflushDiskType=ASYNC_FLUSH \n",
        "-n", "127.0.0.1:1", "--storePathRootDir", str(tmp_path / "s"),
    )  # fmt: skip
    assert status is None, f"exit {status}: {_stderr(tmp_path)}"


async def test_a_trailing_blank_after_the_name_server_address_still_starts_the_broker(tmp_path: Path) -> None:
    """``namesrvAddr=127.0.0.1:1 `` must boot (ours: RocketMQ 4.9.8 refuses it, Integer.parseInt("1 ") in
    RemotingUtil.string2SocketAddress)."""
    _, status = await _start(tmp_path, b"namesrvAddr=127.0.0.1:1 \n", "--storePathRootDir", str(tmp_path / "s"))
    assert status is None, f"exit {status}: {_stderr(tmp_path)}"


async def test_a_trailing_blank_after_the_broker_name_is_not_part_of_the_name(tmp_path: Path) -> None:
    """``brokerName=broker-a `` registers as 'broker-a', as it always did here (RocketMQ 4.9.8 keeps the blank: a
    different broker group for clients and the name server)."""
    proc, status = await _start(
        tmp_path, b"brokerName=broker-a \n", "-n", "127.0.0.1:1", "--storePathRootDir", str(tmp_path / "s")
    )
    assert status is None, f"exit {status}: {_stderr(tmp_path)}"
    assert any("The broker[broker-a, " in line for line in proc.lines), proc.lines


async def test_a_utf8_store_path_in_the_conf_file_is_the_store_the_broker_uses(tmp_path: Path) -> None:
    """A UTF-8 broker.conf whose storePathRootDir has a non-ASCII character: the broker uses that directory, not a
    new, empty store at the ISO-8859-1 reading's path ('st\u00c3\u00b6re', which Java 4.9.8 would open), where an
    existing deployment's messages and offsets would silently vanish."""
    store = tmp_path / "st\u00f6re"
    _, status = await _start(tmp_path, f"storePathRootDir={store}\n".encode(), "-n", "127.0.0.1:1")
    assert status is None, f"exit {status}: {_stderr(tmp_path)}"
    assert sorted(p.name for p in tmp_path.iterdir() if p.is_dir()) == ["st\u00f6re"]


async def test_a_boolean_other_than_true_or_false_is_false_as_java_reads_it(tmp_path: Path) -> None:
    """MixAll.properties2Object reads a boolean with Boolean.parseBoolean (common/src/main/java/org/apache/rocketmq/
    common/MixAll.java): a case-insensitive ``true`` is true, anything else false, never an error. A Java broker.conf
    with ``autoCreateTopicEnable=yes`` starts there with auto-creation off; ours refused to start (status 2)."""
    conf = b"autoCreateTopicEnable=yes\nmessageIndexEnable=1\nclusterTopicEnable=TRUE\n"
    store = ["-n", "127.0.0.1:1", "--storePathRootDir", str(tmp_path / "s")]  # never the user's ~/store
    _, status = await _start(tmp_path, conf, "--brokerTopicEnable", "on", *store)
    assert status is None, f"exit {status}: {_stderr(tmp_path)}"
    config = build_config(str(tmp_path / "broker.conf"), ["--brokerTopicEnable", "on"], "")
    assert (config.auto_create_topic_enable, config.message_index_enable) == (False, False)
    assert (config.cluster_topic_enable, config.broker_topic_enable) == (True, False)


async def test_a_number_java_cannot_parse_keeps_the_default_and_the_broker_starts(tmp_path: Path) -> None:
    """MixAll.properties2Object swallows the NumberFormatException of Integer.parseInt / Long.parseLong
    (common/src/main/java/org/apache/rocketmq/common/MixAll.java): the key keeps its default and BrokerStartup goes
    on. A Java broker.conf with ``fileReservedTime=48h`` starts there with 72 hours; ours refused to start (status 2).
    The key is still named on stderr."""
    conf = b"fileReservedTime=48h\nbrokerId=99999999999999999999\n"
    store = ["-n", "127.0.0.1:1", "--storePathRootDir", str(tmp_path / "s")]  # never the user's ~/store
    _, status = await _start(tmp_path, conf, "--maxMessageSize", "3000000000", *store)
    assert status is None, f"exit {status}: {_stderr(tmp_path)}"
    log = (tmp_path / "broker.log").read_text(errors="replace")
    assert all(f"{key}: " in log for key in ("fileReservedTime", "brokerId", "maxMessageSize"))
    config = build_config(str(tmp_path / "broker.conf"), ["--maxMessageSize", "3000000000"], "")
    assert (config.file_reserved_time, config.broker_id, config.max_message_size) == (72, 0, 4 << 20)


async def test_a_proxy_setting_that_does_not_parse_stops_the_start(tmp_path: Path) -> None:
    """RocketMQ 5's proxy reads its settings with fastjson into ProxyConfig (proxy/src/main/java/org/apache/rocketmq/
    proxy/config/Configuration.java, ``JSON.parseObject``), which fails on a value its field's type does not take,
    so the proxy never starts: not MixAll.properties2Object, which skips such a key. Ours, since the broker's keys
    were made lenient, took ``grpcServerPort=8O81`` (a letter O) as 8081 and a boolean ``yes`` as false in silence.
    Each key must stop the start naming it, with ProxyStartup.main's ``System.exit(1)`` (ours exited 2); a broker
    key's bad number keeps starting."""
    store = ["-n", "127.0.0.1:1", "--storePathRootDir", str(tmp_path / "s"), "--enable-proxy", "--grpcServerPort", "0"]
    for conf in (b"renewAheadTimeMillis=10s\n", b"enableProxyAutoRenew=yes\n"):
        _, status = await _start(tmp_path, conf, *store)
        key = conf.decode().partition("=")[0]
        assert status == 1 and key in _stderr(tmp_path), f"exit {status}: {_stderr(tmp_path)}"
    for args in (["--grpcServerPort", "8O81"], ["--grpcTlsServerPort", "x"]):
        with pytest.raises(PropertiesError, match=args[0][2:]):
            build_proxy_config(None, args, enable=True)
    # maxMessageSize is the broker's too: Java's broker skips a number it cannot parse, so the broker starts.
    assert build_proxy_config(None, ["--maxMessageSize", "4m"], enable=True).max_message_size == 4 << 20


async def test_a_proxy_setting_that_does_not_parse_leaves_a_broker_without_the_proxy_starting(tmp_path: Path) -> None:
    """Without ``--enable-proxy`` no proxy runs and its settings are read by nothing that could fail: RocketMQ's
    BrokerStartup reads broker.conf with MixAll.properties2Object (common/src/main/java/org/apache/rocketmq/common/
    MixAll.java), to which ``grpcServerPort`` is no key, and only the proxy (proxy/src/main/java/org/apache/rocketmq/
    proxy/config/Configuration.java) would refuse its value. Ours refused the broker's start (status 2), the
    embedded cluster's broker arguments too, over a setting of the proxy it was not asked to run."""
    conf = b"grpcServerPort=8O81\nenableProxyAutoRenew=yes\n"
    _, status = await _start(tmp_path, conf, "-n", "127.0.0.1:1", "--storePathRootDir", str(tmp_path / "s"))
    assert status is None, f"exit {status}: {_stderr(tmp_path)}"
    assert build_config(None, ["--grpcTlsServerPort", "x"], "").listen_port == 10911
    assert not build_proxy_config(None, ["--grpcServerPort", "8O81"], enable=False).enable_proxy
    assert broker_overrides_of(["--renewAheadTimeMillis", "10s", "--listenPort", "0"]) == {"listen_port": 0}
