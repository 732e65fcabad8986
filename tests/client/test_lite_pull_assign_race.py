"""Two ``assign`` calls that overlap: the consumer ends with the queues of one of them, as Java's synchronized
``DefaultLitePullConsumerImpl.assign`` (client/src/main/java/org/apache/rocketmq/client/impl/consumer/), not a mix of
both. Virtual time against the embedded name server and broker, real sockets on 127.0.0.1."""

from __future__ import annotations

import functools
from collections.abc import Awaitable, Callable

import trio
import trio.testing

from broker.embedded import EmbeddedCluster
from client.admin import Admin
from client.consumer.lite_pull import LitePullConsumer
from client.errors import ClientStateError
from remoting.client import RemotingClient
from tests.client.test_master_watch import register_as_master, silent_master


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


async def test_a_subscribe_overlapping_an_assign_leaves_the_consumer_in_one_mode(
    embedded_cluster: EmbeddedCluster, autojump_clock: trio.testing.MockClock
) -> None:
    """Java's ``subscribe`` and ``assign`` are synchronized and each sets the subscription type, which refuses the
    other mode (``setSubscriptionType``'s IllegalStateException in client/src/main/java/org/apache/rocketmq/client/
    impl/consumer/DefaultLitePullConsumerImpl.java): of two overlapping calls one is refused. Ours checked the mode
    as ``subscribe`` began, then kept the subscription an ``assign`` that ran while it waited for its topic's broker
    (one that never answers) had made pointless: both returned, and the topic was never consumed."""
    namesrv = embedded_cluster.namesrv_addr
    async with Admin(namesrv) as admin:
        await admin.create_topic("AssignMode", read_queue_nums=2, write_queue_nums=2)
    outcome: dict[str, str] = {}
    async with trio.open_nursery() as nursery, RemotingClient() as registrar:
        await register_as_master(registrar, namesrv, await silent_master(nursery), "OnSilent", "broker-silent")
        async with LitePullConsumer("lite-mode-race", namesrv) as c:
            mqs = await c.fetch_message_queues("AssignMode")  # its route cached, its broker greeted
            c.pause(mqs)

            async def call(name: str, operation: Callable[[], Awaitable[None]]) -> None:
                try:
                    await operation()
                except ClientStateError:
                    outcome[name] = "refused"
                else:
                    outcome[name] = "done"

            async with trio.open_nursery() as calls:
                calls.start_soon(call, "subscribe", functools.partial(c.subscribe, "OnSilent"))
                await trio.testing.wait_all_tasks_blocked()  # subscribe began: it waits for the silent broker
                calls.start_soon(call, "assign", functools.partial(c.assign, mqs))
            subscribed, assigned = c.subscribed_topics(), c.assignment()
        nursery.cancel_scope.cancel()
    assert sorted(outcome.values()) == ["done", "refused"], f"overlapping subscribe and assign: {outcome}"
    if outcome["assign"] == "done":
        assert "OnSilent" not in subscribed and assigned == set(mqs)
    else:
        assert "OnSilent" in subscribed and not assigned
