"""NamesrvConfig's ``clusterTest`` and ``productEnvName`` (4.9.8): with ``clusterTest=true`` NamesrvController registers
namesrv/src/main/java/org/apache/rocketmq/namesrv/processor/ClusterTestRequestProcessor.java, which answers a topic it
does not route from the product environment's name servers (a DefaultMQAdminExt of unit ``productEnvName``, its name
servers from ``NAMESRV_ADDR``) and puts the ORDER_TOPIC_CONFIG entry in every route it knows. Found by a review: both
settings were unknown, ``mqnamesrv`` ignored them and GET_NAMESRV_CONFIG left them out."""

from __future__ import annotations

from pathlib import Path

import pytest

from remoting.client import RemotingClient
from remoting.codec.codes import RequestCode, ResponseCode
from remoting.codec.command import request
from remoting.tls import client_context
from tests.namesrv.conftest import (
    ROUTE_OF_TOPIC_TEST,
    StartNamesrv,
    java_register_request,
    order_conf_in_route,
    route_request,
)

TIMEOUT = 10.0


async def test_cluster_test_mode_answers_an_unknown_topic_from_the_product_environment(
    start_namesrv: StartNamesrv, client: RemotingClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    _, product = await start_namesrv(name="product")
    assert (await client.invoke(product, java_register_request(), TIMEOUT)).code == ResponseCode.SUCCESS
    monkeypatch.setenv("NAMESRV_ADDR", product)
    _, test_env = await start_namesrv(name="test", cluster_test=True, product_env_name="center")
    answer = await client.invoke(test_env, route_request("TopicTest"), TIMEOUT)
    assert (answer.code, bytes(answer.body)) == (ResponseCode.SUCCESS, ROUTE_OF_TOPIC_TEST)
    missing = await client.invoke(test_env, route_request("Nowhere"), TIMEOUT)
    assert missing.code == ResponseCode.TOPIC_NOT_EXIST
    assert missing.remark is not None and missing.remark.startswith(
        "No topic route info in name server for the topic: Nowhere"
    )


async def test_cluster_test_mode_routes_carry_the_order_conf_without_order_message_enable(
    start_namesrv: StartNamesrv, client: RemotingClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("NAMESRV_ADDR", raising=False)
    _, addr = await start_namesrv(cluster_test=True)
    assert await order_conf_in_route(client, addr) == "broker-a:4"


async def test_cluster_test_and_product_env_name_are_settings_with_javas_defaults(
    start_namesrv: StartNamesrv, client: RemotingClient
) -> None:
    _, addr = await start_namesrv()
    answer = await client.invoke(addr, request(RequestCode.GET_NAMESRV_CONFIG, {}), TIMEOUT)
    lines = bytes(answer.body).decode().splitlines()
    assert "productEnvName=center" in lines and "clusterTest=false" in lines


async def test_cluster_test_mode_asks_the_product_environment_over_tls_when_tls_enable_is_set(
    start_namesrv: StartNamesrv, client: RemotingClient, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """ClusterTestRequestProcessor's DefaultMQAdminExt takes ``useTLS`` from ClientConfig's default,
    ``TlsSystemConfig.tlsEnable`` (the name server's ``tls.enable``), and its NettyRemotingClient then builds its
    context with ``TlsHelper.buildSslContext(true)`` from the name server's ``tls.*`` settings: a test environment told
    ``tls.enable=true`` reaches an enforcing product environment. Before: always plaintext, so the product name server
    closed the connection and every route it held was TOPIC_NOT_EXIST."""
    absent = str(tmp_path / "absent.properties")
    _, product = await start_namesrv(name="product", tls_server_mode="enforcing", tls_config_file=absent)
    async with RemotingClient(ssl_context=client_context()) as secure:  # open: the route lives with its channel
        assert (await secure.invoke(product, java_register_request(), TIMEOUT)).code == ResponseCode.SUCCESS
        monkeypatch.setenv("NAMESRV_ADDR", product)
        _, test_env = await start_namesrv(
            name="test", cluster_test=True, product_env_name="center", tls_enable=True, tls_config_file=absent
        )
        answer = await client.invoke(test_env, route_request("TopicTest"), TIMEOUT)
    assert (answer.code, bytes(answer.body)) == (ResponseCode.SUCCESS, ROUTE_OF_TOPIC_TEST)
