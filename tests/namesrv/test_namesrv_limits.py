"""The name server's listener limits: the broker's ``serverMaxConnections`` / ``serverMaxRequestsInFlight`` /
``serverMaxBufferedBytes``, read from its properties file and enforced on its port."""

from __future__ import annotations

from pathlib import Path

import pytest
import trio
import trio.testing

from namesrv.config import load_namesrv_config
from remoting.client import RemotingClient
from remoting.codec.codes import RequestCode, ResponseCode
from remoting.codec.command import request
from tests.namesrv.conftest import StartNamesrv, route_request
from tests.remoting.helpers import RawPeer, listen_backlog


def test_the_limits_are_read_from_the_properties_file(tmp_path: Path) -> None:
    props = tmp_path / "namesrv.properties"
    props.write_text("serverMaxConnections=3\nserverMaxRequestsInFlight=16\nserverMaxBufferedBytes=65536\n")
    config, unknown = load_namesrv_config(props)
    assert unknown == []
    server_config = config.listener_config(120.0)
    assert (server_config.max_connections, server_config.max_requests_in_flight) == (3, 16)
    assert server_config.max_buffered_bytes == 65536
    assert load_namesrv_config(None, server_max_connections=0)[0].listener_config(1.0).max_connections is None


async def test_connections_beyond_the_name_servers_cap_are_closed(start_namesrv: StartNamesrv) -> None:
    server, address = await start_namesrv(server_max_connections=1)
    host, port = address.rsplit(":", 1)
    first = await RawPeer.connect((host, int(port)))
    await first.send(route_request("TopicTest"))
    assert await first.receive() is not None  # answered (17: no route), so the connection is served
    second = await RawPeer.connect((host, int(port)))
    await second.send(route_request("TopicTest"))
    try:
        refused = await second.receive()
    except trio.BrokenResourceError:
        refused = None
    assert refused is None and server.remoting_server.refused_connections == 1
    await first.aclose()
    await second.aclose()


@pytest.mark.parametrize("idle", [0, -1])
async def test_a_max_idle_time_of_zero_or_less_never_closes_a_connection(
    start_namesrv: StartNamesrv, idle: float
) -> None:
    """NettyRemotingServer's ``IdleStateHandler(0, 0, serverChannelMaxIdleTimeSeconds)`` checks nothing when the
    time is 0 or less (Netty disables an idle time <= 0): connections stay open. The name server closed every
    connection before reading its first request."""
    _, address = await start_namesrv(server_channel_max_idle_time_seconds=idle)
    host, port = address.rsplit(":", 1)
    peer = await RawPeer.connect((host, int(port)))
    for _ in range(2):
        await peer.send(route_request("TopicTest"))
        assert await peer.receive() is not None  # answered (no route), on the same connection
    await peer.aclose()


async def test_an_updated_max_idle_time_applies_to_connections_opened_after_it(
    start_namesrv: StartNamesrv, client: RemotingClient, mock_clock: trio.testing.MockClock, tmp_path: Path
) -> None:
    """NettyRemotingServer gives each new channel an ``IdleStateHandler`` built from NettyServerConfig's
    ``serverChannelMaxIdleTimeSeconds`` at that moment (remoting/src/main/java/org/apache/rocketmq/remoting/netty/
    NettyRemotingServer.java ``initChannel``, 4.9.8), a field UPDATE_NAMESRV_CONFIG sets (Configuration.update): a
    connection opened after the update is closed after the new idle time. The name server kept the start's 120 s
    until its next start."""
    server, address = await start_namesrv(config_store_path=str(tmp_path / "namesrv.properties"))
    update = request(RequestCode.UPDATE_NAMESRV_CONFIG, body=b"serverChannelMaxIdleTimeSeconds=5\n")
    assert (await client.invoke(address, update, 5.0)).code == ResponseCode.SUCCESS
    host, port = address.rsplit(":", 1)
    peer = await RawPeer.connect((host, int(port)))
    await peer.send(route_request("TopicTest"))
    assert await peer.receive() is not None  # served (no route)
    assert len(server.remoting_server.connections) == 2
    mock_clock.jump(6)
    await trio.testing.wait_all_tasks_blocked()
    assert len(server.remoting_server.connections) == 1, "the idle connection was not closed after 5 s"
    await peer.aclose()


async def test_server_socket_backlog_sizes_the_name_servers_listen_backlog(start_namesrv: StartNamesrv) -> None:
    """NettyServerConfig's ``serverSocketBacklog`` is the listener's ``SO_BACKLOG`` (remoting/src/main/java/org/
    apache/rocketmq/remoting/netty/NettyRemotingServer.java); the name server listened with 1024 whatever it was."""
    _, address = await start_namesrv(server_socket_backlog=5)
    assert listen_backlog(int(address.rsplit(":", 1)[1])) == 5


@pytest.mark.parametrize("backlog", [0, -1])
async def test_a_server_socket_backlog_below_one_listens_as_javas_listener_does(
    start_namesrv: StartNamesrv, backlog: int
) -> None:
    """NettyRemotingServer's listener is Netty's NIO channel (remoting/src/main/java/org/apache/rocketmq/remoting/
    netty/NettyRemotingServer.java, ``useEpollNativeSelector`` false), which binds through the JDK's
    ServerSocketChannel: a backlog of 0 is its default, 50. Netty refuses a negative ``SO_BACKLOG`` (a logged
    warning) and keeps its own default, the kernel's ``somaxconn``. Both listened with a backlog of 0, which holds
    one pending connection."""
    _, address = await start_namesrv(server_socket_backlog=backlog)
    somaxconn = int(Path("/proc/sys/net/core/somaxconn").read_text())
    assert listen_backlog(int(address.rsplit(":", 1)[1])) == (50 if backlog == 0 else somaxconn)
