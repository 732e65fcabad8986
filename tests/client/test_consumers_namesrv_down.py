"""Consumers started while no name server answers, as Java's clients: nothing the application calls at start
raises for it, and consumption begins once the name server is back. The name server is reached through a listener
of this test, forwarding to the cluster's name server, that is closed (connections refused) and opened again on the
same port."""

from __future__ import annotations

import contextlib

import anyio
import anyio.abc
import pytest

from client.consumer.lite_pull import LitePullConsumer
from client.message import MessageExt
from remoting.codec.bodies import ConsumeFromWhere
from tests.client.helpers import HANG_GUARD, create_topic, fill_queues
from tests.threaded_cluster import ThreadedCluster

pytestmark = pytest.mark.anyio

FIRST = ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET


class NamesrvDoor:
    """A TCP listener on a fixed 127.0.0.1 port forwarding to the name server at ``target``: closed (refusing
    connections) until :meth:`open`."""

    def __init__(self, target: str) -> None:
        host, _, port = target.rpartition(":")
        self.target = (host, int(port))
        self.port = 0

    @property
    def addr(self) -> str:
        return f"127.0.0.1:{self.port}"

    async def reserve(self) -> None:
        """Pick a free port, then close it again: a name server that is down."""
        listener = await anyio.create_tcp_listener(local_host="127.0.0.1", local_port=0)
        self.port = listener.extra(anyio.abc.SocketAttribute.local_port)
        await listener.aclose()

    async def open(self, tg: anyio.abc.TaskGroup) -> None:
        listener = await anyio.create_tcp_listener(local_host="127.0.0.1", local_port=self.port)
        tg.start_soon(listener.serve, self._forward)

    async def _forward(self, client: anyio.abc.SocketStream) -> None:
        async with client, await anyio.connect_tcp(*self.target) as upstream, anyio.create_task_group() as tg:
            tg.start_soon(_pump, client, upstream)
            tg.start_soon(_pump, upstream, client)


async def _pump(source: anyio.abc.SocketStream, sink: anyio.abc.SocketStream) -> None:
    with contextlib.suppress(anyio.BrokenResourceError, anyio.ClosedResourceError):
        async for data in source:
            await sink.send(data)
        await sink.send_eof()


async def test_lite_pull_assign_with_the_name_server_down_is_consumed_once_it_is_back(cluster: ThreadedCluster) -> None:
    """Java's ``DefaultLitePullConsumerImpl.assign`` asks no name server: it records the queues and starts their pull
    tasks, which look the broker up (``updateTopicRouteInfoFromNameServer``) before each try. So an assign while the
    name server is down succeeds, lists the queues, and they are consumed once the name server answers. Before: the
    assign raised TopicRouteNotFoundError and kept nothing."""
    await create_topic(cluster.namesrv_addr, "LiteAssignNsDown", queues=1)
    (mq,) = await fill_queues(cluster.namesrv_addr, "LiteAssignNsDown", per_queue=2)
    door = NamesrvDoor(cluster.namesrv_addr)
    await door.reserve()
    async with anyio.create_task_group() as tg:
        async with LitePullConsumer("lite-assign-ns-down", door.addr, consume_from_where=FIRST) as consumer:
            await consumer.assign([mq])
            assert consumer.assignment() == {mq}
            await door.open(tg)
            got: list[MessageExt] = []
            with anyio.move_on_after(HANG_GUARD):
                while len(got) < 2:
                    got.extend(await consumer.poll(timeout=0.3))
            assert sorted(m.body for m in got) == [b"broker-a-0-0", b"broker-a-0-1"]
        tg.cancel_scope.cancel()


async def test_lite_pull_seek_of_a_queue_assigned_while_the_name_server_was_down(cluster: ThreadedCluster) -> None:
    """Java's ``seek`` asks the broker for the queue's bounds through ``MQAdminImpl.minOffset``/``maxOffset``
    (client/src/main/java/org/apache/rocketmq/client/impl/MQAdminImpl.java), which look the topic's route up when
    the broker is not known yet. So a queue assigned while the name server was down can be seeked once it is back,
    before any pull found the route (the queue is paused here, so none does). Before: "no address for broker"."""
    await create_topic(cluster.namesrv_addr, "LiteSeekNsDown", queues=1)
    (mq,) = await fill_queues(cluster.namesrv_addr, "LiteSeekNsDown", per_queue=3)
    door = NamesrvDoor(cluster.namesrv_addr)
    await door.reserve()
    async with anyio.create_task_group() as tg:
        async with LitePullConsumer("lite-seek-ns-down", door.addr, consume_from_where=FIRST) as consumer:
            await consumer.assign([mq])
            consumer.pause([mq])  # once assigned: a pause of a queue not assigned is ignored, as Java's
            await door.open(tg)
            await consumer.seek(mq, 2)
            consumer.resume([mq])
            got: list[MessageExt] = []
            with anyio.move_on_after(HANG_GUARD):
                while not got:
                    got.extend(await consumer.poll(timeout=0.3))
            assert [m.body for m in got] == [b"broker-a-0-2"]
        tg.cancel_scope.cancel()
