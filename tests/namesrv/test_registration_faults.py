"""REGISTER_BROKER bodies that must not damage the route table: numbers past a Java int are refused, and a broker
before V3_0_11 keeps its filter servers (DefaultRequestProcessor.java, 4.9.8). Found by a review; failed before."""

from __future__ import annotations

import attrs

from remoting.client import RemotingClient
from remoting.codec.bodies import RegisterBrokerBody, TopicConfigSerializeWrapper, TopicRouteData
from remoting.codec.codes import ResponseCode
from tests.namesrv.conftest import StartNamesrv, java_register_request, route_request

TIMEOUT = 5.0

HUGE_BODY = (
    b'{"filterServerList":[],"topicConfigSerializeWrapper":{"dataVersion":{"counter":1,"timestamp":1},'
    b'"topicConfigTable":{"TopicTest":{"perm":6,"readQueueNums":"99999999999999999999999","topicName":"TopicTest",'
    b'"writeQueueNums":4}}}}'
)


async def test_out_of_range_queue_count_does_not_poison_the_topic_route(
    start_namesrv: StartNamesrv, client: RemotingClient
) -> None:
    """Java decodes the body with fastjson into TopicConfig's int fields: an out-of-range number fails the decode
    (RegisterBrokerBody.decode -> RemotingCommandException, SYSTEM_ERROR) and nothing is stored. Before, the value was
    stored and every later GET_ROUTEINFO_BY_TOPIC of the topic failed to encode, also for the legitimate broker-a."""
    _, addr = await start_namesrv()
    assert (await client.invoke(addr, java_register_request(), TIMEOUT)).code == ResponseCode.SUCCESS
    huge = java_register_request(HUGE_BODY, broker_addr="127.0.0.1:20911", broker_name="broker-z")
    assert (await client.invoke(addr, huge, TIMEOUT)).code == ResponseCode.SYSTEM_ERROR
    route = await client.invoke(addr, route_request("TopicTest"), TIMEOUT)
    assert (route.code, route.remark) == (ResponseCode.SUCCESS, None)
    assert "broker-a" in [qd.broker_name for qd in TopicRouteData.decode(route.body).queue_datas]


async def test_pre_3_0_11_registration_keeps_the_filter_servers(
    start_namesrv: StartNamesrv, client: RemotingClient
) -> None:
    """DefaultRequestProcessor.registerBroker (the < V3_0_11 path, 4.9.8) passes filterServerList=null to
    RouteInfoManager.registerBroker, which then leaves filterServerTable alone (it was cleared before)."""
    _, addr = await start_namesrv()
    with_servers = RegisterBrokerBody.decode(b'{"filterServerList":["10.0.0.9:30000"],' + JAVA_BODY_TAIL)
    first = java_register_request(with_servers.encode())
    assert (await client.invoke(addr, first, TIMEOUT)).code == ResponseCode.SUCCESS
    before = TopicRouteData.decode((await client.invoke(addr, route_request("TopicTest"), TIMEOUT)).body)
    assert before.filter_server_table == {"127.0.0.1:10911": ["10.0.0.9:30000"]}
    wrapper = with_servers.topic_config_serialize_wrapper
    legacy = attrs.evolve(java_register_request(TopicConfigSerializeWrapper.encode(wrapper)), version=36)
    assert (await client.invoke(addr, legacy, TIMEOUT)).code == ResponseCode.SUCCESS
    route = TopicRouteData.decode((await client.invoke(addr, route_request("TopicTest"), TIMEOUT)).body)
    assert route.filter_server_table == {"127.0.0.1:10911": ["10.0.0.9:30000"]}


JAVA_BODY_TAIL = (
    b'"topicConfigSerializeWrapper":{"dataVersion":{"counter":3,"timestamp":1700000000000},'
    b'"topicConfigTable":{"TopicTest":{"order":false,"perm":6,"readQueueNums":4,"topicFilterType":"SINGLE_TAG",'
    b'"topicName":"TopicTest","topicSysFlag":0,"writeQueueNums":4}}}}'
)
