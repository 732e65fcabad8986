"""Producer against the embedded cluster: send modes, batches refused over 4 MiB, compression, the missing-route error,
and retries that move to the other broker when one of two is down."""

from __future__ import annotations

import functools
import logging
import random
import socket
import zlib

import anyio
import pytest

from client.api import pull_message
from client.async_send import AsyncSend
from client.config import ClientConfig
from client.errors import SendFailedError, TopicRouteNotFoundError
from client.instance import MQClientInstance
from client.message import Message, SendResult, SendStatus
from client.producer import Producer
from client.selector import select_by_hash
from remoting.client import RemotingClient
from remoting.codec.codes import RequestCode
from remoting.codec.command import request
from remoting.codec.headers import PullMessageRequestHeader
from remoting.codec.message import SYSFLAG_COMPRESSED, MessageExt, iter_records
from remoting.errors import RemotingConnectError
from tests.client.helpers import create_topic, register_dead_broker, topic_on_two_brokers, wait_until
from tests.threaded_cluster import ThreadedCluster

pytestmark = pytest.mark.anyio


def _pull_header(topic: str, queue_id: int, offset: int = 0, max_nums: int = 32) -> PullMessageRequestHeader:
    return PullMessageRequestHeader(
        consumer_group="probe",
        topic=topic,
        queue_id=queue_id,
        queue_offset=offset,
        max_msg_nums=max_nums,
        sys_flag=0x4,  # SUBSCRIPTION: the probe group never sent a heartbeat
        commit_offset=0,
        suspend_timeout_millis=0,
        sub_version=0,
        subscription="*",
        expression_type="TAG",
    )


async def _stored(broker_addr: str, topic: str, queues: int) -> list[MessageExt]:
    """Every message stored in ``topic`` (as the client decodes it: inflated)."""
    found: list[MessageExt] = []
    async with RemotingClient() as remoting:
        for qid in range(queues):
            offset = 0
            while True:
                result = await pull_message(remoting, broker_addr, _pull_header(topic, qid, offset), 10.0)
                if not result.messages:
                    break
                found.extend(result.messages)
                offset = result.next_begin_offset
    return found


async def _raw(broker_addr: str, topic: str, queues: int = 1) -> list[MessageExt]:
    """The records of ``topic``'s first ``queues`` queues as the broker sends them (bodies as stored, not inflated;
    one pull of at most 32 a queue)."""
    raw: list[MessageExt] = []
    async with RemotingClient() as remoting:
        for qid in range(queues):
            cmd = request(RequestCode.PULL_MESSAGE, _pull_header(topic, qid).to_ext_fields())
            raw += list(iter_records((await remoting.invoke(broker_addr, cmd, 10.0)).body))
    return raw


async def _send_retry_copy(
    cluster: ThreadedCluster,
    group: str,
    topic: str,
    msg: MessageExt,
    reconsume_times: int,
    *,
    create_retry_topic: bool = True,
) -> None:
    """A push consumer of ``group`` on ``topic`` sends ``msg``'s retry copy as its failed send back's fallback does
    (the client's inner producer, at most 16 reconsumes), its retry topic created first (unless told not to)."""
    from client.consumer.consume import send_retry_copy
    from client.consumer.listener import ConsumeConcurrentlyStatus
    from client.consumer.push import PushConsumer

    async def listener(msgs: list[MessageExt]) -> ConsumeConcurrentlyStatus:
        return ConsumeConcurrentlyStatus.CONSUME_SUCCESS

    consumer = PushConsumer(group, cluster.namesrv_addr)
    consumer.subscribe(topic)
    consumer.register_message_listener(listener)
    async with consumer:
        if create_retry_topic:
            await create_topic(cluster.namesrv_addr, f"%RETRY%{group}", queues=1)
        await send_retry_copy(consumer, msg, reconsume_times, 16)


async def test_sync_send_is_stored_and_acknowledged(cluster: ThreadedCluster) -> None:
    await create_topic(cluster.namesrv_addr, "SendSync", queues=2)
    async with Producer("pg", cluster.namesrv_addr) as producer:
        msg = Message("SendSync", b"hello", tags="TagA", keys=["k1", "k2"], properties={"color": "blue"})
        result = await producer.send(msg)
    assert result.send_status is SendStatus.SEND_OK
    assert result.topic == "SendSync" and result.queue_id in (0, 1)
    assert len(result.msg_id) == 32 and len(result.offset_msg_id) == 32
    [stored] = await _stored(cluster.broker_addr, "SendSync", 2)
    assert stored.body == b"hello" and stored.tags == "TagA" and stored.keys == ["k1", "k2"]
    assert stored.properties["UNIQ_KEY"] == result.msg_id and stored.properties["color"] == "blue"


async def test_async_send_reports_to_a_callback_and_oneway_sends_are_stored(cluster: ThreadedCluster) -> None:
    await create_topic(cluster.namesrv_addr, "SendModes", queues=4)
    outcomes: list[SendResult | Exception] = []
    async with Producer("pg", cluster.namesrv_addr) as producer:
        for i in range(5):
            producer.send_async(Message("SendModes", f"async{i}".encode()), outcomes.append)
        for i in range(5):
            await producer.send_oneway(Message("SendModes", f"oneway{i}".encode()))
        await wait_until(lambda: len(outcomes) == 5)
        # Oneway sends have no answer: wait until the broker has stored them.
        stored: list[MessageExt] = []

        async def refresh() -> None:
            stored[:] = await _stored(cluster.broker_addr, "SendModes", 4)

        with anyio.fail_after(60):
            while len(stored) < 10:
                await refresh()
    assert all(isinstance(o, SendResult) and o.send_status is SendStatus.SEND_OK for o in outcomes)
    assert sorted(m.body for m in stored) == sorted(
        [f"async{i}".encode() for i in range(5)] + [f"oneway{i}".encode() for i in range(5)]
    )


async def test_ordered_sends_with_a_hash_selector_stay_on_one_queue(cluster: ThreadedCluster) -> None:
    await create_topic(cluster.namesrv_addr, "Ordered", queues=4)
    async with Producer("pg", cluster.namesrv_addr) as producer:
        queues = {
            (await producer.send(Message("Ordered", b"x"), selector=select_by_hash, arg="order-7")).queue_id
            for _ in range(10)
        }
    assert len(queues) == 1


async def test_large_bodies_are_compressed_on_the_wire_and_round_trip(cluster: ThreadedCluster) -> None:
    await create_topic(cluster.namesrv_addr, "Zip", queues=1)
    body = b"compressible " * 1000  # 13 KB, over the 4 KiB threshold
    async with Producer("pg", cluster.namesrv_addr) as producer:
        await producer.send(Message("Zip", body))
        await producer.send(Message("Zip", b"small"))
    raw = await _raw(cluster.broker_addr, "Zip")
    assert raw[0].sys_flag & SYSFLAG_COMPRESSED and len(raw[0].body) < len(body)
    assert not raw[1].sys_flag & SYSFLAG_COMPRESSED
    assert [m.body for m in await _stored(cluster.broker_addr, "Zip", 1)] == [body, b"small"]


async def test_compress_type_and_compress_level_choose_the_codec_and_its_sysflag_bits(cluster: ThreadedCluster) -> None:
    """5.3.3's ``DefaultMQProducer.compressType`` / ``compressLevel``: the body is compressed by that codec at that
    level and the sysflag carries COMPRESSED and the type's bits (LZ4 1 << 8, ZSTD 2 << 8, ZLIB 3 << 8)."""

    import lz4.frame
    import zstandard

    await create_topic(cluster.namesrv_addr, "ZipKinds", queues=1)
    body = bytes(range(256)) * 8 + b"compressible " * 1000
    kinds = [("ZLIB", 1, 3 << 8), ("zstd", 3, 2 << 8), ("LZ4", 5, 1 << 8)]
    for name, level, _ in kinds:
        async with Producer("pg", cluster.namesrv_addr, compress_type=name, compress_level=level) as producer:
            await producer.send(Message("ZipKinds", body))
    raw = await _raw(cluster.broker_addr, "ZipKinds")
    assert [r.sys_flag & 0x701 for r in raw] == [SYSFLAG_COMPRESSED | bits for _, _, bits in kinds]
    assert raw[0].body == zlib.compress(body, 1)
    assert zstandard.ZstdDecompressor().decompressobj().decompress(raw[1].body) == body
    assert lz4.frame.decompress(raw[2].body) == body
    assert [m.body for m in await _stored(cluster.broker_addr, "ZipKinds", 1)] == [body] * 3
    with pytest.raises(ValueError, match="Unsupported compress type name: GZIP"):
        Producer("pg", cluster.namesrv_addr, compress_type="GZIP")


@pytest.mark.broker(mapped_file_size_commit_log=32 << 20)
async def test_a_batch_whose_body_passes_max_message_size_is_refused_and_nothing_stored(
    cluster: ThreadedCluster,
) -> None:
    """Java's ``DefaultMQProducer.send(Collection)`` sends one batch body and ``Validators.checkMessage`` refuses it
    over ``maxMessageSize``: no part is stored, so a retry cannot store one twice."""
    from client.errors import MessageValidationError

    await create_topic(cluster.namesrv_addr, "BatchBig", queues=1)
    big = [Message("BatchBig", bytes([i]) * (1 << 20), keys=f"k{i}") for i in range(5)]  # 5 MiB in all
    async with Producer("pg", cluster.namesrv_addr) as producer:
        with pytest.raises(MessageValidationError, match=f"the message body size over max value, MAX: {4 << 20}") as e:
            await producer.send_batch(big)
        assert e.value.response_code == 13  # MESSAGE_ILLEGAL
        fits = await producer.send_batch(big[:3])
    assert len(fits) == 1 and len(fits[0].msg_id.split(",")) == 3
    assert [m.body[:1] for m in await _stored(cluster.broker_addr, "BatchBig", 1)] == [b"\x00", b"\x01", b"\x02"]


@pytest.mark.broker(auto_create_topic_enable=False)
async def test_a_missing_route_names_the_topic_and_the_name_servers(cluster: ThreadedCluster) -> None:
    async with Producer("pg", [cluster.namesrv_addr, "127.0.0.1:1"]) as producer:
        with pytest.raises(TopicRouteNotFoundError) as caught:
            await producer.send(Message("NoSuchTopic", b"x"))
    text = str(caught.value)
    assert "NoSuchTopic" in text and cluster.namesrv_addr in text and "127.0.0.1:1" in text
    assert caught.value.namesrv_addrs == [cluster.namesrv_addr, "127.0.0.1:1"]


async def test_unreachable_name_servers_are_named_in_the_route_error(cluster: ThreadedCluster) -> None:
    async with Producer("pg", "127.0.0.1:1;127.0.0.1:2") as producer:
        with pytest.raises(TopicRouteNotFoundError, match=r"127\.0\.0\.1:1, 127\.0\.0\.1:2"):
            await producer.send(Message("Anything", b"x"))


async def test_a_send_retries_on_the_other_broker_when_one_is_down(cluster: ThreadedCluster) -> None:
    _, stop_b = await topic_on_two_brokers(cluster, "TwoBrokers", queues=2)
    async with Producer("pg", cluster.namesrv_addr, send_latency_fault_enable=True) as producer:
        info = await producer.publish_info("TwoBrokers")
        assert {mq.broker_name for mq in info.message_queues} == {"broker-a", "broker-b"}
        await anyio.to_thread.run_sync(stop_b)
        results = [await producer.send(Message("TwoBrokers", f"m{i}".encode())) for i in range(6)]
    assert {r.broker_name for r in results} == {"broker-a"}


async def test_when_every_attempt_fails_the_error_lists_them(cluster: ThreadedCluster) -> None:
    await create_topic(cluster.namesrv_addr, "Doomed", queues=1)
    async with Producer("pg", cluster.namesrv_addr, retry_times_when_send_failed=1, send_msg_timeout=2.0) as producer:
        await producer.publish_info("Doomed")
        await anyio.to_thread.run_sync(cluster.stop_broker)
        with pytest.raises(SendFailedError) as caught:
            await producer.send(Message("Doomed", b"x"))
    assert len(caught.value.attempts) == 2 and "Doomed" in str(caught.value)


async def test_routes_fail_over_to_the_next_name_server(cluster: ThreadedCluster) -> None:
    await create_topic(cluster.namesrv_addr, "Failover", queues=1)
    config = ClientConfig(namesrv_addr=["127.0.0.1:1", cluster.namesrv_addr])
    # Instances start at a random name server: take one that starts at the dead one.
    instance = next(i for i in (MQClientInstance(config) for _ in range(1000)) if i.current_namesrv == "127.0.0.1:1")
    async with instance, Producer("pg", instance=instance) as producer:
        first = await producer.send(Message("Failover", b"a"))
        assert producer.instance.current_namesrv == cluster.namesrv_addr
    assert first.send_status is SendStatus.SEND_OK


async def test_task_free_async_sends_give_what_awaited_sends_give(cluster: ThreadedCluster) -> None:
    await create_topic(cluster.namesrv_addr, "AsyncSame", queues=4)
    fast: list[SendResult | Exception] = []
    awaited_later: list[SendResult | Exception] = []

    async def coroutine_callback(outcome: SendResult | Exception) -> None:
        await anyio.sleep(0)
        awaited_later.append(outcome)

    async with Producer("pg", cluster.namesrv_addr) as producer:
        first = await producer.send(Message("AsyncSame", b"route"))  # route and broker cached: the fast path
        for i in range(8):
            producer.send_async(Message("AsyncSame", f"a{i}".encode(), keys=f"k{i}"), fast.append)
        producer.send_async(Message("AsyncSame", b"coro"), coroutine_callback)
        await wait_until(lambda: len(fast) == 8 and len(awaited_later) == 1)
        last = await producer.send(Message("AsyncSame", b"after"))
    results = [r for r in fast if isinstance(r, SendResult)]
    assert len(results) == 8 and isinstance(awaited_later[0], SendResult)
    for result in [*results, awaited_later[0]]:
        assert (result.send_status, result.topic, result.broker_name) == (first.send_status, first.topic, "broker-a")
        assert len(result.msg_id) == len(first.msg_id) and len(result.offset_msg_id) == len(first.offset_msg_id)
    # Round robin over the queues, as the awaited path does: 8 sends spread 2 per queue.
    assert sorted(r.queue_id for r in results) == [0, 0, 1, 1, 2, 2, 3, 3]
    assert last.queue_offset >= 1
    stored = {m.properties["UNIQ_KEY"]: m for q in range(4) for m in await _stored_in(cluster, "AsyncSame", q)}
    assert {stored[r.msg_id].body for r in results} == {f"a{i}".encode() for i in range(8)}
    assert all(stored[r.msg_id].queue_id == r.queue_id for r in results)


async def _stored_in(cluster: ThreadedCluster, topic: str, queue_id: int) -> list[MessageExt]:
    async with RemotingClient() as client:
        response = await client.invoke(
            cluster.broker_addr, request(RequestCode.PULL_MESSAGE, _pull_header(topic, queue_id).to_ext_fields()), 5
        )
    return list(iter_records(response.body)) if response.code == 0 else []


async def test_task_free_async_send_retries_then_lists_every_attempt(cluster: ThreadedCluster) -> None:
    await create_topic(cluster.namesrv_addr, "AsyncDoomed", queues=1)
    outcomes: list[SendResult | Exception] = []
    async with Producer(
        "pg", cluster.namesrv_addr, retry_times_when_send_async_failed=1, send_msg_timeout=2.0
    ) as producer:
        await producer.send(Message("AsyncDoomed", b"route"))
        await anyio.to_thread.run_sync(cluster.stop_broker)
        producer.send_async(Message("AsyncDoomed", b"x"), outcomes.append)
        await wait_until(lambda: len(outcomes) == 1)
    [outcome] = outcomes
    assert isinstance(outcome, SendFailedError) and len(outcome.attempts) == 2
    assert "AsyncDoomed" in str(outcome)


async def test_an_async_send_completed_again_neither_retries_nor_reports_again(cluster: ThreadedCluster) -> None:
    """A task-free async send is its connection's invocation and counts its first completion only: told again after
    its answer (an error, another answer), it neither retries (a duplicate message) nor calls back twice."""
    await create_topic(cluster.namesrv_addr, "AsyncOnce", queues=1)
    outcomes: list[SendResult | Exception] = []
    async with Producer("pg", cluster.namesrv_addr, retry_times_when_send_async_failed=0) as producer:
        await producer.send(Message("AsyncOnce", b"route"))
        info = producer.cached_publish_info("AsyncOnce")
        assert info is not None
        send = producer._builder.single_as(Message("AsyncOnce", b"once"), AsyncSend)
        send.launch(producer, outcomes.append, 5.0, 0, info)  # what send_async does with a cached route
        await wait_until(lambda: len(outcomes) == 1)
        send.complete(error=RemotingConnectError("closed after the answer"))  # would be a SendFailedError now
        assert send.complete_json({}, b"") is True  # taken: dropped, not offered again as a command
        send.complete(request(0).response(0))
    [outcome] = outcomes
    assert isinstance(outcome, SendResult) and outcome.send_status is SendStatus.SEND_OK
    assert [m.body for m in await _stored(cluster.broker_addr, "AsyncOnce", 1)] == [b"route", b"once"]


async def test_async_sends_in_flight_when_the_producer_stops_each_get_one_outcome(cluster: ThreadedCluster) -> None:
    await create_topic(cluster.namesrv_addr, "AsyncStop", queues=4)
    outcomes: list[SendResult | Exception] = []
    async with Producer("pg", cluster.namesrv_addr) as producer:
        await producer.send(Message("AsyncStop", b"route"))
        for i in range(200):
            producer.send_async(Message("AsyncStop", f"s{i}".encode()), outcomes.append)
    # Answered before the connection closed, or failed by the close: never lost, never reported twice.
    assert len(outcomes) == 200
    assert all(isinstance(o, (SendResult, Exception)) for o in outcomes)


async def test_async_sends_failed_by_a_closing_connection_are_retried(
    cluster: ThreadedCluster, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="client.async_send")
    await create_topic(cluster.namesrv_addr, "AsyncRetry", queues=4)
    outcomes: list[SendResult | Exception] = []
    async with Producer("pg", cluster.namesrv_addr) as producer:
        await producer.send(Message("AsyncRetry", b"route"))
        for i in range(100):
            producer.send_async(Message("AsyncRetry", f"r{i}".encode()), outcomes.append)
        producer.instance.remoting.close_connection(cluster.broker_addr)  # fails every pending callback once
        await wait_until(lambda: len(outcomes) == 100)
    assert all(isinstance(o, SendResult) and o.send_status is SendStatus.SEND_OK for o in outcomes)
    assert "1 attempt(s) so far" in caplog.text  # the close failed them once; the retry went through


async def test_answered_async_sends_give_their_permits_back(cluster: ThreadedCluster) -> None:
    """With one async permit (``clientAsyncSemaphoreValue``), async sends one after another each succeed: an
    answered send gives its permit back (Java's ResponseFuture.release in NettyRemotingAbstract's
    processResponseCommand), also when the task-free path takes its answer straight from the JSON header."""
    await create_topic(cluster.namesrv_addr, "AsyncPermits", queues=2)
    config = ClientConfig(namesrv_addr=cluster.namesrv_addr, client_async_semaphore_value=1)
    async with Producer("pg", config=config, send_msg_timeout=3.0) as producer:
        await producer.send(Message("AsyncPermits", b"route"))  # route and broker cached: the task-free path
        outcomes: list[SendResult | Exception] = []
        for i in range(4):
            producer.send_async(Message("AsyncPermits", f"p{i}".encode()), outcomes.append)
            await wait_until(lambda: len(outcomes) == i + 1)  # noqa: B023 (awaited at once)
            assert producer.instance.remoting.async_permits.used == 0, i
    assert all(isinstance(o, SendResult) and o.send_status is SendStatus.SEND_OK for o in outcomes), outcomes


async def test_a_retry_copy_sent_after_a_failed_send_back_is_compressed_as_a_send(cluster: ThreadedCluster) -> None:
    """DefaultMQPushConsumerImpl.sendMessageBack's fallback sends the copy with the client's inner producer, whose
    sendKernelImpl compresses a body of 4 KiB or more (zlib, level 5) as any send: the copy is no larger on the wire
    and in the store than the message."""
    await create_topic(cluster.namesrv_addr, "ZipBack", queues=1)
    body = b"compressible " * 1000
    async with Producer("pg", cluster.namesrv_addr) as producer:
        await producer.send(Message("ZipBack", body))
    [msg] = await _stored(cluster.broker_addr, "ZipBack", 1)

    await _send_retry_copy(cluster, "cg-zip", "ZipBack", msg, 1)
    # The copy waits in the delay topic, at its DELAY level's queue.
    raw = await _raw(cluster.broker_addr, "SCHEDULE_TOPIC_XXXX", 18)
    assert len(raw) == 1 and raw[0].properties["REAL_TOPIC"] == "%RETRY%cg-zip"
    assert raw[0].sys_flag & SYSFLAG_COMPRESSED and len(raw[0].body) < len(body)
    assert [m.body for m in await _stored(cluster.broker_addr, "SCHEDULE_TOPIC_XXXX", 18)] == [body]


async def test_a_negative_delay_level_is_sent_and_stored_for_delivery_at_once(cluster: ThreadedCluster) -> None:
    """Java's ``Message.setDelayTimeLevel(-1)`` sets DELAY "-1", ``Validators.checkMessage`` and
    ``MessageBatch.generateFromList`` check no negative level and the broker delays only a level above 0
    (``CommitLog.putMessage``): the message is stored in its topic at once, with its DELAY property."""
    await create_topic(cluster.namesrv_addr, "NegDelay", queues=1)
    async with Producer("pg", cluster.namesrv_addr) as producer:
        await producer.send(Message("NegDelay", b"single", delay_level=-1))
        await producer.send_batch([Message("NegDelay", b"batched", delay_level=-2), Message("NegDelay", b"plain")])
    stored = await _stored(cluster.broker_addr, "NegDelay", 1)
    assert [(m.body, m.properties.get("DELAY")) for m in stored] == [
        (b"single", "-1"),
        (b"batched", "-2"),
        (b"plain", None),
    ]


async def test_a_body_compression_makes_larger_is_still_sent_compressed(cluster: ThreadedCluster) -> None:
    """DefaultMQProducerImpl.tryToCompressMessage (4.9.8 and 5.3.3) keeps the compressed body whenever the codec
    gave one, larger or not, and sendKernelImpl sets COMPRESSED and the type bits: an incompressible body of 4 KiB or
    more is stored compressed, by a producer's send and by a consumer's retry copy (the inner producer's send)."""
    await create_topic(cluster.namesrv_addr, "ZipNoGain", queues=1)
    body = random.Random(45).randbytes(5000)  # zlib makes it larger
    assert len(zlib.compress(body, 5)) > len(body)
    async with Producer("pg", cluster.namesrv_addr) as producer:
        await producer.send(Message("ZipNoGain", body))
    [sent] = await _raw(cluster.broker_addr, "ZipNoGain")
    assert sent.sys_flag & SYSFLAG_COMPRESSED and sent.body == zlib.compress(body, 5)
    [msg] = await _stored(cluster.broker_addr, "ZipNoGain", 1)
    assert msg.body == body

    await _send_retry_copy(cluster, "cg-nogain", "ZipNoGain", msg, 1)
    raw = await _raw(cluster.broker_addr, "SCHEDULE_TOPIC_XXXX", 18)
    assert len(raw) == 1 and raw[0].properties["REAL_TOPIC"] == "%RETRY%cg-nogain"
    assert raw[0].sys_flag & SYSFLAG_COMPRESSED and raw[0].body == zlib.compress(body, 5)


async def test_a_retry_copy_is_sent_by_the_clients_inner_producer_group(cluster: ThreadedCluster) -> None:
    """DefaultMQPushConsumerImpl.sendMessageBack's fallback (and ConsumeMessageOrderlyService.sendMessageBack) sends
    the copy with ``mQClientFactory.getDefaultMQProducer()``, the DefaultMQProducer MQClientInstance creates with
    ``MixAll.CLIENT_INNER_PRODUCER_GROUP``: the broker sees ``CLIENT_INNER_PRODUCER`` as the send's producer group
    (here, the label it counts a copy moved to the DLQ under), not the consumer's group."""
    await create_topic(cluster.namesrv_addr, "InnerGroup", queues=1)
    async with Producer("pg", cluster.namesrv_addr) as producer:
        await producer.send(Message("InnerGroup", b"to the dlq"))
    [msg] = await _stored(cluster.broker_addr, "InnerGroup", 1)

    # Reconsume times reached: the broker moves it to the DLQ.
    await _send_retry_copy(cluster, "cg-inner", "InnerGroup", msg, 16)
    dlq = cluster.cluster.controller.context.stats.dlq_messages
    assert {k: v for k, v in dlq.items() if k[1] == "%RETRY%cg-inner"} == {
        ("CLIENT_INNER_PRODUCER", "%RETRY%cg-inner"): 1
    }


async def test_the_compress_level_and_type_default_to_the_environments(
    cluster: ThreadedCluster, monkeypatch: pytest.MonkeyPatch
) -> None:
    """4.9.8's DefaultMQProducerImpl reads its ``compressLevel`` and ``compressType`` from the system properties
    ``rocketmq.message.compressLevel`` (5) and ``rocketmq.message.compressType`` (ZLIB), ours from
    ROCKETMQ_MESSAGE_COMPRESS_LEVEL and ROCKETMQ_MESSAGE_COMPRESS_TYPE (as ``rocketmq.client.localOffsetStoreDir`` is
    ROCKETMQ_CLIENT_LOCAL_OFFSET_STORE_DIR): a producer's sends and a consumer's retry copy (the client's inner
    producer) use them unless told otherwise. Before: both were level 5 zlib whatever the environment said."""
    import zstandard

    monkeypatch.setenv("ROCKETMQ_MESSAGE_COMPRESS_LEVEL", "1")
    monkeypatch.setenv("ROCKETMQ_MESSAGE_COMPRESS_TYPE", "zstd")
    zstd_bits = 2 << 8
    await create_topic(cluster.namesrv_addr, "ZipEnv", queues=1)
    body = b"compressible by the environment's codec " * 200
    async with Producer("pg", cluster.namesrv_addr) as producer:
        await producer.send(Message("ZipEnv", body))
    async with Producer("pg", cluster.namesrv_addr, compress_type="ZLIB", compress_level=9) as producer:
        await producer.send(Message("ZipEnv", body))  # told otherwise
    sent = await _raw(cluster.broker_addr, "ZipEnv")
    assert [r.sys_flag & 0x701 for r in sent] == [SYSFLAG_COMPRESSED | zstd_bits, SYSFLAG_COMPRESSED | 3 << 8]
    assert sent[0].body == zstandard.ZstdCompressor(level=1).compress(body)
    assert sent[1].body == zlib.compress(body, 9)
    msg = (await _stored(cluster.broker_addr, "ZipEnv", 1))[0]

    await _send_retry_copy(cluster, "cg-zipenv", "ZipEnv", msg, 1)
    raw = await _raw(cluster.broker_addr, "SCHEDULE_TOPIC_XXXX", 18)
    assert [r.properties["REAL_TOPIC"] for r in raw] == ["%RETRY%cg-zipenv"]
    assert raw[0].sys_flag & 0x701 == SYSFLAG_COMPRESSED | zstd_bits
    assert raw[0].body == zstandard.ZstdCompressor(level=1).compress(body)


async def test_a_retry_copy_goes_on_to_another_broker_when_its_first_attempt_fails(cluster: ThreadedCluster) -> None:
    """DefaultMQPushConsumerImpl.sendMessageBack's fallback sends the copy with the inner producer's ``send(msg)``:
    sendDefaultImpl makes 1 + ``retryTimesWhenSendFailed`` (2) attempts, each avoiding the broker the last one failed
    on (client/.../impl/producer/DefaultMQProducerImpl.java). With the retry topic's route naming a dead master
    besides the live one, every copy is stored. Before: one attempt, so a copy whose queue was on the dead broker
    (4 of the route's 5 queues) failed, and the consumer took the message back to consume it again locally."""
    ns, group = cluster.namesrv_addr, "cg-copy-dead"
    await create_topic(ns, "CopyDead", queues=1)
    await create_topic(ns, f"%RETRY%{group}", queues=1)
    async with Producer("pg", ns) as producer:
        for i in range(5):
            await producer.send(Message("CopyDead", f"m{i}".encode()))
    msgs = await _stored(cluster.broker_addr, "CopyDead", 1)
    dead = socket.socket()
    dead.bind(("127.0.0.1", 0))  # bound, never listening: connection refused at once
    with dead:
        addr = f"127.0.0.1:{dead.getsockname()[1]}"
        await anyio.to_thread.run_sync(
            functools.partial(register_dead_broker, cluster, name="broker-dead", addr=addr, topics=(f"%RETRY%{group}",))
        )
        for msg in msgs:
            await _send_retry_copy(cluster, group, "CopyDead", msg, 1, create_retry_topic=False)
    raw = await _raw(cluster.broker_addr, "SCHEDULE_TOPIC_XXXX", 3)  # delay level 3 + 0 reconsumes: queue 2
    assert sorted(r.body for r in raw if r.properties["REAL_TOPIC"] == f"%RETRY%{group}") == [m.body for m in msgs]
