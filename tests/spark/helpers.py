"""Helpers for the Spark tests: topics, producing test messages and reading a topic back through the client."""

from __future__ import annotations

from collections.abc import Sequence

import anyio

from client import Message
from client.sync import Producer
from remoting.codec.message import MessageExt
from spark.session import BrokerSession
from tests.client.helpers import create_topic


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
