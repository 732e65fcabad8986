"""The one workload, driven against each system: acknowledged durable publishes, then a drain of what was stored.

Publish: ``inflight`` concurrent publishers, each awaiting its acknowledgement (rocketrio SEND_OK, Redis XADD
reply, RabbitMQ publisher confirm, JetStream PubAck, MQTT PUBACK), bounded by ``duration`` seconds and
``max_messages``; an answer that is not an acknowledgement (another SendStatus, a WAIT no replica answered) fails the
row. Consume: read back the messages published (Redis XREADGROUP + XACK, RabbitMQ basic.consume + ack,
JetStream pull fetch + ack, rocketrio push consumer), bounded by ``drain_timeout``. Each driver is an async function
run by anyio (rocketrio on trio, the peers on asyncio, their clients' runtime; the MQTT driver is asyncio-only)
returning a :class:`Measurement`.
A driver that fails raises; the suite records the error for that row.
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any

import anyio
import attrs

from bench.load.stats import percentile

if TYPE_CHECKING:
    from client import Message, Producer

TOPIC = "BenchCompare"


@attrs.frozen
class Workload:
    size: int = 128
    inflight: int = 32
    duration: float = 3.0
    max_messages: int = 200_000
    drain_timeout: float = 20.0


@attrs.frozen
class Measurement:
    """A row's figures; ``expected`` is what the drain had to read back (the published messages, and rocketrio's
    route warm-up send): a drain that read fewer ran out of ``drain_timeout`` (``drained`` False)."""

    published: int
    publish_seconds: float
    p50_ms: float
    p99_ms: float
    consumed: int
    consume_seconds: float
    expected: int

    @property
    def drained(self) -> bool:
        return self.consumed >= self.expected

    @property
    def publish_rps(self) -> float:
        return self.published / self.publish_seconds if self.publish_seconds else 0.0

    @property
    def consume_rps(self) -> float:
        return self.consumed / self.consume_seconds if self.consume_seconds else 0.0


async def publish_loop(send: Callable[[], Awaitable[Any]], w: Workload) -> tuple[int, float, list[float]]:
    """(acknowledged count, seconds, latencies ms) of ``w.inflight`` publishers calling ``send``. The first ``send``
    that raises stops them all and is raised as itself (not inside an ExceptionGroup), so the row says why."""
    latencies: list[float] = []
    failures: list[Exception] = []
    budget = w.max_messages
    start = anyio.current_time()
    deadline = start + w.duration

    async def publisher() -> None:
        nonlocal budget
        while budget > 0 and anyio.current_time() < deadline:
            budget -= 1
            t0 = time.perf_counter()
            try:
                await send()
            except Exception as exc:
                failures.append(exc)
                tg.cancel_scope.cancel()
                return
            latencies.append((time.perf_counter() - t0) * 1000)

    async with anyio.create_task_group() as tg:
        for _ in range(w.inflight):
            tg.start_soon(publisher)
    if failures:
        raise failures[0]
    return len(latencies), anyio.current_time() - start, latencies


def _measure(
    published: tuple[int, float, list[float]], consumed: int, consume_seconds: float, expected: int | None = None
) -> Measurement:
    """The row of a publish loop's result and its drain (``expected``: the published count unless said)."""
    count, seconds, latencies = published
    latencies.sort()
    p50, p99 = percentile(latencies, 0.5), percentile(latencies, 0.99)
    return Measurement(count, seconds, p50, p99, consumed, consume_seconds, count if expected is None else expected)


# -- rocketrio (trio) -----------------------------------------------------------------------------------------------


async def send_ok(producer: Producer, msg: Message) -> None:
    """Send ``msg``; raise unless the broker answered SEND_OK. A message stored but not flushed or replicated in time
    (FLUSH_DISK_TIMEOUT, FLUSH_SLAVE_TIMEOUT, SLAVE_NOT_AVAILABLE) is not acknowledged: it fails the row, as a Redis
    ``WAIT`` that no replica answered does."""
    from client import SendStatus

    status = (await producer.send(msg)).send_status
    if status is not SendStatus.SEND_OK:
        raise RuntimeError(f"rocketrio answered {status.name}: the publish was not acknowledged")


async def rocketrio(namesrv: str, w: Workload) -> Measurement:
    from client import ConsumeConcurrentlyStatus, ConsumeFromWhere, Message, MessageExt, Producer, PushConsumer

    body = b"r" * w.size
    async with Producer("bench_compare_pg", namesrv) as producer:
        await send_ok(producer, Message(TOPIC, body))
        published = await publish_loop(lambda: send_ok(producer, Message(TOPIC, body)), w)
    target = published[0] + 1
    received = 0
    done = anyio.Event()

    async def listener(msgs: list[MessageExt]) -> ConsumeConcurrentlyStatus:
        nonlocal received
        received += len(msgs)
        if received >= target:
            done.set()
        return ConsumeConcurrentlyStatus.CONSUME_SUCCESS

    consumer = PushConsumer(
        "bench_compare_cg",
        namesrv,
        consume_from_where=ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET,
        consume_message_batch_max_size=32,
    )
    consumer.subscribe(TOPIC)
    consumer.register_message_listener(listener)
    start = anyio.current_time()
    async with consumer:
        with anyio.move_on_after(w.drain_timeout):
            await done.wait()
        seconds = anyio.current_time() - start
    return _measure(published, received, seconds, target)


# -- Redis Streams (asyncio) ----------------------------------------------------------------------------------------


async def redis_streams(port: int, w: Workload) -> Measurement:
    import redis.asyncio as aioredis

    body = b"r" * w.size
    client = aioredis.Redis(host="127.0.0.1", port=port, max_connections=w.inflight + 2)
    try:
        await client.xgroup_create("bench", "cg", id="0", mkstream=True)
        published = await publish_loop(lambda: client.xadd("bench", {"b": body}), w)
        return _measure(published, *await _redis_drain(client, published[0], w))
    finally:
        await client.aclose()


async def _redis_drain(client: Any, count: int, w: Workload) -> tuple[int, float]:
    """(entries read and acknowledged, seconds) reading ``count`` entries of the stream back as group ``cg``."""
    consumed = 0
    start = anyio.current_time()
    with anyio.move_on_after(w.drain_timeout):
        while consumed < count:
            reply = await client.xreadgroup("cg", "c1", {"bench": ">"}, count=512)
            if not reply:
                break
            ids = [entry_id for entry_id, _ in reply[0][1]]
            await client.xack("bench", "cg", *ids)
            consumed += len(ids)
    return consumed, anyio.current_time() - start


async def redis_replicated(port: int, w: Workload) -> Measurement:
    """Redis Streams acknowledged once a replica has the entry: each XADD is followed by ``WAIT 1`` on the same
    connection (a pipeline); a WAIT that times out (no replica acknowledged) fails the row."""
    import redis.asyncio as aioredis

    body = b"r" * w.size
    client = aioredis.Redis(host="127.0.0.1", port=port, max_connections=w.inflight + 2)
    try:
        with anyio.fail_after(30):  # until the replica finished its initial sync and streams
            while (await client.info("replication")).get("slave0", {}).get("state") != "online":
                await anyio.sleep(0.1)
        await client.xgroup_create("bench", "cg", id="0", mkstream=True)

        async def send() -> None:
            async with client.pipeline(transaction=False) as pipe:
                pipe.xadd("bench", {"b": body})
                pipe.execute_command("WAIT", 1, 5000)
                _entry, replicas = await pipe.execute()
            if int(replicas) < 1:
                raise RuntimeError("WAIT 1 timed out: no replica acknowledged the entry")

        published = await publish_loop(send, w)
        return _measure(published, *await _redis_drain(client, published[0], w))
    finally:
        await client.aclose()


# -- RabbitMQ (asyncio) ---------------------------------------------------------------------------------------------


async def rabbitmq(port: int, w: Workload, queue_type: str = "classic") -> Measurement:
    """Persistent messages to a durable queue with publisher confirms; a ``quorum`` queue (on a cluster) confirms
    once a majority of its members has the message."""
    import aio_pika

    body = b"r" * w.size
    connection = await aio_pika.connect(host="127.0.0.1", port=port)
    try:
        channel = await connection.channel(publisher_confirms=True)
        queue = await channel.declare_queue("bench", durable=True, arguments={"x-queue-type": queue_type})

        async def send() -> None:
            message = aio_pika.Message(body, delivery_mode=aio_pika.DeliveryMode.PERSISTENT)
            await channel.default_exchange.publish(message, routing_key="bench")

        published = await publish_loop(send, w)
        consumer_channel = await connection.channel()
        await consumer_channel.set_qos(prefetch_count=512)
        queue = await consumer_channel.get_queue("bench")
        consumed = 0
        start = anyio.current_time()
        with anyio.move_on_after(w.drain_timeout):
            async with queue.iterator() as messages:
                async for message in messages:
                    await message.ack()
                    consumed += 1
                    if consumed >= published[0]:
                        break
        return _measure(published, consumed, anyio.current_time() - start)
    finally:
        await connection.close()


async def rabbitmq_quorum(port: int, w: Workload) -> Measurement:
    return await rabbitmq(port, w, queue_type="quorum")


# -- NATS JetStream (asyncio) ---------------------------------------------------------------------------------------


async def nats_jetstream(port: int, w: Workload, replicas: int = 1) -> Measurement:
    """JetStream publishes acknowledged by a PubAck; with ``replicas`` > 1 (a cluster) the stream is replicated and
    the PubAck comes once a majority of its replicas stored the message."""
    import nats

    body = b"r" * w.size
    nc = await nats.connect(f"nats://127.0.0.1:{port}")
    try:
        js = nc.jetstream()
        await _add_stream(js, replicas)
        published = await publish_loop(lambda: js.publish("bench", body, timeout=10), w)
        sub = await js.pull_subscribe("bench", "cg")
        consumed = 0
        start = anyio.current_time()
        with anyio.move_on_after(w.drain_timeout):
            while consumed < published[0]:
                batch = await sub.fetch(512, timeout=5)
                for message in batch:
                    await message.ack()
                consumed += len(batch)
        return _measure(published, consumed, anyio.current_time() - start)
    finally:
        await nc.close()


async def nats_jetstream_replicated(port: int, w: Workload) -> Measurement:
    return await nats_jetstream(port, w, replicas=3)


async def _add_stream(js: Any, replicas: int) -> None:
    """Create the stream; a new cluster answers "temporarily unavailable" (or not at all) until it elected its
    JetStream leader, so that is retried, and a replicated stream is awaited until it has a leader (60 s in all)."""
    from nats.errors import TimeoutError as NatsTimeout
    from nats.js.errors import APIError

    with anyio.fail_after(60):
        while True:
            try:
                await js.add_stream(name="BENCH", subjects=["bench"], num_replicas=replicas)
                break
            except (APIError, NatsTimeout):
                if replicas == 1:
                    raise
                await anyio.sleep(0.5)
        while replicas > 1 and not getattr((await js.stream_info("BENCH")).cluster, "leader", None):
            await anyio.sleep(0.2)  # until the stream's replicas elected their leader


# -- Mosquitto, MQTT QoS 1 (paho's network thread) ------------------------------------------------------------------


async def mosquitto(port: int, w: Workload) -> Measurement:
    """QoS 1 publishes acknowledged by PUBACK; a persistent-session subscriber (QoS 1) is registered first and
    drains its queued messages afterwards."""
    import paho.mqtt.client as mqtt
    from paho.mqtt.enums import CallbackAPIVersion

    body = b"r" * w.size
    sub_received = 0
    sub_done = threading.Event()
    target = [w.max_messages + 1]

    def on_message(client: Any, userdata: Any, message: Any) -> None:
        nonlocal sub_received
        sub_received += 1
        if sub_received >= target[0]:
            sub_done.set()

    subscriber = mqtt.Client(CallbackAPIVersion.VERSION2, client_id="bench-sub", clean_session=False)
    subscriber.connect("127.0.0.1", port)
    subscriber.subscribe("bench", qos=1)
    subscriber.loop(timeout=1.0)
    subscriber.disconnect()  # offline: the broker queues (and persists) its QoS 1 messages

    publisher = mqtt.Client(CallbackAPIVersion.VERSION2, client_id="bench-pub")
    publisher.max_inflight_messages_set(w.inflight)
    publisher.max_queued_messages_set(w.inflight)
    pending: dict[int, asyncio.Event] = {}
    loop = asyncio.get_running_loop()

    def on_publish(client: Any, userdata: Any, mid: int, reason: Any, properties: Any) -> None:
        # paho's thread holds its lock here while publish() may wait for it: hand over without blocking
        event = pending.pop(mid, None)
        if event is not None:
            loop.call_soon_threadsafe(event.set)

    publisher.on_publish = on_publish
    publisher.connect("127.0.0.1", port)
    publisher.loop_start()
    try:

        async def send() -> None:
            acked = asyncio.Event()
            info = publisher.publish("bench", body, qos=1)
            pending[info.mid] = acked
            if info.is_published():
                pending.pop(info.mid, None)
                return
            await acked.wait()

        published = await publish_loop(send, w)
    finally:
        publisher.loop_stop()
        publisher.disconnect()
    target[0] = published[0]
    subscriber.on_message = on_message
    start = anyio.current_time()
    subscriber.reconnect()
    subscriber.loop_start()
    try:
        await anyio.to_thread.run_sync(sub_done.wait, w.drain_timeout)
    finally:
        subscriber.loop_stop()
        subscriber.disconnect()
    return _measure(published, sub_received, anyio.current_time() - start)
