import pytest

from broker.broker_config import BrokerConfig, load_broker_config
from remoting.codec.java_properties import PropertiesError, parse_properties


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
    conf.write_text("listenPort=abc\n")
    with pytest.raises(PropertiesError, match="listenPort"):
        load_broker_config(conf)


def test_namesrv_addr_splits_on_semicolons() -> None:
    assert BrokerConfig(namesrv_addr="a:1; b:2;").namesrv_addrs == ["a:1", "b:2"]
