"""A lite pull consumer's ``seek`` (or a broker's reset offset, which seeks) holds through the next rebalance pass: a
pass used to drop the seeked queue (its old process queue dropped, kept in the table) and take it again from the
committed offset, undoing the seek."""

from __future__ import annotations

import pytest

from client.consumer.lite_pull import LitePullConsumer
from client.message import Message
from client.producer import Producer
from remoting.codec.bodies import ConsumeFromWhere
from tests.client.helpers import create_topic, poll_until
from tests.threaded_cluster import ThreadedCluster

pytestmark = pytest.mark.anyio


async def test_seek_survives_rebalance_manual_commit(cluster: ThreadedCluster) -> None:
    await create_topic(cluster.namesrv_addr, "LiteSeekReb", queues=1)
    async with Producer("pg", cluster.namesrv_addr) as producer:
        for i in range(10):
            await producer.send(Message("LiteSeekReb", f"s{i}".encode()))
    opts = dict(auto_commit=False, consume_from_where=ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET)
    async with LitePullConsumer("lite-seek-reb", cluster.namesrv_addr, **opts) as c:  # type: ignore[arg-type]
        await c.subscribe("LiteSeekReb")
        first = await poll_until(c, 10, rounds=20, each=0.3)
        assert len(first) == 10
        await c.commit()
        [mq] = list(c.assignment())
        await c.seek(mq, 0)  # replay from the start
        await c.do_rebalance()  # what the instance does every 20 s or on any member change
        replay = await poll_until(c, 10, rounds=10, each=0.3)
    assert [m.queue_offset for m in replay] == list(range(10))
