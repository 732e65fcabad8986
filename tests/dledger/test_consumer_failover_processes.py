"""Real processes (the harness of bench/dledger_failover.py): a name server and three ``mqbroker`` in DLedger mode,
our producer and our push consumer in this process. The leader is killed with SIGKILL mid-stream; the producer
goes on with the new leader once its route names it, and the consumer, which keeps pulling (from a follower while
no leader is routed, then from the new leader), receives every message the producer saw SEND_OK at least once.
Duplicates are allowed (at-least-once, as RocketMQ: offsets committed to the old leader since the followers' last
slave sync are replayed) and reported. Short DLedger timings and a 2 s route poll keep it to about a minute."""

from __future__ import annotations

import signal
from collections import Counter
from pathlib import Path

import pytest
import trio

from bench.dledger_failover import TOPIC, Group
from client.config import ClientConfig
from client.consumer.listener import ConsumeConcurrentlyStatus
from client.consumer.push import PushConsumer
from client.errors import MQClientError
from client.message import Message, MessageExt, SendStatus
from client.producer import Producer
from remoting.client import RemotingClient
from remoting.codec.bodies import ConsumeFromWhere
from remoting.codec.codes import RequestCode, ResponseCode
from remoting.codec.command import request
from remoting.errors import RemotingError
from tests.dledger.ports import FAST

#: Registration every 2 s (30 s by default): followers learn the leader's address, then its topics (slave sync,
#: 10 s rounds), sooner.
SETTINGS = {**FAST, "registerNameServerPeriod": 2000}


async def knows_topic(client: RemotingClient, addr: str) -> bool:
    try:
        answer = await client.invoke(addr, request(RequestCode.GET_TOPIC_CONFIG, {"topic": TOPIC}), 3)
    except RemotingError:
        return False
    return answer.code == ResponseCode.SUCCESS


@pytest.mark.timeout(300)
async def test_a_consumer_receives_every_acknowledged_message_through_a_leader_kill(tmp_path: Path) -> None:
    group = Group(tmp_path, 0, SETTINGS)
    acked: set[bytes] = set()
    seen: Counter[bytes] = Counter()

    async def listener(msgs: list[MessageExt]) -> ConsumeConcurrentlyStatus:
        seen.update(m.body for m in msgs)
        return ConsumeConcurrentlyStatus.CONSUME_SUCCESS

    async def produce(producer: Producer, prefix: str, count: int) -> None:
        done = 0
        while done < count:
            try:
                result = await producer.send(Message(TOPIC, f"{prefix}-{done}".encode()))
            except (MQClientError, RemotingError):
                await trio.sleep(0.2)
                continue
            if result.send_status is SendStatus.SEND_OK:
                acked.add(f"{prefix}-{done}".encode())
                done += 1

    try:
        async with RemotingClient() as client, trio.open_nursery() as nursery:
            leader = await group.boot(client, nursery)
            with trio.fail_after(60):  # the followers copy the topic (registration, then slave sync)
                while not all([await knows_topic(client, m.addr) for m in group.members.values()]):
                    await trio.sleep(0.5)

            def config(name: str) -> ClientConfig:
                return ClientConfig(namesrv_addr=group.namesrv_addr, poll_name_server_interval=2.0, instance_name=name)

            consumer = PushConsumer(
                "cg-dledger-kill",
                config=config("consumer"),
                consume_from_where=ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET,
            )
            consumer.subscribe(TOPIC)
            consumer.register_message_listener(listener)
            producer = Producer("pg-dledger-kill", config=config("producer"))
            async with producer, consumer:
                with trio.fail_after(60):
                    await produce(producer, "before", 150)
                group.signal(leader, signal.SIGKILL)
                with trio.fail_after(90):
                    await produce(producer, "after", 150)
                with trio.fail_after(90):
                    while not acked <= set(seen):
                        await trio.sleep(0.5)
            nursery.cancel_scope.cancel()
    finally:
        await group.kill_all()
    assert group.member_at(group.master) is not leader
    assert acked <= set(seen), sorted(acked - set(seen))[:10]
    assert set(seen) == acked  # nothing foreign (every body is retried until it is acknowledged)
    duplicates = sum(n - 1 for n in seen.values())
    print(f"{len(acked)} acknowledged, {len(seen)} distinct consumed, {duplicates} duplicates")
