"""Name servers on 127.0.0.1 port 0, and register requests shaped the way a Java 4.9.8 broker sends them."""

from __future__ import annotations

import re
import signal
import zlib
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest
import trio

from namesrv.config import NamesrvConfig
from namesrv.server import NamesrvServer
from remoting.client import RemotingClient
from remoting.codec.bodies import TopicRouteData
from remoting.codec.codes import LanguageCode, RequestCode
from remoting.codec.command import RemotingCommand, request

#: The body a 4.9.8 broker named broker-a sends with one user topic ``TopicTest`` (4 queues) at DataVersion 3.
JAVA_REGISTER_BODY = (
    b'{"filterServerList":[],"topicConfigSerializeWrapper":{"dataVersion":{"counter":3,"timestamp":1700000000000},'
    b'"topicConfigTable":{"TopicTest":{"order":false,"perm":6,"readQueueNums":4,"topicFilterType":"SINGLE_TAG",'
    b'"topicName":"TopicTest","topicSysFlag":0,"writeQueueNums":4}}}}'
)

ROUTE_OF_TOPIC_TEST = (
    b'{"brokerDatas":[{"brokerAddrs":{"0":"127.0.0.1:10911"},"brokerName":"broker-a","cluster":"DefaultCluster"}],'
    b'"filterServerTable":{},"queueDatas":[{"brokerName":"broker-a","perm":6,"readQueueNums":4,"topicSysFlag":0,'
    b'"writeQueueNums":4}]}'
)


#: The line ``mqnamesrv`` prints once it listens, with its address.
BOOT = re.compile(rb"The Name Server boot success\. serializeType=JSON, address (\S+):(\d+)\n")


@asynccontextmanager
async def namesrv_process(argv: list[str], **options: Any) -> AsyncIterator[trio.Process]:
    """``argv`` (an ``mqnamesrv``) as a child process, ``options`` passed to ``trio.lowlevel.open_process``; killed
    and reaped on the way out unless it has exited."""
    proc = await trio.lowlevel.open_process(argv, **options)
    try:
        yield proc
    finally:
        if proc.returncode is None:
            proc.kill()
            await proc.wait()


async def stop_with_sigint(proc: trio.Process) -> None:
    """SIGINT to a running name server: it must exit with status 0 (30 s, a hang guard, no threshold)."""
    proc.send_signal(signal.SIGINT)
    with trio.fail_after(30):
        assert await proc.wait() == 0


def java_register_request(
    body: bytes = JAVA_REGISTER_BODY,
    *,
    broker_addr: str = "127.0.0.1:10911",
    broker_id: int = 0,
    broker_name: str = "broker-a",
    cluster: str = "DefaultCluster",
    compressed: bool = False,
    crc: int | None = None,
) -> RemotingCommand:
    fields = {
        "brokerAddr": broker_addr,
        "brokerId": str(broker_id),
        "brokerName": broker_name,
        "clusterName": cluster,
        "compressed": "true" if compressed else "false",
        "haServerAddr": broker_addr.rsplit(":", 1)[0] + ":10912",
        "bodyCrc32": str(zlib.crc32(body) & 0x7FFFFFFF if crc is None else crc),
    }
    return request(RequestCode.REGISTER_BROKER, fields, body, language=LanguageCode.JAVA)


def route_request(topic: str) -> RemotingCommand:
    return request(RequestCode.GET_ROUTEINFO_BY_TOPIC, {"topic": topic})


StartNamesrv = Callable[..., Awaitable[tuple[NamesrvServer, str]]]


async def order_conf_in_route(client: RemotingClient, addr: str) -> str | None:
    """Register the Java broker-a of :data:`JAVA_REGISTER_BODY` with the name server at ``addr``, put TopicTest's
    order config ``broker-a:4`` (PUT_KV_CONFIG), and return the ``orderTopicConf`` of TopicTest's route."""
    await client.invoke(addr, java_register_request(), 10.0)
    fields = {"namespace": "ORDER_TOPIC_CONFIG", "key": "TopicTest", "value": "broker-a:4"}
    await client.invoke(addr, request(RequestCode.PUT_KV_CONFIG, fields), 10.0)
    route = TopicRouteData.decode((await client.invoke(addr, route_request("TopicTest"), 10.0)).body)
    return route.order_topic_conf


@pytest.fixture
async def start_namesrv(nursery: trio.Nursery, tmp_path: Path) -> StartNamesrv:
    """``await start_namesrv(name="a", config_file=None, **config)`` -> (server, "127.0.0.1:port"); stopped with the
    test's nursery. ``config_file`` is ``mqnamesrv -c``'s (its properties registered, not read into the config)."""

    async def start(
        name: str = "ns", config_file: Path | None = None, **overrides: object
    ) -> tuple[NamesrvServer, str]:
        settings: dict[str, object] = {
            "listen_port": 0,
            "listen_host": "127.0.0.1",
            "kv_config_path": str(tmp_path / name / "kvConfig.json"),
            "config_store_path": str(tmp_path / name / "namesrv.properties"),  # the default is under $HOME
        }
        settings.update(overrides)
        server = NamesrvServer(NamesrvConfig(**settings), config_file)  # type: ignore[arg-type]
        host, port = await nursery.start(server.serve)
        return server, f"{host}:{port}"

    return start


@pytest.fixture
async def client() -> AsyncIterator[RemotingClient]:
    async with RemotingClient() as c:
        yield c
