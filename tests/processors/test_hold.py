"""Long polling through the real dispatcher and connection: held pulls wake on arrival (not by polling), time out
after the client's suspend time in virtual time, never block their connection, and vanish with it."""

from __future__ import annotations

import gc

import trio
import trio.testing

from broker.context import BrokerState
from processors.client_manage import ClientManageProcessor
from processors.hold import CHECK_INTERVAL, HeldPull, HoldService
from processors.pull import PullMessageProcessor
from remoting.codec.bodies import ConsumerData, HeartbeatData
from remoting.codec.codes import RequestCode, ResponseCode
from remoting.codec.command import RemotingCommand, request
from remoting.codec.message import iter_records
from remoting.connection import Connection
from remoting.processor import RequestContext
from tests.processors.conftest import GROUP, PEER, TOPIC, RawPeer, ServedBroker, pull_request, send_request, tags_props

SUSPEND_SECONDS = 15.0


async def produce(served: ServedBroker, nursery: trio.Nursery, *tags: str | None, queue_id: int = 0) -> None:
    producer = await served.connect_memory(nursery)
    for tag in tags:
        await producer.send(send_request(queue_id=queue_id, properties=tags_props(tag)))
        answer = await producer.receive()
        assert answer is not None and answer.code == ResponseCode.SUCCESS


async def parked(served: ServedBroker, client: RawPeer, req: RemotingCommand, count: int = 1) -> float:
    """Send ``req`` and return the (virtual) time once the hold service holds ``count`` pulls."""
    await client.send(req)
    await trio.testing.wait_all_tasks_blocked()
    assert served.hold.held_count == count
    return trio.current_time()


async def test_held_pull_wakes_when_a_message_arrives(
    served: ServedBroker, nursery: trio.Nursery, autojump_clock: trio.testing.MockClock
) -> None:
    client = await served.connect_memory(nursery)
    req = pull_request()
    held_at = await parked(served, client, req)
    await produce(served, nursery, "TagA")
    response = await client.receive()
    assert response is not None and response.opaque == req.opaque
    assert response.code == ResponseCode.SUCCESS
    assert [m.tags for m in iter_records(response.body)] == ["TagA"]
    assert response.ext_fields["nextBeginOffset"] == "1"
    # Woken by the arrival, long before the 15 s virtual deadline a timeout would have needed.
    assert trio.current_time() - held_at < SUSPEND_SECONDS
    assert served.hold.woken_by_arrival == 1 and served.hold.woken_by_timeout == 0
    assert served.hold.held_count == 0


async def test_held_pull_is_answered_not_found_when_its_suspend_time_passes(
    served: ServedBroker, nursery: trio.Nursery, autojump_clock: trio.testing.MockClock
) -> None:
    client = await served.connect_memory(nursery)
    held_at = await parked(served, client, pull_request(offset=0))
    response = await client.receive()
    assert response is not None and response.code == ResponseCode.PULL_NOT_FOUND
    waited = trio.current_time() - held_at
    assert SUSPEND_SECONDS <= waited < SUSPEND_SECONDS + 1
    assert response.ext_fields["nextBeginOffset"] == "0"
    assert served.hold.woken_by_timeout == 1


async def test_short_polling_holds_for_short_polling_time_when_long_polling_is_off(
    served: ServedBroker, nursery: trio.Nursery, autojump_clock: trio.testing.MockClock
) -> None:
    import attrs

    served.broker.config = attrs.evolve(served.broker.config, long_polling_enable=False)
    client = await served.connect_memory(nursery)
    held_at = await parked(served, client, pull_request())
    response = await client.receive()
    assert response is not None and response.code == ResponseCode.PULL_NOT_FOUND
    assert 1.0 <= trio.current_time() - held_at < 2.0


async def test_non_matching_tag_does_not_wake_a_held_pull(
    served: ServedBroker, nursery: trio.Nursery, autojump_clock: trio.testing.MockClock
) -> None:
    client = await served.connect_memory(nursery)
    held_at = await parked(served, client, pull_request(subscription="TagA"))
    await produce(served, nursery, "TagB")
    with trio.move_on_after(5):
        await client.receive()
        raise AssertionError("a TagB message woke a pull subscribed to TagA")
    assert served.hold.held_count == 1
    await produce(served, nursery, "TagA")
    response = await client.receive()
    assert response is not None and response.code == ResponseCode.SUCCESS
    assert [m.tags for m in iter_records(response.body)] == ["TagA"]
    assert response.ext_fields["nextBeginOffset"] == "2"
    assert trio.current_time() - held_at < SUSPEND_SECONDS


async def test_held_pull_does_not_block_requests_pipelined_behind_it(
    served: ServedBroker, nursery: trio.Nursery, autojump_clock: trio.testing.MockClock
) -> None:
    client = await served.connect_memory(nursery)
    held = pull_request(queue_id=0)
    # The pull pool has one worker: a held pull must not keep it.
    other_pull = pull_request(queue_id=1, sys_flag=0x4)
    max_offset = request(RequestCode.GET_MAX_OFFSET, {"topic": TOPIC, "queueId": "0"})
    await client.send(held, other_pull, max_offset)
    answers = [await client.receive(), await client.receive()]
    assert {a.opaque for a in answers if a is not None} == {other_pull.opaque, max_offset.opaque}
    assert served.hold.held_count == 1
    await produce(served, nursery, None)
    response = await client.receive()
    assert response is not None and (response.opaque, response.code) == (held.opaque, ResponseCode.SUCCESS)


async def test_rerun_after_wake_neither_suspends_again_nor_commits_again(
    served: ServedBroker, nursery: trio.Nursery, autojump_clock: trio.testing.MockClock
) -> None:
    client = await served.connect_memory(nursery)
    await parked(served, client, pull_request(sys_flag=0x1 | 0x2 | 0x4, commit_offset=3, subscription="TagA"))
    assert served.broker.offsets.query(GROUP, TOPIC, 0) == 3  # committed on the first execution
    served.broker.offsets.commit(GROUP, TOPIC, 0, 7)
    response = await client.receive()  # times out: the re-run finds nothing and must answer, not park again
    assert response is not None and response.code == ResponseCode.PULL_NOT_FOUND
    assert served.hold.held_count == 0
    assert served.broker.offsets.query(GROUP, TOPIC, 0) == 7


async def test_connection_closed_while_held_drops_the_pull_quietly(
    served: ServedBroker, nursery: trio.Nursery, autojump_clock: trio.testing.MockClock
) -> None:
    client = await served.connect_memory(nursery)
    await parked(served, client, pull_request())
    await parked(served, client, pull_request(queue_id=1), count=2)
    await client.aclose()
    await trio.testing.wait_all_tasks_blocked()
    await produce(served, nursery, "TagA")
    await trio.sleep(SUSPEND_SECONDS + 1)  # virtual: the other one is dropped with its closed connection
    assert served.hold.held_count == 0
    assert served.hold.woken_by_arrival == 1 and served.hold.woken_by_timeout == 0


async def test_pulls_of_a_closed_connection_are_dropped_not_kept_until_their_deadline(
    served: ServedBroker, nursery: trio.Nursery, autojump_clock: trio.testing.MockClock
) -> None:
    """A client chooses its pulls' suspend time: one that parks pulls asking for a day and disconnects must not leave
    them (request, connection) in the table, and its queue marked waited on, for that day. Nobody can be answered."""
    day_ms = 24 * 3600 * 1000
    for _ in range(3):
        client = await served.connect_memory(nursery)
        await parked(served, client, pull_request(suspend_ms=day_ms))
        await client.aclose()
        await trio.testing.wait_all_tasks_blocked()
        await trio.sleep(CHECK_INTERVAL + 1)  # virtual: far less than the day asked for
        assert served.hold.held_count == 0
        assert not served.hold.waiting(TOPIC, 0)
    assert served.hold.woken_by_arrival == 0 and served.hold.woken_by_timeout == 0


async def test_many_pulls_on_one_queue_all_wake_on_one_arrival(
    served: ServedBroker, nursery: trio.Nursery, autojump_clock: trio.testing.MockClock
) -> None:
    clients = [await served.connect_memory(nursery) for _ in range(5)]
    for i, client in enumerate(clients):
        await parked(served, client, pull_request(), count=i + 1)
    await produce(served, nursery, "TagA")
    for client in clients:
        response = await client.receive()
        assert response is not None and response.code == ResponseCode.SUCCESS
    assert served.hold.held_count == 0


async def test_held_pull_on_a_real_socket_answers_pipelined_requests_then_wakes_on_arrival(
    served: ServedBroker, served_address: tuple[str, int]
) -> None:
    consumer = await RawPeer.connect(served_address)
    producer = await RawPeer.connect(served_address)
    held = pull_request()
    max_offset = request(RequestCode.GET_MAX_OFFSET, {"topic": TOPIC, "queueId": "0"})
    await consumer.send(held, max_offset)
    first = await consumer.receive()
    assert first is not None and (first.opaque, first.ext_fields["offset"]) == (max_offset.opaque, "0")
    await producer.send(send_request(properties=tags_props("TagA")))
    sent = await producer.receive()
    assert sent is not None and sent.code == ResponseCode.SUCCESS
    woken = await consumer.receive()
    assert woken is not None and (woken.opaque, woken.code) == (held.opaque, ResponseCode.SUCCESS)
    await consumer.aclose()
    await producer.aclose()


async def test_periodic_check_moves_a_pull_past_messages_that_did_not_match_its_tags(
    broker: BrokerState, nursery: trio.Nursery, autojump_clock: trio.testing.MockClock
) -> None:
    served = ServedBroker(broker, HoldService(max_offset_of=broker.store.max_offset_in_queue))
    await nursery.start(served.hold.run)
    await nursery.start(served.dispatcher.run)
    client = await served.connect_memory(nursery)
    held_at = await parked(served, client, pull_request(subscription="TagA"))
    await produce(served, nursery, "TagB", "TagB")
    response = await client.receive()
    assert response is not None and response.code == ResponseCode.PULL_RETRY_IMMEDIATELY
    assert response.ext_fields["nextBeginOffset"] == "2"
    assert trio.current_time() - held_at <= CHECK_INTERVAL + 0.01


async def _hold_and_connection(nursery: trio.Nursery) -> tuple[HoldService, Connection, trio.abc.Stream]:
    """A running hold service and a server connection whose requests are ignored, with its client end."""
    hold = HoldService()
    await nursery.start(hold.run)
    client_end, server_end = trio.testing.memory_stream_pair()
    connection = Connection(server_end, PEER, ("127.0.0.1", 10911))

    async def ignore(ctx: RequestContext, command: RemotingCommand) -> None:
        return None

    nursery.start_soon(connection.run, ignore)
    return hold, connection, client_end


async def test_a_failing_rerun_is_answered_system_error_with_the_offset_fields(
    nursery: trio.Nursery, autojump_clock: trio.testing.MockClock
) -> None:
    hold, connection, client_end = await _hold_and_connection(nursery)

    def failing(ctx: RequestContext, command: RemotingCommand) -> RemotingCommand | None:
        raise LookupError("gone")

    req = pull_request(offset=4)
    hold.hold(HeldPull(connection.context, req, TOPIC, 0, 4, trio.current_time() + 1, failing))
    response = await RawPeer(client_end).receive()
    assert response is not None and (response.opaque, response.code) == (req.opaque, ResponseCode.SYSTEM_ERROR)
    assert response.remark == "LookupError: gone"
    assert response.ext_fields["nextBeginOffset"] == "4" and "maxOffset" in response.ext_fields


async def test_pulls_woken_by_arrivals_are_not_kept_until_their_deadlines(
    nursery: trio.Nursery, mock_clock: trio.testing.MockClock
) -> None:
    """Rounds of pulls parked and woken by an arrival long before their 15 s: what the service keeps is bounded by
    the pulls parked, not by the pulls a second times their hold time."""
    hold, connection, _client_end = await _hold_and_connection(nursery)
    reruns = 0

    def rerun(ctx: RequestContext, command: RemotingCommand) -> RemotingCommand | None:
        nonlocal reruns
        reruns += 1
        return None

    # A pull on a queue nothing arrives in: its timer entry, the earliest, stays on top of the heap.
    hold.hold(HeldPull(connection.context, pull_request(), TOPIC, 1, 0, SUSPEND_SECONDS, rerun))
    for offset in range(300):  # 300 rounds of 10 pulls, each round woken at once
        for _ in range(10):
            deadline = trio.current_time() + SUSPEND_SECONDS + 1
            hold.hold(HeldPull(connection.context, pull_request(offset=offset), TOPIC, 0, offset, deadline, rerun))
        hold.notify_message_arriving(TOPIC, 0, offset, 0)
        await trio.testing.wait_all_tasks_blocked()  # the clock stands still: no deadline passes
    assert trio.current_time() == 0 and reruns == 3000 and hold.held_count == 1 and hold.woken_by_timeout == 0
    gc.collect()
    kept = sum(isinstance(o, HeldPull) for o in gc.get_objects())
    assert kept <= 2 * 64 + 11, kept  # without the heap's clean-up: 3,001 until their deadlines pass


async def test_requests_run_after_their_connection_closed_leave_nothing_behind(broker: BrokerState) -> None:
    """A pull or a heartbeat queued in a pool when its connection closed still runs: the pull was parked until its
    deadline (the client's suspend time) and the heartbeat registered the dead channel again, listed and rebalanced
    with until the 120 s scan. Neither does now."""
    hold = HoldService(max_offset_of=broker.store.max_offset_in_queue)
    left, _right = trio.testing.memory_stream_pair()
    connection = Connection(left, PEER, ("127.0.0.1", 10911))
    connection.close()
    assert PullMessageProcessor(broker, hold).pull(connection.context, pull_request(), allow_suspend=True) is None
    assert hold.held_count == 0
    data = HeartbeatData("gone@1", consumer_data_set=(ConsumerData(GROUP, subscription_data_set=()),))
    ClientManageProcessor(broker).heart_beat(connection.context, request(RequestCode.HEART_BEAT, body=data.encode()))
    assert broker.clients.consumer_group(GROUP) is None
