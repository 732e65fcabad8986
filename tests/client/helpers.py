"""Helpers for client tests: topic creation (on one master or two), filling queues, a registered broker that does not
answer, polling a lite pull consumer, an orderly queue's broker lock asked for by another member, and waiting on
conditions without wall-clock thresholds."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

import anyio
import pytest

from client import api
from client.admin import Admin
from client.consumer.lite_pull import LitePullConsumer
from client.consumer.push import PushConsumer
from client.errors import TopicRouteNotFoundError
from client.message import Message, MessageExt
from client.producer import Producer
from remoting.client import RemotingClient
from remoting.codec.bodies import ConsumeFromWhere, LockBatchRequestBody, MessageQueue
from remoting.codec.bodies.broker_metadata import TopicConfig
from remoting.codec.bodies.topic_config import TopicConfigSerializeWrapper
from tests.threaded_cluster import ThreadedCluster

if TYPE_CHECKING:
    from broker.controller import BrokerController

#: Upper bound for a condition to become true. A hang guard, not a performance threshold: every wait here ends as
#: soon as the condition holds.
HANG_GUARD = 60.0


async def create_topic(namesrv_addr: str, topic: str, queues: int = 4) -> None:
    """Create ``topic`` on every master and wait until the name server routes it with ``queues`` queues (the broker
    registers the change asynchronously)."""
    async with Admin(namesrv_addr) as admin:
        await admin.create_topic(topic, read_queue_nums=queues, write_queue_nums=queues)
        with anyio.fail_after(HANG_GUARD):
            while True:
                try:
                    route = await admin.topic_route(topic)
                except TopicRouteNotFoundError:
                    route = None
                if route is not None and sum(q.write_queue_nums for q in route.queue_datas) == queues:
                    return
                await anyio.sleep(0.02)


async def topic_on_two_brokers(
    cluster: ThreadedCluster, topic: str, queues: int = 1, name: str = "broker-b"
) -> tuple[str, Callable[[], None]]:
    """``topic`` with ``queues`` queues on broker-a (the cluster's own) and as many on an extra master ``name``,
    once the name server routes both. Returns the extra broker's address and its stopper."""
    addr_b, stop_b = await anyio.to_thread.run_sync(cluster.start_extra_broker, name)
    async with Admin(cluster.namesrv_addr) as admin:
        for addr in (cluster.broker_addr, addr_b):
            await admin.create_topic(topic, read_queue_nums=queues, write_queue_nums=queues, broker_addr=addr)
        with anyio.fail_after(HANG_GUARD):
            while True:
                try:
                    if len((await admin.topic_route(topic)).queue_datas) == 2:
                        return addr_b, stop_b
                except TopicRouteNotFoundError:
                    pass
                await anyio.sleep(0.02)


async def fill_queues(namesrv_addr: str, topic: str, per_queue: int) -> list[MessageQueue]:
    """Send ``per_queue`` messages, bodies ``<broker>-<queue id>-<i>``, to every queue of ``topic``; returns the
    queues, sorted."""
    async with Producer("pg", namesrv_addr) as producer:
        info = await producer.publish_info(topic)
        for mq in info.message_queues:
            for i in range(per_queue):
                await producer.send(Message(topic, f"{mq.broker_name}-{mq.queue_id}-{i}".encode()), queue=mq)
        return sorted(info.message_queues)


async def wait_until(condition: Callable[[], bool], poll: float = 0.02) -> None:
    """Return once ``condition()`` holds; fail the test if it never does (see :data:`HANG_GUARD`)."""
    with anyio.fail_after(HANG_GUARD):
        while not condition():
            await anyio.sleep(poll)


def register_dead_broker(
    threaded: ThreadedCluster, *, name: str, addr: str, topics: tuple[str, ...] = (), cluster: str = "DefaultCluster"
) -> None:
    """Register a master ``name`` at ``addr`` with the cluster's name server (as its REGISTER_BROKER would) that does
    not answer requests: a broker that went down before the name server noticed. Blocks; call it from a thread in an
    async test."""

    async def register() -> None:
        assert threaded.cluster is not None and threaded.cluster.namesrv is not None
        ns = threaded.cluster.namesrv
        wrapper = TopicConfigSerializeWrapper({t: TopicConfig(t, 4, 4) for t in topics})
        ns.route_table.register_broker(
            cluster_name=cluster,
            broker_addr=addr,
            broker_name=name,
            broker_id=0,
            ha_server_addr="",
            topic_config_wrapper=wrapper,
            filter_server_list=None,
            connection=None,
            now=ns.processor._clock(),
        )

    threaded.call(register)


async def send_bodies(namesrv_addr: str, topic: str, bodies: list[bytes]) -> None:
    """Send each of ``bodies`` to ``topic`` with a producer of its own, one by one."""
    async with Producer("pg-helpers", namesrv_addr) as producer:
        for body in bodies:
            await producer.send(Message(topic, body))


async def poll_until(consumer: LitePullConsumer, count: int, rounds: int = 200, each: float = 0.5) -> list[MessageExt]:
    """Poll (``each`` seconds, at most ``rounds`` times) until ``count`` messages arrived; what arrived, maybe
    fewer."""
    got: list[MessageExt] = []
    for _ in range(rounds):
        got.extend(await consumer.poll(timeout=each))
        if len(got) >= count:
            break
    return got


async def lock_for_another_member(broker_addr: str, group: str, mq: MessageQueue) -> bool:
    """Whether another member of ``group`` gets ``mq``'s broker lock now (LOCK_BATCH_MQ, as its rebalance would; it
    then holds it until it expires)."""
    body = LockBatchRequestBody(consumer_group=group, client_id="127.0.0.2@other", mq_set=frozenset({mq}))
    async with RemotingClient() as client:
        return mq in await api.lock_batch_mq(client, broker_addr, body, 3.0)


async def commit_offset(ns: str, addr: str, group: str, topic: str) -> None:
    """``group``'s offset 0 on queue 0 of ``topic`` at ``addr`` (broker-a), so the group has consume stats there."""
    async with Admin(ns) as admin:
        await admin.update_consumer_offset(addr, group, MessageQueue(topic, "broker-a", 0), 0)


def first_offset_consumer(namesrv_addr: str, group: str, topic: str, **options: int) -> PushConsumer:
    """A push consumer of ``topic`` from its first offset, stopping within a second; ``options`` are its settings."""
    consumer = PushConsumer(
        group,
        namesrv_addr,
        consume_from_where=ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET,
        await_termination=1.0,
        **options,  # type: ignore[arg-type]
    )
    consumer.subscribe(topic)
    return consumer


def runtime_as_5x(controller: BrokerController, monkeypatch: pytest.MonkeyPatch, transferred: str) -> None:
    """Rename the broker's runtime info's transfer rates as a RocketMQ 5 broker names them: ``getTransferredTps``
    (5.3.3's StoreStatsService) for 4.9.8's ``getTransferedTps``, ``transferred`` the three rates."""
    stats = controller.context.stats
    four = stats.runtime_entries

    def as_five() -> dict[str, str]:
        entries = four()
        entries.pop("getTransferedTps")
        return {**entries, "getTransferredTps": transferred}

    monkeypatch.setattr(stats, "runtime_entries", as_five)
