"""Orderly BROADCASTING push consumers in virtual time against the embedded cluster: every member consumes every
queue, so none of them asks the broker for queue locks (RocketMQ 5.3.3's RebalanceImpl.rebalanceByTopic passes
``isOrder=false`` to updateProcessQueueTableInRebalance for BROADCASTING)."""

from __future__ import annotations

from pathlib import Path

import trio
import trio.testing

from broker.embedded import EmbeddedCluster
from client.admin import Admin
from client.consumer.listener import ConsumeOrderlyStatus
from client.consumer.push import PushConsumer
from client.message import Message, MessageExt
from client.producer import Producer
from remoting.codec.bodies import ConsumeFromWhere, MessageModel


def _broadcasting_orderly(cluster: EmbeddedCluster, offsets: Path, seen: list[bytes]) -> PushConsumer:
    async def listener(msgs: list[MessageExt]) -> ConsumeOrderlyStatus:
        seen.extend(m.body for m in msgs)
        return ConsumeOrderlyStatus.SUCCESS

    consumer = PushConsumer(
        "cg-bcast-orderly",
        cluster.namesrv_addr,
        message_model=MessageModel.BROADCASTING,
        consume_from_where=ConsumeFromWhere.CONSUME_FROM_LAST_OFFSET,
        offset_store_dir=offsets,
        await_termination=1.0,
    )
    consumer.subscribe("BOrderly")
    consumer.register_message_listener_orderly(listener)
    return consumer


async def test_a_second_broadcasting_orderly_consumer_of_a_group_takes_every_queue_at_once(
    embedded_cluster: EmbeddedCluster, autojump_clock: trio.testing.MockClock, tmp_path: Path
) -> None:
    """Two broadcasting orderly consumers of one group (two hosts): each takes every queue when it starts and gets
    every message sent after that. Locking the queues at the broker, as clustering orderly consumers do, left the
    second one without queues until the first one's locks expired (60 s), so with CONSUME_FROM_LAST_OFFSET it missed
    what was sent meanwhile."""
    async with Admin(embedded_cluster.namesrv_addr) as admin:
        await admin.create_topic("BOrderly", read_queue_nums=2, write_queue_nums=2)
    seen_a: list[bytes] = []
    seen_b: list[bytes] = []
    a = _broadcasting_orderly(embedded_cluster, tmp_path / "a", seen_a)
    b = _broadcasting_orderly(embedded_cluster, tmp_path / "b", seen_b)
    async with a, b:  # a starts first
        assert len(a.rebalance.process_queues) == 2
        assert len(b.rebalance.process_queues) == 2, "the second member was refused the queues' broker locks"
        async with Producer("pg-bcast-orderly", embedded_cluster.namesrv_addr) as producer:
            for i in range(10):
                await producer.send(Message("BOrderly", f"m{i}".encode()))
        await trio.sleep(30)
    expected = [f"m{i}".encode() for i in range(10)]
    assert sorted(seen_a) == expected
    assert sorted(seen_b) == expected, f"the second member got {len(seen_b)} of 10 messages"
