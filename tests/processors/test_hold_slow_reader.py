"""A client that stops reading its socket must not stall the long-poll answers of every other client (found by a
review; failed before).

RocketMQ (PullMessageProcessor.executeRequestWhenWakeup) writes a woken pull's answer with Netty's non-blocking
``channel.writeAndFlush``; no thread waits for one peer's socket. Pool workers here use ``send_nowait`` for the same
reason (remoting/processor.py run_processor); the hold service's answering workers used ``await connection.send``,
which waits for the peer's backlog to drain once more than SEND_HIGH_WATER (4 MiB) is queued.
"""

from __future__ import annotations

from pathlib import Path

import trio
import trio.testing

from processors.hold import HoldService
from remoting.codec.codes import ResponseCode
from remoting.connection import Connection
from store.metadata_files import TopicConfig
from tests.processors.conftest import PEER, RawPeer, ServedBroker, open_broker, pull_request, send_request


async def test_a_client_that_does_not_read_does_not_stall_other_clients_long_polls(
    tmp_path: Path, nursery: trio.Nursery, autojump_clock: trio.testing.MockClock
) -> None:
    broker = open_broker(tmp_path / "b", store_overrides={"mapped_file_size_commit_log": 64 << 20})
    try:
        hold = HoldService()
        served = ServedBroker(broker, hold)
        await nursery.start(hold.run)
        await nursery.start(served.dispatcher.run)

        # The slow client: a lockstep stream, so the broker's writes to it wait until it reads (it never does).
        slow_end, server_end = trio.testing.lockstep_stream_pair()
        connection = Connection(server_end, PEER, ("127.0.0.1", 10911))
        nursery.start_soon(connection.run, served.dispatcher.dispatch)
        slow = RawPeer(slow_end)
        pulls = [pull_request(queue_id=q) for q in range(4) for _ in range(4)]  # 16 pulls held, 4 per queue
        nursery.start_soon(slow.send, *pulls)
        await trio.testing.wait_all_tasks_blocked()

        # The victim: a normal client whose pull waits on another topic.
        broker.topics.update_topic(TopicConfig("OtherTopic", 1, 1))
        victim = await served.connect_memory(nursery)
        victim_pull = pull_request("OtherTopic")
        await victim.send(victim_pull)
        await trio.testing.wait_all_tasks_blocked()
        assert hold.held_count == 17

        producer = await served.connect_memory(nursery)
        for q in range(4):  # one 600 KB message per queue wakes the slow client's 16 pulls: ~9.6 MB of answers
            await producer.send(send_request(queue_id=q, body=b"x" * 600_000))
            answer = await producer.receive()
            assert answer is not None and answer.code == ResponseCode.SUCCESS
        await trio.testing.wait_all_tasks_blocked()

        await producer.send(send_request("OtherTopic", body=b"for the victim"))
        answer = await producer.receive()
        assert answer is not None and answer.code == ResponseCode.SUCCESS
        sent_at = trio.current_time()
        response = None
        with trio.move_on_after(10):  # virtual seconds; the victim's suspend time is 15 s
            response = await victim.receive()
        waited = trio.current_time() - sent_at
        assert response is not None, (
            f"the victim's woken pull was not answered within {waited:.0f} virtual seconds: every hold worker waits "
            f"for the non-reading client's backlog to drain ({hold.woken_by_arrival} woken by arrival)"
        )
        assert (response.opaque, response.code) == (victim_pull.opaque, ResponseCode.SUCCESS)
    finally:
        broker.store.close()
