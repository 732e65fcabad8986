"""Consume hooks (RocketMQ 4.9.8's client/src/main/java/org/apache/rocketmq/client/hook/ConsumeMessageHook.java and
ConsumeMessageContext.java): ``register_consume_message_hook`` on the push and lite pull consumers, each listener
call (each pulled batch for lite pull) seen before and after, as ConsumeMessageConcurrentlyService,
ConsumeMessageOrderlyService and DefaultLitePullConsumerImpl.pullSyncImpl run them. Virtual time, embedded cluster."""

from __future__ import annotations

import pytest
import trio
import trio.testing

from broker.embedded import EmbeddedCluster
from client.admin import Admin
from client.consumer.hooks import ConsumeMessageContext
from client.consumer.listener import ConsumeConcurrentlyStatus, ConsumeOrderlyStatus
from client.consumer.lite_pull import LitePullConsumer
from client.message import Message, MessageExt
from client.producer import Producer
from remoting.codec.bodies import ConsumeFromWhere, MessageQueue
from tests.client.helpers import first_offset_consumer
from tests.semantics.helpers import use_virtual_store_clock


class RecordingHook:
    """Records what each call saw (the context is one object, changed between before and after, as Java's)."""

    def __init__(self, fail: bool = False) -> None:
        self.fail = fail
        self.seen: list[tuple[str, str, MessageQueue, list[bytes], bool, str | None, dict[str, str]]] = []

    def hook_name(self) -> str:
        return "recording"

    def _record(self, when: str, context: ConsumeMessageContext) -> None:
        bodies = [m.body for m in context.msg_list]
        self.seen.append(
            (when, context.consumer_group, context.mq, bodies, context.success, context.status, dict(context.props))
        )
        if self.fail:
            raise RuntimeError("a hook that fails is logged, never in the way")

    def consume_message_before(self, context: ConsumeMessageContext) -> None:
        self._record("before", context)

    def consume_message_after(self, context: ConsumeMessageContext) -> None:
        self._record("after", context)


async def _create_and_send(cluster: EmbeddedCluster, topic: str, bodies: list[bytes]) -> MessageQueue:
    async with Admin(cluster.namesrv_addr) as admin:
        await admin.create_topic(topic, read_queue_nums=1, write_queue_nums=1)
    async with Producer("pg-hooks", cluster.namesrv_addr) as producer:
        for body in bodies:
            await producer.send(Message(topic, body))
    return MessageQueue(topic, "broker-a", 0)


async def test_a_push_consumers_hooks_see_each_listener_call_before_and_after(
    embedded_cluster: EmbeddedCluster, autojump_clock: trio.testing.MockClock
) -> None:
    """Before: the group, queue and messages, success false; after: the status's name, success for CONSUME_SUCCESS
    only, and ``ConsumeContextType`` (Java's ConsumeReturnType: SUCCESS, FAILED, EXCEPTION). A hook that raises does
    not stop the others nor the consumption."""
    use_virtual_store_clock(embedded_cluster)
    mq = await _create_and_send(embedded_cluster, "HookPush", [b"ok", b"later", b"boom"])

    async def listener(msgs: list[MessageExt]) -> ConsumeConcurrentlyStatus:  # on the loop: a thread's run is
        if msgs[0].body == b"boom":  # not virtual time, the clock could jump past the test's 5 s while one runs
            raise ValueError("boom")
        if msgs[0].body == b"later":
            return ConsumeConcurrentlyStatus.RECONSUME_LATER
        return ConsumeConcurrentlyStatus.CONSUME_SUCCESS

    failing, hook = RecordingHook(fail=True), RecordingHook()
    consumer = first_offset_consumer(embedded_cluster.namesrv_addr, "cg-hooks", "HookPush")
    consumer.register_message_listener(listener)
    consumer.register_consume_message_hook(failing)
    consumer.register_consume_message_hook(hook)
    async with consumer:
        await trio.sleep(5)  # before the retries (10 s) come back
    assert failing.seen == hook.seen
    first = {}  # (when, body) -> the first call's record (a retry may come again)
    for record in hook.seen:
        first.setdefault((record[0], record[3][0]), record)
    for body in (b"ok", b"later", b"boom"):
        _, group, queue, bodies, success, _, _ = first[("before", body)]
        assert (group, queue, bodies, success) == ("cg-hooks", mq, [body], False)
    outcomes = {
        body: (r[4], r[5], r[6].get("ConsumeContextType")) for (when, body), r in first.items() if when == "after"
    }
    assert outcomes == {
        b"ok": (True, "CONSUME_SUCCESS", "SUCCESS"),
        b"later": (False, "RECONSUME_LATER", "FAILED"),
        b"boom": (False, "RECONSUME_LATER", "EXCEPTION"),
    }, outcomes


async def test_an_orderly_push_consumers_hooks_see_the_orderly_status(
    embedded_cluster: EmbeddedCluster, autojump_clock: trio.testing.MockClock
) -> None:
    """ConsumeMessageOrderlyService: after a call, the status's name and success for SUCCESS (or COMMIT)."""
    use_virtual_store_clock(embedded_cluster)
    mq = await _create_and_send(embedded_cluster, "HookOrderly", [b"first"])
    hook = RecordingHook()
    consumer = first_offset_consumer(embedded_cluster.namesrv_addr, "cg-hooks-orderly", "HookOrderly")

    async def orderly(msgs: list[MessageExt]) -> ConsumeOrderlyStatus:  # on the loop, as the test above
        return ConsumeOrderlyStatus.SUCCESS

    consumer.register_message_listener_orderly(orderly)
    consumer.register_consume_message_hook(hook)
    async with consumer:
        await trio.sleep(5)
    assert [(s[0], s[2], s[3], s[4], s[5]) for s in hook.seen] == [
        ("before", mq, [b"first"], False, None),
        ("after", mq, [b"first"], True, "SUCCESS"),
    ], hook.seen


async def test_an_orderly_rollback_is_no_success_but_its_return_type_is_success(
    embedded_cluster: EmbeddedCluster, autojump_clock: trio.testing.MockClock
) -> None:
    """4.9.8's ConsumeMessageOrderlyService.ConsumeRequest.run starts returnType at SUCCESS and sets FAILED only for
    SUSPEND_CURRENT_QUEUE_A_MOMENT: a ROLLBACK (here with autoCommit, so the batch is committed) is success false
    with ConsumeContextType SUCCESS. Ours said FAILED."""
    use_virtual_store_clock(embedded_cluster)
    await _create_and_send(embedded_cluster, "HookRollback", [b"first"])
    hook = RecordingHook()
    consumer = first_offset_consumer(embedded_cluster.namesrv_addr, "cg-hooks-rollback", "HookRollback")

    async def orderly(msgs: list[MessageExt]) -> ConsumeOrderlyStatus:  # on the loop, as the tests above
        return ConsumeOrderlyStatus.ROLLBACK

    consumer.register_message_listener_orderly(orderly)
    consumer.register_consume_message_hook(hook)
    async with consumer:
        await trio.sleep(5)
    assert [(s[0], s[4], s[5], s[6].get("ConsumeContextType")) for s in hook.seen] == [
        ("before", False, None, None),
        ("after", False, "ROLLBACK", "SUCCESS"),
    ], hook.seen


@pytest.mark.parametrize(
    ("orderly", "failed_as", "ok_as"),
    [
        (False, "RECONSUME_LATER", "CONSUME_SUCCESS"),
        (True, "SUSPEND_CURRENT_QUEUE_A_MOMENT", "SUCCESS"),
    ],
)
async def test_a_listener_returning_none_fails_its_call_as_java_s_null_status(
    embedded_cluster: EmbeddedCluster,
    autojump_clock: trio.testing.MockClock,
    orderly: bool,
    failed_as: str,
    ok_as: str,
) -> None:
    """4.9.8's ConsumeMessageConcurrentlyService / ConsumeMessageOrderlyService ConsumeRequest.run: a listener that
    returns null (a Python listener that forgets ``return``) is ConsumeReturnType RETURNNULL, then RECONSUME_LATER
    (concurrent: sent back, delivered again) or SUSPEND_CURRENT_QUEUE_A_MOMENT (orderly: consumed again after the
    suspension), success false. Ours counted None as a success and committed the messages."""
    use_virtual_store_clock(embedded_cluster)
    await _create_and_send(embedded_cluster, "HookNone", [b"forgot"])
    hook, calls = RecordingHook(), []
    consumer = first_offset_consumer(embedded_cluster.namesrv_addr, "cg-hooks-none", "HookNone")

    async def forgets_once(msgs: list[MessageExt]) -> ConsumeConcurrentlyStatus | None:  # on the loop, as above
        calls.append(msgs[0].body)
        return None if len(calls) == 1 else ConsumeConcurrentlyStatus.CONSUME_SUCCESS

    if orderly:
        consumer.register_message_listener_orderly(forgets_once)
    else:
        consumer.register_message_listener(forgets_once)
    consumer.register_consume_message_hook(hook)
    async with consumer:
        await trio.sleep(20)  # past the send-back's delay level 3 (10 s) and the 1 s suspension
    assert calls == [b"forgot", b"forgot"]
    assert [(s[4], s[5], s[6].get("ConsumeContextType")) for s in hook.seen if s[0] == "after"] == [
        (False, failed_as, "RETURNNULL"),
        (True, ok_as, "SUCCESS"),
    ], hook.seen


async def test_a_lite_pull_consumers_hooks_see_each_pulled_batch_as_consumed(
    embedded_cluster: EmbeddedCluster, autojump_clock: trio.testing.MockClock
) -> None:
    """DefaultLitePullConsumerImpl.pullSyncImpl runs the hooks on every pull result: before, then at once after with
    CONSUME_SUCCESS and success true."""
    use_virtual_store_clock(embedded_cluster)
    mq = await _create_and_send(embedded_cluster, "HookLite", [b"a", b"b"])
    hook = RecordingHook()
    consumer = LitePullConsumer(
        "cg-hooks-lite", embedded_cluster.namesrv_addr, consume_from_where=ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET
    )
    consumer.register_consume_message_hook(hook)
    async with consumer:
        await consumer.subscribe("HookLite")
        polled: list[MessageExt] = []
        with trio.fail_after(30):
            while len(polled) < 2:
                polled.extend(await consumer.poll(1.0))
    assert [(s[0], s[1], s[2], s[3], s[4], s[5]) for s in hook.seen] == [
        ("before", "cg-hooks-lite", mq, [b"a", b"b"], False, None),
        ("after", "cg-hooks-lite", mq, [b"a", b"b"], True, "CONSUME_SUCCESS"),
    ], hook.seen
