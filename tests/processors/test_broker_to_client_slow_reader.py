"""A consumer that stops reading its socket (more than SEND_HIGH_WATER, 4 MiB, queued for it) must not hold up the
broker's calls to clients (found by reviews; each failed before).

RocketMQ 4.9.8 never waits for a peer's backlog: ``invokeOneway`` is a non-blocking Netty write whose timeout bounds
only the oneway permit (broker/client/net/Broker2Client.java: NOTIFY_CONSUMER_IDS_CHANGED with 10 ms, resetOffset
with 5000 ms), and ``invokeSync``'s timeout covers the whole call (getConsumeStatus leaves out a member that fails;
broker/processor/AdminBrokerProcessor.java callConsumer answers CONSUME_MSG_TIMEOUT). Here a send waited for the
backlog to drain, and an invocation's timeout started only after that, so such a member blocked every later
notification of every group, and the admin requests that call it never answered.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from functools import partial

import trio
import trio.testing

from broker.client_registry import ClientRegistry
from broker.context import BrokerState
from processors import broker2client
from processors.consume_ops import ConsumeOpsProcessor
from remoting.codec.bodies.ops import ConsumerStatusBody
from remoting.codec.codes import RequestCode, ResponseCode
from remoting.codec.command import RemotingCommand, request
from remoting.connection import SEND_HIGH_WATER
from remoting.processor import RequestContext
from tests.processors.conftest import GROUP, TOPIC, join_consumer
from tests.remoting.helpers import RawPeer, congest, served_connection

#: Java clients accept group names up to 255 characters (Validators.CHARACTER_MAX_LENGTH).
BUSY_GROUP = "g" * 255


async def test_a_consumer_that_does_not_read_does_not_stall_other_groups_notifications(
    autojump_clock: trio.testing.MockClock,
) -> None:
    registry = ClientRegistry()
    async with trio.open_nursery() as nursery:
        await nursery.start(registry.run)
        # The stuck consumer: a member of a busy group whose process stopped reading (never reads its socket).
        stuck, _stuck_end = served_connection(nursery, 1, small_buffers=True)
        join_consumer(registry, BUSY_GROUP, stuck, "stuck")
        # Members of the busy group come and go: each change notifies the stuck member too (~330 bytes a frame),
        # unless it comes before the notification of the previous one was sent (one per group is pending at most).
        churn, churn_end = served_connection(nursery, 2)
        churn_reader = RawPeer(churn_end)
        nursery.start_soon(_drain, churn_reader)
        frame = 330
        for i in range(SEND_HIGH_WATER // frame + 2000):
            join_consumer(registry, BUSY_GROUP, churn, f"churn-{i}")
            await trio.testing.wait_all_tasks_blocked()
            registry.unregister_consumer(BUSY_GROUP, churn)
        await trio.testing.wait_all_tasks_blocked()
        assert not stuck.writable  # its outbox is over the high-water mark

        # Meanwhile, in another group, a consumer is waiting to be told that a second member joined.
        victim, victim_end = served_connection(nursery, 3)
        join_consumer(registry, "victim_group", victim, "victim")
        newcomer, newcomer_end = served_connection(nursery, 4)
        nursery.start_soon(_drain, RawPeer(newcomer_end))
        victim_reader = RawPeer(victim_end)
        seen: list[str] = []
        with trio.move_on_after(5):  # virtual seconds; RocketMQ waits at most 10 ms per notification
            first = await victim_reader.receive()  # its own arrival
            join_consumer(registry, "victim_group", newcomer, "newcomer")
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


async def answer_beside_a_stuck_member(
    broker: BrokerState, process: Callable[[RemotingCommand], Awaitable[RemotingCommand | None]], admin: RemotingCommand
) -> RemotingCommand:
    """``process(admin)``'s answer, due within 30 virtual seconds, while GROUP (on TOPIC) has a member "healthy" that
    answers GET_CONSUMER_STATUS_FROM_CLIENT and a member "stuck" that stopped reading (see ``congest``)."""
    async with trio.open_nursery() as nursery:
        stuck, _stuck_end = served_connection(nursery, 1, small_buffers=True)
        join_consumer(broker.clients, GROUP, stuck, "stuck", TOPIC)
        await congest(stuck)
        healthy, healthy_end = served_connection(nursery, 2)
        join_consumer(broker.clients, GROUP, healthy, "healthy", TOPIC)
        nursery.start_soon(_answer_status, RawPeer(healthy_end))
        with trio.fail_after(30):  # virtual seconds; Java needs at most 5 s a member
            answer = await process(admin)
        nursery.cancel_scope.cancel()
    assert answer is not None
    return answer


async def test_reset_offset_is_not_held_up_by_a_consumer_that_stopped_reading(
    broker: BrokerState, autojump_clock: trio.testing.MockClock
) -> None:
    """RESET_CONSUMER_CLIENT_OFFSET is queued for the stuck member without waiting and the admin is answered."""
    for queue_id in range(4):
        broker.offsets.commit(GROUP, TOPIC, queue_id, 0)
    fields = {"topic": TOPIC, "group": GROUP, "timestamp": "-1", "isForce": "true"}
    admin = request(RequestCode.INVOKE_BROKER_TO_RESET_OFFSET, fields)
    answer = await answer_beside_a_stuck_member(broker, partial(broker2client.reset_offset, broker), admin)
    assert answer.code == ResponseCode.SUCCESS


async def test_get_consumer_status_leaves_out_a_consumer_that_stopped_reading_after_its_timeout(
    broker: BrokerState, peer_ctx: RequestContext, autojump_clock: trio.testing.MockClock
) -> None:
    """INVOKE_BROKER_TO_GET_CONSUMER_STATUS gives up on the stuck member after 5 s and reports the healthy one."""
    admin = request(RequestCode.INVOKE_BROKER_TO_GET_CONSUMER_STATUS, {"topic": TOPIC, "group": GROUP})
    answer = await answer_beside_a_stuck_member(broker, partial(ConsumeOpsProcessor(broker).process, peer_ctx), admin)
    assert answer.code == ResponseCode.SUCCESS
    assert set(ConsumerStatusBody.decode(answer.body).consumer_table) == {"healthy"}


async def test_get_consumer_running_info_of_a_consumer_that_stopped_reading_is_consume_msg_timeout(
    broker: BrokerState, autojump_clock: trio.testing.MockClock
) -> None:
    """GET_CONSUMER_RUNNING_INFO forwarded to the stuck member answers CONSUME_MSG_TIMEOUT after its 10 s."""
    admin = request(RequestCode.GET_CONSUMER_RUNNING_INFO, {"consumerGroup": GROUP, "clientId": "stuck"})
    answer = await answer_beside_a_stuck_member(broker, partial(broker2client.consumer_running_info, broker), admin)
    assert answer.code == ResponseCode.CONSUME_MSG_TIMEOUT


async def _answer_status(peer: RawPeer) -> None:
    """A healthy consumer: answers GET_CONSUMER_STATUS_FROM_CLIENT with an empty table."""
    while (cmd := await peer.receive()) is not None:
        if cmd.code == RequestCode.GET_CONSUMER_STATUS_FROM_CLIENT:
            await peer.send(cmd.response(ResponseCode.SUCCESS, body=ConsumerStatusBody().encode()))
