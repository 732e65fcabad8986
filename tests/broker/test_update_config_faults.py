"""UPDATE_BROKER_CONFIG faults, as RocketMQ 4.9.8's ``Configuration.update`` must survive them
(common/src/main/java/org/apache/rocketmq/common/Configuration.java).

A refused value (``flushDiskType=bogus``) refuses the whole update: nothing reaches the live config or the file, the
admin request is answered SYSTEM_ERROR, and later updates work (Java's ``properties2Object`` skips such a key; we
refuse it, as every other bad value). Concurrent updates are serialised, so each one's keys reach the ``-c`` file.
Found by a review; these failed before (the bad value stayed live and broke every later update; a concurrent write
lost the other's keys).
"""

from __future__ import annotations

import contextlib
import threading
from pathlib import Path

import attrs
import pytest
import trio

import broker.broker_conf_file as broker_conf_file
from broker.broker_config import BrokerConfig
from broker.cli import build_config
from broker.context import build_context
from remoting.client import RemotingClient
from remoting.codec.codes import RequestCode, ResponseCode
from remoting.codec.command import request
from remoting.codec.java_properties import PropertiesError
from tests.broker.helpers import broker_from_conf, update_once
from tests.conftest import SMALL_STORE


async def test_a_refused_flush_disk_type_changes_nothing_and_later_updates_work(tmp_path: Path) -> None:
    conf = tmp_path / "broker.conf"
    conf.write_text("brokerName=b\n")
    ctx = build_context(attrs.evolve(BrokerConfig(store_path_root_dir=str(tmp_path / "store")), **SMALL_STORE))
    ctx.config_path = conf
    with pytest.raises(PropertiesError, match="flushDiskType"):
        await ctx.update_config({"flushDiskType": "bogus", "maxMessageSize": "1024"})
    assert (ctx.config.flush_disk_type, ctx.config.max_message_size) == ("ASYNC_FLUSH", BrokerConfig().max_message_size)
    assert conf.read_text() == "brokerName=b\n"
    await ctx.update_config({"autoCreateTopicEnable": "false"})
    assert ctx.config.auto_create_topic_enable is False
    assert "autoCreateTopicEnable=false" in conf.read_text()


async def test_the_admin_request_answers_system_error_for_a_refused_value(tmp_path: Path) -> None:
    conf = tmp_path / "broker.conf"
    conf.write_text("listenPort=0\nlistenHost=127.0.0.1\n")
    async with broker_from_conf(conf, tmp_path / "store") as (_, addr), RemotingClient() as client:
        for body in (b"flushDiskType=bogus\n", b"brokerRole=KING\n", b"maxMessageSize=\\u12\n"):
            answer = await client.invoke(addr, request(RequestCode.UPDATE_BROKER_CONFIG, body=body), 5)
            assert answer.code == ResponseCode.SYSTEM_ERROR, body
        ok = request(RequestCode.UPDATE_BROKER_CONFIG, body=b"storePathRootDir=C:\\\\data\n")
        assert (await client.invoke(addr, ok, 5)).code == ResponseCode.SUCCESS
    assert conf.read_bytes() == b"listenPort=0\nlistenHost=127.0.0.1\nstorePathRootDir=C:\\\\data\n"


async def test_concurrent_updates_each_reach_the_conf_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Two UPDATE_BROKER_CONFIG requests at once: Java's Configuration serialises them under its lock and dumps the
    merged state, so both keys are in the file.

    The barrier only makes the two threads' reads overlap when nothing serialises them (it gives up after a while
    when something does, e.g. a lock); it asserts nothing about time."""
    conf = tmp_path / "broker.conf"
    conf.write_text("# mine\nbrokerName=b\n")
    ctx = build_context(attrs.evolve(BrokerConfig(store_path_root_dir=str(tmp_path / "store")), **SMALL_STORE))
    ctx.config_path = conf
    barrier = threading.Barrier(2, timeout=3)
    real_rewrite = broker_conf_file.rewrite_properties

    def overlapping_rewrite(text: str, changes: dict[str, str]) -> str:
        with contextlib.suppress(threading.BrokenBarrierError):
            barrier.wait()
        return real_rewrite(text, changes)

    monkeypatch.setattr(broker_conf_file, "rewrite_properties", overlapping_rewrite)
    async with trio.open_nursery() as nursery:
        nursery.start_soon(ctx.update_config, {"autoCreateTopicEnable": "false"})
        nursery.start_soon(ctx.update_config, {"maxMessageSize": "1024"})
    text = conf.read_text()
    assert "autoCreateTopicEnable=false" in text and "maxMessageSize=1024" in text, text
    assert [p.name for p in tmp_path.iterdir() if p.name.endswith(".tmp")] == []


async def test_an_update_with_a_boolean_java_reads_as_false_applies_false(tmp_path: Path) -> None:
    """AdminBrokerProcessor.updateBrokerConfig hands the body to Configuration.update, whose
    MixAll.properties2Object reads a boolean with Boolean.parseBoolean (common/src/main/java/org/apache/rocketmq/
    common/MixAll.java): ``on`` is false, the update succeeds. Ours answered SYSTEM_ERROR and changed nothing."""
    conf = tmp_path / "broker.conf"
    conf.write_text("listenPort=0\nlistenHost=127.0.0.1\n")
    async with broker_from_conf(conf, tmp_path / "store") as (controller, addr), RemotingClient() as client:
        body = b"autoCreateSubscriptionGroup=on\nmaxMessageSize=2048\n"
        answer = await client.invoke(addr, request(RequestCode.UPDATE_BROKER_CONFIG, body=body), 5)
        assert answer.code == ResponseCode.SUCCESS, answer.remark
        config = controller.context.config
        assert (config.auto_create_subscription_group, config.max_message_size) == (False, 2048)
    assert "autoCreateSubscriptionGroup=false\n" in conf.read_text()


async def test_an_update_with_a_number_java_cannot_parse_applies_the_other_keys(tmp_path: Path) -> None:
    """Configuration.update runs MixAll.properties2Object, which skips a key whose Integer.parseInt fails and sets
    the others; updateBrokerConfig answers SUCCESS, and the file gets the value in use (common/src/main/java/org/
    apache/rocketmq/common/Configuration.java persists the objects' values). Ours answered SYSTEM_ERROR and applied
    none of the update."""
    conf = tmp_path / "broker.conf"
    conf.write_text("listenPort=0\nlistenHost=127.0.0.1\n")
    async with broker_from_conf(conf, tmp_path / "store") as (controller, addr), RemotingClient() as client:
        body = b"fileReservedTime=48h\nmaxMessageSize=2048\n"
        answer = await client.invoke(addr, request(RequestCode.UPDATE_BROKER_CONFIG, body=body), 5)
        assert answer.code == ResponseCode.SUCCESS, answer.remark
        config = controller.context.config
        assert (config.file_reserved_time, config.max_message_size) == (72, 2048)
    assert "48h" not in conf.read_text() and "maxMessageSize=2048\n" in conf.read_text()


async def test_an_unknown_default_message_request_mode_is_skipped_as_java_skips_it(tmp_path: Path) -> None:
    """RocketMQ 5.3.3's BrokerConfig.setDefaultMessageRequestMode(String) calls MessageRequestMode.valueOf, whose
    IllegalArgumentException MixAll.properties2Object swallows (common/src/main/java/org/apache/rocketmq/common/
    MixAll.java): the mode stays PULL, the other keys apply and the update answers SUCCESS. Ours answered
    SYSTEM_ERROR with attrs' validator message, and ``mqbroker`` given the value died with a traceback."""
    conf = tmp_path / "broker.conf"
    conf.write_text("listenPort=0\nlistenHost=127.0.0.1\ndefaultMessageRequestMode=pop\n")
    assert build_config(str(conf), [], None).default_message_request_mode == "PULL"
    async with broker_from_conf(conf, tmp_path / "store") as (controller, addr), RemotingClient() as client:
        body = b"defaultMessageRequestMode=RANDOM\nmaxMessageSize=2048\n"
        answer = await client.invoke(addr, request(RequestCode.UPDATE_BROKER_CONFIG, body=body), 5)
        assert answer.code == ResponseCode.SUCCESS, answer.remark
        config = controller.context.config
        assert (config.default_message_request_mode, config.max_message_size) == ("PULL", 2048)
    assert "RANDOM" not in conf.read_text()


async def test_an_update_body_properties_cannot_load_answers_javas_remark(tmp_path: Path) -> None:
    """A body ``Properties.load`` refuses (a malformed ``\\uXXXX``) makes MixAll.string2Properties return null, which
    AdminBrokerProcessor.updateBrokerConfig answers SYSTEM_ERROR "string2Properties error" (broker/src/main/java/org/
    apache/rocketmq/broker/processor/AdminBrokerProcessor.java, 4.9.8). Ours answered the parser's message."""
    conf = tmp_path / "broker.conf"
    conf.write_text("listenPort=0\nlistenHost=127.0.0.1\n")
    _, answer = await update_once(conf, tmp_path / "store", b"maxMessageSize=\\u12\n")
    assert (answer.code, answer.remark) == (ResponseCode.SYSTEM_ERROR, "string2Properties error")
