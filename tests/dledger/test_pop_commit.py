"""Pop writes in DLedger mode are answered from their put's outcome, as RocketMQ 5.3.3's processors answer from
``EscapeBridge.putMessageToSpecificQueue`` (broker/src/main/java/org/apache/rocketmq/broker/failover/
EscapeBridge.java), whose put DLedgerCommitLog.asyncPutMessage completes only once the entry is committed by a quorum
or failed: an ACK (AckMessageProcessor.appendAck), a batch ACK, the CK of a pop (PopBufferMergeService.putCkToStore)
and a change of invisibility (ChangeInvisibleTimeProcessor.appendCheckPointThenAckOrigin); over remoting and over
gRPC (the proxy's servicer on an asyncio loop in a worker thread, as on grpcio's, in front of the leader; RocketMQ's
proxy answers from the broker's processors). Three members on real sockets under virtual time; the followers stopped
so the leader cannot commit."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest
import trio
import trio.testing

from broker.embedded_dledger import EmbeddedDLedgerGroup
from proxy.bridge import TrioBridge
from proxy.common import Code
from proxy.config import ProxyConfig
from proxy.messaging import MessagingActivity
from proxy.pb import service
from proxy.servicer import MessagingServicer
from proxy.startup import build_activity
from remoting.client import RemotingClient
from remoting.codec.codes import RequestCode, ResponseCode
from remoting.codec.command import RemotingCommand, request
from remoting.codec.message import MessageExt
from store.metadata_files import decode_consumer_offsets
from tests.broker.helpers import create_topic_request
from tests.broker.test_pop_wire import GROUP, ack_request, batch_ack_body, messages, pop_request
from tests.conftest import SMALL_STORE
from tests.dledger.test_broker_group import LONG_LEASE, send, virtual_time_still
from tests.proxy.test_consumer_rpcs import _ack_request, _messages, _receive_request
from tests.proxy.test_renew import md

TOPIC = "DLedgerTopic"
#: A quorum wait longer than any step of these tests (maxWaitAckTimeMs, 2.5 s by default).
LONG_QUORUM_WAIT = {"max_wait_ack_time_ms": 60_000}


async def popped_then_alone(
    group: EmbeddedDLedgerGroup, client: RemotingClient, *, pop: bool = True
) -> tuple[str, MessageExt | None]:
    """The leader, once one committed message of ``TOPIC`` is popped (if ``pop``) and its followers stopped."""
    leader = await group.leader()
    addr = group.addr(leader)
    assert (await client.invoke(addr, create_topic_request(TOPIC, queues=1), 5)).code == ResponseCode.SUCCESS
    assert (await send(client, addr, b"m0"))[0] == ResponseCode.SUCCESS
    popped = None
    if pop:
        [popped] = messages(await client.invoke(addr, pop_request(group.store(leader).config.now_ms, TOPIC), 10))
    with virtual_time_still():
        for member in [m for m in group.ids if m != leader]:
            await group.stop(member)
    return leader, popped


async def answered_once_a_follower_is_back(
    group: EmbeddedDLedgerGroup, client: RemotingClient, leader: str, cmd: RemotingCommand
) -> RemotingCommand:
    """``cmd``'s answer: none while the leader has no quorum (5 s), then one once a follower came back."""
    return await answer_once_a_follower_is_back(group, leader, lambda: client.invoke(group.addr(leader), cmd, 60))


async def answer_once_a_follower_is_back(
    group: EmbeddedDLedgerGroup, leader: str, call: Callable[[], Awaitable[Any]]
) -> Any:
    """``call()``'s answer: none while the leader has no quorum (5 s), then one once a follower came back."""
    answers: list[Any] = []

    async def ask() -> None:
        answers.append(await call())

    async with trio.open_nursery() as nursery:
        nursery.start_soon(ask)
        await trio.sleep(5)
        assert answers == [], "answered before its entry was committed"
        with virtual_time_still():  # one follower: two restarted at once may elect one of them and truncate it
            await group.start(next(m for m in group.ids if m != leader))
    store = group.store(leader)
    assert store.ledger.committed_index == store.ledger.end_index  # the answer came with the commit
    return answers[0]


@pytest.mark.parametrize("batch", [False, True], ids=["ack", "batch_ack"])
async def test_an_ack_is_answered_once_its_entry_is_committed(
    tmp_path: Path, autojump_clock: trio.testing.MockClock, batch: bool
) -> None:
    overrides = {**SMALL_STORE, **LONG_LEASE, **LONG_QUORUM_WAIT}
    async with EmbeddedDLedgerGroup(tmp_path, **overrides) as group, RemotingClient() as client:
        leader, popped = await popped_then_alone(group, client)
        assert popped is not None
        batch_ack = request(RequestCode.BATCH_ACK_MESSAGE, body=batch_ack_body(TOPIC, [popped]))
        cmd = batch_ack if batch else ack_request(TOPIC, popped)
        answer = await answered_once_a_follower_is_back(group, client, leader, cmd)
        assert answer.code == ResponseCode.SUCCESS, answer.remark


async def test_an_ack_the_quorum_never_acknowledged_is_answered_after_the_quorum_wait(
    tmp_path: Path, autojump_clock: trio.testing.MockClock
) -> None:
    """AckMessageProcessor.handlePutMessageResult only logs a put that is not PUT_OK ("put ack msg error"): the ACK
    is answered SUCCESS, once DLedger's WAIT_QUORUM_ACK_TIMEOUT (``maxWaitAckTimeMs``) ended the wait."""
    async with EmbeddedDLedgerGroup(tmp_path, **SMALL_STORE, **LONG_LEASE) as group, RemotingClient() as client:
        leader, popped = await popped_then_alone(group, client)
        assert popped is not None
        start = trio.current_time()
        answer = await client.invoke(group.addr(leader), ack_request(TOPIC, popped), 60)
        assert answer.code == ResponseCode.SUCCESS, answer.remark
        assert trio.current_time() - start >= 2  # maxWaitAckTimeMs: 2.5 s, on a ms clock


async def test_a_change_of_invisibility_whose_ck_is_not_committed_answers_system_error(
    tmp_path: Path, autojump_clock: trio.testing.MockClock
) -> None:
    """ChangeInvisibleTimeProcessor.appendCheckPointThenAckOrigin: a new CK whose put is not PUT_OK (DLedger's
    WAIT_QUORUM_ACK_TIMEOUT) answers SYSTEM_ERROR, with no new handle; once a quorum is back it succeeds."""
    async with EmbeddedDLedgerGroup(tmp_path, **SMALL_STORE, **LONG_LEASE) as group, RemotingClient() as client:
        leader, popped = await popped_then_alone(group, client)
        assert popped is not None
        fields = {"consumerGroup": GROUP, "topic": TOPIC, "queueId": str(popped.queue_id),
                  "extraInfo": popped.properties["POP_CK"], "offset": str(popped.queue_offset),
                  "invisibleTime": "60000"}  # fmt: skip
        start = trio.current_time()
        answer = await client.invoke(group.addr(leader), request(RequestCode.CHANGE_MESSAGE_INVISIBLETIME, fields), 60)
        assert answer.code == ResponseCode.SYSTEM_ERROR
        assert "popTime" not in answer.ext_fields
        assert trio.current_time() - start >= 2  # maxWaitAckTimeMs: 2.5 s, on a ms clock
        with virtual_time_still():
            await group.start(next(m for m in group.ids if m != leader))
        with trio.fail_after(30):
            while True:
                cmd = request(RequestCode.CHANGE_MESSAGE_INVISIBLETIME, fields)
                answer = await client.invoke(group.addr(leader), cmd, 60)
                if answer.code == ResponseCode.SUCCESS:
                    break
        assert answer.ext_fields["invisibleTime"] == "60000"


async def test_a_pop_is_answered_once_its_checkpoint_is_committed(
    tmp_path: Path, autojump_clock: trio.testing.MockClock
) -> None:
    """PopMessageProcessor.appendCheckPoint puts the CK synchronously (PopBufferMergeService.putCkToStore with
    ``appendCkAsync`` false) before the pop is answered."""
    overrides = {**SMALL_STORE, **LONG_LEASE, **LONG_QUORUM_WAIT}
    async with EmbeddedDLedgerGroup(tmp_path, **overrides) as group, RemotingClient() as client:
        leader, _ = await popped_then_alone(group, client, pop=False)
        cmd = pop_request(group.store(leader).config.now_ms, TOPIC)
        answer = await answered_once_a_follower_is_back(group, client, leader, cmd)
        assert [m.body for m in messages(answer)] == [b"m0"]


async def test_a_pop_whose_checkpoint_did_not_commit_is_delivered_again_after_a_failover(
    tmp_path: Path, autojump_clock: trio.testing.MockClock
) -> None:
    """A pop's consumer offset never passes a CK the quorum did not commit, as 5.3.3's PopBufferMergeService commits
    it (scanCommitOffset) only once its CK is stored (handleCkMessagePutResult sets ``ckStored``): a follower that
    copied the leader's offsets (SlaveSynchronize.syncConsumerOffset, GET_ALL_CONSUMER_OFFSET) but not the CK, and
    then leads, hands the message out again rather than never."""
    async with EmbeddedDLedgerGroup(tmp_path, **SMALL_STORE, **LONG_LEASE) as group, RemotingClient() as client:
        leader = await group.leader()
        addr, followers = group.addr(leader), [m for m in group.ids if m != leader]
        assert (await client.invoke(addr, create_topic_request(TOPIC, queues=1), 5)).code == ResponseCode.SUCCESS
        assert (await send(client, addr, b"m0"))[0] == ResponseCode.SUCCESS
        with virtual_time_still():
            for member in followers:
                await group.stop(member)
        [popped] = messages(await client.invoke(addr, pop_request(group.store(leader).config.now_ms, TOPIC), 60))
        assert popped.body == b"m0"  # handed out, its CK not committed (logged, as 5.3.3 does)
        await trio.sleep(3)
        answer = await client.invoke(addr, request(RequestCode.GET_ALL_CONSUMER_OFFSET), 10)
        synced = decode_consumer_offsets(answer.body)
        with virtual_time_still():
            await group.stop(leader)
            for member in followers:
                await group.start(member)
                group.controllers[member].context.offsets.merge(synced)  # what the slave sync copied
        new_leader = await group.leader()
        create = create_topic_request(TOPIC, queues=1)
        assert (await client.invoke(group.addr(new_leader), create, 5)).code == ResponseCode.SUCCESS
        again: list[MessageExt] = []
        with trio.fail_after(20):  # within the invisible time: a redelivery, not a revive
            while not again:
                cmd = pop_request(group.store(new_leader).config.now_ms, TOPIC)
                answer = await client.invoke(group.addr(new_leader), cmd, 10)
                again = messages(answer) if answer.code == ResponseCode.SUCCESS else []
                await trio.sleep(0.5)
        assert [m.body for m in again] == [b"m0"]


class _Context:
    """What ``MessagingServicer`` reads of grpcio's context."""

    def time_remaining(self) -> float:
        return 20.0

    def invocation_metadata(self) -> tuple[tuple[str, str], ...]:
        return tuple(md("c@1").items())

    def peer(self) -> str:
        return "ipv4:127.0.0.1:40000"


def grpc_call(
    nursery: trio.Nursery, activity: MessagingActivity, method: str, req: Any
) -> Callable[[], Awaitable[Any]]:
    """A unary RPC of ``activity``'s servicer run on an asyncio loop in a worker thread (a bridge of its own, as each
    grpcio server thread has); a ReceiveMessage's whole stream."""
    servicer = MessagingServicer(TrioBridge(nursery), activity, lambda peer: peer)

    async def unary() -> Any:
        return await getattr(servicer, method)(req, _Context())

    async def stream() -> list[Any]:
        return [r async for r in servicer.ReceiveMessage(req, _Context())]

    run = stream if method == "ReceiveMessage" else unary
    return lambda: trio.to_thread.run_sync(asyncio.run, run())


async def grpc_received_then_alone(
    group: EmbeddedDLedgerGroup, client: RemotingClient, nursery: trio.Nursery
) -> tuple[str, MessagingActivity, Any]:
    """The leader, its gRPC activity and a message received through it, once its followers stopped."""
    leader, _ = await popped_then_alone(group, client, pop=False)
    activity, _ = build_activity(group.controllers[leader], ProxyConfig())
    with virtual_time_still():
        await group.start(next(m for m in group.ids if m != leader))  # a quorum for the receive's CK
    stream = await grpc_call(nursery, activity, "ReceiveMessage", _receive_request(GROUP, TOPIC))()
    [message] = _messages(stream)
    with virtual_time_still():
        await group.stop(next(m for m in group.ids if m != leader and m in group.controllers))
    return leader, activity, message


async def test_a_grpc_ack_is_answered_once_its_entry_is_committed(
    tmp_path: Path, autojump_clock: trio.testing.MockClock
) -> None:
    overrides = {**SMALL_STORE, **LONG_LEASE, **LONG_QUORUM_WAIT}
    async with (
        EmbeddedDLedgerGroup(tmp_path, **overrides) as group,
        RemotingClient() as client,
        trio.open_nursery() as nursery,
    ):
        leader, activity, message = await grpc_received_then_alone(group, client, nursery)
        call = grpc_call(nursery, activity, "AckMessage", _ack_request(GROUP, TOPIC, message))
        answer = await answer_once_a_follower_is_back(group, leader, call)
        assert answer.status.code == Code.OK, answer
        nursery.cancel_scope.cancel()


async def test_a_grpc_change_of_invisibility_whose_ck_is_not_committed_is_refused(
    tmp_path: Path, autojump_clock: trio.testing.MockClock
) -> None:
    """The broker's SYSTEM_ERROR (a new CK not committed), as RocketMQ 5.3's proxy answers it."""
    async with (
        EmbeddedDLedgerGroup(tmp_path, **SMALL_STORE, **LONG_LEASE) as group,
        RemotingClient() as client,
        trio.open_nursery() as nursery,
    ):
        _, activity, message = await grpc_received_then_alone(group, client, nursery)
        req = service.ChangeInvisibleDurationRequest(
            receipt_handle=message.system_properties.receipt_handle, message_id=message.system_properties.message_id
        )
        req.group.name, req.topic.name = GROUP, TOPIC
        req.invisible_duration.FromSeconds(60)
        answer = await grpc_call(nursery, activity, "ChangeInvisibleDuration", req)()
        assert (answer.status.code, answer.status.message) == (
            Code.INTERNAL_SERVER_ERROR,
            "changeInvisibleDuration failed: status is abnormal",
        )
        assert not answer.receipt_handle
        nursery.cancel_scope.cancel()


async def test_a_grpc_receive_is_answered_once_its_checkpoint_is_committed(
    tmp_path: Path, autojump_clock: trio.testing.MockClock
) -> None:
    overrides = {**SMALL_STORE, **LONG_LEASE, **LONG_QUORUM_WAIT}
    async with (
        EmbeddedDLedgerGroup(tmp_path, **overrides) as group,
        RemotingClient() as client,
        trio.open_nursery() as nursery,
    ):
        leader, _ = await popped_then_alone(group, client, pop=False)
        activity, _ = build_activity(group.controllers[leader], ProxyConfig())
        call = grpc_call(nursery, activity, "ReceiveMessage", _receive_request(GROUP, TOPIC))
        stream = await answer_once_a_follower_is_back(group, leader, call)
        assert [m.body for m in _messages(stream)] == [b"m0"]
        nursery.cancel_scope.cancel()
