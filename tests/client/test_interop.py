"""Rebalance agrees across implementations: an ali-ons consumer (Node) and ours in one group split the queues the
way both compute them, and each new message reaches exactly one of them.

ali-ons rebalances on its own 10 s timer (it ignores NOTIFY_CONSUMER_IDS_CHANGED), so the test waits, bounded by a
hang guard, until every probe is received by exactly one consumer. Fails where node or ali-ons is not installed
(``make test`` installs it, see :func:`tests.e2e.harness.require`).
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import anyio
import anyio.abc
import pytest

from client import api
from client.consumer.allocate import allocate_average
from client.consumer.listener import ConsumeConcurrentlyStatus
from client.consumer.push import PushConsumer
from client.message import Message, MessageExt
from client.producer import Producer
from remoting.codec.bodies import MessageQueue
from tests.client.helpers import HANG_GUARD, create_topic
from tests.e2e.harness import ALI_ONS, NODE_AGENT, require
from tests.threaded_cluster import ThreadedCluster

pytestmark = [
    pytest.mark.anyio,
    pytest.mark.usefixtures("ali_ons_installed"),
]


@pytest.fixture
def ali_ons_installed() -> None:
    require(ALI_ONS)


@pytest.fixture
def anyio_backend() -> str:
    # One backend is enough here: the interop under test is on the wire, and ali-ons' 10 s timer dominates.
    return "trio"


async def _read_events(process: anyio.abc.Process, events: list[dict[str, object]]) -> None:
    assert process.stdout is not None
    buffer = b""
    async for chunk in process.stdout:
        buffer += chunk
        while b"\n" in buffer:
            line, buffer = buffer.split(b"\n", 1)
            if line.strip():
                events.append(json.loads(line))


async def test_ali_ons_and_our_consumer_split_the_queues_alike(cluster: ThreadedCluster, tmp_path: Path) -> None:
    topic, group = "Interop", "cg-interop"
    await create_topic(cluster.namesrv_addr, topic, queues=4)
    ours: list[MessageExt] = []

    async def listener(msgs: list[MessageExt]) -> ConsumeConcurrentlyStatus:
        ours.extend(msgs)
        return ConsumeConcurrentlyStatus.CONSUME_SUCCESS

    argv = ["node", str(NODE_AGENT), "consumer", "--namesrv", cluster.namesrv_addr, "--group", group, "--topic", topic]
    events: list[dict[str, object]] = []
    with (tmp_path / "ali-ons.log").open("wb") as log:
        async with (
            await anyio.open_process(argv, stdin=subprocess.PIPE, stderr=log) as agent,
            anyio.create_task_group() as tg,
        ):
            tg.start_soon(_read_events, agent, events)
            with anyio.fail_after(HANG_GUARD):
                while not any(e.get("ev") == "ready" for e in events):
                    await anyio.sleep(0.05)
            consumer = PushConsumer(group, cluster.namesrv_addr)
            consumer.subscribe(topic)
            consumer.register_message_listener(listener)
            async with consumer, Producer("pg", cluster.namesrv_addr) as producer:
                mqs = [MessageQueue(topic, "broker-a", q) for q in range(4)]
                owner: dict[int, str] = {}
                with anyio.fail_after(HANG_GUARD):
                    round_no = 0
                    while True:
                        round_no += 1
                        bodies = {q: f"probe-{round_no}-{q}" for q in range(4)}
                        for mq in mqs:
                            await producer.send(Message(topic, bodies[mq.queue_id].encode()), queue=mq)
                        await anyio.sleep(0.5)
                        mine = {m.body.decode() for m in ours}
                        theirs = {str(e.get("body")) for e in events if e.get("ev") == "recv"}
                        owner = {}
                        for q, body in bodies.items():
                            if (body in mine) != (body in theirs):
                                owner[q] = "ours" if body in mine else "ali-ons"
                        if len(owner) == 4 and sorted(owner.values()) == ["ali-ons"] * 2 + ["ours"] * 2:
                            break
                cids = await _consumer_ids(consumer, cluster, group)
                expected = {mq.queue_id for mq in allocate_average(group, consumer.instance.client_id, mqs, cids)}
                assert {q for q, who in owner.items() if who == "ours"} == expected
                assert {mq.queue_id for mq in consumer.rebalance.process_queues if mq.topic == topic} == expected
            assert agent.stdin is not None
            await agent.stdin.send(b'{"op":"stop","id":1}\n')
            with anyio.move_on_after(HANG_GUARD):
                await agent.wait()
            tg.cancel_scope.cancel()


async def test_messages_from_an_ali_ons_producer_reach_our_consumer_intact(
    cluster: ThreadedCluster, tmp_path: Path
) -> None:
    topic = "InteropIn"
    await create_topic(cluster.namesrv_addr, topic, queues=2)
    got: list[MessageExt] = []

    async def listener(msgs: list[MessageExt]) -> ConsumeConcurrentlyStatus:
        got.extend(msgs)
        return ConsumeConcurrentlyStatus.CONSUME_SUCCESS

    consumer = PushConsumer("cg-interop-in", cluster.namesrv_addr)
    consumer.subscribe(topic, "TagA")
    consumer.register_message_listener(listener)
    argv = ["node", str(NODE_AGENT), "producer", "--namesrv", cluster.namesrv_addr, "--group", "pg-ali"]
    events: list[dict[str, object]] = []
    specs = [
        {"topic": topic, "tags": "TagA", "keys": f"key{i}", "body": f"from ali-ons {i}", "props": {"origin": "node"}}
        for i in range(5)
    ] + [{"topic": topic, "tags": "TagB", "keys": "skipped", "body": "not for TagA"}]
    with (tmp_path / "ali-ons-producer.log").open("wb") as log:
        async with (
            consumer,
            await anyio.open_process(argv, stdin=subprocess.PIPE, stderr=log) as agent,
            anyio.create_task_group() as tg,
        ):
            tg.start_soon(_read_events, agent, events)
            with anyio.fail_after(HANG_GUARD):
                while not any(e.get("ev") == "ready" for e in events):
                    await anyio.sleep(0.05)
                assert agent.stdin is not None
                await agent.stdin.send(json.dumps({"op": "produce", "id": 1, "messages": specs}).encode() + b"\n")
                while len(got) < 5:
                    await anyio.sleep(0.05)
                await agent.stdin.send(b'{"op":"stop","id":2}\n')
                await agent.wait()
            tg.cancel_scope.cancel()
    assert sorted(m.body.decode() for m in got) == [f"from ali-ons {i}" for i in range(5)]
    assert {m.tags for m in got} == {"TagA"}
    assert sorted(k for m in got for k in m.keys) == [f"key{i}" for i in range(5)]
    assert {m.properties.get("origin") for m in got} == {"node"}


async def _consumer_ids(consumer: PushConsumer, cluster: ThreadedCluster, group: str) -> list[str]:
    return await api.get_consumer_id_list(consumer.instance.remoting, cluster.broker_addr, group, 3.0)
