"""The broker's calls to a 5.x (gRPC) client, which is in the client registry as a
:class:`proxy.sessions.GrpcClientChannel`: a Connection that never runs (no reader, no writer, no timeout sweeper)
and drops the requests it cannot turn into Telemetry commands.

RocketMQ 5.x (proxy in local mode) gives the broker's invokeSync to a gRPC client its timeout whatever the client does
with the request (remoting/netty/NettyRemotingAbstract.java invokeSyncImpl), and picks a transaction check's
producer among channels that are ``isActive() && isWritable()`` (broker/client/ProducerManager.java
getAvailableChannel; proxy/grpc/v2/channel/GrpcClientChannel.java: its Telemetry stream open). Each test hung or
failed before the deadline held without a sweeper and before channels said whether they are writable.
"""

from __future__ import annotations

import attrs
import trio
import trio.testing

from broker.context import BrokerState
from broker.transaction.check import TransactionCheckService
from processors import broker2client
from processors.consume_ops import ConsumeOpsProcessor
from processors.reply import ReplyMessageProcessor
from processors.send import SendMessageProcessor
from processors.transaction_bridge import TransactionalMessageBridge
from proxy.common import TransactionData
from proxy.pb import definition
from proxy.sessions import ClientSession, SessionTable
from remoting.codec.bodies.ops import ConsumerStatusBody
from remoting.codec.codes import RequestCode, ResponseCode
from remoting.codec.command import request
from remoting.processor import RequestContext
from tests.processors.conftest import GROUP, TOPIC, join_consumer, send_request, tags_props
from tests.remoting.helpers import RawPeer, served_connection


def grpc_push_consumer(broker: BrokerState, client_id: str) -> ClientSession:
    """A 5.x push consumer of GROUP on TOPIC as the proxy registers it: its Settings came over Telemetry, then its
    heartbeat (MessagingActivity.heartbeat -> SessionTable.heartbeat)."""
    table = SessionTable(broker, TransactionData(15))
    session = table.session(client_id, {"x-mq-language": "JAVA"})
    session.settings = definition.Settings(
        client_type=definition.ClientType.PUSH_CONSUMER,
        subscription=definition.Subscription(
            group=definition.Resource(name=GROUP),
            subscriptions=[definition.SubscriptionEntry(topic=definition.Resource(name=TOPIC))],
        ),
    )
    table.heartbeat(session, ("10.9.8.7", 50000))
    assert session.channel is not None
    return session


async def test_get_consumer_running_info_of_a_5x_consumer_times_out(
    broker: BrokerState, autojump_clock: trio.testing.MockClock
) -> None:
    """GET_CONSUMER_RUNNING_INFO for a gRPC consumer, whose channel drops the request: CONSUME_MSG_TIMEOUT after
    the call's 10 s (callConsumer's answer when invokeSync times out), not a wait that holds the admin's worker."""
    grpc_push_consumer(broker, "grpc-consumer")
    admin = request(RequestCode.GET_CONSUMER_RUNNING_INFO, {"consumerGroup": GROUP, "clientId": "grpc-consumer"})
    answer = None
    with trio.move_on_after(60):  # virtual seconds; the call's timeout is 10 s
        answer = await broker2client.consumer_running_info(broker, admin)
    assert answer is not None, "GET_CONSUMER_RUNNING_INFO to a 5.x consumer still unanswered after 60 virtual s"
    assert answer.code == ResponseCode.CONSUME_MSG_TIMEOUT


async def test_get_consumer_status_of_a_group_with_a_5x_member_answers_for_the_others(
    broker: BrokerState, peer_ctx: RequestContext, autojump_clock: trio.testing.MockClock
) -> None:
    """INVOKE_BROKER_TO_GET_CONSUMER_STATUS on a group with a 5.x member and a remoting member that answers: the
    5.x member is left out after the call's 5 s and the other reported (Java's getConsumeStatus)."""
    grpc_push_consumer(broker, "grpc-consumer")
    admin = request(RequestCode.INVOKE_BROKER_TO_GET_CONSUMER_STATUS, {"topic": TOPIC, "group": GROUP})
    answer = None
    async with trio.open_nursery() as nursery:
        healthy, healthy_end = served_connection(nursery, 2)
        join_consumer(broker.clients, GROUP, healthy, "healthy", TOPIC)
        nursery.start_soon(_answer_status, RawPeer(healthy_end))
        with trio.move_on_after(60):  # virtual seconds
            answer = await ConsumeOpsProcessor(broker).process(peer_ctx, admin)
        nursery.cancel_scope.cancel()
    assert answer is not None, "INVOKE_BROKER_TO_GET_CONSUMER_STATUS still unanswered after 60 virtual s"
    assert answer.code == ResponseCode.SUCCESS
    assert set(ConsumerStatusBody.decode(answer.body).consumer_table) == {"healthy"}


async def _answer_status(peer: RawPeer) -> None:
    while (cmd := await peer.receive()) is not None:
        if cmd.code == RequestCode.GET_CONSUMER_STATUS_FROM_CLIENT:
            await peer.send(cmd.response(ResponseCode.SUCCESS, body=ConsumerStatusBody().encode()))


def grpc_producer(table: SessionTable, client_id: str, port: int) -> ClientSession:
    """A 5.x producer publishing TOPIC as the proxy registers it: Settings from Telemetry, then a heartbeat, which
    registers its GrpcClientChannel as a producer of the group named after the topic (as RocketMQ 5.x does)."""
    session = table.session(client_id, {"x-mq-language": "JAVA"})
    session.settings = definition.Settings(
        client_type=definition.ClientType.PRODUCER,
        publishing=definition.Publishing(topics=[definition.Resource(name=TOPIC)]),
    )
    table.heartbeat(session, ("10.9.8.7", port))
    assert session.channel is not None
    return session


async def test_a_transaction_check_skips_a_5x_producer_whose_telemetry_stream_is_gone(
    broker: BrokerState, peer_ctx: RequestContext, autojump_clock: trio.testing.MockClock
) -> None:
    """A 5.x producer whose Telemetry stream ended (MessagingActivity.telemetry_closed: push None) but whose
    heartbeats keep it registered is not writable, so the check goes past the round-robin pick to the producer of
    the topic whose stream is open, instead of being dropped."""
    processor = SendMessageProcessor(broker)
    # A 5.x transactional send: PGROUP is the topic (proxy/convert.py).
    props = tags_props(TRAN_MSG="true", PGROUP=TOPIC, UNIQ_KEY="AC1100010000000000000000000A0001")
    half = send_request(body=b"half", properties=props, producerGroup=TOPIC, sysFlag="4")
    response = await processor.process(peer_ctx, half)
    assert response is not None and response.code == ResponseCode.SUCCESS

    table = SessionTable(broker, TransactionData(15))
    grpc_producer(table, "gone-stream", 50001)  # first in the group's table: the round robin's first pick
    alive = grpc_producer(table, "open-stream", 50002)
    recovered: list[object] = []
    alive.push = recovered.append  # its Telemetry stream is open
    bridge = TransactionalMessageBridge(broker)
    later = 1_700_000_000_000 + 60_000  # send_request's bornTimestamp + 60 s: past the 6 s transaction timeout
    service = TransactionCheckService(broker, bridge, now_ms=lambda: later)
    outcome = await service.check_once()
    assert outcome.checked == 1
    assert len(recovered) == 1, (
        "the round's only check went to the 5.x producer without a Telemetry stream and was dropped"
    )


async def test_a_reply_pushed_to_a_5x_requester_gives_up_after_its_timeout(
    broker: BrokerState, peer_ctx: RequestContext, autojump_clock: trio.testing.MockClock
) -> None:
    """SEND_REPLY_MESSAGE_V2 whose REPLY_TO_CLIENT is a 5.x producer, whose channel drops PUSH_REPLY_MESSAGE_TO_CLIENT:
    SYSTEM_ERROR "push reply message to <id>fail." after PUSH_REPLY_TIMEOUT (10 s), as ReplyMessageProcessor's
    invokeSync times out in RocketMQ 5.x, not a wait that holds a reply-pool worker."""
    grpc_producer(SessionTable(broker, TransactionData(15)), "grpc-requester", 50003)
    props = tags_props(CORRELATION_ID="c1", REPLY_TO_CLIENT="grpc-requester", MSG_TYPE="reply", TTL="3000")
    reply = attrs.evolve(send_request(body=b"pong", properties=props), code=RequestCode.SEND_REPLY_MESSAGE_V2)
    answer = None
    with trio.move_on_after(60):  # virtual seconds
        answer = await ReplyMessageProcessor(broker).process(peer_ctx, reply)
    assert answer is not None, "SEND_REPLY_MESSAGE_V2 to a 5.x requester still unanswered after 60 virtual s"
    assert (answer.code, answer.remark) == (ResponseCode.SYSTEM_ERROR, "push reply message to grpc-requesterfail.")
