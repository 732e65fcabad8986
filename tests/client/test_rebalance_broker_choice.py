"""Rebalance asks one of the topic's masters for the group's consumer ids, in random order and the next one when it
fails (Java picks one at random): it used to ask the first by name every pass, so one master that accepts and never
answers (a paused broker) stalled the whole topic's rebalance. Virtual time, a real name server and broker."""

from __future__ import annotations

import functools
import json
import zlib

import trio
import trio.testing

from broker.embedded import EmbeddedCluster
from client.admin import Admin
from client.consumer.listener import ConsumeConcurrentlyStatus
from client.consumer.push import PushConsumer
from client.message import MessageExt
from remoting.client import RemotingClient
from remoting.codec.codes import RequestCode, ResponseCode
from remoting.codec.command import request

TOPIC = "TwoMasters"


async def _silent_master(nursery: trio.Nursery) -> str:
    """A TCP listener that reads every request and answers none."""

    async def swallow(stream: trio.SocketStream) -> None:
        while await stream.receive_some():
            pass

    listeners = await nursery.start(functools.partial(trio.serve_tcp, swallow, 0, host="127.0.0.1"))
    return f"127.0.0.1:{listeners[0].socket.getsockname()[1]}"


async def _register(client: RemotingClient, namesrv: str, addr: str, broker_name: str) -> None:
    config = {"order": False, "perm": 6, "readQueueNums": 2, "topicFilterType": "SINGLE_TAG", "topicName": TOPIC,
              "topicSysFlag": 0, "writeQueueNums": 2}  # fmt: skip
    body = json.dumps({"filterServerList": [], "topicConfigSerializeWrapper": {
        "dataVersion": {"counter": 99, "timestamp": 1}, "topicConfigTable": {TOPIC: config}}}).encode()  # fmt: skip
    fields = {"brokerAddr": addr, "brokerId": "0", "brokerName": broker_name, "clusterName": "DefaultCluster",
              "compressed": "false", "haServerAddr": addr, "bodyCrc32": str(zlib.crc32(body) & 0x7FFFFFFF)}  # fmt: skip
    answer = await client.invoke(namesrv, request(RequestCode.REGISTER_BROKER, fields, body), 3)
    assert answer.code == ResponseCode.SUCCESS


async def _listener(msgs: list[MessageExt]) -> ConsumeConcurrentlyStatus:
    return ConsumeConcurrentlyStatus.CONSUME_SUCCESS


async def test_a_master_that_never_answers_does_not_stall_rebalance(
    embedded_cluster: EmbeddedCluster, autojump_clock: trio.testing.MockClock
) -> None:
    async with Admin(embedded_cluster.namesrv_addr) as admin:
        await admin.create_topic(TOPIC, read_queue_nums=2, write_queue_nums=2)
    async with RemotingClient() as client, trio.open_nursery() as nursery:
        silent = await _silent_master(nursery)
        await _register(client, embedded_cluster.namesrv_addr, silent, "broker-0")  # first by name
        consumer = PushConsumer("cg-two-masters", embedded_cluster.namesrv_addr)
        consumer.subscribe(TOPIC)
        consumer.register_message_listener(_listener)
        async with consumer:
            for _ in range(3):
                await consumer.rebalance.do_rebalance()
            owned = {mq.broker_name for mq in consumer.rebalance.process_queues if mq.topic == TOPIC}
            assert "broker-a" in owned
        nursery.cancel_scope.cancel()
