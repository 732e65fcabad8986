"""The processor as command in, command out: no sockets, a real route table and KV file under tmp_path."""

from __future__ import annotations

from pathlib import Path

import attrs
import pytest

from namesrv.kv_config import KVConfigManager
from namesrv.processor import NamesrvProcessor
from namesrv.route_table import RouteTable
from remoting.client import RemotingClient
from remoting.codec.bodies import DataVersion, TopicConfig, TopicConfigSerializeWrapper, TopicList, TopicRouteData
from remoting.codec.codes import RequestCode, ResponseCode
from remoting.codec.command import request
from tests.namesrv.conftest import StartNamesrv, java_register_request, route_request


@pytest.fixture
def processor(tmp_path: Path) -> NamesrvProcessor:
    return NamesrvProcessor(RouteTable(), KVConfigManager(tmp_path / "kvConfig.json"), clock=lambda: 0.0)


async def test_register_from_a_pre_3_0_11_broker_takes_the_bare_wrapper(processor: NamesrvProcessor) -> None:
    wrapper = TopicConfigSerializeWrapper({"Old": TopicConfig("Old", 2, 2)}, DataVersion(5, 1))
    legacy = attrs.evolve(java_register_request(wrapper.encode()), version=36)
    assert (await processor.handle(legacy)).code == ResponseCode.SUCCESS
    response = await processor.handle(route_request("Old"))
    assert TopicRouteData.decode(response.body).queue_datas[0].write_queue_nums == 2


async def test_register_without_body_registers_the_broker_with_no_topics(processor: NamesrvProcessor) -> None:
    assert (await processor.handle(java_register_request(b""))).code == ResponseCode.SUCCESS
    assert processor.route_table.get_all_cluster_info().cluster_addr_table == {"DefaultCluster": ["broker-a"]}
    assert processor.route_table.query_broker_topic_config("127.0.0.1:10911") == DataVersion(0, 0)


async def test_register_with_garbage_body_is_a_system_error(processor: NamesrvProcessor) -> None:
    response = await processor.handle(java_register_request(b"{not json", crc=0))
    assert response.code == ResponseCode.SYSTEM_ERROR
    assert response.remark is not None and "JSON" in response.remark
    assert processor.route_table.get_all_cluster_info().cluster_addr_table == {}


async def test_register_with_non_numeric_broker_id_names_the_field(processor: NamesrvProcessor) -> None:
    good = java_register_request()
    bad = attrs.evolve(good, ext_fields={**good.ext_fields, "brokerId": "zero"})
    response = await processor.handle(bad)
    assert response.code == ResponseCode.SYSTEM_ERROR
    assert response.remark is not None and "brokerId" in response.remark


async def test_responses_mirror_opaque_and_carry_the_response_flag(processor: NamesrvProcessor) -> None:
    req = route_request("T")
    response = await processor.handle(req)
    assert (response.opaque, response.is_response, response.code) == (req.opaque, True, ResponseCode.TOPIC_NOT_EXIST)


async def test_every_name_server_code_is_served() -> None:
    assert set(NamesrvProcessor.request_codes()) == {
        RequestCode.REGISTER_BROKER,
        RequestCode.UNREGISTER_BROKER,
        RequestCode.QUERY_DATA_VERSION,
        RequestCode.WIPE_WRITE_PERM_OF_BROKER,
        RequestCode.ADD_WRITE_PERM_OF_BROKER,
        RequestCode.GET_ROUTEINFO_BY_TOPIC,
        RequestCode.GET_BROKER_CLUSTER_INFO,
        RequestCode.GET_ALL_TOPIC_LIST_FROM_NAMESERVER,
        RequestCode.GET_TOPICS_BY_CLUSTER,
        RequestCode.GET_SYSTEM_TOPIC_LIST_FROM_NS,
        RequestCode.DELETE_TOPIC_IN_NAMESRV,
        RequestCode.PUT_KV_CONFIG,
        RequestCode.GET_KV_CONFIG,
        RequestCode.DELETE_KV_CONFIG,
        RequestCode.GET_KVLIST_BY_NAMESPACE,
        RequestCode.GET_UNIT_TOPIC_LIST,
        RequestCode.GET_HAS_UNIT_SUB_TOPIC_LIST,
        RequestCode.GET_HAS_UNIT_SUB_UNUNIT_TOPIC_LIST,
        RequestCode.UPDATE_NAMESRV_CONFIG,
        RequestCode.GET_NAMESRV_CONFIG,
    }


async def test_system_topic_list_names_a_slave_when_no_master_is_registered(
    start_namesrv: StartNamesrv, client: RemotingClient
) -> None:
    """RouteInfoManager.getSystemTopicList (4.9.8) names a broker's first address whatever its id, and
    MQClientAPIImpl.getSystemTopicList then asks that broker for its own system topics: with only a slave registered
    (the master gone, or not yet registered) the slave is named; ``brokerAddr`` used to be left out."""
    _, addr = await start_namesrv()
    slave = java_register_request(broker_addr="127.0.0.2:10911", broker_id=1)
    assert (await client.invoke(addr, slave, 5.0)).code == ResponseCode.SUCCESS
    response = await client.invoke(addr, request(RequestCode.GET_SYSTEM_TOPIC_LIST_FROM_NS), 5.0)
    assert response.code == ResponseCode.SUCCESS
    topics = TopicList.decode(response.body)
    assert topics.topic_list == ["DefaultCluster", "broker-a"]
    assert topics.broker_addr == "127.0.0.2:10911"
