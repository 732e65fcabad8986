"""The name server's KV config (namesrv/.../kvconfig/KVConfigManager.java, 4.9.8): an emptied namespace stays, and a
failed save is logged while the request still answers SUCCESS. Found by a review; each failed before."""

from __future__ import annotations

import subprocess
import sys
from contextlib import AbstractAsyncContextManager
from pathlib import Path

import pytest
import trio

from namesrv.kv_config import KVConfigManager
from remoting.client import RemotingClient
from remoting.codec.bodies import KVTable
from remoting.codec.codes import RequestCode, ResponseCode
from remoting.codec.command import request
from store.metadata_files import ConfigFileError
from tests.namesrv.conftest import BOOT, StartNamesrv, java_register_request, namesrv_process, stop_with_sigint

TIMEOUT = 5.0
REPO_ROOT = Path(__file__).resolve().parents[2]
NS = {"namespace": "ORDER_TOPIC_CONFIG"}


def _namesrv_on(kv_path: Path) -> AbstractAsyncContextManager[trio.Process]:
    """``python -m namesrv.cli`` on 127.0.0.1 port 0 with its KV config at ``kv_path``, stdout and stderr piped."""
    args = ["--listenHost", "127.0.0.1", "--listenPort", "0", "--kvConfigPath", str(kv_path)]
    argv = [sys.executable, "-m", "namesrv.cli", *args]
    return namesrv_process(argv, cwd=str(REPO_ROOT), stdout=subprocess.PIPE, stderr=subprocess.PIPE)


async def test_deleting_the_last_kv_key_keeps_the_namespace_like_java(
    start_namesrv: StartNamesrv, client: RemotingClient
) -> None:
    """KVConfigManager.deleteKVConfig (4.9.8) removes the key only; the namespace's (empty) map stays, so
    GET_KVLIST_BY_NAMESPACE answers SUCCESS {"table":{}} and REGISTER_BROKER's body is {"table":{}} (a Java broker
    then clears the ``order`` flag of its topics in TopicConfigManager.updateOrderTopicConfig)."""
    _, addr = await start_namesrv()
    put = await client.invoke(addr, request(RequestCode.PUT_KV_CONFIG, {**NS, "key": "T", "value": "a:4"}), TIMEOUT)
    assert put.code == ResponseCode.SUCCESS
    deleted = await client.invoke(addr, request(RequestCode.DELETE_KV_CONFIG, {**NS, "key": "T"}), TIMEOUT)
    assert deleted.code == ResponseCode.SUCCESS
    listed = await client.invoke(addr, request(RequestCode.GET_KVLIST_BY_NAMESPACE, NS), TIMEOUT)
    assert (listed.code, listed.remark) == (ResponseCode.SUCCESS, None)
    assert KVTable.decode(listed.body) == KVTable({})


async def test_register_answer_carries_the_emptied_order_namespace(
    start_namesrv: StartNamesrv, client: RemotingClient
) -> None:
    """The emptied namespace still answers REGISTER_BROKER with the table {"table":{}} (DefaultRequestProcessor.java
    registerBrokerWithFilterServer), not an empty body."""
    _, addr = await start_namesrv()
    await client.invoke(addr, request(RequestCode.PUT_KV_CONFIG, {**NS, "key": "T", "value": "a:4"}), TIMEOUT)
    await client.invoke(addr, request(RequestCode.DELETE_KV_CONFIG, {**NS, "key": "T"}), TIMEOUT)
    response = await client.invoke(addr, java_register_request(), TIMEOUT)
    assert response.code == ResponseCode.SUCCESS
    assert bytes(response.body) != b"", 'Java answers the empty ORDER_TOPIC_CONFIG table {"table":{}}'
    assert KVTable.decode(response.body) == KVTable({})


async def test_put_kv_config_answers_success_when_the_file_cannot_be_written(
    start_namesrv: StartNamesrv, client: RemotingClient, tmp_path: Path
) -> None:
    """KVConfigManager.persist (4.9.8) logs an IOException; putKVConfig still answers SUCCESS (the value is in the
    table and served). Found by a review; failed before: the write error escaped as SYSTEM_ERROR."""
    addr = await _namesrv_that_cannot_save(start_namesrv, tmp_path)
    fields = {"namespace": "ORDER_TOPIC_CONFIG", "key": "T", "value": "broker-a:4"}
    answer = await client.invoke(addr, request(RequestCode.PUT_KV_CONFIG, fields), TIMEOUT)
    query = request(RequestCode.GET_KV_CONFIG, {"namespace": "ORDER_TOPIC_CONFIG", "key": "T"})
    got = await client.invoke(addr, query, TIMEOUT)
    assert got.code == ResponseCode.SUCCESS  # the put took effect
    assert (answer.code, answer.remark) == (ResponseCode.SUCCESS, None)


async def test_delete_kv_config_answers_success_when_the_file_cannot_be_written(
    start_namesrv: StartNamesrv, client: RemotingClient, tmp_path: Path
) -> None:
    """deleteKVConfig persists the same way: the key is gone, the failed write is only logged."""
    addr = await _namesrv_that_cannot_save(start_namesrv, tmp_path)
    fields = {**NS, "key": "T"}
    await client.invoke(addr, request(RequestCode.PUT_KV_CONFIG, {**fields, "value": "broker-a:4"}), TIMEOUT)
    answer = await client.invoke(addr, request(RequestCode.DELETE_KV_CONFIG, fields), TIMEOUT)
    assert (answer.code, answer.remark) == (ResponseCode.SUCCESS, None)
    got = await client.invoke(addr, request(RequestCode.GET_KV_CONFIG, fields), TIMEOUT)
    assert got.code == ResponseCode.QUERY_NOT_FOUND


async def _namesrv_that_cannot_save(start_namesrv: StartNamesrv, tmp_path: Path) -> str:
    kv_dir = tmp_path / "kvdir"
    _, addr = await start_namesrv(kv_config_path=str(kv_dir / "kvConfig.json"))
    if kv_dir.exists():
        kv_dir.rmdir()
    kv_dir.write_bytes(b"not a directory")  # the parent of kvConfig.json is now a file: every save fails
    return addr


async def test_an_unreadable_kv_config_file_is_logged_and_the_name_server_starts(tmp_path: Path) -> None:
    """KVConfigManager.load (4.9.8) catches the IOException of ``MixAll.file2String`` ("Load KV config table
    exception") and the name server starts with an empty table. Found by a review; failed before: the ``OSError``
    stopped ``mqnamesrv`` with exit status 1, blamed on the listen port ("cannot listen on ...")."""
    kv_path = tmp_path / "kvConfig.json"
    kv_path.mkdir()  # exists but cannot be read as a file (permissions do not stop root)
    async with _namesrv_on(kv_path) as proc:
        assert proc.stdout is not None and proc.stderr is not None
        output = b""
        with trio.fail_after(30):
            while (match := BOOT.search(output)) is None:
                chunk = await proc.stdout.receive_some()
                if not chunk:
                    errors = await proc.stderr.receive_some()
                    raise AssertionError(f"mqnamesrv exited before booting: {errors!r}")
                output += chunk
        addr = f"{match.group(1).decode()}:{int(match.group(2))}"
        async with RemotingClient() as client:
            fields = {**NS, "key": "T"}
            put = await client.invoke(addr, request(RequestCode.PUT_KV_CONFIG, {**fields, "value": "a:4"}), TIMEOUT)
            assert (put.code, put.remark) == (ResponseCode.SUCCESS, None)
            got = await client.invoke(addr, request(RequestCode.GET_KV_CONFIG, fields), TIMEOUT)
            assert got.ext_fields.get("value") == "a:4"
        await stop_with_sigint(proc)


async def test_a_kv_config_that_does_not_decode_stops_the_name_server_whatever_its_backup(tmp_path: Path) -> None:
    """KVConfigManager.load (4.9.8) reads ``kvConfig.json`` alone: content fastjson cannot parse escapes it and
    NamesrvStartup exits. Found by a second review: with a ``kvConfig.json.bak`` (ours, never read by Java) that cannot
    be read, the read error of the backup was taken for Java's IOException and the name server started empty."""
    kv_path = tmp_path / "kvConfig.json"
    kv_path.write_bytes(b'{"configTable":{"ORDER_TOPIC_CONFIG":{not json')
    (tmp_path / "kvConfig.json.bak").mkdir()  # exists but cannot be read as a file
    async with _namesrv_on(kv_path) as proc:
        assert proc.stdout is not None and proc.stderr is not None
        output = errors = b""
        with trio.fail_after(30):
            while chunk := await proc.stdout.receive_some():
                output += chunk
                assert BOOT.search(output) is None, "mqnamesrv started on a kvConfig.json that does not decode"
            while chunk := await proc.stderr.receive_some():
                errors += chunk
            assert await proc.wait() == 255  # main0's catch: System.exit(-1)
        assert b"kvConfig.json" in errors and b"cannot listen" not in errors, errors


async def test_a_removed_kv_config_file_starts_empty_whatever_its_backup(
    start_namesrv: StartNamesrv, client: RemotingClient, tmp_path: Path
) -> None:
    """KVConfigManager.load (4.9.8) reads ``kvConfig.json`` alone: removed (or emptied) by an operator, the name server
    starts with no KV config. Found by a review; failed before: ``kvConfig.json.bak``, which holds the table before the
    last change, was loaded, so a deleted order config came back one change stale."""
    kv_path = tmp_path / "kv" / "kvConfig.json"
    _, addr = await start_namesrv(name="first", kv_config_path=str(kv_path))
    fields = {**NS, "key": "T"}
    await client.invoke(addr, request(RequestCode.PUT_KV_CONFIG, {**fields, "value": "broker-a:4"}), TIMEOUT)
    await client.invoke(addr, request(RequestCode.DELETE_KV_CONFIG, fields), TIMEOUT)
    assert kv_path.with_name("kvConfig.json.bak").exists()
    kv_path.unlink()
    _, again = await start_namesrv(name="second", kv_config_path=str(kv_path))
    got = await client.invoke(again, request(RequestCode.GET_KV_CONFIG, fields), TIMEOUT)
    assert got.code == ResponseCode.QUERY_NOT_FOUND
    listed = await client.invoke(again, request(RequestCode.GET_KVLIST_BY_NAMESPACE, NS), TIMEOUT)
    assert listed.code == ResponseCode.QUERY_NOT_FOUND


async def test_a_kv_config_that_does_not_decode_is_not_replaced_by_its_backup(tmp_path: Path) -> None:
    """The same ``load``: content fastjson cannot parse stops the start (NamesrvStartup exits) even when
    ``kvConfig.json.bak`` (ours, never read by Java) is good. Found by a review; failed before: the older table of the
    backup was served."""
    kv_path = tmp_path / "kvConfig.json"
    kv_path.with_name("kvConfig.json.bak").write_bytes(b'{"configTable":{"ORDER_TOPIC_CONFIG":{"T":"a:4"}}}')
    kv_path.write_bytes(b'{"configTable":{"ORDER_TOPIC_CONFIG":{not json')
    manager = KVConfigManager(kv_path)
    with pytest.raises(ConfigFileError):
        manager.load()
