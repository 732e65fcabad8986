"""UPDATE_NAMESRV_CONFIG's black list (DefaultRequestProcessor.java initConfigBlackList, 4.9.8): four keys are always
refused, the configured ``configBlackList`` only adds keys. Found by a review; failed before."""

from __future__ import annotations

from pathlib import Path

from namesrv.config import load_namesrv_config
from remoting.client import RemotingClient
from remoting.codec.codes import RequestCode, ResponseCode
from remoting.codec.command import request
from tests.namesrv.conftest import StartNamesrv
from tests.remoting.helpers import write_self_signed

TIMEOUT = 5.0


async def test_rocketmq_home_is_always_black_listed(
    start_namesrv: StartNamesrv, client: RemotingClient, tmp_path: Path
) -> None:
    """DefaultRequestProcessor.initConfigBlackList (4.9.8) always adds configBlackList, configStorePath, kvConfigPath
    and rocketmqHome, then the configured list: an update of rocketmqHome is refused with NO_PERMISSION."""
    _, addr = await start_namesrv(config_store_path=str(tmp_path / "namesrv.properties"))
    update = request(RequestCode.UPDATE_NAMESRV_CONFIG, body=b"rocketmqHome=/tmp/elsewhere\n")
    answer = await client.invoke(addr, update, TIMEOUT)
    assert (answer.code, answer.remark) == (ResponseCode.NO_PERMISSION, "Can not update config in black list.")


async def test_kv_config_path_stays_black_listed_whatever_the_configured_list(
    start_namesrv: StartNamesrv, client: RemotingClient, tmp_path: Path
) -> None:
    """The configured configBlackList only adds keys in Java; kvConfigPath and configStorePath stay refused."""
    server, addr = await start_namesrv(
        config_store_path=str(tmp_path / "namesrv.properties"), config_black_list="listenPort"
    )
    update = request(RequestCode.UPDATE_NAMESRV_CONFIG, body=f"kvConfigPath={tmp_path / 'other.json'}\n".encode())
    answer = await client.invoke(addr, update, TIMEOUT)
    assert (answer.code, answer.remark) == (ResponseCode.NO_PERMISSION, "Can not update config in black list.")
    assert server.config.kv_config_path == str(tmp_path / "ns" / "kvConfig.json")


async def test_tls_settings_are_not_name_server_settings_an_update_can_change(
    start_namesrv: StartNamesrv, client: RemotingClient, tmp_path: Path
) -> None:
    """RocketMQ's ``tls.*`` are JVM system properties (remoting/.../netty/TlsSystemConfig.java), not fields of the
    NamesrvConfig and NettyServerConfig that 4.9.8's Configuration.update sets and persists: UPDATE_NAMESRV_CONFIG
    answers SUCCESS and leaves them alone. The name server checks no caller, so an update must not turn TLS off (or
    its test mode on) in the ``configStorePath`` file the next start reads; the other keys still apply. (The file
    holds the TLS settings: only those its keys are written back, as Configuration holds the ``-c`` file's.)"""
    store = tmp_path / "namesrv.properties"
    store.write_text("tls.server.mode=permissive\ntls.test.mode.enable=false\n")
    cert, key = write_self_signed(tmp_path)  # test mode off: a start needs them, as in RocketMQ
    server, addr = await start_namesrv(
        config_file=store, config_store_path=str(store), tls_server_mode="permissive", tls_test_mode_enable=False,
        tls_server_cert_path=str(cert), tls_server_key_path=str(key),
    )  # fmt: skip
    body = b"tls.server.mode=disabled\ntls.test.mode.enable=true\norderMessageEnable=true\n"
    answer = await client.invoke(addr, request(RequestCode.UPDATE_NAMESRV_CONFIG, body=body), TIMEOUT)
    assert answer.code == ResponseCode.SUCCESS, answer.remark
    assert server.config.order_message_enable is True
    assert (server.config.tls_server_mode, server.config.tls_test_mode_enable) == ("permissive", False)
    restarted, _ = load_namesrv_config(store)
    assert (restarted.tls_server_mode, restarted.tls_test_mode_enable) == ("permissive", False)
    assert restarted.order_message_enable is True


async def test_an_update_body_properties_cannot_load_answers_javas_remark(
    start_namesrv: StartNamesrv, client: RemotingClient, tmp_path: Path
) -> None:
    """A body ``Properties.load`` refuses (a malformed ``\\uXXXX``) makes MixAll.string2Properties return null, which
    DefaultRequestProcessor.updateConfig answers SYSTEM_ERROR "string2Properties error" (namesrv/src/main/java/org/
    apache/rocketmq/namesrv/processor/DefaultRequestProcessor.java, 4.9.8). Ours answered the parser's message."""
    _, addr = await start_namesrv(config_store_path=str(tmp_path / "namesrv.properties"))
    update = request(RequestCode.UPDATE_NAMESRV_CONFIG, body=b"orderMessageEnable=\\u12\n")
    answer = await client.invoke(addr, update, TIMEOUT)
    assert (answer.code, answer.remark) == (ResponseCode.SYSTEM_ERROR, "string2Properties error")
