"""A conf file is written back in the encoding it was read in (found by a review; each failed before): a UTF-8
broker.conf with characters past U+00FF (a Chinese comment, common in RocketMQ deployments) can be rewritten by
UPDATE_BROKER_CONFIG, and its other lines keep their bytes."""

from __future__ import annotations

from pathlib import Path

import attrs

from broker.broker_conf_file import persist_properties
from broker.broker_config import BrokerConfig
from broker.context import build_context
from tests.conftest import SMALL_STORE


def test_persisting_a_change_to_a_utf8_conf_with_a_chinese_comment_works(tmp_path: Path) -> None:
    conf = tmp_path / "broker.conf"
    original = "# 集群名称\nbrokerName=b\n".encode()
    conf.write_bytes(original)
    persist_properties(conf, {"maxMessageSize": "1024"})  # UnicodeEncodeError: 'latin-1' codec can't encode
    assert conf.read_bytes() == original + b"maxMessageSize=1024\n"


def test_persisting_a_change_keeps_the_other_lines_bytes_of_a_utf8_conf(tmp_path: Path) -> None:
    """The untouched lines of a UTF-8 file keep their bytes (not re-encoded as ISO-8859-1)."""
    conf = tmp_path / "broker.conf"
    original = "# café\nbrokerName=b\n".encode()
    conf.write_bytes(original)
    persist_properties(conf, {"maxMessageSize": "1024"})
    assert conf.read_bytes() == original + b"maxMessageSize=1024\n"


async def test_update_broker_config_with_a_utf8_conf_file_with_a_chinese_comment(tmp_path: Path) -> None:
    conf = tmp_path / "broker.conf"
    conf.write_bytes("# 集群名称\nbrokerName=b\n".encode())
    ctx = build_context(attrs.evolve(BrokerConfig(store_path_root_dir=str(tmp_path / "store")), **SMALL_STORE))
    ctx.config_path = conf
    await ctx.update_config({"autoCreateTopicEnable": "false"})
    assert "autoCreateTopicEnable=false" in conf.read_text(encoding="utf-8")
