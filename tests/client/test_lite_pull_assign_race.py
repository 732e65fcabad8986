"""Two ``assign`` calls that overlap: the consumer ends with the queues of one of them, as Java's synchronized
``DefaultLitePullConsumerImpl.assign`` (client/src/main/java/org/apache/rocketmq/client/impl/consumer/), not a mix of
both. Virtual time against the embedded name server and broker, real sockets on 127.0.0.1."""

from __future__ import annotations

import trio
import trio.testing

from broker.embedded import EmbeddedCluster
from client.admin import Admin
from client.consumer.lite_pull import LitePullConsumer


async def test_overlapping_assigns_leave_the_queues_of_one_of_them(
    embedded_cluster: EmbeddedCluster, autojump_clock: trio.testing.MockClock
) -> None:
    """The first ``assign`` waits for the broker while it persists the offset of a queue it gives up; a second one
    runs meanwhile. Each asks for exactly one queue, so the consumer must own one queue (and pull one), whichever
    call came last: ours ran ``assign`` outside the rebalance lock and ended owning both."""
    async with Admin(embedded_cluster.namesrv_addr) as admin:
        await admin.create_topic("AssignRace", read_queue_nums=3, write_queue_nums=3)
    async with LitePullConsumer("lite-assign-race", embedded_cluster.namesrv_addr) as c:
        q0, q1, q2 = sorted(await c.fetch_message_queues("AssignRace"))
        c.pause([q0, q1, q2])  # no pulls: the only broker calls are the assigns' own
        await c.assign([q2])
        await c.commit({q2: 0}, persist=False)  # giving q2 up persists this offset (a broker call)
        async with trio.open_nursery() as nursery:
            nursery.start_soon(c.assign, [q0])
            nursery.start_soon(c.assign, [q1])
        owned = c.assignment()
        pulled = set(c.rebalance.process_queues)
    assert owned in ({q0}, {q1}), f"two overlapping assigns of one queue each left {sorted(owned)}"
    assert pulled == owned
