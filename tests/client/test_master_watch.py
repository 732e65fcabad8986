"""A producer after a failed send (client/master_watch.py), in virtual time against a real name server and broker:
the route is re-read at once, and a send waiting on a master that failed gives up as soon as the route names another
one. The failed master is a listener that accepts and never answers, as a paused (SIGSTOPped) broker does; it is
registered as broker-a's master until the real broker-a registers again, as a new DLedger leader does."""

from __future__ import annotations

import functools
import json
import zlib
from collections.abc import Callable

import pytest
import trio
import trio.testing

from broker.embedded import EmbeddedCluster
from client.admin import Admin
from client.errors import SendFailedError
from client.message import Message, SendResult, SendStatus
from client.producer import Producer
from remoting.client import RemotingClient
from remoting.codec.codes import RequestCode, ResponseCode
from remoting.codec.command import request

TOPIC = "Moving"


async def silent_master(nursery: trio.Nursery) -> str:
    """A TCP listener that reads every request and answers none."""

    async def swallow(stream: trio.SocketStream) -> None:
        while await stream.receive_some():
            pass

    listeners = await nursery.start(functools.partial(trio.serve_tcp, swallow, 0, host="127.0.0.1"))
    return f"127.0.0.1:{listeners[0].socket.getsockname()[1]}"


async def register_as_master(
    client: RemotingClient, namesrv: str, addr: str, topic: str = TOPIC, broker_name: str = "broker-a"
) -> None:
    """Register ``addr`` as ``broker_name``'s master with ``topic`` (2 queues) on ``client``'s connection (its close
    would unregister it)."""
    config = {"order": False, "perm": 6, "readQueueNums": 2, "topicFilterType": "SINGLE_TAG", "topicName": topic,
              "topicSysFlag": 0, "writeQueueNums": 2}  # fmt: skip
    body = json.dumps({"filterServerList": [], "topicConfigSerializeWrapper": {
        "dataVersion": {"counter": 99, "timestamp": 1}, "topicConfigTable": {topic: config}}}).encode()  # fmt: skip
    fields = {"brokerAddr": addr, "brokerId": "0", "brokerName": broker_name, "clusterName": "DefaultCluster",
              "compressed": "false", "haServerAddr": addr, "bodyCrc32": str(zlib.crc32(body) & 0x7FFFFFFF)}  # fmt: skip
    answer = await client.invoke(namesrv, request(RequestCode.REGISTER_BROKER, fields, body), 3)
    assert answer.code == ResponseCode.SUCCESS


async def _send(producer: Producer, asynchronous: bool) -> SendResult:
    if not asynchronous:
        return await producer.send(Message(TOPIC, b"moved"))
    done = trio.Event()
    outcome: list[object] = []

    def callback(result: object) -> None:
        outcome.append(result)
        done.set()

    producer.send_async(Message(TOPIC, b"moved"), callback)
    await done.wait()
    if isinstance(outcome[0], Exception):
        raise outcome[0]
    assert isinstance(outcome[0], SendResult), outcome[0]
    return outcome[0]


@pytest.mark.parametrize("asynchronous", [False, True], ids=["send", "send_async"])
@pytest.mark.parametrize(
    ("back_at", "within"),
    [
        # The real master registers during the first attempt: the route re-read after its timeout (3 s) names it, so
        # the next send goes there (the first spent its timeout: no retry, async or sync). Before: no re-read after a
        # timeout, three attempts on the silent one (9 s).
        (1.0, 3.5),
        # It registers during the second attempt (on the marked address): that attempt gives up within a route poll
        # (0.2 s) instead of waiting out its 3 s timeout.
        (4.0, 4.5),
    ],
)
async def test_a_send_finds_the_new_master_within_one_retry(
    embedded_cluster: EmbeddedCluster,
    autojump_clock: trio.testing.MockClock,
    asynchronous: bool,
    back_at: float,
    within: float,
) -> None:
    cluster = embedded_cluster
    async with Admin(cluster.namesrv_addr) as admin:
        await admin.create_topic(TOPIC, read_queue_nums=2, write_queue_nums=2)
    async with RemotingClient() as client, trio.open_nursery() as nursery:
        silent = await silent_master(nursery)
        await register_as_master(client, cluster.namesrv_addr, silent)
        async with Producer("pg-moving", cluster.namesrv_addr, send_msg_timeout=3.0) as producer:
            assert (await producer.publish_info(TOPIC)).route.broker_datas[0].master_addr == silent
            started = trio.current_time()
            register_again: Callable[[], None] = cluster.controller.registration.trigger
            nursery.start_soon(_after, back_at, register_again)
            # A send's send_msg_timeout covers all its attempts (sendDefaultImpl; an async one's retries get
            # MQClientAPIImpl's ``timeoutMillis - cost``): the silent master takes all of it, so that send fails; the
            # route re-read after it serves the next one.
            with pytest.raises(SendFailedError) as caught:
                await _send(producer, asynchronous)
            assert caught.value.timed_out
            result = await _send(producer, asynchronous)
            took = trio.current_time() - started
            assert result.send_status is SendStatus.SEND_OK
            assert took <= within, took
            assert producer.instance.find_broker_address("broker-a") == cluster.broker_addr
        nursery.cancel_scope.cancel()
    got = cluster.controller.context.store.get(TOPIC, result.queue_id, result.queue_offset, 1)
    assert got.messages


async def test_a_failed_send_finds_the_new_master_although_another_topic_of_the_broker_was_cached_first(
    embedded_cluster: EmbeddedCluster, autojump_clock: trio.testing.MockClock
) -> None:
    """The route re-read after the failure is the newest, so its master wins over that of another topic of the same
    broker cached before (it used to be the first route cached, and every retry went to the old master again)."""
    cluster = embedded_cluster
    async with Admin(cluster.namesrv_addr) as admin:
        for topic in ("Other", TOPIC):
            await admin.create_topic(topic, read_queue_nums=2, write_queue_nums=2)
    async with RemotingClient() as client, trio.open_nursery() as nursery:
        silent = await silent_master(nursery)
        await register_as_master(client, cluster.namesrv_addr, silent)
        async with Producer("pg-moving2", cluster.namesrv_addr, send_msg_timeout=3.0) as producer:
            assert (await producer.publish_info("Other")).route.broker_datas[0].master_addr == silent
            assert (await producer.publish_info(TOPIC)).route.broker_datas[0].master_addr == silent
            nursery.start_soon(_after, 1.0, cluster.controller.registration.trigger)
            with pytest.raises(SendFailedError):  # the silent master took the whole send_msg_timeout
                await producer.send(Message(TOPIC, b"moved"))
            result = await producer.send(Message(TOPIC, b"moved"))
            assert result.send_status is SendStatus.SEND_OK
            assert producer.instance.find_broker_address("broker-a") == cluster.broker_addr
        nursery.cancel_scope.cancel()


async def _after(delay: float, job: Callable[[], None]) -> None:
    await trio.sleep(delay)
    job()
