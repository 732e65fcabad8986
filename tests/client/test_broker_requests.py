"""Requests brokers push to our client: offsets reset by time, running info and direct consumption relayed from an
admin, consumer-ids-changed notifications (covered by the takeover tests)."""

from __future__ import annotations

import threading

import anyio
import pytest
from click.testing import CliRunner

from client.admin import Admin
from client.config import ClientConfig
from client.consumer.listener import ConsumeConcurrentlyStatus
from client.consumer.push import PushConsumer
from client.message import Message, MessageExt
from client.mqadmin import main as mqadmin
from client.producer import Producer
from remoting.codec.bodies import ConsumeFromWhere, MessageQueue
from tests.client.helpers import HANG_GUARD, create_topic, wait_until
from tests.threaded_cluster import ThreadedCluster

pytestmark = pytest.mark.anyio


def _consumer(cluster: ThreadedCluster, group: str, topic: str, seen: list[MessageExt]) -> PushConsumer:
    async def listener(msgs: list[MessageExt]) -> ConsumeConcurrentlyStatus:
        seen.extend(msgs)
        return ConsumeConcurrentlyStatus.CONSUME_SUCCESS

    consumer = PushConsumer(group, cluster.namesrv_addr)
    consumer.subscribe(topic, "TagA")
    consumer.register_message_listener(listener)
    return consumer


async def test_reset_offset_by_time_makes_an_online_consumer_replay(cluster: ThreadedCluster) -> None:
    await create_topic(cluster.namesrv_addr, "Reset", queues=2)
    seen: list[MessageExt] = []
    async with Producer("pg", cluster.namesrv_addr) as producer, _consumer(cluster, "cg-reset", "Reset", seen):
        for i in range(10):
            await producer.send(Message("Reset", f"r{i}".encode(), tags="TagA"))
        await wait_until(lambda: len(seen) >= 10)
        async with Admin(cluster.namesrv_addr) as admin:
            table = await admin.reset_offset_by_time("cg-reset", "Reset", 0)
        assert sorted(table.values()) == [0, 0]
        await wait_until(lambda: len(seen) >= 20)
    assert sorted(m.body for m in seen) == sorted([f"r{i}".encode() for i in range(10)] * 2)


async def test_admins_get_running_info_and_consume_directly_through_the_broker(cluster: ThreadedCluster) -> None:
    await create_topic(cluster.namesrv_addr, "Direct", queues=2)
    seen: list[MessageExt] = []
    async with Producer("pg", cluster.namesrv_addr) as producer, _consumer(cluster, "cg-direct", "Direct", seen) as c:
        sent = await producer.send(Message("Direct", b"direct", tags="TagA"))
        await wait_until(lambda: len(seen) == 1)
        async with Admin(cluster.namesrv_addr) as admin:
            info = await admin.consumer_running_info("cg-direct", c.instance.client_id)
            result = await admin.consume_message_directly("cg-direct", c.instance.client_id, sent.offset_msg_id)
    assert {MessageQueue("Direct", "broker-a", 0), MessageQueue("Direct", "broker-a", 1)} <= set(info["mqTable"])
    assert {s["topic"]: s["subString"] for s in info["subscriptionSet"]}["Direct"] == "TagA"
    assert result["consumeResult"] == "CR_SUCCESS"
    assert [m.body for m in seen] == [b"direct", b"direct"]


async def test_running_info_carries_the_properties_java_admin_tools_read(cluster: ThreadedCluster) -> None:
    """MQClientInstance.consumerRunningInfo adds PROP_NAMESERVER_ADDR, PROP_CONSUME_TYPE and PROP_CLIENT_VERSION, the
    push consumer PROP_CONSUMEORDERLY, PROP_THREADPOOL_CORE_SIZE and PROP_CONSUMER_START_TIMESTAMP. Java's
    ``mqadmin consumerStatus`` calls ConsumerRunningInfo.analyzeSubscription, which dereferences PROP_CONSUME_TYPE
    (NullPointerException without it) and parses PROP_CONSUMER_START_TIMESTAMP as a long."""
    await create_topic(cluster.namesrv_addr, "RunInfo", queues=1)
    consumer = _consumer(cluster, "cg-runinfo", "RunInfo", [])
    async with consumer, Admin(cluster.namesrv_addr) as admin:
        info = await admin.consumer_running_info("cg-runinfo", consumer.instance.client_id)
    props = info["properties"]
    assert props["PROP_CONSUME_TYPE"] == "CONSUME_PASSIVELY"
    assert props["PROP_NAMESERVER_ADDR"] == f"{cluster.namesrv_addr};"
    assert props["PROP_CLIENT_VERSION"] == "V4_9_8"
    assert (props["PROP_CONSUMEORDERLY"], props["PROP_THREADPOOL_CORE_SIZE"]) == ("false", "20")
    assert int(props["PROP_CONSUMER_START_TIMESTAMP"]) > 0
    assert (props["consumerGroup"], props["messageModel"]) == ("cg-runinfo", "CLUSTERING")  # Java's field names


async def test_running_info_process_queues_carry_the_fields_javas_consumer_status_reads(
    cluster: ThreadedCluster,
) -> None:
    """Past analyzeSubscription, ``mqadmin consumerStatus`` runs ConsumerRunningInfo.analyzeProcessQueue, which reads
    each ProcessQueueInfo's lastConsumeTimestamp (concurrent) or locked / lastLockTimestamp / tryUnlockTimes
    (orderly): missing, they read as 0 and every queue holding messages is reported blocked. Each mqTable entry has
    every ProcessQueueInfo field, its times in wall-clock ms."""
    await create_topic(cluster.namesrv_addr, "RunTs", queues=1)
    consumer = _consumer(cluster, "cg-runts", "RunTs", [])
    async with consumer, Admin(cluster.namesrv_addr) as admin:
        info = await admin.consumer_running_info("cg-runts", consumer.instance.client_id)
    fields = {
        "commitOffset", "cachedMsgMinOffset", "cachedMsgMaxOffset", "cachedMsgCount", "cachedMsgSizeInMiB",
        "transactionMsgMinOffset", "transactionMsgMaxOffset", "transactionMsgCount", "locked", "tryUnlockTimes",
        "lastLockTimestamp", "droped", "lastPullTimestamp", "lastConsumeTimestamp",
    }  # fmt: skip
    assert info["mqTable"]
    for pq in info["mqTable"].values():
        assert set(pq) == fields
        assert pq["lastConsumeTimestamp"] >= int(info["properties"]["PROP_CONSUMER_START_TIMESTAMP"]) - 1000


async def test_consume_message_directly_shows_a_retry_message_under_its_original_topic(
    cluster: ThreadedCluster,
) -> None:
    """Java's consumeMessageDirectly calls resetRetryAndNamespace before the listener, as every delivery does: a
    message of %RETRY%<group> carrying RETRY_TOPIC is shown under its original topic."""
    await create_topic(cluster.namesrv_addr, "DirectRetry", queues=1)
    seen: list[MessageExt] = []
    consumer = _consumer(cluster, "cg-direct-retry", "DirectRetry", seen)
    async with consumer, Producer("pg", cluster.namesrv_addr) as producer:
        retry = "%RETRY%cg-direct-retry"
        await wait_until(lambda: any(mq.topic == retry for mq in consumer.rebalance.process_queues))
        sent = await producer.send(Message(retry, b"again", tags="TagA", properties={"RETRY_TOPIC": "DirectRetry"}))
        await wait_until(lambda: len(seen) == 1)
        async with Admin(cluster.namesrv_addr) as admin:
            result = await admin.consume_message_directly(
                "cg-direct-retry", consumer.instance.client_id, sent.offset_msg_id
            )
    assert result["consumeResult"] == "CR_SUCCESS"
    assert [m.topic for m in seen] == ["DirectRetry", "DirectRetry"]


async def test_consume_message_directly_answers_cr_throw_exception_with_the_error_when_the_listener_raises(
    cluster: ThreadedCluster,
) -> None:
    """Java's consumeMessageDirectly: a listener that throws gives CR_THROW_EXCEPTION and the exception as remark
    (RemotingHelper.exceptionSimpleDesc), not CR_LATER."""
    await create_topic(cluster.namesrv_addr, "DirectRaise", queues=1)
    calls: list[bytes] = []

    async def listener(msgs: list[MessageExt]) -> ConsumeConcurrentlyStatus:
        calls.extend(m.body for m in msgs)
        if len(calls) > 1:
            raise ValueError("cannot handle it")
        return ConsumeConcurrentlyStatus.CONSUME_SUCCESS

    consumer = PushConsumer("cg-direct-raise", cluster.namesrv_addr)
    consumer.subscribe("DirectRaise")
    consumer.register_message_listener(listener)
    async with consumer, Producer("pg", cluster.namesrv_addr) as producer:
        sent = await producer.send(Message("DirectRaise", b"boom"))
        await wait_until(lambda: len(calls) == 1)
        async with Admin(cluster.namesrv_addr) as admin:
            result = await admin.consume_message_directly(
                "cg-direct-raise", consumer.instance.client_id, sent.offset_msg_id
            )
    assert result["consumeResult"] == "CR_THROW_EXCEPTION"
    assert str(result["remark"]).startswith("ValueError: cannot handle it, listener(")


async def test_consume_message_directly_answers_cr_return_null_when_the_listener_returns_none(
    cluster: ThreadedCluster,
) -> None:
    """Java's consumeMessageDirectly (both services) answers CR_RETURN_NULL for a listener's null status; ours
    counted None as CR_SUCCESS."""
    await create_topic(cluster.namesrv_addr, "DirectNone", queues=1)
    calls: list[bytes] = []

    async def listener(msgs: list[MessageExt]) -> ConsumeConcurrentlyStatus | None:
        calls.extend(m.body for m in msgs)
        return ConsumeConcurrentlyStatus.CONSUME_SUCCESS if len(calls) == 1 else None

    consumer = PushConsumer("cg-direct-none", cluster.namesrv_addr)
    consumer.subscribe("DirectNone")
    consumer.register_message_listener(listener)
    async with consumer, Producer("pg", cluster.namesrv_addr) as producer:
        sent = await producer.send(Message("DirectNone", b"forgot"))
        await wait_until(lambda: len(calls) == 1)
        async with Admin(cluster.namesrv_addr) as admin:
            result = await admin.consume_message_directly(
                "cg-direct-none", consumer.instance.client_id, sent.offset_msg_id
            )
    assert (result["consumeResult"], result["remark"]) == ("CR_RETURN_NULL", None)


async def test_consume_message_directly_is_answered_while_every_consume_slot_is_busy(cluster: ThreadedCluster) -> None:
    """Java's ClientRemotingProcessor.consumeMessageDirectly calls the listener on the remoting thread that took the
    request, not in the consume thread pool, so ``mqadmin consumeMessage`` is answered while every consume thread is
    taken by a long listener call. With its one consume slot held by a hung call, the consumer still answers
    CR_SUCCESS (it used to wait for the slot until the broker's forward timed out)."""
    await create_topic(cluster.namesrv_addr, "DirectBusy", queues=1)
    await create_topic(cluster.namesrv_addr, "DirectBusyOther", queues=1)
    release = anyio.Event()
    seen: list[bytes] = []

    async def listener(msgs: list[MessageExt]) -> ConsumeConcurrentlyStatus:
        seen.extend(m.body for m in msgs)
        if msgs[0].body == b"stuck":
            await release.wait()
        return ConsumeConcurrentlyStatus.CONSUME_SUCCESS

    consumer = PushConsumer(
        "cg-direct-busy",
        cluster.namesrv_addr,
        consume_from_where=ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET,
        consume_thread_min=1,
        consume_thread_max=1,
        await_termination=1.0,
    )
    consumer.subscribe("DirectBusy")
    consumer.register_message_listener(listener)
    async with consumer, Producer("pg", cluster.namesrv_addr) as producer, Admin(cluster.namesrv_addr) as admin:
        await producer.send(Message("DirectBusy", b"stuck"))
        await wait_until(lambda: b"stuck" in seen)
        # Not consumed through a queue: sent to a topic nobody subscribes, replayed to the listener by the admin.
        sent = await producer.send(Message("DirectBusyOther", b"direct"))
        try:
            result = await admin.consume_message_directly(
                "cg-direct-busy", consumer.instance.client_id, sent.offset_msg_id
            )
        finally:
            release.set()
    assert result["consumeResult"] == "CR_SUCCESS", result
    assert seen == [b"stuck", b"direct"]


async def test_consume_message_directly_runs_at_most_the_callback_threads_at_once(cluster: ThreadedCluster) -> None:
    """Java runs CONSUME_MESSAGE_DIRECTLY on NettyRemotingClient's public executor, ``clientCallbackExecutorThreads``
    threads: with 2, a third direct consumption waits for a thread while two blocking listener calls run (it started
    a thread of its own, without bound, since it stopped taking a consume slot), and all three are answered once
    they return."""
    await create_topic(cluster.namesrv_addr, "DirectPool", queues=1)
    await create_topic(cluster.namesrv_addr, "DirectPoolSubscribed", queues=1)
    guard, release = threading.Lock(), threading.Event()
    running: list[bytes] = []
    peak: list[int] = [0]

    def listener(msgs: list[MessageExt]) -> ConsumeConcurrentlyStatus:
        with guard:
            running.append(msgs[0].body)
            peak[0] = max(peak[0], len(running))
        release.wait(HANG_GUARD)
        with guard:
            running.remove(msgs[0].body)
        return ConsumeConcurrentlyStatus.CONSUME_SUCCESS

    config = ClientConfig(namesrv_addr=cluster.namesrv_addr, client_callback_executor_threads=2)
    consumer = PushConsumer("cg-direct-pool", config=config)
    consumer.subscribe("DirectPoolSubscribed")  # stays empty: the messages are replayed to the listener by the admin
    consumer.register_message_listener(listener)
    results: list[dict[str, object]] = []

    async def consume_directly(admin: Admin, msg_id: str) -> None:
        results.append(await admin.consume_message_directly("cg-direct-pool", consumer.instance.client_id, msg_id))

    async with consumer, Producer("pg", cluster.namesrv_addr) as producer, Admin(cluster.namesrv_addr) as admin:
        sent = [await producer.send(Message("DirectPool", f"d{i}".encode())) for i in range(3)]
        try:
            async with anyio.create_task_group() as tasks:
                for s in sent:
                    tasks.start_soon(consume_directly, admin, s.offset_msg_id)
                stats = consumer.direct_limiter.statistics
                await wait_until(lambda: len(running) == 2 and stats().tasks_waiting == 1)
                release.set()
        finally:
            release.set()
    assert peak == [2]
    assert [r["consumeResult"] for r in results] == ["CR_SUCCESS"] * 3


async def test_a_reset_offset_leaves_the_queues_this_member_does_not_own_to_their_owner(
    cluster: ThreadedCluster,
) -> None:
    """Java's MQClientInstance.resetOffset sets the offsets of the member's own process queues only. A member of the
    group that owns none of the topic's queues (one queue, two members) and gets the reset late, after the owner went
    on consuming past it, must not write the old reset offset to the broker over the owner's progress."""
    await create_topic(cluster.namesrv_addr, "ResetOwned", queues=1)
    mq = MessageQueue("ResetOwned", "broker-a", 0)
    seen: list[MessageExt] = []
    a, b = (
        _consumer(cluster, "cg-reset-owned", "ResetOwned", seen),
        _consumer(cluster, "cg-reset-owned", "ResetOwned", seen),
    )
    async with Producer("pg", cluster.namesrv_addr) as producer, a, b, Admin(cluster.namesrv_addr) as admin:
        await wait_until(lambda: (mq in a.rebalance.process_queues) != (mq in b.rebalance.process_queues))
        owner, other = (a, b) if mq in a.rebalance.process_queues else (b, a)
        for i in range(3):
            await producer.send(Message("ResetOwned", f"o{i}".encode(), tags="TagA"))
        await wait_until(lambda: len(seen) == 3)
        await wait_until(lambda: owner.offset_store.read_memory(mq) == 3)
        await owner.persist_offsets()
        await other.reset_offset("ResetOwned", {mq: 0})  # as a RESET_CONSUMER_CLIENT_OFFSET that arrived late
        progress = await admin.consumer_progress("cg-reset-owned", "ResetOwned")
    assert progress[mq].consumer_offset == 3
    assert other.offset_store.snapshot("ResetOwned") == {}


async def test_consumer_status_with_jstack_shows_the_consumers_thread_stacks(cluster: ThreadedCluster) -> None:
    """``mqadmin consumerStatus -s``: ConsumerStatusSubCommand asks getConsumerRunningInfo with ``jstack`` (the
    request's jstackEnable), the consumer answers with its threads' stacks as UtilAll.jstack lists them
    (ClientRemotingProcessor.getConsumerRunningInfo), and ConsumerRunningInfo.formatString prints them under
    ``#Consumer jstack#``. Without it the running info has no jstack, as Java's (null, left out of the JSON)."""
    await create_topic(cluster.namesrv_addr, "Jstack", queues=1)
    consumer = _consumer(cluster, "cg-jstack", "Jstack", [])
    async with consumer, Admin(cluster.namesrv_addr) as admin:
        client_id = consumer.instance.client_id
        plain = await admin.consumer_running_info("cg-jstack", client_id)
        traced = await admin.consumer_running_info("cg-jstack", client_id, jstack=True)
        args = ["consumerStatus", "-n", cluster.namesrv_addr, "-g", "cg-jstack", "-i", client_id, "-s"]
        shown = await anyio.to_thread.run_sync(lambda: CliRunner().invoke(mqadmin, args, catch_exceptions=False))
    assert "jstack" not in plain
    stacks = traced["jstack"]
    assert f"{threading.main_thread().name:<40}TID: {threading.main_thread().ident} STATE: RUNNABLE" in stacks
    assert "client.handlers.ClientRequestHandler.process(handlers.py:" in stacks  # the frame answering it
    assert shown.exit_code == 0, shown.output
    assert "\n\n#Consumer jstack#\n" in shown.output and "TID: " in shown.output
