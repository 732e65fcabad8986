"""``assign(mqs, expression)`` filters the queues' pulls with the expression of the latest call: assigning a topic's
queues again with another expression used to keep the first one. Virtual time against the embedded name server and
broker, real sockets on 127.0.0.1."""

from __future__ import annotations

import trio
import trio.testing

from broker.embedded import EmbeddedCluster
from client.admin import Admin
from client.consumer.lite_pull import LitePullConsumer
from client.message import Message
from client.producer import Producer
from remoting.codec.bodies import ConsumeFromWhere


async def test_assigning_again_with_another_expression_filters_with_it(
    embedded_cluster: EmbeddedCluster, autojump_clock: trio.testing.MockClock
) -> None:
    async with Admin(embedded_cluster.namesrv_addr) as admin:
        await admin.create_topic("AssignTags", read_queue_nums=1, write_queue_nums=1)
    async with Producer("pg-assign-tags", embedded_cluster.namesrv_addr) as producer:
        for i in range(4):
            await producer.send(Message("AssignTags", f"{'ab'[i % 2]}{i}".encode(), tags=f"Tag{'AB'[i % 2]}"))
    first = ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET
    async with LitePullConsumer("lite-assign-tags", embedded_cluster.namesrv_addr, consume_from_where=first) as c:
        [mq] = await c.fetch_message_queues("AssignTags")
        c.pause([mq])  # nothing pulled with the first expression
        await c.assign([mq], "TagA")
        await c.assign([mq], "TagB")
        c.resume([mq])
        got = await c.poll(30)
    assert [m.body for m in got] == [b"b1", b"b3"], "the queue is still pulled with the first assign's expression"
