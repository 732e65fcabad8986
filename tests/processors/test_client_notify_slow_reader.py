"""One consumer that stops reading its socket must not stall NOTIFY_CONSUMER_IDS_CHANGED for every group (found by a
review; failed before).

RocketMQ 4.9.8 (broker/client/DefaultConsumerIdsChangeListener.java -> Broker2Client.notifyConsumerIdsChanged) sends
each notification with ``remotingServer.invokeOneway(channel, request, 10)``: a non-blocking Netty write, at most a
10 ms wait for a oneway permit. The notification task here awaited each member's send in turn, and a send waits for
the peer's backlog to drain once more than SEND_HIGH_WATER (4 MiB) is queued, so a member that did not read blocked
every later notification of every group.
"""

from __future__ import annotations

import socket

import trio
import trio.testing

from broker.client_registry import ClientRegistry
from remoting.codec.bodies import ConsumeFromWhere, ConsumeType, MessageModel, SubscriptionData
from remoting.codec.codes import LanguageCode, RequestCode
from remoting.connection import SEND_HIGH_WATER, Connection
from tests.remoting.helpers import RawPeer, ignore_requests, tcp_pair

PUSH = ConsumeType.CONSUME_PASSIVELY
CLUSTERING = MessageModel.CLUSTERING
LAST = ConsumeFromWhere.CONSUME_FROM_LAST_OFFSET
#: Java clients accept group names up to 255 characters (Validators.CHARACTER_MAX_LENGTH).
BUSY_GROUP = "g" * 255


def served(nursery: trio.Nursery, port: int, *, small_buffers: bool = False) -> tuple[Connection, trio.SocketStream]:
    """A broker-side connection over a real 127.0.0.1 socket pair, and the client's end of it."""
    a, b = tcp_pair()
    if small_buffers:
        a.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 4096)
        b.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    conn = Connection(trio.SocketStream(trio.socket.from_stdlib_socket(a)), ("127.0.0.1", port), ("127.0.0.1", 10911))
    nursery.start_soon(conn.run, ignore_requests)
    return conn, trio.SocketStream(trio.socket.from_stdlib_socket(b))


def join(registry: ClientRegistry, group: str, conn: Connection, client_id: str) -> None:
    info = registry.channel_info(conn, client_id, LanguageCode.JAVA, 409)
    registry.register_consumer(group, info, PUSH, CLUSTERING, LAST, (SubscriptionData("T"),))


async def test_a_consumer_that_does_not_read_does_not_stall_other_groups_notifications(
    autojump_clock: trio.testing.MockClock,
) -> None:
    registry = ClientRegistry()
    async with trio.open_nursery() as nursery:
        await nursery.start(registry.run)
        # The stuck consumer: a member of a busy group whose process stopped reading (never reads its socket).
        stuck, _stuck_end = served(nursery, 1, small_buffers=True)
        join(registry, BUSY_GROUP, stuck, "stuck")
        # Members of the busy group come and go: each change notifies the stuck member too (~330 bytes a frame).
        churn, churn_end = served(nursery, 2)
        churn_reader = RawPeer(churn_end)
        nursery.start_soon(_drain, churn_reader)
        frame = 330
        for i in range((SEND_HIGH_WATER // frame + 2000) // 2):
            join(registry, BUSY_GROUP, churn, f"churn-{i}")
            registry.unregister_consumer(BUSY_GROUP, churn)
        await trio.testing.wait_all_tasks_blocked()

        # Meanwhile, in another group, a consumer is waiting to be told that a second member joined.
        victim, victim_end = served(nursery, 3)
        join(registry, "victim_group", victim, "victim")
        newcomer, newcomer_end = served(nursery, 4)
        nursery.start_soon(_drain, RawPeer(newcomer_end))
        victim_reader = RawPeer(victim_end)
        seen: list[str] = []
        with trio.move_on_after(5):  # virtual seconds; RocketMQ waits at most 10 ms per notification
            first = await victim_reader.receive()  # its own arrival
            join(registry, "victim_group", newcomer, "newcomer")
            second = await victim_reader.receive()  # the newcomer's
            seen = [c.ext_fields["consumerGroup"] for c in (first, second) if c is not None]
            assert all(c is not None and c.code == RequestCode.NOTIFY_CONSUMER_IDS_CHANGED for c in (first, second))
        assert seen == ["victim_group", "victim_group"], (
            f"the victim was told {seen} within 5 virtual seconds: the notification task waits for the stuck "
            f"member's {stuck._outbox_bytes} queued bytes to drain ({registry.notifications_sent} sent)"
        )
        nursery.cancel_scope.cancel()


async def _drain(peer: RawPeer) -> None:
    while await peer.receive() is not None:
        pass
