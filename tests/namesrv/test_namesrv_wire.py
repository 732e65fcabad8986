"""The name server over real sockets: our RemotingClient against NamesrvServer on 127.0.0.1 port 0."""

from __future__ import annotations

from pathlib import Path

import trio

from namesrv.config import NamesrvConfig
from namesrv.server import NamesrvServer
from remoting.client import RemotingClient
from remoting.codec.bodies import (
    ClusterInfo,
    DataVersion,
    KVTable,
    RegisterBrokerBody,
    TopicList,
    TopicRouteData,
    decode_data_version,
    encode_data_version,
)
from remoting.codec.codes import RequestCode, ResponseCode
from remoting.codec.command import request
from remoting.connection import Connection
from tests.namesrv.conftest import (
    JAVA_REGISTER_BODY,
    ROUTE_OF_TOPIC_TEST,
    StartNamesrv,
    java_register_request,
    order_conf_in_route,
    route_request,
)

TIMEOUT = 5.0


async def test_java_broker_registration_then_route_is_the_exact_json(
    start_namesrv: StartNamesrv, client: RemotingClient
) -> None:
    _, addr = await start_namesrv()
    response = await client.invoke(addr, java_register_request(), TIMEOUT)
    assert response.code == ResponseCode.SUCCESS
    assert response.ext_fields == {}
    assert bytes(response.body) == b""
    route = await client.invoke(addr, route_request("TopicTest"), TIMEOUT)
    assert route.code == ResponseCode.SUCCESS
    assert route.remark is None
    assert bytes(route.body) == ROUTE_OF_TOPIC_TEST


async def test_unknown_topic_answers_17_with_the_java_remark(
    start_namesrv: StartNamesrv, client: RemotingClient
) -> None:
    _, addr = await start_namesrv()
    response = await client.invoke(addr, route_request("nope"), TIMEOUT)
    assert response.code == ResponseCode.TOPIC_NOT_EXIST
    assert response.remark == (
        "No topic route info in name server for the topic: nope\n"
        "See http://rocketmq.apache.org/docs/faq/ for further details."
    )


async def test_unknown_request_code_is_answered_not_supported(
    start_namesrv: StartNamesrv, client: RemotingClient
) -> None:
    _, addr = await start_namesrv()
    response = await client.invoke(addr, request(RequestCode.PULL_MESSAGE), TIMEOUT)
    assert response.code == ResponseCode.REQUEST_CODE_NOT_SUPPORTED
    assert response.remark == " request type 11 not supported"


async def test_missing_header_field_is_a_system_error_naming_it(
    start_namesrv: StartNamesrv, client: RemotingClient
) -> None:
    _, addr = await start_namesrv()
    response = await client.invoke(addr, request(RequestCode.GET_ROUTEINFO_BY_TOPIC), TIMEOUT)
    assert response.code == ResponseCode.SYSTEM_ERROR
    assert response.remark is not None and "topic" in response.remark


async def test_register_with_bad_crc_is_refused(start_namesrv: StartNamesrv, client: RemotingClient) -> None:
    _, addr = await start_namesrv()
    response = await client.invoke(addr, java_register_request(crc=12345), TIMEOUT)
    assert response.code == ResponseCode.SYSTEM_ERROR
    assert response.remark == "crc32 not match"
    assert (await client.invoke(addr, route_request("TopicTest"), TIMEOUT)).code == ResponseCode.TOPIC_NOT_EXIST


async def test_compressed_registration_builds_the_same_route(
    start_namesrv: StartNamesrv, client: RemotingClient
) -> None:
    _, addr = await start_namesrv()
    compressed = RegisterBrokerBody.decode(JAVA_REGISTER_BODY).encode(compress=True)
    response = await client.invoke(addr, java_register_request(compressed, compressed=True), TIMEOUT)
    assert response.code == ResponseCode.SUCCESS
    assert bytes((await client.invoke(addr, route_request("TopicTest"), TIMEOUT)).body) == ROUTE_OF_TOPIC_TEST


async def test_slave_registration_returns_master_and_ha_address(
    start_namesrv: StartNamesrv, client: RemotingClient
) -> None:
    _, addr = await start_namesrv()
    await client.invoke(addr, java_register_request(), TIMEOUT)
    slave = java_register_request(broker_addr="127.0.0.2:10911", broker_id=1)
    response = await client.invoke(addr, slave, TIMEOUT)
    assert response.ext_fields == {"haServerAddr": "127.0.0.1:10912", "masterAddr": "127.0.0.1:10911"}


async def _closed(server: NamesrvServer) -> trio.Event:
    """An event set once the server has handled a connection close (our listener runs after the route table's)."""
    event = trio.Event()

    def on_close(_: Connection) -> None:
        event.set()

    server.remoting_server.add_close_listener(on_close)
    return event


async def test_closing_the_broker_connection_removes_its_routes_at_once(
    start_namesrv: StartNamesrv, client: RemotingClient
) -> None:
    server, addr = await start_namesrv()
    async with RemotingClient() as broker:
        assert (await broker.invoke(addr, java_register_request(), TIMEOUT)).code == ResponseCode.SUCCESS
        assert (await client.invoke(addr, route_request("TopicTest"), TIMEOUT)).code == ResponseCode.SUCCESS
        closed = await _closed(server)
        broker.close_connection(addr)
        with trio.fail_after(TIMEOUT):
            await closed.wait()
    assert (await client.invoke(addr, route_request("TopicTest"), TIMEOUT)).code == ResponseCode.TOPIC_NOT_EXIST
    info = ClusterInfo.decode((await client.invoke(addr, request(RequestCode.GET_BROKER_CLUSTER_INFO), TIMEOUT)).body)
    assert info == ClusterInfo()


async def test_a_client_connection_closing_leaves_routes_alone(
    start_namesrv: StartNamesrv, client: RemotingClient
) -> None:
    server, addr = await start_namesrv()
    await client.invoke(addr, java_register_request(), TIMEOUT)
    async with RemotingClient() as other:
        assert (await other.invoke(addr, route_request("TopicTest"), TIMEOUT)).code == ResponseCode.SUCCESS
        closed = await _closed(server)
        other.close_connection(addr)
        with trio.fail_after(TIMEOUT):
            await closed.wait()
    assert (await client.invoke(addr, route_request("TopicTest"), TIMEOUT)).code == ResponseCode.SUCCESS


async def test_several_name_servers_side_by_side_each_answer(
    start_namesrv: StartNamesrv, client: RemotingClient
) -> None:
    addrs = [(await start_namesrv(name=f"ns{i}"))[1] for i in range(3)]
    async with RemotingClient() as broker:
        for addr in addrs:
            assert (await broker.invoke(addr, java_register_request(), TIMEOUT)).code == ResponseCode.SUCCESS
        for addr in addrs:
            assert bytes((await client.invoke(addr, route_request("TopicTest"), TIMEOUT)).body) == ROUTE_OF_TOPIC_TEST


async def test_topic_admin_requests(start_namesrv: StartNamesrv, client: RemotingClient) -> None:
    _, addr = await start_namesrv()
    await client.invoke(addr, java_register_request(), TIMEOUT)

    async def call(code: int, fields: dict[str, str] | None = None) -> tuple[int, dict[str, str], bytes]:
        response = await client.invoke(addr, request(code, fields), TIMEOUT)
        return response.code, response.ext_fields, bytes(response.body)

    code, _, body = await call(RequestCode.GET_ALL_TOPIC_LIST_FROM_NAMESERVER)
    assert (code, TopicList.decode(body)) == (ResponseCode.SUCCESS, TopicList(["TopicTest"]))
    _, _, body = await call(RequestCode.GET_TOPICS_BY_CLUSTER, {"cluster": "DefaultCluster"})
    assert TopicList.decode(body) == TopicList(["TopicTest"])
    _, fields, _ = await call(RequestCode.WIPE_WRITE_PERM_OF_BROKER, {"brokerName": "broker-a"})
    assert fields == {"wipeTopicCount": "1"}
    _, _, body = await call(RequestCode.GET_ROUTEINFO_BY_TOPIC, {"topic": "TopicTest"})
    assert TopicRouteData.decode(body).queue_datas[0].perm == 4
    _, fields, _ = await call(RequestCode.ADD_WRITE_PERM_OF_BROKER, {"brokerName": "broker-a"})
    assert fields == {"addTopicCount": "1"}
    assert (await call(RequestCode.DELETE_TOPIC_IN_NAMESRV, {"topic": "TopicTest"}))[0] == ResponseCode.SUCCESS
    assert (await call(RequestCode.GET_ROUTEINFO_BY_TOPIC, {"topic": "TopicTest"}))[0] == ResponseCode.TOPIC_NOT_EXIST


async def test_query_data_version_reports_change(start_namesrv: StartNamesrv, client: RemotingClient) -> None:
    _, addr = await start_namesrv()
    await client.invoke(addr, java_register_request(), TIMEOUT)
    fields = {
        "brokerName": "broker-a",
        "brokerAddr": "127.0.0.1:10911",
        "clusterName": "DefaultCluster",
        "brokerId": "0",
    }
    same = DataVersion(timestamp=1700000000000, counter=3)
    response = await client.invoke(
        addr, request(RequestCode.QUERY_DATA_VERSION, fields, encode_data_version(same)), TIMEOUT
    )
    assert response.ext_fields == {"changed": "false"}
    assert decode_data_version(response.body) == same
    newer = same.next_version(1700000000001)
    response = await client.invoke(
        addr, request(RequestCode.QUERY_DATA_VERSION, fields, encode_data_version(newer)), TIMEOUT
    )
    assert response.ext_fields == {"changed": "true"}


async def test_kv_config_survives_a_restart(
    start_namesrv: StartNamesrv, client: RemotingClient, tmp_path: Path
) -> None:
    async def call(addr: str, code: int, fields: dict[str, str]) -> tuple[int, dict[str, str], bytes, str | None]:
        r = await client.invoke(addr, request(code, fields), TIMEOUT)
        return r.code, r.ext_fields, bytes(r.body), r.remark

    kv_path = str(tmp_path / "kv" / "kvConfig.json")
    ns = {"namespace": "ORDER_TOPIC_CONFIG"}
    async with trio.open_nursery() as first_run:
        config = NamesrvConfig(listen_port=0, listen_host="127.0.0.1", kv_config_path=kv_path)
        host, port = await first_run.start(NamesrvServer(config).serve)
        addr = f"{host}:{port}"
        assert (await call(addr, RequestCode.PUT_KV_CONFIG, {**ns, "key": "T", "value": "broker-a:4"}))[0] == 0
        assert (await call(addr, RequestCode.PUT_KV_CONFIG, {**ns, "key": "U", "value": "broker-a:2"}))[0] == 0
        assert (await call(addr, RequestCode.DELETE_KV_CONFIG, {**ns, "key": "U"}))[0] == 0
        first_run.cancel_scope.cancel()

    _, again = await start_namesrv(kv_config_path=kv_path)
    code, fields, _, _ = await call(again, RequestCode.GET_KV_CONFIG, {**ns, "key": "T"})
    assert (code, fields) == (ResponseCode.SUCCESS, {"value": "broker-a:4"})
    code, _, _, remark = await call(again, RequestCode.GET_KV_CONFIG, {**ns, "key": "U"})
    assert (code, remark) == (ResponseCode.QUERY_NOT_FOUND, "No config item, Namespace: ORDER_TOPIC_CONFIG Key: U")
    code, _, body, _ = await call(again, RequestCode.GET_KVLIST_BY_NAMESPACE, ns)
    assert (code, KVTable.decode(body)) == (ResponseCode.SUCCESS, KVTable({"T": "broker-a:4"}))
    code, _, _, remark = await call(again, RequestCode.GET_KVLIST_BY_NAMESPACE, {"namespace": "none"})
    assert (code, remark) == (ResponseCode.QUERY_NOT_FOUND, "No config item, Namespace: none")
    # The order config travels back to a registering broker, and into routes when order messages are enabled.
    response = await client.invoke(again, java_register_request(), TIMEOUT)
    assert KVTable.decode(response.body) == KVTable({"T": "broker-a:4"})


async def test_order_topic_conf_appears_when_order_messages_are_enabled(
    start_namesrv: StartNamesrv, client: RemotingClient
) -> None:
    _, addr = await start_namesrv(order_message_enable=True)
    assert await order_conf_in_route(client, addr) == "broker-a:4"
