"""UPDATE_NAMESRV_CONFIG's black list (DefaultRequestProcessor.java initConfigBlackList, 4.9.8): four keys are always
refused, the configured ``configBlackList`` only adds keys. Found by a review; failed before."""

from __future__ import annotations

from pathlib import Path

from remoting.client import RemotingClient
from remoting.codec.codes import RequestCode, ResponseCode
from remoting.codec.command import request
from tests.namesrv.conftest import StartNamesrv

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
