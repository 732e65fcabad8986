"""A stored message with the COMPRESSED sysFlag whose body does not inflate (a faulty producer) fails the same way on
every pull. Java's MessageDecoder.decode inflates while it decodes and returns null when that fails; decodes() stops
there, so the pull's list ends before that message, and the consumer goes on from nextBeginOffset
(PullAPIWrapper.processPullResult): neither the push nor the lite pull consumer stalls on it. Virtual time against the
embedded name server and broker, real sockets on 127.0.0.1."""

from __future__ import annotations

import time
import zlib
from collections.abc import Awaitable, Callable

import trio
import trio.testing

from broker.embedded import EmbeddedCluster
from client import api
from client.admin import Admin
from client.consumer.listener import ConsumeConcurrentlyStatus
from client.consumer.lite_pull import LitePullConsumer
from client.consumer.push import PushConsumer
from client.message import COMPRESSION_ZLIB, Message, MessageExt
from client.producer import Producer
from remoting.client import RemotingClient
from remoting.codec.bodies import ConsumeFromWhere
from remoting.codec.headers import SendMessageRequestHeaderV2
from remoting.codec.message import SYSFLAG_COMPRESSED, MessageRecord, encode_record


async def _create(cluster: EmbeddedCluster, topic: str) -> None:
    async with Admin(cluster.namesrv_addr) as admin:
        await admin.create_topic(topic, read_queue_nums=1, write_queue_nums=1)


async def _send(cluster: EmbeddedCluster, topic: str, body: bytes) -> None:
    async with Producer("pg-compressed", cluster.namesrv_addr) as producer:
        await producer.send(Message(topic, body))


async def _send_uninflatable(cluster: EmbeddedCluster, topic: str) -> None:
    """Send a message flagged COMPRESSED whose body is not zlib, as a faulty producer would."""
    header = SendMessageRequestHeaderV2(
        a="pg-raw", b=topic, c="TBW102", d=4, e=0, f=SYSFLAG_COMPRESSED, g=int(time.time() * 1000), h=0, i=""
    )
    async with RemotingClient() as client:
        await api.send_message(
            client, cluster.broker_addr, "broker-a", header.to_ext_fields(), b"not zlib", 3.0, uniq_id=""
        )


def _collecting(seen: list[bytes]) -> Callable[[list[MessageExt]], Awaitable[ConsumeConcurrentlyStatus]]:
    async def listener(msgs: list[MessageExt]) -> ConsumeConcurrentlyStatus:
        seen.extend(m.body for m in msgs)
        return ConsumeConcurrentlyStatus.CONSUME_SUCCESS

    return listener


def test_a_pull_body_ends_at_the_first_message_that_does_not_inflate_as_javas_decodes() -> None:
    """The messages before the one that does not inflate are handed over inflated; it and the ones after it in the
    same pull are dropped, as Java's decodes() breaks out of its loop (the buffer is at its limit)."""
    flags = SYSFLAG_COMPRESSED | COMPRESSION_ZLIB
    body = b"".join(
        encode_record(MessageRecord(topic="T", body=b, sys_flag=f), queue_offset=i)
        for i, (b, f) in enumerate([(zlib.compress(b"one"), flags), (b"not zlib", flags), (b"three", 0)])
    )
    messages = api.pulled_messages(body, api.PullHead(0, 3, 0, 3), None)
    assert [(m.body, m.queue_offset, m.sys_flag & SYSFLAG_COMPRESSED) for m in messages] == [(b"one", 0, 0)]


async def test_a_stored_message_whose_compressed_body_does_not_inflate_does_not_stall_its_queue(
    embedded_cluster: EmbeddedCluster, autojump_clock: trio.testing.MockClock
) -> None:
    """The push consumer consumes what is sent after the message; it used to take the failure for a body to pull
    again and re-pull the same offset every 3 s for ever."""
    await _create(embedded_cluster, "BadZlib")
    seen: list[bytes] = []
    consumer = PushConsumer(
        "cg-bad-zlib", embedded_cluster.namesrv_addr, consume_from_where=ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET
    )
    consumer.subscribe("BadZlib")
    consumer.register_message_listener(_collecting(seen))
    async with consumer:
        await _send(embedded_cluster, "BadZlib", b"before")
        with trio.fail_after(60):
            while b"before" not in seen:
                await trio.sleep(0.1)
        await _send_uninflatable(embedded_cluster, "BadZlib")
        await trio.sleep(5)
        await _send(embedded_cluster, "BadZlib", b"after")
        with trio.move_on_after(120):
            while b"after" not in seen:
                await trio.sleep(0.5)
    assert seen == [b"before", b"after"], f"the queue stalled behind the message that does not inflate: {seen}"


async def test_a_lite_pull_consumer_polls_past_a_message_that_does_not_inflate(
    embedded_cluster: EmbeddedCluster, autojump_clock: trio.testing.MockClock
) -> None:
    """The lite pull consumer's pulls decode the same way: the message is skipped, the one sent after it (in a pull
    of its own) is polled."""
    await _create(embedded_cluster, "BadZlibLite")
    await _send_uninflatable(embedded_cluster, "BadZlibLite")
    polled: list[bytes] = []
    async with LitePullConsumer(
        "lite-bad-zlib", embedded_cluster.namesrv_addr, consume_from_where=ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET
    ) as consumer:
        await consumer.subscribe("BadZlibLite")
        polled.extend(m.body for m in await consumer.poll(timeout=5.0))  # the pull that found only that message
        await _send(embedded_cluster, "BadZlibLite", b"after")
        with trio.move_on_after(120):
            while not polled:
                polled.extend(m.body for m in await consumer.poll(timeout=1.0))
    assert polled == [b"after"]
