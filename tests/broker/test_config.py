"""BrokerConfig: RocketMQ's property names, the properties text, and defaults computed as Java's are."""

import fcntl
import socket
import struct
from pathlib import Path

import pytest

from broker.broker_config import BrokerConfig, load_broker_config
from broker.broker_process import properties_text
from broker.cli import build_config, config_lines, printed_config
from proxy.config import ProxyConfig
from remoting.codec.java_properties import PropertiesError, parse_properties
from remoting.local_address import local_address, local_host_name


def test_properties_parser_handles_comments_separators_and_continuations() -> None:
    text = "# comment\n! also\n\nbrokerName = broker-b\nlistenPort:10915\nnamesrvAddr=a:1;\\\n  b:2\nflag\n"
    assert parse_properties(text) == {
        "brokerName": "broker-b",
        "listenPort": "10915",
        "namesrvAddr": "a:1;b:2",
        "flag": "",
    }


def test_broker_conf_uses_rocketmq_property_names(tmp_path) -> None:
    conf = tmp_path / "broker.conf"
    conf.write_text("brokerIP1=10.0.0.9\nlistenPort=10921\nflushDiskType=SYNC_FLUSH\nautoCreateTopicEnable=false\n")
    config, unknown = load_broker_config(conf, broker_name="b2")
    assert (config.broker_ip1, config.listen_port, config.flush_disk_type) == ("10.0.0.9", 10921, "SYNC_FLUSH")
    assert config.auto_create_topic_enable is False
    assert config.broker_name == "b2"
    assert config.broker_addr == "10.0.0.9:10921"
    assert unknown == []


def test_unknown_keys_are_reported_and_bad_values_name_the_key(tmp_path) -> None:
    conf = tmp_path / "broker.conf"
    conf.write_text("brokerNmae=typo\n")
    _, unknown = load_broker_config(conf)
    assert unknown == ["brokerNmae"]
    conf.write_text("listenPort=abc\n")  # Integer.parseInt refuses it: MixAll.properties2Object keeps the default
    assert load_broker_config(conf) == (BrokerConfig(), [])
    conf.write_text("listenPort=70000\n")  # Java parses it and fails to bind it
    with pytest.raises(PropertiesError, match="listenPort"):
        load_broker_config(conf)


def test_namesrv_addr_splits_on_semicolons() -> None:
    assert BrokerConfig(namesrv_addr="a:1; b:2;").namesrv_addrs == ["a:1", "b:2"]


def _interface_ipv4_addresses() -> list[str]:
    """Every interface's primary IPv4 address (Linux SIOCGIFADDR), loopback and bridges included: computed here
    independently of remoting/local_address.py."""
    found = []
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sock:
        for _, name in socket.if_nameindex():
            try:
                packed = fcntl.ioctl(sock.fileno(), 0x8915, struct.pack("256s", name.encode()[:15]))
            except OSError:
                continue  # no IPv4 address on this interface
            found.append(socket.inet_ntoa(packed[20:24]))
    return found


def test_the_default_broker_ip1_is_the_hosts_address_not_loopback() -> None:
    """RocketMQ 4.9.8's BrokerConfig defaults brokerIP1 and brokerIP2 to RemotingUtil.getLocalAddress(): the host's
    first non-loopback IPv4 address (preferring one outside 192.168), InetAddress.getLocalHost() when there is none.
    Found by a review: ours defaulted to 127.0.0.1 while listening on 0.0.0.0, so `mqbroker -n <remote name server>`
    registered 127.0.0.1:10911 and every client on another host connected to itself."""
    candidates = [addr for addr in _interface_ipv4_addresses() if not addr.startswith("127.")]
    if not candidates:  # Java's fallback
        candidates = [socket.gethostbyname(socket.gethostname())]
    config = build_config(None, [], "127.0.0.1:9876")
    assert config.broker_ip1 in candidates, f"brokerIP1 {config.broker_ip1}, the host's addresses: {candidates}"
    assert config.ha_server_addr.rpartition(":")[0] in candidates


def test_a_listen_host_naming_one_interface_is_the_default_broker_ip1(tmp_path: Path) -> None:
    """A broker bound to one address advertises it unless brokerIP1 says otherwise, however the settings come: as
    options, from a `-c` file, or built directly."""
    assert build_config(None, ["--listenHost", "127.0.0.1"], None).broker_ip1 == "127.0.0.1"
    assert build_config(None, ["--listenHost", "127.0.0.1", "--brokerIP1", "10.0.0.9"], None).broker_ip1 == "10.0.0.9"
    conf = tmp_path / "broker.conf"
    conf.write_text("listenHost=127.0.0.2\n")
    assert load_broker_config(conf)[0].broker_ip1 == "127.0.0.2"
    assert BrokerConfig(listen_host="127.0.0.3").ha_server_addr == "127.0.0.3:10912"
    assert BrokerConfig(listen_host="0.0.0.0").broker_ip1 == local_address()


def test_a_broker_process_conf_keeps_a_broker_ip1_other_than_its_listen_hosts(tmp_path: Path) -> None:
    """The conf written for a broker child process (broker/broker_process.py) holds what differs from the defaults,
    and brokerIP1 too when the child (`mqbroker -c`) would otherwise take listenHost for it: here brokerIP1 is its
    default, the host's address, and the broker listens on 127.0.0.1 only."""
    config = BrokerConfig(listen_host="127.0.0.1", broker_ip1=local_address())
    conf = tmp_path / "broker-b.properties"
    conf.write_text(properties_text(config))
    assert build_config(str(conf), [], None) == config


def test_the_default_broker_name_is_the_host_name_and_m_prints_it() -> None:
    """RocketMQ 4.9.8's BrokerConfig: ``brokerName = localHostName()`` (the host's name), ``brokerClusterName``
    DefaultCluster; ``mqbroker -m`` prints both (@ImportantField), not a fixed ``broker-a``."""
    host = socket.gethostname()
    socket.getaddrinfo(host, None)  # this host's name resolves, so Java's getLocalHost() would not fail
    config = BrokerConfig()
    assert (config.broker_name, config.broker_cluster_name) == (host, "DefaultCluster")
    lines = config_lines(printed_config(config), important_only=True)
    assert f"brokerName={host}" in lines and "brokerClusterName=DefaultCluster" in lines


def test_a_host_name_that_does_not_resolve_gives_default_broker(monkeypatch: pytest.MonkeyPatch) -> None:
    """Java's getLocalHost() throws UnknownHostException for a host name that does not resolve; localHostName()
    then answers DEFAULT_BROKER (the proxy's proxyName: DEFAULT_PROXY)."""

    def unresolvable(*args: object) -> object:
        raise socket.gaierror(socket.EAI_NONAME, "Name or service not known")

    local_host_name.cache_clear()
    monkeypatch.setattr(socket, "getaddrinfo", unresolvable)
    try:
        assert (BrokerConfig().broker_name, ProxyConfig().proxy_name) == ("DEFAULT_BROKER", "DEFAULT_PROXY")
    finally:
        local_host_name.cache_clear()


def test_the_timer_logs_segment_size_is_read_from_rocketmqs_key(tmp_path) -> None:
    """RocketMQ 5.3.3's MessageStoreConfig names the timer log's file size ``mappedFileSizeTimerLog``: a broker.conf
    written for Java sets it (found by a review: the key was unknown and the size stayed at ours)."""
    conf = tmp_path / "broker.conf"
    conf.write_text("mappedFileSizeTimerLog=4096\n")
    config, unknown = load_broker_config(conf)
    assert unknown == []
    assert config.mapped_file_size_timer_log == 4096


def test_the_timer_logs_default_segment_size_is_javas_100_mib() -> None:
    """RocketMQ 5.3.3's MessageStoreConfig defaults ``mappedFileSizeTimerLog`` to 100 MiB (timers are 5.x only:
    4.9.8's MessageStoreConfig has no timer log). Ours defaulted to 32 MiB, so a broker on Java's defaults rolled its
    timer log three times as often, and ``mqbroker -p`` showed another value than Java's."""
    assert BrokerConfig().mapped_file_size_timer_log == 100 * 1024 * 1024
    lines = config_lines(printed_config(build_config(None, [], None)), important_only=False)
    assert "mappedFileSizeTimerLog=104857600" in lines
