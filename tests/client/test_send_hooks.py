"""Send hooks (RocketMQ 4.9.8's client/src/main/java/org/apache/rocketmq/client/hook/SendMessageHook.java and
SendMessageContext.java): ``register_send_message_hook`` on the producer, each send attempt seen before and after, as
DefaultMQProducerImpl.sendKernelImpl and MQClientAPIImpl.sendMessageAsync run them. Virtual time, embedded cluster."""

from __future__ import annotations

import trio
import trio.testing

from broker.embedded import EmbeddedCluster
from client.admin import Admin
from client.hooks import SendMessageContext
from client.message import Message, SendResult
from client.producer import Producer
from remoting.codec.bodies import MessageQueue

TOPIC = "HookSend"


class RecordingHook:
    def __init__(self, fail: bool = False) -> None:
        self.fail = fail
        self.seen: list[tuple[str, str, str, bytes, MessageQueue, str, SendResult | None]] = []

    def hook_name(self) -> str:
        return "recording"

    def _record(self, when: str, context: SendMessageContext) -> None:
        assert isinstance(context.message, Message)
        body = context.message.body
        self.seen.append(
            (when, context.producer_group, context.communication_mode, body, context.mq, context.broker_addr,
             context.send_result)
        )  # fmt: skip
        if self.fail:
            raise RuntimeError("a hook that fails is logged, never in the way")

    def send_message_before(self, context: SendMessageContext) -> None:
        self._record("before", context)

    def send_message_after(self, context: SendMessageContext) -> None:
        self._record("after", context)


async def test_a_producers_hooks_see_each_send_before_and_after(
    embedded_cluster: EmbeddedCluster, autojump_clock: trio.testing.MockClock
) -> None:
    """Before: the group, mode (SYNC, ASYNC, ONEWAY), message, queue and broker address; after: the result too (none
    for a oneway send). A hook that raises does not stop the others nor the send."""
    async with Admin(embedded_cluster.namesrv_addr) as admin:
        await admin.create_topic(TOPIC, read_queue_nums=1, write_queue_nums=1)
    mq = MessageQueue(TOPIC, "broker-a", 0)
    addr = embedded_cluster.broker_addr
    failing, hook = RecordingHook(fail=True), RecordingHook()
    async with Producer("pg-send-hooks", embedded_cluster.namesrv_addr) as producer:
        producer.register_send_message_hook(failing)
        producer.register_send_message_hook(hook)
        synced = await producer.send(Message(TOPIC, b"sync"))
        done = trio.Event()
        outcomes: list[object] = []

        def callback(outcome: object) -> None:
            outcomes.append(outcome)
            done.set()

        producer.send_async(Message(TOPIC, b"async"), callback)
        await done.wait()
        await producer.send_oneway(Message(TOPIC, b"oneway"))
    [asynced] = outcomes
    assert isinstance(asynced, SendResult), asynced
    assert failing.seen == hook.seen
    group = "pg-send-hooks"
    assert hook.seen == [
        ("before", group, "SYNC", b"sync", mq, addr, None),
        ("after", group, "SYNC", b"sync", mq, addr, synced),
        ("before", group, "ASYNC", b"async", mq, addr, None),
        ("after", group, "ASYNC", b"async", mq, addr, asynced),
        ("before", group, "ONEWAY", b"oneway", mq, addr, None),
        ("after", group, "ONEWAY", b"oneway", mq, addr, None),
    ], hook.seen
