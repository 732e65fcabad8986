"""A pop's held offset move (its CK not stored yet: the DLedger leader has no quorum) meets an admin reset of the
queue, the queue dropped with its topic, and a CK whose put never ends, as 5.3.3's PopBufferMergeService and
PopMessageProcessor handle them: PopMessageProcessor.resetPopOffset takes the reset
(ConsumerOffsetManager.queryThenEraseResetOffset) over the held moves and clears them (clearOffsetQueue);
PopBufferMergeService.scanGarbage drops the held moves of a topic gone and of a queue not popped for 5 minutes.
Three members on real sockets under virtual time; the followers stopped so the leader cannot commit."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import trio
import trio.testing

from broker.embedded_dledger import EmbeddedDLedgerGroup
from broker.metrics.families import broker_families
from broker.metrics.snapshot import take_snapshot
from remoting.client import RemotingClient
from remoting.codec.codes import RequestCode, ResponseCode
from remoting.codec.command import RemotingCommand, request
from remoting.codec.message import MessageExt
from tests.broker.helpers import create_topic_request
from tests.broker.test_metrics_families import COMMON, render
from tests.broker.test_pop_wire import GROUP, messages, pop_request
from tests.conftest import QUIET_TIMER, SMALL_STORE
from tests.dledger.test_broker_group import LONG_LEASE, TOPIC, send, virtual_time_still

#: Members whose leader keeps leading while its followers are stopped (``LONG_LEASE``), holding an admin's reset for
#: the next pop (``useServerSideResetOffset``).
HELD: dict[str, Any] = {**SMALL_STORE, **LONG_LEASE, "use_server_side_reset_offset": True}


async def held_pop(group: EmbeddedDLedgerGroup, client: RemotingClient, bodies: list[bytes]) -> str:
    """The leader, once ``bodies`` are sent to ``TOPIC``'s one queue, its followers stopped and the first message
    popped: its CK not committed, so its offset move held."""
    leader = await group.leader()
    addr = group.addr(leader)
    assert (await client.invoke(addr, create_topic_request(TOPIC, queues=1), 5)).code == ResponseCode.SUCCESS
    for body in bodies:
        assert (await send(client, addr, body))[0] == ResponseCode.SUCCESS
    with virtual_time_still():
        for member in [m for m in group.ids if m != leader]:
            await group.stop(member)
    assert [m.body for m in await pop_one(group, client, leader)] == bodies[:1]
    return leader


async def pop_one(group: EmbeddedDLedgerGroup, client: RemotingClient, leader: str) -> list[MessageExt]:
    cmd = pop_request(group.store(leader).config.now_ms, TOPIC, maxMsgNums="1")
    return messages(await client.invoke(group.addr(leader), cmd, 3600))


async def quorum_back(group: EmbeddedDLedgerGroup, leader: str) -> None:
    """One follower started again, and time for the held CKs to be put again and committed."""
    with virtual_time_still():
        await group.start(next(m for m in group.ids if m != leader))
    await trio.sleep(10)


def reset_queue(offset: int) -> RemotingCommand:
    fields = {"topic": TOPIC, "group": GROUP, "timestamp": "-1", "isForce": "true", "queueId": "0",
              "offset": str(offset)}  # fmt: skip
    return request(RequestCode.INVOKE_BROKER_TO_RESET_OFFSET, fields)


async def test_a_reset_of_a_queue_wins_over_its_held_pop_moves(
    tmp_path: Path, autojump_clock: trio.testing.MockClock
) -> None:
    """The next pop reads from the reset offset, not past the held move (PopMessageProcessor.getPopOffset takes
    resetPopOffset's offset first)."""
    async with EmbeddedDLedgerGroup(tmp_path, **HELD) as group, RemotingClient() as client:
        leader = await held_pop(group, client, [b"m0", b"m1"])
        answer = await client.invoke(group.addr(leader), reset_queue(0), 10)
        assert answer.code == ResponseCode.SUCCESS, answer.remark
        assert [m.body for m in await pop_one(group, client, leader)] == [b"m0"]


async def test_a_held_pop_move_stored_after_a_reset_does_not_overwrite_it(
    tmp_path: Path, autojump_clock: trio.testing.MockClock
) -> None:
    """The held moves are cleared (PopBufferMergeService.clearOffsetQueue): their CKs stored later commit nothing."""
    async with EmbeddedDLedgerGroup(tmp_path, **HELD) as group, RemotingClient() as client:
        leader = await held_pop(group, client, [b"m0", b"m1"])
        answer = await client.invoke(group.addr(leader), reset_queue(0), 10)
        assert answer.code == ResponseCode.SUCCESS, answer.remark
        await quorum_back(group, leader)
        assert group.controllers[leader].context.offsets.query(GROUP, TOPIC, 0) == 0
        assert [m.body for m in await pop_one(group, client, leader)] == [b"m0"]


async def test_a_deleted_topic_takes_its_held_pop_moves_along(
    tmp_path: Path, autojump_clock: trio.testing.MockClock
) -> None:
    """A topic created again under the name of one deleted while a pop's move was held starts from its first
    message: the move's CK stored later commits nothing (5.3.3's scanGarbage drops the moves of a topic gone)."""
    async with EmbeddedDLedgerGroup(tmp_path, **HELD) as group, RemotingClient() as client:
        leader = await held_pop(group, client, [b"m0", b"m1"])
        addr = group.addr(leader)
        deleted = await client.invoke(addr, request(RequestCode.DELETE_TOPIC_IN_BROKER, {"topic": TOPIC}), 10)
        assert deleted.code == ResponseCode.SUCCESS, deleted.remark
        await quorum_back(group, leader)
        assert (await client.invoke(addr, create_topic_request(TOPIC, queues=1), 5)).code == ResponseCode.SUCCESS
        assert (await send(client, addr, b"new"))[0] == ResponseCode.SUCCESS
        assert [m.body for m in await pop_one(group, client, leader)] == [b"new"]


async def test_a_pop_move_held_for_more_than_five_minutes_is_dropped(
    tmp_path: Path, autojump_clock: trio.testing.MockClock
) -> None:
    """A CK whose put never ends leaves its queue's offset where it was for at most 5 minutes: scanGarbage drops
    the held moves of a queue not popped for that long, and the next pop reads from the committed offset."""
    overrides: dict[str, Any] = {**SMALL_STORE, **QUIET_TIMER, "max_heart_beat_leak": 5000,
                 "max_wait_ack_time_ms": 7 * 60_000, "server_channel_max_idle_time_seconds": 0}  # fmt: skip
    async with EmbeddedDLedgerGroup(tmp_path, **overrides) as group, RemotingClient(idle_timeout=None) as client:
        leader = await group.leader()
        addr = group.addr(leader)
        assert (await client.invoke(addr, create_topic_request(TOPIC, queues=1), 5)).code == ResponseCode.SUCCESS
        assert (await send(client, addr, b"m0"))[0] == ResponseCode.SUCCESS
        with virtual_time_still():
            for member in [m for m in group.ids if m != leader]:
                await group.stop(member)
        popped: list[list[MessageExt]] = []

        async def pop() -> None:
            popped.append(await pop_one(group, client, leader))

        async with trio.open_nursery() as nursery:
            nursery.start_soon(pop)  # its CK's put waits for a quorum for 7 minutes
            await trio.sleep(6 * 60)
            nursery.start_soon(pop)
        assert [[m.body for m in batch] for batch in popped] == [[b"m0"], [b"m0"]]


async def test_an_offset_committed_past_the_held_moves_is_where_the_next_pop_reads(
    tmp_path: Path, autojump_clock: trio.testing.MockClock
) -> None:
    """PopMessageProcessor.getPopOffset reads from the greater of the held moves' latest offset and the committed
    one: an offline reset forward (mqadmin resetOffsetByTime's UPDATE_CONSUMER_OFFSET) is taken."""
    async with EmbeddedDLedgerGroup(tmp_path, **HELD) as group, RemotingClient() as client:
        leader = await held_pop(group, client, [b"m0", b"m1", b"m2"])
        commit = {"consumerGroup": GROUP, "topic": TOPIC, "queueId": "0", "commitOffset": "2"}
        answer = await client.invoke(group.addr(leader), request(RequestCode.UPDATE_CONSUMER_OFFSET, commit), 10)
        assert answer.code == ResponseCode.SUCCESS, answer.remark
        assert [m.body for m in await pop_one(group, client, leader)] == [b"m2"]


async def test_a_held_pop_move_counts_in_the_pop_buffer_gauges(
    tmp_path: Path, autojump_clock: trio.testing.MockClock
) -> None:
    """RocketMQ 5.3.3's PopMetricsManager exports PopBufferMergeService's ``getOffsetTotalSize`` (offset moves
    waiting to be committed) as ``rocketmq_pop_offset_buffer_size`` and ``getBufferedCKSize`` (CKs buffered until
    stored and committed) as ``rocketmq_pop_checkpoint_buffer_size``: a pop whose CK waits for the quorum counts in
    both until the quorum is back. Ours exported neither."""
    async with EmbeddedDLedgerGroup(tmp_path, **HELD) as group, RemotingClient() as client:
        leader = await held_pop(group, client, [b"m0", b"m1"])
        controller = group.controllers[leader]

        def buffers() -> tuple[float, ...]:
            snapshot = take_snapshot(controller.context, controller.pools, pop_gauges=controller.pop_gauges)
            samples = render(list(broker_families(snapshot, COMMON)))
            names = ("rocketmq_pop_offset_buffer_size", "rocketmq_pop_checkpoint_buffer_size")
            return tuple(value for name in names for _, value in samples[name])

        assert buffers() == (1, 1)
        await quorum_back(group, leader)
        assert buffers() == (0, 0)
