"""With ``auto_commit=False`` only ``commit()`` moves the group's offsets, a rebalance too (Java's
RebalanceLitePullImpl persists the offset store, which holds committed offsets only): a queue rebalanced away used to
commit the offset the application had polled to, and its new owner skipped what was never committed."""

from __future__ import annotations

import pytest

from client.consumer.lite_pull import LitePullConsumer
from client.message import Message, MessageExt
from client.producer import Producer
from remoting.codec.bodies import ConsumeFromWhere
from tests.client.helpers import create_topic, wait_until
from tests.threaded_cluster import ThreadedCluster

pytestmark = pytest.mark.anyio


async def test_rebalance_does_not_commit_uncommitted_polls(cluster: ThreadedCluster) -> None:
    await create_topic(cluster.namesrv_addr, "LiteManual", queues=2)
    async with Producer("pg", cluster.namesrv_addr) as producer:
        info = await producer.publish_info("LiteManual")
        for mq in info.message_queues:
            for i in range(5):
                await producer.send(Message("LiteManual", f"q{mq.queue_id}-{i}".encode()), queue=mq)
    opts = dict(auto_commit=False, consume_from_where=ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET)
    async with LitePullConsumer("lite-manual", cluster.namesrv_addr, **opts) as a:  # type: ignore[arg-type]
        await a.subscribe("LiteManual")
        got: list[MessageExt] = []
        for _ in range(100):
            got.extend(await a.poll(timeout=0.2))
            if len(got) >= 10:
                break
        assert len(got) == 10  # polled, never committed
        before = set(a.assignment())
        async with LitePullConsumer("lite-manual", cluster.namesrv_addr, **opts) as b:  # type: ignore[arg-type]
            await b.subscribe("LiteManual")
            await wait_until(lambda: len(a.assignment()) == 1)
            (gone,) = before - a.assignment()
            committed = await a.committed(gone)
            assert committed in (None, -1, 0), f"rebalance committed offset {committed} of {gone} never committed"
