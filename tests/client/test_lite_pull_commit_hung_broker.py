"""A lite pull consumer whose queues live on a broker that accepts connections and answers nothing (a paused,
SIGSTOPped broker): a commit, and the persist the 5 s timer and the shutdown run, wait for that broker once, not once
per queue (Java's ``RemoteBrokerOffsetStore.persistAll`` sends every queue's offset one way, without waiting). Virtual
time against a real name server; the silent broker is a TCP listener registered with it."""

from __future__ import annotations

import functools
import json
import zlib

import trio
import trio.testing

from broker.embedded import EmbeddedCluster
from client.consumer.lite_pull import LitePullConsumer
from client.consumer.offset_store import OFFSET_RPC_TIMEOUT
from remoting.client import RemotingClient
from remoting.codec.bodies import MessageQueue
from remoting.codec.codes import RequestCode, ResponseCode
from remoting.codec.command import request

TOPIC = "OnASilentBroker"
QUEUES = 8


async def _silent_broker(nursery: trio.Nursery) -> str:
    """A TCP listener that reads every request and answers none."""

    async def swallow(stream: trio.SocketStream) -> None:
        while await stream.receive_some():
            pass

    listeners = await nursery.start(functools.partial(trio.serve_tcp, swallow, 0, host="127.0.0.1"))
    return f"127.0.0.1:{listeners[0].socket.getsockname()[1]}"


async def _register(client: RemotingClient, namesrv: str, addr: str) -> None:
    """Register ``addr`` as the master of ``broker-silent`` holding :data:`TOPIC` (:data:`QUEUES` queues)."""
    config = {"order": False, "perm": 6, "readQueueNums": QUEUES, "topicFilterType": "SINGLE_TAG", "topicName": TOPIC,
              "topicSysFlag": 0, "writeQueueNums": QUEUES}  # fmt: skip
    body = json.dumps({"filterServerList": [], "topicConfigSerializeWrapper": {
        "dataVersion": {"counter": 1, "timestamp": 1}, "topicConfigTable": {TOPIC: config}}}).encode()  # fmt: skip
    fields = {"brokerAddr": addr, "brokerId": "0", "brokerName": "broker-silent", "clusterName": "DefaultCluster",
              "compressed": "false", "haServerAddr": addr, "bodyCrc32": str(zlib.crc32(body) & 0x7FFFFFFF)}  # fmt: skip
    answer = await client.invoke(namesrv, request(RequestCode.REGISTER_BROKER, fields, body), 3)
    assert answer.code == ResponseCode.SUCCESS


async def test_a_commit_waits_for_a_silent_broker_once_not_once_per_queue(
    embedded_cluster: EmbeddedCluster, autojump_clock: trio.testing.MockClock
) -> None:
    """Eight queues on the silent broker: ``commit()`` and the timer's and shutdown's persist each used to wait out
    one request timeout per queue (24 s here), holding up the client instance's persist of every other consumer."""
    async with trio.open_nursery() as nursery, RemotingClient() as registrar:
        await _register(registrar, embedded_cluster.namesrv_addr, await _silent_broker(nursery))
        async with LitePullConsumer("lite-silent", embedded_cluster.namesrv_addr, auto_commit=False) as c:
            mqs = [MessageQueue(TOPIC, "broker-silent", i) for i in range(QUEUES)]
            c.pause(mqs)  # no pulls, just the offsets
            await c.assign(mqs)
            timeout = OFFSET_RPC_TIMEOUT
            started = trio.current_time()
            await c.commit({mq: 1 for mq in mqs})
            committing = trio.current_time() - started
            started = trio.current_time()
            await c.persist_offsets()
            persisting = trio.current_time() - started
        nursery.cancel_scope.cancel()
    assert committing <= timeout + 1, f"commit() took {committing:.0f} s of virtual time"
    assert persisting <= timeout + 1, f"the persist took {persisting:.0f} s of virtual time"


async def test_giving_up_a_silent_brokers_queues_waits_for_it_once_not_once_per_queue(
    embedded_cluster: EmbeddedCluster, autojump_clock: trio.testing.MockClock
) -> None:
    """The queues an ``assign`` gives up, or an ``unsubscribe`` drops, have their offsets persisted as a rebalance
    drops them (Java's ``RebalanceLitePullImpl.removeUnnecessaryMessageQueue`` persists each one way, without
    waiting): ours waited out one request timeout per queue of the silent broker, holding the rebalance's lock."""
    async with trio.open_nursery() as nursery, RemotingClient() as registrar:
        await _register(registrar, embedded_cluster.namesrv_addr, await _silent_broker(nursery))
        async with LitePullConsumer("lite-silent-drop", embedded_cluster.namesrv_addr, auto_commit=False) as c:
            mqs = [MessageQueue(TOPIC, "broker-silent", i) for i in range(QUEUES)]
            first, second = mqs[: QUEUES // 2], mqs[QUEUES // 2 :]
            c.pause(mqs)  # no pulls, just the offsets
            timeout, heartbeat = OFFSET_RPC_TIMEOUT, c.instance.config.rpc_timeout
            await c.assign(first)
            await c.commit({mq: 1 for mq in first}, persist=False)
            started = trio.current_time()
            await c.assign(second)  # gives the first half up
            reassigning = trio.current_time() - started
            await c.commit({mq: 1 for mq in second}, persist=False)
            started = trio.current_time()
            await c.unsubscribe(TOPIC)
            unsubscribing = trio.current_time() - started
            assert c.assignment() == set()
        nursery.cancel_scope.cancel()
    assert reassigning <= timeout + 1, f"assign() took {reassigning:.0f} s of virtual time"
    # unsubscribe() also heartbeats the brokers, the silent one included: one more timeout
    assert unsubscribing <= heartbeat + timeout + 1, f"unsubscribe() took {unsubscribing:.0f} s of virtual time"


async def test_a_rebalance_drops_a_silent_brokers_queues_without_waiting_for_it(
    embedded_cluster: EmbeddedCluster, autojump_clock: trio.testing.MockClock
) -> None:
    """A queue a rebalance drops has its offset persisted with RemoteBrokerOffsetStore.persist, which sends
    UPDATE_CONSUMER_OFFSET one way (``updateConsumeOffsetToBroker(mq, offset)`` passes ``isOneway`` true;
    RebalancePushImpl and RebalanceLitePullImpl.removeUnnecessaryMessageQueue): nothing waits for the broker. Ours
    waited for its answer, one request timeout of a silent broker, holding the rebalance's lock (a push consumer's
    pass alike: the same drop)."""
    async with trio.open_nursery() as nursery, RemotingClient() as registrar:
        await _register(registrar, embedded_cluster.namesrv_addr, await _silent_broker(nursery))
        async with LitePullConsumer("lite-silent-oneway", embedded_cluster.namesrv_addr, auto_commit=False) as c:
            mqs = [MessageQueue(TOPIC, "broker-silent", i) for i in range(QUEUES)]
            c.pause(mqs)  # no pulls, just the offsets
            await c.assign(mqs[:1])
            await c.commit({mqs[0]: 1}, persist=False)
            started = trio.current_time()
            await c.assign(mqs[1:2])  # gives the first queue up: its offset is persisted
            reassigning = trio.current_time() - started
        nursery.cancel_scope.cancel()
    assert reassigning < 0.5, f"assign() took {reassigning:.1f} s of virtual time"
