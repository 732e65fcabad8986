"""A lite pull ``assign`` while the name server accepts connections and answers nothing (a paused, SIGSTOPped one):
Java's ``DefaultLitePullConsumerImpl.assign`` asks no name server; ours looks its topics' routes up (so its pull
tasks find their brokers greeted), waiting out the silent name server once, not once per topic. Virtual time; the
silent name server is a TCP listener of this test."""

from __future__ import annotations

import functools

import trio
import trio.testing

from client.consumer.lite_pull import LitePullConsumer
from remoting.codec.bodies import MessageQueue


async def _silent_namesrv(nursery: trio.Nursery) -> str:
    """A TCP listener that reads every request and answers none."""

    async def swallow(stream: trio.SocketStream) -> None:
        while await stream.receive_some():
            pass

    listeners = await nursery.start(functools.partial(trio.serve_tcp, swallow, 0, host="127.0.0.1"))
    return f"127.0.0.1:{listeners[0].socket.getsockname()[1]}"


async def test_an_assign_waits_for_a_silent_name_server_once_not_once_per_topic(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """Java's ``assign`` records the queues and starts their pull tasks, which look the broker up before each try
    (client/src/main/java/org/apache/rocketmq/client/impl/consumer/DefaultLitePullConsumerImpl.java). Ours asked the
    name server for each topic's route in turn: a silent one held the assign up for one request timeout per topic."""
    async with trio.open_nursery() as nursery:
        namesrv = await _silent_namesrv(nursery)
        async with LitePullConsumer("lite-assign-silent-ns", namesrv) as c:
            mqs = [MessageQueue("SilentA", "broker-a", 0), MessageQueue("SilentB", "broker-a", 0)]
            started = trio.current_time()
            await c.assign(mqs)
            took = trio.current_time() - started
            assert c.assignment() == set(mqs)
            timeout = c.instance.config.rpc_timeout
        nursery.cancel_scope.cancel()
    assert took <= timeout + 1, f"assign() took {took:.0f} s of virtual time"
