"""The name server's KV config (namesrv/.../kvconfig/KVConfigManager.java, 4.9.8): an emptied namespace stays, and a
failed save is logged while the request still answers SUCCESS. Found by a review; each failed before."""

from __future__ import annotations

from pathlib import Path

from remoting.client import RemotingClient
from remoting.codec.bodies import KVTable
from remoting.codec.codes import RequestCode, ResponseCode
from remoting.codec.command import request
from tests.namesrv.conftest import StartNamesrv, java_register_request

TIMEOUT = 5.0
NS = {"namespace": "ORDER_TOPIC_CONFIG"}


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
