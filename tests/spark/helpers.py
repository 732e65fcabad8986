"""Helpers for the Spark tests: topics (on one master or two), producing test messages and reading a topic back
through the client."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Sequence

import anyio

from client import Message
from client.admin import Admin
from client.sync import Producer
from remoting.codec.message import MessageExt
from spark.session import BrokerSession
from tests.client.helpers import HANG_GUARD, create_topic, topic_on_two_brokers
from tests.threaded_cluster import ThreadedCluster


def make_topic(namesrv: str, topic: str, queues: int) -> None:
    """Create ``topic`` with ``queues`` queues and wait until the name server routes it."""
    anyio.run(create_topic, namesrv, topic, queues)


def produce(namesrv: str, msgs: Sequence[Message]) -> None:
    with Producer("spark-test-pg", namesrv) as producer:
        for msg in msgs:
            producer.send(msg)


def read_topic(namesrv: str, topic: str) -> list[MessageExt]:
    """Every message stored in ``topic``, queue by queue in offset order."""
    with BrokerSession(namesrv) as session:
        out: list[MessageExt] = []
        for mq, (low, high) in session.min_max_offsets(session.queues(topic)).items():
            out.extend(session.pull_range(mq, low, high, "TOOLS_CONSUMER"))
        return out


@contextlib.contextmanager
def on_two_masters(cluster: ThreadedCluster, topic: str) -> Iterator[None]:
    """``topic`` with a queue on the cluster's broker-a and one on an extra master broker-b, for the block. Then
    broker-b stops, and the block ends once the name server no longer lists it: later tests create their topics on
    every listed master."""
    _, stop_b = anyio.run(topic_on_two_brokers, cluster, topic)
    try:
        yield
    finally:
        stop_b()
        anyio.run(_forgotten, cluster.namesrv_addr, "broker-b")


async def _forgotten(namesrv: str, broker_name: str) -> None:
    async with Admin(namesrv) as admin:
        with anyio.fail_after(HANG_GUARD):
            while broker_name in (await admin.cluster_info()).broker_addr_table:
                await anyio.sleep(0.02)
